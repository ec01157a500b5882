//! The Redis driver against real servers and clusters from loadcell-testkit
//! (each stops when its test ends). Connections are used on one thread, as
//! the engine does: a current-thread runtime and a `LocalSet`.

mod local_runtime;

use std::future::Future;
use std::time::{Duration, Instant};

use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::{Driver, DriverError, ErrorClass, Target};
use loadcell_drivers::redis::{hash_slot, RedisConn, RedisDriver};
use loadcell_testkit::{redis_cli, TestServer};
use local_runtime::block_on as run;

fn start() -> TestServer {
    loadcell_testkit::redis().unwrap_or_else(|e| panic!("cannot start Redis: {e}"))
}

fn driver(url: &str) -> RedisDriver {
    let target = Target::parse(url).expect("valid URL");
    RedisDriver::from_target(&target).expect("valid redis target")
}

async fn connect(url: &str) -> RedisConn {
    driver(url)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

/// An owned copy of one reply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Hit(Vec<u8>),
    Miss,
    Done,
    /// An array's elements: a string's bytes, `None` for anything else.
    Array(Vec<Option<Vec<u8>>>),
    Err(DriverError),
}

/// Flushes and returns `(index, reply)` in delivery order.
async fn flush(conn: &mut RedisConn) -> Result<Vec<(usize, Got)>, DriverError> {
    let mut out = Vec::new();
    conn.flush(&mut |at, r| {
        out.push((
            at.index,
            match r {
                Ok(KvReply::Hit(v)) => Got::Hit(v.to_vec()),
                Ok(KvReply::Miss) => Got::Miss,
                Ok(KvReply::Done) => Got::Done,
                Ok(KvReply::Array(a)) => {
                    Got::Array(a.strings().map(|e| e.map(<[u8]>::to_vec)).collect())
                }
                Err(e) => Got::Err(e),
            },
        ))
    })
    .await?;
    Ok(out)
}

/// Flushes and returns the replies by index (every index exactly once).
async fn flush_sorted(conn: &mut RedisConn, n: usize) -> Vec<Got> {
    let mut got = flush(conn).await.unwrap_or_else(|e| panic!("flush: {e}"));
    got.sort_by_key(|(i, _)| *i);
    let idx: Vec<usize> = got.iter().map(|(i, _)| *i).collect();
    assert_eq!(idx, (0..n).collect::<Vec<_>>());
    got.into_iter().map(|(_, g)| g).collect()
}

async fn get(conn: &mut RedisConn, key: &[u8]) -> Got {
    conn.queue_get(key);
    let mut got = flush(conn).await.unwrap_or_else(|e| panic!("flush: {e}"));
    assert_eq!(got.len(), 1);
    got.pop().unwrap().1
}

async fn set(conn: &mut RedisConn, key: &[u8], value: &[u8]) {
    conn.queue_set(key, value);
    assert_eq!(flush(conn).await.unwrap(), vec![(0, Got::Done)]);
}

#[track_caller]
fn assert_error(got: &Got, class: ErrorClass, code: &str) -> DriverError {
    match got {
        Got::Err(e) => {
            assert_eq!(e.class, class, "{e}");
            assert_eq!(e.code.as_deref(), Some(code), "{e}");
            e.clone()
        }
        other => panic!("expected a {code} error, got {other:?}"),
    }
}

