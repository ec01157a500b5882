//! The collector: starts the workers, merges what they hand in into
//! intervals and totals, watches for Ctrl-C and the deadline, and turns
//! the run into a [`RunOutcome`]. It runs on the calling thread.
//!
//! A run goes through these steps, each a piece of its own:
//! 1. the workers start and connect their sessions; the clock starts once
//!    all have (`collect`, with the [`Gate`](crate::shared::Gate));
//! 2. each worker's report is taken into its interval ([`intake::Intake`]);
//! 3. each interval complete is taken in order ([`Collector::take_interval`]):
//!    its end, what the workers did ([`load::CpuMeter`]), shown live,
//!    judged for saturation ([`load::Saturation`]), recorded;
//! 4. a resource sample follows it ([`sampling::Sampling`]);
//! 5. at the end the totals are closed: events due and never sent, missed
//!    rates and their cause ([`Collector::finish`]).

mod intake;
mod load;
mod sampling;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use loadcell_analysis::steady::{self, Detector};
use loadcell_core::words::counted;
use loadcell_core::Driver;
use loadcell_record::coarse::MAX_POINTS;
use loadcell_record::env::CpuTime;
use loadcell_record::resources::{self, ResourceSample};
use loadcell_record::result::{Interval, SteadyState};
use loadcell_record::spill::Spilled;
use loadcell_record::Stats;
use tokio::sync::mpsc;

use crate::control::{Control, Interrupts, StopReason};
use crate::hold::{HeldGauge, HeldOutcome};
use crate::schedule::Schedule;
use crate::script::Script;
use crate::shape::StageTarget;
pub use crate::shared::Phase;
use crate::shared::{Gate, Shared};
use crate::spec::RunSpec;
use crate::worker;

use intake::{Intake, Pending};
use load::{missed_rate_cause, CpuMeter, RunLoad, Saturation, Watched, WorkerLoad};
use sampling::Sampling;

/// One finished interval, as shown live.
pub struct IntervalView<'a> {
    pub phase: Phase,
    /// From the start of the run (warm-up included) to the interval's end.
    pub elapsed: Duration,
    pub duration: Duration,
    pub stats: &'a Stats,
    /// Share of a core each worker thread used in this interval.
    pub worker_cpu: &'a [f64],
    /// The sessions running events at the interval's end: fewer than the
    /// run's while `--session-stages` has some parked.
    pub sessions: usize,
    /// Under `--stages`, the interval's target rate (its mean).
    pub target_per_sec: Option<f64>,
    /// A measured interval as the result records it (histograms encoded,
    /// `t_s` from the measurement's start); `None` in warm-up. Encoding
    /// is the costly part: an observer that sends intervals on reuses it.
    pub recorded: Option<&'a Interval>,
}

/// Receives intervals as they complete (live reporting), and warnings as
/// soon as they are raised.
pub trait Observer {
    fn interval(&mut self, view: &IntervalView<'_>);
    fn warning(&mut self, message: &str);
    /// The resource sample taken at the end of each interval (warm-up's
    /// included: its `t_s` is negative).
    fn resources(&mut self, _sample: &ResourceSample) {}
}

/// What a run produced. Totals and intervals cover the measurement phase.
#[derive(Debug)]
pub struct RunOutcome {
    pub stop_reason: StopReason,
    pub error: Option<String>,
    pub started_at: SystemTime,
    pub ended_at: SystemTime,
    /// Length of the measurement phase.
    pub duration: Duration,
    pub total: Stats,
    /// At most [`MAX_POINTS`]: a longer run's are merged.
    pub intervals: Vec<Interval>,
    pub open_loop: bool,
    /// Workers read answers at their ticks, timed by the kernel's receive
    /// timestamp (see [`loadcell_core::receipt`]).
    pub answers_timed_on_receipt: bool,
    /// Client CPU used during the measurement phase.
    pub client_cpu: CpuTime,
    pub warnings: Vec<String>,
    /// Client, host, server-process and server-counter samples, one per
    /// interval up to [`MAX_POINTS`], averaged in pairs beyond.
    pub resources: Vec<ResourceSample>,
    /// What most likely limited throughput, in plain words.
    pub bottleneck: Option<String>,
    /// Under `RunSpec::hold`: the connections held and the first failure.
    pub held: Option<HeldOutcome>,
    /// Under `--warmup auto`: when the warm-up settled and how long it
    /// ran, or that it never settled before the cap.
    pub steady_state: Option<SteadyState>,
    /// Under `--stages`: each stage of non-zero length with the measured
    /// events of its intervals (none straddles two stages).
    pub stages: Vec<StageOutcome>,
}

/// One stage of a staged run and what was measured in it.
#[derive(Debug)]
pub struct StageOutcome {
    pub span: crate::shape::StageSpan,
    pub stats: Stats,
}

/// How late past `--start-at` measurement may begin unremarked (a sleep's
/// overshoot).
const START_AT_TOLERANCE: Duration = Duration::from_millis(50);

pub(crate) fn run<D, S>(
    driver: Arc<D>,
    script: Arc<S>,
    spec: &RunSpec,
    observer: &mut dyn Observer,
) -> RunOutcome
where
    D: Driver,
    S: Script<D::Conn> + Send + Sync,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime can always be built");
    runtime.block_on(collect(driver, script, spec, observer))
}

