//! Whole runs of the engine against a driver and a script made for the
//! test: what a run records, end to end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::{Driver, DriverError, ServerInfo};

use crate::{
    Category, ConnectionPolicy, Ctx, Hold, IntervalView, Observer, OpSpec, Phase, RunOutcome,
    RunSpec, Script, SessionInfo,
};

/// A driver whose connections are nothing but a count of connects,
/// refused past `accepts` of them when it is set (a server at its limit);
/// each takes `connect_takes`, and the most in flight at once is kept.
#[derive(Default)]
struct Counting {
    connects: AtomicU64,
    accepts: Option<u64>,
    connect_takes: Duration,
    in_flight: AtomicU64,
    most_in_flight: AtomicU64,
}

impl Driver for Counting {
    type Conn = ();

    fn endpoint(&self) -> String {
        "counting".to_string()
    }

    async fn connect(&self) -> Result<(), DriverError> {
        if !self.connect_takes.is_zero() {
            let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            self.most_in_flight.fetch_max(now, Ordering::Relaxed);
            tokio::time::sleep(self.connect_takes).await;
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        let made = self.connects.fetch_add(1, Ordering::Relaxed) + 1;
        match self.accepts {
            Some(limit) if made > limit => Err(DriverError::connection("connection refused")),
            _ => Ok(()),
        }
    }

    async fn server_info(&self, _conn: &mut ()) -> Result<ServerInfo, DriverError> {
        Ok(ServerInfo::new("counting", "1"))
    }
}

/// Each event is one `bulk` operation of 1 ms carrying `ITEMS` items.
struct Bulk;

const ITEMS: u64 = 3;

impl Script<()> for Bulk {
    type Session = ();

    fn ops(&self) -> &[OpSpec] {
        &[OpSpec {
            name: "bulk",
            category: Category::Write,
        }]
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut (), _session: SessionInfo) -> Result<(), DriverError> {
        Ok(())
    }

    async fn event(
        &self,
        _conn: &mut (),
        _session: &mut (),
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        ctx.op(0, async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok(())
        })
        .await?;
        ctx.items(0, ITEMS);
        Ok(())
    }
}

/// Items seen live, per phase.
#[derive(Default)]
struct Seen {
    warmup_items: u64,
    measured_items: u64,
}

impl Observer for Seen {
    fn interval(&mut self, view: &IntervalView<'_>) {
        let items = view.stats.items_total();
        match view.phase {
            Phase::Warmup => self.warmup_items += items,
            Phase::Measure => self.measured_items += items,
        }
    }

    fn warning(&mut self, _message: &str) {}
}

pub(crate) fn spec(clients: usize, time: Option<Duration>, events: Option<u64>) -> RunSpec {
    RunSpec {
        threads: 1,
        clients,
        workers: 1,
        time,
        events,
        warmup: Duration::ZERO,
        rate: None,
        interval: Duration::from_millis(50),
        connect_timeout: Duration::from_secs(1),
        connection_policy: ConnectionPolicy::Persistent,
        hold: None,
        groups: None,
        reconnect_timeout: Duration::from_secs(1),
        drain_timeout: Duration::from_secs(1),
        seed: 1,
        server_pid: None,
        server_metrics: None,
        measures_client_cpu: false,
        shard: None,
        start_at: None,
        settle: None,
        stages: None,
    }
}

fn run(spec: &RunSpec, seen: &mut Seen) -> RunOutcome {
    run_counting(spec, seen).0
}

/// A run, and how many connections the driver made.
fn run_counting(spec: &RunSpec, seen: &mut Seen) -> (RunOutcome, u64) {
    let driver = Arc::new(Counting::default());
    let outcome = crate::run(Arc::clone(&driver), Arc::new(Bulk), spec, seen);
    (outcome, driver.connects.load(Ordering::Relaxed))
}

/// 300 sessions on two workers open their connections a bounded number
/// at a time (a server's listen backlog drops the SYNs of a burst), yet
/// many at once.
#[test]
fn sessions_open_their_connections_a_bounded_number_at_a_time() {
    let driver = Arc::new(Counting {
        connect_takes: Duration::from_millis(5),
        ..Counting::default()
    });
    let spec = RunSpec {
        workers: 2,
        ..spec(300, None, Some(300))
    };
    let outcome = crate::run(
        Arc::clone(&driver),
        Arc::new(Bulk),
        &spec,
        &mut Seen::default(),
    );
    assert_eq!(outcome.total.events, 300);
    assert!(driver.connects.load(Ordering::Relaxed) >= 300);
    let most = driver.most_in_flight.load(Ordering::Relaxed) as usize;
    assert!(
        (crate::shared::OPENING_AT_ONCE / 2..=crate::shared::OPENING_AT_ONCE).contains(&most),
        "{most} connects at once"
    );
}

