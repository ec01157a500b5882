//! findmax's answer with its 95% interval, against a server whose edge is
//! known (the in-process `sim`) and against a real Redis twice. Each test
//! holds [`MACHINE`]: a probe's verdict near the edge turns on a few
//! milliseconds of p99, and the other test's load would move it.

mod common;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use common::*;
use serde_json::Value;

static MACHINE: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `loadcell findmax kv` and returns the findmax file.
fn findmax(dir: &Path, out: &str, args: &[&str]) -> Value {
    let mut argv = vec!["findmax", "kv"];
    argv.extend(args);
    argv.extend(["--out", out]);
    let o = ok(loadcell(dir, &argv));
    eprintln!("{}", stdout(&o));
    read_json(&dir.join(out))
}

fn interval(fm: &Value) -> (f64, f64) {
    (f(fm, "/analysis/ci95/0"), f(fm, "/analysis/ci95/1"))
}

/// Four slots of 2 ms serve 2,000 requests/s at most; under Poisson
/// arrivals p99 passes 20 ms somewhat below that (about 1,880/s for an
/// M/D/4 queue in steady state; a 2 s probe starts empty, so a little
/// higher).
#[test]
fn the_interval_brackets_a_known_capacity_and_is_narrow() {
    let _machine = alone();
    let dir = tempfile::tempdir().unwrap();
    let fm = findmax(
        dir.path(),
        "sim.json",
        &[
            "--target",
            "sim://?latency=fixed:2ms&concurrency=4",
            "--threads",
            "1",
            "--clients",
            "64",
            "--time",
            "2s",
            "--warmup",
            "500ms",
            "--sla",
            "p99<=20ms",
            // A busy machine's stalls blur the edge: the default 20
            // probes then end with the interval still 13% wide (seen in
            // CI), so this test gives the search room to narrow it.
            "--max-probes",
            "40",
        ],
    );
    let (low, high) = interval(&fm);
    let best = f(&fm, "/analysis/best_rate");
    assert!(
        (1800.0..=2050.0).contains(&low) && (1800.0..=2050.0).contains(&high),
        "interval {low}..{high}"
    );
    assert!((high - low) / best <= 0.10, "{low}..{high} around {best}");
    assert!((1700.0..=2050.0).contains(&best), "best {best}");
    // Narrow enough for the test either way; `precise` unless a noisy
    // edge used up the probes first.
    assert!(
        ["precise", "out_of_probes"].contains(&s(&fm, "/analysis/ended")),
        "{}",
        fm["analysis"]
    );
    // Every probe says why it passed or failed, and the answer's rate was
    // probed three times over.
    let points = every_probe_recorded(&fm);
    for p in points {
        let verdicts = p["verdicts"].as_array().unwrap();
        assert_eq!(verdicts.len(), p["runs"].as_array().unwrap().len());
        for v in verdicts {
            let v = v.as_str().unwrap();
            assert!(
                v.starts_with("pass: achieved")
                    || v.starts_with("fail: latency bound broken: p99")
                    || v.starts_with("fail: rate not achieved"),
                "{v}"
            );
        }
    }
    let answer = points.iter().find(|p| f(p, "/value") == best).unwrap();
    assert!(answer["runs"].as_array().unwrap().len() >= 3);
    let findings: Vec<&str> = fm["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        findings[0].contains("the SLA's edge lies in"),
        "{findings:?}"
    );
    assert!(findings[1].contains(" ± "), "{findings:?}");
}

/// The same search twice against a real Redis whose every command takes
/// half a millisecond (`DEBUG SLEEP`: one thread, so about 1,800/s at
/// most, the server's bound rather than this 2-core machine's noise): the
/// two intervals lie within the asked precision of each other.
#[test]
fn two_searches_on_redis_give_overlapping_intervals() {
    let _machine = alone();
    let dir = tempfile::tempdir().unwrap();
    let server = loadcell_testkit::redis().expect("Redis starts");
    let args = [
        "--target",
        server.url(),
        "--command",
        "DEBUG SLEEP 0.0005",
        "--threads",
        "1",
        "--clients",
        "16",
        "--time",
        "1s",
        "--warmup",
        "250ms",
        "--sla",
        "p99<=20ms",
        "--start-rate",
        "500",
        "--precision",
        "10%",
        "--max-probes",
        "16",
    ];
    let first = findmax(dir.path(), "first.json", &args);
    let second = findmax(dir.path(), "second.json", &args);
    // Each interval covers its own search's verdicts; the server between
    // the two searches drifts too (a shared 2-core machine moved the edge
    // by 4% between runs in CI), so the two agree to within the precision
    // asked for rather than always overlapping.
    let (a, b) = (interval(&first), interval(&second));
    let gap = (a.0.max(b.0) - a.1.min(b.1)).max(0.0);
    assert!(
        gap <= 0.10 * a.1.min(b.1),
        "{a:?} and {b:?} are more than the 10% precision apart"
    );
    for fm in [&first, &second] {
        assert!((500.0..2200.0).contains(&f(fm, "/analysis/best_rate")));
    }
}
