//! `--threshold` gates end to end on the built-in simulated server: a run
//! and a sweep that pass exit 0, one that fails exits 3 and says which gate
//! with the value measured, and a bad gate is one line before any load.

mod common;

use common::*;
use serde_json::Value;

/// A fixed 2 ms server: its p99 is 2 ms and a bit, never under 1 ms.
const TARGET: &str = "sim://?latency=fixed:2ms";

fn run(dir: &std::path::Path, gates: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run", "kv", "--target", TARGET, "--time", "1s", "--warmup", "0s", "--out", "r.json",
    ];
    for g in gates {
        args.extend_from_slice(&["--threshold", g]);
    }
    loadcell(dir, &args)
}

#[test]
fn a_run_that_passes_its_gates_exits_0_and_one_that_fails_exits_3_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        dir.path(),
        &["p99 <= 500ms", "error_rate < 1%", "ops_per_sec >= 1"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("Gates: 3 of 3 passed"),
        "{}",
        stdout(&o)
    );
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    assert_eq!(r["gates"].as_array().unwrap().len(), 3);
    assert_eq!(r["gates"][0]["passed"], Value::Bool(true));

    let o = run(dir.path(), &["p99 <= 1ms", "ops_per_sec >= 1"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("Gates: 1 of 2 passed"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("GATE FAILED: p99 <= 1ms: measured "))
        .unwrap_or_else(|| panic!("{text}"));
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    let p99 = f(&r, "/summary/latency_ms/p99");
    assert!(p99 >= 2.0, "{p99}");
    assert_eq!(f(&r, "/gates/0/value"), p99);
    assert!(line.ends_with(&format!("{p99:.3} ms")), "{line} vs {p99}");
}

#[test]
fn a_bad_gate_is_one_line_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    for (gate, says) in [
        ("p99 < 2", "needs a unit"),
        ("p97 <= 2ms", "unknown measure 'p97'"),
        ("knee >= 8", "judged on a sweep or findmax"),
    ] {
        let o = run(dir.path(), &[gate]);
        assert_ne!(o.status.code(), Some(0), "{gate}");
        let e = stderr(&o);
        assert!(e.contains(says), "{gate}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{gate}: {e}");
        assert!(!dir.path().join("r.json").exists(), "{gate}: no run");
    }
}

#[test]
fn a_sweep_judges_its_knee_and_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = |gates: &[&str]| {
        let mut args = vec![
            "sweep",
            "kv",
            "--target",
            TARGET,
            "--clients",
            "1,2,4",
            "--time",
            "1s",
            "--warmup",
            "0s",
            "--out",
            "s.json",
        ];
        for g in gates {
            args.extend_from_slice(&["--threshold", g]);
        }
        loadcell(dir.path(), &args)
    };
    // Whether or not the sweep finds a knee, it is at least the first
    // value and below 1000 (no knee: it scaled up to the last, 4).
    let o = sweep(&["p99 <= 5s", "knee >= 1"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let s = read_json(&dir.path().join("s.json"));
    assert_eq!(s["gates"][0]["measured"], "all 3 runs", "{:#}", s["gates"]);
    assert_eq!(
        s["gates"][1]["passed"],
        Value::Bool(true),
        "{:#}",
        s["gates"]
    );

    let o = sweep(&["knee >= 1000"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("GATE FAILED: knee >= 1000: measured "),
        "{}",
        stdout(&o)
    );

    let o = sweep(&["p99 <= 1ms"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("GATE FAILED: p99 <= 1ms at clients = 1, run 1: measured"),
        "{text}"
    );
    let s = read_json(&dir.path().join("s.json"));
    assert_eq!(s["gates"].as_array().unwrap().len(), 3, "{:#}", s["gates"]);

    let o = loadcell(
        dir.path(),
        &[
            "sweep",
            "kv",
            "--target",
            TARGET,
            "--clients",
            "1,2",
            "--threshold",
            "rate >= 10k",
        ],
    );
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("'rate' is a findmax's answer"),
        "{}",
        stderr(&o)
    );
}
