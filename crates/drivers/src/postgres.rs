//! PostgreSQL over tokio-postgres: the extended query protocol with
//! prepared statements, TLS through rustls (see [`crate::tls`]).
//!
//! Parameters are bound in the type the server inferred for each `$n`
//! (an `Int` binds to `int2`, `int4` or `int8` with a range check, a
//! `Text` to any string type); values for other types are sent in text
//! form and parsed by the server.

use std::error::Error as _;
use std::fmt;
use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use loadcell_core::sql::{Dialect, SqlConn, SqlParam};
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, Target};
use tokio_postgres::error::ErrorPosition;
// `BytesMut` is what `ToSql::to_sql` writes to; postgres-types re-exports
// it for its own `to_sql_checked!` macro, which saves a direct `bytes`
// dependency.
use tokio_postgres::types::private::BytesMut;
use tokio_postgres::types::{to_sql_checked, Format, IsNull, ToSql, Type};
use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::tls::{self, SslMode};
use crate::{DriverInfo, Family};
use loadcell_core::kv::KvCapabilities;

pub const INFO: DriverInfo = DriverInfo {
    name: "postgres",
    schemes: &["postgres", "postgresql"],
    family: Family::Sql,
    url_form: "postgres://user:pass@host:port/db[?sslmode=...&sslrootcert=PATH]",
    about: "PostgreSQL (extended query protocol, prepared statements)",
    kv: KvCapabilities::NONE,
};

const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_PORT: u16 = 5432;
const APPLICATION_NAME: &str = "loadcell";
const ACCEPTED_PARAMS: &[&str] = &["sslmode", "sslrootcert"];

// ---------------------------------------------------------------------------
// Target URL

/// What the target URL says. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
struct Settings {
    host: String,
    port: u16,
    /// `None`: tokio-postgres uses the OS user name, as libpq does.
    user: Option<String>,
    password: Option<String>,
    /// `None`: the server uses the user name.
    dbname: Option<String>,
    sslmode: SslMode,
    sslrootcert: Option<PathBuf>,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("dbname", &self.dbname)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .finish()
    }
}

impl Settings {
    fn from_url(url: &url::Url) -> Result<Settings, String> {
        if url.cannot_be_a_base() {
            return Err(format!("expected {}", INFO.url_form));
        }
        let host = match url.host() {
            None => DEFAULT_HOST.to_string(),
            Some(url::Host::Domain("")) => DEFAULT_HOST.to_string(),
            Some(url::Host::Domain(d)) => percent_decode(d)?,
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
        };
        let port = url.port().unwrap_or(DEFAULT_PORT);
        let user = Some(percent_decode(url.username())?).filter(|u| !u.is_empty());
        let password = url.password().map(percent_decode).transpose()?;
        let path = url.path().strip_prefix('/').unwrap_or(url.path());
        if path.contains('/') {
            return Err(format!(
                "the path must be just the database name, got '/{path}'"
            ));
        }
        let dbname = Some(percent_decode(path)?).filter(|d| !d.is_empty());

        let mut sslmode = SslMode::Disable;
        let mut sslrootcert = None;
        let mut unknown = Vec::new();
        for (key, value) in url.query_pairs() {
            match &*key {
                "sslmode" => sslmode = SslMode::parse(&value)?,
                "sslrootcert" if value.is_empty() => {
                    return Err("sslrootcert needs a file path".to_string())
                }
                "sslrootcert" => sslrootcert = Some(PathBuf::from(&*value)),
                other => {
                    if !unknown.iter().any(|u: &String| u == other) {
                        unknown.push(other.to_string());
                    }
                }
            }
        }
        if !unknown.is_empty() {
            let names: Vec<String> = unknown.iter().map(|u| format!("'{u}'")).collect();
            return Err(format!(
                "unknown parameter{} {}; accepted: {}",
                if unknown.len() > 1 { "s" } else { "" },
                names.join(", "),
                ACCEPTED_PARAMS.join(", ")
            ));
        }
        Ok(Settings {
            host,
            port,
            user,
            password,
            dbname,
            sslmode,
            sslrootcert,
        })
    }

    fn endpoint(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    fn config(&self) -> Config {
        let mut config = Config::new();
        config
            .host(&self.host)
            .port(self.port)
            .application_name(APPLICATION_NAME)
            .ssl_mode(match self.sslmode {
                SslMode::Disable => tokio_postgres::config::SslMode::Disable,
                SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
                // Verification is done by the rustls configuration.
                SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                    tokio_postgres::config::SslMode::Require
                }
            });
        if let Some(user) = &self.user {
            config.user(user);
        }
        if let Some(password) = &self.password {
            config.password(password);
        }
        if let Some(dbname) = &self.dbname {
            config.dbname(dbname);
        }
        config
    }
}

