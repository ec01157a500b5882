//! The time-series workloads (TSBS's and inch's model), on InfluxDB,
//! Prometheus, VictoriaMetrics and QuestDB:
//!
//! - `ts-ingest`: `--series` series (a measurement and tags of fixed-length
//!   values, [`series`]), written `--points-per-request` points a request,
//!   in real time or back-filling `--start..--end` (then the run ends when
//!   every series has its points). Points are the run's items; failed
//!   points are errors by reason. After the run, the database's own count
//!   of series with a point in the run's time range is compared with the
//!   series written and random series are read back ([`Lifecycle::verify`]).
//! - `ts-query`: last point, hourly mean by minute, group-by over a tag,
//!   of series drawn from the same space; rows returned are the items.
//!
//! `prepare` creates the store where the database needs one (an InfluxDB
//! database, a QuestDB table), carrying a random `loadcell:` marker;
//! `cleanup` drops what loadcell wrote in a store only if it carries one,
//! and another writer's points in it, or series nothing says whose they
//! are, only with `--force` ([`cleanup`]).

pub mod ingest;
pub mod query;
pub mod series;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::family::TimeSeriesFamily;
use loadcell_core::ts::{DatabaseLeft, Holdings, Names, Shape, TsConn};
use loadcell_core::{Driver, DriverError, DriverInfo, ErrorClass, Family};
use loadcell_record::result::Verification;
use serde_json::{json, Value};

use crate::distribution::RandType;
use crate::prepare::marker::Tag;
use crate::prepare::{CheckError, NotPrepared, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading, Workload};
use ingest::{IngestScript, Layout};
use query::{QueryKind, QueryScript};
use series::{Measurement, MeasurementTag, SeriesSpace};

/// TSBS's use cases (`pkg/data/usecases/devops`): cpu-only's measurement,
/// devops' nine, with their field names and the tags some add to the
/// host's (disk's `path` and `fstype`, diskio's `serial`, net's
/// `interface`, nginx's and redis's `port` and `server`). Values are
/// floats in 0..100 (see [`series::Values`]), not TSBS's distributions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UseCase {
    CpuOnly,
    Devops,
}

/// TSBS's host tags and how many values each takes (hostname: one per
/// series).
const HOST_TAGS: &[(&str, Option<u64>)] = &[
    ("hostname", None),
    ("region", Some(9)),
    ("datacenter", Some(27)),
    ("rack", Some(100)),
    ("os", Some(3)),
    ("arch", Some(2)),
    ("team", Some(4)),
    ("service", Some(20)),
    ("service_version", Some(2)),
    ("service_environment", Some(3)),
];

const CPU: MeasurementShape = (
    "cpu",
    &[],
    &[
        "usage_user",
        "usage_system",
        "usage_idle",
        "usage_nice",
        "usage_iowait",
        "usage_irq",
        "usage_softirq",
        "usage_steal",
        "usage_guest",
        "usage_guest_nice",
    ],
);

/// A measurement of a use case: its name, the tags it adds and the
/// values each takes, and its fields.
type MeasurementShape = (
    &'static str,
    &'static [(&'static str, TagValues)],
    &'static [&'static str],
);

/// The values of a tag a measurement adds, as TSBS makes them.
#[derive(Debug, Clone, Copy)]
enum TagValues {
    /// These.
    Listed(&'static [&'static str]),
    /// `prefix` and a number below `count`.
    Numbered(&'static str, u64),
    /// A disk serial, `NNN-NNN-NNN`, of `count` distinct ones.
    Serials(u64),
    /// A port number from 1024, of `count` distinct ones.
    Ports(u64),
}

impl TagValues {
    fn values(self) -> Vec<String> {
        match self {
            TagValues::Listed(values) => values.iter().map(|v| v.to_string()).collect(),
            TagValues::Numbered(prefix, count) => {
                (0..count).map(|i| format!("{prefix}{i}")).collect()
            }
            TagValues::Serials(count) => (0..count)
                .map(|i| format!("{:03}-{:03}-{:03}", i * 7 % 1000, i * 13 % 1000, i % 1000))
                .collect(),
            TagValues::Ports(count) => (0..count)
                .map(|i| (1024 + i * 19 % 20_000).to_string())
                .collect(),
        }
    }
}

/// TSBS draws a server's name from 100,000 and its port from 20,000;
/// this many of each keep the tables small.
const SERVERS: u64 = 1000;

