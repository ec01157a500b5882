//! What the engine is asked to run, already validated: the sessions,
//! schedule, phases and limits of one run. (Not a "plan": that is capacity
//! planning's word, `loadcell plan`.)

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;
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
    /// Send in bursts: every event due within a tick waits for the tick's
    /// end and counts from it, so a worker wakes once per tick rather than
    /// once per event (wrk2's 1 ms timer, made explicit).
    pub tick: Option<Duration>,
}

/// When a session opens a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConnectionPolicy {
    /// Connect once and keep the connection, making it again only after
    /// it is lost (a client that keeps its connections alive).
    #[default]
    Persistent,
    /// Connect, run the event, close (ab without -k).
    NewPerEvent,
    /// A new connection every n events.
    NewEvery(NonZeroU64),
}

impl ConnectionPolicy {
    /// How many events one connection serves before it is closed; `None`
    /// while it lasts.
    pub fn events_per_connection(self) -> Option<u64> {
        match self {
            ConnectionPolicy::Persistent => None,
            ConnectionPolicy::NewPerEvent => Some(1),
            ConnectionPolicy::NewEvery(n) => Some(n.get()),
        }
    }
}

/// As `--connection-policy` takes it: `persistent`, `per-event`, `every:N`.
impl fmt::Display for ConnectionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectionPolicy::Persistent => f.write_str("persistent"),
            ConnectionPolicy::NewPerEvent => f.write_str("per-event"),
            ConnectionPolicy::NewEvery(n) => write!(f, "every:{n}"),
        }
    }
}

impl FromStr for ConnectionPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<ConnectionPolicy, String> {
        match s {
            "persistent" => return Ok(ConnectionPolicy::Persistent),
            "per-event" => return Ok(ConnectionPolicy::NewPerEvent),
            _ => {}
        }
        s.strip_prefix("every:")
            .and_then(|n| n.parse().ok())
            .map(ConnectionPolicy::NewEvery)
            .ok_or_else(|| {
                format!(
                    "'{s}' is not a connection policy: use persistent, per-event or every:N \
                     (a new connection every N events, N at least 1)"
                )
            })
    }
}

/// Connections held rather than churned (`http-conns`): sessions connect
/// one after another at `ramp_rate` per second once the clock starts, not
/// all before it, and each then runs one event every `every` on its
/// connection (per-session pacing, not the schedule's); an event (the
/// connect included) not done within `timeout` fails as timed out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hold {
    pub ramp_rate: f64,
    pub every: Duration,
    pub timeout: Duration,
}

impl Hold {
    /// When session `index` connects, after the clock's start.
    pub fn connect_after(&self, index: usize) -> Duration {
        Duration::from_secs_f64(index as f64 / self.ramp_rate)
    }
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
    /// When sessions open new connections; a policy that churns them
    /// records every connect as the operation kind `connect`.
    pub connection_policy: ConnectionPolicy,
    /// Sessions that hold connections on a ramp instead of running the
    /// schedule's events.
    pub hold: Option<Hold>,
    /// How long a session keeps trying to reconnect before the run gives up.
    pub reconnect_timeout: Duration,
    /// How long in-flight events may finish after the run is told to stop.
    pub drain_timeout: Duration,
    pub seed: u64,
    /// The server process, when it runs on this host, for CPU and memory.
    pub server_pid: Option<u32>,
    /// The workload measures the client's own CPU (`cpu`): busy workers
    /// are the measurement, not a client too slow for the server, so no
    /// saturation warning is given.
    pub measures_client_cpu: bool,
}

impl RunSpec {
    pub fn sessions(&self) -> usize {
        self.threads * self.clients
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_sessions_connect_on_the_ramp() {
        let hold = Hold {
            ramp_rate: 200.0,
            every: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
        };
        assert_eq!(hold.connect_after(0), Duration::ZERO);
        assert_eq!(hold.connect_after(100), Duration::from_millis(500));
    }

    #[test]
    fn connection_policies_parse_as_they_print() {
        for text in ["persistent", "per-event", "every:1", "every:250"] {
            let policy: ConnectionPolicy = text.parse().unwrap();
            assert_eq!(policy.to_string(), text);
        }
        assert_eq!(
            "every:3"
                .parse::<ConnectionPolicy>()
                .unwrap()
                .events_per_connection(),
            Some(3)
        );
        assert_eq!(ConnectionPolicy::default().events_per_connection(), None);
        for bad in ["every:0", "every:", "every:-1", "every:x", "keep-alive", ""] {
            let e = bad.parse::<ConnectionPolicy>().unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "'{bad}' is not a connection policy: use persistent"
                )),
                "{e}"
            );
            assert!(!e.contains('\n'));
        }
    }
}
