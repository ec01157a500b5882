//! A private Docker engine (Debian's `docker.io`), one per test binary
//! (see [`super::shared`]): `dockerd` with its data, exec root and socket
//! in a temp dir, no bridge and no iptables rules, so containers run on
//! `--network host` and no traffic leaves loopback. Its `url` is the
//! `DOCKER_HOST` to give the `docker` client. It is stopped with SIGTERM
//! (so that it stops `containerd` and its shims and unmounts what it
//! mounted), then its process group is killed and what is still mounted
//! under its dir detached, and the dir removed.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::keeper::{shared, spawn_kept, Kept};
use super::shared::SharedServer;
use super::{find_bin, signal, temp_root, Start, SBIN_DIRS};

const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `dockerd` may take to stop on SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running private engine.
#[derive(Debug)]
pub struct DockerEngine {
    /// `unix://DIR/docker.sock`, for `DOCKER_HOST`.
    pub url: String,
    daemon: SharedServer,
}

/// The Docker engine of this test binary, started at the first call.
pub fn docker_engine() -> Result<&'static DockerEngine, String> {
    static ENGINE: OnceLock<Result<DockerEngine, String>> = OnceLock::new();
    shared(&ENGINE, "dockerd", start)
}

impl Kept for DockerEngine {
    fn stop(&self) {
        let d = &self.daemon;
        signal(d.pid, libc::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while d.exited().is_none() && Instant::now() < deadline {
            sleep(Duration::from_millis(100));
        }
        // What a daemon that did not stop in time left mounted.
        for mount in [d.dir.join("exec/netns/default"), d.dir.join("data")] {
            if let Ok(path) = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes()) {
                // SAFETY: a valid C string; failure (not mounted) is fine.
                unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
            }
        }
        d.stop();
    }
}

fn start() -> Result<DockerEngine, String> {
    let dockerd = find_bin("dockerd", SBIN_DIRS)
        .map_err(|e| format!("{e} (scripts/install-test-deps.sh installs docker.io)"))?;
    let dir = temp_root("loadcell-docker-")?.keep();
    let socket = dir.join("docker.sock");
    let mut cmd = Command::new(dockerd);
    cmd.arg("--bridge=none")
        .arg("--iptables=false")
        .arg("--ip-masq=false")
        .arg("--data-root")
        .arg(dir.join("data"))
        .arg("--exec-root")
        .arg(dir.join("exec"))
        .arg("--pidfile")
        .arg(dir.join("docker.pid"))
        .arg("-H")
        .arg(format!("unix://{}", socket.display()))
        .process_group(0);
    let child = spawn_kept(cmd, &dir, "dockerd")?;
    let server = SharedServer {
        url: format!("unix://{}", socket.display()),
        port: 0,
        pid: child.id(),
        group: child.id(),
        log_path: dir.join("dockerd.log"),
        dir,
        child: Mutex::new(Some(child)),
        helpers: Mutex::default(),
    };
    let ready = server.wait_until("answering", READY_TIMEOUT, "address already in use", |s| {
        pings(&s.url)
    });
    let engine = DockerEngine {
        url: server.url.clone(),
        daemon: server,
    };
    match ready {
        Ok(()) => Ok(engine),
        Err(Start::PortInUse(log) | Start::Failed(log)) => {
            engine.stop();
            Err(format!("dockerd: {log}"))
        }
    }
}

/// The engine's API answers `GET /_ping` with `OK`.
fn pings(url: &str) -> bool {
    let Some(path) = url.strip_prefix("unix://") else {
        return false;
    };
    let Ok(mut s) = UnixStream::connect(path) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /_ping HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.0 200") && answer.ends_with("OK")
}
