//! Worker threads. Each runs a current-thread runtime with its sessions and
//! owns one `Stats` they all record into without locks. A flusher task
//! swaps the stats out at every interval boundary and hands them to the
//! collector; merging happens there, off the hot path, and the collector
//! sends the emptied stats back for the next swap.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadcell_core::Driver;
use loadcell_record::Stats;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::{watch, Notify};
use tokio::task::{JoinSet, LocalSet};

use crate::collector::Phase;
use crate::control::Control;
use crate::hold::HeldGauge;
use crate::schedule::Schedule;
use crate::script::{Script, Sinks};
use crate::session::run_session;
use crate::spec::RunSpec;

pub(crate) struct Shared<D, S> {
    pub driver: Arc<D>,
    pub script: Arc<S>,
    pub spec: RunSpec,
    pub schedule: Schedule,
    pub control: Control,
    pub gate: Gate,
    /// Connections held, under `RunSpec::hold`.
    pub held: HeldGauge,
    /// Workers read answers at their ticks, timed by the kernel (see
    /// [`loadcell_core::receipt`]).
    pub defer_reads: bool,
}

/// Holds the sessions until all of them are connected (or have given up),
/// as sysbench starts its clock once its threads are connected; then the
/// collector begins the schedule and opens the gate.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    ready: AtomicUsize,
    ready_changed: Notify,
    open: watch::Sender<bool>,
}

impl Gate {
    /// A session is connected, or will never be.
    pub fn ready(&self) {
        self.ready.fetch_add(1, Ordering::SeqCst);
        self.ready_changed.notify_one();
    }

    /// Resolves once `sessions` have called [`Gate::ready`].
    pub async fn all_ready(&self, sessions: usize) {
        loop {
            let changed = self.ready_changed.notified();
            if self.ready.load(Ordering::SeqCst) >= sessions {
                return;
            }
            changed.await;
        }
    }

    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Resolves once the gate is open.
    pub async fn opened(&self) {
        let mut rx = self.open.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = rx.wait_for(|open| *open).await;
    }
}

impl<D, S> Shared<D, S> {
    /// End of interval `k`, and the phase it belongs to. Warm-up is cut
    /// into intervals ending exactly at its end, so no interval straddles
    /// the phases. `None` once past the deadline.
    pub fn boundary(&self, k: usize) -> Option<(Instant, Phase)> {
        let iv = self.spec.interval;
        let warmup = self.spec.warmup;
        let warmup_intervals = warmup.as_nanos().div_ceil(iv.as_nanos()) as usize;
        if k < warmup_intervals {
            let t = (iv * (k as u32 + 1)).min(warmup);
            return Some((self.schedule.start() + t, Phase::Warmup));
        }
        let j = (k - warmup_intervals) as u32;
        let start = self.schedule.measure_start() + iv * j;
        match self.schedule.deadline() {
            Some(d) if start >= d => None,
            Some(d) => Some(((start + iv).min(d), Phase::Measure)),
            None => Some((start + iv, Phase::Measure)),
        }
    }
}

/// Stats cut from a worker: events claimed in the measurement phase and
/// events claimed during warm-up, kept apart; and what the worker was
/// doing meanwhile.
pub(crate) struct Cut {
    pub measured: Stats,
    pub warmup: Stats,
    /// CPU time this worker thread has used since it started.
    pub cpu: Duration,
    /// Time it has spent ready to run but waiting for a CPU, since it
    /// started (`None` where the kernel does not say).
    pub run_delay: Option<Duration>,
    /// How long all of its sessions were waiting on the server at once,
    /// since the last cut.
    pub all_waiting: Duration,
}

