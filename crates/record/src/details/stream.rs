//! The stream family's section, inside `verification`: where the run's
//! rows went from producer to consumer group.

use serde::{Deserialize, Serialize};

use super::Detail;

/// Where a stream run's rows went: what its producers had acknowledged,
/// what its consumers received, and what the group never acknowledged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamCompleteness {
    /// Rows this run's producers had acknowledged by the server.
    pub produced: u64,
    /// Rows this run's consumers received, duplicates included.
    pub consumed: u64,
    /// Rows the stream holds that the group never acknowledged, after the
    /// drain wait.
    pub missing: u64,
    /// Rows the group had not acknowledged when the run stopped: the
    /// consumers' lag behind the producers at the end.
    pub lag_at_end: u64,
    /// Rows received again in a channel.
    pub duplicated: u64,
    /// Rows of this run received again after a rebalance moved their
    /// channel before its position was committed (at-least-once delivery),
    /// counted in `consumed`: `consumed - redelivered` rows were distinct.
    #[serde(default)]
    pub redelivered: u64,
    /// Jumps in a channel's sequence (rows that never came to a consumer
    /// that reads every row of the channel).
    pub gaps: u64,
    /// Rows that came before rows produced earlier in their channel.
    pub reorders: u64,
    /// Rows consumed from other runs or other hosts, not timed end to end
    /// (only this run's own rows are: one clock).
    pub untimed: u64,
    /// Time spent in polls that brought rows, from each one's start to
    /// its rows delivered, per 1000 rows consumed, microseconds (the
    /// Tunnel report's "latency per 1000 rows"); polls that waited and
    /// brought nothing are left out, so an idle consumer does not inflate
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_us_per_1000_rows: Option<f64>,
    /// The highest lag a consumer sampled during the run (once per report
    /// interval, also in `intervals[].gauges`), in `lag_unit`s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_max: Option<u64>,
    /// `rows`, or `wal_bytes` (PostgreSQL: WAL not yet confirmed by the
    /// group's slots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_unit: Option<String>,
    /// How fast this run's consumers received rows while rows came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consume_flow: Option<Flow>,
    /// How fast this run's producers had rows acknowledged while they sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produce_flow: Option<Flow>,
}

/// Rows over the time they flowed, from the first row to the last (for
/// consumers, the first poll that brought rows to the last; for
/// producers, the first batch sent to the last acknowledged). The run's
/// interval rates also hold the time before the first row (a group's
/// join) and after the last, and move in steps of whole intervals: a short
/// run's true rate is this one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    pub rows: u64,
    pub over_s: f64,
    pub per_sec: f64,
}

impl Flow {
    /// `rows` over `over_s`; none when the rows did not span any time
    /// (one poll, or none).
    pub fn of(rows: u64, over_s: f64) -> Option<Flow> {
        (rows > 0 && over_s > 0.0).then(|| Flow {
            rows,
            over_s,
            per_sec: rows as f64 / over_s,
        })
    }
}

impl Detail for StreamCompleteness {
    const KEY: &'static str = "stream";
}
