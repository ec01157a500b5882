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

use std::future::poll_fn;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::task::{Context, Poll};

use loadcell_core::kv::{KvArray, KvCapabilities, KvConn, KvReply, OnReply, ReplyAt};
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, Target};
use rustls::ClientConfig;
use tokio::io::ReadBuf;

use crate::peer::{self, Awaiting, Progress};
use crate::read_buffer::ReadBuffer;
use crate::stream::{connect_tcp, Stream, TlsStartError};
use crate::tls::{self, SslMode};
use crate::url_text::{endpoint, percent_decode};
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "redis",
    schemes: &["redis", "rediss", "redis+cluster"],
    family: Family::Kv,
    url_form:
        "redis://[user:pass@]host:port[/db] | rediss://… | redis+cluster://host:port[,host:port…]",
    about: "Redis, Valkey and KeyDB, standalone or Redis Cluster (RESP2, pipelined)",
    kv: KvCapabilities { commands: true },
    blocking: false,
};

const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_PORT: u16 = 6379;
const PARAMS: &[&str] = &["sslmode", "sslrootcert"];
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
            .finish()
    }
}

fn parse_target(target: &Target) -> Result<Settings, String> {
    let url = target.url();
    let scheme = target.scheme();
    let cluster = scheme == "redis+cluster";
    let hosts: Vec<(String, u16)> = target
        .hosts()
        .into_iter()
        .map(|(h, p)| Ok((percent_decode(&h, "host")?, p.unwrap_or(DEFAULT_PORT))))
        .collect::<Result<_, String>>()?;
    let hosts = if hosts.is_empty() {
        vec![(DEFAULT_HOST.to_string(), url.port().unwrap_or(DEFAULT_PORT))]
    } else {
        hosts
    };
    if !cluster && hosts.len() > 1 {
        return Err(format!(
            "{scheme}:// takes one host; for a Redis Cluster use redis+cluster://host:port,host:port"
        ));
    }
    let user = match url.username() {
        "" => None,
        u => Some(percent_decode(u, "user")?),
    };
    let password = url
        .password()
        .map(|p| percent_decode(p, "password"))
        .transpose()?;
    if user.is_some() && password.is_none() {
        return Err(
            "a user needs a password (redis://user:pass@host); for the default user write redis://:pass@host"
                .to_string(),
        );
    }
    let db = match url.path().trim_matches('/') {
        "" => None,
        p => Some(p.parse::<u32>().map_err(|_| {
            format!("the path must be a database number (redis://host:port/0), got '{p}'")
        })?),
    };
    if cluster && db.unwrap_or(0) != 0 {
        return Err("a Redis Cluster has only database 0: remove the /db from the URL".to_string());
    }

    let mut sslmode = None;
    let mut sslrootcert = None;
    for (key, value) in url.query_pairs() {
        match &*key {
            "sslmode" => sslmode = Some(SslMode::parse(&value)?),
            "sslrootcert" => {
                if value.is_empty() {
                    return Err("sslrootcert needs a path to a PEM file".to_string());
                }
                sslrootcert = Some(PathBuf::from(&*value));
            }
            other => {
                return Err(format!(
                    "unknown parameter '{other}'; accepted: {}",
                    PARAMS.join(", ")
                ))
            }
        }
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
        user,
        password,
        db: db.filter(|&d| d != 0),
        sslmode,
        sslrootcert,
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
        let endpoint = settings
            .hosts
            .iter()
            .map(|(h, p)| endpoint(h, *p))
            .collect::<Vec<_>>()
            .join(",");
        Ok(RedisDriver {
            shared: Arc::new(Shared {
                settings,
                tls,
                endpoint,
            }),
        })
    }

    /// Whether the target is a Redis Cluster (`redis+cluster://`).
    pub fn is_cluster(&self) -> bool {
        self.shared.settings.cluster
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
        return ServerInfo {
            product: "Valkey".into(),
            version: v,
        };
    }
    let lower = info.to_ascii_lowercase();
    let product = if field("server_name").is_some_and(|n| n.eq_ignore_ascii_case("valkey")) {
        "Valkey"
    } else if lower.contains("keydb") {
        "KeyDB"
    } else {
        "Redis"
    };
    ServerInfo {
        product: product.into(),
        version: redis_version,
    }
}

// ---------------------------------------------------------------------------
// Connection: socket and read buffer

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connect,
    Use,
}

/// One connection: the stream and the buffer replies are parsed from.
struct Link {
    stream: Stream,
    rbuf: ReadBuffer,
    /// After an incomplete parse: bytes from `start` the next reply needs
    /// at least.
    need: usize,
    /// `host:port`, for messages.
    ep: Arc<str>,
    /// The server has sent the first byte of a RESP reply: until then,
    /// [`Link::call`] checks that the first byte can begin one.
    answered: bool,
}

