//! `loadcell compare`: two or more results (or sweeps) side by side, each
//! against the first, with ratios, a significance test that accounts for
//! autocorrelation between interval samples, and an optional CI gate.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::bail;
use loadcell_analysis::compare::{
    compare_means, regression_gate, regression_gate_tested, CompareOptions, Direction, GateOutcome,
    MeanComparison,
};
use loadcell_record::result::RunResult;
use loadcell_record::sweep::{AnyResult, SweepResult};
use serde_json::{json, Value};

pub struct Comparison {
    pub text: String,
    pub json: Value,
    /// Some gate failed.
    pub regressed: bool,
}

fn events(r: &RunResult) -> Vec<f64> {
    r.intervals.iter().map(|i| i.events_per_sec).collect()
}

fn p99s(r: &RunResult) -> Vec<f64> {
    r.intervals
        .iter()
        .filter(|i| i.events > 0)
        .map(|i| i.latency_ms.p99)
        .collect()
}

fn test(a: &[f64], b: &[f64]) -> Option<MeanComparison> {
    compare_means(a, b, &CompareOptions::default()).ok()
}

/// A gate on one metric: tested when interval series allow, plain otherwise.
/// One that cannot be evaluated (a baseline of 0, say) is said so in `o`,
/// not passed over in silence.
fn gate(
    o: &mut String,
    metric: &str,
    direction: Direction,
    threshold: f64,
    (a, b): (f64, f64),
    tested: Option<&MeanComparison>,
) -> Option<GateOutcome> {
    let outcome = match tested {
        Some(c) => regression_gate_tested(metric, direction, threshold, c),
        None => regression_gate(metric, direction, threshold, a, b),
    };
    match outcome {
        Ok(g) => Some(g),
        Err(e) => {
            let _ = writeln!(o, "    gate on {metric} not evaluated: {e}");
            None
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

fn compare_runs(
    o: &mut String,
    names: (&str, &str),
    a: &RunResult,
    b: &RunResult,
    threshold: Option<f64>,
) -> (Value, bool) {
    let (sa, sb) = (&a.summary, &b.summary);
    let cpu = |r: &RunResult| {
        let c = r.summary.client_cpu;
        if r.summary.events > 0 {
            (c.user_s + c.sys_s) * 1e6 / r.summary.events as f64
        } else {
            0.0
        }
    };
    let rows: [(&str, f64, f64); 9] = [
        ("events/s", sa.events_per_sec, sb.events_per_sec),
        ("ops/s", sa.ops_per_sec, sb.ops_per_sec),
        ("p50 ms", sa.latency_ms.p50, sb.latency_ms.p50),
        ("p95 ms", sa.latency_ms.p95, sb.latency_ms.p95),
        ("p99 ms", sa.latency_ms.p99, sb.latency_ms.p99),
        ("p99.9 ms", sa.latency_ms.p999, sb.latency_ms.p999),
        ("max ms", sa.latency_ms.max, sb.latency_ms.max),
        ("errors", sa.errors as f64, sb.errors as f64),
        ("client CPU µs/event", cpu(a), cpu(b)),
    ];
    let _ = writeln!(o, "{} vs {} (baseline)", names.1, names.0);
    let _ = writeln!(
        o,
        "    {:<22} {:>14} {:>14} {:>9}",
        "metric", "baseline", "candidate", "ratio"
    );
    for (metric, x, y) in rows {
        let _ = writeln!(o, "    {metric:<22} {x:>14.3} {y:>14.3} {:>9}", ratio(x, y));
    }
    let throughput = test(&events(a), &events(b));
    let latency = test(&p99s(a), &p99s(b));
    for (what, c) in [
        ("throughput (events/s per interval)", &throughput),
        ("p99 per interval", &latency),
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
    let mut gates = Vec::new();
    if let Some(t) = threshold {
        gates.extend(gate(
            o,
            "throughput",
            Direction::HigherIsBetter,
            t,
            (sa.events_per_sec, sb.events_per_sec),
            throughput.as_ref(),
        ));
        gates.extend(gate(
            o,
            "p99 latency",
            Direction::LowerIsBetter,
            t,
            (sa.latency_ms.p99, sb.latency_ms.p99),
            latency.as_ref(),
        ));
        for g in &gates {
            let _ = writeln!(o, "    gate: {}", g.sentence());
        }
    }
    let regressed = gates.iter().any(|g| g.regressed);
    let _ = writeln!(o);
    let value = json!({
        "baseline": names.0,
        "candidate": names.1,
        "metrics": rows.iter().map(|(m, x, y)| json!({"metric": m, "baseline": x, "candidate": y, "ratio": if *x > 0.0 { Some(y / x) } else { None }})).collect::<Vec<_>>(),
        "throughput_test": throughput,
        "p99_test": latency,
        "gates": gates,
        "regressed": regressed,
    });
    (value, regressed)
}

/// The test at one sweep point. With one run a side, its interval series
/// (autocorrelation-adjusted). With repeats, the runs' means as independent
/// samples: concatenating the runs' intervals into one series would read
/// run-to-run differences as autocorrelation within a run and overstate
/// the significance. Fewer than 3 repeats a side leave nothing to test.
fn point_test(
    a: &[RunResult],
    b: &[RunResult],
    series: fn(&RunResult) -> Vec<f64>,
) -> Option<MeanComparison> {
    if let ([a], [b]) = (a, b) {
        return test(&series(a), &series(b));
    }
    let means = |runs: &[RunResult]| -> Vec<f64> {
        runs.iter()
            .map(series)
            .filter(|s| !s.is_empty())
            .map(|s| s.iter().sum::<f64>() / s.len() as f64)
            .collect()
    };
    let independent = CompareOptions {
        max_autocorrelation: 0.0,
        ..CompareOptions::default()
    };
    compare_means(&means(a), &means(b), &independent).ok()
}

fn compare_sweeps(
    o: &mut String,
    names: (&str, &str),
    a: &SweepResult,
    b: &SweepResult,
    threshold: Option<f64>,
) -> anyhow::Result<(Value, bool)> {
    if a.parameter != b.parameter {
        bail!(
            "{} sweeps --{} but {} sweeps --{}: compare sweeps of the same option",
            names.0,
            a.parameter,
            names.1,
            b.parameter
        );
    }
    let _ = writeln!(
        o,
        "{} vs {} (baseline), point by point over --{}",
        names.1, names.0, a.parameter
    );
    let _ = writeln!(
        o,
        "    {:>10} {:>13} {:>13} {:>8} {:>10} {:>10} {:>8}  throughput test",
        a.parameter, "base ev/s", "cand ev/s", "ratio", "base p95", "cand p95", "ratio"
    );
    let mut points = Vec::new();
    let mut regressed = false;
    for pa in &a.points {
        let Some(pb) = b.points.iter().find(|p| p.value == pa.value) else {
            continue;
        };
        let t = point_test(&pa.runs, &pb.runs, events);
        let l = point_test(&pa.runs, &pb.runs, p99s);
        let verdict = match &t {
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
        let _ = writeln!(
            o,
            "    {:>10} {:>13.1} {:>13.1} {:>8} {:>10.3} {:>10.3} {:>8}  {verdict}",
            pa.value,
            pa.mean.events_per_sec,
            pb.mean.events_per_sec,
            ratio(pa.mean.events_per_sec, pb.mean.events_per_sec),
            pa.mean.p95_ms,
            pb.mean.p95_ms,
            ratio(pa.mean.p95_ms, pb.mean.p95_ms)
        );
        let mut gates = Vec::new();
        if let Some(th) = threshold {
            gates.extend(gate(
                o,
                "throughput",
                Direction::HigherIsBetter,
                th,
                (pa.mean.events_per_sec, pb.mean.events_per_sec),
                t.as_ref(),
            ));
            gates.extend(gate(
                o,
                "p99 latency",
                Direction::LowerIsBetter,
                th,
                (pa.mean.p99_ms, pb.mean.p99_ms),
                l.as_ref(),
            ));
            for g in gates.iter().filter(|g| g.regressed) {
                let _ = writeln!(o, "        gate at {}: {}", pa.value, g.sentence());
            }
        }
        regressed |= gates.iter().any(|g| g.regressed);
        points.push(json!({
            "value": pa.value,
            "baseline": pa.mean,
            "candidate": pb.mean,
            "throughput_test": t,
            "p99_test": l,
            "gates": gates,
        }));
    }
    if points.is_empty() {
        bail!(
            "{} and {} share no --{} values to compare",
            names.0,
            names.1,
            a.parameter
        );
    }
    let _ = writeln!(o);
    Ok((
        json!({"baseline": names.0, "candidate": names.1, "parameter": a.parameter, "points": points, "regressed": regressed}),
        regressed,
    ))
}

pub fn compare(
    files: &[(PathBuf, AnyResult)],
    threshold: Option<f64>,
) -> anyhow::Result<Comparison> {
    if files.len() < 2 {
        bail!("compare needs at least two files: a baseline and one or more candidates");
    }
    let mut text = String::new();
    let mut comparisons = Vec::new();
    let mut regressed = false;
    let (base_path, base) = &files[0];
    let base_name = base_path.display().to_string();
    for (path, candidate) in &files[1..] {
        let name = path.display().to_string();
        let (value, worse) = match (base, candidate) {
            (AnyResult::Run(a), AnyResult::Run(b)) => {
                compare_runs(&mut text, (&base_name, &name), a, b, threshold)
            }
            (AnyResult::Sweep(a), AnyResult::Sweep(b)) => {
                compare_sweeps(&mut text, (&base_name, &name), a, b, threshold)?
            }
            _ => bail!("{base_name} and {name}: compare runs with runs and sweeps with sweeps"),
        };
        regressed |= worse;
        comparisons.push(value);
    }
    if threshold.is_some() {
        let _ = writeln!(
            text,
            "{}",
            if regressed {
                "REGRESSED: at least one gate failed"
            } else {
                "No regression beyond the threshold"
            }
        );
    }
    Ok(Comparison {
        text,
        json: json!({ "comparisons": comparisons, "regressed": regressed }),
        regressed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of a sweep point: each run's intervals tight around its own
    /// level, the levels spread run to run.
    fn runs_at(levels: &[f64]) -> Vec<RunResult> {
        levels
            .iter()
            .map(|&level| {
                let mut r = loadcell_report::fixture::run(4, level);
                for (i, iv) in r.intervals.iter_mut().enumerate() {
                    iv.events_per_sec = level * (1.0 + 0.001 * (i % 3) as f64);
                }
                r
            })
            .collect()
    }

    #[test]
    fn repeats_are_compared_by_their_means_not_as_one_series() {
        // The same spread of run levels on both sides, candidate 1% higher:
        // run-to-run noise of ±4% cannot make 1% significant.
        let a = runs_at(&[960.0, 1000.0, 1040.0]);
        let b = runs_at(&[970.0, 1010.0, 1050.0]);
        let t = point_test(&a, &b, events).expect("three runs a side");
        assert!(!t.significant, "{t:?}");
        // A change well beyond the run-to-run spread is found.
        let c = runs_at(&[1100.0, 1140.0, 1180.0]);
        assert!(point_test(&a, &c, events).unwrap().significant);
        // Two runs a side: nothing to test.
        assert!(point_test(&a[..2], &b[..2], events).is_none());
    }
}
