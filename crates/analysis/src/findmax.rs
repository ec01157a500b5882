//! Findmax: the highest offered rate that meets a latency SLA, and a 95%
//! interval for where the SLA stops being met.
//!
//! The search doubles the rate from a start until a probe fails, then
//! bisects between the best pass and the lowest fail until the gap is
//! within half the precision. Then it repeats the probes at both ends of
//! the gap until the interval ([`edge_interval`]) is narrower than the
//! precision, or the probe budget runs out. [`FindmaxSearch`] only
//! decides the next rate; the caller runs the probes and reports each
//! verdict, judged by [`Sla::check`].

use serde::{Deserialize, Serialize};

/// The share of its target a rate must achieve to count as offered:
/// findmax's default [`Sla::min_achieved`], the engine's "target rate not
/// reached" warning and the history's `rate_not_reached` flag, and where a
/// ramp's throughput stopped following its target ([`crate::ramp`]).
pub const MIN_ACHIEVED: f64 = 0.95;

/// How many times the best pass and the lowest fail are probed before
/// the search may end: a single verdict near the edge is often luck.
const MIN_REPEATS: usize = 3;

/// Half the 95% quantile of χ² with one degree of freedom (3.841 / 2): a
/// rate is inside the likelihood-ratio interval while its profile
/// log-likelihood is within this of the best.
const LR_95: f64 = 1.920_729;

/// What a rate must hold: a latency percentile under a bound, and most of
/// the offered rate actually achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sla {
    /// Which latency percentile, e.g. 99.0.
    pub percentile: f64,
    pub bound_ms: f64,
    /// The events sent must reach this share of those the schedule made
    /// due.
    pub min_achieved: f64,
}

/// What a probe measured, as [`Sla::check`] judges it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeFigures {
    pub target_rate: f64,
    pub achieved_rate: f64,
    /// Events sent ÷ events the schedule made due. Judged instead of
    /// achieved ÷ target: a short Poisson probe's arrivals fall a few
    /// percent short of its nominal rate by chance alone.
    pub sent_share: f64,
    /// At [`Sla::percentile`].
    pub latency_ms: f64,
}

impl Sla {
    /// Whether a probe met the SLA: why it passed, or why it failed (the
    /// rate was not achieved, or the latency bound was broken).
    pub fn check(&self, p: &ProbeFigures) -> Result<String, String> {
        if p.sent_share < self.min_achieved {
            return Err(format!(
                "rate not achieved: {:.1}/s, {:.1}% of the events due sent (needs {:.0}%)",
                p.achieved_rate,
                100.0 * p.sent_share,
                100.0 * self.min_achieved
            ));
        }
        if p.latency_ms > self.bound_ms {
            return Err(format!(
                "latency bound broken: p{} {:.2} ms > {:.2} ms",
                self.percentile, p.latency_ms, self.bound_ms
            ));
        }
        Ok(format!(
            "achieved {:.1}/s ({:.1}% of the events due), p{} {:.2} ms <= {:.2} ms",
            p.achieved_rate,
            100.0 * p.sent_share,
            self.percentile,
            p.latency_ms,
            self.bound_ms
        ))
    }
}

/// How the search runs.
#[derive(Debug, Clone, PartialEq)]
pub struct FindmaxPlan {
    pub start_rate: f64,
    /// Never probe above this rate.
    pub max_rate: Option<f64>,
    /// The search ends once the 95% interval is at most this fraction of
    /// the answer wide.
    pub precision: f64,
    pub max_probes: usize,
}

/// Why a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindmaxEnd {
    /// The interval is narrower than the precision.
    Precise,
    /// `--max-probes` ran out first.
    OutOfProbes,
    /// The maximum rate met the SLA: the edge is above it.
    MaxRatePassed,
    /// Rates far below the start failed too.
    NothingPassed,
    /// A probe was cut short (Ctrl-C, a dead server).
    CutShort,
}

