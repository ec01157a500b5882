//! Redis (and protocol-compatible servers: Valkey, KeyDB), standalone or
//! Redis Cluster, over a hand-written RESP2 client built for the hot path.
//!
//! Targets:
//! - `redis://[user:pass@]host:port[/db]` — plaintext; `:pass@` sends
//!   `AUTH pass`, `user:pass@` sends `AUTH user pass`; `/db` sends `SELECT db`.
//! - `rediss://…` — the same over TLS; `sslmode` defaults to `verify-full`
//!   (`require` skips the certificate checks, `verify-ca` the host name),
//!   `sslrootcert=PATH` names the CA file (see `tls.rs`).
//! - `redis+cluster://host:port[,host:port…]` — a Redis Cluster reached
//!   through any of the seeds; `?sslmode=require|verify-ca|verify-full`
//!   turns TLS on for every node. Database 0 only.
//!
//! - `?claim_idle=DURATION` (Redis Streams, [`streams`]): how long a row
//!   delivered to a consumer may stay unacknowledged before another
//!   consumer of the group claims it (XAUTOCLAIM); default 5s.
//!
//! Defaults: host 127.0.0.1, port 6379, no password, database 0.
//!
//! ## The hot path
//!
//! Requests are encoded straight into a reused write buffer (RESP2 arrays of
//! bulk strings, lengths formatted on the stack); a flush is one `write`
//! (per node, for a cluster) and replies are parsed in place from a reused
//! read buffer, a value reaching the caller as a slice of it. Nothing is
//! allocated per request or per reply, except the message of an error
//! reply. Reads go through `poll_read`, which clears the socket's readiness
//! after a short read, so a request/response costs one `write`, one
//! `epoll_wait` and one `read` (`readable()` + `try_read` would keep the
//! readiness and pay an extra `read` returning EAGAIN every time).
//!
//! The reply parser is our own: `redis-protocol`'s borrowed decoder
//! (`decode_range`) still allocates a `Vec` per array and pulls in `nom`,
//! and we only need to find the end of each reply and classify it — a GET's
//! bulk string, a miss, `+OK`, an error — with array contents skipped.
//!
//! ## Cluster
//!
//! `connect` reads `CLUSTER SLOTS` from the first seed that answers and
//! opens one connection per master. Each queued request goes into the
//! buffer of the node owning CRC16(key or `{hash tag}`) % 16384, the key
//! being the first argument after the command name (a command without
//! arguments goes to the first node). A flush writes to every involved node
//! and reads their replies concurrently: **`on_reply` gets each request's
//! original queue index, but replies from different nodes may arrive in any
//! order** (in order within a node). `-MOVED slot host:port` updates the
//! slot map (connecting to a new node if needed) and resends the request;
//! `-ASK slot host:port` resends it to that node preceded by `ASKING`,
//! leaving the map alone. After 5 rounds of redirections a request fails as
//! retryable. A lost node fails the flush with a connection error; the
//! session reconnects and re-reads the slot map.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use loadcell_core::kv::{KvCapabilities, KvConn, OnReply};
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, ServerSettings, Target};
use rustls::ClientConfig;

use crate::transport::io_error::unresolved_host;
use crate::transport::peer::{self, Awaiting, Progress};
use crate::transport::target_url::{Query, UrlParts};
use crate::transport::tls::{self, SslMode};
use crate::transport::url_text::{self, endpoint};
use crate::{DriverInfo, Family};

mod cluster;
mod link;
mod resp;
pub mod streams;
#[cfg(test)]
mod tests;

pub use cluster::hash_slot;
use cluster::*;
use link::*;
use resp::*;

pub const INFO: DriverInfo = DriverInfo {
    name: "redis",
    schemes: &["redis", "rediss", "redis+cluster"],
    family: Family::KV,
    url_form:
        "redis://[user:pass@]host:port[/db] | rediss://… | redis+cluster://host:port[,host:port…]",
    about: "Redis, Valkey and KeyDB, standalone or Redis Cluster (RESP2, pipelined)",
    kv: KvCapabilities { commands: true },
    blocking: false,
};

