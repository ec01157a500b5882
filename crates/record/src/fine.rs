//! A run's every interval at full resolution, for the views that need
//! more than the result's own intervals give once a long run merged them
//! (`compare`'s significance tests, the worst intervals of a soak run).
//! Read from the run's interval log when the result's intervals are
//! merged, from the result itself when they are not; a sharded run's logs
//! are added interval by interval. Only a few numbers per interval are
//! kept, so a day of 1 s intervals takes ~2 MB.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::hdrlog::{self, LogInterval, LogReader};
use crate::hist::{self, LatencySummary, Micros};
use crate::result::{Interval, RunResult};

/// Intervals listed among the worst of a run.
const WORST: usize = 5;

/// One interval's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FinePoint {
    /// Seconds from the start of measurement to the interval's end.
    pub t_s: f64,
    pub duration_s: f64,
    pub events: u64,
    pub events_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl FinePoint {
    fn of_histogram(t_s: f64, duration_s: f64, h: &Micros) -> FinePoint {
        let l = LatencySummary::of(h);
        FinePoint {
            t_s,
            duration_s,
            events: h.len(),
            events_per_sec: if duration_s > 0.0 {
                h.len() as f64 / duration_s
            } else {
                0.0
            },
            p50_ms: l.p50,
            p99_ms: l.p99,
            max_ms: l.max,
        }
    }

    fn of_interval(i: &Interval) -> FinePoint {
        FinePoint {
            t_s: i.t_s,
            duration_s: i.duration_s,
            events: i.events,
            events_per_sec: i.events_per_sec,
            p50_ms: i.latency_ms.p50,
            p99_ms: i.latency_ms.p99,
            max_ms: i.latency_ms.max,
        }
    }
}

/// Every interval's throughput and p99, and the worst intervals.
#[derive(Debug, Clone, Default)]
pub struct FullResolution {
    /// Where the intervals were read: a log's name, or "the result".
    pub source: String,
    pub intervals: usize,
    pub events: u64,
    /// Each interval's events per second, in time order.
    pub events_per_sec: Vec<f64>,
    /// Each interval's p99 in ms, of those with events.
    pub p99_ms: Vec<f64>,
    /// The intervals with the highest p99, worst first.
    pub slowest: Vec<FinePoint>,
    /// The whole intervals with the fewest events per second, worst first
    /// (a last interval cut short by the run's end is no stall).
    pub emptiest: Vec<FinePoint>,
    /// The first interval's length: shorter ones are cut short.
    whole_s: Option<f64>,
}

impl FullResolution {
    fn new(source: impl Into<String>) -> FullResolution {
        FullResolution {
            source: source.into(),
            ..FullResolution::default()
        }
    }

    fn push(&mut self, p: FinePoint) {
        self.intervals += 1;
        self.events += p.events;
        self.events_per_sec.push(p.events_per_sec);
        if p.events > 0 {
            self.p99_ms.push(p.p99_ms);
            keep_worst(&mut self.slowest, p, |a, b| a.p99_ms > b.p99_ms);
        }
        let whole = *self.whole_s.get_or_insert(p.duration_s);
        if p.duration_s >= 0.5 * whole {
            keep_worst(&mut self.emptiest, p, |a, b| {
                a.events_per_sec < b.events_per_sec
            });
        }
    }

    /// A result's own intervals, when none of them merges finer ones (a
    /// merged shard's intervals lose that mark, not their length).
    pub fn of_result(r: &RunResult) -> Option<FullResolution> {
        let longest = 1.5 * r.config.report_interval_s;
        if r.intervals
            .iter()
            .any(|i| i.merged.is_some() || i.duration_s > longest)
        {
            return None;
        }
        let mut full = FullResolution::new("the result's intervals");
        for i in &r.intervals {
            full.push(FinePoint::of_interval(i));
        }
        Some(full)
    }

