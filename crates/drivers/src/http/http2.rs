//! One HTTP/2 connection per session, over TLS with `h2` agreed by ALPN,
//! spoken by the `h2` crate: one request at a time, as on HTTP/1.1, so a
//! session is one connection with one stream in flight and the run's
//! connection count is what it asked for. The connection's frames are
//! read and written while a request waits on it, by the request itself
//! (no task of its own, so no wake-up across tasks and no need for a
//! local task set); responses are copied into a reused body buffer.
//!
//! `h2` builds an `http::Request` (a header map, the URI) per request: a
//! few small allocations that HTTP/1.1's hand-written path avoids. HTTP/2
//! is here for servers that only speak it well, not for the lowest client
//! cost per request.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use h2::client::{Connection, SendRequest};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderName, HeaderValue, Method, Uri};
use loadcell_core::http::{HttpConn, Request, Response};
use loadcell_core::DriverError;

use super::client::{connect, Shared};
use crate::transport::io_error::lost_error;
use crate::transport::stream::Stream;

type TlsStream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// Headers that describe an HTTP/1.1 connection, which HTTP/2 forbids.
const CONNECTION_SPECIFIC: [HeaderName; 5] = [
    http::header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    http::header::TRANSFER_ENCODING,
    http::header::UPGRADE,
];

/// One session's HTTP/2 connection to one of the target's hosts.
pub struct Http2Connection {
    sender: SendRequest<Bytes>,
    connection: Connection<TlsStream, Bytes>,
    shared: Arc<Shared>,
    origin: usize,
    authority: Authority,
    /// The target's path and the request's, joined.
    path: Vec<u8>,
    body: Vec<u8>,
    /// Whether the next response's `server` header is wanted.
    want_server: bool,
    server: Option<String>,
    /// The TLS handshake's time, until taken.
    tls_handshake: Option<Duration>,
}

impl std::fmt::Debug for Http2Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http2Connection")
            .field("endpoint", &self.shared.origins[self.origin].endpoint)
            .finish_non_exhaustive()
    }
}

impl Http2Connection {
    /// TCP and TLS to origin `index`, HTTP/2 agreed by ALPN, then the
    /// HTTP/2 handshake.
    pub(crate) async fn open(shared: Arc<Shared>, index: usize) -> Result<Self, DriverError> {
        let origin = &shared.origins[index];
        let (stream, tls_handshake) = connect(&shared, index).await?;
        let Stream::Tls(tls) = stream else {
            unreachable!("HTTP/2 targets are https:// (checked with the target)");
        };
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err(DriverError::fatal(format!(
                "{} did not agree to HTTP/2 by ALPN: remove http2=true to use HTTP/1.1",
                origin.endpoint
            )));
        }
        let (sender, connection) = h2::client::handshake(*tls)
            .await
            .map_err(|e| h2_error(&e, &origin.endpoint))?;
        let authority = Authority::try_from(origin.authority.as_str())
            .map_err(|e| DriverError::fatal(format!("'{}': {e}", origin.authority)))?;
        Ok(Http2Connection {
            sender,
            connection,
            shared,
            origin: index,
            authority,
            path: Vec::new(),
            body: Vec::new(),
            want_server: false,
            server: None,
            tls_handshake,
        })
    }

    /// Keeps the `server` header of the next response.
    pub(crate) fn want_server_header(&mut self) {
        self.want_server = true;
    }

    /// The `server` header kept by [`Self::want_server_header`].
    pub(crate) fn server_header(&mut self) -> Option<String> {
        self.want_server = false;
        self.server.take()
    }

    /// The `http::Request` for `request`: the target's path before the
    /// request's, basic authentication, the workload's header lines.
    fn build(&mut self, request: &Request<'_>) -> Result<http::Request<()>, DriverError> {
        let bad =
            |what: String| DriverError::fatal(format!("an HTTP/2 request cannot carry {what}"));
        self.path.clear();
        self.shared.write_path(request.path, &mut self.path);
        let path =
            PathAndQuery::from_maybe_shared(Bytes::copy_from_slice(&self.path)).map_err(|e| {
                bad(format!(
                    "the path {:?}: {e}",
                    String::from_utf8_lossy(&self.path)
                ))
            })?;
        let uri = Uri::from_parts({
            let mut parts = http::uri::Parts::default();
            parts.scheme = Some(Scheme::HTTPS);
            parts.authority = Some(self.authority.clone());
            parts.path_and_query = Some(path);
            parts
        })
        .map_err(|e| bad(format!("the URI: {e}")))?;
        let method = Method::from_bytes(request.method.as_bytes())
            .map_err(|e| bad(format!("the method {}: {e}", request.method)))?;
        let mut out = http::Request::new(());
        *out.method_mut() = method;
        *out.uri_mut() = uri;
        let headers = out.headers_mut();
        if let Some(value) = &self.shared.origins[self.origin].authorization {
            let value = HeaderValue::from_str(value).map_err(|e| bad(format!("{e}")))?;
            headers.insert(http::header::AUTHORIZATION, value);
        }
        for line in request.headers.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let name = HeaderName::from_bytes(line[..colon].trim_ascii()).map_err(|e| {
                bad(format!(
                    "the header {:?}: {e}",
                    String::from_utf8_lossy(line)
                ))
            })?;
            // HTTP/2 has no connection-specific headers (RFC 9113, 8.2.2):
            // dropped, as a proxy from HTTP/1.1 drops them.
            if CONNECTION_SPECIFIC.contains(&name) {
                continue;
            }
            let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii()).map_err(|e| {
                bad(format!(
                    "the header {:?}: {e}",
                    String::from_utf8_lossy(line)
                ))
            })?;
            headers.append(name, value);
        }
        Ok(out)
    }
}

