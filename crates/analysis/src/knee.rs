//! Knees: where throughput stops scaling with concurrency (threads, clients,
//! nodes, partitions...), and where p99 latency starts to climb with load.
//!
//! Two model-free rules (the model, the Universal Scalability Law, is
//! [`crate::usl`]):
//!
//! - [`marginal_gain_knee`]: on consecutive points — the first point whose
//!   gain over the previous one, normalised per doubling of concurrency,
//!   falls below a threshold (default 10%).
//! - [`latency_knee`]: the load past which p99 exceeds a multiple (default
//!   2×) of its low-load baseline.
//!
//! Points are `(x, y)` pairs. For the throughput tools `x` is the
//! concurrency (sorted ascending; repeated runs at the same `x` should be
//! averaged first, e.g. with [`average_repeats`]) and `y` the throughput.

use serde::{Deserialize, Serialize};

use crate::error::{check_finite, invalid, AnalysisError};
use crate::stats::median;
use crate::text;

/// Sorts points by `x` and replaces points sharing an `x` by their mean `y`
/// (the "each point run 3 times and averaged" step of a sweep).
pub fn average_repeats(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut count = 0usize;
    for (x, y) in sorted {
        match out.last_mut() {
            Some(last) if last.0 == x => {
                count += 1;
                last.1 += (y - last.1) / count as f64;
            }
            _ => {
                out.push((x, y));
                count = 1;
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Marginal-gain knee
// ---------------------------------------------------------------------------

/// How the gain between two consecutive points is made comparable when the
/// steps in `x` are not all the same size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GainNormalization {
    /// Gain per doubling of `x`, compounding: `(y₁/y₀)^(1/log₂(x₁/x₀)) − 1`.
    /// Equal to the raw gain when the sweep doubles (8, 16, 32, ...).
    #[default]
    PerDoubling,
    /// Raw gain divided by the relative step: `(y₁/y₀ − 1) / (x₁/x₀ − 1)`,
    /// i.e. the scaling efficiency of the step (1.0 = perfectly linear).
    /// Also equal to the raw gain for doublings.
    PerRelativeStep,
}

/// Options for [`marginal_gain_knee`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MarginalOptions {
    /// The knee is the first point whose normalised gain is below this
    /// (0.10 = 10% per doubling).
    pub threshold: f64,
    pub normalization: GainNormalization,
}

impl Default for MarginalOptions {
    fn default() -> Self {
        MarginalOptions {
            threshold: 0.10,
            normalization: GainNormalization::PerDoubling,
        }
    }
}

/// The point where throughput stopped scaling, by the marginal-gain rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarginalKnee {
    /// The knee: the first `x` whose gain over the previous point is below
    /// the threshold. Going from `prev_x` to here bought (almost) nothing.
    pub x: f64,
    /// Throughput at `x`.
    pub throughput: f64,
    /// The previous point: the last one that still scaled.
    pub prev_x: f64,
    pub prev_throughput: f64,
    /// Raw relative gain from `prev_x` to `x`: `y/y_prev − 1` (negative when
    /// throughput fell).
    pub gain: f64,
    /// The gain normalised as asked (per doubling or per relative step); this
    /// is what was compared with the threshold.
    pub normalized_gain: f64,
    pub threshold: f64,
    /// The highest measured throughput and where it was (may lie past the
    /// knee when throughput creeps up slowly).
    pub peak_x: f64,
    pub peak_throughput: f64,
}

impl MarginalKnee {
    /// Where throughput saturates: the last point that still scaled
    /// (`prev_x`), and what the points of `curve` past it added.
    pub fn saturation(&self, curve: &[(f64, f64)]) -> Saturation {
        let beyond: Vec<&(f64, f64)> = curve.iter().filter(|p| p.0 > self.prev_x).collect();
        let best = beyond.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        Saturation {
            x: self.prev_x,
            throughput: self.prev_throughput,
            beyond: beyond.iter().map(|p| p.0).collect(),
            beyond_gain: if self.prev_throughput > 0.0 {
                best / self.prev_throughput - 1.0
            } else {
                0.0
            },
        }
    }
}

/// Where throughput saturates: the last point that still scaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// The last `x` whose step still gained at least the threshold.
    pub x: f64,
    /// Throughput at `x`.
    pub throughput: f64,
    /// The `x`s measured past it.
    pub beyond: Vec<f64>,
    /// The most any of them added over `throughput`, relative (negative
    /// when all fell).
    pub beyond_gain: f64,
}

