//! `search-mixed`: indexing while searching, as esrally runs a bulk task
//! and query tasks in parallel. The run's first session group sends bulks
//! (the `threads × clients` sessions, at `--rate` or closed loop), the
//! second sends queries (its own sessions and rate); the engine keeps the
//! two groups' schedules and latencies apart, and the operation kinds
//! (`bulk`, and the query's) keep their service times apart.
//!
//! `prepare` loads documents as `search-query`'s does, so queries hit
//! from the start; the bulk sessions then add documents until the run
//! ends, and the check after the run counts the bulks' documents in the
//! index against what they had acknowledged, as `search-bulk`'s.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::family::SearchFamily;
use loadcell_core::search::SearchConn;
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use loadcell_engine::{Ctx, OpSpec, Script, SessionInfo};
use loadcell_record::result::Verification;
use serde_json::{json, Value};

use super::{
    cleanup, load, BulkScript, BulkSession, QueryScript, QuerySession, SearchQueryWorkload,
};
use crate::prepare::{CheckError, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading, Workload};

/// The name of the bulk sessions' group, and of the queries'.
pub const BULK_GROUP: &str = "bulk";
pub const QUERY_GROUP: &str = "query";

/// `search-mixed`: the queries of a `search-query` run and the bulks of a
/// `search-bulk` one, on one index.
#[derive(Debug, Clone)]
pub struct SearchMixedWorkload {
    pub queries: SearchQueryWorkload,
    /// Sessions sending queries (`--query-clients`), beside the bulks'.
    pub query_sessions: usize,
    /// Queries per second, open loop (`--query-rate`); `None`: closed loop.
    pub query_rate: Option<f64>,
}

impl Workload for SearchMixedWorkload {
    fn name(&self) -> &'static str {
        "search-mixed"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::SEARCH]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        let mut map = self.queries.options();
        map.insert("query_clients".to_string(), json!(self.query_sessions));
        map.insert("query_rate".to_string(), json!(self.query_rate));
        map
    }
}

/// The bulk script for the first group's sessions, the query script for
/// the second's.
pub struct MixedScript {
    bulk: BulkScript,
    query: QueryScript,
    ops: [OpSpec; 2],
}

pub enum MixedSession {
    Bulk(BulkSession),
    Query(QuerySession),
}

impl<C: SearchConn> Script<C> for MixedScript {
    type Session = MixedSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, conn: &mut C, session: SessionInfo) -> Result<MixedSession, DriverError> {
        Ok(match session.group {
            0 => MixedSession::Bulk(Script::<C>::open(&self.bulk, conn, session).await?),
            _ => MixedSession::Query(Script::<C>::open(&self.query, conn, session).await?),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        session: &mut MixedSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        match session {
            MixedSession::Bulk(s) => self.bulk.event(conn, s, ctx).await,
            MixedSession::Query(s) => self.query.event(conn, s, ctx).await,
        }
    }
}

impl<C: SearchConn> Lifecycle<C, SearchFamily> for SearchMixedWorkload {
    type Script = MixedScript;

    fn script(&self, seed: u64, _driver: &DriverInfo) -> MixedScript {
        let bulk = BulkScript::new(&self.queries.opts, None, seed);
        // The queries' operation kind follows the bulk's.
        let query = QueryScript::new(&self.queries, bulk.ops.len());
        MixedScript {
            ops: [bulk.ops[0], query.ops[0]],
            bulk,
            query,
        }
    }

    /// The index holds documents to query.
    async fn check(&self, script: &MixedScript, conn: &mut C) -> Result<(), CheckError> {
        Lifecycle::<C, SearchFamily>::check(&self.queries, &script.query, conn).await
    }

    async fn verify<D>(
        &self,
        script: &MixedScript,
        driver: &D,
        connect_timeout: Duration,
    ) -> Result<Option<Verification>, DriverError>
    where
        D: Driver<Conn = C>,
    {
        script.bulk.verify(driver, connect_timeout).await.map(Some)
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
        load(driver, &self.queries.opts, loading, observer).await
    }

    async fn cleanup<D>(
        &self,
        driver: &D,
        how: &Cleanup,
        observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        let index = &self.queries.opts.index;
        cleanup(&index.name, driver, how, observer).await
    }
}
