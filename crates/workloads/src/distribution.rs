//! Random key distributions with sysbench's algorithms and parameters
//! (`--rand-type` and the `--rand-spec-*`, `--rand-zipfian-exp` and
//! `--rand-pareto-h` options), computed in floating point exactly as
//! sysbench's `sb_rand.c` does.

use rand::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RandType {
    Uniform,
    Gaussian,
    Special,
    Zipfian,
    Pareto,
}

impl RandType {
    pub const NAMES: &'static [&'static str] =
        &["uniform", "gaussian", "special", "zipfian", "pareto"];

    pub fn parse(s: &str) -> Result<RandType, String> {
        Ok(match s {
            "uniform" => RandType::Uniform,
            "gaussian" => RandType::Gaussian,
            "special" => RandType::Special,
            "zipfian" => RandType::Zipfian,
            "pareto" => RandType::Pareto,
            _ => {
                return Err(format!(
                    "unknown --rand-type '{s}': expected one of {}",
                    Self::NAMES.join(", ")
                ))
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// sysbench's defaults: `--rand-spec-iter=12 --rand-spec-pct=1
/// --rand-spec-res=75 --rand-zipfian-exp=0.8 --rand-pareto-h=0.2`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandParams {
    pub spec_iter: u32,
    pub spec_pct: f64,
    pub spec_res: f64,
    pub zipfian_exp: f64,
    pub pareto_h: f64,
}

impl Default for RandParams {
    fn default() -> Self {
        RandParams {
            spec_iter: 12,
            spec_pct: 1.0,
            spec_res: 75.0,
            zipfian_exp: 0.8,
            pareto_h: 0.2,
        }
    }
}

impl RandParams {
    pub fn validate(&self) -> Result<(), String> {
        if self.spec_iter == 0 {
            return Err("--rand-spec-iter must be at least 1".into());
        }
        if !(0.0..=100.0).contains(&self.spec_pct) {
            return Err("--rand-spec-pct must be between 0 and 100".into());
        }
        if !(0.0..100.0).contains(&self.spec_res) {
            return Err("--rand-spec-res must be at least 0 and below 100".into());
        }
        if !(self.zipfian_exp > 0.0 && self.zipfian_exp.is_finite()) {
            return Err("--rand-zipfian-exp must be greater than 0".into());
        }
        if !(self.pareto_h > 0.0 && self.pareto_h < 1.0) {
            return Err("--rand-pareto-h must be between 0 and 1".into());
        }
        Ok(())
    }
}

/// Draws integers in `[min, max]` from one distribution.
#[derive(Debug, Clone)]
pub struct Distribution {
    kind: RandType,
    params: RandParams,
    min: u64,
    max: u64,
    zipf: Option<Zipf>,
}

impl Distribution {
    pub fn new(kind: RandType, params: RandParams, min: u64, max: u64) -> Distribution {
        assert!(min <= max, "distribution bounds are validated by callers");
        let zipf =
            (kind == RandType::Zipfian).then(|| Zipf::new(max - min + 1, params.zipfian_exp));
        Distribution {
            kind,
            params,
            min,
            max,
            zipf,
        }
    }

    #[inline]
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        let (a, b) = (self.min, self.max);
        let v = match self.kind {
            RandType::Uniform => a + (rng.random::<f64>() * (b - a + 1) as f64) as u64,
            RandType::Gaussian => {
                // sysbench's sb_rand_gaussian: --rand-spec-iter uniforms.
                let n = self.params.spec_iter;
                let t = (b - a + 1) as f64;
                let sum: f64 = (0..n).map(|_| rng.random::<f64>() * t).sum();
                a + (sum / f64::from(n)) as u64
            }
            RandType::Special => {
                let p = &self.params;
                let t = (b - a) as f64;
                let rnd = rng.random::<f64>();
                if rnd * t * (100.0 / (100.0 - p.spec_res)) < t {
                    let sum: f64 = (0..p.spec_iter).map(|_| rng.random::<f64>()).sum();
                    a + (sum * t / p.spec_iter as f64) as u64
                } else {
                    let res =
                        rnd * (t * p.spec_pct / 100.0 + 1.0) + t / 2.0 - t * p.spec_pct / 200.0;
                    a + res as u64
                }
            }
            RandType::Zipfian => a + self.zipf.as_ref().expect("built for zipfian").sample(rng) - 1,
            RandType::Pareto => {
                let h = self.params.pareto_h;
                let power = h.ln() / (1.0 - h).ln();
                a + ((b - a + 1) as f64 * rng.random::<f64>().powf(power)) as u64
            }
        };
        v.min(b)
    }
}

/// Zipf's law on `1..=n` with exponent `s`, by rejection-inversion
/// (Hörmann and Derflinger, 1996): O(1) per draw for any `n`.
#[derive(Debug, Clone)]
struct Zipf {
    n: f64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl Zipf {
    fn new(n: u64, exponent: f64) -> Zipf {
        let mut z = Zipf {
            n: n as f64,
            exponent,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (helper1(t) * x).exp()
    }

    fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        loop {
            let u =
                self.h_integral_n + rng.random::<f64>() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// `ln(1 + x) / x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(exp(x) - 1) / x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    const N: usize = 200_000;

    fn draws(kind: RandType, min: u64, max: u64) -> Vec<u64> {
        let d = Distribution::new(kind, RandParams::default(), min, max);
        let mut rng = SmallRng::seed_from_u64(42);
        (0..N).map(|_| d.sample(&mut rng)).collect()
    }

    fn mean_sd(v: &[u64]) -> (f64, f64) {
        let mean = v.iter().sum::<u64>() as f64 / v.len() as f64;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
        (mean, var.sqrt())
    }

    #[test]
    fn every_type_stays_in_bounds() {
        for kind in [
            RandType::Uniform,
            RandType::Gaussian,
            RandType::Special,
            RandType::Zipfian,
            RandType::Pareto,
        ] {
            let v = draws(kind, 1, 1000);
            assert!(v.iter().all(|&x| (1..=1000).contains(&x)), "{kind:?}");
            let single = draws(kind, 7, 7);
            assert!(single.iter().all(|&x| x == 7), "{kind:?}");
        }
    }

    #[test]
    fn uniform_is_flat() {
        let v = draws(RandType::Uniform, 1, 10_000);
        let (mean, sd) = mean_sd(&v);
        assert!((mean - 5000.5).abs() < 50.0, "{mean}");
        // Uniform on 1..n: sd = n / sqrt(12).
        assert!((sd - 2886.9).abs() < 30.0, "{sd}");
        let mut buckets = [0usize; 10];
        for x in v {
            buckets[((x - 1) / 1000) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&b| (b as f64 - 20_000.0).abs() < 800.0),
            "{buckets:?}"
        );
    }

    #[test]
    fn gaussian_is_centred_and_narrow() {
        let v = draws(RandType::Gaussian, 1, 10_000);
        let (mean, sd) = mean_sd(&v);
        assert!((mean - 5000.0).abs() < 30.0, "{mean}");
        // Mean of 12 uniforms: sd = n / sqrt(12 * 12).
        assert!((sd - 833.3).abs() < 15.0, "{sd}");
    }

    #[test]
    fn special_puts_three_quarters_in_one_percent() {
        // sysbench: with res=75 and pct=1, 75% of draws fall in the middle
        // 1% of the range (4975..5051 for 1..10000).
        let v = draws(RandType::Special, 1, 10_000);
        let hot = v.iter().filter(|&&x| (4975..=5051).contains(&x)).count() as f64 / N as f64;
        assert!((hot - 0.75).abs() < 0.01, "{hot}");
    }

    #[test]
    fn zipfian_follows_the_power_law() {
        let v = draws(RandType::Zipfian, 1, 1000);
        let count = |k: u64| v.iter().filter(|&&x| x == k).count() as f64;
        // P(k) ~ 1/k^0.8: P(1)/P(2) = 2^0.8 = 1.741, P(1)/P(10) = 6.31.
        assert!(
            (count(1) / count(2) - 1.741).abs() < 0.08,
            "{}",
            count(1) / count(2)
        );
        assert!(
            (count(1) / count(10) - 6.31).abs() < 0.5,
            "{}",
            count(1) / count(10)
        );
    }

    #[test]
    fn pareto_favours_low_keys() {
        let v = draws(RandType::Pareto, 1, 10_000);
        // h=0.2: the lowest 20% of keys get about 80% of draws.
        let low = v.iter().filter(|&&x| x <= 2000).count() as f64 / N as f64;
        assert!((low - 0.8).abs() < 0.02, "{low}");
    }

    #[test]
    fn names_round_trip_and_bad_names_are_explained() {
        for name in RandType::NAMES {
            assert_eq!(RandType::parse(name).unwrap().as_str(), *name);
        }
        let err = RandType::parse("normal").unwrap_err();
        assert!(
            err.contains("uniform, gaussian, special, zipfian, pareto"),
            "{err}"
        );
    }
}
