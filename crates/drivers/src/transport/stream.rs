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

use loadcell_core::receipt;

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
        if receipt::reads_deferred_here() {
            stamp_receipts(&tcp);
        }
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
            Stream::Plain(s, None) if !receipt::reads_deferred_here() => s.read(buf).await,
            Stream::Plain(..) => {
                poll_fn(|cx| {
                    let mut rb = ReadBuf::new(buf);
                    ready!(self.poll_read(cx, &mut rb))?;
                    Poll::Ready(Ok(rb.filled().len()))
                })
                .await
            }
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
                if receipt::reads_deferred_here() {
                    return poll_read_stamped(tcp, cx, buf);
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

/// Has the kernel stamp what `tcp` receives with the time it arrived (see
/// [`loadcell_core::receipt`]). Without it (never on Linux), reads are
/// timed when they are made, later than the answer came.
fn stamp_receipts(tcp: &TcpStream) {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option value of its size.
    unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// Reads what `tcp` has received, with the kernel's receive time of its
/// last byte handed to [`receipt::received`].
fn poll_read_stamped(
    tcp: &TcpStream,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    loop {
        ready!(tcp.poll_read_ready(cx))?;
        let into = buf.initialize_unfilled();
        match tcp.try_io(Interest::READABLE, || recv_stamped(tcp.as_raw_fd(), into)) {
            Ok((n, stamp)) => {
                if let Some(at) = stamp {
                    receipt::received(at);
                }
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

/// `recvmsg` into `into`, with the `SCM_TIMESTAMPNS` the kernel attaches
/// (the receive time of the last segment read, `CLOCK_REALTIME`).
fn recv_stamped(
    fd: std::os::fd::RawFd,
    into: &mut [u8],
) -> io::Result<(usize, Option<std::time::Duration>)> {
    // Room for one control message holding a timespec, aligned for cmsghdr.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: into.as_mut_ptr().cast(),
        iov_len: into.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `into` and `control`, both live and writable
    // for their lengths.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays within `msg_controllen`, which the
    // kernel set to what it wrote into `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                stamp = Some(std::time::Duration::new(
                    ts.tv_sec as u64,
                    ts.tv_nsec as u32,
                ));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n as usize, stamp))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    use loadcell_core::receipt;

    use super::Stream;

    /// On a thread that reads at its ticks, a read is timed by when the
    /// kernel received the answer: an answer read 30 ms after it came
    /// counts from when it came.
    #[test]
    fn a_deferred_read_is_timed_by_the_kernels_receipt() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&runtime, async {
            receipt::defer_reads_on_this_thread();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let tcp = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let (mut peer, _) = listener.accept().unwrap();
            let mut stream = Stream::plain(tcp);
            // The kernel turns stamping on for the first socket that asks
            // a moment later, from a work queue.
            tokio::time::sleep(Duration::from_millis(100)).await;
            tokio::task::spawn_local(async move {
                let before = Instant::now();
                peer.write_all(b"answer").unwrap();
                std::thread::sleep(Duration::from_millis(30));
                let mut buf = [0u8; 16];
                let n = stream.read(&mut buf).await.unwrap();
                let read_at = Instant::now();
                let answered = receipt::answered_or_now(before);
                assert_eq!(&buf[..n], b"answer");
                assert!(answered >= before, "answered before it was sent");
                assert!(
                    read_at - answered >= Duration::from_millis(25),
                    "timed when read, {:?} after the answer was sent",
                    answered - before
                );
            })
            .await
            .unwrap();
        });
    }
}
