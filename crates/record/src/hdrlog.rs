//! HdrHistogram interval logs (the format of the Java `HistogramLogWriter`,
//! readable by `HistogramLogProcessor` and every HdrHistogram port).
//! Values are microseconds, as in result files.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::V2DeflateSerializer;

use crate::coarse::{Coarsened, MAX_POINTS};
use crate::env::{CpuTime, HostInfo};
use crate::hist::{self, LatencySummary, Micros};
use crate::result::{
    Environment, Histograms, Interval, LoopMode, Resources, RunConfig, RunResult, RunStatus,
    Schedule, StopReason, Summary, SCHEMA_ID,
};
use crate::Stats;

/// Writes the log's header: version, start time, base time and legend.
/// Interval timestamps that follow are seconds since `base`.
pub fn write_header(w: &mut impl Write, base: SystemTime, comment: &str) -> io::Result<()> {
    let secs = base
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    writeln!(w, "#[{comment}]")?;
    writeln!(w, "#[Histogram log format version 1.3]")?;
    writeln!(w, "#[StartTime: {secs:.3} (seconds since epoch)]")?;
    writeln!(w, "#[BaseTime: {secs:.3} (seconds since epoch)]")?;
    writeln!(w, "#[Values are microseconds]")?;
    writeln!(
        w,
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    )
}

/// Writes one interval: `start` is the offset from the header's base time.
pub fn write_interval(
    w: &mut impl Write,
    start: Duration,
    length: Duration,
    histogram: &Micros,
    tag: Option<&str>,
) -> io::Result<()> {
    let mut serializer = V2DeflateSerializer::new();
    let mut writer = IntervalLogWriterBuilder::new()
        .begin_log_with(w, &mut serializer)
        .map_err(io::Error::other)?;
    writer
        .write_histogram(histogram, start, length, tag.and_then(Tag::new))
        .map_err(|e| io::Error::other(format!("{e:?}")))
}

/// One interval of a log: its start as an offset from the log's base
/// time, its length, and its response times.
pub struct LogInterval {
    pub offset: Duration,
    pub length: Duration,
    pub histogram: Micros,
}

/// A log's intervals in order, decoded one at a time (a day of 1 s
/// intervals held decoded would take ~16 GB). It stops at the first line
/// it cannot read, a line cut short by a kill: `cut_short` then says so.
pub struct LogReader<'a> {
    entries: IntervalLogIterator<'a>,
    /// The log's base time, to which interval offsets are added.
    pub base: SystemTime,
    /// When the log was begun.
    pub started: SystemTime,
    pub cut_short: bool,
    ended: bool,
}

impl<'a> LogReader<'a> {
    pub fn new(log: &'a [u8]) -> LogReader<'a> {
        LogReader {
            entries: IntervalLogIterator::new(log),
            base: SystemTime::UNIX_EPOCH,
            started: SystemTime::UNIX_EPOCH,
            cut_short: false,
            ended: false,
        }
    }
}

impl Iterator for LogReader<'_> {
    type Item = LogInterval;

    fn next(&mut self) -> Option<LogInterval> {
        while !self.ended {
            match self.entries.next() {
                None => self.ended = true,
                Some(Ok(LogEntry::StartTime(t))) => self.started = SystemTime::UNIX_EPOCH + t,
                Some(Ok(LogEntry::BaseTime(t))) => self.base = SystemTime::UNIX_EPOCH + t,
                Some(Ok(LogEntry::Interval(i))) => match hist::decode(i.encoded_histogram()) {
                    Ok(histogram) => {
                        return Some(LogInterval {
                            offset: i.start_timestamp(),
                            length: i.duration(),
                            histogram,
                        })
                    }
                    Err(_) => self.cut_short = true,
                },
                Some(Err(_)) => self.cut_short = true,
            }
            self.ended |= self.cut_short;
        }
        None
    }
}

/// The comment a log begins with (`loadcell W on T` for a run's).
pub fn comment(log: &[u8]) -> Option<&str> {
    let header = log.split(|b| *b == b'\n').next()?;
    std::str::from_utf8(header)
        .ok()?
        .strip_prefix("#[")?
        .strip_suffix(']')
}

