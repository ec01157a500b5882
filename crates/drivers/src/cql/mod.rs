//! Cassandra and ScyllaDB over CQL, with the `scylla` crate: prepared
//! statements, token-aware routing (the crate's default load balancing),
//! a consistency level per target.
//!
//! `cql://[user:password@]host[:9042][,host…]/KEYSPACE[?consistency=ONE|QUORUM|…][&replication_factor=N]`.
//! The keyspace is created by `prepare` when missing (SimpleStrategy,
//! `replication_factor`, 1 by default); tables are qualified with it, so a
//! session needs no `USE`.
//!
//! One `scylla::Session` per worker thread, shared by the loadcell
//! sessions on it: a `Session` is a cluster client (a pool per node, a
//! control connection, schema metadata, background refresh tasks) meant
//! to be shared, and multiplexes up to 32k requests per connection; one
//! per loadcell connection would multiply all of that by `--threads`.
//! A worker's session is built on the worker's own runtime, so its
//! connection tasks run beside the sessions that send on them, as latte's
//! do: a request and its answer cross no thread (handing them to a
//! session on another thread cost an eventfd wake-up each way, 27% more
//! CPU per read than latte). It ends with the worker's last connection,
//! inside the run. Connections made elsewhere (prepare, cleanup, the
//! server-counter monitor), which may outlive the runtime they were made
//! on, share one session on a runtime thread of the driver's own
//! ([`SessionRuntime`]). A loadcell connection is a session plus its own
//! prepared statements and buffers ([`conn::CqlConnection`]).
//!
//! A keyspace `prepare` creates holds a table of loadcell's own,
//! [`KEYSPACE_MARKER_TABLE`], commented with the marker: `cleanup` drops
//! such a keyspace once it holds no other table, and no other keyspace.
//!
//! Server counters come from Cassandra 4's virtual tables, each interval
//! ([`counters`]): thread pools (tasks pending, blocked, completed per
//! stage), client connections, caches. The JVM's CPU and memory are
//! sampled as every local server's are (its listening port's process).

mod conn;
mod counters;

use std::sync::{Arc, Mutex, Weak};
use std::thread::ThreadId;
use std::time::Duration;

use loadcell_core::kv::KvCapabilities;
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, Target};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::{DbError, ExecutionError, PrepareError, RequestAttemptError};
use scylla::statement::Consistency;

pub use conn::CqlConnection;

use crate::transport::target_url::{Query, UrlParts};
use crate::transport::url_text::endpoint;
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "cql",
    schemes: &["cql"],
    family: Family::WIDE_COLUMN,
    url_form: "cql://[user:pass@]host[:9042][,host2…]/KEYSPACE[?consistency=ONE|QUORUM|ALL|LOCAL_QUORUM|…][&replication_factor=N]",
    about: "Cassandra and ScyllaDB over CQL (scylla crate): prepared statements, token-aware routing",
    kv: KvCapabilities::NONE,
    blocking: false,
    // During a run the sessions' connections run on the workers' own
    // runtimes ([`SessionRuntime`]'s thread is idle then).
};

const DEFAULT_PORT: u16 = 9042;

/// The table that marks a keyspace as created by loadcell's `prepare`:
/// its comment is the marker.
pub const KEYSPACE_MARKER_TABLE: &str = "loadcell_keyspace";

/// Cassandra's default `batch_size_fail_threshold`, for a server that
/// does not say its own (no `system_views` before 4.0).
const DEFAULT_BATCH_LIMIT_BYTES: u64 = 50 * 1024;

/// The target's settings.
#[derive(Debug, Clone)]
struct Settings {
    nodes: Vec<String>,
    keyspace: String,
    consistency: Consistency,
    replication_factor: u32,
    credentials: Option<(String, String)>,
}