/// Decodes `%XX` escapes (URL user, password, host and path are left
/// encoded by the `url` crate).
fn percent_decode(s: &str) -> Result<String, String> {
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
                None => return Err("bad %-escape in the URL".to_string()),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).map_err(|_| "a %-escape in the URL is not UTF-8".to_string())
}

// ---------------------------------------------------------------------------
// Driver

pub struct PostgresDriver {
    config: Config,
    tls: Option<MakeRustlsConnect>,
    ctx: Arc<ErrCtx>,
}

impl fmt::Debug for PostgresDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresDriver")
            .field("endpoint", &self.ctx.endpoint)
            .field("user", &self.ctx.user)
            .field("dbname", &self.ctx.dbname)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl PostgresDriver {
    /// Builds the driver (reading any `sslrootcert` file); connects nowhere.
    pub fn from_target(target: &Target) -> Result<PostgresDriver, String> {
        let settings = Settings::from_url(target.url())?;
        let tls = tls::client_config(settings.sslmode, settings.sslrootcert.as_deref())?
            .map(|c| MakeRustlsConnect::new((*c).clone()));
        Ok(PostgresDriver {
            config: settings.config(),
            tls,
            ctx: Arc::new(ErrCtx {
                endpoint: settings.endpoint(),
                user: settings.user.clone(),
                dbname: settings.dbname.clone(),
                password: settings.password.clone(),
                sslmode: settings.sslmode,
            }),
        })
    }
}

impl Driver for PostgresDriver {
    type Conn = PostgresConn;

    fn endpoint(&self) -> String {
        self.ctx.endpoint.clone()
    }

