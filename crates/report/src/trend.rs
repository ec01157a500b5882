//! `loadcell trend`: each series' runs over time, metric by metric, with
//! the change points `loadcell_analysis::changepoint` finds among its
//! trusted runs, the series' own noise beside them, as text, JSON and one
//! self-contained HTML page.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use loadcell_analysis::changepoint::{change_points, ChangePointConfig};
use serde::Serialize;

use crate::html::h;
use crate::svg::{Annotation, Axis, Chart, Series, Style};

/// One run of a series, as the history keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct TrendRun {
    pub started_at: String,
    pub commit: Option<String>,
    pub host: String,
    pub file: String,
    /// Why the run is not trusted (`client_saturated`, `partial`, …):
    /// it is shown, never analysed.
    pub flags: Vec<String>,
    /// Each metric's value: `throughput`, `latency_p50`, …, `server.NAME`.
    pub metrics: BTreeMap<String, f64>,
}

/// Whether more of a metric is better, worse, or neither (a server
/// counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
    Neither,
}

/// Which way is better for `metric`.
pub fn better(metric: &str) -> Better {
    if metric == "throughput" {
        Better::Higher
    } else if metric.starts_with("server.") {
        Better::Neither
    } else {
        Better::Lower
    }
}

/// A change in one metric of a series.
#[derive(Debug, Clone, Serialize)]
pub struct TrendChange {
    /// The 0-based index (among all the series' runs) of the first run
    /// after the change.
    pub at: usize,
    pub metric: String,
    /// The means of the trusted runs before and after it.
    pub before: f64,
    pub after: f64,
    /// `after / before − 1`; absent when `before` is 0.
    pub change: Option<f64>,
    pub p_value: f64,
    /// For the better, for the worse, or neither (a server counter).
    pub regression: bool,
    /// The first run after the change, and its commit.
    pub first_after: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The last run before it.
    pub last_before: String,
}

/// One series' trend.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesTrend {
    pub id: String,
    pub key: String,
    pub runs: Vec<TrendRun>,
    /// Each metric's relative run-to-run spread among the trusted runs
    /// (the noise floor a change must exceed), when it could be measured.
    pub noise: BTreeMap<String, f64>,
    pub change_points: Vec<TrendChange>,
}

