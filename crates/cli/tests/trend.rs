//! The run history and `trend` end to end on the built-in simulated
//! server, whose latency the target sets: every run is remembered, a step
//! in latency is found at its first run with its commit, a saturated
//! client's run is flagged and left out, `--fail-on-change` exits 3 on a
//! regression among the newest runs, and runs of one configuration show
//! no change.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

fn run(dir: &Path, target: &str, commit: &str) {
    let label = format!("commit={commit}");
    ok(loadcell(
        dir,
        &[
            "run",
            "kv",
            "--target",
            target,
            "--time",
            "500ms",
            "--clients",
            "4",
            "--workers",
            "1",
            "--label",
            &label,
        ],
    ));
}

fn trend(dir: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec!["trend", "--json"];
    args.extend_from_slice(extra);
    let o = loadcell(dir, &args);
    (o.status.code(), serde_json::from_slice(&o.stdout).unwrap())
}

#[test]
fn a_latency_step_is_found_at_its_first_run_and_fails_ci_only_while_it_is_new() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..10 {
        run(dir.path(), "sim://?latency=fixed:1ms", &format!("a{i}"));
    }
    for i in 0..10 {
        run(dir.path(), "sim://?latency=fixed:1100us", &format!("b{i}"));
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
        run(dir.path(), "sim://?latency=fixed:1400us", &format!("c{i}"));
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
    let dir = tempfile::tempdir().unwrap();
    for i in 0..16 {
        run(dir.path(), "sim://?latency=fixed:1ms", &format!("a{i}"));
    }
    let (code, t) = trend(dir.path(), &["--fail-on-change"]);
    assert_eq!(code, Some(0));
    let s = &t["series"][0];
    assert_eq!(s["runs"].as_array().unwrap().len(), 16);
    assert_eq!(s["change_points"].as_array().unwrap().len(), 0, "{s}");
    // No run is remembered twice when the directory is imported again.
    let o = loadcell(dir.path(), &["history", "import", "results"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("0 runs from 16 files recorded"),
        "{}",
        stdout(&o)
    );
}
