//! HTTP services and load balancers: HTTP/1.1 with keep-alive, written
//! directly on the drivers' stream layer (`client`), which the search and
//! time-series drivers reuse as their transport; or HTTP/2 over TLS
//! (`http2`, by the `h2` crate), one connection per session.
//!
//! Target: `http://[user:password@]host[:port][,host[:port]…][/base][?param…]`
//! or `https://…`. Several hosts are used round-robin, one host per
//! connection (as a load balancer's clients spread). A user and password
//! are sent as basic authentication. The target's path is the base every
//! request's path is appended to (`http://h/index.html` with no `--path`
//! fetches `/index.html`). Parameters:
//!
//! - `sslrootcert=PATH`: the CA certificates (PEM) an `https://` server's
//!   chain is checked against, instead of the Mozilla roots;
//! - `insecure=true`: accept any certificate (a test server's
//!   self-signed one); the handshake is still checked;
//! - `status=http://HOST:PORT/PATH`: a status page sampled every interval
//!   as the server's counters (`status`): nginx's `stub_status`, or
//!   haproxy's stats CSV (`…/stats;csv`);
//! - `http2=true`: speak HTTP/2 (`https://` only: offered by ALPN, and a
//!   server that does not agree is an error before any load).

mod client;
mod http2;
pub(crate) mod status;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::http::{HttpConn, Request, Response};
use loadcell_core::kv::KvCapabilities;
use loadcell_core::{Driver, DriverError, ServerInfo, Target};
use rustls::ClientConfig;

pub use client::Http1Connection;
pub(crate) use client::{Origin, Shared};
pub use http2::Http2Connection;

use crate::transport::target_url::{Query, UrlParts};
use crate::transport::tls::{self, SslMode};
use crate::transport::url_text;
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "http",
    schemes: &["http", "https"],
    family: Family::HTTP,
    url_form: "http(s)://[user:pass@]host[:port][,host2…][/base][?sslrootcert=PATH|insecure=true|http2=true][&status=http://HOST:PORT/PATH]",
    about: "HTTP/1.1 and HTTP/2 services and load balancers (keep-alive, TLS, round-robin hosts)",
    kv: KvCapabilities::NONE,
    blocking: false,
};

/// The parameters every target built on this client accepts.
const COMMON_PARAMS: &[&str] = &["sslrootcert", "insecure"];

/// What the target says, before any file is read.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub hosts: Vec<(String, u16)>,
    pub tls: bool,
    /// `user:password`, decoded, for basic authentication.
    pub credentials: Option<(String, String)>,
    /// The target's path without a trailing `/`: every request's prefix.
    pub base: String,
    pub sslrootcert: Option<PathBuf>,
    pub insecure: bool,
    /// The status page's host, port and path with query.
    pub status: Option<(String, u16, String)>,
    pub http2: bool,
    /// The form's [`TargetForm::own`] parameters, for its driver to take.
    pub own: Query,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("hosts", &self.hosts)
            .field("tls", &self.tls)
            .field("user", &self.credentials.as_ref().map(|(u, _)| u))
            .field("base", &self.base)
            .field("sslrootcert", &self.sslrootcert)
            .field("insecure", &self.insecure)
            .field("status", &self.status)
            .field("http2", &self.http2)
            // Names only: a value may hold a URL with a password.
            .field("own", &self.own)
            .finish()
    }
}

/// How a driver built on this client reads its target, beyond what every
/// one accepts (hosts, credentials, a base path, `sslrootcert`, `insecure`).
pub(crate) struct TargetForm {
    /// The further parameters it accepts, of `http2`, `status` and `tls`
    /// (TLS on a scheme that does not say it, as `https` does).
    pub params: &'static [&'static str],
    /// Parameters of the driver's own, handed back in [`Settings::own`].
    pub own: &'static [&'static str],
    /// The port of a host that names none; the scheme's (80, or 443 with
    /// TLS) when `None`.
    pub default_port: Option<u16>,
    /// What an unknown parameter's error adds.
    pub hint: &'static str,
}

/// The HTTP driver's form.
const HTTP_FORM: TargetForm = TargetForm {
    params: &["http2", "status"],
    own: &[],
    default_port: None,
    hint: " (request parameters go in --path)",
};

