//! The memcached driver against real memcached servers (one per test, from
//! loadcell-testkit; each stops when its test ends).

mod local_runtime;

use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::{Driver, ErrorClass, Target};
use loadcell_drivers::memcached::{MemcachedConn, MemcachedDriver};
use loadcell_testkit::TestServer;
use local_runtime::block_on;

fn start() -> TestServer {
    loadcell_testkit::memcached().unwrap_or_else(|e| panic!("cannot start memcached: {e}"))
}

fn driver(url: &str) -> MemcachedDriver {
    let target = Target::parse(url).expect("valid URL");
    MemcachedDriver::from_target(&target).expect("valid memcached target")
}

/// A reply, owned, with its error's class and message.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Hit(Vec<u8>),
    Miss,
    Done,
    Err(ErrorClass, String),
}

/// Flushes the queue; every reply with its index, which must come in order.
async fn flush(conn: &mut MemcachedConn) -> Vec<Got> {
    let mut got = Vec::new();
    let mut last_read = None;
    conn.flush(&mut |at, r| {
        assert_eq!(at.index, got.len(), "replies come in order");
        assert!(last_read <= Some(at.read), "replies come in read order");
        last_read = Some(at.read);
        got.push(match r {
            Ok(KvReply::Hit(b)) => Got::Hit(b.to_vec()),
            Ok(KvReply::Miss) => Got::Miss,
            Ok(KvReply::Done) => Got::Done,
            Ok(KvReply::Array(a)) => panic!("memcached answers no arrays: {a:?}"),
            Err(e) => Got::Err(e.class, e.message),
        });
    })
    .await
    .unwrap_or_else(|e| panic!("flush: {e}"));
    got
}

/// Every byte value, and the protocol's own framing inside the value.
fn binary_value() -> Vec<u8> {
    let mut v: Vec<u8> = (0..=255u8).collect();
    v.extend_from_slice(b"\r\nEND\r\nSTORED\r\nVALUE x 0 3\r\n\r\n");
    v
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 24) as u8)
        .collect()
}

#[test]
fn round_trip_miss_and_server_info() {
    let server = start();
    block_on(async {
        let d = driver(server.url());
        assert_eq!(d.endpoint(), format!("127.0.0.1:{}", server.port));
        let mut conn = d.connect().await.unwrap();
        let info = d.server_info(&mut conn).await.unwrap();
        assert_eq!(info.product, "memcached");
        assert!(
            info.version.starts_with("1.") && !info.version.contains(char::is_whitespace),
            "{info:?}"
        );

        // Nothing queued: nothing to do.
        assert!(flush(&mut conn).await.is_empty());

        let value = binary_value();
        conn.queue_set(b"bin:1", &value);
        assert_eq!(flush(&mut conn).await, vec![Got::Done]);
        conn.queue_get(b"bin:1");
        assert_eq!(flush(&mut conn).await, vec![Got::Hit(value.clone())]);
        conn.queue_get(b"absent:1");
        assert_eq!(flush(&mut conn).await, vec![Got::Miss]);

        // An empty value, and an overwrite.
        conn.queue_set(b"bin:1", b"");
        conn.queue_get(b"bin:1");
        assert_eq!(
            flush(&mut conn).await,
            vec![Got::Done, Got::Hit(Vec::new())]
        );

        // server_info again on a used connection.
        let again = d.server_info(&mut conn).await.unwrap();
        assert_eq!(again, info);
        conn.queue_get(b"bin:1");
        assert_eq!(flush(&mut conn).await, vec![Got::Hit(Vec::new())]);
    });
}

#[test]
fn pipeline_of_100_mixed_requests_in_order() {
    let server = start();
    block_on(async {
        let d = driver(server.url());
        let mut conn = d.connect().await.unwrap();
        let mut expected = Vec::new();
        for i in 0..100u32 {
            let key = format!("p:{}", i / 3);
            match i % 3 {
                // SET, then a GET that sees it (same connection, in order),
                // then a GET of a key never set.
                0 => {
                    conn.queue_set(key.as_bytes(), &pattern(10 + i as usize * 37, i));
                    expected.push(Got::Done);
                }
                1 => {
                    conn.queue_get(key.as_bytes());
                    expected.push(Got::Hit(pattern(10 + (i - 1) as usize * 37, i - 1)));
                }
                _ => {
                    conn.queue_get(format!("never:{i}").as_bytes());
                    expected.push(Got::Miss);
                }
            }
        }
        assert_eq!(flush(&mut conn).await, expected);

        // The connection is in step afterwards.
        conn.queue_get(b"p:0");
        assert_eq!(flush(&mut conn).await, vec![Got::Hit(pattern(10, 0))]);
    });
}

