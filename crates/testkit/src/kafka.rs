//! Kafka 3.9.2 in KRaft combined mode (one process both broker and
//! controller) on free 127.0.0.1 ports, one per test binary (see
//! [`super::shared`]): it starts in a few seconds but takes 350 MB. URL
//! `kafka://127.0.0.1:P`, plaintext.
//!
//! The jars come from Maven Central through `kafka-pom.xml` (`mvn
//! dependency:copy-dependencies`, cached in `~/.m2`) into
//! `/var/tmp/loadcell-testkit/kafka-3.9.2/lib`, once per machine; the same
//! jars run Kafka's own `ProducerPerformance` and `ConsumerPerformance`
//! for the benchmarks ([`kafka_lib`]). Each broker formats its own log dir
//! in a temp dir (`StorageTool format`), then starts; it is ready when it
//! answers a metadata request with itself as a broker.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::keeper::{die_with_parent, shared, Kept};
use super::shared::SharedServer;
use super::{find_bin, free_port, install_once, on_free_ports, run_cmd, temp_root, Start};

const VERSION: &str = "3.9.2";
const POM: &str = include_str!("kafka-pom.xml");
const LOG4J: &str = include_str!("kafka-log4j.properties");
/// Any fixed cluster id will do for a throwaway broker (this one is Kafka's
/// quickstart's); `StorageTool random-uuid` would cost another JVM start.
const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qk";
const HEAP: &str = "-Xmx512m";
/// How long the broker may take to answer metadata: a JVM on a busy
/// 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// The Kafka broker of this test binary, started at the first call.
pub fn kafka() -> Result<&'static SharedServer, String> {
    static SERVER: OnceLock<Result<SharedServer, String>> = OnceLock::new();
    shared(&SERVER, "kafka", start)
}

/// The directory of Kafka's jars (for `java -cp 'DIR/*'`), fetched at the
/// first use on this machine.
pub fn kafka_lib() -> Result<PathBuf, String> {
    let entry = format!("kafka-{VERSION}");
    let home = install_once(
        &entry,
        |home| home.join(format!("lib/kafka_2.13-{VERSION}.jar")).exists(),
        |staging| {
            let pom = staging.join("pom.xml");
            fs::write(&pom, POM).map_err(|e| format!("write {}: {e}", pom.display()))?;
            let home = staging.join(&entry);
            let mut mvn = Command::new("mvn");
            mvn.args(["-q", "-f"])
                .arg(&pom)
                .arg("dependency:copy-dependencies")
                .arg(format!("-DoutputDirectory={}", home.join("lib").display()))
                .current_dir(staging);
            run_cmd(
                mvn,
                &staging.join("mvn.log"),
                "mvn dependency:copy-dependencies",
            )
            .map_err(|e| format!("{e}\n(scripts/install-test-deps.sh fetches the jars)"))?;
            Ok(home)
        },
    )?;
    Ok(home.join("lib"))
}

fn start() -> Result<SharedServer, String> {
    let lib = kafka_lib()?;
    let java = find_bin("java", &[])?;
    on_free_ports("kafka", || start_once(&java, &lib))
}

fn start_once(java: &Path, lib: &Path) -> Result<SharedServer, Start> {
    let dir = temp_root("loadcell-kafka-").map_err(Start::Failed)?.keep();
    let (port, controller_port) = (free_port(), free_port());
    let properties = dir.join("server.properties");
    let log4j = dir.join("log4j.properties");
    write_config(&dir, port, controller_port).map_err(Start::Failed)?;
    let classpath = lib.join("*");
    let mut format = Command::new(java);
    format
        .arg("-cp")
        .arg(&classpath)
        .args(["kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c"])
        .arg(&properties);
    run_cmd(format, &dir.join("format.log"), "kafka StorageTool format").map_err(Start::Failed)?;

    let log_path = dir.join("server.log");
    let log = fs::File::create(&log_path)
        .map_err(|e| Start::Failed(format!("create {}: {e}", log_path.display())))?;
    let log2 = log
        .try_clone()
        .map_err(|e| Start::Failed(format!("dup {}: {e}", log_path.display())))?;
    let mut cmd = Command::new(java);
    cmd.arg(HEAP)
        .arg(format!("-Dlog4j.configuration=file:{}", log4j.display()))
        .arg("-cp")
        .arg(&classpath)
        .arg("kafka.Kafka")
        .arg(&properties)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        // Killed as a group at exit (`SharedServer::stop`).
        .process_group(0);
    die_with_parent(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| Start::Failed(format!("could not start {}: {e}", java.display())))?;
    let server = SharedServer {
        url: format!("kafka://127.0.0.1:{port}"),
        port,
        pid: child.id(),
        group: child.id(),
        log_path,
        dir,
        child: Mutex::new(Some(child)),
        helpers: Mutex::default(),
    };
    match wait_ready(&server) {
        Ok(()) => Ok(server),
        Err(e) => {
            server.stop();
            Err(e)
        }
    }
}

fn write_config(dir: &Path, port: u16, controller_port: u16) -> Result<(), String> {
    let properties = format!(
        "process.roles=broker,controller\n\
         node.id=1\n\
         controller.quorum.voters=1@127.0.0.1:{controller_port}\n\
         listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
         controller.listener.names=CONTROLLER\n\
         listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
         inter.broker.listener.name=PLAINTEXT\n\
         log.dirs={}\n\
         num.partitions=1\n\
         offsets.topic.replication.factor=1\n\
         offsets.topic.num.partitions=4\n\
         transaction.state.log.replication.factor=1\n\
         transaction.state.log.min.isr=1\n\
         group.initial.rebalance.delay.ms=0\n",
        dir.join("data").display()
    );
    for (name, text) in [
        ("server.properties", properties.as_str()),
        ("log4j.properties", LOG4J),
    ] {
        let path = dir.join(name);
        fs::write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Ready once a metadata request names the broker itself.
fn wait_ready(server: &SharedServer) -> Result<(), Start> {
    server.wait_until(
        "answering metadata",
        READY_TIMEOUT,
        "Address already in use",
        |s| brokers_in_metadata(s.port).is_some_and(|n| n > 0),
    )
}

/// How many brokers a Metadata v0 request for no topics lists.
fn brokers_in_metadata(port: u16) -> Option<i32> {
    let mut tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let client_id = b"testkit";
    let mut body = Vec::new();
    body.extend_from_slice(&3i16.to_be_bytes()); // Metadata
    body.extend_from_slice(&0i16.to_be_bytes()); // version 0
    body.extend_from_slice(&1i32.to_be_bytes()); // correlation id
    body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    body.extend_from_slice(client_id);
    body.extend_from_slice(&0i32.to_be_bytes()); // topics: none listed
    tcp.write_all(&(body.len() as i32).to_be_bytes()).ok()?;
    tcp.write_all(&body).ok()?;
    // Size, correlation id, then the brokers array's length.
    let mut head = [0u8; 12];
    tcp.read_exact(&mut head).ok()?;
    Some(i32::from_be_bytes(head[8..12].try_into().ok()?))
}
