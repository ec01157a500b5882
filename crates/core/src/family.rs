//! Families of systems: what a connection can do (the family traits
//! [`crate::sql::SqlConn`], [`crate::kv::KvConn`], [`crate::http::HttpConn`],
//! [`crate::search::SearchConn`], [`crate::ts::TsConn`],
//! [`crate::stream::StreamConn`], [`crate::wide::WideConn`],
//! [`crate::machine::MachineConn`]), which a workload
//! names to say what it runs on, and the facts about each driver that a
//! workload checks before anything connects.

use crate::kv::KvCapabilities;

/// The families of operations a driver can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Sql,
    Kv,
    Http,
    /// Search engines (OpenSearch, Elasticsearch): bulk indexing and queries.
    Search,
    /// Time-series databases (InfluxDB, Prometheus, VictoriaMetrics,
    /// QuestDB): points written in batches, queried back.
    TimeSeries,
    /// Change streams (Kafka, Redis Streams, PostgreSQL logical
    /// replication): rows produced into ordered channels and consumed back.
    Stream,
    /// Wide-column stores (HBase, Cassandra): rows of cells put, got and
    /// scanned by row key.
    WideColumn,
    /// The machine loadcell runs on: its CPU and disks.
    Machine,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Sql => "sql",
            Family::Kv => "kv",
            Family::Http => "http",
            Family::Search => "search",
            Family::TimeSeries => "time-series",
            Family::Stream => "stream",
            Family::WideColumn => "wide-column",
            Family::Machine => "machine",
        }
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
