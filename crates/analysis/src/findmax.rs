//! Findmax: the highest offered rate that meets a latency SLA.
//!
//! The search doubles the rate from a start until a probe fails, then
//! bisects between the best pass and the lowest fail until the gap is
//! within a precision. [`FindmaxSearch`] only decides the next rate; the
//! caller runs the probes and reports each verdict, judged by [`Sla::check`].

use serde::{Deserialize, Serialize};

/// The share of its target a rate must achieve to count as offered:
/// findmax's default [`Sla::min_achieved`], the engine's "target rate not
/// reached" warning and the history's `rate_not_reached` flag, and where a
/// ramp's throughput stopped following its target ([`crate::ramp`]).
pub const MIN_ACHIEVED: f64 = 0.95;

/// What a rate must hold: a latency percentile under a bound, and most of
/// the offered rate actually achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sla {
    /// Which latency percentile, e.g. 99.0.
    pub percentile: f64,
    pub bound_ms: f64,
    /// The achieved rate must reach this share of the target.
    pub min_achieved: f64,
}

impl Sla {
    /// Whether a probe at `target_rate` that achieved `achieved_rate` with
    /// `latency_ms` at [`Sla::percentile`] met the SLA, and why not.
    pub fn check(
        &self,
        target_rate: f64,
        achieved_rate: f64,
        latency_ms: f64,
    ) -> Result<(), String> {
        if achieved_rate < target_rate * self.min_achieved {
            return Err(format!(
                "achieved {achieved_rate:.1}/s, below {:.0}% of the target",
                self.min_achieved * 100.0
            ));
        }
        if latency_ms > self.bound_ms {
            return Err(format!(
                "p{} {latency_ms:.2} ms > {:.2} ms",
                self.percentile, self.bound_ms
            ));
        }
        Ok(())
    }
}

/// How the search runs.
#[derive(Debug, Clone, PartialEq)]
pub struct FindmaxPlan {
    pub start_rate: f64,
    /// Never probe above this rate.
    pub max_rate: Option<f64>,
    /// Stop bisecting when the gap between pass and fail is this fraction
    /// of the best pass.
    pub precision: f64,
    pub max_probes: usize,
}

/// The answer of a search, as the sweep file stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindmaxOutcome {
    pub sla: Sla,
    /// The highest rate that met the SLA (`null`: none did).
    pub best_rate: Option<f64>,
    /// The lowest rate that failed it (`null`: none did).
    pub lowest_failing_rate: Option<f64>,
    /// How many probes ran.
    pub probes: usize,
}

/// The search's state: which rates passed and failed, and what to probe next.
#[derive(Debug, Clone)]
pub struct FindmaxSearch {
    plan: FindmaxPlan,
    best: Option<f64>,
    fail: Option<f64>,
    next: Option<f64>,
    probes: usize,
}

impl FindmaxSearch {
    pub fn new(plan: FindmaxPlan) -> FindmaxSearch {
        FindmaxSearch {
            next: (plan.max_probes > 0).then_some(plan.start_rate),
            plan,
            best: None,
            fail: None,
            probes: 0,
        }
    }

