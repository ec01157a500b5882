//! Time-series servers on free 127.0.0.1 ports, each a fresh one per call
//! (they start in a fraction of a second, QuestDB in about two): its HTTP
//! API at `server.url` (`http://127.0.0.1:P`), for InfluxDB and
//! VictoriaMetrics an OpenTSDB HTTP listener at [`TsServer::opentsdb_port`],
//! and the TCP ports their line protocol and telnet `put` listeners take.
//!
//! - [`influxdb()`] (and [`influxdb_with_http`]): InfluxDB 1.x (Debian's `influxd`) from the config in
//!   `influxdb.conf`, its OpenTSDB listener writing to database `opentsdb`
//!   (which must exist: the listener does not create it);
//! - [`prometheus()`]: with the remote-write receiver and the admin API
//!   (series deletion), no scrape jobs;
//! - [`node_exporter()`]: Debian's `prometheus-node-exporter`, the host's
//!   CPU, memory, load, disk and network as Prometheus text at `/metrics`
//!   (what `--server-metrics` scrapes);
//! - [`victoriametrics()`]: v1.151.0, built once on this machine with
//!   `go install` into `/var/tmp/loadcell-testkit/` (its version stamped
//!   in, as its release builds are);
//! - [`questdb()`]: 9.3.4, the jar from the local Maven repository, every
//!   listener on loopback, telemetry off.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{
    find_bin, free_port, http_get, install_once, run_cmd, spawn_server, tcp_accepts, temp_root,
    wait_ready, ServerKind, StartError, TestServer, PORT_RETRIES,
};

const INFLUXDB_CONF: &str = include_str!("influxdb.conf");
const VICTORIAMETRICS: &str = "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics";
const VICTORIAMETRICS_VERSION: &str = "v1.151.0";
const QUESTDB_VERSION: &str = "9.3.4";

/// A running time-series server, stopped (by PID) and its temp dir removed
/// on drop.
#[derive(Debug)]
pub struct TsServer {
    /// `server.url` is the HTTP API, `http://127.0.0.1:P`.
    pub server: TestServer,
    /// The OpenTSDB HTTP listener's port (InfluxDB, VictoriaMetrics).
    pub opentsdb_port: Option<u16>,
    /// The port taking Influx line protocol over TCP (QuestDB's ILP port,
    /// VictoriaMetrics' `-influxListenAddr`).
    pub influx_tcp_port: Option<u16>,
    /// The port taking OpenTSDB's telnet `put` (VictoriaMetrics'
    /// `-opentsdbListenAddr`; InfluxDB's listener, on `opentsdb_port`).
    pub opentsdb_tcp_port: Option<u16>,
}

/// The command that starts a server, given its temp dir, its HTTP port and
/// the further ports it needs.
type MakeCommand<'a> = &'a dyn Fn(&Path, u16, &[u16]) -> Result<Command, String>;

/// How one server is started.
struct Spec<'a> {
    kind: ServerKind,
    what: &'static str,
    /// Ports beyond the HTTP one: the OpenTSDB listener's first.
    extra_ports: usize,
    opentsdb: bool,
    /// Which of the extra ports take line protocol and `put` over TCP.
    influx_tcp: Option<usize>,
    opentsdb_tcp: Option<usize>,
    command: MakeCommand<'a>,
    /// A path whose answer holds `ready_text` once the server serves.
    ready_path: &'static str,
    ready_text: &'static str,
}

/// InfluxDB 1.x with its OpenTSDB listener.
pub fn influxdb() -> Result<TsServer, String> {
    influxdb_with_http("")
}

/// InfluxDB 1.x with `settings` added to its `[http]` section (e.g.
/// `max-body-size = 10000`).
pub fn influxdb_with_http(settings: &str) -> Result<TsServer, String> {
    let bin = find_bin("influxd", &[])?;
    start(&Spec {
        kind: ServerKind::InfluxDb,
        what: "influxd",
        extra_ports: 2,
        opentsdb: true,
        influx_tcp: None,
        opentsdb_tcp: Some(0),
        command: &|root, http, extra| {
            let config = INFLUXDB_CONF
                .replace("@DIR@", &root.display().to_string())
                .replace("18086", &http.to_string())
                .replace("14242", &extra[0].to_string())
                .replace("18088", &extra[1].to_string())
                .replace("[http]\n", &format!("[http]\n  {settings}\n"));
            let path = root.join("influxdb.conf");
            fs::write(&path, config).map_err(|e| format!("write {}: {e}", path.display()))?;
            let mut cmd = Command::new(&bin);
            cmd.arg("run").arg("-config").arg(path);
            Ok(cmd)
        },
        ready_path: "/ping",
        ready_text: "",
    })
}

