//! Search servers (OpenSearch 2.19.6, Elasticsearch 7.10.2 OSS) on free
//! 127.0.0.1 ports, one per test binary: a JVM takes seconds to start and
//! half a gigabyte of heap, so [`opensearch()`] and [`elasticsearch()`]
//! start theirs at the first call and hand every later caller the same
//! one (tests on it use an index of their own). URL `http://127.0.0.1:P`:
//! the integ-test zips have no security plugin (plain HTTP, no password).
//!
//! The zip comes from Maven Central (`mvn dependency:copy`, cached in
//! `~/.m2`) and is unzipped once into `/var/tmp/loadcell-testkit/`, which,
//! unlike `~/.cache` under root's private home, the server's user can
//! read. Each server gets its own config, data and logs in a temp dir.
//! OpenSearch's zip lacks the modules of ingest pipelines (ingest-common,
//! and lang-painless which it extends, for processors' `if` conditions):
//! their jars come from Maven Central too, laid out under `modules/` as
//! the full distribution lays them out.
//! Both refuse to run as root: as root the server runs as `nobody`.
//!
//! The server lives as long as the test binary: it is stopped (its
//! process group killed, its temp dir removed) when the binary exits, and
//! the kernel kills it (parent-death signal) if the binary is killed.

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
use super::{
    free_port, http_get, install_once, is_root, lookup_user, on_free_ports, run_cmd, temp_root,
    Account, Start,
};

/// How long a search server may take to report a green cluster: a JVM
/// starting on a busy 2-core machine.
const GREEN_TIMEOUT: Duration = Duration::from_secs(120);
const HEAP: &str = "-Xms512m -Xmx512m";

/// A distribution of one product, and how its scripts are configured.
struct Product {
    name: &'static str,
    artifact: &'static str,
    version: &'static str,
    script: &'static str,
    config_file: &'static str,
    /// The environment variables for the config dir, the temp dir and the
    /// JVM options.
    env: [&'static str; 3],
    /// Modules added to the distribution.
    modules: &'static [Module],
}

/// A module of the full distribution that the integ-test zip leaves out:
/// its jars (a pom whose direct dependencies they are) and what its
/// `plugin-descriptor.properties` says.
struct Module {
    name: &'static str,
    description: &'static str,
    classname: &'static str,
    extended_plugins: &'static str,
    pom: &'static str,
    security_policy: Option<&'static str>,
}

const OPENSEARCH_MODULES: &[Module] = &[
    Module {
        name: "lang-painless",
        description: "An easy, safe and fast scripting language for OpenSearch",
        classname: "org.opensearch.painless.PainlessPlugin",
        extended_plugins: "",
        pom: include_str!("../assets/opensearch/lang-painless.pom.xml"),
        security_policy: Some(include_str!("../assets/opensearch/lang-painless.policy")),
    },
    Module {
        name: "ingest-common",
        description: "Module for ingest processors",
        classname: "org.opensearch.ingest.common.IngestCommonPlugin",
        extended_plugins: "lang-painless",
        pom: include_str!("../assets/opensearch/ingest-common.pom.xml"),
        security_policy: None,
    },
];

const OPENSEARCH: Product = Product {
    name: "opensearch",
    artifact: "org.opensearch.distribution.integ-test-zip:opensearch",
    version: "2.19.6",
    script: "bin/opensearch",
    config_file: "opensearch.yml",
    env: [
        "OPENSEARCH_PATH_CONF",
        "OPENSEARCH_TMPDIR",
        "OPENSEARCH_JAVA_OPTS",
    ],
    modules: OPENSEARCH_MODULES,
};

const ELASTICSEARCH: Product = Product {
    name: "elasticsearch",
    artifact: "org.elasticsearch.distribution.integ-test-zip:elasticsearch",
    version: "7.10.2",
    script: "bin/elasticsearch",
    config_file: "elasticsearch.yml",
    env: ["ES_PATH_CONF", "ES_TMPDIR", "ES_JAVA_OPTS"],
    modules: &[],
};

/// The OpenSearch 2.19.6 of this test binary, started at the first call.
pub fn opensearch() -> Result<&'static SharedServer, String> {
    static SERVER: OnceLock<Result<SharedServer, String>> = OnceLock::new();
    shared(&SERVER, OPENSEARCH.name, || start(&OPENSEARCH))
}

/// The Elasticsearch 7.10.2 OSS of this test binary, started at the first
/// call.
pub fn elasticsearch() -> Result<&'static SharedServer, String> {
    static SERVER: OnceLock<Result<SharedServer, String>> = OnceLock::new();
    shared(&SERVER, ELASTICSEARCH.name, || start(&ELASTICSEARCH))
}

