//! The example suites of scenarios S1, S2, S6 and S8 (`examples/suites/`)
//! at their small scale, run by the built binary against servers the test
//! kit starts (one MariaDB, one Redis, one InfluxDB, shared by the tests
//! that run together): each must exit 0, and every figure of its
//! `report.md` must be the figure of the step file it stands for, as
//! `suite.json` names them: the throughput and p99 of every run and sweep
//! point (repeats as mean ± standard deviation), a plan's nodes, capacity
//! and $/month, and the plan's measured points those of the steps it read.
//! Every example suite, and `bench/s3-proxy.toml`, must pass `--dry-run`
//! with its default variables.
//!
//! S8 is Aerospike's model: the test kit runs no Aerospike, so its seven
//! clusters are all one Redis, the closest store of records it runs.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use common::{loadcell, read_json, run_two_suite_shards, stderr, stdout};
use loadcell_testkit::{TestServer, TsServer};
use serde_json::Value;

/// The workspace root: the suites name their files (data sets, prices)
/// relative to it.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Servers started on first use and stopped when the last test holding
/// them ends.
#[derive(Default)]
struct Servers {
    mariadb: OnceLock<TestServer>,
    redis: OnceLock<TestServer>,
    influxdb: OnceLock<TsServer>,
}

impl Servers {
    fn mariadb(&self) -> &TestServer {
        self.mariadb
            .get_or_init(|| loadcell_testkit::mariadb().unwrap_or_else(|e| panic!("{e}")))
    }

    fn redis(&self) -> &TestServer {
        self.redis
            .get_or_init(|| loadcell_testkit::redis().unwrap_or_else(|e| panic!("{e}")))
    }

    fn influxdb(&self) -> &TsServer {
        self.influxdb
            .get_or_init(|| loadcell_testkit::influxdb().unwrap_or_else(|e| panic!("{e}")))
    }
}

fn servers() -> Arc<Servers> {
    static SHARED: Mutex<Option<Weak<Servers>>> = Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = shared.as_ref().and_then(Weak::upgrade) {
        return s;
    }
    let s = Arc::new(Servers::default());
    *shared = Some(Arc::downgrade(&s));
    s
}

/// Runs `suite run FILE --var … --out DIR` from the workspace root; it must
/// exit 0. Returns the suite directory (inside the returned temp dir).
fn run_suite(file: &str, vars: &[(&str, String)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("suite");
    let out_arg = out.display().to_string();
    let vars: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut args = vec!["suite", "run", file, "--out", &out_arg];
    for v in &vars {
        args.extend(["--var", v.as_str()]);
    }
    let started = Instant::now();
    let o = loadcell(&workspace(), &args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{file}\nstdout:\n{}\nstderr:\n{}",
        stdout(&o),
        stderr(&o)
    );
    eprintln!("{file}: {:.1}s", started.elapsed().as_secs_f64());
    (dir, out)
}

// ---------------------------------------------------------------------------
// report.md read back
// ---------------------------------------------------------------------------

/// A Markdown table: the caption above it (`**TPS** … by threads:`), the
/// header and the rows.
#[derive(Debug)]
struct Grid {
    caption: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    fn cell(&self, row: &str, column: &str) -> Option<&str> {
        let c = self.header.iter().position(|h| h == column)?;
        let r = self.rows.iter().find(|r| r[0] == row)?;
        Some(&r[c])
    }
}

/// A `##` section of report.md and its tables.
#[derive(Debug)]
struct Section {
    title: String,
    grids: Vec<Grid>,
}

impl Section {
    fn grid(&self, caption: &str) -> Option<&Grid> {
        self.grids.iter().find(|g| g.caption.starts_with(caption))
    }
}

fn cells(line: &str) -> Vec<String> {
    let line = line.trim().replace("\\|", "\u{0}");
    line.trim_start_matches('|')
        .trim_end_matches('|')
        .split('|')
        .map(|c| c.trim().replace('\u{0}', "|").replace("\\\\", "\\"))
        .collect()
}

fn sections(md: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut caption = String::new();
    let mut table: Vec<&str> = Vec::new();
    let flush = |out: &mut Vec<Section>, caption: &str, table: &mut Vec<&str>| {
        if table.is_empty() {
            return;
        }
        let section = out.last_mut().expect("a table inside a section");
        section.grids.push(Grid {
            caption: caption.to_string(),
            header: cells(table[0]),
            rows: table[2..].iter().map(|l| cells(l)).collect(),
        });
        table.clear();
    };
    for line in md.lines() {
        if line.starts_with('|') {
            table.push(line);
            continue;
        }
        flush(&mut out, &caption, &mut table);
        if let Some(title) = line.strip_prefix("## ") {
            out.push(Section {
                title: title.to_string(),
                grids: Vec::new(),
            });
            caption.clear();
        } else if line.starts_with("**") {
            caption = line.to_string();
        }
    }
    flush(&mut out, &caption, &mut table);
    out
}

/// A figure's mean and spread: `1,234.56`, `1,234.56 ± 7.07`, `– ` is none.
fn figure(cell: &str) -> Option<(f64, f64)> {
    let n = |s: &str| -> f64 {
        s.trim()
            .replace(',', "")
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {cell:?}"))
    };
    let c = cell.trim_end_matches(" (partial)");
    if c == "–" {
        return None;
    }
    Some(match c.split_once(" ± ") {
        Some((m, sd)) => (n(m), n(sd)),
        None => (n(c), 0.0),
    })
}

/// Two figures shown with 2 decimals: equal to the rounding.
fn same(shown: f64, value: f64, what: &str) {
    assert!(
        (shown - value).abs() <= 0.005 + value.abs() * 1e-12,
        "{what}: the table shows {shown}, the step file holds {value}"
    );
}

// ---------------------------------------------------------------------------
// What the step files say each cell must hold
// ---------------------------------------------------------------------------

fn f(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer}"))
}

