//! The driver trait: how to open a session to a system. What a session can
//! do is given by the family traits (see [`crate::sql`]).

use crate::DriverError;

/// Product and version as the server reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerInfo {
    pub product: String,
    pub version: String,
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

    async fn server_info(&self, conn: &mut Self::Conn) -> Result<ServerInfo, DriverError>;

    /// The server's own counters, sampled once per interval on a separate
    /// monitoring connection (e.g. `SHOW GLOBAL STATUS`, `INFO`). Name
    /// monotonic counters with a `_total` suffix so they are reported as
    /// rates. Drivers without counters keep this default.
    async fn server_counters(
        &self,
        _conn: &mut Self::Conn,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        Ok(Vec::new())
    }
}
