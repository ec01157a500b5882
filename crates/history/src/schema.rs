//! The store's schema and its migrations, kept as an ordered list: a store
//! at version N gets migrations N+1.. applied in one transaction, each
//! recorded in `schema_version`. Both backends have the same versions,
//! tables and columns; their SQL differs only in types.

/// One step of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: u32,
    /// What it changes, in words.
    pub what: &'static str,
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

/// The table of applied migrations (created before any migration runs):
/// one row per version, the store's version is the highest.
pub const VERSION_TABLE_SQLITE: &str = "CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL
)";
pub const VERSION_TABLE_POSTGRES: &str = "CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL
)";

/// Every migration, oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        what: "series (key text, key as JSON, workload, target) and entries \
               (time, host, commit, file, flags, scalar numbers, histogram)",
        sqlite: "
CREATE TABLE series (
    id TEXT PRIMARY KEY,
    key_text TEXT NOT NULL,
    key_json TEXT NOT NULL,
    workload TEXT NOT NULL,
    target TEXT NOT NULL
);
CREATE INDEX series_by_workload ON series (workload);
CREATE TABLE entries (
    id INTEGER PRIMARY KEY,
    series_id TEXT NOT NULL REFERENCES series (id),
    started_at TEXT NOT NULL,
    started_at_us INTEGER NOT NULL,
    host TEXT NOT NULL,
    commit_id TEXT,
    file TEXT NOT NULL,
    partial INTEGER NOT NULL,
    verification_failed INTEGER NOT NULL,
    rate_not_reached INTEGER NOT NULL,
    client_saturated INTEGER NOT NULL,
    throughput REAL NOT NULL,
    throughput_unit TEXT NOT NULL,
    p50_ms REAL NOT NULL,
    p90_ms REAL NOT NULL,
    p99_ms REAL NOT NULL,
    p999_ms REAL NOT NULL,
    error_rate REAL NOT NULL,
    client_cpu_us_per_op REAL,
    histogram_encoding TEXT NOT NULL,
    histogram_unit TEXT NOT NULL,
    histogram TEXT NOT NULL,
    UNIQUE (series_id, started_at)
);
CREATE INDEX entries_by_time ON entries (series_id, started_at_us);
",
        postgres: "
CREATE TABLE series (
    id TEXT PRIMARY KEY,
    key_text TEXT NOT NULL,
    key_json TEXT NOT NULL,
    workload TEXT NOT NULL,
    target TEXT NOT NULL
);
CREATE INDEX series_by_workload ON series (workload);
CREATE TABLE entries (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    series_id TEXT NOT NULL REFERENCES series (id),
    started_at TEXT NOT NULL,
    started_at_us BIGINT NOT NULL,
    host TEXT NOT NULL,
    commit_id TEXT,
    file TEXT NOT NULL,
    partial BOOLEAN NOT NULL,
    verification_failed BOOLEAN NOT NULL,
    rate_not_reached BOOLEAN NOT NULL,
    client_saturated BOOLEAN NOT NULL,
    throughput DOUBLE PRECISION NOT NULL,
    throughput_unit TEXT NOT NULL,
    p50_ms DOUBLE PRECISION NOT NULL,
    p90_ms DOUBLE PRECISION NOT NULL,
    p99_ms DOUBLE PRECISION NOT NULL,
    p999_ms DOUBLE PRECISION NOT NULL,
    error_rate DOUBLE PRECISION NOT NULL,
    client_cpu_us_per_op DOUBLE PRECISION,
    histogram_encoding TEXT NOT NULL,
    histogram_unit TEXT NOT NULL,
    histogram TEXT NOT NULL,
    UNIQUE (series_id, started_at)
);
CREATE INDEX entries_by_time ON entries (series_id, started_at_us);
",
    },
    Migration {
        version: 2,
        what: "series_labels (each series' labels, filled from the keys already \
               stored, for filtering by label) and server_counters (each entry's \
               server counters averaged over the run)",
        sqlite: "
CREATE TABLE series_labels (
    series_id TEXT NOT NULL REFERENCES series (id),
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (series_id, name)
);
CREATE INDEX series_labels_by_value ON series_labels (name, value);
INSERT INTO series_labels (series_id, name, value)
    SELECT s.id, l.key, l.value FROM series s, json_each(s.key_json, '$.labels') l;
CREATE TABLE server_counters (
    entry_id INTEGER NOT NULL REFERENCES entries (id),
    name TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (entry_id, name)
) WITHOUT ROWID;
",
        postgres: "
CREATE TABLE series_labels (
    series_id TEXT NOT NULL REFERENCES series (id),
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (series_id, name)
);
CREATE INDEX series_labels_by_value ON series_labels (name, value);
INSERT INTO series_labels (series_id, name, value)
    SELECT s.id, l.key, l.value FROM series s, json_each_text(s.key_json::json -> 'labels') l;
CREATE TABLE server_counters (
    entry_id BIGINT NOT NULL REFERENCES entries (id),
    name TEXT NOT NULL,
    value DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (entry_id, name)
);
",
    },
];

/// The version this build writes: the last migration's.
pub fn latest() -> u32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The migrations a store at version `current` still needs, in order; a
/// store written by a newer build is refused, never written.
pub fn pending(current: u32) -> Result<impl Iterator<Item = &'static Migration>, crate::Error> {
    if current > latest() {
        return Err(crate::Error::NewerSchema {
            found: current,
            known: latest(),
        });
    }
    Ok(MIGRATIONS.iter().filter(move |m| m.version > current))
}

/// The time a migration was applied, as `schema_version` keeps it.
pub(crate) fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_count_up_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version as usize, i + 1, "{}", m.what);
        }
        assert_eq!(latest(), 2);
    }
}
