//! The HTML report: one self-contained page (inline CSS and SVG, no
//! scripts, no fonts, nothing fetched) for any mix of run and sweep files.
//!
//! Sections: a summary table of every run and sweep point; a comparison of
//! the plain runs (trend charts against the label or thread count that
//! differs, overlaid latency spectra) and of sweeps over the same
//! parameter; then per run its throughput and latency over time, latency
//! percentile spectrum, operations, resources with the bottleneck hint,
//! and environment and configuration; per sweep its findings, throughput
//! against the parameter with spread and knee, p99 against throughput,
//! per-point time series, spectra and resources, the analysis numbers and
//! the environment.
//!
//! Every string taken from a file goes through [`redact`] and [`escape`],
//! so no `user:password@` and no literal URL ever reaches the page.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use loadcell_record::hist::{self, Micros};
use loadcell_record::resources::ResourceSample;
use loadcell_record::result::{Interval, LoopMode, RunResult, RunStatus};
use loadcell_record::sweep::{SweepKind, SweepPoint, SweepResult};
use serde_json::Value;

pub use crate::input::Input;
use crate::plan::PlanView;
use crate::redact::{redact, shell_join};
use crate::svg::{escape, si, Annotation, Axis, Chart, Series, Style};
use crate::table::{self, grouped, natural_cmp, number, Row};

/// Escapes text from a file for the page, after redacting secrets.
pub(crate) fn h(s: &str) -> String {
    escape(&redact(s))
}

/// [`h`], letting a URL wrap after `?` and before each `&` rather than
/// mid-word.
fn breakable(s: &str) -> String {
    h(s).replace('?', "?<wbr>").replace("&amp;", "<wbr>&amp;")
}

/// A parameter value for a tick or label: `8`, `0.5`, `1.2M`.
fn compact(v: f64) -> String {
    if v.abs() >= 1e5 {
        si(v)
    } else {
        number(v)
    }
}

fn ms(v: f64) -> String {
    grouped(v, 2)
}

/// A mean with its standard deviation on a second, smaller line.
fn with_sd(v: f64, sd: f64, decimals: usize) -> String {
    if sd > 0.0 {
        format!(
            "{}<br><small class=\"muted\">± {}</small>",
            grouped(v, decimals),
            grouped(sd, decimals)
        )
    } else {
        grouped(v, decimals)
    }
}

