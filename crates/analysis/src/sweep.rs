//! What a sweep's points say: where throughput stops scaling, the
//! Universal Scalability Law fit, where latency climbs, and for findmax the
//! highest rate meeting the SLA — the analysis a sweep file stores.

use serde::{Deserialize, Serialize};

use crate::findmax::FindmaxOutcome;
use crate::knee::{
    average_repeats, latency_knee, marginal_gain_knee, LatencyKnee, LatencyKneeOptions,
    MarginalKnee, MarginalOptions,
};
use crate::usl::{fit_usl, UslFit};

/// The analysis of a sweep or a findmax search. Each part is present only
/// when it could be drawn; the JSON keys are those of sweep files since v1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepAnalysis {
    /// Where throughput stopped scaling with concurrency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<MarginalKnee>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usl: Option<UslFit>,
    /// Where p99 climbed with load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_knee: Option<LatencyKnee>,
    /// A findmax search's answer; its fields sit beside the others.
    #[serde(flatten)]
    pub findmax: Option<FindmaxOutcome>,
}

/// One measured point of a sweep (repeats are averaged by [`analyse`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepSample {
    /// The swept parameter's value.
    pub value: f64,
    /// Throughput, in the unit the sentences name (events/s).
    pub throughput: f64,
    pub p99_ms: f64,
}

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

/// The analysis of a sweep over `parameter` and the findings in plain
/// words: throughput knee and USL fit for concurrency parameters, the
/// latency knee for every parameter.
pub fn analyse(parameter: &str, samples: &[SweepSample]) -> (SweepAnalysis, Vec<String>) {
    let mut analysis = SweepAnalysis::default();
    let mut findings = Vec::new();
    let concurrency = CONCURRENCY.contains(&parameter);
    if concurrency {
        let throughput: Vec<(f64, f64)> = samples.iter().map(|s| (s.value, s.throughput)).collect();
        let curve = average_repeats(&throughput);
        match marginal_gain_knee(&curve, &MarginalOptions::default()) {
            Ok(Some(knee)) => {
                findings.push(knee.sentence(unit(parameter)));
                analysis.knee = Some(knee);
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
            analysis.usl = Some(fit);
        }
    }
    // In order of the load offered (the swept value), which past
    // saturation is not the order of the throughput measured.
    let mut by_load: Vec<&SweepSample> = samples.iter().collect();
    by_load.sort_by(|a, b| a.value.total_cmp(&b.value));
    let latency: Vec<(f64, f64)> = by_load.iter().map(|s| (s.throughput, s.p99_ms)).collect();
    let opts = LatencyKneeOptions {
        in_load_order: concurrency || parameter == "rate",
        ..LatencyKneeOptions::default()
    };
    if let Ok(Some(k)) = latency_knee(&latency, &opts) {
        findings.push(k.sentence("events/s"));
        analysis.latency_knee = Some(k);
    }
    (analysis, findings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findmax::Sla;

    fn sample(value: f64, throughput: f64, p99_ms: f64) -> SweepSample {
        SweepSample {
            value,
            throughput,
            p99_ms,
        }
    }

    #[test]
    fn a_thread_sweep_finds_both_knees_and_a_fit() {
        let samples = [
            sample(1.0, 1000.0, 1.0),
            sample(2.0, 2000.0, 1.0),
            sample(4.0, 4000.0, 1.1),
            sample(8.0, 4100.0, 3.0),
            sample(16.0, 4000.0, 9.0),
        ];
        let (a, findings) = analyse("threads", &samples);
        assert_eq!(a.knee.as_ref().map(|k| k.x), Some(8.0));
        assert!(a.usl.is_some());
        assert_eq!(a.latency_knee.as_ref().map(|k| k.throughput), Some(4100.0));
        assert_eq!(findings.len(), 3);
        assert_eq!(
            findings[0],
            "throughput stops scaling at 8 threads (+2.5% from 4)"
        );
    }

    #[test]
    fn other_parameters_get_only_the_latency_knee() {
        let samples = [
            sample(32.0, 900.0, 1.0),
            sample(256.0, 950.0, 1.1),
            sample(1024.0, 1000.0, 5.0),
        ];
        let (a, _) = analyse("data-size", &samples);
        assert!(a.knee.is_none() && a.usl.is_none());
        assert!(a.latency_knee.is_some());
    }

    #[test]
    fn reads_the_json_shape_sweep_files_have_always_had() {
        let sweep: SweepAnalysis = serde_json::from_str(
            r#"{"knee": {"x": 16.0, "throughput": 8000.0, "prev_x": 8.0, "prev_throughput": 7800.0,
                 "gain": 0.02, "normalized_gain": 0.02, "threshold": 0.1, "peak_x": 16.0,
                 "peak_throughput": 8000.0},
                "latency_knee": {"baseline_p99": 2.0, "factor": 2.0, "last_ok_throughput": 7900.0,
                 "last_ok_p99": 3.0, "throughput": 8200.0, "p99": 30.0, "ratio": 15.0,
                 "crossing_throughput": 7910.0},
                "usl": {"lambda": 510.0, "sigma": 0.02, "kappa": 0.0005, "r_squared": 0.99,
                 "rmse": 12.0, "peak_concurrency": 44.0, "peak_throughput": 9000.0, "points": 7}}"#,
        )
        .unwrap();
        assert_eq!(sweep.knee.unwrap().x, 16.0);
        assert_eq!(sweep.usl.unwrap().kappa, 0.0005);
        assert_eq!(sweep.latency_knee.unwrap().crossing_throughput, 7910.0);
        assert!(sweep.findmax.is_none());

        let findmax: SweepAnalysis = serde_json::from_str(
            r#"{"best_rate": null, "lowest_failing_rate": 1000.0, "probes": 7,
                "sla": {"bound_ms": 10.0, "min_achieved": 0.95, "percentile": 99.0}}"#,
        )
        .unwrap();
        let outcome = findmax.findmax.unwrap();
        assert_eq!(outcome.best_rate, None);
        assert_eq!(outcome.lowest_failing_rate, Some(1000.0));
        assert_eq!(outcome.sla.bound_ms, 10.0);
        assert!(findmax.knee.is_none());
    }

    #[test]
    fn writes_findmax_fields_beside_the_others() {
        let a = SweepAnalysis {
            findmax: Some(FindmaxOutcome {
                sla: Sla {
                    percentile: 99.0,
                    bound_ms: 10.0,
                    min_achieved: 0.95,
                },
                best_rate: None,
                lowest_failing_rate: Some(500.0),
                probes: 3,
            }),
            ..SweepAnalysis::default()
        };
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "sla": {"percentile": 99.0, "bound_ms": 10.0, "min_achieved": 0.95},
                "best_rate": null, "lowest_failing_rate": 500.0, "probes": 3
            })
        );
        assert_eq!(
            serde_json::to_value(SweepAnalysis::default()).unwrap(),
            serde_json::json!({})
        );
    }
}
