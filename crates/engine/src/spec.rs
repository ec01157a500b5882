//! What the engine is asked to run, already validated: the sessions,
//! schedule, phases and limits of one run. (Not a "plan": that is capacity
//! planning's word, `loadcell plan`.)

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Evenly spaced: one event every 1/rate seconds.
    Uniform,
    /// Exponentially distributed gaps with mean 1/rate: a Poisson process.
    Poisson,
}

impl Arrival {
    pub fn as_str(self) -> &'static str {
        match self {
            Arrival::Uniform => "uniform",
            Arrival::Poisson => "poisson",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSpec {
    /// Total events per second across all sessions.
    pub per_sec: f64,
    pub arrival: Arrival,
}

/// One run's sessions, schedule, phases and limits.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Session groups (sysbench's and memtier's threads).
    pub threads: usize,
    /// Sessions (connections) per group.
    pub clients: usize,
    /// OS threads the sessions are spread over, each with its own runtime
    /// and statistics; at most `sessions()`.
    pub workers: usize,
    /// Measurement time limit.
    pub time: Option<Duration>,
    /// Measured events limit.
    pub events: Option<u64>,
    pub warmup: Duration,
    /// `None` runs closed loop.
    pub rate: Option<RateSpec>,
    /// How often intervals are cut (and printed, if the observer wants).
    pub interval: Duration,
    pub connect_timeout: Duration,
    /// How long a session keeps trying to reconnect before the run gives up.
    pub reconnect_timeout: Duration,
    /// How long in-flight events may finish after the run is told to stop.
    pub drain_timeout: Duration,
    pub seed: u64,
    /// The server process, when it runs on this host, for CPU and memory.
    pub server_pid: Option<u32>,
}

impl RunSpec {
    pub fn sessions(&self) -> usize {
        self.threads * self.clients
    }
}
