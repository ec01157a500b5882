//! The composition root: a job (prepare, run, cleanup) meets a concrete
//! driver here. Each job is a [`Visitor`], so the engine and workload are
//! monomorphised for the driver and nothing on the hot path is dynamic.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context as _};
use loadcell_core::kv::KvConn;
use loadcell_core::sql::SqlConn;
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, Target};
use loadcell_drivers::{DriverInfo, Visitor};
use loadcell_engine::{Arrival, RateSpec, RunSpec, Script};
use loadcell_record::result::{RunResult, StopReason};
use loadcell_workloads::dataset::{self, DataSetKv};
use loadcell_workloads::kv::{self, Kv};
use loadcell_workloads::oltp::{self, Oltp};
use loadcell_workloads::prepare::CheckError;
use loadcell_workloads::ycsb::{self, YcsbKv, YcsbSql};

use crate::args::RunArgs;
use crate::progress::{HdrLog, Metrics, PrepareProgress, RunObserver};
use crate::result::{self, ResultContext};
use crate::workload::WorkloadSpec;

/// The visitor for a family is only called for a workload of that family:
/// `main` checks families before opening the driver.
const FAMILY_CHECKED: &str = "workload and driver families are checked before opening";

/// How long in-flight events may finish once the run is told to stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Exit codes beyond 0 (success) and 1 (error).
pub const EXIT_INTERRUPTED: i32 = 130;

/// The exit code for a finished run: 0 complete, 130 interrupted, 1 other.
pub fn exit_code(r: &RunResult) -> i32 {
    match r.stop_reason {
        StopReason::Completed => 0,
        StopReason::Interrupted => EXIT_INTERRUPTED,
        _ => 1,
    }
}

/// Runs `f` to completion on a current-thread runtime with a `LocalSet`
/// (driver futures are not `Send`).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime can always be built");
    tokio::task::LocalSet::new().block_on(&runtime, f)
}

/// Turns a connection-time driver error into a message for the user.
fn connect_error(endpoint: &str, e: DriverError) -> anyhow::Error {
    match e.class {
        ErrorClass::Connection if !e.message.contains(endpoint) => {
            anyhow!("cannot connect to {endpoint}: {e}")
        }
        _ => anyhow!("{e}"),
    }
}

pub struct PrepareJob {
    pub spec: WorkloadSpec,
    pub threads: usize,
    pub connect_timeout: Duration,
}

impl Visitor for PrepareJob {
    type Output = anyhow::Result<()>;

