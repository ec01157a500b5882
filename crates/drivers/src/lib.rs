//! Drivers: how to speak to each system, and the one registry that maps a
//! target URL's scheme to a driver.
//!
//! Adding a driver touches this crate only: a module that implements
//! [`loadcell_core::Driver`] and a family trait, and its name in its
//! family's row of `registry!`. A new family is one row more.

#![allow(async_fn_in_trait)]

mod catalog;
pub mod cql;
pub mod hbase;
pub mod http;
pub mod kafka;
pub mod local;
pub mod memcached;
pub mod mqtt;
pub mod mysql;
pub mod postgres;
pub mod redis;
pub mod search;
pub mod sim;
pub mod sqlite;
mod transport;
pub mod ts;

use loadcell_core::{Driver, Target};
use postgres::stream as pgstream;
use redis::streams as redis_streams;
use ts::{influx, influx_tcp, opentsdb, opentsdb_tcp, remote_write};

pub use loadcell_core::{DriverInfo, Family};

/// The registry: one row per family, naming the method a [`Visitor`] has
/// for it, the connection trait its drivers implement and its type-level
/// marker (both paths in `loadcell_core`), and its drivers (each a module
/// with an `INFO` and a driver type with `from_target`). It generates
/// [`REGISTRY`], [`Visitor`], [`open`] and [`visit_family!`], with which a
/// caller's visitor serves a family in one line.
macro_rules! registry {
    ($d:tt $($method:ident: $($conn:ident)::+, $($marker:ident)::+ => [$($module:ident::$driver:ident),+ $(,)?];)+) => {
        /// Every driver, in the order `loadcell list` shows them.
        pub const REGISTRY: &[DriverInfo] = &[$($($module::INFO),+),+];

        /// Called with the concrete driver for a target; generic, so the
        /// engine is monomorphised per driver and nothing on the hot path
        /// is dynamic. One method per family; a visitor implements those
        /// of the families it serves (with [`visit_family!`]), and is never
        /// opened on a driver of another (`open` takes the families).
        pub trait Visitor: Sized {
            type Output;
            $(
                fn $method<D>(self, info: &'static DriverInfo, driver: D) -> Self::Output
                where
                    D: Driver,
                    D::Conn: loadcell_core::$($conn)::+,
                {
                    drop(driver);
                    unreachable!(
                        "opened on a {} driver, a family this visitor does not serve",
                        info.family.as_str()
                    )
                }
            )+
        }

        /// `visit_family!(method => drive)` in an `impl Visitor` is the
        /// family's method, handing the driver to the visitor's own
        /// `fn drive<D, F>(self, info, driver)` with the family's marker
        /// as `F`.
        #[macro_export]
        macro_rules! visit_family {
            $(
                ($method => $d drive:ident) => {
                    fn $method<D>(self, info: &'static $d crate::DriverInfo, driver: D) -> Self::Output
                    where
                        D: $d crate::__core::Driver,
                        D::Conn: $d crate::__core::$($conn)::+,
                    {
                        self.$d drive::<D, $d crate::__core::$($marker)::+>(info, driver)
                    }
                };
            )+
        }

        /// The [`Visitor`] method that serves `family`'s drivers.
        pub fn visitor_method(family: Family) -> Option<&'static str> {
            $($(
                if family == $module::INFO.family {
                    return Some(stringify!($method));
                }
            )+)+
            None
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
                if families.contains(&$module::INFO.family) && $module::INFO.schemes.contains(&scheme) {
                    let driver = $module::$driver::from_target(target).map_err(bad)?;
                    return Ok(visitor.$method(&$module::INFO, driver));
                }
            )+)+
            Err(find(scheme, families).err().expect("a driver found is opened above"))
        }
    };
}

/// For [`visit_family!`], which names the family traits and markers from
/// the caller's crate.
#[doc(hidden)]
pub use loadcell_core as __core;

registry! { $
    sql: sql::SqlConn, family::SqlFamily => [sqlite::SqliteDriver, mysql::MysqlDriver, postgres::PostgresDriver];
    kv: kv::KvConn, family::KvFamily => [redis::RedisDriver, memcached::MemcachedDriver, sim::SimDriver];
    http: http::HttpConn, family::HttpFamily => [http::HttpDriver];
    search: search::SearchConn, family::SearchFamily => [search::SearchDriver];
    ts: ts::TsConn, family::TimeSeriesFamily => [
        influx::InfluxDriver,
        influx_tcp::InfluxTcpDriver,
        opentsdb::OpenTsdbDriver,
        opentsdb_tcp::OpenTsdbTcpDriver,
        remote_write::RemoteWriteDriver,
    ];
    stream: stream::StreamConn, family::StreamFamily => [kafka::KafkaDriver, pgstream::PgStreamDriver, redis_streams::RedisDriver];
    wide: wide::WideConn, family::WideColumnFamily => [cql::CqlDriver, hbase::HbaseDriver];
    machine: machine::MachineConn, family::MachineFamily => [local::LocalDriver];
    mqtt: mqtt::MqttConn, mqtt::MqttFamily => [mqtt::MqttDriver];
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