/// Mean and sample standard deviation.
fn stat(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let sd = if xs.len() > 1 {
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    (mean, sd)
}

/// A sweep point's value as a row: `2`, `0.5`.
fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The column a step's figures go in: its target, labels and the matrix
/// values that are neither the row, the target nor the workload.
fn column(step: &Value) -> String {
    let row = step["row"].as_str();
    let mut parts: Vec<String> = Vec::new();
    if let Some(t) = step["target"].as_str() {
        parts.push(t.to_string());
    }
    for (k, v) in step["labels"].as_object().unwrap() {
        parts.push(format!("{k}={}", v.as_str().unwrap()));
    }
    for kv in step["matrix"].as_array().unwrap() {
        let (k, v) = (kv[0].as_str().unwrap(), kv[1].as_str().unwrap());
        if Some(k) != row && k != "target" && k != "workload" {
            parts.push(format!("{k}={v}"));
        }
    }
    parts.dedup();
    parts.join(" ")
}

/// The throughput a table shows, as its caption names it.
#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Tps,
    Items,
    Ops,
}

/// A run's throughput (TPS, items/s or ops/s) and p99.
fn run_figures(result: &Value, unit: Unit) -> (f64, f64) {
    let s = &result["summary"];
    let throughput = match unit {
        Unit::Tps => s["txn_per_sec"]
            .as_f64()
            .unwrap_or_else(|| f(s, "/events_per_sec")),
        Unit::Items => f(s, "/items_per_sec"),
        Unit::Ops => f(s, "/ops_per_sec"),
    };
    (throughput, f(s, "/latency_ms/p99"))
}

/// One cell as the step files give it: the throughput's and p99's mean and
/// spread.
#[derive(Debug, Default)]
struct Expected {
    throughput: Vec<(f64, f64)>,
    p99: Vec<(f64, f64)>,
    /// Single runs (repeats), averaged into the cell.
    runs: bool,
}

impl Expected {
    fn cell(&self) -> ((f64, f64), (f64, f64)) {
        if self.runs {
            let t: Vec<f64> = self.throughput.iter().map(|x| x.0).collect();
            let p: Vec<f64> = self.p99.iter().map(|x| x.0).collect();
            (stat(&t), stat(&p))
        } else {
            assert_eq!(self.throughput.len(), 1, "one sweep point per cell");
            (self.throughput[0], self.p99[0])
        }
    }
}

