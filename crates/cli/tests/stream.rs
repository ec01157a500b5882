//! The `stream` workload against a real Redis (Redis Streams): produce and
//! consume with order and completeness checked, a backlog drained, two
//! processes sharing a group, one of them killed, the server killed, and
//! bad input.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

fn redis() -> loadcell_testkit::TestServer {
    loadcell_testkit::redis().expect("redis starts")
}

/// `loadcell run stream ...` in the background, its result to `out`.
fn spawn_run(dir: &Path, url: &str, out: &str, args: &[&str]) -> Child {
    Command::new(bin())
        .args(["run", "stream", "--target", url, "--out", out])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finished(dir: &Path, child: Child, out: &str) -> Value {
    let o = output_within(child);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = read_json(&dir.join(out));
    assert_valid_result(&r);
    r
}

/// A short run's rows/s is the rows over the time they flowed, first row
/// to last, not a count of whole report intervals that carried rows.
#[test]
fn a_short_runs_rows_per_second_is_taken_from_the_first_row_to_the_last() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let url = server.url.as_str();
    ok(loadcell(
        dir.path(),
        &["prepare", "stream", "--target", url, "--partitions", "2"],
    ));
    let r = run_json(
        dir.path(),
        "stream",
        url,
        &[
            "--partitions",
            "2",
            "--produce-rate",
            "4000",
            "--time",
            "1200ms",
            "--report-interval",
            "500ms",
        ],
    );
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    // The run's own rows: what the drain after it took is not in the flow.
    let consumed = u(&r, "/ops/poll/items");
    let produced = u(&r, "/verification/stream/produced");
    for (flow, rows) in [("consume_flow", consumed), ("produce_flow", produced)] {
        let at = |field: &str| format!("/verification/stream/{flow}/{field}");
        assert_eq!(u(&r, &at("rows")), rows, "{flow}");
        let (over_s, per_sec) = (f(&r, &at("over_s")), f(&r, &at("per_sec")));
        assert!(
            (per_sec - rows as f64 / over_s).abs() < 1e-6 * per_sec,
            "{flow}"
        );
        assert!(
            over_s > 0.9 && over_s <= f(&r, "/summary/duration_s") + 0.1,
            "{flow}: {over_s}"
        );
    }
    // The rows came as fast as they were produced, whatever the intervals
    // (1.2 s in 500 ms intervals).
    let rate = |flow: &str| f(&r, &format!("/verification/stream/{flow}/per_sec"));
    let sent = f(&r, "/ops/produce/items_per_sec");
    assert!((rate("produce_flow") / sent - 1.0).abs() < 0.05, "{sent}");
    assert!(
        (rate("consume_flow") / rate("produce_flow") - 1.0).abs() < 0.1,
        "{}",
        r["verification"]["stream"]
    );
}

#[test]
fn rows_produced_on_8_partitions_are_all_consumed_in_order_then_cleaned_up() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let url = server.url.as_str();
    ok(loadcell(
        dir.path(),
        &["prepare", "stream", "--target", url, "--partitions", "8"],
    ));
    let r = run_json(
        dir.path(),
        "stream",
        url,
        &[
            "--partitions",
            "8",
            "--producers",
            "2",
            "--produce-rate",
            "20000",
            "--time",
            "2s",
            "--report-interval",
            "500ms",
        ],
    );
    let v = r.pointer("/verification").unwrap();
    assert_eq!(v["ok"], true, "{v}");
    let produced = u(&r, "/verification/stream/produced");
    assert!(produced > 10_000, "{produced}");
    assert_eq!(u(&r, "/verification/stream/consumed"), produced);
    for field in ["missing", "duplicated", "gaps", "reorders", "untimed"] {
        assert_eq!(
            u(&r, &format!("/verification/stream/{field}")),
            0,
            "{field}"
        );
    }
    assert_eq!(u(&r, "/verification/expected"), produced);
    assert!(u(&r, "/verification/stream/lag_at_end") <= produced);
    assert!(u(&r, "/ops/end_to_end/count") > 0);
    assert!(u(&r, "/ops/poll/items") > 0);
    assert!(f(&r, "/verification/stream/poll_us_per_1000_rows") > 0.0);
    assert_eq!(r["summary"]["errors"], 0);
    // The group's lag, sampled once an interval.
    assert_eq!(s(&r, "/verification/stream/lag_unit"), "rows");
    let lags: Vec<u64> = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i.pointer("/gauges/lag_rows").and_then(Value::as_u64))
        .collect();
    assert!(lags.len() >= 2, "a lag per interval: {}", r["intervals"]);
    assert!(*lags.iter().max().unwrap() <= u(&r, "/verification/stream/lag_max"));

    // A stream that is not loadcell's is left alone.
    loadcell_testkit::redis_cli(server.port, &["HSET", "foreign:meta", "marker", "x"]).unwrap();
    let o = loadcell(
        dir.path(),
        &["cleanup", "stream", "--target", url, "--stream", "foreign"],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("was not created by loadcell"),
        "{}",
        stderr(&o)
    );
    ok(loadcell(
        dir.path(),
        &["cleanup", "stream", "--target", url],
    ));
    let keys = loadcell_testkit::redis_cli(server.port, &["KEYS", "loadcell_stream*"]).unwrap();
    assert_eq!(keys.trim(), "", "cleanup dropped every key of the stream");
}

