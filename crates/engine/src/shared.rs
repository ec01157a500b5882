//! What the collector and the workers share: the run's driver, script,
//! spec, schedule and stop control ([`Shared`]), the gate that holds the
//! sessions until all are connected ([`Gate`]), and the phases a run's
//! intervals belong to ([`Phase`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify, Semaphore};

use crate::control::Control;
use crate::hold::HeldGauge;
use crate::schedule::Schedule;
use crate::spec::RunSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Warmup,
    Measure,
}

pub(crate) struct Shared<D, S> {
    pub driver: Arc<D>,
    pub script: Arc<S>,
    pub spec: RunSpec,
    pub schedule: Schedule,
    pub control: Control,
    pub gate: Gate,
    /// Connections held, under `RunSpec::hold`.
    pub held: HeldGauge,
    /// Workers read answers at their ticks, timed by the kernel (see
    /// [`loadcell_core::receipt`]).
    pub defer_reads: bool,
    /// Under `--stages`, where measured intervals end (after the measure
    /// start): every interval mark and every stage's end, so that no
    /// interval straddles two stages and each stage's numbers are exactly
    /// those of its intervals.
    pub stage_cuts: Option<Vec<Duration>>,
    /// Connects in flight outside events (opening the sessions, and
    /// reconnecting them), at most [`OPENING_AT_ONCE`].
    pub opening: Semaphore,
}

/// How many session connects may be in flight at once. A server's listen
/// backlog is often small (Mosquitto's 100, Redis's and nginx's 511): 500
/// sessions connecting at once overflowed Mosquitto's, and the SYNs it
/// dropped were sent again a second later, so opening them took 1.1–1.3 s
/// instead of tenths. 64 at once still opens thousands a second on a LAN.
/// Connects inside events (a policy that churns connections) are the
/// measured operation and are not held back.
pub(crate) const OPENING_AT_ONCE: usize = 64;

/// Seconds from `measure_start` to `at`, negative in warm-up: the clock a
/// shape's targets and a result's intervals are read on.
pub(crate) fn since_measure(measure_start: Instant, at: Instant) -> f64 {
    match at.checked_duration_since(measure_start) {
        Some(d) => d.as_secs_f64(),
        None => -(measure_start - at).as_secs_f64(),
    }
}

/// The measured interval ends of a staged run: multiples of `interval`
/// and the stages' ends, in order, once each, up to the last stage's end.
pub(crate) fn stage_cuts(spec: &RunSpec) -> Option<Vec<Duration>> {
    let shape = &spec.stages.as_ref()?.shape;
    let total = shape.duration();
    let mut cuts: Vec<Duration> = shape
        .spans()
        .iter()
        .map(|s| Duration::from_secs_f64(s.end_s).min(total))
        .collect();
    let mut t = spec.interval;
    while t < total {
        cuts.push(t);
        t += spec.interval;
    }
    cuts.push(total);
    cuts.sort_unstable();
    // Ends closer than a microsecond are one (float seconds round).
    cuts.dedup_by(|a, b| a.abs_diff(*b) < Duration::from_micros(1));
    cuts.retain(|c| !c.is_zero());
    Some(cuts)
}

/// Holds the sessions until all of them are connected (or have given up),
/// as sysbench starts its clock once its threads are connected; then the
/// collector begins the schedule and opens the gate.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    ready: AtomicUsize,
    ready_changed: Notify,
    open: watch::Sender<bool>,
}

impl Gate {
    /// A session is connected, or will never be.
    pub fn ready(&self) {
        self.ready.fetch_add(1, Ordering::SeqCst);
        self.ready_changed.notify_one();
    }

    /// Resolves once `sessions` have called [`Gate::ready`].
    pub async fn all_ready(&self, sessions: usize) {
        loop {
            let changed = self.ready_changed.notified();
            if self.ready.load(Ordering::SeqCst) >= sessions {
                return;
            }
            changed.await;
        }
    }

    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Resolves once the gate is open.
    pub async fn opened(&self) {
        let mut rx = self.open.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = rx.wait_for(|open| *open).await;
    }
}

impl<D, S> Shared<D, S> {
    /// End of interval `k`, and the phase it belongs to. Warm-up is cut
    /// into intervals ending exactly at its end, so no interval straddles
    /// the phases. `None` once past the deadline.
    pub fn boundary(&self, k: usize) -> Option<(Instant, Phase)> {
        let iv = self.spec.interval;
        let warmup = self.spec.warmup;
        let warmup_intervals = warmup.as_nanos().div_ceil(iv.as_nanos()) as usize;
        if k < warmup_intervals {
            let t = (iv * (k as u32 + 1)).min(warmup);
            return Some((self.schedule.start() + t, Phase::Warmup));
        }
        if let Some(cuts) = &self.stage_cuts {
            let end = cuts.get(k - warmup_intervals)?;
            return Some((self.schedule.measure_start() + *end, Phase::Measure));
        }
        let j = (k - warmup_intervals) as u32;
        let start = self.schedule.measure_start() + iv * j;
        match self.schedule.deadline() {
            Some(d) if start >= d => None,
            Some(d) => Some(((start + iv).min(d), Phase::Measure)),
            None => Some((start + iv, Phase::Measure)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn a_staged_run_cuts_its_intervals_at_every_stage_end() {
        let shape = crate::shape::Shape::new(
            crate::shape::parse("0s:2000,3s:2000,0s:8000,2500ms:8000").unwrap(),
        )
        .unwrap();
        let mut spec = crate::schedule::tests::spec(None, Some(shape.duration()), None);
        spec.stages = Some(crate::shape::Stages {
            of: crate::shape::StageTarget::Rate,
            shape,
        });
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&m| Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            super::stage_cuts(&spec).unwrap(),
            ms(&[1000, 2000, 3000, 4000, 5000, 5500])
        );
        spec.interval = Duration::from_millis(2000);
        assert_eq!(
            super::stage_cuts(&spec).unwrap(),
            ms(&[2000, 3000, 4000, 5500])
        );
    }
}
