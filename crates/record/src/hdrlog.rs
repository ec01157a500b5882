//! HdrHistogram interval logs (the format of the Java `HistogramLogWriter`,
//! readable by `HistogramLogProcessor` and every HdrHistogram port).
//! Values are microseconds, as in result files.

use std::io::{self, Write};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;

use crate::hist::Micros;

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
}