#[test]
fn set_get_miss_commands_and_info() {
    let server = start();
    run(async {
        let d = driver(server.url());
        assert_eq!(d.endpoint(), format!("127.0.0.1:{}", server.port));
        let mut conn = d.connect().await.unwrap();
        let info = d.server_info(&mut conn).await.unwrap();
        assert_eq!(info.product, "Redis");
        assert!(info.version.starts_with(char::is_numeric), "{info:?}");

        // Exact bytes, including CR/LF and NUL, the empty value and a value
        // larger than the read buffer.
        let binary: Vec<u8> = (0..=255u8).collect();
        set(&mut conn, b"bin", &binary).await;
        assert_eq!(get(&mut conn, b"bin").await, Got::Hit(binary));
        set(&mut conn, b"empty", b"").await;
        assert_eq!(get(&mut conn, b"empty").await, Got::Hit(vec![]));
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        set(&mut conn, b"big", &big).await;
        assert_eq!(get(&mut conn, b"big").await, Got::Hit(big));
        assert_eq!(get(&mut conn, b"nope").await, Got::Miss);
        // Nothing queued: nothing sent.
        assert!(flush(&mut conn).await.unwrap().is_empty());

        // Arbitrary commands: integers, bulk strings, nil, arrays.
        conn.queue_command(&[b"HSET", b"h", b"f", b"v"]).unwrap();
        conn.queue_command(&[b"HGET", b"h", b"f"]).unwrap();
        conn.queue_command(&[b"HGET", b"h", b"missing"]).unwrap();
        conn.queue_command(&[b"RPUSH", b"l", b"a", b"b", b"c"])
            .unwrap();
        conn.queue_command(&[b"LRANGE", b"l", b"0", b"-1"]).unwrap();
        conn.queue_command(&[b"INCR", b"n"]).unwrap();
        conn.queue_command(&[b"PING"]).unwrap();
        conn.queue_command(&[b"HGETALL", b"missing"]).unwrap();
        let list = [b"a", b"b", b"c"].map(|e| Some(e.to_vec()));
        assert_eq!(
            flush_sorted(&mut conn, 8).await,
            vec![
                Got::Done,
                Got::Hit(b"v".to_vec()),
                Got::Miss,
                Got::Done,
                Got::Array(list.to_vec()),
                Got::Done,
                Got::Done,
                // A key that is not there: an empty array, not a success.
                Got::Array(vec![]),
            ]
        );
        let err = conn.queue_command(&[]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Fatal);
    });
}

#[test]
fn pipeline_of_100_in_order() {
    let server = start();
    run(async {
        let mut conn = connect(server.url()).await;
        // Mixed: SET k_i, GET k_i (hit), GET a missing key, a command.
        let mut expected = Vec::new();
        for i in 0..25 {
            let key = format!("k_{i}");
            let value = format!("value {i} {}", "x".repeat(i * 37));
            conn.queue_set(key.as_bytes(), value.as_bytes());
            expected.push(Got::Done);
            conn.queue_get(key.as_bytes());
            expected.push(Got::Hit(value.into_bytes()));
            conn.queue_get(format!("absent_{i}").as_bytes());
            expected.push(Got::Miss);
            conn.queue_command(&[b"INCR", b"counter"]).unwrap();
            expected.push(Got::Done);
        }
        let got = flush(&mut conn).await.unwrap();
        let idx: Vec<usize> = got.iter().map(|(i, _)| *i).collect();
        assert_eq!(idx, (0..100).collect::<Vec<_>>(), "replies in order");
        let got: Vec<Got> = got.into_iter().map(|(_, g)| g).collect();
        assert_eq!(got, expected);
        assert_eq!(
            redis_cli(server.port, &["GET", "counter"]).unwrap().trim(),
            "25"
        );
    });
}

#[test]
fn server_errors_are_classified_per_request() {
    let server = start();
    run(async {
        let mut conn = connect(server.url()).await;
        conn.queue_command(&[b"LPUSH", b"list", b"a"]).unwrap();
        conn.queue_get(b"list");
        conn.queue_command(&[b"NOSUCHCOMMAND", b"x"]).unwrap();
        conn.queue_get(b"other");
        let got = flush_sorted(&mut conn, 4).await;
        assert_eq!(got[0], Got::Done);
        let e = assert_error(&got[1], ErrorClass::Fatal, "WRONGTYPE");
        assert!(e.message.contains("wrong kind of value"), "{e}");
        let e = assert_error(&got[2], ErrorClass::Fatal, "ERR");
        assert!(e.message.contains("unknown command"), "{e}");
        assert_eq!(got[3], Got::Miss);
        // The connection is still usable.
        set(&mut conn, b"after", b"ok").await;
        assert_eq!(get(&mut conn, b"after").await, Got::Hit(b"ok".to_vec()));
    });
}

