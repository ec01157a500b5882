use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::mariadb::start_mariadb;
use super::postgres::{clean_pg_env, pg_bin_dir, pg_shm_files, start_postgres, sysv_shmid};
use super::*;

/// (user, password, port, db) from `scheme://user:pass@127.0.0.1:port/db`.
fn parts(url: &str) -> (String, String, u16, String) {
    let rest = url.split_once("://").unwrap().1;
    let (auth, hostpart) = rest.split_once('@').unwrap();
    let (user, pass) = auth.split_once(':').unwrap();
    let (hostport, db) = hostpart.split_once('/').unwrap();
    let port = hostport.rsplit_once(':').unwrap().1.parse().unwrap();
    (user.into(), pass.into(), port, db.into())
}

fn mariadb_query(port: u16, user: &str, pass: &str, db: &str, sql: &str) -> (bool, String) {
    let out = Command::new(find_bin("mariadb", SBIN_DIRS).unwrap())
        .args(["--no-defaults", "--protocol=tcp", "-h127.0.0.1", "-N", "-B"])
        .arg(format!("-P{port}"))
        .arg(format!("-u{user}"))
        .arg(format!("-p{pass}"))
        .args(["-e", sql, db])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn psql_query(url: &str, sql: &str) -> (bool, String) {
    let mut cmd = Command::new(pg_bin_dir().unwrap().join("psql"));
    clean_pg_env(&mut cmd);
    let out = cmd
        .args([
            "-X",
            "-q",
            "-w",
            "-tA",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            sql,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn assert_gone(pid: u32, dir: &Path) {
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "server pid {pid} still exists"
    );
    assert!(!dir.exists(), "temp dir {} not removed", dir.display());
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let v = f();
    eprintln!("{what}: {:?}", t.elapsed());
    v
}

#[test]
fn ports() {
    let a = free_port();
    let b = free_port();
    assert_ne!(a, b);
    // A free port can be bound.
    drop(TcpListener::bind((Ipv4Addr::LOCALHOST, a)).unwrap());
    let c = closed_port();
    assert!(c != a && c != b);
    assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, c)).is_err());
}

#[test]
fn mariadb_roundtrip() {
    let server = timed("mariadb start", mariadb).unwrap_or_else(|e| panic!("{e}"));
    assert!(server.url().starts_with("mysql://lc:lcpass@127.0.0.1:"));
    let (user, pass, port, db) = parts(server.url());
    assert_eq!(port, server.port);
    assert_eq!(db, "loadcell");

    let (ok, out) = mariadb_query(port, &user, &pass, &db, "select 1");
    assert!(ok, "select 1 failed: {out}");
    assert_eq!(out.trim(), "1");
    // lc can create tables in loadcell.
    let (ok, out) = mariadb_query(
        port,
        &user,
        &pass,
        &db,
        "create table t(a int); insert into t values (7); select a from t",
    );
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "7");

    let (ok, out) = mariadb_query(port, &user, "wrong", &db, "select 1");
    assert!(!ok, "wrong password accepted: {out}");
    assert!(out.contains("Access denied"), "{out}");

    assert!(server.data_dir().join("mysql").is_dir());
    let pid = server.pid;
    let root = server.data_dir().parent().unwrap().to_path_buf();
    timed("mariadb drop", || drop(server));
    assert_gone(pid, &root);
    assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
}

#[test]
fn postgres_roundtrip() {
    let server = timed("postgres start", postgres).unwrap_or_else(|e| panic!("{e}"));
    assert!(server.url().starts_with("postgres://lc:lcpass@127.0.0.1:"));
    let (_, _, port, db) = parts(server.url());
    assert_eq!(port, server.port);
    assert_eq!(db, "loadcell");

    let (ok, out) = psql_query(server.url(), "select 1");
    assert!(ok, "select 1 failed: {out}");
    assert_eq!(out.trim(), "1");
    let (ok, out) = psql_query(
        server.url(),
        "create table t(a int); insert into t values (7); select a from t",
    );
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "7");

    let bad = server.url().replace(":lcpass@", ":wrong@");
    let (ok, out) = psql_query(&bad, "select 1");
    assert!(!ok, "wrong password accepted: {out}");
    assert!(out.contains("password authentication failed"), "{out}");
    // No password at all is refused too (-w: never prompt).
    let nopass = server.url().replace(":lcpass@", "@");
    let (ok, out) = psql_query(&nopass, "select 1");
    assert!(!ok, "passwordless login accepted: {out}");

    let pid = server.pid;
    let root = server.data_dir().parent().unwrap().to_path_buf();
    let shm = pg_shm_files(pid);
    assert!(!shm.is_empty());
    timed("postgres drop", || drop(server));
    assert_gone(pid, &root);
    for f in shm {
        assert!(!f.exists(), "{} leaked", f.display());
    }
    assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
}

