//! MySQL and MariaDB over loadcell's own wire session: one plain connection
//! per session (no pool), prepared statements over the binary protocol.
//!
//! Target: `mysql://user:pass@host:port/db?sslmode=...&sslrootcert=PATH`
//! (`mariadb://` is the same). Defaults: host 127.0.0.1, port 3306, user
//! root, no password, no default database, `sslmode=disable`.
//!
//! TLS modes, with libpq's meanings as in `tls.rs` (whose
//! [`client_config`](crate::transport::tls::client_config) does the verification):
//! `disable`; `prefer` (TLS without verification when the server offers
//! it, plaintext otherwise); `require` (TLS, no certificate checks, or the
//! chain checks of `verify-ca` when `sslrootcert` is given); `verify-ca`
//! (chain checked against `sslrootcert`, or the webpki roots without it);
//! `verify-full` (chain and host name).
//!
//! The session owns its socket and two reused buffers. The hot path
//! ([`SqlConn::exec`]) encodes COM_STMT_EXECUTE into the write buffer and
//! sends it with one write; the response is read into the read buffer
//! (one `read` when it fits) and walked packet by packet without decoding
//! rows: an OK packet gives the affected rows (the rows an UPDATE matched,
//! as with every other driver and with JDBC's Connector/J, not only those
//! it changed: CLIENT_FOUND_ROWS), a result set is skipped up
//! to its terminator, counting rows. `mysql_common` parses and builds the
//! connection-phase packets (handshake, SSL request, auth switch) and does
//! the scrambles and the RSA encryption of caching_sha2_password.
//!
//! Authentication: mysql_native_password and caching_sha2_password (fast
//! path; full authentication sends the password in clear over TLS, or
//! RSA-encrypted with the server's public key over plain TCP), including
//! auth switch requests. Other plugins are a fatal error naming them.

use std::cell::Cell;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use loadcell_core::kv::KvCapabilities;
use loadcell_core::sql::{
    integer_from_text, not_an_integer, wrong_param_count, Dialect, SqlConn, SqlParam,
};
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, Target};
use mysql_common::constants::{CapabilityFlags, MariadbCapabilities, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{
    AuthPlugin, AuthSwitchRequest, HandshakePacket, HandshakeResponse, SslRequest,
};
use mysql_common::proto::MySerialize;
use rustls::ClientConfig;

use crate::transport::peer::{self, Awaiting, Progress};
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::{connect_tcp, Stream, TlsStartError};
use crate::transport::tls::SslMode;
use crate::transport::url_text::{self, percent_decode};
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "mysql",
    schemes: &["mysql", "mariadb"],
    family: Family::Sql,
    url_form: "mysql://user:pass@host:port/db[?sslmode=...&sslrootcert=PATH]",
    about: "MySQL and MariaDB (prepared statements over the binary protocol)",
    kv: KvCapabilities::NONE,
    blocking: false,
};

const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_PORT: u16 = 3306;
const DEFAULT_USER: &str = "root";
const PARAMS: &[&str] = &["sslmode", "sslrootcert"];

/// MySQL client error codes, used for errors seen on the client side so that
/// they read like the ones the `mysql` client prints.
const CR_CONN_HOST_ERROR: &str = "2003";
const CR_SERVER_LOST: &str = "2013";

/// What a connection needs to word its errors.
#[derive(Debug)]
struct Ctx {
    /// `host:port`, for messages.
    endpoint: String,
    user: String,
    sslmode: SslMode,
}

/// Connection settings parsed from a target URL (no secrets in `Debug`).
#[derive(Clone, PartialEq, Eq)]
struct Settings {
    host: String,
    port: u16,
    user: String,
    password: Option<String>,
    db: Option<String>,
    sslmode: SslMode,
    sslrootcert: Option<PathBuf>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .finish()
    }
}

impl Settings {
    fn endpoint(&self) -> String {
        url_text::endpoint(&self.host, self.port)
    }
}

fn parse_url(url: &url::Url) -> Result<Settings, String> {
    let host = match url.host() {
        None => DEFAULT_HOST.to_string(),
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(url::Host::Ipv4(a)) => a.to_string(),
        Some(url::Host::Domain("")) => DEFAULT_HOST.to_string(),
        Some(url::Host::Domain(d)) => percent_decode(d, "host")?,
    };
    let port = url.port().unwrap_or(DEFAULT_PORT);
    let user = match url.username() {
        "" => DEFAULT_USER.to_string(),
        u => percent_decode(u, "user")?,
    };
    let password = url
        .password()
        .map(|p| percent_decode(p, "password"))
        .transpose()?;
    let db = match url.path().trim_start_matches('/') {
        "" => None,
        p if p.contains('/') => {
            return Err(format!(
                "the path must be a single database name, got '{p}'"
            ))
        }
        p => Some(percent_decode(p, "database name")?),
    };

    let mut sslmode = SslMode::Disable;
    let mut sslrootcert = None;
    for (key, value) in url.query_pairs() {
        match &*key {
            "sslmode" => sslmode = SslMode::parse(&value)?,
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
    Ok(Settings {
        host,
        port,
        user,
        password,
        db,
        sslmode,
        sslrootcert,
    })
}

/// A MySQL/MariaDB target. Cheap to share: the settings and the TLS
/// configuration are built once.
pub struct MysqlDriver {
    settings: Settings,
    /// `None` for `sslmode=disable`.
    tls: Option<Arc<ClientConfig>>,
    ctx: Arc<Ctx>,
}

impl std::fmt::Debug for MysqlDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlDriver")
            .field("endpoint", &self.ctx.endpoint)
            .field("user", &self.ctx.user)
            .field("sslmode", &self.ctx.sslmode)
            .finish_non_exhaustive()
    }
}

impl MysqlDriver {
    /// Parses the target and reads `sslrootcert`; makes no connection.
    pub fn from_target(target: &Target) -> Result<MysqlDriver, String> {
        let s = parse_url(target.url())?;
        let tls = crate::transport::tls::client_config(s.sslmode, s.sslrootcert.as_deref())?;
        let ctx = Arc::new(Ctx {
            endpoint: s.endpoint(),
            user: s.user.clone(),
            sslmode: s.sslmode,
        });
        Ok(MysqlDriver {
            settings: s,
            tls,
            ctx,
        })
    }
}

impl MysqlDriver {
    async fn open(&self, progress: &Progress) -> Result<MysqlConn, DriverError> {
        let session =
            Session::connect(&self.settings, self.tls.as_ref(), &self.ctx, progress).await?;
        Ok(MysqlConn { session })
    }
}

impl Driver for MysqlDriver {
    type Conn = MysqlConn;

    fn endpoint(&self) -> String {
        self.ctx.endpoint.clone()
    }

    async fn connect(&self) -> Result<MysqlConn, DriverError> {
        self.open(&Progress::new()).await
    }

    async fn connect_within(&self, timeout: std::time::Duration) -> Result<MysqlConn, DriverError> {
        let progress = Progress::new();
        peer::within(
            timeout,
            &self.ctx.endpoint,
            "MySQL",
            &progress,
            self.open(&progress),
        )
        .await
    }

    async fn server_info(&self, conn: &mut MysqlConn) -> Result<ServerInfo, DriverError> {
        let version = conn
            .first_value("SELECT VERSION()")
            .await?
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        Ok(ServerInfo {
            product: product_of(&version).to_string(),
            version,
        })
    }

    async fn server_counters(
        &self,
        conn: &mut MysqlConn,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        const TOTALS: &[&str] = &[
            "Questions",
            "Com_commit",
            "Com_rollback",
            "Innodb_rows_read",
            "Innodb_rows_inserted",
            "Innodb_rows_updated",
            "Innodb_rows_deleted",
            "Innodb_buffer_pool_read_requests",
            "Innodb_buffer_pool_reads",
            "Innodb_row_lock_waits",
            "Innodb_data_fsyncs",
            // MariaDB 10.6+ reports no Innodb_rows_*: rows read, and
            // rows written per kind, from its server-wide counters.
            "Rows_read",
            "Handler_write",
            "Handler_update",
            "Handler_delete",
            "Bytes_received",
            "Bytes_sent",
        ];
        const GAUGES: &[&str] = &["Threads_running", "Threads_connected"];
        let names: Vec<String> = TOTALS
            .iter()
            .chain(GAUGES)
            .map(|n| format!("'{n}'"))
            .collect();
        let sql = format!(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ({})",
            names.join(",")
        );
        let rows = conn.session.query_text(&sql).await?;
        let mut out = Vec::new();
        let (mut requests, mut disk_reads) = (None, None);
        for row in rows {
            let mut cols = row.into_iter();
            let (Some(Some(name)), Some(Some(value))) = (cols.next(), cols.next()) else {
                continue;
            };
            let name = String::from_utf8_lossy(&name).into_owned();
            let Ok(v) = String::from_utf8_lossy(&value).trim().parse::<f64>() else {
                continue;
            };
            match name.as_str() {
                "Innodb_buffer_pool_read_requests" => requests = Some(v),
                "Innodb_buffer_pool_reads" => disk_reads = Some(v),
                _ => {}
            }
            let key = name.to_ascii_lowercase();
            if GAUGES.contains(&name.as_str()) {
                out.push((key, v));
            } else {
                out.push((format!("{key}_total"), v));
            }
        }
        if let (Some(req), Some(reads)) = (requests, disk_reads) {
            if req > 0.0 {
                out.push((
                    "innodb_buffer_pool_hit_pct_since_start".into(),
                    100.0 * (1.0 - reads / req),
                ));
            }
        }
        Ok(out)
    }
}

/// "MariaDB" when the version string says so (e.g. `10.11.6-MariaDB-0+deb12u1`).
fn product_of(version: &str) -> &'static str {
    if version.to_ascii_lowercase().contains("mariadb") {
        "MariaDB"
    } else {
        "MySQL"
    }
}

/// One session's connection.
pub struct MysqlConn {
    session: Session,
}

impl std::fmt::Debug for MysqlConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlConn")
            .field("endpoint", &self.session.ctx.endpoint)
            .field("id", &self.session.id)
            .finish()
    }
}

/// A prepared statement: the server's id and its parameter count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MysqlStmt {
    id: u32,
    params: u16,
    /// The parameter types the server has for this statement (see
    /// [`param_types`]); `None` before the first execution.
    bound: Cell<Option<u64>>,
}

