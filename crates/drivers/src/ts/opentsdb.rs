//! OpenTSDB's HTTP `/api/put?details`: a JSON array with one object per
//! field, metric `measurement.field`, the point's tags, a timestamp in
//! milliseconds (OpenTSDB's finest). VictoriaMetrics (its
//! `-opentsdbHTTPListenAddr` port) and InfluxDB's OpenTSDB listener take
//! it; neither answers with details (`204`, failures are not reported),
//! OpenTSDB itself does. Queries go to the `query=` endpoint, the
//! database's HTTP port. InfluxDB 1.6's listener keeps whole seconds only:
//! it reads a millisecond timestamp's milliseconds as microseconds.
//!
//! A point's tags and fields are held until `end_point` brings its
//! timestamp ([`HeldPoint`]), then written as JSON, escaped, into the
//! request's reused buffer.

use std::borrow::Cow;

use loadcell_core::kv::KvCapabilities;
use loadcell_core::DriverError;
use serde::Deserialize;

use super::held::HeldPoint;
use super::{Encoder, Kind, Protocol, TsDriver};
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "opentsdb",
    schemes: &["opentsdb"],
    family: Family::TIME_SERIES,
    url_form: "opentsdb://[user:pass@]host[:4242][,host2…][?tls=true][&sslrootcert=PATH|insecure=true]&query=http://HOST:PORT[/DB]: JSON to /api/put?details (VictoriaMetrics' -opentsdbHTTPListenAddr, InfluxDB's OpenTSDB listener); queries to the database's HTTP port",
    about: "OpenTSDB /api/put over HTTP, one metric measurement.field per field: VictoriaMetrics, InfluxDB's listener",
    kv: KvCapabilities::NONE,
    blocking: false,
};

/// OpenTSDB `/api/put`, written with a TsConnection.
pub type OpenTsdbDriver = TsDriver<Put>;

/// The request being built.
#[derive(Debug, Default)]
pub struct Put {
    /// `[` and the objects so far; `]` is added by [`Protocol::body`].
    body: Vec<u8>,
    points: u64,
    point: HeldPoint,
}

impl Protocol for Put {
    const DEFAULT_PORT: u16 = 4242;
    const HEADERS: &'static [u8] = b"Content-Type: application/json\r\n";

    fn write_path(target_path: &str) -> Result<(String, Option<String>), String> {
        if !target_path.is_empty() {
            return Err(format!(
                "an opentsdb:// target has no path (got '{target_path}'): writes go to /api/put; \
                 name the database in query=http://host:port/DB"
            ));
        }
        Ok(("/api/put?details".to_string(), None))
    }

    /// `204` (VictoriaMetrics, InfluxDB) or `200`: all stored; `200` or
    /// `400` with details: `failed` data points, each with its `error`.
    /// A data point is one field of a point: a point counts as failed once
    /// per failed field, at most the request's points.
    fn failed(
        status: u16,
        body: &[u8],
        points: u64,
        on_failure: &mut dyn FnMut(&str),
    ) -> Option<u64> {
        if status == 204 || ((200..300).contains(&status) && body.is_empty()) {
            return Some(0);
        }
        if !(200..300).contains(&status) && status != 400 {
            return None;
        }
        let details: Details = serde_json::from_slice(body).ok()?;
        for e in &details.errors {
            on_failure(&e.error.replace('\n', " "));
        }
        let unexplained = details.failed.saturating_sub(details.errors.len() as u64);
        for _ in 0..unexplained {
            on_failure("failed (no reason given)");
        }
        Some(details.failed.min(points))
    }
}

impl Encoder for Put {
    const KIND: Kind = Kind::OpenTsdb;

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
        let ms = timestamp_ns.div_euclid(1_000_000);
        let b = &mut self.body;
        for (field, value) in self.point.fields() {
            b.push(if b.is_empty() { b'[' } else { b',' });
            b.extend_from_slice(b"{\"metric\":\"");
            json_escape(self.point.measurement(), b);
            b.push(b'.');
            json_escape(field, b);
            b.extend_from_slice(b"\",\"timestamp\":");
            b.extend_from_slice(itoa::Buffer::new().format(ms).as_bytes());
            b.extend_from_slice(b",\"value\":");
            b.extend_from_slice(zmij::Buffer::new().format(value).as_bytes());
            b.extend_from_slice(b",\"tags\":{");
            for (i, (key, value)) in self.point.tags().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                b.push(b'"');
                json_escape(key, b);
                b.extend_from_slice(b"\":\"");
                json_escape(value, b);
                b.push(b'"');
            }
            b.extend_from_slice(b"}}");
        }
        self.points += 1;
    }

    fn points(&self) -> u64 {
        self.points
    }

    fn body(&mut self) -> Result<&[u8], DriverError> {
        if self.body.is_empty() {
            self.body.push(b'[');
        }
        self.body.push(b']');
        Ok(&self.body)
    }

    fn clear(&mut self) {
        self.body.clear();
        self.points = 0;
    }
}

/// `{"success":N,"failed":M,"errors":[{"datapoint":{…},"error":"…"}]}`.
#[derive(Deserialize)]
struct Details<'a> {
    failed: u64,
    #[serde(borrow, default)]
    errors: Vec<PointError<'a>>,
}

#[derive(Deserialize)]
struct PointError<'a> {
    #[serde(borrow)]
    error: Cow<'a, str>,
}

/// Appends `text` as the inside of a JSON string.
fn json_escape(text: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in text {
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..0x20 => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_object_per_field_with_escaped_tags_in_milliseconds() {
        let mut put = Put::default();
        for _ in 0..2 {
            put.clear();
            put.point("cpu");
            put.tag("host", "a\"b\\\n\u{1}");
            put.tag("dc", "x");
            put.field("usage", 1.5);
            put.field("idle", 2.0);
            put.end_point(1_700_000_000_123_456_789);
        }
        let at = put.body.as_ptr();
        let body = String::from_utf8(put.body().unwrap().to_vec()).unwrap();
        assert_eq!(put.body.as_ptr(), at, "the buffer is reused");
        assert_eq!(
            body,
            r#"[{"metric":"cpu.usage","timestamp":1700000000123,"value":1.5,"tags":{"host":"a\"b\\\n\u0001","dc":"x"}},{"metric":"cpu.idle","timestamp":1700000000123,"value":2.0,"tags":{"host":"a\"b\\\n\u0001","dc":"x"}}]"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed[0]["tags"]["host"], "a\"b\\\n\u{1}");
        assert_eq!(put.points(), 1);
        put.clear();
        assert_eq!(put.body().unwrap(), b"[]");
    }

    #[test]
    fn details_count_failed_points_with_their_reasons() {
        let mut reasons = Vec::new();
        let mut on_failure = |r: &str| reasons.push(r.to_string());
        assert_eq!(Put::failed(204, b"", 4, &mut on_failure), Some(0));
        let body = br#"{"success":1,"failed":2,"errors":[{"datapoint":{"metric":"m"},"error":"Unable to parse value"}]}"#;
        assert_eq!(Put::failed(400, body, 4, &mut on_failure), Some(2));
        assert_eq!(Put::failed(500, b"oops", 4, &mut on_failure), None);
        assert_eq!(
            reasons,
            ["Unable to parse value", "failed (no reason given)"]
        );
    }
}
