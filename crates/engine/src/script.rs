//! What a workload gives the engine: a script that runs one event (a
//! transaction, or a single request) on a session, timing each operation
//! through [`Ctx`]. The harness does the timing; scripts and drivers don't.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};

use loadcell_core::DriverError;
use loadcell_record::Stats;

/// How an operation counts in summaries (sysbench's read/write/other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    Read,
    Write,
    Other,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Read => "read",
            Category::Write => "write",
            Category::Other => "other",
        }
    }
}

/// One kind of operation a script performs, e.g. `point_select`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpSpec {
    pub name: &'static str,
    pub category: Category,
}

/// Which session is opening, out of how many: in a run of several
/// session groups, its index and count are among its group's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionInfo {
    /// Its session group (`RunSpec::groups`): 0 in a run of one.
    pub group: usize,
    pub index: usize,
    pub count: usize,
    /// Distinct per session and stable across runs with the same seed.
    pub seed: u64,
    /// The run's seed, the same for every session.
    pub run_seed: u64,
}

/// A workload's unit of work on connections of type `C`.
pub trait Script<C>: 'static {
    /// Per-session state: prepared statements, random generators, buffers.
    type Session: 'static;

    /// The operation kinds this script records, indexed by position.
    fn ops(&self) -> &[OpSpec];

    /// Whether an event is a transaction (so TPS is reported).
    fn transactional(&self) -> bool;

    /// Sets up a session on a fresh connection; called again after every
    /// reconnect.
    async fn open(&self, conn: &mut C, session: SessionInfo) -> Result<Self::Session, DriverError>;

    /// Runs one event, timing each operation through `ctx`.
    async fn event(
        &self,
        conn: &mut C,
        session: &mut Self::Session,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError>;

    /// Returns the connection to a clean state after a retryable error
    /// (for SQL: roll back the open transaction).
    async fn recover(
        &self,
        _conn: &mut C,
        _session: &mut Self::Session,
    ) -> Result<(), DriverError> {
        Ok(())
    }

    /// Ends a session when the run is over, on its connection still
    /// usable, before the connection closes: for a stream consumer, what
    /// the server must hear before it (see `StreamConn::leave`). Not
    /// called after a failure, nor for a session cut off by the drain
    /// timeout; its failure is the session's last word, not the run's.
    async fn close(&self, _conn: &mut C, _session: &mut Self::Session) {}
}

/// When a pipelined batch was sent.
pub struct BatchClock {
    sent: Instant,
}

/// Replies timed but not yet in the histograms: those of the socket read
/// being processed, which all share one latency. Held per operation kind,
/// so that a read bringing N replies costs one clock reading and one
/// histogram step per kind instead of N of each.
#[derive(Debug)]
struct HeldReplies {
    /// `ReplyAt::read` of the replies held; `None` when nothing is held.
    read: Option<u32>,
    took: Duration,
    /// `(count, errors)` per operation kind.
    per_kind: Vec<(u64, u64)>,
}

/// A worker's stats: one sink per phase, so that an event is counted in
/// the phase it was claimed in, however late the interval is cut; and how
/// long all of the worker's sessions were waiting on the server.
#[derive(Debug)]
pub(crate) struct Sinks {
    pub measured: RefCell<Stats>,
    pub warmup: RefCell<Stats>,
    pub all_waiting: AllWaiting,
}

impl Sinks {
    /// Stats for `op_kinds` operation kinds and `groups` session groups,
    /// on a worker with `sessions`.
    pub fn new(op_kinds: usize, groups: usize, sessions: usize) -> Sinks {
        Sinks {
            measured: RefCell::new(Stats::with_groups(op_kinds, groups)),
            warmup: RefCell::new(Stats::with_groups(op_kinds, groups)),
            all_waiting: AllWaiting::new(sessions),
        }
    }

    pub fn for_phase(&self, measured: bool) -> &RefCell<Stats> {
        if measured {
            &self.measured
        } else {
            &self.warmup
        }
    }
}

/// The error class of an operation that found no record (see
/// [`Ctx::not_found`]), beside the driver's classes.
pub const NOT_FOUND: &str = "not found";

