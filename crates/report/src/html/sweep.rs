//! Sweeps and findmax searches: findings, throughput against the swept
//! parameter with its knee, p99 against throughput, per-point detail, and
//! the analysis numbers (the sweep file's typed analysis).

use std::fmt::Write as _;

use loadcell_analysis::usl::UslFit;
use loadcell_record::hist::{self, Micros};
use loadcell_record::resources::ResourceSample;
use loadcell_record::sweep::{SweepKind, SweepPoint, SweepResult};
use serde_json::Value;

use super::*;
use crate::redact::shell_join;
use crate::svg::{si, Annotation, Axis, Chart, Series, Style};
use crate::table::{self, grouped, number, Row};

/// The highest rate that met the SLA in a findmax search.
pub(super) fn findmax_best(s: &SweepResult) -> Option<f64> {
    s.analysis.findmax.as_ref()?.best_rate
}

/// The SLA's latency bound (ms) and a label for it, e.g. `SLA p99 ≤ 10 ms`.
pub(super) fn sla_line(s: &SweepResult) -> Option<(f64, String)> {
    let sla = &s.analysis.findmax.as_ref()?.sla;
    Some((
        sla.bound_ms,
        format!(
            "SLA p{} ≤ {} ms",
            compact(sla.percentile),
            compact(sla.bound_ms)
        ),
    ))
}

/// Where throughput saturates (the last point that scaled), on the swept
/// parameter's axis: the point the findings name.
pub(super) fn throughput_knee(s: &SweepResult) -> Option<f64> {
    s.analysis.saturation_x()
}

/// The highest measured throughput at which p99 still held: the point the
/// findings name, not the interpolated crossing.
pub(super) fn latency_knee(s: &SweepResult) -> Option<f64> {
    s.analysis
        .latency_knee
        .as_ref()
        .map(|k| k.last_ok_throughput)
}

/// `path = value` lines of a JSON document, for the analysis table.
pub(super) fn flatten(v: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
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
pub(super) struct Unit {
    pub(super) ops: bool,
    pub(super) name: &'static str,
}

pub(super) fn sweep_unit(s: &SweepResult) -> Unit {
    let pts: Vec<&SweepPoint> = s.points.iter().filter(|p| !p.runs.is_empty()).collect();
    let first = pts.first().and_then(|p| p.runs.first());
    let txn = first.is_some_and(|r| r.summary.txn_per_sec.is_some());
    let sql = first.is_some_and(|r| r.summary.queries.is_some());
    let fits = |ops: bool| -> Option<bool> {
        let m = s.analysis.usl.as_ref()?.model();
        let errs: Vec<f64> = pts
            .iter()
            .map(|p| {
                let y = if ops {
                    p.mean.ops_per_sec
                } else {
                    p.mean.events_per_sec
                };
                ((m.throughput(p.value) - y) / y.max(1e-9)).abs()
            })
            .collect();
        Some(!errs.is_empty() && errs.iter().sum::<f64>() / (errs.len() as f64) < 0.5)
    };
    let knee_in = |ops: bool| -> Option<bool> {
        let k = latency_knee(s)?;
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

pub(super) fn tp(p: &SweepPoint, u: &Unit) -> (f64, f64) {
    if u.ops {
        (p.mean.ops_per_sec, p.spread.ops_per_sec)
    } else {
        (p.mean.events_per_sec, p.spread.events_per_sec)
    }
}

/// Throughput against the parameter (mean ± spread, knee, USL curve), p99
/// against throughput (latency knee), and latency against the parameter.
/// The points that have runs, in order of the swept value.
pub(super) fn sorted_points(s: &SweepResult) -> Vec<&SweepPoint> {
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
        // Where the SLA's edge lies, 95%: its two ends.
        if let Some([low, high]) = s.analysis.findmax.as_ref().and_then(|f| f.ci95) {
            thr = thr
                .annotate(Annotation::VLine {
                    x: low,
                    label: format!("SLA edge (95%) from {}/s", compact(low.round())),
                })
                .annotate(Annotation::VLine {
                    x: high,
                    label: format!("to {}/s", compact(high.round())),
                });
        }
    } else {
        if let Some(m) = s.analysis.usl.as_ref().map(UslFit::model) {
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
                    (n, m.throughput(n))
                })
                .filter(|p| p.1.is_finite() && p.1 >= 0.0)
                .collect();
            thr = thr.series(Series::new("USL fit", curve).dashed());
        }
        if let Some(k) = throughput_knee(s) {
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
    if let Some(k) = latency_knee(s) {
        lat = lat.annotate(Annotation::VLine {
            x: k,
            label: format!("p99 holds up to {} {}", si(k), u.name),
        });
    }
    if let Some((bound, label)) = sla_line(s) {
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
    if let Some(k) = throughput_knee(s).filter(|_| !findmax) {
        by_param = by_param.annotate(Annotation::VLine {
            x: k,
            label: format!("knee: {param} {}", compact(k)),
        });
    }
    vec![thr, lat, by_param]
}

/// At most `n` items, evenly spread, first and last included.
pub(super) fn spread_pick<T>(items: &[T], n: usize) -> Vec<&T> {
    if items.len() <= n || n < 2 {
        return items.iter().collect();
    }
    let mut idx: Vec<usize> = (0..n).map(|i| i * (items.len() - 1) / (n - 1)).collect();
    idx.dedup();
    idx.into_iter().map(|i| &items[i]).collect()
}

pub(super) fn point_name(s: &SweepResult, p: &SweepPoint) -> String {
    format!("{} {}", s.parameter, compact(p.value))
}

/// Merged response-time histogram of a point's repeats.
pub(super) fn point_histogram(p: &SweepPoint) -> Option<Micros> {
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

pub(super) fn mean_cpu(p: &SweepPoint, f: &dyn Fn(&ResourceSample) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = p
        .runs
        .iter()
        .flat_map(|r| measured(&r.resources.samples))
        .filter_map(f)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

pub(super) fn sweep_section(o: &mut String, idx: usize, name: &str, s: &SweepResult) {
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
    header_cells(o, cols.iter().map(|(c, n)| (c.as_str(), *n)));
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
            let _ = write!(o, "<td>{}</td>", r.sla_cell());
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
    let analysis = serde_json::to_value(&s.analysis).expect("analysis types always serialize");
    flatten(&analysis, "", &mut flat);
    flat.retain(|(k, _)| !k.is_empty());
    if !flat.is_empty() {
        o.push_str("<h3>Analysis</h3>\n<div class=\"scroll\"><table><thead><tr><th scope=\"col\">key</th><th scope=\"col\">value</th></tr></thead><tbody>\n");
        for (k, v) in flat {
            let _ = writeln!(o, "<tr><td>{}</td><td>{}</td></tr>", h(&k), h(&v));
        }
        o.push_str("</tbody></table></div>\n");
    }

    if let Some(r) = first {
        environment(o, r, &s.command, false);
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
