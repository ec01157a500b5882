//! `--watch URL`: a shard's side of `loadcell watch`. Each interval (warm-up
//! and measured) and at the end the shard's result are posted to the
//! watcher by a thread of the feed's own, through the HTTP family's client.
//! The collector only encodes the interval and offers it to a bounded
//! queue: it never waits on the watcher, and a watcher that is slow, dead
//! or never there costs the run one failed connect a second at most.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use loadcell_core::clock::wall_ns;
use loadcell_core::http::{HttpConn, Request};
use loadcell_core::{Driver, Target};
use loadcell_drivers::http::HttpDriver;
use loadcell_engine::{IntervalView, Phase};
use loadcell_record::result::{Interval, RunResult};

use super::wire::{News, Origin, Report, PATH};

/// Reports the queue holds while the watcher is slow: a minute at 1 s.
const QUEUE: usize = 64;
/// A post taking longer counts as failed.
const POST_TIMEOUT: Duration = Duration::from_secs(2);
/// After a failed connect, reports are dropped for this long rather than
/// each waiting on a connect of its own.
const BACKOFF: Duration = Duration::from_secs(1);
/// How long the end of a run waits for the queue to empty.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// `http://HOST:PORT` of a watcher, checked before any load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchUrl {
    target: String,
    shown: String,
}

/// Parses `--watch URL`.
pub fn parse_url(text: &str) -> Result<WatchUrl, String> {
    let example = "e.g. --watch http://watcher:9750";
    let target = Target::parse(text).map_err(|e| format!("'{text}': {e}; {example}"))?;
    if target.scheme() != "http" {
        return Err(format!(
            "'{text}': the watcher is reached over plain http://, {example}"
        ));
    }
    let (host, port) = match target.hosts().first() {
        Some((host, Some(port))) => (host.clone(), *port),
        _ => {
            return Err(format!(
                "'{text}': give the watcher's host and port, {example}"
            ))
        }
    };
    Ok(WatchUrl {
        target: format!("http://{host}:{port}{PATH}"),
        shown: format!("http://{host}:{port}"),
    })
}

/// What the sending thread did.
#[derive(Debug, Default)]
struct Tally {
    sent: u64,
    failed: u64,
    last_error: Option<String>,
}

/// A running feed: its queue and the thread that empties it.
pub struct Feed {
    shown: String,
    from: Origin,
    seq: u64,
    queue: SyncSender<Report>,
    dropped: u64,
    done: Receiver<Tally>,
}

impl Feed {
    pub fn start(url: &WatchUrl, from: Origin) -> anyhow::Result<Feed> {
        let target =
            Target::parse(&url.target).map_err(|e| anyhow!("--watch {}: {e}", url.shown))?;
        let driver =
            HttpDriver::from_target(&target).map_err(|e| anyhow!("--watch {}: {e}", url.shown))?;
        let (queue, rx) = sync_channel(QUEUE);
        let (done_tx, done) = std::sync::mpsc::channel();
        let shown = url.shown.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("loadcell-watch".into())
            .spawn(move || {
                let tally = runtime.block_on(post_all(driver, rx, &shown));
                let _ = done_tx.send(tally);
            })?;
        Ok(Feed {
            shown: url.shown.clone(),
            from,
            seq: 0,
            queue,
            dropped: 0,
            done,
        })
    }

    fn offer(&mut self, news: News) {
        let report = Report {
            from: self.from.clone(),
            seq: self.seq,
            news,
        };
        self.seq += 1;
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.queue.try_send(report)
        {
            self.dropped += 1;
        }
    }

    /// Offers one interval, warm-up or measured.
    pub fn interval(&mut self, view: &IntervalView<'_>) {
        // On the run's clock (warm-up included), not the result's; a
        // measured interval reuses the engine's encoding.
        let elapsed = view.elapsed.as_secs_f64();
        let interval = match view.recorded {
            Some(recorded) => Interval {
                t_s: elapsed,
                ..recorded.clone()
            },
            None => Interval::from_stats(elapsed, view.duration.as_secs_f64(), view.stats),
        };
        self.offer(News::Interval {
            measured: view.phase == Phase::Measure,
            end_unix_ms: wall_ns() as f64 / 1e6,
            interval: Box::new(interval),
        });
    }

    /// Offers the shard's result, lets the thread post what is queued (for
    /// [`DRAIN_TIMEOUT`] at most) and says, for the result's warnings,
    /// what did not reach the watcher.
    pub fn finish(mut self, result: &RunResult) -> Option<String> {
        self.offer(News::End {
            result: Box::new(result.clone()),
        });
        let Feed {
            shown,
            seq,
            queue,
            dropped,
            done,
            ..
        } = self;
        drop(queue);
        let tally = done.recv_timeout(DRAIN_TIMEOUT).ok();
        let sent = tally.as_ref().map_or(0, |t| t.sent);
        if sent == seq {
            return None;
        }
        let why = match &tally {
            None => format!("still posting after {}s", DRAIN_TIMEOUT.as_secs()),
            Some(t) => match &t.last_error {
                Some(e) => format!("{} failed, the last with: {e}", t.failed),
                None => format!("{} failed", t.failed),
            },
        };
        Some(format!(
            "the watcher at {shown} took {sent} of {seq} reports ({dropped} dropped with the \
             queue full; {why})"
        ))
    }
}

/// The sending thread: each report as it comes, on one kept connection,
/// reconnected when it breaks.
async fn post_all(driver: HttpDriver, rx: Receiver<Report>, shown: &str) -> Tally {
    let mut tally = Tally::default();
    let mut conn = None;
    let mut retry_at = Instant::now();
    let mut warned = false;
    // Blocking receives on this thread: nothing else runs on its runtime.
    while let Ok(report) = rx.recv() {
        if conn.is_none() && Instant::now() < retry_at {
            tally.failed += 1;
            continue;
        }
        let body = serde_json::to_vec(&report).expect("a report serialises");
        let posted = tokio::time::timeout(POST_TIMEOUT, async {
            if conn.is_none() {
                conn = Some(driver.connect().await.map_err(|e| e.to_string())?);
            }
            let c = conn.as_mut().expect("connected above");
            let request = Request {
                method: "POST",
                path: b"",
                headers: b"Content-Type: application/json\r\n",
                body: &body,
            };
            match c.request(&request).await {
                Ok(r) if r.status == 204 || r.status == 200 => Ok(()),
                Ok(r) => Err(format!(
                    "answered HTTP {}: {}",
                    r.status,
                    String::from_utf8_lossy(r.body).trim()
                )),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}s", POST_TIMEOUT.as_secs())));
        match posted {
            Ok(()) => {
                tally.sent += 1;
                warned = false;
            }
            Err(e) => {
                if !warned {
                    eprintln!("WARNING: the watcher at {shown}: {e}; reports to it are dropped until it answers");
                    warned = true;
                }
                tally.failed += 1;
                tally.last_error = Some(e);
                conn = None;
                retry_at = Instant::now() + BACKOFF;
            }
        }
    }
    tally
}
