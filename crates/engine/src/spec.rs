//! What the engine is asked to run, already validated: the sessions,
//! schedule, phases and limits of one run. (Not a "plan": that is capacity
//! planning's word, `loadcell plan`.)

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use crate::shard::ShardPlace;

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

impl RateSpec {
    /// The tick in nanoseconds, at least 1.
    pub fn tick_ns(&self) -> Option<u64> {
        self.tick.map(|t| t.as_nanos().max(1) as u64)
    }
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

/// Sessions of another kind beside the `threads × clients` ones, with a
/// rate of their own (queries while indexing; consumers beside
/// producers); each group's events are reported apart.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionGroup {
    pub name: &'static str,
    pub sessions: usize,
    /// `None` runs this group closed loop.
    pub rate: Option<RateSpec>,
}

/// A run of several session groups: the `threads × clients` sessions at
/// `RunSpec::rate`, named `first`, then `others` in order.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionGroups {
    pub first: &'static str,
    pub others: Vec<SessionGroup>,
}

impl SessionGroups {
    /// The sessions of the groups after the first.
    pub fn other_sessions(&self) -> usize {
        self.others.iter().map(|g| g.sessions).sum()
    }
}

/// Where a session stands among the groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupPlace {
    pub group: usize,
    /// Its index among its group's sessions.
    pub index: usize,
    /// Its group's sessions.
    pub count: usize,
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
    /// Further session groups, each at its own rate; `None` for a run of
    /// one kind of session.
    pub groups: Option<SessionGroups>,
    /// How long a session keeps trying to reconnect before the run gives up.
    pub reconnect_timeout: Duration,
    /// How long in-flight events may finish after the run is told to stop.
    pub drain_timeout: Duration,
    pub seed: u64,
    /// The server process, when it runs on this host, for CPU and memory.
    pub server_pid: Option<u32>,
    /// The hosts `--server-metrics` scrapes on a thread of their own: each
    /// interval's resource sample takes their newest scrapes.
    pub server_metrics: Option<loadcell_record::remote::Readings>,
    /// The workload measures the client's own CPU (`cpu`): busy workers
    /// are the measurement, not a client too slow for the server, so no
    /// saturation warning is given.
    pub measures_client_cpu: bool,
    /// This process's place in a run split over several (`--shard`):
    /// its sessions are numbered among all shards'.
    pub shard: Option<ShardPlace>,
    /// When measurement starts on the wall clock (`--start-at`), the same
    /// instant for every shard: the warm-up runs just before it.
    pub start_at: Option<SystemTime>,
    /// The first group's load over the measured time: its rate
    /// (`--stages`; `rate` then holds its mean) or its running sessions
    /// (`--session-stages`, in closed loop: `threads × clients` is their
    /// peak). `time` holds the stages' length; the warm-up runs at the
    /// first stage's target.
    pub stages: Option<crate::shape::Stages>,
    /// `--warmup auto`: warm up until the run settles (see
    /// [`loadcell_analysis::steady`]), for this long at most; `warmup` is
    /// then 0.
    pub settle: Option<Duration>,
}

impl RunSpec {
    pub fn sessions(&self) -> usize {
        self.threads * self.clients
            + self
                .groups
                .as_ref()
                .map_or(0, SessionGroups::other_sessions)
    }

    fn others(&self) -> &[SessionGroup] {
        self.groups.as_ref().map_or(&[], |g| &g.others)
    }

    /// The shaped rate, under `--stages`.
    pub fn rate_shape(&self) -> Option<&crate::shape::Shape> {
        self.stages
            .as_ref()
            .filter(|s| s.of == crate::shape::StageTarget::Rate)
            .map(|s| &s.shape)
    }

    /// The shaped sessions, under `--session-stages`.
    pub fn session_stages(&self) -> Option<&crate::shape::Stages> {
        self.stages
            .as_ref()
            .filter(|s| s.of == crate::shape::StageTarget::Sessions)
    }

    /// How many groups: 1 for a run of one kind.
    pub fn group_count(&self) -> usize {
        1 + self.others().len()
    }

