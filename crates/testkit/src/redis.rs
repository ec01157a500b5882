//! Private Redis servers and clusters on free 127.0.0.1 ports.
//!
//! [`redis()`] starts `redis-server --bind 127.0.0.1 --port P --save ''
//! --appendonly no --dir TMP --enable-debug-command local` (as the `redis`
//! user when run as root; `redis-cli DEBUG SLEEP` stalls it), URL
//! `redis://127.0.0.1:P`; [`redis_with_password`] adds `requirepass`
//! (URL `redis://:PASS@127.0.0.1:P`). [`redis_cluster`] starts `n` such
//! servers with `--cluster-enabled yes`, joins them with `redis-cli
//! --cluster create` (masters only) and waits for `cluster_state:ok`
//! everywhere; its URL is `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...`.
//!
//! The cluster bus port is chosen free too (`--cluster-port`), so node ports
//! above 55535 are fine.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::{
    find_bin, free_port, is_root, lookup_user, make_dir, run_cmd, spawn_server, temp_root,
    wait_ready, Account, ServerKind, StartError, TestServer, POLL, PORT_RETRIES, READY_TIMEOUT,
    SBIN_DIRS,
};

/// Start a private Redis without a password.
pub fn redis() -> Result<TestServer, String> {
    start_redis(None, None, Mode::Plain, &[])
}

/// [`redis()`] started with more server options (`--io-threads 2`), for
/// settings that only take effect at start.
pub fn redis_with(options: &[&str]) -> Result<TestServer, String> {
    start_redis(None, None, Mode::Plain, options)
}

/// A private Redis on `port` if it is free: a server brought back where
/// one died.
pub fn redis_at(port: u16) -> Result<TestServer, String> {
    start_redis(Some(port), None, Mode::Plain, &[])
}

/// Start a private Redis with `requirepass PASSWORD` (the `default` user).
pub fn redis_with_password(password: &str) -> Result<TestServer, String> {
    start_redis(None, Some(password), Mode::Plain, &[])
}

/// Start a private Redis that speaks TLS only, with a certificate for
/// `localhost` and `127.0.0.1` issued by a CA made for it (with `openssl`).
/// URL: `rediss://127.0.0.1:P/?sslrootcert=CA.pem` (full verification).
/// The CA file is [`TestServer::data_dir`]`/../tls/ca.pem`.
pub fn redis_tls() -> Result<TestServer, String> {
    start_redis(None, None, Mode::Tls, &[])
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plain,
    Cluster,
    Tls,
}

/// A running Redis Cluster of masters. Every node is stopped on drop.
#[derive(Debug)]
pub struct TestCluster {
    /// The nodes, in the order of the URL.
    pub nodes: Vec<TestServer>,
}

impl TestCluster {
    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// `redis-cli -p PORT ARGS...` on one node (by index); its stdout.
    pub fn cli(&self, node: usize, args: &[&str]) -> Result<String, String> {
        redis_cli(self.nodes[node].port, args)
    }

    /// The node id (`CLUSTER MYID`) of a node.
    pub fn node_id(&self, node: usize) -> Result<String, String> {
        Ok(self.cli(node, &["CLUSTER", "MYID"])?.trim().to_string())
    }

    /// The index of the node serving `slot`, per that node's own view.
    pub fn owner_of(&self, slot: u16) -> Result<usize, String> {
        let slots = self.cli(0, &["CLUSTER", "SLOTS"])?;
        // redis-cli prints the nested reply flattened, one value per line:
        // start, end, ip, port, id, [replicas...], start, end, ...
        let lines: Vec<&str> = slots.lines().map(str::trim).collect();
        let mut i = 0;
        while i + 3 < lines.len() {
            if let (Ok(a), Ok(b), Ok(port)) = (
                lines[i].parse::<u16>(),
                lines[i + 1].parse::<u16>(),
                lines[i + 3].parse::<u16>(),
            ) {
                if lines[i + 2].contains('.') && (a..=b).contains(&slot) {
                    return self
                        .nodes
                        .iter()
                        .position(|n| n.port == port)
                        .ok_or_else(|| format!("slot {slot} owned by unknown port {port}"));
                }
            }
            i += 1;
        }
        Err(format!("slot {slot} not found in CLUSTER SLOTS:\n{slots}"))
    }
}