    fn sql<D>(self, _info: &'static DriverInfo, driver: D) -> anyhow::Result<()>
    where
        D: Driver,
        D::Conn: SqlConn,
    {
        let driver = Arc::new(driver);
        block_on(prepare_sql(
            &driver,
            &self.spec,
            self.threads,
            self.connect_timeout,
        ))
    }

    fn kv<D>(self, info: &'static DriverInfo, driver: D) -> anyhow::Result<()>
    where
        D: Driver,
        D::Conn: KvConn,
    {
        let driver = Arc::new(driver);
        block_on(prepare_kv(
            &driver,
            info,
            &self.spec,
            self.threads,
            self.connect_timeout,
        ))
    }
}

async fn prepare_kv<D>(
    driver: &Arc<D>,
    info: &'static DriverInfo,
    spec: &WorkloadSpec,
    threads: usize,
    connect_timeout: Duration,
) -> anyhow::Result<()>
where
    D: Driver,
    D::Conn: KvConn,
{
    let progress = Rc::new(PrepareProgress::new());
    let result = match spec {
        WorkloadSpec::Kv { opts } => {
            kv::prepare(
                Arc::clone(driver),
                opts,
                threads,
                connect_timeout,
                progress.clone(),
            )
            .await
        }
        WorkloadSpec::Dataset { set, .. } => {
            dataset::prepare(
                Arc::clone(driver),
                Arc::clone(set),
                threads,
                connect_timeout,
                progress.clone(),
            )
            .await
        }
        WorkloadSpec::Ycsb { opts, .. } => {
            ycsb::prepare_kv(
                Arc::clone(driver),
                opts,
                info.kv.commands,
                threads,
                connect_timeout,
                0,
                progress.clone(),
            )
            .await
        }
        WorkloadSpec::Oltp { .. } => unreachable!("{FAMILY_CHECKED}"),
    };
    progress.finish();
    result.map_err(|e| connect_error(&driver.endpoint(), e))
}

async fn prepare_sql<D>(
    driver: &Arc<D>,
    spec: &WorkloadSpec,
    threads: usize,
    connect_timeout: Duration,
) -> anyhow::Result<()>
where
    D: Driver,
    D::Conn: SqlConn,
{
    let progress = Rc::new(PrepareProgress::new());
    let result = match spec {
        WorkloadSpec::Oltp { kind, opts } => {
            oltp::prepare(
                Arc::clone(driver),
                *kind,
                opts,
                threads,
                connect_timeout,
                0,
                progress.clone(),
            )
            .await
        }
        WorkloadSpec::Ycsb { opts, .. } => {
            ycsb::prepare_sql(
                Arc::clone(driver),
                opts,
                threads,
                connect_timeout,
                0,
                progress.clone(),
            )
            .await
        }
        WorkloadSpec::Kv { .. } | WorkloadSpec::Dataset { .. } => {
            unreachable!("{FAMILY_CHECKED}")
        }
    };
    progress.finish();
    result.map_err(|e| connect_error(&driver.endpoint(), e))
}

pub struct CleanupJob {
    pub spec: WorkloadSpec,
    pub connect_timeout: Duration,
}

impl Visitor for CleanupJob {
    type Output = anyhow::Result<()>;

    fn sql<D>(self, _info: &'static DriverInfo, driver: D) -> anyhow::Result<()>
    where
        D: Driver,
        D::Conn: SqlConn,
    {
        block_on(async {
            let (mut conn, _) = loadcell_engine::connect_once(&driver, self.connect_timeout)
                .await
                .map_err(|e| connect_error(&driver.endpoint(), e))?;
            let progress = PrepareProgress::new();
            match self.spec {
                WorkloadSpec::Ycsb { .. } => ycsb::cleanup(&mut conn, &progress).await,
                _ => oltp::cleanup(&mut conn, &progress).await,
            }
            .map_err(|e| anyhow!("{e}"))?;
            progress.finish();
            Ok(())
        })
    }

    fn kv<D>(self, _info: &'static DriverInfo, driver: D) -> anyhow::Result<()>
    where
        D: Driver,
        D::Conn: KvConn,
    {
        let WorkloadSpec::Dataset { set, .. } = &self.spec else {
            bail!(
                "cleanup is not available for key-value targets: loadcell does not track which keys it wrote, \
                 and it never deletes data it cannot prove it created (a --dataset is the exception: \
                 its prepare records what it loaded)"
            )
        };
        block_on(async {
            let (mut conn, _) = loadcell_engine::connect_once(&driver, self.connect_timeout)
                .await
                .map_err(|e| connect_error(&driver.endpoint(), e))?;
            let progress = PrepareProgress::new();
            let result = dataset::cleanup(&mut conn, set, &progress).await;
            progress.finish();
            result.map_err(|e| anyhow!("{e}"))?;
            Ok(())
        })
    }
}

/// OS worker threads for a run: `--workers`, or one per core but no more
/// than `--threads`. More sessions per thread costs the client less: a
/// thread that wakes finds several replies waiting instead of one. Drivers
/// whose calls block get a thread per `--threads`, as asked.
fn workers(a: &RunArgs, info: &DriverInfo) -> usize {
    match a.workers {
        Some(w) => w,
        None if info.blocking => a.threads,
        None => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            a.threads.min(cores)
        }
    }
}

pub struct RunJob<'a> {
    pub args: &'a RunArgs,
    pub spec: WorkloadSpec,
    pub target: Target,
    /// The embedded default: prepared on first use.
    pub default_target: bool,
    pub argv: Vec<String>,
    /// A step of a sweep: no summary, no result file of its own.
    pub quiet: bool,
}

impl RunJob<'_> {
    /// An event limit the workload's own options imply: memtier's
    /// `--requests` (per connection) as a total event count (with
    /// `--pipeline N` an event is a batch of N requests); YCSB's
    /// `--operation-count` (one operation per event), given or, without
    /// `--time`, its default.
    fn implied_events(&self) -> Option<u64> {
        match &self.spec {
            WorkloadSpec::Kv { opts } | WorkloadSpec::Dataset { opts, .. } => {
                let sessions = (self.args.threads * self.args.clients) as u64;
                self.args
                    .kv
                    .requests
                    .map(|r| r.saturating_mul(sessions).div_ceil(opts.pipeline as u64))
            }
            WorkloadSpec::Ycsb { opts, .. } => self
                .args
                .ycsb
                .operation_count
                .or_else(|| self.args.time.is_none().then_some(opts.operation_count)),
            WorkloadSpec::Oltp { .. } => None,
        }
    }

    fn seed(&self) -> u64 {
        self.args.seed.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
    }

    /// The server's process on this host (for CPU and memory samples):
    /// `--server-pid`, or else the listener of the target's port on a
    /// loopback address.
    fn server_pid(&self) -> Option<u32> {
        if self.args.server_pid.is_some() {
            return self.args.server_pid;
        }
        let url = self.target.url();
        let local = matches!(
            url.host_str(),
            Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
        );
        if !local {
            return None;
        }
        loadcell_record::resources::find_listener(url.port()?)
    }

    fn plan(&self, seed: u64, info: &DriverInfo) -> RunSpec {
        let a = self.args;
        RunSpec {
            threads: a.threads,
            clients: a.clients,
            workers: workers(a, info),
            time: match (a.time, a.events.or_else(|| self.implied_events())) {
                (Some(t), _) => Some(t),
                (None, Some(_)) => None,
                (None, None) => Some(Duration::from_secs(10)),
            },
            events: a.events.or_else(|| self.implied_events()),
            warmup: a.warmup,
            rate: a.rate.map(|per_sec| RateSpec {
                per_sec,
                arrival: if a.arrival == "uniform" {
                    Arrival::Uniform
                } else {
                    Arrival::Poisson
                },
            }),
            interval: a.report_interval.unwrap_or(Duration::from_secs(1)),
            connect_timeout: a.target.connect_timeout,
            connection_policy: a.connection_policy,
            reconnect_timeout: a.reconnect_timeout,
            drain_timeout: DRAIN_TIMEOUT,
            seed,
            server_pid: self.server_pid(),
        }
    }
}

/// A script that can tell whether its data set is there, before any load.
trait CheckPrepared<C> {
    async fn check_prepared(&self, conn: &mut C) -> Result<(), CheckError>;
}

impl<C: SqlConn> CheckPrepared<C> for Oltp {
    async fn check_prepared(&self, conn: &mut C) -> Result<(), CheckError> {
        self.check(conn).await
    }
}

impl<C: SqlConn> CheckPrepared<C> for YcsbSql {
    async fn check_prepared(&self, conn: &mut C) -> Result<(), CheckError> {
        self.check(conn).await
    }
}

impl<C: KvConn> CheckPrepared<C> for YcsbKv {
    async fn check_prepared(&self, conn: &mut C) -> Result<(), CheckError> {
        self.check(conn).await
    }
}

impl<C: KvConn> CheckPrepared<C> for DataSetKv {
    async fn check_prepared(&self, conn: &mut C) -> Result<(), CheckError> {
        self.check(conn).await
    }
}

/// memtier's model needs nothing prepared: its GETs of keys never set are
/// the misses a cache benchmark measures.
impl<C: KvConn> CheckPrepared<C> for Kv {
    async fn check_prepared(&self, _conn: &mut C) -> Result<(), CheckError> {
        Ok(())
    }
}

impl Visitor for RunJob<'_> {
    type Output = anyhow::Result<RunResult>;

