//! The collector: starts the workers, merges what they hand in into
//! intervals and totals, watches for Ctrl-C and the deadline, and turns
//! the run into a [`RunOutcome`]. It runs on the calling thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use loadcell_core::words::counted;
use loadcell_core::Driver;
use loadcell_record::coarse::MAX_POINTS;
use loadcell_record::env::CpuTime;
use loadcell_record::resources::{self, ResourceSample, Sampler};
use loadcell_record::result::Interval;
use loadcell_record::spill::Spilled;
use loadcell_record::Stats;
use tokio::sync::mpsc;

use crate::control::{Control, Interrupts, StopReason};
use crate::hold::{HeldGauge, HeldOutcome};
use crate::schedule::Schedule;
use crate::script::Script;
use crate::spec::RunSpec;
use crate::worker::{self, Gate, Report, Shared};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Warmup,
    Measure,
}

/// One finished interval, as shown live.
pub struct IntervalView<'a> {
    pub phase: Phase,
    /// From the start of the run (warm-up included) to the interval's end.
    pub elapsed: Duration,
    pub duration: Duration,
    pub stats: &'a Stats,
    /// Share of a core each worker thread used in this interval.
    pub worker_cpu: &'a [f64],
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

/// Emptied stats kept for reuse, per worker and for the collector's
/// pending intervals: two intervals' worth. Stats made while the collector
/// fell behind (a stall) are dropped once it catches up, rather than kept
/// for good: memory follows the worst moment otherwise, and a long run
/// meets worse moments the longer it lasts.
const RECYCLED: usize = 4;

/// A worker above this share of a core is saturated...
const HOT_WORKER: f64 = 0.90;
/// ...when it stays there for this many intervals in a row.
const HOT_INTERVALS: usize = 3;
/// Events starting this late (the p99 of an interval's schedule lag) are
/// worth a warning that says whose delay it was.
const LAG_FLOOR: Duration = Duration::from_millis(100);
/// A run whose every session waited on the server for at least this share
/// of it missed its rate because of the server.
const SERVER_BOUND: f64 = 0.5;

/// What one worker thread did over an interval (or the run), as shares of
/// its length.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct WorkerLoad {
    /// On a CPU.
    cpu: f64,
    /// Ready to run but waiting for a CPU (`None` where the kernel does not
    /// say).
    run_delay: Option<f64>,
    /// Every one of its sessions waiting on the server at once.
    all_waiting: f64,
}

impl WorkerLoad {
    /// Running, or wanting to: a thread busy all the time could not have
    /// sent anything sooner, whether its own work or other processes on
    /// the host kept it so.
    fn busy(&self) -> f64 {
        (self.cpu + self.run_delay.unwrap_or(0.0)).min(1.0)
    }

    /// "97% of {what} (61% on a CPU, 36% waiting for one)".
    fn busy_text(&self, what: &str) -> String {
        match self.run_delay {
            Some(d) if d >= 0.01 => format!(
                "{:.0}% of {what} ({:.0}% on a CPU, {:.0}% waiting for one)",
                100.0 * self.busy(),
                100.0 * self.cpu,
                100.0 * d
            ),
            _ => format!("{:.0}% of {what} on a CPU", 100.0 * self.busy()),
        }
    }
}

/// The busiest worker thread and what it did.
fn busiest(loads: &[WorkerLoad]) -> Option<(usize, WorkerLoad)> {
    loads
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.busy().total_cmp(&b.1.busy()))
}

/// An interval as the saturation checks see it.
struct Watched<'a> {
    loads: &'a [WorkerLoad],
    duration: Duration,
    /// From the start of the run to the interval's end.
    elapsed: Duration,
    stats: &'a Stats,
    rate: Option<f64>,
    sessions: usize,
}

/// Watches intervals for a saturated client, and for events that start
/// late, saying whose delay it was: the client's, when a worker thread was
/// busy all along (it could not send them sooner), or the server's, when
/// every session was waiting on it (none was free to send them: a free
/// session sends an overdue event at once). Each kind of warning is
/// raised once.
#[derive(Default)]
struct Saturation {
    hot_streak: Vec<usize>,
    hot_warned: bool,
    /// Per worker, how long all its sessions waited in the last interval,
    /// and how long that interval was.
    last_waited: Vec<Duration>,
    last_duration: Duration,
    client_lag_warned: bool,
    server_lag_warned: bool,
    other_lag_warned: bool,
}

