//! Synthetic, deterministic results for tests and demonstrations of the
//! report views: a sysbench-like run, a thread sweep with a knee, and a
//! findmax search. Numbers follow Little's law (latency = sessions /
//! throughput) so the charts look like real ones.

use std::collections::BTreeMap;
use std::time::Duration;

use loadcell_analysis::findmax::{FindmaxEnd, FindmaxOutcome, Sla};
use loadcell_analysis::sweep::{analyse, SweepAnalysis, SweepSample};
use loadcell_record::env::{CpuTime, HostInfo};
use loadcell_record::hist::{self, Micros};
use loadcell_record::resources::ResourceSample;
use loadcell_record::result::{
    Environment, Histograms, Interval, IntervalLatency, LoopMode, OpSummary, QueryCounts, Recovery,
    Resources, RunConfig, RunResult, RunStatus, Schedule, ServerDescription, StageSummary,
    StageTarget, StopReason, Summary, SCHEMA_ID,
};
use loadcell_record::sweep::{PointStats, SweepKind, SweepPoint, SweepResult, SWEEP_SCHEMA_ID};
use loadcell_record::LatencySummary;

/// A histogram of `n` latencies around `median_ms` with an exponential
/// tail, the same for the same arguments.
pub fn histogram(median_ms: f64, n: usize) -> Micros {
    let mut h = hist::new_histogram();
    for i in 0..n {
        let u = (i as f64 + 0.5) / n as f64;
        // Shifted exponential: the median lands on `median_ms`.
        let ms = median_ms * (0.5 + 0.5 * (-(1.0 - u).ln()) / std::f64::consts::LN_2);
        hist::record(&mut h, Duration::from_secs_f64(ms / 1000.0));
    }
    h
}

