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

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::BytesMut;
use loadcell_core::sql::SqlConn;
use loadcell_core::{Driver, DriverError, ServerInfo, ServerSettings, Target};
use postgres_protocol::message::frontend;
use rustls::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::transport::peer::{self, Awaiting, Progress};
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::{connect_tcp, Stream, TlsStartError};
use crate::transport::target_url::{Query, UrlParts};
use crate::transport::tls::{self, SslMode};
use crate::transport::url_text;
use crate::{DriverInfo, Family};
use loadcell_core::kv::KvCapabilities;

mod codec;
mod conn;
mod error;
pub mod stream;
#[cfg(test)]
mod tests;

use codec::*;
pub use conn::{PostgresConn, PostgresStatement};
use error::*;

pub const INFO: DriverInfo = DriverInfo {
    name: "postgres",
    schemes: &["postgres", "postgresql"],
    family: Family::SQL,
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
    fn parse(target: &Target) -> Result<Settings, String> {
        let mut query = Query::parse(target.url(), ACCEPTED_PARAMS)?;
        let (sslmode, sslrootcert) = tls::take_params(&mut query)?;
        let parts = UrlParts::parse(target, DEFAULT_PORT)?;
        let (host, port) = parts.one_host(DEFAULT_HOST)?;
        Ok(Settings {
            host,
            port,
            dbname: parts.segment("database name")?,
            user: parts.user,
            password: parts.password,
            sslmode: sslmode.unwrap_or(SslMode::Disable),
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
        let settings = Settings::parse(target)?;
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

    /// A session; with `replication`, a logical replication connection.
    async fn open(&self, progress: &Progress, replication: bool) -> Result<PostgresConn, Failure> {
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
            replication,
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
        self.open(&Progress::new(), false)
            .await
            .map_err(|f| describe(f, &self.ctx, Phase::Connect))
    }

    async fn connect_within(
        &self,
        timeout: std::time::Duration,
    ) -> Result<PostgresConn, DriverError> {
        let progress = Progress::new();
        let open = async {
            self.open(&progress, false)
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
        Ok(ServerInfo::new("PostgreSQL", version))
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

    /// `pg_settings` with sizes in bytes, and the figures the advice reads:
    /// buffer hits and reads, the database's size, client backends, and
    /// checkpoints timed and requested (`pg_stat_checkpointer` from
    /// PostgreSQL 17, `pg_stat_bgwriter` before), under the names
    /// `pg_stat_bgwriter` gave them.
    async fn server_settings(
        &self,
        conn: &mut PostgresConn,
    ) -> Result<ServerSettings, DriverError> {
        const SETTINGS: &str = "SELECT name || '=' || CASE unit \
             WHEN 'B' THEN setting WHEN 'kB' THEN (setting::numeric * 1024)::text \
             WHEN '8kB' THEN (setting::numeric * 8192)::text \
             WHEN 'MB' THEN (setting::numeric * 1048576)::text \
             ELSE setting END FROM pg_settings";
        const STATUS: &str = "SELECT unnest(ARRAY[\
             'blks_hit=' || (SELECT sum(blks_hit) FROM pg_stat_database), \
             'blks_read=' || (SELECT sum(blks_read) FROM pg_stat_database), \
             'database_size_bytes=' || pg_database_size(current_database()), \
             'client_backends=' || (SELECT count(*) FROM pg_stat_activity \
                 WHERE backend_type = 'client backend')])";
        const CHECKPOINTS_17: &str = "SELECT unnest(ARRAY['checkpoints_timed=' || num_timed, \
             'checkpoints_req=' || num_requested]) FROM pg_stat_checkpointer";
        const CHECKPOINTS: &str = "SELECT unnest(ARRAY['checkpoints_timed=' || checkpoints_timed, \
             'checkpoints_req=' || checkpoints_req]) FROM pg_stat_bgwriter";
        let settings = pairs(conn.query_strings(SETTINGS).await?);
        let version: u32 = settings
            .get("server_version_num")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut status = pairs(conn.query_strings(STATUS).await?);
        let checkpoints = if version >= 170000 {
            CHECKPOINTS_17
        } else {
            CHECKPOINTS
        };
        status.extend(pairs(conn.query_strings(checkpoints).await?));
        Ok(ServerSettings { settings, status })
    }
}

/// `name=value` rows as a map.
fn pairs(rows: Vec<String>) -> BTreeMap<String, String> {
    rows.into_iter()
        .filter_map(|row| {
            let (name, value) = row.split_once('=')?;
            Some((name.to_string(), value.to_string()))
        })
        .collect()
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
