use loadcell_analysis::sweep::SweepAnalysis;
use loadcell_record::hist;
use loadcell_record::result::{Interval, LoopMode, RunStatus};
use serde_json::json;

use super::*;
use crate::fixture;
use crate::svg::Scale;

/// Checks that every non-void element is closed in order; returns the
/// element names seen.
fn check_balanced(html: &str) -> Vec<String> {
    const VOID: [&str; 8] = ["meta", "br", "hr", "img", "input", "link", "col", "wbr"];
    let mut stack: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        rest = &rest[lt..];
        if rest.starts_with("<!--") {
            let end = rest.find("-->").expect("comment closed");
            rest = &rest[end + 3..];
            continue;
        }
        if rest.starts_with("<!") {
            rest = &rest[rest.find('>').unwrap() + 1..];
            continue;
        }
        let end = rest.find('>').expect("tag closed");
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack
                .pop()
                .unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(top, name.trim(), "mismatched close tag");
            continue;
        }
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        assert!(!name.is_empty(), "bad tag <{tag}>");
        assert!(!tag.contains('<'), "unescaped < inside <{tag}>");
        seen.push(name.clone());
        if tag.ends_with('/') || VOID.contains(&name.as_str()) {
            continue;
        }
        if name == "style" {
            let close = rest.find("</style>").expect("style closed");
            rest = &rest[close + "</style>".len()..];
            continue;
        }
        stack.push(name);
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    seen
}

fn check_self_contained(html: &str) {
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no URLs at all"
    );
    assert!(!html.to_ascii_lowercase().contains("<script"), "no scripts");
    assert!(!html.contains("src="), "nothing loaded");
    assert!(!html.contains("url("), "no CSS fetches");
    assert!(!html.contains("@import"));
    for (i, _) in html.match_indices("href=\"") {
        assert_eq!(&html[i + 6..i + 7], "#", "only in-page links");
    }
    assert!(
        !html.contains("secret@") && !html.contains("hunter2"),
        "passwords redacted"
    );
}

#[test]
fn a_day_long_run_draws_a_bounded_number_of_points_and_its_one_interval_stall() {
    use std::time::Duration;
    let mut r = fixture::run(8, 1000.0);
    let interval = |t: usize, events: u64, ms: u64| {
        let mut s = loadcell_record::Stats::new(1);
        for _ in 0..events {
            s.record_op(0, Duration::from_millis(ms), true);
            s.record_event(Duration::from_millis(ms), Duration::from_millis(ms), None);
        }
        Interval::from_stats(t as f64, 1.0, &s)
    };
    // 5,000 intervals of 1 s; one of them a stall: one event, of 900 ms.
    r.intervals = (1..=5_000)
        .map(|t| {
            if t == 2_500 {
                interval(t, 1, 900)
            } else {
                interval(t, 100, 2)
            }
        })
        .collect();
    let charts = time_series_charts(&r);
    let (_, ops) = throughput_names(&r);
    for chart in &charts {
        for series in &chart.series {
            assert!(
                series.points.len() <= charts::MAX_DRAWN,
                "{}: {}",
                chart.title,
                series.name
            );
        }
    }
    let series = |name: &str| {
        charts
            .iter()
            .flat_map(|c| &c.series)
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no series {name}"))
    };
    let lowest = |name: &str| {
        series(name)
            .points
            .iter()
            .map(|p| p.1)
            .fold(f64::MAX, f64::min)
    };
    let highest = |name: &str| series(name).points.iter().map(|p| p.1).fold(0.0, f64::max);
    // The line of merged intervals hides the stall; the band shows it.
    assert!(lowest(ops) > 80.0, "{}", lowest(ops));
    assert_eq!(lowest(&format!("{ops}, lowest interval")), 1.0);
    assert!(highest("p99") < 3.0);
    assert!(highest("p99, highest interval") > 890.0);
    assert!(series("p99, highest interval").dashed);
}

#[test]
fn a_sliver_of_a_last_interval_is_not_drawn() {
    let mut r = fixture::run(8, 1000.0);
    let n = r.intervals.len();
    let mut sliver = r.intervals[n - 1].clone();
    sliver.t_s += 0.004;
    sliver.duration_s = 0.004;
    sliver.events_per_sec = 250.0;
    r.intervals.push(sliver);
    for chart in time_series_charts(&r) {
        for series in &chart.series {
            assert_eq!(series.points.len(), n, "{}: {}", chart.title, series.name);
        }
    }
    // A last interval of normal length is drawn.
    r.intervals[n].duration_s = r.intervals[n - 1].duration_s;
    assert_eq!(time_series_charts(&r)[0].series[0].points.len(), n + 1);
}

