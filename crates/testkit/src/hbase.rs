//! HBase 2.5.8 standalone (master, region server and ZooKeeper in one
//! JVM) and its Thrift2 gateway, on free 127.0.0.1 ports, one per test
//! binary ([`hbase()`]): the master takes 15 s or more to start and the
//! two JVMs half a gigabyte, so every test of a binary shares them (each
//! with a table of its own). `url` is `hbase+thrift://127.0.0.1:P`.
//!
//! The jars come from Maven Central (`assets/hbase/pom.xml`, `mvn
//! dependency:copy-dependencies`, cached in `~/.m2`) into
//! `/var/tmp/loadcell-testkit/hbase-2.5.8/lib`, once per machine, less
//! the Hadoop 2 servlet and Jetty 6 jars (the Thrift2 gateway's Jetty 9
//! dies on their `ServletContext`: `NoSuchMethodError …createFilter`)
//! and the reload4j binding (log4j2 logs).
//!
//! The servers live as long as the test binary: both are killed by PID
//! (their process groups) and their temp dir removed at exit, and the
//! kernel kills them (parent-death signal) if the binary is killed.

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
    excerpt, free_port, install_once, on_free_ports, run_cmd, signal_group, tcp_accepts, temp_root,
    Start,
};

const VERSION: &str = "2.5.8";
const POM: &str = include_str!("../assets/hbase/pom.xml");
const SITE: &str = include_str!("../assets/hbase/hbase-site.xml");
const JVM_OPTS: &str = include_str!("../assets/hbase/jvmopts");
const LOG4J2: &str = include_str!("../assets/hbase/log4j2.properties");

/// Jars `copy-dependencies` brings that must not be on the classpath.
const UNWANTED_JARS: &[&str] = &[
    "servlet-api-2.5.jar",
    "jetty-6.1.26.jar",
    "jetty-util-6.1.26.jar",
    "jetty-sslengine-6.1.26.jar",
    "slf4j-reload4j-",
    "reload4j-",
];

/// How long the master may take to serve (meta assigned, tables listed
/// through the gateway) on a busy 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// The running HBase and Thrift2 gateway of a test binary.
#[derive(Debug)]
pub struct HbaseServer {
    /// `hbase+thrift://127.0.0.1:P`.
    pub url: String,
    /// The Thrift2 gateway's port.
    pub port: u16,
    /// The gateway's web UI port (`/thrift.jsp` names HBase's version).
    pub info_port: u16,
    /// The master's web UI port: its status page and `/jmx` (with the
    /// region server's beans: standalone, they share the JVM).
    pub master_info_port: u16,
    /// PIDs of the master's and the gateway's JVMs, each the leader of its
    /// process group.
    pub master_pid: u32,
    pub thrift_pid: u32,
    master_log: PathBuf,
    thrift_log: PathBuf,
    dir: PathBuf,
    children: Mutex<Vec<Child>>,
}

impl HbaseServer {
    /// The temp dir of its config, data and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The last `lines` lines of the master's and the gateway's logs, for
    /// failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        format!(
            "master ({}):\n{}\nThrift2 gateway ({}):\n{}",
            self.master_log.display(),
            excerpt(&self.master_log, lines),
            self.thrift_log.display(),
            excerpt(&self.thrift_log, lines)
        )
    }
}

