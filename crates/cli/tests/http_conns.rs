//! `http-cps` and `http-conns` end to end, through the binary: new
//! connections per second against nginx (plain and TLS), held connections
//! against haproxy over two nginx with a low `maxconn` (one set for the
//! whole binary, in one test), its stats CSV as server counters, and bad
//! input refused before any load.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use common::*;

#[test]
fn cps_makes_one_timed_connect_per_request_or_per_n_requests() {
    let dir = tempfile::tempdir().unwrap();
    let nginx = loadcell_testkit::nginx().expect("nginx starts");
    let url = format!("{}/index.html?status={}/status", nginx.url(), nginx.url());
    // Short intervals: counter rates need two samples.
    let common = [
        "--threads",
        "2",
        "--clients",
        "2",
        "--time",
        "1s",
        "--report-interval",
        "250ms",
    ];
    let r = run_json(dir.path(), "http-cps", &url, &common);
    let (requests, connects) = (u(&r, "/ops/request/count"), u(&r, "/ops/connect/count"));
    assert!(requests > 100, "{requests} requests");
    // Events cut off at the deadline may have connected without asking.
    assert!(
        connects >= requests && connects <= requests + 4,
        "{connects} for {requests}"
    );
    assert_eq!(u(&r, "/summary/connects"), connects);
    assert!(f(&r, "/summary/connects_per_sec") > 100.0);
    assert_eq!(s(&r, "/config/connection_policy"), "per-event");
    assert_eq!(u(&r, "/config/workload_options/requests_per_connection"), 1);
    assert_server_counter(&r, "nginx_accepts");

    let mut every_4 = common.to_vec();
    every_4.extend(["--requests-per-connection", "4"]);
    let r = run_json(dir.path(), "http-cps", &url, &every_4);
    let (requests, connects) = (u(&r, "/ops/request/count"), u(&r, "/ops/connect/count"));
    let expected = requests.div_ceil(4);
    assert!(
        connects >= expected && connects <= expected + 4,
        "{connects} connects for {requests} requests"
    );
    assert_eq!(s(&r, "/config/connection_policy"), "every:4");
    assert_eq!(u(&r, "/summary/errors"), 0);
}

/// A server that answers every request with an empty 200, closing when
/// asked, and records, per connection, whether each GET said
/// `Connection: close`.
fn recording_server() -> (u16, Arc<Mutex<Vec<Vec<bool>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let record = Arc::clone(&record);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                let mut closes = Vec::new();
                loop {
                    let mut head = Vec::new();
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            if !closes.is_empty() {
                                record.lock().unwrap().push(closes);
                            }
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push(line.to_ascii_lowercase());
                    }
                    let close = head.iter().any(|l| l.starts_with("connection: close"));
                    let get = head[0].starts_with("get ");
                    if get {
                        closes.push(close);
                    }
                    let answer = if close {
                        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    } else {
                        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
                    };
                    writer.write_all(answer.as_bytes()).unwrap();
                    if close {
                        if get {
                            record.lock().unwrap().push(closes);
                        }
                        return;
                    }
                }
            });
        }
    });
    (port, seen)
}

#[test]
fn cps_asks_the_server_to_close_after_the_last_request_on_each_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (port, seen) = recording_server();
    let url = format!("http://127.0.0.1:{port}/");
    let r = run_json(
        dir.path(),
        "http-cps",
        &url,
        &["--requests-per-connection", "3", "--events", "9"],
    );
    assert_eq!(u(&r, "/ops/connect/count"), 3);
    // The server closes first, so the TIME_WAIT is its own, not the
    // client's: only the third request on each connection says close.
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, vec![vec![false, false, true]; 3]);
}