/// The answer of a search, as the sweep file stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindmaxOutcome {
    pub sla: Sla,
    /// The highest rate below every failure whose every probe met the SLA
    /// (`null`: none did).
    pub best_rate: Option<f64>,
    /// The lowest rate that failed it (`null`: none did).
    pub lowest_failing_rate: Option<f64>,
    /// How many probes ran.
    pub probes: usize,
    /// Where the SLA stops being met, 95% likelihood-ratio interval
    /// ([`edge_interval`]); absent unless some rate passed and some failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    /// The interval's width as a fraction of `best_rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_width: Option<f64>,
    /// `--precision` the search aimed at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<FindmaxEnd>,
}

/// The search's state: every verdict so far, and what to probe next.
#[derive(Debug, Clone)]
pub struct FindmaxSearch {
    plan: FindmaxPlan,
    verdicts: Vec<(f64, bool)>,
    next: Option<f64>,
    probes: usize,
    cut_short: bool,
}

impl FindmaxSearch {
    pub fn new(plan: FindmaxPlan) -> FindmaxSearch {
        FindmaxSearch {
            next: (plan.max_probes > 0).then_some(plan.start_rate),
            plan,
            verdicts: Vec::new(),
            probes: 0,
            cut_short: false,
        }
    }

    /// The rate to probe next; `None` once the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        self.next
    }

    /// Records the verdict of a probe at `rate` and decides the next one.
    pub fn record(&mut self, rate: f64, passed: bool) {
        self.probes += 1;
        self.verdicts.push((rate, passed));
        self.next = if self.probes >= self.plan.max_probes {
            None
        } else {
            self.after()
        };
    }

    /// Counts a probe that was cut short (Ctrl-C, a dead server): it says
    /// nothing about its rate, so the search ends there.
    pub fn record_cut_short(&mut self) {
        self.probes += 1;
        self.cut_short = true;
        self.next = None;
    }

    /// How many probes ran at `rate`.
    fn probes_at(&self, rate: f64) -> usize {
        self.verdicts.iter().filter(|v| v.0 == rate).count()
    }

    /// The lowest rate with a failed probe.
    fn lowest_fail(&self) -> Option<f64> {
        self.verdicts
            .iter()
            .filter(|v| !v.1)
            .map(|v| v.0)
            .min_by(f64::total_cmp)
    }

    /// The answer: the highest rate below every failure none of whose
    /// probes failed (with no failure yet, the highest rate probed).
    fn best(&self) -> Option<f64> {
        let fail = self.lowest_fail();
        self.verdicts
            .iter()
            .filter(|v| v.1 && fail.is_none_or(|f| v.0 < f))
            .map(|v| v.0)
            .max_by(f64::total_cmp)
    }

    /// The 95% interval of the edge, once a rate passed and one failed.
    fn interval(&self) -> Option<[f64; 2]> {
        self.best()?;
        self.lowest_fail()?;
        edge_interval(&self.verdicts, self.plan.precision)
    }

    /// Doubling while every probe passed (up to the maximum rate); then
    /// bisection until pass and fail are within half the precision — or,
    /// when nothing passed, until the failing rate is 64 times below the
    /// start; then, until the interval is within the precision, the answer
    /// again when the interval reaches furthest below it, or the interval's
    /// upper end when it reaches furthest above the lowest failure.
    fn after(&self) -> Option<f64> {
        match (self.best(), self.lowest_fail()) {
            (Some(b), None) => match self.plan.max_rate {
                Some(m) if b >= m => None,
                Some(m) => Some((b * 2.0).min(m)),
                None => Some(b * 2.0),
            },
            (None, Some(f)) => (f > self.plan.start_rate / 64.0).then_some(f / 2.0),
            (Some(b), Some(f)) => {
                if (f - b) / b > self.plan.precision / 2.0 {
                    return Some((b + f) / 2.0);
                }
                let (at_b, at_f) = (self.probes_at(b), self.probes_at(f));
                if at_b.min(at_f) < MIN_REPEATS {
                    return Some(if at_b <= at_f { b } else { f });
                }
                let [low, high] = self.interval()?;
                if (high - low) / b <= self.plan.precision {
                    return None;
                }
                // The wider side is narrowed where it is unsure: below, by
                // repeating the answer (a probe under it that failed would
                // drop the answer for one unlucky second); above, at the
                // interval's end, where a failure rules out the most.
                Some(if (b - low) / b >= (high - f) / f {
                    b
                } else {
                    high
                })
            }
            (None, None) => unreachable!("called after a verdict"),
        }
    }

    /// What was found so far, under `sla`.
    pub fn outcome(&self, sla: &Sla) -> FindmaxOutcome {
        let best = self.best();
        let ci95 = self.interval();
        let ci95_width = ci95.zip(best).map(|([low, high], b)| (high - low) / b);
        let ended = if self.cut_short {
            FindmaxEnd::CutShort
        } else if ci95_width.is_some_and(|w| w <= self.plan.precision) {
            FindmaxEnd::Precise
        } else if self.lowest_fail().is_none()
            && best.is_some_and(|b| self.plan.max_rate.is_some_and(|m| b >= m))
        {
            FindmaxEnd::MaxRatePassed
        } else if best.is_none() && self.probes < self.plan.max_probes {
            FindmaxEnd::NothingPassed
        } else {
            FindmaxEnd::OutOfProbes
        };
        FindmaxOutcome {
            sla: sla.clone(),
            best_rate: best,
            lowest_failing_rate: self.lowest_fail(),
            probes: self.probes,
            ci95,
            ci95_width,
            precision: Some(self.plan.precision),
            ended: Some(ended),
        }
    }
}

