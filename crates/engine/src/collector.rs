//! The collector: starts the workers, merges what they hand in into
//! intervals and totals, watches for Ctrl-C and the deadline, and turns
//! the run into a [`RunOutcome`]. It runs on the calling thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use loadcell_core::Driver;
use loadcell_record::env::CpuTime;
use loadcell_record::resources::{self, ResourceSample, Sampler};
use loadcell_record::result::Interval;
use loadcell_record::Stats;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc;

use crate::control::{Control, StopReason};
use crate::plan::EnginePlan;
use crate::schedule::Schedule;
use crate::script::Script;
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
}

/// A worker above this share of a core is saturated...
const HOT_WORKER: f64 = 0.90;
/// ...when it stays there for this many intervals in a row.
const HOT_INTERVALS: usize = 3;
/// Schedule lag p99 growing this many intervals in a row, past
/// [`LAG_FLOOR`], means the client is falling behind.
const LAG_INTERVALS: usize = 3;
const LAG_FLOOR: Duration = Duration::from_millis(100);

/// Watches intervals for signs that the client, not the server, is the
/// bottleneck. Each kind of warning is raised once.
#[derive(Default)]
struct Saturation {
    hot_streak: Vec<usize>,
    hot_warned: bool,
    lag_p99_us: Vec<u64>,
    lag_warned: bool,
}

