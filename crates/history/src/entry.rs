//! One run as the history keeps it: its series, when and where it ran,
//! the commit it measured, its quality flags, its numbers and its full
//! latency histogram.

use std::collections::BTreeMap;
use std::path::Path;

use loadcell_analysis::saturation::{saturated, Resource};
use loadcell_record::resources::ResourceSample;
use loadcell_record::result::{RunResult, RunStatus};
use loadcell_record::sweep::{AnyResult, SweepKind, SweepResult};
use serde::{Deserialize, Serialize};

use crate::key::{SeriesKey, COMMIT_LABEL};

/// Under `--rate`, a run that sent less than this share of the events its
/// schedule made due did not offer the load it was asked to (findmax's
/// share, `Sla::min_achieved`). Counted against the schedule, not the
/// nominal rate: a short Poisson schedule may itself fall 5% short.
pub const MIN_ACHIEVED: f64 = 0.95;

/// One run of a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub series: SeriesKey,
    /// The run's `started_at`, as the file has it (RFC 3339).
    pub started_at: String,
    /// `environment.host.hostname`.
    pub host: String,
    /// The label `commit`, else what the caller passed.
    pub commit: Option<String>,
    /// The result (or sweep) file, as given when recorded.
    pub file: String,
    pub flags: Flags,
    pub metrics: Metrics,
    pub histogram: Histogram,
}

/// What makes a run's numbers doubtful. All false is a clean run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flags {
    /// Stopped before its time or event limit (`status: partial`:
    /// interrupted, a fatal error, the server gone).
    pub partial: bool,
    /// The check after the run found the data it wrote missing
    /// (`verification.ok` false).
    pub verification_failed: bool,
    /// Open loop (`--rate`): fewer than [`MIN_ACHIEVED`] of the events
    /// that fell due were sent (the rest were dropped, unsent at the end).
    pub rate_not_reached: bool,
    /// The client was at or above 90% of its own ceiling
    /// (`client.at_ceiling`; in files from before it, loadcell's own CPU
    /// averaged at least 90% of the cores its worker threads can use): the
    /// client, not the system, may have been the limit.
    pub client_saturated: bool,
}

impl Flags {
    pub fn any(&self) -> bool {
        self.partial || self.verification_failed || self.rate_not_reached || self.client_saturated
    }
}

/// Which rate [`Metrics::throughput`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThroughputUnit {
    /// Transactions per second (`summary.txn_per_sec`).
    TxnPerSec,
    /// Operations per second (`summary.ops_per_sec`).
    OpsPerSec,
}

impl ThroughputUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            ThroughputUnit::TxnPerSec => "txn_per_sec",
            ThroughputUnit::OpsPerSec => "ops_per_sec",
        }
    }

    pub fn parse(s: &str) -> Option<ThroughputUnit> {
        match s {
            "txn_per_sec" => Some(ThroughputUnit::TxnPerSec),
            "ops_per_sec" => Some(ThroughputUnit::OpsPerSec),
            _ => None,
        }
    }
}

/// A run's scalar numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// `summary.txn_per_sec` when the workload is transactional, else
    /// `summary.ops_per_sec`.
    pub throughput: f64,
    pub throughput_unit: ThroughputUnit,
    /// Response time per event (`summary.latency_ms`), in milliseconds.
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    /// `summary.errors / summary.ops` (0 without operations), as the
    /// `error_rate` gate reads it: a fraction, not percent.
    pub error_rate: f64,
    /// loadcell's CPU time (user + system) per operation, in µs; `None`
    /// without operations.
    pub client_cpu_us_per_op: Option<f64>,
    /// Every server counter of the resource samples (`resources.samples[].
    /// server`: gauges as read, `*_total` counters as `*_per_s` rates),
    /// averaged over the measured samples, each weighted by the time it
    /// covers.
    pub server: BTreeMap<String, f64>,
}

/// The run's full response-time histogram, as the result file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// `histograms.encoding`: `hdr-v2-deflate-base64`.
    pub encoding: String,
    /// `histograms.unit`: `us`.
    pub unit: String,
    /// `histograms.response`: decode with `loadcell_record::hist::decode`.
    pub response: String,
}

impl Histogram {
    /// The histogram decoded.
    pub fn decode(&self) -> Result<loadcell_record::Micros, String> {
        loadcell_record::hist::decode(&self.response)
    }
}

impl Entry {
    /// The entry of a single run, under `key`; `commit` is used when the
    /// run has no `commit` label.
    pub fn new(r: &RunResult, key: SeriesKey, file: &Path, commit: Option<&str>) -> Entry {
        Entry {
            series: key,
            started_at: r.started_at.clone(),
            host: r.environment.host.hostname.clone(),
            commit: r
                .labels
                .get(COMMIT_LABEL)
                .cloned()
                .or_else(|| commit.map(str::to_string)),
            file: file.display().to_string(),
            flags: flags(r),
            metrics: metrics(r),
            histogram: Histogram {
                encoding: r.histograms.encoding.clone(),
                unit: r.histograms.unit.clone(),
                response: r.histograms.response.clone(),
            },
        }
    }