/// The parameter types of an execution, a bit per parameter (set for
/// text); `None` when there are too many to track, so they are sent
/// every time.
fn param_types(params: &[SqlParam<'_>]) -> Option<u64> {
    if params.len() > 64 {
        return None;
    }
    Some(params.iter().enumerate().fold(0, |bits, (i, p)| match p {
        SqlParam::Int(_) => bits,
        SqlParam::Text(_) => bits | 1 << i,
    }))
}

impl MysqlConn {
    /// The server's id for this connection (`CONNECTION_ID()`).
    pub fn connection_id(&self) -> u32 {
        self.session.id
    }

    /// Whether the server leaves column definitions out of a prepared
    /// statement's repeated executions (MariaDB's metadata caching, 10.6
    /// and later), as it does for Connector/C.
    pub fn caches_metadata(&self) -> bool {
        self.session.framing.cache_metadata
    }

    /// Closes the connection politely (COM_QUIT). Dropping it works too.
    pub async fn close(mut self) -> Result<(), DriverError> {
        self.session.quit().await
    }

    /// First column of the first row of a text-protocol query (`None` for
    /// no row or NULL).
    async fn first_value(&mut self, sql: &str) -> Result<Option<Vec<u8>>, DriverError> {
        let rows = self.session.query_text(sql).await?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .flatten())
    }
}

impl SqlConn for MysqlConn {
    type Stmt = MysqlStmt;

    fn dialect(&self) -> Dialect {
        Dialect::MySql
    }

    async fn prepare(&mut self, sql: &str) -> Result<MysqlStmt, DriverError> {
        self.session.prepare(sql).await
    }

    async fn exec(
        &mut self,
        stmt: &MysqlStmt,
        params: &[SqlParam<'_>],
    ) -> Result<u64, DriverError> {
        if usize::from(stmt.params) != params.len() {
            return Err(DriverError::fatal(wrong_param_count(
                stmt.params.into(),
                params.len(),
            )));
        }
        // Types go with the first execution and whenever they change;
        // otherwise the server keeps the last ones, as with libmysqlclient.
        let types = param_types(params);
        let send_types = types.is_none() || stmt.bound.get() != types;
        let s = &mut self.session;
        s.begin()?;
        encode_execute(&mut s.wbuf, stmt.id, params, send_types);
        s.send().await?;
        let result = s.walk_response(false, None).await;
        if send_types {
            // After an error the server may or may not have kept the types
            // sent: send them again next time.
            stmt.bound.set(if result.is_ok() { types } else { None });
        }
        result
    }

    async fn simple(&mut self, sql: &str) -> Result<(), DriverError> {
        let s = &mut self.session;
        s.begin()?;
        encode_command(&mut s.wbuf, COM_QUERY, sql.as_bytes());
        s.send().await?;
        s.walk_response(true, None).await.map(|_| ())
    }

    async fn query_i64(&mut self, sql: &str) -> Result<Option<i64>, DriverError> {
        let value = self.first_value(sql).await?;
        let Some(value) = value else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&value);
        integer_from_text(&text)
            .map(Some)
            .ok_or_else(|| DriverError::fatal(not_an_integer(sql, &format!("'{text}'"))))
    }

    async fn query_strings(&mut self, sql: &str) -> Result<Vec<String>, DriverError> {
        let rows = self.session.query_text(sql).await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let first = r.into_iter().next().flatten().unwrap_or_default();
                String::from_utf8(first)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
            })
            .collect())
    }
}

// ---------------------------------------------------------------------------
// Wire session

/// Initial read buffer; it grows for larger responses.
const READ_BUF: usize = 64 * 1024;
/// A payload this long continues in the next packet.
const MAX_PAYLOAD: usize = 0xFF_FFFF;
/// The client's maximum packet size, as announced in the handshake.
const MAX_PACKET: u32 = 1 << 30;
/// utf8mb4_general_ci.
const UTF8MB4_GENERAL_CI: u8 = 45;

const COM_QUIT: u8 = 0x01;
const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;

const MYSQL_TYPE_LONGLONG: u8 = 0x08;
const MYSQL_TYPE_VAR_STRING: u8 = 0xFD;

/// Received bytes and the packet framing over them. A payload of exactly
/// 0xFFFFFF bytes continues in the next packet; such pieces are joined in
/// place so that every payload handed out is contiguous.
#[derive(Debug)]
struct PacketBuf {
    data: ReadBuffer,
    /// A payload being joined: its length so far (its pieces before the
    /// next header are already contiguous after the first unread byte + 4).
    joined: Option<usize>,
    /// Bytes from the first unread one that the next packet needs at least.
    need: usize,
    /// Sequence id of the last packet piece handed out.
    seq: u8,
}

impl PacketBuf {
    fn new(capacity: usize) -> PacketBuf {
        PacketBuf {
            data: ReadBuffer::with_capacity(capacity),
            joined: None,
            need: 0,
            seq: 0,
        }
    }

    /// The received bytes the ranges [`PacketBuf::next`] hands out index.
    #[inline]
    fn bytes(&self) -> &[u8] {
        self.data.received()
    }

    /// The next complete payload, consumed (valid until the next
    /// [`PacketBuf::spare`]); `None` if more bytes must be read first.
    #[inline]
    fn next(&mut self) -> Option<Range<usize>> {
        let s = self.data.start();
        let mut total = match self.joined {
            Some(total) => total,
            None => {
                let buf = self.data.received();
                if buf.len() - s < 4 {
                    self.need = 4;
                    return None;
                }
                let len = le24(&buf[s..]);
                if buf.len() - s < 4 + len {
                    self.need = 4 + len;
                    return None;
                }
                self.seq = buf[s + 3];
                if len < MAX_PAYLOAD {
                    self.data.consume_to(s + 4 + len);
                    self.need = 0;
                    return Some(s + 4..s + 4 + len);
                }
                len
            }
        };
        // A continued payload: fold each following piece's payload onto
        // the previous one, dropping its header.
        loop {
            let p = s + 4 + total;
            let buf = self.data.received();
            if buf.len() < p + 4 {
                self.joined = Some(total);
                self.need = p + 4 - s;
                return None;
            }
            let len = le24(&buf[p..]);
            if buf.len() < p + 4 + len {
                self.joined = Some(total);
                self.need = p + 4 + len - s;
                return None;
            }
            self.seq = buf[p + 3];
            self.data.remove(p..p + 4);
            total += len;
            if len < MAX_PAYLOAD {
                self.joined = None;
                self.need = 0;
                self.data.consume_to(s + 4 + total);
                return Some(s + 4..s + 4 + total);
            }
        }
    }

    /// Room to read into: compacts, and grows for a large packet.
    fn spare(&mut self) -> &mut [u8] {
        self.data.spare(self.need)
    }

    /// `n` bytes were read into [`PacketBuf::spare`].
    fn filled(&mut self, n: usize) {
        self.data.filled(n);
    }
}

#[inline]
fn le24(b: &[u8]) -> usize {
    usize::from(b[0]) | usize::from(b[1]) << 8 | usize::from(b[2]) << 16
}

/// Reads until a whole payload is buffered; end of stream is an error.
async fn read_packet(stream: &mut Stream, pb: &mut PacketBuf) -> io::Result<Range<usize>> {
    loop {
        if let Some(r) = pb.next() {
            return Ok(r);
        }
        let n = stream.read(pb.spare()).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        pb.filled(n);
    }
}

/// The largest greeting accepted: a handshake is about 100 bytes, an ERR
/// packet sent instead (too many connections, host blocked) a few hundred.
const MAX_GREETING: usize = 16 * 1024;

/// Whether `b`, the first bytes a server sent, can begin a MySQL greeting:
/// a packet of sequence 0 and a sane length, holding protocol version 10
/// (a handshake) or an ERR packet. `None` while too few bytes have come
/// to tell; `Some(false)` as soon as one rules it out, so that another
/// protocol's server is found without waiting for a packet's length worth
/// of bytes it will never send.
fn greeting_start_ok(b: &[u8]) -> Option<bool> {
    if b.len() >= 3 && !(1..=MAX_GREETING).contains(&le24(b)) {
        return Some(false);
    }
    if b.len() >= 4 && b[3] != 0 {
        return Some(false);
    }
    match b.get(4) {
        Some(10 | 0xFF) => Some(true),
        Some(_) => Some(false),
        None => None,
    }
}

/// The server's first packet, once its first bytes show it is a MySQL
/// greeting: a handshake or an ERR packet.
async fn read_greeting(
    stream: &mut Stream,
    pb: &mut PacketBuf,
    ctx: &Ctx,
) -> Result<Range<usize>, DriverError> {
    let mut checked = false;
    loop {
        if !checked {
            let first = pb.data.pending();
            match greeting_start_ok(first) {
                Some(true) => checked = true,
                Some(false) => {
                    return Err(DriverError::fatal(peer::not_answering_as(
                        &ctx.endpoint,
                        "MySQL/MariaDB",
                        "a MySQL handshake",
                        first,
                    )))
                }
                None => {}
            }
        }
        if checked {
            if let Some(r) = pb.next() {
                return Ok(r);
            }
        }
        let n = stream
            .read(pb.spare())
            .await
            .map_err(|e| classify_io(&e, ctx, Phase::Connect))?;
        if n == 0 {
            let first = pb.data.pending();
            return Err(DriverError::connection(format!(
                "{} closed the connection {}: is a MySQL server listening there?",
                ctx.endpoint,
                if first.is_empty() {
                    "without sending a MySQL handshake".to_string()
                } else {
                    format!("after sending {}", peer::quoted(first))
                }
            ))
            .with_code(CR_CONN_HOST_ERROR));
        }
        pb.filled(n);
    }
}

/// A length-encoded integer at `*pos`, advancing it.
#[inline]
fn lenenc(p: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *p.get(*pos)?;
    let (n, width) = match first {
        0..=0xFA => {
            *pos += 1;
            return Some(u64::from(first));
        }
        0xFC => (2, 3),
        0xFD => (3, 4),
        0xFE => (8, 9),
        _ => return None,
    };
    let bytes = p.get(*pos + 1..*pos + 1 + n)?;
    let mut v = 0u64;
    for (i, b) in bytes.iter().enumerate() {
        v |= u64::from(*b) << (8 * i);
    }
    *pos += width;
    Some(v)
}

#[inline]
fn put_lenenc(buf: &mut Vec<u8>, n: u64) {
    if n < 0xFB {
        buf.push(n as u8);
    } else if n <= 0xFFFF {
        buf.push(0xFC);
        buf.extend_from_slice(&(n as u16).to_le_bytes());
    } else if n <= 0xFF_FFFF {
        buf.push(0xFD);
        buf.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
    } else {
        buf.push(0xFE);
        buf.extend_from_slice(&n.to_le_bytes());
    }
}

