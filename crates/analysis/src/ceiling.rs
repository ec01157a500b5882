//! The client's own ceiling: how fast this run's workload shape could go
//! on this host with no server in the way, and how close the run came.
//!
//! Derived from the run itself: its CPU per operation (the whole
//! process's, over the measurement) × the cores its worker threads can use
//! (`min(workers, host CPUs)`). Not calibrated against a zero-latency
//! `sim`: the sim speaks no family's protocol, so it would leave out the
//! driver's own encoding and parsing, which is most of a client's cost on
//! SQL, search and streams. The run's own figure includes it, costs
//! nothing to read, and needs no cache. At low load it errs high (an
//! operation's wake-ups are not shared with others), so the utilisation it
//! gives is an upper bound: a run it calls the server's is the server's.

use serde::{Deserialize, Serialize};

/// At or above this share of its ceiling the client, not the server, may
/// be the limit: the run is flagged (history, suites, gates, sweep knees).
pub const AT_CEILING: f64 = 0.90;

/// `client` in a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientCeiling {
    /// How the ceiling was found: `run-cpu` (this run's CPU per operation
    /// × its worker threads' cores).
    pub method: String,
    /// The process's CPU per operation, in microseconds.
    pub cpu_per_op_us: f64,
    /// The cores the worker threads can use.
    pub cores: usize,
    pub ceiling_ops_per_sec: f64,
    /// The run's operations per second ÷ the ceiling (0–1).
    pub utilisation: f64,
    /// `utilisation >= AT_CEILING`.
    pub at_ceiling: bool,
    /// What that means for the figures, in a sentence.
    pub sentence: String,
}

/// The ceiling of a run that did `ops` operations in `duration_s` seconds
/// using `cpu_s` seconds of the process's CPU, on `workers` worker threads
/// of a host with `host_cpus`; `None` when it did nothing measurable.
pub fn from_run_cpu(
    ops: u64,
    duration_s: f64,
    cpu_s: f64,
    workers: usize,
    host_cpus: usize,
) -> Option<ClientCeiling> {
    if ops == 0 || duration_s <= 0.0 || cpu_s <= 0.0 {
        return None;
    }
    let cores = workers.min(host_cpus).max(1);
    let cpu_per_op = cpu_s / ops as f64;
    // Threads beside the workers (the collector) can take the process a
    // little past its cores: that is a client at its ceiling, not beyond.
    let utilisation = (cpu_s / (duration_s * cores as f64)).min(1.0);
    let ceiling = ops as f64 / duration_s / utilisation;
    let at_ceiling = utilisation >= AT_CEILING;
    let whose = if at_ceiling {
        "these figures are the client's limit, not the server's: give it more --threads (if cores are free) or another machine"
    } else {
        "these figures are the server's"
    };
    let sentence = format!(
        "client at {:.0}% of its ceiling (~{:.0} ops/s: {:.1} µs of CPU per operation × {cores} core{}): {whose}",
        100.0 * utilisation,
        ceiling,
        1e6 * cpu_per_op,
        if cores == 1 { "" } else { "s" },
    );
    Some(ClientCeiling {
        method: "run-cpu".into(),
        cpu_per_op_us: 1e6 * cpu_per_op,
        cores,
        ceiling_ops_per_sec: ceiling,
        utilisation,
        at_ceiling,
        sentence,
    })
}

/// The worst of several (shards'): the one nearest its ceiling.
pub fn worst<'a>(
    ceilings: impl IntoIterator<Item = &'a ClientCeiling>,
) -> Option<&'a ClientCeiling> {
    ceilings
        .into_iter()
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_worker_is_at_its_ceiling_and_an_idle_one_far_below() {
        // 1 worker, 1 s, 100,000 operations on 0.95 s of CPU.
        let busy = from_run_cpu(100_000, 1.0, 0.95, 1, 2).unwrap();
        assert!((busy.cpu_per_op_us - 9.5).abs() < 1e-9);
        assert!((busy.ceiling_ops_per_sec - 100_000.0 / 0.95).abs() < 1e-6);
        assert!(busy.at_ceiling);
        assert!(busy.sentence.starts_with(
            "client at 95% of its ceiling (~105263 ops/s: 9.5 µs of CPU per operation × 1 core): these figures are the client's limit"
        ), "{}", busy.sentence);
        // 4 workers on a 2-CPU host use 2 cores at most.
        let idle = from_run_cpu(800, 1.0, 0.02, 4, 2).unwrap();
        assert_eq!(idle.cores, 2);
        assert!((idle.utilisation - 0.01).abs() < 1e-9);
        assert!(!idle.at_ceiling);
        assert!(idle.sentence.ends_with("these figures are the server's"));
        // Past its cores (the collector beside the worker): at the ceiling.
        let over = from_run_cpu(1000, 1.0, 1.2, 1, 2).unwrap();
        assert_eq!((over.utilisation, over.ceiling_ops_per_sec), (1.0, 1000.0));
        assert!(from_run_cpu(0, 1.0, 0.5, 1, 2).is_none());
        assert_eq!(worst([&idle, &busy, &over]), Some(&over));
    }
}
