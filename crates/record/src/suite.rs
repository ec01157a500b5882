//! A suite's directory file, `suite.json`: the suite as expanded, each
//! step's command line, file, status, gates and timing. Rewritten
//! atomically after every change of a step's status, so that a suite
//! killed at any moment resumes from it (`suite run --resume DIR`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::result::GateVerdict;

pub const SCHEMA: &str = "loadcell-suite/1";
/// The name of the suite file inside a suite directory.
pub const RECORD: &str = "suite.json";
/// The copy of the suite file as given, inside a suite directory.
pub const SOURCE: &str = "suite.toml";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteRecord {
    pub schema: String,
    pub loadcell_version: String,
    /// The suite file as given on the command line.
    pub file: String,
    /// Every variable after `--var` overrides (secrets are never variables).
    pub vars: BTreeMap<String, String>,
    /// The `--var` overrides, as given, so that `--resume` expands alike.
    pub overrides: Vec<String>,
    /// `I/N` when this directory is one shard's part of the suite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// The first step's start on the wall clock, for shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// The suite directory each step was compared with (`--baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// The shards' suite directories this one was merged from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The steps in the order they run.
    pub steps: Vec<StepRecord>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Started and not finished: a suite killed here redoes it on resume.
    Running,
    /// Finished with its result written (its gates may have failed).
    Done,
    /// Ended in an error: on resume it runs again.
    Failed,
    /// Ctrl-C or SIGTERM: on resume it runs again.
    Interrupted,
    /// A plan in one shard's suite: `merge` runs it over the merged
    /// results (a shard's own are a part of the load).
    Deferred,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    /// Unique in the suite, and the stem of the step's file:
    /// `03-kv-threads-cache-r2`.
    pub id: String,
    /// The `[[step]]`'s name: one table per name (and workload).
    pub name: String,
    /// run, sweep, findmax, prepare, cleanup, advise or plan.
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// The target's name in the suite file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The target's labels and the step's own.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// This expansion's `for` values, in the order they were expanded.
    #[serde(default)]
    pub matrix: Vec<(String, String)>,
    /// Which of `matrix` makes the table's rows (runs; a sweep's rows are
    /// its points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<String>,
    /// 1-based, when the step is one of `repeat` runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_index: Option<usize>,
    /// The command line run, secrets redacted.
    pub command_line: Vec<String>,
    /// The step's result (or sweep, findmax, plan, advice) file, relative
    /// to the suite directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// How long the step should take, when its options say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_s: Option<f64>,
    pub status: StepStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The step's gates, and `regression <= X%` against the baseline.
    #[serde(default)]
    pub gates: Vec<GateVerdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SuiteRecord {
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a suite record serializes")
    }

    /// Every gate that failed, with its step's id.
    pub fn failed_gates(&self) -> impl Iterator<Item = (&str, &GateVerdict)> {
        self.steps.iter().flat_map(|s| {
            s.gates
                .iter()
                .filter(|g| !g.passed)
                .map(move |g| (s.id.as_str(), g))
        })
    }
}

impl StepRecord {
    /// What sets this step apart from the others of its table: the
    /// target, its labels and the matrix values that are not the row.
    pub fn column(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(t) = self
            .target
            .as_ref()
            .filter(|_| self.row.as_deref() != Some("target"))
        {
            parts.push(t.clone());
        }
        parts.extend(self.labels.iter().map(|(k, v)| format!("{k}={v}")));
        parts.extend(
            self.matrix
                .iter()
                .filter(|(k, _)| Some(k) != self.row.as_ref() && k != "target" && k != "workload")
                .map(|(k, v)| format!("{k}={v}")),
        );
        parts.dedup();
        parts.join(" ")
    }

    /// The table this step's numbers go into: its name, and its workload
    /// when the matrix varies it.
    pub fn table(&self) -> String {
        match &self.workload {
            Some(w)
                if self.matrix.iter().any(|(k, _)| k == "workload")
                    && self.row.as_deref() != Some("workload") =>
            {
                format!("{} — {w}", self.name)
            }
            _ => self.name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(row: Option<&str>) -> StepRecord {
        StepRecord {
            id: "01-mixes-a-mix-read".into(),
            name: "mixes".into(),
            command: "run".into(),
            workload: Some("mix-read".into()),
            target: Some("a".into()),
            labels: BTreeMap::from([("instance".to_string(), "m5".to_string())]),
            matrix: vec![
                ("target".into(), "a".into()),
                ("workload".into(), "mix-read".into()),
                ("threads".into(), "8".into()),
            ],
            row: row.map(str::to_string),
            repeat_index: None,
            command_line: Vec::new(),
            file: None,
            estimate_s: None,
            status: StepStatus::Done,
            exit_code: None,
            started_at: None,
            ended_at: None,
            gates: Vec::new(),
            error: None,
        }
    }

    #[test]
    fn the_row_key_is_neither_in_the_table_name_nor_in_the_column() {
        let s = step(Some("threads"));
        assert_eq!(s.table(), "mixes — mix-read");
        assert_eq!(s.column(), "a instance=m5");
        // One table with a row per workload, not one table per workload.
        let s = step(Some("workload"));
        assert_eq!(s.table(), "mixes");
        assert_eq!(s.column(), "a instance=m5 threads=8");
        // Targets down the side: the column does not repeat the row.
        let s = step(Some("target"));
        assert_eq!(s.column(), "instance=m5 threads=8");
    }
}