/// Checks every throughput and p99 table of the suite in `dir` against the
/// step files, and every plan against its plan file; returns the sections.
fn check_tables(dir: &Path) -> Vec<Section> {
    let record = read_json(&dir.join("suite.json"));
    let steps = record["steps"].as_array().unwrap();
    assert!(
        steps.iter().all(|s| s["status"] == "done"),
        "every step done: {steps:#?}"
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let report = sections(&md);
    let titled = |t: &str| report.iter().any(|s| s.title == t);

    // The measured steps, by the table they go into.
    let mut tables: BTreeMap<String, Vec<(&Value, Value)>> = BTreeMap::new();
    let mut plans: Vec<(&Value, Value)> = Vec::new();
    for step in steps {
        let Some(file) = step["file"].as_str() else {
            continue;
        };
        let content = read_json(&dir.join(file));
        match step["command"].as_str().unwrap() {
            "run" | "sweep" | "findmax" => {
                let name = step["name"].as_str().unwrap();
                let with_workload = format!("{name} — {}", step["workload"].as_str().unwrap());
                let title = if titled(&with_workload) {
                    with_workload
                } else {
                    name.to_string()
                };
                tables.entry(title).or_default().push((step, content));
            }
            "plan" => plans.push((step, content)),
            _ => {}
        }
    }
    assert!(!tables.is_empty(), "no measured step in {md}");

    for (title, members) in &tables {
        let section = report
            .iter()
            .find(|s| s.title == *title)
            .unwrap_or_else(|| panic!("no section {title} in\n{md}"));
        let throughput = section
            .grid("**TPS**")
            .or_else(|| section.grid("**items/s**"))
            .or_else(|| section.grid("**ops/s**"))
            .unwrap_or_else(|| panic!("no throughput table under {title}:\n{md}"));
        let unit = if throughput.caption.starts_with("**TPS**") {
            Unit::Tps
        } else if throughput.caption.starts_with("**items/s**") {
            Unit::Items
        } else {
            Unit::Ops
        };
        let p99 = section
            .grid("**p99 latency (ms)**")
            .unwrap_or_else(|| panic!("no p99 table under {title}:\n{md}"));

        // The cells the step files fill, by (row, column), and the rows'
        // header.
        let mut expected: BTreeMap<(String, String), Expected> = BTreeMap::new();
        let mut row_header = None;
        for (step, content) in members {
            let col = column(step);
            let id = step["id"].as_str().unwrap();
            if step["command"] == "run" {
                let key = step["row"].as_str();
                let row = match key {
                    Some(k) => step["matrix"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|kv| kv[0] == k)
                        .map(|kv| kv[1].as_str().unwrap().to_string())
                        .unwrap(),
                    None => step["name"].as_str().unwrap().to_string(),
                };
                row_header.get_or_insert(key.unwrap_or("step").to_string());
                let (t, p) = run_figures(content, unit);
                let e = expected.entry((row, col)).or_default();
                e.runs = true;
                e.throughput.push((t, 0.0));
                e.p99.push((p, 0.0));
            } else {
                assert_eq!(content["kind"], "sweep", "{id}: no findmax in these suites");
                row_header.get_or_insert(content["parameter"].as_str().unwrap().to_string());
                let points = content["points"].as_array().unwrap();
                assert!(!points.is_empty(), "{id}: a sweep without points");
                for p in points {
                    let runs = p["runs"].as_array().unwrap();
                    assert!(!runs.is_empty(), "{id}: a point without runs");
                    let of_runs: Vec<(f64, f64)> =
                        runs.iter().map(|r| run_figures(r, unit)).collect();
                    let (t, t_sd) = match unit {
                        Unit::Tps => (f(p, "/mean/events_per_sec"), f(p, "/spread/events_per_sec")),
                        // Items per second are not among a point's means:
                        // the runs' own, as the table takes them.
                        Unit::Items => stat(&of_runs.iter().map(|x| x.0).collect::<Vec<_>>()),
                        Unit::Ops => (f(p, "/mean/ops_per_sec"), f(p, "/spread/ops_per_sec")),
                    };
                    let (l, l_sd) = (f(p, "/mean/p99_ms"), f(p, "/spread/p99_ms"));
                    // The point's mean is its runs'.
                    let (rt, _) = stat(&of_runs.iter().map(|x| x.0).collect::<Vec<_>>());
                    let (rl, _) = stat(&of_runs.iter().map(|x| x.1).collect::<Vec<_>>());
                    assert!((rt - t).abs() <= 1e-6 * t.max(1.0), "{id}: {rt} vs {t}");
                    assert!((rl - l).abs() <= 1e-6 * l.max(1.0), "{id}: {rl} vs {l}");
                    let e = expected
                        .entry((number(f(p, "/value")), col.clone()))
                        .or_default();
                    e.throughput.push((t, t_sd));
                    e.p99.push((l, l_sd));
                }
            }
        }

        for (grid, what) in [(throughput, "throughput"), (p99, "p99")] {
            assert_eq!(
                Some(&grid.header[0]),
                row_header.as_ref(),
                "{title}: rows' header"
            );
            // Every cell the steps fill shows their figure…
            for ((row, col), e) in &expected {
                let heading = if col.is_empty() {
                    grid.header[1].clone()
                } else {
                    col.clone()
                };
                let cell = grid
                    .cell(row, &heading)
                    .unwrap_or_else(|| panic!("{title}: no cell ({row}, {heading}) in {grid:#?}"));
                let (t, p) = e.cell();
                let want = if what == "p99" { p } else { t };
                let (mean, sd) = figure(cell)
                    .unwrap_or_else(|| panic!("{title} ({row}, {heading}): empty, want {want:?}"));
                let at = format!("{title} {what} ({row}, {heading})");
                same(mean, want.0, &at);
                same(sd, want.1, &format!("{at} spread"));
            }
            // …and no other cell shows one.
            let shown: usize = grid.rows.iter().map(|r| r[1..].len()).sum();
            let blank = grid
                .rows
                .iter()
                .flat_map(|r| r[1..].iter())
                .filter(|c| c.as_str() == "–")
                .count();
            assert_eq!(
                shown - blank,
                expected.len(),
                "{title} {what}: cells not from any step in {grid:#?}"
            );
        }
    }

    // Each plan step's section, in order: its instance types' nodes,
    // capacity and $/month are the plan file's, and the points it planned
    // on are the measured steps'.
    let plan_sections: Vec<&Grid> = report
        .iter()
        .filter_map(|s| s.grid("**Capacity plan**"))
        .collect();
    assert_eq!(plan_sections.len(), plans.len(), "{md}");
    for ((step, plan), grid) in plans.iter().zip(plan_sections) {
        let id = step["id"].as_str().unwrap();
        let target = f(plan, "/plan/target/throughput");
        assert!(
            grid.caption.contains(&format!("for {} ", grouped0(target))),
            "{id}: {}",
            grid.caption
        );
        let instances = plan["plan"]["instances"].as_array().unwrap();
        assert_eq!(grid.rows.len(), instances.len(), "{id}: {grid:#?}");
        for i in instances {
            let name = i["name"].as_str().unwrap();
            let at = |c: &str| {
                grid.cell(name, c)
                    .unwrap_or_else(|| panic!("{id}: no ({name}, {c}) in {grid:#?}"))
            };
            match i["nodes"].as_u64() {
                Some(n) => {
                    assert_eq!(at("nodes"), n.to_string(), "{id} {name}");
                    let dollars: f64 = at("$/month")
                        .trim_start_matches('$')
                        .replace(',', "")
                        .parse()
                        .unwrap();
                    let cost = f(i, "/monthly_cost");
                    let rounding = if cost < 100.0 { 0.005 } else { 0.5 };
                    assert!((dollars - cost).abs() <= rounding + 1e-9, "{id} {name}");
                    let capacity: f64 = at(grid.header[2].as_str())
                        .replace(',', "")
                        .parse()
                        .unwrap();
                    assert!(
                        (capacity - f(i, "/capacity")).abs() <= 0.5 + 1e-9,
                        "{id} {name}"
                    );
                }
                None => {
                    assert_eq!(at("nodes"), "–", "{id} {name}");
                    assert_eq!(at("$/month"), "–", "{id} {name}");
                }
            }
        }
        // The measured points planned on: each the figures of one of the
        // input steps' runs or sweep points, with its instance and nodes.
        let inputs: Vec<String> = step["command_line"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .filter(|a| a.ends_with(".json"))
            .map(String::from)
            .collect();
        for facts in plan["instances"].as_array().unwrap() {
            let name = facts["name"].as_str().unwrap();
            for m in facts["measured"].as_array().unwrap() {
                let (t, p99, nodes) = (
                    f(m, "/throughput"),
                    f(m, "/p99_ms"),
                    f(m, "/nodes").to_string(),
                );
                let found = inputs.iter().any(|path| {
                    let v = read_json(Path::new(path));
                    let labels = &v["labels"];
                    if labels["instance"] != name || labels["nodes"].as_str() != Some(&nodes) {
                        return false;
                    }
                    let figures: Vec<(f64, f64)> = match v["points"].as_array() {
                        Some(points) => points
                            .iter()
                            .map(|p| (f(p, "/mean/ops_per_sec"), f(p, "/mean/p99_ms")))
                            .collect(),
                        None => vec![run_figures(&v, Unit::Ops)],
                    };
                    figures
                        .iter()
                        .any(|(a, b)| (a - t).abs() <= 1e-6 * t && (b - p99).abs() <= 1e-9)
                });
                assert!(
                    found,
                    "{id}: {name} at {nodes} nodes: {m} is no step's figure"
                );
            }
        }
    }
    report
}

/// `150,000`.
fn grouped0(v: f64) -> String {
    let s = format!("{:.0}", v);
    let mut g = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            g.push(',');
        }
        g.push(c);
    }
    g
}

