//! OpenTSDB's telnet `put` over TCP: VictoriaMetrics'
//! `-opentsdbListenAddr`, InfluxDB's OpenTSDB listener (which takes it on
//! the port it serves `/api/put` on). One line per field,
//! `put measurement.field SECONDS VALUE tag=v …`, with no answer (see
//! [`super::tcp`]). Timestamps are whole seconds, the unit both servers
//! read a `put` line's in, so a series' points must be a second apart or
//! more (back-fill at `--interval 1s` or wider). The protocol has no
//! escapes: names and tag values hold no space (loadcell's never do).
//!
//! A point is held until `end_point` brings its timestamp
//! ([`HeldPoint`]), then its lines are written into the reused buffer.

use loadcell_core::kv::KvCapabilities;
use loadcell_core::DriverError;

use super::held::HeldPoint;
use super::tcp::{TcpDriver, TcpProtocol};
use super::{Encoder, Kind};
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "opentsdb+tcp",
    schemes: &["opentsdb+tcp"],
    family: Family::TIME_SERIES,
    url_form: "opentsdb+tcp://host[:4242][,host2…]?query=http://HOST:PORT[/DB]: telnet put lines over plain TCP, whole seconds (VictoriaMetrics' -opentsdbListenAddr, InfluxDB's OpenTSDB listener); no acknowledgement: points count as sent and the check after the run (never --verify-sample 0) proves them; queries to the database's HTTP API",
    about: "OpenTSDB telnet put over TCP, unacknowledged: VictoriaMetrics, InfluxDB's listener; proven by the check after the run",
    kv: KvCapabilities::NONE,
    blocking: false,
};

/// Telnet `put` lines, written with a TcpConnection.
pub type OpenTsdbTcpDriver = TcpDriver<PutLines>;

/// The lines being built.
#[derive(Debug, Default)]
pub struct PutLines {
    body: Vec<u8>,
    points: u64,
    point: HeldPoint,
}

impl TcpProtocol for PutLines {
    const TCP_PORT: u16 = 4242;
    const NAME: &'static str = "OpenTSDB's put";
}

impl Encoder for PutLines {
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
        let mut seconds = itoa::Buffer::new();
        let seconds = seconds.format(timestamp_ns.div_euclid(1_000_000_000));
        let b = &mut self.body;
        for (field, value) in self.point.fields() {
            b.extend_from_slice(b"put ");
            b.extend_from_slice(self.point.measurement());
            b.push(b'.');
            b.extend_from_slice(field);
            b.push(b' ');
            b.extend_from_slice(seconds.as_bytes());
            b.push(b' ');
            b.extend_from_slice(zmij::Buffer::new().format(value).as_bytes());
            for (key, value) in self.point.tags() {
                b.push(b' ');
                b.extend_from_slice(key);
                b.push(b'=');
                b.extend_from_slice(value);
            }
            b.push(b'\n');
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_put_line_per_field_in_seconds_into_the_reused_buffer() {
        let mut put = PutLines::default();
        for _ in 0..2 {
            put.clear();
            put.point("cpu");
            put.tag("host", "h1");
            put.tag("dc", "x");
            put.field("usage", 1.5);
            put.field("idle", 2.0);
            put.end_point(1_700_000_000_999_999_999);
        }
        let at = put.body.as_ptr();
        let body = String::from_utf8(put.body().unwrap().to_vec()).unwrap();
        assert_eq!(put.body.as_ptr(), at, "the buffer is reused");
        assert_eq!(
            body,
            "put cpu.usage 1700000000 1.5 host=h1 dc=x\nput cpu.idle 1700000000 2.0 host=h1 dc=x\n"
        );
        assert_eq!(put.points(), 1);
    }
}
