//! The run history: every run loadcell measured, kept in a store so that
//! later runs can be compared with earlier ones of the same setup — a
//! *series* — across commits, hosts and days.
//!
//! Each run becomes an [`Entry`]: its series key, when it started and on
//! which host, the commit it measured, the result file it came from, its
//! quality [`Flags`], its scalar [`Metrics`] and its full response-time
//! [`Histogram`]. The store is SQLite (`RESULTS_DIR/history.sqlite`, see
//! [`History::open_in`]) or PostgreSQL for a team ([`History::connect`]
//! with `postgres://…`), behind the [`Store`] trait.
//!
//! # The series key
//!
//! Two runs are in the same series when their keys are equal. The key is
//! taken from the result file's `config` and `labels` (the recorded
//! command line is not parsed: `config` holds every option the run
//! resolved, the workload's own included). It is made of:
//!
//! | field | from | notes |
//! |---|---|---|
//! | `workload` | `config.workload` | |
//! | `target` | `config.target` | scheme, hosts with ports (lowercase), database or path, query parameters sorted by name (none for `sim://`, whose parameters are the simulated server's behaviour, not its address); never the user or password; a parameter whose name marks a secret (`password`, `token`, `secret`, …) as `name=***` |
//! | `threads` | `config.threads` | |
//! | `clients` | `config.clients_per_thread` | |
//! | `workers` | `config.worker_threads` | when recorded |
//! | `time_s` | `config.time_s` | when set |
//! | `events` | `config.events` | when set |
//! | `warmup_s` | `config.warmup_s` | |
//! | `rate` | `config.rate` | open loop only |
//! | `arrival` | `config.arrival` | open loop only |
//! | `rate_tick_s` | `config.rate_tick_s` | when set |
//! | `connection_policy` | `config.connection_policy` | `persistent` when the file predates it |
//! | `shard` | `config.shard` | `INDEX/COUNT`, for one shard's result |
//! | `option.NAME` | `config.workload_options` | every workload option but those whose value is `null`; strings as they are, other values as compact JSON with object keys sorted; a name that marks a secret as `***` |
//! | `label.NAME` | `labels` | every label but `commit` |
//! | `sweep.PARAMETER` or `findmax.rate` | the sweep file | for a run recorded from a sweep or findmax file: its point's value |
//!
//! Not in the key, as they do not change the numbers: `--out`, `--json`,
//! `--seed`, `--report-interval`, `--hdr-log`, `--metrics-addr`,
//! `--server-metrics`, `--export`, `--start-at`, `--server-pid`,
//! `--connect-timeout`, `--reconnect-timeout`, `--prepare`, `--threshold`,
//! and the label `commit` (what a series follows). The host and the
//! server's version are not in it either: they are kept on each entry.
//! Because every resolved workload option is in the key, a loadcell that
//! adds a workload option starts new series.
//!
//! **Text form** ([`SeriesKey::text`]): the fields above as `name=value`,
//! separated by single spaces, in the order of the table (`option.*` and
//! `label.*` sorted by name). Numbers are written as the shortest text
//! that reads back as them (`10`, `0.5`). A value that is empty or holds
//! whitespace, `"` or a control character is written as a JSON string.
//! For example, a `kv` run on Redis (the workload's every option, as
//! resolved) labelled `env=ci`:
//!
//! ```text
//! workload=kv target=redis://127.0.0.1:6379 threads=2 clients=25 workers=2 time_s=10 warmup_s=0 connection_policy=persistent option.commands=[] option.data_size=32 option.distinct_client_seed=false option.key_maximum=100000 option.key_minimum=0 option.key_pattern=R:R option.key_prefix=memtier- option.key_zipf_exp=1.0 option.pipeline=16 option.random_data=false option.ratio=1:1 option.verify=false label.env=ci
//! ```
//!
//! **Id** ([`SeriesKey::id`]): the first 12 hexadecimal digits of the
//! SHA-256 of the text form; `0ec87888e3f3` for the key above.
//!
//! # Entries
//!
//! - `started_at`: the run's own; with the series, what makes an entry
//!   unique: recording the same file twice adds nothing.
//! - `host`: `environment.host.hostname`.
//! - `commit`: the label `commit`, else what the caller passes (the CLI:
//!   `GIT_COMMIT`; `--git-commit` labels a run with `git rev-parse HEAD`).
//! - flags: `partial` (status `partial`), `verification_failed`,
//!   `rate_not_reached` (open loop, under 95% of the events that fell due
//!   were sent: findmax's share, against the schedule), `client_saturated` (loadcell's CPU at 90% or more of
//!   the cores its worker threads can use:
//!   `loadcell_analysis::saturation::saturated`'s first rule over
//!   `loadcell_record::resources::figures`).
//! - metrics: throughput (TPS when the workload is transactional, else
//!   ops/s), p50, p90, p99, p99.9 of the response time (ms), error rate
//!   (errors / ops), loadcell's CPU µs per operation, and every server
//!   counter averaged over the measured samples.
//! - the response-time histogram exactly as the file holds it
//!   (`hdr-v2-deflate-base64`, µs).
//!
//! # Schema
//!
//! Versioned in the table `schema_version`; [`schema::MIGRATIONS`] lists
//! the steps, applied in order in one transaction when a store is opened.
//! A store newer than this build is refused rather than written.

pub mod entry;
pub mod import;
pub mod key;
pub mod postgres;
pub mod schema;
pub mod sqlite;
pub mod store;

use std::path::{Path, PathBuf};

