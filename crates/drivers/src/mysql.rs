//! MySQL and MariaDB over `mysql_async`: one plain connection per session
//! (no pool), prepared statements over the binary protocol.
//!
//! Target: `mysql://user:pass@host:port/db?sslmode=...&sslrootcert=PATH`
//! (`mariadb://` is the same). Defaults: host 127.0.0.1, port 3306, user
//! root, no password, no default database, `sslmode=disable`.
//!
//! TLS modes, with libpq's meanings as in `tls.rs`: `disable`;
//! `prefer` (TLS without verification when the server offers it, plaintext
//! otherwise; a server found without TLS is remembered); `require` (TLS, no
//! certificate checks, or the chain checks of `verify-ca` when `sslrootcert`
//! is given); `verify-ca` (chain checked against `sslrootcert`, or the
//! webpki roots without it); `verify-full` (chain and host name). With
//! `sslrootcert` only that file's certificates are trusted. mysql_async
//! builds its own rustls configuration from `SslOpts`, so the shared
//! `tls::client_config` is only used to validate the settings.
//!
//! Known limitation: mysql_async 0.36 skips the host name check by matching
//! "NotValidForName" in rustls's error text, which current rustls no longer
//! prints, so `verify-ca` also checks the host name; the error then says so.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use loadcell_core::sql::{Dialect, SqlConn, SqlParam};
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, Target};
use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder, Params, SslOpts, Statement, Value};

use crate::tls::SslMode;
use crate::{DriverInfo, Family};
use loadcell_core::kv::KvCapabilities;

pub const INFO: DriverInfo = DriverInfo {
    name: "mysql",
    schemes: &["mysql", "mariadb"],
    family: Family::Sql,
    url_form: "mysql://user:pass@host:port/db[?sslmode=...&sslrootcert=PATH]",
    about: "MySQL and MariaDB (prepared statements over the binary protocol)",
    kv: KvCapabilities::NONE,
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
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
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

/// Decodes `%XX` escapes (URL user info and path stay escaped in `url::Url`).
fn percent_decode(s: &str, what: &str) -> Result<String, String> {
    if !s.contains('%') {
        return Ok(s.to_string());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => return Err(format!("bad %-escape in the {what}")),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).map_err(|_| format!("the {what} is not UTF-8 once decoded"))
}

/// `mysql_async` options for `settings`, with or without TLS.
fn build_opts(s: &Settings, tls: Option<SslOpts>) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname(s.host.clone())
        .tcp_port(s.port)
        .user(Some(s.user.clone()))
        .pass(s.password.clone())
        .db_name(s.db.clone())
        .tcp_nodelay(true)
        // Stay on the TCP endpoint that was asked for: no switch to the
        // server's unix socket after connecting.
        .prefer_socket(false)
        // Sessions keep their `Statement` handles; a cache would only cost
        // a hash per prepare and, when full, close statements still in use.
        .stmt_cache_size(0)
        // Known values skip the `SELECT @@max_allowed_packet, @@wait_timeout`
        // round trip on every connect. The server enforces its own limit.
        .max_allowed_packet(Some(1 << 30))
        .wait_timeout(Some(28_800))
        .ssl_opts(tls)
        .into()
}

fn ssl_opts(s: &Settings) -> Option<SslOpts> {
    let base = || {
        let mut o = SslOpts::default();
        if let Some(path) = &s.sslrootcert {
            o = o
                .with_root_certs(vec![path.clone().into()])
                .with_disable_built_in_roots(true);
        }
        o
    };
    match s.sslmode {
        SslMode::Disable => None,
        // libpq: "require" with a root certificate behaves as "verify-ca".
        SslMode::Require if s.sslrootcert.is_some() => {
            Some(base().with_danger_skip_domain_validation(true))
        }
        SslMode::Prefer | SslMode::Require => Some(
            base()
                .with_danger_accept_invalid_certs(true)
                .with_danger_skip_domain_validation(true),
        ),
        SslMode::VerifyCa => Some(base().with_danger_skip_domain_validation(true)),
        SslMode::VerifyFull => Some(base()),
    }
}