#[test]
fn mariadb_kill_mid_run() {
    let mut server = mariadb().unwrap_or_else(|e| panic!("{e}"));
    let (user, pass, port, db) = parts(server.url());
    // An open connection that the kill must break.
    let conn = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
    assert!(server.is_running());
    let pid = server.pid;
    timed("mariadb kill", || server.kill());
    assert!(!server.is_running());
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
    let (ok, _) = mariadb_query(port, &user, &pass, &db, "select 1");
    assert!(!ok);
    drop(conn);
    server.kill(); // idempotent
    let root = server.data_dir().parent().unwrap().to_path_buf();
    assert!(root.exists(), "dir kept until drop");
    drop(server);
    assert_gone(pid, &root);
}

#[test]
fn postgres_kill_mid_run() {
    let mut server = postgres().unwrap_or_else(|e| panic!("{e}"));
    let url = server.url.clone();
    let pid = server.pid;
    // A live backend: a psql session sleeping on the server.
    let mut cmd = Command::new(pg_bin_dir().unwrap().join("psql"));
    clean_pg_env(&mut cmd);
    let mut session = cmd
        .args(["-X", "-w", "-d", &url, "-c", "select pg_sleep(60)"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let backend_up = || {
        children_of(pid).iter().any(|k| {
            fs::read(format!("/proc/{k}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("lc loadcell"))
                .unwrap_or(false)
        })
    };
    while !backend_up() && Instant::now() < deadline {
        if let Ok(Some(st)) = session.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(session.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("psql session ended early ({st}): {err}");
        }
        sleep(Duration::from_millis(20));
    }
    let kids = children_of(pid);
    assert!(
        kids.len() >= 6,
        "expected aux processes + backend: {kids:?}"
    );
    let shm = pg_shm_files(pid);
    let shmid = sysv_shmid(server.data_dir()).expect("shmid in postmaster.pid");

    timed("postgres kill", || server.kill());
    assert!(!server.is_running());
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    for k in kids {
        assert!(!is_live(k), "postgres child {k} survived");
    }
    for f in &shm {
        assert!(!f.exists(), "{} leaked", f.display());
    }
    // SAFETY: IPC_STAT into a zeroed struct.
    let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::shmctl(shmid, libc::IPC_STAT, &mut ds) },
        -1,
        "SysV segment {shmid} leaked"
    );
    let status = wait_timeout(&mut session, Duration::from_secs(10)).expect("psql session ended");
    assert!(!status.success());
    assert!(!psql_query(&url, "select 1").0);

    let root = server.data_dir().parent().unwrap().to_path_buf();
    drop(server);
    assert_gone(pid, &root);
}

#[test]
fn port_taken_retries_mariadb() {
    let blocker = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let taken = blocker.local_addr().unwrap().port();
    let server = start_mariadb(Some(taken)).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(server.port, taken);
    let (user, pass, port, db) = parts(server.url());
    let (ok, out) = mariadb_query(port, &user, &pass, &db, "select 1");
    assert!(ok, "{out}");
}

#[test]
fn port_taken_retries_postgres() {
    let blocker = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let taken = blocker.local_addr().unwrap().port();
    let server = start_postgres(Some(taken)).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(server.port, taken);
    let (ok, out) = psql_query(server.url(), "select 1");
    assert!(ok, "{out}");
}

#[test]
fn concurrent_starts() {
    let t = Instant::now();
    let handles: Vec<_> = (0..4)
        .map(|i| std::thread::spawn(move || if i % 2 == 0 { mariadb() } else { postgres() }))
        .collect();
    let servers: Vec<TestServer> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    eprintln!("4 servers started concurrently in {:?}", t.elapsed());
    let ports: HashSet<u16> = servers.iter().map(|s| s.port).collect();
    assert_eq!(ports.len(), servers.len());
    for s in &servers {
        let ok = match s.kind() {
            ServerKind::MariaDb => {
                let (user, pass, port, db) = parts(s.url());
                mariadb_query(port, &user, &pass, &db, "select 1").0
            }
            ServerKind::Postgres => psql_query(s.url(), "select 1").0,
            _ => unreachable!("not started here"),
        };
        assert!(ok, "{}", s.url());
    }
}

/// Prints a shared server's PIDs and dir for [`ends_with_its_test_binary`],
/// then returns (the binary exits) or waits to be killed.
fn report_shared_server(pids: &[u32], dir: &Path) {
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    println!("server {} {}", pids.join(","), dir.display());
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    if std::env::var_os("LOADCELL_TESTKIT_WAIT").is_some() {
        sleep(Duration::from_secs(600));
    }
}

/// Run by [`a_search_server_ends_with_its_test_binary`] in a child test
/// binary.
#[test]
#[ignore = "run as a child by a_search_server_ends_with_its_test_binary"]
fn search_server_child() {
    let server = timed("opensearch start", || crate::opensearch().unwrap());
    report_shared_server(&[server.pid], server.log_path.parent().unwrap());
}

/// Run by [`hbase_ends_with_its_test_binary`] in a child test binary.
#[test]
#[ignore = "run as a child by hbase_ends_with_its_test_binary"]
fn hbase_child() {
    let server = timed("hbase start", || crate::hbase().unwrap());
    report_shared_server(&[server.master_pid, server.thrift_pid], server.dir());
}

#[test]
fn a_search_server_ends_with_its_test_binary() {
    ends_with_its_test_binary("tests::search_server_child");
}

#[test]
fn hbase_ends_with_its_test_binary() {
    ends_with_its_test_binary("tests::hbase_child");
}

/// One binary running `child_test` exits normally (the exit handler stops
/// its server and removes its dir), one is killed (the parent-death
/// signal): no process of either server is left.
fn ends_with_its_test_binary(child_test: &str) {
    use std::io::BufRead;
    let start = |wait: bool| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--ignored", "--exact", child_test])
            .args(["--nocapture", "--test-threads=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if wait {
            cmd.env("LOADCELL_TESTKIT_WAIT", "1");
        }
        cmd.spawn().unwrap()
    };
    let server_of = |child: &mut Child| {
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        // After the harness's `test … ` on the same line.
        let line = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| Some(l.split_once("server ")?.1.to_string()))
            .expect("the child printed its server");
        let mut words = line.split(' ');
        let pids: Vec<u32> = words
            .next()
            .unwrap()
            .split(',')
            .map(|p| p.parse().unwrap())
            .collect();
        // The rest of its output is read, or it would fail writing it.
        (pids, PathBuf::from(words.next().unwrap()), lines)
    };
    /// A child killed if the test fails before it ends.
    struct Reaped(Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut exiting = Reaped(start(false));
    let mut killed = Reaped(start(true));
    let (exiting_pids, exiting_dir, rest) = server_of(&mut exiting.0);
    let (killed_pids, killed_dir, _) = server_of(&mut killed.0);
    rest.for_each(drop);
    assert!(exiting.0.wait().unwrap().success());
    for pid in exiting_pids {
        assert_gone(pid, &exiting_dir);
    }
    assert!(killed_pids.iter().all(|&pid| is_live(pid)));
    drop(killed);
    let deadline = Instant::now() + Duration::from_secs(10);
    while killed_pids.iter().any(|&pid| is_live(pid)) && Instant::now() < deadline {
        sleep(POLL);
    }
    assert!(
        !killed_pids.iter().any(|&pid| is_live(pid)),
        "a JVM outlived its killed test binary"
    );
    // What the exit handler would have removed.
    fs::remove_dir_all(&killed_dir).unwrap();
}

#[test]
fn answers_are_complete_by_their_framing() {
    use crate::process::is_complete;
    assert!(is_complete(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    ));
    assert!(!is_complete(
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok"
    ));
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
    assert!(is_complete(chunked));
    assert!(!is_complete(&chunked[..chunked.len() - 2]));
    // No framing: read to the end of the connection.
    assert!(!is_complete(b"HTTP/1.0 204 No Content\r\n\r\n"));
}

#[test]
fn an_install_is_made_once_and_renamed_into_place() {
    let entry = format!("test-install-{}", std::process::id());
    let made = std::cell::Cell::new(0);
    let install = || {
        crate::install_once(
            &entry,
            |home| home.join("bin").exists(),
            |staging| {
                made.set(made.get() + 1);
                let out = staging.join("out");
                std::fs::create_dir_all(&out).unwrap();
                std::fs::write(out.join("bin"), "x").unwrap();
                Ok(out)
            },
        )
    };
    let home = install().unwrap();
    assert_eq!(install().unwrap(), home);
    assert_eq!(made.get(), 1);
    assert!(home.join("bin").exists());
    let staging = home.with_file_name(format!(".{entry}.{}", std::process::id()));
    assert!(!staging.exists(), "the staging dir is removed");
    std::fs::remove_dir_all(&home).unwrap();
    let failed = crate::install_once(&entry, |h| h.exists(), |_| Err("no".to_string()));
    assert_eq!(failed.unwrap_err(), "no");
}
