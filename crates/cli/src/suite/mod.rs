//! `loadcell suite`: a whole campaign as one file. The file is read and
//! expanded (`file`), every step checked by its own command's parsers and
//! every target reached (`check`) before the first step; then each step
//! runs in this process as its command would, into one directory whose
//! `suite.json` says what ran, and the field reports' tables are written
//! from the results (`loadcell_report::suite`).

mod check;
mod file;
mod merge;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context as _};
use clap::{Args, Subcommand};
use loadcell_record::file::{write_atomically, Destination};
use loadcell_record::result::GateVerdict;
use loadcell_record::suite::{StepRecord, StepStatus, SuiteRecord, RECORD, SCHEMA, SOURCE};
use loadcell_record::sweep::AnyResult;
use loadcell_report::input::Input;

use crate::launch::{EXIT_BELOW_EXPECTATION, EXIT_INTERRUPTED};
use file::{Step, Suite};
pub use merge::merge;

#[derive(Debug, Args)]
pub struct SuiteArgs {
    #[command(subcommand)]
    pub command: SuiteCommand,
}

#[derive(Debug, Subcommand)]
pub enum SuiteCommand {
    /// Check, then run every step of a suite file into one directory.
    Run(Box<SuiteRunArgs>),
    /// Write a suite directory's tables again (report.md, report.html),
    /// e.g. after `loadcell merge` of shards' suite directories.
    Report(SuiteReportArgs),
}

#[derive(Debug, Args)]
pub struct SuiteRunArgs {
    /// The suite file (TOML; see docs/suites.md). Not with --resume.
    #[arg(value_name = "FILE", required_unless_present = "resume")]
    pub file: Option<PathBuf>,
    /// Override one of the file's [vars] (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = file::parse_override)]
    pub vars: Vec<(String, String)>,
    /// The suite directory (default: RESULTS_DIR/suite-<file>-<UTC time>).
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub out: Option<PathBuf>,
    /// Go on with an interrupted suite in DIR: finished steps are kept as
    /// they are, the unfinished one runs again.
    #[arg(long, value_name = "DIR", conflicts_with = "file")]
    pub resume: Option<PathBuf>,
    /// Print the expanded steps and how long they will take; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// An earlier suite directory: every run, sweep and findmax is
    /// compared with the same step there, and a regression beyond the
    /// step's `regression <= X%` gate (default 5%), significant as
    /// `compare` judges it (a findmax: its 95% intervals apart), fails.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// Record every run, sweep and findmax step in this run history
    /// (`--history=URL`; alone, RESULTS_DIR/history.sqlite) and fail a
    /// step, as `trend --fail-on-change` would, when its series regressed
    /// at one of its newest runs.
    #[arg(long, value_name = "URL", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub history: Option<String>,
    /// Run shard I of N of every step (see `run --shard`); give every
    /// shard the same --start-at.
    #[arg(long, value_name = "I/N", requires = "start_at")]
    pub shard: Option<loadcell_engine::Shard>,
    /// When the first step starts measuring, on every shard (RFC 3339 in
    /// UTC, or +30s); later steps follow at instants all shards compute.
    #[arg(long, value_name = "TIME", value_parser = crate::values::start_at)]
    pub start_at: Option<SystemTime>,
    /// Where a suite directory goes by default.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub results_dir: PathBuf,
    /// Give up reaching a target before the first step after this long.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::values::positive_duration)]
    pub connect_timeout: Duration,
}

#[derive(Debug, Args)]
pub struct SuiteReportArgs {
    /// A suite directory.
    pub dir: PathBuf,
}

pub fn command(a: &SuiteArgs) -> anyhow::Result<i32> {
    match &a.command {
        SuiteCommand::Run(r) => run(r),
        SuiteCommand::Report(r) => {
            let record = read_record(&r.dir)?;
            write_tables(&r.dir, &record)?;
            Ok(0)
        }
    }
}

