//! Worker threads. Each runs a current-thread runtime with its sessions and
//! owns one `Stats` they all record into without locks. A flusher task
//! swaps the stats out at every interval boundary and hands them to the
//! collector; merging happens there, off the hot path, and the collector
//! sends the emptied stats back for the next swap.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadcell_core::Driver;
use loadcell_record::Stats;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::{JoinSet, LocalSet};

use crate::script::{Script, Sinks};
use crate::session::run_session;
use crate::shared::Shared;

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