    async fn connect(&self) -> Result<PostgresConn, DriverError> {
        let ended: Arc<Mutex<Option<Failure>>> = Arc::default();
        let on_end = Arc::clone(&ended);
        // The connection task owns the socket; it ends when the client is
        // dropped or the connection fails, and records why in the latter case.
        let client = match &self.tls {
            None => {
                let (client, connection) = self
                    .config
                    .connect(NoTls)
                    .await
                    .map_err(|e| describe(failure_of(&e), &self.ctx, Phase::Connect))?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        *on_end.lock().unwrap_or_else(|p| p.into_inner()) = Some(failure_of(&e));
                    }
                });
                client
            }
            Some(tls) => {
                let (client, connection) = self
                    .config
                    .connect(tls.clone())
                    .await
                    .map_err(|e| describe(failure_of(&e), &self.ctx, Phase::Connect))?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        *on_end.lock().unwrap_or_else(|p| p.into_inner()) = Some(failure_of(&e));
                    }
                });
                client
            }
        };
        Ok(PostgresConn {
            client,
            ctx: Arc::clone(&self.ctx),
            ended,
        })
    }

    async fn server_info(&self, conn: &mut PostgresConn) -> Result<ServerInfo, DriverError> {
        let version = conn
            .first_column("SHOW server_version")
            .await?
            .into_iter()
            .next()
            .flatten()
            .unwrap_or_default();
        Ok(ServerInfo {
            product: "PostgreSQL".to_string(),
            version,
        })
    }

    async fn server_counters(
        &self,
        conn: &mut PostgresConn,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        const TOTALS: &[&str] = &[
            "xact_commit",
            "xact_rollback",
            "blks_read",
            "blks_hit",
            "tup_returned",
            "tup_fetched",
            "tup_inserted",
            "tup_updated",
            "tup_deleted",
            "deadlocks",
            "temp_bytes",
        ];
        let columns: Vec<String> = TOTALS
            .iter()
            .map(|c| format!("'{c}_total=' || {c}"))
            .chain(std::iter::once("'numbackends=' || numbackends".to_string()))
            .collect();
        let sql = format!(
            "SELECT unnest(ARRAY[{}]) FROM pg_stat_database WHERE datname = current_database()",
            columns.join(", ")
        );
        let mut out = Vec::new();
        let (mut hit, mut read) = (None, None);
        for row in conn.query_strings(&sql).await? {
            let Some((name, value)) = row.split_once('=') else {
                continue;
            };
            let Ok(v) = value.parse::<f64>() else {
                continue;
            };
            match name {
                "blks_hit_total" => hit = Some(v),
                "blks_read_total" => read = Some(v),
                _ => {}
            }
            out.push((name.to_string(), v));
        }
        if let (Some(h), Some(r)) = (hit, read) {
            if h + r > 0.0 {
                out.push(("buffer_hit_pct_since_start".into(), 100.0 * h / (h + r)));
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------
// Connection

/// One session's connection.
pub struct PostgresConn {
    client: Client,
    ctx: Arc<ErrCtx>,
    /// Why the connection task ended, if it failed.
    ended: Arc<Mutex<Option<Failure>>>,
}

impl fmt::Debug for PostgresConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConn")
            .field("endpoint", &self.ctx.endpoint)
            .field("closed", &self.client.is_closed())
            .finish()
    }
}

impl PostgresConn {
    /// The underlying tokio-postgres client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    #[cold]
    fn error(&self, e: &tokio_postgres::Error) -> DriverError {
        let mut failure = failure_of(e);
        if failure == Failure::Closed {
            let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(why) = ended.as_ref() {
                failure = Failure::Lost(Box::new(why.clone()));
            }
        }
        describe(failure, &self.ctx, Phase::Session)
    }

    /// [`Self::error`], naming the statement when the error is about it.
    #[cold]
    fn error_in(&self, e: &tokio_postgres::Error, sql: &str) -> DriverError {
        let mut err = self.error(e);
        if err.class == ErrorClass::Fatal && err.code.is_some() {
            let _ = write!(err.message, " in `{}`", shorten(sql));
        }
        err
    }

    /// First column of every row, in text form (`None` for NULL).
    async fn first_column(&mut self, sql: &str) -> Result<Vec<Option<String>>, DriverError> {
        let messages = self
            .client
            .simple_query(sql)
            .await
            .map_err(|e| self.error_in(&e, sql))?;
        let mut out = Vec::new();
        for message in &messages {
            if let SimpleQueryMessage::Row(row) = message {
                let value = row
                    .try_get(0)
                    .map_err(|_| DriverError::fatal(format!("query returned no columns: {sql}")))?;
                out.push(value.map(str::to_string));
            }
        }
        Ok(out)
    }
}

impl SqlConn for PostgresConn {
    type Stmt = Statement;

    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn prepare(&mut self, sql: &str) -> Result<Statement, DriverError> {
        self.client
            .prepare(sql)
            .await
            .map_err(|e| self.error_in(&e, sql))
    }

    /// Rows are read and discarded by tokio-postgres without building
    /// `Row`s; the count is the server's (`SELECT n`, `UPDATE n`, ...).
    async fn exec(
        &mut self,
        stmt: &Statement,
        params: &[SqlParam<'_>],
    ) -> Result<u64, DriverError> {
        match self
            .client
            .execute_raw(stmt, params.iter().map(|p| Param(*p)))
            .await
        {
            Ok(n) => Ok(n),
            Err(e) => Err(self.error(&e)),
        }
    }

    async fn simple(&mut self, sql: &str) -> Result<(), DriverError> {
        self.client
            .batch_execute(sql)
            .await
            .map_err(|e| self.error_in(&e, sql))
    }

    async fn query_i64(&mut self, sql: &str) -> Result<Option<i64>, DriverError> {
        match self.first_column(sql).await?.into_iter().next().flatten() {
            None => Ok(None),
            Some(text) => parse_integer(&text).map(Some).ok_or_else(|| {
                DriverError::fatal(format!("expected an integer from `{sql}`, got '{text}'"))
            }),
        }
    }

    /// NULLs come back as empty strings.
    async fn query_strings(&mut self, sql: &str) -> Result<Vec<String>, DriverError> {
        Ok(self
            .first_column(sql)
            .await?
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect())
    }
}

/// `sql` cut to a length fit for a message (bulk INSERTs are long).
fn shorten(sql: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 160;
    let sql = sql.trim();
    if sql.len() <= MAX {
        return sql.into();
    }
    let mut end = MAX;
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &sql[..end]).into()
}

/// An integer in PostgreSQL's text form: int2/int4/int8, or a numeric
/// without a fractional part (`SUM(bigint)` is numeric).
fn parse_integer(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(v) = text.parse() {
        return Some(v);
    }
    let (int, frac) = text.split_once('.')?;
    if frac.bytes().all(|b| b == b'0') {
        int.parse().ok()
    } else {
        None
    }
}

// ---------------------------------------------------------------------------
// Parameters

/// A [`SqlParam`] bound in the statement's own parameter type.
#[derive(Debug, Clone, Copy)]
struct Param<'a>(SqlParam<'a>);

