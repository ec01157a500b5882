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

use loadcell_record::result::RunResult;
use loadcell_record::sweep::SweepResult;

pub use crate::input::Input;
use crate::plan::PlanView;
use crate::redact::redact;
use crate::svg::{escape, si, Annotation, Chart};
use crate::table::{self, grouped, number, Row};

mod charts;
mod compare;
mod run;
mod sweep;
#[cfg(test)]
mod tests;

use charts::*;
pub use charts::{percentile_axis, spectrum};
use compare::*;
use run::*;
pub use run::{resource_charts, time_series_charts};
pub use sweep::sweep_charts;
use sweep::*;

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
/// A page's head up to `<body>`: charset, the policy that nothing is
/// fetched, the stylesheet, and `title`; every loadcell page starts so.
pub fn page_head(title: &str) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    o.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // Nothing may be fetched: no scripts, fonts, images or frames.
    o.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n");
    o.push_str("<meta name=\"generator\" content=\"loadcell\">\n");
    let _ = writeln!(o, "<title>{}</title>", h(title));
    let _ = writeln!(o, "<style>{CSS}</style>\n</head>\n<body>");
    o
}

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
    o.push_str(&page_head(&title));

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
            (Some(r), _) => run_section(&mut o, i, x, r),
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
    header_cells(
        o,
        [
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
        ]
        .into_iter()
        .filter(|c| c.2)
        .map(|(name, numeric, _)| (name, numeric)),
    );
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
                "<tr><td class=\"label\"><a href=\"#input-{anchor}\">{}</a>{}</td>{}{}<td class=\"n\">{}</td>",
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
                r.known(format!("{}×{}", r.threads, r.clients))
            );
            let _ = writeln!(
                o,
                "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"status\">{}{}</td></tr>",
                with_sd(r.tps, r.tps_sd, 2),
                r.known(with_sd(r.qps, r.qps_sd, 2)),
                ms(r.p50_ms),
                ms(r.p95_ms),
                ms(r.p99_ms),
                ms(r.p999_ms),
                r.known(if r.errors.fract() == 0.0 { number(r.errors) } else { grouped(r.errors, 2) }),
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

/// Column headings, numeric ones right-aligned (`class="n"`).
fn header_cells<'a>(o: &mut String, columns: impl IntoIterator<Item = (&'a str, bool)>) {
    for (name, numeric) in columns {
        let class = if numeric { " class=\"n\"" } else { "" };
        let _ = write!(o, "<th scope=\"col\"{class}>{}</th>", h(name));
    }
}
