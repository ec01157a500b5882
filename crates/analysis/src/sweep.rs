//! What a sweep's points say: where throughput stops scaling, the
//! Universal Scalability Law fit, where latency climbs, and for findmax the
//! highest rate meeting the SLA — the analysis a sweep file stores.

use serde::{Deserialize, Serialize};

use crate::findmax::FindmaxOutcome;
use crate::knee::{
    average_repeats, latency_knee, marginal_gain_knee, LatencyKnee, LatencyKneeOptions,
    MarginalKnee, MarginalOptions, Saturation,
};
use crate::saturation::{Bottleneck, ResourceFigures};
use crate::text;
use crate::usl::{fit_usl, UslFit};

/// The analysis of a sweep or a findmax search. Each part is present only
/// when it could be drawn; the JSON keys are those of sweep files since v1,
/// with fields added, never renamed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepAnalysis {
    /// The marginal-gain rule's answer. Its `x` is the first step that did
    /// not scale; the knee a reader wants is `prev_x`, the last that did,
    /// which `saturation` names (files before it have only this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<MarginalKnee>,
    /// Where throughput saturates: the last point that still scaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation: Option<Saturation>,
    /// What ran out there, or that nothing measured did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<Bottleneck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usl: Option<UslFit>,
    /// Where p99 climbed with load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_knee: Option<LatencyKnee>,
    /// The client's utilisation of its own ceiling at the knee (the
    /// higher of the last point that scaled and the first that did not):
    /// from [`crate::ceiling::AT_CEILING`] on, the knee is the client's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_at_knee: Option<f64>,
    /// A findmax search's answer; its fields sit beside the others.
    #[serde(flatten)]
    pub findmax: Option<FindmaxOutcome>,
}

impl SweepAnalysis {
    /// The swept value where throughput saturates: the last point that
    /// still scaled, in files written before `saturation` too.
    pub fn saturation_x(&self) -> Option<f64> {
        self.saturation
            .as_ref()
            .map(|s| s.x)
            .or_else(|| self.knee.as_ref().map(|k| k.prev_x))
    }
}

/// One measured point of a sweep (repeats are averaged by [`analyse`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepSample {
    /// The swept parameter's value.
    pub value: f64,
    /// Throughput, in the unit the sentences name (events/s).
    pub throughput: f64,
    pub p99_ms: f64,
    /// What the run's resource samples averaged to, when it took any.
    pub resources: Option<ResourceFigures>,
    /// The run's `client.utilisation`, when it has one.
    pub client_utilisation: Option<f64>,
}

/// p99 has started to climb once it exceeds its low-load value by half:
/// past noise, and well before it doubles (one request waiting for
/// another, on a server with fewer slots than clients).
const CLIMB: f64 = 1.5;

/// The latency-knee rule a sweep applies (and a ramp, [`crate::ramp`], so
/// both answer alike): p99 past [`CLIMB`] × its low-load level.
/// `in_load_order`: the points are in order of the load offered.
pub(crate) fn latency_options(in_load_order: bool) -> LatencyKneeOptions {
    LatencyKneeOptions {
        factor: CLIMB,
        in_load_order,
        ..LatencyKneeOptions::default()
    }
}

/// Parameters along which throughput is expected to scale (a stream's
/// partitions: a consumer session and a channel each).
const CONCURRENCY: &[&str] = &["threads", "clients", "pipeline", "partitions"];

fn unit(parameter: &str) -> &str {
    match parameter {
        "threads" => "threads",
        "clients" => "clients per thread",
        "pipeline" => "requests in flight",
        other => other,
    }
}

/// A point of the sweep in words: "4 clients per thread", "data-size 256".
fn place(parameter: &str, value: f64) -> String {
    if CONCURRENCY.contains(&parameter) {
        format!("{} {}", text::count(value), unit(parameter))
    } else {
        format!("{parameter} {}", text::count(value))
    }
}