impl Link {
    /// TCP (no Nagle), TLS if configured, AUTH and SELECT if configured.
    async fn open(
        host: &str,
        port: u16,
        shared: &Shared,
        progress: &Progress,
    ) -> Result<Link, DriverError> {
        let ep: Arc<str> = endpoint(host, port).into();
        progress.set(Awaiting::Connection);
        let tcp = connect_tcp(host, port)
            .await
            .map_err(|e| io_error(&e, &ep, Phase::Connect))?;
        let stream = match &shared.tls {
            None => Stream::plain(tcp),
            Some(config) => {
                progress.set(Awaiting::Tls);
                Stream::start_tls(tcp, host, config)
                    .await
                    .map_err(|e| match e {
                        TlsStartError::BadName(message) => DriverError::fatal(message),
                        TlsStartError::Handshake(e) => io_error(&e, &ep, Phase::Connect),
                    })?
            }
        };
        let mut link = Link {
            stream,
            rbuf: ReadBuffer::with_capacity(READ_BUF),
            need: 0,
            ep,
            answered: false,
        };
        let s = &shared.settings;
        if let Some(password) = &s.password {
            progress.set(link.awaiting("Redis reply to AUTH", "reply to AUTH"));
            let reply = match &s.user {
                Some(user) => {
                    link.call(
                        &[b"AUTH", user.as_bytes(), password.as_bytes()],
                        Phase::Connect,
                    )
                    .await?
                }
                None => {
                    link.call(&[b"AUTH", password.as_bytes()], Phase::Connect)
                        .await?
                }
            };
            if let Value::Error(text) = reply {
                // What answers AUTH may be an error sent before it was
                // read (maxclients): only a refusal of the credentials is
                // an authentication failure.
                return Err(match reply_error(text.as_bytes(), &link.ep) {
                    e if e.class == ErrorClass::Fatal => auth_error(&text, &link.ep),
                    e => e,
                });
            }
        }
        if let Some(db) = s.db {
            let mut digits = [0u8; 20];
            let db_text = format_usize(&mut digits, db as usize);
            progress.set(link.awaiting("Redis reply to SELECT", "reply to SELECT"));
            if let Value::Error(text) = link.call(&[b"SELECT", db_text], Phase::Connect).await? {
                let (code, msg) = split_code(&text);
                return Err(DriverError::fatal(format!(
                    "cannot select database {db} at {}: {msg}",
                    link.ep
                ))
                .with_code(code));
            }
        }
        Ok(link)
    }

    fn io_error(&self, e: &io::Error) -> DriverError {
        io_error(e, &self.ep, Phase::Use)
    }

    /// What a connect waits for once a command is sent: `first` while
    /// nothing from the server has shown it speaks RESP, else `later`.
    fn awaiting(&self, first: &'static str, later: &'static str) -> Awaiting {
        if self.answered {
            Awaiting::Reply(later)
        } else {
            Awaiting::First(first)
        }
    }

    /// The next complete reply in the buffer, consumed; `None` if more bytes
    /// must be read first.
    #[inline]
    fn next_reply(&mut self) -> Result<Option<Reply>, DriverError> {
        match parse_reply(self.rbuf.received(), self.rbuf.start()) {
            Ok(Parsed::Done(reply, next)) => {
                self.rbuf.consume_to(next);
                self.need = 0;
                Ok(Some(reply))
            }
            Ok(Parsed::Incomplete(need)) => {
                self.need = need - self.rbuf.start();
                Ok(None)
            }
            Err(why) => Err(protocol_error(&self.ep, why)),
        }
    }

    /// Reads more bytes into the buffer (end of stream is an error).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut buf = ReadBuf::new(self.rbuf.spare(self.need));
        match self.stream.poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len();
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
                }
                self.rbuf.filled(n);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }

    async fn fill(&mut self) -> Result<(), DriverError> {
        match poll_fn(|cx| self.poll_fill(cx)).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.io_error(&e)),
        }
    }

    /// One command, off the hot path (setup, INFO): its whole reply, owned.
    async fn call(&mut self, args: &[&[u8]], phase: Phase) -> Result<Value, DriverError> {
        let mut req = Vec::new();
        encode_command(&mut req, args);
        let io_err = |e: &io::Error, ep: &str| io_error(e, ep, phase);
        if let Err(e) = self.stream.write_all(&req).await {
            return Err(io_err(&e, &self.ep));
        }
        loop {
            if !self.answered {
                match self.rbuf.pending().first() {
                    None => {}
                    Some(b'+' | b'-' | b':' | b'$' | b'*') => self.answered = true,
                    Some(_) => {
                        return Err(DriverError::fatal(peer::not_answering_as(
                            &self.ep,
                            "Redis",
                            "a RESP reply",
                            self.rbuf.pending(),
                        )))
                    }
                }
            }
            match parse_value(self.rbuf.received(), self.rbuf.start(), 0) {
                Ok(Parsed::Done(v, next)) => {
                    self.rbuf.consume_to(next);
                    return Ok(v);
                }
                Ok(Parsed::Incomplete(need)) => self.need = need - self.rbuf.start(),
                Err(why) => return Err(protocol_error(&self.ep, why)),
            }
            if let Err(e) = poll_fn(|cx| self.poll_fill(cx)).await {
                let closed = matches!(
                    e.kind(),
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                );
                if !self.answered && closed {
                    let tls = match self.stream {
                        Stream::Plain(..) => " (if it takes TLS, use rediss://)",
                        Stream::Tls(_) => "",
                    };
                    return Err(DriverError::connection(format!(
                        "{} closed the connection without a Redis reply: is a Redis server \
                         listening there?{tls}",
                        self.ep
                    )));
                }
                return Err(io_err(&e, &self.ep));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// RESP2 encoding

/// Decimal digits of `n` in `buf`, without allocating.
#[inline]
fn format_usize(buf: &mut [u8; 20], mut n: usize) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[inline]
fn put_len(buf: &mut Vec<u8>, prefix: u8, n: usize) {
    let mut digits = [0u8; 20];
    buf.push(prefix);
    buf.extend_from_slice(format_usize(&mut digits, n));
    buf.extend_from_slice(b"\r\n");
}

#[inline]
fn put_bulk(buf: &mut Vec<u8>, data: &[u8]) {
    put_len(buf, b'$', data.len());
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
}

#[inline]
fn encode_get(buf: &mut Vec<u8>, key: &[u8]) {
    buf.reserve(key.len() + 40);
    buf.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
    put_bulk(buf, key);
}

#[inline]
fn encode_set(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    buf.reserve(key.len() + value.len() + 60);
    buf.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
    put_bulk(buf, key);
    put_bulk(buf, value);
}

fn encode_command(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.reserve(args.iter().map(|a| a.len() + 24).sum::<usize>() + 24);
    put_len(buf, b'*', args.len());
    for a in args {
        put_bulk(buf, a);
    }
}

const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

// ---------------------------------------------------------------------------
// RESP2 decoding

/// Byte offsets of a value in the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

/// One reply, as offsets into the read buffer: nothing is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Simple(Span),
    Error(Span),
    Int(i64),
    Bulk(Span),
    /// Null bulk string or null array.
    Nil,
    /// An array header: this many elements follow.
    Array(usize),
    /// A whole array (from [`parse_reply`]): its element count and where
    /// its elements lie, undecoded.
    Elements(usize, Span),
}

#[derive(Debug, PartialEq, Eq)]
enum Parsed<T> {
    /// The value and the offset just past it.
    Done(T, usize),
    /// The buffer must hold at least this many bytes (from its start).
    Incomplete(usize),
}

type ParseResult<T> = Result<Parsed<T>, &'static str>;

/// The line starting at `pos`: offset of its `\r`, or incomplete.
#[inline]
fn line_end(buf: &[u8], pos: usize) -> Result<Option<usize>, &'static str> {
    match buf[pos..].iter().position(|&b| b == b'\n') {
        Some(i) if i > 0 && buf[pos + i - 1] == b'\r' => Ok(Some(pos + i - 1)),
        Some(_) => Err("line not ended by CRLF"),
        None if buf.len() - pos > MAX_LINE => Err("line too long"),
        None => Ok(None),
    }
}

#[inline]
fn parse_int(digits: &[u8]) -> Result<i64, &'static str> {
    let (neg, digits) = match digits {
        [b'-', rest @ ..] => (true, rest),
        d => (false, d),
    };
    if digits.is_empty() || digits.len() > 19 {
        return Err("bad integer");
    }
    // Accumulated negatively so that i64::MIN, with no positive twin, fits.
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err("bad integer");
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_sub(i64::from(d - b'0')))
            .ok_or("integer out of range")?;
    }
    if neg {
        Ok(n)
    } else {
        n.checked_neg().ok_or("integer out of range")
    }
}

