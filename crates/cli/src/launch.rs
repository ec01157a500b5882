//! The composition root: a job (prepare, run, cleanup) meets a concrete
//! driver here. Each job is a [`Visitor`], so the engine and workload are
//! monomorphised for the driver and nothing on the hot path is dynamic.

use std::rc::Rc;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{anyhow, bail, Context as _};
use loadcell_core::{Driver, DriverError, DriverInfo, ErrorClass, ServerInfo, Target};
use loadcell_drivers::OpenError;
use loadcell_engine::{OpSpec, RunSpec, Script};
use loadcell_record::result::{RunResult, StopReason};
use loadcell_workloads::prepare::CheckError;
use loadcell_workloads::workload::{Cleanup, CleanupError, Lifecycle, Loading};

use crate::args::RunArgs;
use crate::config::RunConfig;
use crate::export::{Exporter, Labels};
use crate::progress::{HdrLog, Metrics, PrepareProgress, RunObserver};
use crate::result::{self, ResultContext};
use crate::watch::feed::Feed;
use crate::watch::wire::Origin;
use crate::workload::WorkloadSpec;

/// A job (prepare, run, cleanup): one generic path for any driver and any
/// workload that runs on its family, monomorphised for both.
pub trait Job {
    type Output;
    fn drive<D, W, F>(self, info: &'static DriverInfo, driver: D, workload: &W) -> Self::Output
    where
        D: Driver,
        W: Lifecycle<D::Conn, F>;
}

/// Opens the target's driver in a family the workload runs on and hands
/// the job both.
pub fn launch<J: Job>(
    spec: &WorkloadSpec,
    target: &Target,
    job: J,
) -> Result<J::Output, loadcell_drivers::OpenError> {
    spec.launch(target, job)
}

/// A workload type's dispatch to drivers, declared with [`runs_on!`].
pub trait Launch {
    /// Opens the target's driver in a family the workload runs on and
    /// hands the job both.
    fn launch<J: Job>(&self, target: &Target, job: J) -> Result<J::Output, OpenError>;
    /// The [`Visitor`] methods it is served on.
    #[cfg(test)]
    fn dispatched(&self) -> Vec<&'static str>;
}

/// `runs_on!(Workload: sql, kv)`: the workload type runs on those driver
/// families (the [`Visitor`] methods of `loadcell_drivers`' registry).
/// Each only compiles for a workload that implements its lifecycle on that
/// family; `open` hands a workload only drivers of the families it names
/// (a test checks that they are served).
macro_rules! runs_on {
    ($workload:ty: $($method:ident),+) => {
        impl $crate::launch::Launch for $workload {
            fn launch<J: $crate::launch::Job>(
                &self,
                target: &loadcell_core::Target,
                job: J,
            ) -> Result<J::Output, loadcell_drivers::OpenError> {
                use loadcell_workloads::workload::Workload as _;
                loadcell_drivers::open(
                    target,
                    self.families(),
                    $crate::launch::On { workload: self, job },
                )
            }

            #[cfg(test)]
            fn dispatched(&self) -> Vec<&'static str> {
                vec![$(stringify!($method)),+]
            }
        }

        impl<J: $crate::launch::Job> loadcell_drivers::Visitor for $crate::launch::On<'_, $workload, J> {
            type Output = J::Output;
            $(loadcell_drivers::visit_family!($method => drive);)+
        }
    };
}
pub(crate) use runs_on;

/// A job on its way to a workload's driver (see [`runs_on!`]).
pub struct On<'a, W, J> {
    pub workload: &'a W,
    pub job: J,
}

impl<W, J: Job> On<'_, W, J> {
    /// Hands the driver, of family `F`, and the workload to the job.
    pub fn drive<D, F>(self, info: &'static DriverInfo, driver: D) -> J::Output
    where
        D: Driver,
        W: Lifecycle<D::Conn, F>,
    {
        self.job.drive::<D, W, F>(info, driver, self.workload)
    }
}

/// Exit codes beyond 0 (success) and 1 (error).
pub const EXIT_INTERRUPTED: i32 = 130;

/// A complete disk run whose IOPS fell short of `--expect-iops`, as
/// `compare --fail-if-regressed` exits on a regression.
pub const EXIT_BELOW_EXPECTATION: i32 = crate::views::EXIT_REGRESSED;