/// `--start-at`: sessions connected, the clock waits for the wall-clock
/// instant `at` (the measurement's start less the warm-up), so that every
/// shard measures from the same instant; a stop or Ctrl-C ends the wait.
async fn wait_for_start<D, S>(at: SystemTime, shared: &Shared<D, S>, interrupts: &mut Interrupts)
where
    D: Driver,
    S: Script<D::Conn> + Send + Sync,
{
    let Ok(ahead) = at.duration_since(SystemTime::now()) else {
        return;
    };
    tokio::select! {
        _ = tokio::time::sleep(ahead) => {}
        _ = shared.control.stopped() => {}
        _ = interrupts.recv() => shared.control.stop(StopReason::Interrupted, None),
    }
}

/// The run's measurement, advanced one complete interval at a time.
struct Collector<'s, C> {
    spec: &'s RunSpec,
    /// When the run's clock started (warm-up included).
    start: Instant,
    measure_start: Instant,
    /// Where the last interval taken ended.
    last_end: Instant,
    total: Stats,
    /// Measured events cut into a warm-up interval (a late flush), carried
    /// into the first measured interval; then each measured interval's.
    carry: Stats,
    intervals: Spilled<Interval>,
    meter: CpuMeter,
    saturation: Saturation,
    run_load: RunLoad,
    warnings: Vec<String>,
    sampling: Sampling<C>,
    stages: Vec<StageOutcome>,
    /// In a settling run (`--warmup auto`): the detector over its
    /// intervals, each interval's end, and when it settled once it has.
    settling: Option<(Detector, Vec<f64>, Option<f64>)>,
}

