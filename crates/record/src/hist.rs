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

/// Sums and encodes many histograms with the same few buffers. [`decode`]
/// builds a histogram, with all of its counts (190 KB at these bounds),
/// for each one: merging thousands of them that way left the heap
/// fragmented into hundreds of megabytes. This adds the encoded counts
/// into a histogram kept from one sum to the next instead.
pub struct Codec {
    serializer: V2DeflateSerializer,
    compressed: Vec<u8>,
    inflated: Vec<u8>,
    inflate: flate2::Decompress,
    /// The sum being built.
    pub sum: Micros,
}

impl Default for Codec {
    fn default() -> Codec {
        Codec {
            serializer: V2DeflateSerializer::new(),
            compressed: Vec::new(),
            inflated: Vec::new(),
            inflate: flate2::Decompress::new(true),
            sum: new_histogram(),
        }
    }
}

/// The V2 encoding's cookies (with the word size, 0x10): compressed
/// around plain.
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
const V2_COOKIE: u32 = 0x1c84_9313;
/// Bytes before the counts in the plain encoding: cookie, payload length,
/// normalizing offset, digits, lowest, highest, integer-to-double ratio.
const V2_HEADER: usize = 40;
/// log2 of half the sub-buckets per bucket: 2 × 10^3 rounded up to 2^11
/// for 3 significant digits ([`SIGNIFICANT_DIGITS`]); with a lowest value
/// of 1 µs the unit is 2^0.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;

/// The lowest value counted at `index` of a histogram of our bounds (the
/// HdrHistogram layout: a first bucket of 2^11 unit steps, then buckets
/// of 2^10 sub-buckets, each twice as wide as the one before).
fn value_at_index(index: usize) -> u64 {
    let half = 1usize << SUB_BUCKET_HALF_MAGNITUDE;
    let bucket = (index >> SUB_BUCKET_HALF_MAGNITUDE).saturating_sub(1);
    let sub_bucket = if index < half {
        index
    } else {
        (index & (half - 1)) + half
    };
    (sub_bucket as u64) << bucket
}

/// A LEB128 number of at most 9 bytes (the ninth holds 8 bits), and its
/// length.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, b) in bytes.iter().take(9).enumerate() {
        if i == 8 {
            return Some((value | (u64::from(*b) << 56), 9));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

impl Codec {
    /// The sum, encoded as [`encode`] does.
    pub fn encode_sum(&mut self) -> String {
        self.compressed.clear();
        self.serializer
            .serialize(&self.sum, &mut self.compressed)
            .expect("serializing to memory cannot fail");
        base64::engine::general_purpose::STANDARD.encode(&self.compressed)
    }

    /// Adds a histogram encoded by [`encode`] (of these bounds) to `sum`.
    pub fn add(&mut self, text: &str) -> Result<(), String> {
        let invalid =
            |why: &str| format!("histogram is not a valid HdrHistogram V2 encoding: {why}");
        self.compressed.clear();
        base64::engine::general_purpose::STANDARD
            .decode_vec(text.trim(), &mut self.compressed)
            .map_err(|e| format!("histogram is not valid base64: {e}"))?;
        let word = |b: &[u8], at: usize| -> Option<u32> {
            Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
        };
        if word(&self.compressed, 0) != Some(V2_COMPRESSED_COOKIE) {
            return Err(invalid("not compressed V2"));
        }
        self.inflate.reset(true);
        self.inflated.clear();
        let input = &self.compressed[8..];
        loop {
            self.inflated.reserve(4 * input.len() + 64);
            let read = self.inflate.total_in() as usize;
            let status = self
                .inflate
                .decompress_vec(
                    &input[read..],
                    &mut self.inflated,
                    flate2::FlushDecompress::Finish,
                )
                .map_err(|e| invalid(&e.to_string()))?;
            match status {
                flate2::Status::StreamEnd => break,
                _ if self.inflate.total_in() as usize == read
                    && self.inflated.len() < self.inflated.capacity() =>
                {
                    return Err(invalid("cut short"));
                }
                _ => {}
            }
        }
        let plain = &self.inflated;
        let bounds = (
            word(plain, 12),
            plain
                .get(16..24)
                .map(|b| u64::from_be_bytes(b.try_into().unwrap())),
            plain
                .get(24..32)
                .map(|b| u64::from_be_bytes(b.try_into().unwrap())),
        );
        if word(plain, 0) != Some(V2_COOKIE)
            || bounds
                != (
                    Some(u32::from(SIGNIFICANT_DIGITS)),
                    Some(LOWEST_US),
                    Some(HIGHEST_US),
                )
        {
            return Err(invalid("not of loadcell's bounds"));
        }
        let payload_len = word(plain, 4).ok_or_else(|| invalid("no length"))? as usize;
        let mut counts = plain
            .get(V2_HEADER..V2_HEADER + payload_len)
            .ok_or_else(|| invalid("cut short"))?;
        let mut index = 0usize;
        while !counts.is_empty() {
            let (zig_zag, len) = varint(counts).ok_or_else(|| invalid("cut short"))?;
            counts = &counts[len..];
            let n = ((zig_zag >> 1) as i64) ^ -((zig_zag & 1) as i64);
            if n < 0 {
                // A run of empty counts.
                index += n.unsigned_abs() as usize;
            } else {
                if n > 0 {
                    self.sum
                        .record_n(value_at_index(index), n as u64)
                        .map_err(|_| invalid("a count beyond the bounds"))?;
                }
                index += 1;
            }
        }
        Ok(())
    }
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
    fn the_codec_sums_encoded_histograms_as_decoding_them_would() {
        let mut a = new_histogram();
        let mut b = new_histogram();
        // Every bucket's range, from 1 µs to the top: the layout is checked
        // against the crate's own decoding.
        let mut v = 1u64;
        while v <= HIGHEST_US {
            a.record_n(v, v % 7 + 1).unwrap();
            v = v * 101 / 100 + 1;
        }
        b.record_n(HIGHEST_US, 3).unwrap();
        b.record_n(1, 1 << 40).unwrap();
        let mut codec = Codec::default();
        codec.add(&encode(&a)).unwrap();
        assert_eq!(codec.sum, a);
        assert_eq!(codec.encode_sum(), encode(&a));
        codec.add(&encode(&b)).unwrap();
        let mut both = decode(&encode(&a)).unwrap();
        both.add(decode(&encode(&b)).unwrap()).unwrap();
        assert_eq!(codec.sum, both);
        assert!(codec.add("AAAA").is_err());
        let text = encode(&a);
        assert!(codec.add(&text[..text.len() / 2]).is_err());
    }

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