/// Every metric any run carries: the headline metrics first, then the
/// server's counters.
fn metric_names(runs: &[TrendRun]) -> Vec<&String> {
    let mut metrics: Vec<&String> = runs
        .iter()
        .flat_map(|r| r.metrics.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    metrics.sort_by_key(|m| (m.starts_with("server."), metric_order(m)));
    metrics
}

/// The analysis of one series: every metric its trusted runs all carry.
pub fn analyse(
    id: &str,
    key: &str,
    runs: Vec<TrendRun>,
    config: &ChangePointConfig,
) -> SeriesTrend {
    let trusted: Vec<usize> = (0..runs.len())
        .filter(|&i| runs[i].flags.is_empty())
        .collect();
    let metrics = metric_names(&runs);
    let mut noise = BTreeMap::new();
    let mut found = Vec::new();
    for metric in metrics {
        let values: Option<Vec<f64>> = trusted
            .iter()
            .map(|&i| runs[i].metrics.get(metric).copied())
            .collect();
        let Some(values) = values else { continue };
        let analysis = change_points(&values, config);
        if let Some(n) = analysis.noise {
            noise.insert(metric.clone(), n);
        }
        for c in analysis.change_points {
            let at = trusted[c.at];
            let worse = match better(metric) {
                Better::Higher => c.after < c.before,
                Better::Lower => c.after > c.before,
                Better::Neither => false,
            };
            found.push(TrendChange {
                at,
                metric: metric.clone(),
                before: c.before,
                after: c.after,
                change: c.change,
                p_value: c.p_value,
                regression: worse,
                first_after: runs[at].started_at.clone(),
                commit: runs[at].commit.clone(),
                last_before: runs[trusted[c.at - 1]].started_at.clone(),
            });
        }
    }
    SeriesTrend {
        id: id.to_string(),
        key: key.to_string(),
        runs,
        noise,
        change_points: found,
    }
}

fn metric_order(m: &str) -> usize {
    const ORDER: [&str; 7] = [
        "throughput",
        "latency_p50",
        "latency_p90",
        "latency_p99",
        "latency_p999",
        "error_rate",
        "client_cpu_us_per_op",
    ];
    ORDER.iter().position(|o| *o == m).unwrap_or(ORDER.len())
}

/// Whether a regression in `metric` fails CI: the system's own numbers
/// (throughput, latency, errors). Client CPU per operation is shown and
/// marked, but it measures the load generator, whose share of a machine
/// moves with whatever else runs there.
pub fn fails_ci(metric: &str) -> bool {
    metric != "client_cpu_us_per_op" && better(metric) != Better::Neither
}

/// The smallest regression CI fails on by default (`trend --min-change`):
/// a shared machine moves a quiet series by a few tenths of a percent
/// from one run to the next, a step the detector rightly finds (0.3% of
/// p90 in this project's CI) but no reader would act on.
pub const CI_MIN_CHANGE: f64 = 0.02;

/// The regressions of at least `min_change` (relative; one from zero
/// always counts) in the metrics that fail CI ([`fails_ci`]) whose first
/// run after the change is among the newest `recent` trusted runs: what
/// `trend --fail-on-change` and `suite run --history` fail on.
pub fn recent_regressions(t: &SeriesTrend, recent: usize, min_change: f64) -> Vec<&TrendChange> {
    let trusted: Vec<usize> = (0..t.runs.len())
        .filter(|&i| t.runs[i].flags.is_empty())
        .collect();
    let from = trusted.len().saturating_sub(recent);
    let newest: Vec<usize> = trusted[from..].to_vec();
    t.change_points
        .iter()
        .filter(|c| c.regression && fails_ci(&c.metric) && newest.contains(&c.at))
        .filter(|c| c.change.is_none_or(|x| x.abs() >= min_change))
        .collect()
}

fn percent(change: Option<f64>) -> String {
    change.map_or("from 0".into(), |c| format!("{:+.1}%", c * 100.0))
}

/// The text `loadcell trend` prints.
pub fn text(series: &[SeriesTrend]) -> String {
    let mut o = String::new();
    for s in series {
        let flagged = s.runs.iter().filter(|r| !r.flags.is_empty()).count();
        let _ = writeln!(o, "{}  [{}]", s.key, s.id);
        let _ = writeln!(
            o,
            "  {} runs, {} to {}{}",
            s.runs.len(),
            s.runs.first().map_or("", |r| &r.started_at),
            s.runs.last().map_or("", |r| &r.started_at),
            if flagged > 0 {
                format!("; {flagged} flagged and left out of the analysis")
            } else {
                String::new()
            }
        );
        for (i, r) in s
            .runs
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.flags.is_empty())
        {
            let _ = writeln!(
                o,
                "  run {i} ({}) flagged: {}",
                r.started_at,
                r.flags.join(", ")
            );
        }
        if s.change_points.is_empty() {
            let _ = writeln!(o, "  no change beyond the noise");
        }
        for c in &s.change_points {
            let _ = writeln!(
                o,
                "  {} {} at run {} ({}{}): {} -> {} ({}, p {:.3}; noise {})",
                if c.regression { "REGRESSION" } else { "change" },
                c.metric,
                c.at,
                c.first_after,
                c.commit
                    .as_ref()
                    .map(|x| format!(", commit {x}"))
                    .unwrap_or_default(),
                crate::svg::si(c.before),
                crate::svg::si(c.after),
                percent(c.change),
                c.p_value,
                s.noise
                    .get(&c.metric)
                    .map_or("unknown".into(), |n| format!("±{:.1}%", n * 100.0)),
            );
        }
    }
    o
}