const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_PORT: u16 = 6379;
const PARAMS: &[&str] = &["sslmode", "sslrootcert", "claim_idle"];
/// How long a stream row may stay unacknowledged before another consumer
/// claims it, unless the target says otherwise.
const DEFAULT_CLAIM_IDLE: std::time::Duration = std::time::Duration::from_secs(5);
/// Number of hash slots in a Redis Cluster.
pub const SLOTS: usize = 16384;
/// Rounds of MOVED/ASK redirections one flush follows.
const MAX_REDIRECT_ROUNDS: usize = 5;
/// Initial size of a connection's read buffer; it grows for large replies.
const READ_BUF: usize = 32 * 1024;
/// Longest status/error/length line accepted.
const MAX_LINE: usize = 1 << 20;
/// Largest bulk string accepted (Redis' own limit is 512 MB).
const MAX_BULK: i64 = 1 << 30;

// ---------------------------------------------------------------------------
// Target URL

/// Connection settings parsed from a target URL (no secrets in `Debug`).
#[derive(Clone, PartialEq, Eq)]
struct Settings {
    /// One entry, or the seeds of a cluster.
    hosts: Vec<(String, u16)>,
    cluster: bool,
    user: Option<String>,
    password: Option<String>,
    db: Option<u32>,
    sslmode: SslMode,
    sslrootcert: Option<PathBuf>,
    claim_idle: std::time::Duration,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("hosts", &self.hosts)
            .field("cluster", &self.cluster)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("claim_idle", &self.claim_idle)
            .finish()
    }
}

fn parse_target(target: &Target) -> Result<Settings, String> {
    let scheme = target.scheme();
    let cluster = scheme == "redis+cluster";
    let mut query = Query::parse(target.url(), PARAMS)?;
    let claim_idle = query.take_parsed("claim_idle", |value| {
        humantime::parse_duration(value)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("claim_idle '{value}' is not a duration above zero (e.g. 5s)"))
    })?;
    let (sslmode, sslrootcert) = tls::take_params(&mut query)?;
    let parts = UrlParts::parse(target, DEFAULT_PORT)?;
    let hosts = if cluster {
        parts.hosts_or(DEFAULT_HOST)
    } else {
        let one = parts.one_host(DEFAULT_HOST).map_err(|e| {
            format!("{e}; for a Redis Cluster use redis+cluster://host:port,host:port")
        })?;
        vec![one]
    };
    if parts.user.is_some() && parts.password.is_none() {
        return Err(
            "a user needs a password (redis://user:pass@host); for the default user write redis://:pass@host"
                .to_string(),
        );
    }
    let db = match parts.path.trim_matches('/') {
        "" => None,
        p => Some(p.parse::<u32>().map_err(|_| {
            format!("the path must be a database number (redis://host:port/0), got '{p}'")
        })?),
    };
    if cluster && db.unwrap_or(0) != 0 {
        return Err("a Redis Cluster has only database 0: remove the /db from the URL".to_string());
    }
    let sslmode = match (scheme, sslmode) {
        (_, Some(SslMode::Prefer)) => {
            return Err(
                "Redis has no TLS negotiation, so sslmode=prefer cannot work: use rediss:// \
                 (TLS) or redis:// (plaintext)"
                    .to_string(),
            )
        }
        ("rediss", None) => SslMode::VerifyFull,
        ("rediss", Some(SslMode::Disable)) => {
            return Err("rediss:// means TLS: use redis:// for plaintext".to_string())
        }
        ("redis", Some(m)) if m != SslMode::Disable => {
            return Err(format!(
                "redis:// is plaintext: use rediss://…?sslmode={} for TLS",
                m.as_str()
            ))
        }
        (_, m) => m.unwrap_or(SslMode::Disable),
    };
    Ok(Settings {
        hosts,
        cluster,
        user: parts.user,
        password: parts.password,
        db: db.filter(|&d| d != 0),
        sslmode,
        sslrootcert,
        claim_idle: claim_idle.unwrap_or(DEFAULT_CLAIM_IDLE),
    })
}

// ---------------------------------------------------------------------------
// Driver

/// What every connection of a target needs.
struct Shared {
    settings: Settings,
    tls: Option<Arc<ClientConfig>>,
    /// `host:port`, or the seed list of a cluster.
    endpoint: String,
}

/// A Redis target; makes connections, shares nothing mutable.
pub struct RedisDriver {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RedisDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisDriver")
            .field("settings", &self.shared.settings)
            .finish_non_exhaustive()
    }
}

