//! Analysis of loadcell results: the arithmetic every benchmark report does
//! by hand (see `shared/SCENARIOS.md`, "What every report does by hand").
//!
//! - [`knee`]: where throughput stops scaling with concurrency (a marginal-gain
//!   rule), and where p99 latency climbs with load.
//! - [`usl`]: the Universal Scalability Law fitted to a sweep: what limits
//!   scaling (contention, coherency) and where throughput peaks.
//! - [`compare`]: whether two runs differ, with a t-test that accounts for
//!   autocorrelation between interval samples, and a regression gate.
//! - [`sweep`]: what a sweep file stores of its points: both knees and the
//!   USL fit, and for [`findmax`] (the search for the highest rate meeting
//!   an SLA) the search's answer.
//! - [`ramp`]: the same two knees read from one run's ramp (`--stages`),
//!   interval by interval.
//! - [`saturation`]: which measured resource (client, host or server CPU, a
//!   disk) ran out where throughput saturated, against explicit thresholds.
//! - [`steady`]: when a run's warm-up transient has passed (MSER-5), for
//!   `--warmup auto`.
//! - [`advise`]: tuning advice, one pure rule per setting, over a server's
//!   settings and status and a run's figures.
//! - [`plan`]: nodes and dollars per month needed for a target throughput,
//!   per instance type, from measured node-count scaling.
//! - [`changepoint`]: where a series of runs changed (E-divisive means with
//!   a permutation test, as Apache Otava), beyond the series' own noise.
//! - [`stats`]: the special functions underneath (Student-t distribution,
//!   regularized incomplete beta, log-gamma) and small descriptive helpers.
//!
//! Pure math and logic: no I/O, no clocks, no randomness beyond
//! `changepoint`'s permutations, drawn from a seed the caller gives. Results derive
//! `Serialize`/`Deserialize` so they can be written into JSON files.
//! Values that can be infinite (a peak that does not exist) are `Option`s,
//! because JSON has no infinity.

pub mod advise;
pub mod ceiling;
pub mod changepoint;
pub mod compare;
mod error;
pub mod findmax;
pub mod knee;
mod linalg;
pub mod plan;
pub mod ramp;
pub mod saturation;
pub mod stats;
pub mod steady;
pub mod sweep;
mod text;
pub mod usl;

pub use error::AnalysisError;
