//! `sim`: an in-process simulated key-value server whose service times,
//! queueing and stalls are known exactly, so that what the engine reports
//! can be checked against the truth, and so that the generator's own cost
//! can be measured with a server that costs nothing.
//!
//! Target: `sim://?latency=lognormal:2ms:0.5&stall=1s@5s&concurrency=64`
//! (`sim:?...` is the same). Every parameter is optional:
//!
//! - `latency`: the service time of each request, drawn independently:
//!   `fixed:D` (the default is `fixed:0`, no latency at all),
//!   `uniform:A:B`, `lognormal:MEDIAN:SIGMA` (`MEDIAN * e^(SIGMA * Z)`,
//!   `Z` standard normal) or `bimodal:A:B:P` (`B` with probability `P`,
//!   else `A`). Durations are written `0`, `500ns`, `250us` (or `µs`),
//!   `2ms`, `1.5s`.
//! - `concurrency=N`: the server works on at most `N` requests at once,
//!   counted over every connection; the others wait in arrival order
//!   (FIFO). Default: unlimited, every request is served as it arrives.
//! - `stall=DUR@AT[,DUR@AT...]`: from `AT` after the server's epoch, for
//!   `DUR`, the server processes nothing: work that would have run during
//!   the stall (a request arriving in it, one waiting for a slot, or the
//!   rest of one in service when it starts) runs after it.
//! - `slowstart=DUR`: a server still warming up (a JVM compiling its hot
//!   paths, caches filling): a request arriving at `t` after the epoch,
//!   `t < DUR`, takes its service time × `1 + (SLOWSTART_FACTOR − 1)(1 −
//!   t/DUR)`, so service starts 5× slower and falls linearly to its set value
//!   at `DUR`: a known answer for a steady-state detector (`--warmup auto`).
//! - `record=FILE`: the server's own account of every request, for checking
//!   what a client measured against what really happened: one line per
//!   request, `ARRIVAL COMPLETION` in nanoseconds from the server's epoch,
//!   the completion read from the clock when the reply was delivered (so a
//!   late timer wake-up is in it, as it is in what the client saw). Each
//!   connection appends its lines when it closes; the file is created if
//!   needed and never truncated.
//!
//! The model is analytic: no thread plays the server. The server's epoch is
//! the first connection made to it (the first `connect` of the driver, which
//! the CLI makes to ask for the server's version just before the run
//! starts, or before `--prepare` when that is given), so `stall=1s@5s`
//! stalls the server 5 s into the run, give or take the few milliseconds
//! between that first connection and the start of the schedule; warm-up
//! counts as part of the run. Requests queued on a connection arrive
//! together when it is flushed: with a limit, each takes the slot that
//! frees first (N slots, each with the time it is busy until), and starts
//! at the later of its arrival and that time; without one it starts at its
//! arrival. Its completion is its start plus its service time, stretched
//! over any stall. The connection waits until each completion in turn, with
//! the engine's precise clock (`loadcell_core::clock::wait_until`), and
//! delivers the replies in order, as a pipelined connection to a real
//! server would: a reply is never returned before the one queued ahead of
//! it.
//!
//! Replies: a GET always hits, with a 32-byte value of `x` (memtier's
//! default value), so `--verify` does not apply; SETs and `--command`s
//! succeed. Nothing is stored.
//!
//! Cost: with no latency, no limit and no stall (plain `sim://`), `flush`
//! only calls back once per request, never reads the clock, takes no lock
//! and never waits: what a run then measures is the generator's own
//! overhead. A limit adds one uncontended-in-the-best-case mutex per flush,
//! shared by every worker thread. Each connection draws its service times
//! from its own SplitMix64 generator, seeded from the order in which
//! connections were opened.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use loadcell_core::clock::wait_until;
use loadcell_core::kv::{KvCapabilities, KvConn, KvReply, OnReply, ReplyAt};
use loadcell_core::{Driver, DriverError, ServerInfo, Target};

use crate::transport::target_url::Query;
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "sim",
    schemes: &["sim"],
    family: Family::KV,
    url_form: "sim://?latency=lognormal:2ms:0.5&stall=1s@5s&concurrency=64&connect=5ms",
    about: "an in-process simulated server with known latency, queueing and stalls (for testing the engine)",
    kv: KvCapabilities { commands: true },
    blocking: false,
};

const PARAMS: &[&str] = &[
    "latency",
    "stall",
    "concurrency",
    "connect",
    "record",
    "slowstart",
];
/// Under `slowstart`, how many times slower service is at the epoch.
pub const SLOWSTART_FACTOR: f64 = 5.0;

const LATENCY_FORMS: &str = "fixed:D, uniform:A:B, lognormal:MEDIAN:SIGMA or bimodal:A:B:P \
     (durations such as 0, 250us, 2ms, 1.5s; P is the probability of B, 0 to 1)";
