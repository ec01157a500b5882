//! One run: throughput and latency over time, spectrum, operations,
//! resources and the bottleneck hint, environment and configuration.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use loadcell_core::words;
use loadcell_record::hist;
use loadcell_record::remote::RemoteSample;
use loadcell_record::resources::ResourceSample;
use loadcell_record::result::{
    GroupSummary, Interval, LoopMode, Recovery, RunResult, RunStatus, StageSummary,
};
use serde_json::Value;

use super::*;
use crate::redact::shell_join;
use crate::svg::{si, Annotation, Axis, Chart, Series};
use crate::table::UNKNOWN;
use crate::table::{grouped, merge_note, number};

pub(super) fn throughput_names(r: &RunResult) -> (&'static str, &'static str) {
    let events = if r.summary.txn_per_sec.is_some() {
        "TPS"
    } else {
        "events/s"
    };
    let ops = if r.summary.queries.is_some() {
        "QPS"
    } else {
        "ops/s"
    };
    (events, ops)
}

/// Throughput, latency and (when any) error charts over the run's
/// intervals.
pub fn time_series_charts(r: &RunResult) -> Vec<Chart> {
    let iv = charted(&r.intervals);
    if iv.is_empty() {
        return Vec::new();
    }
    let (ev_name, ops_name) = throughput_names(r);
    let ops: Vec<(f64, f64)> = iv.iter().map(|i| (i.t_s, i.ops_per_sec)).collect();
    let events: Vec<(f64, f64)> = iv.iter().map(|i| (i.t_s, i.events_per_sec)).collect();
    let target = r
        .summary
        .schedule
        .target_rate
        .filter(|_| r.summary.schedule.mode == LoopMode::OpenLoop);
    // Under `--stages` the target moves, and `target_rate` is only its
    // mean: draw the stages' line instead of a mark at the mean.
    let staged = r.summary.stages.as_deref().and_then(stage_targets);
    let target_line = |c: Chart| match (&staged, target) {
        (Some(line), _) => c.series(line.clone()),
        (None, Some(rate)) => c.annotate(Annotation::HLine {
            y: rate,
            label: format!("target {}/s", si(rate)),
        }),
        (None, None) => c,
    };
    let time = time_axis;
    let mut out = Vec::new();
    let same = iv.iter().all(|i| i.ops == i.events);
    let ratio = if r.summary.events > 0 {
        r.summary.ops as f64 / r.summary.events as f64
    } else {
        1.0
    };
    let ops_band = || throughput_band(&iv, ops_name, |m| m.ops_per_sec_min, |m| m.ops_per_sec_max);
    let events_band = || {
        throughput_band(
            &iv,
            ev_name,
            |m| m.events_per_sec_min,
            |m| m.events_per_sec_max,
        )
    };
    if same {
        let mut c = Chart::new("Throughput over time", time(), Axis::from_zero(ops_name))
            .series(Series::new(ops_name, ops));
        c.series.extend(ops_band());
        out.push(target_line(c));
    } else if ratio <= 4.0 {
        out.push(target_line(
            Chart::new(
                "Throughput over time",
                time(),
                Axis::from_zero("per second"),
            )
            .series(Series::new(ops_name, ops))
            .series(Series::new(ev_name, events)),
        ));
    } else {
        let mut c = Chart::new(
            format!("{ops_name} over time"),
            time(),
            Axis::from_zero(ops_name),
        )
        .series(Series::new(ops_name, ops));
        c.series.extend(ops_band());
        out.push(c);
        let mut c = Chart::new(
            format!("{ev_name} over time"),
            time(),
            Axis::from_zero(ev_name),
        )
        .series(Series::new(ev_name, events));
        c.series.extend(events_band());
        out.push(target_line(c));
    }
    let lat = |f: fn(&loadcell_record::result::IntervalLatency) -> f64| -> Vec<(f64, f64)> {
        iv.iter().map(|i| (i.t_s, f(&i.latency_ms))).collect()
    };
    let mut series = vec![
        Series::new("p50", lat(|l| l.p50)),
        Series::new("p95", lat(|l| l.p95)),
        Series::new("p99", lat(|l| l.p99)),
    ];
    series.extend(extreme(&iv, "p99, highest interval".into(), |m| m.p99_max));
    let y = latency_axis_for(&series);
    let mut c = Chart::new("Latency over time (per interval)", time(), y);
    c.series = series;
    out.push(c);
    out.extend(gauge_charts(&iv));
    if iv
        .iter()
        .any(|i| i.errors > 0 || i.reconnects > 0 || i.retries > 0)
    {
        let per_s = |f: fn(&Interval) -> u64| -> Vec<(f64, f64)> {
            iv.iter()
                .map(|i| {
                    (
                        i.t_s,
                        if i.duration_s > 0.0 {
                            f(i) as f64 / i.duration_s
                        } else {
                            0.0
                        },
                    )
                })
                .collect()
        };
        out.push(
            Chart::new("Errors over time", time(), Axis::from_zero("per second"))
                .series(Series::new("errors/s", per_s(|i| i.errors)))
                .series(Series::new("retries/s", per_s(|i| i.retries)))
                .series(Series::new("reconnects/s", per_s(|i| i.reconnects))),
        );
    }
    out
}