#[test]
fn a_consume_only_run_drains_the_backlog_prepare_loaded() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let url = server.url.as_str();
    let shape = ["--partitions", "4", "--mode", "consume"];
    ok(loadcell(
        dir.path(),
        &[
            &["prepare", "stream", "--target", url, "--backlog", "5000"][..],
            &shape,
        ]
        .concat(),
    ));
    let r = run_json(
        dir.path(),
        "stream",
        url,
        &[&shape[..], &["--time", "2s"]].concat(),
    );
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/stream/consumed"), 5000);
    // Drained in a few polls, then idle for most of 2 s: the empty polls'
    // waiting (400 ms per 1000 rows) is not counted.
    let per_1000 = f(&r, "/verification/stream/poll_us_per_1000_rows");
    assert!(per_1000 < 100_000.0, "{per_1000} µs per 1000 rows");
    assert_eq!(
        u(&r, "/verification/stream/lag_at_end"),
        0,
        "caught up in the run"
    );
    assert_eq!(u(&r, "/verification/stream/produced"), 0);
    // The backlog is another run's: consumed, not timed end to end.
    assert_eq!(u(&r, "/verification/stream/untimed"), 5000);
    assert!(
        r.pointer("/ops/end_to_end/count")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            == 0
    );
}

#[test]
fn two_processes_in_one_group_consume_every_row_once() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let url = server.url.as_str();
    let shape = [
        "--partitions",
        "4",
        "--mode",
        "consume",
        "--group",
        "shared",
    ];
    ok(loadcell(
        dir.path(),
        &[
            &["prepare", "stream", "--target", url, "--backlog", "40000"][..],
            &shape,
        ]
        .concat(),
    ));
    let args = [&shape[..], &["--time", "2s", "--poll-max", "100"]].concat();
    let a = spawn_run(dir.path(), url, "a.json", &args);
    let b = spawn_run(dir.path(), url, "b.json", &args);
    let (a, b) = (
        finished(dir.path(), a, "a.json"),
        finished(dir.path(), b, "b.json"),
    );
    let consumed = |r: &Value| u(r, "/verification/stream/consumed");
    assert!(consumed(&a) > 0 && consumed(&b) > 0, "both took a share");
    assert_eq!(consumed(&a) + consumed(&b), 40_000);
    for r in [&a, &b] {
        assert_eq!(u(r, "/verification/stream/duplicated"), 0);
        assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    }
}

