//! Starting, waiting on and stopping server processes, and the files,
//! users and binaries they need.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::{tcp_accepts, TestServer, INSTALL_HINT, POLL, READY_TIMEOUT, SETUP_TIMEOUT};

pub(crate) enum StartError {
    PortInUse,
    Failed(String),
}

/// Why one attempt at starting a slow server (one that takes several
/// ports) failed: a port was taken (its log, which says so), or anything
/// else.
pub(crate) enum Start {
    PortInUse(String),
    Failed(String),
}

/// Runs `attempt` (each picks free ports of its own) until one is not
/// refused its ports, at most `PORT_RETRIES + 1` times. Its errors are
/// named `what: …` (once).
pub(crate) fn on_free_ports<S>(
    what: &str,
    mut attempt: impl FnMut() -> Result<S, Start>,
) -> Result<S, String> {
    let mut last = String::new();
    for _ in 0..=super::PORT_RETRIES {
        match attempt() {
            Ok(server) => return Ok(server),
            Err(Start::PortInUse(log)) => last = log,
            Err(Start::Failed(e)) if e.starts_with(&format!("{what}:")) => return Err(e),
            Err(Start::Failed(e)) => return Err(format!("{what}: {e}")),
        }
    }
    Err(format!(
        "{what}: ports still taken after {} attempts:\n{last}",
        super::PORT_RETRIES + 1
    ))
}

pub(crate) fn spawn_server(
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
pub(crate) fn wait_ready(
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
pub(crate) const CACHE: &str = "/var/tmp/loadcell-testkit";

/// `CACHE/entry`, made at the first use on this machine: `make` fills a
/// staging directory of this process's own and returns what in it to
/// rename into place, so that two test binaries getting here at once each
/// make their own and the loser's is dropped. `is_made` tells a finished
/// entry.
pub(crate) fn install_once(
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
pub(crate) fn http_get(port: u16, path: &str) -> Option<String> {
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
pub(crate) fn is_complete(answer: &[u8]) -> bool {
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
pub(crate) fn run_cmd(mut cmd: Command, log: &Path, what: &str) -> Result<(), String> {
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

pub(crate) fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
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
pub(crate) fn signal_group(pid: u32, sig: libc::c_int) {
    // SAFETY: killpg(2) on the group of a child we started (not reaped yet).
    unsafe {
        libc::killpg(pid as libc::pid_t, sig);
    }
}

pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a pid we started (and have not reaped yet).
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Process state letter from /proc/PID/stat, None if the process does not exist.
pub(crate) fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().next()?.chars().next()
}

/// Exists and is not a zombie.
pub(crate) fn is_live(pid: u32) -> bool {
    !matches!(proc_state(pid), None | Some('Z') | Some('X'))
}

pub(crate) fn children_of(parent: u32) -> Vec<u32> {
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

#[derive(Debug, Clone, Copy)]
pub(crate) struct Account {
    pub uid: u32,
    pub gid: u32,
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub(crate) fn lookup_user(name: &str) -> Result<Account, String> {
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

pub(crate) fn as_user(cmd: &mut Command, owner: Option<Account>, cwd: &Path) {
    if let Some(a) = owner {
        cmd.uid(a.uid).gid(a.gid);
    }
    // The server user cannot read root's home, so don't leave it as the cwd.
    cmd.current_dir(cwd);
}

/// A new temp dir that the server users can traverse.
pub(crate) fn temp_root(prefix: &str) -> Result<tempfile::TempDir, String> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("create temp dir: {e}"))?;
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", dir.path().display()))?;
    Ok(dir)
}

pub(crate) fn make_dir(path: &Path, owner: Option<Account>, mode: u32) -> Result<(), String> {
    fs::create_dir(path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))?;
    if let Some(a) = owner {
        std::os::unix::fs::chown(path, Some(a.uid), Some(a.gid))
            .map_err(|e| format!("chown {}: {e}", path.display()))?;
    }
    Ok(())
}

pub(crate) fn is_executable(p: &Path) -> bool {
    fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `name` from `extra` dirs or PATH, or an error pointing at the install script.
pub(crate) fn find_bin(name: &str, extra: &[&str]) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or_else(|| format!("`{name}` not found in PATH or {extra:?}; {INSTALL_HINT}"))
}

/// Error lines (which tools like mariadb-install-db print long before their final
/// boilerplate) followed by the tail of the log.
pub(crate) fn excerpt(path: &Path, lines: usize) -> String {
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

pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = match fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => return format!("(cannot read {}: {e})", path.display()),
    };
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
