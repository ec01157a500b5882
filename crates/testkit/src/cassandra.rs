//! Cassandra 4.1.10 on free 127.0.0.1 ports, one per test binary (see
//! [`crate::keeper`]): ~40 s to start and 1.25 GB, so [`cassandra()`]
//! starts it at the first call and hands every later caller the same one
//! (tests on it use keyspaces or tables of their own). URL
//! `cql://127.0.0.1:P/KEYSPACE`, no authentication.
//!
//! The jars come from Maven Central: `mvn dependency:copy-dependencies` on
//! the pom in `assets/cassandra/` (artifacts cached in `~/.m2`), into
//! `/var/tmp/loadcell-testkit/cassandra-4.1.10/lib` once per machine
//! ([`install_once`]). Each server gets its own `cassandra.yaml`, JVM
//! options and data in a temp dir. On Java 17, Cassandra 4.1 needs the
//! jamm agent on the command line ("can't get field offset on a hidden
//! class" without it).

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::keeper::{die_with_parent, shared, Kept};
use super::{
    excerpt, free_port, install_once, on_free_ports, run_cmd, signal_group, tail, temp_root, Start,
};

const VERSION: &str = "4.1.10";
const POM: &str = include_str!("../assets/cassandra/pom.xml");
const YAML: &str = include_str!("../assets/cassandra/cassandra.yaml");
const JVM_OPTIONS: &str = include_str!("../assets/cassandra/jvmopts");
const LOGBACK: &str = include_str!("../assets/cassandra/logback.xml");
const JAMM: &str = "jamm-0.3.2.jar";

/// How long Cassandra may take to answer CQL: a JVM starting on a busy
/// 2-core machine (~40 s when idle).
const READY_TIMEOUT: Duration = Duration::from_secs(240);

/// The Cassandra of a test binary.
#[derive(Debug)]
pub struct CassandraServer {
    /// `127.0.0.1:P`, the CQL port: append `/KEYSPACE` to `cql://`.
    pub address: String,
    pub port: u16,
    /// PID of the JVM, the leader of its process group.
    pub pid: u32,
    /// The server's stdout and stderr (its log).
    pub log_path: PathBuf,
    /// How long it took to answer CQL.
    pub started_in: Duration,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

impl CassandraServer {
    /// `cql://127.0.0.1:P/keyspace`.
    pub fn url(&self, keyspace: &str) -> String {
        format!("cql://{}/{keyspace}", self.address)
    }

    /// The last `lines` lines of the server log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log_path, lines)
    }

    /// Kills the server at once (a crash): other tests of the binary lose
    /// it too, so such a test needs a binary of its own.
    pub fn kill(&self) {
        signal_group(self.pid, libc::SIGKILL);
    }
}

