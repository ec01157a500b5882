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
mod docker;
mod haproxy;
mod hbase;
mod kafka;
mod keeper;
mod mariadb;
mod memcached;
mod mosquitto;
mod netns;
mod nginx;
mod postgres;
mod process;
mod rabbitmq;
mod redis;
mod search;
mod sharding_proxy;
mod shared;
mod tls;
mod ts;

pub use cassandra::{cassandra, CassandraServer};
pub use docker::{docker_engine, DockerEngine};
pub use haproxy::{haproxy, LoadBalancer};
pub use hbase::{hbase, HbaseServer};
pub use kafka::{kafka, kafka_lib};
pub use mariadb::{mariadb, mariadb_on_every_address, mariadb_tls, mariadb_with};
pub use memcached::memcached;
pub use mosquitto::{mosquitto, mosquitto_with, Mosquitto};
pub use netns::ClientNamespaces;
pub use nginx::{nginx, nginx_basic_auth_proxy, nginx_tls, ECHO_LOG, INDEX_BYTES};
use postgres::hard_kill_postgres;
pub use postgres::{postgres, postgres_logical, postgres_tls, postgres_with};
use process::{
    as_user, children_of, excerpt, find_bin, http_get, install_once, is_executable, is_live,
    is_root, lookup_user, make_dir, on_free_ports, proc_state, run_cmd, signal, signal_group,
    spawn_server, tail, temp_root, wait_ready, wait_timeout, Account, Start, StartError,
};
pub use rabbitmq::rabbitmq;
pub use redis::{
    redis, redis_at, redis_cli, redis_cluster, redis_tls, redis_with, redis_with_password,
    TestCluster,
};
pub use search::{elasticsearch, opensearch, search_request};
pub use sharding_proxy::{sharding_proxy, sharding_proxy_lib};
pub use shared::SharedServer;
pub use tls::make_certificates;
pub use ts::{
    influxdb, influxdb_with_http, node_exporter, prometheus, questdb, victoriametrics, TsServer,
};

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

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
    Mosquitto,
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
            | ServerKind::ShardingProxy
            | ServerKind::Mosquitto => {
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
            | ServerKind::ShardingProxy
            | ServerKind::Mosquitto => self.kill(),
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

#[cfg(test)]
mod tests;