/// String types whose binary form is the text itself.
fn is_text_type(ty: &Type) -> bool {
    *ty == Type::TEXT
        || *ty == Type::VARCHAR
        || *ty == Type::BPCHAR
        || *ty == Type::NAME
        || *ty == Type::UNKNOWN
}

fn is_int_type(ty: &Type) -> bool {
    *ty == Type::INT4 || *ty == Type::INT8 || *ty == Type::INT2
}

fn out_of_range(v: i64, ty: &Type) -> Box<dyn std::error::Error + Sync + Send> {
    format!("value {v} is out of range for type {}", ty.name()).into()
}

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            SqlParam::Int(v) if *ty == Type::INT4 => i32::try_from(v)
                .map_err(|_| out_of_range(v, ty))?
                .to_sql(ty, out),
            SqlParam::Int(v) if *ty == Type::INT8 => v.to_sql(ty, out),
            SqlParam::Int(v) if *ty == Type::INT2 => i16::try_from(v)
                .map_err(|_| out_of_range(v, ty))?
                .to_sql(ty, out),
            // Text form (see `encode_format`): numeric, float, bool, text...
            SqlParam::Int(v) => {
                write!(out, "{v}")?;
                Ok(IsNull::No)
            }
            // The binary form of the string types and the text form of
            // everything else are both just the string.
            SqlParam::Text(s) => {
                out.extend_from_slice(s.as_bytes());
                Ok(IsNull::No)
            }
        }
    }

    /// Any type: what has no binary encoding here goes in text form and the
    /// server parses it (and reports a bad value as it would for SQL text).
    fn accepts(_ty: &Type) -> bool {
        true
    }

    fn encode_format(&self, ty: &Type) -> Format {
        let binary = match self.0 {
            SqlParam::Int(_) => is_int_type(ty),
            SqlParam::Text(_) => is_text_type(ty),
        };
        if binary {
            Format::Binary
        } else {
            Format::Text
        }
    }

    to_sql_checked!();
}

// ---------------------------------------------------------------------------
// Errors

/// What error messages need to know about the target.
#[derive(Clone, PartialEq, Eq)]
struct ErrCtx {
    endpoint: String,
    user: Option<String>,
    dbname: Option<String>,
    /// Only to make sure no message ever shows it.
    password: Option<String>,
    sslmode: SslMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connect,
    Session,
}

/// A tokio-postgres error taken apart, so that it can be described (and
/// unit-tested) without a server.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// An error the server reported.
    Db {
        code: String,
        message: String,
        hint: Option<String>,
        position: Option<u32>,
    },
    /// The connection task has ended, reason unknown.
    Closed,
    /// The connection task has ended for this reason.
    Lost(Box<Failure>),
    /// Could not open the socket.
    Connect {
        kind: io::ErrorKind,
        text: String,
    },
    /// The socket failed mid-session.
    Io {
        kind: io::ErrorKind,
        text: String,
    },
    Tls {
        kind: Option<io::ErrorKind>,
        text: String,
    },
    Auth(String),
    Other(String),
}

fn failure_of(e: &tokio_postgres::Error) -> Failure {
    if let Some(db) = e.as_db_error() {
        return Failure::Db {
            code: db.code().code().to_string(),
            message: db.message().to_string(),
            hint: db.hint().map(str::to_string),
            position: match db.position() {
                Some(ErrorPosition::Original(p)) => Some(*p),
                _ => None,
            },
        };
    }
    if e.is_closed() {
        return Failure::Closed;
    }
    // tokio-postgres does not expose its error kinds; its Display is the kind.
    let what = e.to_string();
    let source = e.source();
    let io_kind = source
        .and_then(|s| s.downcast_ref::<io::Error>())
        .map(io::Error::kind);
    let cause = source.map(ToString::to_string).unwrap_or_default();
    match what.as_str() {
        "error connecting to server" => Failure::Connect {
            kind: io_kind.unwrap_or(io::ErrorKind::Other),
            text: cause,
        },
        "error communicating with the server" => Failure::Io {
            kind: io_kind.unwrap_or(io::ErrorKind::Other),
            text: cause,
        },
        "timeout waiting for server" => Failure::Io {
            kind: io::ErrorKind::TimedOut,
            text: what,
        },
        "error performing TLS handshake" => Failure::Tls {
            kind: io_kind,
            text: cause,
        },
        "authentication error" => Failure::Auth(cause),
        "invalid configuration" if cause == "password missing" => {
            Failure::Auth("the server asked for a password and --target has none".to_string())
        }
        _ if what.starts_with("error serializing parameter ") => {
            // "error serializing parameter 0" is the 0-based index.
            let n = what
                .rsplit(' ')
                .next()
                .and_then(|i| i.parse::<usize>().ok())
                .map_or(0, |i| i + 1);
            Failure::Other(format!("cannot bind parameter ${n}: {cause}"))
        }
        _ if cause.is_empty() => Failure::Other(what),
        _ => Failure::Other(format!("{what}: {cause}")),
    }
}

