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
    start_nginx(false)
}

/// Start a private nginx serving HTTPS only.
pub fn nginx_tls() -> Result<TestServer, String> {
    start_nginx(true)
}

/// The static page's bytes.
pub const INDEX_BYTES: usize = 612;

/// The log of `/echo` requests (`GET /echo?x=1` per line), relative to
/// [`TestServer::data_dir`].
pub const ECHO_LOG: &str = "logs/echo.log";

fn start_nginx(tls: bool) -> Result<TestServer, String> {
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
        fs::write(root.join("nginx.conf"), config(&root, port, tls))
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

fn config(root: &Path, port: u16, tls: bool) -> String {
    let root = root.display();
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