/// How long the suite leaves between a sharded step's end and the next
/// one's start: the same as a sharded sweep's.
const SHARD_GAP: Duration = Duration::from_secs(10);

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

pub fn read_record(dir: &Path) -> anyhow::Result<SuiteRecord> {
    let path = dir.join(RECORD);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{} is not a suite directory (no {RECORD})", dir.display()))?;
    let record: SuiteRecord = serde_json::from_str(&text)
        .with_context(|| format!("{} cannot be read", path.display()))?;
    if record.schema != SCHEMA {
        bail!(
            "{}: schema {} is not {SCHEMA}",
            path.display(),
            record.schema
        );
    }
    Ok(record)
}

fn write_record(dir: &Path, record: &SuiteRecord) -> anyhow::Result<()> {
    write_atomically(
        &Destination::Named(dir.join(RECORD)),
        &record.to_json_pretty(),
    )
    .with_context(|| format!("cannot write {}", dir.join(RECORD).display()))?;
    Ok(())
}

/// Where a step's file goes, relative to the suite directory.
fn step_file(step: &Step, id: &str) -> Option<String> {
    match step.command.as_str() {
        "run" | "sweep" | "findmax" | "plan" | "advise" => Some(format!("steps/{id}.json")),
        _ => None,
    }
}

/// A step's gates that the suite judges itself: `regression <= X%`.
fn regression_bound(step: &Step) -> anyhow::Result<Option<f64>> {
    let mut bound = None;
    for (g, _) in &step.gates {
        if let Some(rest) = g.trim().strip_prefix("regression") {
            let rest = rest.trim_start();
            let value = rest
                .strip_prefix("<=")
                .or_else(|| rest.strip_prefix('<'))
                .ok_or_else(|| anyhow!("'{g}' must look like 'regression <= 5%'"))?;
            bound =
                Some(crate::values::threshold(value.trim()).map_err(|e| anyhow!("'{g}': {e}"))?);
        }
    }
    Ok(bound)
}

/// The command line a step stands for: `loadcell COMMAND [WORKLOAD]
/// --target URL OPTIONS…`, with its labels, gates and file.
fn command_line(
    suite: &Suite,
    records: &[StepRecord],
    step: &Step,
    dir: &Path,
    file: Option<&str>,
    shard: Option<(loadcell_engine::Shard, SystemTime)>,
    history: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    let mut argv = vec!["loadcell".to_string(), step.command.clone()];
    let measured = matches!(step.command.as_str(), "run" | "sweep" | "findmax");
    if let Some(w) = &step.workload {
        argv.push(w.clone());
    }
    if let Some(t) = &step.target {
        argv.extend(["--target".into(), suite.targets[t].url.clone()]);
    }
    for (words, _) in &step.options {
        argv.extend(words.iter().cloned());
    }
    if measured {
        for (k, v) in &step.labels {
            argv.extend(["--label".into(), format!("{k}={v}")]);
        }
        for (g, _) in &step.gates {
            if !g.trim().starts_with("regression") {
                argv.extend(["--threshold".into(), g.clone()]);
            }
        }
        if let Some(n) = step.sweep_repeat {
            argv.extend(["--repeat".into(), n.to_string()]);
        }
        if let Some(f) = file {
            argv.extend(["--out".into(), dir.join(f).display().to_string()]);
        }
        if let Some(h) = history {
            argv.extend(["--history".into(), h.to_string()]);
        }
        if let Some((s, at)) = shard {
            argv.extend([
                "--shard".into(),
                s.to_string(),
                "--start-at".into(),
                humantime::format_rfc3339_millis(at).to_string(),
            ]);
        }
    } else if step.command == "plan" {
        for (g, _) in &step.gates {
            argv.extend(["--threshold".into(), g.clone()]);
        }
    } else if !step.gates.is_empty() {
        bail!(
            "{}: step {}: gates are judged on run, sweep, findmax and plan steps ({} measures nothing)",
            step.line,
            step.name,
            step.command
        );
    }
    // Earlier steps' files: a plan reads them all, an advice one run.
    let inputs: Vec<String> = step
        .inputs
        .iter()
        .flat_map(|(name, _)| records.iter().filter(move |r| r.name == *name))
        .filter_map(|r| r.file.as_ref().map(|f| dir.join(f).display().to_string()))
        .collect();
    match step.command.as_str() {
        "plan" => argv.extend(inputs),
        "advise" if inputs.len() == 1 => argv.extend(["--result".into(), inputs[0].clone()]),
        "advise" if inputs.len() > 1 => bail!(
            "step {}: advise reads one run's result, and its inputs name {} files",
            step.name,
            inputs.len()
        ),
        _ => {}
    }
    Ok(argv)
}

