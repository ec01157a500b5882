//! The marker table: where loadcell records the tables its own `prepare`
//! created, so that `cleanup` drops exactly those and nothing else. Each
//! row names a table, the workload family that created it (`oltp`,
//! `ycsb`), so cleaning up one family leaves the other's tables alone, and
//! the table's tag.
//!
//! The tag is `loadcell:` and a random id drawn when `prepare` creates the
//! table, stored both in the marker row and on the table itself, as the
//! comment each SQL driver gives a table it creates
//! ([`SqlConn::create_commented_table`]): MySQL's and MariaDB's table
//! comment (`COMMENT = 'loadcell:…'`), PostgreSQL's `COMMENT ON TABLE`,
//! and for SQLite a comment in the `CREATE TABLE` text, which
//! `sqlite_master.sql` keeps verbatim. A table of the same name that
//! another tool dropped and created again (sysbench uses the same names)
//! does not carry the tag, however quickly it was re-created, and is left
//! alone, down to the drop itself, which checks the tag right before
//! ([`SqlConn::drop_table_if_commented`]). What the server itself says of
//! a table cannot tell it from its re-creation: MySQL's `CREATE_TIME` has
//! one-second resolution, a PostgreSQL OID can be reused, SQLite keeps
//! nothing.
//!
//! Markers of an earlier loadcell hold such an identity instead of a tag
//! (or nothing, for a prepare interrupted before noting it). Those tables
//! are never dropped nor loaded into: the identity cannot prove the table
//! is loadcell's (that is the very defect tags fix: sysbench re-creating a
//! table in the second loadcell created it gets the same `CREATE_TIME`),
//! and tagging it now would take the same unproven guess. Cleanup and
//! prepare say so and name the statement to drop the table by hand; the
//! marker row is kept until the table is gone.

use std::fmt;

use loadcell_core::sql::SqlConn;
use loadcell_core::DriverError;
use rand::Rng;

use crate::prepare::PrepareObserver;

/// The table where loadcell records what its `prepare` created.
pub const MARKER_TABLE: &str = "loadcell_objects";

const TAG_PREFIX: &str = "loadcell:";
/// Characters of a tag's random id: 62^20, about 119 bits.
const ID_LEN: usize = 20;

/// What loadcell marks a table it created with: `loadcell:` and a random
/// id, alphanumeric (safe inside SQL literals and comments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tag(String);