#[test]
fn renders_a_run_with_every_section() {
    let mut r = fixture::run(8, 1000.0);
    r.labels.insert("instance".into(), "4c16g".into());
    r.command.push("--target=mysql://root:hunter2@db/x".into());
    r.config
        .workload_options
        .insert("dsn".into(), json!("root:hunter2@db"));
    r.error_samples.push(loadcell_record::ErrorSample {
        class: "retryable".into(),
        message: "deadlock <found> for mysql://u:hunter2@h/d".into(),
        count: 3,
    });
    r.intervals[3].errors = 2;
    if let Some(server) = r.environment.server.as_mut() {
        server.extras.insert("cluster".into(), "oltp-<eu>".into());
    }
    let html = render(&[Input::run("run-8.json", r)]);
    check_self_contained(&html);
    let tags = check_balanced(&html);
    for section in [
        "id=\"summary\"",
        "Throughput and latency over time",
        "Latency percentile spectrum",
        "Per operation",
        "Resources",
        "Bottleneck hint:",
        "Environment and configuration",
        "workload option",
        "Command line:",
        "MariaDB 10.11.6, cluster oltp-&lt;eu&gt;",
        "instance=4c16g",
    ] {
        assert!(html.contains(section), "missing {section}");
    }
    // Charts: QPS and TPS over time (20 statements per transaction),
    // latency, errors, spectrum, CPU, memory, network and disk.
    let svgs = tags.iter().filter(|t| *t == "svg").count();
    let figures = tags.iter().filter(|t| *t == "figure").count();
    assert_eq!(svgs, figures, "one <svg> per chart, each in a figure");
    assert_eq!(svgs, 8);
    assert!(html.contains("99.999%"));
    assert!(html.contains("root:***@db"), "options are redacted too");
    assert!(!html.contains("xmlns"));
}

#[test]
fn a_run_of_session_groups_shows_each_group_apart() {
    let mut r = fixture::run(8, 1000.0);
    let html = render(&[Input::run("run.json", r.clone())]);
    assert!(!html.contains("Session groups"));
    let group = |name: &str, rate: Option<f64>| loadcell_record::result::GroupSummary {
        name: name.to_string(),
        sessions: 3,
        events: 100,
        events_per_sec: 10.0,
        latency_ms: r.summary.latency_ms,
        service_time_ms: r.summary.service_time_ms,
        schedule: loadcell_record::result::Schedule {
            target_rate: rate,
            ..r.summary.schedule.clone()
        },
    };
    r.summary.groups = Some(vec![group("bulk", None), group("query", Some(25.0))]);
    let html = render(&[Input::run("run.json", r)]);
    check_balanced(&html);
    assert!(html.contains("<h3>Session groups</h3>"));
    assert!(
        html.contains("<tr><td>bulk</td><td class=\"n\">3</td><td class=\"n\">closed loop</td>")
    );
    assert!(html.contains("<tr><td>query</td><td class=\"n\">3</td><td class=\"n\">25.0</td>"));
}

/// The rows of the table under `<h3>{title}</h3>`, each as its numeric
/// cells joined by ` | `.
fn table_rows(html: &str, title: &str) -> Vec<String> {
    let start = html
        .find(&format!("<h3>{title}</h3>"))
        .unwrap_or_else(|| panic!("no {title}"));
    let body = &html[start..];
    let body = &body[body.find("<tbody>").unwrap()..body.find("</tbody>").unwrap()];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td class=\"n\">")
                .skip(1)
                .map(|cell| &cell[..cell.find("</td>").unwrap()])
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect()
}