impl Kept for CassandraServer {
    fn stop(&self) {
        let Some(mut child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        signal_group(self.pid, libc::SIGKILL);
        let _ = child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The Cassandra 4.1.10 of this test binary, started at the first call.
pub fn cassandra() -> Result<&'static CassandraServer, String> {
    static SERVER: OnceLock<Result<CassandraServer, String>> = OnceLock::new();
    shared(&SERVER, "cassandra", start)
}

fn start() -> Result<CassandraServer, String> {
    let home = install()?;
    on_free_ports("cassandra", || start_once(&home))
}

fn start_once(home: &Path) -> Result<CassandraServer, Start> {
    let dir = temp_root("loadcell-cassandra-")
        .map_err(Start::Failed)?
        .keep();
    let port = free_port();
    let fill = |text: &str| {
        text.replace("@DIR@", &dir.display().to_string())
            .replace("@STORAGE_PORT@", &free_port().to_string())
            .replace("@SSL_STORAGE_PORT@", &free_port().to_string())
            .replace("@NATIVE_PORT@", &port.to_string())
            .replace("@JMX_PORT@", &free_port().to_string())
    };
    let conf = dir.join("conf");
    fs::create_dir(&conf).map_err(|e| Start::Failed(format!("mkdir {}: {e}", conf.display())))?;
    // Each placeholder takes one port for all its places (the seed's is
    // the storage port).
    let yaml = fill(YAML);
    for (name, text) in [("cassandra.yaml", yaml.as_str()), ("logback.xml", LOGBACK)] {
        let path = conf.join(name);
        fs::write(&path, text)
            .map_err(|e| Start::Failed(format!("write {}: {e}", path.display())))?;
    }
    let log_path = dir.join("server.log");
    let log = fs::File::create(&log_path)
        .map_err(|e| Start::Failed(format!("create {}: {e}", log_path.display())))?;
    let log2 = log
        .try_clone()
        .map_err(|e| Start::Failed(format!("dup {}: {e}", log_path.display())))?;
    let mut cmd = Command::new("java");
    cmd.arg(format!(
        "-javaagent:{}",
        home.join("lib").join(JAMM).display()
    ))
    .args(fill(JVM_OPTIONS).split_whitespace())
    .arg("-cp")
    .arg(format!("{}:{}/lib/*", conf.display(), home.display()))
    .arg("org.apache.cassandra.service.CassandraDaemon")
    .current_dir(&dir)
    .stdin(Stdio::null())
    .stdout(Stdio::from(log))
    .stderr(Stdio::from(log2))
    .process_group(0);
    die_with_parent(&mut cmd);
    let began = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| Start::Failed(format!("could not start java: {e}")))?;
    let mut server = CassandraServer {
        address: format!("127.0.0.1:{port}"),
        port,
        pid: child.id(),
        log_path,
        started_in: Duration::ZERO,
        dir,
        child: Mutex::new(Some(child)),
    };
    match wait_cql(&server, began) {
        Ok(()) => {
            server.started_in = began.elapsed();
            Ok(server)
        }
        Err(e) => {
            server.stop();
            Err(e)
        }
    }
}

/// Polls the CQL port until it answers an OPTIONS request, or says why
/// not with the log's tail.
fn wait_cql(server: &CassandraServer, began: Instant) -> Result<(), Start> {
    loop {
        let exited = server
            .child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        if let Some(status) = exited {
            let log = excerpt(&server.log_path, 30);
            return Err(if log.contains("Address already in use") {
                Start::PortInUse(log)
            } else {
                Start::Failed(format!(
                    "exited ({status}) before it answered CQL; tail of {}:\n{log}",
                    server.log_path.display()
                ))
            });
        }
        if answers_cql(server.port) {
            return Ok(());
        }
        if began.elapsed() > READY_TIMEOUT {
            return Err(Start::Failed(format!(
                "(pid {}) no CQL answer on {} after {READY_TIMEOUT:?}; tail of {}:\n{}",
                server.pid,
                server.address,
                server.log_path.display(),
                excerpt(&server.log_path, 30)
            )));
        }
        sleep(Duration::from_millis(500));
    }
}

/// Whether a CQL v4 OPTIONS request on `port` gets its SUPPORTED answer.
fn answers_cql(port: u16) -> bool {
    const OPTIONS: [u8; 9] = [0x04, 0, 0, 0, 0x05, 0, 0, 0, 0];
    const RESPONSE_V4: u8 = 0x84;
    const SUPPORTED: u8 = 0x06;
    let answer = || -> std::io::Result<[u8; 9]> {
        let mut tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
        tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
        tcp.write_all(&OPTIONS)?;
        let mut header = [0u8; 9];
        tcp.read_exact(&mut header)?;
        Ok(header)
    };
    answer().is_ok_and(|h| h[0] == RESPONSE_V4 && h[4] == SUPPORTED)
}

/// The jars, fetched at the first use on this machine (see
/// [`install_once`]); `scripts/install-test-deps.sh` fills `~/.m2` first
/// so that tests do not download.
fn install() -> Result<PathBuf, String> {
    let entry = format!("cassandra-{VERSION}");
    install_once(
        &entry,
        |home| home.join("lib").join(JAMM).exists(),
        |staging| {
            fs::write(staging.join("pom.xml"), POM).map_err(|e| format!("write pom.xml: {e}"))?;
            let home = staging.join(&entry);
            let mut mvn = Command::new("mvn");
            mvn.args([
                "-q",
                "-B",
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
            ])
            .arg(format!("-DoutputDirectory={}", home.join("lib").display()))
            .current_dir(staging);
            run_cmd(
                mvn,
                &staging.join("mvn.log"),
                "mvn dependency:copy-dependencies",
            )
            .map_err(|e| {
                format!("{e}\n(scripts/install-test-deps.sh installs Maven and fetches the jars)")
            })?;
            Ok(home)
        },
    )
}
