//! Gunther's Universal Scalability Law: a least-squares fit that explains a
//! whole throughput-against-concurrency curve with three numbers
//! (single-unit throughput λ, contention σ, coherency κ) and predicts where
//! it peaks. Capacity planning ([`crate::plan`]) scales node counts with it.

use serde::{Deserialize, Serialize};

use crate::error::{check_finite, invalid, AnalysisError};
use crate::linalg::solve;
use crate::text;

/// Gunther's Universal Scalability Law:
/// `X(N) = λN / (1 + σ(N − 1) + κN(N − 1))`.
///
/// `λ` is the throughput of one unit (thread, client, node), `σ` the
/// contention (serial fraction: queueing on a shared resource, Amdahl), `κ`
/// the coherency cost (pairwise crosstalk: the term that makes throughput
/// fall past a peak).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UslModel {
    pub lambda: f64,
    pub sigma: f64,
    pub kappa: f64,
}

impl UslModel {
    /// Perfectly linear scaling at `lambda` per unit (σ = κ = 0).
    pub fn linear(lambda: f64) -> Self {
        UslModel {
            lambda,
            sigma: 0.0,
            kappa: 0.0,
        }
    }

    /// The model calibrated so that it passes through one measured point
    /// `(n, throughput)` with the given σ and κ (solves for λ).
    pub fn through_point(n: f64, throughput: f64, sigma: f64, kappa: f64) -> Self {
        let lambda = throughput * (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0)) / n;
        UslModel {
            lambda,
            sigma,
            kappa,
        }
    }

    /// Predicted throughput at concurrency `n`.
    pub fn throughput(&self, n: f64) -> f64 {
        self.lambda * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))
    }

    /// Concurrency of peak throughput, `N* = √((1 − σ)/κ)`, not below 1;
    /// `None` when κ = 0 (throughput then never falls: no finite peak).
    pub fn peak_concurrency(&self) -> Option<f64> {
        (self.kappa > 0.0).then(|| ((1.0 - self.sigma).max(0.0) / self.kappa).sqrt().max(1.0))
    }

    /// Peak throughput: `X(N*)` when κ > 0; when κ = 0 the supremum `λ/σ`
    /// approached as N → ∞; `None` when σ = κ = 0 (unbounded).
    pub fn peak_throughput(&self) -> Option<f64> {
        match self.peak_concurrency() {
            Some(n) => Some(self.throughput(n)),
            None if self.sigma > 0.0 => Some(self.lambda / self.sigma),
            None => None,
        }
    }

    /// The smallest (real) concurrency `N > 0` with `X(N) ≥ target`, or
    /// `None` when the model never reaches `target`. Solved in closed form:
    /// `X(N) ≥ T` ⇔ `TκN² + (T(σ − κ) − λ)N + T(1 − σ) ≤ 0`.
    pub fn min_concurrency_for(&self, target: f64) -> Option<f64> {
        let UslModel {
            lambda,
            sigma,
            kappa,
        } = *self;
        if target <= 0.0 {
            return Some(0.0);
        }
        if lambda <= 0.0 {
            return None;
        }
        let a = target * kappa;
        let b = target * (sigma - kappa) - lambda;
        let c = target * (1.0 - sigma);
        if a > 0.0 {
            let disc = b * b - 4.0 * a * c;
            if disc < 0.0 {
                return None;
            }
            // Stable roots of a·N² + b·N + c.
            let q = -0.5 * (b + b.signum() * disc.sqrt());
            let (r1, r2) = if q == 0.0 {
                (0.0, 0.0)
            } else {
                let (u, v) = (q / a, c / q);
                (u.min(v), u.max(v))
            };
            if r2 <= 0.0 {
                return None;
            }
            Some(r1.max(0.0))
        } else {
            // Linear in N: −b·N ≥ c.
            let slope = -b; // λ − Tσ
            if slope > 0.0 {
                Some((c / slope).max(0.0))
            } else if c <= 0.0 && lambda >= target {
                // σ = 1: X(N) = λ for every N.
                Some(0.0)
            } else {
                None
            }
        }
    }
}