/// The class of a SQLSTATE.
fn sqlstate_class(code: &str) -> ErrorClass {
    match code {
        // deadlock, serialization failure, duplicate key (sysbench ignores
        // it), lock not available (NOWAIT, lock_timeout).
        "40P01" | "40001" | "23505" | "55P03" => ErrorClass::Retryable,
        // admin shutdown, crash shutdown, cannot connect now.
        "57P01" | "57P02" | "57P03" => ErrorClass::Connection,
        c if c.starts_with("08") => ErrorClass::Connection,
        _ => ErrorClass::Fatal,
    }
}

fn describe(failure: Failure, ctx: &ErrCtx, phase: Phase) -> DriverError {
    let ep = &ctx.endpoint;
    let mut err = match failure {
        Failure::Db {
            code,
            message,
            hint,
            position,
        } => {
            let class = sqlstate_class(&code);
            let text = match code.as_str() {
                "28P01" => format!(
                    "password authentication failed for user '{}' at {ep}: check the user and password in --target",
                    ctx.user.as_deref().unwrap_or("(default)")
                ),
                "28000" => format!(
                    "{message} at {ep}: check the user and password in --target"
                ),
                "3D000" => format!("{message} at {ep}: check the database name in --target"),
                "57P01" | "57P02" | "57P03" => {
                    format!("server at {ep} closed the connection: {message}")
                }
                c if c.starts_with("08") => format!("connection to {ep} failed: {message}"),
                _ if class == ErrorClass::Retryable => message,
                _ => {
                    let mut text = message;
                    if let Some(p) = position {
                        let _ = write!(text, " (at character {p})");
                    }
                    if let Some(h) = hint {
                        let _ = write!(text, "; hint: {h}");
                    }
                    text
                }
            };
            DriverError::new(class, text).with_code(code)
        }
        Failure::Closed => DriverError::connection(format!("connection to {ep} closed")),
        Failure::Lost(why) if *why == Failure::Closed => DriverError::connection(format!(
            "connection to {ep} lost: the server closed the connection"
        )),
        Failure::Lost(why) => {
            let inner = describe(*why, ctx, phase);
            let mut e = DriverError::connection(match phase {
                Phase::Connect => inner.message,
                Phase::Session if inner.message.contains(ep.as_str()) => inner.message,
                Phase::Session => format!("connection to {ep} lost: {}", inner.message),
            });
            e.code = inner.code;
            e
        }
        Failure::Connect { kind, text } => DriverError::connection(match kind {
            io::ErrorKind::ConnectionRefused => {
                format!("cannot connect to {ep}: connection refused (is the server running?)")
            }
            io::ErrorKind::TimedOut => format!("cannot connect to {ep}: timed out"),
            _ => format!("cannot connect to {ep}: {text}"),
        }),
        Failure::Io { text, .. } => DriverError::connection(match phase {
            Phase::Connect => format!("connection to {ep} failed: {text}"),
            Phase::Session => format!("connection to {ep} lost: {text}"),
        }),
        Failure::Tls { text, .. } if text.contains("does not support TLS") => {
            DriverError::fatal(format!(
                "server at {ep} does not support TLS, which sslmode={} requires: use sslmode=prefer or disable",
                ctx.sslmode.as_str()
            ))
        }
        // rustls reports certificate and protocol problems as InvalidData:
        // connecting again will not help.
        Failure::Tls {
            kind: Some(io::ErrorKind::InvalidData) | None,
            text,
        } => DriverError::fatal(format!(
            "TLS handshake with {ep} failed (sslmode={}): {text}",
            ctx.sslmode.as_str()
        )),
        Failure::Tls { text, .. } => {
            DriverError::connection(format!("TLS handshake with {ep} failed: {text}"))
        }
        Failure::Auth(text) => {
            DriverError::fatal(format!("authentication at {ep} failed: {text}"))
        }
        Failure::Other(text) => DriverError::fatal(text),
    };
    if let Some(pw) = ctx.password.as_deref() {
        if pw.len() >= 3 && err.message.contains(pw) {
            err.message = err.message.replace(pw, "***");
        }
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(raw: &str) -> Result<Settings, String> {
        Settings::from_url(Target::parse(raw).unwrap().url())
    }

    fn ctx() -> ErrCtx {
        ErrCtx {
            endpoint: "127.0.0.1:5432".to_string(),
            user: Some("lc".to_string()),
            dbname: Some("loadcell".to_string()),
            password: Some("s3cret-pw".to_string()),
            sslmode: SslMode::Disable,
        }
    }

    fn db(code: &str, message: &str) -> Failure {
        Failure::Db {
            code: code.to_string(),
            message: message.to_string(),
            hint: None,
            position: None,
        }
    }

    #[test]
    fn full_url() {
        let s = settings("postgres://lc:lcpass@db.example:6543/bench?sslmode=require").unwrap();
        assert_eq!(s.host, "db.example");
        assert_eq!(s.port, 6543);
        assert_eq!(s.user.as_deref(), Some("lc"));
        assert_eq!(s.password.as_deref(), Some("lcpass"));
        assert_eq!(s.dbname.as_deref(), Some("bench"));
        assert_eq!(s.sslmode, SslMode::Require);
        assert_eq!(s.sslrootcert, None);
        assert_eq!(s.endpoint(), "db.example:6543");
        let shown = format!("{s:?}");
        assert!(!shown.contains("lcpass"), "{shown}");
    }

    #[test]
    fn defaults() {
        let s = settings("postgresql://u@127.0.0.1").unwrap();
        assert_eq!(s.port, 5432);
        assert_eq!(s.user.as_deref(), Some("u"));
        assert_eq!(s.password, None);
        assert_eq!(s.dbname, None);
        assert_eq!(s.sslmode, SslMode::Disable);
        assert_eq!(s.endpoint(), "127.0.0.1:5432");
        let s = settings("postgres://h/").unwrap();
        assert_eq!(s.user, None);
        assert_eq!(s.dbname, None);
    }

    #[test]
    fn percent_escapes_and_ipv6() {
        let s = settings("postgres://us%40er:p%3Aw%2Fd@[::1]:5433/my%20db").unwrap();
        assert_eq!(s.user.as_deref(), Some("us@er"));
        assert_eq!(s.password.as_deref(), Some("p:w/d"));
        assert_eq!(s.dbname.as_deref(), Some("my db"));
        assert_eq!(s.host, "::1");
        assert_eq!(s.endpoint(), "[::1]:5433");
        assert_eq!(
            percent_decode("a%2"),
            Err("bad %-escape in the URL".to_string())
        );
        assert!(percent_decode("%ff").is_err());
    }

    #[test]
    fn ssl_parameters() {
        let s = settings("postgres://h/db?sslmode=verify-full&sslrootcert=/etc/ca.pem").unwrap();
        assert_eq!(s.sslmode, SslMode::VerifyFull);
        assert_eq!(s.sslrootcert, Some(PathBuf::from("/etc/ca.pem")));
        let err = settings("postgres://h/db?sslmode=sometimes").unwrap_err();
        assert!(err.contains("unknown sslmode 'sometimes'"), "{err}");
        let err = settings("postgres://h/db?sslrootcert=").unwrap_err();
        assert!(err.contains("sslrootcert"), "{err}");
    }

    #[test]
    fn unknown_parameters_are_named() {
        let err = settings("postgres://h/db?foo=1&sslmode=disable&bar=2&foo=3").unwrap_err();
        assert_eq!(
            err,
            "unknown parameters 'foo', 'bar'; accepted: sslmode, sslrootcert"
        );
        let err = settings("postgres://h/db?connect_timeout=5").unwrap_err();
        assert_eq!(
            err,
            "unknown parameter 'connect_timeout'; accepted: sslmode, sslrootcert"
        );
    }

    #[test]
    fn bad_paths() {
        let err = settings("postgres://h/a/b").unwrap_err();
        assert!(err.contains("/a/b"), "{err}");
    }

    #[test]
    fn from_target_builds_and_redacts() {
        let t = Target::parse("postgres://lc:hunter22@10.1.2.3:5433/x?sslmode=prefer").unwrap();
        let d = PostgresDriver::from_target(&t).unwrap();
        assert_eq!(d.endpoint(), "10.1.2.3:5433");
        assert!(d.tls.is_some());
        assert!(!format!("{d:?}").contains("hunter22"));
        assert_eq!(d.config.get_application_name(), Some("loadcell"));
        assert_eq!(d.config.get_dbname(), Some("x"));
        assert_eq!(
            d.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Prefer
        );

        let t = Target::parse("postgres://lc@h/x?sslmode=verify-ca").unwrap();
        let d = PostgresDriver::from_target(&t).unwrap();
        assert_eq!(
            d.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        let t = Target::parse("postgres://lc@h/x").unwrap();
        assert!(PostgresDriver::from_target(&t).unwrap().tls.is_none());

        let t = Target::parse("postgres://lc@h/x?sslmode=verify-full&sslrootcert=/no/such.pem")
            .unwrap();
        let err = PostgresDriver::from_target(&t).unwrap_err();
        assert!(err.contains("/no/such.pem"), "{err}");
        let t = Target::parse("postgres://lc@h/x?sslrootcert=/no/such.pem").unwrap();
        let err = PostgresDriver::from_target(&t).unwrap_err();
        assert!(err.contains("sslmode=disable"), "{err}");
    }

    #[test]
    fn sqlstate_classes() {
        for code in ["40P01", "40001", "23505", "55P03"] {
            assert_eq!(sqlstate_class(code), ErrorClass::Retryable, "{code}");
        }
        for code in ["57P01", "57P02", "57P03", "08006", "08001", "08P01"] {
            assert_eq!(sqlstate_class(code), ErrorClass::Connection, "{code}");
        }
        for code in [
            "28P01", "28000", "3D000", "42P01", "42601", "22003", "53300",
        ] {
            assert_eq!(sqlstate_class(code), ErrorClass::Fatal, "{code}");
        }
    }

    #[test]
    fn auth_failure_message() {
        let e = describe(
            db("28P01", "password authentication failed for user \"lc\""),
            &ctx(),
            Phase::Connect,
        );
        assert_eq!(e.class, ErrorClass::Fatal);
        assert_eq!(e.code.as_deref(), Some("28P01"));
        assert_eq!(
            e.message,
            "password authentication failed for user 'lc' at 127.0.0.1:5432: check the user and password in --target"
        );
    }

    #[test]
    fn never_shows_the_password() {
        let e = describe(
            Failure::Other("weird s3cret-pw echo".to_string()),
            &ctx(),
            Phase::Session,
        );
        assert_eq!(e.message, "weird *** echo");
    }

    #[test]
    fn connect_failures() {
        let refused = Failure::Connect {
            kind: io::ErrorKind::ConnectionRefused,
            text: "Connection refused (os error 111)".to_string(),
        };
        let e = describe(refused, &ctx(), Phase::Connect);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(
            e.message,
            "cannot connect to 127.0.0.1:5432: connection refused (is the server running?)"
        );
        let e = describe(
            db("3D000", "database \"nope\" does not exist"),
            &ctx(),
            Phase::Connect,
        );
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e
            .message
            .contains("\"nope\" does not exist at 127.0.0.1:5432"));
        let e = describe(
            Failure::Tls {
                kind: None,
                text: "server does not support TLS".to_string(),
            },
            &ErrCtx {
                sslmode: SslMode::Require,
                ..ctx()
            },
            Phase::Connect,
        );
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e.message.contains("sslmode=require"), "{}", e.message);
        let e = describe(
            Failure::Tls {
                kind: Some(io::ErrorKind::InvalidData),
                text: "invalid peer certificate: UnknownIssuer".to_string(),
            },
            &ctx(),
            Phase::Connect,
        );
        assert_eq!(e.class, ErrorClass::Fatal);
        let e = describe(
            Failure::Tls {
                kind: Some(io::ErrorKind::ConnectionReset),
                text: "reset".to_string(),
            },
            &ctx(),
            Phase::Connect,
        );
        assert_eq!(e.class, ErrorClass::Connection);
    }

    #[test]
    fn session_failures() {
        let e = describe(Failure::Closed, &ctx(), Phase::Session);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(e.message, "connection to 127.0.0.1:5432 closed");

        let e = describe(
            Failure::Lost(Box::new(Failure::Closed)),
            &ctx(),
            Phase::Session,
        );
        assert_eq!(
            e.message,
            "connection to 127.0.0.1:5432 lost: the server closed the connection"
        );

        let lost = Failure::Lost(Box::new(Failure::Io {
            kind: io::ErrorKind::ConnectionReset,
            text: "Connection reset by peer (os error 104)".to_string(),
        }));
        let e = describe(lost, &ctx(), Phase::Session);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(
            e.message,
            "connection to 127.0.0.1:5432 lost: Connection reset by peer (os error 104)"
        );

        let shutdown = Failure::Lost(Box::new(db(
            "57P01",
            "terminating connection due to administrator command",
        )));
        let e = describe(shutdown, &ctx(), Phase::Session);
        assert_eq!(e.class, ErrorClass::Connection);
        assert_eq!(e.code.as_deref(), Some("57P01"));
        assert!(e
            .message
            .starts_with("server at 127.0.0.1:5432 closed the connection"));

        let e = describe(db("40P01", "deadlock detected"), &ctx(), Phase::Session);
        assert_eq!(
            (e.class, e.message.as_str()),
            (ErrorClass::Retryable, "deadlock detected")
        );

        let syntax = Failure::Db {
            code: "42601".to_string(),
            message: "syntax error at or near \"SELEC\"".to_string(),
            hint: None,
            position: Some(1),
        };
        let e = describe(syntax, &ctx(), Phase::Session);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert_eq!(
            e.message,
            "syntax error at or near \"SELEC\" (at character 1)"
        );
        assert_eq!(
            e.to_string(),
            "syntax error at or near \"SELEC\" (at character 1) (code 42601)"
        );
    }

    #[test]
    fn long_statements_are_shortened() {
        assert_eq!(shorten(" SELECT 1 "), "SELECT 1");
        let long = format!("INSERT INTO t VALUES {}", "(1, 'é'),".repeat(100));
        let short = shorten(&long);
        assert!(short.len() <= 163 && short.ends_with("..."), "{short}");
    }

    #[test]
    fn integers_from_text() {
        assert_eq!(parse_integer("42"), Some(42));
        assert_eq!(parse_integer("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_integer("1500.000"), Some(1500));
        assert_eq!(parse_integer("1500."), Some(1500));
        assert_eq!(parse_integer("1.5"), None);
        assert_eq!(parse_integer("t"), None);
        assert_eq!(parse_integer("99999999999999999999"), None);
    }

    fn is_binary(f: Format) -> bool {
        matches!(f, Format::Binary)
    }

    #[test]
    fn params_encode_in_the_inferred_type() {
        let mut buf = BytesMut::new();
        let p = Param(SqlParam::Int(7));
        assert!(is_binary(p.encode_format(&Type::INT4)));
        p.to_sql_checked(&Type::INT4, &mut buf).unwrap();
        assert_eq!(&buf[..], &7i32.to_be_bytes());
        buf.clear();
        p.to_sql_checked(&Type::INT2, &mut buf).unwrap();
        assert_eq!(&buf[..], &7i16.to_be_bytes());
        buf.clear();
        p.to_sql_checked(&Type::INT8, &mut buf).unwrap();
        assert_eq!(&buf[..], &7i64.to_be_bytes());
        buf.clear();

        let Err(err) = Param(SqlParam::Int(1 << 40)).to_sql_checked(&Type::INT4, &mut buf) else {
            panic!("out of range value accepted");
        };
        assert_eq!(
            err.to_string(),
            "value 1099511627776 is out of range for type int4"
        );
        assert!(Param(SqlParam::Int(40000))
            .to_sql_checked(&Type::INT2, &mut buf)
            .is_err());
        buf.clear();

        // No binary encoding here: text form, parsed by the server.
        assert!(!is_binary(p.encode_format(&Type::NUMERIC)));
        p.to_sql_checked(&Type::NUMERIC, &mut buf).unwrap();
        assert_eq!(&buf[..], b"7");
        buf.clear();

        let t = Param(SqlParam::Text("abc"));
        for ty in [Type::TEXT, Type::VARCHAR, Type::BPCHAR, Type::NAME] {
            assert!(is_binary(t.encode_format(&ty)), "{ty}");
        }
        assert!(!is_binary(t.encode_format(&Type::INT4)));
        assert!(!is_binary(t.encode_format(&Type::JSONB)));
        t.to_sql_checked(&Type::BPCHAR, &mut buf).unwrap();
        assert_eq!(&buf[..], b"abc");
    }
}
