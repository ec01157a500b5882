//! Comparing two runs: is the difference real, and is it a regression?
//!
//! - [`compare_means`]: a two-sided test on the difference of the means of
//!   two interval series (per-interval throughput, or per-interval p99...)
//!   that accounts for the autocorrelation between consecutive intervals.
//! - [`regression_gate`] and [`regression_gate_tested`]: pass/fail of a
//!   candidate against a baseline for one metric, given which direction is
//!   better and a relative threshold.
//!
//! The Student-t distribution underneath is in [`crate::stats`] and
//! re-exported here.

use serde::{Deserialize, Serialize};

use crate::error::{invalid, AnalysisError};
use crate::stats::{lag1_autocorrelation, mean, variance};
use crate::text;

pub use crate::stats::{student_t_cdf, student_t_quantile, student_t_sf, student_t_two_sided_p};

/// Options for [`compare_means`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompareOptions {
    /// Significance level of the two-sided test; the confidence interval is
    /// at level `1 − alpha` (default 0.05 → 95%).
    pub alpha: f64,
    /// The lag-1 autocorrelation used for the effective sample size is
    /// clamped to `[0, max_autocorrelation]` (default 0.9, so `n_eff ≥
    /// n/19`): negative estimates are taken as 0 (never claim more
    /// information than `n` independent samples) and values near 1 would
    /// make `n_eff` meaninglessly small.
    pub max_autocorrelation: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            alpha: 0.05,
            max_autocorrelation: 0.9,
        }
    }
}

/// Summary of one interval series as the test saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
    /// Number of intervals.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation of the interval values.
    pub std_dev: f64,
    /// Lag-1 sample autocorrelation, as estimated (before the small-sample
    /// correction and clamping).
    pub lag1_autocorrelation: f64,
    /// Autocorrelation used for `n_eff` (bias-corrected and clamped).
    pub rho: f64,
    /// Effective number of independent samples, `n(1 − ρ)/(1 + ρ)`, at
    /// least 2 and at most `n`.
    pub n_eff: f64,
    /// Standard error of the mean, `std_dev / √n_eff`.
    pub std_error: f64,
}

/// Result of [`compare_means`]: candidate versus baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeanComparison {
    pub baseline: SeriesSummary,
    pub candidate: SeriesSummary,
    /// `candidate.mean − baseline.mean`.
    pub difference: f64,
    /// `candidate.mean / baseline.mean` (infinite or NaN when the baseline
    /// mean is 0).
    pub ratio: f64,
    /// `ratio − 1`.
    pub relative_change: f64,
    /// Confidence level of the intervals, `1 − alpha`.
    pub confidence: f64,
    /// Confidence interval of `difference`.
    pub ci_low: f64,
    pub ci_high: f64,
    /// The same interval relative to the baseline mean, `ci / baseline.mean`
    /// (treats the baseline mean as exact: a good approximation when its
    /// standard error is small next to it).
    pub relative_ci_low: f64,
    pub relative_ci_high: f64,
    /// Standard error of the difference.
    pub std_error: f64,
    /// Welch's t statistic, `difference / std_error`.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom, from the effective sizes.
    pub df: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    pub alpha: f64,
    /// `p_value < alpha`.
    pub significant: bool,
}

impl MeanComparison {
    /// Plain words, e.g. "TPS +5.1% (95% CI +3.0% to +7.2%, p = 0.0004):
    /// significant".
    pub fn sentence(&self, metric: &str) -> String {
        format!(
            "{metric} {} ({}% CI {} to {}, p = {}): {}",
            text::pct(self.relative_change),
            text::count((self.confidence * 100.0).round()),
            text::pct(self.relative_ci_low),
            text::pct(self.relative_ci_high),
            format_p(self.p_value),
            if self.significant {
                "significant"
            } else {
                "not significant"
            }
        )
    }
}

fn format_p(p: f64) -> String {
    if p < 1e-4 {
        "< 0.0001".to_string()
    } else if p < 0.01 {
        format!("{p:.4}")
    } else {
        format!("{p:.2}")
    }
}

