//! PostgreSQL: a private server on a free port, with the test database and
//! user made; with TLS, logical replication or extra settings; killed hard
//! with its shared memory cleaned up.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::{
    as_user, children_of, free_port, is_executable, is_live, is_root, lookup_user, make_dir,
    proc_state, run_cmd, signal, spawn_server, temp_root, tls, wait_ready, ServerKind, StartError,
    TestServer, DB_NAME, DB_PASSWORD, DB_USER, INSTALL_HINT, PORT_RETRIES,
};

/// Start a private PostgreSQL server. See the crate docs. TCP connections need a
/// password (scram-sha-256); the unix socket in the data dir is trust for `postgres`.
pub fn postgres() -> Result<TestServer, String> {
    start_postgres(None)
}

/// What [`postgres_logical`] sets: 64 channels' replication slots and
/// walsenders, and more for `positions`' temporary slot copies and a
/// second group.
pub const PG_STREAM_SETTINGS: &[(&str, &str)] = &[
    ("wal_level", "logical"),
    ("max_replication_slots", "160"),
    ("max_wal_senders", "160"),
];

/// [`postgres()`] for logical replication: [`PG_STREAM_SETTINGS`], then
/// `settings` (`name`, `value`), which override them (`wal_level=replica`,
/// a short `wal_sender_timeout`); the user has the REPLICATION attribute
/// (initdb's `pg_hba.conf` already lets replication connections in on
/// loopback, with SCRAM). Not the default: a REPLICATION role may not
/// change its own password, which the SQL tests do.
pub fn postgres_logical(settings: &[(&str, &str)]) -> Result<TestServer, String> {
    let all: Vec<(&str, &str)> = PG_STREAM_SETTINGS.iter().chain(settings).copied().collect();
    start_postgres_with(None, false, &all, true)
}

/// [`postgres()`] started with `settings` (`name`, `value`), for those that
/// only take effect at start (`shared_buffers`, `max_connections`).
pub fn postgres_with(settings: &[(&str, &str)]) -> Result<TestServer, String> {
    start_postgres_with(None, false, settings, false)
}

/// [`postgres()`] with TLS on (`ssl=on`), with a certificate for `localhost`
/// and 127.0.0.1 issued by a CA made for it (with `openssl`). Plain
/// connections are still accepted. The URL is the plain one; add
/// `?sslmode=require`, or `?sslmode=verify-full&sslrootcert=` and
/// [`TestServer::tls_ca`].
pub fn postgres_tls() -> Result<TestServer, String> {
    start_postgres_with(None, true, &[], false)
}

pub(crate) fn start_postgres(first_port: Option<u16>) -> Result<TestServer, String> {
    start_postgres_with(first_port, false, &[], false)
}