#[test]
fn a_consumer_killed_mid_run_leaves_its_rows_to_the_other_process() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{}?claim_idle=1s", server.url);
    let shape = ["--partitions", "4", "--group", "shared"];
    ok(loadcell(
        dir.path(),
        &[&["prepare", "stream", "--target", url.as_str()][..], &shape].concat(),
    ));
    let mut doomed = spawn_run(
        dir.path(),
        &url,
        "doomed.json",
        &[&shape[..], &["--mode", "consume", "--time", "30s"]].concat(),
    );
    let survivor = spawn_run(
        dir.path(),
        &url,
        "survivor.json",
        &[&shape[..], &["--produce-rate", "20000", "--time", "4s"]].concat(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    // SIGKILL: no chance to acknowledge what it polled.
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let r = finished(dir.path(), survivor, "survivor.json");
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/stream/missing"), 0);
    assert!(u(&r, "/verification/stream/produced") > 20_000);
    let pending =
        loadcell_testkit::redis_cli(server.port, &["XPENDING", "loadcell_stream:0", "shared"])
            .unwrap();
    assert!(pending.starts_with('0'), "nothing left pending: {pending}");
}

/// A consume-only run of `shape` on a prepared backlog, expected to fail
/// its verification (exit 3): its result and what it printed.
fn failed_catch_up(dir: &Path, url: &str, shape: &[&str]) -> (Value, String) {
    let o = loadcell(
        dir,
        &[
            &["run", "stream", "--target", url, "--out", "r.json"][..],
            shape,
            &["--time", "3s", "--drain-timeout", "20s"],
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stdout(&o).contains("VERIFICATION FAILED"), "{}", stdout(&o));
    let r = read_json(&dir.join("r.json"));
    assert_valid_result(&r);
    (r, stdout(&o))
}

#[test]
fn entries_deleted_before_delivery_are_missing_and_the_check_still_runs() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let url = server.url.as_str();
    // Redis 7 reports the group's entries-read and lag as empty once an
    // entry ahead of it is deleted: the check must not take that for an
    // old server, with or without a group shared by other processes.
    for (stream, group) in [("alone", &[][..]), ("shared", &["--group", "g"][..])] {
        let shape = [
            &["--stream", stream, "--partitions", "8", "--mode", "consume"][..],
            group,
        ]
        .concat();
        ok(loadcell(
            dir.path(),
            &[
                &["prepare", "stream", "--target", url, "--backlog", "40000"][..],
                &shape,
            ]
            .concat(),
        ));
        let deleted = loadcell_testkit::redis_cli(
            server.port,
            &[
                "EVAL",
                "local e = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1100) \
                 local n = 0 for i = 1001, 1100 do n = n + redis.call('XDEL', KEYS[1], e[i][1]) end \
                 return n",
                "1",
                &format!("{stream}:3"),
            ],
        )
        .unwrap();
        assert_eq!(deleted.trim(), "100");
        let (r, _) = failed_catch_up(dir.path(), url, &shape);
        let v = &r["verification"];
        assert_eq!(u(&r, "/verification/stream/missing"), 100, "{v}");
        assert_eq!(u(&r, "/verification/expected"), 40_000, "{v}");
        assert_eq!(u(&r, "/verification/found"), 39_900, "{v}");
        assert_eq!(u(&r, "/verification/stream/consumed"), 39_900, "{v}");
        assert!(
            s(&r, "/verification/how").contains("100 of the missing rows were deleted"),
            "{v}"
        );
        if group.is_empty() {
            // One process read every row of the channel: the jump is a gap.
            assert_eq!(u(&r, "/verification/stream/gaps"), 1, "{v}");
        }
    }
}

#[test]
fn rows_trimmed_before_a_shared_group_read_them_fail_the_check() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let url = server.url.as_str();
    let shape = [
        "--stream",
        "trimmed",
        "--partitions",
        "4",
        "--mode",
        "consume",
        "--group",
        "catchup",
    ];
    ok(loadcell(
        dir.path(),
        &[
            &["prepare", "stream", "--target", url, "--backlog", "40000"][..],
            &shape,
        ]
        .concat(),
    ));
    // 10,000 rows a channel: the 2,999 oldest of channel 1 go unread.
    let trimmed =
        loadcell_testkit::redis_cli(server.port, &["XTRIM", "trimmed:1", "MAXLEN", "7001"])
            .unwrap();
    assert_eq!(trimmed.trim(), "2999");
    let (r, printed) = failed_catch_up(dir.path(), url, &shape);
    let v = &r["verification"];
    assert!(
        printed.contains("found 37001 where 40000 were expected"),
        "{printed}"
    );
    assert_eq!(u(&r, "/verification/stream/missing"), 2999, "{v}");
    assert_eq!(u(&r, "/verification/expected"), 40_000, "{v}");
    assert_eq!(u(&r, "/verification/found"), 37_001, "{v}");
    assert_eq!(u(&r, "/verification/stream/consumed"), 37_001, "{v}");
}

#[test]
fn cleanup_leaves_a_stream_holding_another_producers_entries_unless_forced() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let url = server.url.as_str();
    ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "stream",
            "--target",
            url,
            "--stream",
            "mixed",
            "--partitions",
            "2",
            "--mode",
            "consume",
            "--backlog",
            "1000",
        ],
    ));
    loadcell_testkit::redis_cli(server.port, &["XADD", "mixed:1", "*", "order", "42"]).unwrap();
    let o = loadcell(
        dir.path(),
        &["cleanup", "stream", "--target", url, "--stream", "mixed"],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("holds 1 row not written by loadcell") && err.contains("--force"),
        "{err}"
    );
    let kept = loadcell_testkit::redis_cli(server.port, &["XLEN", "mixed:1"]).unwrap();
    assert_eq!(kept.trim(), "501", "nothing dropped");
    ok(loadcell(
        dir.path(),
        &[
            "cleanup", "stream", "--target", url, "--stream", "mixed", "--force",
        ],
    ));
    let keys = loadcell_testkit::redis_cli(server.port, &["KEYS", "mixed*"]).unwrap();
    assert_eq!(keys.trim(), "", "--force dropped the stream");
}

