//! Waiting until an instant more precisely than Tokio's millisecond timer,
//! without spinning.
//!
//! Tokio's timer rounds a sleep up to the next millisecond; a rate-limited
//! event that starts up to 1 ms late shows up as latency nobody caused.
//! Yielding until the instant instead kept the worker busy all the time:
//! at `--rate 5000` the client burned 0.8 of a core, taken from the server
//! on a shared machine. So each engine worker runs [`run_timer`]: one
//! `timerfd` (nanosecond resolution) armed a little ahead of the earliest
//! instant its sessions wait for; only that last stretch is yielded
//! through, which absorbs the thread's wake-up delay.

use std::cell::{Cell, RefCell};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

/// Nanoseconds since the Unix epoch on the wall clock: the one clock that
/// means the same in a publisher, a subscriber and a server (0 before it).
pub fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// How far ahead of a due time [`wait_until`] has the timer wake it, to
/// yield through the rest: about what a wake-up takes on a VM.
const SPIN_WINDOW: Duration = Duration::from_micros(50);

/// The most Tokio's timer (used where there is no timerfd) can be late.
const COARSE_WINDOW: Duration = Duration::from_millis(1);

thread_local! {
    static TIMER: RefCell<Option<Rc<Timer>>> = const { RefCell::new(None) };
}

/// Waits until `due`: on the thread's timer, then yielding for the last
/// few tens of microseconds.
pub async fn wait_until(due: Instant) {
    if !on_timer_until(due.checked_sub(SPIN_WINDOW).unwrap_or(due)).await {
        let coarse = due.checked_sub(COARSE_WINDOW).unwrap_or(due);
        if coarse > Instant::now() {
            tokio::time::sleep_until(coarse.into()).await;
        }
    }
    while Instant::now() < due {
        // Requests queued for the next park go out before the spin.
        crate::park::before_park();
        tokio::task::yield_now().await;
    }
}

/// Waits until `due` on the thread's timer alone, without the final
/// yielding: for events sent in bursts at ticks, which count from the
/// tick, so a wake-up a few µs late shows as latency, while yielding
/// through [`SPIN_WINDOW`] at every tick cost about a third of an HTTP
/// request's client CPU at 20,000 requests/s.
pub async fn wait_for_tick(due: Instant) {
    if !on_timer_until(due).await {
        tokio::time::sleep_until(due.into()).await;
    }
}

/// Sleeps on the thread's timer until `wake`; `false` at once where the
/// thread has none (or no longer has one), for the caller to wait on
/// Tokio's timer instead.
async fn on_timer_until(wake: Instant) -> bool {
    // The thread's timer is looked up at every wake-up, so that waits
    // still pending when it stops serving fall back to Tokio's timer.
    poll_fn(|cx| {
        if Instant::now() >= wake {
            return Poll::Ready(true);
        }
        let waiting = TIMER.with(|t| {
            t.borrow()
                .as_ref()
                .map(|timer| timer.wake_at(wake, cx.waker().clone()))
        });
        match waiting {
            Some(()) => Poll::Pending,
            None => Poll::Ready(false),
        }
    })
    .await
}

/// The earliest instant a task waits for on this thread's timer, if any.
pub fn next_wake() -> Option<Instant> {
    TIMER.with(|t| {
        let timer = t.borrow();
        let waiting = timer.as_ref()?.waiting.borrow();
        waiting.peek().map(|Reverse(w)| w.due)
    })
}

/// CPU time used by the calling thread.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Time the calling thread has spent ready to run but waiting for a CPU
/// (the run-queue delay of `/proc/thread-self/schedstat`), or `None` where
/// the kernel does not keep it. With [`thread_cpu`] it tells a thread that
/// had nothing to do from one that had work but no core to do it on: on a
/// host busy with other processes a thread that never sleeps gets perhaps
/// half a core, and is as saturated as one that gets all of it.
pub fn thread_run_delay() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    parse_run_delay(&text)
}

