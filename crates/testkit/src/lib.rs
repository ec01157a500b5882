//! Real database servers for loadcell's integration tests.
//!
//! [`mariadb()`] and [`postgres()`] (also [`mariadb_tls`], [`postgres_tls`]) each start a fresh,
//! private server on a free 127.0.0.1 port with its data in a new temp dir,
//! create the database `loadcell` and the user `lc` / password `lcpass`, and
//! return a [`TestServer`] whose `url` is ready for a driver. Dropping the
//! `TestServer` stops the server (by PID), waits for it and removes the temp
//! dir. [`TestServer::kill`] SIGKILLs it mid-run, for failure tests.
//!
//! [`redis()`] (also [`redis_with_password`], [`redis_tls`]), [`redis_cluster`]
//! and [`memcached()`] start key-value servers the same way, without data to
//! create, [`nginx()`] (also [`nginx_tls`]) an HTTP server, and
//! [`haproxy()`] a load balancer over two of them, [`opensearch()`] /
//! [`elasticsearch()`] one search server per test binary, [`kafka()`] one
//! Kafka broker and [`hbase()`] HBase with its Thrift2 gateway, one per test
//! binary too, and [`influxdb()`],
//! [`prometheus()`], [`victoriametrics()`] and [`questdb()`] time-series
//! servers; see their modules.
//!
//! The servers come from Debian's packages (`scripts/install-test-deps.sh`). A
//! missing binary is an error, never a silent skip. When run as root (the normal
//! case here) the servers run as the `mysql` / `postgres` / `redis` / `memcache` users; otherwise they
//! run as the current user.

mod cassandra;
mod haproxy;
mod hbase;
mod kafka;
mod keeper;
mod memcached;
mod netns;
mod nginx;
mod redis;
mod search;
mod sharding_proxy;
mod shared;
mod tls;
mod ts;

pub use cassandra::{cassandra, CassandraServer};
pub use haproxy::{haproxy, LoadBalancer};
pub use hbase::{hbase, HbaseServer};
pub use kafka::{kafka, kafka_lib};
pub use memcached::memcached;
pub use netns::ClientNamespaces;
pub use nginx::{nginx, nginx_basic_auth_proxy, nginx_tls, ECHO_LOG, INDEX_BYTES};
pub use redis::{
    redis, redis_cli, redis_cluster, redis_tls, redis_with, redis_with_password, TestCluster,
};
pub use search::{elasticsearch, opensearch};
pub use sharding_proxy::{sharding_proxy, sharding_proxy_lib};
pub use shared::SharedServer;
pub use tls::make_certificates;
pub use ts::{
    influxdb, influxdb_with_http, node_exporter, prometheus, questdb, victoriametrics, TsServer,
};

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Database created on every server.
pub const DB_NAME: &str = "loadcell";
/// User with all privileges on [`DB_NAME`].
pub const DB_USER: &str = "lc";
/// Password of [`DB_USER`].
pub const DB_PASSWORD: &str = "lcpass";

const INSTALL_HINT: &str =
    "run `scripts/install-test-deps.sh` (as root) to install the servers used by the tests";
/// How long a started server may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long initdb / mariadb-install-db / an admin client may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// Extra attempts with a fresh port when the chosen one was taken before the server bound it.
const PORT_RETRIES: usize = 3;
const POLL: Duration = Duration::from_millis(20);
const SBIN_DIRS: &[&str] = &["/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/bin"];

/// Which server a [`TestServer`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    MariaDb,
    Postgres,
    Redis,
    Memcached,
    Nginx,
    Haproxy,
    InfluxDb,
    Prometheus,
    NodeExporter,
    VictoriaMetrics,
    QuestDb,
    ShardingProxy,
}