/// A least-squares fit of the [`UslModel`] to measured points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    /// Fitted single-unit throughput λ (extrapolated when the sweep does not
    /// start at 1).
    pub lambda: f64,
    /// Fitted contention σ, in [0, 1].
    pub sigma: f64,
    /// Fitted coherency κ, ≥ 0.
    pub kappa: f64,
    /// Coefficient of determination of the fit on throughput:
    /// `1 − SSE/SST` (1 = perfect).
    pub r_squared: f64,
    /// Root mean square error of the fit, in throughput units.
    pub rmse: f64,
    /// Predicted concurrency of peak throughput `N* = √((1 − σ)/κ)`;
    /// `None` = infinite (κ = 0).
    pub peak_concurrency: Option<f64>,
    /// Predicted peak throughput `X(N*)`; for κ = 0 the asymptote `λ/σ`;
    /// `None` = unbounded (σ = κ = 0).
    pub peak_throughput: Option<f64>,
    /// Number of points fitted.
    pub points: usize,
}

impl UslFit {
    pub fn model(&self) -> UslModel {
        UslModel {
            lambda: self.lambda,
            sigma: self.sigma,
            kappa: self.kappa,
        }
    }

    /// Plain words, e.g. "USL fit (R² 0.998): contention σ 0.031, coherency
    /// κ 0.00021; throughput peaks near 68 threads at 34k".
    pub fn sentence(&self, unit: &str) -> String {
        let kappa = if self.kappa == 0.0 {
            "0".to_string()
        } else {
            format!("{:.2e}", self.kappa)
        };
        let head = format!(
            "USL fit (R² {:.3}): contention σ {:.3}, coherency κ {kappa}",
            self.r_squared, self.sigma
        );
        match (self.peak_concurrency, self.peak_throughput) {
            (Some(n), Some(x)) => format!(
                "{head}; throughput peaks near {} {unit} at {}",
                text::count(n.round()),
                text::si(x)
            ),
            (None, Some(x)) => {
                format!("{head}; no peak, throughput approaches {}", text::si(x))
            }
            _ => format!("{head}; scaling is linear"),
        }
    }
}

const LAMBDA: usize = 0;
const SIGMA: usize = 1;
const KAPPA: usize = 2;