/// A MySQL/MariaDB target. Cheap to share: the options (and their TLS
/// connector, built on first use) are built once.
pub struct MysqlDriver {
    opts: Opts,
    /// `sslmode=prefer`: plaintext options for a server without TLS.
    plain: Option<Opts>,
    /// `sslmode=prefer` found a server without TLS: go straight to `plain`.
    server_lacks_tls: AtomicBool,
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
    /// Parses the target; makes no connection.
    pub fn from_target(target: &Target) -> Result<MysqlDriver, String> {
        let s = parse_url(target.url())?;
        // mysql_async builds its own rustls configuration from `SslOpts`;
        // building the shared one checks the mode/sslrootcert combination
        // and reads the file now, with the same messages as other drivers.
        crate::tls::client_config(s.sslmode, s.sslrootcert.as_deref())?;
        let opts = build_opts(&s, ssl_opts(&s));
        let plain = (s.sslmode == SslMode::Prefer).then(|| build_opts(&s, None));
        Ok(MysqlDriver {
            opts,
            plain,
            server_lacks_tls: AtomicBool::new(false),
            ctx: Arc::new(Ctx {
                endpoint: s.endpoint(),
                user: s.user,
                sslmode: s.sslmode,
            }),
        })
    }

    async fn open(&self, opts: &Opts) -> Result<mysql_async::Conn, DriverError> {
        mysql_async::Conn::new(opts.clone())
            .await
            .map_err(|e| classify(e, &self.ctx, Phase::Connect))
    }
}

impl Driver for MysqlDriver {
    type Conn = MysqlConn;

    fn endpoint(&self) -> String {
        self.ctx.endpoint.clone()
    }

    async fn connect(&self) -> Result<MysqlConn, DriverError> {
        let conn = match &self.plain {
            Some(plain) if self.server_lacks_tls.load(Ordering::Relaxed) => {
                self.open(plain).await?
            }
            Some(plain) => match mysql_async::Conn::new(self.opts.clone()).await {
                Ok(c) => c,
                Err(mysql_async::Error::Driver(
                    mysql_async::DriverError::NoClientSslFlagFromServer,
                )) => {
                    self.server_lacks_tls.store(true, Ordering::Relaxed);
                    self.open(plain).await?
                }
                Err(e) => return Err(classify(e, &self.ctx, Phase::Connect)),
            },
            None => self.open(&self.opts).await?,
        };
        Ok(MysqlConn {
            conn,
            ctx: self.ctx.clone(),
        })
    }

    async fn server_info(&self, conn: &mut MysqlConn) -> Result<ServerInfo, DriverError> {
        let version = match conn.first_value("SELECT VERSION()").await? {
            Some(Value::Bytes(b)) => String::from_utf8_lossy(&b).into_owned(),
            Some(other) => other.as_sql(true),
            None => String::new(),
        };
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
        let rows: Vec<(String, String)> = match conn.conn.query(sql).await {
            Ok(r) => r,
            Err(e) => return Err(conn.err(e)),
        };
        let mut out = Vec::new();
        let (mut requests, mut disk_reads) = (None, None);
        for (name, value) in rows {
            let Ok(v) = value.parse::<f64>() else {
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
    conn: mysql_async::Conn,
    ctx: Arc<Ctx>,
}

impl std::fmt::Debug for MysqlConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlConn")
            .field("endpoint", &self.ctx.endpoint)
            .field("id", &self.conn.id())
            .finish()
    }
}

impl MysqlConn {
    /// The server's id for this connection (`CONNECTION_ID()`).
    pub fn connection_id(&self) -> u32 {
        self.conn.id()
    }

    /// Closes the connection politely (COM_QUIT). Dropping it works too.
    pub async fn close(self) -> Result<(), DriverError> {
        let ctx = self.ctx;
        self.conn
            .disconnect()
            .await
            .map_err(|e| classify(e, &ctx, Phase::Use))
    }

    fn err(&self, e: mysql_async::Error) -> DriverError {
        classify(e, &self.ctx, Phase::Use)
    }

    /// First column of the first row of a text-protocol query.
    async fn first_value(&mut self, sql: &str) -> Result<Option<Value>, DriverError> {
        let row: Option<mysql_async::Row> = match self.conn.query_first(sql).await {
            Ok(r) => r,
            Err(e) => return Err(self.err(e)),
        };
        Ok(row.and_then(|r| r.unwrap().into_iter().next()))
    }
}

impl SqlConn for MysqlConn {
    type Stmt = Statement;