fn titles(report: &[Section]) -> Vec<&str> {
    report.iter().map(|s| s.title.as_str()).collect()
}

// ---------------------------------------------------------------------------
// The suites
// ---------------------------------------------------------------------------

#[test]
fn s1_oltp_tables_are_the_sweeps_tps_and_p99_per_instance_size() {
    let servers = servers();
    let (_tmp, dir) = run_suite(
        "examples/suites/s1-mysql-oltp.toml",
        &[("mysql", servers.mariadb().url().to_string())],
    );
    let report = check_tables(&dir);
    for mix in ["oltp_read_write", "oltp_write_only"] {
        let title = format!("threads — {mix}");
        let s = report.iter().find(|s| s.title == title).unwrap();
        let tps = s.grid("**TPS**").expect("transactions per second");
        assert_eq!(tps.header, ["threads", "2c8g", "8c32g", "32c128g"]);
        let rows: Vec<&str> = tps.rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(rows, ["1", "2"]);
        assert!(s.grid("**Knee and bottleneck**").is_some());
    }
}

#[test]
fn s2_memtier_tables_are_the_runs_ops_and_p99_by_ratio() {
    let servers = servers();
    let (_tmp, dir) = run_suite(
        "examples/suites/s2-redis-memtier.toml",
        &[("redis", servers.redis().url().to_string())],
    );
    let report = check_tables(&dir);
    assert_eq!(
        titles(&report),
        [
            "in-memory",
            "fill-beyond-memory",
            "beyond-memory",
            "rtb-fixed-rate",
            "Gates"
        ]
    );
    for phase in ["in-memory", "beyond-memory"] {
        let s = report.iter().find(|s| s.title == phase).unwrap();
        let ops = s.grid("**ops/s**").unwrap();
        assert_eq!(ops.header, ["ratio", "redis"]);
        let rows: Vec<&str> = ops.rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(rows, ["1:0", "0:1", "1:1"]);
    }
}