const CSS: &str = r#"
:root { color-scheme: light; --fg: #1a1a1a; --muted: #555; --line: #d4d4d4; --head: #f3f3f3; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff; font-size: 15px; line-height: 1.45;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header, main, footer { max-width: 1280px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 12px; }
h1 { font-size: 1.6em; margin: .4em 0 .2em; }
h2 { font-size: 1.3em; margin: 2em 0 .5em; padding-bottom: .2em; border-bottom: 2px solid var(--line); }
h3 { font-size: 1.08em; margin: 1.6em 0 .5em; }
p.meta, .muted { color: var(--muted); }
a { color: #005a8c; }
nav ol { margin: .3em 0; padding-left: 1.4em; columns: 2; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: .9em; margin: .3em 0 .8em; }
th, td { padding: 3px 9px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
thead th { background: var(--head); border-bottom: 2px solid #999; }
th.n, td.n { text-align: right; }
td.n { white-space: nowrap; }
td.label { min-width: 9em; }
td.status { white-space: nowrap; }
td.target { max-width: 17em; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 14px 22px; align-items: start; }
figure { margin: 0; }
svg.chart { display: block; width: 100%; max-width: 760px; height: auto; }
.badge { display: inline-block; padding: 0 6px; border: 1px solid; border-radius: 3px; font-size: .85em; }
.badge.ok { color: #00527f; border-color: #0072B2; }
.badge.partial { color: #8f3800; border-color: #D55E00; font-weight: 600; }
.note { border-left: 4px solid #E69F00; background: #fff7e3; padding: 6px 10px; margin: .6em 0; }
.hint { border-left: 4px solid #0072B2; background: #edf5fb; padding: 6px 10px; margin: .6em 0; }
.findings li { margin: .2em 0; }
.chips span { display: inline-block; background: #eef1f6; border: 1px solid #d5dbe6; border-radius: 10px;
  padding: 0 8px; margin: 0 4px 4px 0; font-size: .85em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f5f5f5; padding: 8px 10px; border-radius: 4px; font-size: .85em; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 0 28px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: .3em 0; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
footer { margin-top: 3em; padding-bottom: 2em; color: var(--muted); font-size: .85em; }
@media print {
  body { font-size: 10.5pt; }
  nav { display: none; }
  a { color: inherit; text-decoration: none; }
  section.input { break-before: page; }
  h2, h3 { break-after: avoid; }
  figure, tr, .hint, .note, dl { break-inside: avoid; }
  .charts { grid-template-columns: 1fr 1fr; }
  thead { display: table-header-group; }
  table { font-size: 7.5pt; }
  th, td { padding: 2px 4px; }
  td.target { max-width: 11em; }
  .scroll { overflow: visible; }
}
@page { margin: 12mm; }
"#;

/// Renders the report page for `inputs`, in the order given.
pub fn render(inputs: &[Input]) -> String {
    render_with_plan(inputs, None)
}

/// The report page, with a capacity plan section after the summary.
pub fn render_with_plan(inputs: &[Input], plan: Option<&PlanView>) -> String {
    let mut o = String::new();
    let runs: Vec<(usize, &Input, &RunResult)> = inputs
        .iter()
        .enumerate()
        .filter_map(|(i, x)| x.as_run().map(|r| (i, x, r)))
        .collect();
    let sweeps: Vec<(usize, &Input, &SweepResult)> = inputs
        .iter()
        .enumerate()
        .filter_map(|(i, x)| x.as_sweep().map(|s| (i, x, s)))
        .collect();
    let title = match inputs {
        [one] => format!("loadcell report: {}", one.name),
        _ => format!("loadcell report: {} files", inputs.len()),
    };
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    o.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // Nothing may be fetched: no scripts, fonts, images or frames.
    o.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n");
    o.push_str("<meta name=\"generator\" content=\"loadcell\">\n");
    let _ = writeln!(o, "<title>{}</title>", h(&title));
    let _ = writeln!(o, "<style>{CSS}</style>\n</head>\n<body>");

    // Header and contents.
    o.push_str("<header>\n<h1>loadcell report</h1>\n");
    let _ = writeln!(
        o,
        "<p class=\"meta\">{} run file{}, {} sweep file{}.</p>",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        sweeps.len(),
        if sweeps.len() == 1 { "" } else { "s" }
    );
    o.push_str("<nav aria-label=\"Contents\"><ol>\n<li><a href=\"#summary\">Summary</a></li>\n");
    if plan.is_some() {
        o.push_str("<li><a href=\"#plan\">Capacity plan</a></li>\n");
    }
    if runs.len() > 1 {
        o.push_str("<li><a href=\"#compare-runs\">Runs compared</a></li>\n");
    }
    if sweeps_to_compare(&sweeps).next().is_some() {
        o.push_str("<li><a href=\"#compare-sweeps\">Sweeps compared</a></li>\n");
    }
    for (i, x) in inputs.iter().enumerate() {
        let _ = writeln!(o, "<li><a href=\"#input-{i}\">{}</a></li>", h(&heading(x)));
    }
    o.push_str("</ol></nav>\n</header>\n<main>\n");

    summary_section(&mut o, inputs);
    if let Some(p) = plan {
        crate::plan::html_section(&mut o, p);
    }
    if runs.len() > 1 {
        compare_runs_section(&mut o, inputs, &runs);
    }
    compare_sweeps_section(&mut o, &sweeps);
    for (i, x) in inputs.iter().enumerate() {
        match (x.as_run(), x.as_sweep()) {
            (Some(r), _) => run_section(&mut o, i, &x.name, r),
            (_, Some(s)) => sweep_section(&mut o, i, &x.name, s),
            _ => {}
        }
    }
    o.push_str("</main>\n<footer>\n");
    let version = runs
        .first()
        .map(|r| r.2.loadcell_version.clone())
        .or_else(|| sweeps.first().map(|s| s.2.loadcell_version.clone()))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "<p>Generated by loadcell {} from result files. Charts are inline SVG; the page loads nothing from the network and needs no scripts. Secrets in targets and command lines are shown as ***.</p>",
        h(&version)
    );
    o.push_str("</footer>\n</body>\n</html>\n");
    o
}

fn heading(x: &Input) -> String {
    match x.as_sweep() {
        Some(s) => format!("{}: {}", x.name, table::sweep_title(s)),
        None => x.name.clone(),
    }
}

/// Writes a chart in its own figure, after redacting every text in it that
/// may come from a file (names built from labels, targets, options).
fn figure(o: &mut String, chart: &Chart) {
    let mut c = chart.clone();
    c.title = redact(&c.title);
    c.description = redact(&c.description);
    for axis in [&mut c.x, &mut c.y] {
        axis.label = redact(&axis.label);
        if let Some(ticks) = &mut axis.ticks {
            for t in ticks.iter_mut() {
                t.1 = redact(&t.1);
            }
        }
    }
    for s in &mut c.series {
        s.name = redact(&s.name);
    }
    for a in &mut c.annotations {
        match a {
            Annotation::VLine { label, .. } | Annotation::HLine { label, .. } => {
                *label = redact(label)
            }
        }
    }
    let _ = writeln!(o, "<figure>{}</figure>", c.render());
}

pub(crate) fn charts(o: &mut String, list: &[Chart]) {
    if list.is_empty() {
        return;
    }
    o.push_str("<div class=\"charts\">\n");
    for c in list {
        figure(o, c);
    }
    o.push_str("</div>\n");
}

fn chips(o: &mut String, labels: &BTreeMap<String, String>) {
    if labels.is_empty() {
        return;
    }
    o.push_str("<p class=\"chips\">");
    for (k, v) in labels {
        let _ = write!(o, "<span>{}={}</span>", h(k), h(v));
    }
    o.push_str("</p>\n");
}

fn status_badge(complete: bool) -> &'static str {
    if complete {
        "<span class=\"badge ok\">complete</span>"
    } else {
        "<span class=\"badge partial\">partial</span>"
    }
}

// ---------------------------------------------------------------------------
// Summary
// ---------------------------------------------------------------------------

fn summary_section(o: &mut String, inputs: &[Input]) {
    o.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n");
    let tables = table::tables(inputs);
    if tables.is_empty() {
        o.push_str("<p class=\"note\">No result files were given.</p>\n</section>\n");
        return;
    }
    // Workload and target get columns only when they differ; otherwise
    // they are said once, above the table.
    let all: Vec<&Row> = tables
        .iter()
        .flat_map(|t| t.rows.iter().map(|r| &r.1))
        .collect();
    let same = |f: &dyn Fn(&Row) -> &str| all.iter().all(|r| f(r) == f(all[0]));
    let workload_col = !same(&|r| r.workload.as_str());
    let target_col = !same(&|r| r.target.as_str());
    if !workload_col || !target_col {
        let mut parts = Vec::new();
        if !workload_col {
            parts.push(format!("workload <strong>{}</strong>", h(&all[0].workload)));
        }
        if !target_col {
            parts.push(format!("target <strong>{}</strong>", h(&all[0].target)));
        }
        let _ = writeln!(o, "<p>Every row: {}.</p>", parts.join(", "));
    }
    o.push_str("<div class=\"scroll\"><table>\n<thead><tr>");
    for (name, numeric, shown) in [
        ("run / point", false, true),
        ("workload", false, workload_col),
        ("target", false, target_col),
        ("threads × clients", true, true),
        ("TPS", true, true),
        ("QPS", true, true),
        ("p50 ms", true, true),
        ("p95 ms", true, true),
        ("p99 ms", true, true),
        ("p99.9 ms", true, true),
        ("errors", true, true),
        ("status", false, true),
    ] {
        if !shown {
            continue;
        }
        let class = if numeric { " class=\"n\"" } else { "" };
        let _ = write!(o, "<th scope=\"col\"{class}>{name}</th>");
    }
    o.push_str("</tr></thead>\n<tbody>\n");
    for t in &tables {
        for (_, r) in &t.rows {
            let anchor = inputs.iter().position(|x| x.name == r.source).unwrap_or(0);
            // Primary: the sweep point, or the run's labels; then, muted,
            // the sweep's labels and the file.
            let labels = (!r.labels.is_empty()).then(|| {
                r.labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            });
            let (primary, secondary) = match (&r.point, labels) {
                (Some((p, v)), Some(l)) => (
                    format!("{p}={}", compact(*v)),
                    format!("{l} · {}", r.source),
                ),
                (Some((p, v)), None) => (format!("{p}={}", compact(*v)), r.source.clone()),
                (None, Some(l)) => (l, r.source.clone()),
                (None, None) => (r.source.clone(), String::new()),
            };
            let _ = write!(
                o,
                "<tr><td class=\"label\"><a href=\"#input-{anchor}\">{}</a>{}</td>{}{}<td class=\"n\">{}×{}</td>",
                h(&primary),
                if secondary.is_empty() {
                    String::new()
                } else {
                    format!("<br><small class=\"muted\">{}</small>", h(&secondary))
                },
                if workload_col {
                    format!("<td>{}</td>", h(&r.workload))
                } else {
                    String::new()
                },
                if target_col {
                    format!("<td class=\"target\">{}</td>", breakable(&r.target))
                } else {
                    String::new()
                },
                r.threads,
                r.clients
            );
            let _ = writeln!(
                o,
                "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"status\">{}{}</td></tr>",
                with_sd(r.tps, r.tps_sd, 2),
                with_sd(r.qps, r.qps_sd, 2),
                ms(r.p50_ms),
                ms(r.p95_ms),
                ms(r.p99_ms),
                ms(r.p999_ms),
                if r.errors.fract() == 0.0 { number(r.errors) } else { grouped(r.errors, 2) },
                status_badge(r.complete),
                match r.passed {
                    Some(true) => "<br>SLA met",
                    Some(false) => "<br>SLA missed",
                    None => "",
                }
            );
        }
    }
    o.push_str("</tbody>\n</table></div>\n");
    o.push_str("<p class=\"muted\">TPS: transactions per second, or events per second for workloads without transactions. QPS: operations (SQL statements, requests) per second. Latency is per event; sweep points show the mean over repeats ± standard deviation.</p>\n");
    o.push_str("</section>\n");
}

// ---------------------------------------------------------------------------
// Shared chart builders
// ---------------------------------------------------------------------------

/// The classic HdrHistogram percentile axis: `1/(1−p)` on a log scale,
/// labelled from 0% to 99.999%.
pub fn percentile_axis() -> Axis {
    Axis::log("percentile")
        .with_ticks(vec![
            (1.0, "0%".into()),
            (10.0, "90%".into()),
            (100.0, "99%".into()),
            (1e3, "99.9%".into()),
            (1e4, "99.99%".into()),
            (1e5, "99.999%".into()),
        ])
        .with_bounds(1.0, 1e5)
}

/// Latency (ms) against `1/(1−p)` for p from 0 up to 99.999% (or as far
/// as the sample count resolves), ending at the maximum.
pub fn spectrum(h: &Micros) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let xmax = (h.len() as f64).clamp(1.0, 1e5);
    let steps = 125;
    let mut pts = Vec::new();
    for i in 0..=steps {
        let x = 10f64.powf(5.0 * i as f64 / steps as f64);
        if x > xmax {
            break;
        }
        let q = 1.0 - 1.0 / x;
        pts.push((x, h.value_at_quantile(q) as f64 / 1000.0));
    }
    pts.push((xmax, h.max() as f64 / 1000.0));
    pts
}

/// A linear latency axis, or a log one when the tail is two orders of
/// magnitude above the median.
fn latency_axis_for(series: &[Series]) -> Axis {
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let max = ys.iter().copied().fold(0.0f64, f64::max);
    let mut sorted: Vec<f64> = ys.iter().copied().filter(|v| *v > 0.0).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    if median > 0.0 && max / median > 100.0 {
        Axis::log("latency (ms, log scale)")
    } else {
        Axis::from_zero("latency (ms)")
    }
}

fn spectrum_chart(title: &str, series: Vec<Series>) -> Chart {
    let y = latency_axis_for(&series);
    let mut c = Chart::new(title, percentile_axis(), y).describe(
        "Latency against percentile on the HdrHistogram axis: 1/(1−p), log scale, from 0% to 99.999%.",
    );
    c.series = series;
    c
}

/// Whether `values` step geometrically (1, 2, 4, …) over a wide range.
fn geometric(values: &[f64]) -> bool {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.dedup();
    if v.len() < 3 || v[0] <= 0.0 || v[v.len() - 1] / v[0] < 8.0 {
        return false;
    }
    let mut ratios: Vec<f64> = v.windows(2).map(|w| w[1] / w[0]).collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ratios.len() / 2] >= 1.5
}

/// An axis for a swept or labelled numeric parameter: log for geometric
/// steps, with a tick at each value when there are few.
fn parameter_axis(label: &str, values: &[f64]) -> Axis {
    let mut axis = if geometric(values) {
        Axis::log(format!("{label} (log scale)"))
    } else {
        Axis::linear(label)
    };
    let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    if !v.is_empty() && v.len() <= 12 {
        axis = axis.with_ticks(v.iter().map(|&x| (x, compact(x))).collect());
    }
    axis
}

/// A categorical axis: positions 0, 1, … labelled with `names`.
fn category_axis(label: &str, names: &[String]) -> Axis {
    let n = names.len() as f64;
    Axis::linear(label)
        .with_ticks(
            names
                .iter()
                .enumerate()
                .map(|(i, s)| (i as f64, truncate(s, 14)))
                .collect(),
        )
        .with_bounds(-0.5, n - 0.5)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

/// Seconds since the start of measurement, from zero.
fn time_axis() -> Axis {
    let mut a = Axis::linear("time (s)");
    a.min = Some(0.0);
    a
}

/// Measured samples, less a last one taken a sliver after the one before
/// (at the run's end): rates over a few milliseconds are noise, and would
/// draw a spike at the end of every chart.
fn measured(samples: &[ResourceSample]) -> Vec<&ResourceSample> {
    let mut m: Vec<&ResourceSample> = samples.iter().filter(|s| s.t_s >= 0.0).collect();
    if let [.., a, b, c] = m[..] {
        if c.t_s - b.t_s < 0.5 * (b.t_s - a.t_s) {
            m.pop();
        }
    }
    m
}

/// The intervals to draw over time: all but a last one cut at the run's
/// deadline to less than half the one before, for the same reason. Tables
/// and totals still count it.
fn charted(intervals: &[Interval]) -> &[Interval] {
    match intervals {
        [.., prev, last] if last.duration_s < 0.5 * prev.duration_s => {
            &intervals[..intervals.len() - 1]
        }
        _ => intervals,
    }
}

// ---------------------------------------------------------------------------
// One run
// ---------------------------------------------------------------------------

fn throughput_names(r: &RunResult) -> (&'static str, &'static str) {
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
    let target_line = |c: Chart| match target {
        Some(rate) => c.annotate(Annotation::HLine {
            y: rate,
            label: format!("target {}/s", si(rate)),
        }),
        None => c,
    };
    let time = time_axis;
    let mut out = Vec::new();
    let same = iv.iter().all(|i| i.ops == i.events);
    let ratio = if r.summary.events > 0 {
        r.summary.ops as f64 / r.summary.events as f64
    } else {
        1.0
    };
    if same {
        out.push(target_line(
            Chart::new("Throughput over time", time(), Axis::from_zero(ops_name))
                .series(Series::new(ops_name, ops)),
        ));
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
        out.push(
            Chart::new(
                format!("{ops_name} over time"),
                time(),
                Axis::from_zero(ops_name),
            )
            .series(Series::new(ops_name, ops)),
        );
        out.push(target_line(
            Chart::new(
                format!("{ev_name} over time"),
                time(),
                Axis::from_zero(ev_name),
            )
            .series(Series::new(ev_name, events)),
        ));
    }
    let lat = |f: fn(&loadcell_record::result::IntervalLatency) -> f64| -> Vec<(f64, f64)> {
        iv.iter().map(|i| (i.t_s, f(&i.latency_ms))).collect()
    };
    let series = vec![
        Series::new("p50", lat(|l| l.p50)),
        Series::new("p95", lat(|l| l.p95)),
        Series::new("p99", lat(|l| l.p99)),
    ];
    let y = latency_axis_for(&series);
    let mut c = Chart::new("Latency over time (per interval)", time(), y);
    c.series = series;
    out.push(c);
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

/// CPU, memory and I/O charts over the run's resource samples.
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
            label: format!("{cores} cores"),
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
    out.push(mem);
    let mb = |v: f64| v / 1e6;
    let io: Vec<(&str, Vec<(f64, f64)>)> = vec![
        ("network in", pts(&|s| Some(mb(s.net_rx_bytes_per_s)))),
        ("network out", pts(&|s| Some(mb(s.net_tx_bytes_per_s)))),
        ("disk read", pts(&|s| Some(mb(s.disk_read_bytes_per_s)))),
        ("disk write", pts(&|s| Some(mb(s.disk_write_bytes_per_s)))),
    ];
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
    out
}

fn run_section(o: &mut String, idx: usize, name: &str, r: &RunResult) {
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
        .map(|s| format!(" ({} {})", s.product, s.version))
        .unwrap_or_default();
    let mode = match s.schedule.mode {
        LoopMode::ClosedLoop => "closed loop".to_string(),
        LoopMode::OpenLoop => format!(
            "open loop at {}/s ({}), achieved {}/s",
            si(s.schedule.target_rate.unwrap_or(0.0)),
            r.config.arrival.as_deref().unwrap_or("uniform"),
            si(s.schedule.achieved_rate)
        ),
    };
    let _ = writeln!(
        o,
        "<p class=\"meta\">{} on {}{} · {} thread{} × {} client{} · {} s measured{} · {}</p>",
        h(&r.config.workload),
        h(&r.config.target),
        h(&server),
        r.config.threads,
        if r.config.threads == 1 { "" } else { "s" },
        r.config.clients_per_thread,
        if r.config.clients_per_thread == 1 {
            ""
        } else {
            "s"
        },
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
    let _ = writeln!(
        o,
        "<p>{} {} · {} {} · p50 {} ms · p95 {} ms · p99 {} ms · p99.9 {} ms · max {} ms · errors {} · retries {} · reconnects {}</p>",
        grouped(s.txn_per_sec.unwrap_or(s.events_per_sec), 2),
        ev_name,
        grouped(s.ops_per_sec, 2),
        ops_name,
        ms(s.latency_ms.p50),
        ms(s.latency_ms.p95),
        ms(s.latency_ms.p99),
        ms(s.latency_ms.p999),
        ms(s.latency_ms.max),
        s.errors,
        s.retries,
        s.reconnects
    );

    o.push_str("<h3>Throughput and latency over time</h3>\n");
    let ts = time_series_charts(r);
    if ts.is_empty() {
        o.push_str("<p class=\"muted\">No intervals were recorded.</p>\n");
    }
    charts(o, &ts);

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

    if !r.ops.is_empty() {
        o.push_str("<h3>Per operation</h3>\n<div class=\"scroll\"><table><thead><tr>");
        for (c, n) in [
            ("operation", false),
            ("category", false),
            ("count", true),
            ("errors", true),
            ("avg ms", true),
            ("p50 ms", true),
            ("p95 ms", true),
            ("p99 ms", true),
            ("p99.9 ms", true),
            ("max ms", true),
        ] {
            let _ = write!(
                o,
                "<th scope=\"col\"{}>{c}</th>",
                if n { " class=\"n\"" } else { "" }
            );
        }
        o.push_str("</tr></thead><tbody>\n");
        let mut ops: Vec<_> = r.ops.iter().collect();
        ops.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(b.0)));
        for (name, op) in ops {
            let l = &op.latency_ms;
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                h(name),
                h(&op.category),
                grouped(op.count as f64, 0),
                grouped(op.errors as f64, 0),
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

    environment(o, r, &r.command);
    o.push_str("</section>\n");
}

/// Means of the server's own counters over the measured samples.
fn server_counters(o: &mut String, samples: &[ResourceSample]) {
    let m = measured(samples);
    let mut sums: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for s in &m {
        for (k, v) in &s.server {
            let e = sums.entry(k.as_str()).or_insert((0.0, 0));
            e.0 += v;
            e.1 += 1;
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
            h(k),
            grouped(sum / n as f64, 2)
        );
    }
    o.push_str("</tbody></table></div>\n");
}

fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "–".to_string(),
        other => other.to_string(),
    }
}

fn environment(o: &mut String, r: &RunResult, command: &[String]) {
    let c = &r.config;
    let e = &r.environment;
    o.push_str("<h3>Environment and configuration</h3>\n<div class=\"facts\">\n<dl>\n");
    let fact = |o: &mut String, k: &str, v: String| {
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
            .map(|s| format!("{} {}", s.product, s.version))
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

// ---------------------------------------------------------------------------
// Analysis JSON, read tolerantly
// ---------------------------------------------------------------------------

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    at(v, path)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite())
}

fn first_num(v: &Value, paths: &[&[&str]]) -> Option<f64> {
    paths.iter().find_map(|p| num(v, p))
}

/// The first object (depth first) stored under a key that `key_ok` likes.
fn find_object<'a>(v: &'a Value, key_ok: &dyn Fn(&str) -> bool) -> Option<&'a Value> {
    let map = v.as_object()?;
    for (k, child) in map {
        if child.is_object() && key_ok(&k.to_ascii_lowercase()) {
            return Some(child);
        }
    }
    map.values().find_map(|c| find_object(c, key_ok))
}

/// Where throughput stops scaling, on the swept parameter's axis.
pub fn throughput_knee(analysis: &Value) -> Option<f64> {
    first_num(
        analysis,
        &[
            &["knee", "x"],
            &["throughput_knee", "x"],
            &["knee", "marginal", "x"],
            &["knee", "marginal_gain", "x"],
            &["marginal_knee", "x"],
            &["scaling", "knee", "x"],
            &["knee", "value"],
        ],
    )
    .or_else(|| {
        find_object(analysis, &|k| k.contains("knee") && !k.contains("latency"))
            .and_then(|o| first_num(o, &[&["x"], &["value"]]))
    })
    .or_else(|| num(analysis, &["knee"]))
}

/// Where p99 starts to climb, in throughput.
pub fn latency_knee(analysis: &Value) -> Option<f64> {
    let obj = at(analysis, &["latency_knee"])
        .or_else(|| at(analysis, &["knee", "latency"]))
        .or_else(|| find_object(analysis, &|k| k.contains("knee") && k.contains("latency")))?;
    first_num(obj, &[&["crossing_throughput"], &["throughput"], &["x"]])
}

/// Universal Scalability Law parameters (λ, σ, κ), if fitted.
pub fn usl(analysis: &Value) -> Option<(f64, f64, f64)> {
    let obj = at(analysis, &["usl"])
        .or_else(|| at(analysis, &["usl_fit"]))
        .or_else(|| at(analysis, &["knee", "usl"]))
        .or_else(|| find_object(analysis, &|k| k.contains("usl")))?;
    Some((
        num(obj, &["lambda"])?,
        num(obj, &["sigma"])?,
        num(obj, &["kappa"])?,
    ))
}

fn usl_at(m: (f64, f64, f64), n: f64) -> f64 {
    let (l, s, k) = m;
    l * n / (1.0 + s * (n - 1.0) + k * n * (n - 1.0))
}

/// The highest rate that met the SLA in a findmax search.
fn findmax_best(s: &SweepResult) -> Option<f64> {
    first_num(
        &s.analysis,
        &[
            &["best_rate"],
            &["max_rate"],
            &["best", "rate"],
            &["best", "value"],
            &["result", "rate"],
            &["best"],
        ],
    )
    .or_else(|| {
        s.points
            .iter()
            .filter(|p| p.passed == Some(true))
            .map(|p| p.value)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    })
}

/// The SLA's latency bound (ms) and a label for it, e.g. `SLA p99 ≤ 10 ms`.
fn sla_line(analysis: &Value) -> Option<(f64, String)> {
    let bound = first_num(
        analysis,
        &[
            &["sla", "bound_ms"],
            &["sla", "p99_ms"],
            &["sla", "latency_ms"],
            &["sla_ms"],
        ],
    )?;
    let pct = match at(analysis, &["sla", "percentile"]) {
        Some(Value::Number(n)) => n.as_f64().map(compact).unwrap_or_else(|| "99".into()),
        Some(Value::String(p)) => p.trim_start_matches('p').to_string(),
        _ => "99".to_string(),
    };
    Some((bound, format!("SLA p{pct} ≤ {} ms", compact(bound))))
}

/// `path = value` lines of a JSON document, for the analysis table.
fn flatten(v: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    if out.len() >= 200 {
        return;
    }
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                flatten(c, &join(k), out);
            }
        }
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            out.push((
                prefix.to_string(),
                a.iter().map(json_text).collect::<Vec<_>>().join(", "),
            ));
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                flatten(c, &join(&i.to_string()), out);
            }
        }
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            let text = if n.is_f64() && f.fract() == 0.0 {
                number(f)
            } else if n.is_f64() {
                let s = format!("{f:.4}");
                if f.abs() < 0.01 {
                    format!("{f:.3e}")
                } else {
                    s.trim_end_matches('0').trim_end_matches('.').to_string()
                }
            } else {
                n.to_string()
            };
            out.push((prefix.to_string(), text));
        }
        other => out.push((prefix.to_string(), json_text(other))),
    }
}