/// The 95% likelihood-ratio interval of the rate `t` where a probe is as
/// likely to pass as to fail, from `verdicts` (rate, passed).
///
/// A probe at rate `r` passes with probability `1 / (1 + (r/t)^s)`: a
/// log-logistic curve falling through one half at `t`, as steep as `s`
/// (from gentle to a step). A run's verdict near its edge is a coin toss
/// (one slow second breaks a p99), and this model says how far the edge
/// can be from the probes given how often they disagreed. The interval is
/// every `t` whose likelihood, at its best `s`, is within [`LR_95`] of the
/// best of all (Wilks). Probes that all agree still leave the edge
/// anywhere between the best pass and the lowest fail, and a little beyond
/// each until repeated verdicts there rule it out: each agreeing repeat
/// halves the likelihood of an edge on its wrong side.
///
/// `t` is searched on a grid of relative step `precision / 20` (at least
/// 0.01%) from half the lowest to twice the highest rate probed: an
/// interval that reaches an end of the grid is that wide at least.
pub fn edge_interval(verdicts: &[(f64, bool)], precision: f64) -> Option<[f64; 2]> {
    let lowest = verdicts.iter().map(|v| v.0).min_by(f64::total_cmp)? / 2.0;
    let highest = verdicts.iter().map(|v| v.0).max_by(f64::total_cmp)? * 2.0;
    let step = (precision / 20.0).clamp(1e-4, 1e-3).ln_1p();
    let points = ((highest / lowest).ln() / step).ceil() as usize + 1;
    // Steepness from 1 (pass chance halves over a doubling of the rate)
    // to 10^4 (a step at 0.01%), log-spaced.
    let slopes: Vec<f64> = (0..=48).map(|k| 10f64.powf(k as f64 / 12.0)).collect();
    let log_rates: Vec<(f64, bool)> = verdicts.iter().map(|&(r, p)| (r.ln(), p)).collect();
    let profile: Vec<(f64, f64)> = (0..points)
        .map(|k| {
            let log_t = lowest.ln() + k as f64 * step;
            let best = slopes
                .iter()
                .map(|&s| log_likelihood(&log_rates, log_t, s))
                .fold(f64::NEG_INFINITY, f64::max);
            (log_t.exp(), best)
        })
        .collect();
    let top = profile
        .iter()
        .map(|p| p.1)
        .fold(f64::NEG_INFINITY, f64::max);
    let inside = || profile.iter().filter(|p| p.1 >= top - LR_95).map(|p| p.0);
    Some([
        inside().min_by(f64::total_cmp)?,
        inside().max_by(f64::total_cmp)?,
    ])
}