    fn dialect(&self) -> Dialect {
        Dialect::MySql
    }

    async fn prepare(&mut self, sql: &str) -> Result<Statement, DriverError> {
        match self.conn.prep(sql).await {
            Ok(s) => Ok(s),
            Err(e) => Err(self.err(e)),
        }
    }

    async fn exec(
        &mut self,
        stmt: &Statement,
        params: &[SqlParam<'_>],
    ) -> Result<u64, DriverError> {
        // Checked here: mysql_async would close the connection over it.
        if usize::from(stmt.num_params()) != params.len() {
            return Err(DriverError::fatal(format!(
                "the statement takes {} parameters but {} were given",
                stmt.num_params(),
                params.len()
            )));
        }
        // mysql_async takes the parameters by value, so one Vec (plus one
        // copy per text value) per call is the floor here.
        let params = if params.is_empty() {
            Params::Empty
        } else {
            Params::Positional(
                params
                    .iter()
                    .map(|p| match *p {
                        SqlParam::Int(i) => Value::Int(i),
                        SqlParam::Text(t) => Value::Bytes(t.as_bytes().to_vec()),
                    })
                    .collect(),
            )
        };
        let mut result = match self.conn.exec_iter(stmt, params).await {
            Ok(r) => r,
            Err(e) => return Err(classify(e, &self.ctx, Phase::Use)),
        };
        let has_columns = !result.columns_ref().is_empty();
        let mut rows = 0u64;
        let read = result.for_each(|_| rows += 1).await;
        let affected = result.affected_rows();
        let dropped = result.drop_result().await;
        if let Err(e) = read.and(dropped) {
            return Err(classify(e, &self.ctx, Phase::Use));
        }
        Ok(if has_columns { rows } else { affected })
    }

    async fn simple(&mut self, sql: &str) -> Result<(), DriverError> {
        match self.conn.query_drop(sql).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.err(e)),
        }
    }

    async fn query_i64(&mut self, sql: &str) -> Result<Option<i64>, DriverError> {
        match self.first_value(sql).await? {
            None => Ok(None),
            Some(v) => value_to_i64(v).map_err(|shown| {
                DriverError::fatal(format!("expected an integer from `{sql}`, got {shown}"))
            }),
        }
    }

    async fn query_strings(&mut self, sql: &str) -> Result<Vec<String>, DriverError> {
        let rows: Vec<mysql_async::Row> = match self.conn.query(sql).await {
            Ok(r) => r,
            Err(e) => return Err(self.err(e)),
        };
        Ok(rows
            .into_iter()
            .map(|r| {
                r.unwrap()
                    .into_iter()
                    .next()
                    .map(value_to_string)
                    .unwrap_or_default()
            })
            .collect())
    }
}

/// An integer from any numeric form a server may send (the text protocol
/// sends everything as bytes; SUM/MAX of integers may come as DECIMAL).
/// `Ok(None)` for NULL; `Err(shown value)` for anything else.
fn value_to_i64(v: Value) -> Result<Option<i64>, String> {
    let from_f64 = |f: f64| {
        if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 {
            Ok(Some(f as i64))
        } else {
            Err(f.to_string())
        }
    };
    match v {
        Value::NULL => Ok(None),
        Value::Int(i) => Ok(Some(i)),
        Value::UInt(u) => i64::try_from(u).map(Some).map_err(|_| u.to_string()),
        Value::Float(f) => from_f64(f as f64),
        Value::Double(f) => from_f64(f),
        Value::Bytes(b) => {
            let s = String::from_utf8_lossy(&b);
            let t = s.trim();
            if let Ok(i) = t.parse::<i64>() {
                return Ok(Some(i));
            }
            match t.parse::<f64>() {
                Ok(f) => from_f64(f).map_err(|_| format!("'{t}'")),
                Err(_) => Err(format!("'{t}'")),
            }
        }
        other => Err(other.as_sql(true)),
    }
}

/// Text of a value; NULL becomes the empty string.
fn value_to_string(v: Value) -> String {
    match v {
        Value::NULL => String::new(),
        Value::Bytes(b) => String::from_utf8(b)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Double(f) => f.to_string(),
        other => other.as_sql(true).trim_matches('\'').to_string(),
    }
}

// ---------------------------------------------------------------------------
// Errors

/// When an error happened: while connecting, or on an established connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connect,
    Use,
}