// ---------------------------------------------------------------------------
// Sweeps
// ---------------------------------------------------------------------------

/// Per-sweep choice of throughput unit: events (TPS) unless the analysis
/// numbers are clearly in operations.
struct Unit {
    ops: bool,
    name: &'static str,
}

fn sweep_unit(s: &SweepResult) -> Unit {
    let pts: Vec<&SweepPoint> = s.points.iter().filter(|p| !p.runs.is_empty()).collect();
    let first = pts.first().and_then(|p| p.runs.first());
    let txn = first.is_some_and(|r| r.summary.txn_per_sec.is_some());
    let sql = first.is_some_and(|r| r.summary.queries.is_some());
    let fits = |ops: bool| -> Option<bool> {
        let m = usl(&s.analysis)?;
        let errs: Vec<f64> = pts
            .iter()
            .map(|p| {
                let y = if ops {
                    p.mean.ops_per_sec
                } else {
                    p.mean.events_per_sec
                };
                ((usl_at(m, p.value) - y) / y.max(1e-9)).abs()
            })
            .collect();
        Some(!errs.is_empty() && errs.iter().sum::<f64>() / (errs.len() as f64) < 0.5)
    };
    let knee_in = |ops: bool| -> Option<bool> {
        let k = latency_knee(&s.analysis)?;
        let ys: Vec<f64> = pts
            .iter()
            .map(|p| {
                if ops {
                    p.mean.ops_per_sec
                } else {
                    p.mean.events_per_sec
                }
            })
            .collect();
        let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ys.iter().copied().fold(0.0, f64::max);
        Some(k >= lo * 0.5 && k <= hi * 1.5)
    };
    let ops = fits(false) != Some(true)
        && (fits(true) == Some(true)
            || (knee_in(false) == Some(false) && knee_in(true) == Some(true)));
    let name = match (ops, txn, sql) {
        (true, _, true) => "QPS",
        (true, _, false) => "ops/s",
        (false, true, _) => "TPS",
        (false, false, _) => "events/s",
    };
    Unit { ops, name }
}