#[test]
fn a_staged_run_lists_each_stage_and_its_recovery_in_words() {
    let mut r = fixture::staged();
    let html = render(&[Input::run("staged.json", r.clone())]);
    check_self_contained(&html);
    check_balanced(&html);
    assert!(
        html.contains("open loop in 3 stages averaging 2692/s (uniform), achieved"),
        "the schedule's rate is the stages' mean"
    );
    assert_eq!(
        table_rows(&html, "Stages"),
        [
            // from, to, target, achieved, p50, p99, service p99, errors
            "0.0 | 3.0 | 0 → 2,000 | 1,000.0 | 0.50 | 1.00 | 0.80 | 0",
            "3.0 | 5.0 | 8,000 | 4,000.0 | 150.00 | 400.00 | 0.80 | 0",
            "5.0 | 13.0 | 2,000 | 3,000.0 | 2.00 | 350.00 | 0.80 | 0",
        ]
    );
    assert!(html.contains("<th scope=\"col\" class=\"n\">target/s</th>"));
    // p99 is back within 1.5 × 1 ms in the interval ending at 10 s.
    assert!(html.contains(
        "<li>After the stage at 8,000/s, p99 took 5.0 s to recover (to within 1.5× the 1.00 ms before it).</li>"
    ));

    r.summary.stages.as_mut().unwrap()[1]
        .recovery
        .as_mut()
        .unwrap()
        .recovery_s = None;
    let html = render(&[Input::run("staged.json", r.clone())]);
    assert!(html.contains(
        "<li>After the stage at 8,000/s, p99 never recovered within the run (to within 1.5× the 1.00 ms before it).</li>"
    ));

    // Without a stage before a lower one there is nothing to recover from.
    for st in r.summary.stages.as_mut().unwrap() {
        st.recovery = None;
    }
    let html = render(&[Input::run("staged.json", r)]);
    assert_eq!(table_rows(&html, "Stages").len(), 3);
    assert!(!html.contains("to recover") && !html.contains("never recovered"));
}

#[test]
fn the_throughput_chart_draws_the_stages_target_beside_the_achieved_rate() {
    let r = fixture::staged();
    let charts = time_series_charts(&r);
    let (_, ops) = throughput_names(&r);
    let with_target: Vec<&Chart> = charts
        .iter()
        .filter(|c| c.series.iter().any(|s| s.name == "target"))
        .collect();
    let [chart] = with_target[..] else {
        panic!("the target is drawn once: {}", with_target.len());
    };
    assert_eq!(chart.title, "Throughput over time");
    let series = |name: &str| &chart.series.iter().find(|s| s.name == name).unwrap().points;
    // The ramp from 0, the jump up at 3 s and down at 5 s (two points at
    // one time each), the hold to the end.
    assert_eq!(
        series("target"),
        &[
            (0.0, 0.0),
            (3.0, 2000.0),
            (3.0, 8000.0),
            (5.0, 8000.0),
            (5.0, 2000.0),
            (13.0, 2000.0),
        ]
    );
    // On the intervals' clock: both count from the start of measurement,
    // the warm-up before it drawn by neither, so the last interval ends
    // where the last stage does.
    assert_eq!(r.config.warmup_s, 2.0);
    assert_eq!(series(ops).first(), Some(&(1.0, 2000.0 / 6.0)));
    assert_eq!(series(ops).last(), Some(&(13.0, 2000.0)));
    // The line replaces the mark at the stages' mean rate.
    assert!(chart.annotations.is_empty(), "{:?}", chart.annotations);
    let html = render(&[Input::run("staged.json", r)]);
    assert!(html.contains("<g class=\"series\" data-series=\"target\">"));
    assert!(!html.contains("target 2692/s"));
}

#[test]
fn session_stages_are_listed_in_sessions_and_not_drawn_on_the_rate_axis() {
    let mut r = fixture::staged();
    r.summary.schedule.mode = LoopMode::ClosedLoop;
    r.summary.schedule.target_rate = None;
    r.config.rate = None;
    for st in r.summary.stages.as_mut().unwrap() {
        st.target_of = loadcell_record::result::StageTarget::Sessions;
        st.target_start /= 250.0;
        st.target_end /= 250.0;
    }
    let html = render(&[Input::run("sessions.json", r.clone())]);
    check_balanced(&html);
    assert!(html.contains("closed loop in 3 stages"));
    assert!(html.contains("<th scope=\"col\" class=\"n\">sessions</th>"));
    let targets: Vec<String> = table_rows(&html, "Stages")
        .iter()
        .map(|row| row.split(" | ").nth(2).unwrap().to_string())
        .collect();
    assert_eq!(targets, ["0 → 8", "32", "8"]);
    assert!(html.contains("<li>After the stage at 32 sessions, p99 took 5.0 s to recover"));
    // Sessions are not events/s: no target on the throughput axis.
    assert!(time_series_charts(&r)
        .iter()
        .all(|c| c.series.iter().all(|s| s.name != "target") && c.annotations.is_empty()));
    assert!(!html.contains("data-series=\"target\""));
}