/// One value's header at `pos`; a bulk string includes its contents, an
/// array only its count.
#[inline]
fn parse_header(buf: &[u8], pos: usize) -> ParseResult<Reply> {
    if pos >= buf.len() {
        return Ok(Parsed::Incomplete(pos + 4));
    }
    let Some(cr) = line_end(buf, pos + 1)? else {
        return Ok(Parsed::Incomplete(buf.len() + 1));
    };
    let line = Span {
        start: pos + 1,
        end: cr,
    };
    let next = cr + 2;
    let reply = match buf[pos] {
        b'$' => {
            let len = parse_int(&buf[line.start..line.end])?;
            if len < 0 {
                return Ok(Parsed::Done(Reply::Nil, next));
            }
            if len > MAX_BULK {
                return Err("bulk string too long");
            }
            let end = next + len as usize;
            if buf.len() < end + 2 {
                return Ok(Parsed::Incomplete(end + 2));
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err("bulk string not ended by CRLF");
            }
            return Ok(Parsed::Done(
                Reply::Bulk(Span { start: next, end }),
                end + 2,
            ));
        }
        b'+' => Reply::Simple(line),
        b'-' => Reply::Error(line),
        b':' => Reply::Int(parse_int(&buf[line.start..line.end])?),
        b'*' => {
            let n = parse_int(&buf[line.start..line.end])?;
            if n < 0 {
                Reply::Nil
            } else {
                Reply::Array(n as usize)
            }
        }
        _ => return Err("unknown reply type"),
    };
    Ok(Parsed::Done(reply, next))
}

/// One whole reply at `pos`; an array's elements are stepped over (without
/// recursion), not decoded.
#[inline]
fn parse_reply(buf: &[u8], pos: usize) -> ParseResult<Reply> {
    let (mut reply, mut pos) = match parse_header(buf, pos)? {
        Parsed::Done(r, next) => (r, next),
        Parsed::Incomplete(n) => return Ok(Parsed::Incomplete(n)),
    };
    if let Reply::Array(n) = reply {
        let start = pos;
        let mut left = n;
        while left > 0 {
            match parse_header(buf, pos)? {
                Parsed::Done(inner, next) => {
                    left -= 1;
                    if let Reply::Array(m) = inner {
                        left = left.checked_add(m).ok_or("array too long")?;
                    }
                    pos = next;
                }
                Parsed::Incomplete(need) => return Ok(Parsed::Incomplete(need)),
            }
        }
        reply = Reply::Elements(n, Span { start, end: pos });
    }
    Ok(Parsed::Done(reply, pos))
}

/// Splits the first element off an array's elements (which
/// [`parse_reply`] has checked are whole): a bulk string's bytes, `None`
/// for any other value (a nested array is stepped over whole).
fn split_element(elements: &[u8]) -> (Option<&[u8]>, &[u8]) {
    match parse_reply(elements, 0) {
        Ok(Parsed::Done(Reply::Bulk(s), next)) => {
            (Some(&elements[s.start..s.end]), &elements[next..])
        }
        Ok(Parsed::Done(_, next)) => (None, &elements[next..]),
        Ok(Parsed::Incomplete(_)) | Err(_) => (None, &[]),
    }
}

/// An owned reply, for the few commands off the hot path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Value>),
}

fn parse_value(buf: &[u8], pos: usize, depth: usize) -> ParseResult<Value> {
    if depth > 16 {
        return Err("arrays nested too deep");
    }
    let (reply, mut pos) = match parse_header(buf, pos)? {
        Parsed::Done(r, next) => (r, next),
        Parsed::Incomplete(n) => return Ok(Parsed::Incomplete(n)),
    };
    let text = |s: Span| String::from_utf8_lossy(&buf[s.start..s.end]).into_owned();
    let value = match reply {
        Reply::Simple(s) => Value::Simple(text(s)),
        Reply::Error(s) => Value::Error(text(s)),
        Reply::Int(i) => Value::Int(i),
        Reply::Bulk(s) => Value::Bulk(buf[s.start..s.end].to_vec()),
        Reply::Nil => Value::Nil,
        Reply::Array(n) | Reply::Elements(n, _) => {
            let mut items = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                match parse_value(buf, pos, depth + 1)? {
                    Parsed::Done(v, next) => {
                        items.push(v);
                        pos = next;
                    }
                    Parsed::Incomplete(need) => return Ok(Parsed::Incomplete(need)),
                }
            }
            Value::Array(items)
        }
    };
    Ok(Parsed::Done(value, pos))
}

