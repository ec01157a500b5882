//! The run history and `trend` end to end on the built-in simulated
//! server, whose latency the target sets: every run is remembered, a step
//! in latency is found at its first run with its commit, a saturated
//! client's run is flagged and left out, `--fail-on-change` exits 3 on a
//! regression among the newest runs, and runs of one configuration show
//! no change. Then the same on a real redis-server, whose writes slow down
//! when it is told to fsync each one.
//!
//! The tests take turns: each one's runs are its series, and another
//! test's load on the two cores would be a change in them.

mod common;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use common::*;
use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(dir: &Path, target: &str, commit: &str) {
    run_with(dir, target, commit, &[]);
}

fn run_with(dir: &Path, target: &str, commit: &str, extra: &[&str]) {
    run_kv_at_commit(dir, target, "500ms", commit, extra);
}

/// The change points of `metric` in the only series.
fn changes<'a>(t: &'a Value, metric: &str) -> Vec<&'a Value> {
    t["series"][0]["change_points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["metric"] == metric)
        .collect()
}

fn trend(dir: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec!["trend", "--json"];
    args.extend_from_slice(extra);
    let o = loadcell(dir, &args);
    (o.status.code(), serde_json::from_slice(&o.stdout).unwrap())
}

#[test]
fn a_latency_step_is_found_at_its_first_run_and_fails_ci_only_while_it_is_new() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    // 10 ms, not 1: the machine's own drift (see the sixteen-run test)
    // stays out of the newest runs' gate.
    for i in 0..10 {
        run(dir.path(), "sim://?latency=fixed:10ms", &format!("a{i}"));
    }
    for i in 0..10 {
        run(dir.path(), "sim://?latency=fixed:11ms", &format!("b{i}"));
    }
    let (code, t) = trend(dir.path(), &["--fail-on-change"]);
    let series = t["series"].as_array().unwrap();
    assert_eq!(series.len(), 1, "one configuration, one series: {t}");
    let s = &series[0];
    assert_eq!(s["runs"].as_array().unwrap().len(), 20);
    let p50 = s["change_points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "latency_p50")
        .unwrap_or_else(|| panic!("no latency change in {s}"));
    let at = p50["at"].as_u64().unwrap();
    assert!((9..=11).contains(&at), "{p50}");
    assert_eq!(p50["regression"], true);
    assert_eq!(
        p50["commit"],
        format!("{}{}", if at < 10 { "a" } else { "b" }, at % 10)
    );
    assert!(f(p50, "/change") > 0.05, "{p50}");
    // Ten runs later the change is history, not news.
    assert_eq!(code, Some(0));

    // A saturated client (no server latency at all, one worker thread):
    // flagged, shown, and not a change.
    run(dir.path(), "sim://", "sat");
    let (_, t) = trend(dir.path(), &[]);
    let runs = t["series"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 21);
    assert_eq!(runs[20]["flags"][0], "client_saturated");
    assert!(t["series"][0]["change_points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["at"].as_u64().unwrap() < 20));

    // A new step up at the newest runs fails CI, naming it.
    for i in 0..4 {
        run(dir.path(), "sim://?latency=fixed:14ms", &format!("c{i}"));
    }
    let o = loadcell(dir.path(), &["trend", "--fail-on-change"]);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("CHANGE FAILED") && e.contains("latency_p50"),
        "{e}"
    );
    assert!(e.contains("commit c0") || e.contains("commit c1"), "{e}");
}

#[test]
fn sixteen_runs_of_one_configuration_show_no_change() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    // A 10 ms service time, so that the machine's own drift stays a small
    // part of what is measured. At 1 ms it was not: the wake-up latency of
    // a shared 2-core machine moves by tens of microseconds from one second
    // to the next, and CI runs found p90 steps of 1.7% and 4.4% down and
    // then 2.9% up (31 µs, with the client's CPU per operation 20% higher
    // from the same run), each a true change in what was measured, not in
    // the configuration. At 10 ms the same drift is under 0.5%.
    for i in 0..16 {
        run(dir.path(), "sim://?latency=fixed:10ms", &format!("a{i}"));
    }
    let (code, t) = trend(dir.path(), &["--fail-on-change"]);
    assert_eq!(code, Some(0));
    let s = &t["series"][0];
    assert_eq!(s["runs"].as_array().unwrap().len(), 16);
    // A quiet series may still rightly find a step of a few tenths of a
    // percent, and the client's own CPU per operation, which the machine's
    // other load moves, is shown but fails no gate. None that a regression
    // gate fails on: exit 0 above, and, at any run, no change for the
    // worse of 2% (the default --min-change) or more in a metric that
    // fails CI.
    use loadcell_report::trend::{fails_ci, CI_MIN_CHANGE};
    for c in s["change_points"].as_array().unwrap() {
        assert!(
            c["regression"] == false
                || !fails_ci(c["metric"].as_str().unwrap())
                || f(c, "/change").abs() < CI_MIN_CHANGE,
            "{s}"
        );
    }
    // No run is remembered twice when the directory is imported again.
    let o = loadcell(dir.path(), &["history", "import", "results"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("0 runs from 16 files recorded"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn redis_told_to_fsync_every_write_is_a_change_and_ten_unchanged_runs_are_not() {
    let _alone = alone();
    let server = loadcell_testkit::redis().expect("Redis starts");
    let dir = tempfile::tempdir().unwrap();
    // Open loop, well below what either configuration holds: closed loop,
    // one worker thread outruns nothing but itself, and its runs are
    // rightly flagged client_saturated and left out.
    let writes = ["--ratio", "1:0", "--rate", "1000"];
    for i in 0..10 {
        run_with(dir.path(), server.url(), &format!("a{i}"), &writes);
    }
    let (code, t) = trend(dir.path(), &["--fail-on-change"]);
    assert_eq!(t["series"][0]["runs"].as_array().unwrap().len(), 10);
    // Nothing got worse. Changes for the better may show: the server's
    // memory grows with the keys written, and a shared machine drifts (a
    // CI run's first four runs had p999s of 1.5-3.3 ms, the rest 0.4 ms,
    // over 500 operations each), which the sixteen-run test above also
    // lets pass as drift, not a regression.
    let moved: Vec<&Value> = t["series"][0]["change_points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["regression"] == true)
        .collect();
    assert!(moved.is_empty(), "nothing changed: {}", t["series"][0]);
    assert_eq!(code, Some(0));

    for set in [["appendonly", "yes"], ["appendfsync", "always"]] {
        let reply = loadcell_testkit::redis_cli(server.port, &["CONFIG", "SET", set[0], set[1]]);
        assert_eq!(reply.unwrap().trim(), "OK");
    }
    for i in 0..10 {
        run_with(dir.path(), server.url(), &format!("b{i}"), &writes);
    }
    let (_, t) = trend(dir.path(), &[]);
    assert_eq!(t["series"].as_array().unwrap().len(), 1, "one series: {t}");
    let runs = t["series"][0]["runs"].as_array().unwrap();
    // Every run is trusted, but a run fsyncing each write on a shared
    // disk may truly fall short of its rate in one stall (a CI run's 18th
    // did, at 2,000/s): that flag is the server's, and the run is left
    // out as it should be.
    let flags: Vec<&Value> = runs.iter().map(|r| &r["flags"]).collect();
    for (i, f) in flags.iter().enumerate() {
        let f = f.as_array().unwrap();
        assert!(
            f.is_empty() || (i >= 10 && f.iter().all(|f| f == "rate_not_reached")),
            "every run is trusted: {flags:?}"
        );
    }
    let found = changes(&t, "latency_p50");
    let c = found
        .iter()
        .find(|c| (9..=11).contains(&c["at"].as_u64().unwrap()))
        .unwrap_or_else(|| panic!("no latency_p50 change at run 10: {}", t["series"][0]));
    assert_eq!(c["regression"], true, "{c}");
    assert!(f(c, "/change") > 0.2, "{c}");

    // The series as CSV, for another change-point tool.
    let o = ok(loadcell(dir.path(), &["trend", "--csv", "-"]));
    let csv = stdout(&o);
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("run,started_at,commit,flags,throughput,latency_p50,"));
    assert_eq!(lines.count(), 20);
}

#[test]
fn a_suite_with_history_fails_the_step_whose_series_just_regressed() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("nightly.toml"),
        r#"
[vars]
latency = "10ms"

[targets.sim]
url = "sim://?latency=fixed:${latency}"

[[step]]
name = "steady"
command = "run"
workload = "kv"
target = "sim"
options = { time = "500ms", clients = 4, workers = 1 }
"#,
    )
    .unwrap();
    let night = |n: usize, latency: &str| {
        let var = format!("latency={latency}");
        let out = format!("night-{n}");
        loadcell(
            dir.path(),
            &[
                "suite",
                "run",
                "--history",
                "nightly.toml",
                "--var",
                &var,
                "--out",
                &out,
            ],
        )
    };
    // The simulated server's latency is fixed, so its p50 does not move;
    // its tail may, with what else this machine runs, and that would be a
    // change too: only the p50 is held to "no change" here.
    for n in 0..10 {
        let o = night(n, "10ms");
        assert!(
            matches!(o.status.code(), Some(0 | 3)) && !stdout(&o).contains("latency_p50"),
            "{}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    let record = read_json(&dir.path().join("night-9/suite.json"));
    let gate = &record["steps"][0]["gates"][0];
    assert_eq!(gate["gate"], "no change for the worse in the run history");
    assert!(
        !gate["measured"].as_str().unwrap().contains("latency_p50"),
        "{gate}"
    );

    // The detector calls a change once three runs follow it.
    let mut last = None;
    for n in 10..13 {
        last = Some(night(n, "14ms"));
    }
    let o = last.unwrap();
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("GATE FAILED"), "{}", stdout(&o));
    let record = read_json(&dir.path().join("night-12/suite.json"));
    let gate = &record["steps"][0]["gates"][0];
    assert_eq!(gate["passed"], false, "{gate}");
    let measured = gate["measured"].as_str().unwrap();
    assert!(
        measured.contains("latency_p50") && measured.contains("from run 10"),
        "{measured}"
    );
}

#[test]
fn git_commit_labels_the_run_with_the_checkouts_head_or_refuses_before_load() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "kv",
        "--target",
        "sim://",
        "--time",
        "200ms",
        "--git-commit",
    ];
    let o = loadcell(dir.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no git checkout"), "{}", stderr(&o));
    assert!(!dir.path().join("results").exists(), "nothing ran");

    let git = |a: &[&str]| {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(a)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "git {a:?}: {}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "x"]);
    let head = git(&["rev-parse", "HEAD"]);
    ok(loadcell(dir.path(), &args));
    let (_, t) = trend(dir.path(), &[]);
    assert_eq!(t["series"][0]["runs"][0]["commit"], head.trim());
}

#[test]
fn a_dead_history_server_costs_a_warning_never_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let dead = format!(
        "postgres://bench:hunter2@127.0.0.1:{}/history",
        loadcell_testkit::closed_port()
    );
    let o = loadcell(
        dir.path(),
        &[
            "run",
            "kv",
            "--target",
            "sim://",
            "--time",
            "200ms",
            "--history",
            &dead,
            "--out",
            "r.json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.path().join("r.json").is_file(), "the result is written");
    let e = stderr(&o);
    assert!(
        e.contains("warning: not recorded in the run history"),
        "{e}"
    );
    assert!(!e.contains("hunter2"), "{e}");
}