impl<C> Collector<'_, C> {
    /// Takes complete interval `p`, ending at `end`: shows it, judges the
    /// client's load over it and records it. Returns its length.
    fn take_interval(
        &mut self,
        p: &Pending,
        end: Instant,
        held_now: Option<u64>,
        observer: &mut dyn Observer,
    ) -> Duration {
        let spec = self.spec;
        let phase = if end <= self.measure_start && !spec.warmup.is_zero() {
            Phase::Warmup
        } else {
            Phase::Measure
        };
        let duration = end.saturating_duration_since(self.last_end);
        self.last_end = end;
        let load = self.meter.measure(p, duration);
        // Warm-up events finishing after the boundary stay out of the
        // numbers.
        self.carry.merge(&p.measured);
        let shown = match phase {
            Phase::Warmup => &p.warmup,
            Phase::Measure => &self.carry,
        };
        if let (Some((detector, ends, settled)), Phase::Warmup) = (&mut self.settling, phase) {
            let secs = duration.as_secs_f64();
            if secs > 0.0 && settled.is_none() {
                let latency_ms = shown.response.mean() / 1000.0;
                detector.push(shown.events as f64 / secs, latency_ms);
                ends.push((end - self.start).as_secs_f64());
                *settled = detector
                    .settled()
                    .map(|k| k.checked_sub(1).map_or(0.0, |i| ends[i]));
            }
        }
        let elapsed = end - self.start;
        let (from_s, to_s) = (self.since_measure(end - duration), self.since_measure(end));
        let (sessions, target_per_sec) = match &spec.stages {
            Some(s) if s.of == StageTarget::Sessions => (s.active_sessions(to_s), None),
            Some(s) => (spec.sessions(), Some(s.shape.mean_over(from_s, to_s))),
            None => (spec.sessions(), None),
        };
        let recorded = (phase == Phase::Measure).then(|| {
            let mut interval = Interval::from_stats(
                (end - self.measure_start).as_secs_f64(),
                duration.as_secs_f64(),
                &self.carry,
            );
            interval.connections_held = held_now;
            interval
        });
        observer.interval(&IntervalView {
            phase,
            elapsed,
            duration,
            stats: shown,
            worker_cpu: &self.meter.worker_cpu,
            sessions,
            target_per_sec,
            recorded: recorded.as_ref(),
        });
        if !spec.measures_client_cpu {
            let watched = Watched {
                loads: &load.loads,
                duration,
                elapsed,
                stats: shown,
                rate: spec.rate.map(|r| r.per_sec),
                sessions: spec.sessions(),
            };
            for warning in self.saturation.check(&watched) {
                observer.warning(&warning);
                self.warnings.push(warning);
            }
        }
        if let Some(interval) = recorded {
            self.run_load
                .add(duration, &load.cpu_used, &load.delay_used, &p.all_waiting);
            self.intervals.push(interval);
            // The stage this interval ends in (its end is a stage's end at
            // the latest: intervals are cut there).
            let t = (end - self.measure_start).as_secs_f64() - 1e-6;
            if let Some(stage) = self.stages.iter_mut().find(|s| t < s.span.end_s) {
                stage.stats.merge(&self.carry);
            }
            self.total.merge(&self.carry);
            self.carry.reset();
        }
        duration
    }

    /// Seconds from the measurement's start to `at`, negative in warm-up.
    fn since_measure(&self, at: Instant) -> f64 {
        crate::shared::since_measure(self.measure_start, at)
    }

    /// Closes the totals: measured events never carried into an interval
    /// (a run that ended right at the warm-up's end) and events due before
    /// `schedule_end` that were never sent; warns of each rate missed, and
    /// why. `duration` is the measurement's.
    fn finish(&mut self, unclaimed: Vec<u64>, duration: Duration, stop_reason: StopReason) {
        self.total.merge(&self.carry);
        self.carry.reset();
        self.total.dropped += unclaimed.iter().sum::<u64>();
        for (group, dropped) in self.total.groups.iter_mut().zip(unclaimed) {
            group.dropped += dropped;
        }
        if stop_reason == StopReason::Completed {
            let loads = self.run_load.shares();
            self.warnings
                .extend(missed_rates(self.spec, &self.total, duration, &loads));
        }
    }
}

/// A warning for each session group (or the run, with one) whose events
/// fell more than 5% short of its rate over `duration`, with the cause.
fn missed_rates(
    spec: &RunSpec,
    total: &Stats,
    duration: Duration,
    loads: &[WorkerLoad],
) -> Vec<String> {
    let mut warnings = Vec::new();
    for (g, rate) in spec.rates().into_iter().enumerate() {
        let Some(rate) = rate else { continue };
        let (events, dropped, group) = match total.groups.get(g) {
            Some(group) => (
                group.events,
                group.dropped,
                format!(" for the {} sessions", spec.group_name(g)),
            ),
            None => (total.events, total.dropped, String::new()),
        };
        let achieved = events as f64 / duration.as_secs_f64().max(1e-9);
        if achieved < rate.per_sec * 0.95 {
            warnings.push(format!(
                "target rate not reached{group}: {achieved:.1} events/s of {:.1} ({:.1}% short); {} due {} never sent. {}",
                rate.per_sec,
                100.0 * (1.0 - achieved / rate.per_sec),
                counted(dropped, "event"),
                if dropped == 1 { "was" } else { "were" },
                missed_rate_cause(loads, spec.sessions())
            ));
        }
    }
    warnings
}

