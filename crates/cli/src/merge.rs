//! `loadcell merge`, and the shard results `report`, `compare` and `plan`
//! take as one run: a directory of them, or several files of one run's
//! shards, merged in memory first (`record::merge`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use loadcell_record::file::Destination;
use loadcell_record::fine::{self, FullResolution};
use loadcell_record::merge::{merge, ShardResult};
use loadcell_record::result::RunResult;
use loadcell_record::suite::RECORD as SUITE_RECORD;
use loadcell_record::sweep::{AnyResult, PointStats, SweepPoint, SweepResult};
use loadcell_report::input::Input;

use crate::args::MergeArgs;

pub fn run(a: &MergeArgs) -> anyhow::Result<()> {
    crate::views::refuse_overwriting_results(&[("--out", &Some(a.out.clone()))])?;
    if a.files.iter().all(|f| f.join(SUITE_RECORD).is_file()) {
        return crate::suite::merge(&a.files, &a.out, a.allow_partial);
    }
    if let Some(sweeps) = read_sweeps(&a.files)? {
        merge_sweeps(sweeps, &a.out, a.allow_partial)?;
        return Ok(());
    }
    let mut shards = Vec::new();
    for path in &a.files {
        shards.extend(read_shards(path)?);
    }
    merge_runs(shards, &a.out, a.allow_partial)?;
    Ok(())
}

/// One run's shards merged into `out` (with their interval logs merged
/// beside it when each has one).
pub fn merge_runs(
    shards: Vec<ShardResult>,
    out: &Path,
    allow_partial: bool,
) -> anyhow::Result<RunResult> {
    let logs = shard_logs(&shards);
    let interval = interval_of(&shards);
    let mut merged = merge(shards, allow_partial).map_err(|e| anyhow!(e))?;
    if let Some(logs) = &logs {
        let path = out.with_extension("hlog");
        write_merged_log(&path, logs, interval)?;
        merged.hdr_log = Some(path.display().to_string());
    }
    let written = merged
        .write(&Destination::Named(out.to_path_buf()))
        .map_err(|e| anyhow!("cannot write {}: {e}", out.display()))?;
    let m = merged
        .merge
        .as_ref()
        .expect("a merged result has its section");
    eprintln!(
        "Merged {} shards into {}: {} events, {:.1} events/s over the {:.1}s all measured, p99 \
         {:.3} ms (shards {:.1}–{:.1} ops/s, p99 {:.3}–{:.3} ms)",
        m.shards.len(),
        written.display(),
        merged.summary.events,
        merged.summary.events_per_sec,
        m.window_s,
        merged.summary.latency_ms.p99,
        m.spread.ops_per_sec_min,
        m.spread.ops_per_sec_max,
        m.spread.p99_ms_min,
        m.spread.p99_ms_max,
    );
    Ok(merged)
}

/// Every shard's interval log, read whole, when each one has its own
/// beside its result and holds that result's events; `None` otherwise
/// (the merge then has the results' intervals only).
fn shard_logs(shards: &[ShardResult]) -> Option<Vec<(Vec<u8>, String)>> {
    shards
        .iter()
        .map(|s| {
            let path = fine::log_of(Path::new(&s.name), &s.result)?;
            let bytes = std::fs::read(&path).ok()?;
            let name = path.display().to_string();
            FullResolution::of_log(&bytes, &name, &s.result).ok()?;
            Some((bytes, name))
        })
        .collect()
}

/// The shards' report interval (the same in all: `merge` checks).
fn interval_of(shards: &[ShardResult]) -> Duration {
    shards
        .first()
        .map(|s| Duration::from_secs_f64(s.result.config.report_interval_s))
        .unwrap_or(Duration::from_secs(1))
}

fn write_merged_log(
    path: &Path,
    logs: &[(Vec<u8>, String)],
    interval: Duration,
) -> anyhow::Result<()> {
    let written = std::fs::File::create(path).and_then(|file| {
        let mut w = std::io::BufWriter::new(file);
        fine::write_merged_log(&mut w, logs, interval)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    });
    written.map_err(|e| {
        anyhow!(
            "cannot write the merged interval log {}: {e}",
            path.display()
        )
    })
}

/// The files, when they are sweep files (the shards of a sweep run with
/// `--shard`); none when they are results. A mix is refused.
fn read_sweeps(paths: &[PathBuf]) -> anyhow::Result<Option<Vec<(String, SweepResult)>>> {
    if paths.iter().any(|p| p.is_dir()) {
        return Ok(None);
    }
    let mut sweeps = Vec::new();
    for path in paths {
        match AnyResult::read_from(path).map_err(|e| anyhow!(e))? {
            AnyResult::Sweep(s) => sweeps.push((path.display().to_string(), *s)),
            AnyResult::Run(_) if sweeps.is_empty() => return Ok(None),
            AnyResult::Run(_) => {
                return Err(anyhow!(
                    "{} is a result, the files before it sweeps: merge the shards of one sweep, or of one run",
                    path.display()
                ))
            }
        }
    }
    Ok(Some(sweeps))
}

