//! With `--json`, stdout is one JSON document and nothing else, whatever
//! the command prepared, loaded or skipped on the way: progress and
//! diagnostics go to stderr, and no progress bar is drawn there when it is
//! not a terminal. Every command that has `--json` is checked (the first
//! test holds the list to `loadcell --help`), with `--prepare` on SQLite,
//! Redis and memcached, and the embedded SQLite default in an empty
//! directory, which prepares itself.

mod common;

use std::path::Path;
use std::process::Output;

use common::*;
use serde_json::Value;

/// The whole of stdout as one JSON document: `serde_json::from_str` on all
/// of it, so a line printed before or after the document fails.
fn one_document(o: &Output) -> Value {
    let out = stdout(o);
    serde_json::from_str(&out).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{out}\n--- stderr:\n{}",
            stderr(o)
        )
    })
}

/// Runs `args` in `dir`, which must succeed with one JSON document on
/// stdout, and no progress bar on stderr (a pipe here, not a terminal).
fn json(dir: &Path, args: &[&str]) -> (Value, String) {
    let o = ok(loadcell(dir, args));
    let doc = one_document(&o);
    let err = stderr(&o);
    assert!(
        !err.contains('\r') && !err.contains('\u{1b}') && !err.contains(" rows ("),
        "a progress bar was drawn on a stderr that is not a terminal: {err:?}"
    );
    (doc, err)
}

/// The commands whose help offers `--json`.
fn commands_with_json() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let help = stdout(&ok(loadcell(dir.path(), &["--help"])));
    let commands: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect();
    assert!(commands.len() >= 10, "{help}");
    commands
        .into_iter()
        .filter(|c| {
            let help = stdout(&ok(loadcell(dir.path(), &[c, "--help"])));
            help.contains("--json")
        })
        .collect()
}

#[test]
fn every_command_with_json_is_tested_here() {
    assert_eq!(
        commands_with_json(),
        ["run", "sweep", "findmax", "compare", "watch", "plan", "advise", "trend"],
        "a command gained or lost --json: test that its stdout is one JSON document"
    );
}

/// `watch --json` of one unsharded run on the embedded default target.
#[test]
fn watch_of_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let (watching, watch) = watcher(dir.path(), &["--json"]);
    json(
        dir.path(),
        &[
            "run",
            "kv",
            "--target",
            "sim://",
            "--time",
            "1s",
            "--warmup",
            "0s",
            "--watch",
            &watch,
            "--no-history",
            "--json",
        ],
    );
    let watched = output_within(watching);
    assert!(watched.status.success(), "{}", stderr(&watched));
    let doc = one_document(&watched);
    assert_eq!(doc["shards"][0]["state"], "ended", "{doc}");
    assert!(doc["ops"].as_u64().unwrap() > 0, "{doc}");
}

#[test]
fn trend_over_the_runs_remembered() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        ok(loadcell(
            dir.path(),
            &[
                "run",
                "kv",
                "--target",
                "sim://?latency=fixed:1ms",
                "--time",
                "300ms",
            ],
        ));
    }
    let (doc, _) = json(dir.path(), &["trend", "--json"]);
    let series = doc["series"].as_array().unwrap();
    assert_eq!(series.len(), 1, "{doc}");
    assert_eq!(series[0]["runs"].as_array().unwrap().len(), 2);
    assert!(series[0]["change_points"].as_array().unwrap().is_empty());
}

#[test]
fn run_on_the_embedded_default_in_an_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (r, err) = json(
        dir.path(),
        &["run", "oltp_read_write", "--time", "1s", "--json"],
    );
    assert_eq!(r["config"]["workload"], "oltp_read_write", "{r:#}");
    assert_valid_result(&r);
    // What the first use prepared is still told, on stderr.
    for said in [
        "Preparing the embedded default target",
        "Creating table 'sbtest1'",
        "Inserting 10000 records into 'sbtest1'",
    ] {
        assert!(err.contains(said), "{said}: {err}");
    }
}

#[test]
fn run_with_prepare_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("sqlite:{}", dir.path().join("t.sqlite").display());
    let oltp = [
        "run",
        "oltp_point_select",
        "--target",
        &target,
        "--tables",
        "2",
        "--table-size",
        "500",
        "--prepare",
        "--time",
        "500ms",
        "--json",
    ];
    let (_, err) = json(dir.path(), &oltp);
    assert!(err.contains("Creating table 'sbtest2'"), "{err}");
    // Again: prepare has nothing to do, and says so on stderr.
    let (_, err) = json(dir.path(), &oltp);
    assert!(err.contains("nothing to do"), "{err}");

    let (r, err) = json(
        dir.path(),
        &[
            "run",
            "ycsb-a",
            "--target",
            &target,
            "--record-count",
            "300",
            "--prepare",
            "--time",
            "500ms",
            "--json",
        ],
    );
    assert_eq!(r["config"]["workload"], "ycsb-a", "{r:#}");
    assert!(
        err.contains("Inserting 300 records into 'usertable'"),
        "{err}"
    );
}

