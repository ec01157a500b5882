//! A suite directory's field-report tables, as Markdown and as one HTML
//! page: per step name (and workload, when the matrix varied it) the
//! throughput and the p99 of every done step, the swept value down and
//! what set the steps apart (target, labels, other matrix values) across;
//! under a sweep its knee and bottleneck per column, under a findmax its
//! answer; a plan step's instance types with their node count and cost;
//! then every failed gate and every step that is not done.
//!
//! Like the other views it reads only what the steps wrote: `suite.json`
//! and each step's result, sweep or plan file.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use loadcell_analysis::plan::{OperatingPoint, Plan};
use loadcell_record::result::{RunResult, RunStatus};
use loadcell_record::suite::{StepRecord, StepStatus, SuiteRecord};
use loadcell_record::sweep::{AnyResult, SweepKind, SweepPoint, SweepResult};
use serde::Deserialize;

use crate::html::h;
use crate::input::Input;
use crate::plan::{InstanceFacts, PlanView};
use crate::redact::redact;
use crate::table::{grouped, natural_cmp, number, UNKNOWN};

/// What one suite directory's tables are made of: the record, and each
/// done step's result read from its file (keyed by [`StepRecord::id`]).
pub struct SuiteView<'a> {
    pub record: &'a SuiteRecord,
    /// Run, sweep and findmax steps' results ([`Input::read`] of the
    /// step's file).
    pub results: &'a BTreeMap<String, Input>,
    /// Plan steps' files: the plan as `loadcell plan --json` prints it (a
    /// serialized [`PlanView`]).
    pub plans: &'a BTreeMap<String, serde_json::Value>,
}

/// The row of a findmax step: its answer.
pub const MAX_RATE: &str = "max rate";

// ---------------------------------------------------------------------------
// The tables, before either rendering
// ---------------------------------------------------------------------------

/// The throughput a table shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// Transactions per second: every result in the table counts them.
    Tps,
    /// Items per second (documents, points, rows): every result in the
    /// table carried items, which is what its scenario counts.
    Items,
    /// Operations (statements, requests) per second.
    Ops,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Tps => "TPS",
            Unit::Items => "items/s",
            Unit::Ops => "ops/s",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Unit::Tps => "transactions per second",
            Unit::Items => "documents, points or rows per second",
            Unit::Ops => "operations per second",
        }
    }
}

/// A mean and its standard deviation (0 for a single run).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    mean: f64,
    sd: f64,
}

impl Stat {
    fn one(v: f64) -> Stat {
        Stat { mean: v, sd: 0.0 }
    }

    /// Mean and sample standard deviation, as sweep points compute theirs.
    fn of(xs: &[f64]) -> Stat {
        let n = xs.len().max(1) as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let sd = if xs.len() > 1 {
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Stat { mean, sd }
    }
}

/// What makes a cell's figures doubtful.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Doubts {
    /// A run cut short went into it.
    partial: bool,
    /// A run's client was at its own ceiling (`client.at_ceiling`).
    client_bound: bool,
}

impl Doubts {
    fn of_runs<'a>(runs: impl IntoIterator<Item = &'a RunResult>) -> Doubts {
        runs.into_iter().fold(Doubts::default(), |d, r| Doubts {
            partial: d.partial || r.status != RunStatus::Complete,
            client_bound: d.client_bound || r.client.as_ref().is_some_and(|c| c.at_ceiling),
        })
    }

    fn or(self, other: Doubts) -> Doubts {
        Doubts {
            partial: self.partial || other.partial,
            client_bound: self.client_bound || other.client_bound,
        }
    }

    /// What the cell says of them: " (partial)", " (client-bound)".
    fn words(self) -> impl Iterator<Item = &'static str> {
        [
            (self.partial, "partial"),
            (self.client_bound, "client-bound"),
        ]
        .into_iter()
        .filter_map(|(on, word)| on.then_some(word))
    }
}

/// One step's (or one sweep point's) figures for a cell, before repeats
/// are averaged.
#[derive(Debug, Clone)]
enum Entry {
    Measured {
        tps: Stat,
        p99: Stat,
        doubts: Doubts,
    },
    /// No figure to show: why (a findmax none of whose probes met the SLA).
    Note(String),
}

/// What a cell shows.
#[derive(Debug, Clone)]
enum Cell {
    Measured {
        tps: Stat,
        p99: Stat,
        doubts: Doubts,
    },
    Note(String),
}

impl Cell {
    /// One entry as it is (a sweep point keeps its own spread); several
    /// (repeats) averaged, with the standard deviation between them.
    fn of(entries: &[Entry]) -> Cell {
        let measured: Vec<(Stat, Stat, Doubts)> = entries
            .iter()
            .filter_map(|e| match e {
                Entry::Measured { tps, p99, doubts } => Some((*tps, *p99, *doubts)),
                Entry::Note(_) => None,
            })
            .collect();
        match measured.as_slice() {
            [] => Cell::Note(
                entries
                    .iter()
                    .find_map(|e| match e {
                        Entry::Note(n) => Some(n.clone()),
                        Entry::Measured { .. } => None,
                    })
                    .unwrap_or_default(),
            ),
            [(tps, p99, doubts)] => Cell::Measured {
                tps: *tps,
                p99: *p99,
                doubts: *doubts,
            },
            many => Cell::Measured {
                tps: Stat::of(&many.iter().map(|m| m.0.mean).collect::<Vec<_>>()),
                p99: Stat::of(&many.iter().map(|m| m.1.mean).collect::<Vec<_>>()),
                doubts: many.iter().fold(Doubts::default(), |d, m| d.or(m.2)),
            },
        }
    }
}

/// The steps of one [`StepRecord::table`]: rows by swept value, columns by
/// [`StepRecord::column`], both in first-seen order (rows by value when
/// every one is a number).
struct Table<'a> {
    title: String,
    unit: Unit,
    /// The swept parameter or matrix key that makes the rows.
    row_header: String,
    columns: Vec<String>,
    rows: Vec<String>,
    /// By (row, column) index.
    cells: BTreeMap<(usize, usize), Cell>,
    /// The sweeps and findmax searches, with their column.
    sweeps: Vec<(String, &'a StepRecord, &'a SweepResult)>,
}

impl Table<'_> {
    fn repeats(&self) -> bool {
        self.cells.values().any(|c| match c {
            Cell::Measured { tps, p99, .. } => tps.sd > 0.0 || p99.sd > 0.0,
            Cell::Note(_) => false,
        })
    }

    /// Every doubt any cell has.
    fn doubts(&self) -> Doubts {
        self.cells.values().fold(Doubts::default(), |d, c| match c {
            Cell::Measured { doubts, .. } => d.or(*doubts),
            Cell::Note(_) => d,
        })
    }

    fn numeric_rows(&self) -> bool {
        self.rows.iter().all(|r| r.trim().parse::<f64>().is_ok())
    }

    /// A column's heading: its name, or for the one unnamed column what
    /// the table measures.
    fn heading(&self, col: usize, what: &str) -> String {
        match self.columns[col].as_str() {
            "" => what.to_string(),
            name => name.to_string(),
        }
    }
}

