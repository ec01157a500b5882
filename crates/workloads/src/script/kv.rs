//! A workload file's key-value ops: one command per event, its words
//! expanded into a session's reused buffers; GET, SET and DELETE through
//! the commands every key-value driver has, anything else as its words.
//!
//! `prepare` SETs each load's keys, after checking that none is there
//! with another value, and records in a marker key the load, its row
//! count and the seed its values were drawn with; `cleanup` draws the same
//! keys and values again and deletes each key whose value is still the
//! one prepare set, then the marker: a key written since by anyone else
//! is left alone.

use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::family::KvFamily;
use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::{Driver, DriverError, DriverInfo};
use loadcell_engine::{Ctx, OpSpec, Script, SessionInfo};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::file::{Command, CommandKind, Load, LoadBody, OpBody, ScriptFile, MAX_WORDS};
use super::{think, Ops, ScriptWorkload, Values};
use crate::kv::{flush_all, LOAD_BATCH};
use crate::prepare::{read_marker, CheckError, NotPrepared, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading};

pub struct KvScript {
    ops: Ops,
}

/// A session's values and the buffers its commands' words are written
/// into, reused from one command to the next.
pub struct KvSession {
    values: Values,
    words: Vec<Vec<u8>>,
}

/// Queues `command` with its words filled from `values` into `words`.
#[inline]
fn queue<C: KvConn>(
    conn: &mut C,
    command: &Command,
    values: &Values,
    words: &mut [Vec<u8>],
) -> Result<(), DriverError> {
    for (template, buf) in command.words.iter().zip(words.iter_mut()) {
        template.expand(&values.texts, buf);
    }
    match command.kind {
        CommandKind::Get => conn.queue_get(&words[1]),
        CommandKind::Set => conn.queue_set(&words[1], &words[2]),
        CommandKind::Delete => conn.queue_delete(&words[1]),
        CommandKind::Other => {
            let mut args: [&[u8]; MAX_WORDS] = [&[]; MAX_WORDS];
            for (slot, word) in args.iter_mut().zip(words.iter()) {
                *slot = word;
            }
            conn.queue_command(&args[..command.words.len()])?;
        }
    }
    Ok(())
}

impl<C: KvConn> Script<C> for KvScript {
    type Session = KvSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops.specs
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, session: SessionInfo) -> Result<KvSession, DriverError> {
        Ok(KvSession {
            values: Values::new(&self.ops.file, &session),
            words: (0..MAX_WORDS).map(|_| Vec::with_capacity(64)).collect(),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut KvSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let i = self.ops.pick(&mut s.values.rng);
        let op = &self.ops.file.ops[i];
        let OpBody::Kv(command) = &op.body else {
            unreachable!("a key-value file's ops are commands")
        };
        s.values.draw(&op.params);
        queue(conn, command, &s.values, &mut s.words)?;
        let hit = ctx
            .op(i, async {
                let mut outcome = Ok(None);
                conn.flush(&mut |_, reply| {
                    outcome = match reply {
                        Ok(KvReply::Hit(_)) => Ok(Some(true)),
                        Ok(KvReply::Miss) => Ok(Some(false)),
                        Ok(_) => Ok(None),
                        Err(e) => Err(e),
                    }
                })
                .await?;
                outcome
            })
            .await?;
        if let Some(hit) = hit {
            ctx.count_read(hit);
        }
        think(op.think).await;
        Ok(())
    }
}

/// What a load's marker key records.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Recorded {
    command: String,
    rows: u64,
    seed: u64,
    complete: bool,
}

/// The key recording what a load SET: named after its command's key.
fn marker_key(command: &Command) -> String {
    format!("loadcell:script:{}", command.words[1].source())
}

async fn write_marker<C: KvConn>(
    conn: &mut C,
    key: &str,
    recorded: &Recorded,
) -> Result<(), DriverError> {
    let value = serde_json::to_vec(recorded).expect("serializable");
    conn.queue_set(key.as_bytes(), &value);
    flush_all(conn).await
}