impl Saturation {
    /// Plain words, e.g. "throughput saturates at 4 clients per thread
    /// (3.99k events/s); 8 and 16 add under 1%". `unit` names `x`, `rate`
    /// the throughput.
    pub fn sentence(&self, unit: &str, rate: &str) -> String {
        let added = if self.beyond_gain <= 0.0 {
            "nothing".to_string()
        } else if self.beyond_gain < 0.01 {
            "under 1%".to_string()
        } else {
            format!("at most {}", text::pct(self.beyond_gain))
        };
        let verb = if self.beyond.len() == 1 {
            "adds"
        } else {
            "add"
        };
        format!(
            "throughput saturates at {} {unit} ({} {rate}); {} {verb} {added}",
            text::count(self.x),
            text::si(self.throughput),
            text::list(&self.beyond)
        )
    }
}

/// Finds the marginal-gain knee of a throughput-versus-concurrency curve.
///
/// Method: for each consecutive pair `(x₀, y₀) → (x₁, y₁)` the relative gain
/// `y₁/y₀ − 1` is normalised by the size of the step in `x` (see
/// [`GainNormalization`]); the knee is the first `x₁` whose normalised gain
/// is below `opts.threshold`. `Ok(None)` means every step still scaled.
///
/// Assumptions: `x` strictly increasing and positive (average repeated runs
/// first: [`average_repeats`]), throughput ≥ 0. The rule looks at one step
/// at a time, so a single noisy dip can trigger it: average repeats, and
/// cross-check with [`crate::usl::fit_usl`] on noisy sweeps.
pub fn marginal_gain_knee(
    points: &[(f64, f64)],
    opts: &MarginalOptions,
) -> Result<Option<MarginalKnee>, AnalysisError> {
    check_finite(points, "marginal_gain_knee")?;
    if points.len() < 2 {
        return Err(AnalysisError::NotEnoughPoints {
            what: "points",
            needed: 2,
            got: points.len(),
        });
    }
    if points.iter().any(|&(x, y)| x <= 0.0 || y < 0.0) {
        return Err(invalid(
            "marginal_gain_knee: concurrency must be > 0 and throughput >= 0",
        ));
    }
    if points.windows(2).any(|w| w[1].0 <= w[0].0) {
        return Err(invalid(
            "marginal_gain_knee: x must be strictly increasing (average repeats first)",
        ));
    }
    let (peak_x, peak_throughput) =
        points
            .iter()
            .copied()
            .fold((points[0].0, points[0].1), |best, p| {
                if p.1 > best.1 {
                    p
                } else {
                    best
                }
            });
    for w in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        let (gain, normalized) = if y0 > 0.0 {
            let ratio = y1 / y0;
            let gain = ratio - 1.0;
            let normalized = match opts.normalization {
                GainNormalization::PerDoubling => ratio.powf(1.0 / (x1 / x0).log2()) - 1.0,
                GainNormalization::PerRelativeStep => gain / (x1 / x0 - 1.0),
            };
            (gain, normalized)
        } else if y1 > 0.0 {
            (f64::INFINITY, f64::INFINITY)
        } else {
            (0.0, 0.0)
        };
        if normalized < opts.threshold {
            return Ok(Some(MarginalKnee {
                x: x1,
                throughput: y1,
                prev_x: x0,
                prev_throughput: y0,
                gain,
                normalized_gain: normalized,
                threshold: opts.threshold,
                peak_x,
                peak_throughput,
            }));
        }
    }
    Ok(None)
}