impl Saturation {
    fn check(&mut self, at: &Watched<'_>) -> Vec<String> {
        let mut warnings = Vec::new();
        self.hot_streak.resize(at.loads.len(), 0);
        for (w, (load, streak)) in at.loads.iter().zip(&mut self.hot_streak).enumerate() {
            *streak = if load.busy() >= HOT_WORKER {
                *streak + 1
            } else {
                0
            };
            if *streak >= HOT_INTERVALS && !self.hot_warned {
                self.hot_warned = true;
                warnings.push(format!(
                    "the client is saturated: worker thread {w} was busy {} for {HOT_INTERVALS} intervals in a row, \
                     so these numbers may measure loadcell rather than the server; add --threads (if cores are free) or run the client on another machine",
                    load.busy_text("the time")
                ));
            }
        }
        // A stall that straddles a cut shows its late events in the
        // interval after it: the wait is looked for over both.
        let waited_now: Vec<Duration> = at
            .loads
            .iter()
            .map(|l| at.duration.mul_f64(l.all_waiting))
            .collect();
        self.last_waited.resize(waited_now.len(), Duration::ZERO);
        let waited = waited_now
            .iter()
            .zip(&self.last_waited)
            .map(|(now, last)| *now + *last)
            .min()
            .unwrap_or_default();
        self.last_waited = waited_now;
        let over = at.duration + std::mem::replace(&mut self.last_duration, at.duration);
        if let (Some(_), false) = (at.rate, at.stats.lag.is_empty()) {
            let lag = Duration::from_micros(at.stats.lag.value_at_quantile(0.99));
            if let Some(warning) = self.late_starts(at, lag, waited, over) {
                warnings.push(warning);
            }
        }
        warnings
    }

    /// A warning for events that started `lag` late (p99), if they did
    /// and none was raised for this cause; `waited` is how long every
    /// session was waiting on the server, `over` the last two intervals.
    fn late_starts(
        &mut self,
        at: &Watched<'_>,
        lag: Duration,
        waited: Duration,
        over: Duration,
    ) -> Option<String> {
        if lag <= LAG_FLOOR {
            return None;
        }
        let (w, load) = busiest(at.loads)?;
        let late = format!(
            "events started up to {:.0} ms behind schedule (p99 of the interval ending at {:.1} s)",
            lag.as_secs_f64() * 1000.0,
            at.elapsed.as_secs_f64()
        );
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        if load.busy() >= HOT_WORKER {
            if std::mem::replace(&mut self.client_lag_warned, true) {
                return None;
            }
            return Some(format!(
                "{late} because the client is saturated: worker thread {w} was busy {}, \
                 so it could not send events as they came due; add --threads (if cores are free) or run the client \
                 on another machine. Latency from the intended start is still reported truthfully",
                load.busy_text("that interval")
            ));
        }
        if waited >= lag.min(at.duration) / 2 {
            if std::mem::replace(&mut self.server_lag_warned, true) {
                return None;
            }
            return Some(format!(
                "{late} because every session was waiting on the server: all {} had a request in flight, unanswered, \
                 for {:.0} ms of the last {:.1} s, so events came due with no session free to send them, and queued. \
                 Not the client: no worker thread was busy more than {:.0}% of the interval. The wait counts in \
                 latency, which runs from each event's intended start",
                at.sessions,
                ms(waited),
                over.as_secs_f64(),
                100.0 * load.busy()
            ));
        }
        if std::mem::replace(&mut self.other_lag_warned, true) {
            return None;
        }
        Some(format!(
            "{late}, though no worker thread was busy more than {:.0}% of the interval and the sessions were all \
             waiting on the server for only {:.0} ms of the last {:.1} s: the client's threads woke late (is the \
             host overloaded?)",
            100.0 * load.busy(),
            ms(waited),
            over.as_secs_f64()
        ))
    }
}

