//! Whether the server at the other end speaks the driver's protocol at all,
//! and what a connect waits for, so that a target pointed at the wrong port
//! gets a message that says so:
//!
//! - as soon as the server's first bytes cannot begin the reply the driver
//!   waits for, the connect fails with "did not answer as a MySQL/MariaDB
//!   server", quoting those bytes and, when they are recognisable, whose
//!   they look like (a MariaDB greeting at a PostgreSQL driver, a Redis
//!   error at a memcached driver, an HTTP response anywhere);
//! - when the server is silent (a MySQL driver at a Redis port: Redis waits
//!   for a command, MySQL's client for a greeting), silence proves nothing
//!   — a busy server is slow to greet too — so the connect waits out its
//!   timeout, and then says what it was waiting for: "no MySQL handshake
//!   from HOST:PORT within 5s: is a MySQL server listening there?".

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use loadcell_core::driver::connect_timed_out;
use loadcell_core::DriverError;

/// What a connect is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Awaiting {
    /// The TCP connection (the name lookup included).
    Connection,
    /// The TLS handshake.
    Tls,
    /// The server's first bytes, e.g. "MySQL handshake": nothing from the
    /// server has shown yet that it speaks the protocol.
    First(&'static str),
    /// A later reply, e.g. "reply to the authentication".
    Reply(&'static str),
}

/// Where a connect is, for the message when its timeout cuts it short.
/// Owned by the caller of the connect future, which the timeout drops.
#[derive(Debug)]
pub(crate) struct Progress(Cell<Awaiting>);

impl Progress {
    pub(crate) fn new() -> Progress {
        Progress(Cell::new(Awaiting::Connection))
    }

    pub(crate) fn set(&self, awaiting: Awaiting) {
        self.0.set(awaiting);
    }

    pub(crate) fn get(&self) -> Awaiting {
        self.0.get()
    }
}

/// `connect`, given up after `timeout` with a message that says what it
/// was waiting for from `endpoint`. `system` names the server it expects
/// ("MySQL", "PostgreSQL").
pub(crate) async fn within<T>(
    timeout: Duration,
    endpoint: &str,
    system: &str,
    progress: &Progress,
    connect: impl Future<Output = Result<T, DriverError>>,
) -> Result<T, DriverError> {
    match tokio::time::timeout(timeout, connect).await {
        Ok(result) => result,
        Err(_) => Err(timed_out(endpoint, system, progress.get(), timeout)),
    }
}

fn timed_out(endpoint: &str, system: &str, awaiting: Awaiting, timeout: Duration) -> DriverError {
    let t = humantime::format_duration(timeout);
    match awaiting {
        Awaiting::Connection => connect_timed_out(endpoint, timeout),
        Awaiting::Tls => DriverError::connection(format!(
            "no TLS handshake from {endpoint} within {t}: is TLS enabled on that port?"
        )),
        Awaiting::First(what) => DriverError::connection(format!(
            "no {what} from {endpoint} within {t}: is a {system} server listening there?"
        )),
        Awaiting::Reply(what) => {
            DriverError::connection(format!("no {what} from {endpoint} within {t}"))
        }
    }
}

/// The message for a server at `endpoint` whose first bytes, `first`,
/// cannot begin what a `system` server sends (`expected`, e.g. "a MySQL
/// handshake"). Quotes them, and says whose they look like when that is
/// recognisable. One line.
pub(crate) fn not_answering_as(
    endpoint: &str,
    system: &str,
    expected: &str,
    first: &[u8],
) -> String {
    let like = match looks_like(first) {
        Some(other) => format!("; they look like {other}: is the port right?"),
        None => ": is the port right?".to_string(),
    };
    format!(
        "{endpoint} did not answer as a {system} server: its first bytes, {}, are not {expected}{like}",
        quoted(first)
    )
}

/// At most this many bytes are quoted.
const QUOTED: usize = 40;

/// `bytes` in double quotes, printable ASCII as is, the rest escaped; cut
/// at [`QUOTED`] bytes.
pub(crate) fn quoted(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes.iter().take(QUOTED) {
        match b {
            b'\r' => out.push_str("\\r"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    if bytes.len() > QUOTED {
        out.push('…');
    }
    out
}

/// Whose first bytes `b` look like, for the servers a target is most often
/// confused with; `None` when they are not recognisable.
pub(crate) fn looks_like(b: &[u8]) -> Option<&'static str> {
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| b.starts_with(p.as_bytes()));
    if starts(&["HTTP/"]) {
        return Some("an HTTP server's response");
    }
    if starts(&["SSH-"]) {
        return Some("an SSH server's greeting");
    }
    if b.len() >= 2 && matches!(b[0], 0x15 | 0x16) && b[1] == 0x03 {
        return Some("a TLS server's record");
    }
    if starts(&[
        "-ERR",
        "-NOAUTH",
        "-WRONGPASS",
        "-DENIED",
        "-NOPROTO",
        "-LOADING",
        "+OK\r\n",
        "+PONG\r\n",
    ]) {
        return Some("a Redis server's reply");
    }
    if starts(&[
        "ERROR\r\n",
        "ERROR ",
        "CLIENT_ERROR ",
        "SERVER_ERROR ",
        "VERSION ",
    ]) {
        return Some("a memcached server's reply");
    }
    if b.len() >= 5 && b[2] == 0 && b[3] == 0 && matches!(b[4], 10 | 0xFF) {
        let len = usize::from(b[0]) | usize::from(b[1]) << 8;
        if len > 1 {
            return Some("a MySQL/MariaDB server's greeting");
        }
    }
    // memcached's binary-protocol response magic (after the MySQL
    // greeting, whose length may begin with the same byte), answering a
    // request that began with its request magic 0x80, as a Thrift call does.
    if b.len() >= 2 && b[0] == 0x81 && b[1] <= 0x3f {
        return Some("a memcached server's reply");
    }
    if b.len() >= 6 {
        let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
        let pg = match b[0] {
            b'E' | b'N' => (5..=30_000).contains(&len) && matches!(b[5], b'S' | b'V' | b'C' | b'M'),
            b'R' => (8..=2_000).contains(&len) && b[5] == 0,
            _ => false,
        };
        if pg {
            return Some("a PostgreSQL server's message");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_one_line_and_short() {
        assert_eq!(quoted(b"-ERR x\r\n"), "\"-ERR x\\r\\n\"");
        assert_eq!(quoted(b"\x00\"\\\xff"), "\"\\x00\\\"\\\\\\xff\"");
        let long = quoted(&[b'a'; 100]);
        assert!(long.ends_with("\"…") && long.len() < 50, "{long}");
    }

    #[test]
    fn recognises_the_usual_suspects() {
        let mariadb = b"\x5b\x00\x00\x00\x0a11.8.3-MariaDB\x00";
        assert_eq!(
            looks_like(mariadb),
            Some("a MySQL/MariaDB server's greeting")
        );
        let pg = b"E\x00\x00\x00\x54SFATAL\x00VFATAL\x00C0A000\x00";
        assert_eq!(looks_like(pg), Some("a PostgreSQL server's message"));
        assert_eq!(
            looks_like(b"-ERR unknown command 'version'\r\n"),
            Some("a Redis server's reply")
        );
        assert_eq!(looks_like(b"ERROR\r\n"), Some("a memcached server's reply"));
        assert_eq!(
            looks_like(b"\x81\x01\x00\x00\x00\x00\x00\x04"),
            Some("a memcached server's reply")
        );
        assert_eq!(
            looks_like(b"HTTP/1.1 400 Bad Request\r\n"),
            Some("an HTTP server's response")
        );
        assert_eq!(
            looks_like(b"\x15\x03\x03\x00\x02"),
            Some("a TLS server's record")
        );
        assert_eq!(looks_like(b"hello"), None);
    }

    #[test]
    fn messages() {
        let m = not_answering_as("h:1", "PostgreSQL", "a PostgreSQL message", b"ERROR\r\n");
        assert_eq!(
            m,
            "h:1 did not answer as a PostgreSQL server: its first bytes, \"ERROR\\r\\n\", are not \
             a PostgreSQL message; they look like a memcached server's reply: is the port right?"
        );
        let t = Duration::from_secs(5);
        let e = timed_out("h:1", "MySQL", Awaiting::First("MySQL handshake"), t);
        assert_eq!(
            e.message,
            "no MySQL handshake from h:1 within 5s: is a MySQL server listening there?"
        );
        assert_eq!(
            timed_out("h:1", "MySQL", Awaiting::Connection, t).message,
            "timed out after 5s connecting to h:1"
        );
    }
}
