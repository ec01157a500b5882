//! One run's configuration, typed and checked once: the arguments, the
//! workload, the target and its driver's fitness, before any load. A
//! sweep builds one per step before its first step; a findmax probe is its
//! base configuration at a rate.

use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail};
use loadcell_core::{Family, Target};
use loadcell_drivers::OpenError;
use loadcell_engine::shape::{StageTarget, Stages};
use loadcell_engine::{RunSpec, Shard};

use crate::args::{RunArgs, TargetArgs};
use crate::values::Warmup;
use crate::workload::{families_label, WorkloadArgs, WorkloadSpec};

/// This machine, the machine workloads' target.
pub(crate) const LOCAL: &str = "local:";

/// How long in-flight events may finish once the run is told to stop.
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The variable a Kubernetes Indexed Job sets to each pod's index.
pub const SHARD_INDEX_VAR: &str = "JOB_COMPLETION_INDEX";

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub args: RunArgs,
    pub spec: WorkloadSpec,
    pub target: Target,
    /// The embedded default: prepared on first use.
    pub default_target: bool,
    /// The command line the result records.
    pub argv: Vec<String>,
    /// `--shard`, or `--shard-count` with the index from the environment.
    pub shard: Option<Shard>,
}

impl RunConfig {
    pub fn new(mut args: RunArgs, argv: Vec<String>) -> anyhow::Result<RunConfig> {
        check_server_pid(&args)?;
        crate::history::label_git_commit(&mut args)?;
        if let Some(shape) = &args.stages {
            // The stages are the rate and the time: every check of a rate
            // (a family without one, a shard's share) applies to them.
            args.rate = Some(shape.total() / shape.duration().as_secs_f64());
            args.time = Some(shape.duration());
        }
        if let Some(shape) = &args.session_stages {
            // Every session of the peak connects first; the shape parks
            // and wakes them.
            args.threads = shape.peak() as usize;
            args.clients = 1;
            args.time = Some(shape.duration());
        }
        if let Some(g) = args.thresholds.iter().find(|g| g.on_whole_sweep()) {
            bail!(
                "--threshold '{}' is judged on a sweep or findmax, not on one run: give it to `loadcell sweep` or `loadcell findmax`",
                g.text()
            );
        }
        if let Some(g) = args.thresholds.iter().find(|g| g.on_plan()) {
            bail!(
                "--threshold '{}' is judged on a capacity plan, not on one run: give it to `loadcell plan`",
                g.text()
            );
        }
        let (mut spec, target, default_target) = resolve(&args.target, &args.workload)?;
        let index = std::env::var(SHARD_INDEX_VAR).ok();
        let shard = resolve_shard(args.shard, args.shard_count, index.as_deref())?;
        check_stages_fit(&args, &spec)?;
        // The stages are the rate a family may refuse.
        let rate_staged = args.stages.is_some();
        let staged = |e: anyhow::Error| {
            if rate_staged {
                anyhow!("--stages shapes the rate: {e}")
            } else {
                e
            }
        };
        if let Some(own) = spec.own_runner() {
            own.check(&args, shard).map_err(staged)?;
        }
        let sessions = args.threads.saturating_mul(args.clients);
        spec.fit_run(&mut args).map_err(|e| staged(anyhow!(e)))?;
        if args.session_stages.is_some() && args.threads.saturating_mul(args.clients) != sessions {
            bail!(
                "--session-stages does not apply to {}: it sets its own sessions (here {}), \
                 which the stages cannot park and wake; shape its rate with --stages instead",
                spec.name(),
                args.threads.saturating_mul(args.clients)
            );
        }
        let other_sessions = spec.groups(&args).map_or(0, |g| g.other_sessions());
        check_workers(&args, other_sessions)?;
        if let Some(shard) = shard {
            spec.take_insert_share(shard, args.start_at);
        }
        let config = RunConfig {
            args,
            spec,
            target,
            default_target,
            argv,
            shard,
        };
        if let Some(shard) = shard {
            shard
                .of(&config.whole_spec(0))
                .map_err(|e| anyhow!("--shard {shard}: {e}"))?;
        }
        Ok(config)
    }