impl RedisDriver {
    /// Parses the target and reads any TLS files; makes no connection.
    pub fn from_target(target: &Target) -> Result<RedisDriver, String> {
        let settings = parse_target(target)?;
        let tls = tls::client_config(settings.sslmode, settings.sslrootcert.as_deref())?;
        let endpoint = url_text::endpoints(&settings.hosts);
        Ok(RedisDriver {
            shared: Arc::new(Shared {
                settings,
                tls,
                endpoint,
            }),
        })
    }

    async fn connect_cluster(&self, progress: &Progress) -> Result<Cluster, DriverError> {
        let shared = &self.shared;
        let mut last_err = None;
        for (host, port) in &shared.settings.hosts {
            let mut link = match Link::open(host, *port, shared, progress).await {
                Ok(l) => l,
                Err(e) if e.class == ErrorClass::Connection => {
                    last_err = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            // A seed that drops the connection or answers with a transient
            // error (LOADING, CLUSTERDOWN, max clients) leaves the others
            // to try.
            progress.set(link.awaiting("Redis reply to CLUSTER SLOTS", "reply to CLUSTER SLOTS"));
            let slots = match link.call(&[b"CLUSTER", b"SLOTS"], Phase::Connect).await {
                Ok(v) => v,
                Err(e) if e.class == ErrorClass::Connection => {
                    last_err = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let ranges = match slots {
                Value::Error(text) if text.contains("cluster support disabled") => {
                    return Err(DriverError::fatal(format!(
                        "{} is not a Redis Cluster node (cluster_enabled:0): use redis://",
                        link.ep
                    )))
                }
                Value::Error(text) => match reply_error(text.as_bytes(), &link.ep) {
                    e if e.class == ErrorClass::Fatal => return Err(e),
                    e => {
                        last_err = Some(e);
                        continue;
                    }
                },
                v => parse_cluster_slots(&v, host).map_err(|why| {
                    DriverError::fatal(format!(
                        "unexpected CLUSTER SLOTS reply from {}: {why}",
                        link.ep
                    ))
                })?,
            };
            // Connections to the other nodes.
            progress.set(Awaiting::Connection);
            return Cluster::build(Arc::clone(shared), (host.clone(), *port), link, ranges).await;
        }
        Err(last_err.unwrap_or_else(|| DriverError::fatal("no cluster seed in the target")))
    }
}

impl RedisDriver {
    /// A connection whose server has answered as Redis: AUTH and SELECT
    /// when the target asks for them, else PING, is its first command.
    async fn open(&self, progress: &Progress) -> Result<RedisConn, DriverError> {
        if self.shared.settings.cluster {
            let cluster = self.connect_cluster(progress).await?;
            return Ok(RedisConn {
                inner: Inner::Cluster(Box::new(cluster)),
                consumer: None,
                claim_idle: self.shared.settings.claim_idle,
            });
        }
        let (host, port) = &self.shared.settings.hosts[0];
        let mut link = Link::open(host, *port, &self.shared, progress).await?;
        if !link.answered {
            progress.set(link.awaiting("Redis reply to PING", "reply to PING"));
            if let Value::Error(text) = link.call(&[b"PING"], Phase::Connect).await? {
                // Any error reply proves the server speaks RESP. Only one
                // that would stop every command (a password needed, max
                // clients, loading) fails the connect, not a PING renamed
                // or denied to the user.
                let e = reply_error(text.as_bytes(), &link.ep);
                if e.class != ErrorClass::Fatal || e.code.as_deref() == Some("NOAUTH") {
                    return Err(e);
                }
            }
        }
        Ok(RedisConn {
            inner: Inner::Single(Single {
                link,
                wbuf: Vec::with_capacity(8 * 1024),
                queued: 0,
                dirty: false,
            }),
            consumer: None,
            claim_idle: self.shared.settings.claim_idle,
        })
    }
}

impl Driver for RedisDriver {
    type Conn = RedisConn;

    fn endpoint(&self) -> String {
        self.shared.endpoint.clone()
    }

    async fn connect(&self) -> Result<RedisConn, DriverError> {
        self.open(&Progress::new()).await
    }

    async fn connect_within(&self, timeout: std::time::Duration) -> Result<RedisConn, DriverError> {
        let progress = Progress::new();
        let ep = &self.shared.endpoint;
        peer::within(timeout, ep, "Redis", &progress, self.open(&progress)).await
    }

    async fn server_info(&self, conn: &mut RedisConn) -> Result<ServerInfo, DriverError> {
        let link = match &mut conn.inner {
            Inner::Single(s) => &mut s.link,
            Inner::Cluster(c) => &mut c.nodes[0].link,
        };
        match link.call(&[b"INFO", b"server"], Phase::Use).await? {
            Value::Bulk(text) => Ok(server_info_of(&String::from_utf8_lossy(&text))),
            Value::Error(text) => Err(reply_error(text.as_bytes(), &link.ep)),
            _ => Err(DriverError::fatal(format!(
                "unexpected reply to INFO from {}",
                link.ep
            ))),
        }
    }

    /// `INFO` of every node, summed (a cluster's nodes share the load).
    async fn server_counters(
        &self,
        conn: &mut RedisConn,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        let links: Vec<&mut Link> = match &mut conn.inner {
            Inner::Single(s) => vec![&mut s.link],
            Inner::Cluster(c) => c.nodes.iter_mut().map(|n| &mut n.link).collect(),
        };
        let mut sums: Vec<(String, f64)> = Vec::new();
        for link in links {
            let text = match link.call(&[b"INFO"], Phase::Use).await? {
                Value::Bulk(text) => String::from_utf8_lossy(&text).into_owned(),
                Value::Error(text) => return Err(reply_error(text.as_bytes(), &link.ep)),
                _ => continue,
            };
            for (name, value) in info_counters(&text) {
                match sums.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, v)) => *v += value,
                    None => sums.push((name, value)),
                }
            }
        }
        Ok(sums)
    }

    /// `CONFIG GET *` and `INFO` of the first node.
    async fn server_settings(&self, conn: &mut RedisConn) -> Result<ServerSettings, DriverError> {
        let link = match &mut conn.inner {
            Inner::Single(s) => &mut s.link,
            Inner::Cluster(c) => &mut c.nodes[0].link,
        };
        let settings = match link.call(&[b"CONFIG", b"GET", b"*"], Phase::Use).await? {
            Value::Array(items) => {
                let text = |v: &Value| match v {
                    Value::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                    Value::Simple(s) => s.clone(),
                    _ => String::new(),
                };
                items
                    .chunks_exact(2)
                    .map(|pair| (text(&pair[0]), text(&pair[1])))
                    .collect()
            }
            Value::Error(text) => return Err(reply_error(text.as_bytes(), &link.ep)),
            _ => BTreeMap::new(),
        };
        let status = match link.call(&[b"INFO", b"all"], Phase::Use).await? {
            Value::Bulk(text) => String::from_utf8_lossy(&text)
                .lines()
                .filter_map(|l| {
                    let (name, value) = l.trim().split_once(':')?;
                    Some((name.to_string(), value.to_string()))
                })
                .collect(),
            Value::Error(text) => return Err(reply_error(text.as_bytes(), &link.ep)),
            _ => BTreeMap::new(),
        };
        Ok(ServerSettings { settings, status })
    }
}

/// The counters worth sampling from `INFO`: monotonic ones get `_total`.
fn info_counters(info: &str) -> Vec<(String, f64)> {
    const TOTALS: &[&str] = &[
        "total_commands_processed",
        "keyspace_hits",
        "keyspace_misses",
        "expired_keys",
        "evicted_keys",
        "total_net_input_bytes",
        "total_net_output_bytes",
        "total_connections_received",
    ];
    const GAUGES: &[&str] = &[
        "connected_clients",
        "used_memory",
        "used_memory_rss",
        "instantaneous_ops_per_sec",
        "mem_fragmentation_ratio",
    ];
    info.lines()
        .filter_map(|l| {
            let (name, value) = l.trim().split_once(':')?;
            let v: f64 = value.trim().parse().ok()?;
            if TOTALS.contains(&name) {
                Some((format!("{name}_total"), v))
            } else if GAUGES.contains(&name) {
                Some((name.to_string(), v))
            } else {
                None
            }
        })
        .collect()
}

/// Product and version from `INFO server`.
fn server_info_of(info: &str) -> ServerInfo {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    };
    let redis_version = field("redis_version").unwrap_or_default();
    if let Some(v) = field("valkey_version") {
        return ServerInfo::new("Valkey", v);
    }
    let lower = info.to_ascii_lowercase();
    let product = if field("server_name").is_some_and(|n| n.eq_ignore_ascii_case("valkey")) {
        "Valkey"
    } else if lower.contains("keydb") {
        "KeyDB"
    } else {
        "Redis"
    };
    ServerInfo::new(product, redis_version)
}