const STALL_FORMS: &str = "DUR@AT[,DUR@AT...], e.g. stall=1s@5s or stall=500ms@2s,1s@8s";
/// Beyond this a duration is a typo; it also keeps nanosecond sums far
/// from overflowing a u64.
const MAX_DURATION_NS: u64 = 10 * 24 * 3600 * 1_000_000_000;
/// Longest service time a distribution draws (lognormal tails are long).
const MAX_SERVICE_NS: u64 = 3600 * 1_000_000_000;
const MAX_CONCURRENCY: usize = 1_000_000;
/// What a GET returns: memtier's default 32-byte value.
const VALUE: &[u8] = b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

// ---------------------------------------------------------------------------
// Target

/// A service-time distribution; times in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Latency {
    Fixed(u64),
    Uniform(u64, u64),
    LogNormal { median: f64, sigma: f64 },
    Bimodal { a: u64, b: u64, p: f64 },
}

impl Latency {
    fn parse(s: &str) -> Result<Latency, String> {
        let bad = |why: String| format!("latency '{s}': {why}; accepted: {LATENCY_FORMS}");
        let parts: Vec<&str> = s.split(':').collect();
        let dur = |i: usize| parse_duration(parts[i]).map_err(&bad);
        let (kind, n) = (parts[0], parts.len() - 1);
        let want = |expected: usize, form: &str| {
            if n == expected {
                Ok(())
            } else {
                Err(bad(format!("{kind} takes {expected} value(s): {form}")))
            }
        };
        Ok(match kind {
            "fixed" => {
                want(1, "fixed:D")?;
                Latency::Fixed(dur(1)?)
            }
            "uniform" => {
                want(2, "uniform:A:B")?;
                let (a, b) = (dur(1)?, dur(2)?);
                if a > b {
                    return Err(bad("A must not be greater than B".into()));
                }
                Latency::Uniform(a, b)
            }
            "lognormal" => {
                want(2, "lognormal:MEDIAN:SIGMA")?;
                let median = dur(1)?;
                let sigma: f64 = parts[2].trim().parse().map_err(|_| {
                    bad(format!(
                        "SIGMA '{}' is not a number (e.g. 0.5)",
                        parts[2].trim()
                    ))
                })?;
                if !(0.0..=10.0).contains(&sigma) {
                    return Err(bad("SIGMA must be between 0 and 10".into()));
                }
                Latency::LogNormal {
                    median: median as f64,
                    sigma,
                }
            }
            "bimodal" => {
                want(3, "bimodal:A:B:P")?;
                let (a, b) = (dur(1)?, dur(2)?);
                let p: f64 = parts[3].trim().parse().map_err(|_| {
                    bad(format!(
                        "P '{}' is not a number (e.g. 0.01)",
                        parts[3].trim()
                    ))
                })?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(bad(
                        "P, the probability of B, must be between 0 and 1".into()
                    ));
                }
                Latency::Bimodal { a, b, p }
            }
            "" => return Err(bad("empty".into())),
            other => return Err(bad(format!("unknown distribution '{other}'"))),
        })
    }

    /// Whether every draw is zero.
    fn is_zero(&self) -> bool {
        match *self {
            Latency::Fixed(d) => d == 0,
            Latency::Uniform(_, b) => b == 0,
            Latency::LogNormal { median, .. } => median == 0.0,
            Latency::Bimodal { a, b, .. } => a == 0 && b == 0,
        }
    }

    /// One service time, in nanoseconds.
    #[inline]
    fn sample(&self, rng: &mut SplitMix64) -> u64 {
        match *self {
            Latency::Fixed(d) => d,
            Latency::Uniform(a, b) => a + ((b - a) as f64 * rng.unit()) as u64,
            Latency::LogNormal { median, sigma } => {
                // Box-Muller; 1 - U is in (0, 1], so the log is finite.
                let u1 = 1.0 - rng.unit();
                let u2 = rng.unit();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let x = median * (sigma * z).exp();
                if x >= MAX_SERVICE_NS as f64 {
                    MAX_SERVICE_NS
                } else {
                    x as u64
                }
            }
            Latency::Bimodal { a, b, p } => {
                if rng.unit() < p {
                    b
                } else {
                    a
                }
            }
        }
    }
}

/// A duration such as `250us`, `2ms`, `1.5s` or `0`, in nanoseconds.
fn parse_duration(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" if !number.is_empty() && number.bytes().all(|b| b == b'0' || b == b'.') => 0.0,
        "" => {
            return Err(format!(
                "'{s}' needs a unit: ns, us, ms or s (e.g. 250us, 2ms, 1s)"
            ))
        }
        _ => {
            return Err(format!(
                "'{s}' is not a duration: use a number and ns, us, ms or s (e.g. 250us, 2ms, 1s)"
            ))
        }
    };
    let value: f64 = number.parse().map_err(|_| {
        format!("'{s}' is not a duration: use a number and ns, us, ms or s (e.g. 250us, 2ms, 1s)")
    })?;
    let ns = (value * scale).round();
    if ns > MAX_DURATION_NS as f64 {
        return Err(format!("'{s}' is too long (at most 10 days)"));
    }
    Ok(ns as u64)
}