/// How long every session of a worker was waiting on the server at once:
/// each with an event in flight (sent, its answer not yet read), or its
/// connection lost and being made again. A session that is free claims an
/// overdue event at once, so events that start late while all sessions
/// wait were held back by the server, not by the client. Worker-local:
/// two counters and a clock reading the session already has, per event.
#[derive(Debug)]
pub(crate) struct AllWaiting {
    sessions: usize,
    waiting: Cell<usize>,
    /// Since when all sessions have been waiting (`None` while one is free).
    since: Cell<Option<Instant>>,
    /// All-waiting time not yet taken by [`AllWaiting::take`].
    total: Cell<Duration>,
}

impl AllWaiting {
    pub fn new(sessions: usize) -> AllWaiting {
        AllWaiting {
            sessions,
            waiting: Cell::new(0),
            since: Cell::new(None),
            total: Cell::new(Duration::ZERO),
        }
    }

    /// A session starts waiting on the server at `at`.
    #[inline]
    pub fn start(&self, at: Instant) {
        let n = self.waiting.get() + 1;
        self.waiting.set(n);
        if n == self.sessions {
            self.since.set(Some(at));
        }
    }

    /// A session that was waiting is free again at `at`.
    #[inline]
    pub fn end(&self, at: Instant) {
        if let Some(since) = self.since.take() {
            self.total
                .set(self.total.get() + at.saturating_duration_since(since));
        }
        self.waiting.set(self.waiting.get().saturating_sub(1));
    }

    /// The all-waiting time up to `now` since the last call.
    pub fn take(&self, now: Instant) -> Duration {
        if let Some(since) = self.since.get() {
            self.total
                .set(self.total.get() + now.saturating_duration_since(since));
            self.since.set(Some(now.max(since)));
        }
        self.total.replace(Duration::ZERO)
    }
}

/// Times operations and records them into the worker's stats.
pub struct Ctx {
    sinks: Rc<Sinks>,
    measured: bool,
    held: HeldReplies,
}

impl Ctx {
    pub(crate) fn new(sinks: Rc<Sinks>) -> Ctx {
        let op_kinds = sinks.measured.borrow().ops.len();
        Ctx {
            sinks,
            measured: true,
            held: HeldReplies {
                read: None,
                took: Duration::ZERO,
                per_kind: vec![(0, 0); op_kinds],
            },
        }
    }

    /// Which phase the current event belongs to.
    pub(crate) fn set_measured(&mut self, measured: bool) {
        self.measured = measured;
    }

    pub(crate) fn stats(&self) -> &RefCell<Stats> {
        self.sinks.for_phase(self.measured)
    }

    /// Starts timing a pipelined batch: each reply's latency counts from
    /// this moment, when the batch is sent.
    #[inline]
    pub fn batch_clock(&mut self) -> BatchClock {
        self.record_held();
        BatchClock {
            sent: Instant::now(),
        }
    }

    /// Records one reply of a batch started with [`Ctx::batch_clock`]. Its
    /// latency runs to the end of the socket read that brought it in
    /// (`read`, from [`ReplyAt`](loadcell_core::kv::ReplyAt)); replies of
    /// that read share one clock reading. They are held until the next
    /// read, the next batch or the end of the event.
    #[inline]
    pub fn record_reply(&mut self, clock: &BatchClock, read: u32, kind: usize, ok: bool) {
        if self.held.read != Some(read) {
            self.record_held();
            self.held.read = Some(read);
            self.held.took = clock.sent.elapsed();
        }
        let (count, errors) = &mut self.held.per_kind[kind];
        *count += 1;
        *errors += u64::from(!ok);
    }

    /// Puts the held replies into the histograms.
    #[inline]
    pub(crate) fn record_held(&mut self) {
        if self.held.read.take().is_none() {
            return;
        }
        let mut stats = self.sinks.for_phase(self.measured).borrow_mut();
        for (kind, held) in self.held.per_kind.iter_mut().enumerate() {
            if held.0 > 0 {
                stats.record_ops(kind, self.held.took, held.0, held.1);
                *held = (0, 0);
            }
        }
    }

    /// Counts a read that found (or did not find) its key.
    #[inline]
    pub fn count_read(&mut self, hit: bool) {
        let mut stats = self.stats().borrow_mut();
        if hit {
            stats.hits += 1;
        } else {
            stats.misses += 1;
        }
    }

    /// Records that the operation of kind `kind` just timed by [`Ctx::op`]
    /// found no record to act on (YCSB's NOT_FOUND): one error of that
    /// kind, sampled under the class [`NOT_FOUND`] with `message`. The
    /// event goes on: there is nothing to retry, and the connection is fine.
    pub fn not_found(&mut self, kind: usize, message: &str) {
        self.failed(kind, NOT_FOUND, message);
    }

