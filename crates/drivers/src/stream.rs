//! A session's socket, plain or TLS, for the drivers that speak their
//! protocol directly (Redis, MySQL, PostgreSQL).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;

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
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
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
