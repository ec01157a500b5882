//! `loadcell compare`: two or more results (or sweeps) side by side, each
//! against the first, with ratios, a significance test that accounts for
//! autocorrelation between interval samples, and an optional CI gate.
//! The numbers are drawn here; `loadcell_report::compare` words them.

use anyhow::bail;
use loadcell_analysis::compare::{
    compare_means, regression_gate, regression_gate_tested, CompareOptions, Direction,
    MeanComparison,
};
use loadcell_record::fine::FullResolution;
use loadcell_record::result::RunResult;
use loadcell_record::sweep::{AnyResult, SweepResult};
use loadcell_report::compare::{
    Comparison, Gates, Pair, PointComparison, RunComparison, SweepComparison,
};
use loadcell_report::input::Input;

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

/// The throughput and p99 gates, each tested when interval series allow,
/// plain otherwise; `None` without a threshold.
fn gates(
    threshold: Option<f64>,
    throughput: ((f64, f64), Option<&MeanComparison>),
    p99: ((f64, f64), Option<&MeanComparison>),
) -> Gates {
    let t = threshold?;
    let gate = |metric: &'static str,
                direction,
                ((a, b), tested): ((f64, f64), Option<&MeanComparison>)| {
        let outcome = match tested {
            Some(c) => regression_gate_tested(metric, direction, t, c),
            None => regression_gate(metric, direction, t, a, b),
        };
        (metric, outcome)
    };
    Some(vec![
        gate("throughput", Direction::HigherIsBetter, throughput),
        gate("p99 latency", Direction::LowerIsBetter, p99),
    ])
}

/// A run and its every interval, when known (see [`FullResolution`]).
type Run<'a> = (&'a RunResult, Option<&'a FullResolution>);

/// A run's interval series (`of` picks which) and where it was read:
/// every interval when known, else the result's (merged) intervals.
fn series(
    (r, full): Run<'_>,
    of: fn(&FullResolution) -> &Vec<f64>,
    merged: fn(&RunResult) -> Vec<f64>,
) -> (Vec<f64>, String) {
    match full {
        Some(f) => (of(f).clone(), f.source.clone()),
        None => (merged(r), "the result's merged intervals".to_string()),
    }
}

fn compare_runs(
    names: (&str, &str),
    (a, a_full): Run<'_>,
    (b, b_full): Run<'_>,
    threshold: Option<f64>,
) -> RunComparison {
    let (sa, sb) = (&a.summary, &b.summary);
    let cpu = |r: &RunResult| {
        let c = r.summary.client_cpu;
        if r.summary.events > 0 {
            (c.user_s + c.sys_s) * 1e6 / r.summary.events as f64
        } else {
            0.0
        }
    };
    let metrics = vec![
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
    let (a_events, a_from) = series((a, a_full), |f| &f.events_per_sec, events);
    let (b_events, b_from) = series((b, b_full), |f| &f.events_per_sec, events);
    let throughput_test = test(&a_events, &b_events);
    let p99_test = test(
        &series((a, a_full), |f| &f.p99_ms, p99s).0,
        &series((b, b_full), |f| &f.p99_ms, p99s).0,
    );
    RunComparison {
        baseline: names.0.to_string(),
        candidate: names.1.to_string(),
        metrics,
        gates: gates(
            threshold,
            (
                (sa.events_per_sec, sb.events_per_sec),
                throughput_test.as_ref(),
            ),
            ((sa.latency_ms.p99, sb.latency_ms.p99), p99_test.as_ref()),
        ),
        throughput_test,
        p99_test,
        series_from: (a_from, b_from),
    }
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
    names: (&str, &str),
    a: &SweepResult,
    b: &SweepResult,
    threshold: Option<f64>,
) -> anyhow::Result<SweepComparison> {
    if a.parameter != b.parameter {
        bail!(
            "{} sweeps --{} but {} sweeps --{}: compare sweeps of the same option",
            names.0,
            a.parameter,
            names.1,
            b.parameter
        );
    }
    let mut points = Vec::new();
    for pa in &a.points {
        let Some(pb) = b.points.iter().find(|p| p.value == pa.value) else {
            continue;
        };
        let throughput_test = point_test(&pa.runs, &pb.runs, events);
        let p99_test = point_test(&pa.runs, &pb.runs, p99s);
        points.push(PointComparison {
            value: pa.value,
            baseline: pa.mean,
            candidate: pb.mean,
            gates: gates(
                threshold,
                (
                    (pa.mean.events_per_sec, pb.mean.events_per_sec),
                    throughput_test.as_ref(),
                ),
                ((pa.mean.p99_ms, pb.mean.p99_ms), p99_test.as_ref()),
            ),
            throughput_test,
            p99_test,
        });
    }
    if points.is_empty() {
        bail!(
            "{} and {} share no --{} values to compare",
            names.0,
            names.1,
            a.parameter
        );
    }
    Ok(SweepComparison {
        baseline: names.0.to_string(),
        candidate: names.1.to_string(),
        parameter: a.parameter.clone(),
        points,
    })
}

pub fn compare(files: &[Input], threshold: Option<f64>) -> anyhow::Result<Comparison> {
    if files.len() < 2 {
        bail!("compare needs at least two files: a baseline and one or more candidates");
    }
    let base = &files[0];
    let base_name = &base.name;
    let mut pairs = Vec::new();
    for candidate in &files[1..] {
        let name = &candidate.name;
        pairs.push(match (&base.result, &candidate.result) {
            (AnyResult::Run(a), AnyResult::Run(b)) => Pair::Runs(Box::new(compare_runs(
                (base_name, name),
                (a, base.full.as_ref()),
                (b, candidate.full.as_ref()),
                threshold,
            ))),
            (AnyResult::Sweep(a), AnyResult::Sweep(b)) => {
                Pair::Sweeps(compare_sweeps((base_name, name), a, b, threshold)?)
            }
            _ => bail!("{base_name} and {name}: compare runs with runs and sweeps with sweeps"),
        });
    }
    Ok(Comparison {
        pairs,
        gated: threshold.is_some(),
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