    /// Records that the operation of kind `kind` just timed by [`Ctx::op`]
    /// completed with an answer the workload counts as a failure (an HTTP
    /// status it did not expect): one error of that kind, sampled under
    /// `class` with `message`. The event goes on, as after
    /// [`Ctx::not_found`].
    pub fn failed(&mut self, kind: usize, class: &str, message: &str) {
        let mut stats = self.stats().borrow_mut();
        stats.ops[kind].errors += 1;
        stats.sample_error(class, message);
    }

    /// Adds `n` to the run's counter `name` (an HTTP status class): kept
    /// per interval and in the summary, for counts that are neither
    /// operations nor errors.
    #[inline]
    pub fn count(&mut self, name: &str, n: u64) {
        self.stats().borrow_mut().count(name, n);
    }

    /// Sets the level `name` (a stream group's lag) for this interval: the
    /// interval keeps the highest set, and its result the name and level
    /// (`intervals[].gauges`). For levels sampled now and then, not per
    /// operation.
    pub fn gauge(&mut self, name: &str, value: u64) {
        self.stats().borrow_mut().gauge(name, value);
    }

    /// Counts `n` items (documents indexed, points written, rows polled)
    /// carried by the operation of kind `kind` just timed by [`Ctx::op`].
    /// Called after the operation, so a poll can count what it brought
    /// back; a plain add into the worker's stats, so scripts whose
    /// operations carry nothing never pay for it.
    #[inline]
    pub fn items(&mut self, kind: usize, n: u64) {
        self.stats().borrow_mut().add_items(kind, n);
    }

    /// Runs one operation of kind `kind` (an index into [`Script::ops`]),
    /// recording how long it took and whether it failed.
    #[inline]
    pub async fn op<T>(
        &mut self,
        kind: usize,
        operation: impl Future<Output = Result<T, DriverError>>,
    ) -> Result<T, DriverError> {
        self.timed(operation, |stats, took, ok| stats.record_op(kind, took, ok))
            .await
    }

    /// Records one operation of kind `kind` that was timed elsewhere (by
    /// the driver: a TLS handshake inside a connect), as [`Ctx::op`] would.
    #[inline]
    pub fn record(&mut self, kind: usize, took: Duration, ok: bool) {
        self.stats().borrow_mut().record_op(kind, took, ok);
    }

    /// Connects inside an event, recording how long it took and whether
    /// it failed as the operation kind `connect`.
    pub(crate) async fn connect<C>(
        &mut self,
        connecting: impl Future<Output = Result<C, DriverError>>,
    ) -> Result<C, DriverError> {
        self.timed(connecting, Stats::record_connect).await
    }