use loadcell_record::result::RunResult;
use loadcell_record::sweep::{AnyResult, SweepResult};

pub use entry::{Entry, Flags, Histogram, Metrics, ThroughputUnit};
pub use import::{Imported, Skipped};
pub use key::SeriesKey;
pub use store::{Recorded, SeriesFilter, SeriesInfo, Store};

/// The store's file name inside a results directory.
pub const FILE_NAME: &str = "history.sqlite";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("history store (SQLite): {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("history store (PostgreSQL): {}", pg_message(.0))]
    Postgres(#[from] ::postgres::Error),
    #[error("cannot connect to the history store {0}")]
    Connect(String),
    #[error("the history store's schema is version {found}, newer than this loadcell's ({known}): upgrade loadcell to write to it")]
    NewerSchema { found: u32, known: u32 },
    #[error("series id {id} already names another key ({stored}), not {text}")]
    Collision {
        id: String,
        stored: String,
        text: String,
    },
    #[error("history store: {0}")]
    Corrupt(String),
    /// A file that cannot be read as a result or sweep, and why.
    #[error("{0}")]
    Result(String),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Usage(String),
}

pub(crate) fn pg_message(e: &::postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

/// A history store, whichever backend keeps it.
pub struct History {
    store: Box<dyn Store>,
}

impl History {
    /// Opens the SQLite store in the file `path`, creating it (not its
    /// directory) if need be, and migrating its schema.
    pub fn open(path: &Path) -> Result<History, Error> {
        Ok(History::with_store(Box::new(sqlite::SqliteStore::open(
            path,
        )?)))
    }

    /// Opens `RESULTS_DIR/history.sqlite`, creating the directory too.
    pub fn open_in(results_dir: &Path) -> Result<History, Error> {
        std::fs::create_dir_all(results_dir).map_err(|e| {
            Error::Io(format!(
                "cannot create the results directory {}: {e}",
                results_dir.display()
            ))
        })?;
        History::open(&results_dir.join(FILE_NAME))
    }

    /// Opens the store `location` names: a `postgres://` or
    /// `postgresql://` URL, a directory (its `history.sqlite`) or a
    /// SQLite file.
    pub fn connect(location: &str) -> Result<History, Error> {
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            return Ok(History::with_store(Box::new(
                postgres::PostgresStore::connect(location)?,
            )));
        }
        let path = Path::new(location);
        if path.is_dir() {
            History::open_in(path)
        } else {
            History::open(path)
        }
    }

    /// A history kept by any backend.
    pub fn with_store(store: Box<dyn Store>) -> History {
        History { store }
    }

    /// Records a single run read from `file`, in one transaction. `commit`
    /// is used when the run has no `commit` label.
    pub fn record(
        &mut self,
        result: &RunResult,
        file: &Path,
        commit: Option<&str>,
    ) -> Result<Recorded, Error> {
        self.store.insert(&[Entry::of_run(result, file, commit)])
    }

    /// Records every run of a sweep or findmax file, in one transaction.
    pub fn record_sweep(
        &mut self,
        sweep: &SweepResult,
        file: &Path,
        commit: Option<&str>,
    ) -> Result<Recorded, Error> {
        self.store.insert(&Entry::of_sweep(sweep, file, commit))
    }

    /// Records a result or sweep file's runs, in one transaction.
    pub fn record_any(
        &mut self,
        any: &AnyResult,
        file: &Path,
        commit: Option<&str>,
    ) -> Result<Recorded, Error> {
        self.store.insert(&Entry::of_any(any, file, commit))
    }

    /// Reads a result or sweep file and records its runs.
    pub fn record_file(&mut self, file: &Path, commit: Option<&str>) -> Result<Recorded, Error> {
        let any = AnyResult::read_from(file).map_err(Error::Result)?;
        self.record_any(&any, file, commit)
    }

    /// Records every result and sweep file under `dir` (recursively: a
    /// suite directory's `steps/` too), one transaction per file, without
    /// a commit unless a run has its label. Other `*.json` files are
    /// skipped and listed.
    pub fn import(&mut self, dir: &Path) -> Result<Imported, Error> {
        let files = import::json_files(dir)
            .map_err(|e| Error::Io(format!("cannot read {}: {e}", dir.display())))?;
        let mut imported = Imported::default();
        for file in files {
            let recorded = AnyResult::read_from(&file)
                .map_err(Error::Result)
                .and_then(|any| self.record_any(&any, &file, None));
            match recorded {
                Ok(runs) => {
                    imported.runs += runs;
                    imported.files += 1;
                }
                // The file's fault (not JSON, another schema, a start time
                // that is no time): skipped; the store's fault ends it.
                Err(Error::Result(reason)) => imported.skipped.push(Skipped { path: file, reason }),
                Err(e) => return Err(e),
            }
        }
        Ok(imported)
    }

    /// The series matching `filter`.
    pub fn series(&mut self, filter: &SeriesFilter) -> Result<Vec<SeriesInfo>, Error> {
        self.store.series(filter)
    }

    /// Every entry of the series `series_id`, oldest first (none for an
    /// unknown id).
    pub fn entries(&mut self, series_id: &str) -> Result<Vec<Entry>, Error> {
        self.store.entries(series_id)
    }

    pub fn schema_version(&mut self) -> Result<u32, Error> {
        self.store.schema_version()
    }
}

/// Where the SQLite store of a results directory is.
pub fn default_path(results_dir: &Path) -> PathBuf {
    results_dir.join(FILE_NAME)
}