#[test]
fn s6_ingest_table_is_the_sweeps_by_series_and_clients() {
    let servers = servers();
    let influx = format!(
        "influx://127.0.0.1:{}/lc_suite",
        servers.influxdb().server.port
    );
    let (_tmp, dir) = run_suite("examples/suites/s6-tsdb-ingest.toml", &[("influx", influx)]);
    let report = check_tables(&dir);
    let s = report.iter().find(|s| s.title == "ingest").unwrap();
    // Points per second: what the scenario counts.
    let ops = s.grid("**items/s**").unwrap();
    assert_eq!(
        ops.header,
        [
            "series",
            "tsdb threads=1",
            "tsdb threads=2",
            "tsdb threads=4"
        ]
    );
    let rows: Vec<&str> = ops.rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(rows, ["100", "1000"]);
    // Every point's data was found in the database afterwards.
    let record = read_json(&dir.join("suite.json"));
    for step in record["steps"].as_array().unwrap() {
        for g in step["gates"].as_array().unwrap() {
            assert_eq!(g["passed"], true, "{g}");
        }
    }
}

#[test]
fn s8_mix_scaling_and_plan_tables_are_the_runs_and_the_plan() {
    let servers = servers();
    let (_tmp, dir) = run_suite(
        "examples/suites/s8-kv-price-performance.toml",
        &[("redis", servers.redis().url().to_string())],
    );
    let report = check_tables(&dir);
    let nodes = report.iter().find(|s| s.title == "nodes").unwrap();
    let ops = nodes.grid("**ops/s**").unwrap();
    assert_eq!(ops.header.len(), 1 + 4, "2, 4, 6 and 8 nodes: {ops:#?}");
    let plans: Vec<&Section> = report.iter().filter(|s| s.title == "cost").collect();
    assert_eq!(plans.len(), 2, "150k and 1M");
    for p in plans {
        let g = p.grid("**Capacity plan**").unwrap();
        assert!(g.header.iter().any(|h| h == "$/month"), "{g:#?}");
        let names: Vec<&str> = g.rows.iter().map(|r| r[0].as_str()).collect();
        for instance in ["m5.large", "c5.xlarge", "r3.2xlarge", "r5.large"] {
            assert!(names.contains(&instance), "{names:?}");
        }
    }
}