    /// The whole run as the engine takes it (every shard's together), on
    /// one worker thread until the job settles them for the driver.
    fn whole_spec(&self, seed: u64) -> RunSpec {
        let a = &self.args;
        let sessions = (a.threads * a.clients) as u64;
        let events = a.events.or_else(|| {
            self.spec
                .implied_events(&a.workload, sessions, a.time.is_some())
        });
        RunSpec {
            threads: a.threads,
            clients: a.clients,
            workers: 1,
            time: match (a.time, events) {
                (Some(t), _) => Some(t),
                (None, Some(_)) => None,
                (None, None) => Some(Duration::from_secs(10)),
            },
            events,
            warmup: a.warmup.fixed(),
            rate: a.rate.map(|per_sec| a.rate_at(per_sec)),
            interval: a.report_interval.unwrap_or(Duration::from_secs(1)),
            connect_timeout: a.target.connect_timeout,
            connection_policy: a.connection_policy,
            hold: self.spec.hold(a),
            groups: self.spec.groups(a),
            reconnect_timeout: a.reconnect_timeout,
            drain_timeout: a.drain_timeout.unwrap_or(DRAIN_TIMEOUT),
            seed,
            server_pid: None,
            server_metrics: None,
            measures_client_cpu: false,
            shard: None,
            start_at: a.start_at,
            settle: (a.warmup == Warmup::Auto).then_some(a.warmup_max),
            stages: match (&a.stages, &a.session_stages) {
                (Some(shape), _) => Some(Stages {
                    of: StageTarget::Rate,
                    shape: shape.clone(),
                }),
                (None, Some(shape)) => Some(Stages {
                    of: StageTarget::Sessions,
                    shape: shape.clone(),
                }),
                (None, None) => None,
            },
        }
    }

    /// This process's part of the run: the whole, or its shard's share
    /// (checked when the configuration was built).
    pub fn engine_spec(&self, seed: u64) -> RunSpec {
        let whole = self.whole_spec(seed);
        match self.shard {
            Some(shard) => shard
                .of(&whole)
                .expect("RunConfig::new checked the shard's share"),
            None => whole,
        }
    }

    /// `--seed`, else one drawn from the clock now.
    pub fn seed(&self) -> u64 {
        self.args.seed.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
    }

    /// The same run, measuring from `start_at` (a sharded sweep's step).
    pub fn start_at(&mut self, start_at: SystemTime) {
        self.args.start_at = Some(start_at);
    }

    /// The same run as step `step` of a sweep (or findmax) of at most
    /// `steps` runs into the same tables: its inserts draw from its own
    /// part of one permutation, the one the sweep's first `--start-at`
    /// seeded (`RunConfig::new`) when sharded, else `seed`'s.
    pub fn as_step(&mut self, step: usize, steps: usize, seed: u64) {
        self.spec.take_insert_step(step, steps, seed);
    }

    /// From the options of a `run` command line (a sweep step's).
    pub fn parse(argv: &[String]) -> anyhow::Result<RunConfig> {
        let shown = std::iter::once("run".to_string())
            .chain(argv.iter().cloned())
            .collect();
        RunConfig::new(crate::parse_run(argv)?, shown)
    }

    /// The same run, open loop at `rate` and labelled with it: a findmax
    /// probe.
    pub fn at_rate(&self, rate: f64) -> RunConfig {
        let mut probe = self.clone();
        probe.args.rate = Some(rate);
        probe.args.labels.push(("rate".into(), format!("{rate}")));
        probe.argv.extend([
            "--rate".into(),
            format!("{rate}"),
            "--label".into(),
            format!("rate={rate}"),
        ]);
        probe
    }
}