/// Start `n` (at least 3) cluster-enabled masters and join them into one
/// cluster covering all 16384 slots.
pub fn redis_cluster(n: usize) -> Result<TestCluster, String> {
    if n < 3 {
        return Err(format!("a Redis Cluster needs at least 3 masters, got {n}"));
    }
    let cli = find_bin("redis-cli", SBIN_DIRS)?;
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        nodes.push(start_redis(None, None, Mode::Cluster, &[])?);
    }
    let cluster = TestCluster { nodes };

    let mut cmd = Command::new(&cli);
    cmd.args(["--cluster", "create"]);
    for node in &cluster.nodes {
        cmd.arg(format!("127.0.0.1:{}", node.port));
    }
    cmd.args(["--cluster-replicas", "0", "--cluster-yes"]);
    let log = cluster.nodes[0].root().join("cluster-create.log");
    run_cmd(cmd, &log, "redis-cli --cluster create")?;

    let start = Instant::now();
    loop {
        let mut pending = None;
        for node in &cluster.nodes {
            let info = redis_cli(node.port, &["CLUSTER", "INFO"]).unwrap_or_default();
            if !info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:") {
                pending = Some((node.port, info));
                break;
            }
            let known = field(&info, "cluster_known_nodes").unwrap_or(0);
            let assigned = field(&info, "cluster_slots_ok").unwrap_or(0);
            if known != n || assigned != 16384 {
                pending = Some((node.port, info));
                break;
            }
        }
        let Some((port, info)) = pending else {
            return Ok(cluster);
        };
        if start.elapsed() > READY_TIMEOUT {
            return Err(format!(
                "redis cluster not ready after {READY_TIMEOUT:?}: node 127.0.0.1:{port} says\n{}\n\
                 redis-cli --cluster create output:\n{}\nnode log:\n{}",
                info.trim(),
                super::tail(&log, 30),
                cluster
                    .nodes
                    .iter()
                    .find(|s| s.port == port)
                    .map(|s| s.log_tail(20))
                    .unwrap_or_default()
            ));
        }
        sleep(POLL);
    }
}