#[test]
fn a_sampled_gauge_gets_a_chart_of_its_own_only_when_sampled() {
    let mut r = fixture::run(8, 1000.0);
    let html = render(&[Input::run("run.json", r.clone())]);
    assert!(!html.contains("lag_rows"));
    for (n, i) in r.intervals.iter_mut().enumerate() {
        i.gauges = Some([("lag_rows".to_string(), 1000 * n as u64)].into());
    }
    let html = render(&[Input::run("run.json", r)]);
    check_balanced(&html);
    assert!(
        html.contains("lag_rows over time (highest sampled per interval)"),
        "{html}"
    );
}

#[test]
fn items_per_second_show_beside_ops_per_second_only_when_carried() {
    let mut r = fixture::run(8, 1000.0);
    let html = render(&[Input::run("run.json", r.clone())]);
    assert!(!html.contains("items/s"));

    (r.summary.items, r.summary.items_per_sec) = Some((10_000, 1000.0)).unzip();
    let update = r.ops.get_mut("index_update").unwrap();
    (update.items, update.items_per_sec) = (Some(10_000), Some(1000.0));
    let html = render(&[Input::run("run.json", r)]);
    check_balanced(&html);
    assert!(html.contains(" QPS · 1,000.00 items/s · p50 "), "{html}");
    assert!(html.contains("<th scope=\"col\" class=\"n\">items/s</th>"));
    let row = |op: &str| {
        let start = html.find(&format!("<tr><td>{op}</td>")).unwrap();
        html[start..start + html[start..].find("</tr>").unwrap()].to_string()
    };
    assert!(
        row("index_update").contains("<td class=\"n\">1,000.00</td>"),
        "{}",
        row("index_update")
    );
    // A kind that carries nothing gets an empty cell, not a zero.
    assert!(
        row("commit").contains("<td class=\"n\"></td>"),
        "{}",
        row("commit")
    );
}

#[test]
fn renders_several_runs_with_a_comparison() {
    let inputs: Vec<Input> = [("2c8g", 1700.0), ("16c64g", 9000.0), ("4c16g", 4000.0)]
        .iter()
        .map(|(inst, tps)| {
            let mut r = fixture::run(64, *tps);
            r.labels.insert("instance".into(), inst.to_string());
            // A careless label: secrets in it must not reach the
            // legend, the ticks or the tables.
            r.labels
                .insert("dsn".into(), format!("mysql://u:hunter2@{inst}/db"));
            Input::run(format!("{inst}.json"), r)
        })
        .collect();
    let html = render(&inputs);
    check_self_contained(&html);
    check_balanced(&html);
    assert!(
        html.contains("dsn=mysql&#58;//u:***@2c8g/db"),
        "legend names are redacted"
    );
    assert!(html.contains("id=\"compare-runs\""));
    assert!(html.contains("TPS by instance"));
    assert!(html.contains("QPS by instance"));
    assert!(html.contains("Latency by percentile, all runs"));
    // Categories in natural order on the x axis.
    let a = html.find(">2c8g<").unwrap();
    let b = html.find(">4c16g<").unwrap();
    let c = html.find(">16c64g<").unwrap();
    assert!(a < b && b < c);
    // Summary rows in natural order, too.
    let summary =
        &html[html.find("id=\"summary\"").unwrap()..html.find("id=\"compare-runs\"").unwrap()];
    let (a, b, c) = (
        summary.find("instance=2c8g").unwrap(),
        summary.find("instance=4c16g").unwrap(),
        summary.find("instance=16c64g").unwrap(),
    );
    assert!(a < b && b < c);
}

