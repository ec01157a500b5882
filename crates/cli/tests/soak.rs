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
    // What the log holds is shown; what it does not, said to be unknown.
    let duration = last.0 + last.1 - first.0;
    assert_eq!(column("events"), logged_events(&lines).to_string(), "{csv}");
    let measured: f64 = column("duration_s").parse().unwrap();
    assert!(
        (measured - duration).abs() < 0.001,
        "{measured} vs {duration}"
    );
    for unknown in ["threads", "qps", "errors"] {
        assert_eq!(column(unknown), "unknown", "{unknown}: {csv}");
    }

    let md = stdout(&ok(loadcell(
        dir.path(),
        &["report", "k.hlog", "--markdown", "-"],
    )));
    let mut rows = md.lines();
    let header: Vec<&str> = rows.next().unwrap().split(" | ").collect();
    let row: Vec<&str> = rows.nth(1).unwrap().split(" | ").collect();
    let cell = |name: &str| {
        row[header
            .iter()
            .position(|h| h.trim_matches(['|', ' ']) == name)
            .unwrap_or_else(|| panic!("{name} in {md}"))]
        .trim_matches(['|', ' '])
    };
    assert_eq!(cell("threads"), "unknown", "{md}");
    assert_eq!(cell("ops/s"), "unknown", "{md}");
    assert_eq!(cell("errors"), "unknown", "{md}");
    let events = cell("events").replace(',', "");
    assert_eq!(events, logged_events(&lines).to_string(), "{md}");
    assert_eq!(cell("duration (s)"), format!("{duration:.1}"), "{md}");

    ok(loadcell(
        dir.path(),
        &["report", "k.hlog", "--html", "k.html"],
    ));
    let html = std::fs::read_to_string(dir.path().join("k.html")).unwrap();
    assert!(
        html.contains("rebuilt from the interval log k.hlog"),
        "the page says what it is"
    );
    for zero in ["0×0", "0 threads", "<dd>0</dd>", "0.00 ops/s", "errors 0"] {
        assert!(!html.contains(zero), "'{zero}' shown as a fact");
    }
    for unknown in ["threads", "clients per thread", "seed", "driver"] {
        let fact = format!("<dt>{unknown}</dt><dd>unknown</dd>");
        assert!(html.contains(&fact), "{fact}");
    }
    assert!(
        html.contains("<dt>workload</dt><dd>kv</dd>"),
        "known facts stay"
    );
}

/// Peak resident memory of a running process, in kB.
fn vm_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A long run emulated with short intervals: 10 ms for 45 s is 4,500
/// intervals, past MAX_POINTS (3,600), as a run of an hour and a quarter
/// at 1 s would be, in under a minute of CI. (Shorter intervals would
/// measure whether the collector keeps up on a busy machine, not what the
/// run keeps.) The
/// result keeps at most MAX_POINTS, the log every interval, and the
/// client's peak memory stays flat from the first few hundred intervals
/// to the last: the points wait on disk, not in memory, until the run ends.
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
            "45s",
            "--report-interval",
            "10ms",
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
    // Memory by intervals logged, while the run goes.
    let mut seen = Vec::new();
    while child.try_wait().unwrap().is_none() {
        let Some(rss) = vm_rss_kb(child.id()) else {
            break;
        };
        seen.push((lines_logged(), rss));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(child.wait().unwrap().success());
    let logged_in_all = lines_logged();
    // What the run keeps from window to window of intervals, past
    // start-up and before the end (when the result is made and the points
    // read back): the least memory of each window, since a moment when the
    // collector fell behind (this machine is shared) holds more until it
    // catches up. Such a moment can raise the floor once; kept intervals
    // would raise it in every window, so the median step is what counts.
    let (from, to) = (500, logged_in_all.saturating_sub(100));
    assert!(
        to >= from + 3_000,
        "{logged_in_all} intervals: too few to compare"
    );
    let width = (to - from) / 6;
    let floors: Vec<u64> = (0..6)
        .map(|k| {
            let window = from + k * width..from + (k + 1) * width;
            seen.iter()
                .filter(|(logged, _)| window.contains(logged))
                .map(|&(_, rss)| rss)
                .min()
                .unwrap_or_else(|| panic!("no reading between intervals {window:?}"))
        })
        .collect();
    let mut steps: Vec<i64> = floors
        .windows(2)
        .map(|w| w[1] as i64 - w[0] as i64)
        .collect();
    steps.sort_unstable();
    // Kept in memory, each interval would add over 600 bytes (its
    // histogram, summary and resource sample): over 400 kB a window.
    assert!(
        steps[2] < 200,
        "memory grew from window to window of {width} intervals: floors {floors:?} kB"
    );
    let (rss_early, rss_late) = (floors[0], floors[5]);

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
    assert!(lines.len() > MAX_POINTS, "{}", lines.len());
    assert_eq!(
        lines.len() as u64,
        fine,
        "the log has every interval the result merged"
    );
    assert_eq!(logged_events(&lines), u(&r, "/summary/events"));
    assert!(intervals[0]["merged"]["intervals"].as_u64().unwrap() >= 2);

    // compare and report read every interval from the log, not the
    // merged ones.
    let compared = ok(loadcell(
        dir.path(),
        &["compare", "long.json", "long.json", "--json"],
    ));
    let c: serde_json::Value = serde_json::from_str(&stdout(&compared)).unwrap();
    let pair = &c["comparisons"][0];
    assert_eq!(
        pair["series_from"]["baseline"],
        "the interval log long.hlog"
    );
    assert_eq!(
        u(pair, "/throughput_test/baseline/n"),
        lines.len() as u64,
        "{pair}"
    );
    ok(loadcell(
        dir.path(),
        &["report", "long.json", "--html", "long.html"],
    ));
    let html = std::fs::read_to_string(dir.path().join("long.html")).unwrap();
    assert!(
        html.contains(&format!(
            "The worst of {} intervals, from the interval log long.hlog",
            loadcell_report::table::grouped(lines.len() as f64, 0)
        )),
        "no worst intervals from the log"
    );
    // Without its log beside it, the result's merged intervals are used, and
    // that is said.
    std::fs::rename(&log, dir.path().join("moved.hlog")).unwrap();
    let compared = ok(loadcell(
        dir.path(),
        &["compare", "long.json", "long.json", "--json"],
    ));
    assert!(
        stderr(&compared).contains("its interval log long.hlog is not beside it"),
        "{}",
        stderr(&compared)
    );
    eprintln!(
        "{} intervals, {} kept, result {bytes} bytes; RSS {rss_early} kB early, {rss_late} kB late",
        lines.len(),
        intervals.len()
    );
}