#[test]
fn cps_over_tls_times_each_handshake_as_its_own_operation() {
    let dir = tempfile::tempdir().unwrap();
    let nginx = loadcell_testkit::nginx_tls().expect("nginx starts");
    let url = format!(
        "https://localhost:{}/index.html?sslrootcert={}",
        nginx.port,
        nginx.tls_ca().display()
    );
    let r = run_json(dir.path(), "http-cps", &url, &["--time", "1s"]);
    let handshakes = u(&r, "/ops/tls_handshake/count");
    let connects = u(&r, "/ops/connect/count");
    assert!(handshakes > 20, "{handshakes} handshakes");
    assert!(connects >= handshakes && connects <= handshakes + 1);
    // Part of each connect's time, and not all of it.
    let handshake_ms = f(&r, "/ops/tls_handshake/latency_ms/mean");
    let connect_ms = f(&r, "/ops/connect/latency_ms/mean");
    assert!(
        handshake_ms > 0.0 && handshake_ms < connect_ms,
        "{handshake_ms} < {connect_ms}"
    );
}

#[test]
fn held_connections_top_out_at_haproxys_maxconn_and_say_when_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let lb = loadcell_testkit::haproxy(100).expect("haproxy and two nginx start");
    let url = format!("{}/health?status={}", lb.haproxy.url(), lb.stats_csv_url);
    let r = run_json(
        dir.path(),
        "http-conns",
        &url,
        &[
            "--connections",
            "160",
            "--ramp-rate",
            "400",
            "--keepalive-interval",
            "300ms",
            "--connect-timeout",
            "1s",
            "--time",
            "3s",
            "--report-interval",
            "500ms",
        ],
    );
    let held = &r["connections"];
    assert_eq!(u(held, "/requested"), 160);
    // haproxy holds 100; the run's monitoring connection may take one.
    let max = u(held, "/held_max");
    let samples = r["resources"]["samples"].as_array().unwrap();
    let haproxy_max = samples
        .iter()
        .filter_map(|s| s["server"]["haproxy_fe_frontend_smax"].as_f64())
        .fold(0.0, f64::max);
    // haproxy held at most its 100 (the run's monitoring connection may
    // take one); loadcell counts a connection held until a request on it
    // fails, so one the proxy has just let go may count a moment longer.
    assert_eq!(haproxy_max, 100.0, "{held}");
    assert!((98..=102).contains(&max), "{held}");
    let first = &held["first_failure"];
    assert!(first.is_object(), "refusals or timeouts were seen: {held}");
    assert!((95..=100).contains(&u(first, "/held")), "{first}");
    assert!(!first["client_limit"].as_bool().unwrap(), "{first}");
    // 100 connections at 400/s take 0.25 s: the first attempt past them
    // began then (its timeout is known a second later).
    assert!((0.2..0.5).contains(&f(first, "/t_s")), "{first}");
    // The gauge per interval never passes the limit, and reaches it.
    let gauge: Vec<u64> = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| u(i, "/connections_held"))
        .collect();
    assert!(
        gauge.iter().all(|&n| n <= max) && gauge.iter().any(|&n| n >= 98),
        "{gauge:?}"
    );
    // haproxy's own numbers beside them: its sessions at the limit.
    assert_server_counter(&r, "haproxy_fe_frontend_stot");
    let limit = samples
        .iter()
        .find_map(|s| s["server"]["haproxy_fe_frontend_slim"].as_f64());
    assert_eq!(limit, Some(100.0));
    let peak = samples
        .iter()
        .filter_map(|s| s["server"]["haproxy_fe_frontend_scur"].as_f64())
        .fold(0.0, f64::max);
    assert!(peak >= 98.0, "{peak}");
}

#[test]
fn connection_workloads_refuse_options_that_do_not_apply_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("http://127.0.0.1:{}", loadcell_testkit::closed_port());
    each_refused_in_one_line(
        dir.path(),
        &target,
        &[
            (
                vec!["http-conns", "--rate", "100"],
                "--rate does not apply to http-conns",
            ),
            (
                vec!["http-cps", "--connections", "10"],
                "--connections is for http-conns",
            ),
            (
                vec!["http-conns", "--connection-policy", "per-event"],
                "leave out --connection-policy",
            ),
            (vec!["http-conns", "--threads", "4"], "give --connections"),
        ],
    );
}
