//! One HTTP/1.1 connection: requests encoded into a reused write buffer
//! and sent through the stream layer (on a worker, in its thread's batch
//! of sends), responses parsed in place from a reused read buffer by
//! `httparse`, their bodies framed by `Content-Length`, chunked transfer
//! coding (decoded in place) or the end of the connection.
//!
//! A server that ends keep-alive (`Connection: close`, nginx's
//! `keepalive_requests`) is reconnected by the next request, inside its
//! time, as a browser or wrk would; so is an idle connection the server
//! closed before the request reached it, when nothing of a response had
//! come back yet (the request is sent once more, on the new connection).
//! Anything else that breaks the connection is a connection error, and
//! the engine reconnects.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use loadcell_core::http::{HttpConn, Request, Response};
use loadcell_core::DriverError;
use rustls::ClientConfig;

use crate::transport::io_error::{connect_error, lost_error};
use crate::transport::peer;
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::{connect_tcp, Stream, TlsStartError};
use crate::transport::url_text::endpoint;
use tokio::net::{TcpSocket, TcpStream};

/// Initial size of a connection's read buffer, kept small so that many
/// held connections cost little; it grows to the largest response.
const READ_BUF: usize = 4 * 1024;
/// A response head (status line and headers) longer than this is refused.
const MAX_HEAD: usize = 64 * 1024;
/// Headers a response may have.
const MAX_HEADERS: usize = 64;

/// One host of the target, and what every request to it carries.
#[derive(Debug)]
pub(crate) struct Origin {
    pub host: String,
    pub port: u16,
    pub endpoint: String,
    /// `host[:port]`, the port only when it is not the scheme's default.
    pub authority: String,
    /// The `Authorization` value of basic authentication, if any.
    pub authorization: Option<String>,
    /// `Host: …\r\n`, then the basic authentication line if any.
    fixed_headers: Vec<u8>,
}

impl Origin {
    pub(crate) fn new(
        host: &str,
        port: u16,
        tls: bool,
        credentials: Option<&(String, String)>,
    ) -> Origin {
        let default_port = if tls { 443 } else { 80 };
        let authority = match (host.contains(':'), port == default_port) {
            (true, true) => format!("[{host}]"),
            (true, false) => format!("[{host}]:{port}"),
            (false, true) => host.to_string(),
            (false, false) => format!("{host}:{port}"),
        };
        let authorization = credentials.map(|(user, password)| {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Basic {token}")
        });
        let mut fixed_headers = format!("Host: {authority}\r\n").into_bytes();
        if let Some(value) = &authorization {
            fixed_headers.extend_from_slice(format!("Authorization: {value}\r\n").as_bytes());
        }
        Origin {
            host: host.to_string(),
            port,
            endpoint: endpoint(host, port),
            authority,
            authorization,
            fixed_headers,
        }
    }
}

/// What every connection to a target shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub origins: Vec<Origin>,
    pub tls: Option<Arc<ClientConfig>>,
    /// The target's path, prefixed to every request's.
    pub base: Vec<u8>,
    /// For a loopback target: which source address connections bind,
    /// 0 for the kernel's choice, `n` for 127.0.0.(n+1) (see [`connect`]).
    pub source: AtomicU8,
    /// Whether connections speak HTTP/2 (over TLS, agreed by ALPN).
    pub http2: bool,
}

impl Shared {
    /// Appends the path a request for `path` asks for: the target's path
    /// before it, `/` when both are empty.
    #[inline]
    pub(crate) fn write_path(&self, path: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&self.base);
        if self.base.is_empty() && path.is_empty() {
            out.push(b'/');
        }
        out.extend_from_slice(path);
    }

    /// One plain-HTTP/1.1 origin, no base path (a status page).
    pub(crate) fn plain(origin: Origin) -> Shared {
        Shared {
            origins: vec![origin],
            tls: None,
            base: Vec::new(),
            source: AtomicU8::new(0),
            http2: false,
        }
    }
}

