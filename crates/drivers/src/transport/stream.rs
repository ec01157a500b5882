//! A session's socket, plain or TLS, for the drivers that speak their
//! protocol directly (Redis, MySQL, PostgreSQL, memcached).

use std::future::poll_fn;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;

use crate::transport::send_batch::{self, Outgoing};

/// A TCP connection with Nagle's algorithm off, so that a request leaves
/// as soon as it is written.
pub(crate) async fn connect_tcp(host: &str, port: u16) -> io::Result<TcpStream> {
    let tcp = TcpStream::connect((host, port)).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// Why TLS could not be started; each driver classifies it its own way.
pub(crate) enum TlsStartError {
    /// `host` cannot be checked against a certificate; the message says so.
    BadName(String),
    /// The handshake failed.
    Handshake(io::Error),
}

pub(crate) enum Stream {
    /// With a batch slot on the engine's worker threads (see
    /// [`send_batch`]).
    Plain(TcpStream, Option<BatchSlot>),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// A connection's place in its thread's send batch; closed with the
/// connection, so that a request still queued is never sent.
pub(crate) struct BatchSlot(Rc<Outgoing>);

impl Drop for BatchSlot {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl BatchSlot {
    /// Writes to `tcp` what the batch left of this connection's request
    /// (see [`Outgoing::poll_sent`]).
    fn poll_sent(&self, tcp: &mut TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0
            .poll_sent(cx, |cx, buf| Pin::new(&mut *tcp).poll_write(cx, buf))
    }
}

impl Stream {
    pub(crate) fn plain(tcp: TcpStream) -> Stream {
        let slot = Outgoing::for_socket(tcp.as_raw_fd()).map(BatchSlot);
        Stream::Plain(tcp, slot)
    }

    /// Sends a request whose response is read next: on a worker thread,
    /// queued and sent with the other sessions' requests just before the
    /// thread waits; elsewhere, written now.
    #[inline]
    pub(crate) async fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Stream::Plain(_, Some(slot)) => {
                slot.0.queue(buf);
                Ok(())
            }
            _ => self.write_all(buf).await,
        }
    }

    /// The socket of a plain stream (not TLS), for a driver that
    /// interleaves its own writes and reads (a pipeline larger than the
    /// socket's buffers). Only between requests: never while one is queued
    /// in the batch.
    pub(crate) fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Plain(tcp, _) => Some(tcp),
            Stream::Tls(_) => None,
        }
    }

    /// Waits until a request queued or left over by the batch is sent.
    async fn finish_send(&mut self) -> io::Result<()> {
        if let Stream::Plain(tcp, Some(slot)) = self {
            if slot.0.is_queued() {
                send_batch::flush();
            }
            poll_fn(|cx| slot.poll_sent(tcp, cx)).await?;
        }
        Ok(())
    }

    /// Starts TLS on a connected socket, checking the server's certificate
    /// for `host` as `config` asks.
    pub(crate) async fn start_tls(
        tcp: TcpStream,
        host: &str,
        config: &Arc<ClientConfig>,
    ) -> Result<Stream, TlsStartError> {
        let name = ServerName::try_from(host.to_string()).map_err(|_| {
            TlsStartError::BadName(format!("'{host}' is not a valid TLS server name"))
        })?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
            .connect(name, tcp)
            .await
            .map_err(TlsStartError::Handshake)?;
        Ok(Stream::Tls(Box::new(tls)))
    }

    /// Writes all of `buf`; through TLS, flushed, so it leaves now.
    #[inline]
    pub(crate) async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.finish_send().await?;
        match self {
            Stream::Plain(s, _) => s.write_all(buf).await,
            Stream::Tls(s) => {
                s.write_all(buf).await?;
                s.flush().await
            }
        }
    }

    #[inline]
    pub(crate) async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(_, Some(_)) => {
                poll_fn(|cx| {
                    let mut rb = ReadBuf::new(buf);
                    ready!(self.poll_read(cx, &mut rb))?;
                    Poll::Ready(Ok(rb.filled().len()))
                })
                .await
            }
            Stream::Plain(s, None) => s.read(buf).await,
            Stream::Tls(s) => s.read(buf).await,
        }
    }

    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self {
            Stream::Plain(tcp, slot) => {
                if let Some(slot) = slot {
                    ready!(slot.poll_sent(tcp, cx))?;
                }
                Pin::new(tcp).poll_read(cx, buf)
            }
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }

    /// Forgets, without a syscall, that the socket was last seen
    /// readable, so that the read after the request waits for epoll's
    /// report of the response instead of first trying a read that can only
    /// find nothing yet (EAGAIN). Call only just before sending a request:
    /// its response is a new readiness event, so nothing already received
    /// can be missed (it is read together with the response).
    #[inline]
    pub(crate) fn forget_readable(&self) {
        if let Stream::Plain(s, _) = self {
            let _ = s.try_io(Interest::READABLE, || {
                Err::<(), _>(io::ErrorKind::WouldBlock.into())
            });
        }
    }
}
