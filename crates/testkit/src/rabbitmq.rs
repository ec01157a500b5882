//! RabbitMQ 3.10 (Debian's `rabbitmq-server`) with its MQTT and Prometheus
//! plugins, one per test binary (see [`super::shared`]): it takes 8–12 s to
//! start, about half of it a random wait in the MQTT plugin.
//!
//! A private node in a temp dir, on free 127.0.0.1 ports: its own `epmd`
//! (the Erlang port mapper) started first, as the leader of a process
//! group the node joins, so that both die together; the node itself is
//! `/usr/lib/rabbitmq/bin/rabbitmq-server` in a clean environment (the
//! `/usr/sbin` wrapper would switch to the `rabbitmq` user), with
//! `RABBITMQ_ALLOW_INPUT` and `-noinput` so that the script execs the
//! Erlang VM in place. Anonymous MQTT is off: user `lc`, password
//! `lcpass`. URL `mqtt://lc:lcpass@127.0.0.1:P?metrics=http://127.0.0.1:M/metrics`.
//! Ready when the MQTT listener answers a CONNECT.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::keeper::{shared, spawn_kept, Kept};
use super::mosquitto::answers_connack;
use super::shared::SharedServer;
use super::{find_bin, free_port, on_free_ports, temp_root, Start};

const USER: &str = "lc";
const PASSWORD: &str = "lcpass";
const SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";
/// A busy 2-core machine: the node boots in about 10 s when quiet.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// The RabbitMQ node of this test binary, started at the first call.
pub fn rabbitmq() -> Result<&'static SharedServer, String> {
    static SERVER: OnceLock<Result<SharedServer, String>> = OnceLock::new();
    shared(&SERVER, "rabbitmq", start)
}

fn start() -> Result<SharedServer, String> {
    if !Path::new(SERVER).exists() {
        return Err(format!(
            "rabbitmq: {SERVER} not found (scripts/install-test-deps.sh installs rabbitmq-server)"
        ));
    }
    let plugins = plugins_dir()?;
    let epmd = find_bin("epmd", &[])?;
    on_free_ports("rabbitmq", || start_once(&epmd, &plugins))
}

/// `/usr/lib/rabbitmq/lib/rabbitmq_server-VERSION/plugins`.
fn plugins_dir() -> Result<PathBuf, String> {
    fs::read_dir("/usr/lib/rabbitmq/lib")
        .map_err(|e| format!("rabbitmq: /usr/lib/rabbitmq/lib: {e}"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("plugins"))
        .find(|p| p.is_dir())
        .ok_or_else(|| "rabbitmq: no plugins dir under /usr/lib/rabbitmq/lib".to_string())
}

struct Ports {
    amqp: u16,
    mqtt: u16,
    prometheus: u16,
    distribution: u16,
    epmd: u16,
}

fn start_once(epmd: &Path, plugins: &Path) -> Result<SharedServer, Start> {
    let failed = Start::Failed;
    let dir = temp_root("loadcell-rabbitmq-").map_err(failed)?.keep();
    let ports = Ports {
        amqp: free_port(),
        mqtt: free_port(),
        prometheus: free_port(),
        distribution: free_port(),
        epmd: free_port(),
    };
    write_config(&dir, &ports).map_err(Start::Failed)?;

    let mut mapper = Command::new(epmd);
    mapper
        .arg("-port")
        .arg(ports.epmd.to_string())
        .arg("-address")
        .arg("127.0.0.1")
        .process_group(0);
    let mapper = spawn_kept(mapper, &dir, "epmd").map_err(Start::Failed)?;
    let group = mapper.id();

    let mut node = Command::new(SERVER);
    let node_name = format!("rabbit-{}-{}@localhost", std::process::id(), ports.mqtt);
    node.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.join("home"))
        .env("RABBITMQ_CONF_ENV_FILE", "/dev/null")
        .env("RABBITMQ_NODENAME", node_name)
        .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
        .env("RABBITMQ_NODE_PORT", ports.amqp.to_string())
        .env("RABBITMQ_DIST_PORT", ports.distribution.to_string())
        .env("ERL_EPMD_PORT", ports.epmd.to_string())
        .env("ERL_EPMD_ADDRESS", "127.0.0.1")
        .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
        .env("RABBITMQ_LOG_BASE", dir.join("log"))
        .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq.conf"))
        .env("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config"))
        .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
        .env("RABBITMQ_PLUGINS_DIR", plugins)
        .env("RABBITMQ_PID_FILE", dir.join("rabbit.pid"))
        // The script execs the VM, which is then the process we started.
        .env("RABBITMQ_ALLOW_INPUT", "1")
        .env(
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
            "-noinput -kernel inet_dist_use_interface {127,0,0,1}",
        )
        .process_group(group as i32);
    let child = match spawn_kept(node, &dir, "server") {
        Ok(child) => child,
        Err(e) => {
            super::signal_group(group, libc::SIGKILL);
            return Err(Start::Failed(e));
        }
    };
    let server = SharedServer {
        url: format!(
            "mqtt://{USER}:{PASSWORD}@127.0.0.1:{}?metrics=http://127.0.0.1:{}/metrics",
            ports.mqtt, ports.prometheus
        ),
        port: ports.mqtt,
        pid: child.id(),
        group,
        log_path: dir.join("server.log"),
        dir,
        child: Mutex::new(Some(child)),
        helpers: Mutex::new(vec![mapper]),
    };
    match wait_ready(&server) {
        Ok(()) => Ok(server),
        Err(e) => {
            server.stop();
            Err(e)
        }
    }
}

fn write_config(dir: &Path, p: &Ports) -> Result<(), String> {
    for sub in ["mnesia", "log", "home"] {
        fs::create_dir_all(dir.join(sub)).map_err(|e| format!("mkdir {sub}: {e}"))?;
    }
    let conf = format!(
        "listeners.tcp.default = 127.0.0.1:{amqp}\n\
         mqtt.listeners.tcp.default = 127.0.0.1:{mqtt}\n\
         prometheus.tcp.ip = 127.0.0.1\n\
         prometheus.tcp.port = {prometheus}\n\
         default_user = {USER}\n\
         default_pass = {PASSWORD}\n\
         mqtt.allow_anonymous = false\n\
         loopback_users = none\n\
         log.console = true\n\
         log.console.level = warning\n\
         log.file = false\n",
        amqp = p.amqp,
        mqtt = p.mqtt,
        prometheus = p.prometheus,
    );
    for (name, text) in [
        ("rabbitmq.conf", conf.as_str()),
        ("enabled_plugins", "[rabbitmq_mqtt,rabbitmq_prometheus].\n"),
    ] {
        fs::write(dir.join(name), text).map_err(|e| format!("write {name}: {e}"))?;
    }
    Ok(())
}

/// Ready once the MQTT listener answers a CONNECT (refused: no
/// credentials, but up).
fn wait_ready(server: &SharedServer) -> Result<(), Start> {
    server.wait_until("answering MQTT", READY_TIMEOUT, "eaddrinuse", |s| {
        answers_connack(s.port)
    })
}
