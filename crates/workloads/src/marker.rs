//! The marker table: where loadcell records the tables its own `prepare`
//! created, so that `cleanup` drops exactly those and nothing else. Each
//! row names a table and the workload family that created it (`oltp`,
//! `ycsb`), so cleaning up one family leaves the other's tables alone.

use loadcell_core::sql::{Dialect, SqlConn};
use loadcell_core::DriverError;

use crate::oltp::PrepareObserver;

/// The table where loadcell records what its `prepare` created.
pub const MARKER_TABLE: &str = "loadcell_objects";

/// Whether table `name` exists in the connection's current database/schema.
pub(crate) async fn table_exists<C: SqlConn>(
    conn: &mut C,
    name: &str,
) -> Result<bool, DriverError> {
    let sql = match conn.dialect() {
        Dialect::MySql => format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '{name}'"
        ),
        Dialect::Postgres => format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '{name}'"
        ),
        Dialect::Sqlite => {
            format!("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{name}'")
        }
    };
    Ok(conn.query_i64(&sql).await?.unwrap_or(0) > 0)
}

/// Creates the marker table if it is not there yet.
pub(crate) async fn ensure<C: SqlConn>(conn: &mut C) -> Result<(), DriverError> {
    conn.simple(&format!(
        "CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (name VARCHAR(128) NOT NULL PRIMARY KEY, workload VARCHAR(64) NOT NULL)"
    ))
    .await
}

/// Whether loadcell's `prepare` recorded table `name` (the marker table
/// must exist: see [`ensure`]).
pub(crate) async fn is_ours<C: SqlConn>(conn: &mut C, name: &str) -> Result<bool, DriverError> {
    Ok(conn
        .query_i64(&format!(
            "SELECT COUNT(*) FROM {MARKER_TABLE} WHERE name = '{name}'"
        ))
        .await?
        .unwrap_or(0)
        > 0)
}

/// Records that `workload`'s `prepare` is creating table `name`. Called
/// before the table is created, so an interrupted prepare can still be
/// cleaned up.
pub(crate) async fn record<C: SqlConn>(
    conn: &mut C,
    name: &str,
    workload: &str,
) -> Result<(), DriverError> {
    conn.simple(&format!(
        "INSERT INTO {MARKER_TABLE} (name, workload) VALUES ('{name}', '{workload}')"
    ))
    .await
}

/// Drops every table `workload`'s `prepare` recorded, and nothing else;
/// drops the marker table itself once it is empty. Returns the names
/// dropped.
pub async fn cleanup<C: SqlConn>(
    conn: &mut C,
    workload: &str,
    observer: &dyn PrepareObserver,
) -> Result<Vec<String>, DriverError> {
    if !table_exists(conn, MARKER_TABLE).await? {
        observer.message("Nothing to clean up: no tables were created by loadcell here");
        return Ok(Vec::new());
    }
    let names = conn
        .query_strings(&format!(
            "SELECT name FROM {MARKER_TABLE} WHERE workload = '{workload}' ORDER BY name"
        ))
        .await?;
    let mut dropped = Vec::new();
    for name in names {
        // Names come from our own marker rows; refuse anything odd.
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            observer.message(&format!("Skipping unexpected marker entry '{name}'"));
            continue;
        }
        if table_exists(conn, &name).await? {
            observer.message(&format!("Dropping table '{name}'..."));
            conn.simple(&format!("DROP TABLE {name}")).await?;
            dropped.push(name.clone());
        }
        conn.simple(&format!("DELETE FROM {MARKER_TABLE} WHERE name = '{name}'"))
            .await?;
    }
    if conn
        .query_i64(&format!("SELECT COUNT(*) FROM {MARKER_TABLE}"))
        .await?
        .unwrap_or(0)
        == 0
    {
        conn.simple(&format!("DROP TABLE {MARKER_TABLE}")).await?;
    }
    Ok(dropped)
}