/// A load's keys and values, drawn again from the recorded seed.
struct Rows<'a> {
    load: &'a Load,
    command: &'a Command,
    values: Values,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl<'a> Rows<'a> {
    fn new(file: &ScriptFile, load: &'a Load, seed: u64) -> Rows<'a> {
        let LoadBody::Kv(command) = &load.body else {
            unreachable!("a key-value file's loads are commands")
        };
        Rows {
            load,
            command,
            values: Values::for_session(file, seed, 0, 1),
            key: Vec::new(),
            value: Vec::new(),
        }
    }

    /// The next row's key and value.
    fn next(&mut self) -> (&[u8], &[u8]) {
        self.values.draw(&self.load.params);
        self.command.words[1].expand(&self.values.texts, &mut self.key);
        self.command.words[2].expand(&self.values.texts, &mut self.value);
        (&self.key, &self.value)
    }
}

/// For each of `batch` rows' keys (in order): whether it holds the row's
/// value (`Some(true)`), another one (`Some(false)`), or nothing.
async fn compare<C: KvConn>(
    conn: &mut C,
    rows: &mut Rows<'_>,
    batch: u64,
) -> Result<Vec<(Vec<u8>, Option<bool>)>, DriverError> {
    let mut expected = Vec::with_capacity(batch as usize);
    for _ in 0..batch {
        let (key, value) = rows.next();
        conn.queue_get(key);
        expected.push((key.to_vec(), value.to_vec(), None));
    }
    let mut failure = None;
    conn.flush(&mut |at, reply| match reply {
        Ok(KvReply::Hit(bytes)) => expected[at.index].2 = Some(bytes == expected[at.index].1),
        Ok(_) => {}
        Err(e) => {
            failure.get_or_insert(e);
        }
    })
    .await?;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(expected.into_iter().map(|(k, _, same)| (k, same)).collect())
}

impl<C: KvConn> Lifecycle<C, KvFamily> for ScriptWorkload {
    type Script = KvScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> KvScript {
        KvScript {
            ops: Ops::new(&self.file),
        }
    }

    /// Every load of the file was completed by `prepare`.
    async fn check(&self, _script: &KvScript, conn: &mut C) -> Result<(), CheckError> {
        for load in &self.file.prepare.loads {
            let LoadBody::Kv(command) = &load.body else {
                continue;
            };
            let key = marker_key(command);
            if !matches!(read_marker::<Recorded, _>(conn, &key).await?, Some(Ok(r)) if r.complete) {
                return Err(CheckError::NotPrepared(NotPrepared(format!(
                    "the keys of load '{}' are not loaded (no complete marker '{key}')",
                    command.source
                ))));
            }
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
        if self.file.prepare.loads.is_empty() {
            observer.message("Nothing to prepare: the file's [prepare] loads nothing");
        }
        for load in &self.file.prepare.loads {
            prepare_load(&mut conn, &self.file, load, &*observer).await?;
        }
        Ok(())
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
        let (mut conn, _) = loadcell_engine::connect_once(driver, how.connect_timeout).await?;
        for load in &self.file.prepare.loads {
            cleanup_load(&mut conn, &self.file, load, observer).await?;
        }
        Ok(())
    }
}

/// SETs a load's keys, none of which may hold another value: checked for
/// all of them before the first is written.
async fn prepare_load<C: KvConn>(
    conn: &mut C,
    file: &ScriptFile,
    load: &Load,
    observer: &dyn PrepareObserver,
) -> Result<(), DriverError> {
    let LoadBody::Kv(command) = &load.body else {
        unreachable!("a key-value file's loads are commands")
    };
    let key = marker_key(command);
    let seed = match read_marker::<Recorded, _>(conn, &key).await? {
        Some(Ok(r)) if r.command == command.source && r.rows == load.rows => {
            if r.complete {
                observer.message(&format!(
                    "Load '{}' is already done: nothing to do",
                    command.source
                ));
                return Ok(());
            }
            r.seed
        }
        Some(Ok(r)) => {
            return Err(DriverError::fatal(format!(
                "key '{key}' records another load ('{}', {} rows): run cleanup with the file that loaded it first",
                r.command, r.rows
            )))
        }
        Some(Err(_)) => {
            return Err(DriverError::fatal(format!(
                "key '{key}' exists and was not written by loadcell: nothing loaded"
            )))
        }
        None => rand::rng().random(),
    };
    let mut rows = Rows::new(file, load, seed);
    let mut left = load.rows;
    while left > 0 {
        let batch = LOAD_BATCH.min(left);
        if let Some((k, _)) = compare(conn, &mut rows, batch)
            .await?
            .into_iter()
            .find(|(_, same)| *same == Some(false))
        {
            return Err(DriverError::fatal(format!(
                "key '{}' already holds a value loadcell did not set: nothing loaded",
                String::from_utf8_lossy(&k)
            )));
        }
        left -= batch;
    }
    let mut recorded = Recorded {
        command: command.source.clone(),
        rows: load.rows,
        seed,
        complete: false,
    };
    // Recorded first, so an interrupted prepare can still be cleaned up.
    write_marker(conn, &key, &recorded).await?;
    observer.message(&format!("Loading {} rows: {}", load.rows, command.source));
    observer.add_total(load.rows);
    let mut rows = Rows::new(file, load, seed);
    let mut left = load.rows;
    while left > 0 {
        let batch = LOAD_BATCH.min(left);
        for _ in 0..batch {
            let (k, v) = rows.next();
            conn.queue_set(k, v);
        }
        flush_all(conn).await?;
        observer.loaded(batch);
        left -= batch;
    }
    recorded.complete = true;
    write_marker(conn, &key, &recorded).await
}

/// Deletes the keys a load SET that still hold the value it set, then
/// its marker.
async fn cleanup_load<C: KvConn>(
    conn: &mut C,
    file: &ScriptFile,
    load: &Load,
    observer: &dyn PrepareObserver,
) -> Result<(), CleanupError> {
    let LoadBody::Kv(command) = &load.body else {
        unreachable!("a key-value file's loads are commands")
    };
    let key = marker_key(command);
    let recorded = match read_marker::<Recorded, _>(conn, &key).await? {
        None => {
            observer.message(&format!(
                "Nothing to clean up for '{}': no marker '{key}'",
                command.source
            ));
            return Ok(());
        }
        Some(Err(_)) => {
            return Err(CleanupError::Refused(format!(
                "key '{key}' was not written by loadcell: nothing deleted"
            )))
        }
        Some(Ok(r)) => r,
    };
    if recorded.command != command.source || recorded.rows != load.rows {
        return Err(CleanupError::Refused(format!(
            "key '{key}' records another load ('{}', {} rows) than the file's: nothing deleted",
            recorded.command, recorded.rows
        )));
    }
    let mut rows = Rows::new(file, load, recorded.seed);
    let (mut deleted, mut kept) = (0u64, 0u64);
    let mut left = load.rows;
    while left > 0 {
        let batch = LOAD_BATCH.min(left);
        for (k, same) in compare(conn, &mut rows, batch).await? {
            match same {
                Some(true) => {
                    conn.queue_delete(&k);
                    deleted += 1;
                }
                Some(false) => kept += 1,
                None => {}
            }
        }
        flush_all(conn).await?;
        left -= batch;
    }
    conn.queue_delete(key.as_bytes());
    flush_all(conn).await?;
    observer.message(&format!(
        "Deleted {deleted} keys of '{}'{}",
        command.source,
        if kept > 0 {
            format!("; left {kept} written since by someone else")
        } else {
            String::new()
        }
    ));
    Ok(())
}