#[test]
fn database_selection() {
    let server = start();
    run(async {
        let mut conn = connect(&format!("{}/3", server.url())).await;
        set(&mut conn, b"in3", b"yes").await;
        assert_eq!(
            redis_cli(server.port, &["-n", "3", "GET", "in3"])
                .unwrap()
                .trim(),
            "yes"
        );
        assert_eq!(
            redis_cli(server.port, &["EXISTS", "in3"]).unwrap().trim(),
            "0"
        );
        let err = driver(&format!("{}/99", server.url()))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Fatal, "{err}");
        assert!(err.message.contains("cannot select database 99"), "{err}");
    });
}

#[test]
fn authentication() {
    let password = "s3cret-pw";
    let server = loadcell_testkit::redis_with_password(password)
        .unwrap_or_else(|e| panic!("cannot start Redis: {e}"));
    let port = server.port;
    run(async {
        let mut conn = connect(server.url()).await;
        set(&mut conn, b"k", b"v").await;
        // The `default` user, named.
        let mut conn = connect(&format!("redis://default:{password}@127.0.0.1:{port}")).await;
        assert_eq!(get(&mut conn, b"k").await, Got::Hit(b"v".to_vec()));

        let wrong = "not-the-pw";
        for url in [
            format!("redis://:{wrong}@127.0.0.1:{port}"),
            format!("redis://default:{wrong}@127.0.0.1:{port}"),
        ] {
            let err = driver(&url).connect().await.unwrap_err();
            assert_eq!(err.class, ErrorClass::Fatal, "{err}");
            assert_eq!(
                err.message,
                format!(
                    "authentication failed at 127.0.0.1:{port}: check the user and password in --target"
                )
            );
            assert!(!err.to_string().contains(wrong), "{err}");
        }
        // No password at all: the connect's PING says so, before any load.
        let e = driver(&format!("redis://127.0.0.1:{port}"))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Fatal, "{e}");
        assert_eq!(e.code.as_deref(), Some("NOAUTH"), "{e}");
        assert!(e.message.contains("authentication failed"), "{e}");
    });
    // A password given to a server without one.
    let open = start();
    run(async {
        let err = driver(&format!("redis://:pw@127.0.0.1:{}", open.port))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Fatal, "{err}");
        assert!(err.message.contains("authentication failed"), "{err}");
    });
}

#[test]
fn server_killed_mid_use_is_a_connection_error() {
    let mut server = start();
    let port = server.port;
    run(async {
        let mut conn = connect(server.url()).await;
        set(&mut conn, b"k", b"v").await;
        server.kill();
        for _ in 0..10 {
            conn.queue_get(b"k");
        }
        let err = flush(&mut conn).await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
        assert!(
            err.message
                .starts_with(&format!("connection to 127.0.0.1:{port} lost")),
            "{err}"
        );
        // Later flushes fail fast too, and the queue was cleared.
        conn.queue_get(b"k");
        let err = flush(&mut conn).await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
        // Reconnecting is refused now.
        let err = driver(&format!("redis://127.0.0.1:{port}"))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
    });
}

#[test]
fn closed_port_is_a_connection_error_naming_it() {
    let port = loadcell_testkit::closed_port();
    run(async {
        let err = driver(&format!("redis://127.0.0.1:{port}"))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
        assert_eq!(
            err.message,
            format!(
                "cannot connect to 127.0.0.1:{port}: connection refused (is the server running?)"
            )
        );
        // Every cluster seed down: the same.
        let err = driver(&format!(
            "redis+cluster://127.0.0.1:{port},127.0.0.1:{port}"
        ))
        .connect()
        .await
        .unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
        assert!(err.message.contains(&port.to_string()), "{err}");
    });
}