/// Fits the Universal Scalability Law `X(N) = λN / (1 + σ(N−1) + κN(N−1))`
/// to `(N, X)` points by bounded nonlinear least squares on `X`
/// (λ > 0, 0 ≤ σ ≤ 1, κ ≥ 0).
///
/// Method:
/// 1. Linearisation: `N/X = a + bN + cN²` with `a = (1−σ)/λ`,
///    `b = (σ−κ)/λ`, `c = κ/λ`, solved by weighted linear least squares
///    (weights `1/(N/X)²`, i.e. relative errors), then mapped back
///    (`λ = 1/(a+b+c)`, `κ = cλ`, `σ = bλ + κ`) and clamped to the bounds.
/// 2. Refinement: Levenberg–Marquardt (Marquardt's diagonal scaling, so λ
///    in the thousands and κ near 1e-5 need no rescaling) on the absolute
///    throughput residuals, with each trial step projected onto the bounds.
///    Because the optimum may sit on a bound (κ = 0 for a curve that only
///    flattens, σ = 0 for one that only bends late), LM is run on every
///    face of the box — (λ, σ, κ), (λ, σ; κ = 0), (λ, κ; σ = 0) and (λ;
///    σ = κ = 0), the last in closed form — from both the linearised start
///    and a plain start (λ = X₁/N₁, σ = κ = 0), and the lowest sum of squares
///    wins (ties go to the model with fewer free parameters).
///
/// Assumptions: `N > 0`, `X > 0`, at least 3 distinct `N` (repeats are fine
/// and simply weigh more); noise roughly equal in absolute terms across
/// points. λ is the model's throughput at N = 1, which is an extrapolation
/// when the smallest measured N is larger. Superlinear scaling (σ < 0, e.g.
/// caches warming with more nodes) is outside the bounds: it fits as linear,
/// with an R² that says so.
pub fn fit_usl(points: &[(f64, f64)]) -> Result<UslFit, AnalysisError> {
    check_finite(points, "fit_usl")?;
    if points.iter().any(|&(n, x)| n <= 0.0 || x <= 0.0) {
        return Err(invalid(
            "fit_usl: concurrency and throughput must both be > 0",
        ));
    }
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let distinct = 1 + sorted.windows(2).filter(|w| w[1].0 != w[0].0).count();
    if distinct < 3 {
        return Err(AnalysisError::NotEnoughPoints {
            what: "distinct concurrency levels for a USL fit",
            needed: 3,
            got: distinct,
        });
    }
    let ns: Vec<f64> = sorted.iter().map(|p| p.0).collect();
    let xs: Vec<f64> = sorted.iter().map(|p| p.1).collect();

    let mut starts = vec![[xs[0] / ns[0], 0.0, 0.0]];
    if let Some(p) = linearised_start(&ns, &xs) {
        starts.push(p);
    }

    // (free σ, free κ), fewer free parameters first so that ties keep them.
    let faces = [(false, false), (true, false), (false, true), (true, true)];
    // Differences below rounding noise are ties.
    let tie = 1e-24 * dot(&xs, &xs);
    let mut best: Option<([f64; 3], f64)> = None;
    for (free_sigma, free_kappa) in faces {
        for start in &starts {
            let mut p = *start;
            if !free_sigma {
                p[SIGMA] = 0.0;
            }
            if !free_kappa {
                p[KAPPA] = 0.0;
            }
            let (p, sse) = if !free_sigma && !free_kappa {
                // X = λN: λ = ΣXN / ΣN².
                let lambda = dot(&xs, &ns) / dot(&ns, &ns);
                let p = [lambda, 0.0, 0.0];
                (p, sse(&ns, &xs, &p))
            } else {
                levenberg_marquardt(&ns, &xs, p, [true, free_sigma, free_kappa])
            };
            let better = match best {
                None => true,
                Some((_, b)) => sse < b * (1.0 - 1e-9) - tie,
            };
            if better && sse.is_finite() {
                best = Some((p, sse));
            }
        }
    }
    let (p, sse) = best.ok_or_else(|| invalid("fit_usl: no finite fit"))?;
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let sst: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
    let r_squared = if sst > 0.0 {
        1.0 - sse / sst
    } else if sse <= 1e-20 * dot(&xs, &xs) {
        1.0
    } else {
        0.0
    };
    let model = UslModel {
        lambda: p[LAMBDA],
        sigma: p[SIGMA],
        kappa: p[KAPPA],
    };
    Ok(UslFit {
        lambda: model.lambda,
        sigma: model.sigma,
        kappa: model.kappa,
        r_squared,
        rmse: (sse / xs.len() as f64).sqrt(),
        peak_concurrency: model.peak_concurrency(),
        peak_throughput: model.peak_throughput(),
        points: xs.len(),
    })
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn project(mut p: [f64; 3]) -> [f64; 3] {
    p[LAMBDA] = p[LAMBDA].max(f64::MIN_POSITIVE);
    p[SIGMA] = p[SIGMA].clamp(0.0, 1.0);
    p[KAPPA] = p[KAPPA].max(0.0);
    p
}

fn usl(n: f64, p: &[f64; 3]) -> f64 {
    p[LAMBDA] * n / (1.0 + p[SIGMA] * (n - 1.0) + p[KAPPA] * n * (n - 1.0))
}

fn sse(ns: &[f64], xs: &[f64], p: &[f64; 3]) -> f64 {
    ns.iter()
        .zip(xs)
        .map(|(&n, &x)| {
            let r = x - usl(n, p);
            r * r
        })
        .sum()
}

/// Weighted linear least squares on `N/X = a + bN + cN²`, mapped back to
/// (λ, σ, κ) and clamped to the bounds.
fn linearised_start(ns: &[f64], xs: &[f64]) -> Option<[f64; 3]> {
    let mut ata = vec![vec![0.0; 3]; 3];
    let mut atz = vec![0.0; 3];
    for (&n, &x) in ns.iter().zip(xs) {
        let z = n / x;
        let w = 1.0 / (z * z);
        let row = [1.0, n, n * n];
        for i in 0..3 {
            for j in 0..3 {
                ata[i][j] += w * row[i] * row[j];
            }
            atz[i] += w * row[i] * z;
        }
    }
    let coef = solve(ata, atz)?;
    let (a, b, c) = (coef[0], coef[1], coef[2]);
    let lambda = 1.0 / (a + b + c);
    if !(lambda.is_finite() && lambda > 0.0) {
        return None;
    }
    let kappa = c * lambda;
    let sigma = b * lambda + kappa;
    Some(project([lambda, sigma, kappa]))
}

/// Projected Levenberg–Marquardt on the free parameters of `p`.
fn levenberg_marquardt(
    ns: &[f64],
    xs: &[f64],
    start: [f64; 3],
    free: [bool; 3],
) -> ([f64; 3], f64) {
    let idx: Vec<usize> = (0..3).filter(|&i| free[i]).collect();
    let k = idx.len();
    let mut p = project(start);
    let mut cur = sse(ns, xs, &p);
    let mut mu = 1e-3;
    for _ in 0..1000 {
        // Jacobian of the model (not the residual) and the normal equations.
        let mut jtj = vec![vec![0.0; k]; k];
        let mut jtr = vec![0.0; k];
        for (&n, &x) in ns.iter().zip(xs) {
            let d = 1.0 + p[SIGMA] * (n - 1.0) + p[KAPPA] * n * (n - 1.0);
            let f = p[LAMBDA] * n / d;
            let full = [
                n / d,
                -p[LAMBDA] * n * (n - 1.0) / (d * d),
                -p[LAMBDA] * n * n * (n - 1.0) / (d * d),
            ];
            let r = x - f;
            for (a, &ia) in idx.iter().enumerate() {
                jtr[a] += full[ia] * r;
                for (b, &ib) in idx.iter().enumerate() {
                    jtj[a][b] += full[ia] * full[ib];
                }
            }
        }
        let max_diag = (0..k).fold(0.0_f64, |m, i| m.max(jtj[i][i]));
        if max_diag <= 0.0 || !max_diag.is_finite() {
            break;
        }
        let mut improved = false;
        while mu < 1e20 {
            let mut m = jtj.clone();
            for (i, row) in m.iter_mut().enumerate() {
                row[i] += mu * jtj[i][i].max(1e-15 * max_diag);
            }
            let Some(delta) = solve(m, jtr.clone()) else {
                mu *= 4.0;
                continue;
            };
            let mut trial = p;
            for (a, &i) in idx.iter().enumerate() {
                trial[i] += delta[a];
            }
            let trial = project(trial);
            let next = sse(ns, xs, &trial);
            if next.is_finite() && next < cur {
                let step_small = idx
                    .iter()
                    .all(|&i| (trial[i] - p[i]).abs() <= 1e-12 * p[i].abs().max(1e-12));
                let gain_small = cur - next <= 1e-15 * cur;
                p = trial;
                cur = next;
                mu = (mu / 3.0).max(1e-12);
                improved = !(step_small || gain_small);
                break;
            }
            mu *= 4.0;
        }
        if !improved {
            break;
        }
    }
    (p, cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::testrng::Rng;

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs()
    }

    fn sweep() -> Vec<f64> {
        vec![
            1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0, 192.0, 256.0,
        ]
    }

    #[test]
    fn usl_recovers_exact_parameters() {
        let truth = UslModel {
            lambda: 1_000.0,
            sigma: 0.05,
            kappa: 0.0002,
        };
        let pts: Vec<(f64, f64)> = sweep()
            .into_iter()
            .map(|n| (n, truth.throughput(n)))
            .collect();
        let fit = fit_usl(&pts).unwrap();
        assert!(rel(fit.lambda, truth.lambda) < 1e-6, "{fit:?}");
        assert!(rel(fit.sigma, truth.sigma) < 1e-6, "{fit:?}");
        assert!(rel(fit.kappa, truth.kappa) < 1e-6, "{fit:?}");
        assert!(fit.r_squared > 0.999_999);
        let n_star = (0.95f64 / 0.0002).sqrt(); // 68.92
        assert!(rel(fit.peak_concurrency.unwrap(), n_star) < 1e-6);
        assert!(rel(fit.peak_throughput.unwrap(), truth.throughput(n_star)) < 1e-6);
        assert!(fit.sentence("threads").contains("peaks near 69 threads"));
    }

    #[test]
    fn usl_recovers_parameters_without_n1() {
        // A sweep starting at 8 threads: λ is extrapolated.
        let truth = UslModel {
            lambda: 2_500.0,
            sigma: 0.02,
            kappa: 0.00005,
        };
        let pts: Vec<(f64, f64)> = [8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0]
            .into_iter()
            .map(|n| (n, truth.throughput(n)))
            .collect();
        let fit = fit_usl(&pts).unwrap();
        assert!(rel(fit.lambda, truth.lambda) < 1e-5, "{fit:?}");
        assert!(rel(fit.sigma, truth.sigma) < 1e-5, "{fit:?}");
        assert!(rel(fit.kappa, truth.kappa) < 1e-5, "{fit:?}");
    }

    #[test]
    fn usl_recovers_parameters_with_noise() {
        let truth = UslModel {
            lambda: 1_000.0,
            sigma: 0.05,
            kappa: 0.0002,
        };
        let n_star = truth.peak_concurrency().unwrap();
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            // 2% multiplicative noise, each level measured 3 times.
            let mut pts = Vec::new();
            for n in sweep() {
                for _ in 0..3 {
                    pts.push((n, truth.throughput(n) * (1.0 + 0.02 * rng.normal())));
                }
            }
            let fit = fit_usl(&pts).unwrap();
            assert!(rel(fit.lambda, 1_000.0) < 0.05, "seed {seed}: {fit:?}");
            assert!((fit.sigma - 0.05).abs() < 0.01, "seed {seed}: {fit:?}");
            assert!(rel(fit.kappa, 0.0002) < 0.2, "seed {seed}: {fit:?}");
            assert!(
                rel(fit.peak_concurrency.unwrap(), n_star) < 0.15,
                "seed {seed}"
            );
            assert!(
                rel(fit.peak_throughput.unwrap(), truth.throughput(n_star)) < 0.03,
                "seed {seed}"
            );
            assert!(fit.r_squared > 0.95, "seed {seed}: {fit:?}");
        }
    }

    #[test]
    fn usl_amdahl_curve_has_no_peak() {
        // κ = 0: throughput approaches λ/σ = 20k and never falls.
        let truth = UslModel {
            lambda: 1_000.0,
            sigma: 0.05,
            kappa: 0.0,
        };
        let pts: Vec<(f64, f64)> = sweep()
            .into_iter()
            .map(|n| (n, truth.throughput(n)))
            .collect();
        let fit = fit_usl(&pts).unwrap();
        assert_eq!(fit.kappa, 0.0, "{fit:?}");
        assert!(rel(fit.sigma, 0.05) < 1e-6);
        assert_eq!(fit.peak_concurrency, None);
        assert!(rel(fit.peak_throughput.unwrap(), 20_000.0) < 1e-6);
        assert!(fit
            .sentence("threads")
            .ends_with("contention σ 0.050, coherency κ 0; no peak, throughput approaches 20k"));
    }

    #[test]
    fn usl_linear_curve() {
        let pts: Vec<(f64, f64)> = [2.0, 4.0, 6.0, 8.0]
            .into_iter()
            .map(|n| (n, 27_000.0 * n))
            .collect();
        let fit = fit_usl(&pts).unwrap();
        assert!(rel(fit.lambda, 27_000.0) < 1e-9);
        assert_eq!((fit.sigma, fit.kappa), (0.0, 0.0));
        assert_eq!(fit.peak_concurrency, None);
        assert_eq!(fit.peak_throughput, None);
        assert!((fit.r_squared - 1.0).abs() < 1e-12);
    }

    #[test]
    fn usl_pure_coherency_curve() {
        // σ = 0 on the boundary, κ > 0.
        let truth = UslModel {
            lambda: 500.0,
            sigma: 0.0,
            kappa: 0.001,
        };
        let pts: Vec<(f64, f64)> = sweep()
            .into_iter()
            .map(|n| (n, truth.throughput(n)))
            .collect();
        let fit = fit_usl(&pts).unwrap();
        assert!(fit.sigma < 1e-9, "{fit:?}");
        assert!(rel(fit.kappa, 0.001) < 1e-6, "{fit:?}");
        assert!(rel(fit.peak_concurrency.unwrap(), 1000f64.sqrt()) < 1e-6);
    }

    #[test]
    fn usl_needs_three_levels() {
        let pts = [(1.0, 10.0), (1.0, 11.0), (2.0, 19.0)];
        assert!(matches!(
            fit_usl(&pts),
            Err(AnalysisError::NotEnoughPoints {
                needed: 3,
                got: 2,
                ..
            })
        ));
        assert!(fit_usl(&[(1.0, 10.0), (2.0, 0.0), (3.0, 5.0)]).is_err());
    }

    #[test]
    fn usl_min_concurrency_for_target() {
        let lin = UslModel::linear(27_000.0);
        assert!(rel(lin.min_concurrency_for(270_000.0).unwrap(), 10.0) < 1e-12);
        let amdahl = UslModel {
            lambda: 1_000.0,
            sigma: 0.05,
            kappa: 0.0,
        };
        let n = amdahl.min_concurrency_for(10_000.0).unwrap();
        assert!(rel(amdahl.throughput(n), 10_000.0) < 1e-12);
        assert_eq!(amdahl.min_concurrency_for(20_000.0), None);
        let usl = UslModel {
            lambda: 1_000.0,
            sigma: 0.05,
            kappa: 0.0002,
        };
        let peak = usl.peak_throughput().unwrap();
        let n = usl.min_concurrency_for(0.9 * peak).unwrap();
        assert!(rel(usl.throughput(n), 0.9 * peak) < 1e-10);
        assert!(n < usl.peak_concurrency().unwrap());
        assert_eq!(usl.min_concurrency_for(1.01 * peak), None);
        let calibrated = UslModel::through_point(4.0, usl.throughput(4.0), 0.05, 0.0002);
        assert!(rel(calibrated.lambda, 1_000.0) < 1e-12);
    }

    #[test]
    fn results_serialize() {
        let fit = fit_usl(&[(1.0, 100.0), (2.0, 190.0), (4.0, 330.0), (8.0, 480.0)]).unwrap();
        let json = serde_json::to_string(&fit).unwrap();
        let back: UslFit = serde_json::from_str(&json).unwrap();
        assert!(rel(back.kappa, fit.kappa) < 1e-15);
        assert!(
            rel(
                back.peak_concurrency.unwrap(),
                fit.peak_concurrency.unwrap()
            ) < 1e-15
        );
        let linear = fit_usl(&[(1.0, 100.0), (2.0, 200.0), (3.0, 300.0)]).unwrap();
        let json = serde_json::to_string(&linear).unwrap();
        assert!(json.contains(r#""peak_concurrency":null"#), "{json}");
    }
}
