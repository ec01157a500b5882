//! YCSB's record workloads as a workload: on SQL drivers (`usertable`)
//! on key-value drivers (a hash per record where the driver takes
//! commands, one value per record where it only gets and sets), and on
//! wide-column drivers (YCSB's Cassandra `usertable`).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::family::{KvFamily, SqlFamily, WideColumnFamily};
use loadcell_core::kv::KvConn;
use loadcell_core::sql::SqlConn;
use loadcell_core::wide::WideConn;
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use serde_json::Value;

use super::{
    prepare_kv, prepare_sql, prepare_wide, Preset, YcsbKv, YcsbOptions, YcsbSql, YcsbWide,
    MARKER_WORKLOAD,
};
use crate::prepare::{marker, CheckError, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading, Workload};

#[derive(Debug, Clone)]
pub struct YcsbWorkload {
    pub preset: Preset,
    pub opts: YcsbOptions,
}

impl Workload for YcsbWorkload {
    fn name(&self) -> &'static str {
        self.preset.name()
    }

    fn families(&self) -> &'static [Family] {
        &[Family::SQL, Family::KV, Family::WIDE_COLUMN]
    }

    /// Scans need an ordered index: SQL's primary key, a sorted set kept
    /// with commands, a wide-column store's rows. GET/SET-only stores have
    /// none.
    fn refuses(&self, driver: &DriverInfo) -> Option<String> {
        let can_scan =
            matches!(driver.family, Family::SQL | Family::WIDE_COLUMN) || driver.kv.commands;
        (self.opts.needs_scan() && !can_scan).then(|| {
            let share =
                100.0 * self.opts.proportions.scan as f64 / self.opts.proportions.total() as f64;
            format!(
                "workload {} scans records ({share:.0}% of its operations), and {} cannot scan: \
                 it only gets and sets single keys, with no ordered index to read a range from",
                self.name(),
                driver.name
            )
        })
    }

    fn options(&self) -> BTreeMap<String, Value> {
        self.opts.to_map()
    }
}

impl<C: SqlConn> Lifecycle<C, SqlFamily> for YcsbWorkload {
    type Script = YcsbSql;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> YcsbSql {
        YcsbSql::new(self.opts.clone())
    }

    async fn check(&self, script: &YcsbSql, conn: &mut C) -> Result<(), CheckError> {
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
        prepare_sql(driver, &self.opts, loading, observer).await
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
        // Drops `usertable` if loadcell's `prepare` created it and it
        // still carries its tag, and nothing else.
        let (mut conn, _) = loadcell_engine::connect_once(driver, how.connect_timeout).await?;
        marker::cleanup(&mut conn, MARKER_WORKLOAD, observer).await?;
        Ok(())
    }
}

impl<C: KvConn> Lifecycle<C, KvFamily> for YcsbWorkload {
    type Script = YcsbKv;

    /// Hashes and a sorted-set index where the driver takes commands; one
    /// value per record where it only gets and sets.
    fn script(&self, _seed: u64, driver: &DriverInfo) -> YcsbKv {
        YcsbKv::new(self.opts.clone(), driver.kv.commands)
    }

    async fn check(&self, script: &YcsbKv, conn: &mut C) -> Result<(), CheckError> {
        script.check(conn).await
    }

    async fn prepare<D>(
        &self,
        driver: Arc<D>,
        info: &DriverInfo,
        loading: Loading,
        observer: Rc<dyn PrepareObserver>,
    ) -> Result<(), DriverError>
    where
        D: Driver<Conn = C>,
    {
        prepare_kv(driver, &self.opts, info.kv.commands, loading, observer).await
    }

    async fn cleanup<D>(
        &self,
        _driver: &D,
        _how: &Cleanup,
        _observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        Err(CleanupError::Refused(crate::kv::UNTRACKED_KEYS.to_string()))
    }
}

impl<C: WideConn> Lifecycle<C, WideColumnFamily> for YcsbWorkload {
    type Script = YcsbWide;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> YcsbWide {
        YcsbWide::new(self.opts.clone())
    }

    async fn check(&self, script: &YcsbWide, conn: &mut C) -> Result<(), CheckError> {
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
        prepare_wide(driver, &self.opts, loading, observer).await
    }

    /// Drops `usertable` if it carries loadcell's marker and holds only
    /// YCSB's keys (or `--force`).
    async fn cleanup<D>(
        &self,
        driver: &D,
        how: &Cleanup,
        observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        let force = how.force;
        let (table, own) = (super::wide::TABLE, Some(super::wide::OWN_KEYS));
        crate::wide::drop_table(table, own, force, driver, how.connect_timeout, observer).await
    }
}