fn summarize(xs: &[f64], opts: &CompareOptions) -> SeriesSummary {
    let n = xs.len();
    let nf = n as f64;
    let m = mean(xs);
    let sd = variance(xs).sqrt();
    let r1 = lag1_autocorrelation(xs);
    // The sample lag-1 autocorrelation of a short series is biased towards
    // −1/n (for AR(1), E[r₁] ≈ ρ − (1 + 3ρ)/n); undo that to first order.
    let rho = (r1 + (1.0 + 3.0 * r1) / nf).clamp(0.0, opts.max_autocorrelation);
    let n_eff = (nf * (1.0 - rho) / (1.0 + rho)).clamp(2.0_f64.min(nf), nf);
    SeriesSummary {
        n,
        mean: m,
        std_dev: sd,
        lag1_autocorrelation: r1,
        rho,
        n_eff,
        std_error: sd / n_eff.sqrt(),
    }
}

/// Tests whether two interval series have different means, allowing for
/// autocorrelation between consecutive intervals.
///
/// Method: Welch's unequal-variance t-test with each series' sample size
/// replaced by its effective sample size `n_eff = n(1 − ρ)/(1 + ρ)`, the
/// variance inflation of the mean of an AR(1) process with lag-1
/// autocorrelation ρ. ρ is the lag-1 sample autocorrelation with a
/// first-order small-sample bias correction (`r₁ + (1 + 3r₁)/n`), clamped to
/// `[0, max_autocorrelation]`, so a series with negative autocorrelation is
/// taken as independent. Standard error `√(s_a²/n_eff,a + s_b²/n_eff,b)`, degrees of
/// freedom by Welch–Satterthwaite with `n_eff − 1` per series, two-sided
/// p-value and a `1 − alpha` confidence interval from Student's t.
///
/// Assumptions: each series is stationary (warm-up excluded; no trend)
/// with short-range dependence well described by its lag-1
/// autocorrelation; the two runs are independent of each other; intervals
/// are of equal length. Interval means are near-normal by the central
/// limit theorem when intervals hold many events. Without the correction,
/// positively autocorrelated intervals (the usual case: caches, compaction,
/// GC span intervals) make a plain t-test claim differences that are not
/// there.
pub fn compare_means(
    baseline: &[f64],
    candidate: &[f64],
    opts: &CompareOptions,
) -> Result<MeanComparison, AnalysisError> {
    for (name, xs) in [("baseline", baseline), ("candidate", candidate)] {
        if xs.len() < 3 {
            return Err(AnalysisError::NotEnoughPoints {
                what: if name == "baseline" {
                    "baseline intervals"
                } else {
                    "candidate intervals"
                },
                needed: 3,
                got: xs.len(),
            });
        }
        if xs.iter().any(|x| !x.is_finite()) {
            return Err(invalid(format!(
                "compare_means: {name} has a value that is not finite"
            )));
        }
    }
    if !(opts.alpha > 0.0 && opts.alpha < 1.0 && (0.0..1.0).contains(&opts.max_autocorrelation)) {
        return Err(invalid(
            "compare_means: alpha must be in (0, 1) and max_autocorrelation in [0, 1)",
        ));
    }
    let a = summarize(baseline, opts);
    let b = summarize(candidate, opts);
    let va = a.std_error * a.std_error;
    let vb = b.std_error * b.std_error;
    let se = (va + vb).sqrt();
    let difference = b.mean - a.mean;
    let ratio = b.mean / a.mean;
    let confidence = 1.0 - opts.alpha;
    let (t, df, p_value, half) = if se > 0.0 {
        let df_den = va * va / (a.n_eff - 1.0).max(1.0) + vb * vb / (b.n_eff - 1.0).max(1.0);
        let df = ((va + vb) * (va + vb) / df_den).max(1.0);
        let t = difference / se;
        let p = student_t_two_sided_p(t, df);
        let half = student_t_quantile(1.0 - opts.alpha / 2.0, df) * se;
        (t, df, p, half)
    } else {
        // Both series constant: any difference is exact.
        let df = (a.n + b.n - 2) as f64;
        if difference == 0.0 {
            (0.0, df, 1.0, 0.0)
        } else {
            (difference.signum() * f64::INFINITY, df, 0.0, 0.0)
        }
    };
    let (ci_low, ci_high) = (difference - half, difference + half);
    Ok(MeanComparison {
        difference,
        ratio,
        relative_change: ratio - 1.0,
        confidence,
        ci_low,
        ci_high,
        relative_ci_low: ci_low / a.mean,
        relative_ci_high: ci_high / a.mean,
        std_error: se,
        t,
        df,
        p_value,
        alpha: opts.alpha,
        significant: p_value < opts.alpha,
        baseline: a,
        candidate: b,
    })
}