/// A plan step's plan, or why its file could not be read.
struct PlanSection<'a> {
    step: &'a StepRecord,
    view: Result<PlanView, String>,
}

enum Section<'a> {
    Table(Table<'a>),
    Plan(PlanSection<'a>),
}

/// A step that produced nothing to show: not done, or done without a
/// result in the view.
struct Missing<'a> {
    step: &'a StepRecord,
    status: String,
}

/// Commands whose done steps have a table (the others prepare, clean up
/// or advise).
const MEASURING: [&str; 4] = ["run", "sweep", "findmax", "plan"];

fn status_name(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Pending => "pending",
        StepStatus::Running => "running",
        StepStatus::Done => "done",
        StepStatus::Failed => "failed",
        StepStatus::Interrupted => "interrupted",
        StepStatus::Deferred => "deferred to merge",
    }
}

/// Whether the input's runs carried items (documents, points, rows).
fn carries_items(i: &Input) -> bool {
    match &i.result {
        AnyResult::Run(r) => r.summary.items_per_sec.is_some(),
        AnyResult::Sweep(s) => s
            .points
            .iter()
            .flat_map(|p| &p.runs)
            .all(|r| r.summary.items_per_sec.is_some()),
    }
}

fn transactional(i: &Input) -> bool {
    match &i.result {
        AnyResult::Run(r) => r.summary.txn_per_sec.is_some(),
        AnyResult::Sweep(s) => s
            .points
            .iter()
            .find_map(|p| p.runs.first())
            .is_some_and(|r| r.summary.txn_per_sec.is_some()),
    }
}

fn run_entry(r: &RunResult, unit: Unit, rebuilt: bool) -> Entry {
    let s = &r.summary;
    let tps = match unit {
        Unit::Tps => s.txn_per_sec.unwrap_or(s.events_per_sec),
        Unit::Items => s.items_per_sec.unwrap_or(0.0),
        // A run rebuilt from its interval log counted no operations.
        Unit::Ops if rebuilt => return Entry::Note(UNKNOWN.to_string()),
        Unit::Ops => s.ops_per_sec,
    };
    Entry::Measured {
        tps: Stat::one(tps),
        p99: Stat::one(s.latency_ms.p99),
        doubts: Doubts::of_runs([r]),
    }
}

/// A sweep point's means and spread (events are transactions where the
/// runs count them, as in [`crate::table::Row::of_point`]).
fn point_entry(p: &SweepPoint, unit: Unit) -> Entry {
    let tps = match unit {
        Unit::Tps => Stat {
            mean: p.mean.events_per_sec,
            sd: p.spread.events_per_sec,
        },
        Unit::Items => Stat::of(
            &p.runs
                .iter()
                .map(|r| r.summary.items_per_sec.unwrap_or(0.0))
                .collect::<Vec<_>>(),
        ),
        Unit::Ops => Stat {
            mean: p.mean.ops_per_sec,
            sd: p.spread.ops_per_sec,
        },
    };
    Entry::Measured {
        tps,
        p99: Stat {
            mean: p.mean.p99_ms,
            sd: p.spread.p99_ms,
        },
        doubts: Doubts::of_runs(&p.runs),
    }
}

/// The findmax answer's cell: the best probe's measured figures.
fn findmax_entry(s: &SweepResult, unit: Unit) -> Entry {
    let best = s.analysis.findmax.as_ref().and_then(|f| f.best_rate);
    match best {
        None => Entry::Note("none met the SLA".to_string()),
        Some(b) => match s.points.iter().find(|p| p.value == b && !p.runs.is_empty()) {
            Some(p) => point_entry(p, unit),
            None => Entry::Note(format!("{}/s offered", rate(b))),
        },
    }
}

/// An offered rate: `4,000`, `4,062.50`.
fn rate(v: f64) -> String {
    grouped(v, if v.fract() == 0.0 { 0 } else { 2 })
}

fn index_of(list: &mut Vec<String>, s: String) -> usize {
    match list.iter().position(|x| *x == s) {
        Some(i) => i,
        None => {
            list.push(s);
            list.len() - 1
        }
    }
}

fn build_table<'a>(title: String, steps: &[(&'a StepRecord, &'a Input)]) -> Table<'a> {
    let unit = if steps.iter().all(|(_, i)| transactional(i)) {
        Unit::Tps
    } else if steps.iter().all(|(_, i)| carries_items(i)) {
        Unit::Items
    } else {
        Unit::Ops
    };
    let mut headers: Vec<String> = Vec::new();
    let mut columns: Vec<String> = Vec::new();
    let mut rows: Vec<String> = Vec::new();
    let mut entries: BTreeMap<(usize, usize), Vec<Entry>> = BTreeMap::new();
    let mut sweeps = Vec::new();
    for &(step, input) in steps {
        let column = step.column();
        let col = index_of(&mut columns, column.clone());
        let mut put = |rows: &mut Vec<String>, row: String, e: Entry| {
            let r = index_of(rows, row);
            entries.entry((r, col)).or_default().push(e);
        };
        match &input.result {
            AnyResult::Run(r) => {
                let key = step.row.as_deref();
                let row = key
                    .and_then(|k| step.matrix.iter().find(|(m, _)| m == k))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| step.name.clone());
                index_of(&mut headers, key.unwrap_or("step").to_string());
                put(&mut rows, row, run_entry(r, unit, input.rebuilt));
            }
            AnyResult::Sweep(s) => {
                index_of(&mut headers, s.parameter.clone());
                match s.kind {
                    SweepKind::Sweep => {
                        for p in s.points.iter().filter(|p| !p.runs.is_empty()) {
                            put(&mut rows, number(p.value), point_entry(p, unit));
                        }
                    }
                    SweepKind::Findmax => {
                        put(&mut rows, MAX_RATE.to_string(), findmax_entry(s, unit));
                    }
                }
                sweeps.push((column, step, &**s));
            }
        }
    }
    // Rows in order of their value when all are numbers; then the cells'
    // row indexes follow.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    if rows.iter().all(|r| r.trim().parse::<f64>().is_ok()) {
        order.sort_by(|a, b| natural_cmp(&rows[*a], &rows[*b]));
    }
    let new_index: BTreeMap<usize, usize> = order
        .iter()
        .enumerate()
        .map(|(new, old)| (*old, new))
        .collect();
    let cells = entries
        .iter()
        .map(|((r, c), e)| ((new_index[r], *c), Cell::of(e)))
        .collect();
    let rows = order.iter().map(|i| rows[*i].clone()).collect();
    Table {
        title,
        unit,
        row_header: headers.join(" / "),
        columns,
        rows,
        cells,
        sweeps,
    }
}