    /// The rate to probe next; `None` once the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        self.next
    }

    /// Records the verdict of a probe at `rate` and decides the next one.
    pub fn record(&mut self, rate: f64, passed: bool) {
        self.probes += 1;
        if passed {
            self.best = Some(self.best.map_or(rate, |b| b.max(rate)));
        } else {
            self.fail = Some(self.fail.map_or(rate, |f| f.min(rate)));
        }
        self.next = if self.probes >= self.plan.max_probes {
            None
        } else {
            self.after()
        };
    }

    /// Doubling while every probe passed (up to the maximum rate), then
    /// bisection until pass and fail are within the precision — or, when
    /// nothing passed, until the failing rate is 64 times below the start.
    fn after(&self) -> Option<f64> {
        match (self.best, self.fail) {
            (Some(b), None) => match self.plan.max_rate {
                Some(m) if b >= m => None,
                Some(m) => Some((b * 2.0).min(m)),
                None => Some(b * 2.0),
            },
            (b, Some(f)) => {
                let lo = b.unwrap_or(0.0);
                let close_enough = lo > 0.0 && (f - lo) / lo <= self.plan.precision;
                let nothing_passes = lo == 0.0 && f <= self.plan.start_rate / 64.0;
                (!close_enough && !nothing_passes).then_some((lo + f) / 2.0)
            }
            (None, None) => unreachable!("called after a verdict"),
        }
    }

    /// Counts a probe that was cut short (Ctrl-C, a dead server): it says
    /// nothing about its rate, so the search ends there.
    pub fn record_cut_short(&mut self) {
        self.probes += 1;
        self.next = None;
    }

    /// What was found so far, under `sla`.
    pub fn outcome(&self, sla: &Sla) -> FindmaxOutcome {
        FindmaxOutcome {
            sla: sla.clone(),
            best_rate: self.best,
            lowest_failing_rate: self.fail,
            probes: self.probes,
        }
    }
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

    /// Runs the search against a system that meets the SLA up to `capacity`.
    fn search(plan: FindmaxPlan, capacity: f64) -> (Vec<f64>, FindmaxSearch) {
        let mut s = FindmaxSearch::new(plan);
        let mut probed = Vec::new();
        while let Some(rate) = s.next_rate() {
            probed.push(rate);
            s.record(rate, rate <= capacity);
        }
        (probed, s)
    }

    #[test]
    fn doubles_then_bisects_to_within_the_precision() {
        let (probed, s) = search(plan(1000.0, None), 5000.0);
        assert_eq!(
            probed,
            [1000.0, 2000.0, 4000.0, 8000.0, 6000.0, 5000.0, 5500.0, 5250.0]
        );
        let o = s.outcome(&Sla {
            percentile: 99.0,
            bound_ms: 10.0,
            min_achieved: 0.95,
        });
        assert_eq!(
            (o.best_rate, o.lowest_failing_rate),
            (Some(5000.0), Some(5250.0))
        );
        assert_eq!(o.probes, 8);
    }

    #[test]
    fn stops_at_the_maximum_rate_when_it_passes() {
        let (probed, s) = search(plan(1000.0, Some(3000.0)), 1e9);
        assert_eq!(probed, [1000.0, 2000.0, 3000.0]);
        assert_eq!((s.best, s.fail), (Some(3000.0), None));
    }

    #[test]
    fn gives_up_when_rates_far_below_the_start_fail() {
        let (probed, s) = search(plan(6400.0, None), 0.0);
        assert_eq!(probed, [6400.0, 3200.0, 1600.0, 800.0, 400.0, 200.0, 100.0]);
        assert_eq!((s.best, s.fail), (None, Some(100.0)));
    }

    #[test]
    fn a_probe_cut_short_ends_the_search_and_is_counted() {
        let mut s = FindmaxSearch::new(plan(1000.0, None));
        s.record(1000.0, true);
        s.record_cut_short();
        assert_eq!(s.next_rate(), None);
        assert_eq!((s.probes, s.best, s.fail), (2, Some(1000.0), None));
    }

    #[test]
    fn never_runs_more_than_the_probe_budget() {
        let p = FindmaxPlan {
            max_probes: 3,
            ..plan(1000.0, None)
        };
        assert_eq!(search(p, 1e9).0, [1000.0, 2000.0, 4000.0]);
    }

    #[test]
    fn sla_check_names_what_failed() {
        let sla = Sla {
            percentile: 99.0,
            bound_ms: 10.0,
            min_achieved: 0.95,
        };
        assert_eq!(sla.check(1000.0, 990.0, 9.5), Ok(()));
        assert_eq!(
            sla.check(1000.0, 900.0, 1.0).unwrap_err(),
            "achieved 900.0/s, below 95% of the target"
        );
        assert_eq!(
            sla.check(1000.0, 1000.0, 12.5).unwrap_err(),
            "p99 12.50 ms > 10.00 ms"
        );
    }
}
