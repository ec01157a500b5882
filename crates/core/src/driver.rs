//! The driver trait: how to open a session to a system. What a session can
//! do is given by the family traits (see [`crate::sql`]).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::DriverError;

/// Product and version as the server reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerInfo {
    pub product: String,
    pub version: String,
    /// What else the server says about itself, by name: a search
    /// cluster's `cluster` name (which of several clusters a result
    /// measured). A driver adds its own without touching the others.
    pub extras: BTreeMap<String, String>,
}

impl ServerInfo {
    pub fn new(product: impl Into<String>, version: impl Into<String>) -> Self {
        ServerInfo {
            product: product.into(),
            version: version.into(),
            extras: BTreeMap::new(),
        }
    }

    /// This description with `name` reported as `value`.
    pub fn with_extra(mut self, name: &str, value: impl Into<String>) -> Self {
        self.extras.insert(name.to_string(), value.into());
        self
    }
}

/// A server's configuration and status, under the server's own names, for
/// `loadcell advise`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerSettings {
    /// Configuration: MySQL's global variables, PostgreSQL's `pg_settings`
    /// (sizes in bytes), Redis's `CONFIG GET *`.
    pub settings: BTreeMap<String, String>,
    /// Status since the server started: MySQL's global status,
    /// PostgreSQL's statistics views, Redis's `INFO`.
    pub status: BTreeMap<String, String>,
}

/// A connection factory for one target. One instance is shared by every
/// worker thread; each session owns the connection it opens.
///
/// Drivers neither time nor count anything: the engine wraps every call.
/// The engine also applies the connect timeout around [`Driver::connect`].
pub trait Driver: Send + Sync + 'static {
    /// One session's connection. Created and used on a single worker thread.
    type Conn: 'static;

    /// `host:port` (or file path) for messages; never contains secrets.
    fn endpoint(&self) -> String;

    async fn connect(&self) -> Result<Self::Conn, DriverError>;

    /// [`Driver::connect`], given up after `timeout` with an error that
    /// says so. A driver that knows what its connect waits for (the
    /// server's greeting, the reply to its first message) overrides this to
    /// say that instead, so that a server that is silent, or that speaks
    /// another protocol, is named as such rather than as slow.
    async fn connect_within(&self, timeout: Duration) -> Result<Self::Conn, DriverError> {
        match tokio::time::timeout(timeout, self.connect()).await {
            Ok(result) => result,
            Err(_) => Err(connect_timed_out(&self.endpoint(), timeout)),
        }
    }

    async fn server_info(&self, conn: &mut Self::Conn) -> Result<ServerInfo, DriverError>;

    /// Whether every answer this driver's connections read is timed by the
    /// kernel's receive timestamp on a thread that defers its reads (see
    /// [`crate::receipt`]): only then may a worker in a burst schedule read
    /// at its ticks instead of as answers come.
    fn times_reads_by_receipt(&self) -> bool {
        false
    }

    /// The server's own counters, sampled once per interval on a separate
    /// monitoring connection (e.g. `SHOW GLOBAL STATUS`, `INFO`). Name
    /// monotonic counters with a `_total` suffix so they are reported as
    /// rates. A server that says how busy its machine is reports it as
    /// [`SERVER_HOST_CPU_PCT`], which the bottleneck hint reads when the
    /// server runs on another host. Drivers without counters keep this
    /// default.
    async fn server_counters(
        &self,
        _conn: &mut Self::Conn,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        Ok(Vec::new())
    }

    /// The server's configuration and status, read once by `loadcell
    /// advise`. Drivers of servers it has no rules for keep this default.
    async fn server_settings(&self, _conn: &mut Self::Conn) -> Result<ServerSettings, DriverError> {
        Ok(ServerSettings::default())
    }
}

/// The server counter for the CPU of the machine the server runs on, in
/// percent of that machine (its busiest node's, for a cluster).
pub const SERVER_HOST_CPU_PCT: &str = "server_host_cpu_pct";

/// The error for a connect to `endpoint` that did not complete within
/// `timeout`, when nothing more precise is known (the TCP connection itself
/// did not complete).
pub fn connect_timed_out(endpoint: &str, timeout: Duration) -> DriverError {
    DriverError::connection(format!(
        "timed out after {} connecting to {endpoint}",
        humantime::format_duration(timeout)
    ))
}