/// The second field of a `schedstat` line: nanoseconds spent waiting on a
/// run queue.
fn parse_run_delay(schedstat: &str) -> Option<Duration> {
    let ns = schedstat.split_whitespace().nth(1)?.parse::<u64>().ok()?;
    Some(Duration::from_nanos(ns))
}

/// Serves [`wait_until`] on this thread with a `timerfd` until dropped
/// (the engine runs one per worker, beside its sessions). Returns at once
/// where no timerfd can be made; waits then fall back to Tokio's timer and
/// a final spin.
pub async fn run_timer() {
    let Ok(timer) = Timer::new() else {
        return;
    };
    let timer = Rc::new(timer);
    TIMER.with(|t| *t.borrow_mut() = Some(Rc::clone(&timer)));
    let _unset = Unset;
    loop {
        let Ok(mut ready) = timer.fd.readable().await else {
            return;
        };
        ready.clear_ready();
        timer.expire();
    }
}

/// Takes the thread's timer away when its service ends.
struct Unset;

impl Drop for Unset {
    fn drop(&mut self) {
        if let Ok(Some(timer)) = TIMER.try_with(|t| t.borrow_mut().take()) {
            // Tasks still waiting are woken to fall back to the coarse wait.
            for Reverse(w) in timer.waiting.borrow_mut().drain() {
                w.waker.wake();
            }
        }
    }
}

struct Timer {
    fd: AsyncFd<OwnedFd>,
    /// Tasks and the instants they wait for, earliest first. A task that
    /// stopped waiting leaves its entry; waking it then is harmless.
    waiting: RefCell<BinaryHeap<Reverse<Waiting>>>,
    /// The instant the timerfd fires at, if armed.
    armed: Cell<Option<Instant>>,
}

struct Waiting {
    due: Instant,
    waker: Waker,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.due == other.due
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> Ordering {
        self.due.cmp(&other.due)
    }
}

impl Timer {
    fn new() -> io::Result<Timer> {
        // SAFETY: timerfd_create takes no pointers; a valid descriptor it
        // returns is ours alone.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an OwnedFd's descriptor stays open and the same for as
        // long as it is owned, here by the AsyncFd.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(io::Error::from)?;
        Ok(Timer {
            fd,
            waiting: RefCell::new(BinaryHeap::new()),
            armed: Cell::new(None),
        })
    }

    fn wake_at(&self, due: Instant, waker: Waker) {
        self.waiting
            .borrow_mut()
            .push(Reverse(Waiting { due, waker }));
        if self.armed.get().is_none_or(|at| due < at) {
            self.arm(due);
        }
    }

    /// Fires the timerfd at `due` (Instant is CLOCK_MONOTONIC; the timer is
    /// set relative to now, so the two need not be converted).
    fn arm(&self, due: Instant) {
        let wait = due
            .saturating_duration_since(Instant::now())
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as _, // time_t, whose alias musl deprecates
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: the descriptor is a timerfd we own; `spec` is a valid
        // itimerspec and the old value is not asked for.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        self.armed.set(Some(due));
    }