impl Tag {
    /// A fresh tag, from the thread's generator (seeded by the OS).
    pub(crate) fn new() -> Tag {
        Tag(format!("{TAG_PREFIX}{}", random_id(ID_LEN)))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// A tag as recorded in the marker table; `None` for anything else
    /// (an earlier loadcell's identity, an empty one).
    pub(crate) fn parse(text: &str) -> Option<Tag> {
        let id = text.strip_prefix(TAG_PREFIX)?;
        (id.len() == ID_LEN && id.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then(|| Tag(text.to_string()))
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `len` random alphanumeric characters, from the thread's generator (a
/// CSPRNG seeded by the OS): an id no other tool reproduces by chance.
pub(crate) fn random_id(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::rng();
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Creates the marker table if it is not there yet, and gives one made by
/// an earlier loadcell its `identity` column (where the tag goes).
pub(crate) async fn ensure<C: SqlConn>(conn: &mut C) -> Result<(), DriverError> {
    conn.simple(&format!(
        "CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (name VARCHAR(128) NOT NULL PRIMARY KEY, workload VARCHAR(64) NOT NULL, identity VARCHAR(255))"
    ))
    .await?;
    if !conn.column_exists(MARKER_TABLE, "identity").await? {
        conn.simple(&format!(
            "ALTER TABLE {MARKER_TABLE} ADD COLUMN identity VARCHAR(255)"
        ))
        .await?;
    }
    Ok(())
}

/// Whether table `name` carries `tag` (no such table: no).
async fn carries<C: SqlConn>(conn: &mut C, name: &str, tag: &Tag) -> Result<bool, DriverError> {
    Ok(conn
        .table_comment(name)
        .await?
        .is_some_and(|comment| comment.contains(tag.as_str())))
}

/// Creates table `name` carrying `tag` (`definition` is what follows the
/// name: the column list, and table options) and checks that the server
/// kept the tag: a server that dropped it silently would have loadcell
/// take its own table for someone else's ever after.
pub(crate) async fn create<C: SqlConn>(
    conn: &mut C,
    name: &str,
    definition: &str,
    tag: &Tag,
) -> Result<(), DriverError> {
    conn.create_commented_table(name, definition, tag.as_str())
        .await?;
    if !carries(conn, name, tag).await? {
        return Err(DriverError::fatal(format!(
            "the server did not keep the comment '{tag}' loadcell gave table '{name}' to know it \
             as its own: without it, cleanup would never drop the table"
        )));
    }
    Ok(())
}

/// Whose table `name` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// No such table.
    Nobody,
    /// Created by loadcell's `prepare`, which gave it this tag.
    Loadcell(Tag),
    /// Someone else's: never recorded, or recorded but since dropped and
    /// created again (it does not carry loadcell's tag).
    Other,
    /// Recorded by an earlier loadcell, without a tag: what it recorded
    /// cannot prove the table is the one it created.
    Earlier,
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
    if !conn.table_exists(name).await? {
        if recorded.is_some() {
            forget(conn, name).await?;
        }
        return Ok(Owner::Nobody);
    }
    let Some(recorded) = recorded else {
        return Ok(Owner::Other);
    };
    let Some(tag) = Tag::parse(&recorded) else {
        return Ok(Owner::Earlier);
    };
    if carries(conn, name, &tag).await? {
        return Ok(Owner::Loadcell(tag));
    }
    forget(conn, name).await?;
    Ok(Owner::Other)
}

async fn forget<C: SqlConn>(conn: &mut C, name: &str) -> Result<(), DriverError> {
    conn.simple(&format!("DELETE FROM {MARKER_TABLE} WHERE name = '{name}'"))
        .await
}

/// Records that `workload`'s `prepare` is creating table `name` with
/// `tag`: call it before creating the table (with [`create`]), so an
/// interrupted prepare can still be cleaned up.
pub(crate) async fn record<C: SqlConn>(
    conn: &mut C,
    name: &str,
    workload: &str,
    tag: &Tag,
) -> Result<(), DriverError> {
    conn.simple(&format!(
        "INSERT INTO {MARKER_TABLE} (name, workload, identity) VALUES ('{name}', '{workload}', '{tag}')"
    ))
    .await
}

/// What prepare says of a table an earlier loadcell recorded.
pub(crate) fn earlier_prepare_message(name: &str) -> String {
    format!(
        "Table '{name}' was recorded by an earlier loadcell, whose record cannot tell it from a \
         table another tool created again under the same name: left as it is. If it is \
         loadcell's, drop it by hand (DROP TABLE {name}) and prepare again"
    )
}

/// Drops every table `workload`'s `prepare` recorded that still carries
/// the tag it was created with, and nothing else; drops the marker table
/// itself once it is empty. Returns the names dropped.
pub async fn cleanup<C: SqlConn>(
    conn: &mut C,
    workload: &str,
    observer: &dyn PrepareObserver,
) -> Result<Vec<String>, DriverError> {
    if !conn.table_exists(MARKER_TABLE).await? {
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
        if drop_own(conn, &name, observer).await? {
            dropped.push(name);
        }
    }
    drop_marker_if_empty(conn).await?;
    Ok(dropped)
}

/// Drops table `name` if loadcell's `prepare` created it (it still
/// carries the recorded tag), saying why not otherwise; whether it was
/// dropped. The marker table must exist.
pub(crate) async fn drop_own<C: SqlConn>(
    conn: &mut C,
    name: &str,
    observer: &dyn PrepareObserver,
) -> Result<bool, DriverError> {
    let not_ours = || {
        format!(
            "Leaving table '{name}': it is not loadcell's. It does not carry the tag loadcell's \
             prepare created it with: another tool dropped it and created it again since"
        )
    };
    match owner(conn, name).await? {
        Owner::Loadcell(tag) => {
            observer.message(&format!("Dropping table '{name}'..."));
            let dropped = conn.drop_table_if_commented(name, tag.as_str()).await?;
            if !dropped {
                observer.message(&not_ours());
            }
            forget(conn, name).await?;
            Ok(dropped)
        }
        Owner::Other => {
            observer.message(&not_ours());
            Ok(false)
        }
        Owner::Earlier => {
            observer.message(&format!(
                "Leaving table '{name}': it was recorded by an earlier loadcell, whose record \
                 cannot tell it from a table another tool created again under the same name. \
                 If it is loadcell's, drop it by hand: DROP TABLE {name}"
            ));
            Ok(false)
        }
        Owner::Nobody => Ok(false),
    }
}

/// Drops the marker table once it records nothing.
pub(crate) async fn drop_marker_if_empty<C: SqlConn>(conn: &mut C) -> Result<(), DriverError> {
    let rows = conn
        .query_i64(&format!("SELECT COUNT(*) FROM {MARKER_TABLE}"))
        .await?;
    if rows.unwrap_or(0) == 0 {
        conn.simple(&format!("DROP TABLE {MARKER_TABLE}")).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_random_and_only_tags_parse() {
        let (a, b) = (Tag::new(), Tag::new());
        assert_ne!(a, b);
        assert_eq!(a.0.len(), TAG_PREFIX.len() + ID_LEN);
        assert_eq!(Tag::parse(&a.0), Some(a.clone()));
        // An earlier loadcell's identities: MySQL's CREATE_TIME, an OID.
        for earlier in ["", "2024-05-01 12:00:00", "16384", "loadcell:x'; DROP"] {
            assert_eq!(Tag::parse(earlier), None, "{earlier}");
        }
    }
}
