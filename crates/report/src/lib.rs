//! Reports are views of results: they read `loadcell.result/v1` data and
//! never need a rerun.

pub mod advise;
pub mod compare;
#[cfg(any(test, feature = "test-fixture"))]
pub mod fixture;
pub mod gate;
pub mod html;
pub mod input;
pub mod live;
pub mod plan;
pub mod prometheus;
pub mod redact;
pub mod suite;
pub mod svg;
pub mod table;
pub mod text;
pub mod trend;