    #[inline]
    async fn timed<T>(
        &mut self,
        operation: impl Future<Output = Result<T, DriverError>>,
        record: impl FnOnce(&mut Stats, Duration, bool),
    ) -> Result<T, DriverError> {
        let start = Instant::now();
        let result = operation.await;
        let took = loadcell_core::receipt::answered_or_now(start) - start;
        record(&mut self.stats().borrow_mut(), took, result.is_ok());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(op_kinds: usize) -> Ctx {
        Ctx::new(Rc::new(Sinks::new(op_kinds, 1, 1)))
    }

    #[test]
    fn replies_of_one_read_share_one_latency_and_reach_the_histograms() {
        let mut ctx = ctx(2);
        let clock = ctx.batch_clock();
        ctx.record_reply(&clock, 7, 0, true);
        ctx.record_reply(&clock, 7, 1, true);
        ctx.record_reply(&clock, 7, 0, false);
        // Held until the read changes: nothing recorded yet.
        assert_eq!(ctx.stats().borrow().ops_total(), 0);
        std::thread::sleep(Duration::from_millis(3));
        ctx.record_reply(&clock, 8, 0, true);
        ctx.record_held();

        let stats = ctx.stats().borrow();
        let (get, set) = (&stats.ops[0], &stats.ops[1]);
        assert_eq!((get.count, get.errors), (3, 1));
        assert_eq!((set.count, set.errors), (1, 0));
        assert_eq!(get.latency.len(), 3);
        // Read 7's two replies at one early latency, read 8's one after 3 ms.
        assert!(get.latency.max() >= 3000);
        assert_eq!(get.latency.count_between(0, 2999), 2);
        assert_eq!(set.latency.max(), set.latency.min());
    }

    #[test]
    fn a_new_batch_records_what_the_last_one_held() {
        let mut ctx = ctx(1);
        let clock = ctx.batch_clock();
        ctx.record_reply(&clock, 0, 0, true);
        let clock = ctx.batch_clock();
        assert_eq!(ctx.stats().borrow().ops[0].count, 1);
        // The new batch's read 0 is timed afresh, not taken for the old one.
        ctx.record_reply(&clock, 0, 0, true);
        ctx.record_held();
        assert_eq!(ctx.stats().borrow().ops[0].count, 2);
        // Nothing held: recording again changes nothing.
        ctx.record_held();
        assert_eq!(ctx.stats().borrow().ops[0].count, 2);
    }

    #[test]
    fn an_operation_that_found_nothing_is_a_failed_one() {
        let mut ctx = ctx(2);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for _ in 0..3 {
            rt.block_on(ctx.op(1, async { Ok(()) })).unwrap();
        }
        ctx.not_found(1, "read: no such record");
        ctx.not_found(1, "read: no such record");
        let stats = ctx.stats().borrow();
        assert_eq!((stats.ops[1].count, stats.ops[1].errors), (3, 2));
        assert_eq!(stats.op_errors_total(), 2);
        let sample = &stats.error_samples[0];
        assert_eq!(
            (sample.class.as_str(), sample.message.as_str(), sample.count),
            ("not found", "read: no such record", 2)
        );
    }

    #[test]
    fn a_duration_measured_elsewhere_is_recorded_as_its_kind() {
        let mut ctx = ctx(2);
        ctx.record(1, Duration::from_millis(4), true);
        ctx.record(1, Duration::from_millis(6), false);
        let stats = ctx.stats().borrow();
        let op = &stats.ops[1];
        assert_eq!((op.count, op.errors, stats.ops[0].count), (2, 1, 0));
        assert!(op.latency.min() >= 3900 && op.latency.max() <= 6100);
    }

    #[test]
    fn items_are_counted_per_kind_in_the_phase_of_their_event() {
        let mut ctx = ctx(2);
        ctx.items(1, 500);
        ctx.items(1, 20);
        ctx.set_measured(false);
        ctx.items(1, 7);
        let (measured, warmup) = (ctx.sinks.measured.borrow(), ctx.sinks.warmup.borrow());
        assert_eq!((measured.ops[0].items, measured.ops[1].items), (0, 520));
        assert_eq!(warmup.ops[1].items, 7);
    }

    #[test]
    fn named_counts_go_to_the_phase_of_their_event() {
        let mut ctx = ctx(1);
        ctx.count("2xx", 1);
        ctx.set_measured(false);
        ctx.count("2xx", 1);
        ctx.count("5xx", 1);
        let (measured, warmup) = (ctx.sinks.measured.borrow(), ctx.sinks.warmup.borrow());
        assert_eq!(measured.counters_map().unwrap().len(), 1);
        assert_eq!(warmup.counters_map().unwrap().get("5xx"), Some(&1));
    }

    #[test]
    fn all_waiting_counts_only_while_every_session_waits() {
        let w = AllWaiting::new(2);
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        w.start(ms(0));
        w.end(ms(10));
        assert_eq!(w.take(ms(10)), Duration::ZERO, "one of two never is all");
        w.start(ms(20));
        w.start(ms(30)); // both wait from 30...
        w.end(ms(80)); // ...to 80
        w.start(ms(90)); // both again, still at the cut
        assert_eq!(w.take(ms(100)), Duration::from_millis(60));
        w.end(ms(130));
        assert_eq!(
            w.take(ms(200)),
            Duration::from_millis(30),
            "split at the cut"
        );
        w.end(ms(210));
        assert_eq!(w.take(ms(300)), Duration::ZERO);
    }

    #[test]
    fn held_replies_go_to_the_phase_of_their_event() {
        let mut ctx = ctx(1);
        ctx.set_measured(false);
        let clock = ctx.batch_clock();
        ctx.record_reply(&clock, 0, 0, true);
        ctx.record_held();
        assert_eq!(ctx.sinks.warmup.borrow().ops[0].count, 1);
        assert_eq!(ctx.sinks.measured.borrow().ops[0].count, 0);
    }
}