/// The log-likelihood of `verdicts` (log rate, passed) with the edge at
/// `exp(log_t)` and steepness `s`.
fn log_likelihood(verdicts: &[(f64, bool)], log_t: f64, s: f64) -> f64 {
    verdicts
        .iter()
        .map(|&(log_r, passed)| {
            // log(1 + e^x) without overflow; pass = 1/(1+e^x), x = s·ln(r/t).
            let x = s * (log_r - log_t);
            let softplus = |x: f64| x.max(0.0) + (-x.abs()).exp().ln_1p();
            if passed {
                -softplus(x)
            } else {
                -softplus(-x)
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(start_rate: f64, max_rate: Option<f64>) -> FindmaxPlan {
        FindmaxPlan {
            start_rate,
            max_rate,
            precision: 0.05,
            max_probes: 20,
        }
    }

    fn sla() -> Sla {
        Sla {
            percentile: 99.0,
            bound_ms: 10.0,
            min_achieved: 0.95,
        }
    }

    /// Runs the search against a system whose probe at `rate` passes
    /// when `passes(rate)`.
    fn search(plan: FindmaxPlan, mut passes: impl FnMut(f64) -> bool) -> (Vec<f64>, FindmaxSearch) {
        let mut s = FindmaxSearch::new(plan);
        let mut probed = Vec::new();
        while let Some(rate) = s.next_rate() {
            probed.push(rate);
            s.record(rate, passes(rate));
        }
        (probed, s)
    }

    #[test]
    fn doubles_bisects_then_repeats_the_ends_until_the_interval_is_precise() {
        let (probed, s) = search(plan(1000.0, None), |r| r <= 5000.0);
        assert_eq!(
            probed[..9],
            [1000.0, 2000.0, 4000.0, 8000.0, 6000.0, 5000.0, 5500.0, 5250.0, 5125.0]
        );
        // Then each end of the gap twice more, each agreeing with itself.
        let mut repeats = probed[9..].to_vec();
        repeats.sort_by(f64::total_cmp);
        assert_eq!(repeats, [5000.0, 5000.0, 5125.0, 5125.0]);
        let o = s.outcome(&sla());
        assert_eq!(
            (o.best_rate, o.lowest_failing_rate),
            (Some(5000.0), Some(5125.0))
        );
        assert_eq!((o.ended, o.probes), (Some(FindmaxEnd::Precise), 13));
        let [low, high] = o.ci95.unwrap();
        assert!((4990.0..5010.0).contains(&low), "{low}");
        assert!((5115.0..5135.0).contains(&high), "{high}");
        assert!(o.ci95_width.unwrap() <= 0.05, "{:?}", o.ci95_width);
    }

    #[test]
    fn single_verdicts_leave_the_edge_beyond_the_gap_and_repeats_close_it() {
        let one_each = [(1000.0, true), (1100.0, false)];
        let [low, high] = edge_interval(&one_each, 0.05).unwrap();
        assert!(low < 900.0 && high > 1200.0, "{low}..{high}");
        let thrice = one_each.repeat(3);
        let [low, high] = edge_interval(&thrice, 0.05).unwrap();
        assert!((1000.0..1010.0).contains(&low), "{low}");
        assert!((1090.0..1100.0).contains(&high), "{high}");
    }

    #[test]
    fn verdicts_that_disagree_widen_the_interval() {
        let agreeing = [(1000.0, true), (1050.0, false)].repeat(3);
        let mut disagreeing = agreeing.clone();
        disagreeing.extend([(1000.0, false), (1050.0, true)]);
        let width = |v: &[(f64, bool)]| {
            let [low, high] = edge_interval(v, 0.05).unwrap();
            high - low
        };
        assert!(width(&disagreeing) > 1.5 * width(&agreeing));
    }

    /// A system whose verdicts are coin tosses near its edge (a pass 4 in 5
    /// times 2% below it, 1 in 5 at 2% above): the interval covers the edge
    /// in about 95% of searches (57 of 60 seeds measured; 40 of 60 when
    /// the coin-toss zone is twice as wide, and such a search ends out of
    /// probes), and the answer is below the edge.
    #[test]
    fn the_interval_covers_a_noisy_edge() {
        let edge = 5030.0_f64;
        let mut covered = 0;
        let searches: u64 = 30;
        for seed in 1..=searches {
            let mut state: u64 = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut uniform = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64
            };
            let pass_chance = |r: f64| 1.0 / (1.0 + (r / edge).powf(70.0));
            let (_, s) = search(plan(1000.0, None), |r| uniform() < pass_chance(r));
            let o = s.outcome(&sla());
            let [low, high] = o.ci95.unwrap();
            covered += usize::from(low <= edge && edge <= high);
            assert!(o.best_rate.unwrap() < edge * 1.05, "{o:?}");
        }
        assert!(covered >= 27, "{covered} of {searches}");
    }

    #[test]
    fn stops_at_the_maximum_rate_when_it_passes() {
        let (probed, s) = search(plan(1000.0, Some(3000.0)), |_| true);
        assert_eq!(probed, [1000.0, 2000.0, 3000.0]);
        let o = s.outcome(&sla());
        assert_eq!((o.best_rate, o.lowest_failing_rate), (Some(3000.0), None));
        assert_eq!((o.ci95, o.ended), (None, Some(FindmaxEnd::MaxRatePassed)));
    }

    #[test]
    fn gives_up_when_rates_far_below_the_start_fail() {
        let (probed, s) = search(plan(6400.0, None), |_| false);
        assert_eq!(probed, [6400.0, 3200.0, 1600.0, 800.0, 400.0, 200.0, 100.0]);
        let o = s.outcome(&sla());
        assert_eq!((o.best_rate, o.lowest_failing_rate), (None, Some(100.0)));
        assert_eq!(o.ended, Some(FindmaxEnd::NothingPassed));
    }

    #[test]
    fn a_probe_cut_short_ends_the_search_and_is_counted() {
        let mut s = FindmaxSearch::new(plan(1000.0, None));
        s.record(1000.0, true);
        s.record_cut_short();
        assert_eq!(s.next_rate(), None);
        let o = s.outcome(&sla());
        assert_eq!(
            (o.probes, o.best_rate, o.lowest_failing_rate),
            (2, Some(1000.0), None)
        );
        assert_eq!(o.ended, Some(FindmaxEnd::CutShort));
    }

    #[test]
    fn never_runs_more_than_the_probe_budget_and_says_so() {
        let p = FindmaxPlan {
            max_probes: 6,
            ..plan(1000.0, None)
        };
        let (probed, s) = search(p, |r| r <= 5000.0);
        assert_eq!(probed, [1000.0, 2000.0, 4000.0, 8000.0, 6000.0, 5000.0]);
        let o = s.outcome(&sla());
        assert_eq!(o.ended, Some(FindmaxEnd::OutOfProbes));
        assert!(o.ci95_width.unwrap() > 0.05);
    }

    #[test]
    fn sla_check_names_what_failed() {
        let probe = |sent_share: f64, latency_ms: f64| ProbeFigures {
            target_rate: 1000.0,
            achieved_rate: 1000.0 * sent_share,
            sent_share,
            latency_ms,
        };
        assert_eq!(
            sla().check(&probe(0.99, 9.5)).unwrap(),
            "achieved 990.0/s (99.0% of the events due), p99 9.50 ms <= 10.00 ms"
        );
        assert_eq!(
            sla().check(&probe(0.9, 1.0)).unwrap_err(),
            "rate not achieved: 900.0/s, 90.0% of the events due sent (needs 95%)"
        );
        assert_eq!(
            sla().check(&probe(1.0, 12.5)).unwrap_err(),
            "latency bound broken: p99 12.50 ms > 10.00 ms"
        );
    }
}
