//! The SQLite store: one file, `RESULTS_DIR/history.sqlite` by default,
//! in WAL mode so that readers never wait, with a busy timeout so that
//! concurrent writers (parallel CI jobs on one machine, a suite's shards)
//! take turns instead of failing. Every write is one `BEGIN IMMEDIATE`
//! transaction: the write lock is taken up front, never upgraded from a
//! read lock (which SQLite could only refuse). `synchronous = NORMAL`:
//! a commit survives loadcell crashing; the last ones may be lost if the
//! machine loses power, and importing the result files again restores them.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::entry::{Entry, Flags, Histogram, Metrics, ThroughputUnit};
use crate::key::SeriesKey;
use crate::schema;
use crate::store::{epoch_us, Recorded, SeriesFilter, SeriesInfo, Store};
use crate::Error;

/// How long a writer waits for another's transaction before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

pub struct SqliteStore {
    conn: Connection,
}

impl SqliteStore {
    /// Opens (creating it if need be) the store in the file `path`, and
    /// brings its schema to the latest version.
    pub fn open(path: &Path) -> Result<SqliteStore, Error> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Switching a new file to WAL can fail busy at once, without
        // waiting, while another connection creates or switches it.
        let mode: String =
            retry_busy(|| conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::Usage(format!(
                "{}: SQLite would not use WAL mode (journal mode {mode}); is it on a network file system?",
                path.display()
            )));
        }
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")?;
        let mut store = SqliteStore { conn };
        retry(|| store.migrate())?;
        Ok(store)
    }

    /// Applies the migrations the file lacks, all in one transaction.
    fn migrate(&mut self) -> Result<(), Error> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(schema::VERSION_TABLE_SQLITE)?;
        let current: u32 = tx.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_version",
            [],
            |r| r.get(0),
        )?;
        for m in schema::pending(current)? {
            tx.execute_batch(m.sqlite)?;
            tx.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)",
                params![m.version, schema::now()],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}

impl SqliteStore {
    fn insert_once(&mut self, entries: &[Entry]) -> Result<Recorded, Error> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut recorded = Recorded::default();
        {
            let mut add_series = tx.prepare_cached(
                "INSERT INTO series (id, key_text, key_json, workload, target)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO NOTHING",
            )?;
            let mut stored_key = tx.prepare_cached("SELECT key_text FROM series WHERE id = ?1")?;
            let mut add_label = tx.prepare_cached(
                "INSERT INTO series_labels (series_id, name, value) VALUES (?1, ?2, ?3)",
            )?;
            let mut add_entry = tx.prepare_cached(
                "INSERT INTO entries (series_id, started_at, started_at_us, host, commit_id,
                     file, partial, verification_failed, rate_not_reached, client_saturated,
                     throughput, throughput_unit, p50_ms, p90_ms, p99_ms, p999_ms, error_rate,
                     client_cpu_us_per_op, histogram_encoding, histogram_unit, histogram)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
                     ?16, ?17, ?18, ?19, ?20, ?21)
                 ON CONFLICT (series_id, started_at) DO NOTHING
                 RETURNING id",
            )?;
            let mut add_counter = tx.prepare_cached(
                "INSERT INTO server_counters (entry_id, name, value) VALUES (?1, ?2, ?3)",
            )?;
            for e in entries {
                let id = e.series.id();
                let text = e.series.text();
                let new_series = add_series.execute(params![
                    id,
                    text,
                    serde_json::to_string(&e.series).expect("a key serializes"),
                    e.series.workload,
                    e.series.target,
                ])? == 1;
                if new_series {
                    for (name, value) in &e.series.labels {
                        add_label.execute(params![id, name, value])?;
                    }
                } else {
                    let stored: String = stored_key.query_row([&id], |r| r.get(0))?;
                    if stored != text {
                        return Err(Error::Collision { id, stored, text });
                    }
                }
                let m = &e.metrics;
                let entry_id: Option<i64> = add_entry
                    .query_row(
                        params![
                            id,
                            e.started_at,
                            epoch_us(&e.started_at)?,
                            e.host,
                            e.commit,
                            e.file,
                            e.flags.partial,
                            e.flags.verification_failed,
                            e.flags.rate_not_reached,
                            e.flags.client_saturated,
                            m.throughput,
                            m.throughput_unit.as_str(),
                            m.p50_ms,
                            m.p90_ms,
                            m.p99_ms,
                            m.p999_ms,
                            m.error_rate,
                            m.client_cpu_us_per_op,
                            e.histogram.encoding,
                            e.histogram.unit,
                            e.histogram.response,
                        ],
                        |r| r.get(0),
                    )
                    .optional()?;
                match entry_id {
                    Some(entry_id) => {
                        for (name, value) in &m.server {
                            add_counter.execute(params![entry_id, name, value])?;
                        }
                        recorded.added += 1;
                    }
                    None => recorded.already += 1,
                }
            }
        }
        tx.commit()?;
        Ok(recorded)
    }
}

impl Store for SqliteStore {
    fn insert(&mut self, entries: &[Entry]) -> Result<Recorded, Error> {
        // The transaction is all or nothing: it can be tried again whole.
        retry(|| self.insert_once(entries))
    }

