//! A private memcached on a free 127.0.0.1 port.
//!
//! `memcached -l 127.0.0.1 -p P -m 256 -t 1` (plus `-u memcache` when run as
//! root, which memcached insists on), its output in a log file in a temp dir.
//! No persistence, no authentication: the URL is `memcached://127.0.0.1:P`.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::process::Command;
use std::time::Duration;

use super::{
    find_bin, free_port, is_root, lookup_user, spawn_server, temp_root, wait_ready, ServerKind,
    StartError, TestServer, PORT_RETRIES, SBIN_DIRS,
};

/// Start a private memcached (256 MB, one worker thread).
pub fn memcached() -> Result<TestServer, String> {
    start_memcached(None)
}

pub(crate) fn start_memcached(first_port: Option<u16>) -> Result<TestServer, String> {
    let bin = find_bin("memcached", SBIN_DIRS)?;
    // memcached refuses to run as root without -u; check the user exists so
    // the error points at the install script rather than at memcached's log.
    let as_user = if is_root() {
        lookup_user("memcache")?;
        Some("memcache")
    } else {
        None
    };
    let dir = temp_root("loadcell-memcached-")?;
    let root = dir.path().to_path_buf();
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: ServerKind::Memcached,
        child: None,
        log_path: root.join("memcached.log"),
        socket: root.clone(),
        data_dir: root.clone(),
        dir: Some(dir),
    };

    let mut port = first_port.unwrap_or_else(free_port);
    for attempt in 0..=PORT_RETRIES {
        let mut cmd = Command::new(&bin);
        if let Some(u) = as_user {
            cmd.args(["-u", u]);
        }
        cmd.args(["-l", "127.0.0.1", "-p"])
            .arg(port.to_string())
            // No UDP listener (older builds open one on the same port).
            .args(["-U", "0", "-m", "256", "-t", "1"])
            .current_dir(&root);
        let log = server.log_path.clone();
        spawn_server(&mut server, cmd, &log, "memcached")?;
        server.port = port;
        match wait_ready(&mut server, "memcached", answers_version) {
            Ok(()) => break,
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => {
                port = free_port();
            }
            Err(StartError::PortInUse) => {
                return Err(format!(
                    "memcached: port still taken after {} attempts; tail of {}:\n{}",
                    PORT_RETRIES + 1,
                    server.log_path.display(),
                    server.log_tail(20)
                ))
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }
    server.url = format!("memcached://127.0.0.1:{}", server.port);
    Ok(server)
}

/// `version` is answered with `VERSION x.y.z`.
fn answers_version(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"version\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
        if buf[..got].ends_with(b"\r\n") {
            return buf.starts_with(b"VERSION ");
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn roundtrip(port: u16, req: &[u8]) -> String {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(req).unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got = 0;
        loop {
            let n = s.read(&mut buf[got..]).unwrap();
            assert!(n > 0, "memcached closed the connection");
            got += n;
            let text = String::from_utf8_lossy(&buf[..got]).into_owned();
            if text.ends_with("END\r\n") || text.ends_with("STORED\r\n") {
                return text;
            }
        }
    }

    #[test]
    fn memcached_roundtrip_and_kill() {
        let mut server = memcached().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(server.kind(), ServerKind::Memcached);
        assert_eq!(
            server.url(),
            format!("memcached://127.0.0.1:{}", server.port)
        );
        assert_eq!(
            roundtrip(server.port, b"set k 0 0 2\r\nhi\r\n"),
            "STORED\r\n"
        );
        assert_eq!(
            roundtrip(server.port, b"get k\r\n"),
            "VALUE k 0 2\r\nhi\r\nEND\r\n"
        );
        let pid = server.pid;
        let port = server.port;
        assert!(server.is_running());
        server.kill();
        assert!(!server.is_running());
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
        let root = server.data_dir().to_path_buf();
        drop(server);
        assert!(!root.exists());
    }

    #[test]
    fn memcached_port_taken_retries() {
        let blocker = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let taken = blocker.local_addr().unwrap().port();
        let server = start_memcached(Some(taken)).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(server.port, taken);
        assert!(answers_version(server.port));
    }
}