/// One closed-loop `oltp_read_write` run on MySQL at `tps` transactions
/// per second with `threads` sessions: 10 one-second intervals, resource
/// samples with a server process, 20 queries per transaction.
pub fn run(threads: usize, tps: f64) -> RunResult {
    let secs = 10usize;
    let median_ms = 1000.0 * threads as f64 / tps.max(1e-9);
    let response = histogram(median_ms, 2000);
    let latency = LatencySummary::of(&response);
    let events = (tps * secs as f64).round() as u64;
    let ops = events * 20;
    let intervals: Vec<Interval> = (1..=secs)
        .map(|t| {
            // A gentle wobble so lines are not flat.
            let f = 1.0 + 0.04 * ((t as f64) * 1.7).sin();
            let h = histogram(median_ms / f, 200);
            let l = LatencySummary::of(&h);
            Interval {
                t_s: t as f64,
                duration_s: 1.0,
                ops: (ops as f64 / secs as f64 * f) as u64,
                ops_per_sec: ops as f64 / secs as f64 * f,
                events: (tps * f) as u64,
                events_per_sec: tps * f,
                errors: 0,
                retries: 0,
                reconnects: 0,
                items: None,
                items_per_sec: None,
                counters: None,
                latency_ms: IntervalLatency {
                    p50: l.p50,
                    p95: l.p95,
                    p99: l.p99,
                    max: l.max,
                },
                connections_held: None,
                gauges: None,
                histogram: hist::encode(&h),
                merged: None,
            }
        })
        .collect();
    let samples: Vec<ResourceSample> = (0..=secs)
        .map(|t| ResourceSample {
            t_s: t as f64,
            client_cpu_pct: 20.0 + threads as f64 * 2.0,
            client_rss_bytes: 40 << 20,
            host_cpu_pct: 150.0 + t as f64,
            host_cpus: 4,
            load_1m: 2.5,
            net_rx_bytes_per_s: 3e6,
            net_tx_bytes_per_s: 1e6,
            disk_read_bytes_per_s: 0.0,
            disk_write_bytes_per_s: 5e5,
            disk_busy_pct: 12.0,
            server_cpu_pct: Some(90.0 + t as f64),
            server_rss_bytes: Some(600 << 20),
            server_disk_bytes_per_s: Some(4e5),
            server: BTreeMap::from([("threads_running".to_string(), threads as f64)]),
            remote: Vec::new(),
        })
        .collect();
    let op_summary = |category: &str, count: u64| OpSummary {
        category: category.to_string(),
        count,
        errors: 0,
        items: None,
        items_per_sec: None,
        latency_ms: LatencySummary::of(&histogram(median_ms / 20.0, 100)),
    };
    let ops_map = BTreeMap::from([
        ("point_select".to_string(), op_summary("read", events * 10)),
        ("index_update".to_string(), op_summary("write", events)),
        ("commit".to_string(), op_summary("other", events)),
    ]);
    RunResult {
        schema: SCHEMA_ID.to_string(),
        loadcell_version: "0.1.0".to_string(),
        status: RunStatus::Complete,
        stop_reason: StopReason::Completed,
        error: None,
        started_at: "2025-01-01T00:00:00Z".to_string(),
        ended_at: "2025-01-01T00:00:10Z".to_string(),
        command: [
            "loadcell",
            "run",
            "oltp_read_write",
            "--target",
            "mysql://root:***@127.0.0.1:3306/sbtest",
            "--threads",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([threads.to_string()])
        .collect(),
        labels: BTreeMap::new(),
        config: RunConfig {
            workload: "oltp_read_write".to_string(),
            target: "mysql://root:***@127.0.0.1:3306/sbtest".to_string(),
            driver: "mysql".to_string(),
            threads,
            clients_per_thread: 1,
            worker_threads: Some(threads.min(2)),
            time_s: Some(secs as f64),
            events: None,
            warmup_s: 2.0,
            rate: None,
            arrival: None,
            rate_tick_s: None,
            answers_timed_on_receipt: false,
            report_interval_s: 1.0,
            connect_timeout_s: 5.0,
            connection_policy: Some("persistent".to_string()),
            seed: 42,
            workload_options: BTreeMap::from([
                ("tables".to_string(), serde_json::json!(4)),
                ("table_size".to_string(), serde_json::json!(100000)),
                ("rand_type".to_string(), serde_json::json!("special")),
            ]),
            shard: None,
            start_at: None,
        },
        environment: Environment {
            host: HostInfo {
                hostname: "bench-1".to_string(),
                os: "Debian GNU/Linux 12 (bookworm)".to_string(),
                kernel: "6.1.0".to_string(),
                arch: "x86_64".to_string(),
                cpu_model: "Example CPU @ 3.0GHz".to_string(),
                cpus: 4,
                memory_bytes: 16 << 30,
            },
            server: Some(ServerDescription {
                product: "MariaDB".to_string(),
                version: "10.11.6".to_string(),
                extras: Default::default(),
            }),
        },
        summary: Summary {
            duration_s: secs as f64,
            ops,
            errors: 0,
            ops_per_sec: ops as f64 / secs as f64,
            events,
            events_per_sec: tps,
            txn_per_sec: Some(tps),
            retries: 0,
            reconnects: 0,
            failed_events: 0,
            latency_ms: latency,
            service_time_ms: latency,
            schedule: Schedule {
                mode: LoopMode::ClosedLoop,
                target_rate: None,
                achieved_rate: tps,
                late: 0,
                dropped: 0,
                lag_ms: None,
            },
            queries: Some(QueryCounts {
                read: events * 14,
                write: events * 4,
                other: events * 2,
                total: ops,
            }),
            hits: None,
            misses: None,
            items: None,
            items_per_sec: None,
            connects: None,
            connects_per_sec: None,
            counters: None,
            client_cpu: CpuTime {
                user_s: 1.5,
                sys_s: 0.5,
            },
            groups: None,
            bytes: None,
            bytes_per_sec: None,
            stages: None,
            steady_state: None,
        },
        ops: ops_map,
        intervals,
        histograms: Histograms {
            encoding: hist::ENCODING.to_string(),
            unit: "us".to_string(),
            response: hist::encode(&response),
            service: hist::encode(&response),
            lag: hist::encode(&hist::new_histogram()),
            ops: BTreeMap::new(),
        },
        warnings: Vec::new(),
        error_samples: Vec::new(),
        resources: Resources {
            server_pid: Some(1234),
            bottleneck: Some("server CPU: the server process used 95% of a core".to_string()),
            samples,
            server_metrics: Vec::new(),
        },
        details: Default::default(),
        verification: None,
        hdr_log: None,
        exports: Vec::new(),
        gates: Vec::new(),
        merge: None,
        client: None,
    }
}

/// An open-loop key-value run under `--stages 3s:2000,0s:8000,2s:8000,
/// 0s:2000,8s:2000` against a server that takes 4,000/s: a ramp from 0,
/// a spike, then a hold while the spike's backlog (8,000 events) drains at
/// the 2,000/s spare, with p99 high until 10 s in. One-second intervals.
pub fn staged() -> RunResult {
    let mut r = run(4, 2000.0);
    let template = r.intervals[0].clone();
    // Each second's mean target on the ramp; the server's capacity while
    // the backlog lasts.
    let rate = |t: usize| match t {
        1..=3 => 2000.0 * (2 * t - 1) as f64 / 6.0,
        4..=9 => 4000.0,
        _ => 2000.0,
    };
    r.intervals = (1..=13)
        .map(|t| Interval {
            t_s: t as f64,
            ops: rate(t).round() as u64,
            ops_per_sec: rate(t),
            events: rate(t).round() as u64,
            events_per_sec: rate(t),
            latency_ms: IntervalLatency {
                p99: if (4..=9).contains(&t) { 400.0 } else { 1.0 },
                ..template.latency_ms
            },
            ..template.clone()
        })
        .collect();
    let latency = |p50: f64, p99: f64| LatencySummary {
        p50,
        p99,
        ..r.summary.latency_ms
    };
    let stage = |start_s, duration_s, (from, to), events: u64, p50, p99| StageSummary {
        start_s,
        duration_s,
        target_of: StageTarget::Rate,
        target_start: from,
        target_end: to,
        events,
        ops_per_sec: events as f64 / duration_s,
        events_per_sec: events as f64 / duration_s,
        errors: 0,
        latency_ms: latency(p50, p99),
        service_time_ms: latency(0.4, 0.8),
        recovery: None,
        knee: None,
    };
    let mut stages = vec![
        stage(0.0, 3.0, (0.0, 2000.0), 3000, 0.5, 1.0),
        stage(3.0, 2.0, (8000.0, 8000.0), 8000, 150.0, 400.0),
        stage(5.0, 8.0, (2000.0, 2000.0), 24000, 2.0, 350.0),
    ];
    stages[1].recovery = Some(Recovery::after(5.0, 1.0, &r.intervals));
    let (events, secs) = (35_000, 13.0);
    let s = &mut r.summary;
    (s.duration_s, s.events, s.ops) = (secs, events, events);
    (s.events_per_sec, s.ops_per_sec) = (events as f64 / secs, events as f64 / secs);
    (s.txn_per_sec, s.queries) = (None, None);
    // The schedule's target is the stages' mean.
    s.schedule.mode = LoopMode::OpenLoop;
    s.schedule.target_rate = Some(events as f64 / secs);
    s.stages = Some(stages);
    r.config.workload = "kv".into();
    r.config.time_s = Some(secs);
    r.config.rate = r.summary.schedule.target_rate;
    r
}

/// Throughput that scales linearly to 16 sessions and then flattens.
pub fn knee_tps(threads: f64) -> f64 {
    let linear = 500.0 * threads;
    if threads <= 16.0 {
        linear
    } else {
        8000.0 + 200.0 * (threads - 16.0).sqrt()
    }
}

/// A `threads` sweep over `values` with `repeat` runs per point, and the
/// analysis and findings `loadcell_analysis::sweep::analyse` draws from
/// them (over 1..=64 threads: saturated at 32, a latency knee, a USL fit).
pub fn sweep(values: &[f64], repeat: usize) -> SweepResult {
    let points: Vec<SweepPoint> = values
        .iter()
        .map(|&v| {
            let runs: Vec<RunResult> = (0..repeat)
                .map(|k| run(v as usize, knee_tps(v) * (1.0 + 0.02 * k as f64)))
                .collect();
            let (mean, spread) = PointStats::mean_and_spread(&runs);
            SweepPoint {
                value: v,
                mean,
                spread,
                passed: None,
                verdicts: Vec::new(),
                runs,
            }
        })
        .collect();
    let samples: Vec<SweepSample> = points.iter().map(SweepPoint::sample).collect();
    let (analysis, findings) = analyse("threads", &samples);
    SweepResult {
        schema: SWEEP_SCHEMA_ID.to_string(),
        loadcell_version: "0.1.0".to_string(),
        kind: SweepKind::Sweep,
        started_at: "2025-01-01T00:00:00Z".to_string(),
        ended_at: "2025-01-01T01:00:00Z".to_string(),
        command: [
            "loadcell",
            "sweep",
            "oltp_read_write",
            "--threads",
            "1,2,4,8,16,32,64",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        labels: BTreeMap::from([("system".to_string(), "mariadb".to_string())]),
        parameter: "threads".to_string(),
        repeat,
        points,
        analysis,
        findings,
        complete: true,
        error: None,
        gates: Vec::new(),
    }
}

/// A findmax search over target rates: probes up to 4000/s pass.
pub fn findmax(rates: &[f64]) -> SweepResult {
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    let points: Vec<SweepPoint> = sorted
        .iter()
        .map(|&rate| {
            let mut r = run(8, rate.min(4500.0));
            r.config.rate = Some(rate);
            r.summary.schedule.mode = LoopMode::OpenLoop;
            r.summary.schedule.target_rate = Some(rate);
            // What fell due in its 10 s beyond what the server took.
            r.summary.schedule.dropped = ((rate - rate.min(4500.0)) * 10.0).round() as u64;
            let runs = vec![r];
            let (mean, spread) = PointStats::mean_and_spread(&runs);
            SweepPoint {
                value: rate,
                mean,
                spread,
                passed: Some(rate <= 4000.0),
                verdicts: vec![if rate <= 4000.0 { "pass" } else { "fail" }.to_string()],
                runs,
            }
        })
        .collect();
    SweepResult {
        kind: SweepKind::Findmax,
        parameter: "rate".to_string(),
        repeat: 1,
        points,
        analysis: SweepAnalysis {
            findmax: Some(FindmaxOutcome {
                sla: Sla {
                    percentile: 99.0,
                    bound_ms: 10.0,
                    min_achieved: 0.95,
                },
                best_rate: Some(4000.0),
                lowest_failing_rate: Some(5000.0),
                probes: rates.len(),
                ci95: Some([4010.0, 4990.0]),
                ci95_width: Some(0.245),
                precision: Some(0.05),
                ended: Some(FindmaxEnd::OutOfProbes),
            }),
            ..SweepAnalysis::default()
        },
        findings: vec!["the highest rate meeting p99 ≤ 10 ms is 4000/s".to_string()],
        ..sweep(&[], 1)
    }
}

/// A plan for 100,000 ops/s with 20% headroom and p99 <= 2 ms over two
/// instance types: `big_name` measured at one node (linear), `small` at
/// 1, 2 and 4 nodes (fitted).
pub fn plan_view(big_name: &str) -> crate::plan::PlanView {
    use crate::plan::{InstanceFacts, PlanView};
    use loadcell_analysis::plan::{
        plan, InstanceType, NodePoint, OperatingPoint, PlanTarget, Scaling,
    };
    let pt = |nodes: f64, throughput: f64| NodePoint {
        nodes,
        throughput,
        p99_ms: Some(1.5),
    };
    let types = vec![
        InstanceType {
            name: big_name.into(),
            price_per_hour: 1.0,
            points: vec![pt(1.0, 40_000.0)],
            scaling: Scaling::Linear,
        },
        InstanceType {
            name: "small".into(),
            price_per_hour: 0.2,
            points: [1.0, 2.0, 4.0]
                .iter()
                .map(|&n| pt(n, 10_000.0 * n))
                .collect(),
            scaling: Scaling::Fit,
        },
    ];
    let target = PlanTarget {
        throughput: 100_000.0,
        max_p99_ms: Some(2.0),
        headroom: 0.2,
    };
    let plan = plan(&types, &target).unwrap();
    let instances = types
        .iter()
        .map(|t| InstanceFacts {
            name: t.name.clone(),
            vcpus: 2,
            memory_gib: 8.0,
            measured: t
                .points
                .iter()
                .map(|&point| OperatingPoint {
                    point,
                    setting: "threads=4".into(),
                    repeats: 1,
                    settings: 1,
                })
                .collect(),
            files: vec!["r.json".into()],
        })
        .collect();
    PlanView {
        unit: "ops/s".into(),
        plan,
        instances,
        gates: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use loadcell_record::details::{HeldConnections, StreamCompleteness};
    use loadcell_record::result::RunResult;
    use serde_json::json;

    /// A result as files wrote it before the family sections moved out of
    /// the shared structs: the same keys at the same places.
    #[test]
    fn family_sections_keep_their_keys_and_older_files_load() {
        let mut file = serde_json::to_value(super::run(4, 100.0)).unwrap();
        file["connections"] = json!({"requested": 10, "held_max": 9, "held_at_end": 8});
        file["environment"]["server"]["cluster"] = json!("logs-eu");
        file["verification"] = json!({
            "expected": 5, "found": 4, "ok": false, "how": "acknowledged",
            "stream": {"produced": 5, "consumed": 4, "missing": 1, "lag_at_end": 0,
                       "duplicated": 0, "gaps": 0, "reorders": 0, "untimed": 0}
        });
        let r: RunResult = serde_json::from_value(file.clone()).unwrap();
        let held = r.details.get::<HeldConnections>().unwrap();
        assert_eq!(
            (held.requested, held.held_max, held.held_at_end),
            (10, 9, 8)
        );
        let server = r.environment.server.as_ref().unwrap();
        assert_eq!(server.to_string(), "MariaDB 10.11.6, cluster logs-eu");
        let v = r.verification.as_ref().unwrap();
        let rows = v.details.get::<StreamCompleteness>().unwrap();
        assert_eq!((rows.missing, rows.redelivered), (1, 0));
        // Written again, the file is what it was, bar the defaults filled in.
        let mut again = serde_json::to_value(&r).unwrap();
        again["verification"]["stream"]
            .as_object_mut()
            .unwrap()
            .remove("redelivered");
        assert_eq!(again, file);
    }
}