    fn series(&mut self, filter: &SeriesFilter) -> Result<Vec<SeriesInfo>, Error> {
        let mut sql = String::from(
            "SELECT s.id, s.key_json, s.key_text,
                (SELECT COUNT(*) FROM entries e WHERE e.series_id = s.id),
                (SELECT started_at FROM entries e WHERE e.series_id = s.id
                    ORDER BY started_at_us, id LIMIT 1),
                (SELECT started_at FROM entries e WHERE e.series_id = s.id
                    ORDER BY started_at_us DESC, id DESC LIMIT 1)
             FROM series s
             WHERE (?1 IS NULL OR s.workload = ?1) AND (?2 IS NULL OR instr(s.target, ?2) > 0)",
        );
        let mut args: Vec<Option<String>> =
            vec![filter.workload.clone(), filter.target_contains.clone()];
        for (name, value) in &filter.labels {
            let n = args.len();
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM series_labels l WHERE l.series_id = s.id
                     AND l.name = ?{} AND l.value = ?{})",
                n + 1,
                n + 2
            ));
            args.push(Some(name.clone()));
            args.push(Some(value.clone()));
        }
        sql.push_str(" ORDER BY s.workload, s.key_text");
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, key_json, text, runs, first, last) = row?;
            out.push(SeriesInfo {
                key: parse_key(&id, &key_json)?,
                id,
                text,
                runs: runs.max(0) as u64,
                first_started_at: first.unwrap_or_default(),
                last_started_at: last.unwrap_or_default(),
            });
        }
        Ok(out)
    }

    fn entries(&mut self, series_id: &str) -> Result<Vec<Entry>, Error> {
        let key_json: Option<String> = self
            .conn
            .query_row(
                "SELECT key_json FROM series WHERE id = ?1",
                [series_id],
                |r| r.get(0),
            )
            .optional()?;
        let Some(key_json) = key_json else {
            return Ok(Vec::new());
        };
        let key = parse_key(series_id, &key_json)?;
        let mut counters: HashMap<i64, BTreeMap<String, f64>> = HashMap::new();
        {
            let mut stmt = self.conn.prepare_cached(
                "SELECT c.entry_id, c.name, c.value FROM server_counters c
                 JOIN entries e ON e.id = c.entry_id WHERE e.series_id = ?1",
            )?;
            let rows = stmt.query_map([series_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get(2)?))
            })?;
            for row in rows {
                let (entry, name, value) = row?;
                counters.entry(entry).or_default().insert(name, value);
            }
        }
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, started_at, host, commit_id, file, partial, verification_failed,
                 rate_not_reached, client_saturated, throughput, throughput_unit, p50_ms,
                 p90_ms, p99_ms, p999_ms, error_rate, client_cpu_us_per_op,
                 histogram_encoding, histogram_unit, histogram
             FROM entries WHERE series_id = ?1 ORDER BY started_at_us, id",
        )?;
        let rows = stmt.query_map([series_id], |r| {
            let unit: String = r.get(10)?;
            Ok((
                r.get::<_, i64>(0)?,
                unit,
                Entry {
                    series: key.clone(),
                    started_at: r.get(1)?,
                    host: r.get(2)?,
                    commit: r.get(3)?,
                    file: r.get(4)?,
                    flags: Flags {
                        partial: r.get(5)?,
                        verification_failed: r.get(6)?,
                        rate_not_reached: r.get(7)?,
                        client_saturated: r.get(8)?,
                    },
                    metrics: Metrics {
                        throughput: r.get(9)?,
                        throughput_unit: ThroughputUnit::OpsPerSec,
                        p50_ms: r.get(11)?,
                        p90_ms: r.get(12)?,
                        p99_ms: r.get(13)?,
                        p999_ms: r.get(14)?,
                        error_rate: r.get(15)?,
                        client_cpu_us_per_op: r.get(16)?,
                        server: BTreeMap::new(),
                    },
                    histogram: Histogram {
                        encoding: r.get(17)?,
                        unit: r.get(18)?,
                        response: r.get(19)?,
                    },
                },
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, unit, mut entry) = row?;
            entry.metrics.throughput_unit = ThroughputUnit::parse(&unit)
                .ok_or_else(|| Error::Corrupt(format!("entry {id}: throughput unit '{unit}'")))?;
            entry.metrics.server = counters.remove(&id).unwrap_or_default();
            out.push(entry);
        }
        Ok(out)
    }

    fn schema_version(&mut self) -> Result<u32, Error> {
        Ok(self.conn.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_version",
            [],
            |r| r.get(0),
        )?)
    }
}

pub(crate) fn parse_key(id: &str, json: &str) -> Result<SeriesKey, Error> {
    serde_json::from_str(json).map_err(|e| Error::Corrupt(format!("series {id}: key: {e}")))
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// `f` again after a pause while SQLite says busy without having waited
/// (see [`BUSY_TIMEOUT`] for how long it waits itself), up to that long.
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let give_up = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        match f() {
            Err(e) if is_busy(&e) && std::time::Instant::now() < give_up => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            done => return done,
        }
    }
}

/// [`retry_busy`] for a whole transaction.
fn retry<T>(mut f: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    let mut last = None;
    let done = retry_busy(|| match f() {
        Err(Error::Sqlite(e)) => Err(e),
        other => {
            last = Some(other);
            Ok(())
        }
    });
    match done {
        Ok(()) => last.expect("set on success"),
        Err(e) => Err(Error::Sqlite(e)),
    }
}
