//! A private Mosquitto (Debian's `mosquitto`) on a free 127.0.0.1 port.
//!
//! `mosquitto -c TMP/mosquitto.conf`, in the foreground, stopped by PID. The
//! configuration: one listener on 127.0.0.1:P, no persistence, `$SYS`
//! every second, 100,000 queued messages per client (the default 1,000
//! drops QoS 1 messages a slow subscriber has not taken yet, which a test
//! of delivery must not confuse with loss), and `user root` so that it
//! reads its temp dir. URL `mqtt://127.0.0.1:P`. [`Mosquitto`] adds a
//! password file, TLS (`mqtts://localhost:P?sslrootcert=CA`),
//! `max_connections`, or a queue small enough to drop messages.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::process::Command;
use std::time::Duration;

use super::{
    find_bin, free_port, make_certificates, run_cmd, spawn_server, temp_root, wait_ready,
    ServerKind, StartError, TestServer, PORT_RETRIES, SBIN_DIRS,
};

/// How a [`mosquitto_with`] broker differs from the plain one.
#[derive(Debug, Clone, Default)]
pub struct Mosquitto {
    /// Only this user, with this password, may connect.
    pub password: Option<(String, String)>,
    /// The listener speaks TLS only.
    pub tls: bool,
    /// Connections the listener accepts, at most.
    pub max_connections: Option<usize>,
    /// QoS 1 and 2 messages queued for a client, at most, with one in
    /// flight: a broker that drops what a subscriber has not yet taken.
    pub max_queued: Option<usize>,
}

/// Start a private Mosquitto that anyone may connect to.
pub fn mosquitto() -> Result<TestServer, String> {
    mosquitto_with(&Mosquitto::default())
}

pub fn mosquitto_with(options: &Mosquitto) -> Result<TestServer, String> {
    let bin = find_bin("mosquitto", SBIN_DIRS)?;
    let dir = temp_root("loadcell-mosquitto-")?;
    let root = dir.path().to_path_buf();
    let mut server = TestServer {
        url: String::new(),
        port: 0,
        pid: 0,
        kind: ServerKind::Mosquitto,
        child: None,
        log_path: root.join("mosquitto.log"),
        socket: root.clone(),
        data_dir: root.clone(),
        dir: Some(dir),
    };
    let mut extra = String::new();
    match &options.password {
        Some((user, password)) => {
            let file = root.join("passwd");
            let passwd = find_bin("mosquitto_passwd", SBIN_DIRS)?;
            let mut cmd = Command::new(passwd);
            cmd.arg("-c").arg("-b").arg(&file).arg(user).arg(password);
            run_cmd(cmd, &root.join("passwd.log"), "mosquitto_passwd")?;
            extra += &format!("allow_anonymous false\npassword_file {}\n", file.display());
        }
        None => extra += "allow_anonymous true\n",
    }
    if options.tls {
        let tls = root.join("tls");
        make_certificates(&tls)?;
        extra += &format!(
            "certfile {0}/server.pem\nkeyfile {0}/server.key\n",
            tls.display()
        );
    }
    let max = options.max_connections.map_or(-1, |n| n as i64);
    match options.max_queued {
        Some(n) => extra += &format!("max_queued_messages {n}\nmax_inflight_messages 1\n"),
        None => extra += "max_queued_messages 100000\n",
    }
    let mut port = free_port();
    for attempt in 0..=PORT_RETRIES {
        let conf = root.join("mosquitto.conf");
        fs::write(
            &conf,
            format!(
                "per_listener_settings false\nlistener {port} 127.0.0.1\nmax_connections {max}\n\
                 {extra}persistence false\nsys_interval 1\n\
                 set_tcp_nodelay true\nuser root\nlog_dest stderr\nlog_type error\n\
                 log_type warning\nlog_type notice\nconnection_messages true\n"
            ),
        )
        .map_err(|e| format!("write {}: {e}", conf.display()))?;
        let mut cmd = Command::new(&bin);
        cmd.arg("-c").arg(&conf).current_dir(&root);
        let log = server.log_path.clone();
        spawn_server(&mut server, cmd, &log, "mosquitto")?;
        server.port = port;
        let ready = |port| options.tls || answers_connack(port);
        match wait_ready(&mut server, "mosquitto", ready) {
            Ok(()) => break,
            Err(StartError::PortInUse) if attempt < PORT_RETRIES => port = free_port(),
            Err(StartError::PortInUse) => {
                return Err(format!(
                    "mosquitto: port still taken after {} attempts",
                    PORT_RETRIES + 1
                ))
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }
    let credentials = options
        .password
        .as_ref()
        .map(|(u, p)| format!("{u}:{p}@"))
        .unwrap_or_default();
    server.url = if options.tls {
        format!(
            "mqtts://{credentials}localhost:{}?sslrootcert={}",
            server.port,
            server.tls_ca().display()
        )
    } else {
        format!("mqtt://{credentials}127.0.0.1:{}", server.port)
    };
    Ok(server)
}

/// An MQTT 3.1.1 CONNECT (empty client id, clean session) is answered
/// with a CONNACK; a broker with a password file refuses it with code 5,
/// which still says it is up.
pub(crate) fn answers_connack(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let connect = b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00";
    if s.write_all(connect).is_err() {
        return false;
    }
    let mut ack = [0u8; 4];
    s.read_exact(&mut ack).is_ok() && ack[..2] == [0x20, 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_answers_and_a_password_one_refuses_strangers() {
        let server = mosquitto().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(server.kind(), ServerKind::Mosquitto);
        assert!(answers_connack(server.port));
        let locked = mosquitto_with(&Mosquitto {
            password: Some(("car".into(), "secret".into())),
            ..Mosquitto::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(locked.url().starts_with("mqtt://car:secret@127.0.0.1:"));
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, locked.port)).unwrap();
        s.write_all(b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00")
            .unwrap();
        let mut ack = [0u8; 4];
        s.read_exact(&mut ack).unwrap();
        assert_eq!(ack, [0x20, 2, 0, 5], "not authorized");
    }
}