/// A plan step's file, as `loadcell plan --json` wrote it.
fn plan_view(v: &serde_json::Value) -> Result<PlanView, String> {
    #[derive(Deserialize)]
    struct Facts {
        name: String,
        vcpus: u32,
        memory_gib: f64,
        #[serde(default)]
        measured: Vec<OperatingPoint>,
        #[serde(default)]
        files: Vec<String>,
    }
    #[derive(Deserialize)]
    struct View {
        unit: String,
        plan: Plan,
        instances: Vec<Facts>,
        #[serde(default)]
        gates: Vec<loadcell_record::result::GateVerdict>,
    }
    let v = View::deserialize(v).map_err(|e| format!("not a plan as loadcell writes it: {e}"))?;
    Ok(PlanView {
        unit: v.unit,
        plan: v.plan,
        instances: v
            .instances
            .into_iter()
            .map(|f| InstanceFacts {
                name: f.name,
                vcpus: f.vcpus,
                memory_gib: f.memory_gib,
                measured: f.measured,
                files: f.files,
            })
            .collect(),
        gates: v.gates,
    })
}

/// The sections in suite order (a table where its first step is), and the
/// steps with nothing to show.
fn sections<'a>(v: &SuiteView<'a>) -> (Vec<Section<'a>>, Vec<Missing<'a>>) {
    enum Pending<'a> {
        Table(String, Vec<(&'a StepRecord, &'a Input)>),
        Plan(&'a StepRecord, &'a serde_json::Value),
    }
    let mut pending: Vec<Pending<'a>> = Vec::new();
    let mut missing = Vec::new();
    for step in &v.record.steps {
        if step.status != StepStatus::Done {
            missing.push(Missing {
                step,
                status: status_name(step.status).to_string(),
            });
            continue;
        }
        if let Some(input) = v.results.get(&step.id) {
            let title = step.table();
            let at = pending
                .iter()
                .position(|p| matches!(p, Pending::Table(t, _) if *t == title));
            match at {
                Some(i) => {
                    if let Pending::Table(_, steps) = &mut pending[i] {
                        steps.push((step, input));
                    }
                }
                None => pending.push(Pending::Table(title, vec![(step, input)])),
            }
        } else if let Some(plan) = v.plans.get(&step.id) {
            pending.push(Pending::Plan(step, plan));
        } else if MEASURING.contains(&step.command.as_str()) {
            missing.push(Missing {
                step,
                status: "done, result not read".to_string(),
            });
        }
    }
    let sections = pending
        .into_iter()
        .map(|p| match p {
            Pending::Table(title, steps) => Section::Table(build_table(title, &steps)),
            Pending::Plan(step, value) => Section::Plan(PlanSection {
                step,
                view: plan_view(value),
            }),
        })
        .collect();
    (sections, missing)
}

// ---------------------------------------------------------------------------
// Words shared by both renderings
// ---------------------------------------------------------------------------

/// `threads=16`.
fn place(parameter: &str, v: f64) -> String {
    format!("{parameter}={}", number(v))
}

/// The knee, p99 climb and bottleneck of one sweep, in words.
fn knee_cells(s: &SweepResult, unit: Unit) -> [String; 3] {
    const NONE: &str = "none found";
    let param = &s.parameter;
    let knee = match s.analysis.saturation_x() {
        Some(x) => {
            let at = s
                .points
                .iter()
                .find(|p| p.value == x && !p.runs.is_empty())
                .and_then(|p| match point_entry(p, unit) {
                    Entry::Measured { tps, .. } => Some(tps.mean),
                    Entry::Note(_) => None,
                });
            match at {
                Some(t) => format!("{}: {} {}", place(param, x), grouped(t, 2), unit.name()),
                None => place(param, x),
            }
        }
        None => NONE.to_string(),
    };
    let latency = match &s.analysis.latency_knee {
        Some(k) => match (k.last_ok_value, k.value) {
            (Some(ok), Some(bad)) => format!(
                "past {}: p99 {} ms, then {} ms at {}",
                place(param, ok),
                grouped(k.last_ok_p99, 2),
                grouped(k.p99, 2),
                number(bad)
            ),
            _ => format!(
                "past {} events/s: p99 {} ms, then {} ms at {} events/s",
                grouped(k.last_ok_throughput, 2),
                grouped(k.last_ok_p99, 2),
                grouped(k.p99, 2),
                grouped(k.throughput, 2)
            ),
        },
        None => NONE.to_string(),
    };
    let bottleneck = match &s.analysis.bottleneck {
        Some(b) => b.sentence(&place(param, b.at)),
        None => NONE.to_string(),
    };
    [knee, latency, bottleneck]
}

/// A findmax's SLA, answer, lowest failing rate and probes.
fn findmax_cells(s: &SweepResult) -> [String; 4] {
    match &s.analysis.findmax {
        Some(f) => [
            format!(
                "p{} ≤ {} ms, ≥ {}% of the rate achieved",
                number(f.sla.percentile),
                number(f.sla.bound_ms),
                number(f.sla.min_achieved * 100.0)
            ),
            f.best_rate
                .map(|b| format!("{}/s", rate(b)))
                .unwrap_or_else(|| "none met the SLA".into()),
            f.lowest_failing_rate
                .map(|b| format!("{}/s", rate(b)))
                .unwrap_or_else(|| "none failed".into()),
            f.probes.to_string(),
        ],
        None => [
            "–".into(),
            "not found in the file".into(),
            "–".into(),
            s.points.len().to_string(),
        ],
    }
}

/// A row label in the knee and findmax tables: the column, and the step
/// when one column has several.
fn sweep_label(t: &Table, column: &str, step: &StepRecord) -> String {
    let shared = t.sweeps.iter().filter(|s| s.0 == column).count() > 1;
    match (column, shared) {
        ("", _) => step.id.clone(),
        (c, true) => format!("{c} · {}", step.id),
        (c, false) => c.to_string(),
    }
}

/// The plan table's columns shown here (of [`crate::plan::rows`]): the
/// instance, its nodes, capacity, $/month, $/month per 1k and notes.
const PLAN_COLUMNS: [usize; 6] = [0, 7, 8, 9, 10, 11];

fn plan_rows(v: &PlanView) -> (Vec<String>, Vec<Vec<String>>) {
    let (header, rows) = crate::plan::rows(v);
    let pick = |r: &[String]| PLAN_COLUMNS.iter().map(|&i| r[i].clone()).collect();
    (pick(&header), rows.iter().map(|r| pick(r)).collect())
}