/// Fills in the packet header(s) of a command written after a 4-byte
/// placeholder: sequence id 0, split into 0xFFFFFF-byte pieces if long.
fn frame_command(buf: &mut Vec<u8>) {
    let len = buf.len() - 4;
    if len < MAX_PAYLOAD {
        buf[..3].copy_from_slice(&(len as u32).to_le_bytes()[..3]);
        buf[3] = 0;
        return;
    }
    let payload = buf.split_off(4);
    buf.clear();
    let mut seq = 0u8;
    let mut chunks = payload.chunks(MAX_PAYLOAD);
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        buf.extend_from_slice(&(chunk.len() as u32).to_le_bytes()[..3]);
        buf.push(seq);
        buf.extend_from_slice(chunk);
        seq = seq.wrapping_add(1);
        if chunk.len() < MAX_PAYLOAD {
            break;
        }
    }
}

/// A text command (COM_QUERY, COM_STMT_PREPARE, COM_QUIT) into `buf`.
fn encode_command(buf: &mut Vec<u8>, command: u8, arg: &[u8]) {
    buf.clear();
    buf.reserve(5 + arg.len());
    buf.extend_from_slice(&[0, 0, 0, 0, command]);
    buf.extend_from_slice(arg);
    frame_command(buf);
}

/// COM_STMT_EXECUTE of statement `id` into `buf` (reused: no allocation
/// once it is large enough): no cursor, one iteration, no NULLs, types
/// sent every time (LONGLONG for Int, VAR_STRING for Text).
#[inline]
fn encode_execute(buf: &mut Vec<u8>, id: u32, params: &[SqlParam<'_>], send_types: bool) {
    buf.clear();
    buf.extend_from_slice(&[0, 0, 0, 0, COM_STMT_EXECUTE]);
    buf.extend_from_slice(&id.to_le_bytes());
    // Flags (no cursor), iteration count 1.
    buf.extend_from_slice(&[0, 1, 0, 0, 0]);
    if !params.is_empty() {
        let bitmap = params.len().div_ceil(8);
        buf.resize(buf.len() + bitmap, 0);
        buf.push(u8::from(send_types)); // new params bound
        if send_types {
            for p in params {
                let t = match p {
                    SqlParam::Int(_) => MYSQL_TYPE_LONGLONG,
                    SqlParam::Text(_) => MYSQL_TYPE_VAR_STRING,
                };
                buf.extend_from_slice(&[t, 0]);
            }
        }
        for p in params {
            match *p {
                SqlParam::Int(i) => buf.extend_from_slice(&i.to_le_bytes()),
                SqlParam::Text(t) => {
                    put_lenenc(buf, t.len() as u64);
                    buf.extend_from_slice(t.as_bytes());
                }
            }
        }
    }
    frame_command(buf);
}

/// A server's ERR packet, borrowed from the read buffer.
#[derive(Debug, PartialEq, Eq)]
struct ServerErr<'a> {
    code: u16,
    state: Option<&'a str>,
    message: &'a str,
}

/// Parses an ERR packet (`0xFF`, code, optional `#` and SQLSTATE, message).
fn parse_err(p: &[u8]) -> Option<ServerErr<'_>> {
    if p.len() < 3 || p[0] != 0xFF {
        return None;
    }
    let code = u16::from_le_bytes([p[1], p[2]]);
    let (state, rest) = if p.len() >= 9 && p[3] == b'#' {
        (std::str::from_utf8(&p[4..9]).ok(), &p[9..])
    } else {
        (None, &p[3..])
    };
    let message = match std::str::from_utf8(rest) {
        Ok(m) => m,
        Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
    };
    Some(ServerErr {
        code,
        state,
        message,
    })
}

/// An OK packet's counts and status (the `0x00` header of a response, or
/// the `0xFE` one ending a result set under CLIENT_DEPRECATE_EOF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OkInfo {
    affected: u64,
    status: u16,
}

fn parse_ok(p: &[u8]) -> Option<OkInfo> {
    let mut pos = 1;
    let affected = lenenc(p, &mut pos)?;
    let _last_insert_id = lenenc(p, &mut pos)?;
    let status = p
        .get(pos..pos + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))?;
    Some(OkInfo { affected, status })
}

/// How the server frames result sets on this connection, as negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Framing {
    /// CLIENT_DEPRECATE_EOF: an OK (`0xFE`) ends a result set, and no EOF
    /// follows the column definitions.
    deprecate_eof: bool,
    /// MariaDB's MARIADB_CLIENT_CACHE_METADATA: a byte after the column
    /// count says whether column definitions follow; a statement's
    /// executions after the first leave them out, as they do for
    /// Connector/C (and so for sysbench).
    cache_metadata: bool,
}

/// Status flags of a result set's terminator.
fn terminator_status(p: &[u8], deprecate_eof: bool) -> Option<u16> {
    if deprecate_eof {
        parse_ok(p).map(|ok| ok.status)
    } else {
        // EOF: 0xFE, warnings (2), status (2).
        p.get(3..5).map(|s| u16::from_le_bytes([s[0], s[1]]))
    }
}

const MORE_RESULTS: u16 = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();

/// Where a [`Walker`] is in a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WalkState {
    /// Expecting OK, ERR or a column count.
    Start,
    /// Column definitions left to skip.
    Columns(u64),
    /// The EOF after the column definitions (without DEPRECATE_EOF).
    ColumnsEof,
    Rows,
}

/// What a payload was to a [`Walker`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Metadata or an intermediate OK/terminator: read on.
    More,
    /// A row (its payload is the one just fed).
    Row,
    /// The response is complete.
    Done,
    /// An ERR packet (the payload just fed) ended the response.
    Error,
}

/// Walks a command's response (OK, ERR, or result sets, possibly several)
/// one payload at a time without decoding rows.
#[derive(Debug)]
struct Walker {
    state: WalkState,
    framing: Framing,
    result_sets: u32,
    rows: u64,
    affected: u64,
}

impl Walker {
    fn new(framing: Framing) -> Walker {
        Walker {
            state: WalkState::Start,
            framing,
            result_sets: 0,
            rows: 0,
            affected: 0,
        }
    }

    /// Rows read if the response had a result set, else rows affected.
    fn count(&self) -> u64 {
        if self.result_sets > 0 {
            self.rows
        } else {
            self.affected
        }
    }

    #[inline]
    fn feed(&mut self, p: &[u8]) -> Result<Step, &'static str> {
        let first = *p.first().ok_or("empty packet")?;
        match self.state {
            WalkState::Rows => {
                if first == 0xFE && p.len() < MAX_PAYLOAD {
                    let status = terminator_status(p, self.framing.deprecate_eof)
                        .ok_or("bad end of result set")?;
                    return Ok(self.after(status));
                }
                if first == 0xFF {
                    return Ok(Step::Error);
                }
                self.rows += 1;
                Ok(Step::Row)
            }
            WalkState::Start => match first {
                0x00 => {
                    let ok = parse_ok(p).ok_or("bad OK packet")?;
                    self.affected += ok.affected;
                    Ok(self.after(ok.status))
                }
                0xFF => Ok(Step::Error),
                0xFB => Err("LOCAL INFILE request"),
                _ => {
                    let mut pos = 0;
                    let n = lenenc(p, &mut pos).ok_or("bad column count")?;
                    let metadata_follows = if self.framing.cache_metadata {
                        *p.get(pos)
                            .ok_or("no metadata flag after the column count")?
                            != 0
                    } else {
                        true
                    };
                    self.result_sets += 1;
                    // Without the definitions, their closing EOF still
                    // comes unless DEPRECATE_EOF was agreed.
                    self.state = match (n > 0 && metadata_follows, self.framing.deprecate_eof) {
                        (true, _) => WalkState::Columns(n),
                        (false, true) => WalkState::Rows,
                        (false, false) => WalkState::ColumnsEof,
                    };
                    Ok(Step::More)
                }
            },
            WalkState::Columns(n) => {
                self.state = match (n - 1, self.framing.deprecate_eof) {
                    (0, true) => WalkState::Rows,
                    (0, false) => WalkState::ColumnsEof,
                    (left, _) => WalkState::Columns(left),
                };
                Ok(Step::More)
            }
            WalkState::ColumnsEof => {
                if first != 0xFE {
                    return Err("no EOF after the column definitions");
                }
                self.state = WalkState::Rows;
                Ok(Step::More)
            }
        }
    }

    fn after(&mut self, status: u16) -> Step {
        if status & MORE_RESULTS != 0 {
            self.state = WalkState::Start;
            Step::More
        } else {
            Step::Done
        }
    }
}

/// The columns of a text-protocol row; `None` for NULL.
fn text_row(p: &[u8]) -> Option<Vec<Option<Vec<u8>>>> {
    let mut cols = Vec::new();
    let mut pos = 0;
    while pos < p.len() {
        if p[pos] == 0xFB {
            cols.push(None);
            pos += 1;
            continue;
        }
        let len = usize::try_from(lenenc(p, &mut pos)?).ok()?;
        cols.push(Some(p.get(pos..pos.checked_add(len)?)?.to_vec()));
        pos += len;
    }
    Some(cols)
}

/// Whether a command is under way, so that a call dropped mid-response
/// (its future cancelled) is noticed instead of misreading what follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ready,
    Busy,
    Broken,
}

/// One connection: the stream, its buffers, and what was negotiated.
struct Session {
    stream: Stream,
    pb: PacketBuf,
    wbuf: Vec<u8>,
    framing: Framing,
    /// The server's connection id.
    id: u32,
    state: State,
    ctx: Arc<Ctx>,
}