/// Prometheus with the remote-write receiver and the admin API.
pub fn prometheus() -> Result<TsServer, String> {
    let bin = find_bin("prometheus", &[])?;
    start(&Spec {
        kind: ServerKind::Prometheus,
        what: "prometheus",
        extra_ports: 0,
        opentsdb: false,
        influx_tcp: None,
        opentsdb_tcp: None,
        command: &|root, http, _| {
            let config = root.join("prometheus.yml");
            fs::write(&config, "scrape_configs: []\n")
                .map_err(|e| format!("write {}: {e}", config.display()))?;
            let mut cmd = Command::new(&bin);
            cmd.arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    root.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{http}"))
                .args([
                    "--web.enable-remote-write-receiver",
                    "--web.enable-admin-api",
                ]);
            Ok(cmd)
        },
        ready_path: "/-/ready",
        ready_text: "Ready",
    })
}

/// node_exporter with its default collectors, on loopback.
pub fn node_exporter() -> Result<TsServer, String> {
    let bin = find_bin("prometheus-node-exporter", &[])?;
    start(&Spec {
        kind: ServerKind::NodeExporter,
        what: "prometheus-node-exporter",
        extra_ports: 0,
        opentsdb: false,
        influx_tcp: None,
        opentsdb_tcp: None,
        command: &|_, http, _| {
            let mut cmd = Command::new(&bin);
            cmd.arg(format!("--web.listen-address=127.0.0.1:{http}"));
            Ok(cmd)
        },
        ready_path: "/metrics",
        ready_text: "node_cpu_seconds_total",
    })
}

/// VictoriaMetrics with its OpenTSDB HTTP listener.
pub fn victoriametrics() -> Result<TsServer, String> {
    let bin = victoriametrics_bin()?;
    start(&Spec {
        kind: ServerKind::VictoriaMetrics,
        what: "victoria-metrics",
        extra_ports: 3,
        opentsdb: true,
        influx_tcp: Some(1),
        opentsdb_tcp: Some(2),
        command: &|root, http, extra| {
            let mut cmd = Command::new(&bin);
            cmd.arg(format!("-httpListenAddr=127.0.0.1:{http}"))
                .arg(format!("-storageDataPath={}", root.join("data").display()))
                .arg(format!("-opentsdbHTTPListenAddr=127.0.0.1:{}", extra[0]))
                .arg(format!("-influxListenAddr=127.0.0.1:{}", extra[1]))
                .arg(format!("-opentsdbListenAddr=127.0.0.1:{}", extra[2]));
            Ok(cmd)
        },
        ready_path: "/health",
        ready_text: "OK",
    })
}

/// QuestDB, every listener on loopback.
pub fn questdb() -> Result<TsServer, String> {
    let java = find_bin("java", &[])?;
    let jar = questdb_jar()?;
    start(&Spec {
        kind: ServerKind::QuestDb,
        what: "questdb",
        extra_ports: 3,
        opentsdb: false,
        influx_tcp: Some(2),
        opentsdb_tcp: None,
        command: &|root, http, extra| {
            let conf = root.join("conf");
            fs::create_dir_all(&conf).map_err(|e| format!("mkdir {}: {e}", conf.display()))?;
            let settings = format!(
                "http.bind.to=127.0.0.1:{http}\nhttp.min.net.bind.to=127.0.0.1:{}\n\
                 pg.net.bind.to=127.0.0.1:{}\nline.tcp.net.bind.to=127.0.0.1:{}\n\
                 line.udp.enabled=false\ntelemetry.enabled=false\n",
                extra[0], extra[1], extra[2]
            );
            let path = conf.join("server.conf");
            fs::write(&path, settings).map_err(|e| format!("write {}: {e}", path.display()))?;
            let mut cmd = Command::new(&java);
            cmd.args(["-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=1g", "-p"])
                .arg(&jar)
                .args(["-m", "io.questdb/io.questdb.ServerMain", "-d"])
                .arg(root);
            Ok(cmd)
        },
        // `GET /` never answers (the jar has no web console).
        ready_path: "/exec?query=select%201",
        ready_text: "dataset",
    })
}

