//! Run-wide stop signal: the first reason to stop wins.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

pub use loadcell_record::result::StopReason;

#[derive(Debug)]
pub struct Control {
    stopped: AtomicBool,
    /// The first reason, its message, and when it came.
    reason: Mutex<Option<(StopReason, Option<String>, Instant)>>,
    notify: watch::Sender<bool>,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            stopped: AtomicBool::new(false),
            reason: Mutex::new(None),
            notify: watch::channel(false).0,
        }
    }
}

impl Control {
    /// Cheap enough for the hot path: one relaxed load.
    #[inline]
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Asks every session to stop. Only the first reason is kept.
    pub fn stop(&self, reason: StopReason, message: Option<String>) {
        let mut slot = self.reason.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some((reason, message, Instant::now()));
        }
        self.stopped.store(true, Ordering::Relaxed);
        self.notify.send_replace(true);
    }

    pub fn reason(&self) -> Option<(StopReason, Option<String>)> {
        self.first_stop()
            .map(|(reason, message, _)| (reason, message))
    }

    /// When [`Control::stop`] was first called.
    pub fn stopped_at(&self) -> Option<Instant> {
        self.first_stop().map(|(_, _, at)| at)
    }

    fn first_stop(&self) -> Option<(StopReason, Option<String>, Instant)> {
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Resolves once [`Control::stop`] has been called.
    pub async fn stopped(&self) {
        let mut rx = self.notify.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

/// Ctrl-C (SIGINT) and SIGTERM, listened for from creation on, so that
/// either ends a run (or the program a job runs) with its result written.
pub struct Interrupts {
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl Interrupts {
    /// Installs the handlers; one that cannot be installed is not waited
    /// for. Needs a Tokio runtime with I/O enabled.
    pub fn listen() -> Interrupts {
        Interrupts {
            interrupt: signal(SignalKind::interrupt()).ok(),
            terminate: signal(SignalKind::terminate()).ok(),
        }
    }

    /// Waits for the next of either signal; forever if neither handler
    /// could be installed.
    pub async fn recv(&mut self) {
        let Interrupts {
            interrupt,
            terminate,
        } = self;
        tokio::select! {
            _ = async { interrupt.as_mut()?.recv().await }, if interrupt.is_some() => {}
            _ = async { terminate.as_mut()?.recv().await }, if terminate.is_some() => {}
            else => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reason_wins() {
        let c = Control::default();
        assert!(!c.is_stopped());
        assert_eq!(c.stopped_at(), None);
        c.stop(StopReason::FatalError, Some("bad".into()));
        let first = c.stopped_at().expect("stopped");
        c.stop(StopReason::Interrupted, None);
        assert!(c.is_stopped());
        assert_eq!(c.stopped_at(), Some(first));
        assert_eq!(
            c.reason(),
            Some((StopReason::FatalError, Some("bad".into())))
        );
    }
}