fn counts(record: &SuiteRecord) -> String {
    let mut by: Vec<(&'static str, usize)> = Vec::new();
    for s in &record.steps {
        let name = status_name(s.status);
        match by.iter_mut().find(|b| b.0 == name) {
            Some(b) => b.1 += 1,
            None => by.push((name, 1)),
        }
    }
    let n = record.steps.len();
    let parts: Vec<String> = by.iter().map(|(k, c)| format!("{c} {k}")).collect();
    format!(
        "{n} step{}: {}",
        if n == 1 { "" } else { "s" },
        parts.join(", ")
    )
}

fn meta(record: &SuiteRecord) -> String {
    let mut s = format!("Started {}", record.started_at);
    if let Some(e) = &record.ended_at {
        let _ = write!(s, ", ended {e}");
    }
    let _ = write!(s, "; {}.", counts(record));
    if let Some(shard) = &record.shard {
        let _ = write!(s, " Shard {shard}.");
    }
    if let Some(b) = &record.baseline {
        let _ = write!(s, " Compared with the baseline {b}.");
    }
    s
}

fn gate_total(record: &SuiteRecord) -> usize {
    record.steps.iter().map(|s| s.gates.len()).sum()
}

fn missing_error(m: &Missing) -> String {
    match (&m.step.error, m.step.exit_code) {
        (Some(e), _) => e.clone(),
        (None, Some(code)) if code != 0 => format!("exit code {code}"),
        _ => "–".into(),
    }
}

// ---------------------------------------------------------------------------
// The document: what both renderings show
// ---------------------------------------------------------------------------

/// A table cell.
#[derive(Debug, Clone)]
enum Out {
    Text(String),
    /// A mean with its spread, and what makes it doubtful.
    Figure(Stat, Doubts),
    /// A figure's place holding a word instead (`none met the SLA`).
    Muted(String),
}

struct Grid {
    header: Vec<String>,
    rows: Vec<Vec<Out>>,
    /// Right-aligned (numeric) columns.
    right: Vec<bool>,
}

enum Block {
    /// What the next table shows (in bold), then how.
    Caption(String, String),
    Grid(Grid),
    /// A remark on the table above.
    Note(String),
    /// A conclusion (a plan's verdict).
    Verdict(String),
    /// What could not be shown, and why.
    Warning(String),
}

/// A `##` section: a table group, a plan, the gates, the steps not done.
struct Part {
    id: String,
    title: String,
    blocks: Vec<Block>,
}

fn text_grid(header: &[&str], rows: Vec<Vec<String>>, right: &[bool]) -> Block {
    Block::Grid(Grid {
        header: header.iter().map(|s| s.to_string()).collect(),
        rows: rows
            .into_iter()
            .map(|r| r.into_iter().map(Out::Text).collect())
            .collect(),
        right: right.to_vec(),
    })
}

/// The throughput table, then the p99 table, of a group.
fn measure_blocks(t: &Table, out: &mut Vec<Block>) {
    let mut right = vec![t.numeric_rows()];
    right.extend(t.columns.iter().map(|_| true));
    let p99 = "p99 (ms)";
    for (what, caption) in [
        (
            t.unit.name(),
            (
                t.unit.name().to_string(),
                format!("({}) by {}", t.unit.words(), t.row_header),
            ),
        ),
        (
            p99,
            ("p99 latency (ms)".into(), format!("by {}", t.row_header)),
        ),
    ] {
        let mut header = vec![t.row_header.clone()];
        header.extend((0..t.columns.len()).map(|c| t.heading(c, what)));
        let rows = t
            .rows
            .iter()
            .enumerate()
            .map(|(r, name)| {
                let mut cells = vec![Out::Text(name.clone())];
                cells.extend((0..t.columns.len()).map(|c| match t.cells.get(&(r, c)) {
                    None => Out::Text("–".into()),
                    // The findmax's reason stands in the throughput table.
                    Some(Cell::Note(n)) if what == p99 && n != UNKNOWN => Out::Text("–".into()),
                    Some(Cell::Note(n)) => Out::Muted(n.clone()),
                    Some(Cell::Measured {
                        tps,
                        p99: l,
                        doubts,
                    }) => Out::Figure(if what == p99 { *l } else { *tps }, *doubts),
                }));
                cells
            })
            .collect();
        out.push(Block::Caption(caption.0, caption.1));
        out.push(Block::Grid(Grid {
            header,
            rows,
            right: right.clone(),
        }));
    }
    let mut notes = Vec::new();
    if t.repeats() {
        notes.push("Mean ± standard deviation over repeats.");
    }
    let doubts = t.doubts();
    if doubts.partial {
        notes.push("Partial: a run was cut short; its rates cover less than asked.");
    }
    if doubts.client_bound {
        notes.push("Client-bound: a run's client was at 90% or more of its own ceiling; that figure is loadcell's limit, not the system's.");
    }
    if !notes.is_empty() {
        out.push(Block::Note(notes.join(" ")));
    }
}

/// Under sweeps, their knees and bottlenecks; under findmax searches,
/// their answers.
fn sweep_blocks(t: &Table, out: &mut Vec<Block>) {
    let of = |kind: SweepKind| -> Vec<_> { t.sweeps.iter().filter(|s| s.2.kind == kind).collect() };
    let sweeps = of(SweepKind::Sweep);
    if !sweeps.is_empty() {
        out.push(Block::Caption(
            "Knee and bottleneck".into(),
            format!(
                "per column (the knee: the last point where {} still scaled)",
                t.unit.name()
            ),
        ));
        let rows = sweeps
            .iter()
            .map(|(column, step, s)| {
                let mut r = vec![sweep_label(t, column, step)];
                r.extend(knee_cells(s, t.unit));
                r
            })
            .collect();
        out.push(text_grid(
            &["", "knee", "p99 climbs", "bottleneck"],
            rows,
            &[false; 4],
        ));
    }
    let searches = of(SweepKind::Findmax);
    if !searches.is_empty() {
        out.push(Block::Caption(
            "Findmax".into(),
            format!("per column (the {MAX_RATE} row: the best probe's figures)"),
        ));
        let rows = searches
            .iter()
            .map(|(column, step, s)| {
                let mut r = vec![sweep_label(t, column, step)];
                r.extend(findmax_cells(s));
                r
            })
            .collect();
        out.push(text_grid(
            &["", "SLA", "max rate", "lowest failing", "probes"],
            rows,
            &[false, false, true, true, true],
        ));
    }
}

fn plan_blocks(p: &PlanSection, out: &mut Vec<Block>) {
    let column = p.step.column();
    if !column.is_empty() {
        out.push(Block::Note(column));
    }
    match &p.view {
        Err(e) => out.push(Block::Warning(format!(
            "The plan of step {}: {e}",
            p.step.id
        ))),
        Ok(v) => {
            out.push(Block::Caption(
                "Capacity plan".into(),
                format!("for {}", crate::plan::goal(v)),
            ));
            let (header, rows) = plan_rows(v);
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            out.push(text_grid(
                &header,
                rows,
                &[false, true, true, true, true, false],
            ));
            if let Some(verdict) = v.plan.sentences(&v.unit).last() {
                out.push(Block::Verdict(verdict.clone()));
            }
        }
    }
}

fn end_parts(record: &SuiteRecord, missing: &[Missing], out: &mut Vec<Part>) {
    let total = gate_total(record);
    if total > 0 {
        let failed: Vec<_> = record.failed_gates().collect();
        let passed = format!("{} of {total} passed.", total - failed.len());
        let mut blocks = vec![if failed.is_empty() {
            Block::Verdict(passed)
        } else {
            Block::Warning(passed)
        }];
        if !failed.is_empty() {
            let rows = failed
                .iter()
                .map(|(id, g)| {
                    vec![
                        id.to_string(),
                        g.gate.clone(),
                        g.at.clone().unwrap_or_else(|| "–".into()),
                        g.measured.clone(),
                    ]
                })
                .collect();
            blocks.push(text_grid(
                &["step", "gate", "at", "measured"],
                rows,
                &[false; 4],
            ));
        }
        out.push(Part {
            id: "gates".into(),
            title: "Gates".into(),
            blocks,
        });
    }
    if !missing.is_empty() {
        let rows = missing
            .iter()
            .map(|m| {
                vec![
                    m.step.id.clone(),
                    m.step.command.clone(),
                    m.status.clone(),
                    missing_error(m),
                ]
            })
            .collect();
        out.push(Part {
            id: "not-done".into(),
            title: "Steps not done".into(),
            blocks: vec![text_grid(
                &["step", "command", "status", "error"],
                rows,
                &[false; 4],
            )],
        });
    }
}

/// Every section, in suite order, then the gates and the steps not done.
fn document(view: &SuiteView) -> Vec<Part> {
    let (sections, missing) = sections(view);
    let mut parts: Vec<Part> = sections
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut blocks = Vec::new();
            let title = match s {
                Section::Table(t) => {
                    measure_blocks(t, &mut blocks);
                    sweep_blocks(t, &mut blocks);
                    t.title.clone()
                }
                Section::Plan(p) => {
                    plan_blocks(p, &mut blocks);
                    p.step.table()
                }
            };
            Part {
                id: format!("table-{i}"),
                title,
                blocks,
            }
        })
        .collect();
    end_parts(view.record, &missing, &mut parts);
    parts
}