#[test]
fn large_values() {
    let server = start();
    block_on(async {
        let d = driver(server.url());
        let mut conn = d.connect().await.unwrap();
        let big = pattern(500 * 1024, 7);
        conn.queue_set(b"big", &big);
        assert_eq!(flush(&mut conn).await, vec![Got::Done]);
        conn.queue_get(b"big");
        conn.queue_get(b"absent");
        assert_eq!(flush(&mut conn).await, vec![Got::Hit(big), Got::Miss]);

        // A pipeline far larger than the socket buffers both ways: 24 MB
        // of SETs interleaved with GETs of what was just set. Replies are
        // read while requests are still being written, or both sides would
        // wait on each other.
        let values: Vec<Vec<u8>> = (0..24).map(|i| pattern(1000 * 1000, i)).collect();
        let mut expected = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let key = format!("huge:{}", i % 8);
            conn.queue_set(key.as_bytes(), v);
            conn.queue_get(key.as_bytes());
            expected.push(Got::Done);
            expected.push(Got::Hit(v.clone()));
        }
        assert!(flush(&mut conn).await == expected, "large pipeline replies");

        // Larger than the item size limit (1 MB): fatal, with advice, and
        // the server skips the data, so the connection stays in step.
        conn.queue_set(b"too-big", &pattern(2 * 1024 * 1024, 1));
        conn.queue_get(b"big");
        let got = flush(&mut conn).await;
        match &got[0] {
            Got::Err(ErrorClass::Fatal, m) => {
                assert!(m.contains("SERVER_ERROR") && m.contains("-I"), "{m}")
            }
            other => panic!("expected a fatal error, got {other:?}"),
        }
        assert_eq!(got[1], Got::Hit(pattern(500 * 1024, 7)));
    });
}

#[test]
fn invalid_keys_are_not_sent() {
    let server = start();
    block_on(async {
        let d = driver(server.url());
        let mut conn = d.connect().await.unwrap();
        conn.queue_set(b"ok", b"v");
        conn.queue_get(b"two words");
        conn.queue_set(&[b'k'; 251], b"v");
        conn.queue_get(b"");
        conn.queue_get(b"ok");
        let got = flush(&mut conn).await;
        assert_eq!(got[0], Got::Done);
        for g in &got[1..4] {
            assert!(
                matches!(g, Got::Err(ErrorClass::Fatal, m) if m.contains("250 bytes")),
                "{g:?}"
            );
        }
        assert_eq!(got[4], Got::Hit(b"v".to_vec()));

        // Only invalid keys: nothing is written, nothing awaited.
        conn.queue_get(b"a\r\nb");
        assert!(matches!(
            flush(&mut conn).await.as_slice(),
            [Got::Err(ErrorClass::Fatal, _)]
        ));
    });
}

#[test]
fn queue_command_is_fatal() {
    let server = start();
    block_on(async {
        let mut conn = driver(server.url()).connect().await.unwrap();
        let err = conn
            .queue_command(&[b"incr".as_slice(), b"k", b"1"])
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Fatal);
        assert_eq!(
            err.message,
            "memcached does not support arbitrary commands (--command); use --ratio with GET/SET"
        );
        // Nothing was queued by it.
        assert!(flush(&mut conn).await.is_empty());
    });
}

#[test]
fn server_killed_mid_use_is_a_connection_error() {
    let mut server = start();
    let url = server.url().to_string();
    let port = server.port;
    block_on(async {
        let d = driver(&url);
        let mut conn = d.connect().await.unwrap();
        conn.queue_set(b"k", b"v");
        assert_eq!(flush(&mut conn).await, vec![Got::Done]);

        server.kill();

        conn.queue_get(b"k");
        let err = conn.flush(&mut |_, _| {}).await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
        assert!(
            err.message
                .starts_with(&format!("connection to 127.0.0.1:{port} lost: ")),
            "{err}"
        );
        // The queue was cleared: a later flush does not resend it.
        let mut replies = 0;
        let again = conn.flush(&mut |_, _| replies += 1).await;
        assert_eq!(replies, 0);
        assert_eq!(again.unwrap_err().class, ErrorClass::Connection);

        // Reconnecting fails the same way as any closed port.
        let err = d.connect().await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
    });
}

