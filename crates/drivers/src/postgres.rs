//! PostgreSQL over loadcell's own wire session: the extended query
//! protocol with prepared statements, TLS through rustls (see
//! [`crate::transport::tls`]). Messages are encoded with `postgres-protocol`'s
//! `frontend` module; SCRAM-SHA-256 and md5 come from its
//! `authentication` module.
//!
//! The session owns its socket: no connection task, no channel. A
//! statement is one write (Bind + Execute + Sync, built in a reused
//! buffer) and, when the response fits, one read into a reused buffer,
//! whose frames are walked without decoding the rows: the count comes
//! from the CommandComplete tag.
//!
//! Parameters are sent in text form and the server infers their types
//! from the statement (Parse names none). The statement's inferred types
//! (from Describe at prepare time) are kept to check the parameter count
//! and the range of integers bound to `int2`/`int4`, as a typed client
//! would, before anything is sent.

use std::fmt;
use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::BytesMut;
use loadcell_core::sql::{
    integer_from_text, not_an_integer, wrong_param_count, Dialect, SqlConn, SqlParam,
};
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, Target};
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;
use rustls::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::transport::peer::{self, Awaiting, Progress};
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::{connect_tcp, Stream, TlsStartError};
use crate::transport::tls::{self, SslMode};
use crate::transport::url_text::{self, percent_decode};
use crate::{DriverInfo, Family};
use loadcell_core::kv::KvCapabilities;

pub const INFO: DriverInfo = DriverInfo {
    name: "postgres",
    schemes: &["postgres", "postgresql"],
    family: Family::Sql,
    url_form: "postgres://user:pass@host:port/db[?sslmode=...&sslrootcert=PATH]",
    about: "PostgreSQL (extended query protocol, prepared statements)",
    kv: KvCapabilities::NONE,
    blocking: false,
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
    /// `None`: the OS user name is sent, as libpq does.
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
            Some(url::Host::Domain(d)) => percent_decode(d, "host")?,
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
        };
        let port = url.port().unwrap_or(DEFAULT_PORT);
        let user = Some(percent_decode(url.username(), "user")?).filter(|u| !u.is_empty());
        let password = url
            .password()
            .map(|p| percent_decode(p, "password"))
            .transpose()?;
        let path = url.path().strip_prefix('/').unwrap_or(url.path());
        if path.contains('/') {
            return Err(format!(
                "the path must be just the database name, got '/{path}'"
            ));
        }
        let dbname = Some(percent_decode(path, "database name")?).filter(|d| !d.is_empty());

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
        url_text::endpoint(&self.host, self.port)
    }
}

// ---------------------------------------------------------------------------
// Driver

/// Size of a session's read buffer; it grows for a larger message.
const READ_BUF: usize = 64 * 1024;
/// Largest message accepted from the server (PostgreSQL's own limit for a
/// field is 1 GiB).
const MAX_MESSAGE: usize = (1 << 30) + (1 << 20);
/// The SSLRequest code (1234 << 16 | 5679).
const SSL_REQUEST_LEN: usize = 8;

/// Type OIDs checked before binding an integer.
const INT2_OID: u32 = 21;
const INT4_OID: u32 = 23;

pub struct PostgresDriver {
    settings: Settings,
    tls: Option<Arc<ClientConfig>>,
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
        let tls = tls::client_config(settings.sslmode, settings.sslrootcert.as_deref())?;
        let ctx = Arc::new(ErrCtx {
            endpoint: settings.endpoint(),
            user: settings.user.clone(),
            dbname: settings.dbname.clone(),
            password: settings.password.clone(),
            sslmode: settings.sslmode,
        });
        Ok(PostgresDriver { settings, tls, ctx })
    }

    /// The user name sent at startup: the URL's, else the OS user's (as
    /// libpq does).
    fn user(&self) -> String {
        self.settings.user.clone().unwrap_or_else(|| {
            std::env::var("PGUSER")
                .or_else(|_| std::env::var("USER"))
                .or_else(|_| std::env::var("LOGNAME"))
                .unwrap_or_else(|_| "postgres".to_string())
        })
    }

    async fn open(&self, progress: &Progress) -> Result<PostgresConn, Failure> {
        let s = &self.settings;
        let tcp = connect_tcp(&s.host, s.port)
            .await
            .map_err(|e| Failure::Connect {
                kind: e.kind(),
                text: e.to_string(),
            })?;
        let stream = match &self.tls {
            None => {
                progress.set(Awaiting::First("PostgreSQL reply to the startup message"));
                Stream::plain(tcp)
            }
            Some(config) => {
                progress.set(Awaiting::First("PostgreSQL answer to the TLS request"));
                let stream = self.start_tls(tcp, config, progress).await?;
                progress.set(Awaiting::Reply("reply to the startup message"));
                stream
            }
        };
        let mut conn = PostgresConn {
            stream,
            wbuf: BytesMut::with_capacity(4096),
            rbuf: ReadBuffer::with_capacity(READ_BUF),
            next_stmt: 0,
            in_flight: false,
            broken: None,
            ctx: Arc::clone(&self.ctx),
        };
        conn.startup(
            &self.user(),
            s.dbname.as_deref(),
            s.password.as_deref(),
            progress,
        )
        .await?;
        Ok(conn)
    }

    /// SSLRequest, then a TLS handshake if the server agrees; a plain
    /// session if it does not and the mode allows it.
    async fn start_tls(
        &self,
        mut tcp: TcpStream,
        config: &Arc<ClientConfig>,
        progress: &Progress,
    ) -> Result<Stream, Failure> {
        let mut request = BytesMut::with_capacity(SSL_REQUEST_LEN);
        frontend::ssl_request(&mut request);
        tcp.write_all(&request).await.map_err(connect_io)?;
        // Exactly one byte: anything after it must come through TLS.
        let mut answer = [0u8; 1];
        if tcp.read(&mut answer).await.map_err(connect_io)? == 0 {
            return Err(connect_eof());
        }
        match answer[0] {
            b'S' => {}
            b'N' if self.settings.sslmode == SslMode::Prefer => return Ok(Stream::plain(tcp)),
            b'N' => {
                return Err(Failure::Tls {
                    kind: None,
                    text: "server does not support TLS".to_string(),
                })
            }
            _ => {
                // Not PostgreSQL: what else it sent (a greeting that came
                // unasked is all there) helps to tell what it is.
                let mut first = vec![answer[0]];
                let mut more = [0u8; 64];
                if let Ok(n) = tcp.try_read(&mut more) {
                    first.extend_from_slice(&more[..n]);
                }
                return Err(Failure::Other(peer::not_answering_as(
                    &self.ctx.endpoint,
                    "PostgreSQL",
                    "an answer to PostgreSQL's TLS request ('S' or 'N')",
                    &first,
                )));
            }
        }
        progress.set(Awaiting::Tls);
        Stream::start_tls(tcp, &self.settings.host, config)
            .await
            .map_err(|e| match e {
                TlsStartError::BadName(message) => Failure::Other(message),
                TlsStartError::Handshake(e) => Failure::Tls {
                    kind: Some(e.kind()),
                    text: e.to_string(),
                },
            })
    }
}

