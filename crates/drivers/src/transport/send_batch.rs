//! Requests sent together. On a worker thread, a session's request is
//! queued instead of written at once, and just before the worker waits for
//! I/O every queued request goes out in one io_uring submission: one system
//! call for the whole pass instead of one `sendto` each. Each send wakes a
//! server thread, and the scheduler switches to it at the system call's
//! return; sent together, they cost the worker one such switch, not one
//! per request.
//!
//! Sends are non-blocking (`MSG_DONTWAIT`), so they complete within the
//! submission. A short or refused send (a full socket buffer) or an error
//! leaves the rest to the session, which writes it through tokio before it
//! reads. Where io_uring is unavailable (old kernels, sandboxes), requests
//! are written at once as before.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use io_uring::{opcode, types, IoUring};

/// Requests per submission; a full batch is sent at once.
const BATCH: usize = 64;

/// A connection's outgoing request, shared by the connection and, while it
/// is queued, the thread's batch.
pub(crate) struct Outgoing {
    fd: RawFd,
    bytes: RefCell<Vec<u8>>,
    /// Bytes of `bytes` already sent.
    sent: Cell<usize>,
    state: Cell<State>,
    error: Cell<Option<io::Error>>,
    /// The session to wake if the batch could not send everything.
    waker: RefCell<Option<Waker>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing to send.
    Idle,
    /// In the thread's batch.
    Queued,
    /// `bytes[sent..]` is for the session to write.
    Unsent,
    /// The send failed; `error` says why.
    Failed,
    /// The connection is gone: a queued request must not be sent (its
    /// descriptor may already belong to another socket).
    Closed,
}

struct Batch {
    ring: IoUring,
    queued: Vec<Rc<Outgoing>>,
}

thread_local! {
    /// `None` until first used; `Some(None)` where io_uring is unavailable.
    static BATCH_HERE: RefCell<Option<Option<Batch>>> = const { RefCell::new(None) };
}

impl Outgoing {
    /// A batch slot for socket `fd`, if requests can be batched on this
    /// thread.
    pub(crate) fn for_socket(fd: RawFd) -> Option<Rc<Outgoing>> {
        if !loadcell_core::park::enabled_here() || !ring_available() {
            return None;
        }
        Some(Rc::new(Outgoing {
            fd,
            bytes: RefCell::new(Vec::new()),
            sent: Cell::new(0),
            state: Cell::new(State::Idle),
            error: Cell::new(None),
            waker: RefCell::new(None),
        }))
    }

    /// Queues `buf` to be sent before the thread next waits.
    pub(crate) fn queue(self: &Rc<Self>, buf: &[u8]) {
        self.bytes.borrow_mut().extend_from_slice(buf);
        // Queued or left over: sent after the bytes before it. Failed or
        // closed: never sent.
        if self.state.get() != State::Idle {
            return;
        }
        let full = BATCH_HERE.with(|b| {
            let mut b = b.borrow_mut();
            let batch = b.as_mut().and_then(Option::as_mut)?;
            batch.queued.push(Rc::clone(self));
            Some(batch.queued.len() >= BATCH)
        });
        match full {
            Some(full) => {
                self.state.set(State::Queued);
                if full {
                    flush();
                }
            }
            // The thread's ring is gone (see `flush`): the session writes
            // the request itself before it reads.
            None => self.state.set(State::Unsent),
        }
    }

    /// Whether a request is waiting in the batch (then a direct write must
    /// flush first, to keep the order).
    pub(crate) fn is_queued(&self) -> bool {
        self.state.get() == State::Queued
    }