/// A running server owned by the test. Stopped and cleaned up on drop.
#[derive(Debug)]
pub struct TestServer {
    /// `mysql://lc:lcpass@127.0.0.1:P/loadcell` or `postgres://lc:lcpass@127.0.0.1:P/loadcell`.
    pub url: String,
    pub port: u16,
    /// PID of the server process (mariadbd, or the postgres postmaster).
    pub pid: u32,
    kind: ServerKind,
    child: Option<Child>,
    data_dir: PathBuf,
    log_path: PathBuf,
    /// Admin socket: the unix socket file (MariaDB) or socket directory (PostgreSQL).
    socket: PathBuf,
    dir: Option<tempfile::TempDir>,
}

impl TestServer {
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// The server's data directory (inside the temp dir).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The CA certificate (PEM) of a server started with TLS
    /// ([`mariadb_tls`], [`postgres_tls`], [`redis_tls`]).
    pub fn tls_ca(&self) -> PathBuf {
        self.root().join("tls").join("ca.pem")
    }

    /// The server's log (MariaDB's err.log, PostgreSQL's stderr).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last `lines` lines of the server log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log_path, lines)
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL the server now (it "dies mid-run") and wait for it to be gone.
    /// For PostgreSQL the backends die with the postmaster. Idempotent; the temp dir
    /// stays until drop.
    pub fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        match self.kind {
            ServerKind::MariaDb
            | ServerKind::Redis
            | ServerKind::Memcached
            | ServerKind::Haproxy
            | ServerKind::InfluxDb
            | ServerKind::Prometheus
            | ServerKind::NodeExporter
            | ServerKind::VictoriaMetrics
            | ServerKind::QuestDb
            | ServerKind::ShardingProxy => {
                let _ = child.kill();
                let _ = child.wait();
            }
            ServerKind::Postgres => hard_kill_postgres(&mut child, &self.data_dir),
            // Its workers outlive a killed master: kill its process group.
            ServerKind::Nginx => {
                signal_group(child.id(), libc::SIGKILL);
                let _ = child.wait();
            }
        }
    }

    /// Stop for good: MariaDB is SIGKILLed (its data is throwaway), PostgreSQL gets an
    /// immediate shutdown (SIGQUIT), which also frees its shared memory, with SIGKILL
    /// as fallback.
    fn stop(&mut self) {
        match self.kind {
            ServerKind::MariaDb
            | ServerKind::Redis
            | ServerKind::Memcached
            | ServerKind::Nginx
            | ServerKind::Haproxy
            | ServerKind::InfluxDb
            | ServerKind::Prometheus
            | ServerKind::NodeExporter
            | ServerKind::VictoriaMetrics
            | ServerKind::QuestDb
            | ServerKind::ShardingProxy => self.kill(),
            ServerKind::Postgres => {
                let Some(mut child) = self.child.take() else {
                    return;
                };
                signal(child.id(), libc::SIGQUIT);
                if wait_timeout(&mut child, Duration::from_secs(10)).is_none() {
                    hard_kill_postgres(&mut child, &self.data_dir);
                }
            }
        }
    }

    fn root(&self) -> &Path {
        self.dir
            .as_ref()
            .expect("temp dir present while alive")
            .path()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_path_buf();
            if let Err(e) = dir.close() {
                eprintln!("loadcell-testkit: could not remove {}: {e}", path.display());
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Ports

fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// A port the kernel considers free on 127.0.0.1 right now: bind :0, read, drop.
/// Never returns the same port twice within one process (so concurrent tests don't
/// collide with each other); another process may still take it, which the server
/// starters handle by retrying.
pub fn free_port() -> u16 {
    loop {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0 for a free port");
        let port = listener.local_addr().expect("local_addr").port();
        drop(listener);
        if handed_out()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(port)
        {
            return port;
        }
    }
}

/// A port on 127.0.0.1 that nothing listens on (connecting is refused). It is never
/// handed out by [`free_port`] in this process.
pub fn closed_port() -> u16 {
    loop {
        let port = free_port();
        if !tcp_accepts(port) {
            return port;
        }
    }
}

fn tcp_accepts(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
}

// ---------------------------------------------------------------------------
// MariaDB

/// Start a private MariaDB server. See the crate docs.
pub fn mariadb() -> Result<TestServer, String> {
    start_mariadb(None)
}

/// [`mariadb()`] listening on every address, for clients in other network
/// namespaces ([`ClientNamespaces`]); the URL is still 127.0.0.1's.
pub fn mariadb_on_every_address() -> Result<TestServer, String> {
    start_mariadb_with(None, false, "0.0.0.0", &[])
}

/// [`mariadb()`] with TLS on, with a certificate for `localhost` and
/// 127.0.0.1 issued by a CA made for it (with `openssl`). Plain connections
/// are still accepted. The URL is the plain one; add `?sslmode=require`, or
/// `?sslmode=verify-full&sslrootcert=` and [`TestServer::tls_ca`].
pub fn mariadb_tls() -> Result<TestServer, String> {
    start_mariadb_with(None, true, "127.0.0.1", &[])
}

/// [`mariadb()`] started with more server options (`--back-log=8`), for
/// settings that only take effect at start.
pub fn mariadb_with(options: &[&str]) -> Result<TestServer, String> {
    start_mariadb_with(None, false, "127.0.0.1", options)
}

fn start_mariadb(first_port: Option<u16>) -> Result<TestServer, String> {
    start_mariadb_with(first_port, false, "127.0.0.1", &[])
}

fn start_mariadb_with(
    first_port: Option<u16>,
    tls: bool,
    bind: &str,
    options: &[&str],
) -> Result<TestServer, String> {
    let install_db = find_bin("mariadb-install-db", SBIN_DIRS)?;
    let mariadbd = find_bin("mariadbd", SBIN_DIRS)?;
    let client = find_bin("mariadb", SBIN_DIRS)?;
    let owner = if is_root() {
        Some(lookup_user("mysql")?)
    } else {
        None
    };

    let dir = temp_root("loadcell-mariadb-")?;
    let data = dir.path().join("data");
    let run = dir.path().join("run");
    // Private tmpdir: concurrent bootstraps sharing /tmp sometimes clash on their
    // internal temp tables ("Unknown table 'mysql.tmp_user_sys'").
    let tmp = dir.path().join("tmp");
    make_dir(&data, owner, 0o755)?;
    make_dir(&run, owner, 0o755)?;
    make_dir(&tmp, owner, 0o755)?;
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: ServerKind::MariaDb,
        child: None,
        log_path: data.join("err.log"),
        socket: run.join("s.sock"),
        data_dir: data,
        dir: Some(dir),
    };

    let mut cmd = Command::new(&install_db);
    cmd.arg("--no-defaults");
    if owner.is_some() {
        cmd.arg("--user=mysql");
    }
    cmd.arg(format!("--datadir={}", server.data_dir.display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db");
    run_cmd(
        cmd,
        &server.root().join("install-db.log"),
        "mariadb-install-db",
    )?;
    let tls_dir = server.root().join("tls");
    if tls {
        // World-readable: the server may run as `mysql`.
        tls::make_certificates(&tls_dir)?;
    }

    let mut port = first_port.unwrap_or_else(free_port);
    for attempt in 0..=PORT_RETRIES {
        let _ = fs::remove_file(&server.log_path);
        let mut cmd = Command::new(&mariadbd);
        cmd.arg("--no-defaults");
        if owner.is_some() {
            cmd.arg("--user=mysql");
        }
        cmd.arg(format!("--datadir={}", server.data_dir.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--bind-address={bind}"))
            .arg(format!("--port={port}"))
            .arg(format!("--socket={}", server.socket.display()))
            .arg(format!("--pid-file={}", run.join("p.pid").display()))
            .arg("--innodb-buffer-pool-size=256M")
            .arg("--max-connections=600")
            .arg(format!("--log-error={}", server.log_path.display()))
            .args(options);
        if tls {
            cmd.arg(format!("--ssl-ca={}", tls_dir.join("ca.pem").display()))
                .arg(format!(
                    "--ssl-cert={}",
                    tls_dir.join("server.pem").display()
                ))
                .arg(format!(
                    "--ssl-key={}",
                    tls_dir.join("server.key").display()
                ));
        }
        let out = server.root().join("mariadbd.out");
        spawn_server(&mut server, cmd, &out, "mariadbd")?;
        server.port = port;

        let log = server.log_path.clone();
        match wait_ready(&mut server, "mariadbd", |_| {
            fs::read_to_string(&log)
                .map(|s| s.contains("ready for connections"))
                .unwrap_or(false)
        }) {
            Ok(()) => break,
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => port = free_port(),
            Err(StartError::PortInUse) => {
                return Err(format!(
                    "mariadbd: port still taken after {} attempts; tail of {}:\n{}",
                    PORT_RETRIES + 1,
                    server.log_path.display(),
                    server.log_tail(20)
                ))
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }

    let sql = format!(
        "CREATE DATABASE {DB_NAME};\n\
         CREATE USER '{DB_USER}'@'%' IDENTIFIED BY '{DB_PASSWORD}';\n\
         CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}';\n\
         CREATE USER '{DB_USER}'@'localhost' IDENTIFIED BY '{DB_PASSWORD}';\n\
         GRANT ALL PRIVILEGES ON {DB_NAME}.* TO '{DB_USER}'@'%';\n\
         GRANT ALL PRIVILEGES ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';\n\
         GRANT ALL PRIVILEGES ON {DB_NAME}.* TO '{DB_USER}'@'localhost';"
    );
    let mut cmd = Command::new(&client);
    cmd.arg("--no-defaults")
        .arg("--protocol=socket")
        .arg(format!("--socket={}", server.socket.display()))
        .args(["-uroot", "-e", &sql]);
    run_cmd(
        cmd,
        &server.root().join("admin.log"),
        "mariadb (create user)",
    )?;

    server.url = format!(
        "mysql://{DB_USER}:{DB_PASSWORD}@127.0.0.1:{}/{DB_NAME}",
        server.port
    );
    Ok(server)
}

// ---------------------------------------------------------------------------
// PostgreSQL

/// Start a private PostgreSQL server. See the crate docs. TCP connections need a
/// password (scram-sha-256); the unix socket in the data dir is trust for `postgres`.
pub fn postgres() -> Result<TestServer, String> {
    start_postgres(None)
}

/// What [`postgres_logical`] sets: 64 channels' replication slots and
/// walsenders, and more for `positions`' temporary slot copies and a
/// second group.
pub const PG_STREAM_SETTINGS: &[(&str, &str)] = &[
    ("wal_level", "logical"),
    ("max_replication_slots", "160"),
    ("max_wal_senders", "160"),
];

/// [`postgres()`] for logical replication: [`PG_STREAM_SETTINGS`], then
/// `settings` (`name`, `value`), which override them (`wal_level=replica`,
/// a short `wal_sender_timeout`); the user has the REPLICATION attribute
/// (initdb's `pg_hba.conf` already lets replication connections in on
/// loopback, with SCRAM). Not the default: a REPLICATION role may not
/// change its own password, which the SQL tests do.
pub fn postgres_logical(settings: &[(&str, &str)]) -> Result<TestServer, String> {
    let all: Vec<(&str, &str)> = PG_STREAM_SETTINGS.iter().chain(settings).copied().collect();
    start_postgres_with(None, false, &all, true)
}

/// [`postgres()`] started with `settings` (`name`, `value`), for those that
/// only take effect at start (`shared_buffers`, `max_connections`).
pub fn postgres_with(settings: &[(&str, &str)]) -> Result<TestServer, String> {
    start_postgres_with(None, false, settings, false)
}

/// [`postgres()`] with TLS on (`ssl=on`), with a certificate for `localhost`
/// and 127.0.0.1 issued by a CA made for it (with `openssl`). Plain
/// connections are still accepted. The URL is the plain one; add
/// `?sslmode=require`, or `?sslmode=verify-full&sslrootcert=` and
/// [`TestServer::tls_ca`].
pub fn postgres_tls() -> Result<TestServer, String> {
    start_postgres_with(None, true, &[], false)
}

fn start_postgres(first_port: Option<u16>) -> Result<TestServer, String> {
    start_postgres_with(first_port, false, &[], false)
}

fn start_postgres_with(
    first_port: Option<u16>,
    tls: bool,
    settings: &[(&str, &str)],
    replication: bool,
) -> Result<TestServer, String> {
    let bin = pg_bin_dir()?;
    let initdb = bin.join("initdb");
    let postgres = bin.join("postgres");
    let psql = bin.join("psql");
    let pg_isready = bin.join("pg_isready");
    for b in [&initdb, &postgres, &psql, &pg_isready] {
        if !is_executable(b) {
            return Err(format!("{} not found; {INSTALL_HINT}", b.display()));
        }
    }
    let owner = if is_root() {
        Some(lookup_user("postgres")?)
    } else {
        None
    };

    let dir = temp_root("loadcell-postgres-")?;
    let data = dir.path().join("data");
    make_dir(&data, owner, 0o700)?;
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: ServerKind::Postgres,
        child: None,
        log_path: dir.path().join("postgres.log"),
        socket: data.clone(),
        data_dir: data,
        dir: Some(dir),
    };

    let mut cmd = Command::new(&initdb);
    as_user(&mut cmd, owner, server.root());
    cmd.arg("-D")
        .arg(&server.data_dir)
        .args([
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
        ])
        .args([
            "--no-locale",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        ]);
    run_cmd(cmd, &server.root().join("initdb.log"), "initdb")?;
    if tls {
        // The server wants its key private to it (0600, its own).
        let tls_dir = server.root().join("tls");
        tls::make_certificates(&tls_dir)?;
        for (from, to) in [("server.pem", "server.crt"), ("server.key", "server.key")] {
            let dest = server.data_dir.join(to);
            fs::copy(tls_dir.join(from), &dest)
                .map_err(|e| format!("copy {from} to {}: {e}", dest.display()))?;
            fs::set_permissions(&dest, fs::Permissions::from_mode(0o600))
                .map_err(|e| format!("chmod {}: {e}", dest.display()))?;
            if let Some(a) = owner {
                std::os::unix::fs::chown(&dest, Some(a.uid), Some(a.gid))
                    .map_err(|e| format!("chown {}: {e}", dest.display()))?;
            }
        }
    }

    let mut port = first_port.unwrap_or_else(free_port);
    for attempt in 0..=PORT_RETRIES {
        let mut cmd = Command::new(&postgres);
        as_user(&mut cmd, owner, server.root());
        cmd.arg("-D")
            .arg(&server.data_dir)
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(&server.data_dir)
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "max_connections=300"])
            .args(["-c", "fsync=off"])
            .args(["-c", "shared_buffers=128MB"]);
        if tls {
            cmd.args(["-c", "ssl=on"])
                .args(["-c", "ssl_cert_file=server.crt"])
                .args(["-c", "ssl_key_file=server.key"]);
        }
        for (name, value) in settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        let log = server.log_path.clone();
        spawn_server(&mut server, cmd, &log, "postgres")?;
        server.port = port;

        let socket = server.socket.clone();
        match wait_ready(&mut server, "postgres", |port| {
            let mut c = Command::new(&pg_isready);
            c.arg("-q")
                .arg("-h")
                .arg(&socket)
                .arg("-p")
                .arg(port.to_string())
                .args(["-U", "postgres", "-d", "postgres"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            clean_pg_env(&mut c);
            c.status().map(|s| s.success()).unwrap_or(false)
        }) {
            Ok(()) => break,
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => port = free_port(),
            Err(StartError::PortInUse) => {
                return Err(format!(
                    "postgres: port still taken after {} attempts; tail of {}:\n{}",
                    PORT_RETRIES + 1,
                    server.log_path.display(),
                    server.log_tail(20)
                ))
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }

    let mut cmd = Command::new(&psql);
    clean_pg_env(&mut cmd);
    cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h"])
        .arg(&server.socket)
        .arg("-p")
        .arg(server.port.to_string())
        .args(["-U", "postgres", "-d", "postgres"])
        .arg("-c")
        .arg(format!(
            "CREATE ROLE {DB_USER} LOGIN {} PASSWORD '{DB_PASSWORD}'",
            if replication { "REPLICATION" } else { "" }
        ))
        .arg("-c")
        .arg(format!("CREATE DATABASE {DB_NAME} OWNER {DB_USER}"));
    run_cmd(cmd, &server.root().join("admin.log"), "psql (create role)")?;

    server.url = format!(
        "postgres://{DB_USER}:{DB_PASSWORD}@127.0.0.1:{}/{DB_NAME}",
        server.port
    );
    Ok(server)
}

/// The newest PostgreSQL server binaries, preferring 15 (Debian 12's).
fn pg_bin_dir() -> Result<PathBuf, String> {
    let preferred = PathBuf::from("/usr/lib/postgresql/15/bin");
    if is_executable(&preferred.join("postgres")) {
        return Ok(preferred);
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            is_executable(&bin.join("postgres")).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b).ok_or_else(|| {
        format!(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; {INSTALL_HINT}"
        )
    })
}

fn clean_pg_env(cmd: &mut Command) {
    for v in [
        "PGPASSWORD",
        "PGPASSFILE",
        "PGSERVICE",
        "PGSERVICEFILE",
        "PGOPTIONS",
        "PGSSLMODE",
        "PGCONNECT_TIMEOUT",
    ] {
        cmd.env_remove(v);
    }
}

/// SIGKILL the postmaster and every backend/auxiliary process, then free the shared
/// memory they leave behind (the SysV interlock segment and /dev/shm/PostgreSQL.*),
/// which an immediate shutdown would have removed itself.
fn hard_kill_postgres(child: &mut Child, data_dir: &Path) {
    let pid = child.id();
    // Freeze the postmaster so it forks nothing between listing and killing.
    signal(pid, libc::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(1);
    while !matches!(proc_state(pid), Some('T') | Some('t') | Some('Z') | None)
        && Instant::now() < deadline
    {
        sleep(Duration::from_millis(2));
    }
    let kids = children_of(pid);
    let mut shm_files: HashSet<PathBuf> = HashSet::new();
    for p in std::iter::once(pid).chain(kids.iter().copied()) {
        shm_files.extend(pg_shm_files(p));
    }
    let sysv_id = sysv_shmid(data_dir);

    let _ = child.kill();
    let _ = child.wait();
    for &k in &kids {
        signal(k, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while kids.iter().any(|&k| is_live(k)) && Instant::now() < deadline {
        sleep(Duration::from_millis(5));
    }
    for f in shm_files {
        let _ = fs::remove_file(f);
    }
    if let Some(id) = sysv_id {
        // SAFETY: IPC_RMID with a null buffer is a plain syscall on an id we own.
        unsafe {
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

/// Shared-memory id from line 7 of postmaster.pid ("<key> <shmid>").
fn sysv_shmid(data_dir: &Path) -> Option<libc::c_int> {
    let text = fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    let line = text.lines().nth(6)?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn pg_shm_files(pid: u32) -> Vec<PathBuf> {
    fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with("/dev/shm/PostgreSQL."))
        .map(PathBuf::from)
        .collect()
}

// ---------------------------------------------------------------------------
// Processes

enum StartError {
    PortInUse,
    Failed(String),
}

fn spawn_server(
    server: &mut TestServer,
    mut cmd: Command,
    out: &Path,
    what: &str,
) -> Result<(), String> {
    let file = File::create(out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let file2 = file
        .try_clone()
        .map_err(|e| format!("dup {}: {e}", out.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(file2));
    let child = cmd
        .spawn()
        .map_err(|e| format!("could not start {what} ({:?}): {e}", cmd.get_program()))?;
    server.pid = child.id();
    server.child = Some(child);
    Ok(())
}

/// Poll until the port accepts TCP connections and `ready(port)` says yes.
fn wait_ready(
    server: &mut TestServer,
    what: &str,
    mut ready: impl FnMut(u16) -> bool,
) -> Result<(), StartError> {
    let start = Instant::now();
    let port = server.port;
    loop {
        let exited = match server.child.as_mut() {
            Some(c) => c.try_wait().ok().flatten(),
            None => return Err(StartError::Failed(format!("{what}: no process"))),
        };
        if let Some(status) = exited {
            server.child = None;
            let log = fs::read_to_string(&server.log_path).unwrap_or_default();
            if log.contains("Address already in use") {
                return Err(StartError::PortInUse);
            }
            return Err(StartError::Failed(format!(
                "{what} exited ({status}) before accepting connections on port {port}; tail of {}:\n{}",
                server.log_path.display(),
                excerpt(&server.log_path, 30)
            )));
        }
        if tcp_accepts(port) && ready(port) {
            return Ok(());
        }
        if start.elapsed() > READY_TIMEOUT {
            let tail = excerpt(&server.log_path, 30);
            return Err(StartError::Failed(format!(
                "{what} (pid {}) not ready on 127.0.0.1:{port} after {:?}; tail of {}:\n{tail}",
                server.pid,
                READY_TIMEOUT,
                server.log_path.display()
            )));
        }
        sleep(POLL);
    }
}

/// Where built or unpacked servers are kept, readable by a server's user
/// (unlike `~/.cache` under root's private home).
const CACHE: &str = "/var/tmp/loadcell-testkit";

/// `CACHE/entry`, made at the first use on this machine: `make` fills a
/// staging directory of this process's own and returns what in it to
/// rename into place, so that two test binaries getting here at once each
/// make their own and the loser's is dropped. `is_made` tells a finished
/// entry.
fn install_once(
    entry: &str,
    is_made: impl Fn(&Path) -> bool,
    make: impl FnOnce(&Path) -> Result<PathBuf, String>,
) -> Result<PathBuf, String> {
    let home = Path::new(CACHE).join(entry);
    if is_made(&home) {
        return Ok(home);
    }
    let staging = Path::new(CACHE).join(format!(".{entry}.{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).map_err(|e| format!("mkdir {}: {e}", staging.display()))?;
    let result = make(&staging).and_then(|made| match fs::rename(&made, &home) {
        Err(e) if !is_made(&home) => Err(format!(
            "could not move {} to {}: {e}",
            made.display(),
            home.display()
        )),
        _ => Ok(home.clone()),
    });
    let _ = fs::remove_dir_all(&staging);
    result
}

/// The body of `GET path` on 127.0.0.1 (HTTP/1.0), if it answered: read
/// to its `Content-Length`, the end of a chunked body (left framed), or
/// the end of the connection, for servers that keep it open (QuestDB).
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(tcp, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tcp.read(&mut buf).ok()?;
        answer.extend_from_slice(&buf[..n]);
        if n == 0 || is_complete(&answer) {
            break;
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    Some(answer.split_once("\r\n\r\n")?.1.to_string())
}

/// Whether an HTTP answer read so far is whole, by its framing.
fn is_complete(answer: &[u8]) -> bool {
    let text = String::from_utf8_lossy(answer).to_ascii_lowercase();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    if head.contains("transfer-encoding: chunked") {
        return body.ends_with("0\r\n\r\n");
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|n| n.trim().parse::<usize>().ok());
    length.is_some_and(|n| body.len() >= n)
}

/// Run a setup command to completion (with a timeout), output to `log`.
fn run_cmd(mut cmd: Command, log: &Path, what: &str) -> Result<(), String> {
    let file = File::create(log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let file2 = file
        .try_clone()
        .map_err(|e| format!("dup {}: {e}", log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(file2));
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not run {what} ({:?}): {e}", cmd.get_program()))?;
    match wait_timeout(&mut child, SETUP_TIMEOUT) {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!(
            "{what} failed ({s}); output:\n{}",
            excerpt(log, 30)
        )),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!(
                "{what} did not finish within {SETUP_TIMEOUT:?}; output:\n{}",
                excerpt(log, 30)
            ))
        }
    }
}

fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < deadline => sleep(Duration::from_millis(5)),
            Ok(None) => return None,
            Err(_) => return None,
        }
    }
}

/// Signals the process group led by `pid` (a server started in its own).
fn signal_group(pid: u32, sig: libc::c_int) {
    // SAFETY: killpg(2) on the group of a child we started (not reaped yet).
    unsafe {
        libc::killpg(pid as libc::pid_t, sig);
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a pid we started (and have not reaped yet).
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Process state letter from /proc/PID/stat, None if the process does not exist.
fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().next()?.chars().next()
}

/// Exists and is not a zombie.
fn is_live(pid: u32) -> bool {
    !matches!(proc_state(pid), None | Some('Z') | Some('X'))
}

fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let after = &s[s.rfind(')')? + 1..];
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Files, users, binaries

#[derive(Debug, Clone, Copy)]
struct Account {
    uid: u32,
    gid: u32,
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn lookup_user(name: &str) -> Result<Account, String> {
    let passwd = fs::read_to_string("/etc/passwd").map_err(|e| format!("read /etc/passwd: {e}"))?;
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == name)
        .and_then(|f| {
            Some(Account {
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
            })
        })
        .ok_or_else(|| format!("system user `{name}` does not exist; {INSTALL_HINT}"))
}

fn as_user(cmd: &mut Command, owner: Option<Account>, cwd: &Path) {
    if let Some(a) = owner {
        cmd.uid(a.uid).gid(a.gid);
    }
    // The server user cannot read root's home, so don't leave it as the cwd.
    cmd.current_dir(cwd);
}

/// A new temp dir that the server users can traverse.
fn temp_root(prefix: &str) -> Result<tempfile::TempDir, String> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("create temp dir: {e}"))?;
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", dir.path().display()))?;
    Ok(dir)
}

fn make_dir(path: &Path, owner: Option<Account>, mode: u32) -> Result<(), String> {
    fs::create_dir(path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))?;
    if let Some(a) = owner {
        std::os::unix::fs::chown(path, Some(a.uid), Some(a.gid))
            .map_err(|e| format!("chown {}: {e}", path.display()))?;
    }
    Ok(())
}

fn is_executable(p: &Path) -> bool {
    fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `name` from `extra` dirs or PATH, or an error pointing at the install script.
fn find_bin(name: &str, extra: &[&str]) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or_else(|| format!("`{name}` not found in PATH or {extra:?}; {INSTALL_HINT}"))
}

/// Error lines (which tools like mariadb-install-db print long before their final
/// boilerplate) followed by the tail of the log.
fn excerpt(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("FATAL") || l.contains("PANIC"))
        .take(10)
        .collect();
    let tail = tail(path, lines);
    if errors.is_empty() {
        tail
    } else {
        format!("{}\n...\n{tail}", errors.join("\n"))
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = match fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => return format!("(cannot read {}: {e})", path.display()),
    };
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests;