/// A workload on a target, checked before anything connects: the workload
/// with its options, the target (and whether it is the embedded default),
/// and whether the target's driver can run the workload.
pub fn resolve(
    t: &TargetArgs,
    workload: &WorkloadArgs,
) -> anyhow::Result<(WorkloadSpec, Target, bool)> {
    let spec = WorkloadSpec::resolve(&t.workload, workload).map_err(|e| anyhow!(e))?;
    let (target, default_target) = resolve_target(t, &spec)?;
    check_driver(&spec, &target)?;
    Ok((spec, target, default_target))
}

/// The target to use, and whether it is the embedded default (machine
/// workloads run on `local:`, this machine).
fn resolve_target(t: &TargetArgs, spec: &WorkloadSpec) -> anyhow::Result<(Target, bool)> {
    let machine = spec.workload().families() == [Family::MACHINE];
    let refused = |raw: &str| spec.own_runner()?.refuses_target(raw);
    if let Some(why) = t.target.as_deref().and_then(refused) {
        return Err(anyhow!(why));
    }
    match &t.target {
        Some(raw) => Ok((Target::parse(raw)?, false)),
        None if machine => Ok((Target::parse(LOCAL)?, false)),
        None => {
            std::fs::create_dir_all(&t.results_dir).map_err(|e| {
                anyhow!(
                    "cannot create the results directory {}: {e}",
                    t.results_dir.display()
                )
            })?;
            let path = t.results_dir.join("loadcell.sqlite");
            Ok((default_sqlite(&path)?, true))
        }
    }
}

fn default_sqlite(path: &Path) -> anyhow::Result<Target> {
    // What a URL would read otherwise: '%' as an escape, '?' as the start
    // of the parameters and '#' as a fragment.
    let mut escaped = String::new();
    for c in path.display().to_string().chars() {
        match c {
            '%' => escaped.push_str("%25"),
            '?' => escaped.push_str("%3F"),
            '#' => escaped.push_str("%23"),
            c => escaped.push(c),
        }
    }
    Ok(Target::parse(&format!("sqlite:{escaped}"))?)
}

/// Rejects a workload that the target's driver cannot serve, before any
/// connection is opened, naming the drivers that can.
fn check_driver(spec: &WorkloadSpec, target: &Target) -> anyhow::Result<()> {
    let workload = spec.workload();
    let families = workload.families();
    let fitting = || {
        let names: Vec<_> = loadcell_drivers::REGISTRY
            .iter()
            .filter(|d| families.contains(&d.family) && workload.refuses(d).is_none())
            .map(|d| d.name)
            .collect();
        names.join(", ")
    };
    let info = match loadcell_drivers::find(target.scheme(), families) {
        Ok(info) => info,
        Err(OpenError::OtherFamily { scheme, family }) => {
            return Err(anyhow!(
                "workload {} needs a {} driver ({}), but {scheme}: is a {family} driver",
                workload.name(),
                families_label(families),
                fitting(),
            ))
        }
        Err(_) => return Ok(()), // `open` names the supported schemes.
    };
    match workload.refuses(info) {
        Some(why) => Err(anyhow!("{why}; drivers that can run it: {}", fitting())),
        None => Ok(()),
    }
}

/// `--session-stages` parks and wakes sessions that run events in
/// closed loop, and `--warmup auto` judges a run's own intervals: a family
/// whose sessions hold connections on a ramp of their own, or that runs
/// without the engine's sessions, has none to shape or judge.
fn check_stages_fit(args: &RunArgs, spec: &WorkloadSpec) -> anyhow::Result<()> {
    let no_sessions = spec.own_runner().is_some() || spec.hold(args).is_some();
    if args.session_stages.is_some() && no_sessions {
        bail!(
            "--session-stages does not apply to {}: it has no closed-loop sessions to park and \
             wake; leave it out",
            spec.name()
        );
    }
    if args.warmup != Warmup::Auto {
        return Ok(());
    }
    if no_sessions {
        bail!(
            "--warmup auto does not apply to {}: it runs no steady load to judge; give a fixed \
             --warmup",
            spec.name()
        );
    }
    if args.stages.is_some() || args.session_stages.is_some() {
        bail!("--warmup auto waits for a steady load, which stages change on purpose: give a fixed --warmup before them");
    }
    if args.start_at.is_some() {
        bail!("--warmup auto cannot end at an instant every shard knows: give a fixed --warmup with --start-at");
    }
    Ok(())
}

