//! The versioned result file (`loadcell.result/v1`). Results are data;
//! reports, comparisons and plans are views computed from them later, so
//! the file carries the full histograms, not just percentiles.
//!
//! Field names here are a public interface: scripts read them. Add fields,
//! never rename them; `docs/result.schema.json` describes the same shape.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::details::Details;
use crate::env::{CpuTime, HostInfo};
use crate::hist::LatencySummary;
use crate::stats::{ErrorSample, OpStats, Stats};

pub const SCHEMA_ID: &str = "loadcell.result/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The run reached its time or event limit.
    Complete,
    /// Cut short: interrupted, a fatal error, or the server went away.
    Partial,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    Completed,
    Interrupted,
    FatalError,
    ServerUnreachable,
}

impl StopReason {
    pub fn status(self) -> RunStatus {
        match self {
            StopReason::Completed => RunStatus::Complete,
            _ => RunStatus::Partial,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: String,
    pub loadcell_version: String,
    pub status: RunStatus,
    pub stop_reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub started_at: String,
    pub ended_at: String,
    /// The command line, with secrets redacted.
    pub command: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub config: RunConfig,
    pub environment: Environment,
    pub summary: Summary,
    pub ops: BTreeMap<String, OpSummary>,
    /// Measurement-phase intervals only: warm-up is excluded.
    pub intervals: Vec<Interval>,
    pub histograms: Histograms,
    pub warnings: Vec<String>,
    pub error_samples: Vec<ErrorSample>,
    /// Client, host, server-process and server-counter samples.
    #[serde(default)]
    pub resources: Resources,
    /// The family's own sections (a disk run's `disk`, `http-conns`'
    /// `connections`), each under its key at this level.
    #[serde(flatten)]
    pub details: Details,
    /// Whether the data the run wrote arrived: counted through the
    /// system's own API afterwards (a search index's `_count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// The HdrHistogram interval log the run wrote as it went, every
    /// interval at full resolution (`--hdr-log`, or next to the result
    /// file), as the run named it; absent when none was written to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdr_log: Option<String>,
    /// What each `--export` pushed while the run went.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<Export>,
    /// The `--threshold` gates and how the run fared against each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateVerdict>,
    /// A result merged from shards' (`loadcell merge`): each shard's
    /// figures and resource samples, and the spread between them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeSection>,
    /// The client's own ceiling and how near it the run came; a merge
    /// keeps its shards' worst.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<loadcell_analysis::ceiling::ClientCeiling>,
}

/// A gate (`--threshold`, a suite's `gates`) judged on a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateVerdict {
    /// The gate as written: `p99 <= 2ms`.
    pub gate: String,
    /// Which run of a sweep, when it is about one: `threads = 8, run 2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    pub passed: bool,
    /// What was measured, in the gate's unit, or why nothing was.
    pub measured: String,
    /// The measured number, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

/// How a merged result was made: its histograms are the shards' added,
/// its throughput is over the window every shard measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeSection {
    /// The merged shards, in shard order.
    pub shards: Vec<MergedShard>,
    /// Shard indexes of `count` that were not given (`--allow-partial`).
    pub missing: Vec<usize>,
    /// The window all shards measured, from the latest start to the
    /// earliest end (RFC 3339), and its length.
    pub window_start: String,
    pub window_end: String,
    pub window_s: f64,
    /// Whether the shards' intervals started together (`--start-at`), or
    /// were put into the earliest shard's interval grid.
    pub aligned: bool,
    /// The lowest and highest of the shards' figures.
    pub spread: ShardSpread,
}

/// One shard's own figures, as its result gave them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergedShard {
    /// Its index, or the position it was given in for a plain result.
    pub index: usize,
    pub file: String,
    pub started_at: String,
    pub ended_at: String,
    pub ops: u64,
    pub events: u64,
    pub ops_per_sec: f64,
    pub events_per_sec: f64,
    pub p99_ms: f64,
    /// Its host, and its own resource samples (each shard is a machine).
    pub host: HostInfo,
    pub resources: Resources,
    /// Its check after the run: each shard counted the whole store, so
    /// the counts are not added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// Its own client ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<loadcell_analysis::ceiling::ClientCeiling>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShardSpread {
    pub ops_per_sec_min: f64,
    pub ops_per_sec_max: f64,
    pub p99_ms_min: f64,
    pub p99_ms_max: f64,
}