pub(crate) fn start_postgres_with(
    first_port: Option<u16>,
    tls: bool,
    settings: &[(&str, &str)],
    replication: bool,
) -> Result<TestServer, String> {
    let bin = pg_bin_dir()?;
    let initdb = bin.join("initdb");
    let postgres = bin.join("postgres");
    let psql = bin.join("psql");
    let pg_isready = bin.join("pg_isready");
    for b in [&initdb, &postgres, &psql, &pg_isready] {
        if !is_executable(b) {
            return Err(format!("{} not found; {INSTALL_HINT}", b.display()));
        }
    }
    let owner = if is_root() {
        Some(lookup_user("postgres")?)
    } else {
        None
    };

    let dir = temp_root("loadcell-postgres-")?;
    let data = dir.path().join("data");
    make_dir(&data, owner, 0o700)?;
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: ServerKind::Postgres,
        child: None,
        log_path: dir.path().join("postgres.log"),
        socket: data.clone(),
        data_dir: data,
        dir: Some(dir),
    };

    let mut cmd = Command::new(&initdb);
    as_user(&mut cmd, owner, server.root());
    cmd.arg("-D")
        .arg(&server.data_dir)
        .args([
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
        ])
        .args([
            "--no-locale",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        ]);
    run_cmd(cmd, &server.root().join("initdb.log"), "initdb")?;
    if tls {
        // The server wants its key private to it (0600, its own).
        let tls_dir = server.root().join("tls");
        tls::make_certificates(&tls_dir)?;
        for (from, to) in [("server.pem", "server.crt"), ("server.key", "server.key")] {
            let dest = server.data_dir.join(to);
            fs::copy(tls_dir.join(from), &dest)
                .map_err(|e| format!("copy {from} to {}: {e}", dest.display()))?;
            fs::set_permissions(&dest, fs::Permissions::from_mode(0o600))
                .map_err(|e| format!("chmod {}: {e}", dest.display()))?;
            if let Some(a) = owner {
                std::os::unix::fs::chown(&dest, Some(a.uid), Some(a.gid))
                    .map_err(|e| format!("chown {}: {e}", dest.display()))?;
            }
        }
    }

    let mut port = first_port.unwrap_or_else(free_port);
    for attempt in 0..=PORT_RETRIES {
        let mut cmd = Command::new(&postgres);
        as_user(&mut cmd, owner, server.root());
        cmd.arg("-D")
            .arg(&server.data_dir)
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(&server.data_dir)
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "max_connections=300"])
            .args(["-c", "fsync=off"])
            .args(["-c", "shared_buffers=128MB"]);
        if tls {
            cmd.args(["-c", "ssl=on"])
                .args(["-c", "ssl_cert_file=server.crt"])
                .args(["-c", "ssl_key_file=server.key"]);
        }
        for (name, value) in settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        let log = server.log_path.clone();
        spawn_server(&mut server, cmd, &log, "postgres")?;
        server.port = port;

        let socket = server.socket.clone();
        match wait_ready(&mut server, "postgres", |port| {
            let mut c = Command::new(&pg_isready);
            c.arg("-q")
                .arg("-h")
                .arg(&socket)
                .arg("-p")
                .arg(port.to_string())
                .args(["-U", "postgres", "-d", "postgres"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            clean_pg_env(&mut c);
            c.status().map(|s| s.success()).unwrap_or(false)
        }) {
            Ok(()) => break,
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => port = free_port(),
            Err(StartError::PortInUse) => {
                return Err(format!(
                    "postgres: port still taken after {} attempts; tail of {}:\n{}",
                    PORT_RETRIES + 1,
                    server.log_path.display(),
                    server.log_tail(20)
                ))
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }

    let mut cmd = Command::new(&psql);
    clean_pg_env(&mut cmd);
    cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h"])
        .arg(&server.socket)
        .arg("-p")
        .arg(server.port.to_string())
        .args(["-U", "postgres", "-d", "postgres"])
        .arg("-c")
        .arg(format!(
            "CREATE ROLE {DB_USER} LOGIN {} PASSWORD '{DB_PASSWORD}'",
            if replication { "REPLICATION" } else { "" }
        ))
        .arg("-c")
        .arg(format!("CREATE DATABASE {DB_NAME} OWNER {DB_USER}"));
    run_cmd(cmd, &server.root().join("admin.log"), "psql (create role)")?;

    server.url = format!(
        "postgres://{DB_USER}:{DB_PASSWORD}@127.0.0.1:{}/{DB_NAME}",
        server.port
    );
    Ok(server)
}

/// The newest PostgreSQL server binaries, preferring 15 (Debian 12's).
pub(crate) fn pg_bin_dir() -> Result<PathBuf, String> {
    let preferred = PathBuf::from("/usr/lib/postgresql/15/bin");
    if is_executable(&preferred.join("postgres")) {
        return Ok(preferred);
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            is_executable(&bin.join("postgres")).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b).ok_or_else(|| {
        format!(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; {INSTALL_HINT}"
        )
    })
}

pub(crate) fn clean_pg_env(cmd: &mut Command) {
    for v in [
        "PGPASSWORD",
        "PGPASSFILE",
        "PGSERVICE",
        "PGSERVICEFILE",
        "PGOPTIONS",
        "PGSSLMODE",
        "PGCONNECT_TIMEOUT",
    ] {
        cmd.env_remove(v);
    }
}

/// SIGKILL the postmaster and every backend/auxiliary process, then free the shared
/// memory they leave behind (the SysV interlock segment and /dev/shm/PostgreSQL.*),
/// which an immediate shutdown would have removed itself.
pub(crate) fn hard_kill_postgres(child: &mut Child, data_dir: &Path) {
    let pid = child.id();
    // Freeze the postmaster so it forks nothing between listing and killing.
    signal(pid, libc::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(1);
    while !matches!(proc_state(pid), Some('T') | Some('t') | Some('Z') | None)
        && Instant::now() < deadline
    {
        sleep(Duration::from_millis(2));
    }
    let kids = children_of(pid);
    let mut shm_files: HashSet<PathBuf> = HashSet::new();
    for p in std::iter::once(pid).chain(kids.iter().copied()) {
        shm_files.extend(pg_shm_files(p));
    }
    let sysv_id = sysv_shmid(data_dir);

    let _ = child.kill();
    let _ = child.wait();
    for &k in &kids {
        signal(k, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while kids.iter().any(|&k| is_live(k)) && Instant::now() < deadline {
        sleep(Duration::from_millis(5));
    }
    for f in shm_files {
        let _ = fs::remove_file(f);
    }
    if let Some(id) = sysv_id {
        // SAFETY: IPC_RMID with a null buffer is a plain syscall on an id we own.
        unsafe {
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

/// Shared-memory id from line 7 of postmaster.pid ("<key> <shmid>").
pub(crate) fn sysv_shmid(data_dir: &Path) -> Option<libc::c_int> {
    let text = fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    let line = text.lines().nth(6)?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub(crate) fn pg_shm_files(pid: u32) -> Vec<PathBuf> {
    fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with("/dev/shm/PostgreSQL."))
        .map(PathBuf::from)
        .collect()
}