    /// The group session `index` (of all the run's) belongs to: the
    /// `threads × clients` first, then each other group's in turn; in a
    /// sharded run, its index and count are among all shards' sessions of
    /// the group.
    pub fn place(&self, index: usize) -> GroupPlace {
        let mut first = 0;
        for g in 0..self.group_count() {
            let sessions = self.group_sessions(g);
            if index < first + sessions {
                let local = GroupPlace {
                    group: g,
                    index: index - first,
                    count: sessions,
                };
                return match &self.shard {
                    Some(place) => GroupPlace {
                        index: place.spans[g].first + local.index,
                        count: place.spans[g].total,
                        ..local
                    },
                    None => local,
                };
            }
            first += sessions;
        }
        panic!(
            "session {index} is beyond the run's {} sessions",
            self.sessions()
        )
    }

    /// Session `place`'s number among every session of every group (of
    /// all shards): what its random seed derives from, so that shards
    /// given one `--seed` still draw differently.
    pub fn ordinal(&self, place: GroupPlace) -> usize {
        let before: usize = (0..place.group)
            .map(|g| match &self.shard {
                Some(shard) => shard.spans[g].total,
                None => self.group_sessions(g),
            })
            .sum();
        before + place.index
    }

    /// Under `--session-stages`, the turn at which the first group's
    /// session `index` (among all shards') runs: the shape runs those
    /// whose turn is below its target. Its number, unless sharded.
    pub fn wake_rank(&self, index: usize) -> usize {
        self.shard
            .as_ref()
            .map_or(index, |place| place.wake_rank(index))
    }

    /// Session group `g`'s name (empty in a run of one group).
    pub fn group_name(&self, g: usize) -> &'static str {
        match (&self.groups, g) {
            (Some(groups), 0) => groups.first,
            (Some(groups), g) => groups.others[g - 1].name,
            (None, _) => "",
        }
    }

    /// Session group `g`'s sessions.
    pub fn group_sessions(&self, g: usize) -> usize {
        match g {
            0 => self.threads * self.clients,
            g => self.others()[g - 1].sessions,
        }
    }

    /// Whether every session sends its events in bursts at ticks on a
    /// connection it keeps: then a worker may read answers at its ticks
    /// (see [`loadcell_core::receipt`]), as nothing else it times (a
    /// connect, a held connection's turn) waits for them.
    pub fn bursts_on_kept_connections(&self) -> bool {
        self.hold.is_none()
            && self.connection_policy == ConnectionPolicy::Persistent
            && self
                .rates()
                .iter()
                .all(|r| r.is_some_and(|r| r.tick.is_some()))
    }

    /// Each group's rate, in group order (`None`: closed loop).
    pub fn rates(&self) -> Vec<Option<RateSpec>> {
        std::iter::once(self.rate)
            .chain(self.others().iter().map(|g| g.rate))
            .collect()
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
    fn sessions_are_placed_in_their_groups() {
        let rate = RateSpec {
            per_sec: 50.0,
            arrival: Arrival::Uniform,
            tick: None,
        };
        let mut spec = crate::schedule::tests::spec(None, None, None);
        (spec.threads, spec.clients) = (2, 2);
        assert_eq!((spec.sessions(), spec.group_count()), (4, 1));
        spec.groups = Some(SessionGroups {
            first: "bulk",
            others: vec![SessionGroup {
                name: "query",
                sessions: 3,
                rate: Some(rate),
            }],
        });
        assert_eq!((spec.sessions(), spec.group_count()), (7, 2));
        let place = |group, index, count| GroupPlace {
            group,
            index,
            count,
        };
        assert_eq!(spec.place(3), place(0, 3, 4));
        assert_eq!(spec.place(4), place(1, 0, 3));
        assert_eq!(spec.place(6), place(1, 2, 3));
        assert_eq!(spec.rates(), vec![None, Some(rate)]);
        assert_eq!((spec.group_name(1), spec.group_sessions(1)), ("query", 3));
        assert_eq!((spec.group_name(0), spec.group_sessions(0)), ("bulk", 4));
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