/// A chart per gauge the workload sampled (a stream group's lag), over
/// the intervals that sampled it.
fn gauge_charts(iv: &[Interval]) -> Vec<Chart> {
    let names: std::collections::BTreeSet<&String> = iv
        .iter()
        .flat_map(|i| i.gauges.iter().flat_map(|g| g.keys()))
        .collect();
    names
        .into_iter()
        .map(|name| {
            let points = iv
                .iter()
                .filter_map(|i| Some((i.t_s, *i.gauges.as_ref()?.get(name)? as f64)))
                .collect();
            Chart::new(
                format!("{name} over time (highest sampled per interval)"),
                time_axis(),
                Axis::from_zero(name.as_str()),
            )
            .series(Series::new(name.as_str(), points))
        })
        .collect()
}

/// CPU, memory and I/O charts over the run's resource samples.
/// One figure of a scraped host's samples.
type RemoteFigure<'a> = dyn Fn(&RemoteSample) -> Option<f64> + 'a;

pub fn resource_charts(r: &RunResult) -> Vec<Chart> {
    let m = measured(&r.resources.samples);
    if m.is_empty() {
        return Vec::new();
    }
    let time = time_axis;
    let pts = |f: &dyn Fn(&ResourceSample) -> Option<f64>| -> Vec<(f64, f64)> {
        m.iter().filter_map(|s| f(s).map(|v| (s.t_s, v))).collect()
    };
    let mut cpu = Chart::new(
        "CPU over time",
        time(),
        Axis::from_zero("CPU (% of one core)"),
    )
    .series(Series::new(
        "client (loadcell)",
        pts(&|s| Some(s.client_cpu_pct)),
    ))
    .series(Series::new(
        "host (all processes)",
        pts(&|s| Some(s.host_cpu_pct)),
    ));
    let server = pts(&|s| s.server_cpu_pct);
    if !server.is_empty() {
        cpu = cpu.series(Series::new("server process", server));
    }
    // The hosts scraped with --server-metrics, each beside this one.
    let mut remote_hosts: Vec<&str> = Vec::new();
    for r in m.iter().flat_map(|s| &s.remote) {
        if !remote_hosts.contains(&r.host.as_str()) {
            remote_hosts.push(&r.host);
        }
    }
    let remote = |host: &str, f: &RemoteFigure<'_>| {
        pts(&|s| s.remote.iter().find(|r| r.host == host).and_then(f))
    };
    for host in &remote_hosts {
        let p = remote(host, &|r| r.cpu_pct);
        if !p.is_empty() {
            cpu = cpu.series(Series::new(format!("{host} (scraped)"), p));
        }
    }
    // The host's capacity, when use comes anywhere near it.
    let cores = m.iter().map(|s| s.host_cpus).max().unwrap_or(0);
    let peak = m
        .iter()
        .map(|s| {
            s.client_cpu_pct
                .max(s.host_cpu_pct)
                .max(s.server_cpu_pct.unwrap_or(0.0))
        })
        .fold(0.0, f64::max);
    if cores > 0 && peak >= 25.0 * cores as f64 {
        cpu = cpu.annotate(Annotation::HLine {
            y: 100.0 * cores as f64,
            label: words::counted(cores as u64, "core"),
        });
    }
    let mut out = vec![cpu];
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut mem = Chart::new(
        "Memory over time",
        time(),
        Axis::from_zero("resident memory (MiB)"),
    )
    .series(Series::new(
        "client (loadcell)",
        pts(&|s| Some(mib(s.client_rss_bytes))),
    ));
    let server_rss = pts(&|s| s.server_rss_bytes.map(mib));
    if !server_rss.is_empty() {
        mem = mem.series(Series::new("server process", server_rss));
    }
    for host in &remote_hosts {
        let p = remote(host, &|r| {
            r.memory_used_bytes.map(|b| b / (1024.0 * 1024.0))
        });
        if !p.is_empty() {
            mem = mem.series(Series::new(format!("{host} in use (scraped)"), p));
        }
    }
    out.push(mem);
    let mb = |v: f64| v / 1e6;
    let mut io: Vec<(String, Vec<(f64, f64)>)> = vec![
        (
            "network in".into(),
            pts(&|s| Some(mb(s.net_rx_bytes_per_s))),
        ),
        (
            "network out".into(),
            pts(&|s| Some(mb(s.net_tx_bytes_per_s))),
        ),
        (
            "disk read".into(),
            pts(&|s| Some(mb(s.disk_read_bytes_per_s))),
        ),
        (
            "disk write".into(),
            pts(&|s| Some(mb(s.disk_write_bytes_per_s))),
        ),
    ];
    for host in &remote_hosts {
        let figures: [(&str, &RemoteFigure<'_>); 4] = [
            ("network in", &|r| r.net_rx_bytes_per_s.map(mb)),
            ("network out", &|r| r.net_tx_bytes_per_s.map(mb)),
            ("disk read", &|r| r.disk_read_bytes_per_s.map(mb)),
            ("disk write", &|r| r.disk_write_bytes_per_s.map(mb)),
        ];
        for (what, f) in figures {
            let p = remote(host, f);
            if !p.is_empty() {
                io.push((format!("{host} {what}"), p));
            }
        }
    }
    if io.iter().any(|(_, p)| p.iter().any(|q| q.1 > 0.0)) {
        let mut c = Chart::new(
            "Network and disk over time",
            time(),
            Axis::from_zero("MB/s"),
        );
        for (name, p) in io {
            c = c.series(Series::new(name, p));
        }
        out.push(c);
    }
    let busy: Vec<(String, Vec<(f64, f64)>)> = remote_hosts
        .iter()
        .map(|host| {
            (
                format!("{host} (scraped)"),
                remote(host, &|r| r.disk_busy_pct),
            )
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if !busy.is_empty() {
        let mut c = Chart::new(
            "Disk busy over time",
            time(),
            Axis::from_zero("busiest disk busy (%)"),
        )
        .series(Series::new("this host", pts(&|s| Some(s.disk_busy_pct))));
        for (name, p) in busy {
            c = c.series(Series::new(name, p));
        }
        out.push(c);
    }
    out
}

pub(super) fn run_section(o: &mut String, idx: usize, input: &Input, r: &RunResult) {
    let name = &input.name;
    let s = &r.summary;
    let _ = writeln!(o, "<section class=\"input\" id=\"input-{idx}\">");
    let _ = writeln!(
        o,
        "<h2>{} {}</h2>",
        h(name),
        status_badge(r.status == RunStatus::Complete)
    );
    chips(o, &r.labels);
    let server = r
        .environment
        .server
        .as_ref()
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    // A staged run's target rate is the stages' mean.
    let (staged, at) = match &s.stages {
        Some(stages) => (
            format!(" in {}", words::counted(stages.len() as u64, "stage")),
            "averaging",
        ),
        None => (String::new(), "at"),
    };
    let mode = match s.schedule.mode {
        LoopMode::ClosedLoop => format!("closed loop{staged}"),
        LoopMode::OpenLoop => format!(
            "open loop{staged} {at} {}/s ({}), achieved {}/s",
            si(s.schedule.target_rate.unwrap_or(0.0)),
            r.config.arrival.as_deref().unwrap_or("uniform"),
            si(s.schedule.achieved_rate)
        ),
    };
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let sessions = match (input.rebuilt, r.config.threads, r.config.clients_per_thread) {
        (true, ..) => format!("threads × clients {UNKNOWN}"),
        (false, t, c) => format!("{t} thread{} × {c} client{}", plural(t), plural(c)),
    };
    let _ = writeln!(
        o,
        "<p class=\"meta\">{} on {}{} · {sessions} · {} s measured{} · {}</p>",
        h(&r.config.workload),
        h(&r.config.target),
        h(&server),
        grouped(s.duration_s, 1),
        if r.config.warmup_s > 0.0 {
            format!(" after {} s warm-up", grouped(r.config.warmup_s, 1))
        } else {
            String::new()
        },
        h(&mode)
    );
    if r.status == RunStatus::Partial {
        let reason = serde_json::to_value(r.stop_reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "<p class=\"note\"><strong>Partial run</strong> ({}){}: numbers cover only the time measured.</p>",
            h(&reason.replace('_', " ")),
            r.error.as_ref().map(|e| format!(": {}", h(e))).unwrap_or_default()
        );
    }
    for w in &r.warnings {
        let _ = writeln!(o, "<p class=\"note\">{}</p>", h(w));
    }
    let (ev_name, ops_name) = throughput_names(r);
    // What a rebuilt result's zeros stand for: no measurement.
    let known = |v: String| {
        if input.rebuilt {
            UNKNOWN.to_string()
        } else {
            v
        }
    };
    let _ = writeln!(
        o,
        "<p>{} {} · {} events · {} {}{} · p50 {} ms · p95 {} ms · p99 {} ms · p99.9 {} ms · max {} ms · errors {} · retries {} · reconnects {}</p>",
        grouped(s.txn_per_sec.unwrap_or(s.events_per_sec), 2),
        ev_name,
        grouped(s.events as f64, 0),
        known(grouped(s.ops_per_sec, 2)),
        ops_name,
        s.items_per_sec
            .map(|n| format!(" · {} items/s", grouped(n, 2)))
            .unwrap_or_default(),
        ms(s.latency_ms.p50),
        ms(s.latency_ms.p95),
        ms(s.latency_ms.p99),
        ms(s.latency_ms.p999),
        ms(s.latency_ms.max),
        known(s.errors.to_string()),
        known(s.retries.to_string()),
        known(s.reconnects.to_string())
    );
    if let Some(v) = &r.verification {
        let class = if v.ok { "" } else { " class=\"note\"" };
        let _ = writeln!(o, "<p{class}>{}</p>", h(&crate::text::verification(v)));
        if let Some(d) = v.details.get::<loadcell_record::details::MqttDelivery>() {
            delivery_table(o, &d);
        }
    }
    if let Some(m) = &r.merge {
        shards_table(o, m);
    }
    if let Some(stages) = &s.stages {
        stages_table(o, stages);
    }

    o.push_str("<h3>Throughput and latency over time</h3>\n");
    let ts = time_series_charts(r);
    if ts.is_empty() {
        o.push_str("<p class=\"muted\">No intervals were recorded.</p>\n");
    }
    charts(o, &ts);
    worst_intervals(o, input);

    o.push_str("<h3>Latency percentile spectrum</h3>\n");
    let mut spectra = Vec::new();
    if let Ok(resp) = hist::decode(&r.histograms.response) {
        let name = if s.schedule.mode == LoopMode::OpenLoop {
            "response time (from intended start)"
        } else {
            "response time"
        };
        spectra.push(Series::new(name, spectrum(&resp)));
    }
    if s.schedule.mode == LoopMode::OpenLoop {
        if let Ok(svc) = hist::decode(&r.histograms.service) {
            spectra.push(Series::new("service time (from send)", spectrum(&svc)));
        }
    }
    o.push_str("<div class=\"charts\">\n");
    if spectra.iter().any(|s| !s.points.is_empty()) {
        figure(o, &spectrum_chart("Latency by percentile", spectra));
    } else {
        o.push_str("<p class=\"muted\">The response-time histogram is empty or unreadable.</p>\n");
    }
    let l = &s.latency_ms;
    o.push_str("<div><table><thead><tr><th scope=\"col\">percentile</th><th scope=\"col\" class=\"n\">latency (ms)</th></tr></thead><tbody>\n");
    for (p, v) in [
        ("min", l.min),
        ("mean", l.mean),
        ("50%", l.p50),
        ("90%", l.p90),
        ("95%", l.p95),
        ("99%", l.p99),
        ("99.9%", l.p999),
        ("99.99%", l.p9999),
        ("max", l.max),
    ] {
        let _ = writeln!(
            o,
            "<tr><td>{p}</td><td class=\"n\">{}</td></tr>",
            grouped(v, 3)
        );
    }
    o.push_str("</tbody></table></div>\n</div>\n");

    if let Some(groups) = &r.summary.groups {
        session_groups(o, groups);
    }

    if !r.ops.is_empty() {
        // Items only for runs whose operations carried some.
        let with_items = r.ops.values().any(|op| op.items.is_some());
        o.push_str("<h3>Per operation</h3>\n<div class=\"scroll\"><table><thead><tr>");
        let columns = [
            ("operation", false, true),
            ("category", false, true),
            ("count", true, true),
            ("errors", true, true),
            ("items/s", true, with_items),
            ("avg ms", true, true),
            ("p50 ms", true, true),
            ("p95 ms", true, true),
            ("p99 ms", true, true),
            ("p99.9 ms", true, true),
            ("max ms", true, true),
        ];
        header_cells(
            o,
            columns
                .into_iter()
                .filter(|c| c.2)
                .map(|(name, numeric, _)| (name, numeric)),
        );
        o.push_str("</tr></thead><tbody>\n");
        let mut ops: Vec<_> = r.ops.iter().collect();
        ops.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(b.0)));
        for (name, op) in ops {
            let l = &op.latency_ms;
            let items = if with_items {
                let per_sec = op.items_per_sec.map(|n| grouped(n, 2)).unwrap_or_default();
                format!("<td class=\"n\">{per_sec}</td>")
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                h(name),
                h(&op.category),
                grouped(op.count as f64, 0),
                grouped(op.errors as f64, 0),
                items,
                grouped(l.mean, 3),
                grouped(l.p50, 3),
                grouped(l.p95, 3),
                grouped(l.p99, 3),
                grouped(l.p999, 3),
                grouped(l.max, 3)
            );
        }
        o.push_str("</tbody></table></div>\n");
    }

    o.push_str("<h3>Resources</h3>\n");
    match &r.resources.bottleneck {
        Some(b) => {
            let _ = writeln!(
                o,
                "<p class=\"hint\"><strong>Bottleneck hint:</strong> {}</p>",
                h(b)
            );
        }
        None if !r.resources.samples.is_empty() => {
            o.push_str("<p class=\"muted\">No resource stood out as the bottleneck.</p>\n");
        }
        None => {}
    }
    let rc = resource_charts(r);
    if rc.is_empty() {
        o.push_str("<p class=\"muted\">No resource samples were recorded.</p>\n");
    }
    charts(o, &rc);
    server_counters(o, &r.resources.samples);

    if !r.error_samples.is_empty() {
        o.push_str("<h3>Errors</h3>\n<div class=\"scroll\"><table><thead><tr><th scope=\"col\">class</th><th scope=\"col\" class=\"n\">count</th><th scope=\"col\">message</th></tr></thead><tbody>\n");
        for e in &r.error_samples {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                h(&e.class),
                e.count,
                h(&e.message)
            );
        }
        o.push_str("</tbody></table></div>\n");
    }

    environment(o, r, &r.command, input.rebuilt);
    o.push_str("</section>\n");
}