// ---------------------------------------------------------------------------
// Latency knee
// ---------------------------------------------------------------------------

/// Options for [`latency_knee`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyKneeOptions {
    /// The knee is where p99 exceeds `factor` × the baseline (default 2).
    pub factor: f64,
    /// Share of the points, lowest load first, whose median p99 is the
    /// baseline (default 1/3; at least one point).
    pub baseline_fraction: f64,
    /// The points are already in order of offered load (a sweep over
    /// threads or clients): scanned as given. Otherwise they are ordered by
    /// throughput, which is the load only while throughput still rises;
    /// past saturation it falls, and overloaded points would sort among
    /// the light ones.
    pub in_load_order: bool,
}

impl Default for LatencyKneeOptions {
    fn default() -> Self {
        LatencyKneeOptions {
            factor: 2.0,
            baseline_fraction: 1.0 / 3.0,
            in_load_order: false,
        }
    }
}

/// The load past which p99 latency climbs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyKnee {
    /// Median p99 of the lowest-load points.
    pub baseline_p99: f64,
    pub factor: f64,
    /// The highest load before the knee with p99 within `factor` × baseline.
    pub last_ok_throughput: f64,
    pub last_ok_p99: f64,
    /// The first load whose p99 exceeds `factor` × baseline.
    pub throughput: f64,
    pub p99: f64,
    /// `p99 / baseline_p99` at that load.
    pub ratio: f64,
    /// The load where p99 crosses `factor` × baseline, interpolated linearly
    /// between the last good point and the first bad one.
    pub crossing_throughput: f64,
    /// The swept parameter's value at the last good point and at the
    /// knee, when the points came from a sweep (absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ok_value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