impl Driver for PostgresDriver {
    type Conn = PostgresConn;

    fn endpoint(&self) -> String {
        self.ctx.endpoint.clone()
    }

    async fn connect(&self) -> Result<PostgresConn, DriverError> {
        self.open(&Progress::new())
            .await
            .map_err(|f| describe(f, &self.ctx, Phase::Connect))
    }

    async fn connect_within(
        &self,
        timeout: std::time::Duration,
    ) -> Result<PostgresConn, DriverError> {
        let progress = Progress::new();
        let open = async {
            self.open(&progress)
                .await
                .map_err(|f| describe(f, &self.ctx, Phase::Connect))
        };
        peer::within(timeout, &self.ctx.endpoint, "PostgreSQL", &progress, open).await
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

fn connect_io(e: io::Error) -> Failure {
    Failure::Io {
        kind: e.kind(),
        text: e.to_string(),
    }
}

fn connect_eof() -> Failure {
    Failure::Io {
        kind: io::ErrorKind::UnexpectedEof,
        text: "the server closed the connection".to_string(),
    }
}

// ---------------------------------------------------------------------------
// Connection

/// One session's connection: the socket, the buffer requests are built
/// in, and the buffer responses are read into.
pub struct PostgresConn {
    stream: Stream,
    wbuf: BytesMut,
    rbuf: ReadBuffer,
    /// Number of the next statement name (`s0`, `s1`, ...).
    next_stmt: u32,
    /// A request was sent and its response not read to the end: set while
    /// a call runs, so a call abandoned half-way leaves it set.
    in_flight: bool,
    /// Why the connection is unusable, once it is.
    broken: Option<Failure>,
    ctx: Arc<ErrCtx>,
}

impl fmt::Debug for PostgresConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConn")
            .field("endpoint", &self.ctx.endpoint)
            .field("tls", &matches!(self.stream, Stream::Tls(_)))
            .field("closed", &self.broken.is_some())
            .finish()
    }
}

/// A statement prepared on one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresStatement {
    name: Box<str>,
    /// The parameter types the server inferred (OIDs).
    param_types: Box<[u32]>,
}

impl PostgresStatement {
    /// The parameter types the server inferred, as OIDs.
    pub fn param_types(&self) -> &[u32] {
        &self.param_types
    }
}

