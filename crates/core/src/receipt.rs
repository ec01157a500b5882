//! Reading answers at the tick, timed by the kernel.
//!
//! In a burst schedule (`--rate-tick`) a worker woken for every answer as
//! it arrives sleeps and wakes once per request: at 20,000 HTTP requests/s
//! that was half of the client's CPU. A worker whose driver times every
//! read by the kernel's receive timestamp instead sleeps until its next
//! tick before it waits for I/O ([`sleep_until_next_tick`]), and then
//! reads every answer that came meanwhile in one pass. Each answer is
//! timed by when the kernel received it ([`received`]), not by when it was
//! read, so latency and service time stay what the server gave.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The longest a worker sleeps before it waits for I/O: Tokio's timer
/// resolution, so the worker's interval cuts are no later than they would
/// be anyway.
const LONGEST_SLEEP: Duration = Duration::from_millis(1);

thread_local! {
    static DEFERRED: Cell<bool> = const { Cell::new(false) };
    /// The task that last read an answer timed by the kernel, and when the
    /// kernel received it.
    static LAST: Cell<Option<(tokio::task::Id, Instant)>> = const { Cell::new(None) };
}

/// Reads on this thread are made at its ticks, and timed by the kernel.
/// Call only where every connection the thread reads times its reads with
/// [`received`]. Also asks the kernel to wake the thread's sleeps without
/// the default 50 µs of slack, as a tick's events are due then.
pub fn defer_reads_on_this_thread() {
    DEFERRED.with(|d| d.set(true));
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the
    // calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
}

/// Whether this thread defers its reads: connections made on it must time
/// their reads with [`received`].
#[inline]
pub fn reads_deferred_here() -> bool {
    DEFERRED.with(Cell::get)
}

/// The calling task read an answer that the kernel received at `realtime`
/// (`CLOCK_REALTIME`, as socket timestamps are).
#[inline]
pub fn received(realtime: Duration) {
    let age = realtime_now().saturating_sub(realtime);
    let at = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
    if let Some(task) = tokio::task::try_id() {
        LAST.with(|l| l.set(Some((task, at))));
    }
}

/// When the calling task's answer arrived: the kernel's receive time of its
/// last read since `since`, where reads are timed so; otherwise now.
#[inline]
pub fn answered_or_now(since: Instant) -> Instant {
    if reads_deferred_here() {
        if let (Some((task, at)), Some(me)) = (LAST.with(Cell::get), tokio::task::try_id()) {
            if task == me && at >= since {
                return at;
            }
        }
    }
    Instant::now()
}

/// Before the worker waits for I/O: where reads are deferred, sleeps until
/// the earliest instant its sessions wait for on the thread's timer (at
/// most [`LONGEST_SLEEP`]), so that the answers that come meanwhile are
/// read together. Elsewhere it does nothing, not even look at the timer.
pub fn sleep_until_next_tick() {
    if !reads_deferred_here() {
        return;
    }
    if let Some(at) = crate::clock::next_wake() {
        let wait = at.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait.min(LONGEST_SLEEP));
        }
    }
}

fn realtime_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::task::spawn_local;

    fn local<T>(f: impl std::future::Future<Output = T>) -> T {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&runtime, f)
    }

    /// An answer the kernel received 20 ms ago counts from then, for the
    /// task that read it and no other.
    #[test]
    fn an_answer_counts_from_its_receipt_for_the_task_that_read_it() {
        local(async {
            defer_reads_on_this_thread();
            let before = Instant::now();
            let long_ago = before - Duration::from_secs(1);
            let mine = spawn_local(async move {
                received(realtime_now() - Duration::from_millis(20));
                answered_or_now(long_ago)
            })
            .await
            .unwrap();
            let age = before.saturating_duration_since(mine);
            assert!(
                age >= Duration::from_millis(19) && age < Duration::from_millis(500),
                "{age:?}"
            );
            let others = spawn_local(async move { answered_or_now(long_ago) })
                .await
                .unwrap();
            assert!(others >= before, "another task got this task's receipt");
        });
    }

    /// A receipt from before the operation began is not its answer, and a
    /// thread that reads as answers come times them when read.
    #[test]
    fn stale_or_undeferred_receipts_are_not_used() {
        local(async {
            let undeferred = spawn_local(async {
                received(realtime_now() - Duration::from_millis(50));
                let since = Instant::now() - Duration::from_secs(1);
                answered_or_now(since) + Duration::from_millis(40) > Instant::now()
            });
            assert!(undeferred.await.unwrap());
            defer_reads_on_this_thread();
            let stale = spawn_local(async {
                received(realtime_now() - Duration::from_millis(50));
                let since = Instant::now() - Duration::from_millis(10);
                answered_or_now(since) >= since
            });
            assert!(stale.await.unwrap());
        });
    }
}