    /// Intervals in time order, each timed from where the first began.
    fn of_intervals(
        source: String,
        intervals: impl Iterator<Item = (Duration, Duration, Micros)>,
    ) -> FullResolution {
        let mut full = FullResolution::new(source);
        let mut measured_from = None;
        for (start, length, h) in intervals {
            let from = *measured_from.get_or_insert(start);
            let t_s = (start + length).saturating_sub(from).as_secs_f64();
            full.push(FinePoint::of_histogram(t_s, length.as_secs_f64(), &h));
        }
        full
    }

    /// A run's interval log, checked against its result: a log that does
    /// not hold the result's events is another run's.
    pub fn of_log(log: &[u8], name: &str, r: &RunResult) -> Result<FullResolution, String> {
        let full = FullResolution::of_intervals(
            format!("the interval log {name}"),
            LogReader::new(log).map(|i| (i.offset, i.length, i.histogram)),
        );
        if full.events != r.summary.events {
            return Err(format!(
                "the interval log {name} holds {} events and the result {}: it is another \
                 run's, not read",
                full.events, r.summary.events
            ));
        }
        Ok(full)
    }

    /// The figures of a run whose result is at `path`: from its interval
    /// log when its own intervals were merged, else from the result; with
    /// a note when a merged result's log cannot be read.
    pub fn of_run(path: &Path, r: &RunResult) -> (Option<FullResolution>, Option<String>) {
        if let Some(full) = FullResolution::of_result(r) {
            return (Some(full), None);
        }
        let Some(log) = log_of(path, r) else {
            let note = format!(
                "{}'s intervals are merged (a long run) and its interval log {} is not beside \
                 it: the merged intervals are used",
                path.display(),
                r.hdr_log.as_deref().unwrap_or("(none written)")
            );
            return (None, Some(note));
        };
        let read = std::fs::read(&log)
            .map_err(|e| format!("cannot read {}: {e}", log.display()))
            .and_then(|bytes| FullResolution::of_log(&bytes, &log.display().to_string(), r));
        match read {
            Ok(full) => (Some(full), None),
            Err(e) => (None, Some(e)),
        }
    }

    /// Shards' logs added interval by interval; see [`merged_logs`].
    pub fn of_shard_logs(logs: &[(Vec<u8>, String)], interval: Duration) -> FullResolution {
        let names: Vec<&str> = logs.iter().map(|(_, n)| n.as_str()).collect();
        let source = format!("the interval logs {}", names.join(", "));
        let readers = logs
            .iter()
            .map(|(bytes, _)| LogReader::new(bytes))
            .collect();
        let (_, slots) = merged_logs(readers, interval);
        FullResolution::of_intervals(source, slots.map(|(start, h)| (start, interval, h)))
    }
}

/// Writes the shards' logs added interval by interval (see
/// [`merged_logs`]) as one log, headed as the first shard's.
pub fn write_merged_log(
    w: &mut impl Write,
    logs: &[(Vec<u8>, String)],
    interval: Duration,
) -> io::Result<()> {
    let comment = logs
        .first()
        .and_then(|(bytes, _)| hdrlog::comment(bytes))
        .unwrap_or("loadcell merged shards");
    let readers = logs
        .iter()
        .map(|(bytes, _)| LogReader::new(bytes))
        .collect();
    let (base, slots) = merged_logs(readers, interval);
    hdrlog::write_header(w, base, comment)?;
    for (start, h) in slots {
        hdrlog::write_interval(w, start, interval, &h, None)?;
    }
    Ok(())
}

/// Keeps the [`WORST`] points for which `worse` holds against the rest,
/// worst first; the earlier of equals.
fn keep_worst(kept: &mut Vec<FinePoint>, p: FinePoint, worse: fn(&FinePoint, &FinePoint) -> bool) {
    let at = kept.iter().position(|k| worse(&p, k)).unwrap_or(kept.len());
    if at < WORST {
        kept.insert(at, p);
        kept.truncate(WORST);
    }
}