/// How the last response left the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No response yet on this socket.
    Fresh,
    /// At least one response, and the server keeps the connection open.
    Reused,
    /// The server said it closes the connection after its response.
    Closing,
    /// A request was interrupted before its response was read: the next
    /// bytes on the socket cannot be matched to any request.
    Broken,
}

/// How a response's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// The parts of a response head the connection acts on.
#[derive(Debug, Clone, Copy)]
struct Head {
    status: u16,
    len: usize,
    framing: Framing,
    close: bool,
}

/// One session's HTTP/1.1 connection to one of the target's hosts.
pub struct Http1Connection {
    stream: Stream,
    shared: Arc<Shared>,
    origin: usize,
    wbuf: Vec<u8>,
    rbuf: ReadBuffer,
    state: State,
    /// Whether the next response's `Server` header is wanted.
    want_server: bool,
    server: Option<String>,
    /// The newest socket's TLS handshake time, until taken.
    tls_handshake: Option<Duration>,
}

impl std::fmt::Debug for Http1Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http1Connection")
            .field("endpoint", &self.origin().endpoint)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl HttpConn for Http1Connection {
    async fn request(&mut self, request: &Request<'_>) -> Result<Response<'_>, DriverError> {
        self.encode(request);
        if matches!(self.state, State::Closing | State::Broken) {
            self.reopen().await?;
        }
        let head_only = request.method == "HEAD";
        let (status, body) = match self.exchange(head_only).await {
            Ok(done) => done,
            // The server closed an idle keep-alive connection just before
            // the request reached it: send it once more on a new one.
            Err(Failed::BeforeResponse(_)) => {
                self.reopen().await?;
                self.exchange(head_only).await.map_err(Failed::into_error)?
            }
            Err(e) => return Err(e.into_error()),
        };
        Ok(Response {
            status,
            body: &self.rbuf.received()[body],
        })
    }

    fn take_tls_handshake(&mut self) -> Option<Duration> {
        self.tls_handshake.take()
    }
}

/// Why an exchange failed: on a connection that had answered before,
/// with no byte of this response back (the server may have closed it as
/// idle before the request arrived), or otherwise.
enum Failed {
    BeforeResponse(DriverError),
    During(DriverError),
}

impl Failed {
    fn into_error(self) -> DriverError {
        match self {
            Failed::BeforeResponse(e) | Failed::During(e) => e,
        }
    }
}

impl Http1Connection {
    /// A new connection to origin `index` of `shared` (TCP, then TLS for
    /// an `https://` target).
    pub(crate) async fn open(shared: Arc<Shared>, index: usize) -> Result<Self, DriverError> {
        let (stream, tls_handshake) = connect(&shared, index).await?;
        Ok(Http1Connection {
            stream,
            tls_handshake,
            shared,
            origin: index,
            wbuf: Vec::new(),
            rbuf: ReadBuffer::with_capacity(READ_BUF),
            state: State::Fresh,
            want_server: false,
            server: None,
        })
    }

    fn origin(&self) -> &Origin {
        &self.shared.origins[self.origin]
    }

    /// Keeps the `Server` header of the next response, for the server's
    /// facts (no request on the hot path pays for it).
    pub(crate) fn want_server_header(&mut self) {
        self.want_server = true;
    }

    /// The `Server` header kept by [`Self::want_server_header`].
    pub(crate) fn server_header(&mut self) -> Option<String> {
        self.want_server = false;
        self.server.take()
    }

    async fn reopen(&mut self) -> Result<(), DriverError> {
        (self.stream, self.tls_handshake) = connect(&self.shared, self.origin).await?;
        self.rbuf.consume(self.rbuf.pending().len());
        self.state = State::Fresh;
        Ok(())
    }

    /// Writes the request line, the fixed and the workload's headers and
    /// the body into the write buffer.
    fn encode(&mut self, request: &Request<'_>) {
        let Origin { fixed_headers, .. } = &self.shared.origins[self.origin];
        let w = &mut self.wbuf;
        w.clear();
        w.extend_from_slice(request.method.as_bytes());
        w.push(b' ');
        self.shared.write_path(request.path, w);
        w.extend_from_slice(b" HTTP/1.1\r\n");
        w.extend_from_slice(fixed_headers);
        w.extend_from_slice(request.headers);
        if !request.body.is_empty() || matches!(request.method, "POST" | "PUT" | "PATCH") {
            w.extend_from_slice(b"Content-Length: ");
            w.extend_from_slice(itoa::Buffer::new().format(request.body.len()).as_bytes());
            w.extend_from_slice(b"\r\n");
        }
        w.extend_from_slice(b"\r\n");
        w.extend_from_slice(request.body);
    }

    /// Sends the encoded request and reads its response: the status and
    /// where the body lies in [`ReadBuffer::received`].
    async fn exchange(&mut self, head_only: bool) -> Result<(u16, std::ops::Range<usize>), Failed> {
        if self.rbuf.is_empty() {
            self.stream.forget_readable();
        }
        let reused = self.state == State::Reused;
        self.state = State::Broken;
        if let Err(e) = self.stream.send(&self.wbuf).await {
            let e = self.lost(&e);
            return Err(if reused {
                Failed::BeforeResponse(e)
            } else {
                Failed::During(e)
            });
        }
        let head = loop {
            match self.parse_head() {
                Ok(Some(head)) if head.status < 200 => self.rbuf.consume(head.len),
                Ok(Some(head)) => break head,
                Ok(None) => {
                    let before = self.rbuf.is_empty();
                    if let Err(e) = self.fill(0).await {
                        return Err(if before && reused {
                            Failed::BeforeResponse(e)
                        } else {
                            Failed::During(e)
                        });
                    }
                }
                Err(e) => return Err(Failed::During(e)),
            }
        };
        let no_body = head_only || head.status == 204 || head.status == 304;
        let framing = if no_body {
            Framing::Length(0)
        } else {
            head.framing
        };
        let body_end = match framing {
            Framing::Length(n) => {
                while self.rbuf.pending().len() < head.len + n {
                    self.fill(head.len + n).await.map_err(Failed::During)?;
                }
                head.len + n
            }
            Framing::Chunked => self.dechunk(head.len).await.map_err(Failed::During)?,
            Framing::UntilClose => {
                while self.read_more(0).await.map_err(Failed::During)? {}
                self.rbuf.pending().len()
            }
        };
        let start = self.rbuf.start();
        self.rbuf.consume(body_end);
        self.state = if head.close || framing == Framing::UntilClose {
            State::Closing
        } else {
            State::Reused
        };
        Ok((head.status, start + head.len..start + body_end))
    }

    /// The response head at the start of the unread bytes, once complete.
    fn parse_head(&mut self) -> Result<Option<Head>, DriverError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let pending = self.rbuf.pending();
        let len = match response.parse(pending) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if pending.len() > MAX_HEAD => {
                return Err(self.garbled(format!(
                    "a response head longer than {} KiB",
                    MAX_HEAD / 1024
                )))
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => {
                let foreign = peer::looks_like(pending)
                    .map(|what| format!(", its first bytes look like {what}"))
                    .unwrap_or_default();
                return Err(self.garbled(format!(
                    "not an HTTP/1.x response ({e}{foreign}): {}",
                    peer::quoted(&pending[..pending.len().min(32)])
                )));
            }
        };
        let status = response.code.unwrap_or(0);
        let mut framing = Framing::UntilClose;
        let mut close = response.version == Some(0);
        let mut server = None;
        for h in response.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("content-length") {
                let n = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .ok_or_else(|| {
                        self.garbled(format!("Content-Length {}", peer::quoted(h.value)))
                    })?;
                if framing != Framing::Chunked {
                    framing = Framing::Length(n);
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                if contains_token(h.value, b"chunked") {
                    framing = Framing::Chunked;
                }
            } else if name.eq_ignore_ascii_case("connection") {
                if contains_token(h.value, b"close") {
                    close = true;
                } else if contains_token(h.value, b"keep-alive") {
                    close = false;
                }
            } else if self.want_server && name.eq_ignore_ascii_case("server") {
                server = Some(String::from_utf8_lossy(h.value).into_owned());
            }
        }
        if server.is_some() {
            self.server = server;
        }
        Ok(Some(Head {
            status,
            len,
            framing,
            close,
        }))
    }

    /// Decodes a chunked body in place, starting `from` bytes into the
    /// unread ones: chunk-size lines and the CRLFs after each chunk are
    /// cut out, so the data lies contiguous after the head. The offset,
    /// from the first unread byte, where the response (trailers included)
    /// ends and the body's end is returned in the same frame.
    async fn dechunk(&mut self, from: usize) -> Result<usize, DriverError> {
        let mut at = from;
        loop {
            let line_end = self.line_at(at).await?;
            let line = &self.rbuf.pending()[at..line_end - 2];
            let size_text = line.split(|&b| b == b';').next().unwrap_or_default();
            let size = std::str::from_utf8(size_text)
                .ok()
                .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
                .ok_or_else(|| self.garbled(format!("chunk size {}", peer::quoted(line))))?;
            let start = self.rbuf.start();
            self.rbuf.remove(start + at..start + line_end);
            if size == 0 {
                // Trailer lines, up to an empty one, are dropped.
                loop {
                    let end = self.line_at(at).await?;
                    let start = self.rbuf.start();
                    self.rbuf.remove(start + at..start + end);
                    if end == at + 2 {
                        return Ok(at);
                    }
                }
            }
            while self.rbuf.pending().len() < at + size + 2 {
                self.fill(at + size + 2).await?;
            }
            if &self.rbuf.pending()[at + size..at + size + 2] != b"\r\n" {
                return Err(self.garbled("a chunk not followed by CRLF".to_string()));
            }
            let start = self.rbuf.start();
            self.rbuf.remove(start + at + size..start + at + size + 2);
            at += size;
        }
    }

    /// The end (past its CRLF) of the line starting `at` bytes into the
    /// unread ones, reading until it is complete.
    async fn line_at(&mut self, at: usize) -> Result<usize, DriverError> {
        loop {
            let pending = self.rbuf.pending();
            if let Some(i) = pending[at.min(pending.len())..]
                .windows(2)
                .position(|w| w == b"\r\n")
            {
                return Ok(at + i + 2);
            }
            if pending.len() - at > MAX_HEAD {
                return Err(self.garbled("a chunk line without an end".to_string()));
            }
            self.fill(0).await?;
        }
    }

    /// Reads once more; the end of the connection is an error.
    async fn fill(&mut self, need: usize) -> Result<(), DriverError> {
        if self.read_more(need).await? {
            Ok(())
        } else {
            Err(self.lost(&io::ErrorKind::UnexpectedEof.into()))
        }
    }

    /// Reads once more, making room for `need` unread bytes in all;
    /// `false` at the end of the connection.
    async fn read_more(&mut self, need: usize) -> Result<bool, DriverError> {
        loop {
            match self.stream.read(self.rbuf.spare(need)).await {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.rbuf.filled(n);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(&e)),
            }
        }
    }

    fn lost(&self, e: &io::Error) -> DriverError {
        lost_error(e, &self.origin().endpoint)
    }

    /// The server sent something that is not HTTP as expected: the
    /// connection cannot be used again.
    fn garbled(&self, what: String) -> DriverError {
        DriverError::connection(format!(
            "unexpected answer from {}: {what}",
            self.origin().endpoint
        ))
    }
}