#[test]
fn items_are_counted_across_interval_cuts_and_left_out_of_the_warm_up() {
    let mut spec = spec(2, Some(Duration::from_millis(300)), None);
    spec.warmup = Duration::from_millis(100);
    let mut seen = Seen::default();
    let outcome = run(&spec, &mut seen);

    let bulk = &outcome.total.ops[0];
    assert!(bulk.count > 50, "{} bulk operations", bulk.count);
    assert_eq!(bulk.items, ITEMS * bulk.count);
    assert_eq!(outcome.total.items_total(), bulk.items);
    // Cut into several intervals, whose items add up to the total.
    assert!(
        outcome.intervals.len() >= 4,
        "{:?}",
        outcome.intervals.len()
    );
    let per_interval: u64 = outcome.intervals.iter().filter_map(|i| i.items).sum();
    assert_eq!(per_interval, bulk.items);
    assert_eq!(seen.measured_items, bulk.items);
    // The warm-up carried items too, and none of them is in the total.
    assert!(seen.warmup_items > 0);
}

#[test]
fn a_new_connection_per_event_is_one_timed_connect_per_event() {
    let mut spec = spec(2, Some(Duration::from_millis(200)), None);
    spec.connection_policy = ConnectionPolicy::NewPerEvent;
    let (outcome, made) = run_counting(&spec, &mut Seen::default());
    let total = &outcome.total;
    assert!(total.events > 20, "{} events", total.events);
    assert_eq!(total.connects.count, total.events);
    assert_eq!(total.connects.errors, 0);
    assert_eq!(total.connects.latency.len(), total.events);
    // Not a workload operation, and not a reconnect after a loss.
    assert_eq!(total.ops_total(), total.events);
    assert_eq!(total.reconnects, 0);
    // Besides the events' connects: the collector's monitoring connection,
    // and events cut off at the deadline after connecting.
    assert!(made > total.connects.count, "{made}");
    assert!(made <= total.connects.count + 1 + 2, "{made}");
}

#[test]
fn a_new_connection_every_n_events_is_timed_once_per_n() {
    let mut spec = spec(1, None, Some(10));
    spec.connection_policy = "every:3".parse().unwrap();
    let outcome = run(&spec, &mut Seen::default());
    assert_eq!(outcome.total.events, 10);
    // Events 1, 4, 7 and 10 connect.
    assert_eq!(outcome.total.connects.count, 4);
}

#[test]
fn persistent_sessions_time_no_connects() {
    let outcome = run(&spec(2, None, Some(20)), &mut Seen::default());
    assert_eq!(outcome.total.events, 20);
    assert_eq!(outcome.total.connects.count, 0);
}

/// 40 sessions holding connections, ramped at 400/s (all in by 0.1 s),
/// each with an event every 50 ms, for 0.4 s.
fn held_spec() -> RunSpec {
    let mut spec = spec(40, Some(Duration::from_millis(400)), None);
    spec.hold = Some(Hold {
        ramp_rate: 400.0,
        every: Duration::from_millis(50),
        timeout: Duration::from_secs(1),
    });
    spec
}

#[test]
fn held_connections_ramp_up_and_are_kept_with_paced_events() {
    let driver = Arc::new(Counting::default());
    let outcome = crate::run(
        Arc::clone(&driver),
        Arc::new(Bulk),
        &held_spec(),
        &mut Seen::default(),
    );
    let total = &outcome.total;
    // Every session connected once, timed, inside the run.
    assert_eq!(total.connects.count, 40);
    let held = outcome.held.expect("a held run says what it held");
    assert_eq!((held.peak, held.at_end, held.first_failure), (40, 40, None));
    // Paced: about 8 events per session in 0.4 s, not a closed loop's hundreds.
    assert!((200..=400).contains(&total.events), "{}", total.events);
    // The gauge rises on the ramp: the first 50 ms interval holds about 20.
    let gauge: Vec<u64> = outcome
        .intervals
        .iter()
        .map(|i| i.connections_held.expect("a gauge per interval"))
        .collect();
    assert!(gauge[0] < 40 && gauge[0] > 5, "{gauge:?}");
    assert_eq!(gauge.last(), Some(&40), "{gauge:?}");
}

