//! `kv --dataset FILE` as a workload: the file's key types with the kv
//! options for the SET:GET ratio, pipeline and seeding.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::family::KvFamily;
use loadcell_core::kv::KvConn;
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use serde_json::Value;

use super::{cleanup, prepare, DataSet, DataSetKv};
use crate::kv::KvOptions;
use crate::prepare::{CheckError, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading, Workload};

#[derive(Debug, Clone)]
pub struct DataSetWorkload {
    pub set: Arc<DataSet>,
    pub opts: KvOptions,
}

impl Workload for DataSetWorkload {
    fn name(&self) -> &'static str {
        "kv"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::KV]
    }

    fn refuses(&self, driver: &DriverInfo) -> Option<String> {
        let hashes = self.set.hash_type().filter(|_| !driver.kv.commands)?;
        Some(format!(
            "data set '{}' ({}) has hash keys (type '{}'), and {} only gets and sets strings \
             (a data set of strings only runs there)",
            self.set.name, self.set.path, hashes.name, driver.name
        ))
    }

    fn options(&self) -> BTreeMap<String, Value> {
        self.set.to_map(&self.opts)
    }
}

impl<C: KvConn> Lifecycle<C, KvFamily> for DataSetWorkload {
    type Script = DataSetKv;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> DataSetKv {
        DataSetKv::new(Arc::clone(&self.set), self.opts.clone())
    }

    async fn check(&self, script: &DataSetKv, conn: &mut C) -> Result<(), CheckError> {
        script.check(conn).await
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
        prepare(driver, Arc::clone(&self.set), loading, observer).await
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
        cleanup(&mut conn, &self.set, observer).await?;
        Ok(())
    }
}
