//! Workloads: which operations run, in what mix, on what data. Each
//! workload is generic over the driver family it needs (SQL, key-value,
//! HTTP or search;
//! YCSB's record workloads come in one wrapper per family), so it runs
//! unchanged on every driver of that family.

#![allow(async_fn_in_trait)]

pub mod cpu;
pub mod dataset;
pub mod disk;
pub mod distribution;
mod failures;
pub mod http;
pub mod http_conns;
pub mod kv;
pub mod mqtt;
pub mod oltp;
mod origin;
pub mod prepare;
#[cfg(test)]
mod recorder;
pub mod script;
pub mod search;
pub mod stream;
pub mod ts;
pub mod wide;
pub mod workload;
pub mod ycsb;