// ---------------------------------------------------------------------------
// Errors

/// The leading all-caps word of an error reply (`WRONGTYPE`, `ERR`) and the
/// rest of the message.
fn split_code(text: &str) -> (&str, &str) {
    match text.split_once(' ') {
        Some((code, rest))
            if !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') =>
        {
            (code, rest.trim())
        }
        _ => ("ERR", text.trim()),
    }
}

/// An error reply to a request.
fn reply_error(text: &[u8], ep: &str) -> DriverError {
    let text = String::from_utf8_lossy(text);
    let (code, msg) = split_code(&text);
    match code {
        "NOAUTH" => DriverError::fatal(format!(
            "authentication failed at {ep}: the server requires a password; check the user and \
             password in --target"
        ))
        .with_code(code),
        "WRONGPASS" => auth_error(&text, ep),
        "ERR" if msg.starts_with("invalid password") => auth_error(&text, ep),
        // Sent on accept when maxclients is reached, then the connection is
        // closed: a reconnect with backoff may get in.
        "ERR" if msg.starts_with("max number of clients reached") => {
            DriverError::connection(format!("{msg} (at {ep})")).with_code(code)
        }
        "LOADING" | "BUSY" | "TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN" => {
            DriverError::retryable(format!("{msg} (at {ep})")).with_code(code)
        }
        "MOVED" | "ASK" => DriverError::fatal(format!(
            "{ep} is a Redis Cluster node (it answered {code} {msg}): use redis+cluster://"
        ))
        .with_code(code),
        _ => DriverError::fatal(msg.to_string()).with_code(code),
    }
}