impl PostgresConn {
    /// Whether the session runs over TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.stream, Stream::Tls(_))
    }

    /// Startup message, authentication, then the server's parameters up
    /// to the first ReadyForQuery.
    async fn startup(
        &mut self,
        user: &str,
        dbname: Option<&str>,
        password: Option<&str>,
        progress: &Progress,
    ) -> Result<(), Failure> {
        let mut params = vec![
            ("user", user),
            ("client_encoding", "UTF8"),
            ("application_name", APPLICATION_NAME),
        ];
        if let Some(db) = dbname {
            params.push(("database", db));
        }
        self.wbuf.clear();
        frontend::startup_message(params, &mut self.wbuf)
            .map_err(|e| Failure::Other(e.to_string()))?;
        self.send_connect().await?;
        self.first_reply().await?;
        progress.set(Awaiting::Reply("reply to the authentication"));

        let mut scram: Option<ScramSha256> = None;
        loop {
            let (tag, body) = self.next_message().await?;
            let body = &self.rbuf.received()[body];
            match tag {
                b'R' => {
                    let (code, data) = auth_request(body)?;
                    match code {
                        0 => {}
                        3 => {
                            let pw = password.ok_or_else(no_password)?;
                            self.send_password(pw.as_bytes()).await?;
                        }
                        5 => {
                            let pw = password.ok_or_else(no_password)?;
                            let salt: [u8; 4] = data
                                .get(..4)
                                .and_then(|s| s.try_into().ok())
                                .ok_or_else(|| protocol("short md5 salt"))?;
                            let hash = md5_hash(user.as_bytes(), pw.as_bytes(), salt);
                            self.send_password(hash.as_bytes()).await?;
                        }
                        10 => {
                            let pw = password.ok_or_else(no_password)?;
                            let offered = cstrings(data);
                            if !offered.iter().any(|m| *m == "SCRAM-SHA-256") {
                                return Err(Failure::Auth(format!(
                                    "the server offers SASL mechanisms {} and loadcell supports only SCRAM-SHA-256",
                                    offered.join(", ")
                                )));
                            }
                            let s = ScramSha256::new(pw.as_bytes(), ChannelBinding::unsupported());
                            self.wbuf.clear();
                            frontend::sasl_initial_response("SCRAM-SHA-256", s.message(), &mut self.wbuf)
                                .map_err(|e| Failure::Auth(e.to_string()))?;
                            scram = Some(s);
                            self.send_connect().await?;
                        }
                        11 => {
                            let s = scram.as_mut().ok_or_else(|| protocol("unexpected SASL continue"))?;
                            s.update(data).map_err(|e| Failure::Auth(e.to_string()))?;
                            self.wbuf.clear();
                            frontend::sasl_response(s.message(), &mut self.wbuf)
                                .map_err(|e| Failure::Auth(e.to_string()))?;
                            self.send_connect().await?;
                        }
                        12 => {
                            let s = scram.as_mut().ok_or_else(|| protocol("unexpected SASL final"))?;
                            s.finish(data).map_err(|e| Failure::Auth(e.to_string()))?;
                        }
                        other => {
                            return Err(Failure::Auth(format!(
                                "the server asks for an authentication method loadcell does not support ({})",
                                auth_method_name(other)
                            )))
                        }
                    }
                }
                b'E' => return Err(db_failure(body)),
                b'Z' => return Ok(()),
                // ParameterStatus, BackendKeyData, NoticeResponse, NegotiateProtocolVersion.
                b'S' | b'K' | b'N' | b'v' => {}
                other => {
                    return Err(protocol(&format!(
                        "unexpected message {:?} at startup",
                        other as char
                    )))
                }
            }
        }
    }

    /// Reads until the first bytes of the reply to the startup message
    /// show that the server speaks PostgreSQL's protocol; an error naming
    /// what it sent instead as soon as they show it does not.
    async fn first_reply(&mut self) -> Result<(), Failure> {
        loop {
            let first = self.rbuf.pending();
            match startup_reply_start_ok(first) {
                Some(true) => return Ok(()),
                Some(false) => {
                    return Err(Failure::Other(peer::not_answering_as(
                        &self.ctx.endpoint,
                        "PostgreSQL",
                        "a PostgreSQL message",
                        first,
                    )))
                }
                None => match self.fill(5).await {
                    Ok(()) => {}
                    Err(None) => {
                        return Err(Failure::Io {
                            kind: io::ErrorKind::UnexpectedEof,
                            text: "the server closed the connection without replying to the \
                                   startup message: is a PostgreSQL server listening there?"
                                .to_string(),
                        })
                    }
                    Err(Some(e)) => return Err(connect_io(e)),
                },
            }
        }
    }

    /// Writes `wbuf` during the startup.
    async fn send_connect(&mut self) -> Result<(), Failure> {
        self.stream.write_all(&self.wbuf).await.map_err(connect_io)
    }

    /// Sends a PasswordMessage: the password itself, or its md5 hash.
    async fn send_password(&mut self, secret: &[u8]) -> Result<(), Failure> {
        self.wbuf.clear();
        frontend::password_message(secret, &mut self.wbuf)
            .map_err(|e| Failure::Auth(e.to_string()))?;
        self.send_connect().await
    }

    /// The next whole message during the startup: its type and the range
    /// of its body in `rbuf`, consumed.
    async fn next_message(&mut self) -> Result<(u8, std::ops::Range<usize>), Failure> {
        loop {
            match frame_at(self.rbuf.received(), self.rbuf.start())? {
                Frame::Whole { tag, body, next } => {
                    self.rbuf.consume_to(next);
                    return Ok((tag, body));
                }
                Frame::Need(n) => match self.fill(n).await {
                    Ok(()) => {}
                    Err(None) => return Err(connect_eof()),
                    Err(Some(e)) => return Err(connect_io(e)),
                },
            }
        }
    }

    /// One read into the buffer, with room for `need` bytes from the first
    /// unread one. `Err(None)` is the end of the stream.
    #[inline]
    async fn fill(&mut self, need: usize) -> Result<(), Option<io::Error>> {
        match self.stream.read(self.rbuf.spare(need)).await {
            Ok(0) => Err(None),
            Ok(n) => {
                self.rbuf.filled(n);
                Ok(())
            }
            Err(e) => Err(Some(e)),
        }
    }

    /// Reads the response to the request just sent, up to ReadyForQuery.
    /// `sent_sync`: the request was in the extended protocol (ends with
    /// Sync), which matters only to get out of a COPY FROM STDIN.
    async fn finish(&mut self, out: &mut Outcome, sent_sync: bool) -> Result<(), Failure> {
        loop {
            let mut pos = self.rbuf.start();
            let scanned = scan(self.rbuf.received(), &mut pos, out);
            self.rbuf.consume_to(pos);
            match scanned {
                Ok(Scan::Done) => {
                    self.in_flight = false;
                    return Ok(());
                }
                Ok(Scan::Need(n)) => {
                    if let Err(e) = self.fill(n).await {
                        let why = match (e, out.error.take()) {
                            // The server said why before closing (shutdown,
                            // terminated backend).
                            (None, Some(db)) => *db,
                            (None, None) => Failure::Closed,
                            (Some(e), _) => Failure::Io {
                                kind: e.kind(),
                                text: e.to_string(),
                            },
                        };
                        return Err(self.lose(why));
                    }
                }
                Ok(Scan::CopyIn) => {
                    self.wbuf.clear();
                    let _ = frontend::copy_fail("loadcell does not send COPY data", &mut self.wbuf);
                    if sent_sync {
                        frontend::sync(&mut self.wbuf);
                    }
                    self.send().await?;
                }
                Err(why) => return Err(self.lose(why)),
            }
        }
    }

    /// Marks the connection unusable for `why`; returns what to report.
    #[cold]
    fn lose(&mut self, why: Failure) -> Failure {
        let lost = Failure::Lost(Box::new(why));
        self.broken = Some(lost.clone());
        lost
    }

    /// Writes `wbuf`; the response is then awaited.
    #[inline]
    async fn send(&mut self) -> Result<(), Failure> {
        self.in_flight = true;
        self.stream.forget_readable();
        match self.stream.send(&self.wbuf).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.lose(Failure::Io {
                kind: e.kind(),
                text: e.to_string(),
            })),
        }
    }

    /// Whether the connection can take a request; if not, why.
    #[inline]
    fn check_usable(&mut self) -> Result<(), Failure> {
        if self.in_flight && self.broken.is_none() {
            self.lose(Failure::Other(
                "a previous request was abandoned before its response was read".to_string(),
            ));
        }
        match &self.broken {
            None => Ok(()),
            Some(why) => Err(why.clone()),
        }
    }

    #[cold]
    fn error(&self, failure: Failure) -> DriverError {
        describe(failure, &self.ctx, Phase::Session)
    }

    /// [`Self::error`], naming the statement when the error is about it.
    #[cold]
    fn error_in(&self, failure: Failure, sql: &str) -> DriverError {
        let mut err = self.error(failure);
        if err.class == ErrorClass::Fatal && err.code.is_some() {
            let _ = write!(err.message, " in `{}`", shorten(sql));
        }
        err
    }

    /// Runs `sql` with the simple query protocol.
    async fn simple_query(&mut self, sql: &str, out: &mut Outcome) -> Result<(), Failure> {
        self.check_usable()?;
        self.wbuf.clear();
        frontend::query(sql, &mut self.wbuf)
            .map_err(|_| Failure::Other("the statement contains a NUL character".to_string()))?;
        self.send().await?;
        self.finish(out, false).await?;
        match out.error.take() {
            None => Ok(()),
            Some(e) => Err(*e),
        }
    }

    /// First column of every row, in text form (`None` for NULL).
    async fn first_column(&mut self, sql: &str) -> Result<Vec<Option<String>>, DriverError> {
        let mut out = Outcome {
            first_column: Some(Vec::new()),
            ..Outcome::default()
        };
        if let Err(f) = self.simple_query(sql, &mut out).await {
            return Err(self.error_in(f, sql));
        }
        if out.no_columns {
            return Err(DriverError::fatal(format!(
                "query returned no columns: {sql}"
            )));
        }
        Ok(out.first_column.unwrap_or_default())
    }

    async fn prepare_statement(&mut self, sql: &str) -> Result<PostgresStatement, Failure> {
        self.check_usable()?;
        let name = format!("s{}", self.next_stmt);
        self.next_stmt += 1;
        self.wbuf.clear();
        frontend::parse(&name, sql, std::iter::empty(), &mut self.wbuf)
            .map_err(|_| Failure::Other("the statement contains a NUL character".to_string()))?;
        frontend::describe(b'S', &name, &mut self.wbuf)
            .map_err(|e| Failure::Other(e.to_string()))?;
        frontend::sync(&mut self.wbuf);
        self.send().await?;
        let mut out = Outcome {
            param_types: Some(Vec::new()),
            ..Outcome::default()
        };
        self.finish(&mut out, true).await?;
        if let Some(e) = out.error.take() {
            return Err(*e);
        }
        Ok(PostgresStatement {
            name: name.into(),
            param_types: out.param_types.unwrap_or_default().into(),
        })
    }
}