/// The exit code for a finished run: 0 complete, 3 complete but short of
/// `--expect-iops`, with data that did not arrive (its verification
/// failed) or with a `--threshold` gate failed, 130 interrupted, 1 other.
pub fn exit_code(r: &RunResult) -> i32 {
    let short = crate::disk::short_of_expectation(r)
        || r.verification.as_ref().is_some_and(|v| !v.ok)
        || r.gates.iter().any(|g| !g.passed);
    match r.stop_reason {
        StopReason::Completed if short => EXIT_BELOW_EXPECTATION,
        StopReason::Completed => 0,
        StopReason::Interrupted => EXIT_INTERRUPTED,
        _ => 1,
    }
}

/// Runs `f` to completion on a current-thread runtime with a `LocalSet`
/// (driver futures are not `Send`).
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime can always be built");
    tokio::task::LocalSet::new().block_on(&runtime, f)
}

/// Turns a connection-time driver error into a message for the user.
pub(crate) fn connect_error(endpoint: &str, e: DriverError) -> anyhow::Error {
    match e.class {
        ErrorClass::Connection if !e.message.contains(endpoint) => {
            anyhow!("cannot connect to {endpoint}: {e}")
        }
        _ => anyhow!("{e}"),
    }
}

pub struct PrepareJob {
    pub loading: Loading,
}

impl Job for PrepareJob {
    type Output = anyhow::Result<()>;

    fn drive<D, W, F>(self, info: &'static DriverInfo, driver: D, workload: &W) -> Self::Output
    where
        D: Driver,
        W: Lifecycle<D::Conn, F>,
    {
        block_on(prepare(&Arc::new(driver), info, workload, self.loading))
    }
}

/// Prepares, showing progress; connection errors say where.
async fn prepare<D, W, F>(
    driver: &Arc<D>,
    info: &'static DriverInfo,
    workload: &W,
    loading: Loading,
) -> anyhow::Result<()>
where
    D: Driver,
    W: Lifecycle<D::Conn, F>,
{
    let progress = Rc::new(PrepareProgress::new());
    let result = workload
        .prepare(Arc::clone(driver), info, loading, progress.clone())
        .await;
    progress.finish();
    result.map_err(|e| connect_error(&driver.endpoint(), e))
}

pub struct CleanupJob {
    pub how: Cleanup,
}

impl Job for CleanupJob {
    type Output = anyhow::Result<()>;

    fn drive<D, W, F>(self, _info: &'static DriverInfo, driver: D, workload: &W) -> Self::Output
    where
        D: Driver,
        W: Lifecycle<D::Conn, F>,
    {
        block_on(async {
            let progress = PrepareProgress::new();
            let result = workload.cleanup(&driver, &self.how, &progress).await;
            progress.finish();
            match result {
                Ok(()) => Ok(()),
                Err(CleanupError::Refused(why)) => Err(anyhow!(why)),
                Err(CleanupError::Driver(e)) => Err(connect_error(&driver.endpoint(), e)),
            }
        })
    }
}

/// OS worker threads for a run: `--workers`, or one per core but no more
/// than `--threads`. More sessions per thread costs the client less: a
/// thread that wakes finds several replies waiting instead of one. Drivers
/// whose calls block get a thread per `--threads`, as asked.
/// Sessions of other groups (`search-mixed`'s queries) count as threads of
/// their own, so that they need not wait behind the first group's work.
/// A shard runs `spec`'s part of the sessions: `--workers`, checked
/// against the whole run's, is cut to the shard's.
fn workers(a: &RunArgs, info: &DriverInfo, spec: &RunSpec) -> usize {
    match a.workers {
        Some(w) => w.min(spec.sessions()),
        None if info.blocking => spec.threads,
        None => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let other_sessions = spec.sessions() - spec.threads * spec.clients;
            (spec.threads + other_sessions).min(cores)
        }
    }
}

pub struct RunJob<'a> {
    pub config: &'a RunConfig,
    /// A step of a sweep: no summary, no result file of its own.
    pub quiet: bool,
}

impl RunJob<'_> {
    /// The server's process on this host (for CPU and memory samples):
    /// `--server-pid`, or else the listener of the target's port on a
    /// loopback address.
    fn server_pid(&self) -> Option<u32> {
        if self.config.args.server_pid.is_some() {
            return self.config.args.server_pid;
        }
        let url = self.config.target.url();
        let local = matches!(
            url.host_str(),
            Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
        );
        if !local {
            return None;
        }
        loadcell_record::resources::find_listener(url.port()?)
    }

    /// What the engine runs: the run's (this shard's) spec, with the
    /// worker threads, the server's process and whether the workload
    /// measures this machine's CPU settled for the driver.
    pub(crate) fn run_spec(&self, seed: u64, info: &DriverInfo) -> RunSpec {
        let mut spec = self.config.engine_spec(seed);
        spec.workers = workers(&self.config.args, info, &spec);
        spec.server_pid = self.server_pid();
        spec.measures_client_cpu = info.family == loadcell_core::Family::MACHINE;
        spec
    }
}