fn classify(err: mysql_async::Error, ctx: &Ctx, phase: Phase) -> DriverError {
    use mysql_async::Error as E;
    match err {
        E::Server(s) => classify_server(s.code, &s.message, ctx),
        E::Io(mysql_async::IoError::Io(e)) => classify_io(&e, ctx, phase),
        E::Io(mysql_async::IoError::Tls(e)) => DriverError::fatal(format!(
            "TLS setup for {} failed: {e}{}",
            ctx.endpoint,
            tls_hint(&e.to_string(), ctx.sslmode)
        )),
        E::Driver(d) => classify_driver(d, ctx, phase),
        E::Url(e) => DriverError::fatal(format!("bad connection options: {e}")),
        E::Other(e) => DriverError::fatal(format!("{}: {e}", ctx.endpoint)),
    }
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
        // timeout, and MariaDB's "record has changed since last read".
        1213 | 1205 | 1020 => ErrorClass::Retryable,
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
            tls_hint(&text, ctx.sslmode)
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

fn classify_driver(d: mysql_async::DriverError, ctx: &Ctx, phase: Phase) -> DriverError {
    use mysql_async::DriverError as D;
    let ep = &ctx.endpoint;
    match d {
        D::ConnectionClosed => {
            let msg = match phase {
                Phase::Connect => format!("cannot connect to {ep}: the connection was closed"),
                Phase::Use => format!("lost connection to {ep}: the connection is closed"),
            };
            DriverError::connection(msg).with_code(CR_SERVER_LOST)
        }
        D::PacketOutOfOrder | D::UnexpectedPacket { .. } | D::BadCompressedPacketHeader
            if phase == Phase::Use =>
        {
            DriverError::connection(format!("lost connection to {ep}: protocol error ({d})"))
                .with_code(CR_SERVER_LOST)
        }
        D::PacketOutOfOrder | D::UnexpectedPacket { .. } | D::BadCompressedPacketHeader => {
            DriverError::fatal(format!(
                "{ep} does not answer like a MySQL/MariaDB server ({d})"
            ))
        }
        D::NoClientSslFlagFromServer => DriverError::fatal(format!(
            "the server at {ep} does not support TLS, but sslmode={} requires it; \
             use sslmode=prefer or sslmode=disable",
            ctx.sslmode.as_str()
        )),
        D::StmtParamsMismatch { required, supplied } => DriverError::fatal(format!(
            "the statement takes {required} parameters but {supplied} were given"
        )),
        other => DriverError::fatal(format!("{ep}: {other}")),
    }
}

fn tls_hint(text: &str, mode: SslMode) -> &'static str {
    if mode == SslMode::VerifyCa && text.contains("not valid for name") {
        " (with this driver sslmode=verify-ca also checks the host name: connect by a \
         name the certificate lists, or use sslmode=require)"
    } else if text.contains("UnknownIssuer") || text.contains("unknown issuer") {
        " (pass the CA certificate with sslrootcert=PATH, or use sslmode=require)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn tls_options_follow_the_mode() {
        let mut s = settings("mysql://h/d").unwrap();
        assert!(ssl_opts(&s).is_none());
        s.sslmode = SslMode::Require;
        let o = ssl_opts(&s).unwrap();
        assert!(o.accept_invalid_certs());
        s.sslmode = SslMode::VerifyCa;
        let o = ssl_opts(&s).unwrap();
        assert!(!o.accept_invalid_certs());
        assert!(o.skip_domain_validation());
        assert!(!o.disable_built_in_roots());
        s.sslmode = SslMode::Require;
        s.sslrootcert = Some("/etc/ca.pem".into());
        let o = ssl_opts(&s).unwrap();
        assert!(!o.accept_invalid_certs() && o.skip_domain_validation());
        s.sslmode = SslMode::VerifyFull;
        s.sslrootcert = Some("/etc/ca.pem".into());
        let o = ssl_opts(&s).unwrap();
        assert!(!o.accept_invalid_certs() && !o.skip_domain_validation());
        assert!(o.disable_built_in_roots());
        assert_eq!(o.root_certs().len(), 1);
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
        assert!(d.plain.is_none());
        let t = Target::parse("mysql://lc@h/x?sslmode=prefer").unwrap();
        let d = MysqlDriver::from_target(&t).unwrap();
        assert!(d.plain.is_some());
        assert!(d.opts.ssl_opts().is_some());
        assert!(d.plain.as_ref().unwrap().ssl_opts().is_none());
        assert!(!d.opts.prefer_socket());
        assert_eq!(d.opts.stmt_cache_size(), 0);
        assert!(d.opts.tcp_nodelay());
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%2Fb%20c", "x").unwrap(), "a/b c");
        assert_eq!(percent_decode("%C3%A9", "x").unwrap(), "é");
        assert!(percent_decode("%zz", "x").is_err());
        assert!(percent_decode("%4", "x").is_err());
        assert!(percent_decode("%ff", "x").is_err());
    }

    #[test]
    fn server_error_classes() {
        for code in [1213, 1205, 1020] {
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
    }

    #[test]
    fn io_errors() {
        let c = ctx();
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let e = classify(refused.into(), &c, Phase::Connect);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(
            e.message,
            "cannot connect to 127.0.0.1:3306: connection refused (is the server running?)"
        );
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        let e = classify(reset.into(), &c, Phase::Use);
        assert_eq!(e.class, ErrorClass::Connection);
        assert!(
            e.message.starts_with("lost connection to 127.0.0.1:3306"),
            "{e}"
        );
        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        assert_eq!(
            classify(eof.into(), &c, Phase::Use).class,
            ErrorClass::Connection
        );
        let timeout = io::Error::from(io::ErrorKind::TimedOut);
        let e = classify(timeout.into(), &c, Phase::Connect);
        assert_eq!(e.class, ErrorClass::Connection);
        assert!(e.message.contains("timed out"), "{e}");
        let dns =
            io::Error::other("failed to lookup address information: Name or service not known");
        assert_eq!(
            classify(dns.into(), &c, Phase::Connect).class,
            ErrorClass::Fatal
        );
        let tls = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let e = classify(tls.into(), &c, Phase::Connect);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(
            e.message.contains("TLS handshake with 127.0.0.1:3306"),
            "{e}"
        );
        assert!(e.message.contains("sslrootcert"), "{e}");
    }

    #[test]
    fn driver_errors() {
        let c = ctx();
        let e = classify(
            mysql_async::DriverError::ConnectionClosed.into(),
            &c,
            Phase::Use,
        );
        assert_eq!(e.class, ErrorClass::Connection);
        let e = classify(
            mysql_async::DriverError::NoClientSslFlagFromServer.into(),
            &c,
            Phase::Connect,
        );
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e.message.contains("does not support TLS"), "{e}");
        let e = classify(
            mysql_async::DriverError::StmtParamsMismatch {
                required: 2,
                supplied: 1,
            }
            .into(),
            &c,
            Phase::Use,
        );
        assert_eq!(e.class, ErrorClass::Fatal);
    }

    #[test]
    fn values_to_integers() {
        assert_eq!(value_to_i64(Value::NULL), Ok(None));
        assert_eq!(value_to_i64(Value::Int(-3)), Ok(Some(-3)));
        assert_eq!(value_to_i64(Value::UInt(7)), Ok(Some(7)));
        assert!(value_to_i64(Value::UInt(u64::MAX)).is_err());
        assert_eq!(value_to_i64(Value::Bytes(b"42".to_vec())), Ok(Some(42)));
        assert_eq!(
            value_to_i64(Value::Bytes(b"5050.000".to_vec())),
            Ok(Some(5050))
        );
        assert!(value_to_i64(Value::Bytes(b"1.5".to_vec())).is_err());
        assert!(value_to_i64(Value::Bytes(b"abc".to_vec())).is_err());
        assert_eq!(value_to_i64(Value::Double(3.0)), Ok(Some(3)));
    }

    #[test]
    fn values_to_strings() {
        assert_eq!(
            value_to_string(Value::Bytes(b"sbtest1".to_vec())),
            "sbtest1"
        );
        assert_eq!(value_to_string(Value::NULL), "");
        assert_eq!(value_to_string(Value::Int(5)), "5");
    }

    #[test]
    fn product_detection() {
        assert_eq!(product_of("10.11.6-MariaDB-0+deb12u1"), "MariaDB");
        assert_eq!(product_of("8.0.36"), "MySQL");
        assert_eq!(product_of("5.5.5-10.6.12-MariaDB-log"), "MariaDB");
    }
}