impl SqlConn for PostgresConn {
    type Stmt = PostgresStatement;

    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn prepare(&mut self, sql: &str) -> Result<PostgresStatement, DriverError> {
        match self.prepare_statement(sql).await {
            Ok(stmt) => Ok(stmt),
            Err(f) => Err(self.error_in(f, sql)),
        }
    }

    /// Bind + Execute + Sync in one write; the response read up to
    /// ReadyForQuery with rows skipped, not decoded. The count is the
    /// server's (`SELECT n`, `UPDATE n`, ...).
    async fn exec(
        &mut self,
        stmt: &PostgresStatement,
        params: &[SqlParam<'_>],
    ) -> Result<u64, DriverError> {
        if let Err(f) = self.check_usable() {
            return Err(self.error(f));
        }
        if let Err(f) = check_params(&stmt.param_types, params) {
            return Err(self.error(f));
        }
        self.wbuf.clear();
        encode_exec(&mut self.wbuf, &stmt.name, params);
        if let Err(f) = self.send().await {
            return Err(self.error(f));
        }
        let mut out = Outcome::default();
        if let Err(f) = self.finish(&mut out, true).await {
            return Err(self.error(f));
        }
        match out.error {
            None => Ok(out.rows),
            Some(e) => Err(self.error(*e)),
        }
    }

    async fn simple(&mut self, sql: &str) -> Result<(), DriverError> {
        let mut out = Outcome::default();
        match self.simple_query(sql, &mut out).await {
            Ok(()) => Ok(()),
            Err(f) => Err(self.error_in(f, sql)),
        }
    }

    async fn query_i64(&mut self, sql: &str) -> Result<Option<i64>, DriverError> {
        match self.first_column(sql).await?.into_iter().next().flatten() {
            None => Ok(None),
            Some(text) => integer_from_text(&text)
                .map(Some)
                .ok_or_else(|| DriverError::fatal(not_an_integer(sql, &format!("'{text}'")))),
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

// ---------------------------------------------------------------------------
// Messages

/// What a request's response said, gathered while its frames are walked.
#[derive(Debug, Default)]
struct Outcome {
    /// From the last CommandComplete tag.
    rows: u64,
    /// The first ErrorResponse.
    error: Option<Box<Failure>>,
    /// `Some`: collect the first column of every DataRow.
    first_column: Option<Vec<Option<String>>>,
    /// A DataRow had no column at all.
    no_columns: bool,
    /// `Some`: collect the ParameterDescription.
    param_types: Option<Vec<u32>>,
}

/// Where a walk over the received bytes stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// ReadyForQuery was consumed: the response is complete.
    Done,
    /// The next frame needs this many bytes from the position (more than
    /// are there).
    Need(usize),
    /// CopyInResponse: the server waits for COPY data.
    CopyIn,
}

/// One frame at `pos`, or how many bytes from `pos` it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Frame {
    Whole {
        tag: u8,
        body: std::ops::Range<usize>,
        next: usize,
    },
    Need(usize),
}

#[inline]
fn frame_at(buf: &[u8], pos: usize) -> Result<Frame, Failure> {
    let rest = &buf[pos..];
    if rest.len() < 5 {
        return Ok(Frame::Need(5));
    }
    let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
    if !(4..=MAX_MESSAGE).contains(&len) {
        return Err(bad_length(rest[0], len));
    }
    if rest.len() < len + 1 {
        return Ok(Frame::Need(len + 1));
    }
    Ok(Frame::Whole {
        tag: rest[0],
        body: pos + 5..pos + 1 + len,
        next: pos + 1 + len,
    })
}

/// Whether `b`, the first bytes of the reply to the startup message, can
/// begin one: an authentication request, an error, a notice or a protocol
/// version negotiation, of a length PostgreSQL sends there (the bounds
/// libpq checks). `None` while too few bytes have come to tell.
fn startup_reply_start_ok(b: &[u8]) -> Option<bool> {
    let longest = match b.first()? {
        b'R' | b'v' => 2_000,
        b'E' | b'N' => 30_000,
        _ => return Some(false),
    };
    let len = b.get(1..5)?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]);
    Some((4..=longest).contains(&len))
}