// ---------------------------------------------------------------------------
// Markdown
// ---------------------------------------------------------------------------

fn md_cell(s: &str) -> String {
    redact(s)
        .replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

fn md_out(c: &Out) -> String {
    match c {
        Out::Text(s) | Out::Muted(s) => md_cell(s),
        Out::Figure(s, doubts) => {
            let mut v = grouped(s.mean, 2);
            if s.sd > 0.0 {
                let _ = write!(v, " ± {}", grouped(s.sd, 2));
            }
            for word in doubts.words() {
                let _ = write!(v, " ({word})");
            }
            v
        }
    }
}

fn md_grid(o: &mut String, g: &Grid) {
    let header: Vec<String> = g.header.iter().map(|c| md_cell(c)).collect();
    let _ = writeln!(o, "| {} |", header.join(" | "));
    let align: Vec<&str> = g
        .right
        .iter()
        .map(|r| if *r { "--:" } else { ":--" })
        .collect();
    let _ = writeln!(o, "|{}|", align.join("|"));
    for r in &g.rows {
        let cells: Vec<String> = r.iter().map(md_out).collect();
        let _ = writeln!(o, "| {} |", cells.join(" | "));
    }
}

/// The suite's tables as GitHub-flavoured Markdown: a `##` section per
/// table (throughput, p99, then the knees or findmax answers), per plan
/// step, then the gates and the steps not done.
pub fn markdown(view: &SuiteView) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Suite {}\n", md_cell(&view.record.file));
    let _ = writeln!(o, "{}", md_cell(&meta(view.record)));
    for part in document(view) {
        let _ = writeln!(o, "\n## {}", md_cell(&part.title));
        for b in &part.blocks {
            o.push('\n');
            match b {
                Block::Caption(what, how) => {
                    let _ = writeln!(o, "**{}** {}:", md_cell(what), md_cell(how));
                }
                Block::Grid(g) => md_grid(&mut o, g),
                Block::Note(s) | Block::Verdict(s) | Block::Warning(s) => {
                    let _ = writeln!(o, "{}", md_cell(s));
                }
            }
        }
    }
    o
}

// ---------------------------------------------------------------------------
// HTML
// ---------------------------------------------------------------------------

fn html_out(c: &Out) -> String {
    match c {
        Out::Text(s) => h(s),
        Out::Muted(s) => format!("<span class=\"muted\">{}</span>", h(s)),
        Out::Figure(s, doubts) => {
            let mut v = grouped(s.mean, 2);
            if s.sd > 0.0 {
                let _ = write!(
                    v,
                    "<br><small class=\"muted\">± {}</small>",
                    grouped(s.sd, 2)
                );
            }
            for word in doubts.words() {
                let _ = write!(v, "<br><span class=\"badge partial\">{word}</span>");
            }
            v
        }
    }
}

