//! Influx line protocol over HTTP `/write`: InfluxDB 1.x, VictoriaMetrics
//! (the same `/write`) and QuestDB (ILP over HTTP; it ignores `db`, a
//! point's measurement is its table).
//!
//! Each piece of a point is written as it comes, escaped, straight into
//! the request's reused buffer: `measurement,tag=v field=1.5,f2=2 TS\n`.
//! Numbers are formatted on the stack (`itoa`, `zmij`: serde_json's
//! shortest round-trip float); the `influxdb-line-protocol` crate is not
//! used: its builder owns and returns its buffer, so each request would
//! allocate one. Tag values cannot hold a newline (line protocol has no
//! escape for it).

use loadcell_core::kv::KvCapabilities;
use loadcell_core::DriverError;
use serde::Deserialize;
use std::borrow::Cow;

use super::{Encoder, Kind, Protocol, TsDriver};
use crate::transport::target_url::segment;
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "influx",
    schemes: &["influx"],
    family: Family::TIME_SERIES,
    url_form: "influx://[user:pass@]host[:8086][,host2…]/DB[?tls=true][&sslrootcert=PATH|insecure=true][&query=http://HOST:PORT[/DB]]: line protocol to /write?db=DB&precision=ns (InfluxDB 1.x; VictoriaMetrics; QuestDB, whose tables are the measurements)",
    about: "Influx line protocol over HTTP: InfluxDB 1.x, VictoriaMetrics, QuestDB; queries in InfluxQL, PromQL or SQL",
    kv: KvCapabilities::NONE,
    blocking: false,
};

/// Line protocol, written with a TsConnection.
pub type InfluxDriver = TsDriver<Line>;

/// The request being built.
#[derive(Debug, Default)]
pub struct Line {
    body: Vec<u8>,
    points: u64,
    /// Whether the next field is the point's first (after a space, not a
    /// comma).
    first_field: bool,
}

impl Protocol for Line {
    const DEFAULT_PORT: u16 = 8086;
    const HEADERS: &'static [u8] = b"Content-Type: text/plain; charset=utf-8\r\n";

    fn write_path(target_path: &str) -> Result<(String, Option<String>), String> {
        let db = segment(target_path, "database")?.ok_or_else(|| {
            "an influx:// target names its database: influx://host:8086/DB".to_string()
        })?;
        let mut path = b"/write?db=".to_vec();
        super::query::encode_component(db.as_bytes(), &mut path);
        path.extend_from_slice(b"&precision=ns");
        let path = String::from_utf8(path).expect("percent-encoding is ASCII");
        Ok((path, Some(db)))
    }

    /// `204`: all stored. `400` from InfluxDB: `partial write: … dropped=N`
    /// (points refused, e.g. beyond the retention policy, or of a
    /// conflicting field type) plus each line it could not parse; any
    /// other `400` stored nothing. `400` from QuestDB
    /// (`{"code":…,"message":…}`): the request is one transaction, so
    /// nothing was stored.
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
        let answer: Answer = serde_json::from_slice(body).ok()?;
        let message = answer.error.or(answer.message)?;
        let message = message.replace('\n', " ");
        let failed = match message.strip_prefix("partial write: ") {
            Some(rest) => {
                let dropped = rest
                    .rsplit_once("dropped=")
                    .and_then(|(_, n)| n.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                (dropped + rest.matches("unable to parse '").count() as u64).min(points)
            }
            None => points,
        };
        for _ in 0..failed {
            on_failure(&message);
        }
        Some(failed)
    }
}

impl Encoder for Line {
    const KIND: Kind = Kind::Line;

    #[inline]
    fn point(&mut self, measurement: &str) {
        escape(measurement.as_bytes(), b", ", &mut self.body);
        self.first_field = true;
    }

    #[inline]
    fn tag(&mut self, key: &str, value: &str) {
        self.body.push(b',');
        escape(key.as_bytes(), b",= ", &mut self.body);
        self.body.push(b'=');
        escape(value.as_bytes(), b",= ", &mut self.body);
    }

