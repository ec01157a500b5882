//! The marker table: where loadcell records the tables its own `prepare`
//! created, so that `cleanup` drops exactly those and nothing else. Each
//! row names a table, the workload family that created it (`oltp`,
//! `ycsb`), so cleaning up one family leaves the other's tables alone, and
//! the table's identity as the server gave it at creation (PostgreSQL's
//! OID, MySQL's creation time; SQLite keeps none). A table of the same
//! name dropped and created again by another tool (sysbench uses the same
//! names) has another identity, and is not taken for loadcell's.

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

/// Creates the marker table if it is not there yet, and gives one made by
/// an earlier loadcell its `identity` column.
pub(crate) async fn ensure<C: SqlConn>(conn: &mut C) -> Result<(), DriverError> {
    conn.simple(&format!(
        "CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (name VARCHAR(128) NOT NULL PRIMARY KEY, workload VARCHAR(64) NOT NULL, identity VARCHAR(255))"
    ))
    .await?;
    let has_identity = match conn.dialect() {
        Dialect::MySql => format!(
            "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = '{MARKER_TABLE}' AND column_name = 'identity'"
        ),
        Dialect::Postgres => format!(
            "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '{MARKER_TABLE}' AND column_name = 'identity'"
        ),
        Dialect::Sqlite => {
            format!("SELECT COUNT(*) FROM pragma_table_info('{MARKER_TABLE}') WHERE name = 'identity'")
        }
    };
    if conn.query_i64(&has_identity).await?.unwrap_or(0) == 0 {
        conn.simple(&format!(
            "ALTER TABLE {MARKER_TABLE} ADD COLUMN identity VARCHAR(255)"
        ))
        .await?;
    }
    Ok(())
}

/// What the server says table `name` is, `None` if there is no such table
/// (or the server keeps nothing to tell one from its re-creation).
async fn identity<C: SqlConn>(conn: &mut C, name: &str) -> Result<Option<String>, DriverError> {
    let sql = match conn.dialect() {
        Dialect::MySql => format!(
            "SELECT CREATE_TIME FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '{name}'"
        ),
        Dialect::Postgres => format!("SELECT to_regclass('{name}')::oid::text"),
        // SQLite keeps nothing that tells a table from its re-creation (a
        // freed root page is reused); its file is loadcell's own anyway.
        Dialect::Sqlite => return Ok(None),
    };
    let first = conn.query_strings(&sql).await?.into_iter().next();
    Ok(first.filter(|v| !v.is_empty()))
}

/// Whose table `name` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// No such table.
    Nobody,
    /// Created by loadcell's `prepare`.
    Loadcell,
    /// Someone else's: never recorded, or recorded but since dropped and
    /// created again.
    Other,
}

/// Whose table `name` is (the marker table must exist: see [`ensure`]).
/// Marker rows found stale on the way (the table is gone, or is another
/// one now) are removed.
pub(crate) async fn owner<C: SqlConn>(conn: &mut C, name: &str) -> Result<Owner, DriverError> {
    let recorded = conn
        .query_strings(&format!(
            "SELECT COALESCE(identity, '') FROM {MARKER_TABLE} WHERE name = '{name}'"
        ))
        .await?
        .into_iter()
        .next();
    if !table_exists(conn, name).await? {
        if recorded.is_some() {
            forget(conn, name).await?;
        }
        return Ok(Owner::Nobody);
    }
    let Some(recorded) = recorded else {
        return Ok(Owner::Other);
    };
    // An empty identity: a prepare interrupted before it could note it,
    // or a marker from a loadcell that did not keep identities.
    if recorded.is_empty() || identity(conn, name).await?.as_deref() == Some(recorded.as_str()) {
        return Ok(Owner::Loadcell);
    }
    forget(conn, name).await?;
    Ok(Owner::Other)
}

async fn forget<C: SqlConn>(conn: &mut C, name: &str) -> Result<(), DriverError> {
    conn.simple(&format!("DELETE FROM {MARKER_TABLE} WHERE name = '{name}'"))
        .await
}

/// Records that `workload`'s `prepare` is creating table `name`: call it
/// before creating the table, so an interrupted prepare can still be
/// cleaned up, and [`created`] after.
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

/// Notes the identity of table `name` once `prepare` has created it (or
/// altered it: MySQL's creation time changes with an index).
pub(crate) async fn created<C: SqlConn>(conn: &mut C, name: &str) -> Result<(), DriverError> {
    if let Some(id) = identity(conn, name).await? {
        conn.simple(&format!(
            "UPDATE {MARKER_TABLE} SET identity = '{}' WHERE name = '{name}'",
            id.replace('\'', "''")
        ))
        .await?;
    }
    Ok(())
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
    ensure(conn).await?;
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
        match owner(conn, &name).await? {
            Owner::Loadcell => {
                observer.message(&format!("Dropping table '{name}'..."));
                conn.simple(&format!("DROP TABLE {name}")).await?;
                forget(conn, &name).await?;
                dropped.push(name.clone());
            }
            Owner::Other => observer.message(&format!(
                "Leaving table '{name}': it was dropped and created again since loadcell's \
                 prepare, not by loadcell"
            )),
            Owner::Nobody => {}
        }
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