impl Saturation {
    fn check(&mut self, worker_cpu: &[f64], stats: &Stats, rate: Option<f64>) -> Vec<String> {
        let mut warnings = Vec::new();
        self.hot_streak.resize(worker_cpu.len(), 0);
        for (w, (&cpu, streak)) in worker_cpu.iter().zip(&mut self.hot_streak).enumerate() {
            *streak = if cpu >= HOT_WORKER { *streak + 1 } else { 0 };
            if *streak >= HOT_INTERVALS && !self.hot_warned {
                self.hot_warned = true;
                warnings.push(format!(
                    "the client is saturated: worker thread {w} used {:.0}% of a CPU core for {HOT_INTERVALS} intervals in a row, \
                     so these numbers may measure loadcell rather than the server; add --threads (if cores are free) or run the client on another machine",
                    cpu * 100.0
                ));
            }
        }
        if let Some(rate) = rate {
            if !stats.lag.is_empty() {
                self.lag_p99_us.push(stats.lag.value_at_quantile(0.99));
                let recent =
                    &self.lag_p99_us[self.lag_p99_us.len().saturating_sub(LAG_INTERVALS + 1)..];
                let growing =
                    recent.len() == LAG_INTERVALS + 1 && recent.windows(2).all(|w| w[1] > w[0]);
                let last = Duration::from_micros(*recent.last().unwrap_or(&0));
                if growing && last > LAG_FLOOR && !self.lag_warned {
                    self.lag_warned = true;
                    warnings.push(format!(
                        "schedule lag keeps growing (p99 {:.1} ms → {:.1} ms over {LAG_INTERVALS} intervals): the client cannot keep up with --rate {rate}; \
                         latency from the intended start is still reported truthfully",
                        recent[0] as f64 / 1000.0,
                        last.as_secs_f64() * 1000.0
                    ));
                }
            }
        }
        warnings
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
    pub intervals: Vec<Interval>,
    pub open_loop: bool,
    /// Client CPU used during the measurement phase.
    pub client_cpu: CpuTime,
    pub warnings: Vec<String>,
    /// Client, host, server-process and server-counter samples, one per interval.
    pub resources: Vec<ResourceSample>,
    /// What most likely limited throughput, in plain words.
    pub bottleneck: Option<String>,
}

/// How long a server-counter query may take before the sample goes
/// without it.
const COUNTER_TIMEOUT: Duration = Duration::from_secs(1);

struct Pending {
    measured: Stats,
    warmup: Stats,
    /// Cumulative CPU per worker, as of this interval's cut.
    cpu: Vec<Option<Duration>>,
    /// Latest `Done` instant among workers that finished in this interval.
    done_at: Option<Instant>,
    /// Whether some worker's stats for this interval run to its boundary
    /// (it was cut there rather than finishing inside it).
    to_boundary: bool,
}

pub(crate) fn run<D, S>(
    driver: Arc<D>,
    script: Arc<S>,
    plan: &EnginePlan,
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
    runtime.block_on(collect(driver, script, plan, observer))
}

/// Resolves at SIGINT or SIGTERM (never, if they could not be caught).
async fn interrupted(interrupts: &mut Option<Signal>, terminates: &mut Option<Signal>) {
    match (interrupts, terminates) {
        (Some(i), Some(t)) => {
            tokio::select! { _ = i.recv() => {}, _ = t.recv() => {} }
        }
        _ => std::future::pending().await,
    }
}

async fn collect<D, S>(
    driver: Arc<D>,
    script: Arc<S>,
    plan: &EnginePlan,
    observer: &mut dyn Observer,
) -> RunOutcome
where
    D: Driver,
    S: Script<D::Conn> + Send + Sync,
{
    let n_ops = script.ops().len();
    let shared = Arc::new(Shared {
        driver,
        script,
        plan: plan.clone(),
        schedule: Schedule::new(plan),
        control: Control::default(),
        gate: Gate::default(),
    });

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut handles = Vec::new();
    // Per worker: where its stats go back once merged and emptied.
    let mut give_back = Vec::new();
    for w in 0..plan.workers {
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

    let mut interrupts = signal(SignalKind::interrupt()).ok();
    let mut terminates = signal(SignalKind::terminate()).ok();

    // The run's clock starts once every session is connected (or has
    // given up, which stops the run), or at Ctrl-C.
    tokio::select! {
        _ = shared.gate.all_ready(plan.sessions()) => {}
        _ = shared.control.stopped() => {}
        _ = interrupted(&mut interrupts, &mut terminates) => {
            shared.control.stop(StopReason::Interrupted, None);
        }
    }
    let started_at = SystemTime::now();
    let start = Instant::now();
    let cpu_at_start = CpuTime::of_process();
    shared.schedule.begin(start);
    shared.gate.open();

    let deadline = shared.schedule.deadline();
    let measure_start = shared.schedule.measure_start();
    let mut cpu_at_measure = if plan.warmup.is_zero() {
        Some(cpu_at_start)
    } else {
        None
    };

    let mut pending: BTreeMap<usize, Pending> = BTreeMap::new();
    // Per worker: the next interval it has not reported, or `None` once done.
    let mut next_of: Vec<Option<usize>> = vec![Some(0); workers];
    let mut emitted = 0usize;
    let mut total = Stats::new(n_ops);
    let mut carry = Stats::new(n_ops);
    // Emptied stats for the next intervals' `Pending`s (see `Stats::reset`).
    let mut spare: Vec<Stats> = Vec::new();
    let mut worker_cpu = vec![0.0; workers];
    let mut last_cpu = vec![Duration::ZERO; workers];
    let mut saturation = Saturation::default();
    let mut warnings = Vec::new();
    let mut sampler = Sampler::new(plan.server_pid);
    let mut samples = Vec::new();
    // A connection of its own for server counters; without one, samples
    // simply go without them.
    let mut monitor = crate::connect_with_timeout(&*shared.driver, plan.connect_timeout)
        .await
        .ok();
    let mut intervals = Vec::new();
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
        let interrupted = interrupted(&mut interrupts, &mut terminates);
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
                    measured: spare.pop().unwrap_or_else(|| Stats::new(n_ops)),
                    warmup: spare.pop().unwrap_or_else(|| Stats::new(n_ops)),
                    cpu: vec![None; workers],
                    done_at: None,
                    to_boundary: false,
                });
                p.to_boundary |= done_at.is_none();
                p.cpu[w] = Some(cut.cpu);
                p.measured.merge(&cut.measured);
                p.warmup.merge(&cut.warmup);
                if done_at.is_none() {
                    for mut stats in [cut.measured, cut.warmup] {
                        stats.reset();
                        // A worker that has finished no longer takes any.
                        let _ = give_back[w].send(stats);
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
            let phase = if end <= measure_start && !plan.warmup.is_zero() {
                Phase::Warmup
            } else {
                Phase::Measure
            };
            let duration = end.saturating_duration_since(last_end);
            for (w, cpu) in p.cpu.iter().enumerate() {
                worker_cpu[w] = match cpu {
                    Some(c) if !duration.is_zero() => {
                        c.saturating_sub(last_cpu[w]).as_secs_f64() / duration.as_secs_f64()
                    }
                    _ => 0.0,
                };
                if let Some(c) = cpu {
                    last_cpu[w] = *c;
                }
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
            for warning in saturation.check(&worker_cpu, shown, plan.rate.map(|r| r.per_sec)) {
                observer.warning(&warning);
                warnings.push(warning);
            }
            if phase == Phase::Measure {
                intervals.push(Interval::from_stats(
                    (end - measure_start).as_secs_f64(),
                    duration.as_secs_f64(),
                    &carry,
                ));
                total.merge(&carry);
                carry.reset();
            }
            for mut stats in [p.measured, p.warmup] {
                stats.reset();
                spare.push(stats);
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
            samples.push(sampler.sample(t_s, counters));
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
    total.dropped += shared.schedule.unclaimed_before(schedule_end);

    let duration = run_end.saturating_duration_since(measure_start);
    if let Some(rate) = plan.rate {
        let achieved = total.events as f64 / duration.as_secs_f64().max(1e-9);
        if stop_reason == StopReason::Completed && achieved < rate.per_sec * 0.95 {
            warnings.push(format!(
                "target rate not reached: {achieved:.1} events/s of {:.1} ({:.1}% short); {} events due were never sent. \
                 The client or the server is saturated: add --threads or --clients, or lower --rate",
                rate.per_sec,
                100.0 * (1.0 - achieved / rate.per_sec),
                total.dropped
            ));
        }
    }

    let bottleneck = resources::diagnose(&samples, plan.workers);
    RunOutcome {
        stop_reason,
        error,
        started_at,
        ended_at: SystemTime::now(),
        duration,
        total,
        intervals,
        open_loop: shared.schedule.is_open_loop(),
        client_cpu: cpu_at_end.since(cpu_at_measure.unwrap_or(cpu_at_start)),
        warnings,
        resources: samples,
        bottleneck,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_hot_for_three_intervals_raises_one_warning() {
        let mut s = Saturation::default();
        let stats = Stats::new(0);
        assert!(s.check(&[0.95, 0.2], &stats, None).is_empty());
        assert!(s.check(&[0.97, 0.2], &stats, None).is_empty());
        let w = s.check(&[0.99, 0.2], &stats, None);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("worker thread 0 used 99%"), "{}", w[0]);
        assert!(
            s.check(&[0.99, 0.99], &stats, None).is_empty(),
            "raised once"
        );
    }

    #[test]
    fn a_dip_resets_the_streak() {
        let mut s = Saturation::default();
        let stats = Stats::new(0);
        for cpu in [0.95, 0.95, 0.5, 0.95, 0.95] {
            assert!(s.check(&[cpu], &stats, None).is_empty());
        }
    }

    #[test]
    fn growing_lag_is_reported_in_open_loop_only() {
        let lagged = |ms: u64| {
            let mut st = Stats::new(0);
            st.record_event(
                Duration::from_millis(ms),
                Duration::from_millis(1),
                Some(Duration::from_millis(ms)),
            );
            st
        };
        let mut s = Saturation::default();
        let mut raised = Vec::new();
        for ms in [50, 120, 300, 700, 1500] {
            raised.extend(s.check(&[0.1], &lagged(ms), Some(1000.0)));
        }
        assert_eq!(raised.len(), 1, "{raised:?}");
        assert!(
            raised[0].contains("schedule lag keeps growing"),
            "{}",
            raised[0]
        );

        let mut steady = Saturation::default();
        for ms in [200, 200, 200, 200, 200] {
            assert!(steady.check(&[0.1], &lagged(ms), Some(1000.0)).is_empty());
        }
    }
}