/// One sweep from the sweeps of its shards: each step's runs merged as
/// `merge` merges one run's (the shards started each step together with
/// --start-at), then the points and the analysis made again.
pub fn merge_sweeps(
    sweeps: Vec<(String, SweepResult)>,
    out: &Path,
    allow_partial: bool,
) -> anyhow::Result<SweepResult> {
    let (first_name, first) = &sweeps[0];
    for (name, s) in &sweeps[1..] {
        let steps = |s: &SweepResult| -> Vec<(f64, usize)> {
            s.points.iter().map(|p| (p.value, p.runs.len())).collect()
        };
        if s.parameter != first.parameter || steps(s) != steps(first) {
            return Err(anyhow!(
                "{name} swept --{} over other steps than {first_name} (--{}): merge the shards of one sweep",
                s.parameter,
                first.parameter
            ));
        }
    }
    let mut points = Vec::new();
    for (k, point) in first.points.iter().enumerate() {
        let mut runs = Vec::new();
        for rep in 0..point.runs.len() {
            let shards = sweeps
                .iter()
                .map(|(name, s)| ShardResult {
                    name: format!("{name} step {}", k * first.repeat + rep + 1),
                    result: s.points[k].runs[rep].clone(),
                })
                .collect();
            runs.push(merge(shards, allow_partial).map_err(|e| anyhow!(e))?);
        }
        let (mean, spread) = PointStats::mean_and_spread(&runs);
        points.push(SweepPoint {
            value: point.value,
            mean,
            spread,
            passed: point.passed,
            verdicts: point.verdicts.clone(),
            runs,
        });
    }
    let (analysis, findings) = crate::analysis::sweep(&first.parameter, &points);
    let merged = SweepResult {
        points,
        analysis,
        findings,
        complete: sweeps.iter().all(|(_, s)| s.complete),
        // Judged on each shard's own runs; a merge judges nothing anew.
        gates: Vec::new(),
        ..first.clone()
    };
    let written = merged
        .write(&Destination::Named(out.to_path_buf()))
        .map_err(|e| anyhow!("cannot write {}: {e}", out.display()))?;
    eprintln!(
        "Merged {} shards' sweeps of --{} ({} points) into {}",
        sweeps.len(),
        merged.parameter,
        merged.points.len(),
        written.display()
    );
    for f in &merged.findings {
        eprintln!("- {f}");
    }
    Ok(merged)
}

/// A result file, or every result file in a directory.
pub fn read_shards(path: &Path) -> anyhow::Result<Vec<ShardResult>> {
    let files = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| anyhow!("cannot read the directory {}: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(anyhow!("{} holds no result files (*.json)", path.display()));
        }
        files
    } else {
        vec![path.to_path_buf()]
    };
    files
        .into_iter()
        .map(|f| {
            let result = RunResult::read_from(&f).map_err(|e| anyhow!(e))?;
            Ok(ShardResult {
                name: f.display().to_string(),
                result,
            })
        })
        .collect()
}

/// The inputs of `report`, `compare` and `plan`: each file as it is, but
/// a directory is one run merged from the shard results in it, and the
/// results of one sharded run given as several files are merged into one
/// input where the first of them stood. Inputs are named by their file
/// name, or by their whole path with `by_path` (`compare`'s).
pub fn read_inputs(paths: &[PathBuf], by_path: bool) -> anyhow::Result<Vec<Input>> {
    let mut inputs: Vec<Input> = Vec::new();
    // Per sharded run (by `run_key`): where its merged input goes, and
    // its shards.
    let mut runs: Vec<(String, usize, Vec<ShardResult>)> = Vec::new();
    for path in paths {
        if path.is_dir() {
            let shards = read_shards(path)?;
            let input = merged_input(path.display().to_string(), shards)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            inputs.push(input);
            continue;
        }
        let mut input = Input::read(path).map_err(|e| anyhow!(e))?;
        if let Some(note) = &input.note {
            eprintln!("NOTE: {note}");
        }
        if by_path {
            input.name = path.display().to_string();
        }
        let Some(key) = input.as_run().and_then(run_key) else {
            inputs.push(input);
            continue;
        };
        let shard = ShardResult {
            name: input.name.clone(),
            result: input.as_run().expect("a run has a key").clone(),
        };
        match runs.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, _, shards)) => shards.push(shard),
            None => {
                runs.push((key, inputs.len(), vec![shard]));
                inputs.push(input);
            }
        }
    }
    for (_, at, shards) in runs.into_iter().rev() {
        if shards.len() < 2 {
            continue;
        }
        let name = format!("{} (+{} shards)", shards[0].name, shards.len() - 1);
        inputs[at] = merged_input(name, shards).map_err(|e| anyhow!(e))?;
    }
    Ok(inputs)
}

/// One run merged from its shards, with every interval from the shards'
/// logs when each has one.
fn merged_input(name: String, shards: Vec<ShardResult>) -> Result<Input, String> {
    let logs = shard_logs(&shards);
    let interval = interval_of(&shards);
    let mut input = Input::run(name, merge(shards, false)?);
    if let Some(logs) = logs {
        input.full = Some(FullResolution::of_shard_logs(&logs, interval));
    }
    Ok(input)
}

/// What the shards of one run share: workload, target and shard count.
fn run_key(r: &RunResult) -> Option<String> {
    let shard = r.config.shard?;
    Some(format!(
        "{} {} {}",
        r.config.workload, r.config.target, shard.count
    ))
}
