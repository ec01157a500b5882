//! Machine baselines end to end: `cpu`'s score on one thread and on all,
//! and the disk workloads driving fio on a small file in a temporary
//! directory (results, the file removed, a sweep, --expect-iops).

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use common::*;

/// The tests of this file one at a time: fio's I/O and CPU would
/// otherwise slow each other's runs unevenly.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn cpu_scores_events_per_second_on_one_thread_and_runs_all_threads() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &["run", "cpu", "--time", "3s", "--out", "one.json"],
    ));
    let one = read_json(&dir.path().join("one.json"));
    assert_valid_result(&one);
    assert_eq!(s(&one, "/config/target"), "local:");
    assert_eq!(u(&one, "/config/workload_options/cpu_max_prime"), 10_000);
    // The score is sysbench's events per second: events over the measured
    // time. How it compares with sysbench's own is a side-by-side figure
    // (bench/machine.sh, docs/BENCHMARKS.md), not a timed assertion here.
    let events = u(&one, "/summary/events") as f64;
    let per_sec = f(&one, "/summary/events_per_sec");
    assert!(events > 0.0 && per_sec > 0.0, "{one}");
    let secs = f(&one, "/summary/duration_s");
    assert!(
        (events / secs - per_sec).abs() <= per_sec * 0.01,
        "{events} events in {secs} s vs {per_sec} events/s"
    );
    // The client's CPU is what is measured: no warning that it is busy.
    assert!(
        one["warnings"].as_array().unwrap().is_empty(),
        "{}",
        one["warnings"]
    );

    let all = ok(loadcell(
        dir.path(),
        &[
            "run",
            "cpu",
            "--threads",
            "2",
            "--time",
            "2s",
            "--cpu-max-prime",
            "20000",
            "--out",
            "all.json",
        ],
    ));
    let all_result = read_json(&dir.path().join("all.json"));
    // A blocking driver: one worker thread per session.
    assert_eq!(u(&all_result, "/config/worker_threads"), 2);
    assert!(u(&all_result, "/summary/events") > 0, "{}", stdout(&all));
}

/// The one file in `dir`, if any: the run's own must be gone.
fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn disk_randread_through_fio_lands_in_a_result_and_leaves_no_file() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "disk-randread",
            "--directory",
            data.path().to_str().unwrap(),
            "--size",
            "32m",
            "--time",
            "2s",
            "--iodepth",
            "16",
            "--expect-iops",
            "min(1200+30*GiB,20000)",
            "--disk-size",
            "1g",
            "--out",
            "r.json",
        ],
    ));
    assert!(
        files_in(data.path()).is_empty(),
        "{:?}",
        files_in(data.path())
    );
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    assert_eq!(s(&r, "/status"), "complete");
    let iops = f(&r, "/summary/ops_per_sec");
    assert!(iops > 100.0, "{iops} IOPS");
    // 4 KiB per I/O: bandwidth is IOPS times the block size.
    let bw = f(&r, "/summary/bytes_per_sec");
    assert!(
        (bw / (iops * 4096.0) - 1.0).abs() < 0.01,
        "{bw} B/s at {iops} IOPS"
    );
    assert_eq!(u(&r, "/ops/read/count"), u(&r, "/summary/ops"));
    // fio's clat bins became the histograms: percentiles in order, nonzero.
    let (p50, p99, max) = (
        f(&r, "/summary/latency_ms/p50"),
        f(&r, "/summary/latency_ms/p99"),
        f(&r, "/summary/latency_ms/max"),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{p50} {p99} {max}");
    // One interval per fio status report, adding up to the total.
    let intervals = r["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 2, "{intervals:?}");
    let summed: u64 = intervals.iter().map(|i| i["ops"].as_u64().unwrap()).sum();
    assert_eq!(summed, u(&r, "/summary/ops"));
    assert!(s(&r, "/disk/fio_version").starts_with("fio-"));
    let command: Vec<&str> = r["disk"]["fio_command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        command.contains(&"--rw=randread") && command.contains(&"--iodepth=16"),
        "{command:?}"
    );
    assert!(!s(&r, "/disk/filesystem/fs_type").is_empty());
    // 1 GiB: min(1200 + 30, 20000) = 1230 expected IOPS.
    assert_eq!(f(&r, "/disk/expect_iops/expected_iops"), 1230.0);
    assert!(r["disk"]["expect_iops"]["met"].as_bool().unwrap());
    let out = stdout(&o);
    assert!(
        out.contains("bandwidth:")
            && out.contains("of expected 1,230 (min(1200+30*GiB,20000) at GiB=1): met"),
        "{out}"
    );
}

#[test]
fn a_disk_short_of_its_expected_iops_says_so_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let o = loadcell(
        dir.path(),
        &[
            "run",
            "disk-seqwrite",
            "--directory",
            data.path().to_str().unwrap(),
            "--size",
            "16m",
            "--time",
            "1s",
            "--expect-iops",
            "1000000000",
            "--out",
            "r.json",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("of expected 1,000,000,000 (1000000000 at GiB="),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("SHORT by"), "{}", stdout(&o));
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    assert_eq!(u(&r, "/ops/write/count"), u(&r, "/summary/ops"));
    assert!(!r["disk"]["expect_iops"]["met"].as_bool().unwrap());
    assert!(files_in(data.path()).is_empty());
}

#[test]
fn a_sweep_over_iodepth_runs_fio_at_each_depth() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &[
            "sweep",
            "disk-randread",
            "--iodepth",
            "1,8",
            "--directory",
            data.path().to_str().unwrap(),
            "--size",
            "16m",
            "--time",
            "1s",
            "--out",
            "s.json",
        ],
    ));
    let sweep = read_json(&dir.path().join("s.json"));
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (point, depth) in points.iter().zip([1, 8]) {
        assert_eq!(point["value"].as_f64(), Some(depth as f64));
        let run = &point["runs"][0];
        assert_eq!(
            run["config"]["workload_options"]["iodepth"].as_u64(),
            Some(depth)
        );
        assert!(run["summary"]["ops_per_sec"].as_f64().unwrap() > 0.0);
    }
    assert!(files_in(data.path()).is_empty());
}

#[test]
fn without_fio_a_disk_run_says_how_to_install_it() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(bin())
        .args(["run", "disk-randread"])
        .current_dir(dir.path())
        .env("PATH", dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim(),
        "loadcell: error: fio is not installed: apt-get install fio"
    );
}

#[test]
fn an_interrupted_disk_run_stops_fio_keeps_what_it_measured_and_removes_the_file() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let child = Command::new(bin())
        .args([
            "run",
            "disk-randread",
            "--directory",
            data.path().to_str().unwrap(),
        ])
        .args([
            "--size",
            "16m",
            "--time",
            "30s",
            "--iodepth",
            "4",
            "--out",
            "r.json",
        ])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Past fio's first status report, with the file in place.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(
        files_in(data.path()).len(),
        1,
        "{:?}",
        files_in(data.path())
    );
    // SAFETY: kill only sends a signal, to the child started above.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = output_within(child).status;
    assert_eq!(status.code(), Some(130));
    assert!(
        files_in(data.path()).is_empty(),
        "{:?}",
        files_in(data.path())
    );
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    assert_eq!(s(&r, "/stop_reason"), "interrupted");
    assert!(u(&r, "/summary/ops") > 0);
    assert!(f(&r, "/summary/duration_s") < 10.0);
}