/// What a check after the run found of the data it wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// What should be there: what was before the run and what the run
    /// had acknowledged.
    pub expected: u64,
    /// What the system counted.
    pub found: u64,
    /// `found` is what was expected (or within the margin `how` states).
    pub ok: bool,
    /// How it was counted and compared, in words.
    pub how: String,
    /// The family's own sections of the check (a stream run's `stream`).
    #[serde(flatten)]
    pub details: Details,
}

impl Verification {
    /// A check with no family section.
    pub fn new(expected: u64, found: u64, ok: bool, how: String) -> Self {
        Verification {
            expected,
            found,
            ok,
            how,
            details: Details::default(),
        }
    }

    /// The same verdict, with `note` added to how it was reached.
    pub fn noting(mut self, note: &str) -> Self {
        self.how = format!("{}; {note}", self.how);
        self
    }
}

/// One `--export`'s account: what reached the time-series database, and
/// what did not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Export {
    /// `KIND=URL`, its password left out.
    pub output: String,
    /// The `run` label of its series.
    pub run: String,
    /// Measured intervals written.
    pub intervals: u64,
    /// Points the database accepted (a remote-write point is a sample).
    pub points: u64,
    pub failed_writes: u64,
    /// Intervals dropped because the queue was full: the database was
    /// slower than the intervals came, and the run did not wait for it.
    pub dropped_intervals: u64,
    /// Still sending when the run's end stopped waiting for it.
    pub unfinished: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Resources {
    /// The server process sampled, when it ran on this host.
    pub server_pid: Option<u32>,
    /// What most likely limited throughput, in plain words.
    pub bottleneck: Option<String>,
    pub samples: Vec<crate::resources::ResourceSample>,
    /// Each `--server-metrics` URL and how its scrapes went.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_metrics: Vec<crate::remote::ScrapeSource>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunConfig {
    pub workload: String,
    /// Redacted: never holds a password.
    pub target: String,
    pub driver: String,
    pub threads: usize,
    pub clients_per_thread: usize,
    /// OS threads the sessions ran on; absent in files from before 0.1.
    #[serde(default)]
    pub worker_threads: Option<usize>,
    pub time_s: Option<f64>,
    pub events: Option<u64>,
    pub warmup_s: f64,
    /// Target events per second for open-loop runs; `None` is closed loop.
    pub rate: Option<f64>,
    pub arrival: Option<String>,
    /// `--rate-tick`: events sent in bursts, one every this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_tick_s: Option<f64>,
    /// The workers read answers at the ticks, each timed by the kernel's
    /// receive timestamp rather than by when it was read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub answers_timed_on_receipt: bool,
    pub report_interval_s: f64,
    pub connect_timeout_s: f64,
    /// When sessions opened new connections: `persistent`, `per-event` or
    /// `every:N`; absent in files from before it could be chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_policy: Option<String>,
    pub seed: u64,
    /// Every workload option as resolved, defaults included.
    pub workload_options: BTreeMap<String, serde_json::Value>,
    /// The shard this process ran of a run split over several load
    /// generators (`--shard`); its threads, clients, rate and events are
    /// its share. Absent for a run of one process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardConfig>,
    /// `--start-at`: when measurement was to start, on the wall clock
    /// (RFC 3339), the same for every shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
}

/// Shard `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardConfig {
    pub index: usize,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    pub host: HostInfo,
    /// As the server reported it; `None` if the run never connected.
    pub server: Option<ServerDescription>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerDescription {
    pub product: String,
    pub version: String,
    /// What else the server reported about itself, under the driver's
    /// names: `cluster`, the cluster's name (OpenSearch, Elasticsearch).
    #[serde(flatten)]
    pub extras: BTreeMap<String, String>,
}