fn tp(p: &SweepPoint, u: &Unit) -> (f64, f64) {
    if u.ops {
        (p.mean.ops_per_sec, p.spread.ops_per_sec)
    } else {
        (p.mean.events_per_sec, p.spread.events_per_sec)
    }
}

/// Throughput against the parameter (mean ± spread, knee, USL curve), p99
/// against throughput (latency knee), and latency against the parameter.
/// The points that have runs, in order of the swept value.
fn sorted_points(s: &SweepResult) -> Vec<&SweepPoint> {
    let mut pts: Vec<&SweepPoint> = s.points.iter().filter(|p| !p.runs.is_empty()).collect();
    pts.sort_by(|a, b| a.value.total_cmp(&b.value));
    pts
}

pub fn sweep_charts(s: &SweepResult) -> Vec<Chart> {
    let pts = sorted_points(s);
    if pts.is_empty() {
        return Vec::new();
    }
    let u = sweep_unit(s);
    let values: Vec<f64> = pts.iter().map(|p| p.value).collect();
    let param = &s.parameter;
    let findmax = s.kind == SweepKind::Findmax;
    let hollow: Vec<bool> = pts.iter().map(|p| p.passed == Some(false)).collect();
    let x_label = if findmax {
        format!("target {param} (/s)")
    } else {
        param.clone()
    };

    let mut thr = Chart::new(
        format!("Throughput by {param}"),
        parameter_axis(&x_label, &values),
        Axis::from_zero(u.name),
    )
    .describe(format!(
        "Mean {} at each {param}, with ± one standard deviation over repeats.",
        u.name
    ))
    .series(
        Series::new(
            if findmax {
                format!("achieved {}", u.name)
            } else {
                format!("{} (mean ± sd)", u.name)
            },
            pts.iter().map(|p| (p.value, tp(p, &u).0)).collect(),
        )
        .style(Style::LinePoints)
        .errors(pts.iter().map(|p| tp(p, &u).1).collect())
        .hollow(hollow.clone()),
    );
    if findmax {
        thr = thr.series(
            Series::new("target", pts.iter().map(|p| (p.value, p.value)).collect()).dashed(),
        );
        if let Some(best) = findmax_best(s) {
            thr = thr.annotate(Annotation::VLine {
                x: best,
                label: format!("max meeting SLA: {}/s", compact(best)),
            });
        }
    } else {
        if let Some(m) = usl(&s.analysis) {
            let (lo, hi) = (
                values.iter().copied().fold(f64::INFINITY, f64::min),
                values.iter().copied().fold(0.0, f64::max),
            );
            let log = geometric(&values);
            let curve: Vec<(f64, f64)> = (0..=60)
                .map(|i| {
                    let f = i as f64 / 60.0;
                    let n = if log && lo > 0.0 {
                        lo * (hi / lo).powf(f)
                    } else {
                        lo + (hi - lo) * f
                    };
                    (n, usl_at(m, n))
                })
                .filter(|p| p.1.is_finite() && p.1 >= 0.0)
                .collect();
            thr = thr.series(Series::new("USL fit", curve).dashed());
        }
        if let Some(k) = throughput_knee(&s.analysis) {
            thr = thr.annotate(Annotation::VLine {
                x: k,
                label: format!("knee: {param} {}", compact(k)),
            });
        }
    }

    let by_tp = |f: fn(&SweepPoint) -> f64| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = pts.iter().map(|p| (tp(p, &u).0, f(p))).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let mut order: Vec<&&SweepPoint> = pts.iter().collect();
    order.sort_by(|a, b| tp(a, &u).0.total_cmp(&tp(b, &u).0));
    let series = vec![
        Series::new("p50", by_tp(|p| p.mean.p50_ms)).style(Style::LinePoints),
        Series::new("p95", by_tp(|p| p.mean.p95_ms)).style(Style::LinePoints),
        Series::new("p99 (mean ± sd)", by_tp(|p| p.mean.p99_ms))
            .style(Style::LinePoints)
            .errors(order.iter().map(|p| p.spread.p99_ms).collect())
            .hollow(order.iter().map(|p| p.passed == Some(false)).collect()),
    ];
    let y = latency_axis_for(&series);
    let mut lat = Chart::new(
        format!("Latency against throughput ({})", u.name),
        Axis::from_zero(u.name),
        y,
    )
    .describe("Each point is one step of the sweep; latency climbs where the system saturates.");
    lat.series = series;
    if let Some(k) = latency_knee(&s.analysis) {
        lat = lat.annotate(Annotation::VLine {
            x: k,
            label: format!("p99 knee ≈ {} {}", si(k), u.name),
        });
    }
    if let Some((bound, label)) = sla_line(&s.analysis) {
        lat = lat.annotate(Annotation::HLine { y: bound, label });
    }

    let per_param = |f: fn(&SweepPoint) -> f64| -> Vec<(f64, f64)> {
        pts.iter().map(|p| (p.value, f(p))).collect()
    };
    let series = vec![
        Series::new("p50", per_param(|p| p.mean.p50_ms)).style(Style::LinePoints),
        Series::new("p95", per_param(|p| p.mean.p95_ms)).style(Style::LinePoints),
        Series::new("p99", per_param(|p| p.mean.p99_ms))
            .style(Style::LinePoints)
            .errors(pts.iter().map(|p| p.spread.p99_ms).collect()),
    ];
    let y = latency_axis_for(&series);
    let mut by_param = Chart::new(
        format!("Latency by {param}"),
        parameter_axis(&x_label, &values),
        y,
    );
    by_param.series = series;
    if let Some(k) = throughput_knee(&s.analysis).filter(|_| !findmax) {
        by_param = by_param.annotate(Annotation::VLine {
            x: k,
            label: format!("knee: {param} {}", compact(k)),
        });
    }
    vec![thr, lat, by_param]
}