fn parse_target(target: &Target) -> Result<Settings, String> {
    let url = target.url();
    if let Some((key, _)) = url
        .query_pairs()
        .find(|(k, _)| k == "user" || k == "password")
    {
        return Err(format!(
            "{key}= is not taken: put credentials in the URL, cql://user:password@host/KEYSPACE, where they are never shown"
        ));
    }
    let mut query = Query::parse(url, &["consistency", "replication_factor"])?;
    let consistency = query.take_parsed("consistency", parse_consistency)?;
    let replication_factor = query.take_parsed("replication_factor", |value| {
        value
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("replication_factor takes a count, got '{value}'"))
    })?;
    let parts = UrlParts::parse(target, DEFAULT_PORT)?;
    let nodes = parts.hosts_or("127.0.0.1");
    let keyspace = parts.segment("keyspace")?.ok_or_else(|| {
        "a cql:// target names its keyspace: cql://host:9042/KEYSPACE".to_string()
    })?;
    Ok(Settings {
        nodes: nodes.iter().map(|(h, p)| endpoint(h, *p)).collect(),
        keyspace,
        consistency: consistency.unwrap_or(Consistency::One),
        replication_factor: replication_factor.unwrap_or(1),
        credentials: parts.user.map(|u| (u, parts.password.unwrap_or_default())),
    })
}

fn parse_consistency(value: &str) -> Result<Consistency, String> {
    Ok(match value.to_ascii_uppercase().as_str() {
        "ANY" => Consistency::Any,
        "ONE" => Consistency::One,
        "TWO" => Consistency::Two,
        "THREE" => Consistency::Three,
        "QUORUM" => Consistency::Quorum,
        "ALL" => Consistency::All,
        "LOCAL_QUORUM" => Consistency::LocalQuorum,
        "EACH_QUORUM" => Consistency::EachQuorum,
        "LOCAL_ONE" => Consistency::LocalOne,
        _ => {
            return Err(format!(
                "consistency takes ANY, ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM or LOCAL_ONE, got '{value}'"
            ))
        }
    })
}

/// The runtime the shared session's connections and background tasks run
/// on: a current-thread runtime on a thread of its own, ended when the
/// driver is dropped. Requests are sent from the workers' runtimes; the
/// session hands them to its connection tasks over channels, which work
/// across runtimes.
#[derive(Debug)]
struct SessionRuntime {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl SessionRuntime {
    fn start() -> Result<SessionRuntime, DriverError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DriverError::fatal(format!("cannot start the CQL runtime: {e}")))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("loadcell-cql".to_string())
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .map_err(|e| DriverError::fatal(format!("cannot start the CQL thread: {e}")))?;
        Ok(SessionRuntime {
            handle,
            stop: Some(stop),
        })
    }
}

impl Drop for SessionRuntime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A worker thread's session, locked while it is being built.
type WorkerSlot = Arc<tokio::sync::Mutex<Weak<Shared>>>;

/// What every connection of a session shares.
#[derive(Debug)]
struct Shared {
    session: Session,
    keyspace: String,
    replication_factor: u32,
    /// The server's `batch_size_fail_threshold`: a batch of rows in
    /// several partitions this size or more is refused.
    batch_limit_bytes: u64,
}

#[derive(Debug)]
pub struct CqlDriver {
    settings: Settings,
    endpoint: String,
    runtime: SessionRuntime,
    /// Built by the first connect off a worker thread that succeeds.
    shared: tokio::sync::OnceCell<Arc<Shared>>,
    /// Each worker thread's session while it has connections on it.
    per_worker: Mutex<Vec<(ThreadId, WorkerSlot)>>,
}

impl CqlDriver {
    pub fn from_target(target: &Target) -> Result<CqlDriver, String> {
        let settings = parse_target(target)?;
        Ok(CqlDriver {
            endpoint: settings.nodes.join(","),
            settings,
            runtime: SessionRuntime::start().map_err(|e| e.message)?,
            shared: tokio::sync::OnceCell::new(),
            per_worker: Mutex::new(Vec::new()),
        })
    }

