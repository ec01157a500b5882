//! What a run exports besides its result: HdrHistogram interval logs
//! (checked with HdrHistogram's own Java log processor) and Prometheus
//! metrics scraped while the run is going.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use loadcell_record::hist;

/// HdrHistogram's reference implementation, fetched from Maven Central by
/// `scripts/install-test-deps.sh`.
fn hdrhistogram_jar() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let jar = PathBuf::from(home)
        .join(".m2/repository/org/hdrhistogram/HdrHistogram/2.2.2/HdrHistogram-2.2.2.jar");
    assert!(
        jar.exists(),
        "{} is missing: run scripts/install-test-deps.sh (it fetches it with mvn)",
        jar.display()
    );
    jar
}

/// Data lines of an interval log: (start, length, histogram).
fn log_lines(text: &str) -> Vec<(f64, f64, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('"') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 4, "{l}");
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[3].to_string(),
            )
        })
        .collect()
}

#[test]
fn interval_logs_are_exported_and_read_by_hdrhistogram_itself() {
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &["prepare", "oltp_point_select", "--table-size", "1000"],
    ));
    ok(loadcell(
        dir.path(),
        &[
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
            "--hdr-log",
            "live.hlog",
        ],
    ));
    let r = read_json(&dir.path().join("r.json"));
    let events = u(&r, "/summary/events");
    let intervals = r["intervals"].as_array().unwrap().len();

    ok(loadcell(
        dir.path(),
        &["hdr", "r.json", "--out", "export.hlog"],
    ));
    for name in ["export.hlog", "live.hlog"] {
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(
            text.contains("#[Histogram log format version 1.3]"),
            "{name}"
        );
        let lines = log_lines(&text);
        assert_eq!(
            lines.len(),
            intervals,
            "{name}: one line per measured interval"
        );
        let total: u64 = lines
            .iter()
            .map(|(_, _, h)| hist::decode(h).unwrap().len())
            .sum();
        assert_eq!(
            total, events,
            "{name}: the intervals hold every measured event"
        );
        assert!(
            lines.windows(2).all(|w| w[1].0 >= w[0].0),
            "{name}: ordered by start"
        );
    }

    // HdrHistogram's own HistogramLogProcessor reads the log and counts the same events.
    let out = Command::new("java")
        .arg("-cp")
        .arg(hdrhistogram_jar())
        .args([
            "org.HdrHistogram.HistogramLogProcessor",
            "-i",
            "export.hlog",
        ])
        .current_dir(dir.path())
        .output()
        .expect("java runs (scripts/install-test-deps.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("Total count    = {events:>12}")),
        "HistogramLogProcessor disagrees on the count ({events}):\n{text}"
    );
}

fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn prometheus_metrics_are_served_during_the_run() {
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &["prepare", "oltp_point_select", "--table-size", "1000"],
    ));
    let port = loadcell_testkit::free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(bin())
        .args([
            "run",
            "oltp_point_select",
            "--table-size",
            "1000",
            "--time",
            "6s",
            "--metrics-addr",
            &addr,
            "--out",
            "r.json",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Scrape twice mid-run: the counters are there and they grow.
    std::thread::sleep(Duration::from_millis(2500));
    let first = scrape(port).expect("the metrics endpoint answers mid-run");
    std::thread::sleep(Duration::from_millis(1500));
    let second = scrape(port).expect("the metrics endpoint answers mid-run");
    let o = output_within(child);
    assert!(o.status.success(), "{}", stderr(&o));

    assert!(
        first.starts_with("HTTP/1.") && first.contains("text/plain; version=0.0.4"),
        "{first}"
    );
    let name = "loadcell_ops_total{op=\"point_select\"}";
    let (a, b) = (
        metric(&first, name).unwrap(),
        metric(&second, name).unwrap(),
    );
    assert!(a > 0.0 && b > a, "{name}: {a} then {b}");
    assert!(
        second.contains("loadcell_response_time_seconds_bucket{le=\"+Inf\"}"),
        "{second}"
    );
    assert!(
        second.contains("loadcell_op_errors_total{op=\"point_select\"} 0"),
        "{second}"
    );
    assert!(
        second.contains("loadcell_info{workload=\"oltp_point_select\""),
        "{second}"
    );
}