impl Session {
    /// TCP (no Nagle), the handshake, TLS if asked for and offered, and
    /// authentication.
    async fn connect(
        s: &Settings,
        tls: Option<&Arc<ClientConfig>>,
        ctx: &Arc<Ctx>,
        progress: &Progress,
    ) -> Result<Session, DriverError> {
        let io_err = |e: io::Error| classify_io(&e, ctx, Phase::Connect);
        let tcp = connect_tcp(&s.host, s.port).await.map_err(io_err)?;
        let mut stream = Stream::plain(tcp);
        let mut pb = PacketBuf::new(READ_BUF);
        progress.set(Awaiting::First("MySQL handshake"));
        let r = read_greeting(&mut stream, &mut pb, ctx).await?;
        let p = &pb.bytes()[r];
        if let Some(e) = parse_err(p) {
            return Err(classify_server(e.code, e.message, ctx));
        }
        let hs: HandshakePacket<'_> = ParseBuf(p)
            .parse(())
            .map_err(|_| not_mysql(ctx, "bad handshake packet"))?;
        if hs.protocol_version() != 10 {
            return Err(not_mysql(ctx, "unknown protocol version"));
        }
        let server_caps = hs.capabilities();
        if !server_caps.contains(CapabilityFlags::CLIENT_PROTOCOL_41) {
            return Err(DriverError::fatal(format!(
                "the server at {} is too old (no protocol 4.1)",
                ctx.endpoint
            )));
        }
        let id = hs.connection_id();
        let nonce = hs.nonce();
        let version = hs.server_version_parsed().unwrap_or((5, 7, 0));
        let plugin = match hs.auth_plugin() {
            Some(AuthPlugin::CachingSha2Password) => AuthPlugin::CachingSha2Password,
            _ => AuthPlugin::MysqlNativePassword,
        };
        let mut seq = pb.seq;
        let mut caps = (CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_LONG_PASSWORD
            | CapabilityFlags::CLIENT_LONG_FLAG
            | CapabilityFlags::CLIENT_TRANSACTIONS
            | CapabilityFlags::CLIENT_MULTI_STATEMENTS
            | CapabilityFlags::CLIENT_MULTI_RESULTS
            | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
            | CapabilityFlags::CLIENT_DEPRECATE_EOF
            | CapabilityFlags::CLIENT_PLUGIN_AUTH
            // An UPDATE that writes a row's current values still finds it:
            // YCSB's update counts a row it matched as done.
            | CapabilityFlags::CLIENT_FOUND_ROWS)
            & server_caps;
        if s.db.is_some() {
            caps |= CapabilityFlags::CLIENT_CONNECT_WITH_DB;
        }
        // A MariaDB server announces its extended capabilities by leaving
        // out CLIENT_MYSQL (CLIENT_LONG_PASSWORD, so `caps` lacks it too),
        // and reads the client's from a response that leaves it out.
        let mariadb_caps = if server_caps.contains(CapabilityFlags::CLIENT_LONG_PASSWORD) {
            MariadbCapabilities::empty()
        } else {
            hs.mariadb_ext_capabilities() & MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA
        };

        let mut wbuf = Vec::with_capacity(1024);
        let mut on_tls = false;
        if let Some(config) = tls {
            if server_caps.contains(CapabilityFlags::CLIENT_SSL) {
                caps |= CapabilityFlags::CLIENT_SSL;
                seq = seq.wrapping_add(1);
                let mut body = Vec::new();
                SslRequest::new(caps, MAX_PACKET, UTF8MB4_GENERAL_CI).serialize(&mut body);
                // MariaDB takes the extended capabilities from this packet
                // on TLS, in the last 4 of its 23 reserved bytes, which
                // `SslRequest` leaves zero.
                if let Some(ext) = body.get_mut(28..32) {
                    ext.copy_from_slice(&mariadb_caps.bits().to_le_bytes());
                }
                put_packet(&mut wbuf, seq, &body);
                stream.write_all(&wbuf).await.map_err(io_err)?;
                // Bytes that came after the handshake arrived in the clear:
                // read later as if through TLS, they would let anyone on
                // the path inject replies (as libpq's CVE-2021-23222).
                if !pb.data.is_empty() {
                    return Err(DriverError::fatal(format!(
                        "the server at {} sent data before TLS started; refusing the connection",
                        ctx.endpoint
                    )));
                }
                let Stream::Plain(tcp, _) = stream else {
                    unreachable!("TLS starts on a plain stream")
                };
                progress.set(Awaiting::Tls);
                stream = Stream::start_tls(tcp, &s.host, config)
                    .await
                    .map_err(|e| match e {
                        TlsStartError::BadName(message) => DriverError::fatal(message),
                        TlsStartError::Handshake(e) => io_err(e),
                    })?;
                on_tls = true;
            } else if ctx.sslmode != SslMode::Prefer {
                return Err(DriverError::fatal(format!(
                    "the server at {} does not support TLS, but sslmode={} requires it; \
                     use sslmode=prefer or sslmode=disable",
                    ctx.endpoint,
                    ctx.sslmode.as_str()
                )));
            }
        }

        let password = s.password.as_deref();
        let scramble = plugin
            .gen_data(password, &nonce)
            .map(|d| d.to_vec())
            .unwrap_or_default();
        let response = HandshakeResponse::new(
            Some(scramble),
            version,
            Some(s.user.as_bytes()),
            s.db.as_deref().map(str::as_bytes),
            Some(plugin.clone()),
            caps,
            None,
            MAX_PACKET,
        )
        .with_mariadb_ext_capabilities(mariadb_caps);
        let mut body = Vec::new();
        response.serialize(&mut body);
        seq = seq.wrapping_add(1);
        wbuf.clear();
        put_packet(&mut wbuf, seq, &body);
        stream.write_all(&wbuf).await.map_err(io_err)?;
        progress.set(Awaiting::Reply("reply to the authentication"));

        let mut session = Session {
            stream,
            pb,
            wbuf,
            framing: Framing {
                deprecate_eof: caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF),
                cache_metadata: mariadb_caps
                    .contains(MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA),
            },
            id,
            state: State::Ready,
            ctx: Arc::clone(ctx),
        };
        session
            .authenticate(plugin.into_owned(), nonce, password, on_tls)
            .await?;
        Ok(session)
    }

    /// The authentication exchange after the handshake response, up to
    /// the server's OK.
    async fn authenticate(
        &mut self,
        mut plugin: AuthPlugin<'static>,
        mut nonce: Vec<u8>,
        password: Option<&str>,
        on_tls: bool,
    ) -> Result<(), DriverError> {
        loop {
            let r = self.packet(Phase::Connect).await?;
            let seq = self.pb.seq.wrapping_add(1);
            let p = &self.pb.bytes()[r];
            match p.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => {
                    let e = parse_err(p).ok_or_else(|| not_mysql(&self.ctx, "bad ERR packet"))?;
                    return Err(classify_server(e.code, e.message, &self.ctx));
                }
                Some(0xFE) => {
                    let req: AuthSwitchRequest<'_> = ParseBuf(p)
                        .parse(())
                        .map_err(|_| unsupported_plugin(&self.ctx, "mysql_old_password"))?;
                    plugin = match req.auth_plugin() {
                        AuthPlugin::MysqlNativePassword => AuthPlugin::MysqlNativePassword,
                        AuthPlugin::CachingSha2Password => AuthPlugin::CachingSha2Password,
                        other => {
                            let name = String::from_utf8_lossy(other.as_bytes()).into_owned();
                            return Err(unsupported_plugin(&self.ctx, &name));
                        }
                    };
                    nonce = req.plugin_data().to_vec();
                    let data = plugin
                        .gen_data(password, &nonce)
                        .map(|d| d.to_vec())
                        .unwrap_or_default();
                    self.write_packet(seq, &data, Phase::Connect).await?;
                }
                Some(0x01) if plugin == AuthPlugin::CachingSha2Password => match p.get(1) {
                    // Fast authentication succeeded: the OK follows.
                    Some(0x03) => {}
                    // Full authentication.
                    Some(0x04) => {
                        let mut pass = password.unwrap_or("").as_bytes().to_vec();
                        pass.push(0);
                        if on_tls {
                            self.write_packet(seq, &pass, Phase::Connect).await?;
                        } else {
                            // Ask for the server's public key, then send the
                            // password XORed with the nonce, RSA-encrypted.
                            self.write_packet(seq, &[0x02], Phase::Connect).await?;
                            let r = self.packet(Phase::Connect).await?;
                            let seq = self.pb.seq.wrapping_add(1);
                            let p = &self.pb.bytes()[r];
                            if let Some(e) = parse_err(p) {
                                return Err(classify_server(e.code, e.message, &self.ctx));
                            }
                            if p.first() != Some(&0x01) {
                                return Err(not_mysql(&self.ctx, "no public key sent"));
                            }
                            let key = p[1..].to_vec();
                            if !nonce.is_empty() {
                                for (i, b) in pass.iter_mut().enumerate() {
                                    *b ^= nonce[i % nonce.len()];
                                }
                            }
                            let encrypted = std::panic::catch_unwind(|| {
                                mysql_common::crypto::encrypt(&pass, &key)
                            })
                            .map_err(|_| {
                                DriverError::fatal(format!(
                                    "the server at {} sent a public key loadcell cannot use \
                                     for caching_sha2_password; connect with TLS \
                                     (sslmode=require)",
                                    self.ctx.endpoint
                                ))
                            })?;
                            self.write_packet(seq, &encrypted, Phase::Connect).await?;
                        }
                    }
                    _ => {
                        return Err(not_mysql(
                            &self.ctx,
                            "unexpected caching_sha2_password data",
                        ))
                    }
                },
                _ => {
                    return Err(not_mysql(
                        &self.ctx,
                        "unexpected packet during authentication",
                    ))
                }
            }
        }
    }

    /// One packet with sequence id `seq` (connection phase).
    async fn write_packet(
        &mut self,
        seq: u8,
        body: &[u8],
        phase: Phase,
    ) -> Result<(), DriverError> {
        self.wbuf.clear();
        put_packet(&mut self.wbuf, seq, body);
        if let Err(e) = self.stream.write_all(&self.wbuf).await {
            self.state = State::Broken;
            return Err(classify_io(&e, &self.ctx, phase));
        }
        Ok(())
    }

    /// The next whole payload (valid until the next read).
    #[inline]
    async fn packet(&mut self, phase: Phase) -> Result<Range<usize>, DriverError> {
        if let Some(r) = self.pb.next() {
            return Ok(r);
        }
        match read_packet(&mut self.stream, &mut self.pb).await {
            Ok(r) => Ok(r),
            Err(e) => {
                self.state = State::Broken;
                Err(classify_io(&e, &self.ctx, phase))
            }
        }
    }

    /// Marks a command under way; refuses one on a broken connection, or
    /// after a call was dropped mid-response.
    #[inline]
    fn begin(&mut self) -> Result<(), DriverError> {
        match self.state {
            State::Ready => {
                self.state = State::Busy;
                Ok(())
            }
            State::Busy | State::Broken => {
                self.state = State::Broken;
                Err(DriverError::connection(format!(
                    "lost connection to {}: the connection is closed",
                    self.ctx.endpoint
                ))
                .with_code(CR_SERVER_LOST))
            }
        }
    }

    /// Sends the command in the write buffer with one write.
    #[inline]
    async fn send(&mut self) -> Result<(), DriverError> {
        if let Err(e) = self.stream.send(&self.wbuf).await {
            self.state = State::Broken;
            return Err(classify_io(&e, &self.ctx, Phase::Use));
        }
        Ok(())
    }

    /// Reads a whole response: rows read or affected. With `rows`, the
    /// text-protocol rows are collected there.
    #[inline]
    async fn walk_response(
        &mut self,
        text: bool,
        mut rows: Option<&mut Vec<Vec<Option<Vec<u8>>>>>,
    ) -> Result<u64, DriverError> {
        let mut w = Walker::new(self.framing);
        loop {
            let r = self.packet(Phase::Use).await?;
            let p = &self.pb.bytes()[r];
            match w.feed(p) {
                Ok(Step::More) => {}
                Ok(Step::Row) => {
                    if let Some(rows) = rows.as_deref_mut() {
                        match text_row(p) {
                            Some(row) if text => rows.push(row),
                            _ => return Err(self.protocol_error("bad text row")),
                        }
                    }
                }
                Ok(Step::Done) => {
                    self.state = State::Ready;
                    return Ok(w.count());
                }
                Ok(Step::Error) => {
                    let Some(e) = parse_err(p) else {
                        return Err(self.protocol_error("bad ERR packet"));
                    };
                    return Err(answered_error(&mut self.state, &e, &self.ctx));
                }
                Err(why) => return Err(self.protocol_error(why)),
            }
        }
    }

    fn protocol_error(&mut self, why: &str) -> DriverError {
        self.state = State::Broken;
        DriverError::connection(format!(
            "lost connection to {}: protocol error ({why})",
            self.ctx.endpoint
        ))
        .with_code(CR_SERVER_LOST)
    }

    /// A text query's rows (every column; `None` for NULL).
    async fn query_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<Vec<u8>>>>, DriverError> {
        self.begin()?;
        encode_command(&mut self.wbuf, COM_QUERY, sql.as_bytes());
        self.send().await?;
        let mut rows = Vec::new();
        self.walk_response(true, Some(&mut rows)).await?;
        Ok(rows)
    }

    /// COM_STMT_PREPARE: the statement id and parameter count; the
    /// parameter and column definitions are skipped.
    async fn prepare(&mut self, sql: &str) -> Result<MysqlStmt, DriverError> {
        self.begin()?;
        encode_command(&mut self.wbuf, COM_STMT_PREPARE, sql.as_bytes());
        self.send().await?;
        let r = self.packet(Phase::Use).await?;
        let p = &self.pb.bytes()[r];
        if let Some(e) = parse_err(p) {
            return Err(answered_error(&mut self.state, &e, &self.ctx));
        }
        if p.len() < 12 || p[0] != 0x00 {
            return Err(self.protocol_error("bad COM_STMT_PREPARE response"));
        }
        let id = u32::from_le_bytes([p[1], p[2], p[3], p[4]]);
        let columns = u16::from_le_bytes([p[5], p[6]]);
        let params = u16::from_le_bytes([p[7], p[8]]);
        for n in [params, columns] {
            if n == 0 {
                continue;
            }
            let skip = usize::from(n) + usize::from(!self.framing.deprecate_eof);
            for _ in 0..skip {
                self.packet(Phase::Use).await?;
            }
        }
        self.state = State::Ready;
        Ok(MysqlStmt {
            id,
            params,
            bound: Cell::new(None),
        })
    }

    /// COM_QUIT, then closes the stream.
    async fn quit(&mut self) -> Result<(), DriverError> {
        self.begin()?;
        encode_command(&mut self.wbuf, COM_QUIT, &[]);
        self.send().await?;
        let _ = self.stream.shutdown().await;
        self.state = State::Broken;
        Ok(())
    }
}

