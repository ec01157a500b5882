//! What every workload's `prepare`, `cleanup` and pre-run check share: the
//! observer that tells the user how loading goes, the errors a check
//! returns, the parallel loader, and the marker of what loadcell created.

pub(crate) mod load;
pub mod marker;

use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::DriverError;
use serde::de::DeserializeOwned;

/// What `prepare` tells the user as it goes.
pub trait PrepareObserver {
    fn message(&self, text: &str);
    /// More rows are going to be loaded.
    fn add_total(&self, rows: u64);
    fn loaded(&self, rows: u64);
}

/// A workload that cannot run because its data set is not there (yet):
/// what is missing, e.g. "table sbtest1 does not exist".
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct NotPrepared(pub String);

impl NotPrepared {
    /// `what` (a table) does not exist.
    pub fn missing(what: &str) -> NotPrepared {
        NotPrepared(format!("{what} does not exist"))
    }
}

/// Why a workload's check before the run refused it.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    NotPrepared(NotPrepared),
    #[error(transparent)]
    Driver(#[from] DriverError),
}

/// Reads a key-value marker: the JSON a previous `prepare` recorded under
/// `key`, if any (`Some(Err)`: there, but not what loadcell writes).
pub(crate) async fn read_marker<T: DeserializeOwned, C: KvConn>(
    conn: &mut C,
    key: &str,
) -> Result<Option<Result<T, String>>, DriverError> {
    let mut found = None;
    let mut failure = None;
    conn.queue_get(key.as_bytes());
    conn.flush(&mut |_, reply| match reply {
        Ok(KvReply::Hit(bytes)) => {
            found = Some(serde_json::from_slice::<T>(bytes).map_err(|e| e.to_string()))
        }
        Ok(_) => {}
        Err(e) => {
            failure.get_or_insert(e);
        }
    })
    .await?;
    failure.map_or(Ok(found), Err)
}