/// At most `n` items, evenly spread, first and last included.
fn spread_pick<T>(items: &[T], n: usize) -> Vec<&T> {
    if items.len() <= n || n < 2 {
        return items.iter().collect();
    }
    let mut idx: Vec<usize> = (0..n).map(|i| i * (items.len() - 1) / (n - 1)).collect();
    idx.dedup();
    idx.into_iter().map(|i| &items[i]).collect()
}

fn point_name(s: &SweepResult, p: &SweepPoint) -> String {
    format!("{} {}", s.parameter, compact(p.value))
}

/// Merged response-time histogram of a point's repeats.
fn point_histogram(p: &SweepPoint) -> Option<Micros> {
    let mut total: Option<Micros> = None;
    for r in &p.runs {
        let Ok(h) = hist::decode(&r.histograms.response) else {
            continue;
        };
        match &mut total {
            None => total = Some(h),
            Some(t) => {
                let _ = t.add(&h);
            }
        }
    }
    total
}

fn mean_cpu(p: &SweepPoint, f: &dyn Fn(&ResourceSample) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = p
        .runs
        .iter()
        .flat_map(|r| measured(&r.resources.samples))
        .filter_map(f)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn sweep_section(o: &mut String, idx: usize, name: &str, s: &SweepResult) {
    let _ = writeln!(o, "<section class=\"input\" id=\"input-{idx}\">");
    let _ = writeln!(
        o,
        "<h2>{}: {} {}</h2>",
        h(name),
        h(&table::sweep_title(s)),
        status_badge(s.complete)
    );
    chips(o, &s.labels);
    let first = s.points.iter().find_map(|p| p.runs.first());
    let _ = writeln!(
        o,
        "<p class=\"meta\">{} point{}, {} run{} each{} · started {} · ended {}</p>",
        s.points.len(),
        if s.points.len() == 1 { "" } else { "s" },
        s.repeat,
        if s.repeat == 1 { "" } else { "s" },
        first
            .map(|r| format!(" · {} on {}", h(&r.config.workload), h(&r.config.target)))
            .unwrap_or_default(),
        h(&s.started_at),
        h(&s.ended_at)
    );
    if !s.complete {
        o.push_str("<p class=\"note\"><strong>Incomplete sweep:</strong> a step did not run to completion; later points are missing.</p>\n");
    }

    o.push_str("<h3>Findings</h3>\n");
    if s.findings.is_empty() {
        o.push_str("<p class=\"muted\">No findings were recorded.</p>\n");
    } else {
        o.push_str("<ul class=\"findings\">\n");
        for f in &s.findings {
            let _ = writeln!(o, "<li>{}</li>", h(f));
        }
        o.push_str("</ul>\n");
    }

    o.push_str("<h3>Scaling</h3>\n");
    let sc = sweep_charts(s);
    if sc.is_empty() {
        o.push_str("<p class=\"muted\">No point has a run.</p>\n");
    }
    charts(o, &sc);

    // Points table.
    o.push_str("<h3>Points</h3>\n<div class=\"scroll\"><table><thead><tr>");
    let u = sweep_unit(s);
    let findmax = s.kind == SweepKind::Findmax;
    let mut cols: Vec<(String, bool)> = vec![
        (s.parameter.clone(), true),
        ("runs".into(), true),
        ("TPS".into(), true),
        ("QPS".into(), true),
        ("p50 ms".into(), true),
        ("p95 ms".into(), true),
        ("p99 ms".into(), true),
        ("p99.9 ms".into(), true),
        ("errors".into(), true),
    ];
    if findmax {
        cols.push(("SLA".into(), false));
    }
    cols.push(("status".into(), false));
    for (c, n) in &cols {
        let _ = write!(
            o,
            "<th scope=\"col\"{}>{}</th>",
            if *n { " class=\"n\"" } else { "" },
            h(c)
        );
    }
    o.push_str("</tr></thead><tbody>\n");
    let mut sorted: Vec<&SweepPoint> = s.points.iter().collect();
    sorted.sort_by(|a, b| a.value.total_cmp(&b.value));
    for p in sorted {
        let r = Row::of_point(name, s, p);
        let _ = write!(
            o,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
            number(p.value),
            r.runs,
            with_sd(r.tps, r.tps_sd, 2),
            with_sd(r.qps, r.qps_sd, 2),
            ms(r.p50_ms),
            ms(r.p95_ms),
            with_sd(r.p99_ms, p.spread.p99_ms, 2),
            ms(r.p999_ms),
            grouped(r.errors, if r.errors.fract() == 0.0 { 0 } else { 2 })
        );
        if findmax {
            let _ = write!(
                o,
                "<td>{}</td>",
                match r.passed {
                    Some(true) => "met",
                    Some(false) => "missed",
                    None => "",
                }
            );
        }
        let _ = writeln!(o, "<td>{}</td></tr>", status_badge(r.complete));
    }
    o.push_str("</tbody></table></div>\n");

    // Per-point time series and spectra.
    let pts = sorted_points(s);
    let shown = spread_pick(&pts, 10);
    if !shown.is_empty() {
        o.push_str("<h3>Over time, per point</h3>\n");
        if shown.len() < pts.len() {
            let _ = writeln!(
                o,
                "<p class=\"muted\">Showing {} of {} points (the first run of each).</p>",
                shown.len(),
                pts.len()
            );
        } else if s.repeat > 1 {
            o.push_str("<p class=\"muted\">The first run of each point.</p>\n");
        }
        let mut thr = Chart::new(
            format!("{} over time", u.name),
            time_axis(),
            Axis::from_zero(u.name),
        );
        let mut p99 = Chart::new(
            "p99 latency over time",
            time_axis(),
            Axis::from_zero("p99 latency (ms)"),
        );
        for p in &shown {
            let r = &p.runs[0];
            let name = point_name(s, p);
            thr = thr.series(Series::new(
                name.clone(),
                charted(&r.intervals)
                    .iter()
                    .map(|i| {
                        (
                            i.t_s,
                            if u.ops {
                                i.ops_per_sec
                            } else {
                                i.events_per_sec
                            },
                        )
                    })
                    .collect(),
            ));
            p99 = p99.series(Series::new(
                name,
                charted(&r.intervals)
                    .iter()
                    .map(|i| (i.t_s, i.latency_ms.p99))
                    .collect(),
            ));
        }
        let mut spectra = Vec::new();
        for p in &shown {
            if let Some(hg) = point_histogram(p) {
                spectra.push(Series::new(point_name(s, p), spectrum(&hg)));
            }
        }
        let mut list = vec![thr, p99];
        if spectra.iter().any(|s| !s.points.is_empty()) {
            list.push(spectrum_chart("Latency by percentile, per point", spectra));
        }
        charts(o, &list);
    }

    // Resources per point.
    let any_samples = pts.iter().any(|p| {
        p.runs
            .iter()
            .any(|r| !measured(&r.resources.samples).is_empty())
    });
    if any_samples {
        o.push_str("<h3>Resources per point</h3>\n");
        let values: Vec<f64> = pts.iter().map(|p| p.value).collect();
        let x_label = if findmax {
            format!("target {} (/s)", s.parameter)
        } else {
            s.parameter.clone()
        };
        let mut cpu = Chart::new(
            format!("Mean CPU by {}", s.parameter),
            parameter_axis(&x_label, &values),
            Axis::from_zero("CPU (% of one core)"),
        );
        type Pick = fn(&ResourceSample) -> Option<f64>;
        let picks: [(&str, Pick); 3] = [
            ("client (loadcell)", |r| Some(r.client_cpu_pct)),
            ("host (all processes)", |r| Some(r.host_cpu_pct)),
            ("server process", |r| r.server_cpu_pct),
        ];
        for (label, f) in picks {
            let series: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|p| mean_cpu(p, &f).map(|v| (p.value, v)))
                .collect();
            if !series.is_empty() {
                cpu = cpu.series(Series::new(label, series).style(Style::LinePoints));
            }
        }
        charts(o, &[cpu]);
        // Each distinct hint once, with the points that gave it.
        let mut hints: Vec<(&str, Vec<String>)> = Vec::new();
        for p in &pts {
            let Some(b) = p
                .runs
                .iter()
                .find_map(|r| r.resources.bottleneck.as_deref())
            else {
                continue;
            };
            match hints.iter_mut().find(|(hint, _)| *hint == b) {
                Some((_, at)) => at.push(compact(p.value)),
                None => hints.push((b, vec![compact(p.value)])),
            }
        }
        if !hints.is_empty() {
            o.push_str("<p><strong>Bottleneck hints:</strong></p>\n<ul class=\"findings\">\n");
            for (b, at) in hints {
                let _ = writeln!(
                    o,
                    "<li><strong>{} {}</strong>: {}</li>",
                    h(&s.parameter),
                    h(&at.join(", ")),
                    h(b)
                );
            }
            o.push_str("</ul>\n");
        }
    }

    // Analysis numbers.
    let mut flat = Vec::new();
    flatten(&s.analysis, "", &mut flat);
    flat.retain(|(k, _)| !k.is_empty());
    if !flat.is_empty() {
        o.push_str("<h3>Analysis</h3>\n<div class=\"scroll\"><table><thead><tr><th scope=\"col\">key</th><th scope=\"col\">value</th></tr></thead><tbody>\n");
        for (k, v) in flat {
            let _ = writeln!(o, "<tr><td>{}</td><td>{}</td></tr>", h(&k), h(&v));
        }
        o.push_str("</tbody></table></div>\n");
    }

    if let Some(r) = first {
        environment(o, r, &s.command);
        o.push_str("<p class=\"muted\">Environment and configuration of the first run; the swept option differs per point.</p>\n");
    } else if !s.command.is_empty() {
        let _ = writeln!(
            o,
            "<p>Command line:</p>\n<pre><code>{}</code></pre>",
            h(&shell_join(&s.command))
        );
    }
    o.push_str("</section>\n");
}