/// `method path` with a JSON `body` on the search server at `port`, for
/// what tests set up that no driver call does (ingest pipelines, index
/// settings): the answer's status and body.
pub fn search_request(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let exchange = || -> std::io::Result<String> {
        let mut tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
        write!(
            tcp,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        let mut answer = String::new();
        tcp.read_to_string(&mut answer)?;
        Ok(answer)
    };
    let answer = exchange().unwrap_or_else(|e| panic!("{method} {path} on 127.0.0.1:{port}: {e}"));
    let status = answer
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: not an HTTP answer: {answer}"));
    (status, answer)
}

fn start(product: &Product) -> Result<SharedServer, String> {
    let home = install(product)?;
    let java_home = java_home()?;
    let owner = if is_root() {
        Some(lookup_user("nobody")?)
    } else {
        None
    };
    on_free_ports(product.name, || {
        start_once(product, &home, &java_home, owner)
    })
}

fn start_once(
    product: &Product,
    home: &Path,
    java_home: &Path,
    owner: Option<Account>,
) -> Result<SharedServer, Start> {
    let failed = |e: String| Start::Failed(format!("{}: {e}", product.name));
    let dir = temp_root(&format!("loadcell-{}-", product.name))
        .map_err(failed)?
        .keep();
    let (http_port, transport_port) = (free_port(), free_port());
    let config = dir.join("config");
    write_config(product, home, &dir, http_port, transport_port).map_err(failed)?;
    if let Some(a) = owner {
        chown_tree(&dir, a).map_err(failed)?;
    }
    let log_path = dir.join("server.log");
    let log = fs::File::create(&log_path)
        .map_err(|e| failed(format!("create {}: {e}", log_path.display())))?;
    let log2 = log
        .try_clone()
        .map_err(|e| failed(format!("dup {}: {e}", log_path.display())))?;
    let mut cmd = Command::new(home.join(product.script));
    cmd.env("JAVA_HOME", java_home)
        .env(product.env[0], &config)
        .env(product.env[1], dir.join("tmp"))
        .env(product.env[2], HEAP)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .process_group(0);
    if let Some(a) = owner {
        cmd.uid(a.uid).gid(a.gid);
    }
    die_with_parent(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| failed(format!("could not start {}: {e}", product.script)))?;
    let server = SharedServer {
        url: format!("http://127.0.0.1:{http_port}"),
        port: http_port,
        pid: child.id(),
        group: child.id(),
        log_path,
        dir,
        child: Mutex::new(Some(child)),
        helpers: Mutex::default(),
    };
    match wait_green(&server) {
        Ok(()) => Ok(server),
        Err(e) => {
            server.stop();
            Err(e)
        }
    }
}

/// Ready once `_cluster/health` says green.
fn wait_green(server: &SharedServer) -> Result<(), Start> {
    server.wait_until("green", GREEN_TIMEOUT, "BindException", |s| {
        http_get(s.port, "/_cluster/health?wait_for_status=green&timeout=1s")
            .is_some_and(|h| h.contains("\"status\":\"green\""))
    })
}

/// The product's config dir in `dir`, from the distribution's: heap and
/// log files moved out of the (shared, read-only) installation, and the
/// node bound to loopback alone.
fn write_config(
    product: &Product,
    home: &Path,
    dir: &Path,
    http_port: u16,
    transport_port: u16,
) -> Result<(), String> {
    let config = dir.join("config");
    for sub in ["config", "data", "logs", "tmp"] {
        let path = dir.join(sub);
        fs::create_dir(&path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
    }
    copy_dir(&home.join("config"), &config)?;
    // Its own heap size, and no GC log or heap dump written relative to
    // the installation.
    let jvm_options = config.join("jvm.options");
    let options = fs::read_to_string(&jvm_options)
        .map_err(|e| format!("read {}: {e}", jvm_options.display()))?
        .lines()
        .filter(|l| !(l.contains("logs/") || l.contains("HeapDumpPath") || l.starts_with("-Xm")))
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    fs::write(&jvm_options, options)
        .map_err(|e| format!("write {}: {e}", jvm_options.display()))?;
    let yml = config.join(product.config_file);
    let mut settings = fs::read_to_string(&yml).unwrap_or_default();
    settings.push_str(&format!(
        "\nnetwork.host: 127.0.0.1\nhttp.port: {http_port}\ntransport.port: {transport_port}\n\
         discovery.type: single-node\npath.data: {}\npath.logs: {}\n\
         cluster.routing.allocation.disk.threshold_enabled: false\n",
        dir.join("data").display(),
        dir.join("logs").display(),
    ));
    fs::write(&yml, settings).map_err(|e| format!("write {}: {e}", yml.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    fs::create_dir_all(to).map_err(|e| format!("mkdir {}: {e}", to.display()))?;
    let entries = fs::read_dir(from).map_err(|e| format!("read {}: {e}", from.display()))?;
    for entry in entries.flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(|e| format!("copy {}: {e}", src.display()))?;
        }
    }
    Ok(())
}

fn chown_tree(path: &Path, owner: Account) -> Result<(), String> {
    std::os::unix::fs::chown(path, Some(owner.uid), Some(owner.gid))
        .map_err(|e| format!("chown {}: {e}", path.display()))?;
    if path.is_dir() {
        let entries = fs::read_dir(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        for entry in entries.flatten() {
            chown_tree(&entry.path(), owner)?;
        }
    }
    Ok(())
}

const DESCRIPTOR: &str = "plugin-descriptor.properties";

/// The unzipped distribution with its added modules, fetched and unzipped
/// at the first use on this machine (see [`install_once`]); cached apart
/// from a bare one an earlier testkit unzipped.
fn install(product: &Product) -> Result<PathBuf, String> {
    let unzipped = format!("{}-{}", product.name, product.version);
    let entry = match product.modules {
        [] => unzipped.clone(),
        _ => format!("{unzipped}-modules"),
    };
    let complete = |home: &Path| {
        home.join(product.script).exists()
            && product
                .modules
                .iter()
                .all(|m| home.join("modules").join(m.name).join(DESCRIPTOR).exists())
    };
    install_once(&entry, complete, |staging| {
        let zip = maven_zip(product)?;
        let mut unzip = Command::new("unzip");
        unzip.arg("-q").arg(&zip).arg("-d").arg(staging);
        run_cmd(unzip, &staging.join("unzip.log"), "unzip")?;
        let home = staging.join(&unzipped);
        for module in product.modules {
            add_module(product, module, &home, staging)?;
        }
        Ok(home)
    })
}

/// Puts `module`'s jars (from Maven Central, cached in `~/.m2`), its
/// descriptor and security policy into `home/modules/NAME`.
fn add_module(
    product: &Product,
    module: &Module,
    home: &Path,
    staging: &Path,
) -> Result<(), String> {
    let dir = home.join("modules").join(module.name);
    let pom = staging.join(format!("{}.pom.xml", module.name));
    fs::write(&pom, module.pom).map_err(|e| format!("write {}: {e}", pom.display()))?;
    let mut mvn = Command::new("mvn");
    mvn.args(["-q", "-B", "-f"])
        .arg(&pom)
        .args(["dependency:copy-dependencies", "-DexcludeTransitive=true"])
        .arg(format!("-DoutputDirectory={}", dir.display()))
        .current_dir(staging);
    let log = staging.join(format!("mvn-{}.log", module.name));
    run_cmd(mvn, &log, "mvn dependency:copy-dependencies")?;
    let version = product.version;
    let descriptor = format!(
        "description={}\nversion={version}\nname={}\nclassname={}\njava.version=11\n\
         opensearch.version={version}\ncustom.foldername=\nextended.plugins={}\n\
         has.native.controller=false\n",
        module.description, module.name, module.classname, module.extended_plugins
    );
    let write = |name: &str, text: &str| {
        fs::write(dir.join(name), text).map_err(|e| format!("write {name} of {}: {e}", module.name))
    };
    write(DESCRIPTOR, &descriptor)?;
    module
        .security_policy
        .map_or(Ok(()), |policy| write("plugin-security.policy", policy))
}

/// The zip in the local Maven repository, fetched from Maven Central when
/// it is not there yet.
fn maven_zip(product: &Product) -> Result<PathBuf, String> {
    let (group, artifact) = product
        .artifact
        .split_once(':')
        .expect("artifact is group:artifact");
    let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
    let zip = Path::new(&home)
        .join(".m2/repository")
        .join(group.replace('.', "/"))
        .join(artifact)
        .join(product.version)
        .join(format!("{artifact}-{}.zip", product.version));
    if zip.exists() {
        return Ok(zip);
    }
    let staging = temp_root("loadcell-mvn-")?;
    let mut mvn = Command::new("mvn");
    mvn.arg("-q")
        .arg("dependency:copy")
        .arg(format!(
            "-Dartifact={}:{}:zip",
            product.artifact, product.version
        ))
        .arg(format!("-DoutputDirectory={}", staging.path().display()))
        .current_dir(staging.path());
    run_cmd(mvn, &staging.path().join("mvn.log"), "mvn dependency:copy").map_err(|e| {
        format!("{e}\n(scripts/install-test-deps.sh installs Maven and fetches the zips)")
    })?;
    if zip.exists() {
        Ok(zip)
    } else {
        Err(format!(
            "mvn dependency:copy did not leave {}",
            zip.display()
        ))
    }
}

/// A JDK 17 or 21: OpenSearch 2 and Elasticsearch 7 need the security
/// manager, which later JDKs dropped, so the `java` on PATH is not used.
fn java_home() -> Result<PathBuf, String> {
    ["java-17-openjdk", "java-21-openjdk"]
        .iter()
        .find_map(|prefix| {
            fs::read_dir("/usr/lib/jvm").ok()?.flatten().find_map(|e| {
                let path = e.path();
                let name = e.file_name();
                (name.to_string_lossy().starts_with(prefix) && path.join("bin/java").exists())
                    .then_some(path)
            })
        })
        .ok_or_else(|| {
            "no JDK 17 or 21 under /usr/lib/jvm; run `scripts/install-test-deps.sh` \
             (openjdk-17-jre-headless)"
                .to_string()
        })
}
