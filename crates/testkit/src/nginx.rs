//! A private nginx on a free 127.0.0.1 port (Debian's `nginx-light`).
//!
//! `nginx -p DIR -c DIR/nginx.conf` in the foreground (`daemon off`), one
//! worker process, its own process group so that stopping it stops the
//! workers too. It serves:
//!
//! - `/index.html`: a 612-byte static page (the size of nginx's welcome
//!   page, what wrk's users fetch);
//! - `/large.txt`: 64 KiB of text, gzipped on the fly (so chunked) for a
//!   request that accepts gzip;
//! - `/health` and `/echo` (the request URI back, as JSON), as in
//!   `shared/servers/http/nginx.conf`; each `/echo` request's method and
//!   URI are also logged, one line each, to [`ECHO_LOG`] in the data
//!   directory, so a test can see what a run sent;
//! - `/status`: `stub_status`;
//! - anything else: 404.
//!
//! [`nginx_tls`] listens with TLS instead, with a certificate for
//! `localhost` and 127.0.0.1 signed by a test CA ([`TestServer::tls_ca`]),
//! and offers HTTP/2 as well as HTTP/1.1 by ALPN.
//!
//! [`nginx_basic_auth_proxy`] asks for a user and password on every other
//! path and passes the requests it lets through to a server on another
//! port, as the proxy often put in front of a search cluster does.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{
    find_bin, free_port, is_root, spawn_server, temp_root, wait_ready, ServerKind, StartError,
    TestServer, PORT_RETRIES, SBIN_DIRS,
};

/// Start a private plain-HTTP nginx.
pub fn nginx() -> Result<TestServer, String> {
    start_nginx(false, None)
}

/// Start a private nginx serving HTTPS only.
pub fn nginx_tls() -> Result<TestServer, String> {
    start_nginx(true, None)
}

/// Start a private plain-HTTP nginx that answers `401` to a request
/// without `user`'s `password` (basic authentication) and passes the
/// others to `127.0.0.1:upstream_port`.
pub fn nginx_basic_auth_proxy(
    upstream_port: u16,
    user: &str,
    password: &str,
) -> Result<TestServer, String> {
    start_nginx(
        false,
        Some(&AuthProxy {
            upstream_port,
            user,
            password,
        }),
    )
}

struct AuthProxy<'a> {
    upstream_port: u16,
    user: &'a str,
    password: &'a str,
}

/// The static page's bytes.
pub const INDEX_BYTES: usize = 612;

/// The log of `/echo` requests (`GET /echo?x=1` per line), relative to
/// [`TestServer::data_dir`].
pub const ECHO_LOG: &str = "logs/echo.log";