// ---------------------------------------------------------------------------
// Comparisons
// ---------------------------------------------------------------------------

/// `instance=2c8g`, `instance=–` for a run without it, or the file name.
fn key_label(k: &str, v: &str) -> String {
    match (k, v) {
        ("file", _) => v.to_string(),
        (_, "") => format!("{k}=–"),
        _ => format!("{k}={v}"),
    }
}

fn compare_runs_section(o: &mut String, inputs: &[Input], runs: &[(usize, &Input, &RunResult)]) {
    o.push_str("<section id=\"compare-runs\">\n<h2>Runs compared</h2>\n");
    let tables = table::tables(inputs);
    let Some(t) = tables
        .into_iter()
        .find(|t| t.rows.iter().all(|r| r.1.point.is_none()))
    else {
        o.push_str("</section>\n");
        return;
    };
    // x: the last numeric key, else the last key as categories; series:
    // the other keys' values.
    let numeric = |i: usize| t.rows.iter().all(|r| r.0[i].parse::<f64>().is_ok());
    let xi = (0..t.keys.len())
        .rev()
        .find(|&i| numeric(i) && t.keys[i] != "file")
        .unwrap_or(t.keys.len() - 1);
    let x_key = t.keys[xi].clone();
    let is_num = numeric(xi);
    let mut cats: Vec<String> = t.rows.iter().map(|r| r.0[xi].clone()).collect();
    cats.sort_by(|a, b| natural_cmp(a, b));
    cats.dedup();
    let xval = |r: &(Vec<String>, Row)| -> f64 {
        if is_num {
            r.0[xi].parse().unwrap_or(0.0)
        } else {
            cats.iter().position(|c| *c == r.0[xi]).unwrap_or(0) as f64
        }
    };
    let group_name = |r: &(Vec<String>, Row)| -> String {
        t.keys
            .iter()
            .zip(&r.0)
            .enumerate()
            .filter(|(i, _)| *i != xi)
            .map(|(_, (k, v))| key_label(k, v))
            .collect::<Vec<_>>()
            .join(", ")
    };
    type Keyed = (Vec<String>, Row);
    let mut groups: Vec<(String, Vec<&Keyed>)> = Vec::new();
    for r in &t.rows {
        let g = group_name(r);
        match groups.iter_mut().find(|(n, _)| *n == g) {
            Some((_, v)) => v.push(r),
            None => groups.push((g, vec![r])),
        }
    }
    // Keys that merely rename the x value (one run per group) make no
    // lines of their own: draw one line through every run.
    if groups.len() > 1 && groups.iter().all(|(_, v)| v.len() == 1) {
        groups = vec![(String::new(), t.rows.iter().collect())];
    }
    let x_axis = || {
        if is_num {
            let v: Vec<f64> = t.rows.iter().map(&xval).collect();
            parameter_axis(&x_key, &v)
        } else {
            category_axis(&x_key, &cats)
        }
    };
    let txn = t.rows.iter().any(|r| r.1.transactional);
    let sql = t.rows.iter().any(|r| r.1.sql);
    let ev_name = if txn { "TPS" } else { "events/s" };
    let ops_name = if sql { "QPS" } else { "ops/s" };
    let line = |f: fn(&Row) -> f64, g: &[&(Vec<String>, Row)]| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = g.iter().map(|r| (xval(r), f(&r.1))).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let name = |g: &str, fallback: &str| {
        if g.is_empty() {
            fallback.to_string()
        } else {
            g.to_string()
        }
    };
    let mut list = Vec::new();
    let mut c = Chart::new(
        format!("{ev_name} by {x_key}"),
        x_axis(),
        Axis::from_zero(ev_name),
    );
    for (g, rows) in &groups {
        c = c.series(Series::new(name(g, ev_name), line(|r| r.tps, rows)).style(Style::LinePoints));
    }
    list.push(c);
    if t.rows
        .iter()
        .any(|r| (r.1.qps - r.1.tps).abs() > 1e-9 * r.1.qps.abs().max(1.0))
    {
        let mut c = Chart::new(
            format!("{ops_name} by {x_key}"),
            x_axis(),
            Axis::from_zero(ops_name),
        );
        for (g, rows) in &groups {
            c = c.series(
                Series::new(name(g, ops_name), line(|r| r.qps, rows)).style(Style::LinePoints),
            );
        }
        list.push(c);
    }
    let mut c = Chart::new(
        format!("Latency by {x_key}"),
        x_axis(),
        Axis::from_zero("latency (ms)"),
    );
    if groups.len() == 1 {
        let rows = &groups[0].1;
        c = c
            .series(Series::new("p50", line(|r| r.p50_ms, rows)).style(Style::LinePoints))
            .series(Series::new("p95", line(|r| r.p95_ms, rows)).style(Style::LinePoints))
            .series(Series::new("p99", line(|r| r.p99_ms, rows)).style(Style::LinePoints));
    } else {
        c.title = format!("p99 latency by {x_key}");
        for (g, rows) in &groups {
            c = c.series(
                Series::new(name(g, "p99"), line(|r| r.p99_ms, rows)).style(Style::LinePoints),
            );
        }
    }
    list.push(c);
    // Overlaid spectra, in table order, named by their keys.
    let mut spectra = Vec::new();
    for (keys, row) in spread_pick(&t.rows, 10).into_iter().map(|r| (&r.0, &r.1)) {
        let Some(run) = runs.iter().find(|r| r.1.name == row.source).map(|r| r.2) else {
            continue;
        };
        if let Ok(hg) = hist::decode(&run.histograms.response) {
            let label = t
                .keys
                .iter()
                .zip(keys)
                .map(|(k, v)| key_label(k, v))
                .collect::<Vec<_>>()
                .join(", ");
            spectra.push(Series::new(label, spectrum(&hg)));
        }
    }
    if spectra.iter().any(|s| !s.points.is_empty()) {
        list.push(spectrum_chart("Latency by percentile, all runs", spectra));
    }
    charts(o, &list);
    o.push_str("</section>\n");
}