/// Which way a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Throughput, TPS, QPS.
    HigherIsBetter,
    /// Latency, errors.
    LowerIsBetter,
}

/// Result of a regression gate for one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateOutcome {
    pub metric: String,
    pub direction: Direction,
    /// Relative threshold (0.05 = 5%).
    pub threshold: f64,
    pub baseline: f64,
    pub candidate: f64,
    /// `candidate / baseline − 1`.
    pub relative_change: f64,
    /// How much worse the candidate is, relative to the baseline: positive =
    /// worse, negative = better, whatever the direction.
    pub worse_by: f64,
    /// Worse by more than the threshold (and, for the tested gate,
    /// significantly so).
    pub regressed: bool,
    /// Better by more than the threshold (and, for the tested gate,
    /// significantly so).
    pub improved: bool,
    /// The significance verdict when the gate used [`compare_means`];
    /// `None` for a plain gate on two numbers.
    pub significant: Option<bool>,
}

impl GateOutcome {
    /// Plain words, e.g. "p99 latency regressed: 12.3 → 13.5 (+9.8%,
    /// threshold 5%)".
    pub fn sentence(&self) -> String {
        let verdict = if self.regressed {
            "regressed"
        } else if self.improved {
            "improved"
        } else {
            "within threshold"
        };
        let sig = match self.significant {
            Some(true) => ", significant",
            Some(false) => ", not significant",
            None => "",
        };
        format!(
            "{} {verdict}: {} → {} ({}, threshold {}{sig})",
            self.metric,
            text::si(self.baseline),
            text::si(self.candidate),
            text::pct(self.relative_change),
            text::pct_unsigned(self.threshold),
        )
    }
}

/// Decides whether `candidate` regressed from `baseline` for one metric.
///
/// Method: `worse_by` is the relative change signed so that positive is
/// worse (`−(c/b − 1)` for higher-is-better, `c/b − 1` for lower-is-better);
/// the gate fails (`regressed`) when `worse_by > threshold`, and reports
/// `improved` when `−worse_by > threshold`. Use it on summary numbers (one
/// per run); when interval series are available prefer
/// [`regression_gate_tested`], which does not fail on noise.
///
/// Assumptions: both values are finite, the baseline is > 0 (a relative
/// threshold means nothing against 0), and the threshold is ≥ 0.
pub fn regression_gate(
    metric: &str,
    direction: Direction,
    threshold: f64,
    baseline: f64,
    candidate: f64,
) -> Result<GateOutcome, AnalysisError> {
    if !baseline.is_finite() || !candidate.is_finite() || baseline <= 0.0 {
        return Err(invalid(format!(
            "regression_gate {metric}: baseline must be > 0 and both values finite"
        )));
    }
    if !(threshold >= 0.0 && threshold.is_finite()) {
        return Err(invalid(format!(
            "regression_gate {metric}: threshold must be >= 0"
        )));
    }
    let relative_change = candidate / baseline - 1.0;
    let worse_by = match direction {
        Direction::HigherIsBetter => -relative_change,
        Direction::LowerIsBetter => relative_change,
    };
    Ok(GateOutcome {
        metric: metric.to_string(),
        direction,
        threshold,
        baseline,
        candidate,
        relative_change,
        worse_by,
        regressed: worse_by > threshold,
        improved: -worse_by > threshold,
        significant: None,
    })
}

