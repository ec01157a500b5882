//! Result tables shaped like the field reports': one row per instance
//! label, thread count or sweep point; TPS, QPS, p95 and p99 across.
//!
//! Plain runs form one table whose key columns are the labels that differ
//! between them (`instance`, `threads`, …), or the thread and client
//! counts when no label does; rows are sorted by those keys in natural
//! order (`2c8g` before `16c64g`, `8` before `64`). Each sweep is a table
//! of its own, one row per point, keyed by the swept parameter.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use loadcell_record::result::{MergeSection, RunResult, RunStatus};
use loadcell_record::sweep::{SweepKind, SweepPoint, SweepResult};

pub use crate::input::Input;
use crate::redact::redact;

/// The numbers of one run, or of one sweep point (means over its repeats).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The input this row comes from.
    pub source: String,
    /// The run's labels; for a sweep point, the sweep's labels.
    pub labels: BTreeMap<String, String>,
    pub workload: String,
    /// Redacted.
    pub target: String,
    pub threads: usize,
    pub clients: usize,
    /// For a sweep point: the swept parameter and its value here.
    pub point: Option<(String, f64)>,
    /// Runs behind the numbers (repeats of a sweep point).
    pub runs: usize,
    /// Transactions per second, or events per second for workloads
    /// without transactions.
    pub tps: f64,
    /// Standard deviation of `tps` over repeats (0 for one run).
    pub tps_sd: f64,
    /// Operations (queries, requests) per second.
    pub qps: f64,
    pub qps_sd: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub errors: f64,
    pub complete: bool,
    /// For a findmax probe: whether it met the SLA.
    pub passed: Option<bool>,
    /// For a findmax rate probed more than once: how many of its probes
    /// met the SLA, of how many.
    pub probes_met: Option<(usize, usize)>,
    /// For a sweep point: whether throughput saturates here (the last
    /// point that still scaled, as the findings and charts name it).
    pub saturates: bool,
    /// Whether `tps` counts transactions.
    pub transactional: bool,
    /// Whether `qps` counts SQL statements.
    pub sql: bool,
    /// Events measured, and over how long (a sweep point's: all its runs',
    /// and their mean duration): shown for partial rows.
    pub events: u64,
    pub duration_s: f64,
    /// Rebuilt from an interval log ([`Input::rebuilt`]): threads,
    /// clients, operations and errors are unknown.
    pub rebuilt: bool,
}

/// What a view shows for a figure a rebuilt result does not hold.
pub const UNKNOWN: &str = "unknown";

impl Row {
    pub fn of_run(source: &str, r: &RunResult) -> Row {
        let s = &r.summary;
        Row {
            source: source.to_string(),
            labels: r.labels.clone(),
            workload: r.config.workload.clone(),
            target: redact(&r.config.target),
            threads: r.config.threads,
            clients: r.config.clients_per_thread,
            point: None,
            runs: 1,
            tps: s.txn_per_sec.unwrap_or(s.events_per_sec),
            tps_sd: 0.0,
            qps: s.ops_per_sec,
            qps_sd: 0.0,
            p50_ms: s.latency_ms.p50,
            p95_ms: s.latency_ms.p95,
            p99_ms: s.latency_ms.p99,
            p999_ms: s.latency_ms.p999,
            errors: s.errors as f64,
            complete: r.status == RunStatus::Complete,
            passed: None,
            probes_met: None,
            saturates: false,
            transactional: s.txn_per_sec.is_some(),
            sql: s.queries.is_some(),
            events: s.events,
            duration_s: s.duration_s,
            rebuilt: false,
        }
    }

    /// The SLA column: "met", "missed", or "2 of 3 met" for a rate
    /// probed more than once.
    pub fn sla_cell(&self) -> String {
        match (self.probes_met, self.passed) {
            (Some((met, of)), _) => format!("{met} of {of} met"),
            (None, Some(true)) => "met".into(),
            (None, Some(false)) => "missed".into(),
            (None, None) => String::new(),
        }
    }