    /// The entry of a run recorded on its own.
    pub fn of_run(r: &RunResult, file: &Path, commit: Option<&str>) -> Entry {
        Entry::new(r, SeriesKey::of_run(r), file, commit)
    }

    /// One entry per run of a sweep or findmax file, each keyed with its
    /// point's value.
    pub fn of_sweep(s: &SweepResult, file: &Path, commit: Option<&str>) -> Vec<Entry> {
        let kind = match s.kind {
            SweepKind::Sweep => "sweep",
            SweepKind::Findmax => "findmax",
        };
        s.points
            .iter()
            .flat_map(|p| {
                p.runs.iter().map(move |r| {
                    // A sweep's labels reach its runs through their
                    // command lines; a run written without them gets them.
                    let mut labelled;
                    let r = if s.labels.iter().all(|(k, v)| r.labels.get(k) == Some(v)) {
                        r
                    } else {
                        labelled = r.clone();
                        for (k, v) in &s.labels {
                            labelled
                                .labels
                                .entry(k.clone())
                                .or_insert_with(|| v.clone());
                        }
                        &labelled
                    };
                    let key = SeriesKey::of_point(r, kind, &s.parameter, p.value);
                    Entry::new(r, key, file, commit)
                })
            })
            .collect()
    }

    /// The entries of a result or sweep file.
    pub fn of_any(any: &AnyResult, file: &Path, commit: Option<&str>) -> Vec<Entry> {
        match any {
            AnyResult::Run(r) => vec![Entry::of_run(r, file, commit)],
            AnyResult::Sweep(s) => Entry::of_sweep(s, file, commit),
        }
    }
}

/// The quality flags of a run.
pub fn flags(r: &RunResult) -> Flags {
    let schedule = &r.summary.schedule;
    let target = schedule.target_rate.or(r.config.rate);
    let workers = r.config.worker_threads.unwrap_or(r.config.threads);
    Flags {
        partial: r.status == RunStatus::Partial,
        verification_failed: r.verification.as_ref().is_some_and(|v| !v.ok),
        rate_not_reached: target.is_some() && {
            let due = r.summary.events + schedule.dropped;
            (r.summary.events as f64) < MIN_ACHIEVED * due as f64
        },
        // The run's own client ceiling; files from before it, their
        // resource samples.
        client_saturated: match &r.client {
            Some(c) => c.at_ceiling,
            None => loadcell_record::resources::figures(&r.resources.samples, workers)
                .is_some_and(|f| saturated(&f) == Some(Resource::ClientCpu)),
        },
    }
}

/// The scalar numbers of a run.
pub fn metrics(r: &RunResult) -> Metrics {
    let s = &r.summary;
    let (throughput, throughput_unit) = match s.txn_per_sec {
        Some(tps) => (tps, ThroughputUnit::TxnPerSec),
        None => (s.ops_per_sec, ThroughputUnit::OpsPerSec),
    };
    let l = &s.latency_ms;
    Metrics {
        throughput,
        throughput_unit,
        p50_ms: l.p50,
        p90_ms: l.p90,
        p99_ms: l.p99,
        p999_ms: l.p999,
        error_rate: if s.ops > 0 {
            s.errors as f64 / s.ops as f64
        } else {
            0.0
        },
        client_cpu_us_per_op: (s.ops > 0).then(|| s.client_cpu.total_s() * 1e6 / s.ops as f64),
        server: server_means(&r.resources.samples),
    }
}

/// Each server counter's mean over the measured samples (warm-up left
/// out), each sample weighted by the time since the one before, as
/// `loadcell_record::resources::figures` weighs them; a counter missing
/// from some samples is averaged over those that have it. Values that are
/// not finite are left out.
pub fn server_means(samples: &[ResourceSample]) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    let mut since = 0.0;
    for s in samples.iter().filter(|s| s.t_s > 0.0) {
        let weight = s.t_s - since;
        since = s.t_s;
        if weight <= 0.0 {
            continue;
        }
        for (name, value) in &s.server {
            if value.is_finite() {
                let (sum, weights) = sums.entry(name.as_str()).or_default();
                *sum += value * weight;
                *weights += weight;
            }
        }
    }
    sums.into_iter()
        .filter(|(_, (_, w))| *w > 0.0)
        .map(|(name, (sum, w))| (name.to_string(), sum / w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_weighted_by_the_time_each_sample_covers() {
        let at = |t: f64, pairs: &[(&str, f64)]| ResourceSample {
            t_s: t,
            server: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..ResourceSample::default()
        };
        let samples = [
            at(-1.0, &[("qps", 1e9)]),
            at(1.0, &[("qps", 100.0), ("conns", 4.0)]),
            at(3.0, &[("qps", 400.0)]),
            at(3.5, &[("qps", f64::NAN), ("conns", 8.0)]),
        ];
        let means = server_means(&samples);
        assert_eq!(means["qps"], (100.0 + 400.0 * 2.0) / 3.0);
        assert_eq!(means["conns"], (4.0 + 8.0 * 0.5) / 1.5);
        assert_eq!(means.len(), 2);
    }
}