/// What each worker thread did over the measured intervals.
#[derive(Default)]
struct RunLoad {
    duration: Duration,
    cpu: Vec<Duration>,
    run_delay: Vec<Option<Duration>>,
    all_waiting: Vec<Duration>,
}

impl RunLoad {
    fn add(
        &mut self,
        duration: Duration,
        cpu: &[Duration],
        run_delay: &[Option<Duration>],
        all_waiting: &[Duration],
    ) {
        let n = cpu.len();
        self.cpu.resize(n, Duration::ZERO);
        self.run_delay.resize(n, Some(Duration::ZERO));
        self.all_waiting.resize(n, Duration::ZERO);
        self.duration += duration;
        for w in 0..n {
            self.cpu[w] += cpu[w];
            self.run_delay[w] = self.run_delay[w].zip(run_delay[w]).map(|(a, b)| a + b);
            self.all_waiting[w] += all_waiting[w];
        }
    }

    fn shares(&self) -> Vec<WorkerLoad> {
        let secs = self.duration.as_secs_f64();
        let share = |d: Duration| {
            if secs > 0.0 {
                d.as_secs_f64() / secs
            } else {
                0.0
            }
        };
        (0..self.cpu.len())
            .map(|w| WorkerLoad {
                cpu: share(self.cpu[w]),
                run_delay: self.run_delay[w].map(share),
                all_waiting: share(self.all_waiting[w]),
            })
            .collect()
    }
}

/// Why a run did not reach its rate, and what to do about it.
fn missed_rate_cause(loads: &[WorkerLoad], sessions: usize) -> String {
    let waiting = loads
        .iter()
        .map(|l| l.all_waiting)
        .min_by(f64::total_cmp)
        .unwrap_or(0.0);
    match busiest(loads) {
        Some((w, load)) if load.busy() >= HOT_WORKER => format!(
            "The client is saturated: worker thread {w} was busy {}; add --threads (if cores are free) or run \
             the client on another machine, or lower --rate",
            load.busy_text("the run")
        ),
        Some((_, load)) if waiting >= SERVER_BOUND => format!(
            "Every session was waiting on the server: all {sessions} had a request in flight, unanswered, {:.0}% of \
             the run, while no worker thread was busy more than {:.0}% of it; add --clients if the server has \
             capacity to spare, or lower --rate",
            100.0 * waiting,
            100.0 * load.busy()
        ),
        _ => "The client or the server is saturated: add --threads or --clients, or lower --rate".to_string(),
    }
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
}

/// How late past `--start-at` measurement may begin unremarked (a sleep's
/// overshoot).
const START_AT_TOLERANCE: Duration = Duration::from_millis(50);

/// How long a server-counter query may take before the sample goes
/// without it.
const COUNTER_TIMEOUT: Duration = Duration::from_secs(1);

