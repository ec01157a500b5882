//! What a history store does, whatever keeps it: SQLite in a results
//! directory ([`crate::sqlite`]) or a PostgreSQL database a team shares
//! ([`crate::postgres`]).

use serde::{Deserialize, Serialize};

use crate::entry::Entry;
use crate::key::SeriesKey;
use crate::Error;

/// A history store's backend. Each call is one transaction.
pub trait Store: Send {
    /// Adds the entries (those of one result file) in one transaction;
    /// an entry whose series already holds a run with its `started_at` is
    /// left as it is.
    fn insert(&mut self, entries: &[Entry]) -> Result<Recorded, Error>;
    /// The series matching `filter`, by workload, then key text.
    fn series(&mut self, filter: &SeriesFilter) -> Result<Vec<SeriesInfo>, Error>;
    /// Every entry of one series (by its id), oldest first.
    fn entries(&mut self, series_id: &str) -> Result<Vec<Entry>, Error>;
    /// The schema version the store is at.
    fn schema_version(&mut self) -> Result<u32, Error>;
}

/// What recording a result (or importing a directory) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// Runs that were new.
    pub added: usize,
    /// Runs the store already held (same series, same `started_at`).
    pub already: usize,
}

impl std::ops::AddAssign for Recorded {
    fn add_assign(&mut self, other: Recorded) {
        self.added += other.added;
        self.already += other.already;
    }
}

/// Which series to list; every condition given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeriesFilter {
    /// The workload, exactly.
    pub workload: Option<String>,
    /// A part of the key's target (`127.0.0.1:6379`, `postgres://`).
    pub target_contains: Option<String>,
    /// Labels the series has, each with this value.
    pub labels: Vec<(String, String)>,
}

impl SeriesFilter {
    /// Adds the condition `label NAME=VALUE` from its `NAME=VALUE` text.
    pub fn label(mut self, name_value: &str) -> Result<SeriesFilter, Error> {
        let (name, value) = name_value
            .split_once('=')
            .ok_or_else(|| Error::Usage(format!("label filter '{name_value}' is not KEY=VALUE")))?;
        self.labels.push((name.to_string(), value.to_string()));
        Ok(self)
    }
}

/// A series and what the store holds of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesInfo {
    /// [`SeriesKey::id`].
    pub id: String,
    pub key: SeriesKey,
    /// [`SeriesKey::text`].
    pub text: String,
    /// How many runs it holds.
    pub runs: u64,
    /// The `started_at` of its first and last run.
    pub first_started_at: String,
    pub last_started_at: String,
}

/// Microseconds since the Unix epoch of an RFC 3339 time, the order
/// entries are kept in.
pub(crate) fn epoch_us(started_at: &str) -> Result<i64, Error> {
    let t = humantime::parse_rfc3339_weak(started_at.trim()).map_err(|e| {
        Error::Result(format!(
            "started_at '{started_at}' is not an RFC 3339 time: {e}"
        ))
    })?;
    let since = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| Error::Result(format!("started_at '{started_at}' is before 1970")))?;
    i64::try_from(since.as_micros())
        .map_err(|_| Error::Result(format!("started_at '{started_at}' is out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_order_whatever_their_precision() {
        let a = epoch_us("2025-01-01T00:00:00Z").unwrap();
        let b = epoch_us("2025-01-01T00:00:00.500Z").unwrap();
        let c = epoch_us("2025-01-01T00:00:01.000Z").unwrap();
        assert!(a < b && b < c, "{a} {b} {c}");
        assert_eq!(a, 1_735_689_600_000_000);
        assert!(epoch_us("yesterday").is_err());
    }
}
