//! memcached over its text protocol, written directly on a Tokio TCP
//! stream: `get` and `set` only (the key-value family without arbitrary
//! commands).
//!
//! Target: `memcached://host:port` (default 127.0.0.1:11211). The text
//! protocol has no authentication and no databases, so users, passwords,
//! paths and query parameters are refused.
//!
//! The hot path allocates nothing: requests are encoded into one reused
//! write buffer (`get <key>\r\n`, `set <key> 0 0 <len>\r\n<data>\r\n`) and
//! sent with one `write` per flush; replies are parsed in place from one
//! reused read buffer, so a `Hit` borrows the value's bytes from it. Reads
//! go through Tokio's `AsyncRead`, which forgets the socket's readiness
//! after a short read: a request/response costs one `write`, one wake-up
//! from epoll and one `read`, with no `EAGAIN` read in between.
//!
//! Keys must be 1 to 250 bytes without spaces or control characters. A key
//! that breaks that rule is never sent (it would put the connection out of
//! step with its replies): its request gets a fatal error. Values larger
//! than the server's item size (1 MB by default, memcached's `-I`) are
//! refused by the server with `SERVER_ERROR object too large for cache`,
//! which is fatal; `SERVER_ERROR out of memory …` is retryable; every other
//! `SERVER_ERROR`, `CLIENT_ERROR` and `ERROR` is fatal with the server's
//! text. A reply that does not fit its request (a desynchronised or foreign
//! stream) breaks the connection, which the engine then re-establishes.

use std::io;
use std::sync::Arc;

use loadcell_core::kv::{KvCapabilities, KvConn, KvReply, OnReply};
use loadcell_core::{Driver, DriverError, ServerInfo, Target};
use tokio::io::Interest;

use crate::transport::io_error::{connect_error, lost_error};
use crate::transport::peer::{self, Awaiting, Progress};
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::{connect_tcp, Stream};
use crate::transport::target_url::{Query, UrlParts};
use crate::transport::url_text;
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "memcached",
    schemes: &["memcached"],
    family: Family::KV,
    url_form: "memcached://host:port",
    about: "memcached (text protocol)",
    kv: KvCapabilities { commands: false },
    blocking: false,
};

const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_PORT: u16 = 11211;

/// memcached's `KEY_MAX_LENGTH`.
pub const MAX_KEY_LEN: usize = 250;
/// A `VALUE` longer than this (memcached's largest item size is 1 GB) is
/// taken for a corrupt stream rather than allocated for.
const MAX_VALUE_LEN: usize = 1 << 31;

/// Initial size of each connection's read buffer; it grows to fit the
/// largest reply seen (a value plus its framing) and stays that size.
const READ_BUF: usize = 64 * 1024;
/// Initial capacity of the write buffer; it grows like the read buffer.
const WRITE_BUF: usize = 16 * 1024;
/// A reply line (everything but a value's data) longer than this is not
/// memcached talking.
const MAX_LINE: usize = 8 * 1024;

/// Requests up to this size go out in the worker's send batch; a larger
/// pipeline is written while its replies are read, so that neither side
/// blocks the other.
const BATCHED_WRITE: usize = 64 * 1024;

const MSG_NO_COMMANDS: &str =
    "memcached does not support arbitrary commands (--command); use --ratio with GET/SET";

// ---------------------------------------------------------------------------
// Target

#[derive(Debug, Clone, PartialEq, Eq)]
struct Settings {
    host: String,
    port: u16,
}

impl Settings {
    fn endpoint(&self) -> String {
        url_text::endpoint(&self.host, self.port)
    }
}

/// The settings; every error ends with the URL's form.
fn parse_target(target: &Target) -> Result<Settings, String> {
    let parse = || {
        let url = target.url();
        Query::parse(url, &[])?;
        if url.query().is_some() {
            return Err("memcached takes no parameters: remove the '?'".to_string());
        }
        let parts = UrlParts::parse(target, DEFAULT_PORT)?;
        parts.no_credentials("memcached's text protocol has no authentication")?;
        parts.no_path("memcached has no databases")?;
        let (host, port) = parts.one_host(DEFAULT_HOST)?;
        Ok(Settings { host, port })
    };
    parse().map_err(|e: String| format!("{e} (use {})", INFO.url_form))
}

// ---------------------------------------------------------------------------
// Driver

/// A memcached target. Cheap to share: just the address.
#[derive(Debug)]
pub struct MemcachedDriver {
    host: String,
    port: u16,
    endpoint: Arc<str>,
}

impl MemcachedDriver {
    /// Parses the target; makes no connection.
    pub fn from_target(target: &Target) -> Result<MemcachedDriver, String> {
        let s = parse_target(target)?;
        Ok(MemcachedDriver {
            endpoint: s.endpoint().into(),
            host: s.host,
            port: s.port,
        })
    }
}

