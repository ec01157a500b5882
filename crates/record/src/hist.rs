//! HDR histograms of latencies in microseconds, 1 µs to 1 h at 3
//! significant digits, and their portable encoding.

use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A latency histogram whose values are microseconds.
pub type Micros = Histogram<u64>;

pub const LOWEST_US: u64 = 1;
pub const HIGHEST_US: u64 = 3_600_000_000;
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// How histograms are written into result files.
pub const ENCODING: &str = "hdr-v2-deflate-base64";

pub fn new_histogram() -> Micros {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        .expect("static histogram bounds are valid")
}

/// Records a duration, clamping to the histogram's range so that a
/// pathological value never fails a run.
#[inline]
pub fn record(h: &mut Micros, d: Duration) {
    record_n(h, d, 1);
}

/// Records `count` occurrences of one duration, clamped as [`record`].
#[inline]
pub fn record_n(h: &mut Micros, d: Duration, count: u64) {
    let us = (d.as_micros() as u64).min(HIGHEST_US);
    // Cannot fail: the value is clamped into range.
    let _ = h.record_n(us, count);
}

/// Encodes as HdrHistogram V2 compressed, base64: readable by every
/// HdrHistogram implementation.
pub fn encode(h: &Micros) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serializing to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

pub fn decode(text: &str) -> Result<Micros, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("histogram is not valid base64: {e}"))?;
    let h: Micros = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("histogram is not a valid HdrHistogram V2 encoding: {e:?}"))?;
    Ok(h)
}

/// Percentiles in milliseconds, the shape every result and report uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl LatencySummary {
    pub fn of(h: &Micros) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let q = |p: f64| ms(h.value_at_quantile(p));
        LatencySummary {
            min: ms(h.min()),
            mean: h.mean() / 1000.0,
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            p9999: q(0.9999),
            max: ms(h.max()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let mut a = new_histogram();
        let mut b = new_histogram();
        let mut all = new_histogram();
        for v in 1..=10_000u64 {
            let d = Duration::from_micros(v * 7 % 50_000 + 1);
            if v % 3 == 0 {
                record(&mut a, d);
            } else {
                record(&mut b, d);
            }
            record(&mut all, d);
        }
        a.add(&b).unwrap();
        assert_eq!(a.len(), all.len());
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(a.value_at_quantile(q), all.value_at_quantile(q));
        }
    }

    #[test]
    fn encoding_round_trips() {
        let mut h = new_histogram();
        for v in [1u64, 10, 100, 1000, 1_000_000, HIGHEST_US] {
            h.record(v).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back, h);
        assert!(decode("not base64!").is_err());
    }

    #[test]
    fn out_of_range_values_are_clamped() {
        let mut h = new_histogram();
        record(&mut h, Duration::from_secs(10 * 3600));
        record(&mut h, Duration::from_nanos(10));
        assert_eq!(h.len(), 2);
        assert!(h.max() >= HIGHEST_US - HIGHEST_US / 1000);
        assert_eq!(h.min(), 0);
    }

    #[test]
    fn summary_is_in_milliseconds() {
        let mut h = new_histogram();
        for _ in 0..99 {
            record(&mut h, Duration::from_millis(2));
        }
        record(&mut h, Duration::from_millis(100));
        let s = LatencySummary::of(&h);
        assert!((s.p50 - 2.0).abs() < 0.01, "{s:?}");
        assert!((s.max - 100.0).abs() < 0.1, "{s:?}");
        assert!((s.p99 - 2.0).abs() < 0.01, "{s:?}");
        assert_eq!(
            LatencySummary::of(&new_histogram()),
            LatencySummary::default()
        );
    }
}