type SweepEntry<'a> = (usize, &'a Input, &'a SweepResult);

/// Parameters swept by two or more sweeps, with those sweeps.
fn sweeps_to_compare<'a>(
    sweeps: &'a [SweepEntry<'a>],
) -> impl Iterator<Item = (String, Vec<&'a SweepEntry<'a>>)> + 'a {
    let mut by_param: Vec<(String, Vec<&SweepEntry>)> = Vec::new();
    for s in sweeps {
        let key = format!("{:?}/{}", s.2.kind, s.2.parameter);
        match by_param.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(s),
            None => by_param.push((key, vec![s])),
        }
    }
    by_param.into_iter().filter(|(_, v)| v.len() > 1)
}

fn compare_sweeps_section(o: &mut String, sweeps: &[SweepEntry]) {
    let groups: Vec<_> = sweeps_to_compare(sweeps).collect();
    if groups.is_empty() {
        return;
    }
    o.push_str("<section id=\"compare-sweeps\">\n<h2>Sweeps compared</h2>\n");
    for (_, group) in groups {
        let param = &group[0].2.parameter;
        let values: Vec<f64> = group
            .iter()
            .flat_map(|s| s.2.points.iter().map(|p| p.value))
            .collect();
        let u = sweep_unit(group[0].2);
        let mut thr = Chart::new(
            format!("{} by {param}", u.name),
            parameter_axis(param, &values),
            Axis::from_zero(u.name),
        );
        let mut lat = Chart::new(
            format!("p99 latency against {}", u.name),
            Axis::from_zero(u.name),
            Axis::from_zero("p99 latency (ms)"),
        );
        for (_, input, s) in &group {
            let label = if s.labels.is_empty() {
                input.name.clone()
            } else {
                s.labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let pts = sorted_points(s);
            thr = thr.series(
                Series::new(
                    redact(&label),
                    pts.iter().map(|p| (p.value, tp(p, &u).0)).collect(),
                )
                .style(Style::LinePoints)
                .errors(pts.iter().map(|p| tp(p, &u).1).collect()),
            );
            let mut l: Vec<(f64, f64)> = pts.iter().map(|p| (tp(p, &u).0, p.mean.p99_ms)).collect();
            l.sort_by(|a, b| a.0.total_cmp(&b.0));
            lat = lat.series(Series::new(redact(&label), l).style(Style::LinePoints));
        }
        charts(o, &[thr, lat]);
    }
    o.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::svg::Scale;
    use serde_json::json;

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
            "MariaDB 10.11.6",
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
        other.analysis = json!({"unexpected": [1, 2, {"deep": "x"}]});
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
        assert!(html.contains("knee: threads 16"));
        assert!(html.contains("p99 knee ≈"));
        assert!(html.contains("USL fit"));
        assert!(html.contains("throughput stops scaling at 16 threads"));
        assert!(html.contains("No findings were recorded."));
        assert!(
            html.contains("(log scale)"),
            "1…64 threads step geometrically"
        );
        assert!(html.contains(" ± "), "spread over repeats");
        assert!(html.contains("Mean CPU by threads"));
        assert!(
            html.contains("unexpected.2.deep"),
            "odd analysis shapes are listed, not fatal"
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
        s.analysis = Value::Null;
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
    fn analysis_is_read_tolerantly() {
        let a = json!({"knee": {"x": 64.0}, "latency_knee": {"throughput": 30000.0}});
        assert_eq!(throughput_knee(&a), Some(64.0));
        assert_eq!(latency_knee(&a), Some(30000.0));
        let b = json!({"scalability": {"marginal_knee": {"x": 32}}, "fits": {"usl": {"lambda": 1.0, "sigma": 0.1, "kappa": 0.0}}});
        assert_eq!(throughput_knee(&b), Some(32.0));
        assert_eq!(usl(&b), Some((1.0, 0.1, 0.0)));
        let c = json!({"knee": null, "latency_knee": "none"});
        assert_eq!(throughput_knee(&c), None);
        assert_eq!(latency_knee(&c), None);
        assert_eq!(usl(&Value::Null), None);
        assert!((usl_at((100.0, 0.0, 0.0), 8.0) - 800.0).abs() < 1e-9);
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
}