/// Resolves at SIGINT or SIGTERM (never, if they could not be caught).
async fn collect<D, S>(
    driver: Arc<D>,
    script: Arc<S>,
    spec: &RunSpec,
    observer: &mut dyn Observer,
) -> RunOutcome
where
    D: Driver,
    S: Script<D::Conn> + Send + Sync,
{
    let n_ops = script.ops().len();
    let defer_reads = spec.bursts_on_kept_connections() && driver.times_reads_by_receipt();
    let shared = Arc::new(Shared {
        defer_reads,
        driver,
        script,
        spec: spec.clone(),
        stage_cuts: crate::shared::stage_cuts(spec),
        schedule: Schedule::new(spec),
        control: Control::default(),
        gate: Gate::default(),
        held: HeldGauge::default(),
        opening: tokio::sync::Semaphore::new(crate::shared::OPENING_AT_ONCE),
    });

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut handles = Vec::new();
    // Per worker: where its stats go back once merged and emptied.
    let mut give_back = Vec::new();
    for w in 0..spec.workers {
        let (back_tx, back_rx) = mpsc::unbounded_channel();
        match worker::spawn(Arc::clone(&shared), w, tx.clone(), back_rx) {
            Ok(h) => {
                handles.push(h);
                give_back.push(back_tx);
            }
            Err(e) => {
                shared.control.stop(
                    StopReason::FatalError,
                    Some(format!("cannot start worker thread {w}: {e}")),
                );
                break;
            }
        }
    }
    drop(tx);
    let workers = handles.len();

    let mut interrupts = Interrupts::listen();

    // The run's clock starts once every session is connected (or has
    // given up, which stops the run), or at Ctrl-C.
    tokio::select! {
        _ = shared.gate.all_ready(spec.sessions()) => {}
        _ = shared.control.stopped() => {}
        _ = interrupts.recv() => {
            shared.control.stop(StopReason::Interrupted, None);
        }
    }
    if let Some(at) = spec.start_at {
        wait_for_start(
            at.checked_sub(spec.warmup).unwrap_or(at),
            &shared,
            &mut interrupts,
        )
        .await;
    }
    let started_at = SystemTime::now();
    let start = Instant::now();
    let cpu_at_start = CpuTime::of_process();
    shared.schedule.begin(start);
    shared.gate.open();

    let deadline = shared.schedule.deadline();
    let measure_start = shared.schedule.measure_start();
    let mut cpu_at_measure = if spec.warmup.is_zero() {
        Some(cpu_at_start)
    } else {
        None
    };

    let total = Stats::with_groups(n_ops, spec.group_count());
    let mut intake = Intake::new(give_back, &total);
    let monitor = crate::connect_with_timeout(&*shared.driver, spec.connect_timeout)
        .await
        .ok();
    let stages = spec.stages.as_ref().map_or_else(Vec::new, |stages| {
        stages
            .shape
            .spans()
            .into_iter()
            .filter(|span| span.end_s > span.start_s)
            .map(|span| StageOutcome {
                span,
                stats: total.empty_like(),
            })
            .collect()
    });
    let mut c = Collector {
        spec,
        start,
        measure_start,
        last_end: start,
        carry: total.empty_like(),
        total,
        intervals: Spilled::new(MAX_POINTS),
        meter: CpuMeter::new(workers),
        saturation: Saturation::default(),
        run_load: RunLoad::default(),
        warnings: Vec::new(),
        sampling: Sampling::new(spec.server_pid, monitor),
        stages,
        settling: spec.settle.map(|_| (Detector::new(), Vec::new(), None)),
    };
    if let Some(late) = spec
        .start_at
        .and_then(|at| (started_at + spec.warmup).duration_since(at).ok())
        .filter(|late| *late > START_AT_TOLERANCE)
    {
        c.warnings.push(format!(
            "Measurement began {:.3}s after --start-at: connecting took longer than the time left \
             before it; give a later --start-at so that shards measure from the same instant",
            late.as_secs_f64()
        ));
    }

    loop {
        let deadline_sleep = async {
            match deadline {
                Some(d) if !shared.control.is_stopped() => tokio::time::sleep_until(d.into()).await,
                _ => std::future::pending().await,
            }
        };
        let measure_sleep = async {
            if cpu_at_measure.is_none() {
                tokio::time::sleep_until(measure_start.into()).await
            } else {
                std::future::pending().await
            }
        };
        let interrupted = interrupts.recv();
        tokio::select! {
            msg = rx.recv() => {
                let Some((w, report)) = msg else { break };
                intake.take(w, report);
            }
            _ = deadline_sleep => shared.control.stop(StopReason::Completed, None),
            _ = measure_sleep => cpu_at_measure = Some(CpuTime::of_process()),
            _ = interrupted => {
                if shared.control.is_stopped() {
                    // A second interrupt: stop waiting for in-flight events.
                    break;
                }
                shared.control.stop(StopReason::Interrupted, None);
            }
        }
        while let Some((seq, p)) = intake.next_complete() {
            let boundary = shared.boundary(seq).map(|(b, _)| b);
            let end = p.end(boundary, c.last_end);
            let held_now = spec.hold.map(|_| shared.held.now());
            let duration = c.take_interval(&p, end, held_now, observer);
            intake.recycle(p);
            if matches!(c.settling, Some((_, _, Some(_)))) && !shared.control.is_stopped() {
                // Settled: the warm-up is over, and the measured run next.
                shared.control.stop(StopReason::Completed, None);
            }
            let t_s = c.since_measure(end);
            c.sampling
                .after_interval(
                    &*shared.driver,
                    t_s,
                    duration,
                    spec.interval,
                    spec.server_metrics.as_ref(),
                    observer,
                )
                .await;
        }
        if intake.is_drained() {
            break;
        }
    }
    let cpu_at_end = CpuTime::of_process();
    let mut run_end = intake.last_done.unwrap_or(start).max(start);
    // Threads still running after a second interrupt are left to the
    // process exit; the others are joined so their memory is released.
    if intake.workers_done() {
        for h in handles {
            let _ = h.join();
        }
    } else {
        run_end = Instant::now();
        for p in intake.leftovers() {
            c.total.merge(&p.measured);
        }
    }

    let stop = shared.control.reason();
    let (stop_reason, error) = match stop {
        Some((StopReason::Completed, _)) | None => (StopReason::Completed, None),
        Some((reason, message)) => (reason, message),
    };
    // Events due after the stop (the deadline, the event limit, Ctrl-C or
    // an error) were not dropped: the run was over.
    let schedule_end = [deadline, shared.control.stopped_at()]
        .into_iter()
        .flatten()
        .fold(run_end, Instant::min);
    let duration = run_end.saturating_duration_since(measure_start);
    c.finish(
        shared.schedule.unclaimed_before(schedule_end),
        duration,
        stop_reason,
    );

    let samples = c.sampling.into_samples();
    let bottleneck = resources::diagnose(&samples, spec.workers);
    RunOutcome {
        stop_reason,
        error,
        started_at,
        ended_at: SystemTime::now(),
        duration,
        total: c.total,
        stages: c.stages,
        steady_state: c.settling.map(|(_, _, settled)| SteadyState {
            method: steady::METHOD.to_string(),
            settled: settled.is_some(),
            settled_at_s: settled,
            warmup_s: run_end.saturating_duration_since(start).as_secs_f64(),
            max_s: spec.settle.unwrap_or_default().as_secs_f64(),
        }),
        intervals: c.intervals.into_vec(),
        open_loop: shared.schedule.is_open_loop(),
        answers_timed_on_receipt: shared.defer_reads,
        client_cpu: cpu_at_end.since(cpu_at_measure.unwrap_or(cpu_at_start)),
        warnings: c.warnings,
        resources: samples,
        bottleneck,
        held: spec.hold.map(|_| shared.held.outcome(measure_start)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Arrival, RateSpec};

    const SECOND: Duration = Duration::from_secs(1);

    struct Shown {
        phases: Vec<(Phase, u64)>,
        warnings: Vec<String>,
    }

    impl Observer for Shown {
        fn interval(&mut self, view: &IntervalView<'_>) {
            self.phases.push((view.phase, view.stats.events));
        }
        fn warning(&mut self, message: &str) {
            self.warnings.push(message.to_string());
        }
    }

    fn events(n: u64) -> Stats {
        let mut st = Stats::new(0);
        for _ in 0..n {
            st.record_event(Duration::from_millis(1), Duration::from_millis(1), None);
        }
        st
    }

    fn collector(spec: &RunSpec, start: Instant) -> Collector<'_, ()> {
        Collector {
            spec,
            start,
            measure_start: start + spec.warmup,
            last_end: start,
            total: Stats::new(0),
            carry: Stats::new(0),
            intervals: Spilled::new(MAX_POINTS),
            meter: CpuMeter::new(1),
            saturation: Saturation::default(),
            run_load: RunLoad::default(),
            warnings: Vec::new(),
            sampling: Sampling::new(None, None),
            stages: Vec::new(),
            settling: None,
        }
    }

    fn interval(measured: u64, warmup: u64, cpu_ms: u64) -> Pending {
        let mut p = Pending::new(&Stats::new(0), 1);
        p.measured = events(measured);
        p.warmup = events(warmup);
        p.cpu = vec![Some(Duration::from_millis(cpu_ms))];
        p.run_delay = vec![Some(Duration::ZERO)];
        p
    }

    #[test]
    fn warm_up_is_shown_but_not_counted_and_a_late_flush_is_carried() {
        let mut spec = crate::tests::spec(1, Some(2 * SECOND), None);
        spec.warmup = SECOND;
        let start = Instant::now();
        let mut c = collector(&spec, start);
        let mut seen = Shown {
            phases: Vec::new(),
            warnings: Vec::new(),
        };
        // The warm-up interval, with 2 measured events flushed into it late.
        c.take_interval(&interval(2, 7, 100), start + SECOND, None, &mut seen);
        assert_eq!(c.total.events, 0, "warm-up is not measured");
        c.take_interval(&interval(5, 0, 200), start + 2 * SECOND, None, &mut seen);
        let d = c.take_interval(&interval(4, 0, 300), start + 3 * SECOND, Some(3), &mut seen);
        assert_eq!(d, SECOND);
        assert_eq!(
            seen.phases,
            vec![(Phase::Warmup, 7), (Phase::Measure, 7), (Phase::Measure, 4)],
            "the late flush is carried into the first measured interval"
        );
        assert_eq!(c.total.events, 11);
        assert_eq!(c.since_measure(start), -1.0);
        assert_eq!(
            c.run_load.shares()[0].cpu,
            0.1,
            "CPU of the measured intervals only"
        );
        let recorded = c.intervals.into_vec();
        assert_eq!(recorded.len(), 2);
        assert_eq!(recorded[1].connections_held, Some(3));
    }

    #[test]
    fn a_busy_worker_is_judged_unless_the_workload_measures_the_cpu() {
        for measures_client_cpu in [false, true] {
            let mut spec = crate::tests::spec(1, Some(5 * SECOND), None);
            spec.measures_client_cpu = measures_client_cpu;
            let start = Instant::now();
            let mut c = collector(&spec, start);
            let mut seen = Shown {
                phases: Vec::new(),
                warnings: Vec::new(),
            };
            for k in 1..=3u32 {
                let cpu = 990 * u64::from(k);
                c.take_interval(&interval(1, 0, cpu), start + SECOND * k, None, &mut seen);
            }
            assert_eq!(seen.warnings.len(), usize::from(!measures_client_cpu));
            assert_eq!(c.warnings, seen.warnings);
        }
    }

    #[test]
    fn a_missed_rate_is_warned_with_its_shortfall() {
        let mut spec = crate::tests::spec(4, Some(SECOND), None);
        spec.rate = Some(RateSpec {
            per_sec: 1000.0,
            arrival: Arrival::Uniform,
            tick: None,
        });
        let mut total = events(900);
        total.dropped = 100;
        let w = missed_rates(&spec, &total, SECOND, &[]);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("target rate not reached: 900.0 events/s of 1000.0 (10.0% short); 100 events due were never sent."),
            "{}",
            w[0]
        );
        let within = events(960);
        assert!(
            missed_rates(&spec, &within, SECOND, &[]).is_empty(),
            "within 5%"
        );
    }

    #[test]
    fn finishing_adds_the_events_never_sent() {
        let spec = crate::tests::spec(1, Some(SECOND), None);
        let mut c = collector(&spec, Instant::now());
        c.carry = events(3);
        c.finish(vec![7], SECOND, StopReason::Interrupted);
        assert_eq!((c.total.events, c.total.dropped), (3, 7));
        assert!(c.warnings.is_empty(), "no rate to miss");
    }
}