/// Means of the server's own counters over the measured samples.
/// A merged result's shards: each one's host and figures, and the spread.
/// The intervals with the highest p99 and with the least throughput, each
/// at full resolution (read from the interval log when the result's own
/// intervals were merged): when a soak run stalled, and how badly.
fn worst_intervals(o: &mut String, input: &Input) {
    let Some(full) = &input.full else {
        if let Some(note) = &input.note {
            let _ = writeln!(o, "<p class=\"note\">{}</p>", h(note));
        }
        return;
    };
    if full.slowest.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<p class=\"muted\">The worst of {} intervals, from {}.</p>",
        grouped(full.intervals as f64, 0),
        h(&full.source)
    );
    o.push_str("<div class=\"charts\">\n");
    for (title, points) in [
        ("Highest p99", &full.slowest),
        ("Lowest throughput", &full.emptiest),
    ] {
        let _ = writeln!(
            o,
            "<div><table><caption>{title}</caption><thead><tr><th scope=\"col\" class=\"n\">ended at (s)</th><th scope=\"col\" class=\"n\">events/s</th><th scope=\"col\" class=\"n\">p50 (ms)</th><th scope=\"col\" class=\"n\">p99 (ms)</th><th scope=\"col\" class=\"n\">max (ms)</th></tr></thead><tbody>"
        );
        for p in points {
            let _ = writeln!(
                o,
                "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                grouped(p.t_s, 2),
                grouped(p.events_per_sec, 1),
                grouped(p.p50_ms, 3),
                grouped(p.p99_ms, 3),
                grouped(p.max_ms, 3)
            );
        }
        o.push_str("</tbody></table></div>\n");
    }
    o.push_str("</div>\n");
}

