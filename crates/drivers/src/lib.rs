//! Drivers: how to speak to each system, and the one registry that maps a
//! target URL's scheme to a driver.
//!
//! Adding a driver touches this crate only: a module that implements
//! [`loadcell_core::Driver`] and a family trait, and one entry in
//! [`REGISTRY`] plus its arm in [`open`].

#![allow(async_fn_in_trait)]

mod catalog;
pub mod cql;
pub mod hbase;
pub mod http;
pub mod kafka;
pub mod local;
pub mod memcached;
pub mod mysql;
pub mod postgres;
pub mod redis;
pub mod search;
pub mod sim;
pub mod sqlite;
mod transport;
pub mod ts;

use loadcell_core::http::HttpConn;
use loadcell_core::kv::KvConn;
use loadcell_core::machine::MachineConn;
use loadcell_core::search::SearchConn;
use loadcell_core::sql::SqlConn;
use loadcell_core::stream::StreamConn;
use loadcell_core::ts::TsConn;
use loadcell_core::wide::WideConn;
use loadcell_core::{Driver, Target};
use postgres::stream as pgstream;
use redis::streams as redis_streams;
use ts::{influx, influx_tcp, opentsdb, opentsdb_tcp, remote_write};

pub use loadcell_core::{DriverInfo, Family};

/// The registry: one row per family, naming the method a [`Visitor`] has
/// for it, the connection trait its drivers implement, and its drivers
/// (each a module with an `INFO` and a driver type with `from_target`).
/// It generates [`REGISTRY`], [`Visitor`] and [`open`].
macro_rules! registry {
    ($($family:ident $method:ident $conn:ident: [$($module:ident::$driver:ident),+ $(,)?];)+) => {
        /// Every driver, in the order `loadcell list` shows them.
        pub const REGISTRY: &[DriverInfo] = &[$($($module::INFO),+),+];

        /// Called with the concrete driver for a target; generic, so the
        /// engine is monomorphised per driver and nothing on the hot path
        /// is dynamic. One method per family.
        pub trait Visitor {
            type Output;
            $(
                fn $method<D>(self, info: &'static DriverInfo, driver: D) -> Self::Output
                where
                    D: Driver,
                    D::Conn: $conn;
            )+
        }

        /// Builds the driver that serves `target`'s scheme in one of
        /// `families` (no connection is made) and hands it to `visitor`.
        pub fn open<V: Visitor>(
            target: &Target,
            families: &[Family],
            visitor: V,
        ) -> Result<V::Output, OpenError> {
            let scheme = target.scheme();
            let bad = |reason: String| OpenError::BadTarget {
                target: target.redacted(),
                reason,
            };
            $($(
                if families.contains(&Family::$family) && $module::INFO.schemes.contains(&scheme) {
                    let driver = $module::$driver::from_target(target).map_err(bad)?;
                    return Ok(visitor.$method(&$module::INFO, driver));
                }
            )+)+
            Err(find(scheme, families).err().expect("a driver found is opened above"))
        }
    };
}

registry! {
    Sql sql SqlConn: [sqlite::SqliteDriver, mysql::MysqlDriver, postgres::PostgresDriver];
    Kv kv KvConn: [redis::RedisDriver, memcached::MemcachedDriver, sim::SimDriver];
    Http http HttpConn: [http::HttpDriver];
    Search search SearchConn: [search::SearchDriver];
    TimeSeries ts TsConn: [
        influx::InfluxDriver,
        influx_tcp::InfluxTcpDriver,
        opentsdb::OpenTsdbDriver,
        opentsdb_tcp::OpenTsdbTcpDriver,
        remote_write::RemoteWriteDriver,
    ];
    Stream stream StreamConn: [kafka::KafkaDriver, pgstream::PgStreamDriver, redis_streams::RedisDriver];
    WideColumn wide WideConn: [cql::CqlDriver, hbase::HbaseDriver];
    Machine machine MachineConn: [local::LocalDriver];
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    #[error("unsupported target scheme '{scheme}:'; supported: {supported}")]
    UnsupportedScheme { scheme: String, supported: String },
    /// The scheme names a driver, of a family the workload does not run on.
    #[error("{scheme}: is a {family} driver")]
    OtherFamily {
        scheme: String,
        family: &'static str,
    },
    #[error("bad target {target}: {reason}")]
    BadTarget { target: String, reason: String },
}

/// The driver that serves `scheme` in one of `families`.
pub fn find(scheme: &str, families: &[Family]) -> Result<&'static DriverInfo, OpenError> {
    let mut serving = REGISTRY.iter().filter(|d| d.schemes.contains(&scheme));
    let Some(first) = serving.clone().next() else {
        // Each once: `http:` is served by the HTTP and the search drivers.
        let mut supported: Vec<String> = Vec::new();
        for s in REGISTRY.iter().flat_map(|d| d.schemes) {
            let s = format!("{s}:");
            if !supported.contains(&s) {
                supported.push(s);
            }
        }
        return Err(OpenError::UnsupportedScheme {
            scheme: scheme.to_string(),
            supported: supported.join(", "),
        });
    };
    serving
        .find(|d| families.contains(&d.family))
        .ok_or(OpenError::OtherFamily {
            scheme: scheme.to_string(),
            family: first.family.as_str(),
        })
}