pub(crate) fn parse_target(target: &Target, form: &TargetForm) -> Result<Settings, String> {
    let https = target.scheme() == "https";
    let accepted: Vec<&str> = COMMON_PARAMS
        .iter()
        .chain(form.params)
        .chain(form.own)
        .copied()
        .collect();
    let mut query =
        Query::parse(target.url(), &accepted).map_err(|e| format!("{e}{}", form.hint))?;
    let sslrootcert = tls::take_root_cert(&mut query)?;
    let insecure = query.take_flag("insecure")?.unwrap_or(false);
    let http2 = query.take_flag("http2")?.unwrap_or(false);
    let status = query.take_parsed("status", |v| {
        status::page_url("status", v, "http://127.0.0.1:8404/stats;csv")
    })?;
    let tls = match query.take_flag("tls")? {
        Some(false) if https => return Err("tls=false contradicts an https:// target".to_string()),
        given => given.unwrap_or(https),
    };
    let default_port = form.default_port.unwrap_or(if tls { 443 } else { 80 });
    let parts = UrlParts::parse(target, default_port)?;
    if parts.hosts.is_empty() || parts.hosts.iter().any(|(h, _)| h.is_empty()) {
        return Err(format!(
            "an HTTP target needs a host: {}://host[:port][/path]",
            target.scheme()
        ));
    }
    let credentials = match (parts.user, parts.password) {
        (None, None) => None,
        (user, password) => Some((user.unwrap_or_default(), password.unwrap_or_default())),
    };
    if !tls && (sslrootcert.is_some() || insecure) {
        let or_tls = if form.params.contains(&"tls") {
            " or tls=true"
        } else {
            ""
        };
        return Err(format!(
            "sslrootcert and insecure are for https:// targets{or_tls}"
        ));
    }
    if !tls && http2 {
        return Err(
            "http2=true needs an https:// target: HTTP/2 is agreed by ALPN in the TLS handshake"
                .to_string(),
        );
    }
    if sslrootcert.is_some() && insecure {
        return Err(
            "insecure=true accepts any certificate, so sslrootcert would be ignored: give one"
                .to_string(),
        );
    }
    Ok(Settings {
        tls,
        credentials,
        hosts: parts.hosts,
        base: parts.path.trim_end_matches('/').to_string(),
        sslrootcert,
        insecure,
        status,
        http2,
        own: query,
    })
}

/// The rustls configuration an `https://` target asks for: the chain and
/// host name checked (against `sslrootcert` or the Mozilla roots), or
/// nothing checked with `insecure=true`; HTTP/1.1, or only HTTP/2 with
/// `http2=true`, offered by ALPN.
fn tls_config(settings: &Settings) -> Result<Option<Arc<ClientConfig>>, String> {
    if !settings.tls {
        return Ok(None);
    }
    let mode = if settings.insecure {
        SslMode::Require
    } else {
        SslMode::VerifyFull
    };
    let config = tls::client_config(mode, settings.sslrootcert.as_deref())?
        .expect("a TLS mode other than disable has a configuration");
    let mut config = Arc::unwrap_or_clone(config);
    let protocol: &[u8] = if settings.http2 { b"h2" } else { b"http/1.1" };
    config.alpn_protocols = vec![protocol.to_vec()];
    Ok(Some(Arc::new(config)))
}

/// What every connection to the target shares: its hosts, their headers
/// and the TLS configuration (reading any CA file now).
pub(crate) fn shared(settings: &Settings) -> Result<Shared, String> {
    let origins = settings
        .hosts
        .iter()
        .map(|(host, port)| Origin::new(host, *port, settings.tls, settings.credentials.as_ref()))
        .collect();
    Ok(Shared {
        origins,
        tls: tls_config(settings)?,
        base: settings.base.clone().into_bytes(),
        source: AtomicU8::new(0),
        http2: settings.http2,
    })
}

/// A session's connection: HTTP/1.1, or HTTP/2 when the target asks.
#[derive(Debug)]
pub enum HttpConnection {
    Http1(Http1Connection),
    Http2(Box<Http2Connection>),
}

impl HttpConn for HttpConnection {
    #[inline]
    async fn request(&mut self, request: &Request<'_>) -> Result<Response<'_>, DriverError> {
        match self {
            HttpConnection::Http1(c) => c.request(request).await,
            HttpConnection::Http2(c) => c.request(request).await,
        }
    }

    fn take_tls_handshake(&mut self) -> Option<Duration> {
        match self {
            HttpConnection::Http1(c) => c.take_tls_handshake(),
            HttpConnection::Http2(c) => c.take_tls_handshake(),
        }
    }
}

impl HttpConnection {
    /// Keeps the `Server` header of the next response.
    fn want_server_header(&mut self) {
        match self {
            HttpConnection::Http1(c) => c.want_server_header(),
            HttpConnection::Http2(c) => c.want_server_header(),
        }
    }

    /// The `Server` header kept by [`Self::want_server_header`].
    fn server_header(&mut self) -> Option<String> {
        match self {
            HttpConnection::Http1(c) => c.server_header(),
            HttpConnection::Http2(c) => c.server_header(),
        }
    }
}

/// An HTTP target: its hosts and what every connection needs; connections
/// take the hosts in turn.
pub struct HttpDriver {
    shared: Arc<Shared>,
    next_host: AtomicUsize,
    endpoint: String,
    /// The status page, when the target names one.
    status: Option<status::StatusPage>,
}

impl std::fmt::Debug for HttpDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpDriver")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl HttpDriver {
    /// Parses the target and reads any TLS files; makes no connection.
    pub fn from_target(target: &Target) -> Result<HttpDriver, String> {
        let settings = parse_target(target, &HTTP_FORM)?;
        Ok(HttpDriver {
            shared: Arc::new(shared(&settings)?),
            next_host: AtomicUsize::new(0),
            endpoint: url_text::endpoints(&settings.hosts),
            status: settings.status.map(status::StatusPage::new),
        })
    }
}