#[test]
fn renders_sweeps_with_knee_findings_and_error_bars() {
    let s = fixture::sweep(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], 2);
    let mut other = fixture::sweep(&[1.0, 4.0, 16.0, 64.0], 1);
    other.labels.insert("system".into(), "postgres".into());
    other.analysis = SweepAnalysis::default();
    other.findings.clear();
    let html = render(&[
        Input::sweep("maria.json", s),
        Input::sweep("pg.json", other),
    ]);
    check_self_contained(&html);
    let tags = check_balanced(&html);
    assert_eq!(
        tags.iter().filter(|t| *t == "svg").count(),
        tags.iter().filter(|t| *t == "figure").count()
    );
    assert!(html.contains("id=\"compare-sweeps\""));
    assert!(html.contains("Throughput by threads"));
    // The chart marks the point the findings name.
    assert!(html.contains("knee: threads 32"));
    assert!(html.contains("throughput saturates at 32 threads"));
    assert!(html.contains("p99 holds up to"));
    assert!(html.contains("USL fit"));
    assert!(html.contains("No findings were recorded."));
    assert!(
        html.contains("(log scale)"),
        "1…64 threads step geometrically"
    );
    assert!(html.contains(" ± "), "spread over repeats");
    assert!(html.contains("Mean CPU by threads"));
    assert!(
        html.contains("<td>saturation.x</td><td>32</td>"),
        "the analysis numbers are listed"
    );
    assert!(
        html.contains("threads 1, 2, 4, 8, 16, 32, 64</strong>: server CPU"),
        "bottleneck hints by point"
    );
}

#[test]
fn summary_names_a_shared_workload_and_target_once() {
    let a = fixture::run(8, 100.0);
    let mut b = fixture::run(16, 200.0);
    let same = render(&[
        Input::run("a.json", a.clone()),
        Input::run("b.json", b.clone()),
    ]);
    assert!(same.contains("Every row: workload <strong>oltp_read_write</strong>, target"));
    assert!(!same.contains(">target</th>"));
    b.config.target = "postgres://bench:***@10.0.0.2/bench".into();
    let mixed = render(&[Input::run("a.json", a), Input::run("b.json", b)]);
    assert!(mixed.contains(">target</th>"));
    assert!(!mixed.contains(">workload</th>"));
    check_balanced(&mixed);
}

#[test]
fn renders_an_open_loop_key_value_run() {
    let mut r = fixture::run(4, 2000.0);
    r.config.workload = "kv".into();
    r.summary.txn_per_sec = None;
    r.summary.queries = None;
    r.summary.ops = r.summary.events;
    r.summary.ops_per_sec = r.summary.events_per_sec;
    for i in &mut r.intervals {
        i.ops = i.events;
        i.ops_per_sec = i.events_per_sec;
    }
    r.summary.schedule.mode = LoopMode::OpenLoop;
    r.summary.schedule.target_rate = Some(2000.0);
    r.config.rate = Some(2000.0);
    r.config.arrival = Some("poisson".into());
    for s in &mut r.resources.samples {
        s.server_cpu_pct = None;
        s.server_rss_bytes = None;
    }
    let html = render(&[Input::run("kv.json", r)]);
    check_self_contained(&html);
    let tags = check_balanced(&html);
    assert!(html.contains("target 2000/s"), "the target rate is marked");
    assert!(html.contains("service time (from send)"));
    assert!(html.contains("open loop at 2000/s (poisson)"));
    assert!(html.contains("events/s"));
    assert!(
        !html.contains("server process</text>"),
        "no server series without server samples"
    );
    // One throughput chart (ops = events), latency, spectrum, CPU,
    // memory, network and disk.
    assert_eq!(tags.iter().filter(|t| *t == "svg").count(), 6);
}

#[test]
fn renders_findmax_with_sla_and_best_rate() {
    let s = fixture::findmax(&[1000.0, 2000.0, 4000.0, 6000.0, 5000.0]);
    let html = render(&[Input::sweep("findmax.json", s)]);
    check_self_contained(&html);
    check_balanced(&html);
    assert!(html.contains("findmax over rate"));
    assert!(html.contains("max meeting SLA: 4000/s"));
    assert!(
        html.contains("SLA edge (95%) from 4010/s"),
        "the interval's ends"
    );
    assert!(html.contains("to 4990/s"));
    assert!(html.contains("SLA p99 ≤ 10 ms"));
    assert!(html.contains("SLA missed"));
    assert!(
        html.contains("fill=\"#ffffff\""),
        "failed probes are hollow"
    );
}