/// A command line as a shell would take it back: words with spaces or
/// quotes in single quotes.
fn shown(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty()
                || a.contains(|c: char| c.is_whitespace() || "'\"$`\\|&;<>()*?".contains(c))
            {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn redacted(argv: &[String]) -> Vec<String> {
    argv.iter()
        .map(|a| loadcell_core::target::redact_raw(a))
        .collect()
}

/// The suite as read and checked: its records (pending), and each step's
/// expansion.
struct Planned {
    suite: Suite,
    records: Vec<StepRecord>,
    /// Each target to reach, with a workload's driver, by target name and
    /// workload.
    reach: BTreeMap<(String, String), (crate::workload::WorkloadSpec, loadcell_core::Target)>,
}

fn plan_suite(
    name: &str,
    text: &str,
    overrides: &[(String, String)],
    dir: &Path,
    shard: Option<(loadcell_engine::Shard, SystemTime)>,
    history: Option<&str>,
) -> anyhow::Result<Planned> {
    let suite = file::read(name, text, overrides)?;
    let mut records: Vec<StepRecord> = Vec::new();
    let mut reach = BTreeMap::new();
    let mut at = shard.map(|(_, t)| t);
    for (i, step) in suite.steps.iter().enumerate() {
        let id = step.id(i);
        let file = step_file(step, &id);
        let where_ = |line: usize| format!("{name}:{line}: step {}", step.name);
        regression_bound(step).map_err(|e| anyhow!("{}: {e}", where_(step.line)))?;
        if shard.is_some() && !matches!(step.command.as_str(), "run" | "sweep" | "plan") {
            bail!(
                "{}: a sharded suite runs run, sweep and plan steps only (a {} decides on its own \
                 shard's numbers, or changes the data under the others): run it unsharded",
                where_(step.line),
                step.command
            );
        }
        let argv = command_line(
            &suite,
            &records,
            step,
            dir,
            file.as_deref(),
            shard.map(|(s, _)| s).zip(at),
            history,
        )
        .map_err(|e| anyhow!("{name}:{e}"))?;
        let checked = check::check(&argv).map_err(|e| {
            let e = e.to_string();
            anyhow!("{}: {}", where_(step.line_of(&e)), e)
        })?;
        // Each target once per workload: two workloads may reach one URL
        // through different drivers (kv and a stream on redis://).
        if let (Some(t), Some(r)) = (&step.target, checked.reach) {
            let workload = step.workload.clone().unwrap_or_default();
            reach.entry((t.clone(), workload)).or_insert(r);
        }
        // A shard defers its plans to `merge`: they take it no time.
        if let Some(start) = at.filter(|_| step.command != "plan") {
            let length = checked.estimate.ok_or_else(|| {
                anyhow!(
                    "{}: a sharded suite needs each step's --time, so that every shard starts it at the same instant",
                    where_(step.line)
                )
            })?;
            at = Some(start + length + SHARD_GAP);
        }
        records.push(StepRecord {
            id,
            name: step.name.clone(),
            command: step.command.clone(),
            workload: step.workload.clone(),
            target: step.target.clone(),
            labels: step.labels.clone(),
            matrix: step.matrix.clone(),
            row: step.row.clone(),
            repeat_index: step.repeat_index,
            command_line: redacted(&argv),
            file,
            estimate_s: checked.estimate.map(|d| d.as_secs_f64()),
            status: StepStatus::Pending,
            exit_code: None,
            started_at: None,
            ended_at: None,
            gates: Vec::new(),
            error: None,
        });
    }
    Ok(Planned {
        suite,
        records,
        reach,
    })
}

fn default_dir(a: &SuiteRunArgs, file: &Path) -> PathBuf {
    let stem = file
        .file_stem()
        .map_or("suite".into(), |s| s.to_string_lossy().to_string());
    let time = humantime::format_rfc3339_seconds(SystemTime::now())
        .to_string()
        .replace([':', '-'], "");
    a.results_dir
        .join(format!("suite-{stem}-{}", time.trim_end_matches('Z')))
}

fn run(a: &SuiteRunArgs) -> anyhow::Result<i32> {
    let resuming = a.resume.is_some();
    let (dir, name, text, overrides, old) = match &a.resume {
        Some(dir) => {
            let old = read_record(dir)?;
            let text = std::fs::read_to_string(dir.join(SOURCE))
                .with_context(|| format!("cannot read {}", dir.join(SOURCE).display()))?;
            if !a.vars.is_empty() {
                bail!("--resume runs the suite with the variables it started with ({}); give no --var", old.overrides.join(" "));
            }
            let overrides = old
                .overrides
                .iter()
                .map(|o| file::parse_override(o).map_err(|e| anyhow!(e)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            (dir.clone(), old.file.clone(), text, overrides, Some(old))
        }
        None => {
            let path = a
                .file
                .as_ref()
                .expect("clap requires FILE without --resume");
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the suite file {}", path.display()))?;
            let dir = a.out.clone().unwrap_or_else(|| default_dir(a, path));
            if dir.join(RECORD).exists() && !a.dry_run {
                bail!(
                    "{} holds a suite already: resume it with --resume {}, or give another --out",
                    dir.display(),
                    dir.display()
                );
            }
            (dir, path.display().to_string(), text, a.vars.clone(), None)
        }
    };
    let shard = match (a.shard, a.start_at) {
        (Some(s), Some(t)) => Some((s, t)),
        (Some(_), None) => unreachable!("clap requires --start-at with --shard"),
        (None, Some(_)) => bail!("--start-at times a sharded suite: give --shard I/N too"),
        (None, None) => None,
    };
    // Given alone, the store is named, so the steps and the judging agree.
    let history = a.history.as_ref().map(|h| {
        if h.is_empty() {
            a.results_dir.display().to_string()
        } else {
            h.clone()
        }
    });
    let planned = plan_suite(&name, &text, &overrides, &dir, shard, history.as_deref())?;
    let mut records = planned.records;
    if let Some(old) = &old {
        adopt_finished(&mut records, old)?;
    }
    if a.dry_run {
        print!("{}", dry_run(&records));
        return Ok(0);
    }
    let baseline = match &a.baseline {
        Some(b) => Some((b.clone(), read_record(b)?)),
        None => None,
    };
    for ((t, workload), (spec, target)) in &planned.reach {
        let info = check::reach(spec, target, a.connect_timeout)
            .map_err(|e| anyhow!("target {t} (for {workload}): {e:#}"))?;
        eprintln!(
            "loadcell: target {t}: {} {} reached for {workload}",
            info.product, info.version
        );
    }
    std::fs::create_dir_all(dir.join("steps"))
        .with_context(|| format!("cannot create the suite directory {}", dir.display()))?;
    if a.history.as_deref() == Some("") {
        // A directory, so `--history DIR` means its history.sqlite.
        std::fs::create_dir_all(&a.results_dir).with_context(|| {
            format!(
                "cannot create the results directory {}",
                a.results_dir.display()
            )
        })?;
    }
    if !resuming {
        std::fs::write(dir.join(SOURCE), &text)
            .with_context(|| format!("cannot write {}", dir.join(SOURCE).display()))?;
    }
    let mut record = SuiteRecord {
        schema: SCHEMA.into(),
        loadcell_version: env!("CARGO_PKG_VERSION").into(),
        file: name.clone(),
        vars: planned.suite.vars.clone(),
        overrides: overrides.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        shard: shard.map(|(s, _)| s.to_string()),
        start_at: shard.map(|(_, t)| humantime::format_rfc3339_millis(t).to_string()),
        baseline: a.baseline.as_ref().map(|b| b.display().to_string()),
        merged_from: Vec::new(),
        started_at: old.as_ref().map_or_else(now, |o| o.started_at.clone()),
        ended_at: None,
        steps: records,
    };
    write_record(&dir, &record)?;
    let starts = shard.map(|(_, t)| schedule(&record.steps, t));
    let mut stopped = None;
    for i in 0..record.steps.len() {
        if record.steps[i].status == StepStatus::Done {
            continue;
        }
        let step = &planned.suite.steps[i];
        if shard.is_some() && step.command == "plan" {
            record.steps[i].status = StepStatus::Deferred;
            write_record(&dir, &record)?;
            continue;
        }
        // Plans and advice name earlier steps' files, known by now.
        let argv = command_line(
            &planned.suite,
            &record.steps[..i],
            step,
            &dir,
            record.steps[i].file.as_deref(),
            shard.zip(starts.as_ref()).map(|((s, _), at)| (s, at[i])),
            history.as_deref(),
        )?;
        let r = &mut record.steps[i];
        r.status = StepStatus::Running;
        r.started_at = Some(now());
        r.ended_at = None;
        r.error = None;
        r.gates.clear();
        r.command_line = redacted(&argv);
        write_record(&dir, &record)?;
        eprintln!(
            "loadcell: suite step {}/{}: {}",
            i + 1,
            record.steps.len(),
            shown(&record.steps[i].command_line)
        );
        let outcome = execute(step, &argv, &dir, &record.steps[i]);
        let r = &mut record.steps[i];
        r.ended_at = Some(now());
        match outcome {
            Ok(code) => {
                r.exit_code = Some(code);
                r.status = match code {
                    0 | EXIT_BELOW_EXPECTATION => StepStatus::Done,
                    EXIT_INTERRUPTED => StepStatus::Interrupted,
                    _ => StepStatus::Failed,
                };
            }
            Err(e) => {
                r.status = StepStatus::Failed;
                r.error = Some(loadcell_core::target::redact_raw(&format!("{e:#}")));
            }
        }
        if r.status == StepStatus::Done {
            r.gates = step_gates(&dir, r)?;
            if let Some((bdir, base)) = &baseline {
                if let Some(v) = against_baseline(step, r, &dir, bdir, base)? {
                    r.gates.push(v);
                }
            }
            if let Some(store) = &history {
                if let Some(v) = against_history(r, &dir, store)? {
                    r.gates.push(v);
                }
            }
        }
        let status = r.status;
        write_record(&dir, &record)?;
        if status != StepStatus::Done {
            stopped = Some(status);
            break;
        }
    }
    if stopped.is_none() {
        record.ended_at = Some(now());
        write_record(&dir, &record)?;
    }
    write_tables(&dir, &record)?;
    Ok(summary(&dir, &record, stopped))
}

/// When each step of a sharded suite starts: the suite's instant, then
/// each step still to run a slot of its length and the gap later (the
/// done steps of a resumed suite, and plans, take no time).
fn schedule(steps: &[StepRecord], first: SystemTime) -> Vec<SystemTime> {
    let mut at = first;
    steps
        .iter()
        .map(|s| {
            let start = at;
            // Plans are deferred to merge: no slot.
            if s.status != StepStatus::Done && s.command != "plan" {
                at += Duration::from_secs_f64(s.estimate_s.unwrap_or(0.0)) + SHARD_GAP;
            }
            start
        })
        .collect()
}

/// A resumed suite keeps its finished steps as they are.
fn adopt_finished(records: &mut [StepRecord], old: &SuiteRecord) -> anyhow::Result<()> {
    if old.steps.len() != records.len()
        || old
            .steps
            .iter()
            .zip(records.iter())
            .any(|(o, n)| o.id != n.id)
    {
        bail!("the suite's steps expand differently now than when it started: start it again with another --out");
    }
    for (new, old) in records.iter_mut().zip(&old.steps) {
        if old.status == StepStatus::Done {
            *new = old.clone();
        }
    }
    Ok(())
}

/// Runs one step in this process, as its command would, into its file.
fn execute(step: &Step, argv: &[String], dir: &Path, record: &StepRecord) -> anyhow::Result<i32> {
    let cli = crate::parse_cli(argv).map_err(|e| anyhow!("{}", crate::usage_error(&e)))?;
    let out = record.file.as_ref().map(|f| dir.join(f));
    match (step.command.as_str(), cli.command) {
        ("advise", crate::args::Command::Advise(a)) => {
            let advice = crate::advise::gather(&a)?;
            print!("{}", advice.text);
            write_json(out.as_deref(), &advice.json)?;
            Ok(0)
        }
        ("plan", crate::args::Command::Plan(a)) => {
            crate::plan::check_gates(&a)?;
            let inputs = crate::merge::read_inputs(&a.files, false)?;
            let view = crate::plan::build(&a, &inputs)?;
            print!("{}", loadcell_report::plan::text(&view));
            write_json(out.as_deref(), &serde_json::to_value(&view)?)?;
            Ok(crate::plan::exit_code(&view))
        }
        (_, command) => crate::dispatch(crate::args::Cli { command }, argv.to_vec()),
    }
}

fn write_json(path: Option<&Path>, value: &serde_json::Value) -> anyhow::Result<()> {
    let path = path.expect("plan and advise steps have a file");
    write_atomically(
        &Destination::Named(path.to_path_buf()),
        &serde_json::to_string_pretty(value)?,
    )
    .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The verdicts the step's own result file holds.
fn step_gates(dir: &Path, r: &StepRecord) -> anyhow::Result<Vec<GateVerdict>> {
    let Some(file) = r.file.as_ref().filter(|_| r.command != "advise") else {
        return Ok(Vec::new());
    };
    if r.command == "plan" {
        let text = std::fs::read_to_string(dir.join(file))
            .with_context(|| format!("cannot read {}", dir.join(file).display()))?;
        let plan: serde_json::Value = serde_json::from_str(&text)?;
        return Ok(match plan.get("gates") {
            Some(gates) => serde_json::from_value(gates.clone())?,
            None => Vec::new(),
        });
    }
    let input = Input::read(&dir.join(file)).map_err(|e| anyhow!(e))?;
    Ok(match input.result {
        AnyResult::Run(run) => run.gates,
        AnyResult::Sweep(sweep) => sweep.gates,
    })
}

/// `regression <= X%` against the same step of the baseline suite, judged
/// as `compare --fail-if-regressed` judges it.
fn against_baseline(
    step: &Step,
    r: &StepRecord,
    dir: &Path,
    bdir: &Path,
    base: &SuiteRecord,
) -> anyhow::Result<Option<GateVerdict>> {
    if !matches!(r.command.as_str(), "run" | "sweep" | "findmax") {
        return Ok(None);
    }
    let bound = regression_bound(step)?.unwrap_or(0.05);
    let gate = format!("regression <= {}%", bound * 100.0);
    let Some(theirs) = base
        .steps
        .iter()
        .find(|b| b.id == r.id && b.status == StepStatus::Done)
        .and_then(|b| b.file.as_ref())
    else {
        return Ok(Some(GateVerdict {
            gate,
            at: Some(bdir.display().to_string()),
            passed: true,
            measured: "no such finished step in the baseline: not compared".into(),
            value: None,
        }));
    };
    let ours = r.file.as_ref().expect("measured steps have a file");
    let inputs = [
        Input::read(&bdir.join(theirs)).map_err(|e| anyhow!(e))?,
        Input::read(&dir.join(ours)).map_err(|e| anyhow!(e))?,
    ];
    if r.command == "findmax" {
        let at = Some(bdir.join(theirs).display().to_string());
        return Ok(Some(findmax_against(gate, at, bound, &inputs)));
    }
    let comparison = crate::compare::compare(&inputs, Some(bound))?;
    let outcomes = comparison.gate_outcomes();
    let worst = outcomes
        .iter()
        .max_by(|a, b| a.worse_by.total_cmp(&b.worse_by));
    let measured = outcomes
        .iter()
        .map(|o| {
            format!(
                "{} {:+.1}%{}",
                o.metric,
                o.relative_change * 100.0,
                if o.regressed { " (regressed)" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Some(GateVerdict {
        gate,
        at: Some(bdir.join(theirs).display().to_string()),
        passed: !comparison.regressed(),
        measured: if measured.is_empty() {
            "nothing comparable".into()
        } else {
            measured
        },
        value: worst.map(|o| o.worse_by * 100.0),
    }))
}

/// A findmax's answer against the baseline's: regressed when its rate
/// fell by more than `bound` and the two 95% intervals do not overlap
/// (the fall is beyond what either search could tell apart). Without an
/// interval on both sides, the rates alone are judged, and it says so.
fn findmax_against(
    gate: String,
    at: Option<String>,
    bound: f64,
    inputs: &[Input; 2],
) -> GateVerdict {
    let answer = |input: &Input| match &input.result {
        AnyResult::Sweep(s) => s.analysis.findmax.as_ref().map(|f| (f.best_rate, f.ci95)),
        AnyResult::Run(_) => None,
    };
    let verdict = |passed: bool, measured: String, value: Option<f64>| GateVerdict {
        gate: gate.clone(),
        at: at.clone(),
        passed,
        measured,
        value,
    };
    let (Some((Some(base), base_ci)), Some((Some(ours), our_ci))) =
        (answer(&inputs[0]), answer(&inputs[1]))
    else {
        return verdict(
            false,
            "no rate met the SLA on one side: nothing to compare".into(),
            None,
        );
    };
    let change = ours / base - 1.0;
    let shown = |rate: f64, ci: Option<[f64; 2]>| match ci {
        Some([low, high]) => format!("{rate:.0}/s [{low:.0}–{high:.0}]"),
        None => format!("{rate:.0}/s (no interval)"),
    };
    let apart = match (base_ci, our_ci) {
        (Some(b), Some(o)) => o[1] < b[0] || b[1] < o[0],
        _ => true,
    };
    let regressed = -change > bound && apart;
    verdict(
        !regressed,
        format!(
            "rate {:+.1}%{}: {} against {}",
            change * 100.0,
            match (regressed, apart) {
                (true, _) => " (regressed)",
                (false, false) => " (the intervals overlap)",
                _ => "",
            },
            shown(ours, our_ci),
            shown(base, base_ci)
        ),
        Some((-change * 100.0).max(0.0)),
    )
}

/// No regression at the newest runs of the step's series in the run
/// history, judged as `trend --fail-on-change` judges it.
fn against_history(r: &StepRecord, dir: &Path, store: &str) -> anyhow::Result<Option<GateVerdict>> {
    let Some(file) = r
        .file
        .as_ref()
        .filter(|_| matches!(r.command.as_str(), "run" | "sweep" | "findmax"))
    else {
        return Ok(None);
    };
    let regressions = crate::history::recent_regressions_of(store, &dir.join(file))?;
    Ok(Some(GateVerdict {
        gate: "no change for the worse in the run history".into(),
        at: Some(loadcell_core::target::redact_raw(store)),
        passed: regressions.is_empty(),
        measured: if regressions.is_empty() {
            "none among the series' newest runs".into()
        } else {
            regressions.join("; ")
        },
        value: None,
    }))
}

/// The expanded steps, their command lines and how long they take.
fn dry_run(records: &[StepRecord]) -> String {
    let mut out = String::new();
    let mut total = 0.0;
    let mut unknown = 0;
    for r in records {
        let status = if r.status == StepStatus::Done {
            " (done)"
        } else {
            ""
        };
        let estimate = match r.estimate_s {
            Some(s) => {
                if r.status != StepStatus::Done {
                    total += s;
                }
                format!(
                    "{}",
                    humantime::format_duration(Duration::from_secs(s.round() as u64))
                )
            }
            None => {
                unknown += 1;
                "?".into()
            }
        };
        out += &format!(
            "{}{status}  [{estimate}]\n  {}\n",
            r.id,
            shown(&r.command_line)
        );
    }
    out += &format!(
        "{} steps, {} of load{}\n",
        records.len(),
        humantime::format_duration(Duration::from_secs(total.round() as u64)),
        if unknown > 0 {
            format!(" and {unknown} steps whose length their options do not say")
        } else {
            String::new()
        }
    );
    out
}

/// The tables of a suite directory, as report.md and report.html.
pub fn write_tables(dir: &Path, record: &SuiteRecord) -> anyhow::Result<()> {
    let mut results = BTreeMap::new();
    let mut plans = BTreeMap::new();
    for s in record.steps.iter().filter(|s| s.status == StepStatus::Done) {
        let Some(file) = &s.file else { continue };
        let path = dir.join(file);
        if s.command == "plan" {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            plans.insert(s.id.clone(), serde_json::from_str(&text)?);
        } else if s.command != "advise" {
            results.insert(s.id.clone(), Input::read(&path).map_err(|e| anyhow!(e))?);
        }
    }
    let view = loadcell_report::suite::SuiteView {
        record,
        results: &results,
        plans: &plans,
    };
    crate::views::write(
        &dir.join("report.md"),
        &loadcell_report::suite::markdown(&view),
    )?;
    crate::views::write(
        &dir.join("report.html"),
        &loadcell_report::suite::html(&view),
    )?;
    Ok(())
}

/// Prints what the suite did and returns its exit code: 130 interrupted,
/// 1 a step failed, 3 a gate failed, else 0.
fn summary(dir: &Path, record: &SuiteRecord, stopped: Option<StepStatus>) -> i32 {
    let done = record
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Done)
        .count();
    eprintln!(
        "Suite: {done} of {} steps done; tables in {} and {}",
        record.steps.len(),
        dir.join("report.md").display(),
        dir.join("report.html").display()
    );
    let failed: Vec<_> = record.failed_gates().collect();
    for (id, g) in &failed {
        let at = g.at.as_ref().map(|a| format!(" ({a})")).unwrap_or_default();
        println!("GATE FAILED  {id}: {}{at}: measured {}", g.gate, g.measured);
    }
    let below = record
        .steps
        .iter()
        .any(|s| s.exit_code == Some(EXIT_BELOW_EXPECTATION));
    match stopped {
        Some(status) => {
            let s = record
                .steps
                .iter()
                .find(|s| s.status == status)
                .expect("the step that stopped the suite");
            eprintln!(
                "Suite stopped at {} ({:?}{}); go on with: loadcell suite run --resume {}",
                s.id,
                status,
                s.error
                    .as_ref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default(),
                dir.display()
            );
            if status == StepStatus::Interrupted {
                EXIT_INTERRUPTED
            } else {
                1
            }
        }
        None if !failed.is_empty() || below => EXIT_BELOW_EXPECTATION,
        None => 0,
    }
}