    #[inline]
    fn field(&mut self, key: &str, value: f64) {
        self.body.push(if self.first_field { b' ' } else { b',' });
        self.first_field = false;
        escape(key.as_bytes(), b",= ", &mut self.body);
        self.body.push(b'=');
        self.body
            .extend_from_slice(zmij::Buffer::new().format(value).as_bytes());
    }

    #[inline]
    fn end_point(&mut self, timestamp_ns: i64) {
        self.body.push(b' ');
        self.body
            .extend_from_slice(itoa::Buffer::new().format(timestamp_ns).as_bytes());
        self.body.push(b'\n');
        self.points += 1;
    }

    fn points(&self) -> u64 {
        self.points
    }

    fn body(&mut self) -> Result<&[u8], DriverError> {
        Ok(&self.body)
    }

    fn clear(&mut self) {
        self.body.clear();
        self.points = 0;
    }
}

/// A `400` answer's text: InfluxDB's `error`, QuestDB's `message`.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow, default)]
    error: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
}

/// Appends `text` with a backslash before each of `special`.
#[inline]
pub(super) fn escape(text: &[u8], special: &[u8], out: &mut Vec<u8>) {
    if !text.iter().any(|b| special.contains(b)) {
        out.extend_from_slice(text);
        return;
    }
    for &b in text {
        if special.contains(&b) {
            out.push(b'\\');
        }
        out.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(build: impl Fn(&mut Line)) -> (String, usize) {
        let mut line = Line::default();
        build(&mut line);
        let at = line.body.as_ptr();
        line.clear();
        build(&mut line);
        assert_eq!(line.body.as_ptr(), at, "the buffer is reused");
        (
            String::from_utf8(line.body().unwrap().to_vec()).unwrap(),
            line.points() as usize,
        )
    }

    #[test]
    fn points_are_written_escaped_into_the_reused_buffer() {
        let (body, points) = encoded(|l| {
            l.point("cpu load");
            l.tag("host", "a,b=c d");
            l.field("usage", 1.5);
            l.field("idle", 2.0);
            l.end_point(1_700_000_000_000_000_001);
            l.point("mem");
            l.field("used", -1e300);
            l.end_point(-5);
        });
        assert_eq!(
            body,
            "cpu\\ load,host=a\\,b\\=c\\ d usage=1.5,idle=2.0 1700000000000000001\nmem used=-1e+300 -5\n"
        );
        assert_eq!(points, 2);
    }

    #[test]
    fn the_database_is_named_and_encoded_in_the_write_path() {
        let (path, db) = Line::write_path("/my%20db").unwrap();
        assert_eq!(path, "/write?db=my%20db&precision=ns");
        assert_eq!(db.as_deref(), Some("my db"));
        assert!(Line::write_path("").is_err());
        assert!(Line::write_path("/a/b").is_err());
    }

    fn failed(status: u16, body: &str, points: u64) -> (Option<u64>, Vec<String>) {
        let mut reasons = Vec::new();
        let n = Line::failed(status, body.as_bytes(), points, &mut |r| {
            reasons.push(r.to_string())
        });
        (n, reasons)
    }

    #[test]
    fn partial_writes_count_dropped_and_unparsed_points() {
        assert_eq!(failed(204, "", 5), (Some(0), vec![]));
        let (n, reasons) = failed(
            400,
            r#"{"error":"partial write: points beyond retention policy dropped=2"}"#,
            5,
        );
        assert_eq!(n, Some(2));
        assert_eq!(
            reasons,
            ["partial write: points beyond retention policy dropped=2"; 2]
        );
        let parse = r#"{"error":"partial write: unable to parse 'cpu x=bad 1': invalid boolean dropped=0"}"#;
        assert_eq!(failed(400, parse, 5).0, Some(1));
        let quest = r#"{"code":"invalid","message":"failed to parse line protocol:errors encountered on line(s):\nerror in line 2: cast error","line":2}"#;
        let (n, reasons) = failed(400, quest, 3);
        assert_eq!(n, Some(3), "QuestDB stores none of a failed request");
        assert!(!reasons[0].contains('\n'));
        assert_eq!(failed(404, r#"{"error":"database not found"}"#, 3).0, None);
        assert_eq!(failed(400, "<html>", 3).0, None);
    }
}
