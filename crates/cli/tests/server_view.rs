//! The server's own view from anywhere (`--server-metrics`, scraping a
//! real node_exporter) and the live export (`--export`, into a real
//! Prometheus through its remote-write receiver and a real InfluxDB):
//! what the run measured is in the result and in the databases, queried
//! back through their own APIs.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use common::*;
use serde_json::Value;

/// A prepared SQLite data set in `dir` (the default target).
fn prepared(dir: &Path) {
    ok(loadcell(
        dir,
        &["prepare", "oltp_point_select", "--table-size", "1000"],
    ));
}

fn run_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "oltp_point_select",
        "--table-size",
        "1000",
        "--time",
        "3s",
        "--warmup",
        "1s",
        "--out",
        "r.json",
    ];
    args.extend_from_slice(extra);
    args
}

/// The one line a run that fails before any load prints.
fn fails_before_load(dir: &Path, extra: &[&str]) -> String {
    let o = loadcell(dir, &run_args(extra));
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!err.contains("Running"), "{err}");
    assert!(!dir.join("r.json").exists());
    err
}

/// `METHOD path` on 127.0.0.1:`port` with `body`; the answer's body.
fn http(port: u16, method: &str, path: &str, body: &str) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        tcp,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn a_run_holds_the_scraped_hosts_cpu_and_a_wrong_url_stops_it_before_load() {
    let exporter = loadcell_testkit::node_exporter().expect("node_exporter starts");
    let port = exporter.server.port;
    let dir = tempfile::tempdir().unwrap();
    prepared(dir.path());

    let refused = format!(
        "http://127.0.0.1:{}/metrics",
        loadcell_testkit::closed_port()
    );
    let err = fails_before_load(dir.path(), &["--server-metrics", &refused]);
    assert!(
        err.contains(&format!("--server-metrics {refused}: ")),
        "{err}"
    );
    // Its landing page is HTML, not the exposition.
    let page = format!("http://127.0.0.1:{port}/");
    let err = fails_before_load(dir.path(), &["--server-metrics", &page]);
    assert!(err.contains("is not Prometheus text"), "{err}");

    let url = format!("http://127.0.0.1:{port}/metrics");
    let o = ok(loadcell(dir.path(), &run_args(&["--server-metrics", &url])));
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    let host = format!("127.0.0.1:{port}");
    let source = &r["resources"]["server_metrics"][0];
    assert_eq!(source["host"], host.as_str());
    assert_eq!(source["failures"], 0, "{source}");
    assert!(u(source, "/scrapes") >= 3, "{source}");
    let measured: Vec<&Value> = r["resources"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["t_s"].as_f64().unwrap() > 0.0)
        .collect();
    assert!(measured.len() >= 3);
    let with_cpu: Vec<&Value> = measured
        .iter()
        .filter_map(|s| s["remote"].as_array()?.first())
        .filter(|r| r["cpu_pct"].is_number())
        .collect();
    // CPU is a rate between two scrapes: the first sample has none, and
    // on a saturated machine a late scrape can leave one more without.
    assert!(!with_cpu.is_empty(), "{measured:?}");
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    for remote in &with_cpu {
        assert_eq!(remote["host"], host.as_str());
        // node_exporter reads this host: loadcell itself keeps it busy.
        assert!(f(remote, "/cpu_pct") > 0.0, "{remote}");
        assert_eq!(u(remote, "/cpus"), cpus);
        assert!(f(remote, "/memory_used_bytes") > 0.0);
        assert!(remote["net_rx_bytes_per_s"].is_number());
        assert!(remote["disk_busy_pct"].is_number());
    }
    let summary = stdout(&o);
    assert!(
        summary.contains(&format!("Server host {host} (scraped): CPU ")),
        "{summary}"
    );
    ok(loadcell(
        dir.path(),
        &["report", "r.json", "--html", "r.html"],
    ));
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(html.contains(&format!("{host} (scraped)")));
}

#[test]
fn exported_series_hold_what_the_result_counted() {
    let prom = loadcell_testkit::prometheus().expect("prometheus starts");
    let influx = loadcell_testkit::influxdb().expect("influxd starts");
    let dir = tempfile::tempdir().unwrap();
    prepared(dir.path());
    let rw = format!(
        "prometheus-rw=http://127.0.0.1:{}/api/v1/write",
        prom.server.port
    );
    let line = format!("influxdb=http://127.0.0.1:{}/loadcell", influx.server.port);

    // A database that does not exist is named before any load.
    let err = fails_before_load(dir.path(), &["--export", &line]);
    assert!(err.contains(&format!("--export {line}: ")), "{err}");
    assert!(err.contains("database not found"), "{err}");
    http(
        influx.server.port,
        "POST",
        "/query",
        "q=CREATE+DATABASE+loadcell",
    );

    ok(loadcell(
        dir.path(),
        &run_args(&["--export", &rw, "--export", &line]),
    ));
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    let ops: u64 = r["ops"]
        .as_object()
        .unwrap()
        .values()
        .map(|o| o["count"].as_u64().unwrap())
        .sum();
    assert!(ops > 0);
    for export in r["exports"].as_array().unwrap() {
        assert_eq!(export["failed_writes"], 0, "{export}");
        assert_eq!(export["dropped_intervals"], 0, "{export}");
        assert!(u(export, "/intervals") >= 3, "{export}");
    }
    let run = s(&r, "/exports/0/run").to_string();

    let query = format!("sum(sum_over_time(loadcell_op_count{{run=\"{run}\"}}[1h]))");
    let answer = http(
        prom.server.port,
        "GET",
        &format!("/api/v1/query?query={}", encode(&query)),
        "",
    );
    let answer: Value = serde_json::from_str(&answer).unwrap();
    let exported: f64 = answer["data"]["result"][0]["value"][1]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .parse()
        .unwrap();
    assert_eq!(exported as u64, ops, "Prometheus: {answer}");
    let cpu = format!("count(loadcell_resources_cpu_pct{{run=\"{run}\",host=\"loadcell\"}})");
    let answer = http(
        prom.server.port,
        "GET",
        &format!("/api/v1/query?query={}", encode(&cpu)),
        "",
    );
    assert!(answer.contains("\"value\""), "resource series: {answer}");

    let q = format!("SELECT sum(\"count\") FROM \"loadcell_op\" WHERE \"run\" = '{run}'");
    let answer = http(
        influx.server.port,
        "GET",
        &format!("/query?db=loadcell&q={}", encode(&q)),
        "",
    );
    let answer: Value = serde_json::from_str(&answer).unwrap();
    let exported = answer["results"][0]["series"][0]["values"][0][1]
        .as_f64()
        .unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(exported as u64, ops, "InfluxDB: {answer}");
}

#[test]
fn list_and_help_name_the_exports_their_series_and_the_scrapes() {
    let dir = tempfile::tempdir().unwrap();
    let list = stdout(&ok(loadcell(dir.path(), &["list"])));
    for needle in [
        "prometheus-rw=URL",
        "influxdb=URL/DB",
        "loadcell_op_latency_p99_ms",
        "loadcell_resources_cpu_pct",
        "--server-metrics URL",
    ] {
        assert!(list.contains(needle), "{needle} in {list}");
    }
    let help = stdout(&ok(loadcell(dir.path(), &["run", "--help"])));
    assert!(help.contains("--server-metrics <URL>"), "{help}");
    assert!(help.contains("--export <KIND=URL>"), "{help}");
}