/// [`regression_gate`] on the means of a [`compare_means`] result: a
/// regression (or improvement) must both exceed the threshold and be
/// statistically significant at the comparison's `alpha`, so interval noise
/// alone never fails the gate.
pub fn regression_gate_tested(
    metric: &str,
    direction: Direction,
    threshold: f64,
    comparison: &MeanComparison,
) -> Result<GateOutcome, AnalysisError> {
    let mut out = regression_gate(
        metric,
        direction,
        threshold,
        comparison.baseline.mean,
        comparison.candidate.mean,
    )?;
    out.significant = Some(comparison.significant);
    out.regressed &= comparison.significant;
    out.improved &= comparison.significant;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::testrng::Rng;

    const PHI: f64 = 0.5;

    /// Per-interval TPS: AR(1) around `mu` with φ = 0.5 and a stationary
    /// standard deviation of 3% of 1000.
    fn run(rng: &mut Rng, n: usize, mu: f64) -> Vec<f64> {
        let sd = 30.0 * (1.0 - PHI * PHI).sqrt();
        rng.ar1(n, mu, PHI, sd)
    }

    #[test]
    fn detects_a_real_five_percent_shift() {
        let mut covered = 0;
        for seed in 0..50 {
            let mut rng = Rng::new(seed);
            let a = run(&mut rng, 60, 1000.0);
            let b = run(&mut rng, 60, 1050.0);
            let c = compare_means(&a, &b, &CompareOptions::default()).unwrap();
            assert!(c.significant, "seed {seed}: {c:?}");
            assert!(c.ci_low > 0.0, "seed {seed}: {c:?}");
            assert!((c.relative_change - 0.05).abs() < 0.03);
            assert!(
                c.baseline.n_eff < 45.0,
                "autocorrelation seen: {:?}",
                c.baseline
            );
            if c.ci_low < 50.0 && c.ci_high > 50.0 {
                covered += 1;
            }
        }
        // The 95% interval holds the true difference about 95% of the time.
        assert!(covered >= 44, "covered {covered}/50");
    }

    /// Without a real difference, the false positive rate stays near α,
    /// where a naive t-test (n_eff = n) is far above it.
    #[test]
    fn false_positive_rate_near_alpha() {
        let trials = 2000;
        let mut corrected = 0;
        let mut naive = 0;
        let naive_opts = CompareOptions {
            alpha: 0.05,
            max_autocorrelation: 0.0,
        };
        for seed in 0..trials {
            let mut rng = Rng::new(1_000 + seed);
            let a = run(&mut rng, 60, 1000.0);
            let b = run(&mut rng, 60, 1000.0);
            if compare_means(&a, &b, &CompareOptions::default())
                .unwrap()
                .significant
            {
                corrected += 1;
            }
            if compare_means(&a, &b, &naive_opts).unwrap().significant {
                naive += 1;
            }
        }
        let fpr = corrected as f64 / trials as f64;
        let naive_fpr = naive as f64 / trials as f64;
        eprintln!("false positive rate: corrected {fpr}, naive {naive_fpr}");
        assert!((0.02..=0.08).contains(&fpr), "corrected FPR {fpr}");
        assert!(naive_fpr > 0.12, "naive FPR {naive_fpr}");
    }

    /// Calibration holds from independent to strongly autocorrelated
    /// intervals and for short series.
    #[test]
    fn false_positive_rate_across_autocorrelations() {
        for (phi, n) in [(0.0, 60), (0.8, 60), (0.5, 20), (0.9, 300)] {
            let trials = 1000;
            let mut hits = 0;
            for seed in 0..trials {
                let mut rng = Rng::new(50_000 + seed);
                let a = rng.ar1(n, 1000.0, phi, 10.0);
                let b = rng.ar1(n, 1000.0, phi, 10.0);
                if compare_means(&a, &b, &CompareOptions::default())
                    .unwrap()
                    .significant
                {
                    hits += 1;
                }
            }
            let fpr = hits as f64 / trials as f64;
            assert!((0.015..=0.085).contains(&fpr), "phi {phi} n {n}: FPR {fpr}");
        }
    }

    #[test]
    fn independent_series_match_welch() {
        // With negative/zero autocorrelation n_eff = n: plain Welch.
        let a = [10.0, 12.0, 9.0, 11.0, 13.0, 10.0];
        let b = [14.0, 13.0, 15.0, 12.0, 16.0, 14.0];
        let c = compare_means(&a, &b, &CompareOptions::default()).unwrap();
        assert_eq!(c.baseline.n_eff, 6.0);
        assert_eq!(c.candidate.n_eff, 6.0);
        // Welch by hand: means 65/6 and 14, variances 2.1667 and 2.0.
        let va = variance(&a) / 6.0;
        let vb = variance(&b) / 6.0;
        let t = (14.0 - 65.0 / 6.0) / (va + vb).sqrt();
        let df = (va + vb).powi(2) / (va * va / 5.0 + vb * vb / 5.0);
        assert!((c.t - t).abs() < 1e-12 && (c.df - df).abs() < 1e-9);
        let p = 2.0 * (1.0 - student_t_cdf(t, df));
        assert!((c.p_value - p).abs() < 1e-12);
        assert!(c.significant);
        assert!(
            c.sentence("TPS").ends_with(": significant"),
            "{}",
            c.sentence("TPS")
        );
    }

    #[test]
    fn constant_series() {
        let c = compare_means(&[5.0; 4], &[5.0; 4], &CompareOptions::default()).unwrap();
        assert_eq!((c.p_value, c.significant), (1.0, false));
        let c = compare_means(&[5.0; 4], &[6.0; 4], &CompareOptions::default()).unwrap();
        assert_eq!((c.p_value, c.significant), (0.0, true));
        assert!(compare_means(&[1.0, 2.0], &[1.0, 2.0, 3.0], &CompareOptions::default()).is_err());
    }

    #[test]
    fn gate_by_direction() {
        let g = regression_gate("TPS", Direction::HigherIsBetter, 0.05, 1000.0, 940.0).unwrap();
        assert!(g.regressed && !g.improved);
        assert!((g.worse_by - 0.06).abs() < 1e-12);
        assert_eq!(g.sentence(), "TPS regressed: 1k → 940 (-6%, threshold 5%)");
        let g = regression_gate("TPS", Direction::HigherIsBetter, 0.05, 1000.0, 960.0).unwrap();
        assert!(!g.regressed && !g.improved);
        let g = regression_gate("p99 ms", Direction::LowerIsBetter, 0.05, 10.0, 10.6).unwrap();
        assert!(g.regressed);
        let g = regression_gate("p99 ms", Direction::LowerIsBetter, 0.05, 10.0, 9.0).unwrap();
        assert!(g.improved && !g.regressed);
        assert!(regression_gate("x", Direction::LowerIsBetter, 0.05, 0.0, 1.0).is_err());
    }

    #[test]
    fn tested_gate_ignores_noise() {
        // A 6% drop in means, but on series far too noisy to tell.
        let a = [1000.0, 1400.0, 600.0, 1200.0, 800.0];
        let b = [940.0, 1340.0, 540.0, 1140.0, 740.0];
        let c = compare_means(&a, &b, &CompareOptions::default()).unwrap();
        assert!(!c.significant);
        let g = regression_gate_tested("TPS", Direction::HigherIsBetter, 0.05, &c).unwrap();
        assert!(!g.regressed && g.worse_by > 0.05 && g.significant == Some(false));
        // The same drop on quiet series fails the gate.
        let a: Vec<f64> = (0..30).map(|i| 1000.0 + (i % 3) as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 0.94).collect();
        let c = compare_means(&a, &b, &CompareOptions::default()).unwrap();
        let g = regression_gate_tested("TPS", Direction::HigherIsBetter, 0.05, &c).unwrap();
        assert!(g.regressed && g.significant == Some(true));
        assert!(serde_json::to_string(&g)
            .unwrap()
            .contains(r#""direction":"higher_is_better""#));
    }
}
