//! What a workload is to the rest of loadcell: the families and
//! capabilities it needs of a driver, checked before anything connects,
//! and its lifecycle on a connection of a family — prepare the data,
//! check it is there, provide the run's script, clean up.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use loadcell_engine::Script;
use loadcell_record::result::Verification;

use crate::prepare::{CheckError, PrepareObserver};

/// A workload, whatever it runs on.
pub trait Workload {
    /// As `loadcell list` names it.
    fn name(&self) -> &'static str;

    /// The families it runs on. A scheme that several families serve is
    /// opened in the first of these that serves it.
    fn families(&self) -> &'static [Family];

    /// Why it cannot run on `driver` (of one of its families), in words
    /// that end where the list of drivers that can would follow: e.g. a
    /// workload that scans on a store without an ordered index.
    fn refuses(&self, _driver: &DriverInfo) -> Option<String> {
        None
    }

    /// Its options as recorded in the result file.
    fn options(&self) -> BTreeMap<String, serde_json::Value>;
}

/// How `prepare` loads: over how many connections, each given up after
/// the connect timeout.
#[derive(Debug, Clone, Copy)]
pub struct Loading {
    pub connections: usize,
    pub connect_timeout: Duration,
}

/// How `cleanup` removes what `prepare` made: each connection given up
/// after the connect timeout; with `force`, also what loadcell cannot prove
/// is its own (another writer's data in a store loadcell created).
#[derive(Debug, Clone, Copy)]
pub struct Cleanup {
    pub connect_timeout: Duration,
    pub force: bool,
}

/// Why `cleanup` did not clean up.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    /// The workload does not know what it created, so it deletes nothing.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Driver(#[from] DriverError),
}

/// A workload's lifecycle on connections of type `C`, of the family that
/// `F` names ([`loadcell_core::family::SqlFamily`], …): one implementation
/// per family the workload runs on.
pub trait Lifecycle<C, F>: Workload {
    type Script: Script<C> + Send + Sync;

    /// The run's script; `seed` seeds its random choices.
    fn script(&self, seed: u64, driver: &DriverInfo) -> Self::Script;

    /// Whether the data `script` reads is there, before any load is sent.
    /// By default there is none to check: a workload that reads no data
    /// of its own (an HTTP service's pages, the CPU's loop).
    async fn check(&self, _script: &Self::Script, _conn: &mut C) -> Result<(), CheckError> {
        Ok(())
    }

    /// After the run: whether what the run wrote arrived, counted through
    /// the system's own API on a new connection. By default a workload
    /// has nothing to verify, and connects for nothing.
    async fn verify<D>(
        &self,
        _script: &Self::Script,
        _driver: &D,
        _connect_timeout: Duration,
    ) -> Result<Option<Verification>, DriverError>
    where
        D: Driver<Conn = C>,
    {
        Ok(None)
    }

    /// Creates and loads the data set. Idempotent; never touches data
    /// loadcell did not create. By default the workload loads nothing, and
    /// says so.
    async fn prepare<D>(
        &self,
        _driver: Arc<D>,
        _info: &DriverInfo,
        _loading: Loading,
        _observer: Rc<dyn PrepareObserver>,
    ) -> Result<(), DriverError>
    where
        D: Driver<Conn = C>,
    {
        Err(DriverError::fatal(format!(
            "the {} workload loads nothing: run it against the system as it is",
            self.name()
        )))
    }

    /// Deletes what `prepare` created, and nothing else. By default the
    /// workload created nothing, and says so.
    async fn cleanup<D>(
        &self,
        _driver: &D,
        _how: &Cleanup,
        _observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        Err(CleanupError::Refused(format!(
            "the {} workload creates nothing, so there is nothing to clean up",
            self.name()
        )))
    }
}