/// What a reply means to the caller. Error replies are handled apart.
#[inline]
fn kv_reply<'a>(reply: Reply, buf: &'a [u8]) -> KvReply<'a> {
    match reply {
        Reply::Bulk(s) => KvReply::Hit(&buf[s.start..s.end]),
        Reply::Nil => KvReply::Miss,
        Reply::Elements(n, s) => {
            KvReply::Array(KvArray::new(n, &buf[s.start..s.end], split_element))
        }
        _ => KvReply::Done,
    }
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
    let text = e.to_string();
    if text.contains("failed to lookup address") {
        let class = if text.contains("Temporary failure") {
            ErrorClass::Connection
        } else {
            ErrorClass::Fatal
        };
        return DriverError::new(class, format!("cannot resolve the host of {ep}: {text}"));
    }
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
                Some(Reply::Error(s)) => {
                    let err =
                        reply_error(&self.link.rbuf.received()[s.start..s.end], &self.link.ep);
                    on_reply(self.link.rbuf.reply_at(i), Err(err));
                    i += 1;
                }
                Some(reply) => {
                    on_reply(
                        self.link.rbuf.reply_at(i),
                        Ok(kv_reply(reply, self.link.rbuf.received())),
                    );
                    i += 1;
                }
                None => self.link.fill().await?,
            }
        }
        self.dirty = false;
        Ok(())
    }
}

/// A request queued for one node: its original index and its bytes in the
/// node's write buffer. `idx == ASKING_IDX` is an `ASKING` whose reply is
/// swallowed.
#[derive(Debug, Clone, Copy)]
struct Pending {
    idx: usize,
    start: usize,
    end: usize,
}

const ASKING_IDX: usize = usize::MAX;

struct Node {
    host: String,
    port: u16,
    link: Link,
    wbuf: Vec<u8>,
    pending: Vec<Pending>,
    /// Replies read so far this round (`pending[..head]`).
    head: usize,
}

/// A MOVED or ASK to act on once the round's replies are all read.
#[derive(Debug)]
struct Redirect {
    idx: usize,
    ask: bool,
    slot: u16,
    host: String,
    port: u16,
    /// The request's bytes in `Cluster::resend`.
    start: usize,
    end: usize,
}

struct Cluster {
    shared: Arc<Shared>,
    nodes: Vec<Node>,
    /// Node index per slot (`u16::MAX`: unknown, use node 0).
    slots: Box<[u16]>,
    queued: usize,
    dirty: bool,
    redirects: Vec<Redirect>,
    resend: Vec<u8>,
    /// Reads from any node (wrapping), for [`ReplyAt::read`].
    reads: u32,
}

/// `(first slot, last slot, host, port)` of each master in `CLUSTER SLOTS`.
type SlotRanges = Vec<(u16, u16, String, u16)>;