    /// The calling worker thread's session, built on its runtime by its
    /// first connect; the thread's other sessions, connecting meanwhile,
    /// wait for it.
    async fn worker_session(&self) -> Result<Arc<Shared>, DriverError> {
        let me = std::thread::current().id();
        let slot = {
            let mut slots = self.per_worker.lock().unwrap_or_else(|e| e.into_inner());
            // Slots of threads whose sessions have all ended go.
            slots.retain(|(_, slot)| slot.try_lock().map_or(true, |s| s.strong_count() > 0));
            match slots.iter().find(|(t, _)| *t == me) {
                Some((_, slot)) => Arc::clone(slot),
                None => {
                    let slot = Arc::new(tokio::sync::Mutex::new(Weak::new()));
                    slots.push((me, Arc::clone(&slot)));
                    slot
                }
            }
        };
        let mut session = slot.lock().await;
        if let Some(shared) = session.upgrade() {
            return Ok(shared);
        }
        let built = self.build_session(false).await?;
        *session = Arc::downgrade(&built);
        Ok(built)
    }

    /// A session on the driver's own runtime (`on_driver_runtime`) or on
    /// the caller's.
    async fn build_session(&self, on_driver_runtime: bool) -> Result<Arc<Shared>, DriverError> {
        let settings = &self.settings;
        let profile = ExecutionProfile::builder()
            .consistency(settings.consistency)
            .request_timeout(Some(Duration::from_secs(30)))
            .build();
        // Token-aware routing needs the keyspace's replication, not the
        // schema of every other keyspace: a session per worker fetching
        // all of it cost CPU a short run's reads would carry.
        let mut builder = SessionBuilder::new()
            .known_nodes(&settings.nodes)
            .keyspaces_to_fetch([settings.keyspace.as_str()])
            .default_execution_profile_handle(profile.into_handle());
        if let Some((user, password)) = &settings.credentials {
            builder = builder.user(user, password);
        }
        let built = if on_driver_runtime {
            self.runtime
                .handle
                .spawn(async move { builder.build().await })
                .await
                .map_err(|e| DriverError::fatal(format!("the CQL session task failed: {e}")))?
        } else {
            builder.build().await
        };
        let session = built.map_err(|e| {
            DriverError::connection(format!("cannot connect to {}: {e}", self.endpoint))
        })?;
        let batch_limit_bytes = batch_limit_bytes(&session).await;
        Ok(Arc::new(Shared {
            session,
            keyspace: settings.keyspace.clone(),
            replication_factor: settings.replication_factor,
            batch_limit_bytes,
        }))
    }
}

impl Driver for CqlDriver {
    type Conn = CqlConnection;

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    /// A connection on the shared session, once a request has gone
    /// through it: the session outlives a server that went away, and
    /// would hand out connections that all fail.
    async fn connect(&self) -> Result<CqlConnection, DriverError> {
        // A worker's runtime outlives its sessions' connections.
        let shared = if loadcell_core::park::enabled_here() {
            self.worker_session().await?
        } else {
            let shared = self.shared.get_or_try_init(|| self.build_session(true));
            Arc::clone(shared.await?)
        };
        let mut conn = CqlConnection::new(shared);
        conn.release_version()
            .await
            .map_err(|e| DriverError::new(e.class, format!("{}: {}", self.endpoint, e.message)))?;
        Ok(conn)
    }

    async fn server_info(&self, conn: &mut CqlConnection) -> Result<ServerInfo, DriverError> {
        Ok(ServerInfo::new("Cassandra", conn.release_version().await?))
    }

    async fn server_counters(
        &self,
        conn: &mut CqlConnection,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        counters::sample(conn.session()).await
    }
}

/// The server's `batch_size_fail_threshold` from `system_views.settings`
/// (4.1 names it so, with a unit; 4.0 `batch_size_fail_threshold_in_kb`),
/// Cassandra's default where it says neither.
async fn batch_limit_bytes(session: &Session) -> u64 {
    let Ok(result) = session
        .query_unpaged("SELECT name, value FROM system_views.settings", ())
        .await
    else {
        return DEFAULT_BATCH_LIMIT_BYTES;
    };
    let Ok(rows) = result.into_rows_result() else {
        return DEFAULT_BATCH_LIMIT_BYTES;
    };
    let Ok(rows) = rows.rows::<(String, Option<String>)>() else {
        return DEFAULT_BATCH_LIMIT_BYTES;
    };
    rows.flatten()
        .find_map(|(name, value)| match name.as_str() {
            "batch_size_fail_threshold" => data_size(value.as_deref()?, 1),
            "batch_size_fail_threshold_in_kb" => data_size(value.as_deref()?, 1024),
            _ => None,
        })
        .unwrap_or(DEFAULT_BATCH_LIMIT_BYTES)
}

