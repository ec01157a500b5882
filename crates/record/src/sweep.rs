//! Sweep files (`loadcell.sweep/v1`): every step of a parameter sweep or
//! an SLA search (`findmax`), each a full run result, with per-point means
//! and spread and the analysis drawn from them.

use std::collections::BTreeMap;
use std::path::Path;

use loadcell_analysis::saturation::ResourceFigures;
use loadcell_analysis::sweep::{SweepAnalysis, SweepSample};
use serde::{Deserialize, Serialize};

use crate::result::RunResult;

pub const SWEEP_SCHEMA_ID: &str = "loadcell.sweep/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepKind {
    /// One option stepped through a list of values.
    Sweep,
    /// Rates probed to find the highest one meeting an SLA.
    Findmax,
}

/// Means (and, in `spread`, standard deviations) over a point's repeats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PointStats {
    pub ops_per_sec: f64,
    pub events_per_sec: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub errors: f64,
}

impl PointStats {
    fn of(r: &RunResult) -> PointStats {
        PointStats {
            ops_per_sec: r.summary.ops_per_sec,
            events_per_sec: r.summary.events_per_sec,
            p50_ms: r.summary.latency_ms.p50,
            p95_ms: r.summary.latency_ms.p95,
            p99_ms: r.summary.latency_ms.p99,
            errors: r.summary.errors as f64,
        }
    }

    fn fields(&self) -> [f64; 6] {
        [
            self.ops_per_sec,
            self.events_per_sec,
            self.p50_ms,
            self.p95_ms,
            self.p99_ms,
            self.errors,
        ]
    }

    fn from_fields(f: [f64; 6]) -> PointStats {
        PointStats {
            ops_per_sec: f[0],
            events_per_sec: f[1],
            p50_ms: f[2],
            p95_ms: f[3],
            p99_ms: f[4],
            errors: f[5],
        }
    }

