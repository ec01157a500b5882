//! A workload file's search ops: each a `_search` of its index with its
//! JSON body, `${name}`s written in from the session's values, sent as
//! `search-query` sends its queries (hits as the op's items, a query that
//! hits nothing counted as `no_hits`); `prepare` creates the file's
//! indexes with loadcell's tag in their mapping's `_meta` and loads their
//! documents, `cleanup` deletes those it created.

use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::family::SearchFamily;
use loadcell_core::search::SearchConn;
use loadcell_core::{Driver, DriverError, DriverInfo};
use loadcell_engine::{Ctx, OpSpec, Script, SessionInfo};

use super::file::{Index, LoadBody, OpBody, ScriptFile};
use super::{think, Ops, ScriptWorkload, Values};
use crate::prepare::{CheckError, PrepareObserver};
use crate::search::source::RunField;
use crate::search::{check_index, cleanup, create_tagged_index, tag_mapping};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading};

/// Documents a load sends per `_bulk`.
const LOAD_BULK: u64 = 1000;

pub struct SearchScript {
    ops: Ops,
}

pub struct SearchSession {
    values: Values,
    body: Vec<u8>,
}

impl<C: SearchConn> Script<C> for SearchScript {
    type Session = SearchSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops.specs
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(
        &self,
        _conn: &mut C,
        session: SessionInfo,
    ) -> Result<SearchSession, DriverError> {
        Ok(SearchSession {
            values: Values::new(&self.ops.file, &session),
            body: Vec::with_capacity(512),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut SearchSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let i = self.ops.pick(&mut s.values.rng);
        let op = &self.ops.file.ops[i];
        let OpBody::Search { index, body } = &op.body else {
            unreachable!("a search file's ops are searches")
        };
        s.values.draw(&op.params);
        body.expand(&s.values.texts, &mut s.body);
        let outcome = ctx.op(i, conn.search(index, &s.body)).await?;
        ctx.items(i, outcome.hits);
        if outcome.hits == 0 {
            ctx.count("no_hits", 1);
        }
        think(op.think).await;
        Ok(())
    }
}

impl<C: SearchConn> Lifecycle<C, SearchFamily> for ScriptWorkload {
    type Script = SearchScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> SearchScript {
        SearchScript {
            ops: Ops::new(&self.file),
        }
    }

    /// The indexes the file's `[prepare]` creates are there.
    async fn check(&self, _script: &SearchScript, conn: &mut C) -> Result<(), CheckError> {
        for index in &self.file.prepare.indexes {
            check_index(conn, &index.name, false).await?;
        }
        Ok(())
    }

    async fn prepare<D>(
        &self,
        driver: Arc<D>,
        _info: &DriverInfo,
        loading: Loading,
        observer: Rc<dyn PrepareObserver>,
    ) -> Result<(), DriverError>
    where
        D: Driver<Conn = C>,
    {
        let (mut conn, _) =
            loadcell_engine::connect_once(&*driver, loading.connect_timeout).await?;
        prepare(&mut conn, &self.file, &*observer).await
    }

    /// Deletes the file's indexes that loadcell's `prepare` created, and
    /// no other.
    async fn cleanup<D>(
        &self,
        driver: &D,
        how: &Cleanup,
        observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        if self.file.prepare.indexes.is_empty() {
            observer.message("Nothing to clean up: the file's [prepare] creates no indexes");
        }
        for index in &self.file.prepare.indexes {
            cleanup(&index.name, driver, how, observer).await?;
        }
        Ok(())
    }
}

/// The body that creates `index`: the file's, with loadcell's tag in its
/// mapping's `_meta`.
fn index_body(index: &Index, tag: &crate::prepare::marker::Tag) -> Vec<u8> {
    let mut body = index.body.clone();
    tag_mapping(&mut body["mappings"], tag);
    serde_json::to_vec(&body).expect("JSON serializes")
}

/// Creates the file's indexes, tagged, then loads the documents into
/// those it created; an index loadcell created before is left as it is,
/// and one it did not refused.
async fn prepare<C: SearchConn>(
    conn: &mut C,
    file: &ScriptFile,
    observer: &dyn PrepareObserver,
) -> Result<(), DriverError> {
    let indexes = &file.prepare.indexes;
    if indexes.is_empty() {
        observer.message("Nothing to prepare: the file's [prepare] creates no indexes");
        return Ok(());
    }
    let mut created = Vec::with_capacity(indexes.len());
    for index in indexes {
        if create_tagged_index(conn, &index.name, |tag| index_body(index, tag), observer).await? {
            created.push(index.name.as_str());
        }
    }
    let mut values = Values::for_session(file, 0, 0, 1);
    // Marks the documents as loadcell's, for cleanup.
    let run = RunField::fresh();
    let mut bulk = Vec::new();
    for load in &file.prepare.loads {
        let LoadBody::Document { index, document } = &load.body else {
            unreachable!("a search file's loads are documents")
        };
        if !created.contains(&index.as_str()) {
            continue;
        }
        observer.add_total(load.rows);
        let mut row = 0;
        while row < load.rows {
            let batch = LOAD_BULK.min(load.rows - row);
            bulk.clear();
            let mut line = Vec::new();
            for _ in 0..batch {
                values.draw(&load.params);
                document.expand(&values.texts, &mut line);
                bulk.extend_from_slice(b"{\"index\":{}}\n");
                let start = bulk.len();
                bulk.extend_from_slice(&line);
                run.append(&mut bulk, start);
                bulk.push(b'\n');
            }
            let mut first = None;
            let outcome = conn
                .bulk(index, &bulk, &mut |reason| {
                    first.get_or_insert_with(|| reason.to_string());
                })
                .await?;
            if let Some(reason) = first {
                return Err(DriverError::fatal(format!(
                    "{} of {batch} documents failed to index into '{index}', the first: {reason}",
                    outcome.failed
                )));
            }
            observer.loaded(batch);
            row += batch;
        }
    }
    for index in created {
        conn.refresh(index).await?;
    }
    Ok(())
}