/// Each MQTT subscriber's (or the group's) delivery, those missing most
/// first.
fn delivery_table(o: &mut String, d: &loadcell_record::details::MqttDelivery) {
    let (listed, rest, rest_missing) = crate::text::listed_subscribers(d);
    let who = if d.shared_group.is_some() {
        "group"
    } else {
        "subscriber"
    };
    let _ = writeln!(
        o,
        "<table><thead><tr><th>{who}</th><th>filter</th><th class=\"num\">owed</th>\
         <th class=\"num\">received</th><th class=\"num\">missing</th></tr></thead><tbody>"
    );
    for s in listed {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td></tr>",
            h(&s.name),
            h(&s.filter),
            s.expected,
            s.received,
            s.missing
        );
    }
    o.push_str("</tbody></table>\n");
    if rest > 0 {
        let _ = writeln!(
            o,
            "<p class=\"meta\">{rest} more subscribers, {rest_missing} messages missing among them</p>"
        );
    }
}

fn shards_table(o: &mut String, m: &loadcell_record::result::MergeSection) {
    let _ = writeln!(o, "<p>{}</p>", h(&merge_note(m)));
    o.push_str(
        "<table><thead><tr><th>shard</th><th>file</th><th>host</th><th class=\"num\">ops/s</th>\
         <th class=\"num\">p99 (ms)</th></tr></thead><tbody>\n",
    );
    for s in &m.shards {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            s.index,
            h(&s.file),
            h(&s.host.hostname),
            grouped(s.ops_per_sec, 1),
            ms(s.p99_ms)
        );
    }
    o.push_str("</tbody></table>\n");
}

