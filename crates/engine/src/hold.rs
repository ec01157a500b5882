//! Held connections (`RunSpec::hold`, the `http-conns` workload): how many
//! sessions hold an answering connection right now and at most, and the
//! first failure — when, at what count, and whether the client's own limit
//! (ports, descriptors, memory) rather than the target's was reached.
//! Touched once per connection made or lost, never per event.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use loadcell_core::DriverError;

/// The first event that failed while connections were being held.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstFailure {
    /// When the failed attempt began (a timeout is known only later), in
    /// seconds from the start of measurement (negative in the warm-up).
    pub t_s: f64,
    /// Connections held when it failed.
    pub held: u64,
    pub message: String,
    /// The client, not the target, ran out (see [`DriverError::is_client_limit`]).
    pub client_limit: bool,
}

/// Shared by every session of a run that holds connections.
#[derive(Debug, Default)]
pub(crate) struct HeldGauge {
    now: AtomicU64,
    peak: AtomicU64,
    first_failure: OnceLock<(Instant, FirstFailure)>,
}

impl HeldGauge {
    /// A session's connection answered its first event.
    pub fn gained(&self) {
        let now = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// A session that held its connection lost it.
    pub fn lost(&self) {
        self.now.fetch_sub(1, Ordering::Relaxed);
    }

    /// An event that began at `at` failed: kept if it is the first.
    pub fn failed(&self, at: Instant, e: &DriverError) {
        if self.first_failure.get().is_none() {
            let _ = self.first_failure.set((
                at,
                FirstFailure {
                    t_s: 0.0,
                    held: self.now(),
                    message: e.to_string(),
                    client_limit: e.is_client_limit(),
                },
            ));
        }
    }

    pub fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// What was held, with times counted from `measure_start`.
    pub fn outcome(&self, measure_start: Instant) -> HeldOutcome {
        let first_failure = self.first_failure.get().map(|(at, f)| FirstFailure {
            t_s: if *at >= measure_start {
                (*at - measure_start).as_secs_f64()
            } else {
                -(measure_start - *at).as_secs_f64()
            },
            ..f.clone()
        });
        HeldOutcome {
            peak: self.peak.load(Ordering::Relaxed),
            at_end: self.now(),
            first_failure,
        }
    }
}

/// What a run that held connections found.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldOutcome {
    /// The most connections held at once.
    pub peak: u64,
    /// Connections held when the run ended.
    pub at_end: u64,
    pub first_failure: Option<FirstFailure>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_gauge_keeps_its_peak_and_the_first_failure_at_its_count() {
        let g = HeldGauge::default();
        for _ in 0..3 {
            g.gained();
        }
        g.lost();
        let start = Instant::now();
        g.failed(
            start + Duration::from_millis(1500),
            &DriverError::connection("timed out"),
        );
        g.gained();
        g.failed(Instant::now(), &DriverError::connection("refused"));
        let o = g.outcome(start);
        assert_eq!((o.peak, o.at_end), (3, 3));
        let first = o.first_failure.unwrap();
        assert_eq!((first.t_s, first.held), (1.5, 2));
        assert_eq!(first.message, "timed out");
        assert!(!first.client_limit);
    }
}