    fn sql<D>(self, info: &'static DriverInfo, driver: D) -> anyhow::Result<RunResult>
    where
        D: Driver,
        D::Conn: SqlConn,
    {
        let driver = Arc::new(driver);
        let seed = self.seed();
        match &self.spec {
            WorkloadSpec::Oltp { kind, opts } => {
                let script = Arc::new(Oltp::new(*kind, opts.clone(), seed));
                self.run_sql(info, driver, script, seed)
            }
            WorkloadSpec::Ycsb { opts, .. } => {
                let script = Arc::new(YcsbSql::new(opts.clone()));
                self.run_sql(info, driver, script, seed)
            }
            WorkloadSpec::Kv { .. } | WorkloadSpec::Dataset { .. } => {
                unreachable!("{FAMILY_CHECKED}")
            }
        }
    }

    fn kv<D>(self, info: &'static DriverInfo, driver: D) -> anyhow::Result<RunResult>
    where
        D: Driver,
        D::Conn: KvConn,
    {
        let driver = Arc::new(driver);
        let seed = self.seed();
        match &self.spec {
            WorkloadSpec::Kv { opts } => {
                let script = Arc::new(Kv::new(opts.clone()));
                self.run_kv(info, driver, script, seed)
            }
            WorkloadSpec::Dataset { set, opts } => {
                let script = Arc::new(DataSetKv::new(Arc::clone(set), opts.clone()));
                self.run_kv(info, driver, script, seed)
            }
            WorkloadSpec::Ycsb { opts, .. } => {
                // Hashes and a sorted-set index where the driver takes
                // commands; one value per record where it only gets and sets.
                let script = Arc::new(YcsbKv::new(opts.clone(), info.kv.commands));
                self.run_kv(info, driver, script, seed)
            }
            WorkloadSpec::Oltp { .. } => unreachable!("{FAMILY_CHECKED}"),
        }
    }
}

impl RunJob<'_> {
    /// Where the result goes, and the HdrHistogram log's directory: both
    /// checked before any load, since the run's numbers would otherwise be
    /// lost at its end.
    fn check_outputs(&self) -> anyhow::Result<()> {
        if !self.quiet {
            let dest = result::destination(
                self.args.out.as_deref(),
                &self.args.target.results_dir,
                self.spec.name(),
            );
            loadcell_record::file::check_writable(&dest)
                .with_context(|| format!("cannot write the result file {dest}"))?;
        }
        if let Some(path) = &self.args.hdr_log {
            let dest = loadcell_record::file::Destination::Named(path.clone());
            loadcell_record::file::check_writable(&dest)
                .with_context(|| format!("cannot write --hdr-log {}", path.display()))?;
        }
        Ok(())
    }

    fn run_sql<D, S>(
        self,
        info: &'static DriverInfo,
        driver: Arc<D>,
        script: Arc<S>,
        seed: u64,
    ) -> anyhow::Result<RunResult>
    where
        D: Driver,
        D::Conn: SqlConn,
        S: Script<D::Conn> + CheckPrepared<D::Conn> + Send + Sync,
    {
        let threads = self.args.threads;
        let timeout = self.args.target.connect_timeout;
        let spec = self.spec.clone();
        let prepare = || prepare_sql(&driver, &spec, threads, timeout);
        self.run_prepared(info, &driver, script, seed, prepare)
    }

    fn run_kv<D, S>(
        self,
        info: &'static DriverInfo,
        driver: Arc<D>,
        script: Arc<S>,
        seed: u64,
    ) -> anyhow::Result<RunResult>
    where
        D: Driver,
        D::Conn: KvConn,
        S: Script<D::Conn> + CheckPrepared<D::Conn> + Send + Sync,
    {
        let threads = self.args.threads;
        let timeout = self.args.target.connect_timeout;
        let spec = self.spec.clone();
        let prepare = || prepare_kv(&driver, info, &spec, threads, timeout);
        self.run_prepared(info, &driver, script, seed, prepare)
    }

    /// Prepares if asked (or if the embedded default target is empty),
    /// checks the data set, then runs.
    fn run_prepared<D, S, F>(
        self,
        info: &'static DriverInfo,
        driver: &Arc<D>,
        script: Arc<S>,
        seed: u64,
        prepare: impl Fn() -> F,
    ) -> anyhow::Result<RunResult>
    where
        D: Driver,
        S: Script<D::Conn> + CheckPrepared<D::Conn> + Send + Sync,
        F: std::future::Future<Output = anyhow::Result<()>>,
    {
        self.check_outputs()?;
        let timeout = self.args.target.connect_timeout;
        let endpoint = driver.endpoint();
        let server = block_on(async {
            if self.args.prepare {
                prepare().await?;
            }
            let (mut conn, server) = loadcell_engine::connect_once(&**driver, timeout)
                .await
                .map_err(|e| connect_error(&endpoint, e))?;
            match script.check_prepared(&mut conn).await {
                Ok(()) => {}
                Err(CheckError::NotPrepared(_)) if self.default_target => {
                    drop(conn);
                    eprintln!("Preparing the embedded default target {}", self.target);
                    prepare().await?;
                }
                Err(CheckError::NotPrepared(missing)) => bail!(
                    "{missing} at {}: run `loadcell prepare {} --target '{}' {}` first, or add --prepare",
                    self.target,
                    self.spec.name(),
                    self.target,
                    self.spec.prepare_hint()
                ),
                Err(CheckError::Driver(e)) => return Err(anyhow!("{e}")),
            }
            Ok::<ServerInfo, anyhow::Error>(server)
        })?;
        self.execute(info, Arc::clone(driver), script, server, seed)
    }
}

impl RunJob<'_> {
    /// The load phase and the result, the same for every family.
    fn execute<D, S>(
        self,
        info: &'static DriverInfo,
        driver: Arc<D>,
        script: Arc<S>,
        server: ServerInfo,
        seed: u64,
    ) -> anyhow::Result<RunResult>
    where
        D: Driver,
        S: Script<D::Conn> + Send + Sync,
    {
        let plan = self.plan(seed, info);
        let ops = script.ops();
        let hdr_log = match &self.args.hdr_log {
            Some(path) => Some(HdrLog::create(
                path,
                &format!("loadcell {} on {}", self.spec.name(), self.target),
            )?),
            None => None,
        };
        let metrics = match self.args.metrics_addr {
            Some(addr) => Some(Metrics {
                exposition: crate::metrics::serve(addr)?,
                cumulative: loadcell_record::Stats::new(ops.len()),
                workload: self.spec.name().to_string(),
                target: self.target.redacted(),
            }),
            None => None,
        };
        let mut live = RunObserver {
            live_lines: self.args.report_interval.is_some(),
            sessions: plan.sessions(),
            ops: ops.iter().map(|o| o.name).collect(),
            categories: ops.iter().map(|o| o.category.as_str()).collect(),
            hdr_log,
            metrics,
        };
        eprintln!(
            "Running {} on {} ({} {}): {}, {}",
            self.spec.name(),
            self.target,
            server.product,
            server.version,
            loadcell_core::words::counted(plan.sessions() as u64, "session"),
            match plan.rate {
                Some(r) => format!("open loop at {} events/s", r.per_sec),
                None => "closed loop".to_string(),
            }
        );
        let outcome =
            loadcell_engine::run(Arc::clone(&driver), Arc::clone(&script), &plan, &mut live);
        let ctx = ResultContext {
            argv: &self.argv,
            workload: self.spec.name(),
            workload_options: self.spec.options(),
            target: &self.target,
            driver: info.name,
            family: info.family,
            server: Some(server),
            plan: &plan,
            labels: self.args.labels.iter().cloned().collect(),
            ops,
            transactional: script.transactional(),
        };
        let result = result::build(&ctx, outcome);
        if self.quiet {
            return Ok(result);
        }
        let dest = result::destination(
            self.args.out.as_deref(),
            &self.args.target.results_dir,
            self.spec.name(),
        );
        let out = result
            .write(&dest)
            .with_context(|| format!("cannot write the result file {dest}"))?;
        if self.args.json {
            println!("{}", result.to_json_pretty());
        } else {
            let order: Vec<&str> = ops.iter().map(|o| o.name).collect();
            print!("{}", loadcell_report::text::summary(&result, &order));
        }
        eprintln!("Result written to {}", out.display());
        Ok(result)
    }
}
