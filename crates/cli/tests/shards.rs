//! Shards (issue 21) end to end: N loadcell processes, each in a network
//! namespace of its own with its own address, against one real
//! redis-server on the host's address, started together with `--start-at`, their
//! results merged by `loadcell merge`; and the merge's refusals.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::*;
use loadcell_record::hist::{self, LatencySummary};
use loadcell_testkit::ClientNamespaces;
use serde_json::Value;

const SHARDS: usize = 3;
/// Keys 1..=KEYS, split over the whole run's 3 sessions: one per shard.
const KEYS: usize = 90;

/// The shards' namespaces, and a redis-server in the test's own,
/// listening on the address they reach it at; stopped by PID.
struct Lab {
    namespaces: ClientNamespaces,
    server: Option<Child>,
    port: String,
}

impl Lab {
    /// Makes the namespaces and starts Redis; the reason when it cannot
    /// (not root, no `ip netns`).
    fn start() -> Result<Lab, String> {
        let namespaces = ClientNamespaces::new("lcsh", 203, SHARDS)?;
        let port = loadcell_testkit::free_port().to_string();
        let server = Command::new("redis-server")
            .args(["--port", &port, "--bind", "127.0.0.1", &namespaces.host()])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server: {e}"))?;
        let lab = Lab {
            namespaces,
            server: Some(server),
            port,
        };
        let until = Instant::now() + Duration::from_secs(10);
        while lab.cli(&["PING"]).trim() != "PONG" {
            if Instant::now() > until {
                return Err("redis-server did not answer".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(lab)
    }

    /// `redis-cli`'s stdout.
    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self) -> BTreeSet<String> {
        self.cli(&["--scan", "--pattern", "k:*"])
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

/// Shard i's `run` from inside its namespace, to the server across the
/// bridge: SETs over keys 1..=KEYS, each session over its own range.
fn shard(lab: &Lab, i: usize, dir: &Path, extra: &[&str]) -> Child {
    let target = format!("redis://{}:{}", lab.namespaces.host(), lab.port);
    let shard = format!("{i}/{SHARDS}");
    let out = dir.join(format!("shard-{i}.json"));
    let keys = KEYS.to_string();
    lab.namespaces
        .command(i, bin())
        .args(["run", "kv"])
        .args(["--target", &target, "--threads", "3", "--rate", "600"])
        .args([
            "--arrival",
            "uniform",
            "--ratio",
            "1:0",
            "--key-pattern",
            "P:P",
        ])
        .args([
            "--key-prefix",
            "k:",
            "--key-minimum",
            "1",
            "--key-maximum",
            &keys,
        ])
        .args(["--report-interval", "500ms", "--shard", &shard])
        .args(extra)
        .arg("--out")
        .arg(&out)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadcell starts")
}

fn finish(child: Child) {
    let out = output_within(child);
    assert!(
        out.status.success(),
        "a shard failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn summary(v: &Value) -> LatencySummary {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn shards_in_their_own_namespaces_send_the_whole_run_and_merge_exactly() {
    let lab = match Lab::start() {
        Ok(lab) => lab,
        Err(why) => {
            eprintln!("skipped: network namespaces cannot be made here ({why})");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let start_at =
        humantime::format_rfc3339_millis(SystemTime::now() + Duration::from_secs(5)).to_string();
    let children: Vec<Child> = (0..SHARDS)
        .map(|i| {
            shard(
                &lab,
                i,
                dir.path(),
                &["--time", "3s", "--start-at", &start_at],
            )
        })
        .collect();
    children.into_iter().for_each(finish);

    let shards: Vec<Value> = (0..SHARDS)
        .map(|i| read_json(&dir.path().join(format!("shard-{i}.json"))))
        .collect();
    for (i, r) in shards.iter().enumerate() {
        assert_valid_result(r);
        assert_eq!(
            r["config"]["shard"],
            serde_json::json!({"index": i, "count": SHARDS})
        );
        assert_eq!(s(r, "/config/start_at"), start_at);
        assert_eq!(f(r, "/config/rate"), 200.0);
        assert_eq!(u(r, "/summary/errors"), 0, "{r}");
    }
    // Together they wrote every key of the key space.
    assert_eq!(lab.keys().len(), KEYS);

    let merged_path = dir.path().join("merged.json");
    let mut args = vec!["merge"];
    let files: Vec<String> = (0..SHARDS).map(|i| format!("shard-{i}.json")).collect();
    args.extend(files.iter().map(String::as_str));
    args.extend(["--out", "merged.json"]);
    ok(loadcell(dir.path(), &args));
    let merged = read_json(&merged_path);
    assert_valid_result(&merged);

    // Counts are the shards' summed.
    for field in ["/summary/events", "/summary/ops", "/ops/set/count"] {
        let sum: u64 = shards.iter().map(|r| u(r, field)).sum();
        assert_eq!(u(&merged, field), sum, "{field}");
    }
    // Percentiles are those of the shards' histograms added.
    let mut response = hist::new_histogram();
    for r in &shards {
        response
            .add(hist::decode(s(r, "/histograms/response")).unwrap())
            .unwrap();
    }
    let (got, want) = (
        summary(&merged["summary"]["latency_ms"]),
        LatencySummary::of(&response),
    );
    // The mean, through JSON, to its last digit or so.
    assert!((got.mean - want.mean).abs() < 1e-9);
    assert_eq!(
        LatencySummary { mean: 0.0, ..got },
        LatencySummary { mean: 0.0, ..want }
    );
    let interval_events: u64 = merged["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| u(i, "/events"))
        .sum();
    assert_eq!(interval_events, u(&merged, "/summary/events"));
    // Beside it, the shards' interval logs added interval by interval.
    assert_eq!(s(&merged, "/hdr_log"), "merged.hlog");
    let log = std::fs::read(dir.path().join("merged.hlog")).unwrap();
    let logged = loadcell_record::hdrlog::rebuild(&log, "merged.hlog").unwrap();
    assert_eq!(logged.summary.events, u(&merged, "/summary/events"));
    assert_eq!(
        logged.intervals.len(),
        merged["intervals"].as_array().unwrap().len()
    );

    // --rate 600 split three ways is 600 again: the schedule, and what
    // was sent (3 s of it), within a few events.
    assert!((f(&merged, "/config/rate") - 600.0).abs() < 1e-9);
    assert!((f(&merged, "/summary/schedule/target_rate") - 600.0).abs() < 1e-9);
    let events = u(&merged, "/summary/events");
    assert!(events.abs_diff(1800) <= 6, "{events} events");
    let m = &merged["merge"];
    assert_eq!(m["aligned"], true, "{m}");
    assert_eq!(m["shards"].as_array().unwrap().len(), SHARDS);
    assert_eq!(u(&merged, "/config/threads"), 3);
    // Each shard keeps its own client ceiling; the merge keeps the worst.
    let worst = m["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| f(s, "/client/utilisation"))
        .fold(0.0, f64::max);
    assert_eq!(f(&merged, "/client/utilisation"), worst);

    // report reads the shards as one run.
    let report = ok(loadcell(
        dir.path(),
        &["report", &files[0], &files[1], &files[2]],
    ));
    assert!(
        stdout(&report).contains("merged from 3 shards"),
        "{}",
        stdout(&report)
    );

    // Each shard alone (writing over its result) writes its own keys: disjoint, and all of them
    // together.
    let mut union = BTreeSet::new();
    for i in 0..SHARDS {
        lab.cli(&["FLUSHALL"]);
        finish(shard(&lab, i, dir.path(), &["--time", "1s", "--seed", "7"]));
        let keys = lab.keys();
        assert!(!keys.is_empty());
        assert!(union.is_disjoint(&keys), "shard {i} wrote another's keys");
        union.extend(keys);
    }
    assert_eq!(union.len(), KEYS);
}

/// A shard result made from the report fixture.
fn write_shard(dir: &Path, name: &str, index: usize, count: usize, edit: impl Fn(&mut Value)) {
    let mut v = serde_json::to_value(loadcell_report::fixture::run(4, 1000.0)).unwrap();
    v["config"]["shard"] = serde_json::json!({"index": index, "count": count});
    edit(&mut v);
    std::fs::write(dir.join(name), v.to_string()).unwrap();
}

#[test]
fn merges_of_what_is_not_one_run_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_shard(d, "a.json", 0, 2, |_| {});
    write_shard(d, "b.json", 1, 2, |_| {});
    write_shard(d, "dup.json", 0, 2, |_| {});
    write_shard(d, "other.json", 1, 2, |v| {
        v["config"]["workload_options"]["tables"] = serde_json::json!(8)
    });
    write_shard(d, "later.json", 1, 2, |v| {
        v["started_at"] = serde_json::json!("2030-01-01T00:00:00Z")
    });
    for (files, why) in [
        (
            &["a.json", "other.json"][..],
            "config.workload_options.tables differs",
        ),
        (&["a.json", "dup.json", "b.json"][..], "are both shard 0/2"),
        (&["a.json"][..], "shard(s) 1 of 2 missing"),
        (
            &["a.json", "later.json"][..],
            "did not measure at the same time",
        ),
    ] {
        let mut args = vec!["merge"];
        args.extend(files);
        args.extend(["--out", "m.json"]);
        let out = loadcell(d, &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{files:?}: {err}");
        assert!(
            err.contains(why) && err.trim().lines().count() == 1,
            "{err}"
        );
    }
    // A missing shard is merged with --allow-partial, and said to be.
    ok(loadcell(
        d,
        &["merge", "a.json", "--allow-partial", "--out", "m.json"],
    ));
    let m = read_json(&d.join("m.json"));
    assert_valid_result(&m);
    assert_eq!(m["merge"]["missing"], serde_json::json!([1]));
    assert_eq!(s(&m, "/status"), "partial");
    // Two whole shards: the fixture's counts doubled.
    ok(loadcell(
        d,
        &["merge", "b.json", "a.json", "--out", "both.json"],
    ));
    let both = read_json(&d.join("both.json"));
    let one = read_json(&d.join("a.json"));
    assert_eq!(u(&both, "/summary/events"), 2 * u(&one, "/summary/events"));
    assert_eq!(both["merge"]["shards"][0]["index"], 0);

    // Coarsened intervals (two report intervals each, as a long run keeps
    // them) are added into the same coarse slots, ending where they did.
    let coarse = |v: &mut Value| {
        for (k, i) in v["intervals"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            i["t_s"] = serde_json::json!(2.0 * (k + 1) as f64);
            i["duration_s"] = serde_json::json!(2.0);
        }
        v["summary"]["duration_s"] =
            serde_json::json!(2.0 * v["intervals"].as_array().unwrap().len() as f64);
    };
    write_shard(d, "c0.json", 0, 2, coarse);
    write_shard(d, "c1.json", 1, 2, coarse);
    ok(loadcell(
        d,
        &["merge", "c0.json", "c1.json", "--out", "c.json"],
    ));
    let (c, c0) = (read_json(&d.join("c.json")), read_json(&d.join("c0.json")));
    let ends = |v: &Value| -> Vec<(f64, u64)> {
        v["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (f(i, "/t_s"), u(i, "/events")))
            .collect()
    };
    let doubled: Vec<(f64, u64)> = ends(&c0).into_iter().map(|(t, n)| (t, 2 * n)).collect();
    assert_eq!(ends(&c), doubled);
}

/// S3 in small: two client namespaces run the same `sweep --shard I/2`
/// (threads 4 and 16, one repeat) started together with `--start-at`,
/// once straight at a MariaDB and once through ShardingSphere-Proxy over
/// two; each pair of sweeps is merged, and `compare` sets them side by
/// side. Inserts (`oltp_insert --auto-inc=off`) prove the data arrived:
/// every row counted, each on one backend only.
#[test]
fn a_sharded_sweep_through_a_sharding_proxy_against_direct() {
    let namespaces = match ClientNamespaces::new("lcpx", 204, 2) {
        Ok(n) => n,
        Err(why) => {
            eprintln!("skipped: network namespaces cannot be made here ({why})");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let direct = loadcell_testkit::mariadb_on_every_address().expect("MariaDB starts");
    let backends = [
        loadcell_testkit::mariadb().expect("MariaDB starts"),
        loadcell_testkit::mariadb().expect("MariaDB starts"),
    ];
    // The proxy reads the backends' tables when it starts.
    for server in std::iter::once(&direct).chain(&backends) {
        ok(loadcell(
            dir.path(),
            &[
                "prepare",
                "oltp_insert",
                "--auto-inc=off",
                "--target",
                server.url(),
            ],
        ));
    }
    let proxy = loadcell_testkit::sharding_proxy(&[&backends[0], &backends[1]], "sbtest1", "id")
        .expect("ShardingSphere-Proxy starts");
    let host_url =
        |s: &loadcell_testkit::TestServer| s.url().replace("127.0.0.1", &namespaces.host());
    for (mode, server) in [("direct", &direct), ("proxy", &proxy)] {
        let start_at = humantime::format_rfc3339_millis(SystemTime::now() + Duration::from_secs(8))
            .to_string();
        let url = host_url(server);
        let pid = server.pid.to_string();
        let clients: Vec<Child> = (0..2)
            .map(|i| {
                namespaces
                    .command(i, bin())
                    .args(["sweep", "oltp_insert", "--auto-inc=off", "--target", &url])
                    .args(["--threads", "4,16", "--time", "2s", "--warmup", "500ms"])
                    .args(["--step-gap", "3s", "--start-at", &start_at])
                    .args(["--shard", &format!("{i}/2"), "--server-pid", &pid])
                    .args(["--label", &format!("mode={mode}"), "--results-dir", "steps"])
                    .arg("--out")
                    .arg(dir.path().join(format!("{mode}-{i}.json")))
                    .current_dir(dir.path())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("loadcell starts")
            })
            .collect();
        clients.into_iter().for_each(finish);
        let merged = format!("{mode}.json");
        ok(loadcell(
            dir.path(),
            &[
                "merge",
                &format!("{mode}-0.json"),
                &format!("{mode}-1.json"),
                "--out",
                &merged,
            ],
        ));
    }

    let shard_sweeps: Vec<Value> = ["proxy-0.json", "proxy-1.json"]
        .iter()
        .map(|f| read_json(&dir.path().join(f)))
        .collect();
    for (mode, rows) in [
        ("direct", vec![sql(&direct, "SELECT COUNT(*) FROM sbtest1")]),
        (
            "proxy",
            backends
                .iter()
                .map(|b| sql(b, "SELECT COUNT(*) FROM sbtest1"))
                .collect(),
        ),
    ] {
        let sweep = read_json(&dir.path().join(format!("{mode}.json")));
        assert_eq!(s(&sweep, "/parameter"), "threads");
        let points = sweep["points"].as_array().unwrap();
        assert_eq!(points.len(), 2, "{mode}: threads 4 and 16");
        let mut inserted = 0;
        for (k, point) in points.iter().enumerate() {
            let run = &point["runs"][0];
            // The merged step is both shards' runs added, at the whole run's threads.
            assert_eq!(u(run, "/config/threads"), [4, 16][k], "{mode}");
            assert_eq!(run["merge"]["shards"].as_array().unwrap().len(), 2);
            assert_eq!(u(run, "/summary/errors"), 0, "{mode}");
            let events = u(run, "/summary/events");
            assert!(events > 0, "{mode}");
            if mode == "proxy" {
                let shards: u64 = shard_sweeps
                    .iter()
                    .map(|s| u(&s["points"][k]["runs"][0], "/summary/events"))
                    .sum();
                assert_eq!(events, shards, "the merge adds the shards' events");
                // The proxy's CPU, sampled beside the load.
                let sampled = &run["merge"]["shards"][0]["resources"];
                assert_eq!(u(sampled, "/server_pid"), proxy.pid as u64);
                assert!(sampled["samples"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|s| s["server_cpu_pct"].as_f64().is_some_and(|c| c > 0.0)));
            }
            inserted += events;
        }
        // Every insert counted arrived (the warm-ups' inserted more, not
        // counted), none refused as a duplicate: the shards' ids never
        // collide.
        let rows: u64 = rows.iter().map(|r| r.parse::<u64>().unwrap()).sum();
        assert!(
            rows >= inserted,
            "{mode}: {rows} rows for {inserted} inserts"
        );
    }
    let ids = |b: &loadcell_testkit::TestServer| -> BTreeSet<String> {
        sql(b, "SELECT id FROM sbtest1")
            .lines()
            .map(str::to_string)
            .collect()
    };
    let (first, second) = (ids(&backends[0]), ids(&backends[1]));
    assert!(
        !first.is_empty() && !second.is_empty(),
        "the proxy used both"
    );
    assert!(first.is_disjoint(&second), "each row on one backend");

    let compared = ok(loadcell(
        dir.path(),
        &["compare", "direct.json", "proxy.json"],
    ));
    let text = stdout(&compared);
    assert!(
        text.contains("direct.json") && text.contains("proxy.json"),
        "{text}"
    );
}