const DEVOPS: &[MeasurementShape] = &[
    CPU,
    (
        "diskio",
        &[("serial", TagValues::Serials(SERVERS))],
        &[
            "reads",
            "writes",
            "read_bytes",
            "write_bytes",
            "read_time",
            "write_time",
            "io_time",
        ],
    ),
    (
        "disk",
        &[
            ("path", TagValues::Numbered("/dev/sda", 10)),
            ("fstype", TagValues::Listed(&["ext3", "ext4", "btrfs"])),
        ],
        &[
            "total",
            "free",
            "used",
            "used_percent",
            "inodes_total",
            "inodes_free",
            "inodes_used",
        ],
    ),
    (
        "kernel",
        &[],
        &[
            "boot_time",
            "interrupts",
            "context_switches",
            "processes_forked",
            "disk_pages_in",
            "disk_pages_out",
        ],
    ),
    (
        "mem",
        &[],
        &[
            "total",
            "available",
            "used",
            "free",
            "cached",
            "buffered",
            "used_percent",
            "available_percent",
            "buffered_percent",
        ],
    ),
    (
        "net",
        &[("interface", TagValues::Numbered("eth", 4))],
        &[
            "bytes_sent",
            "bytes_recv",
            "packets_sent",
            "packets_recv",
            "err_in",
            "err_out",
            "drop_in",
            "drop_out",
        ],
    ),
    (
        "nginx",
        &[
            ("port", TagValues::Ports(SERVERS)),
            ("server", TagValues::Numbered("nginx_", SERVERS)),
        ],
        &[
            "accepts", "active", "handled", "reading", "requests", "waiting", "writing",
        ],
    ),
    (
        // TSBS's spelling.
        "postgresl",
        &[],
        &[
            "numbackends",
            "xact_commit",
            "xact_rollback",
            "blks_read",
            "blks_hit",
            "tup_returned",
            "tup_fetched",
            "tup_inserted",
            "tup_updated",
            "tup_deleted",
            "conflicts",
            "temp_files",
            "temp_bytes",
            "deadlocks",
            "blk_read_time",
            "blk_write_time",
        ],
    ),
    (
        "redis",
        &[
            ("port", TagValues::Ports(SERVERS)),
            ("server", TagValues::Numbered("redis_", SERVERS)),
        ],
        &[
            "uptime_in_seconds",
            "total_connections_received",
            "expired_keys",
            "evicted_keys",
            "keyspace_hits",
            "keyspace_misses",
            "instantaneous_ops_per_sec",
            "instantaneous_input_kbps",
            "instantaneous_output_kbps",
            "connected_clients",
            "used_memory",
            "used_memory_rss",
            "used_memory_peak",
            "used_memory_lua",
            "rdb_changes_since_last_save",
            "sync_full",
            "sync_partial_ok",
            "sync_partial_err",
            "pubsub_channels",
            "pubsub_patterns",
            "latest_fork_usec",
            "connected_slaves",
            "master_repl_offset",
            "repl_backlog_active",
            "repl_backlog_size",
            "repl_backlog_histlen",
            "mem_fragmentation_ratio",
            "used_cpu_sys",
            "used_cpu_user",
            "used_cpu_sys_children",
            "used_cpu_user_children",
        ],
    ),
];

impl UseCase {
    pub const NAMES: &'static str = "cpu-only or devops";

    pub fn parse(name: &str) -> Option<UseCase> {
        match name {
            "cpu-only" => Some(UseCase::CpuOnly),
            "devops" => Some(UseCase::Devops),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            UseCase::CpuOnly => "cpu-only",
            UseCase::Devops => "devops",
        }
    }

    /// Its series space.
    pub fn space(self, tag_length: usize, series: u64) -> Result<SeriesSpace, String> {
        let measurements = match self {
            UseCase::CpuOnly => std::slice::from_ref(&CPU),
            UseCase::Devops => DEVOPS,
        };
        let measurements = measurements
            .iter()
            .map(|&(name, tags, fields)| Measurement {
                name: name.to_string(),
                tags: tags
                    .iter()
                    .map(|&(key, values)| MeasurementTag::new(key, values.values()))
                    .collect(),
                fields: fields.iter().map(|f| f.to_string()).collect(),
            })
            .collect();
        SeriesSpace::new(measurements, HOST_TAGS, tag_length, series)
    }
}

/// A series space of one measurement, `tags` tags `tag0..` (`tag0` one
/// value per series, `tagK` 10^K values) and `fields` fields `field0..`.
pub fn generic_space(
    measurement: &str,
    tags: usize,
    fields: usize,
    tag_length: usize,
    series: u64,
) -> Result<SeriesSpace, String> {
    let keys: Vec<String> = (0..tags).map(|t| format!("tag{t}")).collect();
    let tags: Vec<(&str, Option<u64>)> = keys
        .iter()
        .enumerate()
        .map(|(t, key)| (key.as_str(), Some(10u64.saturating_pow(t as u32))))
        .collect();
    let measurement = Measurement {
        name: measurement.to_string(),
        tags: Vec::new(),
        fields: (0..fields).map(|f| format!("field{f}")).collect(),
    };
    SeriesSpace::new(vec![measurement], &tags, tag_length, series)
}

