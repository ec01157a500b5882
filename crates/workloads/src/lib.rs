//! Workloads: which operations run, in what mix, on what data. Each
//! workload is generic over the driver family it needs (SQL or key-value;
//! YCSB's record workloads come in one wrapper per family), so it runs
//! unchanged on every driver of that family.

#![allow(async_fn_in_trait)]

pub mod dataset;
pub mod distribution;
pub mod kv;
mod load;
pub mod marker;
pub mod oltp;
#[cfg(test)]
mod recorder;
pub mod ycsb;

/// A workload that cannot run because its data set is not there (yet):
/// what is missing, e.g. "table sbtest1 does not exist".
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct NotPrepared(pub String);

impl NotPrepared {
    /// `what` (a table) does not exist.
    pub fn missing(what: &str) -> NotPrepared {
        NotPrepared(format!("{what} does not exist"))
    }
}
