//! One session's connection: TCP and TLS, the startup and authentication
//! handshake (md5, SCRAM), and the extended query protocol on the hot path.

use std::fmt;
use std::fmt::Write as _;
use std::io;
use std::sync::Arc;

use bytes::BytesMut;
use loadcell_core::sql::{integer_from_text, not_an_integer, Dialect, SqlConn, SqlParam};
use loadcell_core::{DriverError, ErrorClass};
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use postgres_protocol::message::frontend;

use crate::catalog;
use crate::transport::peer::{self, Awaiting, Progress};
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::Stream;

use super::*;

/// One session's connection: the socket, the buffer requests are built
/// in, and the buffer responses are read into.
pub struct PostgresConn {
    pub(super) stream: Stream,
    pub(super) wbuf: BytesMut,
    pub(super) rbuf: ReadBuffer,
    /// Number of the next statement name (`s0`, `s1`, ...).
    pub(super) next_stmt: u32,
    /// A request was sent and its response not read to the end: set while
    /// a call runs, so a call abandoned half-way leaves it set.
    pub(super) in_flight: bool,
    /// Why the connection is unusable, once it is.
    pub(super) broken: Option<Failure>,
    pub(super) ctx: Arc<ErrCtx>,
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
    pub(super) name: Box<str>,
    /// The parameter types the server inferred (OIDs).
    pub(super) param_types: Box<[u32]>,
}

impl PostgresStatement {
    /// The parameter types the server inferred, as OIDs.
    pub fn param_types(&self) -> &[u32] {
        &self.param_types
    }
}

impl PostgresConn {
    /// Startup message, authentication, then the server's parameters up
    /// to the first ReadyForQuery. `replication`: a logical replication
    /// connection (`replication=database`), which takes replication
    /// commands as simple queries.
    pub(super) async fn startup(
        &mut self,
        user: &str,
        dbname: Option<&str>,
        password: Option<&str>,
        replication: bool,
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
        if replication {
            params.push(("replication", "database"));
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
    pub(super) async fn next_message(&mut self) -> Result<(u8, std::ops::Range<usize>), Failure> {
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
    pub(super) async fn fill(&mut self, need: usize) -> Result<(), Option<io::Error>> {
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
    pub(super) async fn finish(
        &mut self,
        out: &mut Outcome,
        sent_sync: bool,
    ) -> Result<(), Failure> {
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
    pub(super) fn lose(&mut self, why: Failure) -> Failure {
        let lost = Failure::Lost(Box::new(why));
        self.broken = Some(lost.clone());
        lost
    }

    /// Writes `wbuf`; the response is then awaited.
    #[inline]
    pub(super) async fn send(&mut self) -> Result<(), Failure> {
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
    pub(super) fn check_usable(&mut self) -> Result<(), Failure> {
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
    pub(super) fn error(&self, failure: Failure) -> DriverError {
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
    pub(super) async fn first_column(
        &mut self,
        sql: &str,
    ) -> Result<Vec<Option<String>>, DriverError> {
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

    async fn table_exists(&mut self, table: &str) -> Result<bool, DriverError> {
        let sql = format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '{table}'"
        );
        catalog::counts_any(self, &sql).await
    }

    async fn column_exists(&mut self, table: &str, column: &str) -> Result<bool, DriverError> {
        let sql = format!(
            "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '{table}' AND column_name = '{column}'"
        );
        catalog::counts_any(self, &sql).await
    }

    async fn index_exists(&mut self, table: &str, index: &str) -> Result<bool, DriverError> {
        let sql = format!(
            "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND tablename = '{table}' AND indexname = '{index}'"
        );
        catalog::counts_any(self, &sql).await
    }

    /// Two statements in one simple query: one implicit transaction, so
    /// the table never exists without its comment.
    async fn create_commented_table(
        &mut self,
        table: &str,
        definition: &str,
        comment: &str,
    ) -> Result<(), DriverError> {
        self.simple(&format!(
            "CREATE TABLE {table}{definition}; COMMENT ON TABLE {table} IS '{comment}'"
        ))
        .await
    }

    /// Ordinary and partitioned tables (`relkind` r, p): not views.
    async fn table_comment(&mut self, table: &str) -> Result<Option<String>, DriverError> {
        let sql = format!(
            "SELECT COALESCE(obj_description(c.oid, 'pg_class'), '') FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relname = '{table}' AND c.relkind IN ('r', 'p')"
        );
        Ok(self.query_strings(&sql).await?.into_iter().next())
    }

    /// The table is locked for the check, in the transaction that drops it.
    async fn drop_table_if_commented(
        &mut self,
        table: &str,
        comment: &str,
    ) -> Result<bool, DriverError> {
        let lock = format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE");
        catalog::drop_in_transaction(self, "BEGIN", Some(&lock), table, comment).await
    }
}
