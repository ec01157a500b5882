//! The human summary printed at the end of a run: sysbench's layout
//! (queries read/write/other/total, transactions, ignored errors,
//! reconnects, latency min/avg/max/p95/sum), then the schedule, a
//! percentile table per operation kind, and the client's CPU.

use std::fmt::Write as _;

use loadcell_core::words::counted;
use loadcell_record::details::{
    DiskRun, HeldConnections, IopsExpectation, MqttDelivery, StreamCompleteness, SubscriberDelivery,
};
use loadcell_record::result::{
    GateVerdict, GroupSummary, LoopMode, RunResult, RunStatus, Verification,
};

use crate::table::grouped;

/// How many connections the target held, and where it stopped holding more.
fn held_connections(w: &mut String, held: &HeldConnections) {
    let _ = writeln!(
        w,
        "    {:<37}{} at most, {} at the end, of {} asked",
        "connections held:", held.held_max, held.held_at_end, held.requested
    );
    let Some(f) = &held.first_failure else {
        return;
    };
    let whose = if f.client_limit {
        "the client's own limit, not the target's, stopped it"
    } else {
        "the target refused, dropped or timed out"
    };
    let _ = writeln!(
        w,
        "    {:<37}at {:.2}s with {} held ({whose}): {}",
        "first failure:", f.t_s, f.held, f.error
    );
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// Renders the summary. `op_order` lists operation kinds in the
/// workload's own order, and kinds it does not name (`connect`, timed by
/// the engine) follow; kinds that never ran are left out.
/// The session groups of a run of several, each with its own schedule.
fn groups(w: &mut String, groups: &[GroupSummary]) {
    let _ = writeln!(
        w,
        "Session groups (each on its own schedule; latency from its own intended starts, service time from the actual send) (ms):"
    );
    let _ = writeln!(
        w,
        "    {:<10} {:>8} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9} {:>6} {:>6}",
        "group",
        "sessions",
        "target/s",
        "events/s",
        "p50",
        "p90",
        "p99",
        "svc p90",
        "svc p99",
        "late",
        "unsent"
    );
    for g in groups {
        let (l, svc) = (&g.latency_ms, &g.service_time_ms);
        let target = match g.schedule.target_rate {
            Some(rate) => format!("{rate:.1}"),
            None => "closed".to_string(),
        };
        let _ = writeln!(
            w,
            "    {:<10} {:>8} {:>10} {:>10.1} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>9.2} {:>6} {:>6}",
            g.name,
            g.sessions,
            target,
            g.events_per_sec,
            l.p50,
            l.p90,
            l.p99,
            svc.p90,
            svc.p99,
            g.schedule.late,
            g.schedule.dropped
        );
    }
}

pub fn summary(r: &RunResult, op_order: &[&str]) -> String {
    let s = &r.summary;
    let secs = s.duration_s;
    let mut o = String::new();
    let w = &mut o;
    if r.status == RunStatus::Partial {
        let _ = writeln!(
            w,
            "NOTE: partial run ({}){}",
            serde_plain(&r.stop_reason),
            r.error
                .as_ref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        );
        let _ = writeln!(w);
    }
    let title = if s.queries.is_some() {
        "SQL statistics:"
    } else {
        "Operations:"
    };
    let _ = writeln!(w, "{title}");
    if let Some(q) = s.queries {
        let _ = writeln!(w, "    queries performed:");
        for (name, n) in [
            ("read", q.read),
            ("write", q.write),
            ("other", q.other),
            ("total", q.total),
        ] {
            let _ = writeln!(w, "        {:<33}{n}", format!("{name}:"));
        }
    }
    let events_label = if s.txn_per_sec.is_some() {
        "transactions:"
    } else {
        "events:"
    };
    let ops_label = if s.queries.is_some() {
        "queries:"
    } else {
        "operations:"
    };
    for (label, n) in [
        (events_label, s.events),
        (ops_label, s.ops),
        ("ignored errors:", s.retries),
        ("reconnects:", s.reconnects),
    ] {
        let _ = writeln!(w, "    {label:<37}{n:<6} ({:.2} per sec.)", rate(n, secs));
    }
    if let Some(connects) = s.connects {
        let _ = writeln!(
            w,
            "    {:<37}{connects:<6} ({:.2} per sec.)",
            "new connections:",
            rate(connects, secs)
        );
    }
    if let Some(items) = s.items {
        let _ = writeln!(
            w,
            "    {:<37}{items:<6} ({:.2} per sec.)",
            "items:",
            rate(items, secs)
        );
    }
    if let Some(bytes_per_sec) = s.bytes_per_sec {
        let _ = writeln!(
            w,
            "    {:<37}{:.2} MiB/s ({} bytes)",
            "bandwidth:",
            bytes_per_sec / (1024.0 * 1024.0),
            s.bytes.unwrap_or(0)
        );
    }
    if let Some(counters) = &s.counters {
        let counts: Vec<String> = counters
            .iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        let _ = writeln!(w, "    {:<37}{}", "counts:", counts.join(", "));
    }
    // No reads counted (results of older versions say 0 and 0): no ratio.
    let reads = s
        .hits
        .zip(s.misses)
        .filter(|&(hits, misses)| hits + misses > 0);
    if let Some((hits, misses)) = reads {
        let ratio = 100.0 * hits as f64 / (hits + misses) as f64;
        let _ = writeln!(
            w,
            "    {:<37}{}, {} ({ratio:.1}% hit)",
            "reads:",
            counted(hits, "hit"),
            counted(misses, "miss")
        );
    }
    if s.errors > s.retries || s.failed_events > 0 {
        let _ = writeln!(
            w,
            "    {:<37}{:<6} ({} lost to broken connections)",
            "failed operations:",
            s.errors,
            loadcell_core::words::counted(s.failed_events, "event")
        );
    }
    let held = r.details.get::<HeldConnections>();
    if let Some(held) = &held {
        held_connections(w, held);
    }
    let _ = writeln!(w);
    let _ = writeln!(w, "General statistics:");
    let _ = writeln!(w, "    {:<37}{:.4}s", "total time:", secs);
    let _ = writeln!(w, "    {:<37}{}", "total number of events:", s.events);
    let _ = writeln!(w);
    let l = &s.latency_ms;
    let _ = writeln!(w, "Latency (ms):");
    let _ = writeln!(w, "         min: {:>39.2}", l.min);
    let _ = writeln!(w, "         avg: {:>39.2}", l.mean);
    let _ = writeln!(w, "         max: {:>39.2}", l.max);
    let _ = writeln!(w, "        95th percentile: {:>27.2}", l.p95);
    let _ = writeln!(w, "        99th percentile: {:>27.2}", l.p99);
    let _ = writeln!(w, "         sum: {:>39.2}", l.mean * s.events as f64);
    let _ = writeln!(w);

    let sched = &s.schedule;
    let keepalive_s = r.config.workload_options.get("keepalive_interval_s");
    match sched.mode {
        _ if s.groups.is_some() => groups(w, s.groups.as_deref().unwrap_or_default()),
        LoopMode::ClosedLoop if held.is_some() => {
            let _ = writeln!(
                w,
                "Schedule: connections held, each sending a request every {}s from its connect.",
                keepalive_s.and_then(|v| v.as_f64()).unwrap_or_default()
            );
        }
        LoopMode::ClosedLoop => {
            let _ = writeln!(
                w,
                "Schedule: closed loop (each session sends its next event when the last one returns), so latency is service time."
            );
        }
        LoopMode::OpenLoop => {
            let _ = writeln!(
                w,
                "Schedule: open loop at {:.1} events/s ({}); achieved {:.1}/s; late starts {}, never sent {}",
                sched.target_rate.unwrap_or(0.0),
                match r.config.rate_tick_s {
                    Some(tick) => format!(
                        "{}, sent in bursts every {} ms{}",
                        r.config.arrival.as_deref().unwrap_or("uniform"),
                        (tick * 1e6).round() / 1e3,
                        if r.config.answers_timed_on_receipt {
                            ", answers read at the bursts and timed on receipt by the kernel"
                        } else {
                            ""
                        }
                    ),
                    None => r.config.arrival.as_deref().unwrap_or("uniform").to_string(),
                },
                sched.achieved_rate,
                sched.late,
                sched.dropped
            );
            let _ = writeln!(
                w,
                "    latency above counts from each event's intended start; service time (from the actual send): p50 {:.2} p95 {:.2} p99 {:.2} max {:.2} ms",
                s.service_time_ms.p50, s.service_time_ms.p95, s.service_time_ms.p99, s.service_time_ms.max
            );
            if let Some(lag) = &sched.lag_ms {
                let _ = writeln!(
                    w,
                    "    schedule lag: p50 {:.2} p99 {:.2} max {:.2} ms",
                    lag.p50, lag.p99, lag.max
                );
            }
        }
    }
    if let Some(steady) = &s.steady_state {
        let _ = writeln!(w, "{}", steady_state_line(steady));
    }
    if let Some(stages) = &s.stages {
        stages_table(w, stages);
        for st in stages {
            if let Some(knee) = &st.knee {
                let _ = writeln!(w, "    {}", ramp_knee_line(st, knee));
            }
        }
    }
    let _ = writeln!(w);

    let unnamed = r.ops.keys().map(String::as_str);
    let rows: Vec<_> = op_order
        .iter()
        .copied()
        .chain(unnamed.filter(|name| !op_order.contains(name)))
        .filter_map(|name| r.ops.get(name).map(|op| (name, op)))
        .filter(|(_, op)| op.count > 0)
        .collect();
    if !rows.is_empty() {
        let _ = writeln!(w, "Per operation (ms):");
        let _ = writeln!(
            w,
            "    {:<18} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "operation", "count", "errors", "avg", "p50", "p95", "p99", "p99.9", "max"
        );
        for (name, op) in rows {
            let l = &op.latency_ms;
            let _ = writeln!(
                w,
                "    {:<18} {:>10} {:>7} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
                name, op.count, op.errors, l.mean, l.p50, l.p95, l.p99, l.p999, l.max
            );
        }
        let _ = writeln!(w);
    }
    let cpu = s.client_cpu;
    let per_event_us = if s.events > 0 {
        (cpu.user_s + cpu.sys_s) * 1e6 / s.events as f64
    } else {
        0.0
    };
    let _ = writeln!(
        w,
        "Client CPU: {:.2}s user, {:.2}s sys ({per_event_us:.1} µs per event)",
        cpu.user_s, cpu.sys_s
    );
    if let Some(c) = &r.client {
        let mark = if c.at_ceiling { "WARNING: " } else { "" };
        let _ = writeln!(w, "Client ceiling: {mark}{}", c.sentence);
    }
    if let Some(server) = &r.environment.server {
        // A request the run's options did not ask for, said where it shows.
        let probe = r.config.workload_options.get("server_probe");
        match probe.and_then(|p| p.as_str()) {
            Some(probe) => {
                let _ = writeln!(w, "Target: {} ({server}, from a {probe})", r.config.target);
            }
            None => {
                let _ = writeln!(w, "Target: {} ({server})", r.config.target);
            }
        }
    }
    if let Some(e) = r.details.get::<DiskRun>().and_then(|d| d.expect_iops) {
        let _ = writeln!(w, "{}", expectation(&e));
    }
    if let Some(v) = &r.verification {
        let _ = writeln!(w, "{}", verification(v));
        if let Some(s) = v.details.get::<StreamCompleteness>() {
            let _ = writeln!(w, "{}", stream_rows(&s));
        }
        if let Some(d) = v.details.get::<MqttDelivery>() {
            let _ = write!(w, "{}", mqtt_delivery(&d));
        }
    }
    if !r.gates.is_empty() {
        let _ = writeln!(w, "{}", gates(&r.gates));
    }
    for sample in &r.error_samples {
        let _ = writeln!(
            w,
            "Error ({}, {}x): {}",
            sample.class, sample.count, sample.message
        );
    }
    for host in loadcell_record::resources::remote_means(&r.resources.samples) {
        let _ = writeln!(w, "{}", remote_host(&host));
    }
    for source in r.resources.server_metrics.iter().filter(|s| s.failures > 0) {
        let _ = writeln!(
            w,
            "WARNING: {} of {} scrapes of {} failed; the last: {}",
            source.failures,
            source.scrapes,
            source.url,
            source.last_error.as_deref().unwrap_or("")
        );
    }
    for e in &r.exports {
        let _ = writeln!(w, "{}", export(e));
    }
    if let Some(b) = &r.resources.bottleneck {
        let _ = writeln!(w, "Bottleneck hint: {b}");
    }
    for warning in &r.warnings {
        let _ = writeln!(w, "WARNING: {warning}");
    }
    o
}

/// A scraped host's means, e.g. "Server host db1:9100 (scraped): CPU
/// 35% of 2 cores, load 1.20, memory 3.1 GB in use, ...".
fn remote_host(r: &loadcell_record::remote::RemoteSample) -> String {
    let mut parts = Vec::new();
    if let (Some(cpu), Some(cpus)) = (r.cpu_pct, r.cpus) {
        parts.push(format!(
            "CPU {:.0}% of {}",
            cpu / cpus.max(1) as f64,
            counted(cpus as u64, "core")
        ));
    }
    if let Some(load) = r.load_1m {
        parts.push(format!("load {load:.2}"));
    }
    if let Some(m) = r.memory_used_bytes {
        parts.push(format!("memory {:.1} GB in use", m / 1e9));
    }
    if let Some(d) = r.disk_busy_pct {
        parts.push(format!("disk busy {d:.0}%"));
    }
    if let (Some(rx), Some(tx)) = (r.net_rx_bytes_per_s, r.net_tx_bytes_per_s) {
        parts.push(format!("network {:.1} MB/s", (rx + tx) / 1e6));
    }
    for (name, value) in &r.server {
        parts.push(format!("{name} {value:.1}"));
    }
    format!("Server host {} (scraped): {}", r.host, parts.join(", "))
}

/// What an `--export` pushed, loud when something was lost.
fn export(e: &loadcell_record::result::Export) -> String {
    let lost = e.failed_writes > 0 || e.dropped_intervals > 0 || e.unfinished;
    let mut line = format!(
        "{}Exported to {} as run \"{}\": {} intervals, {} points",
        if lost { "WARNING: " } else { "" },
        e.output,
        e.run,
        e.intervals,
        e.points
    );
    if lost {
        line.push_str(&format!(
            "; {} writes failed, {} intervals dropped (queue full){}",
            e.failed_writes,
            e.dropped_intervals,
            if e.unfinished {
                ", still sending at the end"
            } else {
                ""
            }
        ));
    }
    if let Some(err) = &e.last_error {
        line.push_str(&format!(" (last error: {err})"));
    }
    line
}

fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// What the check after the run found, in one line: loud when short.
pub fn verification(v: &Verification) -> String {
    if v.ok {
        format!(
            "Verified: found {}, expected {} ({})",
            v.found, v.expected, v.how
        )
    } else {
        format!(
            "VERIFICATION FAILED: found {} where {} were expected ({}): the written data did not all arrive as acknowledged",
            v.found, v.expected, v.how
        )
    }
}

/// The gates judged: how many passed, then each failure on its own line.
pub fn gates(verdicts: &[GateVerdict]) -> String {
    let failed = crate::gate::failures(verdicts);
    let mut text = format!(
        "Gates: {} of {} passed",
        verdicts.len() - failed.len(),
        verdicts.len()
    );
    for line in failed {
        text += "\n";
        text += &line;
    }
    text
}

/// A stream run's rows in one line.
pub fn stream_rows(s: &StreamCompleteness) -> String {
    let mut line = format!(
        "Stream rows: produced {}, consumed {}, missing {}, duplicated {}, gaps {}, reorders {}; \
         {} not yet acknowledged when the run stopped",
        s.produced, s.consumed, s.missing, s.duplicated, s.gaps, s.reorders, s.lag_at_end
    );
    if s.redelivered > 0 {
        line += &format!(
            "; {} rows delivered again after a rebalance (at-least-once), in consumed",
            s.redelivered
        );
    }
    if let (Some(max), Some(unit)) = (s.lag_max, &s.lag_unit) {
        let unit = if unit == "wal_bytes" {
            "bytes of WAL"
        } else {
            unit.as_str()
        };
        line += &format!("; lag at most {} {unit} in the run", grouped(max as f64, 0));
    }
    for (what, flow) in [("produced", s.produce_flow), ("consumed", s.consume_flow)] {
        if let Some(f) = flow {
            line += &format!(
                "; {what} {} rows/s over the {:.3}s from the first row to the last",
                grouped(f.per_sec, 0),
                f.over_s
            );
        }
    }
    if let Some(us) = s.poll_us_per_1000_rows {
        line += &format!("; {us:.1} µs per 1000 rows in polls that brought rows");
    }
    if s.untimed > 0 {
        line += &format!(
            "; {} rows of other runs or hosts not timed end to end",
            s.untimed
        );
    }
    line
}

/// The most subscribers a delivery table lists.
const DELIVERY_ROWS: usize = 12;

/// The subscribers (or the group) a delivery table lists: the ones
/// missing most first, at most [`DELIVERY_ROWS`]; then how many more
/// there were and what they missed in all.
pub fn listed_subscribers(d: &MqttDelivery) -> (Vec<&SubscriberDelivery>, usize, u64) {
    let mut all: Vec<&SubscriberDelivery> = d.subscribers.iter().collect();
    all.sort_by_key(|s| std::cmp::Reverse(s.missing));
    let rest = all.split_off(all.len().min(DELIVERY_ROWS));
    let rest_missing = rest.iter().map(|s| s.missing).sum();
    (all, rest.len(), rest_missing)
}

/// What the run's MQTT messages became, then each subscriber's (or the
/// group's) share: a line, a small table, a line for the rest.
pub fn mqtt_delivery(d: &MqttDelivery) -> String {
    let mut text = format!(
        "MQTT delivery (QoS {}): published {}, owed {}, received {}, missing {} ({:.3}% lost), \
         duplicates {}, reorders {}, misdelivered {}",
        d.qos,
        d.published,
        d.expected,
        d.received,
        d.missing,
        d.loss_pct,
        d.duplicates,
        d.reorders,
        d.misdelivered
    );
    for (n, what) in [
        (d.refused, "refused by the broker"),
        (d.downgraded, "taken at QoS 1 (PUBACK to a QoS 2 PUBLISH)"),
        (d.retained_replayed, "retained replays not counted"),
        (d.foreign, "of other runs not counted"),
    ] {
        if n > 0 {
            text += &format!("; {n} {what}");
        }
    }
    text += "\n";
    let (listed, rest, rest_missing) = listed_subscribers(d);
    let _ = writeln!(
        text,
        "    {:<14} {:<32} {:>10} {:>10} {:>9}",
        if d.shared_group.is_some() {
            "group"
        } else {
            "subscriber"
        },
        "filter",
        "owed",
        "received",
        "missing"
    );
    for s in listed {
        let _ = writeln!(
            text,
            "    {:<14} {:<32} {:>10} {:>10} {:>9}",
            s.name, s.filter, s.expected, s.received, s.missing
        );
    }
    if rest > 0 {
        let _ = writeln!(
            text,
            "    … {rest} more subscribers, {}",
            if rest_missing == 0 {
                "none missing a message".to_string()
            } else {
                format!("{rest_missing} messages missing among them")
            }
        );
    }
    text
}

/// How far the measured IOPS are from `--expect-iops`'s, in one line.
pub fn expectation(e: &IopsExpectation) -> String {
    format!(
        "IOPS {} = {:.0}% of expected {} ({} at GiB={}): {}",
        grouped(e.measured_iops, 0),
        100.0 * e.ratio,
        grouped(e.expected_iops, 0),
        e.formula,
        grouped(e.gib, if e.gib.fract() == 0.0 { 0 } else { 1 }),
        if e.met {
            "met".to_string()
        } else {
            format!(
                "SHORT by {} IOPS",
                grouped(e.expected_iops - e.measured_iops, 0)
            )
        }
    )
}

/// `--warmup auto`: when the run settled, and what the warm-up cost.
fn steady_state_line(s: &loadcell_record::result::SteadyState) -> String {
    match s.settled_at_s {
        Some(at) => format!(
            "Warm-up: auto, settled {at:.1} s into it ({}); measured after {:.1} s of warm-up",
            s.method, s.warmup_s
        ),
        None => format!(
            "Warm-up: auto, NEVER SETTLED within {:.0} s ({}): measured from the cap on, still changing",
            s.max_s, s.method
        ),
    }
}

/// `--stages`: each stage's target, rate and latency, then each recovery
/// in words ("after the spike to 8,000/s, p99 took 4.1 s to recover").
fn stages_table(w: &mut String, stages: &[loadcell_record::result::StageSummary]) {
    let of = stages.first().map(|s| s.target_of).unwrap_or_default();
    let _ = writeln!(
        w,
        "Stages:   from     to  {:<18} achieved/s   p50 ms   p99 ms  service p99  errors",
        of.heading()
    );
    for st in stages {
        let target = if st.target_start == st.target_end {
            crate::table::grouped(st.target_end, 0)
        } else {
            format!(
                "{} -> {}",
                crate::table::grouped(st.target_start, 0),
                crate::table::grouped(st.target_end, 0)
            )
        };
        let _ = writeln!(
            w,
            "    {:>8.1}s {:>6.1}s  {:<18} {:>10.1}  {:>7.2}  {:>7.2}  {:>11.2}  {:>6}",
            st.start_s,
            st.start_s + st.duration_s,
            target,
            st.events_per_sec,
            st.latency_ms.p50,
            st.latency_ms.p99,
            st.service_time_ms.p99,
            st.errors
        );
    }
    for st in stages {
        if let Some(r) = &st.recovery {
            let peak = format!(
                "{}{}",
                crate::table::grouped(st.target_end, 0),
                st.target_of.suffix()
            );
            let _ = match r.recovery_s {
                Some(t) => writeln!(
                    w,
                    "    after the stage at {peak}, p99 took {t:.1} s to recover (within {}x the {:.2} ms before it)",
                    loadcell_record::result::Recovery::FACTOR,
                    r.baseline_p99_ms
                ),
                None => writeln!(
                    w,
                    "    after the stage at {peak}, p99 never recovered within the run (to {}x the {:.2} ms before it)",
                    loadcell_record::result::Recovery::FACTOR,
                    r.baseline_p99_ms
                ),
            };
        }
    }
}

/// A ramp's knees in words: "on the ramp 0→8,000/s: latency left its
/// low-load level (p99 1.00 ms) at ~4,100/s (t=10.5 s); throughput stopped
/// following the target at ~4,300/s (achieved 4,000/s, t=11.0 s)".
fn ramp_knee_line(
    st: &loadcell_record::result::StageSummary,
    knee: &loadcell_analysis::ramp::RampKnee,
) -> String {
    use crate::table::grouped;
    let latency = match &knee.latency_left_at {
        Some(l) => format!(
            "latency left its low-load level (p99 {:.2} ms) at ~{}/s (t={:.1} s)",
            l.baseline_p99_ms,
            grouped(l.target, 0),
            l.t_s
        ),
        None => "latency stayed at its low-load level".to_string(),
    };
    let throughput = match &knee.throughput_stopped_at {
        Some(t) => format!(
            "throughput stopped following the target at ~{}/s (achieved {}/s, t={:.1} s)",
            grouped(t.target, 0),
            grouped(t.achieved, 0),
            t.t_s
        ),
        None => "throughput followed the target to its end".to_string(),
    };
    format!(
        "on the ramp {}→{}/s: {latency}; {throughput}",
        grouped(st.target_start, 0),
        grouped(st.target_end, 0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use loadcell_record::details::Flow;
    use loadcell_record::result::Schedule;

    #[test]
    fn scraped_hosts_failed_scrapes_and_exports_are_summarised() {
        use loadcell_record::remote::{RemoteSample, ScrapeSource};
        use loadcell_record::result::Export;
        let mut r = fixture::run(4, 1000.0);
        for s in &mut r.resources.samples {
            s.remote = vec![RemoteSample {
                host: "db1:9100".into(),
                cpu_pct: Some(150.0),
                cpus: Some(4),
                load_1m: Some(2.0),
                disk_busy_pct: Some(30.0),
                server: [("redis_commands_per_s".to_string(), 900.0)].into(),
                ..RemoteSample::default()
            }];
        }
        r.resources.server_metrics = vec![ScrapeSource {
            url: "http://db1:9100/metrics".into(),
            host: "db1:9100".into(),
            scrapes: 10,
            failures: 2,
            last_error: Some("connection refused".into()),
        }];
        r.exports = vec![Export {
            output: "prometheus-rw=http://p:9090/api/v1/write".into(),
            run: "2026-11-25T02:00:00Z".into(),
            intervals: 10,
            points: 900,
            ..Export::default()
        }];
        let text = summary(&r, &[]);
        assert!(
            text.contains(
                "Server host db1:9100 (scraped): CPU 38% of 4 cores, load 2.00, disk busy 30%, \
                 redis_commands_per_s 900.0"
            ),
            "{text}"
        );
        assert!(text.contains(
            "WARNING: 2 of 10 scrapes of http://db1:9100/metrics failed; the last: connection refused"
        ));
        assert!(text.contains(
            "Exported to prometheus-rw=http://p:9090/api/v1/write as run \"2026-11-25T02:00:00Z\": \
             10 intervals, 900 points\n"
        ));
        r.exports[0].dropped_intervals = 3;
        assert!(summary(&r, &[]).contains("WARNING: Exported to"));
        let html = crate::html::render(&[crate::input::Input::run("r", r)]);
        assert!(html.contains("db1:9100 (scraped)"), "CPU chart");
        assert!(html.contains("Disk busy over time"));
        assert!(
            html.contains("redis_commands_per_s (db1:9100)"),
            "counters table"
        );
    }

    #[test]
    fn reads_show_a_hit_ratio_only_when_some_were_counted() {
        let mut r = fixture::run(4, 1000.0);
        (r.summary.hits, r.summary.misses) = (Some(990), Some(10));
        assert!(summary(&r, &[])
            .contains("reads:                               990 hits, 10 misses (99.0% hit)"));
        (r.summary.hits, r.summary.misses) = (Some(1), Some(1));
        assert!(summary(&r, &[]).contains("1 hit, 1 miss (50.0% hit)"));
        // Nothing counted: no "0 hits, 0 misses (0.0% hit)".
        (r.summary.hits, r.summary.misses) = (Some(0), Some(0));
        assert!(!summary(&r, &[]).contains("hits"));
        (r.summary.hits, r.summary.misses) = (None, None);
        assert!(!summary(&r, &[]).contains("hits"));
    }

    #[test]
    fn held_connections_say_how_many_and_whose_limit_stopped_them() {
        use loadcell_record::details::FirstFailure;
        let mut r = fixture::run(4, 1000.0);
        assert!(!summary(&r, &[]).contains("connections held"));
        r.summary.connects = Some(5000);
        r.details.insert(&HeldConnections {
            requested: 300,
            held_max: 200,
            held_at_end: 200,
            first_failure: Some(FirstFailure {
                t_s: 0.52,
                held: 199,
                error: "no answer within 1s (timed out)".into(),
                client_limit: false,
            }),
        });
        let text = summary(&r, &[]);
        assert!(
            text.contains("new connections:                     5000"),
            "{text}"
        );
        assert!(
            text.contains("200 at most, 200 at the end, of 300 asked"),
            "{text}"
        );
        assert!(
            text.contains(
                "at 0.52s with 199 held (the target refused, dropped or timed out): no answer"
            ),
            "{text}"
        );
        assert!(text.contains("Schedule: connections held"), "{text}");
    }

    #[test]
    fn operations_the_workload_does_not_name_follow_its_own() {
        let mut r = fixture::run(4, 1000.0);
        let connect = r.ops["commit"].clone();
        r.ops.insert("connect".into(), connect);
        let text = summary(&r, &["point_select", "index_update", "commit"]);
        let at = |op: &str| text.find(&format!("\n    {op:<18} ")).unwrap();
        assert!(
            at("point_select") < at("commit") && at("commit") < at("connect"),
            "{text}"
        );
    }

    #[test]
    fn an_mqtt_run_lists_the_subscribers_missing_most_first() {
        let vehicle = |i: usize, missing: u64| SubscriberDelivery {
            name: i.to_string(),
            filter: format!("vehicles/{i}/commands"),
            expected: 40,
            received: 40 - missing,
            missing,
        };
        let mut subscribers: Vec<_> = (0..20).map(|i| vehicle(i, 0)).collect();
        subscribers[17] = vehicle(17, 3);
        subscribers[19] = vehicle(19, 1);
        let d = MqttDelivery {
            qos: 1,
            published: 800,
            refused: 0,
            downgraded: 0,
            expected: 800,
            received: 796,
            missing: 4,
            duplicates: 0,
            reorders: 0,
            retained_replayed: 0,
            foreign: 2,
            misdelivered: 0,
            shared_group: None,
            subscribers,
            loss_pct: 0.5,
        };
        let text = mqtt_delivery(&d);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("MQTT delivery (QoS 1): published 800, owed 800, received 796, missing 4 (0.500% lost)"),
            "{text}"
        );
        assert!(
            lines[0].ends_with("; 2 of other runs not counted"),
            "{text}"
        );
        assert!(lines[2].trim_start().starts_with("17 "), "{text}");
        assert!(lines[3].trim_start().starts_with("19 "), "{text}");
        assert_eq!(lines.len(), 2 + DELIVERY_ROWS + 1, "{text}");
        assert!(
            lines
                .last()
                .unwrap()
                .ends_with("… 8 more subscribers, none missing a message"),
            "{text}"
        );
    }

    #[test]
    fn a_stream_run_gets_a_line_of_its_rows() {
        let mut r = fixture::run(4, 1000.0);
        let rows = StreamCompleteness {
            produced: 900,
            consumed: 910,
            missing: 0,
            lag_at_end: 35,
            duplicated: 10,
            redelivered: 0,
            gaps: 0,
            reorders: 0,
            untimed: 0,
            poll_us_per_1000_rows: Some(412.5),
            lag_max: Some(12_500),
            lag_unit: Some("rows".to_string()),
            consume_flow: None,
            produce_flow: None,
        };
        let mut verified = Verification::new(900, 900, true, "acknowledged".to_string());
        verified.details.insert(&rows);
        r.verification = Some(verified);
        let text = summary(&r, &[]);
        assert!(
            text.contains(
                "Stream rows: produced 900, consumed 910, missing 0, duplicated 10, gaps 0, \
                 reorders 0; 35 not yet acknowledged when the run stopped; lag at most 12,500 \
                 rows in the run; 412.5 µs per 1000 rows in polls that brought rows\n"
            ),
            "{text}"
        );
        let pg = stream_rows(&StreamCompleteness {
            lag_unit: Some("wal_bytes".to_string()),
            ..rows.clone()
        });
        assert!(
            pg.contains("; lag at most 12,500 bytes of WAL in the run;"),
            "{pg}"
        );
        let again = stream_rows(&StreamCompleteness {
            redelivered: 10,
            ..rows.clone()
        });
        let untimed = stream_rows(&StreamCompleteness {
            untimed: 7,
            ..rows.clone()
        });
        assert!(
            again.contains("; 10 rows delivered again after a rebalance (at-least-once)"),
            "{again}"
        );
        assert!(untimed.ends_with("; 7 rows of other runs or hosts not timed end to end"));
        let flowing = stream_rows(&StreamCompleteness {
            consume_flow: Flow::of(910, 0.25),
            ..rows
        });
        assert!(
            flowing.contains(
                "; consumed 3,640 rows/s over the 0.250s from the first row to the last;"
            ),
            "{flowing}"
        );
    }

    #[test]
    fn items_get_a_line_only_when_the_run_carried_some() {
        let mut r = fixture::run(4, 1000.0);
        assert!(!summary(&r, &[]).contains("items:"));
        (r.summary.items, r.summary.items_per_sec) = (Some(25_000), Some(2500.0));
        let line = format!("    {:<37}25000  (2500.00 per sec.)\n", "items:");
        assert!(summary(&r, &[]).contains(&line), "{}", summary(&r, &[]));
    }

    #[test]
    fn named_counts_get_one_line_when_the_workload_kept_some() {
        let mut r = fixture::run(4, 1000.0);
        assert!(!summary(&r, &[]).contains("counts:"));
        let counts = [("2xx".to_string(), 990), ("503".to_string(), 10)];
        r.summary.counters = Some(counts.into_iter().collect());
        let line = format!("    {:<37}2xx 990, 503 10\n", "counts:");
        assert!(summary(&r, &[]).contains(&line), "{}", summary(&r, &[]));
    }

    #[test]
    fn session_groups_are_shown_each_on_its_own_schedule() {
        let mut r = fixture::run(4, 100.0);
        let group = |name: &str, rate: Option<f64>, per_sec: f64| GroupSummary {
            name: name.to_string(),
            sessions: 2,
            events: 10,
            events_per_sec: per_sec,
            latency_ms: r.summary.latency_ms,
            service_time_ms: r.summary.service_time_ms,
            schedule: Schedule {
                mode: if rate.is_some() {
                    LoopMode::OpenLoop
                } else {
                    LoopMode::ClosedLoop
                },
                target_rate: rate,
                achieved_rate: per_sec,
                late: 0,
                dropped: 3,
                lag_ms: None,
            },
        };
        r.summary.groups = Some(vec![
            group("bulk", None, 12.5),
            group("query", Some(50.0), 49.5),
        ]);
        let text = summary(&r, &[]);
        assert!(
            text.contains("Session groups (each on its own schedule"),
            "{text}"
        );
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("    bulk") || l.starts_with("    query"))
            .collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(
            rows[0].contains(" closed ") && rows[0].contains(" 12.5 "),
            "{}",
            rows[0]
        );
        assert!(
            rows[1].contains(" 50.0 ") && rows[1].ends_with(" 3"),
            "{}",
            rows[1]
        );
        assert!(
            !text.contains("Schedule: "),
            "the groups replace the one schedule"
        );
    }

    #[test]
    fn the_target_line_names_a_cluster_when_the_server_reports_one() {
        let mut r = fixture::run(4, 1000.0);
        assert!(summary(&r, &[]).contains("(MariaDB 10.11.6)\n"));
        let server = r.environment.server.as_mut().unwrap();
        server.extras.insert("cluster".into(), "logs-eu".into());
        assert!(summary(&r, &[]).contains("(MariaDB 10.11.6, cluster logs-eu)\n"));
    }

    #[test]
    fn a_ramp_says_where_its_knees_are_under_the_stages() {
        use loadcell_analysis::ramp::{LatencyLeft, RampKnee, ThroughputStopped};
        use loadcell_record::result::StageSummary;
        let mut r = fixture::run(4, 1000.0);
        let ramp = StageSummary {
            start_s: 0.0,
            duration_s: 20.0,
            target_of: Default::default(),
            target_start: 0.0,
            target_end: 8000.0,
            events: 60_000,
            ops_per_sec: 3000.0,
            events_per_sec: 3000.0,
            errors: 0,
            latency_ms: Default::default(),
            service_time_ms: Default::default(),
            recovery: None,
            knee: Some(RampKnee {
                latency_left_at: Some(LatencyLeft {
                    target: 4100.0,
                    t_s: 10.5,
                    p99_ms: 12.5,
                    baseline_p99_ms: 1.0,
                }),
                throughput_stopped_at: Some(ThroughputStopped {
                    target: 4300.0,
                    achieved: 3998.2,
                    t_s: 11.0,
                }),
            }),
        };
        let not_reached = StageSummary {
            knee: Some(RampKnee::default()),
            ..ramp.clone()
        };
        r.summary.stages = Some(vec![ramp, not_reached]);
        let text = summary(&r, &[]);
        assert!(
            text.contains(
                "\n    on the ramp 0→8,000/s: latency left its low-load level (p99 1.00 ms) at \
                 ~4,100/s (t=10.5 s); throughput stopped following the target at ~4,300/s \
                 (achieved 3,998/s, t=11.0 s)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\n    on the ramp 0→8,000/s: latency stayed at its low-load level; throughput \
                 followed the target to its end\n"
            ),
            "{text}"
        );
    }
}