#[test]
fn held_connections_name_the_count_at_which_the_target_refused() {
    let driver = Arc::new(Counting {
        // The collector's monitoring connection takes one.
        accepts: Some(26),
        ..Counting::default()
    });
    let outcome = crate::run(driver, Arc::new(Bulk), &held_spec(), &mut Seen::default());
    assert_eq!(outcome.stop_reason, crate::StopReason::Completed);
    let held = outcome.held.unwrap();
    assert_eq!((held.peak, held.at_end), (25, 25));
    let first = held.first_failure.expect("refusals were seen");
    // The 25th may still be in its first event when the 26th is refused.
    assert!((24..=25).contains(&first.held), "{}", first.held);
    assert_eq!(first.message, "connection refused");
    assert!(!first.client_limit);
    // The 26th session connected at 25/400 s, and failed then.
    assert!((0.05..0.1).contains(&first.t_s), "{}", first.t_s);
    assert!(outcome.total.connects.errors > 15);
}

/// Each session runs the operation kind of its group, 1 ms long, and
/// says where it stands.
#[derive(Default)]
struct Grouped {
    opened: std::sync::Mutex<Vec<(usize, usize, usize)>>,
}

impl Script<()> for Grouped {
    type Session = usize;

    fn ops(&self) -> &[OpSpec] {
        &[
            OpSpec {
                name: "bulk",
                category: Category::Write,
            },
            OpSpec {
                name: "query",
                category: Category::Read,
            },
        ]
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut (), s: SessionInfo) -> Result<usize, DriverError> {
        self.opened
            .lock()
            .unwrap()
            .push((s.group, s.index, s.count));
        Ok(s.group)
    }

    async fn event(
        &self,
        _conn: &mut (),
        group: &mut usize,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        ctx.op(*group, async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok(())
        })
        .await
    }
}

#[test]
fn session_groups_run_at_their_own_rates_and_are_counted_apart() {
    let mut spec = spec(2, Some(Duration::from_millis(500)), None);
    spec.groups = Some(crate::SessionGroups {
        first: "bulk",
        others: vec![crate::SessionGroup {
            name: "query",
            sessions: 1,
            rate: Some(crate::RateSpec {
                per_sec: 100.0,
                arrival: crate::Arrival::Uniform,
                tick: None,
            }),
        }],
    });
    let script = Arc::new(Grouped::default());
    let outcome = crate::run(
        Arc::new(Counting::default()),
        Arc::clone(&script),
        &spec,
        &mut Seen::default(),
    );
    let mut opened = script.opened.lock().unwrap().clone();
    opened.sort_unstable();
    assert_eq!(opened, [(0, 0, 2), (0, 1, 2), (1, 0, 1)]);
    let t = &outcome.total;
    let [bulk, query] = &t.groups[..] else {
        panic!("two groups kept apart: {}", t.groups.len())
    };
    // 100/s for half a second, whatever the closed-loop sessions do.
    assert!(
        (45..=51).contains(&query.events),
        "{} queries",
        query.events
    );
    assert_eq!(query.events, t.ops[1].count);
    assert_eq!(bulk.events, t.ops[0].count);
    assert!(
        bulk.events > 4 * query.events,
        "{} bulk events",
        bulk.events
    );
    assert_eq!(bulk.events + query.events, t.events);
    // Only the rate-limited group has a schedule lag.
    assert_eq!(bulk.lag.len(), 0);
    assert_eq!(query.lag.len(), query.events);
}

#[test]
fn start_at_holds_the_clock_until_the_warmup_before_it() {
    let at = std::time::SystemTime::now() + Duration::from_millis(400);
    let mut s = spec(1, Some(Duration::from_millis(100)), None);
    s.warmup = Duration::from_millis(100);
    s.start_at = Some(at);
    let outcome = run(&s, &mut Seen::default());
    // The clock starts a warm-up before `at`, so measurement starts at it.
    let clock = outcome
        .started_at
        .duration_since(at - s.warmup)
        .expect("the clock did not start before --start-at less the warm-up");
    assert!(clock < Duration::from_millis(50), "{clock:?}");
    assert!(outcome.warnings.iter().all(|w| !w.contains("--start-at")));

    // Past already: it starts at once and says how late measurement began.
    s.start_at = Some(std::time::SystemTime::now() - Duration::from_secs(2));
    let outcome = run(&s, &mut Seen::default());
    assert!(
        outcome
            .warnings
            .iter()
            .any(|w| w.starts_with("Measurement began") && w.contains("--start-at")),
        "{:?}",
        outcome.warnings
    );
}
