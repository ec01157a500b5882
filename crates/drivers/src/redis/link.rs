//! One connection: the socket, TLS, AUTH and SELECT, and the read buffer
//! replies are parsed from in place.

use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use loadcell_core::{DriverError, ErrorClass};
use tokio::io::ReadBuf;

use super::*;
use crate::transport::peer::{self, Awaiting, Progress};
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::{connect_tcp, Stream, TlsStartError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Connect,
    Use,
}

/// One connection: the stream and the buffer replies are parsed from.
pub(super) struct Link {
    pub(super) stream: Stream,
    pub(super) rbuf: ReadBuffer,
    /// After an incomplete parse: bytes from `start` the next reply needs
    /// at least.
    pub(super) need: usize,
    /// `host:port`, for messages.
    pub(super) ep: Arc<str>,
    /// The server has sent the first byte of a RESP reply: until then,
    /// [`Link::call`] checks that the first byte can begin one.
    pub(super) answered: bool,
}

impl Link {
    /// TCP (no Nagle), TLS if configured, AUTH and SELECT if configured.
    pub(super) async fn open(
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

    pub(super) fn io_error(&self, e: &io::Error) -> DriverError {
        io_error(e, &self.ep, Phase::Use)
    }

    /// What a connect waits for once a command is sent: `first` while
    /// nothing from the server has shown it speaks RESP, else `later`.
    pub(super) fn awaiting(&self, first: &'static str, later: &'static str) -> Awaiting {
        if self.answered {
            Awaiting::Reply(later)
        } else {
            Awaiting::First(first)
        }
    }

    /// The next complete reply in the buffer, consumed; `None` if more bytes
    /// must be read first.
    #[inline]
    pub(super) fn next_reply(&mut self) -> Result<Option<Reply>, DriverError> {
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
    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
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

    pub(super) async fn fill(&mut self) -> Result<(), DriverError> {
        match poll_fn(|cx| self.poll_fill(cx)).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.io_error(&e)),
        }
    }

    /// One command, off the hot path (setup, INFO): its whole reply, owned.
    pub(super) async fn call(
        &mut self,
        args: &[&[u8]],
        phase: Phase,
    ) -> Result<Value, DriverError> {
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
