//! Families of systems: what a connection can do (the family traits
//! [`crate::sql::SqlConn`], [`crate::kv::KvConn`], [`crate::http::HttpConn`],
//! [`crate::search::SearchConn`], [`crate::ts::TsConn`],
//! [`crate::stream::StreamConn`], [`crate::wide::WideConn`],
//! [`crate::machine::MachineConn`]), which a workload
//! names to say what it runs on, and the facts about each driver that a
//! workload checks before anything connects.

use crate::kv::KvCapabilities;

/// A family of operations a driver can serve, by name. The families
/// loadcell has are the constants below; a new family names its own beside
/// its connection trait (`pub const FAMILY: Family = Family::named("…")`),
/// so that adding one touches no list here.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Family(&'static str);

impl Family {
    pub const SQL: Family = Family("sql");
    pub const KV: Family = Family("kv");
    pub const HTTP: Family = Family("http");
    /// Search engines (OpenSearch, Elasticsearch): bulk indexing and queries.
    pub const SEARCH: Family = Family("search");
    /// Time-series databases (InfluxDB, Prometheus, VictoriaMetrics,
    /// QuestDB): points written in batches, queried back.
    pub const TIME_SERIES: Family = Family("time-series");
    /// Change streams (Kafka, Redis Streams, PostgreSQL logical
    /// replication): rows produced into ordered channels and consumed back.
    pub const STREAM: Family = Family("stream");
    /// Wide-column stores (HBase, Cassandra): rows of cells put, got and
    /// scanned by row key.
    pub const WIDE_COLUMN: Family = Family("wide-column");
    /// The machine loadcell runs on: its CPU and disks.
    pub const MACHINE: Family = Family("machine");

    /// The family called `name`, as `loadcell list` shows it.
    pub const fn named(name: &'static str) -> Family {
        Family(name)
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Type-level names of the families: a workload that runs on several
/// (YCSB on SQL and on key-value) implements its lifecycle once per family,
/// and the marker keeps those implementations apart.
pub enum SqlFamily {}
/// See [`SqlFamily`].
pub enum KvFamily {}
/// See [`SqlFamily`].
pub enum HttpFamily {}
/// See [`SqlFamily`].
pub enum SearchFamily {}
/// See [`SqlFamily`].
pub enum TimeSeriesFamily {}
/// See [`SqlFamily`].
pub enum StreamFamily {}
pub enum WideColumnFamily {}
pub enum MachineFamily {}

/// What `loadcell list` shows about a driver, and what workloads check
/// before anything connects.
#[derive(Debug, Clone, Copy)]
pub struct DriverInfo {
    pub name: &'static str,
    pub schemes: &'static [&'static str],
    pub family: Family,
    pub url_form: &'static str,
    pub about: &'static str,
    /// For key-value drivers: what they support beyond GET and SET.
    pub kv: KvCapabilities,
    /// Its calls run to completion on the worker thread without yielding
    /// (an embedded engine): each session group needs a thread of its own,
    /// where network drivers' sessions share one worker thread per core.
    pub blocking: bool,
}