/// `DUR@AT,...` as `(start, end)` nanoseconds from the epoch, sorted, with
/// overlapping or touching stalls merged.
fn parse_stalls(s: &str) -> Result<Vec<(u64, u64)>, String> {
    let mut stalls = Vec::new();
    for item in s.split(',') {
        let bad = |why: String| format!("stall '{item}': {why}; accepted: {STALL_FORMS}");
        let Some((dur, at)) = item.split_once('@') else {
            return Err(bad("expected DUR@AT".into()));
        };
        let (dur, at) = (
            parse_duration(dur).map_err(bad)?,
            parse_duration(at).map_err(bad)?,
        );
        if dur == 0 {
            return Err(bad("a stall must last longer than 0".into()));
        }
        stalls.push((at, at + dur));
    }
    stalls.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(stalls.len());
    for (start, end) in stalls {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    Ok(merged)
}

/// The simulated server, as the target URL describes it.
#[derive(Debug, Clone, PartialEq)]
struct Config {
    latency: Latency,
    stalls: Vec<(u64, u64)>,
    concurrency: Option<usize>,
    /// How long opening a connection takes (a TLS handshake, say).
    connect_ns: u64,
    /// Where each request's arrival and completion are appended.
    record: Option<PathBuf>,
    /// How long service stays slowed after the epoch (`slowstart`).
    slowstart_ns: u64,
}

fn parse_url(url: &url::Url) -> Result<Config, String> {
    const FORM: &str = "use sim://?latency=...&stall=...&concurrency=N";
    let mut query = Query::parse(url, PARAMS).map_err(|e| format!("{e} ({})", INFO.url_form))?;
    query.refuse_repeats()?;
    // A URL with a user, password or port has a host too (or does not parse).
    if let Some(host) = url.host_str().filter(|h| !h.is_empty()) {
        return Err(format!(
            "the simulated server runs in-process: remove the host '{host}' ({FORM})"
        ));
    }
    let path = url.path();
    if !path.is_empty() && path != "/" {
        return Err(format!("unexpected path '{path}' ({FORM})"));
    }
    let concurrency = query.take_parsed("concurrency", |value| {
        let n: usize = value.trim().parse().map_err(|_| {
            format!(
                "concurrency '{value}' must be a whole number of requests served at once, \
                 1 to {MAX_CONCURRENCY} (leave it out for no limit)"
            )
        })?;
        if n == 0 || n > MAX_CONCURRENCY {
            return Err(format!(
                "concurrency {n} is out of range: 1 to {MAX_CONCURRENCY} \
                 (leave it out for no limit)"
            ));
        }
        Ok(n)
    })?;
    let record = query
        .take_nonempty("record", "a file name, e.g. record=served.txt")
        .map_err(|e| format!("{e} ({FORM})"))?;
    Ok(Config {
        latency: query
            .take_parsed("latency", Latency::parse)?
            .unwrap_or(Latency::Fixed(0)),
        stalls: query
            .take_parsed("stall", parse_stalls)?
            .unwrap_or_default(),
        concurrency,
        connect_ns: query.take_parsed("connect", parse_duration)?.unwrap_or(0),
        record: record.map(PathBuf::from),
        slowstart_ns: query.take_parsed("slowstart", parse_duration)?.unwrap_or(0),
    })
}

// ---------------------------------------------------------------------------
// The model

/// The server's state and rules; times are nanoseconds from its epoch.
#[derive(Debug)]
struct Model {
    latency: Latency,
    /// Sorted, disjoint `(start, end)`.
    stalls: Vec<(u64, u64)>,
    /// With a concurrency limit: when each slot is next free, as a min-heap.
    slots: Option<Mutex<BinaryHeap<Reverse<u64>>>>,
    slowstart_ns: u64,
}

impl Model {
    fn new(config: &Config) -> Model {
        Model {
            latency: config.latency,
            stalls: config.stalls.clone(),
            slots: config
                .concurrency
                .map(|n| Mutex::new(std::iter::repeat_n(Reverse(0), n).collect())),
            slowstart_ns: config.slowstart_ns,
        }
    }

    /// `service` ns as a request arriving at `arrival` gets it, slowed while
    /// the server warms up.
    fn slowed(&self, arrival: u64, service: u64) -> u64 {
        if arrival >= self.slowstart_ns {
            return service;
        }
        let left = 1.0 - arrival as f64 / self.slowstart_ns as f64;
        (service as f64 * (1.0 + (SLOWSTART_FACTOR - 1.0) * left)) as u64
    }

    /// No latency, no limit, no stall: replies are immediate.
    fn is_trivial(&self) -> bool {
        self.latency.is_zero()
            && self.stalls.is_empty()
            && self.slots.is_none()
            && self.slowstart_ns == 0
    }

    /// When work of `service` ns that may start at `t` is done, given that
    /// nothing is processed during a stall.
    fn finish(&self, mut t: u64, service: u64) -> u64 {
        let mut left = service;
        for &(start, end) in &self.stalls {
            if end <= t {
                continue;
            }
            if t < start {
                if left <= start - t {
                    return t + left;
                }
                left -= start - t;
            }
            t = end;
        }
        t + left
    }

    /// Admits requests arriving together at `arrival`: `times` holds each
    /// one's service time and is overwritten with its completion time.
    fn admit(&self, arrival: u64, times: &mut [u64]) {
        match &self.slots {
            None => {
                for t in times {
                    *t = self.finish(arrival, *t);
                }
            }
            Some(slots) => {
                // A poisoned lock only means another worker panicked; the
                // busy-until times are still consistent.
                let mut slots = slots.lock().unwrap_or_else(|p| p.into_inner());
                for t in times {
                    let mut first_free = slots.peek_mut().expect("at least one slot");
                    let start = first_free.0.max(arrival);
                    let done = self.finish(start, *t);
                    *first_free = Reverse(done);
                    *t = done;
                }
            }
        }
    }
}

/// SplitMix64: tiny, fast and good enough for service times.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    #[inline]
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

// ---------------------------------------------------------------------------
// Driver

#[derive(Debug)]
struct Shared {
    model: Model,
    trivial: bool,
    /// Set by the first connection: the origin of stall times.
    epoch: OnceLock<Instant>,
    /// Connections opened so far; seeds each one's generator.
    opened: AtomicU64,
    /// `record=FILE`, opened for appending.
    record: Option<Mutex<File>>,
}

/// A simulated server. Shared by every worker thread; the only shared
/// mutable state is the slot table (with a concurrency limit), the epoch
/// and a connection counter.
#[derive(Debug)]
pub struct SimDriver {
    shared: Arc<Shared>,
    connect_delay: Duration,
    /// Shown as the server's version: the target's query.
    description: String,
}

impl SimDriver {
    /// Parses the target; the server's epoch is set by the first `connect`.
    pub fn from_target(target: &Target) -> Result<SimDriver, String> {
        let config = parse_url(target.url())?;
        let model = Model::new(&config);
        let record = match &config.record {
            None => None,
            Some(path) => Some(Mutex::new(
                File::options()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("record={}: {e}", path.display()))?,
            )),
        };
        Ok(SimDriver {
            connect_delay: Duration::from_nanos(config.connect_ns),
            description: target.url().query().unwrap_or("").to_string(),
            shared: Arc::new(Shared {
                trivial: model.is_trivial() && record.is_none(),
                model,
                epoch: OnceLock::new(),
                opened: AtomicU64::new(0),
                record,
            }),
        })
    }
}