/// The analysis of a sweep over `parameter` and the findings in plain
/// words: for concurrency parameters where throughput saturates, what ran
/// out there and the USL fit; for every parameter where p99 climbs.
pub fn analyse(parameter: &str, samples: &[SweepSample]) -> (SweepAnalysis, Vec<String>) {
    let mut analysis = SweepAnalysis::default();
    let mut findings = Vec::new();
    let concurrency = CONCURRENCY.contains(&parameter);
    // The client's worst utilisation over the runs at one swept value.
    let utilisation = |value: f64| {
        samples
            .iter()
            .filter(|s| s.value == value)
            .filter_map(|s| s.client_utilisation)
            .reduce(f64::max)
    };
    if concurrency {
        let throughput: Vec<(f64, f64)> = samples.iter().map(|s| (s.value, s.throughput)).collect();
        let curve = average_repeats(&throughput);
        match marginal_gain_knee(&curve, &MarginalOptions::default()) {
            Ok(Some(knee)) => {
                let saturation = knee.saturation(&curve);
                findings.push(saturation.sentence(unit(parameter), "events/s"));
                let figures = |value: f64| {
                    let runs: Vec<ResourceFigures> = samples
                        .iter()
                        .filter(|s| s.value == value)
                        .filter_map(|s| s.resources)
                        .collect();
                    ResourceFigures::mean(&runs).map(|f| (value, f))
                };
                if let Some(at_knee) = figures(knee.prev_x) {
                    let past = figures(knee.x);
                    let b = Bottleneck::at_knee(
                        (at_knee.0, &at_knee.1),
                        past.as_ref().map(|(v, f)| (*v, f)),
                    );
                    let at = if b.at == knee.prev_x {
                        format!("the knee ({})", place(parameter, b.at))
                    } else {
                        format!("{}, just past the knee", place(parameter, b.at))
                    };
                    findings.push(b.sentence(&at));
                    analysis.bottleneck = Some(b);
                }
                let at_knee = [knee.prev_x, knee.x]
                    .into_iter()
                    .filter_map(utilisation)
                    .reduce(f64::max);
                match at_knee {
                    Some(u) if u >= crate::ceiling::AT_CEILING => findings.push(format!(
                        "this knee is the client's, not the server's: the client was at {:.0}% of its ceiling there \
                         (give it more --threads if cores are free, or another machine, and sweep again)",
                        100.0 * u
                    )),
                    Some(u) => findings.push(format!(
                        "this knee is not the client's: the client was at {:.0}% of its ceiling there",
                        100.0 * u
                    )),
                    None => {}
                }
                analysis.client_at_knee = at_knee;
                analysis.saturation = Some(saturation);
                analysis.knee = Some(knee);
            }
            Ok(None) => {
                if let Some((x, _)) = curve.last() {
                    let mut finding = format!(
                        "throughput still scales at {} (no knee within the measured range)",
                        place(parameter, *x)
                    );
                    // A client at its ceiling can still gain by batching
                    // more sessions per wake-up: that gain is the client's.
                    if let Some(u) = utilisation(*x).filter(|u| *u >= crate::ceiling::AT_CEILING) {
                        finding.push_str(&format!(
                            ", but the client was at {:.0}% of its ceiling there: the gain is the client's, not the server's",
                            100.0 * u
                        ));
                    }
                    findings.push(finding);
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
    let opts = latency_options(concurrency || parameter == "rate");
    if let Ok(Some(mut k)) = latency_knee(&latency, &opts) {
        let at = |throughput: f64, p99: f64| {
            by_load
                .iter()
                .position(|s| s.throughput == throughput && s.p99_ms == p99)
        };
        if let (Some(ok), Some(bad)) = (
            at(k.last_ok_throughput, k.last_ok_p99),
            at(k.throughput, k.p99),
        ) {
            k.last_ok_value = Some(by_load[ok].value);
            k.value = Some(by_load[bad].value);
            findings.push(latency_sentence(
                parameter,
                &by_load[..=ok],
                &by_load[ok + 1..],
            ));
        }
        analysis.latency_knee = Some(k);
    }
    (analysis, findings)
}

/// "p99 stays at 1.0 ms up to 4 clients per thread (3.99k events/s), 2.0
/// ms at 8, 4.0 ms at 16": the p99 of the points within the bound, up to
/// the last of them, then each point's past it.
fn latency_sentence(parameter: &str, within: &[&SweepSample], past: &[&SweepSample]) -> String {
    let p99s = within.iter().map(|s| s.p99_ms);
    let (lo, hi) = (
        text::ms(p99s.clone().fold(f64::INFINITY, f64::min)),
        text::ms(p99s.fold(0.0, f64::max)),
    );
    let level = if lo == hi {
        format!("at {lo}")
    } else {
        format!("between {} and {hi}", lo.trim_end_matches(" ms"))
    };
    let last = within.last().expect("the last point within the bound");
    let climb: Vec<String> = past
        .iter()
        .map(|s| format!("{} at {}", text::ms(s.p99_ms), text::count(s.value)))
        .collect();
    format!(
        "p99 stays {level} up to {} ({} events/s), {}",
        place(parameter, last.value),
        text::si(last.throughput),
        climb.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findmax::Sla;
    use crate::saturation::Resource;

    fn sample(value: f64, throughput: f64, p99_ms: f64) -> SweepSample {
        SweepSample {
            value,
            throughput,
            p99_ms,
            resources: None,
            client_utilisation: None,
        }
    }

    fn with_client_cpu(s: SweepSample, client_cpu_pct: f64) -> SweepSample {
        SweepSample {
            resources: Some(ResourceFigures {
                client_cpu_pct,
                client_cores: 1,
                host_cpu_pct: client_cpu_pct + 40.0,
                host_cpus: 2,
                server_cpu_pct: Some(35.0),
                server_host_cpu_pct: None,
                net_bytes_per_s: 2e6,
                disk_busy_pct: 0.0,
                disk_bytes_per_s: 0.0,
                server_disk_bytes_per_s: Some(0.0),
                server_host_disk_busy_pct: None,
            }),
            ..s
        }
    }

    /// The issue's sweep: a server that works on 4 requests at once, each
    /// taking 1 ms, driven by 1 to 16 clients.
    fn concurrency_four() -> Vec<SweepSample> {
        vec![
            sample(1.0, 1000.0, 1.0),
            sample(2.0, 2000.0, 1.0),
            sample(4.0, 3990.0, 1.04),
            sample(8.0, 4000.0, 2.1),
            sample(16.0, 4000.0, 4.0),
        ]
    }

    #[test]
    fn the_knee_is_the_last_point_that_scaled() {
        let (a, findings) = analyse("clients", &concurrency_four());
        assert_eq!(a.saturation_x(), Some(4.0));
        let s = a.saturation.as_ref().unwrap();
        assert_eq!(
            (s.throughput, s.beyond.as_slice()),
            (3990.0, &[8.0, 16.0][..])
        );
        // The marginal rule's own answer keeps its meaning in the file.
        assert_eq!(a.knee.as_ref().map(|k| (k.x, k.prev_x)), Some((8.0, 4.0)));
        assert_eq!(
            findings[0],
            "throughput saturates at 4 clients per thread (3.99k events/s); 8 and 16 add under 1%"
        );
        let k = a.latency_knee.as_ref().unwrap();
        assert_eq!((k.last_ok_value, k.value), (Some(4.0), Some(8.0)));
        assert_eq!(
            findings.last().unwrap(),
            "p99 stays at 1.0 ms up to 4 clients per thread (3.99k events/s), 2.1 ms at 8, \
             4.0 ms at 16"
        );
        assert!(a.bottleneck.is_none(), "no resource samples, no verdict");
    }

    #[test]
    fn the_knee_names_what_saturated_there() {
        let cpu = [30.0, 55.0, 97.0, 99.0, 99.0];
        let samples: Vec<SweepSample> = concurrency_four()
            .into_iter()
            .zip(cpu)
            .map(|(s, c)| with_client_cpu(s, c))
            .collect();
        let (a, findings) = analyse("clients", &samples);
        let b = a.bottleneck.as_ref().unwrap();
        assert_eq!((b.at, b.resource), (4.0, Some(Resource::ClientCpu)));
        assert_eq!(
            findings[1],
            "saturated at the knee (4 clients per thread): client CPU: loadcell used 97% of the 100% its \
             worker threads can use (server CPU 35%, host CPU 137% of 200%, network 2.0 MB/s)"
        );
        // Nothing near its threshold: said so, with the figures.
        let idle: Vec<SweepSample> = concurrency_four()
            .into_iter()
            .map(|s| with_client_cpu(s, 5.0))
            .collect();
        let (a, findings) = analyse("clients", &idle);
        assert_eq!(
            a.bottleneck.as_ref().map(|b| (b.at, b.resource)),
            Some((8.0, None))
        );
        assert!(findings[1].starts_with("nothing measured saturated at 8 clients per thread, just past the knee (client CPU 5% of 100%"));
        assert!(a.client_at_knee.is_none(), "no client ceiling recorded");
    }

    #[test]
    fn a_knee_where_the_client_was_at_its_ceiling_is_the_clients() {
        let at = |utilisation: [f64; 5]| {
            let samples: Vec<SweepSample> = concurrency_four()
                .into_iter()
                .zip(utilisation)
                .map(|(s, u)| SweepSample {
                    client_utilisation: Some(u),
                    ..s
                })
                .collect();
            analyse("clients", &samples)
        };
        let (a, findings) = at([0.3, 0.5, 0.96, 0.99, 0.99]);
        assert_eq!(a.client_at_knee, Some(0.99));
        assert!(findings.iter().any(|f| f.starts_with(
            "this knee is the client's, not the server's: the client was at 99% of its ceiling there"
        )), "{findings:?}");
        let (a, findings) = at([0.1, 0.2, 0.3, 0.3, 0.3]);
        assert_eq!(a.client_at_knee, Some(0.3));
        assert!(
            findings.iter().any(|f| f
                == "this knee is not the client's: the client was at 30% of its ceiling there"),
            "{findings:?}"
        );
        assert!(
            !findings
                .iter()
                .any(|f| f.contains("client's, not the server's")),
            "{findings:?}"
        );
    }

    #[test]
    fn a_curve_that_still_scales_on_a_client_at_its_ceiling_says_whose_gain_it_is() {
        let scaling = |last_utilisation: f64| {
            let samples: Vec<SweepSample> = [(64.0, 60e3, 0.1), (256.0, 240e3, 0.5)]
                .into_iter()
                .chain([(1024.0, 700e3, 1.0), (4096.0, 900e3, last_utilisation)])
                .map(|(value, throughput, u)| SweepSample {
                    client_utilisation: Some(u),
                    ..sample(value, throughput, 1.0)
                })
                .collect();
            analyse("clients", &samples).1
        };
        let findings = scaling(1.0);
        assert_eq!(
            findings[0],
            "throughput still scales at 4096 clients per thread (no knee within the measured range), \
             but the client was at 100% of its ceiling there: the gain is the client's, not the server's"
        );
        let findings = scaling(0.5);
        assert_eq!(
            findings[0],
            "throughput still scales at 4096 clients per thread (no knee within the measured range)"
        );
    }

    #[test]
    fn files_from_before_saturation_read_their_knee_as_the_last_point_that_scaled() {
        let old: SweepAnalysis = serde_json::from_str(
            r#"{"knee": {"x": 8.0, "throughput": 4000.0, "prev_x": 4.0, "prev_throughput": 3990.0,
                 "gain": 0.0025, "normalized_gain": 0.0025, "threshold": 0.1, "peak_x": 8.0,
                 "peak_throughput": 4000.0}}"#,
        )
        .unwrap();
        assert!(old.saturation.is_none());
        assert_eq!(old.saturation_x(), Some(4.0));
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
        assert_eq!(a.saturation_x(), Some(4.0));
        assert!(a.usl.is_some());
        assert_eq!(a.latency_knee.as_ref().map(|k| k.throughput), Some(4100.0));
        assert_eq!(findings.len(), 3);
        assert_eq!(
            findings[0],
            "throughput saturates at 4 threads (4k events/s); 8 and 16 add at most +2.5%"
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
                ci95: None,
                ci95_width: None,
                precision: Some(0.05),
                ended: Some(crate::findmax::FindmaxEnd::NothingPassed),
            }),
            ..SweepAnalysis::default()
        };
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "sla": {"percentile": 99.0, "bound_ms": 10.0, "min_achieved": 0.95},
                "best_rate": null, "lowest_failing_rate": 500.0, "probes": 3,
                "precision": 0.05, "ended": "nothing_passed"
            })
        );
        assert_eq!(
            serde_json::to_value(SweepAnalysis::default()).unwrap(),
            serde_json::json!({})
        );
    }
}
