//! One session on the wire: the handshake (TLS, authentication plugins,
//! MariaDB's metadata caching), then commands and prepared executions.

use std::cell::Cell;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use loadcell_core::DriverError;
use mysql_common::constants::{CapabilityFlags, MariadbCapabilities};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{
    AuthPlugin, AuthSwitchRequest, HandshakePacket, HandshakeResponse, SslRequest,
};
use mysql_common::proto::MySerialize;
use rustls::ClientConfig;

use crate::transport::peer::{Awaiting, Progress};
use crate::transport::stream::{connect_tcp, Stream, TlsStartError};
use crate::transport::tls::SslMode;

use super::*;

/// Whether a command is under way, so that a call dropped mid-response
/// (its future cancelled) is noticed instead of misreading what follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Ready,
    Busy,
    Broken,
}

/// One connection: the stream, its buffers, and what was negotiated.
pub(super) struct Session {
    pub(super) stream: Stream,
    pub(super) pb: PacketBuf,
    pub(super) wbuf: Vec<u8>,
    pub(super) framing: Framing,
    /// The server's connection id.
    pub(super) id: u32,
    pub(super) state: State,
    pub(super) ctx: Arc<Ctx>,
}

impl Session {
    /// TCP (no Nagle), the handshake, TLS if asked for and offered, and
    /// authentication.
    pub(super) async fn connect(
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
    pub(super) fn begin(&mut self) -> Result<(), DriverError> {
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
    pub(super) async fn send(&mut self) -> Result<(), DriverError> {
        if let Err(e) = self.stream.send(&self.wbuf).await {
            self.state = State::Broken;
            return Err(classify_io(&e, &self.ctx, Phase::Use));
        }
        Ok(())
    }

    /// Reads a whole response: rows read or affected. With `rows`, the
    /// text-protocol rows are collected there.
    #[inline]
    pub(super) async fn walk_response(
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
    pub(super) async fn query_text(
        &mut self,
        sql: &str,
    ) -> Result<Vec<Vec<Option<Vec<u8>>>>, DriverError> {
        self.begin()?;
        encode_command(&mut self.wbuf, COM_QUERY, sql.as_bytes());
        self.send().await?;
        let mut rows = Vec::new();
        self.walk_response(true, Some(&mut rows)).await?;
        Ok(rows)
    }

    /// COM_STMT_PREPARE: the statement id and parameter count; the
    /// parameter and column definitions are skipped.
    pub(super) async fn prepare(&mut self, sql: &str) -> Result<MysqlStmt, DriverError> {
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
}
