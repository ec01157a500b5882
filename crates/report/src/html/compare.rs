//! Comparisons: plain runs side by side (trends against the label or
//! thread count that differs, overlaid spectra) and sweeps over the same
//! parameter.

use loadcell_record::hist;
use loadcell_record::result::RunResult;
use loadcell_record::sweep::SweepResult;

use super::*;
use crate::input::Input;
use crate::redact::redact;
use crate::svg::{Axis, Chart, Series, Style};
use crate::table::{self, natural_cmp, Row};

/// `instance=2c8g`, `instance=–` for a run without it, or the file name.
pub(super) fn key_label(k: &str, v: &str) -> String {
    match (k, v) {
        ("file", _) => v.to_string(),
        (_, "") => format!("{k}=–"),
        _ => format!("{k}={v}"),
    }
}

pub(super) fn compare_runs_section(
    o: &mut String,
    inputs: &[Input],
    runs: &[(usize, &Input, &RunResult)],
) {
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
pub(super) fn sweeps_to_compare<'a>(
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

pub(super) fn compare_sweeps_section(o: &mut String, sweeps: &[SweepEntry]) {
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