#[test]
fn tls_with_certificate_checks() {
    let server =
        loadcell_testkit::redis_tls().unwrap_or_else(|e| panic!("cannot start Redis: {e}"));
    let port = server.port;
    run(async {
        // The testkit URL: verify-full against the test CA.
        let d = driver(server.url());
        assert_eq!(d.endpoint(), format!("127.0.0.1:{port}"));
        let mut conn = d.connect().await.unwrap_or_else(|e| panic!("{e}"));
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        conn.queue_set(b"big", &big);
        for i in 0..50 {
            conn.queue_set(format!("k{i}").as_bytes(), format!("v{i}").as_bytes());
            conn.queue_get(format!("k{i}").as_bytes());
        }
        conn.queue_get(b"big");
        let got = flush_sorted(&mut conn, 102).await;
        for i in 0..50 {
            assert_eq!(got[2 + 2 * i], Got::Hit(format!("v{i}").into_bytes()));
        }
        assert_eq!(got[101], Got::Hit(big));
        let info = d.server_info(&mut conn).await.unwrap();
        assert_eq!(info.product, "Redis");

        // By name, and without verification.
        let url = server.url().replace("127.0.0.1", "localhost");
        let mut conn = connect(&url).await;
        assert_eq!(get(&mut conn, b"k1").await, Got::Hit(b"v1".to_vec()));
        let mut conn = connect(&format!("rediss://127.0.0.1:{port}?sslmode=require")).await;
        assert_eq!(get(&mut conn, b"k2").await, Got::Hit(b"v2".to_vec()));

        // Full verification against the public roots fails, and says what to do.
        let err = driver(&format!("rediss://127.0.0.1:{port}"))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Fatal, "{err}");
        assert!(
            err.message
                .contains(&format!("TLS handshake with 127.0.0.1:{port} failed")),
            "{err}"
        );
        assert!(err.message.contains("sslrootcert"), "{err}");
        // Plaintext to a TLS port: the server hangs up on the connect's
        // PING.
        let err = tokio::time::timeout(
            Duration::from_secs(10),
            driver(&format!("redis://127.0.0.1:{port}")).connect(),
        )
        .await
        .expect("a TLS server hangs up on plaintext")
        .unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
        assert!(err.message.contains("use rediss://"), "{err}");
    });
}

/// Redis reads a TLS ClientHello as the start of an inline command and waits
/// for its end, so the handshake never completes: the engine's connect
/// timeout is what ends it. It must not "succeed".
#[test]
fn tls_to_a_plaintext_server_does_not_connect() {
    let server = start();
    run(async {
        let url = format!("rediss://127.0.0.1:{}?sslmode=require", server.port);
        let d = driver(&url);
        match tokio::time::timeout(Duration::from_secs(2), d.connect()).await {
            Err(_elapsed) => {}
            Ok(Err(e)) => assert!(e.message.contains(&server.port.to_string()), "{e}"),
            Ok(Ok(_)) => panic!("TLS connection to a plaintext server succeeded"),
        }
    });
}

#[test]
fn cluster_url_at_a_standalone_server_is_fatal() {
    let server = start();
    run(async {
        let url = format!("redis+cluster://127.0.0.1:{}", server.port);
        let err = driver(&url).connect().await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Fatal, "{err}");
        assert_eq!(
            err.message,
            format!(
                "127.0.0.1:{} is not a Redis Cluster node (cluster_enabled:0): use redis://",
                server.port
            )
        );
    });
}

fn cluster() -> loadcell_testkit::TestCluster {
    loadcell_testkit::redis_cluster(3).unwrap_or_else(|e| panic!("cannot start a cluster: {e}"))
}

