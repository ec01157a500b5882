//! A session's socket, plain or TLS, for the drivers that speak their
//! protocol directly (Redis, MySQL, PostgreSQL).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;

pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    /// Writes all of `buf`; through TLS, flushed, so it leaves now.
    #[inline]
    pub(crate) async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(buf).await,
            Stream::Tls(s) => {
                s.write_all(buf).await?;
                s.flush().await
            }
        }
    }

    #[inline]
    pub(crate) async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf).await,
            Stream::Tls(s) => s.read(buf).await,
        }
    }

    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
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
        if let Stream::Plain(s) = self {
            let _ = s.try_io(Interest::READABLE, || {
                Err::<(), _>(io::ErrorKind::WouldBlock.into())
            });
        }
    }

    pub(crate) async fn shutdown(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.shutdown().await,
            Stream::Tls(s) => s.shutdown().await,
        }
    }
}