/// Bytes in a Cassandra data size, `50KiB` or a bare number of `unit`s.
fn data_size(value: &str, unit: u64) -> Option<u64> {
    let value = value.trim();
    let digits = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, suffix) = value.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let unit = match suffix.trim() {
        "" => unit,
        "B" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// The error for a failed request, classed by what the server or the
/// crate said.
fn execution_error(e: ExecutionError) -> DriverError {
    let class = match &e {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, _)) => db_class(db),
        ExecutionError::LastAttemptError(RequestAttemptError::BrokenConnectionError(_))
        | ExecutionError::LastAttemptError(RequestAttemptError::UnableToAllocStreamId)
        | ExecutionError::ConnectionPoolError(_)
        | ExecutionError::EmptyPlan
        | ExecutionError::RequestTimeout(_) => ErrorClass::Connection,
        _ => ErrorClass::Fatal,
    };
    DriverError::new(class, one_line(e.to_string()))
}

fn prepare_error(e: PrepareError) -> DriverError {
    let class = match &e {
        PrepareError::AllAttemptsFailed {
            first_attempt: RequestAttemptError::DbError(db, _),
        } => db_class(db),
        PrepareError::ConnectionPoolError(_) => ErrorClass::Connection,
        _ => ErrorClass::Fatal,
    };
    DriverError::new(class, one_line(format!("preparing a statement: {e}")))
}

fn db_class(db: &DbError) -> ErrorClass {
    match db {
        DbError::Unavailable { .. }
        | DbError::Overloaded
        | DbError::IsBootstrapping
        | DbError::ReadTimeout { .. }
        | DbError::WriteTimeout { .. }
        | DbError::ReadFailure { .. }
        | DbError::WriteFailure { .. }
        | DbError::RateLimitReached { .. } => ErrorClass::Retryable,
        _ => ErrorClass::Fatal,
    }
}

fn one_line(message: String) -> String {
    message.replace('\n', " ")
}

/// `name` as a CQL identifier: double-quoted, case kept.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `text` as a CQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(raw: &str) -> Result<Settings, String> {
        parse_target(&Target::parse(raw).unwrap())
    }

    #[test]
    fn targets_name_nodes_keyspace_consistency_and_replication() {
        let s = settings("cql://a:9000,b/ks?consistency=quorum&replication_factor=3").unwrap();
        assert_eq!(s.nodes, ["a:9000", "b:9042"]);
        assert_eq!(s.keyspace, "ks");
        assert_eq!(s.consistency, Consistency::Quorum);
        assert_eq!(s.replication_factor, 3);
        assert_eq!(s.credentials, None);
        let s = settings("cql://u:p%40ss@h/ks").unwrap();
        assert_eq!(s.credentials, Some(("u".to_string(), "p@ss".to_string())));
        assert_eq!(s.consistency, Consistency::One);
    }

    #[test]
    fn bad_targets_say_what_is_wrong_without_showing_a_password() {
        for (raw, says) in [
            ("cql://h:9042", "names its keyspace"),
            ("cql://h/ks?consistency=MOST", "consistency takes"),
            (
                "cql://h/ks?replication_factor=0",
                "replication_factor takes",
            ),
            ("cql://h/ks?password=secret", "credentials in the URL"),
            ("cql://h/ks?pool=2", "unknown parameter 'pool'"),
        ] {
            let e = settings(raw).unwrap_err();
            assert!(e.contains(says) && !e.contains("secret"), "{raw}: {e}");
        }
    }

    #[test]
    fn batch_thresholds_read_with_or_without_a_unit() {
        assert_eq!(data_size("50KiB", 1), Some(50 * 1024));
        assert_eq!(data_size("50", 1024), Some(50 * 1024));
        assert_eq!(data_size("1MiB", 1), Some(1024 * 1024));
        assert_eq!(data_size("fifty", 1024), None);
    }

    #[test]
    fn identifiers_and_literals_are_quoted() {
        assert_eq!(ident("Test\"Table"), "\"Test\"\"Table\"");
        assert_eq!(literal("it's"), "'it''s'");
    }
}