fn field(info: &str, name: &str) -> Option<usize> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// `redis-cli -e -h 127.0.0.1 -p PORT ARGS...`: its stdout (not a tty, so
/// raw: one value per line), or an error with its output when the command
/// failed or the reply was an error.
pub fn redis_cli(port: u16, args: &[&str]) -> Result<String, String> {
    let cli = find_bin("redis-cli", SBIN_DIRS)?;
    let out = Command::new(cli)
        .args(["-e", "-h", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run redis-cli: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "redis-cli -p {port} {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(stdout)
}

fn start_redis(
    first_port: Option<u16>,
    password: Option<&str>,
    mode: Mode,
    options: &[&str],
) -> Result<TestServer, String> {
    let bin = find_bin("redis-server", SBIN_DIRS)?;
    let owner: Option<Account> = if is_root() {
        Some(lookup_user("redis")?)
    } else {
        None
    };
    let dir = temp_root("loadcell-redis-")?;
    let data = dir.path().join("data");
    make_dir(&data, owner, 0o755)?;
    let root = dir.path().to_path_buf();
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: ServerKind::Redis,
        child: None,
        log_path: root.join("redis.log"),
        socket: data.clone(),
        data_dir: data,
        dir: Some(dir),
    };
    let tls_dir = root.join("tls");
    if mode == Mode::Tls {
        crate::tls::make_certificates(&tls_dir)?;
    }

    let mut port = first_port.unwrap_or_else(free_port);
    for attempt in 0..=PORT_RETRIES {
        let mut cmd = Command::new(&bin);
        super::as_user(&mut cmd, owner, &root);
        cmd.args(["--bind", "127.0.0.1"]);
        if mode == Mode::Tls {
            cmd.args(["--port", "0", "--tls-port"])
                .arg(port.to_string())
                .arg("--tls-cert-file")
                .arg(tls_dir.join("server.pem"))
                .arg("--tls-key-file")
                .arg(tls_dir.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(tls_dir.join("ca.pem"))
                .args(["--tls-auth-clients", "no"]);
        } else {
            cmd.arg("--port").arg(port.to_string());
        }
        cmd.args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(&server.data_dir)
            .args(["--daemonize", "no", "--logfile", ""])
            // DEBUG SLEEP from redis-cli on this host stalls the server on
            // cue (Redis 7 refuses DEBUG by default).
            .args(["--enable-debug-command", "local"]);
        if let Some(p) = password {
            cmd.args(["--requirepass", p]);
        }
        if mode == Mode::Cluster {
            cmd.args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(server.data_dir.join("nodes.conf"))
                .arg("--cluster-port")
                .arg(free_port().to_string())
                .args(["--cluster-node-timeout", "5000"]);
        }
        cmd.args(options);
        let log = server.log_path.clone();
        spawn_server(&mut server, cmd, &log, "redis-server")?;
        server.port = port;
        let log = server.log_path.clone();
        let ready = |port| match mode {
            // Plaintext PING cannot reach a TLS port: trust the log.
            Mode::Tls => fs::read_to_string(&log)
                .map(|l| l.contains("Ready to accept connections"))
                .unwrap_or(false),
            _ => answers_ping(port),
        };
        match wait_ready(&mut server, "redis-server", ready) {
            Ok(()) => break,
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => port = free_port(),
            Err(StartError::PortInUse) => {
                return Err(format!(
                    "redis-server: port still taken after {} attempts; tail of {}:\n{}",
                    PORT_RETRIES + 1,
                    server.log_path.display(),
                    server.log_tail(20)
                ))
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }
    server.url = match (password, mode) {
        (_, Mode::Tls) => format!(
            "rediss://127.0.0.1:{}/?sslrootcert={}",
            server.port,
            tls_dir.join("ca.pem").display()
        ),
        (Some(p), _) => format!("redis://:{p}@127.0.0.1:{}", server.port),
        (None, _) => format!("redis://127.0.0.1:{}", server.port),
    };
    Ok(server)
}

/// `PING` is answered with `+PONG`, or `-NOAUTH` when a password is set.
/// `-LOADING` (still starting) is not ready.
fn answers_ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 256];
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
        if buf[..got].ends_with(b"\r\n") {
            return buf.starts_with(b"+PONG") || buf.starts_with(b"-NOAUTH");
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn redis_roundtrip_and_kill() {
        let mut server = redis().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(server.kind(), ServerKind::Redis);
        assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port));
        assert_eq!(
            redis_cli(server.port, &["SET", "k", "v"]).unwrap().trim(),
            "OK"
        );
        assert_eq!(redis_cli(server.port, &["GET", "k"]).unwrap().trim(), "v");
        let pid = server.pid;
        let port = server.port;
        server.kill();
        assert!(!server.is_running());
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
        let root = server.data_dir().parent().unwrap().to_path_buf();
        drop(server);
        assert!(!root.exists());
    }

    #[test]
    fn redis_password() {
        let server = redis_with_password("s3cret").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            server.url(),
            format!("redis://:s3cret@127.0.0.1:{}", server.port)
        );
        let err = redis_cli(server.port, &["GET", "k"]).unwrap_err();
        assert!(err.contains("NOAUTH"), "{err}");
        let ok = redis_cli(server.port, &["--no-auth-warning", "-a", "s3cret", "PING"]).unwrap();
        assert_eq!(ok.trim(), "PONG");
    }

    #[test]
    fn redis_tls_server() {
        let server = redis_tls().unwrap_or_else(|e| panic!("{e}"));
        let ca = server.data_dir().parent().unwrap().join("tls/ca.pem");
        assert_eq!(
            server.url(),
            format!(
                "rediss://127.0.0.1:{}/?sslrootcert={}",
                server.port,
                ca.display()
            )
        );
        let cli = |host: &str| {
            let out = Command::new(find_bin("redis-cli", SBIN_DIRS).unwrap())
                .args(["-e", "--tls", "--cacert"])
                .arg(&ca)
                .args(["-h", host, "-p"])
                .arg(server.port.to_string())
                .arg("PING")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        };
        assert_eq!(cli("127.0.0.1").trim(), "PONG");
        assert_eq!(cli("localhost").trim(), "PONG");
        // Plaintext gets nowhere.
        assert!(redis_cli(server.port, &["PING"]).is_err());
    }

    #[test]
    fn redis_port_taken_retries() {
        let blocker = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let taken = blocker.local_addr().unwrap().port();
        let server =
            start_redis(Some(taken), None, Mode::Plain, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(server.port, taken);
        assert!(answers_ping(server.port));
    }

    #[test]
    fn cluster_of_three() {
        let cluster = redis_cluster(3).unwrap_or_else(|e| panic!("{e}"));
        let ports = cluster.ports();
        assert_eq!(
            cluster.url(),
            format!(
                "redis+cluster://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}",
                ports[0], ports[1], ports[2]
            )
        );
        for i in 0..3 {
            let info = cluster.cli(i, &["CLUSTER", "INFO"]).unwrap();
            assert!(info.contains("cluster_state:ok"), "{info}");
            assert_eq!(cluster.node_id(i).unwrap().len(), 40);
        }
        // Slot 0 and slot 16383 are owned by the first and last node.
        assert_eq!(cluster.owner_of(0).unwrap(), 0);
        assert_eq!(cluster.owner_of(16383).unwrap(), 2);
        let pids: Vec<u32> = cluster.nodes.iter().map(|n| n.pid).collect();
        drop(cluster);
        for pid in pids {
            assert!(!Path::new(&format!("/proc/{pid}")).exists());
        }
        assert!(redis_cluster(2).is_err());
    }
}