fn start_nginx(tls: bool, proxy: Option<&AuthProxy>) -> Result<TestServer, String> {
    let bin = find_bin("nginx", SBIN_DIRS)?;
    let dir = temp_root("loadcell-nginx-")?;
    let root = dir.path().to_path_buf();
    for sub in ["html", "logs", "tmp"] {
        fs::create_dir(root.join(sub)).map_err(|e| format!("mkdir {sub}: {e}"))?;
    }
    let page = format!(
        "<!DOCTYPE html><html><body>{}</body></html>\n",
        "x".repeat(INDEX_BYTES - 42)
    );
    debug_assert_eq!(page.len(), INDEX_BYTES);
    fs::write(root.join("html/index.html"), page).map_err(|e| format!("write index: {e}"))?;
    let large: String = (0..4096)
        .map(|i| format!("line {i:>5} of the large text\n"))
        .collect();
    fs::write(root.join("html/large.txt"), &large[..64 * 1024])
        .map_err(|e| format!("write large: {e}"))?;
    if tls {
        crate::tls::make_certificates(&root.join("tls"))?;
    }
    if let Some(p) = proxy {
        // nginx reads `{PLAIN}` passwords as they are.
        fs::write(
            root.join("htpasswd"),
            format!("{}:{{PLAIN}}{}\n", p.user, p.password),
        )
        .map_err(|e| format!("write htpasswd: {e}"))?;
    }
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: ServerKind::Nginx,
        child: None,
        log_path: root.join("logs/error.log"),
        socket: root.clone(),
        data_dir: root.clone(),
        dir: Some(dir),
    };
    let mut port = free_port();
    for attempt in 0..=PORT_RETRIES {
        fs::write(root.join("nginx.conf"), config(&root, port, tls, proxy))
            .map_err(|e| format!("write nginx.conf: {e}"))?;
        let mut cmd = Command::new(&bin);
        cmd.arg("-p")
            .arg(&root)
            .arg("-c")
            .arg(root.join("nginx.conf"))
            .current_dir(&root)
            .process_group(0);
        let log = root.join("logs/stderr.log");
        spawn_server(&mut server, cmd, &log, "nginx")?;
        server.port = port;
        let ready = |p: u16| tls || answers_health(p);
        match wait_ready(&mut server, "nginx", ready) {
            Ok(()) => break,
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => port = free_port(),
            Err(StartError::PortInUse) => {
                return Err(format!(
                    "nginx: port still taken after {} attempts",
                    PORT_RETRIES + 1
                ))
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }
    let scheme = if tls { "https" } else { "http" };
    server.url = format!("{scheme}://127.0.0.1:{}", server.port);
    Ok(server)
}

fn config(root: &Path, port: u16, tls: bool, proxy: Option<&AuthProxy>) -> String {
    let root = root.display();
    let proxied = proxy.map_or(String::new(), |p| {
        format!(
            r#"location / {{ auth_basic "loadcell"; auth_basic_user_file {root}/htpasswd; proxy_pass http://127.0.0.1:{}; proxy_http_version 1.1; proxy_set_header Connection ""; }}"#,
            p.upstream_port
        )
    });
    let user = if is_root() { "user root;\n" } else { "" };
    let listen = if tls {
        format!(
            "listen 127.0.0.1:{port} ssl http2;\n    ssl_certificate {root}/tls/server.pem;\n    ssl_certificate_key {root}/tls/server.key;"
        )
    } else {
        format!("listen 127.0.0.1:{port};")
    };
    format!(
        r#"{user}daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/logs/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  log_format echo '$request_method $request_uri';
  client_body_temp_path {root}/tmp/body;
  proxy_temp_path {root}/tmp/proxy;
  fastcgi_temp_path {root}/tmp/fcgi;
  uwsgi_temp_path {root}/tmp/uwsgi;
  scgi_temp_path {root}/tmp/scgi;
  keepalive_requests 100000;
  default_type text/plain;
  gzip on;
  gzip_types text/plain;
  gzip_min_length 0;
  server {{
    {listen}
    root {root}/html;
    location = /health {{ return 200 "ok\n"; }}
    location = /echo {{ access_log {root}/{ECHO_LOG} echo; return 200 '{{"uri":"$request_uri","method":"$request_method"}}'; }}
    location = /status {{ stub_status; }}
    {proxied}
  }}
}}
"#
    )
}

/// `GET /health` is answered with `200` and `ok`.
fn answers_health(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply.starts_with("HTTP/1.1 200") && reply.ends_with("ok\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `GET path` with basic authentication by `credentials` (`user:password`
    /// in base64), if any: the status line.
    fn status_of(port: u16, path: &str, credentials: Option<&str>) -> String {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        let auth = credentials
            .map(|c| format!("Authorization: Basic {c}\r\n"))
            .unwrap_or_default();
        let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n");
        s.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        reply.lines().next().unwrap_or_default().to_string()
    }

    #[test]
    fn the_auth_proxy_lets_only_the_right_password_through() {
        let upstream = nginx().unwrap_or_else(|e| panic!("{e}"));
        let proxy =
            nginx_basic_auth_proxy(upstream.port, "u", "s3cret").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            status_of(proxy.port, "/index.html", None),
            "HTTP/1.1 401 Unauthorized"
        );
        assert_eq!(
            status_of(
                proxy.port,
                "/index.html",
                Some("dTp3cm9uZw==") /* u:wrong */
            ),
            "HTTP/1.1 401 Unauthorized"
        );
        assert_eq!(
            status_of(
                proxy.port,
                "/index.html",
                Some("dTpzM2NyZXQ=") /* u:s3cret */
            ),
            "HTTP/1.1 200 OK"
        );
        // Through to the upstream: its own answer to a path it lacks.
        assert_eq!(
            status_of(
                proxy.port,
                "/nothing",
                Some("dTpzM2NyZXQ=") /* u:s3cret */
            ),
            "HTTP/1.1 404 Not Found"
        );
    }

    #[test]
    fn nginx_serves_and_stops_with_its_workers() {
        let server = nginx().unwrap_or_else(|e| panic!("{e}"));
        assert!(answers_health(server.port));
        let pid = server.pid;
        let port = server.port;
        drop(server);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        assert!(
            TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err(),
            "no worker left"
        );
    }
}