#[test]
fn degenerate_inputs_render() {
    let mut r = fixture::run(1, 10.0);
    r.intervals.clear();
    r.resources.samples.clear();
    r.resources.bottleneck = None;
    r.histograms.response = "garbage".into();
    r.status = RunStatus::Partial;
    r.error = Some("server went away".into());
    r.environment.server = None;
    let mut s = fixture::sweep(&[], 1);
    s.analysis = SweepAnalysis::default();
    s.complete = false;
    let html = render(&[Input::run("bad.json", r), Input::sweep("empty.json", s)]);
    check_balanced(&html);
    check_self_contained(&html);
    assert!(html.contains("No intervals were recorded."));
    assert!(html.contains("Partial run"));
    assert!(html.contains("server went away"));
    assert!(html.contains("not connected"));
    assert!(html.contains("Incomplete sweep"));
    let empty = render(&[]);
    check_balanced(&empty);
    assert!(empty.contains("No result files were given."));
}

/// Writes a demonstration page (runs, a sweep, a findmax) to the path
/// in `LOADCELL_REPORT_DEMO`, for looking at in a browser:
/// `LOADCELL_REPORT_DEMO=/tmp/demo.html cargo test -p loadcell-report demo -- --ignored`;
/// with `LOADCELL_REPORT_INPUTS=a.json:b.json`, of those files instead.
#[test]
#[ignore]
fn demo() {
    let Ok(path) = std::env::var("LOADCELL_REPORT_DEMO") else {
        return;
    };
    // Real files, when given (`LOADCELL_REPORT_INPUTS=a.json:b.json`).
    if let Ok(files) = std::env::var("LOADCELL_REPORT_INPUTS") {
        let inputs: Vec<Input> = files
            .split(':')
            .map(|f| Input::read(std::path::Path::new(f)).unwrap())
            .collect();
        std::fs::write(&path, render(&inputs)).unwrap();
        std::fs::write(format!("{path}.md"), table::markdown(&inputs)).unwrap();
        std::fs::write(format!("{path}.csv"), table::csv(&inputs)).unwrap();
        return;
    }
    let mut inputs: Vec<Input> = [("2c8g", 1700.0), ("16c64g", 9000.0), ("4c16g", 4000.0)]
        .iter()
        .map(|(inst, tps)| {
            let mut r = fixture::run(64, *tps);
            r.labels.insert("instance".into(), inst.to_string());
            Input::run(format!("{inst}.json"), r)
        })
        .collect();
    inputs.push(Input::sweep(
        "sweep.json",
        fixture::sweep(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], 3),
    ));
    inputs.push(Input::sweep(
        "findmax.json",
        fixture::findmax(&[1000.0, 2000.0, 4000.0, 6000.0, 5000.0]),
    ));
    std::fs::write(path, render(&inputs)).unwrap();
}

#[test]
fn spectrum_spans_the_percentile_axis() {
    let hg = fixture::histogram(2.0, 10_000);
    let s = spectrum(&hg);
    assert_eq!(s.first().unwrap().0, 1.0);
    assert_eq!(
        s.last().unwrap().0,
        10_000.0,
        "as far as 10k samples resolve"
    );
    assert!(
        s.windows(2).all(|w| w[1].1 >= w[0].1),
        "latency never falls with percentile"
    );
    assert!((s.last().unwrap().1 - hg.max() as f64 / 1000.0).abs() < 1e-9);
    assert!(spectrum(&hist::new_histogram()).is_empty());
}

#[test]
fn urls_wrap_at_their_parameters_with_the_password_redacted() {
    assert_eq!(
        breakable("redis://u:hunter2@db:6379/?a=1&b=<2>"),
        "redis&#58;//u:***@db:6379/?<wbr>a=1<wbr>&amp;b=&lt;2&gt;"
    );
}

#[test]
fn geometric_steps_get_a_log_axis() {
    assert!(geometric(&[1.0, 2.0, 4.0, 8.0, 16.0]));
    assert!(!geometric(&[10.0, 20.0, 30.0, 40.0]));
    assert!(!geometric(&[0.0, 2.0, 4.0, 8.0, 16.0]));
    let a = parameter_axis("threads", &[8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0]);
    assert_eq!(a.scale, Scale::Log);
    assert_eq!(a.ticks.as_ref().unwrap().len(), 7);
}