    pub fn of_point(source: &str, sweep: &SweepResult, p: &SweepPoint) -> Row {
        let first = p.runs.first();
        let n = p.runs.len().max(1) as f64;
        Row {
            source: source.to_string(),
            labels: sweep.labels.clone(),
            workload: first.map(|r| r.config.workload.clone()).unwrap_or_default(),
            target: first.map(|r| redact(&r.config.target)).unwrap_or_default(),
            threads: first.map(|r| r.config.threads).unwrap_or(0),
            clients: first.map(|r| r.config.clients_per_thread).unwrap_or(0),
            point: Some((sweep.parameter.clone(), p.value)),
            runs: p.runs.len(),
            tps: p.mean.events_per_sec,
            tps_sd: p.spread.events_per_sec,
            qps: p.mean.ops_per_sec,
            qps_sd: p.spread.ops_per_sec,
            p50_ms: p.mean.p50_ms,
            p95_ms: p.mean.p95_ms,
            p99_ms: p.mean.p99_ms,
            p999_ms: p
                .runs
                .iter()
                .map(|r| r.summary.latency_ms.p999)
                .sum::<f64>()
                / n,
            errors: p.mean.errors,
            complete: !p.runs.is_empty() && p.runs.iter().all(|r| r.status == RunStatus::Complete),
            passed: p.passed,
            probes_met: (p.verdicts.len() > 1).then(|| {
                let met = p.verdicts.iter().filter(|v| v.starts_with("pass")).count();
                (met, p.verdicts.len())
            }),
            saturates: sweep.analysis.saturation_x() == Some(p.value),
            transactional: first.is_some_and(|r| r.summary.txn_per_sec.is_some()),
            sql: first.is_some_and(|r| r.summary.queries.is_some()),
            events: p.runs.iter().map(|r| r.summary.events).sum(),
            duration_s: p.runs.iter().map(|r| r.summary.duration_s).sum::<f64>() / n,
            rebuilt: false,
        }
    }

    /// `value`, or [`UNKNOWN`] for a figure a rebuilt result lacks.
    pub fn known(&self, value: String) -> String {
        if self.rebuilt {
            UNKNOWN.to_string()
        } else {
            value
        }
    }
}

/// Rows sharing key columns: the plain runs, or one sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// What the rows are, e.g. `runs` or `sweep.json: sweep of threads`.
    pub title: String,
    /// Names of the key columns (`instance`, `threads`, …).
    pub keys: Vec<String>,
    /// Each row with its key values, sorted by them.
    pub rows: Vec<(Vec<String>, Row)>,
}

/// A parameter value without needless decimals: `8`, `0.5`, `1500`.
pub fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Compares strings as a person would: numbers by value, digit runs
/// inside words by value (`2c8g` < `16c64g`), the rest by character.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    if let (Ok(x), Ok(y)) = (a.trim().parse::<f64>(), b.trim().parse::<f64>()) {
        return x.total_cmp(&y);
    }
    let (mut a, mut b) = (a, b);
    loop {
        match (a.chars().next(), b.chars().next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let na = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
                let nb = b.find(|c: char| !c.is_ascii_digit()).unwrap_or(b.len());
                let (da, db) = (
                    a[..na].trim_start_matches('0'),
                    b[..nb].trim_start_matches('0'),
                );
                let ord = da.len().cmp(&db.len()).then_with(|| da.cmp(db));
                if ord != Ordering::Equal {
                    return ord;
                }
                a = &a[na..];
                b = &b[nb..];
            }
            (Some(x), Some(y)) => {
                let ord = x.cmp(&y);
                if ord != Ordering::Equal {
                    return ord;
                }
                a = &a[x.len_utf8()..];
                b = &b[y.len_utf8()..];
            }
        }
    }
}

