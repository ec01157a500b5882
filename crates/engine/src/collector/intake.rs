//! What the workers hand in, gathered per interval ([`Intake`]): each
//! worker cuts its stats at every interval boundary and sends them; an
//! interval is complete once every worker still running has sent its cut
//! of it (or a later one). Emptied stats go back to the workers for their
//! next swap, and the collector's own spares are kept for the next
//! intervals, so that a steady run allocates no stats after its first
//! intervals.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use loadcell_record::Stats;
use tokio::sync::mpsc::UnboundedSender;

use crate::worker::Report;

/// Emptied stats kept for reuse, per worker and for the collector's
/// pending intervals: two intervals' worth. Stats made while the collector
/// fell behind (a stall) are dropped once it catches up, rather than kept
/// for good: memory follows the worst moment otherwise, and a long run
/// meets worse moments the longer it lasts.
const RECYCLED: usize = 4;

/// One interval's cuts, as they arrive.
pub(super) struct Pending {
    pub measured: Stats,
    pub warmup: Stats,
    /// Cumulative CPU per worker, as of this interval's cut.
    pub cpu: Vec<Option<Duration>>,
    /// Cumulative run-queue delay per worker, as of this interval's cut.
    pub run_delay: Vec<Option<Duration>>,
    /// Per worker, how long all its sessions were waiting on the server.
    pub all_waiting: Vec<Duration>,
    /// Latest `Done` instant among workers that finished in this interval.
    pub done_at: Option<Instant>,
    /// Whether some worker's stats for this interval run to its boundary
    /// (it was cut there rather than finishing inside it).
    pub to_boundary: bool,
}

impl Pending {
    #[cfg(test)]
    pub(super) fn new(like: &Stats, workers: usize) -> Pending {
        Pending::with(like.empty_like(), like.empty_like(), workers)
    }

    fn with(measured: Stats, warmup: Stats, workers: usize) -> Pending {
        Pending {
            measured,
            warmup,
            cpu: vec![None; workers],
            run_delay: vec![None; workers],
            all_waiting: vec![Duration::ZERO; workers],
            done_at: None,
            to_boundary: false,
        }
    }

    /// Where the interval ends: at its boundary if any worker ran to it,
    /// else when the last one finished. `boundary` is the schedule's end of
    /// this interval (`None` past the deadline); `last_end` the previous
    /// interval's end.
    pub(super) fn end(&self, boundary: Option<Instant>, last_end: Instant) -> Instant {
        match (self.done_at, boundary) {
            (_, Some(b)) if self.to_boundary => b,
            (Some(done), Some(b)) => done.min(b),
            (Some(done), None) => done,
            (None, Some(b)) => b,
            (None, None) => last_end,
        }
    }
}

/// Gathers the workers' reports into intervals and hands them out in
/// order, complete.
pub(super) struct Intake {
    pending: BTreeMap<usize, Pending>,
    /// Per worker: the next interval it has not reported, or `None` once done.
    next_of: Vec<Option<usize>>,
    /// The next interval to hand out.
    emitted: usize,
    /// Emptied stats for the next intervals' `Pending`s.
    spare: Vec<Stats>,
    /// Per worker: where its stats go back once merged and emptied.
    give_back: Vec<UnboundedSender<Stats>>,
    /// Per worker: emptied stats sent back and not yet taken by its cuts.
    waiting_at: Vec<usize>,
    /// An empty stats of the run's shape, for new `Pending`s.
    like: Stats,
    /// The latest instant a worker finished at.
    pub last_done: Option<Instant>,
}

impl Intake {
    pub(super) fn new(give_back: Vec<UnboundedSender<Stats>>, like: &Stats) -> Intake {
        let workers = give_back.len();
        Intake {
            pending: BTreeMap::new(),
            next_of: vec![Some(0); workers],
            emitted: 0,
            spare: Vec::new(),
            give_back,
            waiting_at: vec![0; workers],
            like: like.empty_like(),
            last_done: None,
        }
    }

