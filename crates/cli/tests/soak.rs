//! Runs that last days: every interval goes to the interval log on disk as
//! the run goes, the result keeps a bounded number of them, and a run
//! killed mid-way can be rebuilt from its log.

mod common;

use common::*;
use loadcell_record::hist;

/// The histograms of an interval log's data lines.
fn logged_histograms(text: &str) -> Vec<hist::Micros> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('"') && !l.is_empty())
        .map(|l| hist::decode(l.rsplit(',').next().unwrap()).unwrap())
        .collect()
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
    let logged = logged_histograms(&std::fs::read_to_string(dir.path().join("r.hlog")).unwrap());
    assert_eq!(logged.len(), r["intervals"].as_array().unwrap().len());
    assert_eq!(
        logged.iter().map(|h| h.len()).sum::<u64>(),
        u(&r, "/summary/events")
    );
}