fn parse_cluster_slots(v: &Value, seed_host: &str) -> Result<SlotRanges, String> {
    let Value::Array(entries) = v else {
        return Err("not an array".into());
    };
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let Value::Array(parts) = e else {
            return Err("entry not an array".into());
        };
        let (Some(Value::Int(a)), Some(Value::Int(b)), Some(Value::Array(master))) =
            (parts.first(), parts.get(1), parts.get(2))
        else {
            return Err("entry is not [start, end, [host, port, ...]]".into());
        };
        let host = match master.first() {
            Some(Value::Bulk(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(Value::Simple(h)) => h.clone(),
            // cluster-preferred-endpoint-type unknown-endpoint: a NULL host.
            Some(Value::Nil) => String::new(),
            _ => return Err("master without a host".into()),
        };
        // An unknown address ("", NULL or "?") means the node we asked.
        let host = if host.is_empty() || host == "?" {
            seed_host.to_string()
        } else {
            host
        };
        let Some(Value::Int(port)) = master.get(1) else {
            return Err("master without a port".into());
        };
        let (Ok(a), Ok(b), Ok(port)) = (u16::try_from(*a), u16::try_from(*b), u16::try_from(*port))
        else {
            return Err("slot or port out of range".into());
        };
        if a > b || usize::from(b) >= SLOTS {
            return Err(format!("bad slot range {a}-{b}"));
        }
        out.push((a, b, host, port));
    }
    Ok(out)
}

/// `MOVED 3999 127.0.0.1:6381` / `ASK 3999 127.0.0.1:6381`: (ask, slot,
/// host, port). An empty host means the node that answered.
fn parse_redirect(text: &[u8], from_host: &str) -> Option<(bool, u16, String, u16)> {
    let text = std::str::from_utf8(text).ok()?;
    let (ask, rest) = if let Some(r) = text.strip_prefix("MOVED ") {
        (false, r)
    } else {
        (true, text.strip_prefix("ASK ")?)
    };
    let (slot, addr) = rest.trim().split_once(' ')?;
    let slot: u16 = slot.parse().ok().filter(|&s| usize::from(s) < SLOTS)?;
    let (host, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { from_host } else { host };
    Some((ask, slot, host.to_string(), port))
}

impl Cluster {
    async fn build(
        shared: Arc<Shared>,
        seed: (String, u16),
        seed_link: Link,
        ranges: SlotRanges,
    ) -> Result<Cluster, DriverError> {
        let mut cluster = Cluster {
            shared,
            nodes: Vec::new(),
            slots: vec![u16::MAX; SLOTS].into_boxed_slice(),
            queued: 0,
            dirty: false,
            redirects: Vec::new(),
            resend: Vec::new(),
            reads: 0,
        };
        let mut seed_link = Some(seed_link);
        for (a, b, host, port) in ranges {
            let ni = match cluster.find(&host, port) {
                Some(i) => i,
                None => {
                    let link = match seed_link.take_if(|_| host == seed.0 && port == seed.1) {
                        Some(l) => l,
                        None => Link::open(&host, port, &cluster.shared, &Progress::new()).await?,
                    };
                    cluster.add(host, port, link)
                }
            };
            for s in a..=b {
                cluster.slots[usize::from(s)] = ni as u16;
            }
        }
        if cluster.nodes.is_empty() {
            let ep = seed_link
                .as_ref()
                .map_or("the seed".into(), |l| l.ep.to_string());
            return Err(DriverError::retryable(format!(
                "the Redis Cluster at {ep} has no slots assigned yet"
            ))
            .with_code("CLUSTERDOWN"));
        }
        Ok(cluster)
    }

    fn find(&self, host: &str, port: u16) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.port == port && n.host == host)
    }

    fn add(&mut self, host: String, port: u16, link: Link) -> usize {
        self.nodes.push(Node {
            host,
            port,
            link,
            wbuf: Vec::with_capacity(8 * 1024),
            pending: Vec::with_capacity(64),
            head: 0,
        });
        self.nodes.len() - 1
    }

    /// The node for `host:port`, connecting to it if it is new.
    async fn node(&mut self, host: &str, port: u16) -> Result<usize, DriverError> {
        if let Some(i) = self.find(host, port) {
            return Ok(i);
        }
        if self.nodes.len() >= usize::from(u16::MAX) {
            return Err(DriverError::fatal("too many cluster nodes"));
        }
        let link = Link::open(host, port, &self.shared, &Progress::new()).await?;
        Ok(self.add(host.to_string(), port, link))
    }

    #[inline]
    fn queue(&mut self, key: Option<&[u8]>, encode: impl FnOnce(&mut Vec<u8>)) {
        let ni = match key {
            Some(k) => match self.slots[usize::from(hash_slot(k))] {
                u16::MAX => 0,
                n => usize::from(n),
            },
            None => 0,
        };
        let node = &mut self.nodes[ni];
        let start = node.wbuf.len();
        encode(&mut node.wbuf);
        node.pending.push(Pending {
            idx: self.queued,
            start,
            end: node.wbuf.len(),
        });
        self.queued += 1;
    }

    fn clear(&mut self) {
        self.queued = 0;
        for n in &mut self.nodes {
            n.wbuf.clear();
            n.pending.clear();
            n.head = 0;
        }
        self.redirects.clear();
        self.resend.clear();
    }

    async fn flush(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError> {
        if self.queued == 0 {
            return Ok(());
        }
        if self.dirty {
            self.clear();
            return Err(interrupted(&self.shared.endpoint));
        }
        self.dirty = true;
        let result = self.flush_rounds(on_reply).await;
        self.clear();
        if result.is_ok() {
            self.dirty = false;
        }
        result
    }

    async fn flush_rounds(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError> {
        let mut round = 0;
        loop {
            for node in &mut self.nodes {
                if !node.pending.is_empty() {
                    if let Err(e) = node.link.stream.send(&node.wbuf).await {
                        return Err(node.link.io_error(&e));
                    }
                }
            }
            self.read_round(on_reply).await?;
            for n in &mut self.nodes {
                n.wbuf.clear();
                n.pending.clear();
                n.head = 0;
            }
            if self.redirects.is_empty() {
                return Ok(());
            }
            round += 1;
            let redirects = std::mem::take(&mut self.redirects);
            if round > MAX_REDIRECT_ROUNDS {
                for r in &redirects {
                    let kind = if r.ask { "ASK" } else { "MOVED" };
                    on_reply(
                        ReplyAt {
                            index: r.idx,
                            read: self.reads,
                        },
                        Err(DriverError::retryable(format!(
                            "slot {} still redirected after {MAX_REDIRECT_ROUNDS} rounds \
                             (last: {kind} to {})",
                            r.slot,
                            endpoint(&r.host, r.port)
                        ))
                        .with_code(kind)),
                    );
                }
                return Ok(());
            }
            for r in &redirects {
                let ni = self.node(&r.host, r.port).await?;
                let node = &mut self.nodes[ni];
                if r.ask {
                    let start = node.wbuf.len();
                    node.wbuf.extend_from_slice(ASKING);
                    node.pending.push(Pending {
                        idx: ASKING_IDX,
                        start,
                        end: node.wbuf.len(),
                    });
                } else {
                    self.slots[usize::from(r.slot)] = ni as u16;
                }
                let start = node.wbuf.len();
                node.wbuf.extend_from_slice(&self.resend[r.start..r.end]);
                node.pending.push(Pending {
                    idx: r.idx,
                    start,
                    end: node.wbuf.len(),
                });
            }
            self.redirects = redirects;
            self.redirects.clear();
            self.resend.clear();
        }
    }

    /// Reads the replies of every node concurrently, delivering each as soon
    /// as it is parsed; MOVED/ASK are set aside in `redirects`.
    async fn read_round(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError> {
        let nodes = &mut self.nodes;
        let redirects = &mut self.redirects;
        let resend = &mut self.resend;
        let reads = &mut self.reads;
        poll_fn(|cx| {
            let mut done = true;
            for node in nodes.iter_mut() {
                while node.head < node.pending.len() {
                    let reply = match node.link.next_reply() {
                        Ok(Some(r)) => r,
                        Ok(None) => match node.link.poll_fill(cx) {
                            Poll::Ready(Ok(())) => {
                                *reads = reads.wrapping_add(1);
                                continue;
                            }
                            Poll::Ready(Err(e)) => return Poll::Ready(Err(node.link.io_error(&e))),
                            Poll::Pending => {
                                done = false;
                                break;
                            }
                        },
                        Err(e) => return Poll::Ready(Err(e)),
                    };
                    let p = node.pending[node.head];
                    node.head += 1;
                    if p.idx == ASKING_IDX {
                        continue;
                    }
                    match reply {
                        Reply::Error(s) => {
                            let text = &node.link.rbuf.received()[s.start..s.end];
                            match parse_redirect(text, &node.host) {
                                Some((ask, slot, host, port)) => {
                                    let start = resend.len();
                                    resend.extend_from_slice(&node.wbuf[p.start..p.end]);
                                    redirects.push(Redirect {
                                        idx: p.idx,
                                        ask,
                                        slot,
                                        host,
                                        port,
                                        start,
                                        end: resend.len(),
                                    });
                                }
                                None => on_reply(
                                    ReplyAt {
                                        index: p.idx,
                                        read: *reads,
                                    },
                                    Err(reply_error(text, &node.link.ep)),
                                ),
                            }
                        }
                        reply => on_reply(
                            ReplyAt {
                                index: p.idx,
                                read: *reads,
                            },
                            Ok(kv_reply(reply, node.link.rbuf.received())),
                        ),
                    }
                }
            }
            if done {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
        .await
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

// ---------------------------------------------------------------------------
// Hash slots

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), as Redis
/// Cluster uses, by table.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from(((crc >> 8) as u8) ^ b)]
    })
}

/// The Redis Cluster hash slot of `key`: CRC16 of the key, or of its hash
/// tag (the text between the first `{` and the next `}`, if not empty),
/// modulo 16384.
#[inline]
pub fn hash_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(0) | None => key,
            Some(len) => &key[open + 1..open + 1 + len],
        },
        None => key,
    };
    crc16(hashed) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_cover_the_whole_i64_range() {
        assert_eq!(
            parse_int(b"1000000000000000000"),
            Ok(1_000_000_000_000_000_000)
        );
        assert_eq!(parse_int(b"9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Ok(i64::MIN));
        assert!(parse_int(b"9223372036854775808").is_err());
        assert!(parse_int(b"-9223372036854775809").is_err());
        assert!(parse_int(b"12345678901234567890").is_err());
        assert!(parse_int(b"-").is_err() && parse_int(b"1a").is_err());
    }

    fn settings(url: &str) -> Result<Settings, String> {
        parse_target(&Target::parse(url).unwrap())
    }

    #[test]
    fn crc16_and_slots() {
        // The XMODEM check value.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(hash_slot(b"foo"), 12182);
        assert_eq!(hash_slot(b"bar"), 5061);
        assert_eq!(hash_slot(b"hello"), 866);
        assert_eq!(
            hash_slot(b"{user1000}.following"),
            hash_slot(b"{user1000}.followers")
        );
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        // Empty tag: the whole key; only the first tag counts.
        assert_eq!(hash_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
        assert_eq!(hash_slot(b"foo{bar}{zap}"), hash_slot(b"bar"));
        assert_eq!(hash_slot(b"{foo"), crc16(b"{foo") & 16383);
        assert_eq!(hash_slot(b""), 0);
    }

    #[test]
    fn encodes_resp2() {
        let mut b = Vec::new();
        encode_get(&mut b, b"key:1");
        assert_eq!(b, b"*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n");
        b.clear();
        encode_set(&mut b, b"k", b"");
        assert_eq!(b, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
        b.clear();
        encode_command(&mut b, &[b"HSET", b"h", b"f", &[0u8, 13, 10]]);
        assert_eq!(
            b,
            b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$3\r\n\x00\r\n\r\n"
        );
        let mut d = [0u8; 20];
        assert_eq!(format_usize(&mut d, 0), b"0");
        assert_eq!(format_usize(&mut d, 1234567890), b"1234567890");
        assert_eq!(
            format_usize(&mut d, usize::MAX),
            usize::MAX.to_string().as_bytes()
        );
        let big = vec![b'x'; 100_000];
        b.clear();
        encode_set(&mut b, b"k", &big);
        assert!(b.starts_with(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\nxxx"));
    }

    fn one(buf: &[u8]) -> ParseResult<Reply> {
        parse_reply(buf, 0)
    }

    #[test]
    fn parses_replies() {
        let s = |a, b| Span { start: a, end: b };
        assert_eq!(one(b"+OK\r\n"), Ok(Parsed::Done(Reply::Simple(s(1, 3)), 5)));
        assert_eq!(
            one(b"-ERR x\r\n"),
            Ok(Parsed::Done(Reply::Error(s(1, 6)), 8))
        );
        assert_eq!(one(b":-42\r\n"), Ok(Parsed::Done(Reply::Int(-42), 6)));
        assert_eq!(
            one(b"$3\r\na\r\n\r\n"),
            Ok(Parsed::Done(Reply::Bulk(s(4, 7)), 9))
        );
        assert_eq!(
            one(b"$0\r\n\r\n"),
            Ok(Parsed::Done(Reply::Bulk(s(4, 4)), 6))
        );
        assert_eq!(one(b"$-1\r\n"), Ok(Parsed::Done(Reply::Nil, 5)));
        assert_eq!(one(b"*-1\r\n"), Ok(Parsed::Done(Reply::Nil, 5)));
        assert_eq!(
            one(b"*0\r\n"),
            Ok(Parsed::Done(Reply::Elements(0, s(4, 4)), 4))
        );
        let nested = b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n+x\r\n+next\r\n";
        let end = nested.len() - 7;
        assert_eq!(
            one(nested),
            Ok(Parsed::Done(Reply::Elements(3, s(4, end)), end))
        );
        // The elements, decoded one at a time: a bulk string's bytes, None
        // for anything else (a nested array stepped over whole).
        let KvReply::Array(a) = kv_reply(Reply::Elements(3, s(4, end)), nested) else {
            panic!()
        };
        assert_eq!(a.len(), 3);
        assert_eq!(a.strings().collect::<Vec<_>>(), [None, None, None]);
        let members = b"*3\r\n$3\r\nabc\r\n*1\r\n$1\r\nz\r\n$0\r\n\r\n";
        let Ok(Parsed::Done(reply, _)) = one(members) else {
            panic!()
        };
        let KvReply::Array(a) = kv_reply(reply, members) else {
            panic!()
        };
        let want: [Option<&[u8]>; 3] = [Some(b"abc"), None, Some(b"")];
        assert_eq!(a.strings().collect::<Vec<_>>(), want);
        // Two replies back to back.
        let two = b"$1\r\nv\r\n+OK\r\n";
        let Ok(Parsed::Done(_, next)) = parse_reply(two, 0) else {
            panic!()
        };
        assert_eq!(
            parse_reply(two, next),
            Ok(Parsed::Done(Reply::Simple(s(8, 10)), 12))
        );
    }

    #[test]
    fn partial_buffers_are_incomplete_at_every_cut() {
        let full: &[u8] =
            b"$5\r\nhello\r\n*2\r\n$1\r\na\r\n*1\r\n:7\r\n-WRONGTYPE bad\r\n$-1\r\n+OK\r\n";
        // Every prefix parses as far as it is complete, never errs.
        for cut in 0..full.len() {
            let buf = &full[..cut];
            let mut pos = 0;
            loop {
                match parse_reply(buf, pos) {
                    Ok(Parsed::Done(_, next)) => pos = next,
                    Ok(Parsed::Incomplete(need)) => {
                        assert!(need > buf.len(), "cut {cut}: need {need}");
                        break;
                    }
                    Err(e) => panic!("cut {cut}: {e}"),
                }
            }
        }
        let mut pos = 0;
        let mut n = 0;
        while pos < full.len() {
            let Ok(Parsed::Done(_, next)) = parse_reply(full, pos) else {
                panic!()
            };
            pos = next;
            n += 1;
        }
        assert_eq!(n, 5);
        // A bulk header tells how much is needed in total.
        assert_eq!(one(b"$100\r\nab"), Ok(Parsed::Incomplete(6 + 102)));
    }

    #[test]
    fn rejects_garbage() {
        assert!(one(b"HTTP/1.1 400 Bad Request\r\n").is_err());
        assert!(one(b"$abc\r\n").is_err());
        assert!(one(b"$3\r\nabcXY").is_err());
        assert!(one(b"+OK\n").is_err());
        assert!(one(b":99999999999999999999\r\n").is_err());
        let e = protocol_error("h:1", "unknown reply type");
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(
            e.message.contains("h:1") && e.message.contains("Redis"),
            "{e}"
        );
    }

    #[test]
    fn owned_values() {
        let buf = b"*2\r\n*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n*3\r\n:5461\r\n:16383\r\n*2\r\n$0\r\n\r\n:7001\r\n";
        let Ok(Parsed::Done(v, used)) = parse_value(buf, 0, 0) else {
            panic!()
        };
        assert_eq!(used, buf.len());
        let ranges = parse_cluster_slots(&v, "seed").unwrap();
        assert_eq!(
            ranges,
            vec![
                (0, 5460, "127.0.0.1".to_string(), 7000),
                (5461, 16383, "seed".to_string(), 7001)
            ]
        );
        assert!(matches!(
            parse_value(&buf[..buf.len() - 3], 0, 0),
            Ok(Parsed::Incomplete(_))
        ));
        assert!(parse_cluster_slots(&Value::Int(1), "s").is_err());
        // A NULL host (cluster-preferred-endpoint-type unknown-endpoint).
        let buf = b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$-1\r\n:7002\r\n";
        let Ok(Parsed::Done(v, _)) = parse_value(buf, 0, 0) else {
            panic!()
        };
        assert_eq!(
            parse_cluster_slots(&v, "seed").unwrap(),
            vec![(0, 16383, "seed".to_string(), 7002)]
        );
    }

    #[test]
    fn redirects() {
        assert_eq!(
            parse_redirect(b"MOVED 3999 127.0.0.1:6381", "h"),
            Some((false, 3999, "127.0.0.1".into(), 6381))
        );
        assert_eq!(
            parse_redirect(b"ASK 3999 10.0.0.2:7000", "h"),
            Some((true, 3999, "10.0.0.2".into(), 7000))
        );
        assert_eq!(
            parse_redirect(b"MOVED 1 :7000", "h"),
            Some((false, 1, "h".into(), 7000))
        );
        assert_eq!(
            parse_redirect(b"MOVED 1 [::1]:7000", "h"),
            Some((false, 1, "::1".into(), 7000))
        );
        assert_eq!(parse_redirect(b"MOVED 99999 h:1", "h"), None);
        assert_eq!(parse_redirect(b"ERR MOVED", "h"), None);
    }

    #[test]
    fn parses_urls() {
        let s = settings("redis://127.0.0.1:6380").unwrap();
        assert_eq!(s.hosts, vec![("127.0.0.1".into(), 6380)]);
        assert!(!s.cluster);
        assert_eq!((s.user, s.password, s.db), (None, None, None));
        assert_eq!(s.sslmode, SslMode::Disable);

        let s = settings("redis://:p%40ss@db.example/3").unwrap();
        assert_eq!(s.hosts, vec![("db.example".into(), 6379)]);
        assert_eq!(s.password.as_deref(), Some("p@ss"));
        assert_eq!(s.user, None);
        assert_eq!(s.db, Some(3));
        assert!(!format!("{s:?}").contains("p@ss"));

        let s = settings("redis://app:pw@h:1/0").unwrap();
        assert_eq!(s.user.as_deref(), Some("app"));
        assert_eq!(s.db, None);

        let s = settings("rediss://h:6380?sslmode=require").unwrap();
        assert_eq!(s.sslmode, SslMode::Require);
        let s = settings("rediss://h").unwrap();
        assert_eq!(s.sslmode, SslMode::VerifyFull);
        let s = settings("rediss://h/?sslrootcert=/ca.pem").unwrap();
        assert_eq!(
            s.sslrootcert.as_deref(),
            Some(std::path::Path::new("/ca.pem"))
        );

        let s = settings("redis+cluster://a:7000,b:7001,[::1]:7002").unwrap();
        assert!(s.cluster);
        assert_eq!(
            s.hosts,
            vec![("a".into(), 7000), ("b".into(), 7001), ("::1".into(), 7002)]
        );
        let s = settings("redis+cluster://:pw@a:7000").unwrap();
        assert_eq!(s.hosts.len(), 1);
        assert_eq!(s.password.as_deref(), Some("pw"));
        let s = settings("redis+cluster://a:7000,b?sslmode=require").unwrap();
        assert_eq!(s.sslmode, SslMode::Require);
        assert_eq!(s.hosts[1], ("b".into(), 6379));
    }

    #[test]
    fn rejects_bad_urls() {
        for (url, wants) in [
            ("redis://h/x", "database number"),
            ("redis://h/1/2", "database number"),
            ("redis://h?pool=3", "'pool'"),
            ("redis://h?sslmode=require", "rediss://"),
            ("rediss://h?sslmode=disable", "redis://"),
            ("rediss://h?sslmode=prefer", "prefer"),
            ("redis://user@h", "needs a password"),
            ("redis+cluster://a:1,b:2/3", "database 0"),
            ("redis://a:1,b:2", "redis+cluster"),
        ] {
            let err = settings(url).unwrap_err();
            assert!(err.contains(wants), "{url}: {err}");
        }
        let t = Target::parse("redis://u:hunter2@h/?bogus=1").unwrap();
        let err = RedisDriver::from_target(&t).unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
        let t = Target::parse("rediss://h/?sslrootcert=/nonexistent/ca.pem").unwrap();
        let err = RedisDriver::from_target(&t).unwrap_err();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    }

    #[test]
    fn driver_endpoint_has_no_secret() {
        let t = Target::parse("redis://:hunter2@10.1.2.3:6390/1").unwrap();
        let d = RedisDriver::from_target(&t).unwrap();
        assert_eq!(d.endpoint(), "10.1.2.3:6390");
        assert!(!d.is_cluster());
        assert!(!format!("{d:?}").contains("hunter2"));
        let t = Target::parse("redis+cluster://:hunter2@a:1,b:2").unwrap();
        let d = RedisDriver::from_target(&t).unwrap();
        assert_eq!(d.endpoint(), "a:1,b:2");
        assert!(d.is_cluster());
        assert!(d.shared.tls.is_none());
        let t = Target::parse("rediss://h:1").unwrap();
        let d = RedisDriver::from_target(&t).unwrap();
        assert!(d.shared.tls.is_some());
        assert_eq!(d.endpoint(), "h:1");
    }

    #[test]
    fn classifies_error_replies() {
        let ep = "127.0.0.1:6379";
        let e = reply_error(
            b"WRONGTYPE Operation against a key holding the wrong kind of value",
            ep,
        );
        assert_eq!(e.class, ErrorClass::Fatal);
        assert_eq!(e.code.as_deref(), Some("WRONGTYPE"));
        assert_eq!(
            e.to_string(),
            "Operation against a key holding the wrong kind of value (code WRONGTYPE)"
        );
        let e = reply_error(b"ERR unknown command 'FOO', with args beginning with: ", ep);
        assert_eq!(
            (e.class, e.code.as_deref()),
            (ErrorClass::Fatal, Some("ERR"))
        );
        assert!(e.message.starts_with("unknown command 'FOO'"), "{e}");
        let e = reply_error(b"ERR max number of clients reached", ep);
        assert_eq!(e.class, ErrorClass::Connection, "{e}");
        assert!(!e.message.contains("authentication"), "{e}");
        for code in ["LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN"] {
            let e = reply_error(format!("{code} something").as_bytes(), ep);
            assert_eq!(e.class, ErrorClass::Retryable, "{code}");
            assert_eq!(e.code.as_deref(), Some(code));
        }
        let auth =
            "authentication failed at 127.0.0.1:6379: check the user and password in --target";
        for text in [
            &b"WRONGPASS invalid username-password pair or user is disabled."[..],
            b"ERR invalid password",
        ] {
            let e = reply_error(text, ep);
            assert_eq!(e.class, ErrorClass::Fatal);
            assert_eq!(e.message, auth);
        }
        let e = reply_error(b"NOAUTH Authentication required.", ep);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e
            .message
            .starts_with("authentication failed at 127.0.0.1:6379"));
        let e = auth_error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
            ep,
        );
        assert!(
            e.message.starts_with(auth) && e.message.contains("no password set"),
            "{e}"
        );
        let e = reply_error(b"MOVED 12182 127.0.0.1:7001", ep);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e.message.contains("redis+cluster://"), "{e}");
        // No code word: all of it is the message.
        let e = reply_error(b"oops lower case", ep);
        assert_eq!(e.message, "oops lower case");
    }

    #[test]
    fn classifies_io_errors() {
        let ep = "127.0.0.1:6379";
        let e = io_error(&io::ErrorKind::ConnectionRefused.into(), ep, Phase::Connect);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(
            e.message,
            "cannot connect to 127.0.0.1:6379: connection refused (is the server running?)"
        );
        let e = io_error(&io::ErrorKind::ConnectionReset.into(), ep, Phase::Use);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(
            e.message,
            "connection to 127.0.0.1:6379 lost: connection reset by the server"
        );
        let e = io_error(&io::ErrorKind::UnexpectedEof.into(), ep, Phase::Use);
        assert_eq!(
            e.message,
            "connection to 127.0.0.1:6379 lost: the server closed the connection"
        );
        let dns =
            io::Error::other("failed to lookup address information: Name or service not known");
        assert_eq!(io_error(&dns, ep, Phase::Connect).class, ErrorClass::Fatal);
        let tls = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let e = io_error(&tls, ep, Phase::Connect);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(
            e.message.contains("TLS handshake with 127.0.0.1:6379"),
            "{e}"
        );
        assert!(e.message.contains("sslrootcert"), "{e}");
        assert_eq!(io_error(&tls, ep, Phase::Use).class, ErrorClass::Connection);
    }

    #[test]
    fn server_products() {
        let i = server_info_of("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n");
        assert_eq!(
            (i.product.as_str(), i.version.as_str()),
            ("Redis", "7.0.15")
        );
        let i = server_info_of(
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n",
        );
        assert_eq!(
            (i.product.as_str(), i.version.as_str()),
            ("Valkey", "8.0.1")
        );
        let i = server_info_of("redis_version:6.3.4\r\nexecutable:/usr/bin/keydb-server\r\n");
        assert_eq!((i.product.as_str(), i.version.as_str()), ("KeyDB", "6.3.4"));
    }
}