/// Whether a comma-separated header value holds `token` (any case).
fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// TCP to origin `index`, then TLS when the target asks for it, with how
/// long the handshake took.
pub(crate) async fn connect(
    shared: &Shared,
    index: usize,
) -> Result<(Stream, Option<Duration>), DriverError> {
    let origin = &shared.origins[index];
    let tcp = connect_spread(shared, origin)
        .await
        .map_err(|e| connect_error(&e, &origin.endpoint))?;
    let Some(config) = &shared.tls else {
        return Ok((Stream::plain(tcp), None));
    };
    let start = Instant::now();
    let stream = Stream::start_tls(tcp, &origin.host, config)
        .await
        .map_err(|e| match e {
            TlsStartError::BadName(why) => DriverError::fatal(why),
            TlsStartError::Handshake(e) => DriverError::connection(format!(
                "TLS handshake with {} failed: {e}",
                origin.endpoint
            )),
        })?;
    Ok((stream, Some(start.elapsed())))
}

/// A TCP connection to `origin`. A loopback target has one source address
/// per 127.0.0.x, each with its own ephemeral ports: when the kernel's
/// choice has none left (EADDRNOTAVAIL, ports held in TIME_WAIT or by
/// held connections), connections move on to bind the next address.
async fn connect_spread(shared: &Shared, origin: &Origin) -> io::Result<TcpStream> {
    let loopback = origin
        .host
        .parse::<Ipv4Addr>()
        .ok()
        .filter(Ipv4Addr::is_loopback);
    loop {
        let source = shared.source.load(Ordering::Relaxed);
        let result = match (loopback, source) {
            (Some(ip), 1..) => connect_from(source_address(source), ip, origin.port).await,
            _ => connect_tcp(&origin.host, origin.port).await,
        };
        match result {
            Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) && loopback.is_some() => {
                if source == LAST_SOURCE {
                    return Err(e);
                }
                // Another connection may have moved on already.
                let _ = shared.source.compare_exchange(
                    source,
                    source + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            result => return result,
        }
    }
}

/// The highest source offset: 127.0.0.255.
const LAST_SOURCE: u8 = 254;

/// Source offset `n` (at least 1): 127.0.0.(n+1).
fn source_address(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n + 1)
}