    /// Before reading: writes what the batch left unsent, and reports a
    /// failed send. While the request is still queued, remembers the task
    /// to wake should the batch fail to send it.
    pub(crate) fn poll_sent(
        &self,
        cx: &mut Context<'_>,
        mut write: impl FnMut(&mut Context<'_>, &[u8]) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<()>> {
        loop {
            match self.state.get() {
                State::Idle | State::Closed => return Poll::Ready(Ok(())),
                State::Queued => {
                    let mut waker = self.waker.borrow_mut();
                    match &*waker {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        _ => *waker = Some(cx.waker().clone()),
                    }
                    return Poll::Ready(Ok(()));
                }
                State::Failed => {
                    self.reset();
                    let e = self
                        .error
                        .take()
                        .unwrap_or_else(|| io::ErrorKind::Other.into());
                    return Poll::Ready(Err(e));
                }
                State::Unsent => {
                    let n = {
                        let bytes = self.bytes.borrow();
                        match write(cx, &bytes[self.sent.get()..]) {
                            Poll::Ready(Ok(0)) => {
                                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()))
                            }
                            Poll::Ready(Ok(n)) => n,
                            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                            Poll::Pending => return Poll::Pending,
                        }
                    };
                    self.advance(n);
                }
            }
        }
    }

    /// The connection is closing.
    pub(crate) fn close(&self) {
        self.state.set(State::Closed);
        self.waker.borrow_mut().take();
    }

    fn advance(&self, n: usize) {
        let sent = self.sent.get() + n;
        if sent >= self.bytes.borrow().len() {
            self.reset();
        } else {
            self.sent.set(sent);
        }
    }

    fn reset(&self) {
        self.bytes.borrow_mut().clear();
        self.sent.set(0);
        self.state.set(State::Idle);
    }

    /// The batch's send of this request returned `result` (bytes sent or
    /// a negated errno).
    fn complete(&self, result: i32) {
        if self.state.get() != State::Queued {
            return;
        }
        match result {
            n if n >= 0 => {
                self.advance(n as usize);
                if self.state.get() == State::Idle {
                    return;
                }
                self.state.set(State::Unsent);
            }
            e if -e == libc::EAGAIN => self.state.set(State::Unsent),
            e => {
                self.error.set(Some(io::Error::from_raw_os_error(-e)));
                self.state.set(State::Failed);
            }
        }
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

/// Whether this thread has (or can set up) its ring.
fn ring_available() -> bool {
    BATCH_HERE.with(|b| {
        b.borrow_mut()
            .get_or_insert_with(|| {
                let ring = IoUring::new(BATCH as u32).ok()?;
                loadcell_core::park::register(flush);
                Some(Batch {
                    ring,
                    queued: Vec::with_capacity(BATCH),
                })
            })
            .is_some()
    })
}

/// Sends every request queued on this thread. Runs before the thread
/// waits (the park hook) and when a batch is full.
pub(crate) fn flush() {
    BATCH_HERE.with(|b| {
        let mut b = b.borrow_mut();
        let Some(Some(batch)) = b.as_mut() else {
            return;
        };
        if batch.queued.is_empty() {
            return;
        }
        let Batch { ring, queued } = batch;
        let mut submitted = 0;
        {
            let mut sq = ring.submission();
            for (i, out) in queued.iter().enumerate() {
                if out.state.get() != State::Queued {
                    continue;
                }
                let bytes = out.bytes.borrow();
                let rest = &bytes[out.sent.get()..];
                let send = opcode::Send::new(types::Fd(out.fd), rest.as_ptr(), rest.len() as u32)
                    .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                    .build()
                    .user_data(i as u64);
                // SAFETY: the buffer stays alive and unchanged until the
                // completion is reaped below, before this function returns
                // (non-blocking sends complete within the submission, and
                // `submit_and_wait` waits for all of them); `queued` holds
                // at most BATCH entries, the ring's size.
                unsafe { sq.push(&send).expect("the ring holds a whole batch") };
                submitted += 1;
            }
        }
        let mut reaped = 0;
        let mut first = true;
        let mut refused = false;
        while reaped < submitted {
            match ring.submit_and_wait(submitted - reaped) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // A refused first call submitted nothing: each session
                    // writes its own request. A later one only waited for
                    // sends already made: their outcome is unknown, so
                    // those connections fail rather than send twice.
                    refused = first;
                    let errno = if first {
                        libc::EAGAIN
                    } else {
                        e.raw_os_error().unwrap_or(libc::EIO)
                    };
                    for out in queued.iter() {
                        out.complete(-errno);
                    }
                    break;
                }
            }
            first = false;
            for done in ring.completion() {
                queued[done.user_data() as usize].complete(done.result());
                reaped += 1;
            }
        }
        queued.clear();
        if refused {
            // The refused entries are still in the submission ring and would
            // go out with the next batch, after their sessions wrote them
            // themselves: the ring goes with them. Without a new one, this
            // thread's requests are written one by one.
            *b = Some(IoUring::new(BATCH as u32).ok().map(|ring| Batch {
                ring,
                queued: Vec::with_capacity(BATCH),
            }));
        }
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;
    use std::thread;

    use super::flush;
    use crate::transport::stream::Stream;

    /// A runtime like the engine's workers: batching on, the batch sent
    /// before it parks.
    fn worker_runtime() -> tokio::runtime::Runtime {
        loadcell_core::park::enable_on_this_thread();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(loadcell_core::park::before_park)
            .build()
            .unwrap()
    }

    async fn connect(listener: &TcpListener) -> (Stream, std::net::TcpStream) {
        let tcp = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (peer, _) = listener.accept().unwrap();
        let stream = Stream::plain(tcp);
        assert!(
            matches!(stream, Stream::Plain(_, Some(_))),
            "requests are batched on a worker thread"
        );
        (stream, peer)
    }

    /// A peer that reads `expect` bytes, then answers `reply`.
    fn answer(
        mut peer: std::net::TcpStream,
        expect: usize,
        reply: &'static [u8],
    ) -> thread::JoinHandle<Vec<u8>> {
        thread::spawn(move || {
            // A request that never arrives fails the test, not hangs it.
            peer.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            let mut got = vec![0; expect];
            peer.read_exact(&mut got).unwrap();
            peer.write_all(reply).unwrap();
            got
        })
    }

    #[test]
    fn requests_of_many_connections_arrive_whole_and_in_order() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        worker_runtime().block_on(async {
            let mut sessions = Vec::new();
            for i in 0..3 {
                let (mut stream, peer) = connect(&listener).await;
                let first = format!("request {i}, part 1;");
                // Queued twice before the batch goes, then written directly:
                // the direct write sends the batch first.
                stream.send(first.as_bytes()).await.unwrap();
                stream.send(b" part 2;").await.unwrap();
                stream.write_all(b" part 3.").await.unwrap();
                let expect = format!("{first} part 2; part 3.");
                sessions.push((stream, answer(peer, expect.len(), b"done"), expect));
            }
            for (mut stream, peer, expect) in sessions {
                let mut reply = [0u8; 4];
                let n = stream.read(&mut reply).await.unwrap();
                assert_eq!(&reply[..n], b"done");
                assert_eq!(String::from_utf8(peer.join().unwrap()).unwrap(), expect);
            }
        });
    }

    #[test]
    fn a_request_the_socket_cannot_take_at_once_is_finished_before_the_read() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // More than loopback's socket buffers hold: the batch's
        // non-blocking send is cut short and the reader writes the rest.
        let request: Vec<u8> = (0..32 << 20).map(|i: u32| (i % 251) as u8).collect();
        worker_runtime().block_on(async {
            let (mut stream, peer) = connect(&listener).await;
            stream.send(&request).await.unwrap();
            let peer = answer(peer, request.len(), b"ok");
            let mut reply = [0u8; 2];
            let n = stream.read(&mut reply).await.unwrap();
            assert_eq!(&reply[..n], b"ok");
            assert!(
                peer.join().unwrap() == request,
                "the request arrived intact"
            );
        });
    }

    #[test]
    fn a_request_queued_on_a_closed_connection_is_never_sent() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        worker_runtime().block_on(async {
            let (mut closed, mut closed_peer) = connect(&listener).await;
            closed.send(b"never").await.unwrap();
            drop(closed);
            // The next socket usually takes the closed one's descriptor.
            let (mut next, next_peer) = connect(&listener).await;
            flush();
            next.write_all(b"hello").await.unwrap();
            let mut rest = Vec::new();
            closed_peer.read_to_end(&mut rest).unwrap();
            assert_eq!(rest, b"", "nothing was sent on the closed connection");
            assert_eq!(answer(next_peer, 5, b"").join().unwrap(), b"hello");
        });
    }

    #[test]
    fn a_failed_send_is_the_next_read_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        worker_runtime().block_on(async {
            let (mut stream, peer) = connect(&listener).await;
            // The peer resets the connection (linger 0).
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: setsockopt reads a linger struct of the size given.
            let set = unsafe {
                libc::setsockopt(
                    peer.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&linger as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                )
            };
            assert_eq!(set, 0);
            drop(peer);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            stream.send(b"request").await.unwrap();
            let mut reply = [0u8; 8];
            let err = stream.read(&mut reply).await.unwrap_err();
            assert!(
                matches!(
                    err.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                ),
                "{err:?}"
            );
        });
    }
}