/// When points are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Each round of a series at the time it is sent.
    RealTime,
    /// From `start_ns`, every `--interval`, up to `end_ns` (excluded).
    BackFill { start_ns: i64, end_ns: i64 },
}

/// What both time-series workloads are given.
#[derive(Debug, Clone)]
pub struct TsOptions {
    pub space: SeriesSpace,
    pub use_case: Option<UseCase>,
    pub points_per_request: u64,
    pub interval_ns: i64,
    pub timing: Timing,
    /// The run's sessions: series are leased in groups at least this many.
    pub sessions: u64,
}

impl TsOptions {
    pub fn layout(&self) -> Layout {
        Layout::new(
            self.space.series,
            self.space.measurements.len() as u64,
            self.points_per_request,
            self.sessions,
        )
    }

    /// Back-fill: the points each series gets.
    pub fn points_per_series(&self) -> Option<u64> {
        match self.timing {
            Timing::BackFill { start_ns, end_ns } => {
                Some(((end_ns - start_ns) as u64).div_ceil(self.interval_ns as u64))
            }
            Timing::RealTime => None,
        }
    }

    /// Back-fill: the requests that write every series' points.
    pub fn requests(&self) -> Option<u64> {
        self.points_per_series().map(|p| self.layout().requests(p))
    }

    fn to_map(&self) -> BTreeMap<String, Value> {
        let s = &self.space;
        let mut map = BTreeMap::from([
            ("series".to_string(), json!(s.series)),
            ("tags".to_string(), json!(s.tag_count())),
            ("tag_length".to_string(), json!(s.tag_length)),
            (
                "measurements".to_string(),
                json!(s.measurements.iter().map(|m| &m.name).collect::<Vec<_>>()),
            ),
            (
                "points_per_request".to_string(),
                json!(self.points_per_request),
            ),
            ("interval_ns".to_string(), json!(self.interval_ns)),
        ]);
        if let Some(u) = self.use_case {
            map.insert("use_case".to_string(), json!(u.as_str()));
        } else {
            map.insert("fields".to_string(), json!(s.measurements[0].fields.len()));
        }
        if let Timing::BackFill { start_ns, end_ns } = self.timing {
            map.insert("start_ns".to_string(), json!(start_ns));
            map.insert("end_ns".to_string(), json!(end_ns));
        }
        map
    }
}

/// Whose store a measurement's is.
#[derive(Debug, PartialEq, Eq)]
enum Owner {
    /// None there, or the database keeps none.
    Nobody,
    Loadcell,
    Other,
}

async fn owner<C: TsConn>(conn: &mut C, measurement: &str) -> Result<Owner, DriverError> {
    Ok(match conn.store_marker(measurement).await? {
        None => Owner::Nobody,
        Some(marker) if Tag::parse(&marker).is_some() => Owner::Loadcell,
        Some(_) => Owner::Other,
    })
}

/// Creates each measurement's store where the database needs one, marked
/// as loadcell's; leaves one loadcell made as it is, refuses another's.
async fn create_stores<C: TsConn>(
    conn: &mut C,
    space: &SeriesSpace,
    observer: &dyn PrepareObserver,
) -> Result<(), DriverError> {
    for m in &space.measurements {
        let name = &m.name;
        match owner(conn, name).await? {
            Owner::Nobody => {
                if conn.create_store(name, Tag::new().as_str()).await? {
                    observer.message(&format!("Created the store of '{name}'"));
                } else {
                    observer.message(&format!(
                        "Nothing to create for '{name}': this database keeps no stores"
                    ));
                }
            }
            Owner::Loadcell => observer.message(&format!(
                "The store of '{name}' was created by loadcell already: left as it is"
            )),
            Owner::Other => {
                return Err(DriverError::fatal(format!(
                    "the store of '{name}' exists and is not loadcell's (it carries no loadcell \
                     marker): choose another database or measurement, or drop it by hand"
                )))
            }
        }
    }
    Ok(())
}

/// The tag keys and fields loadcell writes for a measurement: a use
/// case's names (`listed`), or else `tagN` and `fieldN` (cleanup is not
/// told how many a run wrote).
struct OwnNames<'a> {
    measurement: &'a str,
    /// The tag keys and the fields.
    listed: Option<(Vec<&'a str>, Vec<&'a str>)>,
}

