//! `loadcell merge DIR0 DIR1 … --out DIR` on suite directories: the
//! shards' suite directories merged step by step, each step's results as
//! `merge` merges one run's (or one sweep's) shards, its gates judged
//! again on the merged result, and the tables written from it. The plans
//! the shards deferred run here, over the merged results.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};
use loadcell_record::merge::ShardResult;
use loadcell_record::suite::{StepStatus, SuiteRecord};
use loadcell_record::sweep::AnyResult;
use loadcell_report::gate::Gate;

use super::{
    command_line, execute, plan_suite, read_record, redacted, step_gates, write_record,
    write_tables, SOURCE,
};

/// The gates a step's command line gave (`--threshold GATE`).
fn gates_of(command_line: &[String]) -> Vec<Gate> {
    command_line
        .windows(2)
        .filter(|w| w[0] == "--threshold")
        .filter_map(|w| Gate::parse(&w[1]).ok())
        .collect()
}

pub fn merge(dirs: &[PathBuf], out: &Path, allow_partial: bool) -> anyhow::Result<()> {
    let records = dirs
        .iter()
        .map(|d| read_record(d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let first = &records[0];
    for (dir, r) in dirs.iter().zip(&records) {
        let ids = |r: &SuiteRecord| r.steps.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
        if ids(r) != ids(first) {
            bail!(
                "{} ran other steps than {}: merge the shards of one suite",
                dir.display(),
                dirs[0].display()
            );
        }
        if r.shard.is_none() {
            bail!(
                "{} is not a shard's suite directory (it ran without --shard)",
                dir.display()
            );
        }
    }
    let count = first
        .shard
        .as_deref()
        .and_then(|s| s.split_once('/'))
        .and_then(|(_, n)| n.parse::<usize>().ok())
        .unwrap_or(records.len());
    if count != records.len() && !allow_partial {
        bail!(
            "the suite ran over {count} shards and {} directories are given: give them all, or --allow-partial",
            records.len()
        );
    }
    std::fs::create_dir_all(out.join("steps"))
        .with_context(|| format!("cannot create {}", out.display()))?;
    // The suite as the shards ran it, as a suite directory keeps it.
    let source = dirs[0].join(SOURCE);
    std::fs::copy(&source, out.join(SOURCE))
        .with_context(|| format!("cannot copy {}", source.display()))?;
    let mut merged = SuiteRecord {
        shard: None,
        merged_from: dirs.iter().map(|d| d.display().to_string()).collect(),
        ended_at: records.iter().filter_map(|r| r.ended_at.clone()).max(),
        ..first.clone()
    };
    for i in 0..merged.steps.len() {
        let plan = merged.steps[i].command == "plan";
        let finished = if plan {
            StepStatus::Deferred
        } else {
            StepStatus::Done
        };
        let unfinished: Vec<String> = dirs
            .iter()
            .zip(&records)
            .filter(|(_, r)| r.steps[i].status != finished)
            .map(|(d, _)| d.display().to_string())
            .collect();
        let step = &mut merged.steps[i];
        step.gates.clear();
        if !unfinished.is_empty() {
            step.status = StepStatus::Pending;
            step.error = Some(format!("not done in {}", unfinished.join(", ")));
            continue;
        }
        if plan {
            plan_merged(out, &mut merged, i)?;
            continue;
        }
        let Some(file) = step.file.clone() else {
            continue;
        };
        let paths: Vec<PathBuf> = dirs.iter().map(|d| d.join(&file)).collect();
        let dest = out.join(&file);
        let gates = gates_of(&step.command_line);
        step.gates = match step.command.as_str() {
            "run" => {
                let shards = paths
                    .iter()
                    .map(|p| crate::merge::read_shards(p))
                    .collect::<anyhow::Result<Vec<Vec<ShardResult>>>>()?
                    .into_iter()
                    .flatten()
                    .collect();
                let run = crate::merge::merge_runs(shards, &dest, allow_partial)?;
                gates.iter().map(|g| g.judge_run(&run, None)).collect()
            }
            "sweep" => {
                let sweeps = paths
                    .iter()
                    .map(|p| match AnyResult::read_from(p).map_err(|e| anyhow!(e))? {
                        AnyResult::Sweep(s) => Ok((p.display().to_string(), *s)),
                        AnyResult::Run(_) => bail!("{} is not a sweep file", p.display()),
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let sweep = crate::merge::merge_sweeps(sweeps, &dest, allow_partial)?;
                gates.iter().flat_map(|g| g.judge_sweep(&sweep)).collect()
            }
            other => bail!("step {}: a sharded suite has no {other} steps", step.id),
        };
    }
    write_record(out, &merged)?;
    write_tables(out, &merged)?;
    eprintln!(
        "Merged {} shards' suite directories into {}",
        dirs.len(),
        out.display()
    );
    Ok(())
}

/// Runs the plan step `i` the shards deferred, over the merged results of
/// the steps it reads: the suite as the shards ran it (its source, copied
/// into `out`, and `--var`s), unsharded, in `out`.
fn plan_merged(out: &Path, merged: &mut SuiteRecord, i: usize) -> anyhow::Result<()> {
    let source = out.join(SOURCE);
    let text = std::fs::read_to_string(&source)
        .with_context(|| format!("cannot read {}", source.display()))?;
    let overrides = merged
        .overrides
        .iter()
        .map(|o| super::file::parse_override(o).map_err(|e| anyhow!(e)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let planned = plan_suite(&merged.file, &text, &overrides, out, None, None)?;
    let step = &planned.suite.steps[i];
    let argv = command_line(
        &planned.suite,
        &merged.steps[..i],
        step,
        out,
        merged.steps[i].file.as_deref(),
        None,
        None,
    )?;
    let code = execute(step, &argv, out, &merged.steps[i])?;
    let r = &mut merged.steps[i];
    r.command_line = redacted(&argv);
    r.exit_code = Some(code);
    r.error = None;
    r.status = StepStatus::Done;
    r.gates = step_gates(out, r)?;
    Ok(())
}