    /// The timerfd fired: wakes every task that is due, and arms the timer
    /// for the next.
    fn expire(&self) {
        let mut expirations = [0u8; 8];
        // SAFETY: reads at most 8 bytes into an 8-byte buffer. A timerfd
        // read only resets the expiration count; EAGAIN (already read) is
        // fine.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                expirations.as_mut_ptr().cast(),
                expirations.len(),
            )
        };
        self.armed.set(None);
        let now = Instant::now();
        let mut waiting = self.waiting.borrow_mut();
        while let Some(Reverse(next)) = waiting.peek() {
            if next.due > now {
                let due = next.due;
                drop(waiting);
                self.arm(due);
                return;
            }
            let Some(Reverse(w)) = waiting.pop() else {
                break;
            };
            w.waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn run_delay_is_the_second_schedstat_field() {
        assert_eq!(
            parse_run_delay("941510542 1038375367 244\n"),
            Some(Duration::from_nanos(1_038_375_367))
        );
        assert_eq!(parse_run_delay("12"), None);
        assert_eq!(parse_run_delay(""), None);
        // Where the kernel keeps it, it never goes backwards.
        if let Some(before) = thread_run_delay() {
            std::thread::yield_now();
            assert!(thread_run_delay().unwrap() >= before);
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Waits end at their instant without the thread spinning: the
    /// thread's CPU time stays a small part of the time waited. (Yielding
    /// until each instant, as before the timer, used all of it.)
    #[test]
    fn timed_waits_end_on_time_without_spinning() {
        runtime().block_on(async {
            let local = tokio::task::LocalSet::new();
            local
                .run_until(async {
                    let timer = tokio::task::spawn_local(run_timer());
                    tokio::task::yield_now().await;
                    let cpu = thread_cpu();
                    let start = Instant::now();
                    // Two sessions' events, each 700 µs apart, out of phase.
                    let tasks: Vec<_> = (0..2u64)
                        .map(|i| {
                            tokio::task::spawn_local(async move {
                                for k in 1..=150u64 {
                                    let due = start + Duration::from_micros(k * 700 + i * 350);
                                    wait_until(due).await;
                                    assert!(Instant::now() >= due, "a wait ended early");
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await.unwrap();
                    }
                    let waited = start.elapsed();
                    let used = thread_cpu() - cpu;
                    timer.abort();
                    assert!(waited >= Duration::from_millis(105));
                    assert!(used < waited / 2, "{used:?} of CPU over {waited:?}");
                })
                .await
        });
    }

    /// A tick's wait wakes once, on the timer, and never yields its way
    /// through a last stretch: polled on the first call and at the wake.
    #[test]
    fn a_ticks_wait_wakes_once_without_yielding() {
        runtime().block_on(async {
            tokio::task::LocalSet::new()
                .run_until(async {
                    let timer = tokio::task::spawn_local(run_timer());
                    tokio::task::yield_now().await;
                    let due = Instant::now() + Duration::from_millis(5);
                    let mut wait = Box::pin(wait_for_tick(due));
                    let mut polls = 0;
                    poll_fn(|cx| {
                        polls += 1;
                        wait.as_mut().poll(cx)
                    })
                    .await;
                    timer.abort();
                    assert!(Instant::now() >= due, "the wait ended early");
                    assert!(polls <= 3, "polled {polls} times");
                })
                .await
        });
    }

    #[test]
    fn without_the_timer_a_ticks_wait_still_ends_on_time() {
        runtime().block_on(async {
            let due = Instant::now() + Duration::from_millis(3);
            wait_for_tick(due).await;
            assert!(Instant::now() >= due);
        });
    }

    /// A wait still pending when the timer's service ends (the worker
    /// winding down) finishes on Tokio's timer instead of hanging.
    #[test]
    fn a_wait_outlives_the_timer() {
        runtime().block_on(async {
            tokio::task::LocalSet::new()
                .run_until(async {
                    let timer = tokio::task::spawn_local(run_timer());
                    tokio::task::yield_now().await;
                    let due = Instant::now() + Duration::from_millis(30);
                    let wait = tokio::task::spawn_local(wait_until(due));
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    timer.abort();
                    tokio::time::timeout(Duration::from_secs(5), wait)
                        .await
                        .expect("the wait ended")
                        .unwrap();
                    assert!(Instant::now() >= due);
                })
                .await
        });
    }

    #[test]
    fn without_the_timer_waits_still_end_on_time() {
        runtime().block_on(async {
            let due = Instant::now() + Duration::from_millis(3);
            wait_until(due).await;
            assert!(Instant::now() >= due);
        });
    }
}
