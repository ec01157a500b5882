//! Hands sweep points to `loadcell_analysis` and words the findmax answer
//! with what its probes measured.

use loadcell_analysis::findmax::{FindmaxEnd, FindmaxOutcome};
use loadcell_analysis::sweep::{analyse, SweepAnalysis, SweepSample};
use loadcell_record::sweep::SweepPoint;
use loadcell_report::table::number;

use crate::sweep::latency_ms;

pub fn sweep(parameter: &str, points: &[SweepPoint]) -> (SweepAnalysis, Vec<String>) {
    let samples: Vec<SweepSample> = points.iter().map(SweepPoint::sample).collect();
    analyse(parameter, &samples)
}

pub fn findmax(outcome: FindmaxOutcome, points: &[SweepPoint]) -> (SweepAnalysis, Vec<String>) {
    let sla = &outcome.sla;
    let mut findings = Vec::new();
    let probed = |rate: f64| points.iter().find(|p| p.value == rate);
    match outcome.best_rate.and_then(probed) {
        Some(p) => {
            let n = p.runs.len();
            let mut answer = format!(
                "highest rate meeting p{} <= {} ms: {} events/s ({n} of {n} probes passed)",
                sla.percentile,
                sla.bound_ms,
                number(p.value),
            );
            if let (Some([low, high]), Some(width)) = (outcome.ci95, outcome.ci95_width) {
                answer += &format!(
                    "; the SLA's edge lies in {}–{}/s (95% interval, {:.1}% wide)",
                    number(low.round()),
                    number(high.round()),
                    100.0 * width
                );
            }
            findings.push(answer);
            let achieved: Vec<f64> = p
                .runs
                .iter()
                .map(|r| r.summary.schedule.achieved_rate)
                .collect();
            let latency: Vec<f64> = p.runs.iter().map(|r| latency_ms(sla, r)).collect();
            findings.push(format!(
                "at {}/s over {n} probe(s): achieved {}/s, p{} {} ms",
                number(p.value),
                mean_and_spread(&achieved, 1),
                sla.percentile,
                mean_and_spread(&latency, 2)
            ));
        }
        None => findings.push(format!(
            "no probed rate met p{} <= {} ms",
            sla.percentile, sla.bound_ms
        )),
    }
    if let Some(p) = outcome.lowest_failing_rate.and_then(probed) {
        let why = p.verdicts.iter().find(|v| v.starts_with("fail"));
        findings.push(format!(
            "{} events/s failed {} of {} probe(s){}",
            number(p.value),
            p.verdicts.iter().filter(|v| v.starts_with("fail")).count(),
            p.runs.len(),
            why.map(|w| format!(" ({})", w.trim_start_matches("fail: ")))
                .unwrap_or_default()
        ));
    }
    match outcome.ended {
        Some(FindmaxEnd::OutOfProbes) => findings.push(format!(
            "ran out of probes ({}){}: give --max-probes more, or longer probes (--time)",
            outcome.probes,
            match (outcome.ci95_width, outcome.precision) {
                (Some(w), Some(p)) => format!(
                    " with the interval {:.1}% wide, wider than --precision {:.1}%",
                    100.0 * w,
                    100.0 * p
                ),
                _ => " before a rate passed and a higher one failed".to_string(),
            }
        )),
        Some(FindmaxEnd::MaxRatePassed) => {
            findings.push("--max-rate met the SLA: the edge is above it".to_string())
        }
        _ => {}
    }
    let analysis = SweepAnalysis {
        findmax: Some(outcome),
        ..SweepAnalysis::default()
    };
    (analysis, findings)
}

/// "1,936.2 ± 3.1" (the sample standard deviation), or the one value.
fn mean_and_spread(values: &[f64], decimals: usize) -> String {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return format!("{mean:.decimals$}");
    }
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    format!("{mean:.decimals$} ± {sd:.decimals$}")
}