/// Calls of `cmd` on a node, from `INFO commandstats`: executed and
/// rejected (e.g. with MOVED or ASK).
fn stats(c: &loadcell_testkit::TestCluster, node: usize, cmd: &str) -> (u64, u64) {
    let text = c.cli(node, &["INFO", "commandstats"]).unwrap();
    let Some(line) = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:")))
    else {
        return (0, 0);
    };
    let field = |name: &str| {
        line.split(',')
            .find_map(|kv| {
                kv.strip_prefix(name)?
                    .strip_prefix('=')?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    (field("calls"), field("rejected_calls"))
}

fn calls(c: &loadcell_testkit::TestCluster, node: usize, cmd: &str) -> u64 {
    stats(c, node, cmd).0
}

#[test]
fn cluster_spreads_keys_over_every_node() {
    let c = cluster();
    run(async {
        let d = driver(&c.url());
        let mut conn = d.connect().await.unwrap();
        assert_eq!(conn.nodes().len(), 3);
        let info = d.server_info(&mut conn).await.unwrap();
        assert_eq!(info.product, "Redis");

        // A pipeline of 300 SETs, then 300 GETs plus misses, across nodes.
        let n = 300;
        for i in 0..n {
            conn.queue_set(format!("key:{i}").as_bytes(), format!("v{i}").as_bytes());
        }
        assert_eq!(flush_sorted(&mut conn, n).await, vec![Got::Done; n]);
        for i in 0..n {
            conn.queue_get(format!("key:{i}").as_bytes());
            conn.queue_get(format!("missing:{i}").as_bytes());
        }
        let got = flush_sorted(&mut conn, 2 * n).await;
        for i in 0..n {
            assert_eq!(
                got[2 * i],
                Got::Hit(format!("v{i}").into_bytes()),
                "key:{i}"
            );
            assert_eq!(got[2 * i + 1], Got::Miss);
        }
        for node in 0..3 {
            let size: u64 = c.cli(node, &["DBSIZE"]).unwrap().trim().parse().unwrap();
            assert!(size > 50, "node {node} holds {size} keys");
        }
        // Commands route by their first argument; hash tags keep keys together.
        conn.queue_command(&[b"SADD", b"{user1}.following", b"a"])
            .unwrap();
        conn.queue_command(&[b"SADD", b"{user1}.followers", b"b"])
            .unwrap();
        conn.queue_command(&[
            b"SUNIONSTORE",
            b"{user1}.all",
            b"{user1}.following",
            b"{user1}.followers",
        ])
        .unwrap();
        conn.queue_command(&[b"PING"]).unwrap();
        assert_eq!(flush_sorted(&mut conn, 4).await, vec![Got::Done; 4]);
        // A cross-slot command is the server's error, classified.
        conn.queue_command(&[b"MSET", b"a", b"1", b"b", b"2"])
            .unwrap();
        let got = flush_sorted(&mut conn, 1).await;
        assert!(
            matches!(&got[0], Got::Err(e) if e.class == ErrorClass::Fatal),
            "{got:?}"
        );
    });
}

#[test]
fn cluster_follows_ask_and_moved_during_a_slot_migration() {
    let c = cluster();
    let keys: Vec<String> = (0..10).map(|i| format!("{{mig}}:{i}")).collect();
    let slot = hash_slot(keys[0].as_bytes());
    let from = c.owner_of(slot).unwrap();
    let to = (from + 1) % 3;
    let from_id = c.node_id(from).unwrap();
    let to_id = c.node_id(to).unwrap();
    let slot_s = slot.to_string();
    let to_port = c.nodes[to].port.to_string();

    run(async {
        let mut conn = connect(&c.url()).await;
        for k in &keys {
            conn.queue_set(k.as_bytes(), format!("value of {k}").as_bytes());
        }
        assert_eq!(flush_sorted(&mut conn, 10).await, vec![Got::Done; 10]);

        // Half-way through a migration: half the keys moved.
        c.cli(to, &["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &from_id])
            .unwrap();
        c.cli(from, &["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &to_id])
            .unwrap();
        let mut migrate = vec!["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS"];
        migrate.extend(keys[..5].iter().map(String::as_str));
        assert_eq!(c.cli(from, &migrate).unwrap().trim(), "OK");

        let asking = calls(&c, to, "asking");
        let (_, rejected) = stats(&c, from, "get");
        for k in &keys {
            conn.queue_get(k.as_bytes());
        }
        let got = flush_sorted(&mut conn, 10).await;
        for (k, g) in keys.iter().zip(&got) {
            assert_eq!(*g, Got::Hit(format!("value of {k}").into_bytes()), "{k}");
        }
        assert_eq!(stats(&c, from, "get").1, rejected + 5, "5 ASK redirections");
        assert_eq!(
            calls(&c, to, "asking"),
            asking + 5,
            "ASK followed with ASKING"
        );

        // Migration finished; every node told.
        let mut migrate = vec!["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS"];
        migrate.extend(keys[5..].iter().map(String::as_str));
        assert_eq!(c.cli(from, &migrate).unwrap().trim(), "OK");
        for node in [to, from, 3 - to - from] {
            c.cli(node, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &to_id])
                .unwrap();
        }
        let (gets_from, rejected) = stats(&c, from, "get");
        let gets_to = calls(&c, to, "get");
        for k in &keys {
            conn.queue_get(k.as_bytes());
        }
        conn.queue_set(keys[0].as_bytes(), b"new");
        let got = flush_sorted(&mut conn, 11).await;
        for (k, g) in keys.iter().zip(&got) {
            assert_eq!(*g, Got::Hit(format!("value of {k}").into_bytes()), "{k}");
        }
        assert_eq!(got[10], Got::Done);
        assert_eq!(
            stats(&c, from, "get"),
            (gets_from, rejected + 10),
            "MOVED from the old owner"
        );
        assert_eq!(
            calls(&c, to, "get"),
            gets_to + 10,
            "resent to the new owner"
        );

        // The map was updated: the next requests go straight to the new owner.
        let before = stats(&c, from, "get");
        assert_eq!(
            get(&mut conn, keys[0].as_bytes()).await,
            Got::Hit(b"new".to_vec())
        );
        assert_eq!(stats(&c, from, "get"), before);
        assert_eq!(c.cli(to, &["GET", &keys[0]]).unwrap().trim(), "new");

        // A fresh session reads the new map from the start.
        let mut fresh = connect(&c.url()).await;
        assert_eq!(
            get(&mut fresh, keys[3].as_bytes()).await,
            Got::Hit(b"value of {mig}:3".to_vec())
        );
        assert_eq!(stats(&c, from, "get"), before);
    });
}

#[test]
fn cluster_node_killed_is_a_connection_error() {
    let mut c = cluster();
    run(async {
        let mut conn = connect(&c.url()).await;
        c.nodes[1].kill();
        for i in 0..100 {
            conn.queue_get(format!("k{i}").as_bytes());
        }
        let err = flush(&mut conn).await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
        assert!(err.message.contains(&c.nodes[1].port.to_string()), "{err}");
    });
}

/// A rough throughput and client-CPU measurement: one connection, GETs of a
/// 32-byte value at pipeline depths 1 and 16. Run with
/// `cargo test --release -p loadcell-drivers --test redis -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_gets() {
    let server = start();
    let mode = std::env::var("LOADCELL_BENCH_MODE").unwrap_or_default();
    let url = server.url().to_string();
    let bench = async move {
        let mut conn = connect(&url).await;
        set(&mut conn, b"key:000000001", &[b'v'; 32]).await;
        for (depth, total) in bench_plan() {
            let mut hits = 0usize;
            let cpu0 = cpu_time();
            let t0 = Instant::now();
            for _ in 0..total / depth {
                for _ in 0..depth {
                    conn.queue_get(b"key:000000001");
                }
                conn.flush(&mut |_, r| {
                    if let Ok(KvReply::Hit(_)) = r {
                        hits += 1
                    }
                })
                .await
                .unwrap();
            }
            let wall = t0.elapsed();
            let cpu = cpu_time() - cpu0;
            assert_eq!(hits, total);
            let per_op = |d: Duration| d.as_secs_f64() * 1e6 / total as f64;
            eprintln!(
                "pipeline {depth:>2}: {total} GETs in {wall:.2?}: {:.0} ops/s, \
                 {:.2} µs CPU/op ({:.2} user + {:.2} sys)",
                total as f64 / wall.as_secs_f64(),
                per_op(cpu.user + cpu.sys),
                per_op(cpu.user),
                per_op(cpu.sys),
            );
        }
    };
    if mode == "spawn" {
        // A task of the runtime itself (not a LocalSet task, nor block_on's
        // future): woken by the I/O driver without an eventfd write.
        struct AssertSend<F>(F);
        // SAFETY: a current-thread runtime polls the task on this thread only.
        unsafe impl<F> Send for AssertSend<F> {}
        impl<F: Future> Future for AssertSend<F> {
            type Output = F::Output;
            fn poll(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<F::Output> {
                // SAFETY: structural pinning of the only field.
                unsafe { self.map_unchecked_mut(|s| &mut s.0) }.poll(cx)
            }
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async { tokio::spawn(AssertSend(bench)).await.unwrap() });
    } else if mode == "spawn_local" {
        // As the engine runs sessions: a task of a LocalSet.
        run(async { tokio::task::spawn_local(bench).await.unwrap() });
    } else {
        run(bench);
    }
}

/// `(depth, requests)` pairs; `LOADCELL_BENCH="1:200000,16:1000000"` overrides.
fn bench_plan() -> Vec<(usize, usize)> {
    let plan = std::env::var("LOADCELL_BENCH").unwrap_or_else(|_| "1:200000,16:1000000".into());
    plan.split(',')
        .map(|p| {
            let (d, n) = p.split_once(':').expect("DEPTH:COUNT");
            (d.parse().unwrap(), n.parse().unwrap())
        })
        .collect()
}

/// User + system CPU time of this process.
fn cpu_time() -> CpuTime {
    // SAFETY: getrusage fills the zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    CpuTime {
        user: tv(ru.ru_utime),
        sys: tv(ru.ru_stime),
    }
}

#[derive(Clone, Copy)]
struct CpuTime {
    user: Duration,
    sys: Duration,
}

impl std::ops::Sub for CpuTime {
    type Output = CpuTime;
    fn sub(self, o: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user - o.user,
            sys: self.sys - o.sys,
        }
    }
}

/// A seed that answers with a transient error (here LOADING, as a node
/// still loading its data set does) leaves the next seed to try.
#[test]
fn a_cluster_seed_answering_with_an_error_falls_through_to_the_next() {
    use std::io::{Read, Write};
    let c = cluster();
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_port = fake.local_addr().unwrap().port();
    let answering = std::thread::spawn(move || {
        let (mut s, _) = fake.accept().unwrap();
        let mut buf = [0u8; 512];
        // One request (CLUSTER SLOTS), one error; then the client goes.
        let _ = s.read(&mut buf).unwrap();
        s.write_all(b"-LOADING Redis is loading the dataset in memory\r\n")
            .unwrap();
        let _ = s.read(&mut buf);
    });
    let url = format!(
        "redis+cluster://127.0.0.1:{fake_port},127.0.0.1:{}",
        c.ports()[0]
    );
    run(async {
        let d = driver(&url);
        let conn = d.connect().await.unwrap();
        assert_eq!(conn.nodes().len(), 3);
    });
    answering.join().unwrap();
}