fn cmp_keys(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = natural_cmp(x, y);
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// The key columns for a set of plain runs and each row's values.
fn run_keys(rows: &[Row]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut all_keys: Vec<String> = Vec::new();
    for r in rows {
        for k in r.labels.keys() {
            if !all_keys.contains(k) {
                all_keys.push(k.clone());
            }
        }
    }
    let value = |r: &Row, k: &str| -> String {
        match k {
            "file" => r.source.clone(),
            "threads" if !r.labels.contains_key("threads") => r.known(r.threads.to_string()),
            "clients" if !r.labels.contains_key("clients") => r.known(r.clients.to_string()),
            _ => r.labels.get(k).cloned().unwrap_or_default(),
        }
    };
    let varies = |f: &dyn Fn(&Row) -> String| rows.iter().any(|r| f(r) != f(&rows[0]));
    let mut keys: Vec<String> = all_keys
        .iter()
        .filter(|k| varies(&|r: &Row| r.labels.get(*k).cloned().unwrap_or_default()))
        .cloned()
        .collect();
    for (name, get) in [
        (
            "threads",
            &(|r: &Row| r.threads.to_string()) as &dyn Fn(&Row) -> String,
        ),
        ("clients", &|r: &Row| r.clients.to_string()),
    ] {
        if !keys.iter().any(|k| k == name) && varies(get) {
            keys.push(name.to_string());
        }
    }
    if keys.is_empty() {
        keys = if rows.len() == 1 && !all_keys.is_empty() {
            all_keys
        } else if rows.len() == 1 {
            vec!["threads".to_string()]
        } else {
            vec!["file".to_string()]
        };
    }
    let mut values: Vec<Vec<String>> = rows
        .iter()
        .map(|r| keys.iter().map(|k| value(r, k)).collect())
        .collect();
    // Rows that the keys do not tell apart get the file name too.
    let mut sorted = values.clone();
    sorted.sort();
    sorted.dedup();
    if sorted.len() < values.len() && !keys.iter().any(|k| k == "file") {
        keys.push("file".to_string());
        for (v, r) in values.iter_mut().zip(rows) {
            v.push(r.source.clone());
        }
    }
    (keys, values)
}

/// Groups the inputs into tables: the plain runs first (if any), then one
/// table per sweep, each sorted by its keys.
pub fn tables(inputs: &[Input]) -> Vec<Table> {
    let runs: Vec<Row> = inputs
        .iter()
        .filter_map(|i| {
            i.as_run().map(|r| Row {
                rebuilt: i.rebuilt,
                ..Row::of_run(&i.name, r)
            })
        })
        .collect();
    let mut out = Vec::new();
    if !runs.is_empty() {
        let (keys, values) = run_keys(&runs);
        let mut rows: Vec<(Vec<String>, Row)> = values.into_iter().zip(runs).collect();
        rows.sort_by(|a, b| cmp_keys(&a.0, &b.0));
        let title = if rows.len() == 1 {
            rows[0].1.source.clone()
        } else {
            "runs".to_string()
        };
        out.push(Table { title, keys, rows });
    }
    for i in inputs {
        let Some(s) = i.as_sweep() else { continue };
        let mut rows: Vec<(Vec<String>, Row)> = s
            .points
            .iter()
            .map(|p| (vec![number(p.value)], Row::of_point(&i.name, s, p)))
            .collect();
        rows.sort_by(|a, b| cmp_keys(&a.0, &b.0));
        out.push(Table {
            title: format!("{}: {}", i.name, sweep_title(s)),
            keys: vec![s.parameter.clone()],
            rows,
        });
    }
    out
}

/// `sweep of threads` or `findmax over rate`.
pub fn sweep_title(s: &SweepResult) -> String {
    match s.kind {
        SweepKind::Sweep => format!("sweep of {}", s.parameter),
        SweepKind::Findmax => format!("findmax over {}", s.parameter),
    }
}

/// Every row of every table, in table order.
pub fn rows(inputs: &[Input]) -> Vec<Row> {
    tables(inputs)
        .into_iter()
        .flat_map(|t| t.rows.into_iter().map(|r| r.1))
        .collect()
}

/// `1234567.891` → `1,234,567.89` (with `decimals` places).
pub fn grouped(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = s
        .split_once('.')
        .map(|(a, b)| (a, Some(b)))
        .unwrap_or((&s, None));
    let mut g = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            g.push(',');
        }
        g.push(c);
    }
    let neg = v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0');
    format!(
        "{}{g}{}",
        if neg { "-" } else { "" },
        frac.map(|f| format!(".{f}")).unwrap_or_default()
    )
}