async fn connect_from(source: Ipv4Addr, ip: Ipv4Addr, port: u16) -> io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    let tcp = socket.connect(SocketAddr::from((ip, port))).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_addresses_count_up_from_127_0_0_2() {
        assert_eq!(source_address(1), Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(source_address(LAST_SOURCE), Ipv4Addr::new(127, 0, 0, 255));
    }

    #[test]
    fn a_loopback_target_is_reached_from_the_source_address_in_turn() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Shared::plain(Origin::new("127.0.0.1", port, false, None));
        shared.source.store(2, Ordering::Relaxed);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let _tcp = rt
            .block_on(connect_spread(&shared, &shared.origins[0]))
            .unwrap();
        let (_, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip(), Ipv4Addr::new(127, 0, 0, 3));
    }

    #[test]
    fn tokens_are_found_in_lists_whatever_their_case() {
        assert!(contains_token(b"keep-alive, Close", b"close"));
        assert!(contains_token(b"gzip,chunked", b"chunked"));
        assert!(!contains_token(b"closed", b"close"));
    }

    #[test]
    fn the_host_header_names_the_port_only_when_it_is_not_the_default() {
        let o = Origin::new("example.org", 80, false, None);
        assert_eq!(o.fixed_headers, b"Host: example.org\r\n");
        let o = Origin::new("::1", 8443, true, Some(&("u".into(), "p".into())));
        assert_eq!(
            String::from_utf8(o.fixed_headers).unwrap(),
            "Host: [::1]:8443\r\nAuthorization: Basic dTpw\r\n"
        );
    }
}
