//! Runs that last days: every interval goes to the interval log on disk as
//! the run goes, the result keeps a bounded number of them, and a run
//! killed mid-way can be rebuilt from its log.

mod common;

use common::*;
use loadcell_record::hist;

/// An interval log's data lines: start and length (s), and histogram.
fn logged(text: &str) -> Vec<(f64, f64, hist::Micros)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('"') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                hist::decode(f[3]).unwrap(),
            )
        })
        .collect()
}

fn logged_events(lines: &[(f64, f64, hist::Micros)]) -> u64 {
    lines.iter().map(|(_, _, h)| h.len()).sum()
}

#[test]
fn every_run_writes_its_intervals_next_to_its_result() {
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &[
            "run",
            "kv",
            "--target",
            "sim:?latency=fixed:1ms",
            "--clients",
            "2",
            "--time",
            "1s",
            "--report-interval",
            "100ms",
            "--out",
            "r.json",
        ],
    ));
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    assert_eq!(s(&r, "/hdr_log"), "r.hlog");
    let lines = logged(&std::fs::read_to_string(dir.path().join("r.hlog")).unwrap());
    assert_eq!(lines.len(), r["intervals"].as_array().unwrap().len());
    assert_eq!(logged_events(&lines), u(&r, "/summary/events"));
}

/// A run killed with SIGKILL leaves its interval log up to the last
/// interval, and `report` rebuilds a partial view from the log alone.
#[test]
fn a_killed_run_is_rebuilt_from_its_interval_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(bin())
        .args([
            "run",
            "kv",
            "--target",
            "sim:?latency=fixed:1ms",
            "--clients",
            "2",
            "--time",
            "60s",
            "--report-interval",
            "50ms",
            "--out",
            "k.json",
        ])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let log = dir.path().join("k.hlog");
    let lines = || logged(&std::fs::read_to_string(&log).unwrap_or_default());
    let waited = std::time::Instant::now();
    while lines().len() < 10 {
        assert!(waited.elapsed().as_secs() < 30, "no intervals logged");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!dir.path().join("k.json").exists());
    let lines = lines();
    let (first, last) = (&lines[0], &lines[lines.len() - 1]);
    let events_per_sec = logged_events(&lines) as f64 / (last.0 + last.1 - first.0);

    let csv = stdout(&ok(loadcell(
        dir.path(),
        &["report", "k.hlog", "--csv", "-"],
    )));
    let mut rows = csv.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    let row: Vec<&str> = rows.next().unwrap().split(',').collect();
    let column = |name: &str| {
        row[header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name} in {header:?}"))]
    };
    assert_eq!(column("status"), "partial", "{csv}");
    let tps: f64 = column("tps").parse().unwrap();
    assert!(
        (tps - events_per_sec).abs() < 0.01 * events_per_sec,
        "{tps} vs {events_per_sec}: {csv}"
    );

    ok(loadcell(
        dir.path(),
        &["report", "k.hlog", "--html", "k.html"],
    ));
    let html = std::fs::read_to_string(dir.path().join("k.html")).unwrap();
    assert!(
        html.contains("rebuilt from the interval log k.hlog"),
        "the page says what it is"
    );
}