impl MemcachedDriver {
    /// A connection whose server has answered `version` as memcached does.
    async fn open(&self, progress: &Progress) -> Result<MemcachedConn, DriverError> {
        let tcp = connect_tcp(&self.host, self.port)
            .await
            .map_err(|e| connect_error(&e, &self.endpoint))?;
        let mut conn = MemcachedConn {
            stream: Stream::plain(tcp),
            endpoint: self.endpoint.clone(),
            wbuf: Vec::with_capacity(WRITE_BUF),
            ops: Vec::with_capacity(64),
            rbuf: ReadBuf::new(),
            busy: false,
            version: String::new(),
        };
        progress.set(Awaiting::First("memcached reply to `version`"));
        conn.version = conn.greet().await?;
        Ok(conn)
    }
}

impl Driver for MemcachedDriver {
    type Conn = MemcachedConn;

    fn endpoint(&self) -> String {
        self.endpoint.to_string()
    }

    async fn connect(&self) -> Result<MemcachedConn, DriverError> {
        self.open(&Progress::new()).await
    }

    async fn connect_within(
        &self,
        timeout: std::time::Duration,
    ) -> Result<MemcachedConn, DriverError> {
        let progress = Progress::new();
        peer::within(
            timeout,
            &self.endpoint,
            "memcached",
            &progress,
            self.open(&progress),
        )
        .await
    }

    async fn server_info(&self, conn: &mut MemcachedConn) -> Result<ServerInfo, DriverError> {
        Ok(ServerInfo::new("memcached", conn.version.clone()))
    }