#[test]
fn closed_port_is_a_connection_error_naming_it() {
    let port = loadcell_testkit::closed_port();
    block_on(async {
        let err = driver(&format!("memcached://127.0.0.1:{port}"))
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
    });
}

#[test]
fn a_server_that_is_not_memcached_is_refused() {
    // A listener that answers like Redis.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"-ERR unknown command 'version'\r\n");
        let _ = s.read(&mut buf);
    });
    block_on(async {
        // The connect itself asks `version`, and refuses the answer.
        let d = driver(&format!("memcached://127.0.0.1:{port}"));
        let err = d.connect().await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Fatal, "{err}");
        assert!(
            err.message.contains(&format!(
                "127.0.0.1:{port} did not answer as a memcached server"
            )) && err.message.contains("-ERR unknown command")
                && err.message.contains("a Redis server's reply"),
            "{err}"
        );
    });
    fake.join().unwrap();
}

#[test]
fn an_interrupted_flush_makes_the_connection_unusable() {
    // A listener that answers `version`, then never again.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let peer = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
        s.write_all(b"VERSION 1.6.0\r\n").unwrap();
        s
    });
    block_on(async {
        let mut conn = driver(&format!("memcached://127.0.0.1:{port}"))
            .connect()
            .await
            .unwrap();
        let _peer = peer.join().unwrap();
        conn.queue_get(b"k");
        let wait = std::time::Duration::from_millis(50);
        let dropped = tokio::time::timeout(wait, conn.flush(&mut |_, _| {})).await;
        assert!(dropped.is_err(), "no reply can have come");
        // Its reply could still arrive: the connection must be replaced.
        conn.queue_get(b"k");
        let err = conn.flush(&mut |_, _| {}).await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err}");
        assert!(err.message.contains("interrupted"), "{err}");
    });
}

/// This thread's CPU time so far (the client runs on one thread).
fn thread_cpu() -> std::time::Duration {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns: u64 = s.split_whitespace().next().unwrap().parse().unwrap();
    std::time::Duration::from_nanos(ns)
}

/// Throughput and client CPU per GET on one connection, at pipeline 1 and
/// 16: `cargo test --release -p loadcell-drivers --test memcached -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark"]
fn bench_gets() {
    let server = start();
    let n: usize = std::env::var("LOADCELL_BENCH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // The floor: a blocking client doing one write and one read per GET.
    {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_nodelay(true).unwrap();
        s.write_all(b"set memtier-1 0 0 32\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n")
            .unwrap();
        let mut buf = [0u8; 256];
        let _ = s.read(&mut buf).unwrap();
        let (t0, c0) = (std::time::Instant::now(), thread_cpu());
        for _ in 0..n {
            s.write_all(b"get memtier-1\r\n").unwrap();
            let mut got = 0;
            while !buf[..got].ends_with(b"END\r\n") {
                got += s.read(&mut buf[got..]).unwrap();
            }
        }
        let (wall, cpu) = (t0.elapsed(), thread_cpu() - c0);
        println!(
            "blocking std client, pipeline 1: {:.0} ops/s, client CPU {:.2} µs/op",
            n as f64 / wall.as_secs_f64(),
            cpu.as_secs_f64() * 1e6 / n as f64
        );
    }
    block_on(async {
        let d = driver(server.url());
        let mut conn = d.connect().await.unwrap();
        conn.queue_set(b"memtier-1", &[b'x'; 32]);
        assert_eq!(flush(&mut conn).await, vec![Got::Done]);
        for pipeline in [1usize, 16] {
            let (t0, c0) = (std::time::Instant::now(), thread_cpu());
            let mut hits = 0usize;
            for _ in 0..n / pipeline {
                for _ in 0..pipeline {
                    conn.queue_get(b"memtier-1");
                }
                conn.flush(&mut |_, r| {
                    if let Ok(KvReply::Hit(v)) = r {
                        hits += v.len() / 32;
                    }
                })
                .await
                .unwrap();
            }
            let (wall, cpu) = (t0.elapsed(), thread_cpu() - c0);
            assert_eq!(hits, n / pipeline * pipeline);
            println!(
                "pipeline {pipeline:>2}: {hits} GETs, {:.0} ops/s, client CPU {:.2} µs/op",
                hits as f64 / wall.as_secs_f64(),
                cpu.as_secs_f64() * 1e6 / hits as f64
            );
        }
    });
}
