//! The capacity and cost plan (scenario S8) as views: a text report for
//! the terminal, and a section of the HTML report with monthly cost against
//! target throughput per instance type. Both show the same table.

use std::fmt::Write as _;

use loadcell_analysis::plan::{InstancePlan, OperatingPoint, Plan, Scaling};
use serde::Serialize;

use crate::html::{charts, h};
use crate::svg::{si, Annotation, Axis, Chart, Series, Style};
use crate::table::{grouped, number};

/// A plan with what the views show beside it.
#[derive(Debug, Clone, Serialize)]
pub struct PlanView {
    /// Unit of the measured throughputs and the target: `TPS` or `ops/s`.
    pub unit: String,
    pub plan: Plan,
    /// One per `plan.instances`, in the same order.
    pub instances: Vec<InstanceFacts>,
    /// The `--threshold` gates judged on the plan's cheapest answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<loadcell_record::result::GateVerdict>,
}

/// An instance type's price-file entry and measurements.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceFacts {
    pub name: String,
    pub vcpus: u32,
    pub memory_gib: f64,
    /// The point each measured node count is planned on.
    pub measured: Vec<OperatingPoint>,
    /// The result files the measurements come from.
    pub files: Vec<String>,
}

/// Steps drawn per instance type in the cost chart.
const CHART_STEPS: usize = 300;

fn dollars(v: f64) -> String {
    if v < 100.0 {
        format!("${v:.2}")
    } else {
        format!("${}", grouped(v, 0))
    }
}

fn node_counts(measured: &[OperatingPoint]) -> String {
    let n: Vec<String> = measured.iter().map(|m| number(m.point.nodes)).collect();
    match n.as_slice() {
        [] => "–".into(),
        [first, .., last] if n.len() > 5 => format!("{first}–{last} ({})", n.len()),
        _ => n.join(", "),
    }
}

fn scaling(p: &InstancePlan) -> String {
    let m = &p.model;
    match (p.scaling, &p.fit) {
        (Scaling::Fit, Some(fit)) => format!(
            "USL fit σ={:.3} κ={:.4}, R² {:.3}",
            m.sigma, m.kappa, fit.r_squared
        ),
        (Scaling::Linear, _) => "linear (stated)".into(),
        _ => format!("USL σ={} κ={} (stated)", m.sigma, m.kappa),
    }
}

fn notes(p: &InstancePlan, unit: &str) -> String {
    let mut n = Vec::new();
    if p.unreachable {
        n.push(match (p.peak_throughput, p.peak_nodes) {
            (Some(x), Some(at)) => {
                format!(
                    "beyond the peak ({} {unit} at {})",
                    si(x),
                    loadcell_core::words::counted(at.round() as u64, "node")
                )
            }
            (Some(x), None) => format!("beyond the limit ({} {unit})", si(x)),
            _ => "unreachable".into(),
        });
    }
    if p.extrapolated {
        n.push("extrapolated".into());
    }
    if p.beyond_linear_range {
        n.push("past linear range".into());
    }
    if let (Some(false), Some(p99)) = (p.latency_ok, p.p99_ms) {
        n.push(format!("p99 {p99:.2} ms over bound"));
    }
    n.join("; ")
}

/// The plan table: a header, then one row per instance type.
pub fn rows(v: &PlanView) -> (Vec<String>, Vec<Vec<String>>) {
    let header = [
        "instance",
        "vCPUs",
        "GiB",
        "$/hour",
        "measured nodes",
        "scaling",
        "linear to",
        "nodes",
        &format!("capacity {}", v.unit),
        "$/month",
        &format!("$/month per 1k {}", v.unit),
        "notes",
    ]
    .map(String::from)
    .to_vec();
    let rows = v
        .plan
        .instances
        .iter()
        .zip(&v.instances)
        .map(|(p, f)| {
            let opt = |x: Option<String>| x.unwrap_or_else(|| "–".into());
            vec![
                p.name.clone(),
                f.vcpus.to_string(),
                number(f.memory_gib),
                format!("{:.4}", p.price_per_hour)
                    .trim_end_matches('0')
                    .trim_end_matches('.')
                    .to_string(),
                node_counts(&f.measured),
                scaling(p),
                if p.linear_range.efficiency.len() > 1 {
                    number(p.linear_range.to_nodes)
                } else {
                    "–".into()
                },
                opt(p.nodes.map(|n| n.to_string())),
                opt(p.capacity.map(|c| grouped(c, 0))),
                opt(p.monthly_cost.map(dollars)),
                opt(p.cost_per_1k_ops.map(dollars)),
                notes(p, &v.unit),
            ]
        })
        .collect();
    (header, rows)
}

