//! The engine runs a workload's script against a driver: it owns sessions,
//! worker threads, the schedule (closed loop, or open loop at a target rate
//! with uniform or Poisson arrivals), phases (warm-up, measurement), stop
//! conditions, and the merging of per-worker stats into intervals.
//!
//! Everything is composed from separate pieces: [`schedule::Schedule`]
//! decides when the next event is due and whether the run is over, the
//! session loop runs events and classifies errors, and the collector merges
//! what workers hand in. There is one session loop, not one per mode.

#![allow(async_fn_in_trait)]

mod collector;
pub mod control;
mod hold;
pub mod schedule;
pub mod script;
mod session;
pub mod shape;
pub mod shard;
mod shared;
pub mod spec;
#[cfg(test)]
mod tests;
mod worker;

pub use collector::{IntervalView, Observer, Phase, RunOutcome, StageOutcome};
pub use control::{Interrupts, StopReason};
pub use hold::{FirstFailure, HeldOutcome};
pub use script::{BatchClock, Category, Ctx, OpSpec, Script, SessionInfo, NOT_FOUND};
pub use shard::{SessionSpan, Shard, ShardPlace};
pub use spec::{
    Arrival, ConnectionPolicy, GroupPlace, Hold, RateSpec, RunSpec, SessionGroup, SessionGroups,
};

use std::sync::Arc;
use std::time::Duration;

use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo};

/// Connects once with the spec's timeout, before any load is sent, so that
/// bad credentials or an unreachable server fail fast with a clear message.
pub async fn connect_once<D: Driver>(
    driver: &D,
    timeout: Duration,
) -> Result<(D::Conn, ServerInfo), DriverError> {
    let mut conn = connect_with_timeout(driver, timeout).await?;
    // The server has answered as the driver's system; a stuck one still
    // must not hang the run before it starts.
    let info = match tokio::time::timeout(timeout, driver.server_info(&mut conn)).await {
        Ok(info) => info?,
        Err(_) => {
            return Err(DriverError::new(
                ErrorClass::Connection,
                format!(
                    "{} accepted the connection but did not say what it is (product and \
                     version) within {}",
                    driver.endpoint(),
                    humantime::format_duration(timeout)
                ),
            ))
        }
    };
    Ok((conn, info))
}

/// The driver's connect, given up after `timeout` with a message that says
/// what it was waiting for (see [`Driver::connect_within`]).
pub(crate) async fn connect_with_timeout<D: Driver>(
    driver: &D,
    timeout: Duration,
) -> Result<D::Conn, DriverError> {
    driver.connect_within(timeout).await
}

/// Runs a whole load phase: blocks the calling thread until the run ends,
/// reporting intervals to `observer` as they complete.
///
/// Under `--warmup auto` ([`RunSpec::settle`]) the warm-up is a run of its
/// own, all warm-up, that stops once it has settled (or at the cap); the
/// measured run follows on new connections. Between them the server sees
/// the sessions reconnect (milliseconds); what warmed up (a JIT's code,
/// caches, buffer pools) stays warm.
pub fn run<D, S>(
    driver: Arc<D>,
    script: Arc<S>,
    spec: &RunSpec,
    observer: &mut dyn Observer,
) -> RunOutcome
where
    D: Driver,
    S: Script<D::Conn> + Send + Sync,
{
    let Some(max) = spec.settle else {
        return collector::run(driver, script, spec, observer);
    };
    let settling = RunSpec {
        warmup: max,
        time: Some(Duration::ZERO),
        events: None,
        ..spec.clone()
    };
    let warm = collector::run(
        Arc::clone(&driver),
        Arc::clone(&script),
        &settling,
        observer,
    );
    let steady = warm.steady_state.clone();
    if warm.stop_reason != StopReason::Completed {
        // Interrupted or failed while warming up: nothing was measured.
        return warm;
    }
    let measured = RunSpec {
        settle: None,
        ..spec.clone()
    };
    let mut outcome = collector::run(driver, script, &measured, observer);
    if let Some(s) = steady.as_ref().filter(|s| !s.settled) {
        outcome.warnings.insert(
            0,
            format!(
                "The warm-up never settled within --warmup-max {}: throughput or latency was \
                 still changing ({}), and measurement began at the cap",
                humantime::format_duration(Duration::from_secs_f64(s.max_s.round())),
                s.method
            ),
        );
    }
    outcome.steady_state = steady;
    outcome
}
