//! The collector: starts the workers, merges what they hand in into
//! intervals and totals, watches for Ctrl-C and the deadline, and turns
//! the run into a [`RunOutcome`]. It runs on the calling thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use loadcell_core::Driver;
use loadcell_record::env::CpuTime;
use loadcell_record::result::Interval;
use loadcell_record::Stats;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use crate::control::{Control, StopReason};
use crate::plan::EnginePlan;
use crate::schedule::Schedule;
use crate::script::Script;
use crate::worker::{self, Report, Shared};

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
}

/// Receives intervals as they complete (live reporting).
pub trait Observer {
    fn interval(&mut self, view: &IntervalView<'_>);
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
}

struct Pending {
    measured: Stats,
    warmup: Stats,
    /// Latest `Done` instant among workers that finished in this interval.
    done_at: Option<Instant>,
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
    let started_at = SystemTime::now();
    let start = Instant::now();
    let cpu_at_start = CpuTime::of_process();
    let shared = Arc::new(Shared {
        driver,
        script,
        plan: plan.clone(),
        schedule: Schedule::new(plan, start),
        control: Control::default(),
    });

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut handles = Vec::new();
    for w in 0..plan.threads {
        match worker::spawn(Arc::clone(&shared), w, tx.clone()) {
            Ok(h) => handles.push(h),
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
        let interrupted = async {
            match (&mut interrupts, &mut terminates) {
                (Some(i), Some(t)) => {
                    tokio::select! { _ = i.recv() => {}, _ = t.recv() => {} }
                }
                _ => std::future::pending().await,
            }
        };
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
                    measured: Stats::new(n_ops),
                    warmup: Stats::new(n_ops),
                    done_at: None,
                });
                p.measured.merge(&cut.measured);
                p.warmup.merge(&cut.warmup);
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
            let end = match (p.done_at, shared.boundary(emitted)) {
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
            });
            if phase == Phase::Measure {
                intervals.push(Interval::from_stats(
                    (end - measure_start).as_secs_f64(),
                    duration.as_secs_f64(),
                    &carry,
                ));
                total.merge(&carry);
                carry = Stats::new(n_ops);
            }
            last_end = end;
            emitted += 1;
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
        total.merge(&carry);
        for p in pending.into_values() {
            total.merge(&p.measured);
        }
    }

    let stop = shared.control.reason();
    let (stop_reason, error) = match stop {
        Some((StopReason::Completed, _)) | None => (StopReason::Completed, None),
        Some((reason, message)) => (reason, message),
    };
    let mut rng = SmallRng::seed_from_u64(plan.seed);
    let schedule_end = deadline.map_or(run_end, |d| d.min(run_end));
    total.dropped += shared.schedule.unclaimed_before(schedule_end, &mut rng);

    let duration = run_end.saturating_duration_since(measure_start);
    let mut warnings = Vec::new();
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
    }
}
