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
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use loadcell_core::kv::KvCapabilities;
use loadcell_core::sql::{
    integer_from_text, not_an_integer, wrong_param_count, Dialect, SqlConn, SqlParam,
};
use loadcell_core::{Driver, DriverError, ServerInfo, ServerSettings, Target};
use rustls::ClientConfig;

use crate::transport::peer::{self, Progress};
use crate::transport::target_url::{Query, UrlParts};
use crate::transport::tls::{self, SslMode};
use crate::transport::url_text;
use crate::{catalog, DriverInfo, Family};

mod codec;
mod error;
mod session;
#[cfg(test)]
mod tests;

use codec::*;
use error::*;
use session::*;

pub const INFO: DriverInfo = DriverInfo {
    name: "mysql",
    schemes: &["mysql", "mariadb"],
    family: Family::SQL,
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

fn parse_target(target: &Target) -> Result<Settings, String> {
    let mut query = Query::parse(target.url(), PARAMS)?;
    let (sslmode, sslrootcert) = tls::take_params(&mut query)?;
    let parts = UrlParts::parse(target, DEFAULT_PORT)?;
    let (host, port) = parts.one_host(DEFAULT_HOST)?;
    Ok(Settings {
        host,
        port,
        db: parts.segment("database name")?,
        user: parts.user.unwrap_or_else(|| DEFAULT_USER.to_string()),
        password: parts.password,
        sslmode: sslmode.unwrap_or(SslMode::Disable),
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
        let s = parse_target(target)?;
        let tls = tls::client_config(s.sslmode, s.sslrootcert.as_deref())?;
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
        Ok(ServerInfo::new(product_of(&version), version))
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
            // What `advise` weighs of the run itself.
            "Created_tmp_tables",
            "Created_tmp_disk_tables",
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

    async fn server_settings(&self, conn: &mut MysqlConn) -> Result<ServerSettings, DriverError> {
        Ok(ServerSettings {
            settings: conn.name_values("SHOW GLOBAL VARIABLES").await?,
            status: conn.name_values("SHOW GLOBAL STATUS").await?,
        })
    }
}

impl MysqlConn {
    /// The name and value columns of a `SHOW` statement's rows.
    async fn name_values(&mut self, sql: &str) -> Result<BTreeMap<String, String>, DriverError> {
        let rows = self.session.query_text(sql).await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let mut cols = row.into_iter();
                let name = cols.next()??;
                let value = cols.next().flatten().unwrap_or_default();
                Some((
                    String::from_utf8_lossy(&name).into_owned(),
                    String::from_utf8_lossy(&value).into_owned(),
                ))
            })
            .collect())
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
    /// Whether the server leaves column definitions out of a prepared
    /// statement's repeated executions (MariaDB's metadata caching, 10.6
    /// and later), as it does for Connector/C.
    pub fn caches_metadata(&self) -> bool {
        self.session.framing.cache_metadata
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

    /// By SHOW TABLES, which sharding proxies answer for their logical
    /// tables (ShardingSphere-Proxy refuses information_schema); LIKE's `_`
    /// matches any character, so the names are compared exactly.
    async fn table_exists(&mut self, table: &str) -> Result<bool, DriverError> {
        let tables = self
            .query_strings(&format!("SHOW TABLES LIKE '{table}'"))
            .await?;
        Ok(tables.iter().any(|t| t == table))
    }

    async fn column_exists(&mut self, table: &str, column: &str) -> Result<bool, DriverError> {
        let sql = format!(
            "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = '{table}' AND column_name = '{column}'"
        );
        catalog::counts_any(self, &sql).await
    }

    async fn index_exists(&mut self, table: &str, index: &str) -> Result<bool, DriverError> {
        let sql = format!(
            "SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = '{table}' AND index_name = '{index}'"
        );
        catalog::counts_any(self, &sql).await
    }

    /// The comment is a table option: it goes after `definition`'s own.
    async fn create_commented_table(
        &mut self,
        table: &str,
        definition: &str,
        comment: &str,
    ) -> Result<(), DriverError> {
        self.simple(&format!(
            "CREATE TABLE {table}{definition} COMMENT = '{comment}'"
        ))
        .await
    }

    async fn table_comment(&mut self, table: &str) -> Result<Option<String>, DriverError> {
        let sql = format!(
            "SELECT table_comment FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '{table}'"
        );
        Ok(self.query_strings(&sql).await?.into_iter().next())
    }

    /// MySQL has no transactional DDL (and LOCK TABLES needs a privilege
    /// sysbench's users may lack): the check immediately precedes the DROP.
    async fn drop_table_if_commented(
        &mut self,
        table: &str,
        comment: &str,
    ) -> Result<bool, DriverError> {
        if !catalog::comment_contains(self, table, comment).await? {
            return Ok(false);
        }
        self.simple(&format!("DROP TABLE {table}")).await?;
        Ok(true)
    }
}