impl Job for RunJob<'_> {
    type Output = anyhow::Result<RunResult>;

    /// Prepares if asked (or if the embedded default target is empty),
    /// checks the data set, then runs.
    fn drive<D, W, F>(self, info: &'static DriverInfo, driver: D, workload: &W) -> Self::Output
    where
        D: Driver,
        W: Lifecycle<D::Conn, F>,
    {
        self.check_outputs()?;
        let driver = Arc::new(driver);
        let seed = self.config.seed();
        let script = Arc::new(workload.script(seed, info));
        let timeout = self.config.args.target.connect_timeout;
        let loading = Loading {
            connections: self.config.args.threads * self.config.args.clients,
            connect_timeout: timeout,
        };
        let endpoint = driver.endpoint();
        let server = block_on(async {
            if self.config.args.prepare {
                prepare(&driver, info, workload, loading).await?;
            }
            let (mut conn, server) = loadcell_engine::connect_once(&*driver, timeout)
                .await
                .map_err(|e| connect_error(&endpoint, e))?;
            match workload.check(&script, &mut conn).await {
                Ok(()) => {}
                Err(CheckError::NotPrepared(_)) if self.config.default_target => {
                    drop(conn);
                    eprintln!("Preparing the embedded default target {}", self.config.target);
                    prepare(&driver, info, workload, loading).await?;
                }
                Err(CheckError::NotPrepared(missing)) => bail!(
                    "{missing} at {}: run `loadcell prepare {} --target '{}' {}` first, or add --prepare",
                    self.config.target,
                    self.config.spec.name(),
                    self.config.target,
                    self.config.spec.prepare_hint()
                ),
                Err(CheckError::Driver(e)) => return Err(anyhow!("{e}")),
            }
            Ok::<ServerInfo, anyhow::Error>(server)
        })?;
        let (result, ops, watch) =
            self.execute(info, Arc::clone(&driver), Arc::clone(&script), server, seed)?;
        let mut result = self.verify(workload, &*driver, &script, result);
        // The watcher gets the result as checked, before its own gates.
        if let Some(feed) = watch {
            result.warnings.extend(feed.finish(&result));
        }
        self.publish(result, &ops)
    }
}