impl<'a> OwnNames<'a> {
    fn of(opts: &TsOptions, m: &'a Measurement) -> OwnNames<'a> {
        let listed = opts.use_case.map(|_| {
            let host = HOST_TAGS.iter().map(|&(key, _)| key);
            (
                host.chain(m.tags.iter().map(|t| t.key.as_str())).collect(),
                m.fields.iter().map(String::as_str).collect(),
            )
        });
        OwnNames {
            measurement: &m.name,
            listed,
        }
    }

    fn shape(&self) -> Shape<'_> {
        let (tags, fields) = match &self.listed {
            Some((tags, fields)) => (Names::Listed(tags), Names::Listed(fields)),
            None => (Names::Numbered("tag"), Names::Numbered("field")),
        };
        Shape {
            measurement: self.measurement,
            tags,
            fields,
        }
    }
}

/// `names`, the first three of them and how many more.
fn few(names: &[String]) -> String {
    let mut text = names.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 3 {
        text += &format!(" and {} more", names.len() - 3);
    }
    text
}

/// What cleanup drops of a measurement's points.
struct Removal<'a> {
    own: OwnNames<'a>,
    held: Holdings,
    /// In a store loadcell's `prepare` made (else a database that keeps no
    /// record of who wrote a series, deleted only with `--force`).
    marked: bool,
}

/// Drops each measurement's points loadcell wrote: its store where
/// `prepare` made one, then the database if nothing else is in it.
/// Decides for every measurement before dropping any: refuses, dropping
/// nothing, where another writer's points are in a store or nothing tells
/// whose the points are, unless `how.force`.
async fn cleanup<D>(
    opts: &TsOptions,
    driver: &D,
    how: &Cleanup,
    observer: &dyn PrepareObserver,
) -> Result<(), CleanupError>
where
    D: Driver,
    D::Conn: TsConn,
{
    let force = how.force;
    let (mut conn, _) = loadcell_engine::connect_once(driver, how.connect_timeout).await?;
    let mut removals = Vec::new();
    for m in &opts.space.measurements {
        let name = &m.name;
        let own = OwnNames::of(opts, m);
        let marked = match owner(&mut conn, name).await? {
            Owner::Other => {
                return Err(CleanupError::Refused(format!(
                    "the store of '{name}' was not created by loadcell (it carries no loadcell \
                     marker): left as it is"
                )))
            }
            Owner::Loadcell => true,
            Owner::Nobody => false,
        };
        let held = conn.holdings(own.shape()).await?;
        if !marked && held.names.is_empty() {
            observer.message(&format!(
                "Nothing to clean up for '{name}': there is no store or series of it"
            ));
            continue;
        }
        if !force && !held.foreign.is_empty() {
            return Err(CleanupError::Refused(format!(
                "the store of '{name}' is loadcell's but holds another writer's points ({}): \
                 left as it is; drop them by hand, or run cleanup with --force to drop them \
                 with loadcell's",
                few(&held.foreign)
            )));
        }
        if !force && !marked {
            return Err(CleanupError::Refused(format!(
                "nothing records who wrote {}: loadcell cannot tell its series of '{name}' from \
                 another writer's; left as they are; run cleanup with --force to delete them",
                few(&held.names)
            )));
        }
        removals.push(Removal { own, held, marked });
    }
    for Removal { own, held, marked } in &removals {
        let name = own.measurement;
        let message = match (marked, held.foreign.is_empty()) {
            (true, true) => format!(
                "Dropping the store of '{name}' ({}): loadcell's prepare made it, and it holds \
                 only loadcell's tags and fields...",
                if held.names.is_empty() {
                    "empty".to_string()
                } else {
                    few(&held.names)
                }
            ),
            (true, false) => format!(
                "Dropping the store of '{name}' with another writer's points in it ({}) \
                 (--force)...",
                few(&held.foreign)
            ),
            (false, _) => format!(
                "Deleting every series of {} (--force: nothing records who wrote them)...",
                few(&held.names)
            ),
        };
        observer.message(&message);
        conn.drop_store(own.shape(), &held.names).await?;
    }
    if removals.iter().any(|r| r.marked) {
        match conn.drop_database_if_empty().await? {
            DatabaseLeft::NotOwn => {}
            DatabaseLeft::Dropped(db) => observer.message(&format!(
                "Dropped database '{db}': loadcell's prepare created it, and nothing else is in it"
            )),
            DatabaseLeft::Holding(db, others) => observer.message(&format!(
                "Left database '{db}' as it is: it still holds {}, not this cleanup's to drop",
                few(&others)
            )),
        }
    }
    Ok(())
}

