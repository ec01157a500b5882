//! ShardingSphere-Proxy 5.1.0 (the newest on Maven Central here) on a
//! free port, sharding one table by `HASH_MOD` of a column over private
//! MariaDB servers: a real sharding proxy for the proxy-versus-direct
//! scenario (S3). Its URL is `mysql://lc:lcpass@127.0.0.1:P/loadcell`, the
//! backends' user and database; it listens on every address, so clients
//! in other network namespaces reach it at the host's address too.
//!
//! The jars come from Maven Central through `shardingsphere-pom.xml`
//! (`mvn dependency:copy-dependencies`, cached in `~/.m2`) into
//! `/var/tmp/loadcell-testkit/shardingsphere-proxy-5.1.0/lib`, once per
//! machine ([`sharding_proxy_lib`], which `bench/s3-proxy.sh` uses too).
//! The proxy reads the backends' tables when it starts: create them first.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::{
    excerpt, find_bin, free_port, install_once, run_cmd, spawn_server, tcp_accepts, temp_root,
    ServerKind, TestServer, DB_NAME, DB_PASSWORD, DB_USER, POLL,
};

const VERSION: &str = "5.1.0";
const POM: &str = include_str!("shardingsphere-pom.xml");
/// A JVM of ~200 jars on a busy 2-core machine: 25–40 s seen.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// The directory of the proxy's jars (for `java -cp 'DIR/*'`), fetched at
/// the first use on this machine.
pub fn sharding_proxy_lib() -> Result<PathBuf, String> {
    let entry = format!("shardingsphere-proxy-{VERSION}");
    let jar = format!("lib/shardingsphere-proxy-bootstrap-{VERSION}.jar");
    let home = install_once(
        &entry,
        |home| home.join(&jar).exists(),
        |staging| {
            let pom = staging.join("pom.xml");
            fs::write(&pom, POM).map_err(|e| format!("write {}: {e}", pom.display()))?;
            let home = staging.join(&entry);
            let mut mvn = Command::new("mvn");
            mvn.args(["-q", "-B", "-f"])
                .arg(&pom)
                .arg("dependency:copy-dependencies")
                .arg(format!("-DoutputDirectory={}", home.join("lib").display()))
                .current_dir(staging);
            run_cmd(
                mvn,
                &staging.join("mvn.log"),
                "mvn dependency:copy-dependencies",
            )?;
            Ok(home)
        },
    )?;
    Ok(home.join("lib"))
}

/// The proxy over `backends` (private MariaDB servers), `table` sharded
/// by `HASH_MOD(column, backends.len())`: a row lives on backend
/// `|hash(column)| mod N`, for an integer its absolute value mod N.
pub fn sharding_proxy(
    backends: &[&TestServer],
    table: &str,
    column: &str,
) -> Result<TestServer, String> {
    let lib = sharding_proxy_lib()?;
    let java = find_bin("java", &[])?;
    let dir = temp_root("loadcell-sharding-proxy-")?;
    let root = dir.path().to_path_buf();
    let conf = root.join("conf");
    fs::create_dir(&conf).map_err(|e| format!("mkdir {}: {e}", conf.display()))?;
    write_config(&conf, &root, backends, table, column)?;
    let port = free_port();
    let mut server = TestServer {
        url: format!("mysql://{DB_USER}:{DB_PASSWORD}@127.0.0.1:{port}/{DB_NAME}"),
        port,
        pid: 0,
        kind: ServerKind::ShardingProxy,
        child: None,
        log_path: root.join("proxy.log"),
        socket: root.clone(),
        data_dir: root.clone(),
        dir: Some(dir),
    };
    let mut cmd = Command::new(java);
    cmd.args(["-Xms256m", "-Xmx1g", "-cp"])
        .arg(format!("{}:{}/*", conf.display(), lib.display()))
        .arg("org.apache.shardingsphere.proxy.Bootstrap")
        .arg(port.to_string())
        .arg(&conf)
        .current_dir(&root);
    spawn_server(&mut server, cmd, &root.join("proxy.log"), "sharding proxy")?;
    let start = Instant::now();
    while !tcp_accepts(port) {
        let exited = server
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        if exited.is_some() || start.elapsed() > READY_TIMEOUT {
            return Err(format!(
                "ShardingSphere-Proxy (pid {}) not listening on port {port} after {:.0?}; tail of \
                 {}:\n{}",
                server.pid,
                start.elapsed(),
                server.log_path.display(),
                excerpt(&server.log_path, 30)
            ));
        }
        sleep(POLL);
    }
    Ok(server)
}

fn write_config(
    conf: &std::path::Path,
    root: &std::path::Path,
    backends: &[&TestServer],
    table: &str,
    column: &str,
) -> Result<(), String> {
    let server = format!(
        "mode:\n  type: Standalone\n  repository:\n    type: File\n    props:\n      path: {}\n  \
         overwrite: true\nrules:\n  - !AUTHORITY\n    users:\n      - {DB_USER}@%:{DB_PASSWORD}\n    \
         provider:\n      type: ALL_PRIVILEGES_PERMITTED\n",
        root.join("repository").display()
    );
    let mut sharding = format!("schemaName: {DB_NAME}\ndataSources:\n");
    for (i, b) in backends.iter().enumerate() {
        sharding += &format!(
            "  ds_{i}:\n    url: jdbc:mysql://127.0.0.1:{}/{DB_NAME}?useSSL=false&allowPublicKeyRetrieval=true\n    \
             username: {DB_USER}\n    password: {DB_PASSWORD}\n    maxPoolSize: 600\n    minPoolSize: 1\n",
            b.port
        );
    }
    sharding += &format!(
        "rules:\n- !SHARDING\n  tables:\n    {table}:\n      actualDataNodes: ds_${{0..{last}}}.{table}\n      \
         databaseStrategy:\n        standard:\n          shardingColumn: {column}\n          \
         shardingAlgorithmName: by_hash\n  shardingAlgorithms:\n    by_hash:\n      type: HASH_MOD\n      \
         props:\n        sharding-count: {count}\n",
        last = backends.len() - 1,
        count = backends.len()
    );
    // Warnings only: its INFO and DEBUG lines would fill the disk under load.
    let logback = "<configuration>\n  <appender name=\"out\" class=\"ch.qos.logback.core.ConsoleAppender\">\n    \
                   <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>\n  \
                   </appender>\n  <root level=\"WARN\"><appender-ref ref=\"out\"/></root>\n</configuration>\n";
    for (name, text) in [
        ("server.yaml", server),
        ("config-sharding.yaml", sharding),
        ("logback.xml", logback.to_string()),
    ] {
        let path = conf.join(name);
        fs::write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(())
}