fn with_sd(v: f64, sd: f64, decimals: usize) -> String {
    if sd > 0.0 {
        format!("{} ± {}", grouped(v, decimals), grouped(sd, decimals))
    } else {
        grouped(v, decimals)
    }
}

fn md_cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// The tables as GitHub-flavoured Markdown. With several tables each gets
/// a `###` heading. Errors and status columns appear only when some row
/// has errors or is partial.
pub fn markdown(inputs: &[Input]) -> String {
    let tables = tables(inputs);
    let mut o = String::new();
    let several = tables.len() > 1;
    for t in &tables {
        if several {
            let _ = writeln!(o, "### {}\n", md_cell(&redact(&t.title)));
        }
        let txn = t.rows.iter().any(|r| r.1.transactional);
        let sql = t.rows.iter().any(|r| r.1.sql);
        let errors = t.rows.iter().any(|r| r.1.errors > 0.0 || r.1.rebuilt);
        let partial = t.rows.iter().any(|r| !r.1.complete);
        let sla = t.rows.iter().any(|r| r.1.passed.is_some());
        let knee = t.rows.iter().any(|r| r.1.saturates);
        let mut header: Vec<String> = t.keys.clone();
        header.push(if txn { "TPS" } else { "events/s" }.to_string());
        header.push(if sql { "QPS" } else { "ops/s" }.to_string());
        header.push("p95 (ms)".into());
        header.push("p99 (ms)".into());
        if errors {
            header.push("errors".into());
        }
        if sla {
            header.push("SLA".into());
        }
        if knee {
            header.push("knee".into());
        }
        if partial {
            // A partial run's rates mean little without how much it measured.
            header.extend(["events".into(), "duration (s)".into(), "status".into()]);
        }
        let numeric_key = |i: usize| t.rows.iter().all(|r| r.0[i].parse::<f64>().is_ok());
        let _ = writeln!(
            o,
            "| {} |",
            header
                .iter()
                .map(|h| md_cell(h))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let align: Vec<&str> = (0..header.len())
            .map(|i| {
                if i < t.keys.len() && !numeric_key(i) {
                    ":--"
                } else {
                    "--:"
                }
            })
            .collect();
        let _ = writeln!(o, "|{}|", align.join("|"));
        for (keys, r) in &t.rows {
            let mut cells: Vec<String> = keys
                .iter()
                .map(|k| {
                    if k.is_empty() {
                        "–".to_string()
                    } else {
                        md_cell(&redact(k))
                    }
                })
                .collect();
            cells.push(with_sd(r.tps, r.tps_sd, 2));
            cells.push(r.known(with_sd(r.qps, r.qps_sd, 2)));
            cells.push(grouped(r.p95_ms, 2));
            cells.push(grouped(r.p99_ms, 2));
            if errors {
                cells.push(r.known(number_short(r.errors)));
            }
            if sla {
                cells.push(r.sla_cell());
            }
            if knee {
                cells.push(knee_cell(r).into());
            }
            if partial {
                cells.push(grouped(r.events as f64, 0));
                cells.push(grouped(r.duration_s, 1));
                cells.push(if r.complete { "complete" } else { "partial" }.into());
            }
            let _ = writeln!(o, "| {} |", cells.join(" | "));
        }
        if several {
            o.push('\n');
        }
    }
    for x in inputs {
        if let Some(m) = x.as_run().and_then(|r| r.merge.as_ref()) {
            let _ = writeln!(o, "\n{}: {}", md_cell(&redact(&x.name)), merge_note(m));
        }
    }
    o
}

/// How a merged result was made and how far its shards differed, in one
/// sentence.
pub fn merge_note(m: &MergeSection) -> String {
    format!(
        "merged from {} shards (histograms added) over the {} s all measured{}{}; per shard \
         {}–{} ops/s, p99 {}–{} ms",
        m.shards.len(),
        grouped(m.window_s, 2),
        if m.aligned {
            ", started together"
        } else {
            ", intervals put into the earliest shard's grid"
        },
        if m.missing.is_empty() {
            String::new()
        } else {
            format!(", shards {:?} missing", m.missing)
        },
        grouped(m.spread.ops_per_sec_min, 1),
        grouped(m.spread.ops_per_sec_max, 1),
        grouped(m.spread.p99_ms_min, 2),
        grouped(m.spread.p99_ms_max, 2),
    )
}

/// The knee column's cell: names the point where throughput saturates.
fn knee_cell(r: &Row) -> &'static str {
    if r.saturates {
        "throughput saturates"
    } else {
        ""
    }
}