/// As reports name it: `OpenSearch 2.19.6, cluster logs-eu`.
impl std::fmt::Display for ServerDescription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.product, self.version)?;
        for (name, value) in &self.extras {
            write!(f, ", {name} {value}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopMode {
    /// Each session sends its next request when the last one returns:
    /// latency is service time, and throughput is what the system gives.
    ClosedLoop,
    /// Requests are due at a fixed rate whatever the system does:
    /// latency counts from when each request was due.
    OpenLoop,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Schedule {
    pub mode: LoopMode,
    pub target_rate: Option<f64>,
    pub achieved_rate: f64,
    /// Events that started more than 1 ms after they were due.
    pub late: u64,
    /// Events that were due but never sent before the run ended.
    pub dropped: u64,
    /// How far behind schedule events started (open loop only).
    pub lag_ms: Option<LatencySummary>,
}

/// One session group of a run of several: its own sessions, rate and
/// events, its latency from its own intended starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupSummary {
    pub name: String,
    pub sessions: usize,
    pub events: u64,
    pub events_per_sec: f64,
    pub latency_ms: LatencySummary,
    pub service_time_ms: LatencySummary,
    pub schedule: Schedule,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryCounts {
    pub read: u64,
    pub write: u64,
    pub other: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// Length of the measurement phase.
    pub duration_s: f64,
    /// Operations: for SQL, statements, BEGIN and COMMIT included.
    pub ops: u64,
    /// Failed operations, of any class.
    pub errors: u64,
    pub ops_per_sec: f64,
    /// Events: transactions, or single requests.
    pub events: u64,
    pub events_per_sec: f64,
    /// Transactions per second, for transactional workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn_per_sec: Option<f64>,
    /// Retryable errors after which the event was rolled back and rerun
    /// (sysbench's "ignored errors").
    pub retries: u64,
    pub reconnects: u64,
    /// Events abandoned because the connection broke.
    pub failed_events: u64,
    /// Response time per event; from the intended start when rate-limited.
    pub latency_ms: LatencySummary,
    /// Service time per event: from when it was actually sent.
    pub service_time_ms: LatencySummary,
    pub schedule: Schedule,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queries: Option<QueryCounts>,
    /// Key-value reads that found their key, and those that did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hits: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misses: Option<u64>,
    /// Items the operations carried (documents, points, rows), over every
    /// kind; absent when none carried any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_per_sec: Option<f64>,
    /// New connections made inside events (a connection policy or
    /// workload that churns them), and per second: CPS; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connects: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connects_per_sec: Option<f64>,
    /// Counts the workload keeps by name (HTTP responses by status class,
    /// and unexpected statuses by code); absent when it keeps none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<BTreeMap<String, u64>>,
    pub client_cpu: CpuTime,
    /// Each session group's events, schedule and latency, in a run of
    /// several (indexing and queries); `schedule` is then the first's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupSummary>>,
    /// Bytes read and written (disk workloads), and their rate: bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_sec: Option<f64>,
    /// Under `--stages`: each stage of non-zero length, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageSummary>>,
    /// Under `--warmup auto`: when the warm-up settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyState>,
}

/// One stage of a `--stages` run: its targets and what was measured in
/// it (the events of the intervals inside it: intervals are cut at every
/// stage's end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    /// Seconds from the start of measurement to the stage's start.
    pub start_s: f64,
    pub duration_s: f64,
    /// What the targets count: a rate (`--stages`) or sessions
    /// (`--session-stages`).
    #[serde(default)]
    pub target_of: StageTarget,
    /// The target at its start and end: events/s, or sessions running.
    pub target_start: f64,
    pub target_end: f64,
    pub events: u64,
    pub ops_per_sec: f64,
    pub events_per_sec: f64,
    pub errors: u64,
    pub latency_ms: LatencySummary,
    pub service_time_ms: LatencySummary,
    /// After a stage whose target is above the next one's: how long p99
    /// took to come back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// On a ramp (a rate rising over the stage, read over at least
    /// [`loadcell_analysis::ramp::MIN_POINTS`] intervals): where p99 left
    /// its low-load level and where throughput stopped following the
    /// target, each absent when not reached within the ramp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<loadcell_analysis::ramp::RampKnee>,
}

/// When a `--warmup auto` run settled (`summary.steady_state`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    pub method: String,
    /// Whether both series settled before the cap.
    pub settled: bool,
    /// Seconds from the warm-up's start to the end of its transient (the
    /// truncation point); absent when it never settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at_s: Option<f64>,
    /// How long the warm-up ran before measurement started: until the rule
    /// could tell (about twice the transient), or the cap.
    pub warmup_s: f64,
    /// `--warmup-max`.
    pub max_s: f64,
}