/// Where a result's interval log is: beside the result under the name it
/// was written with, or where the run named it.
pub fn log_of(result: &Path, r: &RunResult) -> Option<PathBuf> {
    let named = Path::new(r.hdr_log.as_deref()?);
    let beside = result
        .parent()
        .zip(named.file_name())
        .map(|(dir, file)| dir.join(file));
    beside
        .into_iter()
        .chain(std::iter::once(named.to_path_buf()))
        .find(|p| p.is_file())
}

/// Shards' logs added interval by interval, on the grid of `interval`
/// from the earliest shard's first interval: each shard's interval goes
/// to the slot its middle falls in. Gives the earliest base time, and
/// yields each slot's start (from it) and histogram, one slot at a time,
/// so memory holds one histogram per shard however long the logs.
pub fn merged_logs(
    readers: Vec<LogReader<'_>>,
    interval: Duration,
) -> (SystemTime, impl Iterator<Item = (Duration, Micros)> + '_) {
    // Each reader with its next interval, read ahead: the base time is in
    // the header, read with the first interval.
    let mut heads: Vec<(LogReader, Option<LogInterval>)> = readers
        .into_iter()
        .map(|mut r| {
            let next = r.next();
            (r, next)
        })
        .collect();
    let earliest = heads
        .iter()
        .map(|(r, _)| r.base)
        .min()
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let shifts: Vec<Duration> = heads
        .iter()
        .map(|(r, _)| r.base.duration_since(earliest).unwrap_or_default())
        .collect();
    let grid = heads
        .iter()
        .zip(&shifts)
        .filter_map(|((_, next), shift)| Some(*shift + next.as_ref()?.offset))
        .min()
        .unwrap_or_default();
    let step = interval.as_secs_f64().max(1e-9);
    let slot_of = move |i: &LogInterval, shift: Duration| -> u64 {
        let middle = (shift + i.offset + i.length / 2).saturating_sub(grid);
        (middle.as_secs_f64() / step) as u64
    };
    let slots = std::iter::from_fn(move || {
        let slot = heads
            .iter()
            .zip(&shifts)
            .filter_map(|((_, next), shift)| Some(slot_of(next.as_ref()?, *shift)))
            .min()?;
        let mut sum = hist::new_histogram();
        for ((reader, next), shift) in heads.iter_mut().zip(&shifts) {
            while let Some(i) = next.take_if(|i| slot_of(i, *shift) <= slot) {
                sum.add(&i.histogram).expect("histograms of one range add");
                *next = reader.next();
            }
        }
        Some((grid + interval.mul_f64(slot as f64), sum))
    });
    (earliest, slots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hdrlog::{rebuild, write_header, write_interval};

    /// A log begun at `base` s past 1.7e9 with, per interval, its start
    /// offset and length (s), its events and their response time (ms).
    fn log(base: f64, intervals: &[(f64, f64, u64, u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(1.7e9 + base);
        write_header(&mut out, at, "loadcell kv on sim:").unwrap();
        for &(start, length, events, ms) in intervals {
            let mut h = hist::new_histogram();
            h.record_n(ms * 1000, events).unwrap();
            let (start, length) = (
                Duration::from_secs_f64(start),
                Duration::from_secs_f64(length),
            );
            write_interval(&mut out, start, length, &h, None).unwrap();
        }
        out
    }

    #[test]
    fn a_log_gives_what_the_result_of_its_own_intervals_gives() {
        let bytes = log(
            0.0,
            &[
                (2.0, 1.0, 100, 1),
                (3.0, 1.0, 90, 2),
                (4.0, 1.0, 10, 50),
                (5.0, 1.0, 100, 1),
                (6.0, 0.01, 0, 1),
            ],
        );
        let r = rebuild(&bytes, "r.hlog").unwrap();
        let from_log = FullResolution::of_log(&bytes, "r.hlog", &r).unwrap();
        let from_result = FullResolution::of_result(&r).unwrap();
        assert_eq!(from_log.events, 300);
        assert_eq!(from_log.intervals, 5);
        assert_eq!(from_log.events_per_sec, from_result.events_per_sec);
        assert_eq!(from_log.p99_ms, from_result.p99_ms);
        assert_eq!(from_log.slowest, from_result.slowest);
        // The stall leads both lists; the empty 10 ms tail is in neither.
        assert_eq!(from_log.slowest[0].t_s, 3.0);
        assert!((from_log.slowest[0].p99_ms - 50.0).abs() < 0.1);
        assert_eq!(from_log.emptiest[0].t_s, 3.0);
        assert_eq!(from_log.emptiest.len(), 4);
        assert!(from_log.emptiest.iter().all(|p| p.events > 0));
        assert_eq!(from_log.source, "the interval log r.hlog");
    }

    #[test]
    fn another_runs_log_is_not_read() {
        let bytes = log(0.0, &[(2.0, 1.0, 100, 1)]);
        let mut r = rebuild(&bytes, "r.hlog").unwrap();
        r.summary.events = 99;
        let e = FullResolution::of_log(&bytes, "r.hlog", &r).unwrap_err();
        assert!(e.contains("holds 100 events and the result 99"), "{e}");
    }

    #[test]
    fn a_merged_result_reads_its_log_beside_it_and_says_when_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = log(0.0, &[(2.0, 1.0, 100, 1), (3.0, 1.0, 100, 1)]);
        let mut r = rebuild(&bytes, "r.hlog").unwrap();
        r.hdr_log = Some("elsewhere/r.hlog".into());
        r.intervals[0].merged = Some(crate::result::Merged {
            intervals: 2,
            ops_per_sec_min: 0.0,
            ops_per_sec_max: 0.0,
            events_per_sec_min: 0.0,
            events_per_sec_max: 0.0,
            p99_max: 0.0,
        });
        let result = dir.path().join("r.json");
        let (full, note) = FullResolution::of_run(&result, &r);
        assert!(full.is_none());
        assert!(note.unwrap().contains("elsewhere/r.hlog is not beside it"));
        std::fs::write(dir.path().join("r.hlog"), &bytes).unwrap();
        let (full, note) = FullResolution::of_run(&result, &r);
        assert_eq!(note, None);
        assert_eq!(full.unwrap().intervals, 2);
    }

    #[test]
    fn shards_logs_add_up_slot_by_slot_on_the_earliest_grid() {
        // Two shards whose logs began 0.3 s apart: the later one's
        // intervals fall in the earlier one's slots by their middles.
        let a = log(
            0.0,
            &[(1.0, 1.0, 100, 1), (2.0, 1.0, 100, 1), (3.0, 1.0, 100, 1)],
        );
        let b = log(
            0.3,
            &[(0.8, 1.0, 50, 9), (1.8, 1.0, 50, 9), (2.8, 1.0, 50, 9)],
        );
        let readers = vec![LogReader::new(&a), LogReader::new(&b)];
        let (base, slots) = merged_logs(readers, Duration::from_secs(1));
        let slots: Vec<(Duration, u64)> = slots.map(|(start, h)| (start, h.len())).collect();
        assert_eq!(
            base,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
        );
        assert_eq!(
            slots,
            vec![
                (Duration::from_secs(1), 150),
                (Duration::from_secs(2), 150),
                (Duration::from_secs(3), 150)
            ]
        );
        let logs = vec![(a, "a.hlog".to_string()), (b, "b.hlog".to_string())];
        let full = FullResolution::of_shard_logs(&logs, Duration::from_secs(1));
        assert_eq!((full.intervals, full.events), (3, 450));
        assert_eq!(full.events_per_sec, vec![150.0; 3]);
        assert_eq!(full.source, "the interval logs a.hlog, b.hlog");
        // Written as one log, it reads back as the same run.
        let mut out = Vec::new();
        write_merged_log(&mut out, &logs, Duration::from_secs(1)).unwrap();
        let r = rebuild(&out, "m.hlog").unwrap();
        assert_eq!((r.config.workload.as_str(), r.summary.events), ("kv", 450));
        assert_eq!(r.intervals.len(), 3);
    }
}