/// The workload and target a log's comment names.
fn named_run(log: &[u8]) -> (&str, &str) {
    comment(log)
        .and_then(|c| c.strip_prefix("loadcell "))
        .and_then(|c| c.split_once(" on "))
        .unwrap_or(("unknown", "unknown"))
}

/// A result rebuilt from an interval log alone, for a run killed before
/// it wrote its own: per interval, its events and their response times;
/// totals from the intervals' sum; marked partial. `name` names the log
/// in messages.
pub fn rebuild(log: &[u8], name: &str) -> Result<RunResult, String> {
    let (workload, target) = named_run(log);
    // Each interval folded into the series and the total as it is read.
    let mut total = Stats::new(0);
    let mut intervals = Coarsened::new(MAX_POINTS);
    // Where measurement started (the first logged interval's start, from
    // which a result counts interval times) and how long an interval is.
    let mut first: Option<(Duration, Duration)> = None;
    let mut ended = Duration::ZERO;
    let mut interval = Stats::new(0);
    let mut reader = LogReader::new(log);
    for LogInterval {
        offset: start,
        length,
        histogram: h,
    } in reader.by_ref()
    {
        let (measured_from, _) = *first.get_or_insert((start, length));
        interval.reset();
        interval.events = h.len();
        interval.response = h;
        intervals.push(Interval::from_stats(
            (start + length - measured_from).as_secs_f64(),
            length.as_secs_f64(),
            &interval,
        ));
        total.merge(&interval);
        ended = start + length;
    }
    let (started, cut_short) = (reader.started, reader.cut_short);
    let Some((measured_from, first_length)) = first else {
        return Err(format!(
            "{name} is not an HdrHistogram interval log with intervals"
        ));
    };
    let report_interval_s = first_length.as_secs_f64();
    let duration_s = (ended - measured_from).as_secs_f64();
    let events_per_sec = total.events as f64 / duration_s.max(1e-9);
    let latency_ms = LatencySummary::of(&total.response);
    let mut warnings = vec![format!(
        "rebuilt from the interval log {name} alone: the run did not write its result (killed?). \
         Only events and their response times per interval are in the log; operations, errors, \
         service times, the configuration and resource samples are not"
    )];
    if cut_short {
        warnings.push(format!(
            "{name} ends in a line cut short: the intervals before it are shown"
        ));
    }
    let rfc3339 = |t: SystemTime| humantime::format_rfc3339_millis(t).to_string();
    Ok(RunResult {
        schema: SCHEMA_ID.to_string(),
        loadcell_version: env!("CARGO_PKG_VERSION").to_string(),
        status: RunStatus::Partial,
        stop_reason: StopReason::Interrupted,
        error: None,
        started_at: rfc3339(started),
        ended_at: rfc3339(started + ended),
        command: Vec::new(),
        labels: BTreeMap::new(),
        config: RunConfig {
            workload: workload.to_string(),
            target: target.to_string(),
            driver: "unknown".to_string(),
            threads: 0,
            clients_per_thread: 0,
            worker_threads: None,
            time_s: None,
            events: None,
            warmup_s: measured_from.as_secs_f64(),
            rate: None,
            arrival: None,
            rate_tick_s: None,
            answers_timed_on_receipt: false,
            report_interval_s,
            connect_timeout_s: 0.0,
            connection_policy: None,
            seed: 0,
            workload_options: BTreeMap::new(),
            shard: None,
            start_at: None,
        },
        environment: Environment {
            host: HostInfo::default(),
            server: None,
        },
        summary: Summary {
            duration_s,
            ops: 0,
            errors: 0,
            ops_per_sec: 0.0,
            events: total.events,
            events_per_sec,
            txn_per_sec: None,
            retries: 0,
            reconnects: 0,
            failed_events: 0,
            latency_ms,
            service_time_ms: latency_ms,
            schedule: Schedule {
                mode: LoopMode::ClosedLoop,
                target_rate: None,
                achieved_rate: events_per_sec,
                late: 0,
                dropped: 0,
                lag_ms: None,
            },
            queries: None,
            hits: None,
            misses: None,
            items: None,
            items_per_sec: None,
            connects: None,
            connects_per_sec: None,
            counters: None,
            client_cpu: CpuTime::default(),
            groups: None,
            bytes: None,
            bytes_per_sec: None,
            stages: None,
            steady_state: None,
        },
        ops: BTreeMap::new(),
        intervals: intervals.into_vec(),
        histograms: Histograms {
            encoding: hist::ENCODING.to_string(),
            unit: "us".to_string(),
            response: hist::encode(&total.response),
            service: hist::encode(&total.response),
            lag: hist::encode(&total.lag),
            ops: BTreeMap::new(),
        },
        warnings,
        error_samples: Vec::new(),
        resources: Resources::default(),
        details: Default::default(),
        verification: None,
        hdr_log: Some(name.to_string()),
        exports: Vec::new(),
        gates: Vec::new(),
        merge: None,
        client: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::{decode, new_histogram};
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn logs_round_trip_through_the_reader() {
        let mut h = new_histogram();
        for v in [100u64, 200, 300, 40_000] {
            h.record(v).unwrap();
        }
        let mut out = Vec::new();
        write_header(
            &mut out,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            "loadcell test",
        )
        .unwrap();
        write_interval(
            &mut out,
            Duration::from_secs(0),
            Duration::from_secs(1),
            &h,
            None,
        )
        .unwrap();
        write_interval(
            &mut out,
            Duration::from_secs(1),
            Duration::from_secs(1),
            &h,
            Some("get"),
        )
        .unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.contains("#[Histogram log format version 1.3]"),
            "{text}"
        );
        assert!(text.contains("\"StartTimestamp\""), "{text}");
        let intervals: Vec<_> = IntervalLogIterator::new(&out)
            .filter_map(|e| match e {
                Ok(LogEntry::Interval(i)) => Some(i),
                _ => None,
            })
            .collect();
        assert_eq!(intervals.len(), 2);
        assert_eq!(intervals[1].tag().map(|t| t.as_str()), Some("get"));
        assert_eq!(intervals[1].start_timestamp(), Duration::from_secs(1));
        let back = decode(intervals[0].encoded_histogram()).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn a_log_cut_short_rebuilds_a_partial_result_of_the_intervals_before_the_cut() {
        let mut out = Vec::new();
        write_header(
            &mut out,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            "loadcell kv on redis://127.0.0.1:6379",
        )
        .unwrap();
        for (second, ms) in [(2u64, 1u64), (3, 1), (4, 40)] {
            let mut h = new_histogram();
            for _ in 0..100 {
                h.record(ms * 1000).unwrap();
            }
            write_interval(
                &mut out,
                Duration::from_secs(second),
                Duration::from_secs(1),
                &h,
                None,
            )
            .unwrap();
        }
        // A SIGKILL in the middle of writing the next line.
        let whole = out.len();
        out.extend_from_slice(b"5.000,1.000,40.000,HISTFAAAA");
        for log in [&out[..whole], &out[..]] {
            let r = rebuild(log, "r.hlog").unwrap();
            assert_eq!(r.status, RunStatus::Partial);
            assert_eq!(
                (r.config.workload.as_str(), r.config.target.as_str()),
                ("kv", "redis://127.0.0.1:6379")
            );
            assert_eq!(r.summary.events, 300);
            assert_eq!(r.summary.duration_s, 3.0);
            assert_eq!(r.summary.events_per_sec, 100.0);
            assert_eq!(r.intervals.len(), 3);
            assert_eq!(r.intervals[2].t_s, 3.0);
            assert!((r.intervals[2].latency_ms.p50 - 40.0).abs() < 0.1);
            assert!((r.summary.latency_ms.max - 40.0).abs() < 0.1);
            assert!(
                r.started_at.starts_with("2023-11-14T22:13:20"),
                "{}",
                r.started_at
            );
            assert_eq!(
                r.warnings.len(),
                if log.len() == whole { 1 } else { 2 },
                "{:?}",
                r.warnings
            );
        }
        assert!(rebuild(b"#[nothing]\n", "x.hlog").is_err());
    }
}