/// A failed AUTH. Redis never echoes the password, and neither do we.
fn auth_error(text: &str, ep: &str) -> DriverError {
    let (code, msg) = split_code(text);
    let hint = if msg.contains("without any password configured") || msg.contains("no password") {
        " (the server has no password set)"
    } else {
        ""
    };
    DriverError::fatal(format!(
        "authentication failed at {ep}: check the user and password in --target{hint}"
    ))
    .with_code(code)
}

fn protocol_error(ep: &str, why: &str) -> DriverError {
    DriverError::fatal(format!(
        "{ep} sent a reply that is not RESP2 ({why}): is it a Redis server?"
    ))
}

fn io_error(e: &io::Error, ep: &str, phase: Phase) -> DriverError {
    if let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        let text = tls.to_string();
        if phase == Phase::Connect {
            let hint = if text.contains("UnknownIssuer") || text.contains("unknown issuer") {
                " (pass the CA certificate with sslrootcert=PATH, or use sslmode=require)"
            } else if text.contains("NotValidForName") || text.contains("not valid for name") {
                " (connect by a name the certificate lists, or use sslmode=verify-ca)"
            } else if text.contains("corrupt message") || text.contains("InvalidContentType") {
                " (is TLS enabled on the server? use redis:// for plaintext)"
            } else {
                ""
            };
            return DriverError::fatal(format!("TLS handshake with {ep} failed: {text}{hint}"));
        }
        return DriverError::connection(format!("connection to {ep} lost: TLS error: {text}"));
    }
    if let Some(unresolved) = unresolved_host(e, ep) {
        return unresolved;
    }
    let text = e.to_string();
    let what = match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            return DriverError::connection(format!(
                "cannot connect to {ep}: connection refused (is the server running?)"
            ))
        }
        io::ErrorKind::TimedOut => "timed out".to_string(),
        io::ErrorKind::ConnectionReset => "connection reset by the server".to_string(),
        io::ErrorKind::ConnectionAborted => "connection aborted".to_string(),
        io::ErrorKind::BrokenPipe => "the server closed the connection (broken pipe)".to_string(),
        io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
        _ => text,
    };
    match phase {
        Phase::Connect => DriverError::connection(format!("cannot connect to {ep}: {what}")),
        Phase::Use => DriverError::connection(format!("connection to {ep} lost: {what}")),
    }
}

fn interrupted(ep: &str) -> DriverError {
    DriverError::connection(format!(
        "connection to {ep} is in an unknown state: a previous request was interrupted"
    ))
}

// ---------------------------------------------------------------------------
// Sessions