    /// Takes worker `w`'s report into its interval.
    pub(super) fn take(&mut self, w: usize, report: Report) {
        let (seq, cut, done_at) = match report {
            Report::Interval { seq, cut } => {
                self.next_of[w] = Some(seq + 1);
                (seq, cut, None)
            }
            Report::Done { seq, cut, at } => {
                self.next_of[w] = None;
                self.last_done = Some(self.last_done.map_or(at, |d| d.max(at)));
                (seq, cut, Some(at))
            }
        };
        let workers = self.next_of.len();
        let (spare, like) = (&mut self.spare, &self.like);
        let p = self.pending.entry(seq).or_insert_with(|| {
            let mut fresh = || spare.pop().unwrap_or_else(|| like.empty_like());
            Pending::with(fresh(), fresh(), workers)
        });
        p.to_boundary |= done_at.is_none();
        p.cpu[w] = Some(cut.cpu);
        p.run_delay[w] = cut.run_delay;
        p.all_waiting[w] += cut.all_waiting;
        p.measured.merge(&cut.measured);
        p.warmup.merge(&cut.warmup);
        if let Some(at) = done_at {
            p.done_at = Some(p.done_at.map_or(at, |d| d.max(at)));
        }
        // The cut took up to two of those sent back.
        self.waiting_at[w] = self.waiting_at[w].saturating_sub(2);
        // A worker that has finished no longer takes any.
        if done_at.is_none() {
            for mut stats in [cut.measured, cut.warmup] {
                if self.waiting_at[w] < RECYCLED {
                    stats.reset();
                    let _ = self.give_back[w].send(stats);
                    self.waiting_at[w] += 1;
                }
            }
        }
    }

    /// The next interval, with its number, once every worker has handed it
    /// in; in order.
    pub(super) fn next_complete(&mut self) -> Option<(usize, Pending)> {
        let seq = self.emitted;
        let complete = self.next_of.iter().all(|n| n.is_none_or(|n| n > seq));
        if !complete {
            return None;
        }
        let p = self.pending.remove(&seq)?;
        self.emitted += 1;
        Some((seq, p))
    }

    /// Keeps an emitted interval's stats for the next ones.
    pub(super) fn recycle(&mut self, p: Pending) {
        for mut stats in [p.measured, p.warmup] {
            if self.spare.len() < RECYCLED {
                stats.reset();
                self.spare.push(stats);
            }
        }
    }

    /// Every worker has sent its last report.
    pub(super) fn workers_done(&self) -> bool {
        self.next_of.iter().all(Option::is_none)
    }

    /// Every worker is done and every interval handed out.
    pub(super) fn is_drained(&self) -> bool {
        self.workers_done() && self.pending.is_empty()
    }