impl Cut {
    /// Swaps the sinks' stats for emptied ones the collector sent back, or
    /// new ones while none have come back yet.
    fn take(sinks: &Sinks, recycled: &mut UnboundedReceiver<Stats>) -> Cut {
        let mut swap = |sink: &RefCell<Stats>| {
            let fresh = recycled
                .try_recv()
                .unwrap_or_else(|_| sink.borrow().empty_like());
            std::mem::replace(&mut *sink.borrow_mut(), fresh)
        };
        Cut {
            measured: swap(&sinks.measured),
            warmup: swap(&sinks.warmup),
            cpu: loadcell_core::clock::thread_cpu(),
            run_delay: loadcell_core::clock::thread_run_delay(),
            all_waiting: sinks.all_waiting.take(Instant::now()),
        }
    }
}

/// What a worker hands to the collector.
pub(crate) enum Report {
    /// Stats for interval `seq`, cut at its boundary.
    Interval { seq: usize, cut: Cut },
    /// The worker's last stats, from the start of interval `seq` to `at`.
    Done { seq: usize, cut: Cut, at: Instant },
}

pub(crate) fn spawn<D, S>(
    shared: Arc<Shared<D, S>>,
    worker: usize,
    tx: UnboundedSender<(usize, Report)>,
    recycled: UnboundedReceiver<Stats>,
) -> std::io::Result<std::thread::JoinHandle<()>>
where
    D: Driver,
    S: Script<D::Conn> + Send + Sync,
{
    std::thread::Builder::new()
        .name(format!("loadcell-worker-{worker}"))
        .spawn(move || {
            loadcell_core::park::enable_on_this_thread();
            if shared.defer_reads {
                loadcell_core::receipt::defer_reads_on_this_thread();
            }
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .on_thread_park(loadcell_core::park::before_wait)
                .build()
                .expect("a current-thread runtime can always be built");
            LocalSet::new().block_on(&runtime, work(shared, worker, tx, recycled));
        })
}

async fn work<D, S>(
    shared: Arc<Shared<D, S>>,
    worker: usize,
    tx: UnboundedSender<(usize, Report)>,
    recycled: UnboundedReceiver<Stats>,
) where
    D: Driver,
    S: Script<D::Conn> + Send + Sync,
{
    // Sessions are dealt round-robin, so worker loads differ by one at most.
    let mine = (worker..shared.spec.sessions()).step_by(shared.spec.workers);
    let sinks = Rc::new(Sinks::new(
        shared.script.ops().len(),
        shared.spec.group_count(),
        mine.len(),
    ));
    let next_seq = Rc::new(Cell::new(0usize));
    let recycled = Rc::new(RefCell::new(recycled));

    let flusher = {
        let (shared, sinks, next_seq, tx, recycled) = (
            Arc::clone(&shared),
            Rc::clone(&sinks),
            Rc::clone(&next_seq),
            tx.clone(),
            Rc::clone(&recycled),
        );
        tokio::task::spawn_local(async move {
            // Intervals count from the schedule's start.
            shared.gate.opened().await;
            while let Some((at, _)) = shared.boundary(next_seq.get()) {
                tokio::time::sleep_until(at.into()).await;
                let seq = next_seq.get();
                let cut = Cut::take(&sinks, &mut recycled.borrow_mut());
                next_seq.set(seq + 1);
                if tx.send((worker, Report::Interval { seq, cut })).is_err() {
                    return;
                }
            }
        })
    };

    // Rate-limited sessions wait on this worker's precise timer.
    let timer = tokio::task::spawn_local(loadcell_core::clock::run_timer());
    let mut sessions = JoinSet::new();
    for index in mine {
        sessions.spawn_local(run_session(Arc::clone(&shared), Rc::clone(&sinks), index));
    }
    let all_done = async { while sessions.join_next().await.is_some() {} };
    let drained = async {
        shared.control.stopped().await;
        tokio::time::sleep(shared.spec.drain_timeout).await;
    };
    tokio::select! {
        _ = all_done => {}
        _ = drained => {}
    }
    // Events still in flight after the drain timeout are abandoned.
    sessions.abort_all();
    flusher.abort();
    timer.abort();
    let at = Instant::now();
    let _ = tx.send((
        worker,
        Report::Done {
            seq: next_seq.get(),
            cut: Cut::take(&sinks, &mut recycled.borrow_mut()),
            at,
        },
    ));
}
