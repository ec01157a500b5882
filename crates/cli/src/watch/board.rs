//! The watcher's picture of a run's shards: their intervals added where
//! they fall on the wall clock (as `merge` adds them), the measured ones
//! summed into exact run-wide percentiles, which shard reports, which
//! ended and which went silent, and the results the shards posted at
//! their end. Time is passed in, so that it is tested without waiting.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use loadcell_record::hist::{self, LatencySummary, Micros};
use loadcell_record::result::RunResult;
use serde::Serialize;

use super::wire::{News, Origin, Report};

/// Where a shard stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Reporting,
    Ended,
    /// Nothing heard for the silence limit, and no end.
    Silent,
    /// Never heard from, while every shard heard from is done.
    NeverReported,
}

struct Shard {
    from: Origin,
    state: State,
    next_seq: u64,
    lost: u64,
    last_heard: Instant,
    /// Seconds from the first report to the last.
    first_heard: Instant,
    intervals: u64,
    /// The slot of the latest interval.
    latest_slot: Option<i64>,
    result: Option<RunResult>,
}

/// Measured work added up.
#[derive(Debug)]
pub struct Totals {
    pub ops: u64,
    pub events: u64,
    pub errors: u64,
    pub response: Micros,
    /// Wall clock (ms) of the first measured interval's start and the
    /// last one's end.
    pub span_ms: Option<(f64, f64)>,
}

impl Default for Totals {
    fn default() -> Totals {
        Totals {
            ops: 0,
            events: 0,
            errors: 0,
            response: hist::new_histogram(),
            span_ms: None,
        }
    }
}

impl Totals {
    fn add(&mut self, ops: u64, events: u64, errors: u64, h: &Micros) {
        self.ops += ops;
        self.events += events;
        self.errors += errors;
        self.response.add(h).expect("histograms of one range add");
    }

    pub fn ops_per_sec(&self) -> f64 {
        match self.span_ms {
            Some((a, b)) if b > a => self.ops as f64 / ((b - a) / 1000.0),
            _ => 0.0,
        }
    }
}

/// One slot of the wall-clock grid: the intervals of every shard ending in it.
struct Slot {
    shards: Vec<usize>,
    measured: bool,
    duration_s: f64,
    totals: Totals,
}

/// One merged interval, as shown live.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// Where the interval ends, in seconds from the start of the first
    /// shard heard from (warm-up included), as that shard's own lines.
    pub t_s: f64,
    pub measured: bool,
    pub shards: usize,
    pub of: usize,
    pub ops_per_sec: f64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// What is shown of each shard.
#[derive(Debug, Clone, Serialize)]
pub struct ShardView {
    pub shard: usize,
    pub host: String,
    pub state: State,
    pub intervals: u64,
    /// Reports that never arrived (gaps in their numbers).
    pub lost: u64,
    pub heard_for_s: f64,
    pub silent_for_s: f64,
}

pub struct Board {
    /// `--silent-after`, else [`MIN_SILENCE`] or three intervals.
    silent_after: Option<Duration>,
    /// The run every report must belong to: the first report's shape.
    run: Option<Origin>,
    shards: BTreeMap<usize, Shard>,
    /// Wall clock (ms) the grid is counted from, the first interval's end,
    /// and that interval's end on its shard's own clock (`t_s`).
    anchor: Option<(f64, f64)>,
    slots: BTreeMap<i64, Slot>,
    /// The last slot shown.
    shown: Option<i64>,
    /// Slots shown, newest last, for the page.
    pub lines: Vec<Line>,
    pub measured: Totals,
    /// When the last shard heard from finished (ended or went silent).
    all_done_at: Option<Instant>,
    /// Whether the shards never heard from were named.
    missing_named: bool,
}

/// Lines the page keeps.
const LINES_KEPT: usize = 600;
/// The shortest silence that names a shard silent by default.
const MIN_SILENCE: Duration = Duration::from_secs(3);

impl Board {
    pub fn new(silent_after: Option<Duration>) -> Board {
        Board {
            silent_after,
            run: None,
            shards: BTreeMap::new(),
            anchor: None,
            slots: BTreeMap::new(),
            shown: None,
            lines: Vec::new(),
            measured: Totals::default(),
            all_done_at: None,
            missing_named: false,
        }
    }

