//! When a run has reached its steady state, for `--warmup auto`: the
//! MSER-5 rule (White, 1997; Franklin & White, 2008) over the run's
//! interval series, applied online.
//!
//! MSER-5 groups a series into batch means of 5 observations, `b_1…b_m`,
//! and truncates the `d` first batches that minimise
//! `Σ_{j>d} (b_j − mean_{j>d})² / (m − d)²`: the variance of what is kept,
//! penalised for keeping less. A warm-up transient raises the variance of
//! any tail that holds it, so the minimum falls just after it. The rule
//! weighs cuts in the first half of the series only, and trusts one only
//! inside it: a best cut at the half's edge means the series is still too
//! short to tell transient from steady state, so the detector waits.
//!
//! A run has settled when every series it watches (throughput and mean
//! latency per interval) has a trusted truncation; it settled at the
//! latest of them.

/// Observations per batch: the "5" of MSER-5.
pub const BATCH: usize = 5;

/// Fewest batches judged: with fewer, one slow batch is all a series has.
pub const MIN_BATCHES: usize = 4;

/// What the result records of the rule.
pub const METHOD: &str = "MSER-5 over each interval's throughput and mean latency";

/// The MSER-5 truncation of `series`: how many leading observations to
/// drop (a multiple of [`BATCH`]). `None` when the series has fewer than
/// [`MIN_BATCHES`] batches, or its best truncation is not inside its
/// first half (not settled yet, or not long enough to tell).
pub fn mser5(series: &[f64]) -> Option<usize> {
    let batches: Vec<f64> = series
        .chunks_exact(BATCH)
        .map(|c| c.iter().sum::<f64>() / BATCH as f64)
        .collect();
    let m = batches.len();
    if m < MIN_BATCHES {
        return None;
    }
    // Suffix sums make each d's statistic O(1): Σ(b − mean)² = Σb² − (Σb)²/n.
    let (mut sum, mut squares) = (0.0, 0.0);
    let half = m / 2;
    let mut best = (f64::INFINITY, 0);
    for d in (0..m).rev() {
        sum += batches[d];
        squares += batches[d] * batches[d];
        // Only cuts in the first half are weighed: near the end, two
        // batches that happen to agree would look steadiest of all.
        if d > half {
            continue;
        }
        let kept = (m - d) as f64;
        let statistic = (squares - sum * sum / kept).max(0.0) / (kept * kept);
        // Ties go to the earliest truncation (keep the most data).
        if statistic <= best.0 {
            best = (statistic, d);
        }
    }
    // The best cut at the half's edge would lie further on: still falling,
    // or too short to tell.
    (best.1 < half).then_some(best.1 * BATCH)
}

/// Watches a run's intervals, one observation of each series per
/// interval, and says when all of them have settled.
#[derive(Debug, Clone, Default)]
pub struct Detector {
    throughput: Vec<f64>,
    latency: Vec<f64>,
}

impl Detector {
    pub fn new() -> Detector {
        Detector::default()
    }

    /// Adds one interval: its events per second and its mean latency.
    pub fn push(&mut self, throughput: f64, mean_latency: f64) {
        self.throughput.push(throughput);
        self.latency.push(mean_latency);
    }

    /// How many intervals were transient, once both series have settled.
    pub fn settled(&self) -> Option<usize> {
        // An interval with no event has no latency: it says nothing yet.
        if self.throughput.iter().all(|&t| t == 0.0) {
            return None;
        }
        Some(mser5(&self.throughput)?.max(mser5(&self.latency)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transient of `transient` observations falling linearly from 5× to
    /// the steady value 1, then `steady` observations with a small
    /// deterministic wobble.
    fn series(transient: usize, steady: usize) -> Vec<f64> {
        let falling = (0..transient).map(|i| 1.0 + 4.0 * (1.0 - i as f64 / transient as f64));
        let wobble = (0..steady).map(|i| 1.0 + 0.02 * ((i * 7919 % 13) as f64 / 13.0 - 0.5));
        falling.chain(wobble).collect()
    }

    #[test]
    fn a_transient_is_cut_just_after_it_once_the_series_is_twice_as_long() {
        // Too short to tell: the best cut lies in the second half.
        assert_eq!(mser5(&series(20, 10)), None);
        let cut = mser5(&series(20, 30)).expect("settled");
        assert!((15..=25).contains(&cut), "{cut}");
        let cut = mser5(&series(20, 200)).expect("settled");
        assert!((15..=25).contains(&cut), "{cut}");
    }

    #[test]
    fn a_steady_series_is_settled_from_the_start() {
        // Noise alone may cut a batch or two, never a transient's worth.
        let cut = mser5(&series(0, 40)).expect("settled");
        assert!(cut <= 10, "{cut}");
        assert_eq!(mser5(&series(0, 19)), None, "under 4 batches");
    }

    #[test]
    fn a_series_still_falling_never_settles() {
        let falling: Vec<f64> = (0..100).map(|i| 100.0 - i as f64).collect();
        assert_eq!(mser5(&falling), None);
    }

    #[test]
    fn the_detector_waits_for_both_series() {
        let mut d = Detector::new();
        let latency = series(20, 40);
        // Throughput steady from the start, latency with a transient.
        for (i, l) in latency.iter().enumerate() {
            d.push(1000.0 + (i % 3) as f64, *l);
        }
        let cut = d.settled().expect("settled");
        assert!((15..=25).contains(&cut), "{cut}");
        let mut idle = Detector::new();
        for _ in 0..40 {
            idle.push(0.0, 0.0);
        }
        assert_eq!(idle.settled(), None);
    }
}