/// `--workers` is at most the number of sessions, the `other_sessions` of
/// further session groups (`search-mixed`'s queries) included: a worker
/// thread with no session would only idle (sweep and findmax check it
/// before their first step, too).
fn check_workers(a: &RunArgs, other_sessions: usize) -> anyhow::Result<()> {
    const MAX_SESSIONS: usize = 1_000_000;
    let first = match a.threads.checked_mul(a.clients) {
        Some(n) if n <= MAX_SESSIONS => n,
        _ => {
            return Err(anyhow!(
                "--threads {} x --clients {} is more sessions than loadcell runs from one \
                 process ({MAX_SESSIONS}); spread the load over several loadcell processes",
                a.threads,
                a.clients
            ))
        }
    };
    let sessions = first + other_sessions;
    let others = match other_sessions {
        0 => String::new(),
        n => format!(" + {n} of other session groups"),
    };
    match a.workers {
        Some(w) if w > sessions => Err(anyhow!(
            "--workers {w} is more than the sessions to run (--threads {} x --clients {}{others} = \
             {sessions}): give --workers {sessions} at most",
            a.threads,
            a.clients,
        )),
        _ => Ok(()),
    }
}

/// The shard this process runs: `--shard I/N`, or `--shard-count N` with I
/// from `JOB_COMPLETION_INDEX` (`index_var`); both agree when both are
/// given.
fn resolve_shard(
    shard: Option<Shard>,
    shards: Option<usize>,
    index_var: Option<&str>,
) -> anyhow::Result<Option<Shard>> {
    let Some(count) = shards else {
        return Ok(shard);
    };
    let from_env = match index_var {
        Some(text) => {
            let index = text.trim().parse().map_err(|_| {
                anyhow!("--shard-count {count}: {SHARD_INDEX_VAR}={text} is not a shard index (0, 1, …)")
            })?;
            Shard::new(index, count).map_err(|e| anyhow!("--shard-count {count}: {e}"))?
        }
        None => match shard {
            Some(s) => s,
            None => {
                return Err(anyhow!(
                "--shard-count {count} takes this shard's index from {SHARD_INDEX_VAR}, which is \
                     not set (a Kubernetes Indexed Job sets it): set it, or give --shard I/{count}"
            ))
            }
        },
    };
    match shard {
        Some(s) if s != from_env => Err(anyhow!(
            "--shard {s} and --shard-count {count} with {SHARD_INDEX_VAR}={} disagree: give one of them",
            index_var.unwrap_or_default()
        )),
        Some(s) if s.count != count => Err(anyhow!(
            "--shard {s} and --shard-count {count} disagree on the number of shards: give one of them"
        )),
        _ => Ok(Some(from_env)),
    }
}