struct Pending {
    measured: Stats,
    warmup: Stats,
    /// Cumulative CPU per worker, as of this interval's cut.
    cpu: Vec<Option<Duration>>,
    /// Cumulative run-queue delay per worker, as of this interval's cut.
    run_delay: Vec<Option<Duration>>,
    /// Per worker, how long all its sessions were waiting on the server.
    all_waiting: Vec<Duration>,
    /// Latest `Done` instant among workers that finished in this interval.
    done_at: Option<Instant>,
    /// Whether some worker's stats for this interval run to its boundary
    /// (it was cut there rather than finishing inside it).
    to_boundary: bool,
}

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
        schedule: Schedule::new(spec),
        control: Control::default(),
        gate: Gate::default(),
        held: HeldGauge::default(),
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

    let mut pending: BTreeMap<usize, Pending> = BTreeMap::new();
    // Per worker: the next interval it has not reported, or `None` once done.
    let mut next_of: Vec<Option<usize>> = vec![Some(0); workers];
    let mut emitted = 0usize;
    let mut total = Stats::with_groups(n_ops, spec.group_count());
    let mut carry = total.empty_like();
    // Emptied stats for the next intervals' `Pending`s (see `Stats::reset`).
    let mut spare: Vec<Stats> = Vec::new();
    // Per worker: emptied stats sent back and not yet taken by its cuts.
    let mut waiting_at = vec![0usize; workers];
    let mut worker_cpu = vec![0.0; workers];
    let mut last_cpu = vec![Duration::ZERO; workers];
    let mut last_run_delay = vec![Some(Duration::ZERO); workers];
    let mut saturation = Saturation::default();
    let mut run_load = RunLoad::default();
    let mut warnings = Vec::new();
    if let Some(late) = spec
        .start_at
        .and_then(|at| (started_at + spec.warmup).duration_since(at).ok())
        .filter(|late| *late > START_AT_TOLERANCE)
    {
        warnings.push(format!(
            "Measurement began {:.3}s after --start-at: connecting took longer than the time left \
             before it; give a later --start-at so that shards measure from the same instant",
            late.as_secs_f64()
        ));
    }
    let mut sampler = Sampler::new(spec.server_pid);
    let mut samples = Spilled::new(MAX_POINTS);
    let mut sampled = false;
    // A connection of its own for server counters; without one, samples
    // simply go without them.
    let mut monitor = crate::connect_with_timeout(&*shared.driver, spec.connect_timeout)
        .await
        .ok();
    let mut intervals = Spilled::new(MAX_POINTS);
    let mut last_end = start;
    let mut run_end = start;

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
                let (seq, cut, done_at) = match report {
                    Report::Interval { seq, cut } => {
                        next_of[w] = Some(seq + 1);
                        (seq, cut, None)
                    }
                    Report::Done { seq, cut, at } => {
                        next_of[w] = None;
                        run_end = run_end.max(at);
                        (seq, cut, Some(at))
                    }
                };
                let p = pending.entry(seq).or_insert_with(|| Pending {
                    measured: spare.pop().unwrap_or_else(|| total.empty_like()),
                    warmup: spare.pop().unwrap_or_else(|| total.empty_like()),
                    cpu: vec![None; workers],
                    run_delay: vec![None; workers],
                    all_waiting: vec![Duration::ZERO; workers],
                    done_at: None,
                    to_boundary: false,
                });
                p.to_boundary |= done_at.is_none();
                p.cpu[w] = Some(cut.cpu);
                p.run_delay[w] = cut.run_delay;
                p.all_waiting[w] += cut.all_waiting;
                p.measured.merge(&cut.measured);
                p.warmup.merge(&cut.warmup);
                // The cut took up to two of those sent back.
                waiting_at[w] = waiting_at[w].saturating_sub(2);
                if done_at.is_none() {
                    for mut stats in [cut.measured, cut.warmup] {
                        // A worker that has finished no longer takes any.
                        if waiting_at[w] < RECYCLED {
                            stats.reset();
                            let _ = give_back[w].send(stats);
                            waiting_at[w] += 1;
                        }
                    }
                }
                if let Some(at) = done_at {
                    p.done_at = Some(p.done_at.map_or(at, |d| d.max(at)));
                }
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
        // Emit every interval that all workers have handed in.
        while pending.contains_key(&emitted) {
            let complete = next_of.iter().all(|n| n.is_none_or(|n| n > emitted));
            if !complete {
                break;
            }
            let p = pending.remove(&emitted).expect("checked above");
            // An interval ends where the last of its stats end: at its
            // boundary if any worker ran to it, else when the last one
            // finished.
            let end = match (p.done_at, shared.boundary(emitted)) {
                (_, Some((b, _))) if p.to_boundary => b,
                (Some(done), Some((b, _))) => done.min(b),
                (Some(done), None) => done,
                (None, Some((b, _))) => b,
                (None, None) => last_end,
            };
            let phase = if end <= measure_start && !spec.warmup.is_zero() {
                Phase::Warmup
            } else {
                Phase::Measure
            };
            let duration = end.saturating_duration_since(last_end);
            let share = |d: Duration| {
                if duration.is_zero() {
                    0.0
                } else {
                    d.as_secs_f64() / duration.as_secs_f64()
                }
            };
            let mut cpu_used = vec![Duration::ZERO; workers];
            let mut delay_used = vec![None; workers];
            let mut loads = Vec::with_capacity(workers);
            for w in 0..workers {
                match p.cpu[w] {
                    Some(c) => {
                        cpu_used[w] = c.saturating_sub(last_cpu[w]);
                        last_cpu[w] = c;
                        delay_used[w] = p.run_delay[w]
                            .zip(last_run_delay[w])
                            .map(|(now, last)| now.saturating_sub(last));
                        last_run_delay[w] = p.run_delay[w];
                    }
                    // A worker that has finished did nothing more.
                    None => delay_used[w] = Some(Duration::ZERO),
                }
                worker_cpu[w] = share(cpu_used[w]);
                loads.push(WorkerLoad {
                    cpu: worker_cpu[w],
                    run_delay: delay_used[w].map(share),
                    // Cut when the worker got to it, a little after the
                    // interval's end at times.
                    all_waiting: share(p.all_waiting[w]).min(1.0),
                });
            }
            // Measured events cut into a warm-up interval (a late flush)
            // are carried into the first measured interval; warm-up events
            // finishing after the boundary stay out of the numbers.
            carry.merge(&p.measured);
            let shown = match phase {
                Phase::Warmup => &p.warmup,
                Phase::Measure => &carry,
            };
            observer.interval(&IntervalView {
                phase,
                elapsed: end - start,
                duration,
                stats: shown,
                worker_cpu: &worker_cpu,
            });
            let watched = Watched {
                loads: &loads,
                duration,
                elapsed: end - start,
                stats: shown,
                rate: spec.rate.map(|r| r.per_sec),
                sessions: spec.sessions(),
            };
            let warned = if spec.measures_client_cpu {
                Vec::new()
            } else {
                saturation.check(&watched)
            };
            for warning in warned {
                observer.warning(&warning);
                warnings.push(warning);
            }
            if phase == Phase::Measure {
                run_load.add(duration, &cpu_used, &delay_used, &p.all_waiting);
                let mut interval = Interval::from_stats(
                    (end - measure_start).as_secs_f64(),
                    duration.as_secs_f64(),
                    &carry,
                );
                if spec.hold.is_some() {
                    interval.connections_held = Some(shared.held.now());
                }
                intervals.push(interval);
                total.merge(&carry);
                carry.reset();
            }
            for mut stats in [p.measured, p.warmup] {
                if spare.len() < RECYCLED {
                    stats.reset();
                    spare.push(stats);
                }
            }
            last_end = end;
            emitted += 1;
            let counters = match &mut monitor {
                Some(conn) => {
                    match tokio::time::timeout(COUNTER_TIMEOUT, shared.driver.server_counters(conn))
                        .await
                    {
                        Ok(Ok(c)) => c,
                        Ok(Err(_)) | Err(_) => {
                            // A broken or slow monitor is dropped, not retried.
                            monitor = None;
                            Vec::new()
                        }
                    }
                }
                None => Vec::new(),
            };
            let t_s = if end >= measure_start {
                (end - measure_start).as_secs_f64()
            } else {
                -(measure_start - end).as_secs_f64()
            };
            // The stub of an interval that ends a run (events answered
            // after the deadline) spans a few ms: CPU counted in 10 ms
            // ticks reads 0% or 600% there, and would skew the averages.
            // Judged by the interval's own length, not by the time since
            // the last sample, which a slow counter read before it moves
            // (a whole interval's sample, and its counter rates, were lost).
            if duration * 2 >= spec.interval || !sampled {
                sampled = true;
                let mut sample = sampler.sample(t_s, counters);
                if let Some(readings) = &spec.server_metrics {
                    sample.remote = readings.take();
                }
                observer.resources(&sample);
                samples.push(sample);
            }
        }
        if next_of.iter().all(Option::is_none) && pending.is_empty() {
            break;
        }
    }
    let cpu_at_end = CpuTime::of_process();
    // Threads still running after a second interrupt are left to the
    // process exit; the others are joined so their memory is released.
    if next_of.iter().all(Option::is_none) {
        for h in handles {
            let _ = h.join();
        }
    } else {
        run_end = Instant::now();
        for p in pending.into_values() {
            total.merge(&p.measured);
        }
    }
    // Measured events cut into the last warm-up interval and never carried
    // into a measured one: a run that ended right at the warm-up's end.
    total.merge(&carry);

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
    let unclaimed = shared.schedule.unclaimed_before(schedule_end);
    total.dropped += unclaimed.iter().sum::<u64>();
    for (group, dropped) in total.groups.iter_mut().zip(unclaimed) {
        group.dropped += dropped;
    }

    let duration = run_end.saturating_duration_since(measure_start);
    // Each group's rate against its own events (the run's, with one group).
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
        if stop_reason == StopReason::Completed && achieved < rate.per_sec * 0.95 {
            warnings.push(format!(
                "target rate not reached{group}: {achieved:.1} events/s of {:.1} ({:.1}% short); {} due {} never sent. {}",
                rate.per_sec,
                100.0 * (1.0 - achieved / rate.per_sec),
                counted(dropped, "event"),
                if dropped == 1 { "was" } else { "were" },
                missed_rate_cause(&run_load.shares(), spec.sessions())
            ));
        }
    }

    let samples = samples.into_vec();
    let bottleneck = resources::diagnose(&samples, spec.workers);
    RunOutcome {
        stop_reason,
        error,
        started_at,
        ended_at: SystemTime::now(),
        duration,
        total,
        intervals: intervals.into_vec(),
        open_loop: shared.schedule.is_open_loop(),
        answers_timed_on_receipt: shared.defer_reads,
        client_cpu: cpu_at_end.since(cpu_at_measure.unwrap_or(cpu_at_start)),
        warnings,
        resources: samples,
        bottleneck,
        held: spec.hold.map(|_| shared.held.outcome(measure_start)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn load(cpu: f64, run_delay: f64, all_waiting: f64) -> WorkerLoad {
        WorkerLoad {
            cpu,
            run_delay: Some(run_delay),
            all_waiting,
        }
    }

    /// Checks one 1 s interval ending at `at` s.
    fn check(
        s: &mut Saturation,
        loads: &[WorkerLoad],
        stats: &Stats,
        rate: Option<f64>,
        at: u64,
    ) -> Vec<String> {
        s.check(&Watched {
            loads,
            duration: SECOND,
            elapsed: SECOND * at as u32,
            stats,
            rate,
            sessions: 10,
        })
    }

    fn cpu_only(s: &mut Saturation, cpu: &[f64]) -> Vec<String> {
        let loads: Vec<WorkerLoad> = cpu.iter().map(|&c| load(c, 0.0, 0.0)).collect();
        check(s, &loads, &Stats::new(0), None, 1)
    }

    /// Stats whose events started `ms` late.
    fn lagged(ms: u64) -> Stats {
        let mut st = Stats::new(0);
        for _ in 0..100 {
            st.record_event(
                Duration::from_millis(ms + 1),
                Duration::from_millis(1),
                Some(Duration::from_millis(ms)),
            );
        }
        st
    }

    #[test]
    fn a_worker_hot_for_three_intervals_raises_one_warning() {
        let mut s = Saturation::default();
        assert!(cpu_only(&mut s, &[0.95, 0.2]).is_empty());
        assert!(cpu_only(&mut s, &[0.97, 0.2]).is_empty());
        let w = cpu_only(&mut s, &[0.99, 0.2]);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("worker thread 0 was busy 99% of the time on a CPU for 3 intervals"),
            "{}",
            w[0]
        );
        assert!(cpu_only(&mut s, &[0.99, 0.99]).is_empty(), "raised once");
    }

    #[test]
    fn a_worker_kept_from_a_cpu_is_as_saturated_as_one_on_it() {
        let mut s = Saturation::default();
        let starved = [load(0.55, 0.42, 0.0)];
        let stats = Stats::new(0);
        assert!(check(&mut s, &starved, &stats, None, 1).is_empty());
        assert!(check(&mut s, &starved, &stats, None, 2).is_empty());
        let w = check(&mut s, &starved, &stats, None, 3);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("was busy 97% of the time (55% on a CPU, 42% waiting for one)"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn a_dip_resets_the_streak() {
        let mut s = Saturation::default();
        for cpu in [0.95, 0.95, 0.5, 0.95, 0.95] {
            assert!(cpu_only(&mut s, &[cpu]).is_empty());
        }
    }

    #[test]
    fn late_starts_while_every_session_waits_are_the_servers() {
        let mut s = Saturation::default();
        // A 500 ms stall: the worker idles, all sessions waiting on it.
        let w = check(
            &mut s,
            &[load(0.1, 0.02, 0.5)],
            &lagged(480),
            Some(2000.0),
            3,
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("480 ms behind schedule")
                && w[0].contains("ending at 3.0 s")
                && w[0].contains("because every session was waiting on the server")
                && w[0].contains(
                    "all 10 had a request in flight, unanswered, for 500 ms of the last 1.0 s"
                )
                && w[0].contains("no worker thread was busy more than 12%"),
            "{}",
            w[0]
        );
        assert!(!w[0].contains("client is saturated"), "{}", w[0]);
        // Raised once.
        assert!(check(
            &mut s,
            &[load(0.1, 0.0, 0.6)],
            &lagged(500),
            Some(2000.0),
            4
        )
        .is_empty());
    }

    #[test]
    fn a_stall_straddling_a_cut_is_found_over_both_intervals() {
        let mut s = Saturation::default();
        // 300 ms of waiting at the end of one interval, 200 ms at the
        // start of the next, where the late events finish.
        assert!(check(&mut s, &[load(0.1, 0.0, 0.3)], &lagged(0), Some(2000.0), 1).is_empty());
        let w = check(
            &mut s,
            &[load(0.1, 0.0, 0.2)],
            &lagged(450),
            Some(2000.0),
            2,
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("for 500 ms of the last 2.0 s"), "{}", w[0]);
    }

    #[test]
    fn late_starts_on_a_busy_worker_are_the_clients() {
        let mut s = Saturation::default();
        // On a CPU half the time, waiting for one the rest: a host shared
        // with other work. The worker never idled.
        let w = check(
            &mut s,
            &[load(0.3, 0.0, 0.0), load(0.55, 0.43, 0.9)],
            &lagged(800),
            Some(1e6),
            2,
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("because the client is saturated: worker thread 1 was busy 98% of that interval (55% on a CPU, 43% waiting for one)"),
            "{}",
            w[0]
        );
        assert!(!w[0].contains("waiting on the server"), "{}", w[0]);
    }

    #[test]
    fn late_starts_with_free_sessions_and_idle_workers_blame_neither() {
        let mut s = Saturation::default();
        let w = check(
            &mut s,
            &[load(0.2, 0.1, 0.01)],
            &lagged(300),
            Some(100.0),
            5,
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("the client's threads woke late"), "{}", w[0]);
        assert!(
            !w[0].contains("client is saturated") && !w[0].contains("because every session"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn lag_is_looked_at_in_open_loop_only_and_above_the_floor() {
        let mut s = Saturation::default();
        let idle = [load(0.1, 0.0, 0.0)];
        assert!(check(&mut s, &idle, &lagged(5000), None, 1).is_empty());
        assert!(check(&mut s, &idle, &lagged(90), Some(1000.0), 2).is_empty());
    }

    #[test]
    fn a_missed_rate_names_its_cause() {
        let client = missed_rate_cause(&[load(0.6, 0.35, 0.9)], 1);
        assert!(
            client.starts_with("The client is saturated: worker thread 0 was busy 95% of the run"),
            "{client}"
        );
        let server = missed_rate_cause(&[load(0.2, 0.0, 0.8), load(0.3, 0.0, 0.7)], 4);
        assert!(
            server.starts_with("Every session was waiting on the server: all 4 had a request in flight, unanswered, 70% of the run")
                && server.contains("no worker thread was busy more than 30%"),
            "{server}"
        );
        let neither = missed_rate_cause(&[load(0.5, 0.0, 0.2)], 4);
        assert!(neither.starts_with("The client or the server"), "{neither}");
        let nothing = missed_rate_cause(&[], 4);
        assert!(nothing.starts_with("The client or the server"), "{nothing}");
    }
}