#[test]
fn a_server_killed_mid_run_leaves_a_partial_result_with_what_was_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = redis();
    let url = server.url.clone();
    let shape = ["--partitions", "4", "--group", "shared"];
    ok(loadcell(
        dir.path(),
        &[&["prepare", "stream", "--target", url.as_str()][..], &shape].concat(),
    ));
    let (_, r) = run_and_kill_server(
        dir.path(),
        &[
            &["stream", "--target", url.as_str(), "--produce-rate", "5000"][..],
            &shape,
        ]
        .concat(),
        || server.kill(),
        Duration::from_millis(1500),
    );
    assert!(u(&r, "/summary/ops") > 0, "work before the kill is kept");
    assert!(
        r["verification"].is_null() || r["verification"]["ok"] != true,
        "no verification claims success against a dead server: {}",
        r["verification"]
    );
}

#[test]
fn bad_stream_input_is_one_line_before_any_load() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let url = server.url.as_str();
    for (args, expected) in [
        (
            &["--partitions", "0"][..],
            "--partitions must be at least 1",
        ),
        (
            &["--mode", "produce", "--group", "g"][..],
            "--group does not apply with --mode produce",
        ),
        (
            &["--row-size", "40"][..],
            "--row-size 40 is below the 84 bytes",
        ),
        (
            &["--mode", "consume"][..],
            "there is no stream 'loadcell_stream'",
        ),
    ] {
        let o = loadcell(
            dir.path(),
            &[&["run", "stream", "--target", url][..], args].concat(),
        );
        assert!(!o.status.success(), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

#[test]
fn list_and_help_show_the_workload_the_driver_and_the_options() {
    let dir = tempfile::tempdir().unwrap();
    let list = stdout(&ok(loadcell(dir.path(), &["list"])));
    for name in ["stream", "redis-streams", "claim_idle"] {
        assert!(list.contains(name), "{name} in {list}");
    }
    let help = stdout(&ok(loadcell(dir.path(), &["run", "--help"])));
    let heading = help
        .find("Stream workload options (stream):")
        .expect("a heading of its own");
    for flag in [
        "--partitions",
        "--produce-rate",
        "--poll-wait",
        "--drain-timeout",
    ] {
        assert!(help[heading..].contains(flag), "{flag} under the heading");
    }
}

#[test]
fn a_sweep_over_partitions_prepares_each_step_and_names_what_saturated() {
    let server = redis();
    let dir = tempfile::tempdir().unwrap();
    let o = ok(loadcell(
        dir.path(),
        &[
            "sweep",
            "stream",
            "--target",
            server.url.as_str(),
            "--partitions",
            "1,4",
            "--prepare",
            "--time",
            "1s",
            "--warmup",
            "0s",
            "--json",
        ],
    ));
    let sweep: Value = serde_json::from_str(&stdout(&o)).expect("the sweep file");
    assert_eq!(sweep["complete"], true, "{}", stderr(&o));
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for point in points {
        let r = &point["runs"][0];
        assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
        assert!(u(r, "/verification/stream/consumed") > 0);
    }
    assert!(
        stderr(&o).contains("again with 4 channels (it had 1)"),
        "the second step made the stream again: {}",
        stderr(&o)
    );
    // Partitions scale throughput like sessions: where it stops, what ran
    // out is named from the steps' resource samples (the client process,
    // the server found by its port, the host).
    let findings: Vec<&str> = sweep["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    let saturated = findings
        .iter()
        .any(|w| w.starts_with("throughput saturates at"));
    let scales = findings
        .iter()
        .any(|w| w.starts_with("throughput still scales at 4 partitions"));
    assert!(saturated || scales, "{findings:#?}");
    assert_eq!(
        sweep["analysis"]["bottleneck"].is_object(),
        saturated,
        "{findings:#?}"
    );
    let servers: Vec<bool> = points
        .iter()
        .map(|p| p["runs"][0]["resources"]["server_pid"].is_u64())
        .collect();
    assert_eq!(servers, [true, true], "the server's process was found");
}
