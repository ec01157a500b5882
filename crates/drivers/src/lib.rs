//! Drivers: how to speak to each system, and the one registry that maps a
//! target URL's scheme to a driver.
//!
//! Adding a driver touches this crate only: a module that implements
//! [`loadcell_core::Driver`] and a family trait, and one entry in
//! [`REGISTRY`] plus its arm in [`open`].

#![allow(async_fn_in_trait)]

mod catalog;
pub mod memcached;
pub mod mysql;
pub mod postgres;
pub mod redis;
pub mod sim;
pub mod sqlite;
mod transport;

use loadcell_core::kv::{KvCapabilities, KvConn};
use loadcell_core::sql::SqlConn;
use loadcell_core::{Driver, Target};

/// The families of operations a driver can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Sql,
    Kv,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Sql => "sql",
            Family::Kv => "kv",
        }
    }
}

/// What `loadcell list` shows about a driver.
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

pub const REGISTRY: &[DriverInfo] = &[
    sqlite::INFO,
    mysql::INFO,
    postgres::INFO,
    redis::INFO,
    memcached::INFO,
    sim::INFO,
];

/// Called with the concrete driver for a target; generic, so the engine is
/// monomorphised per driver and nothing on the hot path is dynamic.
pub trait Visitor {
    type Output;
    fn sql<D>(self, info: &'static DriverInfo, driver: D) -> Self::Output
    where
        D: Driver,
        D::Conn: SqlConn;

    fn kv<D>(self, info: &'static DriverInfo, driver: D) -> Self::Output
    where
        D: Driver,
        D::Conn: KvConn;
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    #[error("unsupported target scheme '{scheme}:'; supported: {supported}")]
    UnsupportedScheme { scheme: String, supported: String },
    #[error("bad target {target}: {reason}")]
    BadTarget { target: String, reason: String },
}

pub fn find(scheme: &str) -> Option<&'static DriverInfo> {
    REGISTRY.iter().find(|d| d.schemes.contains(&scheme))
}

/// Builds the driver for `target` (no connection is made) and hands it to
/// `visitor`.
pub fn open<V: Visitor>(target: &Target, visitor: V) -> Result<V::Output, OpenError> {
    let bad = |reason: String| OpenError::BadTarget {
        target: target.redacted(),
        reason,
    };
    let Some(info) = find(target.scheme()) else {
        return Err(OpenError::UnsupportedScheme {
            scheme: target.scheme().to_string(),
            supported: REGISTRY
                .iter()
                .flat_map(|d| d.schemes.iter().map(|s| format!("{s}:")))
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    Ok(match info.name {
        "sqlite" => visitor.sql(
            info,
            sqlite::SqliteDriver::from_target(target).map_err(bad)?,
        ),
        "mysql" => visitor.sql(info, mysql::MysqlDriver::from_target(target).map_err(bad)?),
        "postgres" => visitor.sql(
            info,
            postgres::PostgresDriver::from_target(target).map_err(bad)?,
        ),
        "sim" => visitor.kv(info, sim::SimDriver::from_target(target).map_err(bad)?),
        "redis" => visitor.kv(info, redis::RedisDriver::from_target(target).map_err(bad)?),
        "memcached" => visitor.kv(
            info,
            memcached::MemcachedDriver::from_target(target).map_err(bad)?,
        ),
        other => unreachable!("driver '{other}' is registered but not opened"),
    })
}