/// What a stage's targets count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StageTarget {
    /// Events per second, open loop.
    #[default]
    Rate,
    /// Sessions running events, closed loop.
    Sessions,
}

impl StageTarget {
    /// A table column's heading for the targets.
    pub fn heading(self) -> &'static str {
        match self {
            StageTarget::Rate => "target/s",
            StageTarget::Sessions => "sessions",
        }
    }

    /// What follows a target in a sentence: "8,000/s", "64 sessions".
    pub fn suffix(self) -> &'static str {
        match self {
            StageTarget::Rate => "/s",
            StageTarget::Sessions => " sessions",
        }
    }
}

/// How long p99 took to return within [`Recovery::FACTOR`] × its value in
/// the stage before a high one, after that high stage ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// p99 of the stage before the high one: what "recovered" returns to.
    pub baseline_p99_ms: f64,
    /// Seconds from the high stage's end to the end of the first interval
    /// whose p99 was within the factor of the baseline; absent when none
    /// was before the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_s: Option<f64>,
}

impl Recovery {
    pub const FACTOR: f64 = 1.5;

    /// After the stage that ended `end_s` seconds into measurement, the
    /// first of `intervals` (in order) ending after it whose p99 is within
    /// [`Recovery::FACTOR`] × `baseline_p99_ms`.
    pub fn after(end_s: f64, baseline_p99_ms: f64, intervals: &[Interval]) -> Recovery {
        let recovery_s = intervals
            .iter()
            .filter(|i| i.t_s > end_s + 1e-6 && i.events > 0)
            .find(|i| i.latency_ms.p99 <= Recovery::FACTOR * baseline_p99_ms)
            .map(|i| i.t_s - end_s);
        Recovery {
            baseline_p99_ms,
            recovery_s,
        }
    }
}

