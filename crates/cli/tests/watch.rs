//! `loadcell watch` against three real shards on one Redis: the watcher's
//! merged percentiles from the streamed intervals equal `merge`'s of the
//! shards' result files to the last bucket; a shard killed mid-run is
//! named silent, on the page (in headless Chromium) and at the end, and
//! `merge --allow-partial` notes it; a dead watcher costs a run nothing
//! but a warning.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant, SystemTime};

use common::*;
use loadcell_record::hist;
use serde_json::Value;

/// Shard `i` of 3 against `redis`, reporting to `watch`.
fn shard(dir: &Path, i: usize, redis: &str, watch: &str, start: &str, time: &str) -> Child {
    let (shard, out) = (format!("{i}/3"), format!("shard{i}.json"));
    spawn(
        dir,
        &[
            "run",
            "kv",
            "--target",
            redis,
            "--shard",
            &shard,
            "--clients",
            "6",
            "--rate",
            "1500",
            "--start-at",
            start,
            "--warmup",
            "1s",
            "--time",
            time,
            "--watch",
            watch,
            "--no-history",
            "--out",
            &out,
        ],
    )
}

fn start_in(secs: u64) -> String {
    humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(secs)).to_string()
}

/// `(value, count)` of every recorded bucket.
fn buckets(encoded: &str) -> Vec<(u64, u64)> {
    let h = hist::decode(encoded).expect("a histogram");
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

/// GET `path` of the watcher, over a plain socket.
fn get(base: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("the watcher answers");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn the_watchers_merged_percentiles_equal_merges_to_the_last_bucket() {
    let redis = loadcell_testkit::redis().expect("redis starts");
    let dir = tempfile::tempdir().unwrap();
    let (watch, url) = watcher(
        dir.path(),
        &[
            "--json",
            "--out",
            "watched.json",
            "--threshold",
            "p99 <= 1s",
        ],
    );
    let start = start_in(4);
    let shards: Vec<Child> = (0..3)
        .map(|i| shard(dir.path(), i, redis.url(), &url, &start, "3s"))
        .collect();
    for child in shards {
        ok(output_within(child));
    }
    let watched = output_within(watch);
    assert_eq!(watched.status.code(), Some(0), "{}", stderr(&watched));
    let live = stderr(&watched);
    assert!(live.contains("measure shards 3/3"), "{live}");
    let summary: Value = serde_json::from_str(&stdout(&watched)).expect("--json");

    ok(loadcell(
        dir.path(),
        &[
            "merge",
            "shard0.json",
            "shard1.json",
            "shard2.json",
            "--out",
            "merged.json",
        ],
    ));
    let merged = read_json(&dir.path().join("merged.json"));
    assert_eq!(
        buckets(s(&summary, "/histogram")),
        buckets(s(&merged, "/histograms/response")),
        "the intervals streamed live against the shards' files"
    );
    assert_eq!(u(&summary, "/ops"), u(&merged, "/summary/ops"));
    assert!(u(&summary, "/ops") >= 4000, "1,500/s for 3 s: {summary}");
    assert_eq!(u(&summary, "/lost_reports"), 0);
    // The results the shards posted, merged by the watcher, are merge's.
    let by_watcher = read_json(&dir.path().join("watched.json"));
    assert_valid_result(&by_watcher);
    assert_eq!(
        buckets(s(&by_watcher, "/histograms/response")),
        buckets(s(&merged, "/histograms/response"))
    );
    assert_eq!(
        by_watcher["gates"][0]["passed"], true,
        "{}",
        by_watcher["gates"]
    );
    for i in 0..3 {
        let r = read_json(&dir.path().join(format!("shard{i}.json")));
        assert!(
            r["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|w| !w.as_str().unwrap().contains("watcher")),
            "every report reached the watcher: {}",
            r["warnings"]
        );
    }
}

#[test]
fn a_shard_killed_mid_run_is_named_silent_on_the_page_and_at_the_end() {
    let redis = loadcell_testkit::redis().expect("redis starts");
    let dir = tempfile::tempdir().unwrap();
    let (watch, url) = watcher(
        dir.path(),
        &["--silent-after", "2s", "--out", "watched.json"],
    );
    let start = start_in(4);
    let mut shards: Vec<Child> = (0..3)
        .map(|i| shard(dir.path(), i, redis.url(), &url, &start, "10s"))
        .collect();
    // Two measured seconds in, shard 2 dies without a word.
    let measuring = humantime::parse_rfc3339(&start).unwrap();
    while SystemTime::now() < measuring + Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(100));
    }
    shards[2].kill().unwrap();
    shards[2].wait().unwrap();
    let killed = Instant::now();
    while killed.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let metrics = get(&url, "/metrics");
    assert!(
        metrics.contains("loadcell_watch_shards{state=\"silent\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("loadcell_watch_shards{state=\"reporting\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("loadcell_watch_response_time_seconds_count"),
        "{metrics}"
    );
    let dom = chromium(
        &format!("{url}/"),
        &["--dump-dom", "--virtual-time-budget=3000"],
    );
    assert!(dom.contains("<b id=\"reporting\">2/3</b>"), "{dom}");
    assert!(dom.contains("kv on redis://"), "{dom}");
    assert!(
        dom.contains("<tr data-state=\"silent\"><td>2</td>"),
        "shard 2's row says silent: {dom}"
    );
    for child in shards.drain(..2) {
        ok(output_within(child));
    }
    let watched = output_within(watch);
    let (text, live) = (stdout(&watched), stderr(&watched));
    assert_eq!(watched.status.code(), Some(3), "{text}{live}");
    assert!(live.contains("WARNING: shard 2 ("), "{live}");
    assert!(
        text.contains("shard 2 ") && text.contains("WENT SILENT"),
        "{text}"
    );
    assert!(text.contains("2 of 3 shards ended"), "{text}");
    let by_watcher = read_json(&dir.path().join("watched.json"));
    assert_eq!(by_watcher["merge"]["missing"], serde_json::json!([2]));

    let partial = loadcell(
        dir.path(),
        &[
            "merge",
            "shard0.json",
            "shard1.json",
            "--allow-partial",
            "--out",
            "merged.json",
        ],
    );
    ok(partial);
    let merged = read_json(&dir.path().join("merged.json"));
    assert_eq!(merged["merge"]["missing"], serde_json::json!([2]));
    assert!(
        merged["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("without shard(s) [2]")),
        "{}",
        merged["warnings"]
    );
}

#[test]
fn a_dead_watcher_costs_a_run_only_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", loadcell_testkit::closed_port());
    let started = Instant::now();
    let out = ok(loadcell(
        dir.path(),
        &[
            "run",
            "kv",
            "--target",
            "sim://",
            "--rate",
            "2000",
            "--time",
            "2s",
            "--warmup",
            "0s",
            "--watch",
            &dead,
            "--no-history",
            "--out",
            "r.json",
        ],
    ));
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let r = read_json(&dir.path().join("r.json"));
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("the watcher at http://127.0.0.1:"),
        "{warnings}"
    );
    assert!(warnings.contains("took 0 of"), "{warnings}");
    assert!(
        f(&r, "/summary/events_per_sec") > 1900.0,
        "{}",
        r["summary"]
    );
    assert!(stderr(&out).contains("reports to it are dropped until it answers"));
}

#[test]
fn a_watch_url_or_a_watched_sweep_that_cannot_work_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    refused_in_one_line(
        dir.path(),
        &["run", "kv", "--target", "sim://", "--watch", "redis://h:1"],
        &["plain http://"],
    );
    refused_in_one_line(
        dir.path(),
        &[
            "run",
            "kv",
            "--target",
            "sim://",
            "--watch",
            "http://watcher",
        ],
        &["host and port"],
    );
    refused_in_one_line(
        dir.path(),
        &[
            "sweep",
            "kv",
            "--target",
            "sim://",
            "--threads",
            "1,2",
            "--watch",
            "http://h:9750",
        ],
        &["--watch follows one run's shards"],
    );
    refused_in_one_line(
        dir.path(),
        &["run", "disk-randread", "--watch", "http://h:9750"],
        &["--watch does not apply to disk-randread"],
    );
}
