//! A private haproxy (Debian's package) on a free 127.0.0.1 port, balancing
//! round-robin over two private nginx ([`super::nginx()`]), after
//! `shared/servers/http/haproxy.cfg`, with the frontend's `maxconn` set by
//! the test (low, so that the connection limit is reached) and a stats
//! listener on a port of its own (`/stats`, CSV at `/stats;csv`).
//!
//! haproxy runs in the foreground (`-db`) as the test's child and is
//! stopped by its PID on drop, before its two nginx.

use std::fs;
use std::process::Command;

use super::{
    find_bin, free_port, spawn_server, temp_root, wait_ready, ServerKind, StartError, TestServer,
    PORT_RETRIES, SBIN_DIRS,
};

/// haproxy in front of two nginx.
#[derive(Debug)]
pub struct LoadBalancer {
    /// haproxy; its `url` is the frontend's. Declared first: stopped first.
    pub haproxy: TestServer,
    /// The stats page as CSV: `http://127.0.0.1:P/stats;csv`.
    pub stats_csv_url: String,
    pub backends: [TestServer; 2],
}

/// Start two nginx and haproxy over them, its frontend holding at most
/// `maxconn` connections.
pub fn haproxy(maxconn: u32) -> Result<LoadBalancer, String> {
    let backends = [super::nginx()?, super::nginx()?];
    let bin = find_bin("haproxy", SBIN_DIRS)?;
    let dir = temp_root("loadcell-haproxy-")?;
    let root = dir.path().to_path_buf();
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: ServerKind::Haproxy,
        child: None,
        log_path: root.join("haproxy.log"),
        socket: root.clone(),
        data_dir: root.clone(),
        dir: Some(dir),
    };
    let (mut port, mut stats_port) = (free_port(), free_port());
    for attempt in 0..=PORT_RETRIES {
        let cfg = config(
            port,
            stats_port,
            maxconn,
            [backends[0].port, backends[1].port],
        );
        fs::write(root.join("haproxy.cfg"), cfg).map_err(|e| format!("write haproxy.cfg: {e}"))?;
        let mut cmd = Command::new(&bin);
        cmd.arg("-db")
            .arg("-f")
            .arg(root.join("haproxy.cfg"))
            .current_dir(&root);
        spawn_server(&mut server, cmd, &root.join("haproxy.log"), "haproxy")?;
        server.port = port;
        match wait_ready(&mut server, "haproxy", |_| true) {
            Ok(()) => break,
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => {
                (port, stats_port) = (free_port(), free_port())
            }
            Err(StartError::PortInUse) => {
                return Err(format!(
                    "haproxy: ports still taken after {} attempts",
                    PORT_RETRIES + 1
                ))
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }
    server.url = format!("http://127.0.0.1:{port}");
    Ok(LoadBalancer {
        haproxy: server,
        stats_csv_url: format!("http://127.0.0.1:{stats_port}/stats;csv"),
        backends,
    })
}

fn config(port: u16, stats_port: u16, maxconn: u32, backends: [u16; 2]) -> String {
    format!(
        r#"global
  maxconn 4000
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  option http-keep-alive
frontend fe
  bind 127.0.0.1:{port}
  maxconn {maxconn}
  default_backend be
backend be
  balance roundrobin
  http-response set-header X-LB haproxy
  server n1 127.0.0.1:{} check
  server n2 127.0.0.1:{} check
listen stats
  bind 127.0.0.1:{stats_port}
  stats enable
  stats uri /stats
"#,
        backends[0], backends[1]
    )
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{Ipv4Addr, TcpStream};

    use super::*;

    #[test]
    fn haproxy_balances_over_two_nginx_and_serves_its_stats() {
        let lb = haproxy(50).unwrap_or_else(|e| panic!("{e}"));
        let get = |port: u16, path: &str| {
            let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
            write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut reply = String::new();
            s.read_to_string(&mut reply).unwrap();
            reply
        };
        let reply = get(lb.haproxy.port, "/health");
        assert!(
            reply.starts_with("HTTP/1.1 200") && reply.contains("x-lb: haproxy"),
            "{reply}"
        );
        let stats_port: u16 = lb.stats_csv_url.split(':').nth(2).unwrap()[..]
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let csv = get(stats_port, "/stats;csv");
        assert!(
            csv.contains("# pxname,svname") && csv.contains("fe,FRONTEND"),
            "{csv}"
        );
        let pid = lb.haproxy.pid;
        drop(lb);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }
}