fn html_grid(o: &mut String, g: &Grid) {
    let class = |i: usize| if g.right[i] { " class=\"n\"" } else { "" };
    o.push_str("<div class=\"scroll\"><table>\n<thead><tr>");
    for (i, c) in g.header.iter().enumerate() {
        let _ = write!(o, "<th scope=\"col\"{}>{}</th>", class(i), h(c));
    }
    o.push_str("</tr></thead>\n<tbody>\n");
    for r in &g.rows {
        o.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let _ = write!(o, "<td{}>{}</td>", class(i), html_out(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
}

/// The suite's tables as one self-contained HTML page (the report's
/// stylesheet, no scripts, nothing fetched): the sections of
/// [`markdown`], with contents.
pub fn html(view: &SuiteView) -> String {
    let record = view.record;
    let parts = document(view);
    let mut o = crate::html::page_head(&format!("loadcell suite: {}", record.file));
    let _ = writeln!(
        o,
        "<header>\n<h1>loadcell suite: {}</h1>\n<p class=\"meta\">{}</p>",
        h(&record.file),
        h(&meta(record))
    );
    o.push_str("<nav aria-label=\"Contents\"><ol>\n");
    for p in &parts {
        let _ = writeln!(o, "<li><a href=\"#{}\">{}</a></li>", p.id, h(&p.title));
    }
    o.push_str("</ol></nav>\n</header>\n<main>\n");
    if parts.is_empty() {
        o.push_str("<p class=\"note\">No step has a result to show yet.</p>\n");
    }
    for p in &parts {
        let _ = writeln!(o, "<section id=\"{}\">\n<h2>{}</h2>", p.id, h(&p.title));
        for b in &p.blocks {
            match b {
                Block::Caption(what, how) => {
                    let _ = writeln!(
                        o,
                        "<h3>{} <small class=\"muted\">{}</small></h3>",
                        h(what),
                        h(how)
                    );
                }
                Block::Grid(g) => html_grid(&mut o, g),
                Block::Note(s) => {
                    let _ = writeln!(o, "<p class=\"muted\">{}</p>", h(s));
                }
                Block::Verdict(s) => {
                    let _ = writeln!(o, "<p class=\"hint\">{}</p>", h(s));
                }
                Block::Warning(s) => {
                    let _ = writeln!(o, "<p class=\"note\">{}</p>", h(s));
                }
            }
        }
        o.push_str("</section>\n");
    }
    let _ = writeln!(
        o,
        "</main>\n<footer>\n<p>Generated by loadcell {} from {} and the steps' result files. The page loads nothing from the network and needs no scripts. Secrets in targets and labels are shown as ***.</p>\n</footer>\n</body>\n</html>",
        h(&record.loadcell_version),
        h(loadcell_record::suite::RECORD)
    );
    o
}

#[cfg(test)]
mod tests {
    use loadcell_record::result::GateVerdict;

    use super::*;
    use crate::fixture;

    #[test]
    fn a_figure_from_a_client_at_its_ceiling_says_so() {
        let idle = fixture::run(4, 1000.0);
        let mut bound = idle.clone();
        bound.client = loadcell_analysis::ceiling::from_run_cpu(10_000, 10.0, 9.6, 1, 2);
        assert_eq!(Doubts::of_runs([&idle]), Doubts::default());
        let doubts = Doubts::of_runs([&idle, &bound]);
        assert!(doubts.client_bound && !doubts.partial);
        assert_eq!(
            md_out(&Out::Figure(Stat::one(1000.0), doubts)),
            "1,000.00 (client-bound)"
        );
    }

    struct Step<'a> {
        id: &'a str,
        name: &'a str,
        command: &'a str,
        target: Option<&'a str>,
        labels: &'a [(&'a str, &'a str)],
        matrix: &'a [(&'a str, &'a str)],
        row: Option<&'a str>,
        repeat: Option<usize>,
    }

    const STEP: Step = Step {
        id: "",
        name: "",
        command: "run",
        target: None,
        labels: &[],
        matrix: &[],
        row: None,
        repeat: None,
    };

    fn step(s: Step) -> StepRecord {
        let owned = |kv: &[(&str, &str)]| -> Vec<(String, String)> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        StepRecord {
            id: s.id.into(),
            name: s.name.into(),
            command: s.command.into(),
            workload: Some("oltp_read_write".into()),
            target: s.target.map(String::from),
            labels: owned(s.labels).into_iter().collect(),
            matrix: owned(s.matrix),
            row: s.row.map(String::from),
            repeat_index: s.repeat,
            command_line: vec!["loadcell".into(), s.command.into()],
            file: Some(format!("{}.json", s.id)),
            estimate_s: None,
            status: StepStatus::Done,
            exit_code: Some(0),
            started_at: None,
            ended_at: None,
            gates: Vec::new(),
            error: None,
        }
    }

    fn record(steps: Vec<StepRecord>) -> SuiteRecord {
        SuiteRecord {
            schema: loadcell_record::suite::SCHEMA.into(),
            loadcell_version: "0.1.0".into(),
            file: "field.toml".into(),
            vars: BTreeMap::new(),
            overrides: Vec::new(),
            shard: None,
            start_at: None,
            baseline: None,
            merged_from: Vec::new(),
            started_at: "2025-01-01T00:00:00Z".into(),
            ended_at: Some("2025-01-01T02:00:00Z".into()),
            steps,
        }
    }

    fn cells(line: &str) -> Vec<String> {
        line.trim()
            .trim_start_matches("| ")
            .trim_end_matches(" |")
            .split(" | ")
            .map(|c| c.trim().to_string())
            .collect()
    }

    /// The Markdown table after the first line starting with `caption`
    /// (after `after`, when given): the header, then the rows.
    fn table_after(md: &str, after: &str, caption: &str) -> Vec<Vec<String>> {
        let from = md.find(after).unwrap_or_else(|| panic!("{after} in\n{md}"));
        let lines: Vec<&str> = md[from..].lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with(caption))
            .unwrap_or_else(|| panic!("{caption} in\n{md}"));
        // A caption above the table, or the table's own header.
        let first = if caption.starts_with('|') { at } else { at + 1 };
        lines[first..]
            .iter()
            .skip_while(|l| l.is_empty())
            .take_while(|l| l.starts_with('|'))
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(_, l)| cells(l))
            .collect()
    }

    fn cell<'t>(t: &'t [Vec<String>], row: &str, column: &str) -> &'t str {
        let c = t[0].iter().position(|h| h == column).unwrap_or_else(|| {
            panic!("column {column} in {:?}", t[0]);
        });
        let r = t
            .iter()
            .skip(1)
            .find(|r| r[0] == row)
            .unwrap_or_else(|| panic!("row {row} in {t:?}"));
        &r[c]
    }

    /// A cell's mean and standard deviation: `1,234.50 ± 7.07`.
    fn parse(c: &str) -> (f64, f64) {
        let n = |s: &str| -> f64 {
            s.trim()
                .replace(',', "")
                .parse()
                .unwrap_or_else(|_| panic!("a number: {c}"))
        };
        let c = c
            .trim_end_matches(" (client-bound)")
            .trim_end_matches(" (partial)");
        match c.split_once(" ± ") {
            Some((m, sd)) => (n(m), n(sd)),
            None => (n(c), 0.0),
        }
    }

    fn close(got: f64, want: f64) {
        assert!((got - want).abs() <= 0.005 + 1e-9, "{got} is not {want}");
    }

    fn sd(xs: &[f64]) -> f64 {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
    }

    /// S3's shape: threads down, direct and proxy across, a repeated cell.
    fn direct_and_proxy() -> (SuiteRecord, BTreeMap<String, Input>) {
        let mut steps = Vec::new();
        let mut results = BTreeMap::new();
        let runs: [(&str, &str, &str, Option<usize>, f64); 5] = [
            ("01-direct-16", "direct", "16", None, 7900.0),
            ("02-direct-8-r1", "direct", "8", Some(1), 4000.0),
            ("03-direct-8-r2", "direct", "8", Some(2), 4400.0),
            ("04-proxy-8", "proxy", "8", None, 3000.0),
            ("05-proxy-16", "proxy", "16", None, 5100.0),
        ];
        for (id, target, threads, repeat, tps) in runs {
            steps.push(step(Step {
                id,
                name: "oltp",
                target: Some(target),
                matrix: &[("target", target), ("threads", threads)],
                row: Some("threads"),
                repeat,
                ..STEP
            }));
            let r = fixture::run(threads.parse().unwrap(), tps);
            results.insert(id.to_string(), Input::run(format!("{id}.json"), r));
        }
        (record(steps), results)
    }

    #[test]
    fn run_cells_are_the_results_numbers_and_repeats_are_averaged() {
        let (rec, results) = direct_and_proxy();
        let plans = BTreeMap::new();
        let view = SuiteView {
            record: &rec,
            results: &results,
            plans: &plans,
        };
        let md = markdown(&view);
        let tps = table_after(&md, "## oltp", "**TPS**");
        assert_eq!(tps[0], ["threads", "direct", "proxy"], "{md}");
        let rows: Vec<&str> = tps[1..].iter().map(|r| r[0].as_str()).collect();
        assert_eq!(rows, ["8", "16"], "rows in order of their value");
        let txn = |id: &str| results[id].as_run().unwrap().summary.txn_per_sec.unwrap();
        let p99 = |id: &str| results[id].as_run().unwrap().summary.latency_ms.p99;

        // The two repeats: their mean, and the spread between them.
        let (mean, spread) = parse(cell(&tps, "8", "direct"));
        close(mean, (txn("02-direct-8-r1") + txn("03-direct-8-r2")) / 2.0);
        close(spread, sd(&[txn("02-direct-8-r1"), txn("03-direct-8-r2")]));
        assert_eq!(
            parse(cell(&tps, "16", "direct")),
            (txn("01-direct-16"), 0.0)
        );
        assert_eq!(parse(cell(&tps, "8", "proxy")).0, txn("04-proxy-8"));
        assert_eq!(parse(cell(&tps, "16", "proxy")).0, txn("05-proxy-16"));

        let lat = table_after(&md, "## oltp", "**p99 latency (ms)**");
        assert_eq!(lat[0], ["threads", "direct", "proxy"]);
        let (mean, spread) = parse(cell(&lat, "8", "direct"));
        let both = [p99("02-direct-8-r1"), p99("03-direct-8-r2")];
        close(mean, (both[0] + both[1]) / 2.0);
        close(spread, sd(&both));
        close(parse(cell(&lat, "16", "proxy")).0, p99("05-proxy-16"));
        assert!(md.contains("Mean ± standard deviation over repeats."));
        assert!(!md.contains("## Gates") && !md.contains("## Steps not done"));
    }

    #[test]
    fn columns_come_from_targets_labels_and_matrix_values() {
        let mut steps = Vec::new();
        let mut results = BTreeMap::new();
        for (i, (size, mix, tps)) in [
            ("2c8g", "read", 1700.0),
            ("2c8g", "write", 900.0),
            ("16c64g", "read", 9000.0),
        ]
        .into_iter()
        .enumerate()
        {
            let id = format!("{i:02}-{size}-{mix}");
            steps.push(step(Step {
                id: &id,
                name: "mix",
                target: Some("mysql"),
                labels: &[("instance", size)],
                matrix: &[("mix", mix)],
                row: Some("mix"),
                ..STEP
            }));
            results.insert(id.clone(), Input::run(&id, fixture::run(8, tps)));
        }
        let rec = record(steps);
        let plans = BTreeMap::new();
        let md = markdown(&SuiteView {
            record: &rec,
            results: &results,
            plans: &plans,
        });
        let t = table_after(&md, "## mix", "**TPS**");
        assert_eq!(
            t[0],
            ["mix", "mysql instance=2c8g", "mysql instance=16c64g"],
            "{md}"
        );
        assert_eq!(t[1][0], "read", "rows in suite order when not numbers");
        assert_eq!(parse(cell(&t, "write", "mysql instance=2c8g")).0, 900.0);
        assert_eq!(parse(cell(&t, "read", "mysql instance=16c64g")).0, 9000.0);
        assert_eq!(cell(&t, "write", "mysql instance=16c64g"), "–");
    }

    #[test]
    fn sweeps_are_rows_by_point_with_the_knee_and_bottleneck_per_column() {
        let cache = fixture::sweep(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], 2);
        let linear = fixture::sweep(&[1.0, 2.0, 4.0, 8.0], 1);
        let knee = cache
            .analysis
            .saturation_x()
            .expect("the fixture saturates");
        assert!(linear.analysis.saturation_x().is_none());
        let steps = vec![
            step(Step {
                id: "01-threads-cache",
                name: "threads",
                command: "sweep",
                target: Some("redis"),
                labels: &[("tier", "cache")],
                ..STEP
            }),
            step(Step {
                id: "02-threads-disk",
                name: "threads",
                command: "sweep",
                target: Some("redis"),
                labels: &[("tier", "disk")],
                ..STEP
            }),
        ];
        let results = BTreeMap::from([
            (
                "01-threads-cache".to_string(),
                Input::sweep("a.json", cache.clone()),
            ),
            (
                "02-threads-disk".to_string(),
                Input::sweep("b.json", linear.clone()),
            ),
        ]);
        let rec = record(steps);
        let plans = BTreeMap::new();
        let md = markdown(&SuiteView {
            record: &rec,
            results: &results,
            plans: &plans,
        });
        let t = table_after(&md, "## threads", "**TPS**");
        assert_eq!(t[0], ["threads", "redis tier=cache", "redis tier=disk"]);
        assert_eq!(t.len(), 1 + 7, "{md}");
        for p in &cache.points {
            let (mean, spread) = parse(cell(&t, &number(p.value), "redis tier=cache"));
            close(mean, p.mean.events_per_sec);
            close(spread, p.spread.events_per_sec);
        }
        for p in &linear.points {
            let (mean, _) = parse(cell(&t, &number(p.value), "redis tier=disk"));
            close(mean, p.mean.events_per_sec);
        }
        assert_eq!(cell(&t, "64", "redis tier=disk"), "–");
        let lat = table_after(&md, "## threads", "**p99 latency (ms)**");
        let p = &cache.points[3];
        close(
            parse(cell(&lat, &number(p.value), "redis tier=cache")).0,
            p.mean.p99_ms,
        );

        let k = table_after(&md, "## threads", "**Knee and bottleneck**");
        assert_eq!(k[0], ["", "knee", "p99 climbs", "bottleneck"]);
        let at = cache.points.iter().find(|p| p.value == knee).unwrap();
        let knee_cell = cell(&k, "redis tier=cache", "knee");
        let (place, figure) = knee_cell.split_once(": ").unwrap();
        assert_eq!(place, format!("threads={}", number(knee)));
        close(
            parse(figure.trim_end_matches(" TPS")).0,
            at.mean.events_per_sec,
        );
        let b = cell(&k, "redis tier=cache", "bottleneck");
        assert!(b.starts_with("saturated at threads="), "{b}");
        assert_eq!(cell(&k, "redis tier=disk", "knee"), "none found");
        assert_eq!(cell(&k, "redis tier=disk", "bottleneck"), "none found");
    }

    #[test]
    fn findmax_is_one_max_rate_row_and_ops_tables_say_so() {
        let search = fixture::findmax(&[1000.0, 2000.0, 4000.0, 5000.0]);
        let mut kv = fixture::run(8, 2000.0);
        kv.summary.txn_per_sec = None;
        let steps = vec![
            step(Step {
                id: "01-findmax",
                name: "sla",
                command: "findmax",
                target: Some("pg"),
                ..STEP
            }),
            step(Step {
                id: "02-kv",
                name: "kv",
                ..STEP
            }),
        ];
        let results = BTreeMap::from([
            (
                "01-findmax".to_string(),
                Input::sweep("f.json", search.clone()),
            ),
            ("02-kv".to_string(), Input::run("kv.json", kv.clone())),
        ]);
        let rec = record(steps);
        let plans = BTreeMap::new();
        let md = markdown(&SuiteView {
            record: &rec,
            results: &results,
            plans: &plans,
        });
        let t = table_after(&md, "## sla", "**TPS**");
        assert_eq!(t[0], ["rate", "pg"]);
        assert_eq!(t.len(), 2, "{md}");
        let best = search.points.iter().find(|p| p.value == 4000.0).unwrap();
        close(parse(cell(&t, MAX_RATE, "pg")).0, best.mean.events_per_sec);
        let f = table_after(&md, "## sla", "**Findmax**");
        assert_eq!(cell(&f, "pg", "max rate"), "4,000/s");
        assert_eq!(cell(&f, "pg", "lowest failing"), "5,000/s");
        assert_eq!(
            cell(&f, "pg", "SLA"),
            "p99 ≤ 10 ms, ≥ 95% of the rate achieved"
        );

        // No transactions: operations per second, the one unnamed column
        // named by the unit, the row by the step.
        let t = table_after(&md, "## kv", "**ops/s** (operations per second)");
        assert_eq!(t[0], ["step", "ops/s"], "{md}");
        assert_eq!(parse(cell(&t, "kv", "ops/s")).0, kv.summary.ops_per_sec);
    }

    #[test]
    fn failed_gates_and_steps_not_done_are_listed() {
        let (mut rec, results) = direct_and_proxy();
        rec.steps[0].gates = vec![
            GateVerdict {
                gate: "p99 <= 1ms".into(),
                at: None,
                passed: false,
                measured: "3.21 ms".into(),
                value: Some(3.21),
            },
            GateVerdict {
                gate: "errors == 0".into(),
                at: None,
                passed: true,
                measured: "0".into(),
                value: Some(0.0),
            },
        ];
        rec.steps[3].gates = vec![GateVerdict {
            gate: "tps >= 5k".into(),
            at: Some("threads = 8, run 2".into()),
            passed: false,
            measured: "3,000.0/s".into(),
            value: Some(3000.0),
        }];
        let mut failed = step(Step {
            id: "06-proxy-32",
            name: "oltp",
            ..STEP
        });
        failed.status = StepStatus::Failed;
        failed.error = Some("cannot connect to proxy | port 3307".into());
        rec.steps.push(failed);
        let mut pending = step(Step {
            id: "07-cleanup",
            name: "cleanup",
            command: "cleanup",
            ..STEP
        });
        pending.status = StepStatus::Pending;
        rec.steps.push(pending);
        let mut unread = step(Step {
            id: "08-proxy-64",
            name: "oltp",
            ..STEP
        });
        unread.status = StepStatus::Done;
        rec.steps.push(unread);
        let plans = BTreeMap::new();
        let view = SuiteView {
            record: &rec,
            results: &results,
            plans: &plans,
        };
        let md = markdown(&view);
        assert!(md.contains("## Gates\n\n1 of 3 passed.\n"), "{md}");
        let g = table_after(&md, "## Gates", "| step");
        assert_eq!(g.len(), 3);
        assert_eq!(g[1], ["01-direct-16", "p99 <= 1ms", "–", "3.21 ms"]);
        assert_eq!(
            g[2],
            ["04-proxy-8", "tps >= 5k", "threads = 8, run 2", "3,000.0/s"]
        );
        let s = table_after(&md, "## Steps not done", "| step");
        assert_eq!(s[0], ["step", "command", "status", "error"]);
        assert_eq!(
            s[1],
            [
                "06-proxy-32",
                "run",
                "failed",
                "cannot connect to proxy \\| port 3307"
            ]
        );
        assert_eq!(s[2], ["07-cleanup", "cleanup", "pending", "–"]);
        assert_eq!(s[3], ["08-proxy-64", "run", "done, result not read", "–"]);
        assert!(md.contains("8 steps: 6 done, 1 failed, 1 pending."), "{md}");

        let page = html(&view);
        let gates = &page[page.find("<section id=\"gates\">").unwrap()..];
        assert!(gates.contains("<td>tps &gt;= 5k</td><td>threads = 8, run 2</td>"));
        assert!(page.contains("<td>cannot connect to proxy | port 3307</td>"));
    }

    fn plan_json() -> serde_json::Value {
        let view = crate::fixture::plan_view("big");
        serde_json::from_str(&serde_json::to_string_pretty(&view).unwrap()).unwrap()
    }

    #[test]
    fn a_plan_step_is_its_instance_types_nodes_and_cost() {
        let mut rec = record(vec![
            step(Step {
                id: "01-plan",
                name: "cost",
                command: "plan",
                ..STEP
            }),
            step(Step {
                id: "02-plan",
                name: "cost-again",
                command: "plan",
                ..STEP
            }),
        ]);
        rec.steps[1].name = "broken".into();
        let results = BTreeMap::new();
        let plans = BTreeMap::from([
            ("01-plan".to_string(), plan_json()),
            ("02-plan".to_string(), serde_json::json!({"unit": "TPS"})),
        ]);
        let view = SuiteView {
            record: &rec,
            results: &results,
            plans: &plans,
        };
        let md = markdown(&view);
        assert!(
            md.contains("**Capacity plan** for 100,000 ops/s with 20% headroom, p99 ≤ 2 ms:"),
            "{md}"
        );
        let t = table_after(&md, "## cost", "| instance");
        assert_eq!(
            t[0],
            [
                "instance",
                "nodes",
                "capacity ops/s",
                "$/month",
                "$/month per 1k ops/s",
                "notes"
            ]
        );
        // 125k raw: big 4 nodes ($2,920), small 13 nodes ($1,898).
        assert_eq!(cell(&t, "small", "nodes"), "13");
        assert_eq!(cell(&t, "small", "$/month"), "$1,898");
        assert_eq!(cell(&t, "big", "nodes"), "4");
        assert_eq!(cell(&t, "big", "$/month"), "$2,920");
        assert!(md.contains("cheapest for 100k ops/s: small (13 nodes, $1,898/month)"));
        assert!(
            md.contains("## broken\n\nThe plan of step 02-plan: not a plan as loadcell writes it"),
            "{md}"
        );
        assert!(html(&view).contains("<td>small</td><td class=\"n\">13</td>"));
    }

    #[test]
    fn the_page_is_self_contained_escaped_and_shows_the_same_numbers() {
        let mut r = fixture::run(8, 1234.5);
        r.labels.insert("tier".into(), "<b>".into());
        let steps = vec![step(Step {
            id: "01-a",
            name: "a & b",
            target: Some("db"),
            labels: &[("tier", "<b>")],
            ..STEP
        })];
        let results = BTreeMap::from([("01-a".to_string(), Input::run("a.json", r.clone()))]);
        let rec = record(steps);
        let plans = BTreeMap::new();
        let view = SuiteView {
            record: &rec,
            results: &results,
            plans: &plans,
        };
        let page = html(&view);
        assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
        assert!(page.contains("<title>loadcell suite: field.toml</title>"));
        assert!(page.contains("<style>") && page.contains("Content-Security-Policy"));
        assert!(!page.contains("<script") && !page.contains("src="));
        assert!(page.contains("<th scope=\"col\" class=\"n\">db tier=&lt;b&gt;</th>"));
        assert!(!page.contains("<b>"), "{page}");
        assert!(page.contains("<h2>a &amp; b</h2>"));
        assert!(page.contains("<td class=\"n\">1,234.50</td>"));
        let p99 = grouped(r.summary.latency_ms.p99, 2);
        assert!(page.contains(&format!("<td class=\"n\">{p99}</td>")));
        for tag in ["section", "table", "tr", "td", "th", "h2", "h3", "p"] {
            let open = page.matches(&format!("<{tag}>")).count()
                + page.matches(&format!("<{tag} ")).count();
            assert_eq!(open, page.matches(&format!("</{tag}>")).count(), "<{tag}>");
        }
        assert!(page.ends_with("</html>\n"));
        // Markdown keeps the label as text; a pipe cannot split a cell.
        let md = markdown(&view);
        assert!(md.contains("| step | db tier=<b> |"), "{md}");
    }
}