impl RunJob<'_> {
    /// Where the result file goes: `--out`, or a new name in the results
    /// directory.
    fn destination(&self) -> loadcell_record::file::Destination {
        let args = &self.config.args;
        result::destination(
            args.out.as_deref(),
            &args.target.results_dir,
            self.config.spec.name(),
        )
    }

    /// Where the result goes, and the HdrHistogram log's directory: both
    /// checked before any load, since the run's numbers would otherwise be
    /// lost at its end.
    pub(crate) fn check_outputs(&self) -> anyhow::Result<()> {
        if !self.quiet {
            let dest = self.destination();
            loadcell_record::file::check_writable(&dest)
                .with_context(|| format!("cannot write the result file {dest}"))?;
        }
        if let Some(path) = &self.config.args.hdr_log {
            let dest = loadcell_record::file::Destination::Named(path.clone());
            loadcell_record::file::check_writable(&dest)
                .with_context(|| format!("cannot write --hdr-log {}", path.display()))?;
        }
        Ok(())
    }

    /// The run's HdrHistogram interval log, every interval at full
    /// resolution on disk while the result keeps a bounded number:
    /// `--hdr-log`, else next to the result file (`NAME.hlog` for
    /// `NAME.json`); none for a sweep's step, nor for a result written to
    /// a device or a pipe.
    fn hdr_log(&self, comment: &str) -> anyhow::Result<Option<HdrLog>> {
        if let Some(path) = &self.config.args.hdr_log {
            return HdrLog::create(path, comment).map(Some);
        }
        if self.quiet {
            return Ok(None);
        }
        match self.destination() {
            loadcell_record::file::Destination::Named(path) => {
                if path.exists() && !path.is_file() {
                    return Ok(None);
                }
                HdrLog::create(&path.with_extension("hlog"), comment).map(Some)
            }
            loadcell_record::file::Destination::New { dir, stem } => {
                HdrLog::create_new(&dir, &stem, comment).map(Some)
            }
        }
    }

    /// The check after the run: whether what the run wrote arrived
    /// (nothing to check, for most workloads). A check that cannot be
    /// made (the server went away) is a warning: the run's numbers stand.
    fn verify<D, W, F>(
        &self,
        workload: &W,
        driver: &D,
        script: &W::Script,
        mut result: RunResult,
    ) -> RunResult
    where
        D: Driver,
        W: Lifecycle<D::Conn, F>,
    {
        let timeout = self.config.args.target.connect_timeout;
        match block_on(workload.verify(script, driver, timeout)) {
            Ok(verification) => result.verification = verification,
            Err(e) => result
                .warnings
                .push(format!("the check after the run could not be made: {e}")),
        }
        result
    }

    /// The load phase and the result, the same for every family.
    fn execute<D, S>(
        &self,
        info: &'static DriverInfo,
        driver: Arc<D>,
        script: Arc<S>,
        server: ServerInfo,
        seed: u64,
    ) -> anyhow::Result<(RunResult, Vec<OpSpec>, Option<Feed>)>
    where
        D: Driver,
        S: Script<D::Conn> + Send + Sync,
    {
        let mut spec = self.run_spec(seed, info);
        spec.server_metrics =
            crate::scrape::start(&self.config.args.server_metrics, spec.interval)?;
        let ops = script.ops();
        let hdr_log = self.hdr_log(&format!(
            "loadcell {} on {}",
            self.config.spec.name(),
            self.config.target
        ))?;
        let metrics = match self.config.args.metrics_addr {
            Some(addr) => Some(Metrics {
                exposition: crate::metrics::serve(addr)?,
                cumulative: loadcell_record::Stats::new(ops.len()),
                workload: self.config.spec.name().to_string(),
                target: self.config.target.redacted(),
            }),
            None => None,
        };
        let labels = Labels {
            run: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            workload: self.config.spec.name().to_string(),
            target: self.config.target.redacted(),
            shard: spec.shard.as_ref().map(|s| s.shard.to_string()),
        };
        let exports = self
            .config
            .args
            .export
            .iter()
            .map(|output| Exporter::start(output, labels.clone(), spec.sessions()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let watch = match &self.config.args.watch {
            Some(url) => {
                let shard = spec.shard.as_ref().map(|p| p.shard);
                Some(Feed::start(
                    url,
                    Origin {
                        shard: shard.map_or(0, |s| s.index),
                        shards: shard.map_or(1, |s| s.count),
                        host: loadcell_record::env::hostname(),
                        pid: std::process::id(),
                        workload: labels.workload.clone(),
                        target: labels.target.clone(),
                        interval_s: spec.interval.as_secs_f64(),
                    },
                )?)
            }
            None => None,
        };
        let mut live = RunObserver {
            live_lines: self.config.args.report_interval.is_some(),
            sessions: spec.sessions(),
            ops: ops.iter().map(|o| o.name).collect(),
            categories: ops.iter().map(|o| o.category.as_str()).collect(),
            hdr_log,
            metrics,
            exports,
            watch,
        };
        eprintln!(
            "Running {} on {} ({} {}): {}",
            self.config.spec.name(),
            self.config.target,
            server.product,
            server.version,
            spec.rates()
                .into_iter()
                .enumerate()
                .map(|(g, rate)| {
                    let sessions = spec.group_sessions(g) as u64;
                    let what = match spec.group_name(g) {
                        "" => "session".to_string(),
                        name => format!("{name} session"),
                    };
                    let schedule = match rate {
                        Some(r) => format!("open loop at {} events/s", r.per_sec),
                        None => "closed loop".to_string(),
                    };
                    format!(
                        "{}, {schedule}",
                        loadcell_core::words::counted(sessions, &what)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        );
        let outcome =
            loadcell_engine::run(Arc::clone(&driver), Arc::clone(&script), &spec, &mut live);
        let ctx = ResultContext {
            argv: &self.config.argv,
            workload: self.config.spec.name(),
            workload_options: self.config.spec.workload().options(),
            target: &self.config.target,
            driver: info.name,
            family: info.family,
            server: Some(server),
            spec: &spec,
            labels: self.config.args.labels.iter().cloned().collect(),
            ops,
            transactional: script.transactional(),
        };
        let mut result = result::build(&ctx, outcome);
        result.hdr_log = live.hdr_log.map(|log| log.path.display().to_string());
        result.exports = live.exports.into_iter().map(Exporter::finish).collect();
        Ok((result, ops.to_vec(), live.watch))
    }

    /// Writes the result file and prints the summary (or the JSON), unless
    /// this run is a sweep's step.
    pub(crate) fn publish(
        &self,
        mut result: RunResult,
        ops: &[OpSpec],
    ) -> anyhow::Result<RunResult> {
        result.gates = (self.config.args.thresholds.iter())
            .map(|g| g.judge_run(&result, None))
            .collect();
        if self.quiet {
            return Ok(result);
        }
        let dest = self.destination();
        let out = result
            .write(&dest)
            .with_context(|| format!("cannot write the result file {dest}"))?;
        if self.config.args.json {
            println!("{}", result.to_json_pretty());
        } else {
            let order: Vec<&str> = ops.iter().map(|o| o.name).collect();
            print!("{}", loadcell_report::text::summary(&result, &order));
        }
        eprintln!("Result written to {}", out.display());
        crate::history::remember(&self.config.args, &out);
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{catalog, WorkloadArgs};

    #[test]
    fn data_that_did_not_arrive_fails_the_run_as_a_missed_expectation() {
        let mut r = loadcell_report::fixture::run(4, 100.0);
        assert_eq!(exit_code(&r), 0);
        let v =
            loadcell_record::result::Verification::new(20_000, 19_000, false, "_count".to_string());
        r.verification = Some(v.clone());
        assert_eq!(exit_code(&r), EXIT_BELOW_EXPECTATION);
        let summary = loadcell_report::text::summary(&r, &[]);
        assert!(
            summary.contains("VERIFICATION FAILED: found 19000 where 20000 were expected"),
            "{summary}"
        );
        r.verification = Some(loadcell_record::result::Verification {
            found: 20_000,
            ok: true,
            ..v
        });
        assert_eq!(exit_code(&r), 0);
        assert!(loadcell_report::text::summary(&r, &[]).contains("Verified: found 20000"));
    }

    /// `open` hands a workload drivers of the families it names; the
    /// dispatch must serve it on each, or a run would reach an
    /// `unreachable!`.
    fn served(spec: &WorkloadSpec) -> bool {
        let dispatched = spec.dispatched();
        spec.workload().families().iter().all(|f| {
            let method = loadcell_drivers::visitor_method(*f).expect("a family has drivers");
            dispatched.contains(&method)
        })
    }

    #[test]
    fn every_workload_is_dispatched_on_the_families_it_names() {
        let args = WorkloadArgs::defaults();
        let mut specs: Vec<WorkloadSpec> = catalog()
            .into_iter()
            .filter(|(name, _, _)| *name != "script")
            .map(|(name, _, _)| WorkloadSpec::resolve(name, &args).unwrap())
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let set = dir.path().join("t.toml");
        std::fs::write(&set, "name = \"t\"\nkeys = 10\n[[type]]\nname = \"s\"\nkind = \"string\"\nshare = 1\nkey_length = 8\nvalue_size = 8\n").unwrap();
        let mut with_set = WorkloadArgs::defaults();
        with_set.kv.dataset = Some(set);
        specs.push(WorkloadSpec::resolve("kv", &with_set).unwrap());
        // fio, not the engine, runs the disk workloads: they never reach a driver.
        specs.retain(|s| s.own_runner().is_none());
        for spec in &specs {
            assert!(served(spec), "{}: {:?}", spec.name(), spec.dispatched());
        }
        assert!(specs.iter().any(|s| s.name() == "kv"));
    }

    /// A workload file runs on the family of its ops, which the dispatch
    /// serves it on (and on the others a file may be of).
    #[test]
    fn a_workload_file_is_dispatched_on_its_family() {
        let dir = tempfile::tempdir().unwrap();
        for (op, family) in [
            ("sql = \"SELECT 1\"", loadcell_core::Family::SQL),
            ("command = \"GET k\"", loadcell_core::Family::KV),
            ("path = \"/\"", loadcell_core::Family::HTTP),
        ] {
            let path = dir.path().join("w.toml");
            std::fs::write(&path, format!("[[op]]\nname = \"a\"\n{op}\n")).unwrap();
            let mut args = WorkloadArgs::defaults();
            args.script.file = Some(path);
            let spec = WorkloadSpec::resolve("script", &args).unwrap();
            assert_eq!(spec.workload().families(), [family]);
            assert!(served(&spec), "{family:?}");
        }
    }
}