/// Finds the load past which p99 latency climbs, from `(throughput, p99)`
/// points (any order; they are sorted by throughput).
///
/// Method: the baseline is the median p99 of the lowest-load
/// `baseline_fraction` of the points (default the lowest third, at least
/// one point); the knee is the first point, in order of load and right
/// after a point within bound, from which p99 exceeds `factor` × baseline
/// (default 2×) at every higher load. A step whose p99 jumped above the
/// bound while the next load was back within it (a scheduling stall on a
/// busy host) is noise, not where p99 started to climb. `Ok(None)` when
/// p99 never climbs for good.
///
/// Assumption: the lowest loads are below saturation, so their p99 is the
/// system's unloaded latency.
pub fn latency_knee(
    points: &[(f64, f64)],
    opts: &LatencyKneeOptions,
) -> Result<Option<LatencyKnee>, AnalysisError> {
    check_finite(points, "latency_knee")?;
    if points.len() < 2 {
        return Err(AnalysisError::NotEnoughPoints {
            what: "points",
            needed: 2,
            got: points.len(),
        });
    }
    if points.iter().any(|&(x, y)| x < 0.0 || y < 0.0) {
        return Err(invalid("latency_knee: throughput and p99 must be >= 0"));
    }
    if !(opts.factor > 1.0 && opts.baseline_fraction > 0.0 && opts.baseline_fraction <= 1.0) {
        return Err(invalid(
            "latency_knee: factor must be > 1 and baseline_fraction in (0, 1]",
        ));
    }
    let mut sorted = points.to_vec();
    if !opts.in_load_order {
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let k = ((sorted.len() as f64 * opts.baseline_fraction).ceil() as usize).clamp(1, sorted.len());
    let low: Vec<f64> = sorted[..k].iter().map(|p| p.1).collect();
    let baseline = median(&low);
    let bound = opts.factor * baseline;
    // The first of the points above the bound from which every later one
    // is above it too: right after the last point within it.
    let Some(last_within) = sorted.iter().rposition(|&(_, y)| y <= bound) else {
        return Ok(None);
    };
    let Some(&(x, y)) = sorted.get(last_within + 1) else {
        return Ok(None);
    };
    let (x0, y0) = sorted[last_within];
    let crossing = if y > y0 {
        x0 + (x - x0) * (bound - y0) / (y - y0)
    } else {
        x0
    };
    Ok(Some(LatencyKnee {
        baseline_p99: baseline,
        factor: opts.factor,
        last_ok_throughput: x0,
        last_ok_p99: y0,
        throughput: x,
        p99: y,
        ratio: if baseline > 0.0 {
            y / baseline
        } else {
            f64::INFINITY
        },
        crossing_throughput: crossing,
        last_ok_value: None,
        value: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stall that pushed one step's p99 over the bound, with the next
    /// load back within it, is not where p99 started to climb.
    #[test]
    fn a_single_step_above_the_bound_is_not_the_latency_knee() {
        let opts = LatencyKneeOptions {
            factor: 1.5,
            in_load_order: true,
            ..LatencyKneeOptions::default()
        };
        let stalled = [(1.0, 1.0), (2.0, 1.0), (4.0, 1.7), (8.0, 1.05), (24.0, 3.0)];
        let k = latency_knee(&stalled, &opts).unwrap().unwrap();
        assert_eq!((k.last_ok_throughput, k.throughput), (8.0, 24.0));
        // Climbing for good from the first step above the bound.
        let climbing = [(1.0, 1.0), (2.0, 1.0), (4.0, 1.7), (8.0, 2.0), (24.0, 3.0)];
        let k = latency_knee(&climbing, &opts).unwrap().unwrap();
        assert_eq!((k.last_ok_throughput, k.throughput), (2.0, 4.0));
        // Back within the bound at the highest load: no knee.
        let recovered = [(1.0, 1.0), (2.0, 1.0), (4.0, 1.7), (8.0, 1.05)];
        assert_eq!(latency_knee(&recovered, &opts).unwrap(), None);
    }

    #[test]
    fn averages_repeats() {
        let pts = [
            (16.0, 110.0),
            (8.0, 50.0),
            (8.0, 70.0),
            (16.0, 90.0),
            (8.0, 60.0),
        ];
        assert_eq!(average_repeats(&pts), vec![(8.0, 60.0), (16.0, 100.0)]);
    }

    #[test]
    fn marginal_knee_on_doubling_sweep() {
        // Scales ~1.8× per doubling to 32, then +3% to 64, then falls.
        let pts = [
            (8.0, 10_000.0),
            (16.0, 18_000.0),
            (32.0, 32_000.0),
            (64.0, 32_960.0),
            (128.0, 30_000.0),
        ];
        let knee = marginal_gain_knee(&pts, &MarginalOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(knee.x, 64.0);
        assert_eq!(knee.prev_x, 32.0);
        assert_eq!(knee.throughput, 32_960.0);
        assert!((knee.gain - 0.03).abs() < 1e-12);
        assert!((knee.normalized_gain - 0.03).abs() < 1e-12);
        assert_eq!(knee.peak_x, 64.0);
        let saturation = knee.saturation(&pts);
        assert_eq!((saturation.x, saturation.throughput), (32.0, 32_000.0));
        assert_eq!(saturation.beyond, [64.0, 128.0]);
        assert!((saturation.beyond_gain - 0.03).abs() < 1e-12);
        assert_eq!(
            saturation.sentence("threads", "TPS"),
            "throughput saturates at 32 threads (32k TPS); 64 and 128 add at most +3%"
        );
    }

    #[test]
    fn marginal_knee_normalises_uneven_steps() {
        // 100 → 104 is +4% raw, but over a step of only 8 → 9 threads
        // (+12.5%): per doubling that is (1.04)^(1/log2(1.125)) − 1 ≈ 26%,
        // per relative step 0.04/0.125 = 32%: both still scaling. The next
        // step, 9 → 18 (a doubling), gains 5%: the knee.
        let pts = [(8.0, 100.0), (9.0, 104.0), (18.0, 109.2)];
        for normalization in [
            GainNormalization::PerDoubling,
            GainNormalization::PerRelativeStep,
        ] {
            let opts = MarginalOptions {
                threshold: 0.10,
                normalization,
            };
            let knee = marginal_gain_knee(&pts, &opts).unwrap().unwrap();
            assert_eq!(knee.x, 18.0, "{normalization:?}");
            assert!((knee.normalized_gain - 0.05).abs() < 1e-12);
        }
        let per_doubling = 1.04f64.powf(1.0 / 1.125f64.log2()) - 1.0;
        assert!(per_doubling > 0.25 && per_doubling < 0.27);
    }

    #[test]
    fn marginal_knee_none_when_still_scaling() {
        let pts: Vec<(f64, f64)> = (0..6)
            .map(|i| (2f64.powi(i), 1000.0 * 1.9f64.powi(i)))
            .collect();
        assert!(marginal_gain_knee(&pts, &MarginalOptions::default())
            .unwrap()
            .is_none());
    }

    #[test]
    fn marginal_knee_rejects_bad_input() {
        let opts = MarginalOptions::default();
        assert!(matches!(
            marginal_gain_knee(&[(1.0, 1.0)], &opts),
            Err(AnalysisError::NotEnoughPoints { .. })
        ));
        assert!(marginal_gain_knee(&[(2.0, 1.0), (2.0, 2.0)], &opts).is_err());
        assert!(marginal_gain_knee(&[(1.0, f64::NAN), (2.0, 2.0)], &opts).is_err());
    }

    #[test]
    fn latency_knee_doubles() {
        let pts = [
            (5_000.0, 2.0),
            (10_000.0, 2.1),
            (15_000.0, 1.9),
            (20_000.0, 2.3),
            (25_000.0, 2.8),
            (30_000.0, 3.5),
            (35_000.0, 4.8),
            (40_000.0, 15.0),
        ];
        let knee = latency_knee(&pts, &LatencyKneeOptions::default())
            .unwrap()
            .unwrap();
        // Lowest third = 3 points, median p99 2.0 → bound 4.0.
        assert_eq!(knee.baseline_p99, 2.0);
        assert_eq!(knee.last_ok_throughput, 30_000.0);
        assert_eq!(knee.throughput, 35_000.0);
        assert!((knee.ratio - 2.4).abs() < 1e-12);
        // 3.5 → 4.8 crosses 4.0 at 30k + 5k·0.5/1.3
        assert!((knee.crossing_throughput - (30_000.0 + 5_000.0 * 0.5 / 1.3)).abs() < 1e-6);
    }

    #[test]
    fn latency_knee_in_load_order_past_saturation() {
        // threads 1..32: throughput falls past 8 threads while p99 climbs.
        let pts = [
            (1000.0, 1.0),
            (2000.0, 1.0),
            (3800.0, 1.2),
            (5000.0, 1.8),
            (4800.0, 4.0),
            (4500.0, 9.0),
        ];
        let opts = LatencyKneeOptions {
            in_load_order: true,
            ..Default::default()
        };
        let knee = latency_knee(&pts, &opts).unwrap().unwrap();
        // 5k/s still met the bound; 16 threads (4.8k/s) first breached it.
        assert_eq!((knee.last_ok_throughput, knee.throughput), (5000.0, 4800.0));
        // Ordered by throughput, the overloaded 4.5k/s and 4.8k/s sort
        // before 5k/s, whose p99 is within bound: the climb is lost.
        assert_eq!(
            latency_knee(&pts, &LatencyKneeOptions::default()).unwrap(),
            None
        );
    }

    #[test]
    fn latency_knee_other_factor_and_unsorted() {
        let pts = [(3_000.0, 9.5), (1_000.0, 1.0), (2_000.0, 1.2)];
        let opts = LatencyKneeOptions {
            factor: 3.0,
            ..Default::default()
        };
        let knee = latency_knee(&pts, &opts).unwrap().unwrap();
        assert_eq!(
            (knee.last_ok_throughput, knee.throughput),
            (2_000.0, 3_000.0)
        );
        let flat = [(1.0, 1.0), (2.0, 1.1), (3.0, 1.2)];
        assert!(latency_knee(&flat, &LatencyKneeOptions::default())
            .unwrap()
            .is_none());
    }
}