/// One session's connection: to one server, or to every master of a cluster.
pub struct RedisConn {
    inner: Inner,
    /// What [`streams`]' `subscribe` made of this connection.
    consumer: Option<Box<streams::Consumer>>,
    /// The target's `claim_idle`, for `subscribe`.
    claim_idle: std::time::Duration,
}

enum Inner {
    Single(Single),
    Cluster(Box<Cluster>),
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Inner::Single(s) => write!(f, "RedisConn({})", s.link.ep),
            Inner::Cluster(c) => {
                let eps: Vec<&str> = c.nodes.iter().map(|n| &*n.link.ep).collect();
                write!(f, "RedisConn(cluster {})", eps.join(","))
            }
        }
    }
}

impl RedisConn {
    /// For a cluster: `host:port` of every node this session is connected
    /// to, in the order they were found. One entry for a standalone server.
    pub fn nodes(&self) -> Vec<String> {
        match &self.inner {
            Inner::Single(s) => vec![s.link.ep.to_string()],
            Inner::Cluster(c) => c.nodes.iter().map(|n| n.link.ep.to_string()).collect(),
        }
    }
}

struct Single {
    link: Link,
    wbuf: Vec<u8>,
    queued: usize,
    /// A flush is under way (or was cancelled midway: replies may be pending).
    dirty: bool,
}

impl Single {
    async fn flush(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError> {
        self.exchange(|link, i, reply| {
            let received = link.rbuf.received();
            let answer = match reply {
                Reply::Error(s) => Err(reply_error(&received[s.start..s.end], &link.ep)),
                reply => Ok(kv_reply(reply, received)),
            };
            on_reply(link.rbuf.reply_at(i), answer);
        })
        .await
    }

    /// Sends the queued requests and hands each reply, in order, to `each`
    /// with its index and the link whose read buffer holds it.
    async fn exchange(
        &mut self,
        mut each: impl FnMut(&Link, usize, Reply),
    ) -> Result<(), DriverError> {
        let n = std::mem::take(&mut self.queued);
        if n == 0 {
            return Ok(());
        }
        if self.dirty {
            self.wbuf.clear();
            return Err(interrupted(&self.link.ep));
        }
        self.dirty = true;
        let written = self.link.stream.send(&self.wbuf).await;
        self.wbuf.clear();
        if let Err(e) = written {
            return Err(self.link.io_error(&e));
        }
        let mut i = 0;
        while i < n {
            match self.link.next_reply()? {
                Some(reply) => {
                    each(&self.link, i, reply);
                    i += 1;
                }
                None => self.link.fill().await?,
            }
        }
        self.dirty = false;
        Ok(())
    }
}

impl KvConn for RedisConn {
    #[inline]
    fn queue_get(&mut self, key: &[u8]) {
        match &mut self.inner {
            Inner::Single(s) => {
                encode_get(&mut s.wbuf, key);
                s.queued += 1;
            }
            Inner::Cluster(c) => c.queue(Some(key), |b| encode_get(b, key)),
        }
    }

    #[inline]
    fn queue_set(&mut self, key: &[u8], value: &[u8]) {
        match &mut self.inner {
            Inner::Single(s) => {
                encode_set(&mut s.wbuf, key, value);
                s.queued += 1;
            }
            Inner::Cluster(c) => c.queue(Some(key), |b| encode_set(b, key, value)),
        }
    }

    fn queue_delete(&mut self, key: &[u8]) {
        let args: [&[u8]; 2] = [b"DEL", key];
        match &mut self.inner {
            Inner::Single(s) => {
                encode_command(&mut s.wbuf, &args);
                s.queued += 1;
            }
            Inner::Cluster(c) => c.queue(Some(key), |b| encode_command(b, &args)),
        }
    }

    fn queue_command(&mut self, args: &[&[u8]]) -> Result<(), DriverError> {
        if args.is_empty() {
            return Err(DriverError::fatal("empty Redis command"));
        }
        match &mut self.inner {
            Inner::Single(s) => {
                encode_command(&mut s.wbuf, args);
                s.queued += 1;
            }
            Inner::Cluster(c) => c.queue(args.get(1).copied(), |b| encode_command(b, args)),
        }
        Ok(())
    }

    async fn flush(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError> {
        match &mut self.inner {
            Inner::Single(s) => s.flush(on_reply).await,
            Inner::Cluster(c) => c.flush(on_reply).await,
        }
    }
}