/// Columns whose cells are right-aligned.
const NUMERIC: [bool; 12] = [
    false, true, true, true, false, false, true, true, true, true, true, false,
];

/// The plan's target as one phrase: `1,000,000 ops/s with 30% headroom,
/// p99 ≤ 2 ms`.
pub(crate) fn goal(v: &PlanView) -> String {
    let t = &v.plan.target;
    let mut s = format!(
        "{} {} with {} headroom",
        grouped(t.throughput, 0),
        v.unit,
        headroom(t.headroom)
    );
    if let Some(b) = t.max_p99_ms {
        let _ = write!(s, ", p99 ≤ {} ms", number(b));
    }
    s
}

fn aligned(o: &mut String, header: &[String], rows: &[Vec<String>], numeric: &[bool]) {
    let width = |i: usize| {
        std::iter::once(header)
            .chain(rows.iter().map(|r| r.as_slice()))
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = " ".repeat(widths[i] - c.chars().count());
                if numeric[i] {
                    format!("{pad}{c}")
                } else {
                    format!("{c}{pad}")
                }
            })
            .collect();
        let _ = writeln!(o, "  {}", cells.join("  ").trim_end());
    }
}

fn ranking(v: &PlanView, names: &[String], cost: impl Fn(&InstancePlan) -> Option<f64>) -> String {
    if names.is_empty() {
        return "none".into();
    }
    names
        .iter()
        .filter_map(|n| v.plan.instances.iter().find(|p| &p.name == n))
        .map(|p| format!("{} ({})", p.name, cost(p).map(dollars).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The plan for a terminal: target, table, sentences, rankings, and the
/// measured points behind it.
pub fn text(v: &PlanView) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Capacity plan for {}\n", goal(v));
    let (header, rows) = rows(v);
    aligned(&mut o, &header, &rows, &NUMERIC);
    o.push('\n');
    for s in v.plan.sentences(&v.unit) {
        let _ = writeln!(o, "  {s}");
    }
    let _ = writeln!(
        o,
        "\n  ranked by $/month: {}",
        ranking(v, &v.plan.by_monthly_cost, |p| p.monthly_cost)
    );
    let _ = writeln!(
        o,
        "  ranked by $/month per 1k {}: {}",
        v.unit,
        ranking(v, &v.plan.by_cost_per_1k_ops, |p| p.cost_per_1k_ops)
    );
    let _ = writeln!(o, "\nMeasured (per node count, the setting planned on):");
    let (header, rows) = measured_rows(v);
    aligned(&mut o, &header, &rows, &MEASURED_NUMERIC);
    if !v.gates.is_empty() {
        let _ = writeln!(o, "\n{}", crate::text::gates(&v.gates));
    }
    o
}

const MEASURED_NUMERIC: [bool; 6] = [false, true, true, true, false, true];

fn measured_rows(v: &PlanView) -> (Vec<String>, Vec<Vec<String>>) {
    let header = [
        "instance",
        "nodes",
        v.unit.as_str(),
        "p99 ms",
        "setting",
        "runs",
    ]
    .map(String::from)
    .to_vec();
    let rows = v
        .instances
        .iter()
        .flat_map(|f| {
            f.measured.iter().map(|m| {
                vec![
                    f.name.clone(),
                    number(m.point.nodes),
                    grouped(m.point.throughput, 0),
                    m.point
                        .p99_ms
                        .map(|p| format!("{p:.2}"))
                        .unwrap_or_default(),
                    if m.settings > 1 {
                        format!("{} (best of {})", m.setting, m.settings)
                    } else {
                        m.setting.clone()
                    },
                    m.repeats.to_string(),
                ]
            })
        })
        .collect();
    (header, rows)
}

/// Monthly cost against target throughput, one step line per instance type,
/// from 0 to 1.5 × the target (or each type's peak), with the target marked.
pub fn cost_chart(v: &PlanView) -> Chart {
    let t = &v.plan.target;
    let mut chart = Chart::new(
        "Monthly cost against target throughput",
        Axis::from_zero(format!(
            "target {} (with {} headroom)",
            v.unit,
            headroom(t.headroom)
        )),
        Axis::from_zero("$ per month"),
    )
    .describe(format!(
        "Nodes needed times price, for targets up to {} {}; each step is one more node.",
        si(1.5 * t.throughput),
        v.unit
    ))
    .annotate(Annotation::VLine {
        x: t.throughput,
        label: format!("target {}", si(t.throughput)),
    });
    for p in &v.plan.instances {
        let points = p
            .cost_steps(t.headroom, 1.5 * t.throughput, CHART_STEPS)
            .iter()
            .flat_map(|s| [(s.from, s.monthly_cost), (s.to, s.monthly_cost)])
            .collect();
        chart = chart.series(Series::new(p.name.clone(), points).style(Style::Line));
    }
    chart
}

fn headroom(h: f64) -> String {
    format!("{}%", number((h * 100.0 * 1e6).round() / 1e6))
}

/// The HTML report's section: target, the plan table, the sentences, the
/// cost chart, then the measured points.
pub(crate) fn html_section(o: &mut String, v: &PlanView) {
    o.push_str("<section id=\"plan\">\n<h2>Capacity plan</h2>\n");
    let _ = writeln!(o, "<p>Target: <strong>{}</strong>.</p>", h(&goal(v)));
    html_table(o, rows(v), &NUMERIC);
    o.push_str("<ul class=\"findings\">\n");
    for s in v.plan.sentences(&v.unit) {
        let _ = writeln!(o, "<li>{}</li>", h(&s));
    }
    o.push_str("</ul>\n");
    charts(o, &[cost_chart(v)]);
    o.push_str("<h3>Measured points</h3>\n");
    html_table(o, measured_rows(v), &MEASURED_NUMERIC);
    o.push_str("</section>\n");
}

fn html_table(o: &mut String, (header, rows): (Vec<String>, Vec<Vec<String>>), numeric: &[bool]) {
    let class = |i: usize| if numeric[i] { " class=\"n\"" } else { "" };
    o.push_str("<div class=\"scroll\"><table>\n<thead><tr>");
    for (i, c) in header.iter().enumerate() {
        let _ = write!(o, "<th{}>{}</th>", class(i), h(c));
    }
    o.push_str("</tr></thead>\n<tbody>\n");
    for r in &rows {
        o.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let _ = write!(o, "<td{}>{}</td>", class(i), h(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::input::Input;

    fn view() -> PlanView {
        crate::fixture::plan_view("<big>")
    }

    #[test]
    fn text_has_the_table_sentences_and_rankings() {
        // 125k raw: <big> 4 nodes ($2,920), small 13 nodes ($1,898).
        let t = text(&view());
        assert!(
            t.starts_with("Capacity plan for 100,000 ops/s with 20% headroom, p99 ≤ 2 ms\n"),
            "{t}"
        );
        let big = t.lines().find(|l| l.starts_with("  <big>")).unwrap();
        assert!(
            big.contains(" 4  ") && big.contains("$2,920") && big.contains("extrapolated"),
            "{big}"
        );
        let small = t.lines().find(|l| l.starts_with("  small ")).unwrap();
        assert!(
            small.contains(" 13  ") && small.contains("$1,898"),
            "{small}"
        );
        assert!(
            t.contains("ranked by $/month: small ($1,898), <big> ($2,920)"),
            "{t}"
        );
        assert!(
            t.contains("cheapest for 100k ops/s: small (13 nodes, $1,898/month)"),
            "{t}"
        );
    }

    #[test]
    fn cost_chart_steps_up_per_node() {
        let c = cost_chart(&view());
        assert_eq!(c.series.len(), 2);
        let small = &c.series[1].points;
        // (0, $146) to (8k, $146), then up a node every 8k ops/s.
        assert_eq!(small[0], (0.0, 0.2 * 730.0));
        assert!((small[1].0 - 8_000.0).abs() < 1e-6, "{:?}", small[1]);
        assert!((small.last().unwrap().0 - 150_000.0).abs() < 1e-6);
    }

    #[test]
    fn html_section_is_in_the_report_and_escaped() {
        let inputs = [Input::run("a.json", fixture::run(4, 100.0))];
        let page = crate::html::render_with_plan(&inputs, Some(&view()));
        assert!(page.contains("<a href=\"#plan\">Capacity plan</a>"));
        let at = page.find("<section id=\"plan\">").unwrap();
        assert!(at < page.find("id=\"input-0\"").unwrap());
        let section = &page[at..];
        assert!(section.contains("&lt;big&gt;") && !section.contains("<big>"));
        assert!(section.contains("Monthly cost against target throughput"));
        assert!(!crate::html::render(&inputs).contains("id=\"plan\""));
    }
}
