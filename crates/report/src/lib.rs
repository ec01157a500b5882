//! Reports are views of results: they read `loadcell.result/v1` data and
//! never need a rerun.

pub mod live;
pub mod text;
