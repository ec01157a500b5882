//! The HTTP driver against a real nginx (one per test, from
//! loadcell-testkit; each stops when its test ends).

mod local_runtime;

use std::io::Read;

use loadcell_core::http::{HttpConn, Request};
use loadcell_core::{Driver, ErrorClass, Target};
use loadcell_drivers::http::{HttpConnection, HttpDriver};
use loadcell_testkit::TestServer;
use local_runtime::block_on;

fn start() -> TestServer {
    loadcell_testkit::nginx().unwrap_or_else(|e| panic!("cannot start nginx: {e}"))
}

fn driver(url: &str) -> HttpDriver {
    HttpDriver::from_target(&Target::parse(url).expect("valid URL")).expect("valid HTTP target")
}

fn get(path: &str) -> Request<'_> {
    Request {
        method: "GET",
        path: path.as_bytes(),
        headers: b"",
        body: b"",
    }
}

#[test]
fn keep_alive_requests_read_whole_bodies_on_one_connection() {
    let server = start();
    let d = driver(&format!("{}/index.html", server.url()));
    block_on(async {
        let mut conn = d.connect().await.unwrap();
        let info = d.server_info(&mut conn).await.unwrap();
        assert_eq!(info.product, "nginx");
        assert!(info.version.starts_with("1."), "{info:?}");
        for _ in 0..50 {
            let r = conn.request(&get("")).await.unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(r.body.len(), loadcell_testkit::INDEX_BYTES);
            assert!(r.body.starts_with(b"<!DOCTYPE html>"));
        }
        // A missing page is a response like any other: the workload decides.
        let r = conn.request(&get("/../missing")).await.unwrap();
        assert_eq!(r.status, 404);
        let r = conn.request(&get("")).await.unwrap();
        assert_eq!(r.status, 200, "the connection is still in step");
    });
}

#[test]
fn chunked_bodies_are_decoded_in_place() {
    let server = start();
    let d = driver(server.url());
    block_on(async {
        let mut conn = d.connect().await.unwrap();
        let request = Request {
            method: "GET",
            path: b"/large.txt",
            headers: b"Accept-Encoding: gzip\r\n",
            body: b"",
        };
        for _ in 0..3 {
            let r = conn.request(&request).await.unwrap();
            assert_eq!(r.status, 200);
            let mut text = String::new();
            flate2::read::GzDecoder::new(r.body)
                .read_to_string(&mut text)
                .expect("the decoded body is the gzip stream nginx sent");
            assert_eq!(text.len(), 64 * 1024);
            assert!(text.starts_with("line     0 of the large text\n"));
        }
    });
}

#[test]
fn posts_heads_and_a_server_that_closes_are_handled() {
    let server = start();
    let d = driver(server.url());
    block_on(async {
        let mut conn = d.connect().await.unwrap();
        let post = Request {
            method: "POST",
            path: b"/echo?x=1",
            headers: b"Content-Type: application/json\r\n",
            body: b"{\"a\":1}",
        };
        let r = conn.request(&post).await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, br#"{"uri":"/echo?x=1","method":"POST"}"#);
        let head = Request {
            method: "HEAD",
            ..get("/index.html")
        };
        let r = conn.request(&head).await.unwrap();
        assert_eq!((r.status, r.body.len()), (200, 0));
        // The server closes after this response; the next request opens a
        // new connection by itself.
        let closing = Request {
            headers: b"Connection: close\r\n",
            ..get("/health")
        };
        assert_eq!(conn.request(&closing).await.unwrap().body, b"ok\n");
        assert_eq!(conn.request(&get("/health")).await.unwrap().body, b"ok\n");
    });
}

#[test]
fn tls_checks_the_certificate_unless_told_not_to() {
    let server = loadcell_testkit::nginx_tls().unwrap_or_else(|e| panic!("{e}"));
    let ca = server.tls_ca();
    let trusted = driver(&format!("{}/?sslrootcert={}", server.url(), ca.display()));
    let unknown_ca = driver(server.url());
    let insecure = driver(&format!("{}/?insecure=true", server.url()));
    block_on(async {
        for d in [&trusted, &insecure] {
            let mut conn = d.connect().await.unwrap();
            let r = conn.request(&get("/health")).await.unwrap();
            assert_eq!((r.status, r.body), (200, &b"ok\n"[..]));
        }
        let err = unknown_ca.connect().await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection);
        assert!(
            err.message.contains("TLS handshake with 127.0.0.1"),
            "{err}"
        );
        assert!(err.message.contains("UnknownIssuer"), "{err}");
    });
}

#[test]
fn http2_over_tls_keeps_one_connection_and_reads_whole_bodies() {
    let server = loadcell_testkit::nginx_tls().unwrap_or_else(|e| panic!("{e}"));
    let url = |base: &str| {
        format!(
            "{}{base}?http2=true&sslrootcert={}",
            server.url(),
            server.tls_ca().display()
        )
    };
    let d = driver(&url("/index.html"));
    block_on(async {
        let mut conn = d.connect().await.unwrap();
        assert!(matches!(conn, HttpConnection::Http2(_)), "{conn:?}");
        assert_eq!(d.server_info(&mut conn).await.unwrap().product, "nginx");
        for _ in 0..20 {
            let r = conn.request(&get("")).await.unwrap();
            assert_eq!(
                (r.status, r.body.len()),
                (200, loadcell_testkit::INDEX_BYTES)
            );
        }
        let r = conn.request(&get("/missing")).await.unwrap();
        assert_eq!(r.status, 404);
    });
    let d = driver(&url(""));
    block_on(async {
        let mut conn = d.connect().await.unwrap();
        let post = Request {
            method: "POST",
            path: b"/echo?x=1",
            // Connection is HTTP/1.1's: dropped rather than sent.
            headers: b"Content-Type: application/json\r\nConnection: close\r\nX-Trace: 7\r\n",
            body: b"{\"a\":1}",
        };
        let r = conn.request(&post).await.unwrap();
        assert_eq!(r.body, br#"{"uri":"/echo?x=1","method":"POST"}"#);
        let gzipped = Request {
            headers: b"Accept-Encoding: gzip\r\n",
            ..get("/large.txt")
        };
        let r = conn.request(&gzipped).await.unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(r.body)
            .read_to_string(&mut text)
            .expect("the whole gzip stream, over several DATA frames");
        assert_eq!(text.len(), 64 * 1024);
    });
}

#[test]
fn a_server_that_is_not_http_is_named() {
    // A listener that greets as an SSH server does, whatever it is sent.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let greeter = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        std::io::Write::write_all(&mut socket, b"SSH-2.0-OpenSSH_9.2p1\r\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
    });
    let d = driver(&format!("http://127.0.0.1:{port}"));
    block_on(async {
        let mut conn = d.connect().await.unwrap();
        let err = conn.request(&get("/")).await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection);
        assert!(err.message.contains("not an HTTP/1.x response"), "{err}");
        assert!(err.message.contains("SSH-2.0"), "{err}");
    });
    greeter.join().unwrap();
}
