//! The composition root: a job (prepare, run, cleanup) meets a concrete
//! driver here. Each job is a [`Visitor`], so the engine and workload are
//! monomorphised for the driver and nothing on the hot path is dynamic.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context as _};
use loadcell_core::sql::SqlConn;
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, Target};
use loadcell_drivers::{DriverInfo, Visitor};
use loadcell_engine::{Arrival, EnginePlan, RateSpec, Script};
use loadcell_workloads::oltp::{self, CheckError, Oltp};

use crate::args::RunArgs;
use crate::progress::{LiveLines, PrepareProgress};
use crate::result::{self, ResultContext};
use crate::workload::WorkloadSpec;

/// How long in-flight events may finish once the run is told to stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Exit codes beyond 0 (success) and 1 (error).
pub const EXIT_INTERRUPTED: i32 = 130;

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
    let WorkloadSpec::Oltp { kind, opts } = spec;
    let progress = Rc::new(PrepareProgress::new());
    let result = oltp::prepare(
        Arc::clone(driver),
        *kind,
        opts,
        threads,
        connect_timeout,
        0,
        progress.clone(),
    )
    .await;
    progress.finish();
    result.map_err(|e| connect_error(&driver.endpoint(), e))
}

pub struct CleanupJob {
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
            oltp::cleanup(&mut conn, &progress)
                .await
                .map_err(|e| anyhow!("{e}"))?;
            progress.finish();
            Ok(())
        })
    }
}

pub struct RunJob<'a> {
    pub args: &'a RunArgs,
    pub spec: WorkloadSpec,
    pub target: Target,
    /// The embedded default: prepared on first use.
    pub default_target: bool,
    pub argv: Vec<String>,
}

impl RunJob<'_> {
    fn plan(&self, seed: u64) -> EnginePlan {
        let a = self.args;
        EnginePlan {
            threads: a.threads,
            clients: a.clients,
            time: match (a.time, a.events) {
                (Some(t), _) => Some(t),
                (None, Some(_)) => None,
                (None, None) => Some(Duration::from_secs(10)),
            },
            events: a.events,
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
            reconnect_timeout: a.reconnect_timeout,
            drain_timeout: DRAIN_TIMEOUT,
            seed,
        }
    }
}

impl Visitor for RunJob<'_> {
    type Output = anyhow::Result<i32>;

    fn sql<D>(self, info: &'static DriverInfo, driver: D) -> anyhow::Result<i32>
    where
        D: Driver,
        D::Conn: SqlConn,
    {
        let driver = Arc::new(driver);
        let seed = self.args.seed.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
        let WorkloadSpec::Oltp { kind, opts } = &self.spec;
        let script = Arc::new(Oltp::new(*kind, opts.clone(), seed));
        let timeout = self.args.target.connect_timeout;
        let endpoint = driver.endpoint();

        let server = block_on(async {
            if self.args.prepare {
                prepare_sql(&driver, &self.spec, self.args.threads, timeout).await?;
            }
            let (mut conn, server) = loadcell_engine::connect_once(&*driver, timeout)
                .await
                .map_err(|e| connect_error(&endpoint, e))?;
            match script.check(&mut conn).await {
                Ok(()) => {}
                Err(CheckError::NotPrepared(_)) if self.default_target => {
                    drop(conn);
                    eprintln!("Preparing the embedded default target {}", self.target);
                    prepare_sql(&driver, &self.spec, self.args.threads, timeout).await?;
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

        let plan = self.plan(seed);
        let ops = <Oltp as Script<D::Conn>>::ops(&script);
        let mut live = LiveLines {
            enabled: self.args.report_interval.is_some(),
            sessions: plan.sessions(),
            categories: ops.iter().map(|o| o.category.as_str()).collect(),
        };
        eprintln!(
            "Running {} on {} ({} {}): {} sessions, {}",
            self.spec.name(),
            self.target,
            server.product,
            server.version,
            plan.sessions(),
            match (plan.rate, plan.time, plan.events) {
                (Some(r), _, _) => format!("open loop at {} events/s", r.per_sec),
                (None, _, _) => "closed loop".to_string(),
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
            server: Some(server),
            plan: &plan,
            labels: self.args.labels.iter().cloned().collect(),
            ops,
            transactional: <Oltp as Script<D::Conn>>::transactional(&script),
            sql: true,
        };
        let result = result::build(&ctx, outcome);
        let out = self.args.out.clone().unwrap_or_else(|| {
            result::default_path(&self.args.target.results_dir, self.spec.name())
        });
        result
            .write_to(&out)
            .with_context(|| format!("cannot write the result file {}", out.display()))?;
        if self.args.json {
            println!("{}", result.to_json_pretty());
        } else {
            let order: Vec<&str> = ops.iter().map(|o| o.name).collect();
            print!("{}", loadcell_report::text::summary(&result, &order));
        }
        eprintln!("Result written to {}", out.display());
        Ok(match result.stop_reason {
            loadcell_record::result::StopReason::Completed => 0,
            loadcell_record::result::StopReason::Interrupted => EXIT_INTERRUPTED,
            _ => 1,
        })
    }
}