pub(super) fn server_counters(o: &mut String, samples: &[ResourceSample]) {
    let m = measured(samples);
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut add = |k: String, v: f64| {
        let e = sums.entry(k).or_insert((0.0, 0));
        e.0 += v;
        e.1 += 1;
    };
    for s in &m {
        for (k, v) in &s.server {
            add(k.clone(), *v);
        }
        for r in &s.remote {
            for (k, v) in &r.server {
                add(format!("{k} ({})", r.host), *v);
            }
        }
    }
    if sums.is_empty() {
        return;
    }
    o.push_str("<div class=\"scroll\"><table><thead><tr><th scope=\"col\">server counter</th><th scope=\"col\" class=\"n\">mean over the run</th></tr></thead><tbody>\n");
    for (k, (sum, n)) in sums {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"n\">{}</td></tr>",
            h(&k),
            grouped(sum / n as f64, 2)
        );
    }
    o.push_str("</tbody></table></div>\n");
}

pub(super) fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "–".to_string(),
        other => other.to_string(),
    }
}

/// The facts an interval log holds, and so a result rebuilt from it.
const REBUILT_FACTS: &[&str] = &[
    "workload",
    "target",
    "started",
    "ended",
    "warm-up",
    "report interval",
];

/// The run's environment and configuration; a result `rebuilt` from its
/// interval log holds neither, beside the workload, target and times.
pub(super) fn environment(o: &mut String, r: &RunResult, command: &[String], rebuilt: bool) {
    let c = &r.config;
    let e = &r.environment;
    o.push_str("<h3>Environment and configuration</h3>\n<div class=\"facts\">\n<dl>\n");
    let fact = |o: &mut String, k: &str, v: String| {
        let v = if rebuilt && !REBUILT_FACTS.contains(&k) {
            UNKNOWN.to_string()
        } else {
            v
        };
        let _ = writeln!(o, "<dt>{k}</dt><dd>{}</dd>", breakable(&v));
    };
    let host = &e.host;
    fact(o, "host", host.hostname.clone());
    fact(
        o,
        "OS",
        format!("{} (kernel {}, {})", host.os, host.kernel, host.arch),
    );
    fact(o, "CPU", format!("{} × {}", host.cpus, host.cpu_model));
    fact(
        o,
        "memory",
        format!(
            "{} GiB",
            grouped(host.memory_bytes as f64 / (1u64 << 30) as f64, 1)
        ),
    );
    fact(
        o,
        "server",
        e.server
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_else(|| "not connected".to_string()),
    );
    if let Some(pid) = r.resources.server_pid {
        fact(o, "server process", format!("pid {pid} on this host"));
    }
    fact(o, "loadcell", r.loadcell_version.clone());
    fact(o, "started", r.started_at.clone());
    fact(o, "ended", r.ended_at.clone());
    o.push_str("</dl>\n<dl>\n");
    fact(o, "workload", c.workload.clone());
    fact(o, "target", c.target.clone());
    fact(o, "driver", c.driver.clone());
    fact(o, "threads", c.threads.to_string());
    fact(o, "clients per thread", c.clients_per_thread.to_string());
    if let Some(t) = c.time_s {
        fact(o, "time", format!("{} s", number(t)));
    }
    if let Some(n) = c.events {
        fact(o, "events", n.to_string());
    }
    fact(o, "warm-up", format!("{} s", number(c.warmup_s)));
    match c.rate {
        Some(rate) => fact(
            o,
            "rate",
            format!(
                "{}/s ({})",
                number(rate),
                c.arrival.as_deref().unwrap_or("uniform")
            ),
        ),
        None => fact(o, "rate", "unlimited (closed loop)".to_string()),
    }
    fact(
        o,
        "report interval",
        format!("{} s", number(c.report_interval_s)),
    );
    fact(
        o,
        "connect timeout",
        format!("{} s", number(c.connect_timeout_s)),
    );
    fact(o, "seed", c.seed.to_string());
    o.push_str("</dl>\n</div>\n");
    if !c.workload_options.is_empty() {
        o.push_str("<div class=\"scroll\"><table><thead><tr><th scope=\"col\">workload option</th><th scope=\"col\">value</th></tr></thead><tbody>\n");
        for (k, v) in &c.workload_options {
            let _ = writeln!(o, "<tr><td>{}</td><td>{}</td></tr>", h(k), h(&json_text(v)));
        }
        o.push_str("</tbody></table></div>\n");
    }
    if !command.is_empty() {
        let _ = writeln!(
            o,
            "<p>Command line:</p>\n<pre><code>{}</code></pre>",
            h(&shell_join(command))
        );
    }
}