/// `run WORKLOAD --prepare --json` on a key-value server, for the YCSB
/// and memtier-style workloads.
fn run_with_prepare_on_kv(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    for (workload, sizing) in [("ycsb-a", "--record-count"), ("kv", "--key-maximum")] {
        let (r, err) = json(
            dir.path(),
            &[
                "run",
                workload,
                "--target",
                url,
                sizing,
                "300",
                "--prepare",
                "--time",
                "500ms",
                "--json",
            ],
        );
        assert_eq!(r["config"]["workload"], workload, "{r:#}");
        assert_valid_result(&r);
        assert!(err.contains("Running "), "{err}");
    }
}

#[test]
fn run_with_prepare_on_redis() {
    let server = loadcell_testkit::redis().expect("Redis starts");
    run_with_prepare_on_kv(server.url());
}

/// `advise --json` without a result: the server's rules that need only
/// its settings are checked, the others listed as not checked, all in one
/// document on stdout.
#[test]
fn advise_on_redis() {
    let server = loadcell_testkit::redis().expect("Redis starts");
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = json(dir.path(), &["advise", "--target", server.url(), "--json"]);
    assert!(
        r["target"].as_str().unwrap().starts_with("redis://"),
        "{r:#}"
    );
    let advice = &r["advice"];
    assert!(advice["findings"].is_array(), "{r:#}");
    let checked = advice["passed"].as_array().unwrap().len()
        + advice["findings"].as_array().unwrap().len()
        + advice["not_checked"].as_array().unwrap().len();
    assert_eq!(checked, 3, "maxclients, io-threads and persistence: {r:#}");
}

#[test]
fn run_with_prepare_on_memcached() {
    let server = loadcell_testkit::memcached().expect("memcached starts");
    run_with_prepare_on_kv(server.url());
}

#[test]
fn sweep_and_findmax_whose_steps_prepare() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("sqlite:{}", dir.path().join("s.sqlite").display());
    let (sweep, err) = json(
        dir.path(),
        &[
            "sweep",
            "oltp_point_select",
            "--target",
            &target,
            "--table-size",
            "500",
            "--prepare",
            "--threads",
            "1,2",
            "--time",
            "500ms",
            "--json",
        ],
    );
    assert_eq!(sweep["kind"], "sweep", "{sweep:#}");
    assert!(err.contains("Creating table 'sbtest1'"), "{err}");

    let (findmax, err) = json(
        dir.path(),
        &[
            "findmax",
            "kv",
            "--target",
            "sim:?latency=fixed:1ms",
            "--key-maximum",
            "100",
            "--prepare",
            "--clients",
            "2",
            "--time",
            "500ms",
            "--sla",
            "p99<=100ms",
            "--start-rate",
            "200",
            "--max-probes",
            "2",
            "--json",
        ],
    );
    assert_eq!(findmax["kind"], "findmax", "{findmax:#}");
    assert!(err.contains("Loading keys"), "{err}");
}

#[test]
fn compare_and_plan() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for out in ["a.json", "b.json"] {
        ok(loadcell(
            d,
            &[
                "run",
                "kv",
                "--target",
                "sim:?latency=fixed:1ms",
                "--clients",
                "2",
                "--time",
                "500ms",
                "--label",
                "instance=small",
                "--label",
                "nodes=1",
                "--out",
                out,
            ],
        ));
    }
    let (c, _) = json(d, &["compare", "a.json", "b.json", "--json"]);
    assert!(c["comparisons"].is_array(), "{c:#}");

    std::fs::write(
        d.join("prices.toml"),
        "[[instance]]\nname = \"small\"\nvcpus = 2\nmemory_gib = 4\nusd_per_hour = 0.1\n",
    )
    .unwrap();
    let plan = [
        "plan",
        "--prices",
        "prices.toml",
        "--target-throughput",
        "5000",
        "--scaling",
        "linear",
        "a.json",
        "--json",
    ];
    let (p, _) = json(d, &plan);
    assert_eq!(p["unit"], "ops/s", "{p:#}");
    // The HTML report beside it goes to its file...
    let mut to_file = plan.to_vec();
    to_file.extend(["--html", "plan.html"]);
    let (_, err) = json(d, &to_file);
    assert!(err.contains("Wrote plan.html"), "{err}");
    assert!(d.join("plan.html").exists());
    // ...and not to stdout with the JSON: refused before anything is
    // printed.
    let mut to_stdout = plan.to_vec();
    to_stdout.extend(["--html", "-"]);
    let o = loadcell(d, &to_stdout);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("give --html a file name"),
        "{}",
        stderr(&o)
    );
}
