//! The HTTP family: one request, one response, on a connection the
//! session owns (loadcell, not a pool, decides when connections open and
//! close, so new connections per second and held connections are what the
//! run asked for). The driver writes the request line, `Host`, the
//! target's authentication and `Content-Length`; the workload gives the
//! method, the path with its query, its own header lines and the body.
//! The response borrows the connection's read buffer until the next
//! request. A response of any status is `Ok`: which statuses count as
//! errors is the workload's decision (`--expect-status`).

use crate::DriverError;

/// One request. `headers` are complete header lines, each ending in
/// `\r\n`, encoded once when the workload is built, so that sending a
/// request copies bytes and formats nothing but the body's length.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path and query, e.g. `/index.html?q=1`.
    pub path: &'a [u8],
    pub headers: &'a [u8],
    pub body: &'a [u8],
}

/// A response, its body borrowed from the connection's read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response<'a> {
    pub status: u16,
    pub body: &'a [u8],
}

pub trait HttpConn {
    /// Sends `request` and reads the whole response. A connection the
    /// server closes (`Connection: close`, or keep-alive's end) is
    /// reported as a connection error on the next request, which the
    /// engine reconnects.
    async fn request(&mut self, request: &Request<'_>) -> Result<Response<'_>, DriverError>;

    /// How long the TLS handshake of the connection's newest socket took,
    /// once: `Some` after a TLS connect (or a reconnect inside a request),
    /// then `None` until the next. A workload that churns connections
    /// records it as its own operation; the engine's `connect` includes it.
    fn take_tls_handshake(&mut self) -> Option<std::time::Duration> {
        None
    }
}

/// HTTP methods loadcell sends: the standard ones, so that a typo
/// (`--method GTE`) is an error before any load rather than a run of 405s.
pub const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

/// The method `name` in its canonical (upper-case) spelling.
pub fn method(name: &str) -> Result<&'static str, String> {
    METHODS
        .iter()
        .find(|m| m.eq_ignore_ascii_case(name))
        .copied()
        .ok_or_else(|| {
            format!(
                "unknown HTTP method '{name}'; use one of {}",
                METHODS.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_canonical_and_unknown_ones_named() {
        assert_eq!(method("get"), Ok("GET"));
        assert_eq!(method("Patch"), Ok("PATCH"));
        let err = method("GTE").unwrap_err();
        assert!(
            err.starts_with("unknown HTTP method 'GTE'; use one of GET, HEAD"),
            "{err}"
        );
    }
}