#[cold]
fn bad_length(tag: u8, len: usize) -> Failure {
    protocol(&format!(
        "message {:?} with a bad length ({len})",
        tag as char
    ))
}

/// Walks the whole frames in `buf` from `*pos`, consuming them, until
/// ReadyForQuery or an incomplete frame. Rows are skipped unless the first
/// column is collected; notices, parameter changes and notifications are
/// skipped wherever they come.
#[inline]
fn scan(buf: &[u8], pos: &mut usize, out: &mut Outcome) -> Result<Scan, Failure> {
    loop {
        let (tag, body) = match frame_at(buf, *pos)? {
            Frame::Whole { tag, body, next } => {
                *pos = next;
                (tag, body)
            }
            Frame::Need(n) => return Ok(Scan::Need(n)),
        };
        match tag {
            b'D' => {
                if out.first_column.is_some() {
                    collect_first_column(&buf[body], out)?;
                }
            }
            b'C' => out.rows = command_rows(&buf[body]),
            b'Z' => return Ok(Scan::Done),
            // BindComplete, ParseComplete, CloseComplete, NoData,
            // RowDescription, EmptyQueryResponse, PortalSuspended, Notice,
            // ParameterStatus, Notification, CopyOut/CopyBoth, CopyData,
            // CopyDone.
            b'2' | b'1' | b'3' | b'n' | b'T' | b'I' | b's' | b'N' | b'S' | b'A' | b'H' | b'W'
            | b'd' | b'c' => {}
            b'E' => {
                if out.error.is_none() {
                    out.error = Some(Box::new(db_failure(&buf[body])));
                }
            }
            b't' => {
                if let Some(types) = out.param_types.as_mut() {
                    *types = parameter_types(&buf[body])?;
                }
            }
            b'G' => return Ok(Scan::CopyIn),
            other => return Err(unexpected(other)),
        }
    }
}

#[cold]
fn unexpected(tag: u8) -> Failure {
    protocol(&format!("unexpected message {:?}", tag as char))
}

#[cold]
fn protocol(what: &str) -> Failure {
    Failure::Other(format!("protocol error: {what}"))
}

/// Rows read or affected, from a CommandComplete body (a tag such as
/// `SELECT 5`, `INSERT 0 1`, `UPDATE 2`; `BEGIN` has none).
#[inline]
fn command_rows(body: &[u8]) -> u64 {
    let tag = match body.split_last() {
        Some((0, tag)) => tag,
        _ => body,
    };
    let digits = match tag.iter().rposition(|&b| b == b' ') {
        Some(space) => &tag[space + 1..],
        None => return 0,
    };
    if digits.is_empty() || digits.len() > 19 {
        return 0;
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return 0;
        }
        n = n * 10 + u64::from(d - b'0');
    }
    n
}

/// The first column of a DataRow, in text form.
fn collect_first_column(body: &[u8], out: &mut Outcome) -> Result<(), Failure> {
    let short = || protocol("short DataRow");
    let count = i16::from_be_bytes(body.get(..2).ok_or_else(short)?.try_into().unwrap());
    if count < 1 {
        out.no_columns = true;
        return Ok(());
    }
    let len = i32::from_be_bytes(body.get(2..6).ok_or_else(short)?.try_into().unwrap());
    let value = if len < 0 {
        None
    } else {
        let bytes = body.get(6..6 + len as usize).ok_or_else(short)?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    };
    if let Some(column) = out.first_column.as_mut() {
        column.push(value);
    }
    Ok(())
}