impl Kept for HbaseServer {
    /// Kills both process groups, waits for the JVMs and removes the temp
    /// dir.
    fn stop(&self) {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        for child in children.iter_mut() {
            signal_group(child.id(), libc::SIGKILL);
            let _ = child.wait();
        }
        if !children.is_empty() {
            children.clear();
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The HBase of this test binary, started at the first call.
pub fn hbase() -> Result<&'static HbaseServer, String> {
    static SERVER: OnceLock<Result<HbaseServer, String>> = OnceLock::new();
    shared(&SERVER, "hbase", start)
}

fn start() -> Result<HbaseServer, String> {
    let home = install()?;
    on_free_ports("hbase", || start_once(&home))
}

fn start_once(home: &Path) -> Result<HbaseServer, Start> {
    let failed = |e: String| Start::Failed(format!("hbase: {e}"));
    let dir = temp_root("loadcell-hbase-").map_err(failed)?.keep();
    let (port, info_port, master_info_port) = (free_port(), free_port(), free_port());
    write_config(&dir, master_info_port).map_err(failed)?;
    let classpath = format!("{}:{}/lib/*", dir.join("conf").display(), home.display());
    let jvm_opts = JVM_OPTS.replace("@DIR@", &dir.display().to_string());
    let java = |log: &Path, main: &str, args: &[&str]| -> Result<Child, Start> {
        let out =
            fs::File::create(log).map_err(|e| failed(format!("create {}: {e}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(|e| failed(format!("dup {}: {e}", log.display())))?;
        let mut cmd = Command::new("java");
        cmd.args(jvm_opts.split_whitespace())
            .arg("-cp")
            .arg(&classpath)
            .arg(main)
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0);
        die_with_parent(&mut cmd);
        cmd.spawn()
            .map_err(|e| failed(format!("could not start java {main}: {e}")))
    };
    let master_log = dir.join("master.log");
    let thrift_log = dir.join("thrift.log");
    let master = java(
        &master_log,
        "org.apache.hadoop.hbase.master.HMaster",
        &["start"],
    )?;
    let mut server = HbaseServer {
        url: format!("hbase+thrift://127.0.0.1:{port}"),
        port,
        info_port,
        master_info_port,
        master_pid: master.id(),
        thrift_pid: 0,
        master_log,
        thrift_log,
        dir: dir.clone(),
        children: Mutex::new(vec![master]),
    };
    let (port_arg, info_arg) = (port.to_string(), info_port.to_string());
    let gateway = java(
        &server.thrift_log,
        "org.apache.hadoop.hbase.thrift2.ThriftServer",
        &[
            "-b",
            "127.0.0.1",
            "-p",
            &port_arg,
            "--infoport",
            &info_arg,
            "start",
        ],
    );
    match gateway {
        Ok(child) => {
            server.thrift_pid = child.id();
            server.children.lock().unwrap().push(child);
        }
        Err(e) => {
            server.stop();
            return Err(e);
        }
    }
    match wait_ready(&server) {
        Ok(()) => Ok(server),
        Err(e) => {
            server.stop();
            Err(e)
        }
    }
}

/// `conf/` in `dir`: the site file with free ports for ZooKeeper, the
/// master and the region server, the master's web UI on `master_info_port`
/// (everything on 127.0.0.1, the region server's web UI off), and the
/// log4j2 configuration.
fn write_config(dir: &Path, master_info_port: u16) -> Result<(), String> {
    let conf = dir.join("conf");
    fs::create_dir(&conf).map_err(|e| format!("mkdir {}: {e}", conf.display()))?;
    let site = SITE
        .replace("@DIR@", &dir.display().to_string())
        .replace("@ZK_PORT@", &free_port().to_string())
        .replace("@MASTER_PORT@", &free_port().to_string())
        .replace("@REGIONSERVER_PORT@", &free_port().to_string())
        .replace("@MASTER_INFO_PORT@", &master_info_port.to_string());
    for (name, text) in [
        ("hbase-site.xml", site.as_str()),
        ("log4j2.properties", LOG4J2),
    ] {
        let path = conf.join(name);
        fs::write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Waits until the gateway lists the tables (which needs the master up
/// and `hbase:meta` assigned), or says why not with the logs.
fn wait_ready(server: &HbaseServer) -> Result<(), Start> {
    let start = Instant::now();
    loop {
        let exited = server
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .find_map(|c| c.try_wait().ok().flatten());
        if let Some(status) = exited {
            let logs = server.log_tail(30);
            return Err(if logs.contains("BindException") {
                Start::PortInUse(logs)
            } else {
                Start::Failed(format!(
                    "hbase: a JVM exited ({status}) before HBase served:\n{logs}"
                ))
            });
        }
        if tcp_accepts(server.port) && lists_tables(server.port) {
            return Ok(());
        }
        if start.elapsed() > READY_TIMEOUT {
            return Err(Start::Failed(format!(
                "hbase: the Thrift2 gateway on 127.0.0.1:{} did not list the tables within \
                 {READY_TIMEOUT:?}:\n{}",
                server.port,
                server.log_tail(30)
            )));
        }
        sleep(Duration::from_millis(500));
    }
}

/// Whether `getTableNamesByPattern(includeSysTables = false)` succeeds on
/// the gateway at `port`: its reply's result is field 0, a list (field 1
/// would be the `TIOError` of a master not serving yet).
fn lists_tables(port: u16) -> bool {
    const METHOD: &[u8] = b"getTableNamesByPattern";
    let mut call = Vec::new();
    call.extend_from_slice(&0x8001_0001u32.to_be_bytes());
    call.extend_from_slice(&(METHOD.len() as u32).to_be_bytes());
    call.extend_from_slice(METHOD);
    call.extend_from_slice(&1u32.to_be_bytes());
    // Field 2, a bool, false; then the end of the arguments.
    call.extend_from_slice(&[2, 0, 2, 0, 0]);
    let answered = || -> std::io::Result<bool> {
        let mut tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
        tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
        tcp.write_all(&call)?;
        // Version and type, the name, the sequence id, the first field's
        // type and id.
        let mut reply = vec![0; 4 + 4 + METHOD.len() + 4 + 3];
        tcp.read_exact(&mut reply)?;
        let field = &reply[reply.len() - 3..];
        Ok(reply[..4] == 0x8001_0002u32.to_be_bytes() && field == [15, 0, 0])
    };
    answered().unwrap_or(false)
}

/// The jars, fetched and trimmed at the first use on this machine (see
/// [`install_once`]).
fn install() -> Result<PathBuf, String> {
    let entry = format!("hbase-{VERSION}");
    let thrift_jar = format!("lib/hbase-thrift-{VERSION}.jar");
    install_once(
        &entry,
        |home| home.join(&thrift_jar).exists(),
        |staging| {
            let home = staging.join(&entry);
            let lib = home.join("lib");
            fs::write(staging.join("pom.xml"), POM)
                .map_err(|e| format!("write {}/pom.xml: {e}", staging.display()))?;
            let mut mvn = Command::new("mvn");
            mvn.args(["-q", "-B", "dependency:copy-dependencies"])
                .arg(format!("-DoutputDirectory={}", lib.display()))
                .current_dir(staging);
            run_cmd(
                mvn,
                &staging.join("mvn.log"),
                "mvn dependency:copy-dependencies",
            )
            .map_err(|e| {
                format!("{e}\n(scripts/install-test-deps.sh installs Maven and fetches the jars)")
            })?;
            let jars = fs::read_dir(&lib).map_err(|e| format!("read {}: {e}", lib.display()))?;
            for jar in jars.flatten() {
                let name = jar.file_name();
                let name = name.to_string_lossy();
                if UNWANTED_JARS.iter().any(|u| name.starts_with(u)) {
                    fs::remove_file(jar.path())
                        .map_err(|e| format!("remove {}: {e}", jar.path().display()))?;
                }
            }
            Ok(home)
        },
    )
}
