//! Prometheus / OpenMetrics text exposition of a run in progress:
//! counters per operation kind, errors, and latency histograms with fixed
//! buckets derived from the HDR histograms.

use std::fmt::Write as _;

use loadcell_record::{Micros, OpStats, Stats};

/// Bucket bounds in seconds.
const BUCKETS: [f64; 17] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
];

/// Escapes a label value.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One unlabelled sample with its help and type lines.
fn metric(o: &mut String, kind: &str, name: &str, help: &str, value: impl std::fmt::Display) {
    let _ = writeln!(o, "# HELP {name} {help}");
    let _ = writeln!(o, "# TYPE {name} {kind}");
    let _ = writeln!(o, "{name} {value}");
}

fn histogram(o: &mut String, name: &str, labels: &str, h: &Micros) {
    let sep = if labels.is_empty() { "" } else { "," };
    for le in BUCKETS {
        let le_us = (le * 1e6) as u64;
        let count = if h.is_empty() {
            0
        } else {
            h.count_between(0, le_us)
        };
        let _ = writeln!(o, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {count}");
    }
    let _ = writeln!(o, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", h.len());
    let sum = if h.is_empty() {
        0.0
    } else {
        h.mean() * h.len() as f64 / 1e6
    };
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(o, "{name}_sum{braces} {sum}");
    let _ = writeln!(o, "{name}_count{braces} {}", h.len());
}

/// Renders cumulative `stats`; `ops[i]` names operation kind `i`. Connects
/// made inside events count as the kind `connect`, once there are some.
pub fn render(stats: &Stats, ops: &[&str], workload: &str, target: &str) -> String {
    let connects = (stats.connects.count > 0).then_some(("connect", &stats.connects));
    let kinds: Vec<(&str, &OpStats)> = ops
        .iter()
        .copied()
        .zip(&stats.ops)
        .chain(connects)
        .collect();
    let mut o = String::new();
    let _ = writeln!(o, "# HELP loadcell_info The run being measured.");
    let _ = writeln!(o, "# TYPE loadcell_info gauge");
    let _ = writeln!(
        o,
        "loadcell_info{{workload=\"{}\",target=\"{}\"}} 1",
        label(workload),
        label(target)
    );
    let counters: [(&str, &str, u64); 5] = [
        (
            "loadcell_events_total",
            "Events (transactions or requests) completed.",
            stats.events,
        ),
        (
            "loadcell_failed_events_total",
            "Events lost to broken connections.",
            stats.failed_events,
        ),
        (
            "loadcell_retries_total",
            "Events rolled back and run again after a retryable error.",
            stats.retries,
        ),
        (
            "loadcell_reconnects_total",
            "Successful reconnects.",
            stats.reconnects,
        ),
        (
            "loadcell_dropped_total",
            "Events due under the schedule but never sent.",
            stats.dropped,
        ),
    ];
    for (name, help, value) in counters {
        metric(&mut o, "counter", name, help, value);
    }
    let _ = writeln!(
        o,
        "# HELP loadcell_ops_total Operations completed, by kind."
    );
    let _ = writeln!(o, "# TYPE loadcell_ops_total counter");
    for (name, op) in &kinds {
        let _ = writeln!(
            o,
            "loadcell_ops_total{{op=\"{}\"}} {}",
            label(name),
            op.count
        );
    }
    let _ = writeln!(
        o,
        "# HELP loadcell_op_errors_total Failed operations, by kind."
    );
    let _ = writeln!(o, "# TYPE loadcell_op_errors_total counter");
    for (name, op) in &kinds {
        let _ = writeln!(
            o,
            "loadcell_op_errors_total{{op=\"{}\"}} {}",
            label(name),
            op.errors
        );
    }
    // Only workloads whose operations carry items (documents, points,
    // rows) have the family at all.
    if stats.items_total() > 0 {
        let _ = writeln!(
            o,
            "# HELP loadcell_op_items_total Items the operations carried (documents, points, rows), by kind."
        );
        let _ = writeln!(o, "# TYPE loadcell_op_items_total counter");
        for (name, op) in &kinds {
            if op.items > 0 {
                let _ = writeln!(
                    o,
                    "loadcell_op_items_total{{op=\"{}\"}} {}",
                    label(name),
                    op.items
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "# HELP loadcell_op_latency_seconds Time each operation took, by kind."
    );
    let _ = writeln!(o, "# TYPE loadcell_op_latency_seconds histogram");
    for (name, op) in &kinds {
        histogram(
            &mut o,
            "loadcell_op_latency_seconds",
            &format!("op=\"{}\"", label(name)),
            &op.latency,
        );
    }
    let _ = writeln!(
        o,
        "# HELP loadcell_response_time_seconds Event response time, from the intended start when rate-limited."
    );
    let _ = writeln!(o, "# TYPE loadcell_response_time_seconds histogram");
    histogram(
        &mut o,
        "loadcell_response_time_seconds",
        "",
        &stats.response,
    );
    let _ = writeln!(
        o,
        "# HELP loadcell_service_time_seconds Event service time, from the actual send."
    );
    let _ = writeln!(o, "# TYPE loadcell_service_time_seconds histogram");
    histogram(&mut o, "loadcell_service_time_seconds", "", &stats.service);
    o
}

/// What `loadcell watch` serves: the shards' measured work merged.
pub struct WatchFigures<'a> {
    pub workload: &'a str,
    pub target: &'a str,
    /// Shards by state (`reporting`, `ended`, `silent`, `never_reported`).
    pub shards: &'a [(&'a str, usize)],
    pub ops: u64,
    pub events: u64,
    pub errors: u64,
    /// Reports the shards sent that never arrived.
    pub lost_reports: u64,
    /// The measured response times of every shard, added.
    pub response: &'a Micros,
    /// The latest merged interval's throughput and p99, once there is one.
    pub latest: Option<(f64, f64)>,
}

/// Renders `loadcell watch`'s `/metrics`: the same response-time buckets
/// as a run's own endpoint, over every shard's intervals.
pub fn render_watch(f: &WatchFigures) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# HELP loadcell_watch_info The run being watched.");
    let _ = writeln!(o, "# TYPE loadcell_watch_info gauge");
    let _ = writeln!(
        o,
        "loadcell_watch_info{{workload=\"{}\",target=\"{}\"}} 1",
        label(f.workload),
        label(f.target)
    );
    let _ = writeln!(
        o,
        "# HELP loadcell_watch_shards The run's shards, by state."
    );
    let _ = writeln!(o, "# TYPE loadcell_watch_shards gauge");
    for (state, n) in f.shards {
        let _ = writeln!(o, "loadcell_watch_shards{{state=\"{state}\"}} {n}");
    }
    let counters = [
        (
            "loadcell_watch_ops_total",
            "Measured operations, every shard's.",
            f.ops,
        ),
        (
            "loadcell_watch_events_total",
            "Measured events, every shard's.",
            f.events,
        ),
        (
            "loadcell_watch_errors_total",
            "Measured failed operations, every shard's.",
            f.errors,
        ),
        (
            "loadcell_watch_lost_reports_total",
            "Reports shards sent that never arrived.",
            f.lost_reports,
        ),
    ];
    for (name, help, value) in counters {
        metric(&mut o, "counter", name, help, value);
    }
    if let Some((ops_per_sec, p99_ms)) = f.latest {
        let gauges = [
            (
                "loadcell_watch_interval_ops_per_second",
                "The latest merged interval's throughput.",
                ops_per_sec,
            ),
            (
                "loadcell_watch_interval_p99_seconds",
                "The latest merged interval's 99th percentile response time.",
                p99_ms / 1000.0,
            ),
        ];
        for (name, help, value) in gauges {
            metric(&mut o, "gauge", name, help, value);
        }
    }
    let _ = writeln!(
        o,
        "# HELP loadcell_watch_response_time_seconds Measured response time, every shard's histograms added."
    );
    let _ = writeln!(o, "# TYPE loadcell_watch_response_time_seconds histogram");
    histogram(
        &mut o,
        "loadcell_watch_response_time_seconds",
        "",
        f.response,
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let mut st = Stats::new(2);
        st.record_op(0, Duration::from_micros(80), true);
        st.record_op(0, Duration::from_millis(3), false);
        st.record_event(Duration::from_millis(3), Duration::from_millis(3), None);
        let text = render(&st, &["get", "set"], "kv", "redis://h:1");
        assert!(text.contains("loadcell_ops_total{op=\"get\"} 2"), "{text}");
        assert!(
            text.contains("loadcell_op_errors_total{op=\"get\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("loadcell_op_latency_seconds_bucket{op=\"get\",le=\"0.0001\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("loadcell_op_latency_seconds_bucket{op=\"get\",le=\"0.005\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("loadcell_op_latency_seconds_bucket{op=\"get\",le=\"+Inf\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("loadcell_response_time_seconds_count 1"),
            "{text}"
        );
        assert!(text.contains("loadcell_events_total 1"), "{text}");
        assert!(
            text.contains("loadcell_op_latency_seconds_count{op=\"set\"} 0"),
            "{text}"
        );
        assert!(!text.contains("items"), "{text}");
    }

    #[test]
    fn items_are_counted_for_the_kinds_that_carry_them() {
        let mut st = Stats::new(2);
        st.record_op(1, Duration::from_millis(2), true);
        st.add_items(1, 500);
        let text = render(&st, &["get", "bulk"], "bulk", "sim://");
        assert!(
            text.contains("# TYPE loadcell_op_items_total counter\nloadcell_op_items_total{op=\"bulk\"} 500\n"),
            "{text}"
        );
        assert!(!text.contains("op_items_total{op=\"get\"}"), "{text}");
    }

    #[test]
    fn connects_made_in_events_are_a_kind_of_their_own() {
        let mut st = Stats::new(1);
        assert!(!render(&st, &["get"], "kv", "sim://").contains("op=\"connect\""));
        st.record_connect(Duration::from_micros(300), true);
        st.record_connect(Duration::from_micros(300), false);
        let text = render(&st, &["get"], "kv", "sim://");
        for line in [
            "loadcell_ops_total{op=\"connect\"} 2",
            "loadcell_op_errors_total{op=\"connect\"} 1",
            "loadcell_op_latency_seconds_bucket{op=\"connect\",le=\"0.0005\"} 2",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
    }
}
