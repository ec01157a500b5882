//! Prometheus remote write 0.1.0: a protobuf `WriteRequest`, block
//! snappy, to Prometheus (`--web.enable-remote-write-receiver`) and
//! VictoriaMetrics (`/api/v1/write`). One `TimeSeries` per field, metric
//! `measurement_field`, its labels sorted by name as Prometheus requires,
//! one sample in milliseconds.
//!
//! The protobuf is encoded by hand with `prost::encoding`'s varints and
//! keys into a reused buffer (prost's message structs would own a String
//! per label and a Vec per series, for every sample), lengths computed
//! before each message is written; it is compressed by a reused
//! `snap::raw::Encoder` into a reused buffer.
//!
//! ```text
//! WriteRequest { repeated TimeSeries timeseries = 1; }
//! TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
//! Label        { string name = 1; string value = 2; }
//! Sample       { double value = 1; int64 timestamp = 2; }
//! ```

use loadcell_core::kv::KvCapabilities;
use loadcell_core::DriverError;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};

use super::held::HeldPoint;
use super::{Encoder, Kind, Protocol, TsDriver};
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "prom-rw",
    schemes: &["prom-rw"],
    family: Family::TIME_SERIES,
    url_form: "prom-rw://[user:pass@]host[:9090][,host2…][/api/v1/write][?tls=true][&sslrootcert=PATH|insecure=true][&query=http://HOST:PORT]: remote write 0.1.0 (Prometheus with --web.enable-remote-write-receiver, VictoriaMetrics)",
    about: "Prometheus remote write (protobuf, snappy), one metric measurement_field per field: Prometheus, VictoriaMetrics; queries in PromQL",
    kv: KvCapabilities::NONE,
    blocking: false,
};

/// Remote write, written with a TsConnection.
pub type RemoteWriteDriver = TsDriver<RemoteWrite>;

const NAME_LABEL: &[u8] = b"__name__";

/// The request being built.
#[derive(Debug, Default)]
pub struct RemoteWrite {
    /// The `WriteRequest` so far, uncompressed.
    proto: Vec<u8>,
    /// The compressed request, as long as the longest one yet.
    compressed: Vec<u8>,
    snappy: Snappy,
    points: u64,
    point: HeldPoint,
    /// The metric name of the field being written.
    name: Vec<u8>,
}

/// `snap::raw::Encoder`, which has no `Debug` or `Default`.
struct Snappy(snap::raw::Encoder);

impl Default for Snappy {
    fn default() -> Self {
        Snappy(snap::raw::Encoder::new())
    }
}

impl std::fmt::Debug for Snappy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Snappy")
    }
}

impl Protocol for RemoteWrite {
    const DEFAULT_PORT: u16 = 9090;
    const HEADERS: &'static [u8] = b"Content-Encoding: snappy\r\n\
Content-Type: application/x-protobuf\r\nX-Prometheus-Remote-Write-Version: 0.1.0\r\n";

    fn write_path(target_path: &str) -> Result<(String, Option<String>), String> {
        let path = if target_path.is_empty() {
            "/api/v1/write"
        } else {
            target_path
        };
        Ok((path.to_string(), None))
    }

    /// `2xx`: all stored. `400` (out of order, out of bounds, too old):
    /// the request's points, with the server's text.
    fn failed(
        status: u16,
        body: &[u8],
        points: u64,
        on_failure: &mut dyn FnMut(&str),
    ) -> Option<u64> {
        if (200..300).contains(&status) {
            return Some(0);
        }
        if status != 400 {
            return None;
        }
        let reason = super::one_line(body);
        for _ in 0..points {
            on_failure(&reason);
        }
        Some(points)
    }
}

impl Encoder for RemoteWrite {
    const KIND: Kind = Kind::RemoteWrite;

    #[inline]
    fn point(&mut self, measurement: &str) {
        self.point.start(measurement);
    }

    #[inline]
    fn tag(&mut self, key: &str, value: &str) {
        self.point.tag(key, value);
    }

    #[inline]
    fn field(&mut self, key: &str, value: f64) {
        self.point.field(key, value);
    }

    fn end_point(&mut self, timestamp_ns: i64) {
        self.point.sort_tags();
        let ms = timestamp_ns.div_euclid(1_000_000);
        for (field, value) in self.point.fields() {
            self.name.clear();
            self.name.extend_from_slice(self.point.measurement());
            self.name.push(b'_');
            self.name.extend_from_slice(field);
            encode_series(&self.point, &self.name, value, ms, &mut self.proto);
        }
        self.points += 1;
    }

    fn points(&self) -> u64 {
        self.points
    }

