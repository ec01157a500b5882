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

/// Peak resident memory of a running process, in kB.
fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A long run emulated with short intervals: 2 ms for 30 s is 15,000
/// intervals, past MAX_POINTS (3,600) three times (at 3,600, 7,200 and
/// 14,400), as a 4-hour run at 1 s would be, in a CI's half minute. The
/// result keeps at most MAX_POINTS, the log every interval, and the
/// client's peak memory stays flat once the series has filled.
#[test]
fn a_long_run_keeps_memory_and_result_bounded_and_every_interval_on_disk() {
    use loadcell_record::coarse::MAX_POINTS;
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
            "30s",
            "--report-interval",
            "2ms",
            "--out",
            "long.json",
        ])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let log = dir.path().join("long.hlog");
    let lines_logged = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
            .count()
    };
    // Peak memory once the series has filled twice (its largest), and at
    // the end of the run.
    let filled = 2 * MAX_POINTS + 1_000;
    let mut at_filled = None;
    let mut last = (0, 0);
    while child.try_wait().unwrap().is_none() {
        let Some(hwm) = vm_hwm_kb(child.id()) else {
            break;
        };
        let logged = lines_logged();
        if at_filled.is_none() && logged >= filled {
            at_filled = Some((logged, hwm));
        }
        last = (logged, hwm);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(child.wait().unwrap().success());
    let (filled_at, hwm_filled) = at_filled.expect("the run got past twice the bound");
    let (end_at, hwm_end) = last;
    assert!(
        end_at >= filled_at + 4_000,
        "{filled_at} .. {end_at} intervals: too few to compare"
    );
    // Kept, each interval would add over 1 KB (its histogram, summary and
    // resource sample): 4,000 more would add over 4 MB.
    assert!(
        hwm_end - hwm_filled < 2_048,
        "peak RSS grew {} kB from interval {filled_at} ({hwm_filled} kB) to {end_at} ({hwm_end} kB)",
        hwm_end - hwm_filled
    );

    let r = read_json(&dir.path().join("long.json"));
    assert_valid_result(&r);
    let intervals = r["intervals"].as_array().unwrap();
    assert!(intervals.len() <= MAX_POINTS, "{}", intervals.len());
    let bytes = std::fs::metadata(dir.path().join("long.json"))
        .unwrap()
        .len();
    // About 1 KB per interval and its resource sample, at most 2.
    assert!(
        bytes < (MAX_POINTS * 2 * 1024) as u64,
        "{bytes} bytes for {} intervals",
        intervals.len()
    );
    let fine: u64 = intervals
        .iter()
        .map(|i| i["merged"]["intervals"].as_u64().unwrap_or(1))
        .sum();
    let lines = logged(&std::fs::read_to_string(&log).unwrap());
    assert!(lines.len() > 4 * MAX_POINTS, "{}", lines.len());
    assert_eq!(
        lines.len() as u64,
        fine,
        "the log has every interval the result merged"
    );
    assert_eq!(logged_events(&lines), u(&r, "/summary/events"));
    assert!(intervals[0]["merged"]["intervals"].as_u64().unwrap() >= 4);
    eprintln!(
        "{} intervals, {} kept, result {bytes} bytes; peak RSS {hwm_filled} kB at interval {filled_at}, {hwm_end} kB at {end_at}",
        lines.len(),
        intervals.len()
    );
}
