//! What a shard tells `loadcell watch`: one JSON document per HTTP POST
//! to [`PATH`], numbered so that the watcher can tell what was lost.

use loadcell_record::result::{Interval, RunResult};
use serde::{Deserialize, Serialize};

/// Where shards post their reports.
pub const PATH: &str = "/report";

/// Which shard of which run a report comes from, in every report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// 0-based, as `--shard I/N` (an unsharded run is shard 0 of 1).
    pub shard: usize,
    pub shards: usize,
    pub host: String,
    pub pid: u32,
    pub workload: String,
    /// The target, its password left out.
    pub target: String,
    pub interval_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub from: Origin,
    /// 0, 1, 2 … per shard: a gap is a report lost on the way.
    pub seq: u64,
    #[serde(flatten)]
    pub news: News,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum News {
    /// One interval as the result file records it (its `t_s` counted from
    /// the shard's start, warm-up included), and when it ended on the
    /// shard's wall clock, by which the watcher lines shards up.
    Interval {
        measured: bool,
        end_unix_ms: f64,
        interval: Box<Interval>,
    },
    /// The shard's whole result, checked and verified, as its file holds
    /// it: the watcher merges these exactly, as `loadcell merge` does.
    End { result: Box<RunResult> },
}