    async fn server_counters(
        &self,
        conn: &mut MemcachedConn,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        const TOTALS: &[&str] = &[
            "cmd_get",
            "cmd_set",
            "get_hits",
            "get_misses",
            "evictions",
            "bytes_read",
            "bytes_written",
            "total_connections",
        ];
        const GAUGES: &[&str] = &["curr_connections", "curr_items", "bytes", "threads"];
        let mut out = Vec::new();
        for line in conn.stats().await? {
            let mut f = line.split_whitespace();
            let (Some("STAT"), Some(name), Some(value)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let Ok(v) = value.parse::<f64>() else {
                continue;
            };
            if TOTALS.contains(&name) {
                out.push((format!("{name}_total"), v));
            } else if GAUGES.contains(&name) {
                out.push((name.to_string(), v));
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------
// Connection

/// What a queued request expects back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Set,
    Delete,
    /// Not sent: the key (of this many bytes) is not a valid memcached key.
    BadKey(usize),
}

/// One session's connection.
pub struct MemcachedConn {
    stream: Stream,
    endpoint: Arc<str>,
    /// Encoded requests not yet sent.
    wbuf: Vec<u8>,
    /// One entry per queued request, in order.
    ops: Vec<Op>,
    rbuf: ReadBuf,
    /// Set while a flush is under way: if its future is dropped half-way,
    /// replies may still be on their way and the connection is unusable.
    busy: bool,
    /// The server's version, from its answer to `version` at connect.
    version: String,
}

impl std::fmt::Debug for MemcachedConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemcachedConn")
            .field("endpoint", &self.endpoint)
            .field("queued", &self.ops.len())
            .finish_non_exhaustive()
    }
}

impl KvConn for MemcachedConn {
    fn queue_get(&mut self, key: &[u8]) {
        self.queue(key, Op::Get, |buf| encode_get(buf, key));
    }

    fn queue_set(&mut self, key: &[u8], value: &[u8]) {
        self.queue(key, Op::Set, |buf| encode_set(buf, key, value));
    }

    fn queue_delete(&mut self, key: &[u8]) {
        self.queue(key, Op::Delete, |buf| encode_delete(buf, key));
    }

    fn queue_command(&mut self, _args: &[&[u8]]) -> Result<(), DriverError> {
        Err(DriverError::fatal(MSG_NO_COMMANDS))
    }

    async fn flush(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError> {
        if self.busy {
            self.clear();
            return Err(self.interrupted());
        }
        if self.ops.is_empty() {
            return Ok(());
        }
        self.busy = true;
        let result = self.exchange(on_reply).await;
        self.clear();
        if result.is_ok() {
            self.busy = false;
        }
        result
    }
}

impl MemcachedConn {
    /// Encodes a request on `key`, or, for a key memcached would refuse,
    /// sends nothing and answers it with an error at the flush.
    #[inline]
    fn queue(&mut self, key: &[u8], op: Op, encode: impl FnOnce(&mut Vec<u8>)) {
        if valid_key(key) {
            encode(&mut self.wbuf);
            self.ops.push(op);
        } else {
            self.ops.push(Op::BadKey(key.len()));
        }
    }

    fn clear(&mut self) {
        self.wbuf.clear();
        self.ops.clear();
    }

    /// A flush or `version` was dropped half-way: its replies may still
    /// arrive, so nothing more can be matched to its request.
    fn interrupted(&self) -> DriverError {
        DriverError::connection(format!(
            "connection to {} lost: an earlier request was interrupted before its reply",
            self.endpoint
        ))
    }

    fn lost(&self, e: &io::Error) -> DriverError {
        lost_error(e, &self.endpoint)
    }

    /// Writes the queue and reads every reply. While the socket will not
    /// take more (a large pipeline), replies are read meanwhile, so neither
    /// side can block the other.
    async fn exchange(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError> {
        let mut next = 0;
        let mut written = 0;
        if self.wbuf.len() <= BATCHED_WRITE {
            // Fits the socket's buffer at once: sent with the worker's
            // other requests (or written now off a worker).
            self.stream
                .send(&self.wbuf)
                .await
                .map_err(|e| self.lost(&e))?;
            written = self.wbuf.len();
        }
        let tcp = self
            .stream
            .tcp()
            .expect("memcached connections are plain TCP");
        while written < self.wbuf.len() {
            match tcp.try_write(&self.wbuf[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let ready = tcp
                        .ready(Interest::READABLE | Interest::WRITABLE)
                        .await
                        .map_err(|e| self.lost(&e))?;
                    if ready.is_readable() {
                        match tcp.try_read(self.rbuf.spare()) {
                            Ok(0) => return Err(self.lost(&io::ErrorKind::UnexpectedEof.into())),
                            Ok(n) => self.rbuf.filled(n),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(self.lost(&e)),
                        }
                        next = self
                            .rbuf
                            .deliver(&self.ops, next, &self.endpoint, on_reply)?;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(&e)),
            }
        }
        loop {
            next = self
                .rbuf
                .deliver(&self.ops, next, &self.endpoint, on_reply)?;
            if next == self.ops.len() {
                return Ok(());
            }
            match self.stream.read(self.rbuf.spare()).await {
                Ok(0) => return Err(self.lost(&io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => self.rbuf.filled(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(&e)),
            }
        }
    }

    /// Sends `version` and reads the answer, checking from its first byte
    /// that the server answers as memcached (`VERSION 1.6.21`, or an error
    /// line memcached sends when it refuses the connection); the version.
    async fn greet(&mut self) -> Result<String, DriverError> {
        let ep = &self.endpoint;
        self.stream
            .write_all(b"version\r\n")
            .await
            .map_err(|e| connect_error(&e, ep))?;
        loop {
            let pending = self.rbuf.pending();
            let nl = pending.iter().position(|&b| b == b'\n');
            let head = &pending[..nl.unwrap_or(pending.len())];
            if !version_reply_start_ok(head) || (nl.is_none() && head.len() > MAX_LINE) {
                return Err(DriverError::fatal(peer::not_answering_as(
                    ep,
                    "memcached",
                    "a memcached reply to `version`",
                    pending,
                )));
            }
            if nl.is_some() {
                let used = head.len() + 1;
                let line = String::from_utf8_lossy(trim_cr(head)).into_owned();
                return match line.strip_prefix("VERSION ") {
                    Some(v) => {
                        self.rbuf.consume(used);
                        Ok(v.trim().to_string())
                    }
                    // Too many connections, out of memory.
                    None => Err(DriverError::connection(format!(
                        "memcached at {ep} answered `version` with '{}'",
                        shown(line.as_bytes())
                    ))),
                };
            }
            match self.stream.read(self.rbuf.spare()).await {
                Ok(0) => {
                    return Err(DriverError::connection(format!(
                        "{ep} closed the connection without answering `version`: is a memcached \
                         server listening there?"
                    )))
                }
                Ok(n) => self.rbuf.filled(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(connect_error(&e, ep)),
            }
        }
    }

    /// `stats`: the `STAT name value` lines.
    async fn stats(&mut self) -> Result<Vec<String>, DriverError> {
        self.admin(b"stats\r\n", true).await
    }

    /// Sends an admin command and reads its reply: one line, or with
    /// `until_end` every line up to `END`.
    async fn admin(&mut self, req: &[u8], until_end: bool) -> Result<Vec<String>, DriverError> {
        if self.busy {
            return Err(self.interrupted());
        }
        if !self.ops.is_empty() {
            return Err(DriverError::fatal(
                "memcached: an admin command was sent with requests queued",
            ));
        }
        self.busy = true;
        self.stream
            .write_all(req)
            .await
            .map_err(|e| self.lost(&e))?;
        let mut lines = Vec::new();
        loop {
            let pending = self.rbuf.pending();
            if let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                let line = String::from_utf8_lossy(trim_cr(&pending[..nl])).into_owned();
                self.rbuf.consume(nl + 1);
                let last = !until_end || line == "END" || line.contains("ERROR");
                if line != "END" {
                    lines.push(line);
                }
                if last {
                    self.busy = false;
                    return Ok(lines);
                }
                continue;
            }
            if pending.len() > MAX_LINE {
                return Err(DriverError::fatal(format!(
                    "{} does not answer like a memcached server: got '{}'",
                    self.endpoint,
                    shown(pending)
                )));
            }
            match self.stream.read(self.rbuf.spare()).await {
                Ok(0) => return Err(self.lost(&io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => self.rbuf.filled(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(&e)),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Encoding

/// Whether memcached accepts `key`: 1 to 250 bytes, none of them a space or
/// a control character.
fn valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN && key.iter().all(|&b| b > b' ' && b != 0x7f)
}

fn encode_get(buf: &mut Vec<u8>, key: &[u8]) {
    buf.reserve(key.len() + 6);
    buf.extend_from_slice(b"get ");
    buf.extend_from_slice(key);
    buf.extend_from_slice(b"\r\n");
}

fn encode_delete(buf: &mut Vec<u8>, key: &[u8]) {
    buf.reserve(key.len() + 9);
    buf.extend_from_slice(b"delete ");
    buf.extend_from_slice(key);
    buf.extend_from_slice(b"\r\n");
}

fn encode_set(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    buf.reserve(key.len() + value.len() + 36);
    buf.extend_from_slice(b"set ");
    buf.extend_from_slice(key);
    buf.extend_from_slice(b" 0 0 ");
    buf.extend_from_slice(itoa::Buffer::new().format(value.len()).as_bytes());
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(value);
    buf.extend_from_slice(b"\r\n");
}

// ---------------------------------------------------------------------------
// Decoding

/// Received bytes not yet parsed, and how much the reply being parsed
/// needs; the buffer is reused for the connection's lifetime.
struct ReadBuf {
    data: ReadBuffer,
    /// Total size of the incomplete reply at the first unread byte, when
    /// its header said.
    need: usize,
}

impl ReadBuf {
    fn new() -> ReadBuf {
        ReadBuf {
            data: ReadBuffer::with_capacity(READ_BUF),
            need: 0,
        }
    }

    fn pending(&self) -> &[u8] {
        self.data.pending()
    }

    fn consume(&mut self, n: usize) {
        self.data.consume(n);
    }

    /// Space to read into, large enough for the whole reply being parsed
    /// when its size is known, and never tiny.
    fn spare(&mut self) -> &mut [u8] {
        self.data.spare(self.need)
    }

    fn filled(&mut self, n: usize) {
        self.data.filled(n);
    }

    /// Parses every complete reply in the buffer, from request `next` on,
    /// handing each to `on_reply`. Returns the index of the first request
    /// still waiting for its reply.
    fn deliver(
        &mut self,
        ops: &[Op],
        mut next: usize,
        endpoint: &str,
        on_reply: &mut OnReply<'_>,
    ) -> Result<usize, DriverError> {
        while next < ops.len() {
            let expect = match ops[next] {
                Op::BadKey(len) => {
                    on_reply(self.data.reply_at(next), Err(bad_key(len)));
                    next += 1;
                    continue;
                }
                op => op,
            };
            let buf = self.data.pending();
            match parse(buf, expect) {
                Parsed::Need(total) => {
                    self.need = total;
                    break;
                }
                Parsed::Reply(reply, len) => {
                    let result = match reply {
                        Reply::Hit(a, b) => Ok(KvReply::Hit(&buf[a..b])),
                        Reply::Miss => Ok(KvReply::Miss),
                        Reply::Done => Ok(KvReply::Done),
                        Reply::Error(a, b) => Err(server_error(&buf[a..b], endpoint)),
                    };
                    on_reply(self.data.reply_at(next), result);
                    self.data.consume(len);
                    self.need = 0;
                    next += 1;
                }
                Parsed::Unexpected(a, b) => {
                    let what = match expect {
                        Op::Get => "a GET",
                        Op::Delete => "a DELETE",
                        _ => "a SET",
                    };
                    return Err(DriverError::connection(format!(
                        "connection to {endpoint} dropped: unexpected reply '{}' to {what} \
                         (not a memcached server, or the stream is out of step)",
                        shown(&buf[a..b])
                    )));
                }
            }
        }
        Ok(next)
    }
}

/// A complete reply; ranges index the parsed buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// The value is `buf[.0...1]`.
    Hit(usize, usize),
    Miss,
    Done,
    /// `ERROR`, `CLIENT_ERROR …` or `SERVER_ERROR …`: the line, `buf[.0...1]`.
    Error(usize, usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parsed {
    /// Incomplete: needs this many bytes in all (0: not known yet).
    Need(usize),
    /// The reply and how many bytes it took.
    Reply(Reply, usize),
    /// Not a reply to this request: the offending text, `buf[.0...1]`.
    Unexpected(usize, usize),
}

/// Parses the reply at the start of `buf` to a request of kind `op`.
fn parse(buf: &[u8], op: Op) -> Parsed {
    let scan = &buf[..buf.len().min(MAX_LINE)];
    let Some(nl) = scan.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_LINE {
            Parsed::Unexpected(0, MAX_LINE.min(80))
        } else {
            Parsed::Need(0)
        };
    };
    let line_len = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    let line = &buf[..line_len];
    let after = nl + 1;
    match (op, line) {
        (Op::Get, b"END") => Parsed::Reply(Reply::Miss, after),
        (Op::Set, b"STORED" | b"NOT_STORED") => Parsed::Reply(Reply::Done, after),
        (Op::Delete, b"DELETED" | b"NOT_FOUND") => Parsed::Reply(Reply::Done, after),
        (Op::Get, _) if line.starts_with(b"VALUE ") => match value_len(&line[6..]) {
            Some(n) => {
                let data_end = after + n;
                let total = data_end + 7; // "\r\n" + "END\r\n"
                if buf.len() < total {
                    Parsed::Need(total)
                } else if &buf[data_end..total] == b"\r\nEND\r\n" {
                    Parsed::Reply(Reply::Hit(after, data_end), total)
                } else {
                    Parsed::Unexpected(data_end, total)
                }
            }
            None => Parsed::Unexpected(0, line_len),
        },
        _ if line == b"ERROR"
            || line.starts_with(b"ERROR ")
            || line.starts_with(b"CLIENT_ERROR")
            || line.starts_with(b"SERVER_ERROR") =>
        {
            Parsed::Reply(Reply::Error(0, line_len), after)
        }
        _ => Parsed::Unexpected(0, line_len),
    }
}

/// The `<bytes>` of `VALUE <key> <flags> <bytes> [<cas>]`, given what
/// follows `VALUE `.
fn value_len(rest: &[u8]) -> Option<usize> {
    let mut fields = rest.split(|&b| b == b' ');
    let _key = fields.next().filter(|k| !k.is_empty())?;
    let _flags = fields.next().filter(|f| !f.is_empty())?;
    let bytes = fields.next()?;
    if bytes.is_empty() || bytes.len() > 19 {
        return None;
    }
    let mut n = 0u64;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    // memcached's items are at most 1 GB (`-I 1024m`); anything larger is
    // not a length to allocate for.
    usize::try_from(n).ok().filter(|&n| n <= MAX_VALUE_LEN)
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A reply as text for messages: lossy UTF-8, control characters escaped,
/// cut at 80 characters.
/// Whether `head`, the first bytes of the answer to `version` (up to its
/// end of line, if it has come), can begin a line memcached sends there.
fn version_reply_start_ok(head: &[u8]) -> bool {
    ["VERSION ", "ERROR", "SERVER_ERROR ", "CLIENT_ERROR "]
        .iter()
        .any(|p| p.as_bytes().starts_with(head) || head.starts_with(p.as_bytes()))
}

fn shown(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(80)];
    let mut s: String = String::from_utf8_lossy(cut).escape_debug().collect();
    if bytes.len() > cut.len() {
        s.push('…');
    }
    s
}

// ---------------------------------------------------------------------------
// Errors

fn bad_key(len: usize) -> DriverError {
    let why = if len == 0 {
        "an empty key".to_string()
    } else if len > MAX_KEY_LEN {
        format!("a key of {len} bytes (memcached's limit is {MAX_KEY_LEN})")
    } else {
        "a key with a space or control character".to_string()
    };
    DriverError::fatal(format!(
        "memcached cannot store {why}: keys must be 1 to {MAX_KEY_LEN} bytes without spaces or control characters"
    ))
}

/// `ERROR`, `CLIENT_ERROR <msg>` or `SERVER_ERROR <msg>` from the server.
fn server_error(line: &[u8], endpoint: &str) -> DriverError {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    let msg = text
        .strip_prefix("SERVER_ERROR")
        .or_else(|| text.strip_prefix("CLIENT_ERROR"))
        .map(str::trim)
        .unwrap_or("");
    if text.starts_with("SERVER_ERROR") {
        if msg.starts_with("out of memory") {
            return DriverError::retryable(format!("memcached at {endpoint}: {text}"));
        }
        if msg.contains("too large") {
            return DriverError::fatal(format!(
                "memcached at {endpoint}: {text}: the value is larger than the server's item \
                 size limit (1 MB unless memcached runs with -I); use smaller values"
            ));
        }
        return DriverError::fatal(format!("memcached at {endpoint}: {text}"));
    }
    if text.starts_with("CLIENT_ERROR") {
        return DriverError::fatal(format!("memcached at {endpoint} refused a request: {text}"));
    }
    DriverError::fatal(format!(
        "memcached at {endpoint} did not understand a request: {text}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadcell_core::ErrorClass;

    const EP: &str = "127.0.0.1:11211";

    fn settings(url: &str) -> Result<Settings, String> {
        parse_target(&Target::parse(url).unwrap())
    }

    #[test]
    fn info() {
        assert_eq!(INFO.name, "memcached");
        assert_eq!(INFO.schemes, &["memcached"]);
        assert_eq!(INFO.family, Family::KV);
        assert_eq!(INFO.kv, KvCapabilities { commands: false });
    }

    #[test]
    fn urls() {
        let s = settings("memcached://cache.example:11311").unwrap();
        assert_eq!((s.host.as_str(), s.port), ("cache.example", 11311));
        assert_eq!(s.endpoint(), "cache.example:11311");
        let s = settings("memcached://10.0.0.2").unwrap();
        assert_eq!(s.endpoint(), "10.0.0.2:11211");
        let s = settings("memcached://10.0.0.2/").unwrap();
        assert_eq!(s.endpoint(), "10.0.0.2:11211");
        let s = settings("memcached://[::1]:5000").unwrap();
        assert_eq!(
            (s.host.as_str(), s.endpoint().as_str()),
            ("::1", "[::1]:5000")
        );
        let d =
            MemcachedDriver::from_target(&Target::parse("memcached://localhost").unwrap()).unwrap();
        assert_eq!(d.endpoint(), "localhost:11211");
    }

    #[test]
    fn urls_with_what_memcached_lacks_are_refused() {
        let err = settings("memcached://h/0").unwrap_err();
        assert!(
            err.contains("no databases") && err.contains("'/0'"),
            "{err}"
        );
        let err = settings("memcached://u:hunter2@h:1").unwrap_err();
        assert!(err.contains("no authentication"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let err = settings("memcached://u@h:1").unwrap_err();
        assert!(err.contains("no authentication"), "{err}");
        let err = settings("memcached://h:1?timeout=5&pool=2").unwrap_err();
        assert!(
            err.contains("no parameters") && err.contains("'timeout'") && err.contains("'pool'"),
            "{err}"
        );
        let err = settings("memcached://h:1?").unwrap_err();
        assert!(err.contains("no parameters"), "{err}");
        // A fragment is refused by Target::parse, for every driver.
        assert!(Target::parse("memcached://h:1#x").is_err());
        assert!(settings("memcached://h:0").is_err());
        for e in [
            settings("memcached://h/0").unwrap_err(),
            settings("memcached://h?x=1").unwrap_err(),
        ] {
            assert!(e.contains("memcached://host:port"), "{e}");
        }
    }

    #[test]
    fn encodes_requests() {
        let mut buf = Vec::new();
        encode_get(&mut buf, b"key:1");
        encode_set(&mut buf, b"key:2", b"a\r\nb");
        encode_set(&mut buf, b"k", b"");
        assert_eq!(
            buf,
            b"get key:1\r\nset key:2 0 0 4\r\na\r\nb\r\nset k 0 0 0\r\n\r\n".as_slice()
        );
        let cap = buf.capacity();
        buf.clear();
        encode_get(&mut buf, b"x");
        assert_eq!(buf.capacity(), cap, "the buffer is reused");
    }

    #[test]
    fn keys() {
        assert!(valid_key(b"memtier-123"));
        assert!(valid_key(&[b'k'; MAX_KEY_LEN]));
        assert!(!valid_key(&[b'k'; MAX_KEY_LEN + 1]));
        assert!(!valid_key(b""));
        assert!(!valid_key(b"a b"));
        assert!(!valid_key(b"a\r\nb"));
        assert!(!valid_key(b"a\x7f"));
        assert!(!valid_key(b"tab\t"));
        assert!(valid_key("clé".as_bytes()));
        assert!(bad_key(0).message.contains("empty key"));
        assert!(bad_key(300).message.contains("300 bytes"));
        assert!(bad_key(3).message.contains("space or control"));
        assert_eq!(bad_key(3).class, ErrorClass::Fatal);
    }

    #[test]
    fn parses_each_reply_kind() {
        let hit = b"VALUE k 0 5\r\nhello\r\nEND\r\n";
        assert_eq!(
            parse(hit, Op::Get),
            Parsed::Reply(Reply::Hit(13, 18), hit.len())
        );
        let cas = b"VALUE k 42 3 99\r\nabc\r\nEND\r\nrest";
        assert_eq!(parse(cas, Op::Get), Parsed::Reply(Reply::Hit(17, 20), 27));
        let empty = b"VALUE k 0 0\r\n\r\nEND\r\n";
        assert_eq!(
            parse(empty, Op::Get),
            Parsed::Reply(Reply::Hit(13, 13), empty.len())
        );
        assert_eq!(parse(b"END\r\n", Op::Get), Parsed::Reply(Reply::Miss, 5));
        assert_eq!(parse(b"STORED\r\n", Op::Set), Parsed::Reply(Reply::Done, 8));
        assert_eq!(
            parse(b"NOT_STORED\r\n", Op::Set),
            Parsed::Reply(Reply::Done, 12)
        );
        assert_eq!(
            parse(b"ERROR\r\n", Op::Get),
            Parsed::Reply(Reply::Error(0, 5), 7)
        );
        assert_eq!(
            parse(b"CLIENT_ERROR bad data chunk\r\n", Op::Set),
            Parsed::Reply(Reply::Error(0, 27), 29)
        );
        assert_eq!(
            parse(b"SERVER_ERROR out of memory storing object\r\n", Op::Set),
            Parsed::Reply(Reply::Error(0, 41), 43)
        );
    }

    #[test]
    fn incomplete_replies_say_what_they_need() {
        assert_eq!(parse(b"", Op::Get), Parsed::Need(0));
        assert_eq!(parse(b"VALUE k 0 5\r", Op::Get), Parsed::Need(0));
        assert_eq!(parse(b"VALUE k 0 5\r\nhel", Op::Get), Parsed::Need(25));
        assert_eq!(
            parse(b"VALUE k 0 500000\r\n", Op::Get),
            Parsed::Need(18 + 500_000 + 7)
        );
        assert_eq!(parse(b"STOR", Op::Set), Parsed::Need(0));
    }

    #[test]
    fn replies_that_do_not_fit_are_unexpected() {
        for (buf, op) in [
            (&b"STORED\r\n"[..], Op::Get),
            (b"END\r\n", Op::Set),
            (b"VALUE k 0 1\r\nx\r\nEND\r\n", Op::Set),
            (b"VALUE k 0 1\r\nxy\r\nEND\r\n", Op::Get),
            (b"VALUE k 0\r\n", Op::Get),
            (b"VALUE k 0 -1\r\n", Op::Get),
            (b"VALUE k 0 12x\r\n", Op::Get),
            (b"VALUE k 0 9999999999999999999\r\n", Op::Get),
            (b"VALUE k 0 99999999999\r\n", Op::Get),
            (b"+OK\r\n", Op::Set),
            (b"-ERR unknown command\r\n", Op::Get),
            (b"EXISTS\r\n", Op::Set),
        ] {
            assert!(
                matches!(parse(buf, op), Parsed::Unexpected(..)),
                "{:?} to {op:?}",
                String::from_utf8_lossy(buf)
            );
        }
        let long = vec![b'x'; MAX_LINE + 10];
        assert!(matches!(parse(&long, Op::Get), Parsed::Unexpected(..)));
    }

    /// What `deliver` handed out, owned.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Got {
        Hit(Vec<u8>),
        Miss,
        Done,
        Err(ErrorClass, String),
    }

    fn collect(rb: &mut ReadBuf, ops: &[Op], next: usize, got: &mut Vec<(usize, Got)>) -> usize {
        rb.deliver(ops, next, EP, &mut |at, r| {
            got.push((
                at.index,
                match r {
                    Ok(KvReply::Hit(b)) => Got::Hit(b.to_vec()),
                    Ok(KvReply::Miss) => Got::Miss,
                    Ok(KvReply::Done) => Got::Done,
                    Ok(KvReply::Array(a)) => panic!("memcached answers no arrays: {a:?}"),
                    Err(e) => Got::Err(e.class, e.message),
                },
            ))
        })
        .unwrap()
    }

    /// Feeds `stream` to a fresh read buffer in pieces cut at `cuts`,
    /// delivering after each piece; returns every reply in order.
    fn feed(stream: &[u8], cuts: &[usize], ops: &[Op]) -> Vec<(usize, Got)> {
        let mut rb = ReadBuf::new();
        let mut got = Vec::new();
        let mut next = 0;
        let mut from = 0;
        for &to in cuts.iter().chain([&stream.len()]) {
            let mut piece = &stream[from..to];
            while !piece.is_empty() {
                let spare = rb.spare();
                let n = spare.len().min(piece.len());
                spare[..n].copy_from_slice(&piece[..n]);
                rb.filled(n);
                piece = &piece[n..];
                next = collect(&mut rb, ops, next, &mut got);
            }
            from = to;
        }
        next = collect(&mut rb, ops, next, &mut got);
        assert_eq!(next, ops.len(), "every reply delivered");
        assert!(rb.pending().is_empty(), "nothing left over");
        got
    }

    const STREAM: &[u8] = b"VALUE key:1 0 7\r\nab\r\nEND\r\nEND\r\nEND\r\nSTORED\r\nNOT_STORED\r\n\
        SERVER_ERROR out of memory storing object\r\nCLIENT_ERROR line too long\r\n\
        VALUE k 3 0 17\r\n\r\nEND\r\nERROR\r\nSERVER_ERROR object too large for cache\r\n";
    const OPS: &[Op] = &[
        Op::Get,
        Op::Get,
        Op::Set,
        Op::BadKey(300),
        Op::Set,
        Op::Set,
        Op::Get,
        Op::Get,
        Op::Get,
        Op::Set,
    ];

    fn expected() -> Vec<(usize, Got)> {
        vec![
            (0, Got::Hit(b"ab\r\nEND".to_vec())),
            (1, Got::Miss),
            (2, Got::Done),
            (3, Got::Err(ErrorClass::Fatal, bad_key(300).message)),
            (4, Got::Done),
            (
                5,
                Got::Err(
                    ErrorClass::Retryable,
                    format!("memcached at {EP}: SERVER_ERROR out of memory storing object"),
                ),
            ),
            (
                6,
                Got::Err(
                    ErrorClass::Fatal,
                    format!("memcached at {EP} refused a request: CLIENT_ERROR line too long"),
                ),
            ),
            (7, Got::Hit(Vec::new())),
            (
                8,
                Got::Err(
                    ErrorClass::Fatal,
                    format!("memcached at {EP} did not understand a request: ERROR"),
                ),
            ),
            (
                9,
                Got::Err(
                    ErrorClass::Fatal,
                    server_error(b"SERVER_ERROR object too large for cache", EP).message,
                ),
            ),
        ]
    }

    #[test]
    fn delivers_a_whole_pipeline_in_order() {
        assert_eq!(feed(STREAM, &[], OPS), expected());
    }

    #[test]
    fn replies_split_at_every_byte_boundary() {
        for cut in 0..=STREAM.len() {
            assert_eq!(feed(STREAM, &[cut], OPS), expected(), "cut at {cut}");
        }
        let every: Vec<usize> = (1..STREAM.len()).collect();
        assert_eq!(feed(STREAM, &every, OPS), expected(), "one byte at a time");
    }

    #[test]
    fn a_delete_is_done_whether_or_not_the_key_was_there() {
        assert_eq!(
            parse(b"DELETED\r\n", Op::Delete),
            Parsed::Reply(Reply::Done, 9)
        );
        assert_eq!(
            parse(b"NOT_FOUND\r\n", Op::Delete),
            Parsed::Reply(Reply::Done, 11)
        );
        assert_eq!(parse(b"STORED\r\n", Op::Delete), Parsed::Unexpected(0, 6));
        let mut buf = Vec::new();
        encode_delete(&mut buf, b"k:1");
        assert_eq!(buf, b"delete k:1\r\n");
    }

    #[test]
    fn every_split_of_two_cuts_in_a_hit() {
        let stream = b"VALUE a 0 4\r\n\r\nEN\r\nEND\r\nSTORED\r\n";
        let ops = [Op::Get, Op::Set];
        for a in 0..=stream.len() {
            for b in a..=stream.len() {
                assert_eq!(
                    feed(stream, &[a, b], &ops),
                    vec![(0, Got::Hit(b"\r\nEN".to_vec())), (1, Got::Done)],
                    "cuts at {a} and {b}"
                );
            }
        }
    }

    #[test]
    fn a_value_larger_than_the_buffer_grows_it_once() {
        let value: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut stream = format!("VALUE big 0 {}\r\n", value.len()).into_bytes();
        stream.extend_from_slice(&value);
        stream.extend_from_slice(b"\r\nEND\r\nEND\r\n");
        let cuts: Vec<usize> = (1..stream.len()).step_by(1000).collect();
        assert_eq!(
            feed(&stream, &cuts, &[Op::Get, Op::Get]),
            vec![(0, Got::Hit(value)), (1, Got::Miss)]
        );
    }

    #[test]
    fn unexpected_replies_break_the_connection() {
        let mut rb = ReadBuf::new();
        let s = b"STORED\r\n";
        rb.spare()[..s.len()].copy_from_slice(s);
        rb.filled(s.len());
        let err = rb.deliver(&[Op::Get], 0, EP, &mut |_, _| {}).unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection);
        assert!(
            err.message.contains("unexpected reply 'STORED' to a GET"),
            "{err}"
        );
        assert!(err.message.contains(EP), "{err}");
    }

    #[test]
    fn server_error_classes() {
        let e = server_error(b"SERVER_ERROR out of memory storing object", EP);
        assert_eq!(e.class, ErrorClass::Retryable);
        let e = server_error(b"SERVER_ERROR object too large for cache", EP);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e.message.contains("-I"), "{e}");
        let e = server_error(b"SERVER_ERROR temporary failure", EP);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e.message.contains("temporary failure"), "{e}");
        let e = server_error(b"CLIENT_ERROR bad command line format", EP);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(
            e.message.ends_with("CLIENT_ERROR bad command line format"),
            "{e}"
        );
        assert_eq!(server_error(b"ERROR", EP).class, ErrorClass::Fatal);
    }

    #[test]
    fn io_errors() {
        let e = connect_error(&io::ErrorKind::ConnectionRefused.into(), EP);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(
            e.message,
            "cannot connect to 127.0.0.1:11211: connection refused (is the server running?)"
        );
        let dns =
            io::Error::other("failed to lookup address information: Name or service not known");
        assert_eq!(connect_error(&dns, EP).class, ErrorClass::Fatal);
        let e = lost_error(&io::ErrorKind::ConnectionReset.into(), EP);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(
            e.message,
            "connection to 127.0.0.1:11211 lost: connection reset by the server"
        );
        let e = lost_error(&io::ErrorKind::UnexpectedEof.into(), EP);
        assert!(
            e.message.ends_with("the server closed the connection"),
            "{e}"
        );
    }

    #[test]
    fn the_answer_to_version_is_told_from_its_first_bytes() {
        for ok in [
            &b""[..],
            b"VER",
            b"VERSION 1.6.21",
            b"SERVER_ERROR out of memory",
            b"ERROR",
        ] {
            assert!(version_reply_start_ok(ok), "{}", shown(ok));
        }
        for not in [&b"-ERR"[..], b"+PONG", b"V1", b"\x5b\x00", b"HTTP/1.1"] {
            assert!(!version_reply_start_ok(not), "{}", shown(not));
        }
    }

    #[test]
    fn shown_text_is_escaped_and_cut() {
        assert_eq!(shown(b"a\r\nb"), "a\\r\\nb");
        assert_eq!(shown(&[b'x'; 100]).chars().count(), 81);
    }
}