/// The OIDs of a ParameterDescription.
fn parameter_types(body: &[u8]) -> Result<Vec<u32>, Failure> {
    let short = || protocol("short ParameterDescription");
    let count = u16::from_be_bytes(body.get(..2).ok_or_else(short)?.try_into().unwrap()) as usize;
    let oids = body.get(2..2 + 4 * count).ok_or_else(short)?;
    Ok(oids
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The NUL-terminated strings of a body, up to an empty one.
fn cstrings(body: &[u8]) -> Vec<String> {
    body.split(|&b| b == 0)
        .take_while(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// An Authentication request: its code and the data after it.
fn auth_request(body: &[u8]) -> Result<(i32, &[u8]), Failure> {
    let code = body
        .get(..4)
        .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .ok_or_else(|| protocol("short Authentication message"))?;
    Ok((code, &body[4..]))
}

fn auth_method_name(code: i32) -> String {
    match code {
        2 => "Kerberos V5".to_string(),
        6 => "SCM credentials".to_string(),
        7 | 8 => "GSSAPI".to_string(),
        9 => "SSPI".to_string(),
        other => format!("code {other}"),
    }
}

fn no_password() -> Failure {
    Failure::Auth("the server asked for a password and --target has none".to_string())
}

/// The fields of an ErrorResponse (or NoticeResponse) body: the SQLSTATE,
/// message, hint and cursor position.
#[cold]
fn db_failure(body: &[u8]) -> Failure {
    let mut code = String::new();
    let mut message = String::new();
    let mut hint = None;
    let mut position = None;
    let mut rest = body;
    while let Some((&kind, tail)) = rest.split_first() {
        if kind == 0 {
            break;
        }
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        let value = String::from_utf8_lossy(&tail[..end]);
        match kind {
            b'C' => code = value.into_owned(),
            b'M' => message = value.into_owned(),
            b'H' => hint = Some(value.into_owned()),
            b'P' => position = value.parse().ok(),
            _ => {}
        }
        rest = tail.get(end + 1..).unwrap_or(&[]);
    }
    if code.is_empty() {
        // Should not happen: every server error has a SQLSTATE.
        code = "XX000".to_string();
    }
    Failure::Db {
        code,
        message,
        hint,
        position,
    }
}

// ---------------------------------------------------------------------------
// Parameters

/// Checks what a typed client would before sending: the parameter count,
/// and integers bound to `int2`/`int4` in range.
#[inline]
fn check_params(types: &[u32], params: &[SqlParam<'_>]) -> Result<(), Failure> {
    if types.len() != params.len() {
        return Err(wrong_count(types.len(), params.len()));
    }
    for (i, (ty, p)) in types.iter().zip(params).enumerate() {
        if let SqlParam::Int(v) = *p {
            let fits = match *ty {
                INT4_OID => i32::try_from(v).is_ok(),
                INT2_OID => i16::try_from(v).is_ok(),
                _ => true,
            };
            if !fits {
                return Err(out_of_range(i, v, *ty));
            }
        }
    }
    Ok(())
}

#[cold]
fn wrong_count(expected: usize, got: usize) -> Failure {
    Failure::Other(wrong_param_count(expected, got))
}

#[cold]
fn out_of_range(index: usize, v: i64, ty: u32) -> Failure {
    let name = if ty == INT2_OID { "int2" } else { "int4" };
    Failure::Other(format!(
        "cannot bind parameter ${}: value {v} is out of range for type {name}",
        index + 1
    ))
}

/// Bind (all parameters and results in text form) + Execute + Sync for
/// the unnamed portal of statement `name`, appended to `buf`.
#[inline]
fn encode_exec(buf: &mut BytesMut, name: &str, params: &[SqlParam<'_>]) {
    // Only fails for a NUL in the name or more than 32767 values, which
    // the prepared statement already rules out.
    let bound = frontend::bind(
        "",
        name,
        std::iter::empty(),
        params,
        |p, buf| {
            match *p {
                SqlParam::Int(v) => buf.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
                SqlParam::Text(s) => buf.extend_from_slice(s.as_bytes()),
            }
            Ok(IsNull::No)
        },
        std::iter::empty(),
        buf,
    );
    debug_assert!(bound.is_ok());
    let _ = frontend::execute("", 0, buf);
    frontend::sync(buf);
}

// ---------------------------------------------------------------------------
// Text helpers

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

/// What went wrong, before it is described for the user (so that it can
/// be unit-tested without a server).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// An error the server reported.
    Db {
        code: String,
        message: String,
        hint: Option<String>,
        position: Option<u32>,
    },
    /// The server closed the connection.
    Closed,
    /// The connection is unusable for this reason.
    Lost(Box<Failure>),
    /// Could not open the socket.
    Connect {
        kind: io::ErrorKind,
        text: String,
    },
    /// The socket failed.
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

/// The class of a SQLSTATE.
fn sqlstate_class(code: &str) -> ErrorClass {
    match code {
        // deadlock, serialization failure, duplicate key (sysbench ignores
        // it), lock not available (NOWAIT, lock_timeout).
        "40P01" | "40001" | "23505" | "55P03" => ErrorClass::Retryable,
        // admin shutdown, crash shutdown, cannot connect now; too many
        // clients, which a reconnect with backoff may get past (as MySQL's
        // 1040).
        "57P01" | "57P02" | "57P03" | "53300" => ErrorClass::Connection,
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
            settings("postgres://u:a%2@h/db").unwrap_err(),
            "bad %-escape in the password: a '%' itself is written %25"
        );
    }

    #[test]
    fn the_first_reply_is_told_from_its_first_bytes() {
        // An authentication request, an error (too many clients).
        assert_eq!(
            startup_reply_start_ok(b"R\x00\x00\x00\x08\x00\x00\x00\x00"),
            Some(true)
        );
        assert_eq!(
            startup_reply_start_ok(b"E\x00\x00\x00\x60SFATAL"),
            Some(true)
        );
        // Too few bytes to tell, or already enough to refuse.
        assert_eq!(startup_reply_start_ok(b""), None);
        assert_eq!(startup_reply_start_ok(b"R\x00\x00"), None);
        assert_eq!(startup_reply_start_ok(b"["), Some(false));
        assert_eq!(startup_reply_start_ok(b"-ERR"), Some(false));
        assert_eq!(startup_reply_start_ok(b"HTTP/1.1"), Some(false));
        // memcached's "ERROR": an 'E' with an impossible length.
        assert_eq!(startup_reply_start_ok(b"ERROR\r\n"), Some(false));
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
        assert_eq!(d.settings.dbname.as_deref(), Some("x"));
        assert_eq!(d.settings.sslmode, SslMode::Prefer);

        let t = Target::parse("postgres://lc@h/x?sslmode=verify-ca").unwrap();
        let d = PostgresDriver::from_target(&t).unwrap();
        assert!(d.tls.is_some());
        assert_eq!(d.user(), "lc");
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
        for code in [
            "57P01", "57P02", "57P03", "53300", "08006", "08001", "08P01",
        ] {
            assert_eq!(sqlstate_class(code), ErrorClass::Connection, "{code}");
        }
        for code in ["28P01", "28000", "3D000", "42P01", "42601", "22003"] {
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

    /// One backend message: type, length, body.
    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn data_row(columns: &[Option<&str>]) -> Vec<u8> {
        let mut body = (columns.len() as i16).to_be_bytes().to_vec();
        for c in columns {
            match c {
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(v) => {
                    body.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    body.extend_from_slice(v.as_bytes());
                }
            }
        }
        msg(b'D', &body)
    }

    fn fields(pairs: &[(u8, &str)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (k, v) in pairs {
            body.push(*k);
            body.extend_from_slice(v.as_bytes());
            body.push(0);
        }
        body.push(0);
        body
    }

    /// The response to a point select with a notice and a parameter
    /// change in the middle.
    fn select_response() -> Vec<u8> {
        let mut r = msg(b'2', b"");
        r.extend(data_row(&[Some("abc"), Some("1")]));
        r.extend(msg(
            b'N',
            &fields(&[(b'S', "WARNING"), (b'C', "01000"), (b'M', "hm")]),
        ));
        r.extend(data_row(&[None, Some("2")]));
        r.extend(msg(b'S', b"TimeZone\0UTC\0"));
        r.extend(msg(b'C', b"SELECT 2\0"));
        r.extend(msg(b'Z', b"I"));
        r
    }

    #[test]
    fn command_complete_tags() {
        assert_eq!(command_rows(b"SELECT 5\0"), 5);
        assert_eq!(command_rows(b"UPDATE 1\0"), 1);
        assert_eq!(command_rows(b"INSERT 0 1\0"), 1);
        assert_eq!(command_rows(b"INSERT 0 250\0"), 250);
        assert_eq!(command_rows(b"DELETE 0\0"), 0);
        assert_eq!(command_rows(b"BEGIN\0"), 0);
        assert_eq!(command_rows(b"COMMIT\0"), 0);
        assert_eq!(command_rows(b"CREATE TABLE\0"), 0);
        assert_eq!(command_rows(b"SELECT 18446744073709551615\0"), 0);
        assert_eq!(
            command_rows(b"SELECT 1844674407370955161\0"),
            1844674407370955161
        );
        assert_eq!(command_rows(b"COPY 3"), 3);
        assert_eq!(command_rows(b""), 0);
    }

    #[test]
    fn frames_are_walked_to_ready_for_query() {
        let buf = select_response();
        let mut pos = 0;
        let mut out = Outcome::default();
        assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done));
        assert_eq!(pos, buf.len());
        assert_eq!(out.rows, 2);
        assert!(out.error.is_none());
        assert!(out.first_column.is_none());

        // Collecting the first column (query_strings).
        let mut pos = 0;
        let mut out = Outcome {
            first_column: Some(Vec::new()),
            ..Outcome::default()
        };
        assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done));
        assert_eq!(out.first_column, Some(vec![Some("abc".to_string()), None]));

        // Bytes after ReadyForQuery are left for the next response.
        let mut two = buf.clone();
        two.extend(msg(b'N', &fields(&[(b'M', "later")])));
        let mut pos = 0;
        let mut out = Outcome::default();
        assert_eq!(scan(&two, &mut pos, &mut out), Ok(Scan::Done));
        assert_eq!(pos, buf.len());
    }

    #[test]
    fn frames_split_across_reads() {
        let buf = select_response();
        // Every split point: the first part, then the whole, as two reads
        // into one buffer would give.
        for cut in 0..buf.len() {
            let mut pos = 0;
            let mut out = Outcome::default();
            let first = scan(&buf[..cut], &mut pos, &mut out).unwrap();
            let Scan::Need(need) = first else {
                panic!("cut {cut}: {first:?}");
            };
            assert!(
                pos <= cut && pos + need > cut,
                "cut {cut}: pos {pos} need {need}"
            );
            assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done), "cut {cut}");
            assert_eq!(out.rows, 2, "cut {cut}");
            assert_eq!(pos, buf.len());
        }
    }

    #[test]
    fn errors_are_kept_until_ready_for_query() {
        let mut buf = msg(
            b'E',
            &fields(&[
                (b'S', "ERROR"),
                (b'V', "ERROR"),
                (b'C', "42P01"),
                (b'M', "relation \"nope\" does not exist"),
                (b'P', "15"),
                (b'H', "create it first"),
                (b'F', "parse_relation.c"),
            ]),
        );
        buf.extend(msg(b'Z', b"I"));
        let mut pos = 0;
        let mut out = Outcome::default();
        let mid = buf.len() - 1;
        assert_eq!(scan(&buf[..mid], &mut pos, &mut out), Ok(Scan::Need(6)));
        assert!(out.error.is_some(), "the error is taken before the end");
        assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done));
        assert_eq!(
            out.error.map(|e| *e),
            Some(Failure::Db {
                code: "42P01".to_string(),
                message: "relation \"nope\" does not exist".to_string(),
                hint: Some("create it first".to_string()),
                position: Some(15),
            })
        );
        let e = describe(
            db_failure(&fields(&[
                (b'C', "40001"),
                (b'M', "could not serialize access"),
            ])),
            &ctx(),
            Phase::Session,
        );
        assert_eq!(e.class, ErrorClass::Retryable);
        assert_eq!(e.code.as_deref(), Some("40001"));
        assert_eq!(e.message, "could not serialize access");
        // Truncated fields do not panic.
        assert!(matches!(db_failure(b"Cabc"), Failure::Db { .. }));
    }

    #[test]
    fn bad_frames_are_protocol_errors() {
        let mut pos = 0;
        let mut out = Outcome::default();
        let e = scan(&msg(b'?', b""), &mut pos, &mut out).unwrap_err();
        assert_eq!(
            e,
            Failure::Other("protocol error: unexpected message '?'".to_string())
        );
        let mut pos = 0;
        let e = scan(b"D\0\0\0\x02xx", &mut pos, &mut out).unwrap_err();
        assert!(
            matches!(e, Failure::Other(ref t) if t.contains("bad length")),
            "{e:?}"
        );
        let e = describe(Failure::Lost(Box::new(e)), &ctx(), Phase::Session);
        assert_eq!(e.class, ErrorClass::Connection);
        // A large frame asks for all of itself.
        let big = msg(b'D', &vec![0; 100_000]);
        let mut pos = 0;
        assert_eq!(
            scan(&big[..10], &mut pos, &mut out),
            Ok(Scan::Need(100_005))
        );
    }

    #[test]
    fn parameter_descriptions() {
        let mut body = 3u16.to_be_bytes().to_vec();
        for oid in [23u32, 1042, 20] {
            body.extend_from_slice(&oid.to_be_bytes());
        }
        let mut buf = msg(b'1', b"");
        buf.extend(msg(b't', &body));
        buf.extend(msg(b'n', b""));
        buf.extend(msg(b'Z', b"I"));
        let mut pos = 0;
        let mut out = Outcome {
            param_types: Some(Vec::new()),
            ..Outcome::default()
        };
        assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done));
        assert_eq!(out.param_types, Some(vec![23, 1042, 20]));
        assert!(parameter_types(&[0, 2, 0, 0]).is_err());
    }

    #[test]
    fn exec_encoding() {
        let mut buf = BytesMut::new();
        encode_exec(
            &mut buf,
            "s3",
            &[
                SqlParam::Int(-42),
                SqlParam::Text("héllo"),
                SqlParam::Int(i64::MIN),
            ],
        );
        let mut want = Vec::new();
        // Bind: portal "", statement "s3", no format codes (all text),
        // three values, no result format codes (all text).
        let mut bind = b"\0s3\0".to_vec();
        bind.extend_from_slice(&0i16.to_be_bytes());
        bind.extend_from_slice(&3i16.to_be_bytes());
        for v in ["-42", "héllo", "-9223372036854775808"] {
            bind.extend_from_slice(&(v.len() as i32).to_be_bytes());
            bind.extend_from_slice(v.as_bytes());
        }
        bind.extend_from_slice(&0i16.to_be_bytes());
        want.extend(msg(b'B', &bind));
        want.extend(msg(b'E', b"\0\0\0\0\0"));
        want.extend(msg(b'S', b""));
        assert_eq!(&buf[..], &want[..]);

        // The buffer is reused: no new allocation once it is large enough.
        let cap = buf.capacity();
        for _ in 0..100 {
            buf.clear();
            encode_exec(&mut buf, "s3", &[SqlParam::Int(i64::MAX), SqlParam::Int(0)]);
        }
        assert_eq!(buf.capacity(), cap);
        let text = String::from_utf8_lossy(&buf);
        assert!(text.contains("9223372036854775807"), "{text}");
    }

    #[test]
    fn params_are_checked_against_the_inferred_types() {
        assert_eq!(
            check_params(&[23, 1042], &[SqlParam::Int(7), SqlParam::Text("x")]),
            Ok(())
        );
        assert_eq!(check_params(&[20], &[SqlParam::Int(1 << 40)]), Ok(()));
        assert_eq!(check_params(&[1700], &[SqlParam::Int(1 << 40)]), Ok(()));
        // Text into an integer: the server parses it and says if it is bad.
        assert_eq!(check_params(&[23], &[SqlParam::Text("seven")]), Ok(()));
        assert_eq!(
            check_params(&[23], &[SqlParam::Int(1 << 40)]),
            Err(Failure::Other(
                "cannot bind parameter $1: value 1099511627776 is out of range for type int4"
                    .to_string()
            ))
        );
        assert_eq!(
            check_params(&[23, 21], &[SqlParam::Int(1), SqlParam::Int(40000)]),
            Err(Failure::Other(
                "cannot bind parameter $2: value 40000 is out of range for type int2".to_string()
            ))
        );
        let e = describe(
            check_params(&[23], &[]).unwrap_err(),
            &ctx(),
            Phase::Session,
        );
        assert_eq!(e.class, ErrorClass::Fatal);
        assert_eq!(e.code, None);
        assert_eq!(e.message, "the statement takes 1 parameter, 0 given");
    }

    #[test]
    fn authentication_messages() {
        let mut body = 10i32.to_be_bytes().to_vec();
        body.extend_from_slice(b"SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0");
        let (code, data) = auth_request(&body).unwrap();
        assert_eq!(code, 10);
        assert_eq!(cstrings(data), vec!["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"]);
        assert!(auth_request(b"\0\0").is_err());
        let e = describe(no_password(), &ctx(), Phase::Connect);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert_eq!(
            e.message,
            "authentication at 127.0.0.1:5432 failed: the server asked for a password and --target has none"
        );
    }
}