/// Two shards of one suite, merged: every cell of the merged directory's
/// tables is its merged results' figure.
#[test]
fn a_merged_sharded_suites_tables_are_its_merged_results() {
    let servers = servers();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("sharded.toml");
    std::fs::write(
        &file,
        format!(
            "[targets.cache]\nurl = \"{}\"\nlabels = {{ instance = \"local\" }}\n\n\
             [[step]]\nname = \"mix\"\ncommand = \"run\"\nworkload = \"kv\"\ntarget = \"cache\"\n\
             for = {{ ratio = [\"1:0\", \"0:1\"] }}\noptions = {{ time = \"1s\", clients = 2 }}\n\n\
             [[step]]\nname = \"clients\"\ncommand = \"sweep\"\nworkload = \"kv\"\ntarget = \"cache\"\n\
             options = {{ time = \"1s\", clients = \"2,4\", step_gap = \"1s\" }}\n",
            servers.redis().url()
        ),
    )
    .unwrap();
    let file = file.display().to_string();
    run_two_suite_shards(tmp.path(), &file, Duration::from_secs(4));
    let o = loadcell(tmp.path(), &["merge", "d0", "d1", "--out", "m"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report = check_tables(&tmp.path().join("m"));
    assert_eq!(titles(&report), ["mix", "clients"]);
    let mix = report[0].grid("**ops/s**").unwrap();
    assert_eq!(mix.rows.len(), 2, "{mix:#?}");
}

#[test]
fn every_example_suite_passes_its_dry_run_with_its_default_variables() {
    let root = workspace();
    let mut files: Vec<String> = std::fs::read_dir(root.join("examples/suites"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with('s') && n.ends_with(".toml") && !n.starts_with("rtb"))
        .map(|n| format!("examples/suites/{n}"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 10, "S1 to S10: {files:?}");
    files.push("bench/s3-proxy.toml".into());
    let out = tempfile::tempdir().unwrap();
    for file in &files {
        let o = loadcell(
            &root,
            &[
                "suite",
                "run",
                file,
                "--dry-run",
                "--out",
                &out.path().join("dry").display().to_string(),
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{file}: {}", stderr(&o));
        let text = stdout(&o);
        assert!(
            text.lines().last().is_some_and(|l| l.contains(" steps, ")),
            "{file}: {text}"
        );
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(
            text.starts_with("description = "),
            "{file}: a description first"
        );
    }
    assert!(!out.path().join("dry").exists(), "a dry run writes nothing");
}