/// `n` and `n / secs`, when there is something to count: fields that only
/// some workloads fill stay out of the others' results.
pub fn counted_rate(n: u64, secs: f64) -> (Option<u64>, Option<f64>) {
    if n == 0 {
        return (None, None);
    }
    (
        Some(n),
        Some(if secs > 0.0 { n as f64 / secs } else { 0.0 }),
    )
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpSummary {
    /// `read`, `write` or `other`.
    pub category: String,
    pub count: u64,
    pub errors: u64,
    /// Items these operations carried; absent for kinds that carry none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_per_sec: Option<f64>,
    /// Time the operation itself took.
    pub latency_ms: LatencySummary,
}

impl OpSummary {
    /// Summarises operations of one kind measured over `secs`.
    pub fn of(category: &str, op: &OpStats, secs: f64) -> OpSummary {
        let (items, items_per_sec) = counted_rate(op.items, secs);
        OpSummary {
            category: category.to_string(),
            count: op.count,
            errors: op.errors,
            items,
            items_per_sec,
            latency_ms: LatencySummary::of(&op.latency),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalLatency {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interval {
    /// Seconds from the start of measurement to the end of this interval.
    pub t_s: f64,
    pub duration_s: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub events: u64,
    pub events_per_sec: f64,
    pub errors: u64,
    pub retries: u64,
    pub reconnects: u64,
    /// Items carried in this interval; absent when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_per_sec: Option<f64>,
    /// This interval's named counts, as in the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<BTreeMap<String, u64>>,
    pub latency_ms: IntervalLatency,
    /// Connections held at the interval's end, in a run that holds them
    /// (`http-conns`): a gauge, not a count of the interval's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_held: Option<u64>,
    /// Levels the workload sampled in this interval, by name (a stream
    /// group's lag: `lag_rows`, `lag_wal_bytes`), the highest sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gauges: Option<BTreeMap<String, u64>>,
    /// This interval's response-time histogram (same encoding as
    /// `histograms`), so interval logs can be exported later.
    pub histogram: String,
    /// Present when this interval merges finer ones (a run longer than
    /// [`crate::coarse::MAX_POINTS`] intervals): how they varied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<Merged>,
}

/// The spread of the finer intervals a merged one holds, so that a stall
/// as long as one of them stays visible.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Merged {
    /// How many finer intervals (of `config.report_interval_s`) it holds.
    pub intervals: u64,
    pub ops_per_sec_min: f64,
    pub ops_per_sec_max: f64,
    pub events_per_sec_min: f64,
    pub events_per_sec_max: f64,
    /// The highest of their p99 response times, in ms.
    pub p99_max: f64,
}

/// Two intervals' gauges as one: the highest of each name (a lag sampled
/// by two processes of one group, or in two finer intervals).
pub fn highest_gauges(
    mine: Option<BTreeMap<String, u64>>,
    theirs: Option<&BTreeMap<String, u64>>,
) -> Option<BTreeMap<String, u64>> {
    let Some(theirs) = theirs else {
        return mine;
    };
    let mut all = mine.unwrap_or_default();
    for (name, &value) in theirs {
        let level = all.entry(name.clone()).or_insert(value);
        *level = (*level).max(value);
    }
    Some(all)
}

impl Interval {
    /// Summarises one interval's merged stats.
    pub fn from_stats(t_s: f64, duration_s: f64, s: &Stats) -> Interval {
        let per_sec = |n: u64| {
            if duration_s > 0.0 {
                n as f64 / duration_s
            } else {
                0.0
            }
        };
        let l = LatencySummary::of(&s.response);
        let (items, items_per_sec) = counted_rate(s.items_total(), duration_s);
        Interval {
            t_s,
            duration_s,
            ops: s.ops_total(),
            ops_per_sec: per_sec(s.ops_total()),
            events: s.events,
            events_per_sec: per_sec(s.events),
            errors: s.op_errors_total(),
            retries: s.retries,
            reconnects: s.reconnects,
            items,
            items_per_sec,
            counters: s.counters_map(),
            latency_ms: IntervalLatency {
                p50: l.p50,
                p95: l.p95,
                p99: l.p99,
                max: l.max,
            },
            connections_held: None,
            gauges: s.gauges_map(),
            histogram: crate::hist::encode(&s.response),
            merged: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Histograms {
    pub encoding: String,
    pub unit: String,
    pub response: String,
    pub service: String,
    pub lag: String,
    pub ops: BTreeMap<String, String>,
}

impl RunResult {
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("result types always serialize")
    }

    /// Writes the file (see [`crate::file`]) and returns where.
    pub fn write(&self, dest: &crate::file::Destination) -> std::io::Result<std::path::PathBuf> {
        crate::file::write_atomically(dest, &(self.to_json_pretty() + "\n"))
    }

    pub fn read_from(path: &Path) -> Result<RunResult, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA_ID) => {}
            Some(other) => {
                return Err(format!(
                    "{} has schema '{other}'; this loadcell reads '{SCHEMA_ID}'",
                    path.display()
                ))
            }
            None => return Err(format!("{} is not a loadcell result file", path.display())),
        }
        serde_json::from_value(value)
            .map_err(|e| format!("{} is not a valid {SCHEMA_ID} file: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn items_are_summarised_only_where_operations_carried_some() {
        let mut s = Stats::new(2);
        s.record_op(0, Duration::from_millis(1), true);
        s.record_op(1, Duration::from_millis(1), true);
        s.add_items(1, 300);

        let interval = Interval::from_stats(2.0, 2.0, &s);
        assert_eq!(
            (interval.items, interval.items_per_sec),
            (Some(300), Some(150.0))
        );
        let carried = OpSummary::of("write", &s.ops[1], 2.0);
        assert_eq!(
            (carried.items, carried.items_per_sec),
            (Some(300), Some(150.0))
        );

        // Nothing carried: the fields are left out of the file.
        let plain = serde_json::to_value(OpSummary::of("read", &s.ops[0], 2.0)).unwrap();
        assert!(plain.get("items").is_none() && plain.get("items_per_sec").is_none());
        let quiet = serde_json::to_value(Interval::from_stats(1.0, 1.0, &Stats::new(2))).unwrap();
        assert!(quiet.get("items").is_none(), "{quiet}");
    }
}