/// One packet (header and `body`) appended to `buf`.
fn put_packet(buf: &mut Vec<u8>, seq: u8, body: &[u8]) {
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes()[..3]);
    buf.push(seq);
    buf.extend_from_slice(body);
}

// ---------------------------------------------------------------------------
// Errors

/// When an error happened: while connecting, or on an established connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connect,
    Use,
}

/// Something that is not a MySQL/MariaDB server (or a broken one) at connect.
fn not_mysql(ctx: &Ctx, why: &str) -> DriverError {
    DriverError::fatal(format!(
        "{} does not answer like a MySQL/MariaDB server ({why})",
        ctx.endpoint
    ))
}

fn unsupported_plugin(ctx: &Ctx, name: &str) -> DriverError {
    DriverError::fatal(format!(
        "the server at {} asks user '{}' to authenticate with '{name}', which loadcell \
         does not support; use mysql_native_password or caching_sha2_password for this user",
        ctx.endpoint, ctx.user
    ))
}

/// The error a request was answered with; after it the session is ready
/// for the next request, unless the error means the connection is lost.
fn answered_error(state: &mut State, e: &ServerErr<'_>, ctx: &Ctx) -> DriverError {
    let err = classify_server(e.code, e.message, ctx);
    *state = if err.class == ErrorClass::Connection {
        State::Broken
    } else {
        State::Ready
    };
    err
}

/// Server error numbers, as in the server's `mysqld_error.h`.
fn classify_server(code: u16, message: &str, ctx: &Ctx) -> DriverError {
    let ep = &ctx.endpoint;
    let class = server_error_class(code);
    let message = match code {
        1045 | 1698 => format!(
            "access denied for user '{}' at {ep}: check the user and password in --target",
            ctx.user
        ),
        1044 => format!(
            "{message} (at {ep}): grant the user access or fix the database name in --target"
        ),
        1049 => format!("{message} at {ep}: create it or fix the database name in --target"),
        1040 | 1203 => format!("{message} (at {ep})"),
        // Each session prepares its own statements (per table for the
        // OLTP suite), so the server's global limit caps the sessions.
        1461 => format!(
            "{message} at {ep}: every session prepares its own statements; run fewer sessions \
             (--threads, or --tables for the OLTP workloads) or raise the limit on the server \
             (SET GLOBAL max_prepared_stmt_count = ...)"
        ),
        1053 => format!("the server at {ep} is shutting down: {message}"),
        1927 => format!("connection to {ep} was killed: {message}"),
        2006 | 2013 | 2055 => format!("lost connection to {ep}: {message}"),
        _ => message.to_string(),
    };
    DriverError::new(class, message).with_code(code.to_string())
}

fn server_error_class(code: u16) -> ErrorClass {
    match code {
        // sysbench's default --mysql-ignore-errors: deadlock, lock wait
        // timeout, and MariaDB's "record has changed since last read"; and
        // NOWAIT's lock not available and "table definition has changed,
        // please retry transaction" (PostgreSQL's 55P03 is retried too).
        1213 | 1205 | 1020 | 3572 | 1412 => ErrorClass::Retryable,
        // Gone / lost / killed / shutting down; and too many connections,
        // which a reconnect with backoff may get past.
        2006 | 2013 | 2055 | 1927 | 1053 | 1152 | 1040 | 1203 | 4031 => ErrorClass::Connection,
        _ => ErrorClass::Fatal,
    }
}

fn classify_io(e: &io::Error, ctx: &Ctx, phase: Phase) -> DriverError {
    let ep = &ctx.endpoint;
    // A TLS handshake failure arrives as an io::Error wrapping rustls's.
    if let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        let text = tls.to_string();
        return DriverError::fatal(format!(
            "TLS handshake with {ep} failed: {text}{}",
            tls_hint(&text)
        ));
    }
    let text = e.to_string();
    if text.contains("failed to lookup address") {
        let class = if text.contains("Temporary failure") {
            ErrorClass::Connection
        } else {
            ErrorClass::Fatal
        };
        return DriverError::new(class, format!("cannot resolve the host of {ep}: {text}"))
            .with_code(CR_CONN_HOST_ERROR);
    }
    let what = match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            return DriverError::connection(format!(
                "cannot connect to {ep}: connection refused (is the server running?)"
            ))
            .with_code(CR_CONN_HOST_ERROR)
        }
        io::ErrorKind::TimedOut => "timed out".to_string(),
        io::ErrorKind::ConnectionReset => "connection reset by the server".to_string(),
        io::ErrorKind::ConnectionAborted => "connection aborted".to_string(),
        io::ErrorKind::BrokenPipe => "the server closed the connection (broken pipe)".to_string(),
        io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
        _ => text,
    };
    match phase {
        Phase::Connect => DriverError::connection(format!("cannot connect to {ep}: {what}"))
            .with_code(CR_CONN_HOST_ERROR),
        Phase::Use => DriverError::connection(format!("lost connection to {ep}: {what}"))
            .with_code(CR_SERVER_LOST),
    }
}