impl Driver for SimDriver {
    type Conn = SimConn;

    fn endpoint(&self) -> String {
        "sim".to_string()
    }

    async fn connect(&self) -> Result<SimConn, DriverError> {
        if !self.connect_delay.is_zero() {
            tokio::time::sleep(self.connect_delay).await;
        }
        let epoch = *self.shared.epoch.get_or_init(Instant::now);
        let n = self.shared.opened.fetch_add(1, Ordering::Relaxed);
        let mut seeder = SplitMix64(n);
        Ok(SimConn {
            shared: Arc::clone(&self.shared),
            epoch,
            rng: SplitMix64(seeder.next_u64()),
            queue: Vec::with_capacity(64),
            times: Vec::with_capacity(64),
            served: Vec::new(),
        })
    }

    async fn server_info(&self, _conn: &mut SimConn) -> Result<ServerInfo, DriverError> {
        Ok(ServerInfo::new("loadcell-sim", self.description.clone()))
    }
}

// ---------------------------------------------------------------------------
// Connection

/// One session's connection to the simulated server.
pub struct SimConn {
    shared: Arc<Shared>,
    epoch: Instant,
    rng: SplitMix64,
    /// Per queued request: whether it is a GET (else a SET or a command).
    queue: Vec<bool>,
    /// Per queued request: its service time, then its completion time.
    times: Vec<u64>,
    /// With `record`: each request's arrival and real completion, written
    /// out when the connection closes.
    served: Vec<(u64, u64)>,
}

impl Drop for SimConn {
    fn drop(&mut self) {
        let Some(file) = &self.shared.record else {
            return;
        };
        if self.served.is_empty() {
            return;
        }
        let mut lines = String::with_capacity(self.served.len() * 24);
        for (arrival, completion) in &self.served {
            let _ = writeln!(lines, "{arrival} {completion}");
        }
        // Another connection panicking while writing leaves the file usable.
        let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(lines.as_bytes()) {
            eprintln!("sim: could not write its record of served requests: {e}");
        }
    }
}

impl std::fmt::Debug for SimConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimConn")
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

#[inline]
fn reply(get: bool) -> KvReply<'static> {
    if get {
        KvReply::Hit(VALUE)
    } else {
        KvReply::Done
    }
}