impl Driver for HttpDriver {
    type Conn = HttpConnection;

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    async fn connect(&self) -> Result<HttpConnection, DriverError> {
        let n = self.next_host.fetch_add(1, Ordering::Relaxed) % self.shared.origins.len();
        let shared = Arc::clone(&self.shared);
        Ok(if self.shared.http2 {
            HttpConnection::Http2(Box::new(Http2Connection::open(shared, n).await?))
        } else {
            HttpConnection::Http1(Http1Connection::open(shared, n).await?)
        })
    }

    /// HTTP/1.1 without TLS reads its answers from the socket itself, so
    /// each read can carry the kernel's receive time.
    fn times_reads_by_receipt(&self) -> bool {
        self.shared.tls.is_none() && !self.shared.http2
    }

    /// The product and version from the `Server` header of the answer to
    /// `HEAD` on the target's base path (`nginx/1.22.1`); "HTTP server"
    /// when it sends none.
    async fn server_info(&self, conn: &mut HttpConnection) -> Result<ServerInfo, DriverError> {
        let request = Request {
            method: "HEAD",
            path: b"",
            headers: b"",
            body: b"",
        };
        conn.want_server_header();
        conn.request(&request).await?;
        let server = conn.server_header().unwrap_or_default();
        let (product, version) = match server.split_once('/') {
            Some((p, v)) => (p.to_string(), v.to_string()),
            None if server.is_empty() => ("HTTP server".to_string(), String::new()),
            None => (server, String::new()),
        };
        Ok(ServerInfo::new(product, version))
    }

    /// The status page's numbers (see [`status`]), on a connection of its
    /// own each interval, so that the page's server counts it once and the
    /// run's connections are left alone.
    async fn server_counters(
        &self,
        _conn: &mut HttpConnection,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        let Some(page) = &self.status else {
            return Ok(Vec::new());
        };
        status::counters(&page.fetch().await?).map_err(DriverError::fatal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> Result<Settings, String> {
        parse_target(&Target::parse(url).unwrap(), &HTTP_FORM)
    }

    #[test]
    fn targets_give_hosts_base_and_credentials() {
        let s = settings("http://127.0.0.1:8080/index.html").unwrap();
        assert_eq!(s.hosts, vec![("127.0.0.1".to_string(), 8080)]);
        assert_eq!(s.base, "/index.html");
        assert!(!s.tls);
        let s = settings("https://u:p%40ss@a:8443,b/api/").unwrap();
        assert_eq!(
            s.hosts,
            vec![("a".to_string(), 8443), ("b".to_string(), 443)]
        );
        assert_eq!(s.base, "/api");
        assert_eq!(s.credentials, Some(("u".to_string(), "p@ss".to_string())));
        assert!(!format!("{s:?}").contains("p@ss"), "no secret in Debug");
        assert_eq!(settings("http://h").unwrap().hosts[0].1, 80);
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        let err = |u: &str| settings(u).unwrap_err();
        // `http:///x` is `http://x/` to URL parsers (and browsers); an
        // empty host is refused when the URL is parsed.
        assert!(Target::parse("http://:8080/x").is_err());
        assert_eq!(
            err("http://h/?q=1"),
            "unknown parameter 'q'; accepted: sslrootcert, insecure, http2, status \
             (request parameters go in --path)"
        );
        assert!(err("http://h/?tls=true").starts_with("unknown parameter 'tls'"));
        assert!(err("http://h/?insecure=true").contains("for https://"));
        assert!(err("https://h/?insecure=yes").contains("insecure takes true or false"));
        assert!(err("https://h/?insecure=1&sslrootcert=/ca.pem").contains("ignored"));
        assert!(err("http://h/?http2=true").starts_with("http2=true needs an https:// target"));
        assert!(err("https://h/?http2=no").contains("http2 takes true or false"));
        assert!(settings("https://h/?http2=true").unwrap().http2);
    }

    #[test]
    fn a_status_page_is_a_plain_http_url() {
        let s = settings("http://h:80/?status=http://127.0.0.1:18099/stats;csv").unwrap();
        assert_eq!(
            s.status,
            Some(("127.0.0.1".to_string(), 18099, "/stats;csv".to_string()))
        );
        let s = settings("http://h/?status=http://[::1]/s?x=1").unwrap();
        assert_eq!(s.status, Some(("::1".into(), 80, "/s?x=1".into())));
        let err = settings("http://h/?status=https://h/stats").unwrap_err();
        assert!(err.contains("plain http://"), "{err}");
        assert!(settings("http://h/?status=stats").is_err());
    }

    #[test]
    fn a_missing_ca_file_is_named_before_any_connection() {
        let t = Target::parse("https://h/?sslrootcert=/nonexistent/ca.pem").unwrap();
        let err = HttpDriver::from_target(&t).unwrap_err();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    }
}