/// The check before a run: the first measurement's store is there (where
/// the database has stores), and for queries holds series.
///
/// A database without stores answers `store_marker` as one whose store is
/// missing does; the series count tells them apart: it fails only where
/// the store is missing.
async fn check_store<C: TsConn>(
    conn: &mut C,
    space: &SeriesSpace,
    need_series: bool,
) -> Result<(), CheckError> {
    let m = &space.measurements[0];
    let marked = conn.store_marker(&m.name).await?.is_some();
    let held = match conn.series_count(&m.name, &m.fields[0], None).await {
        Ok(n) => n,
        Err(e) if marked || e.class == ErrorClass::Connection => return Err(e.into()),
        Err(e) => {
            return Err(CheckError::NotPrepared(NotPrepared(format!(
                "the store of '{}' does not exist ({e})",
                m.name
            ))))
        }
    };
    if need_series && held == 0 {
        return Err(CheckError::NotPrepared(NotPrepared(format!(
            "the database holds no series of '{}': run ts-ingest with the same options first",
            m.name
        ))));
    }
    Ok(())
}

/// How `ts-ingest` proves its points arrived.
#[derive(Debug, Clone, Copy)]
pub struct VerifyOptions {
    /// Series spot-checked.
    pub sample: u64,
    /// How long to wait for the database to show what it acknowledged.
    pub timeout: Duration,
}

/// `ts-ingest`.
#[derive(Debug, Clone)]
pub struct TsIngestWorkload {
    pub opts: TsOptions,
    pub verify: VerifyOptions,
}

impl Workload for TsIngestWorkload {
    fn name(&self) -> &'static str {
        "ts-ingest"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::TIME_SERIES]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        let mut map = self.opts.to_map();
        map.insert("verify_sample".to_string(), json!(self.verify.sample));
        map
    }
}

impl<C: TsConn> Lifecycle<C, TimeSeriesFamily> for TsIngestWorkload {
    type Script = IngestScript;

    fn script(&self, seed: u64, _driver: &DriverInfo) -> IngestScript {
        IngestScript::new(&self.opts, seed)
    }

    async fn check(&self, _script: &IngestScript, conn: &mut C) -> Result<(), CheckError> {
        if !C::ACKNOWLEDGED && self.verify.sample == 0 {
            return Err(CheckError::Driver(DriverError::fatal(
                "--verify-sample 0: this target's transport acknowledges no point, so the spot \
                 checks after the run are the only proof they arrived: give 1 or more",
            )));
        }
        check_store(conn, &self.opts.space, false).await
    }

    /// Counts the series and spot-checks some, against what was sent.
    async fn verify<D>(
        &self,
        script: &IngestScript,
        driver: &D,
        connect_timeout: Duration,
    ) -> Result<Option<Verification>, DriverError>
    where
        D: Driver<Conn = C>,
    {
        let (mut conn, _) = loadcell_engine::connect_once(driver, connect_timeout).await?;
        let v = &self.verify;
        let verification = script.verify(&mut conn, v.sample, v.timeout).await?;
        Ok(Some(verification))
    }

    /// Creates the stores only: writing is the run.
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
        create_stores(&mut conn, &self.opts.space, &*observer).await
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
        cleanup(&self.opts, driver, how, observer).await
    }
}

/// `ts-query`.
#[derive(Debug, Clone)]
pub struct TsQueryWorkload {
    pub opts: TsOptions,
    pub queries: Vec<QueryKind>,
    pub distribution: RandType,
}

impl Workload for TsQueryWorkload {
    fn name(&self) -> &'static str {
        "ts-query"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::TIME_SERIES]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        let mut map = self.opts.to_map();
        let names: Vec<_> = self.queries.iter().map(|q| q.as_str()).collect();
        map.insert("queries".to_string(), json!(names));
        map.insert(
            "series_distribution".to_string(),
            json!(self.distribution.as_str()),
        );
        map
    }
}

impl<C: TsConn> Lifecycle<C, TimeSeriesFamily> for TsQueryWorkload {
    type Script = QueryScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> QueryScript {
        QueryScript::new(&self.opts, &self.queries, self.distribution)
    }

    async fn check(&self, _script: &QueryScript, conn: &mut C) -> Result<(), CheckError> {
        check_store(conn, &self.opts.space, true).await
    }

    /// Creates the stores; the points are `ts-ingest`'s to write.
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
        create_stores(&mut conn, &self.opts.space, &*observer).await
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
        cleanup(&self.opts, driver, how, observer).await
    }
}

#[cfg(test)]
mod tests;