impl HttpConn for Http2Connection {
    async fn request(&mut self, request: &Request<'_>) -> Result<Response<'_>, DriverError> {
        let built = self.build(request)?;
        let Http2Connection {
            sender,
            connection,
            shared,
            origin,
            body: buf,
            want_server,
            server,
            ..
        } = self;
        let endpoint = shared.origins[*origin].endpoint.as_str();
        let h2 = |e: h2::Error| h2_error(&e, endpoint);
        drive(connection, endpoint, poll_fn(|cx| sender.poll_ready(cx)))
            .await?
            .map_err(h2)?;
        let no_body = request.body.is_empty();
        let (response, mut send) = sender.send_request(built, no_body).map_err(h2)?;
        if !no_body {
            send.send_data(Bytes::copy_from_slice(request.body), true)
                .map_err(h2)?;
        }
        let response = drive(connection, endpoint, response).await?.map_err(h2)?;
        let status = response.status().as_u16();
        if *want_server {
            *server = response
                .headers()
                .get(http::header::SERVER)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        }
        let mut body = response.into_body();
        buf.clear();
        while let Some(chunk) = drive(connection, endpoint, body.data()).await? {
            let chunk = chunk.map_err(h2)?;
            buf.extend_from_slice(&chunk);
            // Room for the server to send more on this stream.
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        Ok(Response { status, body: buf })
    }

    fn take_tls_handshake(&mut self) -> Option<Duration> {
        self.tls_handshake.take()
    }
}

/// Runs `step` of a request while reading and writing the connection's
/// frames, until the step is done; a connection that ends first is a
/// connection error.
async fn drive<T>(
    connection: &mut Connection<TlsStream, Bytes>,
    endpoint: &str,
    step: impl Future<Output = T>,
) -> Result<T, DriverError> {
    let mut step = pin!(step);
    poll_fn(|cx| {
        if let Poll::Ready(done) = step.as_mut().poll(cx) {
            return Poll::Ready(Ok(done));
        }
        match Pin::new(&mut *connection).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) => Poll::Ready(Err(DriverError::connection(format!(
                "{endpoint} closed the HTTP/2 connection"
            )))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(h2_error(&e, endpoint))),
        }
    })
    .await
}

/// An `h2` error as a connection error (the engine reconnects): the
/// socket's own error when there is one.
fn h2_error(e: &h2::Error, endpoint: &str) -> DriverError {
    match e.get_io() {
        Some(io) => lost_error(io, endpoint),
        None => DriverError::connection(format!("HTTP/2 with {endpoint}: {e}")),
    }
}
