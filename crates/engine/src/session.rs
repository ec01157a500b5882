//! One session: a connection and the loop that claims events from the
//! schedule, runs them, and deals with errors by class.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadcell_core::{Driver, DriverError, ErrorClass};
use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::control::StopReason;
use crate::schedule::{wait_for_tick, wait_until, Claim};
use crate::script::{AllWaiting, Ctx, Script, SessionInfo, Sinks};
use crate::shape::Stages;
use crate::shared::Shared;
use crate::spec::Hold;

const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// A distinct, stable seed per session, so runs are reproducible.
pub(crate) fn session_seed(run_seed: u64, session: usize) -> u64 {
    // SplitMix64 finaliser: nearby inputs give unrelated seeds.
    let mut z = run_seed ^ (session as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Session<D: Driver, S: Script<D::Conn>> {
    shared: Arc<Shared<D, S>>,
    ctx: Ctx,
    info: SessionInfo,
    sinks: Rc<Sinks>,
}

/// A session waiting on the server, from the start of an event to its
/// end, or through the reconnection when the connection is lost; however
/// the session stops, it is counted free again.
struct Waiting<'a> {
    on: &'a AllWaiting,
    over: bool,
}

impl<'a> Waiting<'a> {
    #[inline]
    fn start(on: &'a AllWaiting, at: Instant) -> Waiting<'a> {
        on.start(at);
        Waiting { on, over: false }
    }

    #[inline]
    fn end(mut self, at: Instant) {
        self.on.end(at);
        self.over = true;
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.over {
            self.on.end(Instant::now());
        }
    }
}

impl<D, S> Session<D, S>
where
    D: Driver,
    S: Script<D::Conn> + Send + Sync,
{
    /// Connects outside an event, [`crate::shared::OPENING_AT_ONCE`] at a time, then
    /// opens the script's session.
    async fn open(&self) -> Result<(D::Conn, S::Session), DriverError> {
        let shared = &self.shared;
        let conn = {
            // Never closed, so acquiring cannot fail.
            let _turn = shared.opening.acquire().await;
            crate::connect_with_timeout(&*shared.driver, shared.spec.connect_timeout).await?
        };
        self.start(conn).await
    }

    /// Opens a connection inside an event, under a policy that churns
    /// them, the connect timed as the operation kind `connect`. The connect
    /// is part of the event and of its latency, as a user of a client
    /// without keep-alive waits for it before every request: the cost of
    /// new connections is what such a run measures.
    async fn open_in_event(&mut self) -> Result<(D::Conn, S::Session), DriverError> {
        let shared = &self.shared;
        let connecting = crate::connect_with_timeout(&*shared.driver, shared.spec.connect_timeout);
        let conn = self.ctx.connect(connecting).await?;
        self.start(conn).await
    }

    /// The script's session on a new connection.
    async fn start(&self, mut conn: D::Conn) -> Result<(D::Conn, S::Session), DriverError> {
        let session = self.shared.script.open(&mut conn, self.info).await?;
        Ok((conn, session))
    }

    /// Lets the script end the session on the connection it holds, if
    /// any, before the connection closes.
    async fn close(&self, opened: Option<(D::Conn, S::Session)>) {
        if let Some((mut conn, mut session)) = opened {
            self.shared.script.close(&mut conn, &mut session).await;
        }
    }

    /// Runs an event on a connection opened for it (see
    /// [`Session::open_in_event`]), keeping the connection in `opened`.
    async fn open_and_run(
        &mut self,
        opened: &mut Option<(D::Conn, S::Session)>,
    ) -> Result<(), DriverError> {
        let (conn, session) = opened.insert(self.open_in_event().await?);
        self.shared.script.event(conn, session, &mut self.ctx).await
    }

    fn note_error(&self, e: &DriverError) {
        self.ctx
            .stats()
            .borrow_mut()
            .sample_error(e.class.as_str(), &e.to_string());
    }

    /// Connects (again), backing off between tries. `None` means the run
    /// is stopping: stopped by someone else, a fatal error, or the server
    /// stayed away longer than the reconnect timeout.
    async fn connect(&self, first: bool) -> Option<(D::Conn, S::Session)> {
        let shared = &self.shared;
        let lost_at = Instant::now();
        let mut backoff = FIRST_BACKOFF;
        loop {
            if shared.control.is_stopped() {
                return None;
            }
            match self.open().await {
                Ok(opened) => {
                    if !first {
                        self.ctx.stats().borrow_mut().reconnects += 1;
                    }
                    return Some(opened);
                }
                Err(e) if e.class == ErrorClass::Fatal => {
                    self.note_error(&e);
                    shared
                        .control
                        .stop(StopReason::FatalError, Some(e.to_string()));
                    return None;
                }
                Err(e) => {
                    if lost_at.elapsed() >= shared.spec.reconnect_timeout {
                        self.note_error(&e);
                        shared.control.stop(
                            StopReason::ServerUnreachable,
                            Some(format!(
                                "could not (re)connect to {} for {}: {e}",
                                shared.driver.endpoint(),
                                humantime::format_duration(shared.spec.reconnect_timeout)
                            )),
                        );
                        return None;
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// A session under [`RunSpec::hold`](crate::RunSpec::hold): connects
    /// at its turn in the ramp (timed as `connect`), then runs one event
    /// every `hold.every` on the connection it holds, each given
    /// `hold.timeout`. A failed event (a connect or a keep-alive request
    /// refused, reset or timed out) is what such a run looks for, not a
    /// reason to stop: it is counted, the connection is dropped, and the
    /// next turn connects again.
    async fn run_held(mut self, hold: Hold) {
        let shared = Arc::clone(&self.shared);
        let mut rng = SmallRng::seed_from_u64(self.info.seed);
        shared.gate.ready();
        shared.gate.opened().await;
        let mut due = shared.schedule.start() + hold.connect_after(self.info.index);
        let mut opened: Option<(D::Conn, S::Session)> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                _ = shared.control.stopped() => return,
            }
            let started = Instant::now();
            if matches!(
                shared.schedule.claim(self.info.group, started, &mut rng),
                Claim::Stop
            ) {
                shared.control.stop(StopReason::Completed, None);
                return;
            }
            let schedule = &shared.schedule;
            self.ctx
                .set_measured(schedule.is_measured(schedule.counts_at(started, None)));
            let fresh = opened.is_none();
            let result = async {
                if opened.is_none() {
                    opened = Some(self.open_in_event().await?);
                }
                let (conn, session) = opened.as_mut().expect("opened just above");
                let event = shared.script.event(conn, session, &mut self.ctx);
                match tokio::time::timeout(hold.timeout, event).await {
                    Ok(result) => result,
                    Err(_) => Err(DriverError::connection(format!(
                        "no answer from {} within {} (timed out)",
                        shared.driver.endpoint(),
                        humantime::format_duration(hold.timeout)
                    ))),
                }
            }
            .await;
            self.ctx.record_held();
            let end = Instant::now();
            match result {
                Ok(()) => {
                    let took = end - started;
                    self.ctx.stats().borrow_mut().record_event(took, took, None);
                    // Once the run has stopped, sessions leave and close
                    // what they held: the target then answers connections
                    // it had kept waiting, which were never held in the run.
                    if fresh && !shared.control.is_stopped() {
                        shared.held.gained();
                    }
                }
                Err(e) => {
                    self.note_error(&e);
                    self.ctx.stats().borrow_mut().failed_events += 1;
                    // When the failed attempt began: a timeout is only
                    // known `hold.timeout` later.
                    shared.held.failed(started, &e);
                    if e.class == ErrorClass::Fatal {
                        shared
                            .control
                            .stop(StopReason::FatalError, Some(e.to_string()));
                        return;
                    }
                    if !fresh {
                        shared.held.lost();
                    }
                    opened = None;
                }
            }
            due = (due + hold.every).max(end);
        }
    }

    /// Under `--session-stages`: whether the shape has this session running
    /// at `now` (see [`RunSpec::wake_rank`](crate::RunSpec::wake_rank)).
    #[inline]
    fn runs_now(&self, stages: &Stages, rank: usize, now: Instant) -> bool {
        stages.active_sessions(self.since_measure(now)) > rank
    }

    fn since_measure(&self, at: Instant) -> f64 {
        crate::shared::since_measure(self.shared.schedule.measure_start(), at)
    }

    /// Waits, connected, until the shape has this session running again:
    /// until the run's deadline when it never does (the run then stops at
    /// the deadline even if no session is running), or until the run
    /// stops.
    async fn park(&self, stages: &Stages, rank: usize, now: Instant) {
        let schedule = &self.shared.schedule;
        let wake = match stages.first_time_with(rank + 1, self.since_measure(now)) {
            Some(at) => Some(schedule.measure_start() + Duration::from_secs_f64(at.max(0.0))),
            None => schedule.deadline(),
        };
        let until_wake = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = until_wake => {}
            _ = self.shared.control.stopped() => {}
        }
    }

    async fn run(mut self) {
        let shared = Arc::clone(&self.shared);
        if let Some(hold) = shared.spec.hold {
            return self.run_held(hold).await;
        }
        // Held apart from `self`, which connecting inside an event borrows.
        let sinks = Rc::clone(&self.sinks);
        let mut rng = SmallRng::seed_from_u64(self.info.seed);
        // How many events a connection serves (`None`: as many as it
        // lasts), and how many the current one has served.
        let churn = shared.spec.connection_policy.events_per_connection();
        let mut served = 0;
        // Each group's events are also kept apart, in a run of several.
        let grouped = shared.spec.group_count() > 1;
        let ticked = shared.schedule.is_ticked(self.info.group);
        // A session that churns connections makes even its first one in
        // an event, measured like the others.
        let opened = match churn {
            None => self.connect(true).await.map(Some),
            Some(_) => Some(None),
        };
        shared.gate.ready();
        let Some(mut opened) = opened else {
            return;
        };
        shared.gate.opened().await;
        let shaped = shared
            .spec
            .session_stages()
            .filter(|_| self.info.group == 0)
            .map(|stages| (stages, shared.spec.wake_rank(self.info.index)));
        loop {
            // Drivers whose calls never wait (SQLite) would otherwise keep
            // the worker's flusher and other sessions from running.
            tokio::task::coop::consume_budget().await;
            if shared.control.is_stopped() {
                return self.close(opened).await;
            }
            let now = Instant::now();
            if let Some((stages, rank)) = shaped {
                if !self.runs_now(stages, rank, now) {
                    self.park(stages, rank, now).await;
                    continue;
                }
            }
            let due = match shared.schedule.claim(self.info.group, now, &mut rng) {
                Claim::Stop => {
                    // The deadline or the event limit: whatever is still
                    // in flight elsewhere gets the drain timeout.
                    shared.control.stop(StopReason::Completed, None);
                    return self.close(opened).await;
                }
                Claim::Now => None,
                Claim::Due(due) => Some(due),
            };
            let schedule = &shared.schedule;
            self.ctx
                .set_measured(schedule.is_measured(schedule.counts_at(now, due)));
            let started = match due {
                // Closed loop: the event starts now; no second clock reading.
                None => now,
                Some(due) => {
                    if ticked {
                        wait_for_tick(due).await;
                    } else {
                        wait_until(due).await;
                    }
                    Instant::now()
                }
            };
            let waiting = Waiting::start(&sinks.all_waiting, started);
            loop {
                let result = match &mut opened {
                    Some((conn, session)) => {
                        shared.script.event(conn, session, &mut self.ctx).await
                    }
                    None => self.open_and_run(&mut opened).await,
                };
                self.ctx.record_held();
                let e = match result {
                    Ok(()) => {
                        let end = loadcell_core::receipt::answered_or_now(started);
                        let (response, service) = (end - due.unwrap_or(started), end - started);
                        let lag = due.map(|d| started.saturating_duration_since(d));
                        let mut stats = self.ctx.stats().borrow_mut();
                        stats.record_event(response, service, lag);
                        if grouped {
                            stats.record_group_event(self.info.group, response, service, lag);
                        }
                        drop(stats);
                        waiting.end(end);
                        if let Some(limit) = churn {
                            served += 1;
                            if served == limit {
                                // Closed now, as a client without
                                // keep-alive closes after its request.
                                opened = None;
                                served = 0;
                            }
                        }
                        break;
                    }
                    Err(e) => e,
                };
                self.note_error(&e);
                match e.class {
                    ErrorClass::Retryable => {
                        self.ctx.stats().borrow_mut().retries += 1;
                        let recovered = match &mut opened {
                            Some((conn, session)) => shared.script.recover(conn, session).await,
                            // The script's open failed: the retry opens again.
                            None => Ok(()),
                        };
                        if shared.control.is_stopped() {
                            return;
                        }
                        match recovered {
                            Ok(()) => continue,
                            Err(e) if e.class == ErrorClass::Fatal => {
                                shared
                                    .control
                                    .stop(StopReason::FatalError, Some(e.to_string()));
                                return;
                            }
                            Err(_) => {}
                        }
                    }
                    ErrorClass::Connection => {}
                    ErrorClass::Fatal => {
                        shared
                            .control
                            .stop(StopReason::FatalError, Some(e.to_string()));
                        return;
                    }
                }
                // The connection is gone: the event is lost; reconnect
                // (still waiting on the server).
                self.ctx.stats().borrow_mut().failed_events += 1;
                // (A churning session's connect that failed is made again
                // here too, with the back-off, and serves a full turn.)
                match self.connect(false).await {
                    Some(reopened) => {
                        opened = Some(reopened);
                        served = 0;
                    }
                    None => return,
                }
                break;
            }
        }
    }
}

pub(crate) async fn run_session<D, S>(shared: Arc<Shared<D, S>>, sinks: Rc<Sinks>, index: usize)
where
    D: Driver,
    S: Script<D::Conn> + Send + Sync,
{
    let place = shared.spec.place(index);
    let info = SessionInfo {
        group: place.group,
        index: place.index,
        count: place.count,
        seed: session_seed(shared.spec.seed, shared.spec.ordinal(place)),
        run_seed: shared.spec.seed,
    };
    Session {
        shared,
        ctx: Ctx::new(Rc::clone(&sinks)),
        info,
        sinks,
    }
    .run()
    .await
}

#[cfg(test)]
mod tests {
    use super::session_seed;

    #[test]
    fn session_seeds_are_distinct_and_stable() {
        let seeds: std::collections::HashSet<u64> =
            (0..1000).map(|i| session_seed(42, i)).collect();
        assert_eq!(seeds.len(), 1000);
        assert_eq!(session_seed(42, 3), session_seed(42, 3));
        assert_ne!(session_seed(42, 3), session_seed(43, 3));
    }
}