fn tls_hint(text: &str) -> &'static str {
    if text.contains("UnknownIssuer") || text.contains("unknown issuer") {
        " (pass the CA certificate with sslrootcert=PATH, or use sslmode=require)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    fn settings(url: &str) -> Result<Settings, String> {
        parse_url(Target::parse(url).unwrap().url())
    }

    fn ctx() -> Ctx {
        Ctx {
            endpoint: "127.0.0.1:3306".into(),
            user: "lc".into(),
            sslmode: SslMode::Disable,
        }
    }

    #[test]
    fn parses_full_url() {
        let s = settings("mysql://lc:pa%40ss@db.example:3307/loadcell").unwrap();
        assert_eq!(s.host, "db.example");
        assert_eq!(s.port, 3307);
        assert_eq!(s.user, "lc");
        assert_eq!(s.password.as_deref(), Some("pa@ss"));
        assert_eq!(s.db.as_deref(), Some("loadcell"));
        assert_eq!(s.sslmode, SslMode::Disable);
        assert_eq!(s.sslrootcert, None);
        assert_eq!(s.endpoint(), "db.example:3307");
        assert!(!format!("{s:?}").contains("pa@ss"));
    }

    #[test]
    fn defaults() {
        let s = settings("mariadb://localhost").unwrap();
        assert_eq!(s.host, "localhost");
        assert_eq!(s.port, 3306);
        assert_eq!(s.user, "root");
        assert_eq!(s.password, None);
        assert_eq!(s.db, None);
        let s = settings("mysql://127.0.0.1/").unwrap();
        assert_eq!(s.db, None);
        assert_eq!(s.endpoint(), "127.0.0.1:3306");
    }

    #[test]
    fn ipv6_host() {
        let s = settings("mysql://u@[::1]:3310/d").unwrap();
        assert_eq!(s.host, "::1");
        assert_eq!(s.endpoint(), "[::1]:3310");
    }

    #[test]
    fn sslmodes() {
        for (v, m) in [
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            let s = settings(&format!("mysql://h/d?sslmode={v}")).unwrap();
            assert_eq!(s.sslmode, m);
        }
        let err = settings("mysql://h/d?sslmode=maybe").unwrap_err();
        assert!(err.contains("maybe"), "{err}");
    }

    #[test]
    fn sslrootcert_is_checked_up_front() {
        let open = |u: &str| MysqlDriver::from_target(&Target::parse(u).unwrap());
        let err =
            open("mysql://h/d?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem").unwrap_err();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
        let exe = std::env::current_exe().unwrap();
        let err = open(&format!(
            "mysql://h/d?sslmode=verify-full&sslrootcert={}",
            exe.display()
        ))
        .unwrap_err();
        assert!(err.contains("PEM"), "{err}");
        let err = open("mysql://h/d?sslmode=disable&sslrootcert=/x.pem").unwrap_err();
        assert!(err.contains("sslmode=disable"), "{err}");
        let s = settings("mysql://h/d?sslmode=verify-full&sslrootcert=/x.pem").unwrap();
        assert_eq!(
            s.sslrootcert.as_deref(),
            Some(std::path::Path::new("/x.pem"))
        );
    }

    #[test]
    fn rejects_unknown_parameters() {
        let err = settings("mysql://h/d?pool_max=3").unwrap_err();
        assert!(err.contains("'pool_max'"), "{err}");
        assert!(
            err.contains("sslmode") && err.contains("sslrootcert"),
            "{err}"
        );
        let t = Target::parse("mysql://u:secret@h/d?bogus=1").unwrap();
        let err = MysqlDriver::from_target(&t).unwrap_err();
        assert!(!err.contains("secret"), "{err}");
    }

    #[test]
    fn rejects_nested_paths() {
        assert!(settings("mysql://h/a/b").is_err());
    }

    #[test]
    fn driver_endpoint_has_no_secret() {
        let t = Target::parse("mysql://lc:hunter2@10.1.2.3:3399/x").unwrap();
        let d = MysqlDriver::from_target(&t).unwrap();
        assert_eq!(d.endpoint(), "10.1.2.3:3399");
        assert!(!format!("{d:?}").contains("hunter2"));
        assert!(d.tls.is_none());
        for mode in ["prefer", "require", "verify-ca", "verify-full"] {
            let t = Target::parse(&format!("mysql://lc@h/x?sslmode={mode}")).unwrap();
            let d = MysqlDriver::from_target(&t).unwrap();
            assert!(d.tls.is_some(), "{mode}");
            assert_eq!(d.ctx.sslmode.as_str(), mode);
        }
    }

    #[test]
    fn server_error_classes() {
        for code in [1213, 1205, 1020, 3572, 1412] {
            assert_eq!(server_error_class(code), ErrorClass::Retryable, "{code}");
        }
        for code in [2006, 2013, 2055, 1927, 1053, 1040] {
            assert_eq!(server_error_class(code), ErrorClass::Connection, "{code}");
        }
        for code in [1045, 1049, 1146, 1064, 1062, 1054] {
            assert_eq!(server_error_class(code), ErrorClass::Fatal, "{code}");
        }
    }

    #[test]
    fn server_error_messages() {
        let c = ctx();
        let e = classify_server(1045, "Access denied for user 'lc'@'localhost'", &c);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert_eq!(e.code.as_deref(), Some("1045"));
        assert_eq!(
            e.message,
            "access denied for user 'lc' at 127.0.0.1:3306: check the user and password in --target"
        );
        let e = classify_server(1213, "Deadlock found", &c);
        assert_eq!(e.class, ErrorClass::Retryable);
        assert_eq!(e.to_string(), "Deadlock found (code 1213)");
        let e = classify_server(1146, "Table 'loadcell.x' doesn't exist", &c);
        assert_eq!(
            (e.class, e.code.as_deref()),
            (ErrorClass::Fatal, Some("1146"))
        );
        let e = classify_server(1049, "Unknown database 'nope'", &c);
        assert!(e.message.contains("'nope'") && e.message.contains("127.0.0.1:3306"));
        let e = classify_server(1927, "Connection was killed", &c);
        assert_eq!(e.class, ErrorClass::Connection);
        let e = classify_server(
            1461,
            "Can't create more than max_prepared_stmt_count statements (current value: 16382)",
            &c,
        );
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e
            .message
            .contains("(current value: 16382) at 127.0.0.1:3306: every session"));
        assert!(e.message.contains("SET GLOBAL max_prepared_stmt_count"));
    }

    #[test]
    fn io_errors() {
        let c = ctx();
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let e = classify_io(&refused, &c, Phase::Connect);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(
            e.message,
            "cannot connect to 127.0.0.1:3306: connection refused (is the server running?)"
        );
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        let e = classify_io(&reset, &c, Phase::Use);
        assert_eq!(e.class, ErrorClass::Connection);
        assert!(
            e.message.starts_with("lost connection to 127.0.0.1:3306"),
            "{e}"
        );
        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        assert_eq!(
            classify_io(&eof, &c, Phase::Use).class,
            ErrorClass::Connection
        );
        let timeout = io::Error::from(io::ErrorKind::TimedOut);
        let e = classify_io(&timeout, &c, Phase::Connect);
        assert_eq!(e.class, ErrorClass::Connection);
        assert!(e.message.contains("timed out"), "{e}");
        let dns =
            io::Error::other("failed to lookup address information: Name or service not known");
        assert_eq!(
            classify_io(&dns, &c, Phase::Connect).class,
            ErrorClass::Fatal
        );
        let tls = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let e = classify_io(&tls, &c, Phase::Connect);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(
            e.message.contains("TLS handshake with 127.0.0.1:3306"),
            "{e}"
        );
        assert!(e.message.contains("sslrootcert"), "{e}");
    }

    #[test]
    fn the_greeting_is_told_from_its_first_bytes() {
        // MariaDB's handshake; an ERR packet (host blocked).
        assert_eq!(greeting_start_ok(b"\x5b\x00\x00\x00\x0a11.8"), Some(true));
        assert_eq!(
            greeting_start_ok(b"\x45\x00\x00\x00\xff\x69\x04"),
            Some(true)
        );
        assert_eq!(greeting_start_ok(b""), None);
        assert_eq!(greeting_start_ok(b"\x5b\x00\x00\x00"), None);
        // Redis, memcached, HTTP: refused on the third byte, as a length
        // no greeting has.
        for other in [&b"-ERR unknown"[..], b"ERROR\r\n", b"HTTP/1.1 400"] {
            assert_eq!(greeting_start_ok(&other[..3]), Some(false));
        }
        // Not sequence 0, not protocol 10.
        assert_eq!(greeting_start_ok(b"\x5b\x00\x00\x01"), Some(false));
        assert_eq!(greeting_start_ok(b"\x5b\x00\x00\x00\x09"), Some(false));
    }

    #[test]
    fn product_detection() {
        assert_eq!(product_of("10.11.6-MariaDB-0+deb12u1"), "MariaDB");
        assert_eq!(product_of("8.0.36"), "MySQL");
        assert_eq!(product_of("5.5.5-10.6.12-MariaDB-log"), "MariaDB");
    }

    // -- wire session: pure parts ---------------------------------------

    /// `payload` framed as one packet with sequence id `seq`.
    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        put_packet(&mut v, seq, payload);
        v
    }

    /// Feeds `bytes` into `pb` in chunks of `chunk`, collecting payloads.
    fn feed_all(pb: &mut PacketBuf, bytes: &[u8], chunk: usize) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        for piece in bytes.chunks(chunk) {
            let mut rest = piece;
            while !rest.is_empty() {
                let spare = pb.spare();
                let n = spare.len().min(rest.len());
                spare[..n].copy_from_slice(&rest[..n]);
                pb.filled(n);
                rest = &rest[n..];
                while let Some(r) = pb.next() {
                    out.push((pb.seq, pb.bytes()[r].to_vec()));
                }
            }
        }
        out
    }

    #[test]
    fn framing_whole_and_split_packets() {
        let mut bytes = packet(0, b"hello");
        bytes.extend(packet(1, b""));
        bytes.extend(packet(2, &[7; 300]));
        // All at once, then one byte per read: the same packets.
        for chunk in [bytes.len(), 1, 3, 6] {
            let mut pb = PacketBuf::new(64);
            let got = feed_all(&mut pb, &bytes, chunk);
            assert_eq!(
                got,
                vec![(0, b"hello".to_vec()), (1, Vec::new()), (2, vec![7; 300])],
                "chunk {chunk}"
            );
            assert!(pb.data.is_empty());
        }
        // A packet split across two reads is not handed out half-read.
        let mut pb = PacketBuf::new(64);
        let spare = pb.spare();
        spare[..6].copy_from_slice(&bytes[..6]);
        pb.filled(6);
        assert_eq!(pb.next(), None);
        assert_eq!(pb.need, 9);
        let spare = pb.spare();
        spare[..3].copy_from_slice(&bytes[6..9]);
        pb.filled(3);
        let r = pb.next().unwrap();
        assert_eq!(&pb.bytes()[r], b"hello");
        assert_eq!(pb.next(), None);
    }

    #[test]
    fn framing_joins_continued_payloads() {
        let big: Vec<u8> = (0..MAX_PAYLOAD).map(|i| (i % 251) as u8).collect();
        let mut bytes = packet(3, &big);
        bytes.extend(packet(4, b"tail"));
        bytes.extend(packet(5, b"next"));
        // Exactly 0xFFFFFF bytes: ended by an empty packet.
        bytes.extend(packet(0, &big));
        bytes.extend(packet(1, b""));
        for chunk in [1 << 20, 65_536 + 5, bytes.len()] {
            let mut pb = PacketBuf::new(READ_BUF);
            let got = feed_all(&mut pb, &bytes, chunk);
            assert_eq!(got.len(), 3, "chunk {chunk}");
            let (seq, first) = &got[0];
            assert_eq!(*seq, 4, "the last piece's sequence id");
            assert_eq!(first.len(), MAX_PAYLOAD + 4);
            assert!(first[..MAX_PAYLOAD] == big[..], "chunk {chunk}");
            assert_eq!(&first[MAX_PAYLOAD..], b"tail");
            assert_eq!(got[1], (5, b"next".to_vec()));
            assert_eq!(got[2].0, 1);
            assert!(got[2].1 == big);
            assert_eq!(pb.joined, None);
        }
    }

    #[test]
    fn execute_encoding_byte_for_byte() {
        let mut buf = Vec::new();
        let params = [SqlParam::Int(-2), SqlParam::Text("hé")];
        encode_execute(&mut buf, 0x0102_0304, &params, true);
        let mut want = vec![
            0x17, // COM_STMT_EXECUTE
            0x04, 0x03, 0x02, 0x01, // statement id
            0x00, // flags
            0x01, 0x00, 0x00, 0x00, // iteration count
            0x00, // NULL bitmap
            0x01, // new params bound
            0x08, 0x00, // LONGLONG
            0xFD, 0x00, // VAR_STRING
            0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, // -2
            0x03, b'h', 0xC3, 0xA9, // "hé"
        ];
        let mut framed = vec![want.len() as u8, 0, 0, 0];
        framed.extend_from_slice(&want);
        assert_eq!(buf, framed);

        // Types already bound: the flag is 0 and the types are left out.
        encode_execute(&mut buf, 0x0102_0304, &params, false);
        want[11] = 0x00;
        want.drain(12..16);
        let mut framed = vec![want.len() as u8, 0, 0, 0];
        framed.append(&mut want);
        assert_eq!(buf, framed);

        // No parameters: no bitmap, no types.
        encode_execute(&mut buf, 9, &[], true);
        assert_eq!(buf, [10, 0, 0, 0, 0x17, 9, 0, 0, 0, 0, 1, 0, 0, 0]);

        // Nine parameters: a two-byte NULL bitmap; a long text: 0xFC length.
        let long = "x".repeat(300);
        let mut params = vec![SqlParam::Int(1); 8];
        params.push(SqlParam::Text(&long));
        encode_execute(&mut buf, 1, &params, true);
        let body = &buf[4..];
        assert_eq!(le24(&buf), body.len());
        assert_eq!(&body[10..13], &[0, 0, 1], "bitmap, new params bound");
        let values = 13 + 18;
        assert_eq!(&body[values..values + 8], &1i64.to_le_bytes());
        let text = values + 64;
        assert_eq!(&body[text..text + 3], &[0xFC, 0x2C, 0x01]);
        assert_eq!(body.len(), text + 3 + 300);

        // The buffer is reused: no new allocation once large enough.
        let cap = buf.capacity();
        let ptr = buf.as_ptr();
        for i in 0..100 {
            encode_execute(
                &mut buf,
                1,
                &[SqlParam::Int(i), SqlParam::Text("abc")],
                true,
            );
        }
        assert_eq!((buf.capacity(), buf.as_ptr()), (cap, ptr));
    }

    #[test]
    fn long_commands_are_split() {
        let sql = vec![b'a'; MAX_PAYLOAD + 10];
        let mut buf = Vec::new();
        encode_command(&mut buf, COM_QUERY, &sql);
        assert_eq!(le24(&buf), MAX_PAYLOAD);
        assert_eq!(buf[3], 0);
        assert_eq!(buf[4], COM_QUERY);
        let second = 4 + MAX_PAYLOAD;
        assert_eq!(le24(&buf[second..]), 11);
        assert_eq!(buf[second + 3], 1);
        assert_eq!(buf.len(), second + 4 + 11);
        // Exactly 0xFFFFFF bytes of payload: an empty packet follows.
        encode_command(&mut buf, COM_QUERY, &sql[..MAX_PAYLOAD - 1]);
        assert_eq!(buf.len(), 4 + MAX_PAYLOAD + 4);
        assert_eq!(&buf[4 + MAX_PAYLOAD..], &[0, 0, 0, 1]);
    }

    #[test]
    fn lenenc_integers() {
        for n in [
            0u64,
            250,
            251,
            0xFFFF,
            0x1_0000,
            0xFF_FFFF,
            0x100_0000,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            put_lenenc(&mut buf, n);
            let mut pos = 0;
            assert_eq!(lenenc(&buf, &mut pos), Some(n));
            assert_eq!(pos, buf.len());
        }
        let mut pos = 0;
        assert_eq!(lenenc(&[0xFC, 1], &mut pos), None, "truncated");
        assert_eq!(lenenc(&[0xFF], &mut pos), None);
    }

    #[test]
    fn ok_and_err_packets() {
        // OK: 3 rows affected, last insert id 300, status autocommit|more results.
        let ok = [0x00, 3, 0xFC, 0x2C, 0x01, 0x0A, 0x00, 0x00, 0x00];
        assert_eq!(
            parse_ok(&ok),
            Some(OkInfo {
                affected: 3,
                status: 0x000A
            })
        );
        assert_eq!(parse_ok(&[0x00, 1]), None);

        let mut err = vec![0xFF, 0x7A, 0x04, b'#'];
        err.extend_from_slice(b"42S02Table 'loadcell.x' doesn't exist");
        assert_eq!(
            parse_err(&err),
            Some(ServerErr {
                code: 1146,
                state: Some("42S02"),
                message: "Table 'loadcell.x' doesn't exist"
            })
        );
        // Before the protocol is agreed (e.g. too many connections): no state.
        let mut err = vec![0xFF, 0x10, 0x04];
        err.extend_from_slice(b"Too many connections");
        let e = parse_err(&err).unwrap();
        assert_eq!(
            (e.code, e.state, e.message),
            (1040, None, "Too many connections")
        );
        assert_eq!(parse_err(&[0x00, 0, 0]), None);
    }

    /// Runs payloads through a walker; the steps, and the count at the end.
    fn framing(deprecate_eof: bool) -> Framing {
        Framing {
            deprecate_eof,
            cache_metadata: false,
        }
    }

    fn walk(deprecate_eof: bool, packets: &[&[u8]]) -> (Vec<Step>, u64) {
        let mut w = Walker::new(framing(deprecate_eof));
        let steps = packets.iter().map(|p| w.feed(p).unwrap()).collect();
        (steps, w.count())
    }

    const COLDEF: &[u8] = b"\x03def\x08loadcell\x01t\x01t\x01c\x01c\x0c\x08\x00\x78\x00\x00\x00\xfe\x00\x00\x00\x00\x00";

    #[test]
    fn walks_responses_without_decoding_rows() {
        use Step::*;
        // OK with 5 rows affected.
        assert_eq!(walk(true, &[&[0x00, 5, 0, 2, 0, 0, 0]]), (vec![Done], 5));
        // ERR.
        assert_eq!(walk(true, &[b"\xff\x7a\x04#42S02x"]).0, vec![Error]);

        // Two columns, two binary rows, DEPRECATE_EOF: an OK (0xFE) ends it.
        let row: &[u8] = &[0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 1, b'a'];
        let end: &[u8] = &[0xFE, 0, 0, 0x02, 0, 0, 0];
        assert_eq!(
            walk(true, &[&[2], COLDEF, COLDEF, row, row, end]),
            (vec![More, More, More, Row, Row, Done], 2)
        );
        // The same without DEPRECATE_EOF: an EOF after the columns and at the end.
        let eof: &[u8] = &[0xFE, 0, 0, 0x02, 0];
        assert_eq!(
            walk(false, &[&[2], COLDEF, COLDEF, eof, row, row, row, eof]),
            (vec![More, More, More, More, Row, Row, Row, Done], 3)
        );
        // An empty result set counts 0 rows, not the OK's count.
        assert_eq!(
            walk(true, &[&[1], COLDEF, end]),
            (vec![More, More, Done], 0)
        );
        // Text rows may start with any length byte, including 0xFB (NULL).
        assert_eq!(
            walk(true, &[&[1], COLDEF, &[0xFB], &[0x01, b'x'], end]).1,
            2
        );
        // A stored procedure: a result set, then the OK of the CALL.
        let more: &[u8] = &[0xFE, 0, 0, 0x0A, 0, 0, 0];
        assert_eq!(
            walk(true, &[&[1], COLDEF, row, more, &[0x00, 0, 0, 2, 0, 0, 0]]),
            (vec![More, More, Row, More, Done], 1)
        );
        // An error in the middle of the rows (e.g. killed query).
        let (steps, _) = walk(true, &[&[1], COLDEF, row, b"\xff\x25\x05#70100x"]);
        assert_eq!(steps.last(), Some(&Error));
        // Multi-statement OKs.
        assert_eq!(
            walk(
                true,
                &[&[0x00, 1, 0, 0x0A, 0, 0, 0], &[0x00, 2, 0, 2, 0, 0, 0]]
            ),
            (vec![More, Done], 3)
        );

        let mut w = Walker::new(framing(false));
        w.feed(&[1]).unwrap();
        w.feed(COLDEF).unwrap();
        assert!(w.feed(&[0x00]).is_err(), "no EOF after the columns");
        assert!(Walker::new(framing(true)).feed(&[]).is_err());
    }

    #[test]
    fn walks_result_sets_with_cached_metadata() {
        use Step::*;
        let cached = Framing {
            deprecate_eof: true,
            cache_metadata: true,
        };
        let walk = |packets: &[&[u8]]| {
            let mut w = Walker::new(cached);
            let steps: Vec<Step> = packets.iter().map(|p| w.feed(p).unwrap()).collect();
            (steps, w.count())
        };
        let row: &[u8] = &[0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0];
        let end: &[u8] = &[0xFE, 0, 0, 0x02, 0, 0, 0];
        // Metadata follows (a statement's first execution): as without caching.
        assert_eq!(
            walk(&[&[1, 1], COLDEF, row, end]),
            (vec![More, More, Row, Done], 1)
        );
        // Metadata left out: the rows come straight after the count.
        assert_eq!(
            walk(&[&[2, 0], row, row, end]),
            (vec![More, Row, Row, Done], 2)
        );
        // Without DEPRECATE_EOF the EOF that closes the definitions still
        // comes (MariaDB's protocol documentation, column count packet).
        let mut w = Walker::new(Framing {
            deprecate_eof: false,
            ..cached
        });
        let eof: &[u8] = &[0xFE, 0, 0, 0x02, 0];
        assert_eq!(w.feed(&[1, 0]), Ok(More));
        assert_eq!(w.feed(eof), Ok(More));
        assert_eq!(w.feed(row), Ok(Row));
        assert_eq!(w.feed(eof), Ok(Done));
        assert_eq!(w.count(), 1);
        // A count without the flag byte is a protocol error, not a guess.
        assert!(Walker::new(cached).feed(&[1]).is_err());
    }

    #[test]
    fn param_types_are_a_bit_per_text_parameter() {
        assert_eq!(param_types(&[]), Some(0));
        assert_eq!(
            param_types(&[SqlParam::Int(1), SqlParam::Text("a"), SqlParam::Int(2)]),
            Some(0b010)
        );
        assert_eq!(param_types(&vec![SqlParam::Text("a"); 64]), Some(u64::MAX));
        assert_eq!(param_types(&vec![SqlParam::Int(1); 65]), None);
    }

    #[test]
    fn text_rows() {
        assert_eq!(
            text_row(b"\x07sbtest1\xfb\x00"),
            Some(vec![Some(b"sbtest1".to_vec()), None, Some(Vec::new())])
        );
        assert_eq!(text_row(b"\x05abc"), None, "truncated");
    }

    // -- authentication against a scripted server ------------------------

    /// A throwaway RSA key pair made with the `openssl` tool (`None`
    /// without it): the directory holding `key.pem`, and the public PEM.
    fn test_rsa_keys() -> Option<(tempfile::TempDir, String)> {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.pem");
        let made = std::process::Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(&key)
            .arg("2048")
            .output()
            .ok()?;
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        let public = std::process::Command::new("openssl")
            .args(["rsa", "-pubout", "-in"])
            .arg(&key)
            .output()
            .unwrap();
        assert!(public.status.success());
        Some((dir, String::from_utf8(public.stdout).unwrap()))
    }

    const NONCE: &[u8; 20] = b"abcdefgh0123456789AB";

    /// How the scripted server answers the handshake response.
    #[derive(Clone, Copy, Debug)]
    enum Script {
        Sha2Fast,
        Sha2FullRsa,
        SwitchToNative,
        SwitchToEd25519,
        AccessDenied,
    }

    /// The RSA key pair of the scripted server, when `openssl` made one.
    static RSA_KEYS: std::sync::OnceLock<Option<(tempfile::TempDir, String)>> =
        std::sync::OnceLock::new();

    async fn read_pkt(s: &mut TcpStream) -> (u8, Vec<u8>) {
        let mut h = [0u8; 4];
        s.read_exact(&mut h).await.unwrap();
        let mut body = vec![0; le24(&h)];
        s.read_exact(&mut body).await.unwrap();
        (h[3], body)
    }

    async fn write_pkt(s: &mut TcpStream, seq: u8, body: &[u8]) {
        s.write_all(&packet(seq, body)).await.unwrap();
    }

    /// Decrypts what the client sent for caching_sha2_password's full
    /// authentication: the password and a NUL, XORed with the nonce.
    fn check_rsa_password(dir: &std::path::Path, encrypted: &[u8]) {
        let key = dir.join("key.pem");
        let blob = dir.join("blob");
        std::fs::write(&blob, encrypted).unwrap();
        let out = std::process::Command::new("openssl")
            .args([
                "pkeyutl",
                "-decrypt",
                "-pkeyopt",
                "rsa_padding_mode:oaep",
                "-inkey",
            ])
            .arg(&key)
            .arg("-in")
            .arg(&blob)
            .output();
        let out = out.expect("openssl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plain: Vec<u8> = out
            .stdout
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ NONCE[i % NONCE.len()])
            .collect();
        assert_eq!(plain, b"s3cret\0");
    }

    /// The scripted server's handshake packet body, offering `extra`
    /// capabilities beside the ones every session needs.
    fn handshake_body(extra: CapabilityFlags) -> Vec<u8> {
        let caps = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH
            | CapabilityFlags::CLIENT_CONNECT_WITH_DB
            | CapabilityFlags::CLIENT_DEPRECATE_EOF
            | CapabilityFlags::CLIENT_TRANSACTIONS
            | CapabilityFlags::CLIENT_LONG_PASSWORD
            | extra;
        let scramble_2 = [&NONCE[8..], &b"\0"[..]].concat();
        let hs = HandshakePacket::new(
            10,
            &b"8.0.36"[..],
            77,
            NONCE[..8].try_into().unwrap(),
            Some(&scramble_2[..]),
            caps,
            45,
            StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            Some(&b"caching_sha2_password"[..]),
        );
        let mut body = Vec::new();
        hs.serialize(&mut body);
        body
    }

    /// A one-connection server speaking `script`; returns what it checked.
    async fn scripted_server(listener: tokio::net::TcpListener, script: Script) -> Vec<String> {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        write_pkt(&mut s, 0, &handshake_body(CapabilityFlags::empty())).await;
        let (seq, resp) = read_pkt(&mut s).await;
        assert_eq!(seq, 1);
        let parsed: HandshakeResponse<'_> = ParseBuf(&resp).parse(()).unwrap();
        assert_eq!(parsed.user(), b"lc");
        assert_eq!(parsed.db_name(), Some(&b"db"[..]));
        let sha = mysql_common::scramble::scramble_sha256(NONCE, b"s3cret").unwrap();
        assert_eq!(parsed.scramble_buf(), &sha[..], "caching_sha2 scramble");
        let ok = [0x00, 0, 0, 2, 0, 0, 0];
        match script {
            Script::Sha2Fast => {
                write_pkt(&mut s, 2, &[0x01, 0x03]).await;
                write_pkt(&mut s, 3, &ok).await;
            }
            Script::Sha2FullRsa => {
                write_pkt(&mut s, 2, &[0x01, 0x04]).await;
                assert_eq!(
                    read_pkt(&mut s).await,
                    (3, vec![0x02]),
                    "public key request"
                );
                let (dir, public) = RSA_KEYS.get_or_init(test_rsa_keys).as_ref().unwrap();
                let key = [&[0x01][..], public.as_bytes()].concat();
                write_pkt(&mut s, 4, &key).await;
                let (seq, encrypted) = read_pkt(&mut s).await;
                assert_eq!((seq, encrypted.len()), (5, 256));
                check_rsa_password(dir.path(), &encrypted);
                seen.push("rsa".into());
                write_pkt(&mut s, 6, &ok).await;
            }
            Script::SwitchToNative => {
                let nonce2 = b"ZYXWVUTSRQponmlkjihg";
                let data = [&nonce2[..], &b"\0"[..]].concat();
                let sw = AuthSwitchRequest::new(&b"mysql_native_password"[..], &data[..]);
                let mut body = Vec::new();
                sw.serialize(&mut body);
                write_pkt(&mut s, 2, &body).await;
                let (seq, data) = read_pkt(&mut s).await;
                let want = mysql_common::scramble::scramble_native(nonce2, b"s3cret").unwrap();
                assert_eq!((seq, data), (3, want.to_vec()));
                seen.push("native".into());
                write_pkt(&mut s, 4, &ok).await;
            }
            Script::SwitchToEd25519 => {
                let sw = AuthSwitchRequest::new(&b"client_ed25519"[..], &NONCE[..]);
                let mut body = Vec::new();
                sw.serialize(&mut body);
                write_pkt(&mut s, 2, &body).await;
                return seen;
            }
            Script::AccessDenied => {
                let mut err = vec![0xFF, 0x15, 0x04, b'#'];
                err.extend_from_slice(b"28000Access denied for user 'lc'@'localhost'");
                write_pkt(&mut s, 2, &err).await;
                return seen;
            }
        }
        // One statement: a COM_QUERY answered with an OK.
        let (seq, q) = read_pkt(&mut s).await;
        assert_eq!((seq, q[0]), (0, COM_QUERY));
        write_pkt(&mut s, 1, &[0x00, 0, 0, 2, 0, 0, 0]).await;
        seen.push("query".into());
        seen
    }

    #[tokio::test(flavor = "current_thread")]
    async fn authentication_plugins() {
        for script in [
            Script::Sha2Fast,
            Script::Sha2FullRsa,
            Script::SwitchToNative,
            Script::SwitchToEd25519,
            Script::AccessDenied,
        ] {
            if matches!(script, Script::Sha2FullRsa)
                && RSA_KEYS.get_or_init(test_rsa_keys).is_none()
            {
                eprintln!("no openssl tool: caching_sha2_password over RSA is not tested");
                continue;
            }
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = tokio::spawn(scripted_server(listener, script));
            let d = MysqlDriver::from_target(
                &Target::parse(&format!("mysql://lc:s3cret@127.0.0.1:{port}/db")).unwrap(),
            )
            .unwrap();
            let result = d.connect().await;
            match script {
                Script::SwitchToEd25519 => {
                    let err = result.unwrap_err();
                    assert_eq!(err.class, ErrorClass::Fatal);
                    assert!(err.message.contains("'client_ed25519'"), "{err}");
                    assert!(!err.message.contains("s3cret"), "{err}");
                    server.await.unwrap();
                }
                Script::AccessDenied => {
                    let err = result.unwrap_err();
                    assert_eq!(
                        (err.class, err.code.as_deref()),
                        (ErrorClass::Fatal, Some("1045"))
                    );
                    assert!(!format!("{err:?}").contains("s3cret"));
                    server.await.unwrap();
                }
                _ => {
                    let mut conn = result.unwrap_or_else(|e| panic!("{script:?}: {e}"));
                    assert_eq!(conn.connection_id(), 77);
                    conn.simple("SET @x = 1").await.unwrap();
                    let seen = server.await.unwrap();
                    assert_eq!(seen.last().map(String::as_str), Some("query"), "{script:?}");
                }
            }
        }
    }

    /// Bytes sent in the clear after the handshake must not be read as if
    /// they had come through TLS: someone on the path could forge replies.
    #[tokio::test(flavor = "current_thread")]
    async fn bytes_before_tls_refuse_the_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            // The handshake and a forged OK in one write.
            let mut out = packet(0, &handshake_body(CapabilityFlags::CLIENT_SSL));
            out.extend(packet(2, &[0x00, 0, 0, 2, 0, 0, 0]));
            s.write_all(&out).await.unwrap();
            let _ = read_pkt(&mut s).await;
        });
        let d = MysqlDriver::from_target(
            &Target::parse(&format!(
                "mysql://lc:s3cret@127.0.0.1:{port}/db?sslmode=require"
            ))
            .unwrap(),
        )
        .unwrap();
        let err = d.connect().await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Fatal);
        assert!(
            err.message.contains("sent data before TLS started"),
            "{err}"
        );
        server.await.unwrap();
    }

    /// A call dropped mid-response (its future cancelled, e.g. by a
    /// timeout) leaves the stream out of step: the session refuses further
    /// calls with a connection error instead of misreading the rest.
    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_call_breaks_the_session() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            drop(s);
        });
        let ctx = Arc::new(ctx());
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut conn = MysqlConn {
            session: Session {
                stream: Stream::plain(tcp),
                pb: PacketBuf::new(READ_BUF),
                wbuf: Vec::new(),
                framing: Framing {
                    deprecate_eof: true,
                    cache_metadata: false,
                },
                id: 1,
                state: State::Ready,
                ctx,
            },
        };
        let stmt = MysqlStmt {
            id: 1,
            params: 1,
            bound: Cell::new(None),
        };
        let late = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            conn.exec(&stmt, &[SqlParam::Int(1)]),
        )
        .await;
        assert!(late.is_err(), "no answer: timed out");
        let err = conn.exec(&stmt, &[SqlParam::Int(1)]).await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection);
        assert_eq!(err.code.as_deref(), Some("2013"));
        assert!(err.message.contains("127.0.0.1:3306"), "{err}");
        let err = conn.simple("SELECT 1").await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection);
        server.abort();
    }
}
