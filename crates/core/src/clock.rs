//! Waiting until an instant more precisely than Tokio's millisecond timer.

use std::time::{Duration, Instant};

/// How close to a due time we stop sleeping and start yielding. Tokio's
/// timer has millisecond resolution; sleeping all the way would wake up to
/// 1 ms late, which would show up as latency nobody caused.
const SPIN_WINDOW: Duration = Duration::from_millis(1);

/// Waits until `due`: sleeps while far away, then yields to the runtime's
/// other tasks for the last millisecond.
pub async fn wait_until(due: Instant) {
    let now = Instant::now();
    if due <= now {
        return;
    }
    if due - now > SPIN_WINDOW {
        tokio::time::sleep_until((due - SPIN_WINDOW).into()).await;
    }
    while Instant::now() < due {
        tokio::task::yield_now().await;
    }
}