fn number_short(v: f64) -> String {
    if v.fract() == 0.0 {
        number(v)
    } else {
        format!("{v:.2}")
    }
}

/// Quotes a CSV field when RFC 4180 requires it.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) || s.starts_with(' ') || s.ends_with(' ') {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// All tables as one RFC 4180 CSV (CRLF line ends, a header row). Key
/// columns are the union of the tables' keys, with a `source` column first
/// when there are several tables; then `tps, qps, p95_ms, p99_ms, p50_ms,
/// p999_ms, errors, status`, and for sweeps `runs, tps_sd, qps_sd` (and
/// `sla` for findmax, `knee` when a sweep saturated, `events, duration_s`
/// when a row is partial).
pub fn csv(inputs: &[Input]) -> String {
    let tables = tables(inputs);
    let several = tables.len() > 1;
    let mut keys: Vec<String> = Vec::new();
    for t in &tables {
        for k in &t.keys {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let sweeps = tables
        .iter()
        .flat_map(|t| &t.rows)
        .any(|r| r.1.point.is_some());
    let sla = tables
        .iter()
        .flat_map(|t| &t.rows)
        .any(|r| r.1.passed.is_some());
    let knee = tables.iter().flat_map(|t| &t.rows).any(|r| r.1.saturates);
    let partial = tables.iter().flat_map(|t| &t.rows).any(|r| !r.1.complete);
    let mut header: Vec<String> = Vec::new();
    if several {
        header.push("source".into());
    }
    header.extend(keys.iter().cloned());
    for h in [
        "tps", "qps", "p95_ms", "p99_ms", "p50_ms", "p999_ms", "errors", "status",
    ] {
        header.push(h.into());
    }
    if sweeps {
        for h in ["runs", "tps_sd", "qps_sd"] {
            header.push(h.into());
        }
    }
    if sla {
        header.push("sla".into());
    }
    if knee {
        header.push("knee".into());
    }
    if partial {
        header.extend(["events".into(), "duration_s".into()]);
    }
    let mut o = String::new();
    let line = |o: &mut String, cells: &[String]| {
        let _ = write!(
            o,
            "{}\r\n",
            cells
                .iter()
                .map(|c| csv_field(&redact(c)))
                .collect::<Vec<_>>()
                .join(",")
        );
    };
    line(&mut o, &header);
    for t in &tables {
        for (vals, r) in &t.rows {
            let mut cells: Vec<String> = Vec::new();
            if several {
                cells.push(t.title.clone());
            }
            for k in &keys {
                cells.push(
                    t.keys
                        .iter()
                        .position(|tk| tk == k)
                        .map(|i| vals[i].clone())
                        .unwrap_or_default(),
                );
            }
            cells.push(format!("{:.2}", r.tps));
            cells.push(r.known(format!("{:.2}", r.qps)));
            cells.push(format!("{:.3}", r.p95_ms));
            cells.push(format!("{:.3}", r.p99_ms));
            cells.push(format!("{:.3}", r.p50_ms));
            cells.push(format!("{:.3}", r.p999_ms));
            cells.push(r.known(number_short(r.errors)));
            cells.push(if r.complete { "complete" } else { "partial" }.into());
            if sweeps {
                cells.push(r.runs.to_string());
                cells.push(format!("{:.2}", r.tps_sd));
                cells.push(format!("{:.2}", r.qps_sd));
            }
            if sla {
                cells.push(r.sla_cell());
            }
            if knee {
                cells.push(knee_cell(r).into());
            }
            if partial {
                cells.push(r.events.to_string());
                cells.push(format!("{:.3}", r.duration_s));
            }
            line(&mut o, &cells);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    #[test]
    fn natural_order_sorts_numbers_and_instance_names() {
        let mut v = vec!["64c512g", "2c8g", "16c64g", "4c16g", "8c32g"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["2c8g", "4c16g", "8c32g", "16c64g", "64c512g"]);
        let mut v = vec!["512", "8", "64", "0.5", "128"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["0.5", "8", "64", "128", "512"]);
        assert_eq!(natural_cmp("a", "a"), Ordering::Equal);
        assert_eq!(natural_cmp("a", "ab"), Ordering::Less);
        assert_eq!(natural_cmp("x007", "x7"), Ordering::Equal);
    }

    #[test]
    fn numbers_are_grouped_and_trimmed() {
        assert_eq!(grouped(1234567.891, 2), "1,234,567.89");
        assert_eq!(grouped(24033.0, 0), "24,033");
        assert_eq!(grouped(999.999, 2), "1,000.00");
        assert_eq!(grouped(-1500.0, 1), "-1,500.0");
        assert_eq!(grouped(-0.001, 2), "0.00");
        assert_eq!(grouped(f64::NAN, 2), "–");
        assert_eq!(number(8.0), "8");
        assert_eq!(number(0.25), "0.25");
    }

    #[test]
    fn csv_fields_are_quoted_per_rfc4180() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field(""), "");
    }

    fn labelled(instance: &str, threads: usize, tps: f64) -> Input {
        let mut r = fixture::run(threads, tps);
        r.labels.insert("instance".into(), instance.into());
        r.labels.insert("threads".into(), threads.to_string());
        r.labels.insert("region".into(), "eu, west".into());
        Input::run(format!("{instance}-{threads}.json"), r)
    }

    #[test]
    fn labelled_runs_are_rows_sorted_by_label() {
        let inputs = vec![
            labelled("16c64g", 64, 9000.0),
            labelled("2c8g", 64, 1708.0),
            labelled("2c8g", 512, 1800.0),
            labelled("4c16g", 64, 4000.0),
        ];
        let t = tables(&inputs);
        assert_eq!(t.len(), 1);
        assert_eq!(
            t[0].keys,
            ["instance", "threads"],
            "region is the same everywhere"
        );
        let order: Vec<String> = t[0].rows.iter().map(|r| r.0.join("/")).collect();
        assert_eq!(order, ["2c8g/64", "2c8g/512", "4c16g/64", "16c64g/64"]);

        let md = markdown(&inputs);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines[0],
            "| instance | threads | TPS | QPS | p95 (ms) | p99 (ms) |"
        );
        assert_eq!(lines[1], "|:--|--:|--:|--:|--:|--:|");
        assert!(
            lines[2].starts_with("| 2c8g | 64 | 1,708.00 | 34,160.00 |"),
            "{}",
            lines[2]
        );
        assert_eq!(lines.len(), 6);

        let csv = csv(&inputs);
        let rows: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            rows[0],
            "instance,threads,tps,qps,p95_ms,p99_ms,p50_ms,p999_ms,errors,status"
        );
        assert!(
            rows[1].starts_with("2c8g,64,1708.00,34160.00,"),
            "{}",
            rows[1]
        );
        assert!(rows[1].ends_with(",0,complete"), "{}", rows[1]);
        assert_eq!(
            rows.len(),
            6,
            "4 rows, the header and the empty string after the last CRLF"
        );
    }

    #[test]
    fn unlabelled_runs_are_keyed_by_threads_and_partial_runs_say_so() {
        let mut a = fixture::run(8, 300.0);
        a.status = RunStatus::Partial;
        a.summary.errors = 3;
        let b = fixture::run(16, 500.0);
        let inputs = vec![Input::run("b.json", b), Input::run("a.json", a)];
        let t = tables(&inputs);
        assert_eq!(t[0].keys, ["threads"]);
        assert_eq!(t[0].rows[0].0, ["8"]);
        let md = markdown(&inputs);
        assert!(
            md.lines()
                .next()
                .unwrap()
                .ends_with("| errors | events | duration (s) | status |"),
            "{md}"
        );
        assert!(md.contains("| 3 | 3,000 | 10.0 | partial |"), "{md}");
        // Identical runs are told apart by file.
        let same = vec![
            Input::run("x.json", fixture::run(8, 1.0)),
            Input::run("y.json", fixture::run(8, 2.0)),
        ];
        assert_eq!(tables(&same)[0].keys, ["file"]);
    }

    #[test]
    fn sweeps_are_one_row_per_point_with_spread() {
        let s = fixture::sweep(&[1.0, 2.0, 4.0, 8.0], 2);
        let inputs = vec![
            Input::sweep("sweep.json", s),
            Input::run("one.json", fixture::run(4, 100.0)),
        ];
        let t = tables(&inputs);
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].keys, ["threads"]);
        assert_eq!(t[1].rows.len(), 4);
        let md = markdown(&inputs);
        assert!(md.contains("### sweep.json: sweep of threads"), "{md}");
        assert!(md.contains(" ± "), "{md}");
        let csv = csv(&inputs);
        let header = csv.split("\r\n").next().unwrap();
        assert_eq!(
            header,
            "source,threads,tps,qps,p95_ms,p99_ms,p50_ms,p999_ms,errors,status,runs,tps_sd,qps_sd"
        );
        assert_eq!(csv.matches("\r\n").count(), 1 + 1 + 4);
        assert!(
            csv.contains("\r\n\"sweep.json: sweep of threads\"")
                || csv.contains("\r\nsweep.json: sweep of threads,")
        );
    }

    #[test]
    fn the_knee_row_is_the_point_the_findings_name() {
        let s = fixture::sweep(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], 1);
        let knee = s.analysis.saturation_x().expect("the fixture saturates");
        assert!(s.findings[0].starts_with(&format!("throughput saturates at {knee} threads")));
        let inputs = vec![Input::sweep("sweep.json", s)];
        let md = markdown(&inputs);
        let row = md
            .lines()
            .find(|l| l.ends_with("| throughput saturates |"))
            .expect("a knee row");
        assert!(row.starts_with(&format!("| {knee} |")), "{md}");
        let csv = csv(&inputs);
        assert!(csv.split("\r\n").next().unwrap().ends_with(",knee"));
        let rows: Vec<&str> = csv
            .split("\r\n")
            .filter(|l| l.ends_with(",throughput saturates"))
            .collect();
        assert_eq!(rows.len(), 1, "{csv}");
        assert!(rows[0].starts_with(&format!("{knee},")));
    }

    #[test]
    fn labels_with_commas_and_secrets_are_safe() {
        let mut r = fixture::run(8, 10.0);
        r.labels.insert("note".into(), "a, \"b\"".into());
        r.labels.insert("dsn".into(), "mysql://u:pw@h/db".into());
        let inputs = vec![Input::run("r.json", r)];
        let csv = csv(&inputs);
        assert!(csv.contains("\"a, \"\"b\"\"\""), "{csv}");
        assert!(!csv.contains("pw@"), "{csv}");
        let md = markdown(&inputs);
        assert!(!md.contains("pw@"), "{md}");
    }
}