/// Empties the queue however `flush` ends, even if its future is dropped.
struct Drain<'a>(&'a mut Vec<bool>);

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        self.0.clear();
    }
}

impl KvConn for SimConn {
    #[inline]
    fn queue_get(&mut self, _key: &[u8]) {
        self.queue.push(true);
    }

    #[inline]
    fn queue_set(&mut self, _key: &[u8], _value: &[u8]) {
        self.queue.push(false);
    }

    #[inline]
    fn queue_delete(&mut self, _key: &[u8]) {
        self.queue.push(false);
    }

    #[inline]
    fn queue_command(&mut self, _args: &[&[u8]]) -> Result<(), DriverError> {
        self.queue.push(false);
        Ok(())
    }

    async fn flush(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError> {
        let queue = Drain(&mut self.queue);
        if self.shared.trivial {
            // Answered at once: as if every reply came in one read.
            for (index, &get) in queue.0.iter().enumerate() {
                on_reply(ReplyAt { index, read: 0 }, Ok(reply(get)));
            }
            return Ok(());
        }
        let model = &self.shared.model;
        let arrival = Instant::now()
            .saturating_duration_since(self.epoch)
            .as_nanos() as u64;
        self.times.clear();
        for _ in 0..queue.0.len() {
            let service = model.latency.sample(&mut self.rng);
            self.times.push(model.slowed(arrival, service));
        }
        model.admit(arrival, &mut self.times);
        let recording = self.shared.record.is_some();
        for (i, (&get, &done)) in queue.0.iter().zip(&self.times).enumerate() {
            wait_until(self.epoch + Duration::from_nanos(done)).await;
            if recording {
                let completion = self.epoch.elapsed().as_nanos() as u64;
                self.served.push((arrival, completion));
            }
            // Each reply completes at its own time, as if read on its own.
            let at = ReplyAt {
                index: i,
                read: i as u32,
            };
            on_reply(at, Ok(reply(get)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn config(url: &str) -> Result<Config, String> {
        // `url::Url` directly: `sim://?...` has no host, which `Target`
        // may refuse; `sim:?...` is tested through `Target` below.
        parse_url(&url::Url::parse(url).unwrap())
    }

    fn model(url: &str) -> Model {
        Model::new(&config(url).unwrap())
    }

    #[test]
    fn info() {
        assert_eq!(INFO.name, "sim");
        assert_eq!(INFO.schemes, &["sim"]);
        assert_eq!(INFO.family, Family::KV);
        assert_eq!(INFO.kv, KvCapabilities { commands: true });
        config(INFO.url_form).unwrap();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration("0.0"), Ok(0));
        assert_eq!(parse_duration("500ns"), Ok(500));
        assert_eq!(parse_duration("250us"), Ok(250_000));
        assert_eq!(parse_duration("250µs"), Ok(250_000));
        assert_eq!(parse_duration("2ms"), Ok(2 * MS));
        assert_eq!(parse_duration("1.5s"), Ok(1500 * MS));
        assert_eq!(parse_duration(" 0.25ms "), Ok(250_000));
        assert!(parse_duration("2").unwrap_err().contains("needs a unit"));
        assert!(parse_duration("2h").unwrap_err().contains("not a duration"));
        assert!(parse_duration("ms").unwrap_err().contains("not a duration"));
        assert!(parse_duration("1.2.3ms").is_err());
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("100000000s")
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn urls() {
        let defaults = Config {
            latency: Latency::Fixed(0),
            stalls: vec![],
            concurrency: None,
            connect_ns: 0,
            record: None,
            slowstart_ns: 0,
        };
        for url in ["sim://", "sim://?", "sim:", "sim:?", "sim:///"] {
            assert_eq!(config(url).unwrap(), defaults, "{url}");
        }
        let c = config("sim://?latency=lognormal:2ms:0.5&stall=1s@5s&concurrency=64&connect=5ms")
            .unwrap();
        assert_eq!(
            c,
            Config {
                latency: Latency::LogNormal {
                    median: 2e6,
                    sigma: 0.5
                },
                stalls: vec![(5000 * MS, 6000 * MS)],
                concurrency: Some(64),
                connect_ns: 5 * MS,
                record: None,
                slowstart_ns: 0,
            }
        );
        let c = config("sim:?record=served.txt").unwrap();
        assert_eq!(c.record, Some(PathBuf::from("served.txt")));
        let c = config("sim:?latency=uniform:1ms:3ms").unwrap();
        assert_eq!(c.latency, Latency::Uniform(MS, 3 * MS));
        let c = config("sim://?latency=bimodal:1ms:100ms:0.01").unwrap();
        assert_eq!(
            c.latency,
            Latency::Bimodal {
                a: MS,
                b: 100 * MS,
                p: 0.01
            }
        );
        let c = config("sim://?latency=fixed:250us").unwrap();
        assert_eq!(c.latency, Latency::Fixed(250_000));
        // Sorted and merged.
        let c = config("sim://?stall=1s@8s,500ms@2s,1s@8500ms,1s@20s").unwrap();
        assert_eq!(
            c.stalls,
            vec![
                (2000 * MS, 2500 * MS),
                (8000 * MS, 9500 * MS),
                (20000 * MS, 21000 * MS)
            ]
        );

        let d = SimDriver::from_target(&Target::parse("sim:?latency=fixed:1ms").unwrap()).unwrap();
        assert_eq!(d.endpoint(), "sim");
        assert_eq!(d.description, "latency=fixed:1ms");
        assert!(!d.shared.trivial);
        let d = SimDriver::from_target(&Target::parse("sim:").unwrap()).unwrap();
        assert!(d.shared.trivial);
        assert_eq!(d.description, "");
    }

    #[test]
    fn a_slow_start_falls_linearly_to_the_set_service_time() {
        let m = model("sim://?latency=fixed:1ms&slowstart=4s");
        assert_eq!(m.slowed(0, MS), 5 * MS);
        assert_eq!(m.slowed(2_000 * MS, MS), 3 * MS);
        assert_eq!(m.slowed(4_000 * MS, MS), MS);
        assert_eq!(m.slowed(9_000 * MS, MS), MS);
        assert!(!m.is_trivial());
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        let err = |url: &str| config(url).unwrap_err();
        let e = err("sim://?latncy=fixed:1ms");
        assert!(e.contains("unknown parameter 'latncy'"), "{e}");
        assert!(e.contains("latency, stall, concurrency"), "{e}");
        let e = err("sim://?latency=gamma:1ms");
        assert!(e.contains("unknown distribution 'gamma'"), "{e}");
        assert!(e.contains("uniform:A:B"), "{e}");
        let e = err("sim://?latency=fixed:2");
        assert!(e.contains("needs a unit"), "{e}");
        let e = err("sim://?latency=uniform:3ms:1ms");
        assert!(e.contains("A must not be greater than B"), "{e}");
        let e = err("sim://?latency=uniform:1ms");
        assert!(e.contains("uniform takes 2 value(s): uniform:A:B"), "{e}");
        let e = err("sim://?latency=lognormal:2ms:x");
        assert!(e.contains("SIGMA 'x' is not a number"), "{e}");
        let e = err("sim://?latency=lognormal:2ms:-1");
        assert!(e.contains("SIGMA must be between 0 and 10"), "{e}");
        let e = err("sim://?latency=bimodal:1ms:9ms:1.5");
        assert!(e.contains("between 0 and 1"), "{e}");
        let e = err("sim://?latency=");
        assert!(e.contains("latency '': empty"), "{e}");
        let e = err("sim://?record=");
        assert!(e.contains("record needs a file name"), "{e}");
        let e = SimDriver::from_target(&Target::parse("sim:?record=/no/such/dir/x").unwrap())
            .unwrap_err();
        assert!(e.starts_with("record=/no/such/dir/x: "), "{e}");
        let e = err("sim://?stall=1s");
        assert!(e.contains("stall '1s': expected DUR@AT"), "{e}");
        assert!(e.contains("stall=1s@5s"), "{e}");
        let e = err("sim://?stall=0s@1s");
        assert!(e.contains("longer than 0"), "{e}");
        let e = err("sim://?stall=1s@5");
        assert!(e.contains("'5' needs a unit"), "{e}");
        let e = err("sim://?concurrency=0");
        assert!(e.contains("concurrency 0 is out of range"), "{e}");
        let e = err("sim://?concurrency=lots");
        assert!(e.contains("whole number"), "{e}");
        let e = err("sim://?concurrency=1&concurrency=2");
        assert!(e.contains("'concurrency' is given twice"), "{e}");
        let e = err("sim://somehost?latency=fixed:1ms");
        assert!(e.contains("remove the host 'somehost'"), "{e}");
        let e = err("sim://u:p@somehost:5/");
        assert!(e.contains("remove the host 'somehost'"), "{e}");
        let e = err("sim:/db");
        assert!(e.contains("unexpected path '/db'"), "{e}");
    }

    #[test]
    fn one_slot_serves_simultaneous_requests_in_turn() {
        // concurrency=1, fixed:10ms: three requests arriving together end
        // at 10, 20 and 30 ms.
        let m = model("sim://?latency=fixed:10ms&concurrency=1");
        let mut times = [10 * MS; 3];
        m.admit(0, &mut times);
        assert_eq!(times, [10 * MS, 20 * MS, 30 * MS]);
        // The same from three connections, one request each.
        let m = model("sim://?latency=fixed:10ms&concurrency=1");
        let ends: Vec<u64> = (0..3)
            .map(|_| {
                let mut t = [10 * MS];
                m.admit(0, &mut t);
                t[0]
            })
            .collect();
        assert_eq!(ends, [10 * MS, 20 * MS, 30 * MS]);
        // A request arriving once the queue has drained starts at once.
        let mut t = [10 * MS];
        m.admit(100 * MS, &mut t);
        assert_eq!(t, [110 * MS]);
    }

    #[test]
    fn slots_are_taken_first_free_first() {
        let m = model("sim://?latency=fixed:10ms&concurrency=2");
        let mut times = [10 * MS; 5];
        m.admit(0, &mut times);
        assert_eq!(times, [10 * MS, 10 * MS, 20 * MS, 20 * MS, 30 * MS]);
        // Arriving at 25 ms: one slot is free (since 20), one busy to 30.
        let mut t = [10 * MS; 2];
        m.admit(25 * MS, &mut t);
        assert_eq!(t, [35 * MS, 40 * MS]);
        // Unlimited: all in parallel.
        let m = model("sim://?latency=fixed:10ms");
        let mut times = [10 * MS; 3];
        m.admit(5 * MS, &mut times);
        assert_eq!(times, [15 * MS; 3]);
    }

    #[test]
    fn stalls_push_work_past_them() {
        let m = model("sim://?stall=1s@5s");
        // Before, inside, across the start of, and after the stall.
        assert_eq!(m.finish(1000 * MS, MS), 1001 * MS);
        assert_eq!(m.finish(5200 * MS, MS), 6001 * MS);
        assert_eq!(m.finish(5200 * MS, 0), 6000 * MS);
        assert_eq!(m.finish(4999 * MS, 3 * MS), 6002 * MS);
        assert_eq!(m.finish(4995 * MS, 5 * MS), 4995 * MS + 5 * MS);
        assert_eq!(m.finish(6000 * MS, MS), 6001 * MS);
        // Work spanning two stalls is paused by both.
        let m = model("sim://?stall=100ms@1s,100ms@2s");
        assert_eq!(m.finish(900 * MS, 1500 * MS), 2600 * MS);
        // Queued work waits for the stall too.
        let m = model("sim://?latency=fixed:10ms&concurrency=1&stall=1s@15ms");
        let mut times = [10 * MS; 3];
        m.admit(0, &mut times);
        assert_eq!(times, [10 * MS, 1020 * MS, 1030 * MS]);
    }

    #[test]
    fn distributions_have_their_quantiles() {
        fn quantiles(l: &str, qs: &[f64]) -> Vec<f64> {
            let m = model(&format!("sim://?latency={l}"));
            let mut rng = SplitMix64(42);
            let mut v: Vec<u64> = (0..200_000).map(|_| m.latency.sample(&mut rng)).collect();
            v.sort_unstable();
            qs.iter()
                .map(|q| v[(q * v.len() as f64) as usize] as f64 / 1e6)
                .collect()
        }
        let close = |got: &[f64], want: &[f64], tol: f64| {
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() <= tol * w, "got {got:?}, want {want:?}");
            }
        };
        close(
            &quantiles("uniform:1ms:3ms", &[0.5, 0.9, 0.99]),
            &[2.0, 2.8, 2.98],
            0.005,
        );
        // exp(0.5 * z) for z at 0.5, 0.9 and 0.99: 1.2816, 2.3263.
        close(
            &quantiles("lognormal:2ms:0.5", &[0.5, 0.9, 0.99]),
            &[
                2.0,
                2.0 * (0.5f64 * 1.2816).exp(),
                2.0 * (0.5f64 * 2.3263).exp(),
            ],
            0.02,
        );
        close(
            &quantiles("bimodal:1ms:9ms:0.1", &[0.5, 0.89, 0.91]),
            &[1.0, 1.0, 9.0],
            0.0,
        );
        assert_eq!(quantiles("fixed:2ms", &[0.0, 0.99]), vec![2.0, 2.0]);
        assert!(model("sim://?latency=uniform:0:0").is_trivial());
        assert!(!model("sim://?latency=uniform:0:1us").is_trivial());
        assert!(!model("sim://?concurrency=4").is_trivial());
        assert!(!model("sim://?stall=1s@1s").is_trivial());
    }

    fn driver(url: &str) -> SimDriver {
        SimDriver::from_target(&Target::parse(url).unwrap()).unwrap()
    }

    #[test]
    fn zero_latency_flush_never_waits() {
        use std::future::Future;
        use std::pin::pin;
        use std::task::{Context, Poll, Waker};

        let d = driver("sim:");
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Ok(mut conn)) = pin!(d.connect()).poll(&mut cx) else {
            panic!("connect is immediate")
        };
        for round in 0..3 {
            conn.queue_get(b"k");
            conn.queue_set(b"k", b"v");
            conn.queue_command(&[b"hset", b"k", b"f", b"v"]).unwrap();
            let mut got = Vec::new();
            let mut on_reply = |at: ReplyAt, r: Result<KvReply<'_>, DriverError>| {
                // Answered at once, as if in one read.
                assert_eq!(at.read, 0);
                got.push((at.index, r.unwrap() == KvReply::Done));
            };
            let poll = pin!(conn.flush(&mut on_reply)).poll(&mut cx);
            assert!(matches!(poll, Poll::Ready(Ok(()))), "round {round}");
            assert_eq!(got, [(0, false), (1, true), (2, true)]);
            assert!(conn.queue.is_empty());
        }
        let Poll::Ready(Ok(info)) = pin!(d.server_info(&mut conn)).poll(&mut cx) else {
            panic!("server_info is immediate")
        };
        assert_eq!(info.product, "loadcell-sim");
    }

    #[test]
    fn flushes_wait_for_the_modelled_completions() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        // Three requests on three connections to a server that serves one
        // at a time: done at 10, 20 and 30 ms, never earlier. Later only by
        // scheduling noise, which a busy machine can stretch past the 5 ms
        // allowed: then the attempt is repeated, up to three times.
        let mut attempts = Vec::new();
        for _ in 0..3 {
            let ends = rt.block_on(async {
                let d = driver("sim:?latency=fixed:10ms&concurrency=1");
                let mut conns = Vec::new();
                for _ in 0..3 {
                    conns.push(d.connect().await.unwrap());
                }
                let start = Instant::now();
                let flush = |mut c: SimConn| async move {
                    c.queue_get(b"k");
                    let mut hit = false;
                    c.flush(&mut |_, r| hit = matches!(r, Ok(KvReply::Hit(VALUE))))
                        .await
                        .unwrap();
                    assert!(hit);
                    start.elapsed()
                };
                let mut it = conns.into_iter();
                let (a, b, c) = tokio::join!(
                    flush(it.next().unwrap()),
                    flush(it.next().unwrap()),
                    flush(it.next().unwrap())
                );
                let mut ends = [a, b, c];
                ends.sort();
                ends
            });
            let wants = [10u64, 20, 30].map(Duration::from_millis);
            for (end, want) in ends.iter().zip(wants) {
                assert!(*end >= want, "a reply came early: {ends:?}");
            }
            if ends
                .iter()
                .zip(wants)
                .all(|(end, want)| *end < want + Duration::from_millis(5))
            {
                return;
            }
            attempts.push(ends);
        }
        panic!("later than 10, 20 and 30 ms by 5 ms or more, three times: {attempts:?}");
    }