/// `--stages` or `--session-stages`: each stage's target beside what it
/// achieved, then each recovery after a high stage in words.
fn stages_table(o: &mut String, stages: &[StageSummary]) {
    let Some(first) = stages.first() else {
        return;
    };
    // The unit (events/s or sessions) is the result's to say.
    let of = first.target_of;
    o.push_str("<h3>Stages</h3>\n<div class=\"scroll\"><table><thead><tr>");
    header_cells(
        o,
        [
            ("from (s)", true),
            ("to (s)", true),
            (of.heading(), true),
            ("events/s", true),
            ("p50 ms", true),
            ("p99 ms", true),
            ("service p99 ms", true),
            ("errors", true),
        ],
    );
    o.push_str("</tr></thead><tbody>\n");
    for st in stages {
        let target = if st.target_start == st.target_end {
            grouped(st.target_end, 0)
        } else {
            format!(
                "{} → {}",
                grouped(st.target_start, 0),
                grouped(st.target_end, 0)
            )
        };
        let cells = [
            grouped(st.start_s, 1),
            grouped(st.start_s + st.duration_s, 1),
            target,
            grouped(st.events_per_sec, 1),
            ms(st.latency_ms.p50),
            ms(st.latency_ms.p99),
            ms(st.service_time_ms.p99),
            grouped(st.errors as f64, 0),
        ];
        o.push_str("<tr>");
        for cell in cells {
            let _ = write!(o, "<td class=\"n\">{cell}</td>");
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
    let recoveries: Vec<String> = stages
        .iter()
        .filter_map(|st| {
            let r = st.recovery.as_ref()?;
            let peak = format!("{}{}", grouped(st.target_end, 0), of.suffix());
            let took = match r.recovery_s {
                Some(t) => format!("took {} s to recover", grouped(t, 1)),
                None => "never recovered within the run".to_string(),
            };
            Some(format!(
                "After the stage at {peak}, p99 {took} (to within {}× the {} ms before it).",
                Recovery::FACTOR,
                ms(r.baseline_p99_ms)
            ))
        })
        .collect();
    if !recoveries.is_empty() {
        o.push_str("<ul class=\"findings\">\n");
        for r in recoveries {
            let _ = writeln!(o, "<li>{r}</li>");
        }
        o.push_str("</ul>\n");
    }
}

/// A run of several session groups: each group's schedule, throughput and
/// latency from its own intended starts, beside its service time.
fn session_groups(o: &mut String, groups: &[GroupSummary]) {
    o.push_str("<h3>Session groups</h3>\n<div class=\"scroll\"><table><thead><tr>");
    header_cells(
        o,
        [
            ("group", false),
            ("sessions", true),
            ("target/s", true),
            ("events/s", true),
            ("p50 ms", true),
            ("p90 ms", true),
            ("p99 ms", true),
            ("service p90 ms", true),
            ("service p99 ms", true),
            ("late", true),
            ("never sent", true),
        ],
    );
    o.push_str("</tr></thead><tbody>\n");
    for g in groups {
        let (l, svc) = (&g.latency_ms, &g.service_time_ms);
        let target = g
            .schedule
            .target_rate
            .map_or_else(|| "closed loop".to_string(), |r| grouped(r, 1));
        let cells = [
            g.sessions.to_string(),
            target,
            grouped(g.events_per_sec, 1),
            grouped(l.p50, 2),
            grouped(l.p90, 2),
            grouped(l.p99, 2),
            grouped(svc.p90, 2),
            grouped(svc.p99, 2),
            grouped(g.schedule.late as f64, 0),
            grouped(g.schedule.dropped as f64, 0),
        ];
        let _ = write!(o, "<tr><td>{}</td>", h(&g.name));
        for cell in cells {
            let _ = write!(o, "<td class=\"n\">{}</td>", h(&cell));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
}
