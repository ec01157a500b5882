//! `loadcell sweep` and `loadcell findmax`: many full runs (each with its
//! own warm-up and measurement), one sweep file, and the conclusions a
//! reader would otherwise draw by eye.

use std::collections::BTreeMap;
use std::time::SystemTime;

use anyhow::bail;
use loadcell_analysis::findmax::{FindmaxPlan, FindmaxSearch, ProbeFigures, Sla};
use loadcell_record::result::{RunResult, StopReason};
use loadcell_record::sweep::{PointStats, SweepKind, SweepPoint, SweepResult, SWEEP_SCHEMA_ID};

use crate::analysis;

/// Runs a sweep's step `k` (its `k`-th value), or a findmax probe at a
/// rate: the run configurations are built and checked before the first.
pub type RunStep<'a, T> = dyn FnMut(T) -> anyhow::Result<RunResult> + 'a;

/// The single option given as a comma-separated list of numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct SweptOption {
    /// Flag name without dashes, e.g. `threads`.
    pub name: String,
    pub values: Vec<f64>,
    /// Where the value sits in argv, and whether it is `--flag=value`.
    index: usize,
    inline: bool,
    raw_values: Vec<String>,
}

fn numeric_list(v: &str) -> Option<Vec<String>> {
    let items: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
    (items.len() > 1 && items.iter().all(|i| i.parse::<f64>().is_ok())).then_some(items)
}

