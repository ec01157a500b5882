//! Turns sweep points into the analysis a reader would otherwise do by
//! eye: where throughput stops scaling, the Universal Scalability Law fit,
//! where latency climbs, and for findmax the highest rate meeting the SLA.

use loadcell_analysis::knee::{
    average_repeats, latency_knee, marginal_gain_knee, LatencyKneeOptions, MarginalOptions,
};
use loadcell_analysis::usl::fit_usl;
use loadcell_record::sweep::SweepPoint;
use serde_json::{json, Value};

use crate::sweep::Sla;

/// Parameters along which throughput is expected to scale.
const CONCURRENCY: &[&str] = &["threads", "clients", "pipeline"];

fn unit(parameter: &str) -> &str {
    match parameter {
        "threads" => "threads",
        "clients" => "clients per thread",
        "pipeline" => "requests in flight",
        other => other,
    }
}

pub fn sweep(parameter: &str, points: &[SweepPoint]) -> (Value, Vec<String>) {
    let mut analysis = serde_json::Map::new();
    let mut findings = Vec::new();
    let throughput: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.value, p.mean.events_per_sec))
        .collect();
    if CONCURRENCY.contains(&parameter) {
        let curve = average_repeats(&throughput);
        match marginal_gain_knee(&curve, &MarginalOptions::default()) {
            Ok(Some(knee)) => {
                findings.push(knee.sentence(unit(parameter)));
                analysis.insert("knee".into(), json!(knee));
            }
            Ok(None) => {
                if let Some((x, _)) = curve.last() {
                    findings.push(format!(
                        "throughput still scales at {x} {} (no knee within the measured range)",
                        unit(parameter)
                    ));
                }
            }
            Err(_) => {}
        }
        if let Ok(fit) = fit_usl(&curve) {
            findings.push(fit.sentence(unit(parameter)));
            analysis.insert("usl".into(), json!(fit));
        }
    }
    // In order of the load offered (the swept value), which past
    // saturation is not the order of the throughput measured.
    let mut by_load: Vec<&SweepPoint> = points.iter().collect();
    by_load.sort_by(|a, b| a.value.total_cmp(&b.value));
    let latency: Vec<(f64, f64)> = by_load
        .iter()
        .map(|p| (p.mean.events_per_sec, p.mean.p99_ms))
        .collect();
    let opts = LatencyKneeOptions {
        in_load_order: CONCURRENCY.contains(&parameter) || parameter == "rate",
        ..LatencyKneeOptions::default()
    };
    if let Ok(Some(k)) = latency_knee(&latency, &opts) {
        findings.push(k.sentence("events/s"));
        analysis.insert("latency_knee".into(), json!(k));
    }
    (Value::Object(analysis), findings)
}

pub fn findmax(
    sla: &Sla,
    points: &[SweepPoint],
    best: Option<f64>,
    fail: Option<f64>,
) -> (Value, Vec<String>) {
    let mut findings = Vec::new();
    let passed = |rate: f64| points.iter().find(|p| p.value == rate);
    match best.and_then(passed) {
        Some(p) => {
            let r = &p.runs[0];
            findings.push(format!(
                "highest rate meeting p{} <= {} ms: {:.1} events/s (achieved {:.1}/s, p{} {:.2} ms)",
                sla.percentile,
                sla.bound_ms,
                p.value,
                r.summary.schedule.achieved_rate,
                sla.percentile,
                sla.latency_ms(r)
            ));
        }
        None => findings.push(format!(
            "no probed rate met p{} <= {} ms",
            sla.percentile, sla.bound_ms
        )),
    }
    if let Some(p) = fail.and_then(passed) {
        let r = &p.runs[0];
        findings.push(format!(
            "{:.1} events/s failed: achieved {:.1}/s, p{} {:.2} ms",
            p.value,
            r.summary.schedule.achieved_rate,
            sla.percentile,
            sla.latency_ms(r)
        ));
    }
    let analysis = json!({
        "sla": { "percentile": sla.percentile, "bound_ms": sla.bound_ms, "min_achieved": sla.min_achieved },
        "best_rate": best,
        "lowest_failing_rate": fail,
        "probes": points.len(),
    });
    (analysis, findings)
}
