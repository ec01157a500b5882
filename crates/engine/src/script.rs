//! What a workload gives the engine: a script that runs one event (a
//! transaction, or a single request) on a session, timing each operation
//! through [`Ctx`]. The harness does the timing; scripts and drivers don't.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::Instant;

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

/// Which session is opening, out of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionInfo {
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
}

/// When a pipelined batch was sent.
pub struct BatchClock {
    sent: Instant,
}

/// A worker's stats: one sink per phase, so that an event is counted in
/// the phase it was claimed in, however late the interval is cut.
#[derive(Debug)]
pub(crate) struct Sinks {
    pub measured: RefCell<Stats>,
    pub warmup: RefCell<Stats>,
}

impl Sinks {
    pub fn new(op_kinds: usize) -> Sinks {
        Sinks {
            measured: RefCell::new(Stats::new(op_kinds)),
            warmup: RefCell::new(Stats::new(op_kinds)),
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

/// Times operations and records them into the worker's stats.
pub struct Ctx {
    sinks: Rc<Sinks>,
    measured: bool,
}

impl Ctx {
    pub(crate) fn new(sinks: Rc<Sinks>) -> Ctx {
        Ctx {
            sinks,
            measured: true,
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
    pub fn batch_clock(&self) -> BatchClock {
        BatchClock {
            sent: Instant::now(),
        }
    }

    /// Records one reply of a batch started with [`Ctx::batch_clock`].
    #[inline]
    pub fn record_reply(&mut self, clock: &BatchClock, kind: usize, ok: bool) {
        let took = clock.sent.elapsed();
        self.stats().borrow_mut().record_op(kind, took, ok);
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

    /// Runs one operation of kind `kind` (an index into [`Script::ops`]),
    /// recording how long it took and whether it failed.
    #[inline]
    pub async fn op<T>(
        &mut self,
        kind: usize,
        operation: impl Future<Output = Result<T, DriverError>>,
    ) -> Result<T, DriverError> {
        let start = Instant::now();
        let result = operation.await;
        let took = start.elapsed();
        self.stats()
            .borrow_mut()
            .record_op(kind, took, result.is_ok());
        result
    }
}