/// One series as CSV, a run per row (RFC 4180, CRLF): `run, started_at,
/// commit, flags` (`;`-separated, empty when trusted), then every metric any
/// run carries, in the order `text` shows them. Change-point tools that read
/// CSV (Apache Otava's `csv` tests) take it as it is: `started_at` is the
/// time column, `commit` an attribute.
pub fn csv(s: &SeriesTrend) -> String {
    use crate::table::csv_field;
    let metrics = metric_names(&s.runs);
    let mut o = String::from("run,started_at,commit,flags");
    for m in &metrics {
        o.push(',');
        o.push_str(&csv_field(m));
    }
    o.push_str("\r\n");
    for (i, r) in s.runs.iter().enumerate() {
        let _ = write!(
            o,
            "{i},{},{},{}",
            csv_field(&r.started_at),
            csv_field(r.commit.as_deref().unwrap_or("")),
            csv_field(&r.flags.join(";"))
        );
        for m in &metrics {
            o.push(',');
            if let Some(v) = r.metrics.get(*m) {
                let _ = write!(o, "{v}");
            }
        }
        o.push_str("\r\n");
    }
    o
}

/// The trend page: per series, each headline metric over its runs, the
/// change points marked, flagged runs hollow, the noise band dashed.
pub fn html(series: &[SeriesTrend]) -> String {
    let mut o = crate::html::page_head("loadcell trend");
    o.push_str("<header>\n<h1>loadcell trend</h1>\n</header>\n<main>\n");
    for s in series {
        let _ = writeln!(o, "<section>\n<h2>{}</h2>", h(&s.key));
        let _ = writeln!(
            o,
            "<p>{} runs; flagged runs (hollow) are left out of the analysis.</p>",
            s.runs.len()
        );
        let mut charts = Vec::new();
        for metric in [
            "throughput",
            "latency_p50",
            "latency_p99",
            "latency_p999",
            "error_rate",
            "client_cpu_us_per_op",
        ] {
            let points: Vec<(f64, f64)> = s
                .runs
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.metrics.get(metric).map(|v| (i as f64, *v)))
                .collect();
            if points.is_empty() {
                continue;
            }
            let indexes: Vec<usize> = s
                .runs
                .iter()
                .enumerate()
                .filter(|(_, r)| r.metrics.contains_key(metric))
                .map(|(i, _)| i)
                .collect();
            let hollow = indexes
                .iter()
                .map(|&i| !s.runs[i].flags.is_empty())
                .collect();
            let notes = indexes
                .iter()
                .map(|&i| {
                    let r = &s.runs[i];
                    let mut n = r.started_at.clone();
                    if let Some(c) = &r.commit {
                        n += &format!(", commit {c}");
                    }
                    if !r.flags.is_empty() {
                        n += &format!(", flagged: {}", r.flags.join(", "));
                    }
                    n
                })
                .collect();
            let mut chart = Chart::new(metric, Axis::linear("run"), Axis::from_zero(metric));
            chart.description = format!("{metric} over the series' runs");
            chart.series.push(
                Series::new(metric, points.clone())
                    .style(Style::LinePoints)
                    .hollow(hollow)
                    .notes(notes),
            );
            if let Some(n) = s.noise.get(metric) {
                let trusted: Vec<f64> = points
                    .iter()
                    .zip(&indexes)
                    .filter(|(_, &i)| s.runs[i].flags.is_empty())
                    .map(|((_, v), _)| *v)
                    .collect();
                let mut sorted = trusted.clone();
                sorted.sort_by(f64::total_cmp);
                if let Some(&median) = sorted.get(sorted.len() / 2) {
                    let (x0, x1) = (0.0, (s.runs.len().max(2) - 1) as f64);
                    for (name, y) in [("noise band", median * (1.0 + n)), ("", median * (1.0 - n))]
                    {
                        chart
                            .series
                            .push(Series::new(name, vec![(x0, y), (x1, y)]).dashed());
                    }
                }
            }
            for c in s.change_points.iter().filter(|c| c.metric == metric) {
                chart.annotations.push(Annotation::VLine {
                    x: c.at as f64 - 0.5,
                    label: format!(
                        "{} {}",
                        percent(c.change),
                        if c.regression { "regression" } else { "change" }
                    ),
                });
            }
            charts.push(chart);
        }
        crate::html::charts(&mut o, &charts);
        if !s.change_points.is_empty() {
            o.push_str("<table>\n<tr><th>metric</th><th>first run after</th><th>commit</th><th>before</th><th>after</th><th>change</th><th>p</th></tr>\n");
            for c in &s.change_points {
                let _ = writeln!(
                    o,
                    "<tr><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{:.3}</td></tr>",
                    h(&c.metric),
                    c.at,
                    h(&c.first_after),
                    h(c.commit.as_deref().unwrap_or("–")),
                    h(&crate::svg::si(c.before)),
                    h(&crate::svg::si(c.after)),
                    h(&percent(c.change)),
                    if c.regression { " (regression)" } else { "" },
                    c.p_value
                );
            }
            o.push_str("</table>\n");
        }
        o.push_str("</section>\n");
    }
    o.push_str("</main>\n</body>\n</html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(values: &[f64], flagged: &[usize]) -> Vec<TrendRun> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| TrendRun {
                started_at: format!("2026-11-{:02}T00:00:00Z", i + 1),
                commit: Some(format!("c{i}")),
                host: "h".into(),
                file: format!("r{i}.json"),
                flags: if flagged.contains(&i) {
                    vec!["client_saturated".into()]
                } else {
                    Vec::new()
                },
                metrics: BTreeMap::from([
                    ("latency_p99".to_string(), v),
                    ("throughput".to_string(), 1000.0 / v),
                ]),
            })
            .collect()
    }

    /// Deterministic noise of about ±2%.
    fn noisy(n: usize, level: f64, seed: u64) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                level * (1.0 + 0.04 * ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5))
            })
            .collect()
    }

    #[test]
    fn a_step_up_in_latency_is_a_regression_at_its_first_run_with_its_commit() {
        let mut v = noisy(10, 1.0, 1);
        v.extend(noisy(10, 1.1, 2));
        let t = analyse("id", "kv", runs(&v, &[]), &ChangePointConfig::default());
        let p99 = t
            .change_points
            .iter()
            .find(|c| c.metric == "latency_p99")
            .unwrap();
        assert!((9..=11).contains(&p99.at), "{}", p99.at);
        assert!(p99.regression);
        assert_eq!(p99.commit.as_deref(), Some(format!("c{}", p99.at).as_str()));
        let tput = t
            .change_points
            .iter()
            .find(|c| c.metric == "throughput")
            .unwrap();
        assert!(tput.regression, "throughput fell");
        assert_eq!(
            recent_regressions(&t, 5, CI_MIN_CHANGE).len(),
            0,
            "the change is 10 runs old"
        );
        assert!(!recent_regressions(&t, 11, CI_MIN_CHANGE).is_empty());
        let step = p99.change.unwrap().abs();
        assert!(
            recent_regressions(&t, 11, step * 1.01)
                .iter()
                .all(|c| c.metric != "latency_p99"),
            "a step smaller than --min-change is shown, not failed on"
        );
        assert!(text(std::slice::from_ref(&t)).contains("REGRESSION latency_p99 at run"));
        let table = csv(&t);
        let mut lines = table.split("\r\n");
        assert_eq!(
            lines.next(),
            Some("run,started_at,commit,flags,throughput,latency_p99")
        );
        assert!(lines
            .next()
            .unwrap()
            .starts_with("0,2026-11-01T00:00:00Z,c0,,"));
        assert_eq!(table.matches("\r\n").count(), 21);
        let page = html(&[t]);
        assert!(page.contains("commit c"), "labels on hover");
    }

    #[test]
    fn flagged_runs_are_shown_and_never_analysed() {
        let mut v = noisy(16, 1.0, 3);
        // A saturated client's run, far off: flagged, so no change.
        v[8] = 3.0;
        v[9] = 3.0;
        v[10] = 3.0;
        v[11] = 3.0;
        let t = analyse(
            "id",
            "kv",
            runs(&v, &[8, 9, 10, 11]),
            &ChangePointConfig::default(),
        );
        assert!(t.change_points.is_empty(), "{:?}", t.change_points);
        assert!(text(std::slice::from_ref(&t))
            .contains("run 8 (2026-11-09T00:00:00Z) flagged: client_saturated"));
        // Unflagged, the same values are a change.
        let t = analyse("id", "kv", runs(&v, &[]), &ChangePointConfig::default());
        assert!(!t.change_points.is_empty());
    }
}