    /// Mean and (sample) standard deviation over runs.
    pub fn mean_and_spread(runs: &[RunResult]) -> (PointStats, PointStats) {
        let n = runs.len().max(1) as f64;
        let all: Vec<[f64; 6]> = runs.iter().map(|r| PointStats::of(r).fields()).collect();
        let mut mean = [0.0; 6];
        for f in &all {
            for (m, v) in mean.iter_mut().zip(f) {
                *m += v / n;
            }
        }
        let mut sd = [0.0; 6];
        if all.len() > 1 {
            for f in &all {
                for ((s, v), m) in sd.iter_mut().zip(f).zip(&mean) {
                    *s += (v - m).powi(2) / (n - 1.0);
                }
            }
            for s in &mut sd {
                *s = s.sqrt();
            }
        }
        (PointStats::from_fields(mean), PointStats::from_fields(sd))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The swept option's value at this point (for findmax: the target rate).
    pub value: f64,
    pub mean: PointStats,
    /// Standard deviation over repeats (zero for a single run).
    pub spread: PointStats,
    /// For findmax: whether every probe at this rate met the SLA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
    /// For findmax: each probe's verdict and why, in the order of `runs`
    /// ("pass: achieved …", "fail: latency bound broken: …").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<String>,
    pub runs: Vec<RunResult>,
}

impl SweepPoint {
    /// What `loadcell_analysis::sweep::analyse` reads of this point: its
    /// means, and its runs' resource figures averaged (each run's worker
    /// threads are the cores its client can use).
    pub fn sample(&self) -> SweepSample {
        let figures: Vec<ResourceFigures> = self
            .runs
            .iter()
            .filter_map(|r| {
                let workers = r.config.worker_threads.unwrap_or(r.config.threads);
                crate::resources::figures(&r.resources.samples, workers)
            })
            .collect();
        SweepSample {
            value: self.value,
            throughput: self.mean.events_per_sec,
            p99_ms: self.mean.p99_ms,
            resources: ResourceFigures::mean(&figures),
            client_utilisation: self
                .runs
                .iter()
                .filter_map(|r| r.client.as_ref().map(|c| c.utilisation))
                .reduce(f64::max),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepResult {
    pub schema: String,
    pub loadcell_version: String,
    pub kind: SweepKind,
    pub started_at: String,
    pub ended_at: String,
    /// The command line, secrets redacted.
    pub command: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// The option swept, e.g. `threads`, `clients`, `pipeline`, `rate`.
    pub parameter: String,
    pub repeat: usize,
    pub points: Vec<SweepPoint>,
    /// Knees, scalability fit or the findmax answer, in numbers.
    pub analysis: SweepAnalysis,
    /// Sentences a reader would otherwise draw by eye.
    pub findings: Vec<String>,
    /// Whether every step ran to completion.
    pub complete: bool,
    /// Why a step could not run at all (it could not connect, say): the
    /// sweep ended there, keeping the steps before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The `--threshold` gates and how the sweep fared against each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<crate::result::GateVerdict>,
}

impl SweepResult {
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("sweep types always serialize")
    }

    /// Writes the file (see [`crate::file`]) and returns where.
    pub fn write(&self, dest: &crate::file::Destination) -> std::io::Result<std::path::PathBuf> {
        crate::file::write_atomically(dest, &(self.to_json_pretty() + "\n"))
    }
}

/// A file given to `report`, `compare` or `plan`: a single run or a sweep.
#[derive(Debug, Clone)]
pub enum AnyResult {
    Run(Box<RunResult>),
    Sweep(Box<SweepResult>),
}

impl AnyResult {
    pub fn read_from(path: &Path) -> Result<AnyResult, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(crate::result::SCHEMA_ID) => serde_json::from_value(value)
                .map(|r| AnyResult::Run(Box::new(r)))
                .map_err(|e| format!("{} is not a valid result file: {e}", path.display())),
            Some(SWEEP_SCHEMA_ID) => serde_json::from_value(value)
                .map(|r| AnyResult::Sweep(Box::new(r)))
                .map_err(|e| format!("{} is not a valid sweep file: {e}", path.display())),
            Some(other) => Err(format!(
                "{} has schema '{other}'; this loadcell reads '{}' and '{SWEEP_SCHEMA_ID}'",
                path.display(),
                crate::result::SCHEMA_ID
            )),
            None => Err(format!(
                "{} is not a loadcell result or sweep file",
                path.display()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A findmax file as loadcell has written them since v1 (its analysis
    /// built as loose JSON), points left out for brevity.
    const FINDMAX_FILE: &str = r#"{
  "schema": "loadcell.sweep/v1",
  "loadcell_version": "0.1.0",
  "kind": "findmax",
  "started_at": "2025-01-01T00:00:00.000Z",
  "ended_at": "2025-01-01T00:10:00.000Z",
  "command": ["loadcell", "findmax", "kv", "--sla", "p99<=2ms"],
  "labels": {},
  "parameter": "rate",
  "repeat": 1,
  "points": [],
  "analysis": {
    "best_rate": 4000.0,
    "lowest_failing_rate": 4200.0,
    "probes": 6,
    "sla": {"bound_ms": 2.0, "min_achieved": 0.95, "percentile": 99.0}
  },
  "findings": ["highest rate meeting p99 <= 2 ms: 4000.0 events/s"],
  "complete": true
}"#;

    #[test]
    fn a_findmax_file_in_the_v1_shape_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("findmax-kv.json");
        std::fs::write(&path, FINDMAX_FILE).unwrap();
        let AnyResult::Sweep(s) = AnyResult::read_from(&path).unwrap() else {
            panic!("a sweep file");
        };
        let outcome = s.analysis.findmax.as_ref().expect("the findmax answer");
        assert_eq!(outcome.best_rate, Some(4000.0));
        assert_eq!(outcome.lowest_failing_rate, Some(4200.0));
        assert_eq!((outcome.sla.percentile, outcome.sla.bound_ms), (99.0, 2.0));
        assert_eq!(outcome.probes, 6);
        assert!(s.analysis.knee.is_none());
        // Written back, the analysis keeps its keys.
        let again: serde_json::Value = serde_json::from_str(&s.to_json_pretty()).unwrap();
        let old: serde_json::Value = serde_json::from_str(FINDMAX_FILE).unwrap();
        assert_eq!(again["analysis"], old["analysis"]);
    }
}
