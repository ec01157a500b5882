//! Recording: what a run measured, kept per worker without locks and merged
//! off the hot path, and the result file it becomes.

pub mod coarse;
pub mod details;
pub mod env;
pub mod file;
pub mod fine;
pub mod hdrlog;
pub mod hist;
pub mod merge;
pub mod remote;
pub mod resources;
pub mod result;
pub mod spill;
pub mod stats;
pub mod suite;
pub mod sweep;

pub use hist::{LatencySummary, Micros};
pub use stats::{ErrorSample, OpStats, Stats};