    /// How long a shard may say nothing before it is named silent.
    pub fn silence_limit(&self) -> Duration {
        let intervals = self.run.as_ref().map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(3.0 * r.interval_s)
        });
        self.silent_after.unwrap_or(intervals.max(MIN_SILENCE))
    }

    /// The run's shape (workload, target, shard count), once a shard reported.
    pub fn run(&self) -> Option<&Origin> {
        self.run.as_ref()
    }

    /// Takes one report. Refused, saying why, when it belongs to another
    /// run than the first report's. Returns what to tell the user.
    pub fn take(&mut self, report: Report, now: Instant) -> Result<Vec<String>, String> {
        let from = &report.from;
        let run = self.run.get_or_insert_with(|| from.clone());
        if (
            from.workload.as_str(),
            from.target.as_str(),
            from.shards,
            from.interval_s,
        ) != (
            run.workload.as_str(),
            run.target.as_str(),
            run.shards,
            run.interval_s,
        ) || from.shard >= from.shards
        {
            return Err(format!(
                "shard {}/{} of {} on {} every {}s is not of the run watched: {} shards of {} on \
                 {} every {}s",
                from.shard,
                from.shards,
                from.workload,
                from.target,
                from.interval_s,
                run.shards,
                run.workload,
                run.target,
                run.interval_s
            ));
        }
        let mut notes = Vec::new();
        let shard = self.shards.entry(from.shard).or_insert_with(|| {
            notes.push(format!(
                "shard {}/{} reports from {} (pid {})",
                from.shard, from.shards, from.host, from.pid
            ));
            Shard {
                from: from.clone(),
                state: State::Reporting,
                next_seq: 0,
                lost: 0,
                last_heard: now,
                first_heard: now,
                intervals: 0,
                latest_slot: None,
                result: None,
            }
        });
        if (shard.from.host.as_str(), shard.from.pid) != (from.host.as_str(), from.pid) {
            return Err(format!(
                "shard {} already reports from {} (pid {}); this is {} (pid {}): give each \
                 generator its own shard",
                from.shard, shard.from.host, shard.from.pid, from.host, from.pid
            ));
        }
        if report.seq < shard.next_seq {
            return Err(format!(
                "shard {}: report {} came again or out of order",
                from.shard, report.seq
            ));
        }
        shard.lost += report.seq - shard.next_seq;
        shard.next_seq = report.seq + 1;
        shard.last_heard = now;
        if shard.state == State::Silent {
            notes.push(format!("shard {} is back", from.shard));
            shard.state = State::Reporting;
        }
        match report.news {
            News::Interval {
                measured,
                end_unix_ms,
                interval,
            } => {
                let h = hist::decode(&interval.histogram)
                    .map_err(|e| format!("shard {}: {e}", from.shard))?;
                shard.intervals += 1;
                let interval_ms = run.interval_s * 1000.0;
                let (anchor, _) = *self.anchor.get_or_insert((end_unix_ms, interval.t_s));
                let key = ((end_unix_ms - anchor) / interval_ms).round() as i64;
                shard.latest_slot = Some(shard.latest_slot.map_or(key, |k| k.max(key)));
                let slot = self.slots.entry(key).or_insert_with(|| Slot {
                    shards: Vec::new(),
                    measured,
                    duration_s: 0.0,
                    totals: Totals::default(),
                });
                slot.shards.push(from.shard);
                slot.measured &= measured;
                slot.duration_s = slot.duration_s.max(interval.duration_s);
                slot.totals
                    .add(interval.ops, interval.events, interval.errors, &h);
                if measured {
                    self.measured
                        .add(interval.ops, interval.events, interval.errors, &h);
                    let start = end_unix_ms - interval.duration_s * 1000.0;
                    let span = self.measured.span_ms.get_or_insert((start, end_unix_ms));
                    *span = (span.0.min(start), span.1.max(end_unix_ms));
                }
            }
            News::End { result } => {
                shard.state = State::Ended;
                shard.result = Some(*result);
                notes.push(format!("shard {} ended", from.shard));
            }
        }
        Ok(notes)
    }

    /// Shards newly silent at `now`, and shards never heard from once
    /// every shard heard from is done; each named once.
    pub fn check_silence(&mut self, now: Instant) -> Vec<String> {
        let mut notes = Vec::new();
        let limit = self.silence_limit();
        for (index, s) in &mut self.shards {
            let quiet = now.saturating_duration_since(s.last_heard);
            if s.state == State::Reporting && quiet >= limit {
                s.state = State::Silent;
                notes.push(format!(
                    "shard {index} ({}) went silent: nothing for {:.1}s after {} intervals, and \
                     no end",
                    s.from.host,
                    quiet.as_secs_f64(),
                    s.intervals
                ));
            }
        }
        let Some(run) = &self.run else { return notes };
        if self.shards.values().any(|s| s.state == State::Reporting) {
            self.all_done_at = None;
            return notes;
        }
        let done_at = *self.all_done_at.get_or_insert(now);
        if !self.missing_named && now.saturating_duration_since(done_at) >= limit {
            self.missing_named = true;
            for index in 0..run.shards {
                if !self.shards.contains_key(&index) {
                    notes.push(format!("shard {index} never reported"));
                }
            }
        }
        notes
    }

    /// Whether every shard of the run ended, went silent or never came.
    pub fn finished(&self, now: Instant) -> bool {
        let Some(run) = &self.run else { return false };
        let done = |s: &Shard| matches!(s.state, State::Ended | State::Silent);
        if !self.shards.values().all(done) {
            return false;
        }
        self.shards.len() == run.shards
            || self
                .all_done_at
                .is_some_and(|at| now.saturating_duration_since(at) >= self.silence_limit())
    }

    /// Slots ready to show: every shard still reporting, and every shard
    /// not heard from yet, has reported past them, or they are two
    /// intervals old on the wall clock (`now_ms`).
    pub fn due(&mut self, now_ms: f64) -> Vec<Line> {
        let (Some(run), Some((anchor, anchor_t_s))) = (&self.run, self.anchor) else {
            return Vec::new();
        };
        let interval_ms = run.interval_s * 1000.0;
        let reporting: Vec<i64> = (self.shards.values())
            .filter(|s| s.state == State::Reporting)
            .map(|s| s.latest_slot.unwrap_or(i64::MIN))
            .collect();
        let mut lines = Vec::new();
        let first = self.shown.map_or(i64::MIN, |k| k + 1);
        let keys: Vec<i64> = self.slots.range(first..).map(|(k, _)| *k).collect();
        for key in keys {
            let slot_end = anchor + key as f64 * interval_ms;
            // Shards not heard from yet are waited for, as late ones are.
            let everyone_past = reporting.iter().all(|latest| *latest >= key)
                && (self.missing_named || self.shards.len() == run.shards);
            if !everyone_past && now_ms < slot_end + 2.0 * interval_ms {
                break;
            }
            let slot = self.slots.remove(&key).expect("listed above");
            let l = LatencySummary::of(&slot.totals.response);
            let line = Line {
                t_s: anchor_t_s + key as f64 * run.interval_s,
                measured: slot.measured,
                shards: slot.shards.len(),
                of: run.shards,
                ops_per_sec: slot.totals.ops as f64 / slot.duration_s.max(1e-9),
                errors: slot.totals.errors,
                p50_ms: l.p50,
                p99_ms: l.p99,
                max_ms: l.max,
            };
            self.shown = Some(key);
            self.lines.push(line.clone());
            lines.push(line);
        }
        let excess = self.lines.len().saturating_sub(LINES_KEPT);
        self.lines.drain(..excess);
        lines
    }

    pub fn shards(&self, now: Instant) -> Vec<ShardView> {
        let mut views: Vec<ShardView> = (self.shards.iter())
            .map(|(index, s)| ShardView {
                shard: *index,
                host: s.from.host.clone(),
                state: s.state,
                intervals: s.intervals,
                lost: s.lost,
                heard_for_s: s.last_heard.duration_since(s.first_heard).as_secs_f64(),
                silent_for_s: now.saturating_duration_since(s.last_heard).as_secs_f64(),
            })
            .collect();
        if let Some(run) = &self.run {
            let never = (0..run.shards).filter(|i| !self.shards.contains_key(i));
            views.extend(never.map(|shard| ShardView {
                shard,
                host: String::new(),
                state: State::NeverReported,
                intervals: 0,
                lost: 0,
                heard_for_s: 0.0,
                silent_for_s: 0.0,
            }));
            views.sort_by_key(|v| v.shard);
        }
        views
    }

    /// The results the shards posted at their end, by shard.
    pub fn results(&mut self) -> Vec<(usize, RunResult)> {
        (self.shards.iter_mut())
            .filter_map(|(i, s)| s.result.take().map(|r| (*i, r)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadcell_record::result::Interval;

    fn origin(shard: usize) -> Origin {
        Origin {
            shard,
            shards: 2,
            host: format!("gen{shard}"),
            pid: 1,
            workload: "kv".into(),
            target: "redis://h:6379".into(),
            interval_s: 1.0,
        }
    }

    /// An interval of `ops` operations of `us` microseconds each.
    fn interval(shard: usize, seq: u64, end_ms: f64, ops: u64, us: u64) -> Report {
        let mut h = hist::new_histogram();
        h.record_n(us, ops).unwrap();
        let mut stats = loadcell_record::Stats::new(1);
        stats.response = h;
        stats.ops[0].count = ops;
        stats.events = ops;
        Report {
            from: origin(shard),
            seq,
            news: News::Interval {
                measured: true,
                end_unix_ms: end_ms,
                interval: Box::new(Interval::from_stats(0.0, 1.0, &stats)),
            },
        }
    }

    #[test]
    fn shards_intervals_add_on_the_wall_clock_and_lines_wait_for_every_shard() {
        let t0 = Instant::now();
        let mut b = Board::new(None);
        b.take(interval(0, 0, 10_000.0, 100, 100), t0).unwrap();
        // Shard 1's first interval has not come: nothing to show yet.
        assert!(b.due(10_001.0).is_empty());
        b.take(interval(1, 0, 10_004.0, 300, 1000), t0).unwrap();
        let lines = b.due(10_005.0);
        assert_eq!(lines.len(), 1);
        assert_eq!((lines[0].shards, lines[0].of), (2, 2));
        assert!((lines[0].ops_per_sec - 400.0).abs() < 1e-6);
        // A quarter at 0.1 ms, three quarters at 1 ms: p50 is shard 1's.
        assert!((lines[0].p50_ms - 1.0).abs() < 0.01, "{:?}", lines[0]);
        assert_eq!(b.measured.ops, 400);
        // Shard 1 falls behind: slot 1 waits two intervals, then shows alone.
        b.take(interval(0, 1, 11_000.0, 100, 100), t0).unwrap();
        assert!(b.due(12_000.0).is_empty());
        let late = b.due(13_001.0);
        assert_eq!((late[0].shards, late[0].of), (1, 2));
    }

    #[test]
    fn a_shard_that_stops_reporting_goes_silent_and_a_gap_counts_lost_reports() {
        let t0 = Instant::now();
        let mut b = Board::new(None);
        b.take(interval(0, 0, 1000.0, 10, 100), t0).unwrap();
        b.take(interval(1, 0, 1000.0, 10, 100), t0).unwrap();
        b.take(interval(1, 3, 2000.0, 10, 100), t0 + Duration::from_secs(1))
            .unwrap();
        assert!(b.check_silence(t0 + Duration::from_secs(2)).is_empty());
        let notes = b.check_silence(t0 + Duration::from_secs(3));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("shard 0 (gen0) went silent"),
            "{notes:?}"
        );
        let views = b.shards(t0 + Duration::from_secs(3));
        assert_eq!(views[0].state, State::Silent);
        assert_eq!(views[1].lost, 2);
        assert!(
            !b.finished(t0 + Duration::from_secs(3)),
            "shard 1 still reports"
        );
        let other_run = Report {
            from: Origin {
                workload: "oltp".into(),
                ..origin(1)
            },
            ..interval(1, 4, 3000.0, 1, 1)
        };
        let refused = b.take(other_run, t0).unwrap_err();
        assert!(refused.contains("is not of the run watched"), "{refused}");
    }
}