    fn body(&mut self) -> Result<&[u8], DriverError> {
        let max = snap::raw::max_compress_len(self.proto.len());
        if self.compressed.len() < max {
            // By powers of two: requests a few bytes longer than the
            // last do not each grow it.
            self.compressed.resize(max.next_power_of_two(), 0);
        }
        let n = self
            .snappy
            .0
            .compress(&self.proto, &mut self.compressed)
            .map_err(|e| {
                DriverError::fatal(format!("snappy could not compress the request: {e}"))
            })?;
        Ok(&self.compressed[..n])
    }

    fn clear(&mut self) {
        self.proto.clear();
        self.points = 0;
    }
}

/// Appends one `timeseries` entry: the point's labels with `__name__`
/// among them in order, and one sample.
fn encode_series(point: &HeldPoint, name: &[u8], value: f64, ms: i64, out: &mut Vec<u8>) {
    let sample_len = 1 + 8 + 1 + encoded_len_varint(ms as u64);
    let labels_len: usize = point
        .tags()
        .map(|(k, v)| field_len(label_len(k, v)))
        .sum::<usize>()
        + field_len(label_len(NAME_LABEL, name));
    encode_key(1, WireType::LengthDelimited, out);
    encode_varint((labels_len + field_len(sample_len)) as u64, out);
    let mut name_written = false;
    for (key, value) in point.tags() {
        if !name_written && key > NAME_LABEL {
            encode_label(NAME_LABEL, name, out);
            name_written = true;
        }
        encode_label(key, value, out);
    }
    if !name_written {
        encode_label(NAME_LABEL, name, out);
    }
    encode_key(2, WireType::LengthDelimited, out);
    encode_varint(sample_len as u64, out);
    encode_key(1, WireType::SixtyFourBit, out);
    out.extend_from_slice(&value.to_le_bytes());
    encode_key(2, WireType::Varint, out);
    encode_varint(ms as u64, out);
}

/// A length-delimited field's size: its key, its length, its bytes.
fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

fn label_len(name: &[u8], value: &[u8]) -> usize {
    field_len(name.len()) + field_len(value.len())
}

fn encode_label(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    encode_key(1, WireType::LengthDelimited, out);
    encode_varint(label_len(name, value) as u64, out);
    for (tag, bytes) in [(1, name), (2, value)] {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(bytes.len() as u64, out);
        out.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_protobuf_with_sorted_labels_and_snappy_compressed() {
        let mut rw = RemoteWrite::default();
        rw.point("cpu");
        rw.tag("zone", "z");
        rw.tag("Host", "a");
        rw.field("usage", 1.5);
        rw.end_point(1_700_000_000_123_999_999);
        let expected: &[u8] = &[
            0x0a, 63, // timeseries, 63 bytes
            0x0a, 9, 0x0a, 4, b'H', b'o', b's', b't', 0x12, 1, b'a', // Host=a
            0x0a, 21, 0x0a, 8, b'_', b'_', b'n', b'a', b'm', b'e', b'_', b'_', // __name__
            0x12, 9, b'c', b'p', b'u', b'_', b'u', b's', b'a', b'g', b'e', // =cpu_usage
            0x0a, 9, 0x0a, 4, b'z', b'o', b'n', b'e', 0x12, 1, b'z', // zone=z
            0x12, 16, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, // sample: 1.5
            0x10, 0xfb, 0xd0, 0x95, 0xff, 0xbc, 0x31, // 1700000000123 ms
        ];
        assert_eq!(rw.proto, expected);
        let body = rw.body().unwrap().to_vec();
        let decoded = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        assert_eq!(decoded, expected);
        assert_eq!(rw.points(), 1);
        let (proto_at, compressed_at) = (rw.proto.as_ptr(), rw.compressed.as_ptr());
        rw.clear();
        rw.point("cpu");
        rw.field("idle", 2.0);
        rw.end_point(1);
        rw.body().unwrap();
        assert_eq!(
            (rw.proto.as_ptr(), rw.compressed.as_ptr()),
            (proto_at, compressed_at),
            "the buffers are reused"
        );
    }

    #[test]
    fn a_refused_request_fails_all_its_points_with_the_text() {
        let mut reasons = Vec::new();
        let mut on_failure = |r: &str| reasons.push(r.to_string());
        assert_eq!(RemoteWrite::failed(204, b"", 3, &mut on_failure), Some(0));
        let body = b"out of bounds\n";
        assert_eq!(RemoteWrite::failed(400, body, 2, &mut on_failure), Some(2));
        assert_eq!(reasons, ["out of bounds", "out of bounds"]);
        assert_eq!(RemoteWrite::failed(500, b"", 2, &mut |_| {}), None);
    }
}
