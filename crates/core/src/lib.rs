//! The narrow waist of loadcell: what a driver must provide, how errors are
//! classified, and how targets are named. The engine, workloads and drivers
//! depend on this crate and not on each other.

// Futures here run on per-worker current-thread runtimes, so they never need
// to be `Send`; `async fn` in traits is exactly what we want.
#![allow(async_fn_in_trait)]

pub mod clock;
pub mod driver;
pub mod error;
pub mod family;
pub mod http;
pub mod kv;
pub mod machine;
pub mod mqtt;
pub mod park;
pub mod receipt;
pub mod search;
pub mod sql;
pub mod stream;
pub mod target;
pub mod ts;
pub mod wide;
pub mod words;

pub use driver::{Driver, ServerInfo, ServerSettings};
pub use error::{DriverError, ErrorClass, CLIENT_LIMIT};
pub use family::{DriverInfo, Family};
pub use target::{Target, TargetError};