    #[test]
    fn record_holds_each_request_as_it_was_served() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("served.txt");
        // Lines already there are kept: the file is appended to.
        std::fs::write(&path, "1 2\n").unwrap();
        let url = format!("sim:?latency=fixed:2ms&record={}", path.display());
        let d = driver(&url);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let (a, b, first, second) = rt.block_on(async {
            let mut a = d.connect().await.unwrap();
            let mut b = d.connect().await.unwrap();
            let start = Instant::now();
            for _ in 0..3 {
                a.queue_get(b"k");
            }
            a.flush(&mut |_, r| assert!(r.is_ok())).await.unwrap();
            let first = start.elapsed();
            b.queue_set(b"k", b"v");
            b.flush(&mut |_, r| assert!(r.is_ok())).await.unwrap();
            let second = start.elapsed();
            (a, b, first, second)
        });
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "1 2\n",
            "written at close"
        );
        drop(a);
        drop(b);
        let text = std::fs::read_to_string(&path).unwrap();
        let served: Vec<(u64, u64)> = text
            .lines()
            .skip(1)
            .map(|l| {
                let (a, c) = l.split_once(' ').unwrap();
                (a.parse().unwrap(), c.parse().unwrap())
            })
            .collect();
        assert_eq!(served.len(), 4, "{text}");
        // Pipelined requests arrive together, each done 2 ms later (the
        // clock's reading when its reply was delivered, so never early),
        // and no later than the caller saw the flush end.
        for &(arrival, completion) in &served {
            assert!(completion - arrival >= 2 * MS, "{served:?}");
        }
        assert!(served[..3].iter().all(|s| s.0 == served[0].0));
        assert!(
            served[2].1 <= first.as_nanos() as u64 + served[0].0,
            "{served:?} {first:?}"
        );
        assert!(
            served[3].0 >= served[2].1 && served[3].1 - served[0].0 <= second.as_nanos() as u64
        );
        // Recording reads the clock, so even a zero-latency server is not
        // the trivial one.
        let url = format!("sim:?record={}", path.display());
        assert!(!driver(&url).shared.trivial);
    }

    #[test]
    fn pipelined_replies_come_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let d = driver("sim:?latency=uniform:1ms:5ms");
            let mut c = d.connect().await.unwrap();
            for _ in 0..20 {
                c.queue_set(b"k", b"v");
            }
            let start = Instant::now();
            let mut seen = Vec::new();
            c.flush(&mut |at, _| seen.push((at, start.elapsed())))
                .await
                .unwrap();
            assert_eq!(seen.len(), 20);
            // In order, each at its own time, so each in a read of its own.
            assert!(seen.windows(2).all(|w| w[0].0.index + 1 == w[1].0.index
                && w[0].0.read != w[1].0.read
                && w[0].1 <= w[1].1));
            let last = seen[19].1;
            assert!(
                last >= Duration::from_millis(1) && last < Duration::from_millis(10),
                "{last:?}"
            );
        });
    }
}