    /// The intervals never completed (workers left running after a second
    /// Ctrl-C).
    pub(super) fn leftovers(self) -> impl Iterator<Item = Pending> {
        self.pending.into_values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::Cut;
    use tokio::sync::mpsc::{self, UnboundedReceiver};

    fn cut(events: u64, cpu_ms: u64) -> Cut {
        let mut measured = Stats::new(0);
        for _ in 0..events {
            measured.record_event(Duration::from_millis(1), Duration::from_millis(1), None);
        }
        Cut {
            measured,
            warmup: Stats::new(0),
            cpu: Duration::from_millis(cpu_ms),
            run_delay: Some(Duration::ZERO),
            all_waiting: Duration::from_millis(10),
        }
    }

    fn intake(workers: usize) -> (Intake, Vec<UnboundedReceiver<Stats>>) {
        let (senders, receivers) = (0..workers).map(|_| mpsc::unbounded_channel()).unzip();
        (Intake::new(senders, &Stats::new(0)), receivers)
    }

    #[test]
    fn an_interval_is_complete_once_every_worker_handed_it_in() {
        let (mut intake, _back) = intake(2);
        intake.take(
            0,
            Report::Interval {
                seq: 0,
                cut: cut(3, 10),
            },
        );
        assert!(
            intake.next_complete().is_none(),
            "worker 1 has not cut interval 0"
        );
        intake.take(
            0,
            Report::Interval {
                seq: 1,
                cut: cut(4, 20),
            },
        );
        intake.take(
            1,
            Report::Interval {
                seq: 0,
                cut: cut(5, 15),
            },
        );
        let (seq, p) = intake.next_complete().expect("both cut interval 0");
        assert_eq!(seq, 0);
        assert_eq!(p.measured.events, 8, "both workers' events merged");
        assert_eq!(
            p.cpu,
            vec![
                Some(Duration::from_millis(10)),
                Some(Duration::from_millis(15))
            ]
        );
        assert_eq!(p.all_waiting, vec![Duration::from_millis(10); 2]);
        assert!(p.to_boundary);
        assert!(
            intake.next_complete().is_none(),
            "interval 1 still lacks worker 1"
        );
    }

    #[test]
    fn a_finished_worker_holds_no_interval_back() {
        let (mut intake, _back) = intake(2);
        let t = Instant::now();
        intake.take(
            1,
            Report::Done {
                seq: 0,
                cut: cut(2, 5),
                at: t,
            },
        );
        intake.take(
            0,
            Report::Interval {
                seq: 0,
                cut: cut(1, 5),
            },
        );
        intake.take(
            0,
            Report::Interval {
                seq: 1,
                cut: cut(1, 9),
            },
        );
        assert_eq!(intake.next_complete().map(|(s, _)| s), Some(0));
        let (seq, p) = intake.next_complete().expect("worker 1 is done");
        assert_eq!(
            (seq, p.cpu[1]),
            (1, None),
            "the finished worker sent nothing for it"
        );
        assert_eq!(intake.last_done, Some(t));
        assert!(!intake.workers_done());
        intake.take(
            0,
            Report::Done {
                seq: 2,
                cut: cut(0, 9),
                at: t,
            },
        );
        assert!(intake.workers_done() && !intake.is_drained());
        let (_, last) = intake.next_complete().expect("interval 2");
        assert_eq!((last.done_at, last.to_boundary), (Some(t), false));
        assert!(intake.is_drained());
    }

    #[test]
    fn emptied_stats_go_back_to_the_worker_up_to_a_bound() {
        let (mut intake, mut back) = intake(1);
        for seq in 0..10 {
            intake.take(
                0,
                Report::Interval {
                    seq,
                    cut: cut(1, 1),
                },
            );
        }
        // Each cut takes two back; the worker never holds more than
        // RECYCLED unused.
        let mut returned = 0;
        while let Ok(stats) = back[0].try_recv() {
            assert_eq!(stats.events, 0, "sent back emptied");
            returned += 1;
        }
        assert_eq!(returned, 20);
        intake.take(
            0,
            Report::Done {
                seq: 10,
                cut: cut(1, 1),
                at: Instant::now(),
            },
        );
        assert!(back[0].try_recv().is_err(), "a finished worker takes none");
    }

    #[test]
    fn spares_are_kept_up_to_a_bound() {
        let (mut intake, _back) = intake(1);
        for seq in 0..4 {
            intake.take(
                0,
                Report::Interval {
                    seq,
                    cut: cut(1, 1),
                },
            );
        }
        while let Some((_, p)) = intake.next_complete() {
            intake.recycle(p);
        }
        assert_eq!(intake.spare.len(), RECYCLED);
    }

    #[test]
    fn an_interval_ends_at_its_boundary_or_its_last_worker() {
        let t0 = Instant::now();
        let (b, done) = (t0 + Duration::from_secs(1), t0 + Duration::from_millis(700));
        let mut p = Pending::new(&Stats::new(0), 1);
        assert_eq!(p.end(Some(b), t0), b, "cut at the boundary");
        assert_eq!(p.end(None, t0), t0, "nothing past the deadline");
        p.done_at = Some(done);
        assert_eq!(p.end(Some(b), t0), done, "the last worker finished early");
        assert_eq!(p.end(None, t0), done);
        p.to_boundary = true;
        assert_eq!(p.end(Some(b), t0), b, "another worker ran to the boundary");
    }
}
