//! Each driver pointed at a port where another system answers (real
//! servers from loadcell-testkit): as soon as the server's first bytes show
//! it does not speak the driver's protocol, the connect fails saying so,
//! and whose bytes they look like. Where the server there is silent (it
//! waits for a request, as the MySQL driver waits for a greeting), the
//! connect waits out its timeout and says what it was waiting for.

mod local_runtime;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use loadcell_core::{Driver, DriverError, ErrorClass, Target};
use loadcell_drivers::hbase::HbaseDriver;
use loadcell_drivers::memcached::MemcachedDriver;
use loadcell_drivers::mysql::MysqlDriver;
use loadcell_drivers::postgres::PostgresDriver;
use loadcell_drivers::redis::RedisDriver;
use local_runtime::block_on;

/// The connect timeout where the first bytes tell: the error must come
/// well before it.
const TIMEOUT: Duration = Duration::from_secs(5);
/// "Well before": what a refusal on the first bytes may take.
const QUICK: Duration = Duration::from_secs(1);
/// The connect timeout where the server is silent and only the timeout can
/// end the wait.
const SILENT_TIMEOUT: Duration = Duration::from_millis(700);

fn target(url: &str) -> Target {
    Target::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn mysql(port: u16) -> MysqlDriver {
    MysqlDriver::from_target(&target(&format!(
        "mysql://lc:lcpass@127.0.0.1:{port}/loadcell"
    )))
    .unwrap()
}

fn postgres(port: u16, sslmode: &str) -> PostgresDriver {
    PostgresDriver::from_target(&target(&format!(
        "postgres://lc:lcpass@127.0.0.1:{port}/loadcell?sslmode={sslmode}"
    )))
    .unwrap()
}

fn redis(port: u16) -> RedisDriver {
    RedisDriver::from_target(&target(&format!("redis://127.0.0.1:{port}"))).unwrap()
}

fn memcached(port: u16) -> MemcachedDriver {
    MemcachedDriver::from_target(&target(&format!("memcached://127.0.0.1:{port}"))).unwrap()
}

fn hbase(port: u16) -> HbaseDriver {
    HbaseDriver::from_target(&target(&format!("hbase+thrift://127.0.0.1:{port}"))).unwrap()
}

/// The connect's error within `timeout`, and how long it took to come.
fn connect_error<D: Driver>(driver: &D, timeout: Duration) -> (DriverError, Duration) {
    block_on(async {
        let start = Instant::now();
        match driver.connect_within(timeout).await {
            Ok(_) => panic!("{} accepted the connection", driver.endpoint()),
            Err(e) => (e, start.elapsed()),
        }
    })
}

/// The driver (for a `system` server) is refused on the first bytes, soon,
/// with a one-line message that names them as `like`'s.
fn refused_at_once<D: Driver>(driver: &D, system: &str, like: &str) {
    let (e, took) = connect_error(driver, TIMEOUT);
    let ep = driver.endpoint();
    assert!(took < QUICK, "{ep}: {took:?} for: {e}");
    assert_eq!(e.class, ErrorClass::Fatal, "{e}");
    assert!(
        e.message.starts_with(&format!(
            "{ep} did not answer as a {system} server: its first bytes"
        )),
        "{e}"
    );
    assert!(e.message.contains(like), "expected '{like}' in: {e}");
    assert!(!e.message.contains('\n'), "{e}");
}

/// The driver waits for a server that stays silent, and its timeout says
/// what it waited for.
fn silent<D: Driver>(driver: &D, awaited: &str, system: &str) {
    let (e, took) = connect_error(driver, SILENT_TIMEOUT);
    let ep = driver.endpoint();
    assert!(took >= SILENT_TIMEOUT, "{ep}: {took:?} for: {e}");
    assert_eq!(
        e.message,
        format!("no {awaited} from {ep} within 700ms: is a {system} server listening there?")
    );
}

/// The server closes the connection on what the driver sent: said so,
/// soon, with the question.
fn closed<D: Driver>(driver: &D, system: &str) {
    let (e, took) = connect_error(driver, TIMEOUT);
    let ep = driver.endpoint();
    assert!(took < QUICK, "{ep}: {took:?} for: {e}");
    assert!(
        e.message.contains(&ep)
            && e.message.contains("closed the connection")
            && e.message
                .contains(&format!("is a {system} server listening there?")),
        "{e}"
    );
}

const MARIADB: &str = "a MySQL/MariaDB server's greeting";
const REDIS: &str = "a Redis server's reply";
const MEMCACHED: &str = "a memcached server's reply";
const HTTP: &str = "an HTTP server's response";

#[test]
fn at_a_redis_port() {
    let server = loadcell_testkit::redis().expect("Redis starts");
    let port = server.port;
    // Redis waits for a command; so does a MySQL client for its greeting.
    silent(&mysql(port), "MySQL handshake", "MySQL");
    // A startup message has no newline: Redis waits for the rest of the
    // inline command.
    silent(
        &postgres(port, "disable"),
        "PostgreSQL reply to the startup message",
        "PostgreSQL",
    );
    silent(
        &postgres(port, "prefer"),
        "PostgreSQL answer to the TLS request",
        "PostgreSQL",
    );
    refused_at_once(&memcached(port), "memcached", REDIS);
    // A Thrift call has no newline: Redis waits for the rest of the
    // inline command.
    silent(
        &hbase(port),
        "Thrift reply to getThriftServerType",
        "HBase Thrift2",
    );
}

#[test]
fn at_a_memcached_port() {
    let server = loadcell_testkit::memcached().expect("memcached starts");
    let port = server.port;
    silent(&mysql(port), "MySQL handshake", "MySQL");
    silent(
        &postgres(port, "disable"),
        "PostgreSQL reply to the startup message",
        "PostgreSQL",
    );
    refused_at_once(&redis(port), "Redis", MEMCACHED);
    // A Thrift call begins with 0x80, memcached's binary protocol's magic:
    // it answers in that protocol.
    refused_at_once(&hbase(port), "HBase Thrift2", MEMCACHED);
}

#[test]
fn at_a_mariadb_port() {
    let server = loadcell_testkit::mariadb().expect("MariaDB starts");
    let port = server.port;
    refused_at_once(&postgres(port, "disable"), "PostgreSQL", MARIADB);
    refused_at_once(&postgres(port, "prefer"), "PostgreSQL", MARIADB);
    refused_at_once(&redis(port), "Redis", MARIADB);
    refused_at_once(&memcached(port), "memcached", MARIADB);
    refused_at_once(&hbase(port), "HBase Thrift2", MARIADB);
    // The MySQL driver itself still gets in.
    block_on(async { mysql(port).connect_within(TIMEOUT).await.unwrap() });
}

#[test]
fn at_a_postgres_port() {
    let server = loadcell_testkit::postgres().expect("PostgreSQL starts");
    let port = server.port;
    silent(&mysql(port), "MySQL handshake", "MySQL");
    // PostgreSQL reads a request as a startup packet of an impossible
    // length, and closes the connection without a word.
    closed(&redis(port), "Redis");
    closed(&memcached(port), "memcached");
    block_on(async {
        postgres(port, "disable")
            .connect_within(TIMEOUT)
            .await
            .unwrap()
    });
}

/// A web server: answers anything it is sent with 400 Bad Request.
fn http_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0
                        || conn
                            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                            .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn at_an_http_port() {
    let port = http_server();
    silent(&mysql(port), "MySQL handshake", "MySQL");
    refused_at_once(&postgres(port, "disable"), "PostgreSQL", HTTP);
    refused_at_once(&postgres(port, "prefer"), "PostgreSQL", HTTP);
    refused_at_once(&redis(port), "Redis", HTTP);
    refused_at_once(&memcached(port), "memcached", HTTP);
    refused_at_once(&hbase(port), "HBase Thrift2", HTTP);
}