fn start(spec: &Spec) -> Result<TsServer, String> {
    let dir = temp_root(&format!("loadcell-{}-", spec.what))?;
    let root = dir.path().to_path_buf();
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: spec.kind,
        child: None,
        log_path: root.join("server.log"),
        socket: root.clone(),
        data_dir: root.join("data"),
        dir: Some(dir),
    };
    for attempt in 0..=PORT_RETRIES {
        server.port = free_port();
        let extra: Vec<u16> = (0..spec.extra_ports).map(|_| free_port()).collect();
        let cmd = (spec.command)(&root, server.port, &extra)?;
        let log = server.log_path.clone();
        spawn_server(&mut server, cmd, &log, spec.what)?;
        let opentsdb_port = spec.opentsdb.then(|| extra[0]);
        let influx_tcp_port = spec.influx_tcp.map(|i| extra[i]);
        let opentsdb_tcp_port = spec.opentsdb_tcp.map(|i| extra[i]);
        let ready = |port| {
            http_get(port, spec.ready_path).is_some_and(|a| a.contains(spec.ready_text))
                && [opentsdb_port, influx_tcp_port, opentsdb_tcp_port]
                    .into_iter()
                    .flatten()
                    .all(tcp_accepts)
        };
        match wait_ready(&mut server, spec.what, ready) {
            Ok(()) => {
                server.url = format!("http://127.0.0.1:{}", server.port);
                return Ok(TsServer {
                    server,
                    opentsdb_port,
                    influx_tcp_port,
                    opentsdb_tcp_port,
                });
            }
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => {}
            Err(StartError::Failed(e))
                if attempt < PORT_RETRIES && e.contains("address already in use") => {}
            Err(StartError::PortInUse) => return Err(format!("{}: ports still taken", spec.what)),
            Err(StartError::Failed(e)) => return Err(e),
        }
    }
    unreachable!("the last attempt returns")
}

/// The VictoriaMetrics binary, built at the first use on this machine.
fn victoriametrics_bin() -> Result<PathBuf, String> {
    let entry = format!("victoria-metrics-{VICTORIAMETRICS_VERSION}");
    let dir = install_once(
        &entry,
        |home| home.join("victoria-metrics").exists(),
        |staging| {
            let go = find_bin("go", &["/usr/local/go/bin"])?;
            let out = staging.join("bin");
            let mut build = Command::new(go);
            build
                .arg("install")
                .arg(format!(
                    "-ldflags=-X=github.com/VictoriaMetrics/VictoriaMetrics/lib/buildinfo.Version=victoria-metrics-{VICTORIAMETRICS_VERSION}"
                ))
                .arg(format!("{VICTORIAMETRICS}@{VICTORIAMETRICS_VERSION}"))
                .env("GOBIN", &out);
            run_cmd(
                build,
                &staging.join("go.log"),
                "go install victoria-metrics",
            )
            .map_err(|e| format!("{e}\n(scripts/install-test-deps.sh builds it)"))?;
            Ok(out)
        },
    )?;
    Ok(dir.join("victoria-metrics"))
}

/// QuestDB's jar in the local Maven repository.
fn questdb_jar() -> Result<PathBuf, String> {
    let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
    let jar = Path::new(&home).join(format!(
        ".m2/repository/org/questdb/questdb/{QUESTDB_VERSION}/questdb-{QUESTDB_VERSION}.jar"
    ));
    if jar.exists() {
        Ok(jar)
    } else {
        Err(format!(
            "{} is missing: run scripts/install-test-deps.sh (mvn dependency:get org.questdb:questdb:{QUESTDB_VERSION})",
            jar.display()
        ))
    }
}