/// Finds the one option whose value is a list such as `1,2,4,8`.
pub fn find_swept(argv: &[String]) -> anyhow::Result<SweptOption> {
    let mut found = Vec::new();
    for (i, arg) in argv.iter().enumerate() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            continue;
        };
        let (name, value, index, inline) = match flag.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string(), i, true),
            None => match argv.get(i + 1) {
                Some(v) => (flag.to_string(), v.clone(), i + 1, false),
                None => continue,
            },
        };
        if let Some(raw_values) = numeric_list(&value) {
            let name = if name == "d" {
                "data-size".to_string()
            } else {
                name
            };
            found.push(SweptOption {
                values: raw_values
                    .iter()
                    .map(|v| v.parse().expect("checked"))
                    .collect(),
                name,
                index,
                inline,
                raw_values,
            });
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!("nothing to sweep: give one option a list of values, e.g. --threads 1,2,4,8"),
        _ => bail!(
            "only one option can be swept at a time, but {} have lists: {}",
            found.len(),
            found
                .iter()
                .map(|f| format!("--{}", f.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl SweptOption {
    /// One `run` command line per value, in order, each labelled with its
    /// value (`--label threads=4`).
    pub fn steps(&self, argv: &[String]) -> Vec<Vec<String>> {
        (0..self.values.len())
            .map(|k| {
                let mut step = self.argv_for(argv, k);
                step.push("--label".into());
                step.push(format!("{}={}", self.name, self.raw_values[k]));
                step
            })
            .collect()
    }

    /// argv with the list replaced by value `k`.
    fn argv_for(&self, argv: &[String], k: usize) -> Vec<String> {
        let mut out = argv.to_vec();
        let v = &self.raw_values[k];
        out[self.index] = if self.inline {
            let flag = argv[self.index].split_once('=').expect("inline").0;
            format!("{flag}={v}")
        } else {
            v.clone()
        };
        out
    }
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn step_line(r: &RunResult) -> String {
    let s = &r.summary;
    format!(
        "{:.1} events/s, {:.1} ops/s, p95 {:.2} ms, p99 {:.2} ms, {}{}",
        s.events_per_sec,
        s.ops_per_sec,
        s.latency_ms.p95,
        s.latency_ms.p99,
        loadcell_core::words::counted(s.errors, "error"),
        if r.stop_reason == StopReason::Completed {
            ""
        } else {
            " (partial)"
        }
    )
}

/// Runs every point of a sweep `repeat` times.
pub fn sweep(
    swept: SweptOption,
    repeat: usize,
    labels: BTreeMap<String, String>,
    command: Vec<String>,
    run_step: &mut RunStep<'_, usize>,
) -> anyhow::Result<SweepResult> {
    let started_at = now();
    let total = swept.values.len() * repeat;
    let mut points = Vec::new();
    let mut complete = true;
    let mut error = None;
    for (k, &value) in swept.values.iter().enumerate() {
        let mut runs = Vec::new();
        for rep in 0..repeat {
            let step = k * repeat + rep + 1;
            eprintln!(
                "[step {step}/{total}] --{} {} (run {}/{repeat})",
                swept.name,
                swept.raw_values[k],
                rep + 1
            );
            let r = match run_step(k) {
                Ok(r) => r,
                // Before anything was measured: the command's own error.
                Err(e) if points.is_empty() && runs.is_empty() => return Err(e),
                Err(e) => {
                    eprintln!("[step {step}/{total}] failed: {e:#}");
                    error = Some(format!("step {step}/{total}: {e:#}"));
                    complete = false;
                    break;
                }
            };
            eprintln!("[step {step}/{total}] {}", step_line(&r));
            complete = r.stop_reason == StopReason::Completed;
            runs.push(r);
            if !complete {
                break;
            }
        }
        // A step cut short (Ctrl-C, a dead server) ends the sweep; what it
        // measured is kept.
        if !runs.is_empty() {
            let (mean, spread) = PointStats::mean_and_spread(&runs);
            points.push(SweepPoint {
                value,
                mean,
                spread,
                passed: None,
                verdicts: Vec::new(),
                runs,
            });
        }
        if !complete {
            break;
        }
    }
    let (analysis, findings) = analysis::sweep(&swept.name, &points);
    Ok(SweepResult {
        schema: SWEEP_SCHEMA_ID.to_string(),
        loadcell_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: SweepKind::Sweep,
        started_at,
        ended_at: now(),
        command,
        labels,
        parameter: swept.name,
        repeat,
        points,
        analysis,
        findings,
        complete,
        error,
        gates: Vec::new(),
    })
}

/// The run's latency at the SLA's percentile, from its histogram.
pub fn latency_ms(sla: &Sla, r: &RunResult) -> f64 {
    loadcell_record::hist::decode(&r.histograms.response)
        .map(|h| h.value_at_quantile(sla.percentile / 100.0) as f64 / 1000.0)
        .unwrap_or(f64::INFINITY)
}

/// Whether run `r` at target `rate` met the SLA: why it passed, or why not.
fn verdict(sla: &Sla, r: &RunResult, rate: f64) -> Result<String, String> {
    if r.stop_reason != StopReason::Completed {
        return Err("the run did not complete".into());
    }
    let s = &r.summary;
    let due = s.events + s.schedule.dropped;
    sla.check(&ProbeFigures {
        target_rate: rate,
        achieved_rate: s.schedule.achieved_rate,
        sent_share: if due > 0 {
            s.events as f64 / due as f64
        } else {
            0.0
        },
        latency_ms: latency_ms(sla, r),
    })
}

/// Runs the probes `loadcell_analysis::findmax` asks for (doubling, then
/// bisecting between the best pass and the lowest fail). Every probe is
/// recorded.
pub fn findmax(
    sla: &Sla,
    plan: FindmaxPlan,
    labels: BTreeMap<String, String>,
    command: Vec<String>,
    run_step: &mut RunStep<'_, f64>,
) -> anyhow::Result<SweepResult> {
    let started_at = now();
    let mut points: Vec<SweepPoint> = Vec::new();
    let mut search = FindmaxSearch::new(plan);
    let mut complete = true;
    let mut error = None;
    let mut probe = 0;
    while let Some(rate) = search.next_rate() {
        probe += 1;
        eprintln!("[probe {probe}] --rate {rate:.1}");
        let r = match run_step(rate) {
            Ok(r) => r,
            Err(e) if points.is_empty() => return Err(e),
            Err(e) => {
                eprintln!("[probe {probe}] failed: {e:#}");
                error = Some(format!("probe {probe}: {e:#}"));
                complete = false;
                break;
            }
        };
        let verdict = verdict(sla, &r, rate);
        let said = match &verdict {
            Ok(why) => format!("pass: {why}"),
            Err(why) => format!("fail: {why}"),
        };
        eprintln!("[probe {probe}] {}: {said}", step_line(&r));
        let cut_short = r.stop_reason != StopReason::Completed;
        // Repeats at one rate are one point: their spread is the answer's.
        let at = match points.iter().position(|p| p.value == rate) {
            Some(k) => k,
            None => {
                points.push(SweepPoint {
                    value: rate,
                    mean: PointStats::default(),
                    spread: PointStats::default(),
                    passed: Some(true),
                    verdicts: Vec::new(),
                    runs: Vec::new(),
                });
                points.len() - 1
            }
        };
        let point = &mut points[at];
        point.runs.push(r);
        point.verdicts.push(said);
        point.passed = Some(point.passed == Some(true) && verdict.is_ok());
        (point.mean, point.spread) = PointStats::mean_and_spread(&point.runs);
        if cut_short {
            complete = false;
            search.record_cut_short();
        } else {
            search.record(rate, verdict.is_ok());
        }
    }
    points.sort_by(|a, b| a.value.total_cmp(&b.value));
    let (analysis, findings) = analysis::findmax(search.outcome(sla), &points);
    Ok(SweepResult {
        schema: SWEEP_SCHEMA_ID.to_string(),
        loadcell_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: SweepKind::Findmax,
        started_at,
        ended_at: now(),
        command,
        labels,
        parameter: "rate".into(),
        repeat: 1,
        points,
        analysis,
        findings,
        complete,
        error,
        gates: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadcell_analysis::findmax::FindmaxEnd;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn finds_the_one_list() {
        let a = argv("run oltp_read_write --threads 1,2,4 --time 5s");
        let s = find_swept(&a).unwrap();
        assert_eq!(s.name, "threads");
        assert_eq!(s.values, vec![1.0, 2.0, 4.0]);
        assert_eq!(
            s.argv_for(&a, 2),
            argv("run oltp_read_write --threads 4 --time 5s")
        );
        let b = argv("run kv --pipeline=1,16 --target redis+cluster://h:1,h:2");
        let s = find_swept(&b).unwrap();
        assert_eq!(s.name, "pipeline");
        assert_eq!(s.argv_for(&b, 1)[2], "--pipeline=16");
        assert_eq!(
            find_swept(&a).unwrap().steps(&a)[0],
            argv("run oltp_read_write --threads 1 --time 5s --label threads=1")
        );
        let d = argv("run kv -d 32,1024");
        assert_eq!(find_swept(&d).unwrap().name, "data-size");
    }

    #[test]
    fn none_or_two_lists_are_errors() {
        assert!(find_swept(&argv("run x --threads 4"))
            .unwrap_err()
            .to_string()
            .contains("nothing to sweep"));
        let e = find_swept(&argv("run x --threads 1,2 --clients 1,2"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--threads, --clients"), "{e}");
    }

    #[test]
    fn a_step_that_cannot_run_ends_the_sweep_keeping_the_steps_before() {
        let swept = find_swept(&argv("--threads 1,2,4 --time 1s")).unwrap();
        let mut calls = 0;
        let mut step = |k: usize| {
            calls += 1;
            if k == 2 {
                anyhow::bail!("cannot connect to 127.0.0.1:1");
            }
            Ok(loadcell_report::fixture::run(calls, 100.0))
        };
        let r = sweep(swept.clone(), 1, BTreeMap::new(), Vec::new(), &mut step).unwrap();
        assert_eq!(r.points.len(), 2);
        assert!(!r.complete);
        assert_eq!(
            r.error.as_deref(),
            Some("step 3/3: cannot connect to 127.0.0.1:1")
        );
        // The first step failing is the command's own error: nothing to keep.
        let mut failing = |_: usize| -> anyhow::Result<RunResult> { anyhow::bail!("no") };
        assert!(sweep(swept, 1, BTreeMap::new(), Vec::new(), &mut failing).is_err());
    }

    #[test]
    fn findmax_runs_the_probes_analysis_asks_for_and_stores_its_answer() {
        // A system that keeps up with at most 5000 events/s: up to 5263/s
        // it still sends 95% of the events due.
        let mut step = |rate: f64| {
            let mut r = loadcell_report::fixture::run(4, rate.min(5000.0));
            let s = &mut r.summary;
            s.schedule.dropped = ((rate - s.events_per_sec).max(0.0) * s.duration_s) as u64;
            Ok(r)
        };
        let sla = Sla {
            percentile: 99.0,
            bound_ms: 60_000.0,
            min_achieved: 0.95,
        };
        let plan = FindmaxPlan {
            start_rate: 1000.0,
            max_rate: None,
            precision: 0.05,
            max_probes: 20,
        };
        let r = findmax(&sla, plan, BTreeMap::new(), Vec::new(), &mut step).unwrap();
        let rates: Vec<f64> = r.points.iter().map(|p| p.value).collect();
        assert_eq!(
            rates,
            [1000.0, 2000.0, 4000.0, 5000.0, 5250.0, 5375.0, 5500.0, 6000.0, 8000.0]
        );
        let outcome = r.analysis.findmax.as_ref().unwrap();
        assert_eq!(outcome.best_rate, Some(5250.0));
        assert_eq!(outcome.lowest_failing_rate, Some(5375.0));
        assert_eq!(outcome.ended, Some(FindmaxEnd::Precise));
        // Both ends repeated: one point each, three runs and verdicts.
        let at = |rate: f64| r.points.iter().find(|p| p.value == rate).unwrap();
        assert_eq!((at(5250.0).runs.len(), at(5375.0).verdicts.len()), (3, 3));
        assert!(at(5375.0).verdicts[0].starts_with("fail: rate not achieved"));
        assert_eq!(outcome.probes, 13);
        assert!(r.complete);
        assert!(
            r.findings[0].starts_with(
                "highest rate meeting p99 <= 60000 ms: 5250 events/s (3 of 3 probes passed); the SLA's edge lies in 5"
            ),
            "{}",
            r.findings[0]
        );
        assert!(
            r.findings[1].starts_with("at 5250/s over 3 probe(s): achieved 5000.0 ± 0.0/s"),
            "{}",
            r.findings[1]
        );
    }
}
