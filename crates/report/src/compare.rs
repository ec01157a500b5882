//! `loadcell compare` as text and JSON: each candidate against the
//! baseline, metric by metric or sweep point by sweep point, with the
//! significance tests and regression gates `loadcell_analysis::compare`
//! computed.

use std::fmt::Write as _;

use loadcell_analysis::compare::{GateOutcome, MeanComparison};
use loadcell_analysis::AnalysisError;
use loadcell_record::sweep::PointStats;
use serde_json::{json, Value};

/// The gates on one comparison, each a metric and its outcome, or why it
/// could not be evaluated (a baseline of 0, say). `None`: no threshold.
pub type Gates = Option<Vec<(&'static str, Result<GateOutcome, AnalysisError>)>>;

/// Two single runs.
pub struct RunComparison {
    pub baseline: String,
    pub candidate: String,
    /// Metric name, baseline value, candidate value.
    pub metrics: Vec<(&'static str, f64, f64)>,
    pub throughput_test: Option<MeanComparison>,
    pub p99_test: Option<MeanComparison>,
    pub gates: Gates,
    /// Where each side's interval series was read: the result's own
    /// intervals, or (a long run's) interval log.
    pub series_from: (String, String),
}

/// One value both sweeps measured.
pub struct PointComparison {
    pub value: f64,
    pub baseline: PointStats,
    pub candidate: PointStats,
    pub throughput_test: Option<MeanComparison>,
    pub p99_test: Option<MeanComparison>,
    pub gates: Gates,
}

/// Two sweeps of the same option, at the values both measured.
pub struct SweepComparison {
    pub baseline: String,
    pub candidate: String,
    pub parameter: String,
    pub points: Vec<PointComparison>,
}

pub enum Pair {
    Runs(Box<RunComparison>),
    Sweeps(SweepComparison),
}

/// Every candidate against the baseline.
pub struct Comparison {
    pub pairs: Vec<Pair>,
    /// A threshold was given: the gates decide the verdict.
    pub gated: bool,
}

fn evaluated(gates: &Gates) -> impl Iterator<Item = &GateOutcome> {
    gates.iter().flatten().filter_map(|(_, g)| g.as_ref().ok())
}

fn regressed(gates: &Gates) -> bool {
    evaluated(gates).any(|g| g.regressed)
}

impl Pair {
    fn regressed(&self) -> bool {
        match self {
            Pair::Runs(r) => regressed(&r.gates),
            Pair::Sweeps(s) => s.points.iter().any(|p| regressed(&p.gates)),
        }
    }
}

fn ratio(a: f64, b: f64) -> String {
    if a > 0.0 {
        format!("{:.3}x", b / a)
    } else {
        "-".into()
    }
}

/// A gate that could not be evaluated is said so, not passed over in silence.
fn unevaluated(o: &mut String, gates: &Gates) {
    for (metric, g) in gates.iter().flatten() {
        if let Err(e) = g {
            let _ = writeln!(o, "    gate on {metric} not evaluated: {e}");
        }
    }
}

fn gates_json(gates: &Gates) -> Vec<&GateOutcome> {
    evaluated(gates).collect()
}

impl Comparison {
    /// Whether some gate failed.
    pub fn regressed(&self) -> bool {
        self.pairs.iter().any(Pair::regressed)
    }

    /// Every gate evaluated, over all pairs (and sweep points).
    pub fn gate_outcomes(&self) -> Vec<&GateOutcome> {
        self.pairs
            .iter()
            .flat_map(|p| match p {
                Pair::Runs(r) => evaluated(&r.gates).collect::<Vec<_>>(),
                Pair::Sweeps(s) => s
                    .points
                    .iter()
                    .flat_map(|pt| evaluated(&pt.gates))
                    .collect(),
            })
            .collect()
    }

    /// The text `loadcell compare` prints.
    pub fn text(&self) -> String {
        let mut o = String::new();
        for pair in &self.pairs {
            match pair {
                Pair::Runs(r) => runs_text(&mut o, r),
                Pair::Sweeps(s) => sweeps_text(&mut o, s),
            }
        }
        if self.gated {
            let _ = writeln!(
                o,
                "{}",
                if self.regressed() {
                    "REGRESSED: at least one gate failed"
                } else {
                    "No regression beyond the threshold"
                }
            );
        }
        o
    }

    /// What `loadcell compare --json` prints.
    pub fn json(&self) -> Value {
        let comparisons: Vec<Value> = self
            .pairs
            .iter()
            .map(|pair| match pair {
                Pair::Runs(r) => runs_json(r),
                Pair::Sweeps(s) => sweeps_json(s),
            })
            .collect();
        json!({ "comparisons": comparisons, "regressed": self.regressed() })
    }
}

fn runs_text(o: &mut String, r: &RunComparison) {
    let _ = writeln!(o, "{} vs {} (baseline)", r.candidate, r.baseline);
    let _ = writeln!(
        o,
        "    {:<22} {:>14} {:>14} {:>9}",
        "metric", "baseline", "candidate", "ratio"
    );
    for (metric, x, y) in &r.metrics {
        let _ = writeln!(
            o,
            "    {metric:<22} {x:>14.3} {y:>14.3} {:>9}",
            ratio(*x, *y)
        );
    }
    let (a, b) = &r.series_from;
    if a == b {
        let _ = writeln!(o, "    intervals tested: {a}");
    } else {
        let _ = writeln!(o, "    intervals tested: baseline {a}; candidate {b}");
    }
    for (what, c) in [
        ("throughput (events/s per interval)", &r.throughput_test),
        ("p99 per interval", &r.p99_test),
    ] {
        match c {
            Some(c) => {
                let _ = writeln!(o, "    {}", c.sentence(what));
            }
            None => {
                let _ = writeln!(o, "    {what}: too few intervals for a significance test");
            }
        }
    }
    unevaluated(o, &r.gates);
    for g in evaluated(&r.gates) {
        let _ = writeln!(o, "    gate: {}", g.sentence());
    }
    let _ = writeln!(o);
}

fn runs_json(r: &RunComparison) -> Value {
    json!({
        "baseline": r.baseline,
        "candidate": r.candidate,
        "metrics": r.metrics.iter().map(|(m, x, y)| json!({"metric": m, "baseline": x, "candidate": y, "ratio": if *x > 0.0 { Some(y / x) } else { None }})).collect::<Vec<_>>(),
        "throughput_test": r.throughput_test,
        "p99_test": r.p99_test,
        "series_from": { "baseline": r.series_from.0, "candidate": r.series_from.1 },
        "gates": gates_json(&r.gates),
        "regressed": regressed(&r.gates),
    })
}

fn sweeps_text(o: &mut String, s: &SweepComparison) {
    let _ = writeln!(
        o,
        "{} vs {} (baseline), point by point over --{}",
        s.candidate, s.baseline, s.parameter
    );
    let _ = writeln!(
        o,
        "    {:>10} {:>13} {:>13} {:>8} {:>10} {:>10} {:>8}  throughput test",
        s.parameter, "base ev/s", "cand ev/s", "ratio", "base p95", "cand p95", "ratio"
    );
    for p in &s.points {
        let verdict = match &p.throughput_test {
            Some(c) => format!(
                "{:+.1}% ({})",
                c.relative_change * 100.0,
                if c.significant {
                    "significant"
                } else {
                    "not significant"
                }
            ),
            None => "-".into(),
        };
        let (a, b) = (&p.baseline, &p.candidate);
        let _ = writeln!(
            o,
            "    {:>10} {:>13.1} {:>13.1} {:>8} {:>10.3} {:>10.3} {:>8}  {verdict}",
            p.value,
            a.events_per_sec,
            b.events_per_sec,
            ratio(a.events_per_sec, b.events_per_sec),
            a.p95_ms,
            b.p95_ms,
            ratio(a.p95_ms, b.p95_ms)
        );
        unevaluated(o, &p.gates);
        for g in evaluated(&p.gates).filter(|g| g.regressed) {
            let _ = writeln!(o, "        gate at {}: {}", p.value, g.sentence());
        }
    }
    let _ = writeln!(o);
}

fn sweeps_json(s: &SweepComparison) -> Value {
    let points: Vec<Value> = s
        .points
        .iter()
        .map(|p| {
            json!({
                "value": p.value,
                "baseline": p.baseline,
                "candidate": p.candidate,
                "throughput_test": p.throughput_test,
                "p99_test": p.p99_test,
                "gates": gates_json(&p.gates),
            })
        })
        .collect();
    json!({
        "baseline": s.baseline,
        "candidate": s.candidate,
        "parameter": s.parameter,
        "points": points,
        "regressed": s.points.iter().any(|p| regressed(&p.gates)),
    })
}

#[cfg(test)]
mod tests {
    use loadcell_analysis::compare::{regression_gate, Direction};

    use super::*;

    fn stats(events_per_sec: f64, p95_ms: f64) -> PointStats {
        PointStats {
            events_per_sec,
            p95_ms,
            ..PointStats::default()
        }
    }

    #[test]
    fn runs_and_sweeps_are_worded_with_their_gates() {
        let runs = RunComparison {
            baseline: "a.json".into(),
            candidate: "b.json".into(),
            metrics: vec![("events/s", 1000.0, 800.0), ("errors", 0.0, 2.0)],
            throughput_test: None,
            p99_test: None,
            gates: Some(vec![
                (
                    "throughput",
                    regression_gate("throughput", Direction::HigherIsBetter, 0.05, 1000.0, 800.0),
                ),
                (
                    "p99 latency",
                    regression_gate("p99 latency", Direction::LowerIsBetter, 0.05, 0.0, 1.0),
                ),
            ]),
            series_from: (
                "the result's intervals".into(),
                "the interval log b.hlog".into(),
            ),
        };
        let sweeps = SweepComparison {
            baseline: "s1.json".into(),
            candidate: "s2.json".into(),
            parameter: "threads".into(),
            points: vec![PointComparison {
                value: 4.0,
                baseline: stats(1000.0, 2.0),
                candidate: stats(1100.0, 1.0),
                throughput_test: None,
                p99_test: None,
                gates: None,
            }],
        };
        let c = Comparison {
            pairs: vec![Pair::Runs(Box::new(runs)), Pair::Sweeps(sweeps)],
            gated: true,
        };
        assert!(c.regressed());
        let text = c.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "b.json vs a.json (baseline)");
        assert_eq!(
            lines[2],
            "    events/s                     1000.000        800.000    0.800x"
        );
        assert_eq!(
            lines[3],
            "    errors                          0.000          2.000         -"
        );
        assert_eq!(
            lines[4],
            "    intervals tested: baseline the result's intervals; candidate the interval log b.hlog"
        );
        assert_eq!(
            lines[5],
            "    throughput (events/s per interval): too few intervals for a significance test"
        );
        assert!(
            lines[7].starts_with("    gate on p99 latency not evaluated: "),
            "{text}"
        );
        assert_eq!(
            lines[8],
            "    gate: throughput regressed: 1k → 800 (-20%, threshold 5%)"
        );
        assert_eq!(
            lines[10],
            "s2.json vs s1.json (baseline), point by point over --threads"
        );
        assert_eq!(
            lines[12],
            "             4        1000.0        1100.0   1.100x      2.000      1.000   0.500x  -"
        );
        assert_eq!(lines[14], "REGRESSED: at least one gate failed");

        let json = c.json();
        assert_eq!(json["regressed"], true);
        assert_eq!(json["comparisons"][0]["metrics"][1]["ratio"], Value::Null);
        assert_eq!(
            json["comparisons"][0]["gates"].as_array().unwrap().len(),
            1,
            "only evaluated gates"
        );
        assert_eq!(json["comparisons"][1]["points"][0]["value"], 4.0);
        assert_eq!(json["comparisons"][1]["regressed"], false);
    }
}
