//! Influx line protocol over TCP: QuestDB's ILP port (9009) and
//! VictoriaMetrics' `-influxListenAddr`. The same lines as over HTTP
//! ([`Line`]), with no answer (see [`super::tcp`]).

use loadcell_core::kv::KvCapabilities;

use super::influx::Line;
use super::tcp::{TcpDriver, TcpProtocol};
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "influx+tcp",
    schemes: &["influx+tcp"],
    family: Family::TIME_SERIES,
    url_form: "influx+tcp://host[:9009][,host2…]?query=http://HOST:PORT: line protocol over plain TCP (QuestDB's ILP port, VictoriaMetrics' -influxListenAddr); no acknowledgement: points count as sent and the check after the run (never --verify-sample 0) proves them; queries to the database's HTTP API",
    about: "Influx line protocol over TCP, unacknowledged: QuestDB, VictoriaMetrics; proven by the check after the run",
    kv: KvCapabilities::NONE,
    blocking: false,
};

/// Line protocol over TCP, written with a TcpConnection.
pub type InfluxTcpDriver = TcpDriver<Line>;

impl TcpProtocol for Line {
    const TCP_PORT: u16 = 9009;
    const NAME: &'static str = "Influx line protocol";
}
