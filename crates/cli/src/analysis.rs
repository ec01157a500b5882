//! Hands sweep points to `loadcell_analysis` and words the findmax answer
//! with what its probes measured.

use loadcell_analysis::findmax::FindmaxOutcome;
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
            let r = &p.runs[0];
            findings.push(format!(
                "highest rate meeting p{} <= {} ms: {} events/s (achieved {:.1}/s, p{} {:.2} ms)",
                sla.percentile,
                sla.bound_ms,
                number(p.value),
                r.summary.schedule.achieved_rate,
                sla.percentile,
                latency_ms(sla, r)
            ));
        }
        None => findings.push(format!(
            "no probed rate met p{} <= {} ms",
            sla.percentile, sla.bound_ms
        )),
    }
    if let Some(p) = outcome.lowest_failing_rate.and_then(probed) {
        let r = &p.runs[0];
        findings.push(format!(
            "{} events/s failed: achieved {:.1}/s, p{} {:.2} ms",
            number(p.value),
            r.summary.schedule.achieved_rate,
            sla.percentile,
            latency_ms(sla, r)
        ));
    }
    let analysis = SweepAnalysis {
        findmax: Some(outcome),
        ..SweepAnalysis::default()
    };
    (analysis, findings)
}
