//! MariaDB: a private server on a free port, with the test database and
//! user made, plain, TLS or with extra options.

use std::fs;
use std::process::Command;

use super::{
    find_bin, free_port, is_root, lookup_user, make_dir, run_cmd, spawn_server, temp_root, tls,
    wait_ready, ServerKind, StartError, TestServer, DB_NAME, DB_PASSWORD, DB_USER, PORT_RETRIES,
    SBIN_DIRS,
};

/// Start a private MariaDB server. See the crate docs.
pub fn mariadb() -> Result<TestServer, String> {
    start_mariadb(None)
}

/// [`mariadb()`] listening on every address, for clients in other network
/// namespaces ([`ClientNamespaces`]); the URL is still 127.0.0.1's.
pub fn mariadb_on_every_address() -> Result<TestServer, String> {
    start_mariadb_with(None, false, "0.0.0.0", &[])
}

/// [`mariadb()`] with TLS on, with a certificate for `localhost` and
/// 127.0.0.1 issued by a CA made for it (with `openssl`). Plain connections
/// are still accepted. The URL is the plain one; add `?sslmode=require`, or
/// `?sslmode=verify-full&sslrootcert=` and [`TestServer::tls_ca`].
pub fn mariadb_tls() -> Result<TestServer, String> {
    start_mariadb_with(None, true, "127.0.0.1", &[])
}

/// [`mariadb()`] started with more server options (`--back-log=8`), for
/// settings that only take effect at start.
pub fn mariadb_with(options: &[&str]) -> Result<TestServer, String> {
    start_mariadb_with(None, false, "127.0.0.1", options)
}

pub(crate) fn start_mariadb(first_port: Option<u16>) -> Result<TestServer, String> {
    start_mariadb_with(first_port, false, "127.0.0.1", &[])
}

pub(crate) fn start_mariadb_with(
    first_port: Option<u16>,
    tls: bool,
    bind: &str,
    options: &[&str],
) -> Result<TestServer, String> {
    let install_db = find_bin("mariadb-install-db", SBIN_DIRS)?;
    let mariadbd = find_bin("mariadbd", SBIN_DIRS)?;
    let client = find_bin("mariadb", SBIN_DIRS)?;
    let owner = if is_root() {
        Some(lookup_user("mysql")?)
    } else {
        None
    };

    let dir = temp_root("loadcell-mariadb-")?;
    let data = dir.path().join("data");
    let run = dir.path().join("run");
    // Private tmpdir: concurrent bootstraps sharing /tmp sometimes clash on their
    // internal temp tables ("Unknown table 'mysql.tmp_user_sys'").
    let tmp = dir.path().join("tmp");
    make_dir(&data, owner, 0o755)?;
    make_dir(&run, owner, 0o755)?;
    make_dir(&tmp, owner, 0o755)?;
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: ServerKind::MariaDb,
        child: None,
        log_path: data.join("err.log"),
        socket: run.join("s.sock"),
        data_dir: data,
        dir: Some(dir),
    };

    let mut cmd = Command::new(&install_db);
    cmd.arg("--no-defaults");
    if owner.is_some() {
        cmd.arg("--user=mysql");
    }
    cmd.arg(format!("--datadir={}", server.data_dir.display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db");
    run_cmd(
        cmd,
        &server.root().join("install-db.log"),
        "mariadb-install-db",
    )?;
    let tls_dir = server.root().join("tls");
    if tls {
        // World-readable: the server may run as `mysql`.
        tls::make_certificates(&tls_dir)?;
    }

    let mut port = first_port.unwrap_or_else(free_port);
    for attempt in 0..=PORT_RETRIES {
        let _ = fs::remove_file(&server.log_path);
        let mut cmd = Command::new(&mariadbd);
        cmd.arg("--no-defaults");
        if owner.is_some() {
            cmd.arg("--user=mysql");
        }
        cmd.arg(format!("--datadir={}", server.data_dir.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--bind-address={bind}"))
            .arg(format!("--port={port}"))
            .arg(format!("--socket={}", server.socket.display()))
            .arg(format!("--pid-file={}", run.join("p.pid").display()))
            .arg("--innodb-buffer-pool-size=256M")
            .arg("--max-connections=600")
            .arg(format!("--log-error={}", server.log_path.display()))
            .args(options);
        if tls {
            cmd.arg(format!("--ssl-ca={}", tls_dir.join("ca.pem").display()))
                .arg(format!(
                    "--ssl-cert={}",
                    tls_dir.join("server.pem").display()
                ))
                .arg(format!(
                    "--ssl-key={}",
                    tls_dir.join("server.key").display()
                ));
        }
        let out = server.root().join("mariadbd.out");
        spawn_server(&mut server, cmd, &out, "mariadbd")?;
        server.port = port;

        let log = server.log_path.clone();
        match wait_ready(&mut server, "mariadbd", |_| {
            fs::read_to_string(&log)
                .map(|s| s.contains("ready for connections"))
                .unwrap_or(false)
        }) {
            Ok(()) => break,
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => port = free_port(),
            Err(StartError::PortInUse) => {
                return Err(format!(
                    "mariadbd: port still taken after {} attempts; tail of {}:\n{}",
                    PORT_RETRIES + 1,
                    server.log_path.display(),
                    server.log_tail(20)
                ))
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }

    let sql = format!(
        "CREATE DATABASE {DB_NAME};\n\
         CREATE USER '{DB_USER}'@'%' IDENTIFIED BY '{DB_PASSWORD}';\n\
         CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}';\n\
         CREATE USER '{DB_USER}'@'localhost' IDENTIFIED BY '{DB_PASSWORD}';\n\
         GRANT ALL PRIVILEGES ON {DB_NAME}.* TO '{DB_USER}'@'%';\n\
         GRANT ALL PRIVILEGES ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';\n\
         GRANT ALL PRIVILEGES ON {DB_NAME}.* TO '{DB_USER}'@'localhost';"
    );
    let mut cmd = Command::new(&client);
    cmd.arg("--no-defaults")
        .arg("--protocol=socket")
        .arg(format!("--socket={}", server.socket.display()))
        .args(["-uroot", "-e", &sql]);
    run_cmd(
        cmd,
        &server.root().join("admin.log"),
        "mariadb (create user)",
    )?;

    server.url = format!(
        "mysql://{DB_USER}:{DB_PASSWORD}@127.0.0.1:{}/{DB_NAME}",
        server.port
    );
    Ok(server)
}