/// `--server-pid` names a process that exists (sweep and findmax check it
/// before their first step, too).
fn check_server_pid(a: &RunArgs) -> anyhow::Result<()> {
    match a.server_pid {
        Some(pid) if !loadcell_record::resources::process_exists(pid) => Err(anyhow!(
            "--server-pid {pid}: no such process on this host; give the server's PID \
             (e.g. from `pgrep -x redis-server`), or leave the option out to find the \
             process listening on the target's port"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(i: usize, n: usize) -> Shard {
        Shard::new(i, n).unwrap()
    }

    #[test]
    fn on_off_options_take_their_value() {
        let argv = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let config =
            RunConfig::parse(&argv("oltp_insert --auto-inc off --range-selects=off")).unwrap();
        let WorkloadSpec::Oltp(w) = config.spec else {
            panic!("an OLTP workload");
        };
        assert!(!w.opts.auto_inc && !w.opts.range_selects);
        // Sharded, oltp_insert's ids take the shard's share.
        let sharded =
            RunConfig::parse(&argv("oltp_insert --auto-inc=off --threads 2 --shard 1/2")).unwrap();
        let WorkloadSpec::Oltp(w) = sharded.spec else {
            panic!("an OLTP workload");
        };
        assert_eq!(w.opts.shard.map(|s| s.shard), Some(shard(1, 2)));
    }

    #[test]
    fn a_sharded_sweeps_step_inserts_from_its_part_of_the_sweeps_permutation() {
        let argv = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let mut step = RunConfig::parse(&argv(
            "oltp_insert --auto-inc=off --threads 2 --shard 0/2 --time 2s --start-at 2999-01-01T00:00:00Z",
        ))
        .unwrap();
        let share = |c: &RunConfig| match &c.spec {
            WorkloadSpec::Oltp(w) => w.opts.shard.unwrap(),
            _ => panic!("an OLTP workload"),
        };
        let sweep_seed = share(&step).seed;
        step.start_at(SystemTime::now() + Duration::from_secs(3600));
        step.as_step(1, 4, 99);
        assert_eq!(share(&step).first, 1 << 30, "step 1 of 4: a quarter in");
        assert_eq!(share(&step).seed, sweep_seed, "one permutation per sweep");
    }

    /// Unsharded, a sweep's steps (each with a seed of its own) still
    /// draw from one permutation, the sweep's, each from its own part.
    #[test]
    fn an_unsharded_sweeps_steps_insert_from_their_parts_of_one_permutation() {
        let argv = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let share = |step: usize| {
            let mut c = RunConfig::parse(&argv("oltp_insert --auto-inc=off --threads 2")).unwrap();
            c.as_step(step, 3, 42);
            match c.spec {
                WorkloadSpec::Oltp(w) => w.opts.shard.unwrap(),
                _ => panic!("an OLTP workload"),
            }
        };
        let (first, third) = (share(0), share(2));
        assert_eq!((first.seed, third.seed), (42, 42));
        assert_eq!(first.shard, shard(0, 1));
        assert_eq!((first.first, third.first), (0, ((2u64 << 32) / 3) as u32));
    }

    #[test]
    fn the_shard_comes_from_shard_or_from_shard_count_and_the_job_index() {
        assert_eq!(resolve_shard(None, None, Some("1")).unwrap(), None);
        assert_eq!(
            resolve_shard(Some(shard(1, 3)), None, None).unwrap(),
            Some(shard(1, 3))
        );
        assert_eq!(
            resolve_shard(None, Some(3), Some("2")).unwrap(),
            Some(shard(2, 3))
        );
        // Both, agreeing.
        assert_eq!(
            resolve_shard(Some(shard(2, 3)), Some(3), Some("2")).unwrap(),
            Some(shard(2, 3))
        );
    }

    #[test]
    fn bad_shards_are_one_line_errors() {
        for (given, shards, var, why) in [
            (
                None,
                Some(3),
                None,
                "JOB_COMPLETION_INDEX, which is not set",
            ),
            (None, Some(3), Some("3"), "numbered from 0 to 2"),
            (None, Some(3), Some("x"), "is not a shard index"),
            (Some(shard(1, 3)), Some(3), Some("2"), "disagree"),
            (
                Some(shard(1, 2)),
                Some(3),
                None,
                "disagree on the number of shards",
            ),
        ] {
            let e = resolve_shard(given, shards, var).unwrap_err().to_string();
            assert!(e.contains(why) && !e.contains('\n'), "{e}");
        }
    }
}
