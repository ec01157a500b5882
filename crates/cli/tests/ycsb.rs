//! The record workloads (YCSB's core workloads and the S8 mixes) through
//! the binary: on SQLite every workload with exact operation counts, on
//! real MariaDB, PostgreSQL, memcached and Redis servers the storage each
//! one uses, scans where the driver has them, refusal where it has not,
//! and cleanup that leaves nothing of ours.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use common::*;
use loadcell_testkit::TestServer;
use serde_json::Value;

/// (workload, [read, update, insert, scan, read_modify_write] in percent).
const WORKLOADS: &[(&str, [u64; 5])] = &[
    ("ycsb-a", [50, 50, 0, 0, 0]),
    ("ycsb-b", [95, 5, 0, 0, 0]),
    ("ycsb-c", [100, 0, 0, 0, 0]),
    ("ycsb-d", [95, 0, 5, 0, 0]),
    ("ycsb-e", [0, 0, 5, 95, 0]),
    ("ycsb-f", [50, 0, 0, 0, 50]),
    ("mix-write", [0, 100, 0, 0, 0]),
    ("mix-50-50", [50, 50, 0, 0, 0]),
    ("mix-80-20", [80, 20, 0, 0, 0]),
    ("mix-95-5", [95, 5, 0, 0, 0]),
    ("mix-read", [100, 0, 0, 0, 0]),
];

const OP_NAMES: [&str; 5] = ["read", "update", "insert", "scan", "read_modify_write"];

fn mix_of(workload: &str) -> [u64; 5] {
    WORKLOADS
        .iter()
        .find(|(w, _)| *w == workload)
        .expect("a listed workload")
        .1
}

/// Operation counts by kind (0 for kinds that did not run).
fn op_counts(r: &Value) -> [u64; 5] {
    OP_NAMES.map(|name| {
        r.pointer(&format!("/ops/{name}/count"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    })
}

/// Runs `workload` with `extra` arguments and returns the result, checked
/// for a complete, error-free run of `events` events, one operation each.
fn run(dir: &Path, workload: &str, events: u64, extra: &[&str]) -> Value {
    let out = format!("{workload}-{}.json", rand_suffix());
    let n = events.to_string();
    let mut args = vec!["run", workload, "--events", &n, "--out", &out];
    args.extend(extra);
    ok(loadcell(dir, &args));
    let r = read_json(&dir.join(&out));
    assert_valid_result(&r);
    assert_eq!(s(&r, "/status"), "complete", "{workload}");
    assert_eq!(s(&r, "/config/workload"), workload);
    assert_eq!(u(&r, "/summary/events"), events, "{workload}");
    assert_eq!(
        u(&r, "/summary/ops"),
        events,
        "{workload}: one operation per event"
    );
    assert_eq!(u(&r, "/summary/errors"), 0, "{workload}");
    assert!(r["summary"]["txn_per_sec"].is_null(), "not transactional");
    r
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// With one session the mix is exact: `events` is a multiple of 100.
fn assert_exact_mix(r: &Value, workload: &str, events: u64) {
    let expected = mix_of(workload).map(|p| p * events / 100);
    assert_eq!(op_counts(r), expected, "{workload}");
}

/// With several sessions each keeps its own exact cycle, so the totals are
/// off by at most one per session and kind.
fn assert_close_mix(r: &Value, workload: &str, events: u64, sessions: u64) {
    let expected = mix_of(workload).map(|p| p * events / 100);
    let got = op_counts(r);
    for i in 0..5 {
        assert!(
            got[i].abs_diff(expected[i]) <= sessions,
            "{workload}: {} {} vs {} expected",
            OP_NAMES[i],
            got[i],
            expected[i]
        );
    }
}

#[test]
fn sqlite_every_workload_with_exact_mixes() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("sqlite:{}", dir.path().join("y.sqlite").display());
    let t = ["--target", target.as_str(), "--record-count", "500"];

    let mut args = vec!["prepare", "ycsb-a"];
    args.extend(t);
    let o = ok(loadcell(dir.path(), &args));
    assert!(
        stderr(&o).contains("Inserting 500 records into 'usertable'"),
        "{}",
        stderr(&o)
    );
    // Idempotent.
    let o = ok(loadcell(dir.path(), &args));
    assert!(stderr(&o).contains("nothing to do"), "{}", stderr(&o));

    for (workload, _) in WORKLOADS {
        let r = run(dir.path(), workload, 1000, &t);
        assert_exact_mix(&r, workload, 1000);
        let reads = u(&r, "/summary/queries/read");
        let writes = u(&r, "/summary/queries/write");
        let [read, update, insert, scan, rmw] = op_counts(&r);
        assert_eq!(reads, read + scan, "{workload}: read and scan are reads");
        assert_eq!(writes, update + insert + rmw, "{workload}");
        for (name, count) in OP_NAMES.iter().zip(op_counts(&r)) {
            if count > 0 {
                let category = s(&r, &format!("/ops/{name}/category"));
                let want = if matches!(*name, "read" | "scan") {
                    "read"
                } else {
                    "write"
                };
                assert_eq!(category, want, "{workload} {name}");
            }
        }
        let opts = &r["config"]["workload_options"];
        assert_eq!(opts["record_count"], 500);
        let mix = workload.starts_with("mix-");
        assert_eq!(opts["field_length"], if mix { 10 } else { 100 });
        assert_eq!(opts["write_all_fields"], mix);
        let distribution = match *workload {
            "ycsb-d" => "latest",
            w if w.starts_with("ycsb") => "zipfian",
            _ => "uniform",
        };
        assert_eq!(opts["request_distribution"], distribution);
    }

    // Inserts continue after earlier runs' inserts: no duplicate keys.
    let r = run(dir.path(), "ycsb-d", 2000, &t);
    assert_eq!(u(&r, "/ops/insert/count"), 100);
    assert_eq!(u(&r, "/ops/insert/errors"), 0);

    // Several sessions: totals still add up.
    let mut two = t.to_vec();
    two.extend(["--threads", "2", "--clients", "2"]);
    let r = run(dir.path(), "ycsb-b", 2000, &two);
    assert_close_mix(&r, "ycsb-b", 2000, 4);

    // Options: a distribution, scan lengths, hotspot.
    let mut opts = t.to_vec();
    opts.extend([
        "--request-distribution",
        "hotspot",
        "--hotspot-data-fraction",
        "0.1",
        "--max-scan-length",
        "5",
    ]);
    let r = run(dir.path(), "ycsb-e", 200, &opts);
    assert_eq!(
        r["config"]["workload_options"]["request_distribution"],
        "hotspot"
    );
    assert_eq!(r["config"]["workload_options"]["max_scan_length"], 5);

    // --operation-count is the event limit when --time and --events are
    // not given; its default is YCSB's 1000.
    let mut args = vec!["run", "ycsb-c", "--out", "oc.json"];
    args.extend(t);
    ok(loadcell(dir.path(), &args));
    assert_eq!(
        u(&read_json(&dir.path().join("oc.json")), "/summary/events"),
        1000
    );
    args.extend(["--operation-count", "300"]);
    ok(loadcell(dir.path(), &args));
    let r = read_json(&dir.path().join("oc.json"));
    assert_eq!(u(&r, "/summary/events"), 300);
    assert!(r["config"]["time_s"].is_null());

    // More fields than the table has: a clear message.
    let mut args = vec!["run", "ycsb-a", "--field-count", "12"];
    args.extend(t);
    let o = loadcell(dir.path(), &args);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no column FIELD11"), "{}", stderr(&o));

    // Cleanup drops usertable; then run says to prepare.
    let mut args = vec!["cleanup", "ycsb-e"];
    args.extend(&t[..2]);
    let o = ok(loadcell(dir.path(), &args));
    assert!(
        stderr(&o).contains("Dropping table 'usertable'"),
        "{}",
        stderr(&o)
    );
    let mut args = vec!["run", "ycsb-a", "--events", "10"];
    args.extend(t);
    let o = loadcell(dir.path(), &args);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("table usertable does not exist")
            && err.contains("run `loadcell prepare ycsb-a")
            && err.contains("--record-count 500"),
        "{err}"
    );
}

#[test]
fn wide_records() {
    // More fields than fit the stack buffers, and than are prepared eagerly.
    let dir = tempfile::tempdir().unwrap();
    let target = format!("sqlite:{}", dir.path().join("w.sqlite").display());
    let t = [
        "--target",
        target.as_str(),
        "--record-count",
        "200",
        "--field-count",
        "40",
        "--field-length",
        "8",
    ];
    let mut args = vec!["prepare", "ycsb-a"];
    args.extend(t);
    ok(loadcell(dir.path(), &args));
    for workload in ["ycsb-a", "ycsb-d", "ycsb-f", "mix-write"] {
        let r = run(dir.path(), workload, 500, &t);
        assert_exact_mix(&r, workload, 500);
        assert_eq!(r["config"]["workload_options"]["field_count"], 40);
    }
    // On a key-value store too (hash fields, in the simulator).
    let mut args = t.to_vec();
    args[1] = "sim:?latency=fixed:0";
    args.push("--prepare");
    for workload in ["ycsb-d", "mix-write", "ycsb-e"] {
        let r = run(dir.path(), workload, 500, &args);
        assert_exact_mix(&r, workload, 500);
    }
}

#[test]
fn default_target_is_prepared_on_first_use() {
    let dir = tempfile::tempdir().unwrap();
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "mix-80-20",
            "--record-count",
            "300",
            "--out",
            "m.json",
        ],
    ));
    assert!(stderr(&o).contains("Preparing the embedded default target"));
    let r = read_json(&dir.path().join("m.json"));
    assert_eq!(u(&r, "/summary/events"), 1000);
    assert_exact_mix(&r, "mix-80-20", 1000);
}

#[test]
fn options_of_other_workloads_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (args, expected) in [
        (
            &["run", "ycsb-a", "--ratio", "1:1"][..],
            "--ratio is a key-value (kv workload) option; workload ycsb-a does not take it",
        ),
        (
            &["run", "oltp_point_select", "--record-count", "10"][..],
            "--record-count is a record workload (ycsb, mix) option",
        ),
        (
            &["run", "kv", "--field-count", "3"][..],
            "--field-count is a record workload (ycsb, mix) option",
        ),
        (
            &["run", "ycsb-b", "--request-distribution", "normal"][..],
            "unknown --request-distribution 'normal'",
        ),
        (
            &["run", "ycsb-b", "--hotspot-opn-fraction", "2"][..],
            "--hotspot-opn-fraction must be between 0 and 1",
        ),
        (
            &["run", "ycsb-b", "--field-count", "0"][..],
            "--field-count",
        ),
    ] {
        let o = loadcell(dir.path(), args);
        assert!(!o.status.success(), "{args:?}");
        assert!(stderr(&o).contains(expected), "{args:?}: {}", stderr(&o));
        assert!(!dir.path().join("results/loadcell.sqlite").exists());
    }
    let o = ok(loadcell(dir.path(), &["list"]));
    let list = stdout(&o);
    for (workload, _) in WORKLOADS {
        assert!(list.contains(workload), "{list}");
    }
    assert!(list.contains("[sql, kv]"), "{list}");
}

fn tables_in_db(server: &TestServer) -> Vec<String> {
    let q = match server.kind() {
        loadcell_testkit::ServerKind::MariaDb => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name"
        }
        _ => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name"
        }
    };
    sql(server, q).lines().map(str::to_string).collect()
}

fn sql_server(server: TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let url = server.url().to_string();
    let t = ["--target", url.as_str(), "--record-count", "2000"];

    // A table of someone else's, and one of the OLTP suite's.
    sql(
        &server,
        "CREATE TABLE customer_data (id INTEGER PRIMARY KEY)",
    );
    ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "oltp_point_select",
            "--target",
            &url,
            "--table-size",
            "100",
        ],
    ));

    let mut args = vec!["prepare", "ycsb-a", "--threads", "2"];
    args.extend(t);
    ok(loadcell(dir.path(), &args));
    assert_eq!(sql(&server, "SELECT COUNT(*) FROM usertable"), "2000");
    assert_eq!(
        sql(
            &server,
            "SELECT COUNT(*) FROM usertable WHERE YCSB_KEY = 'user6284781860667377211'"
        ),
        "1"
    );
    assert_eq!(
        sql(
            &server,
            "SELECT LENGTH(FIELD9) FROM usertable WHERE YCSB_KEY = 'user6284781860667377211'"
        ),
        "100"
    );

    let mut two = t.to_vec();
    two.extend(["--threads", "2"]);
    let r = run(dir.path(), "ycsb-a", 1000, &two);
    assert_close_mix(&r, "ycsb-a", 1000, 2);
    let r = run(dir.path(), "ycsb-e", 1000, &two);
    assert_close_mix(&r, "ycsb-e", 1000, 2);
    assert!(f(&r, "/ops/scan/latency_ms/p50") > 0.0);
    // The records ycsb-e inserted are there.
    let rows: u64 = sql(&server, "SELECT COUNT(*) FROM usertable")
        .parse()
        .unwrap();
    assert_eq!(rows, 2000 + u(&r, "/ops/insert/count"));
    let r = run(dir.path(), "mix-95-5", 500, &t);
    assert_exact_mix(&r, "mix-95-5", 500);

    // Cleanup of the record workloads leaves the OLTP suite's tables.
    ok(loadcell(
        dir.path(),
        &["cleanup", "ycsb-a", "--target", &url],
    ));
    assert_eq!(
        tables_in_db(&server),
        vec!["customer_data", "loadcell_objects", "sbtest1"]
    );
    ok(loadcell(
        dir.path(),
        &["cleanup", "oltp_point_select", "--target", &url],
    ));
    assert_eq!(tables_in_db(&server), vec!["customer_data"]);

    // A usertable loadcell did not create is never loaded nor dropped;
    // empty, it is refused before any load.
    sql(
        &server,
        "CREATE TABLE usertable (YCSB_KEY VARCHAR(255) PRIMARY KEY, FIELD0 TEXT, FIELD1 TEXT)",
    );
    let o = ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "mix-read",
            "--target",
            &url,
            "--field-count",
            "2",
        ],
    ));
    assert!(
        stderr(&o).contains("not created by loadcell"),
        "{}",
        stderr(&o)
    );
    // Not "run prepare", which would leave it alone again.
    let o = loadcell(
        dir.path(),
        &["run", "mix-50-50", "--target", &url, "--field-count", "2"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(
            "table usertable holds 0 of 16 records sampled from the 1000 of --record-count, \
             and loadcell did not create it, so `loadcell prepare` will not load it"
        ) && !err.contains("run `loadcell prepare"),
        "{err}"
    );
    assert!(!err.contains("Running "), "refused before any load: {err}");
    ok(loadcell(
        dir.path(),
        &["cleanup", "mix-read", "--target", &url],
    ));
    assert_eq!(tables_in_db(&server), vec!["customer_data", "usertable"]);
}

#[test]
fn mariadb_records() {
    sql_server(loadcell_testkit::mariadb().expect("MariaDB starts"));
}

#[test]
fn postgres_records() {
    sql_server(loadcell_testkit::postgres().expect("PostgreSQL starts"));
}

/// memcached's `get`: the value's length, or `None` for a miss.
fn memcached_value_len(port: u16, key: &str) -> Option<usize> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(format!("get {key}\r\n").as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.ends_with(b"END\r\n") {
        let n = c.read(&mut chunk).unwrap();
        assert!(n > 0, "memcached closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf);
    let header = text.lines().next()?;
    // VALUE <key> <flags> <bytes>
    header
        .strip_prefix("VALUE ")
        .and_then(|h| h.split(' ').nth(2))
        .map(|n| n.parse().unwrap())
}

#[test]
fn memcached_records() {
    let server = loadcell_testkit::memcached().expect("memcached starts");
    let dir = tempfile::tempdir().unwrap();
    let url = server.url().to_string();
    let t = ["--target", url.as_str(), "--record-count", "500"];

    let mut args = vec!["prepare", "ycsb-a"];
    args.extend(t);
    ok(loadcell(dir.path(), &args));
    // One value per record: 10 fields of 100 bytes.
    assert_eq!(
        memcached_value_len(server.port, "user6284781860667377211"),
        Some(1000)
    );
    let r = run(dir.path(), "ycsb-a", 1000, &t);
    assert_exact_mix(&r, "ycsb-a", 1000);
    assert_eq!(u(&r, "/summary/hits"), 500, "every read finds its record");
    assert_eq!(u(&r, "/summary/misses"), 0);

    let mut args = t.to_vec();
    args.extend(["--prepare", "--threads", "2"]);
    let r = run(dir.path(), "mix-95-5", 1000, &args);
    assert_close_mix(&r, "mix-95-5", 1000, 2);
    assert_eq!(u(&r, "/summary/misses"), 0);
    // The mixes' records are 100 bytes.
    assert_eq!(
        memcached_value_len(server.port, "user6284781860667377211"),
        Some(100)
    );

    // ycsb-e scans: refused before connecting, so even a dead port gives
    // the reason rather than a connection error.
    let closed = format!("memcached://127.0.0.1:{}", loadcell_testkit::closed_port());
    for target in [url.as_str(), closed.as_str()] {
        for cmd in ["run", "prepare"] {
            let o = loadcell(dir.path(), &[cmd, "ycsb-e", "--target", target]);
            assert_eq!(o.status.code(), Some(1));
            let err = stderr(&o);
            assert!(
                err.contains("workload ycsb-e scans records (95% of its operations)")
                    && err.contains("memcached cannot scan")
                    && err.contains("postgres"),
                "{err}"
            );
            assert!(!err.contains("connect"), "{err}");
        }
    }
    let o = loadcell(dir.path(), &["cleanup", "ycsb-a", "--target", &url]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not available for key-value targets"));
}

#[test]
fn redis_records() {
    let dir = tempfile::tempdir().unwrap();
    let server = loadcell_testkit::redis().expect("Redis starts");
    let url = server.url().to_string();
    let cli = |args: &[&str]| {
        loadcell_testkit::redis_cli(server.port, args)
            .unwrap()
            .trim()
            .to_string()
    };
    let t = ["--target", url.as_str(), "--record-count", "500"];

    let mut args = vec!["prepare", "ycsb-e", "--threads", "2"];
    args.extend(t);
    ok(loadcell(dir.path(), &args));
    // A hash per record, every key in the sorted-set index.
    assert_eq!(cli(&["ZCARD", "_indices"]), "500");
    assert_eq!(cli(&["HLEN", "user6284781860667377211"]), "10");
    assert_eq!(
        cli(&["HSTRLEN", "user6284781860667377211", "field9"]),
        "100"
    );
    // Scored as YCSB scores it: Java's "user6284781860667377211".hashCode().
    assert_eq!(
        cli(&["ZSCORE", "_indices", "user6284781860667377211"]),
        "-594971599"
    );

    let r = run(dir.path(), "ycsb-a", 1000, &t);
    assert_exact_mix(&r, "ycsb-a", 1000);
    let r = run(dir.path(), "ycsb-e", 1000, &t);
    assert_exact_mix(&r, "ycsb-e", 1000);
    assert!(f(&r, "/ops/scan/latency_ms/p50") > 0.0);
    // The inserted records joined the index.
    assert_eq!(cli(&["ZCARD", "_indices"]), "550");
    let r = run(dir.path(), "ycsb-f", 500, &t);
    assert_exact_mix(&r, "ycsb-f", 500);
}

/// Two shards of one run insert the keys one process would have (records
/// 500 to 599 after 500 prepared), each once: shard I takes I, I + 2….
#[test]
fn redis_shards_insert_disjoint_keys() {
    let dir = tempfile::tempdir().unwrap();
    let server = loadcell_testkit::redis().expect("Redis starts");
    let url = server.url().to_string();
    let t = [
        "--target",
        url.as_str(),
        "--record-count",
        "500",
        "--threads",
        "2",
    ];
    let mut args = vec!["prepare", "ycsb-d"];
    args.extend(t);
    ok(loadcell(dir.path(), &args));
    for (i, shard) in ["0/2", "1/2"].into_iter().enumerate() {
        let out = format!("shard-{i}.json");
        let mut args = vec!["run", "ycsb-d", "--events", "2000", "--shard", shard];
        args.extend(t);
        args.extend(["--out", &out]);
        ok(loadcell(dir.path(), &args));
        let r = read_json(&dir.path().join(&out));
        // One session of 1000 events (a multiple of the mix's 100): 5%.
        assert_eq!(u(&r, "/summary/events"), 1000, "shard {shard}");
        assert_eq!(u(&r, "/summary/errors"), 0, "shard {shard}");
        assert_eq!(u(&r, "/ops/insert/count"), 50, "shard {shard}");
    }
    let indexed =
        loadcell_testkit::redis_cli(server.port, &["ZRANGE", "_indices", "0", "-1"]).unwrap();
    let mut keys: Vec<&str> = indexed.lines().collect();
    keys.sort_unstable();
    let names: Vec<String> = (0..600).map(ycsb_key).collect();
    let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    let records = loadcell_testkit::redis_cli(server.port, &["DBSIZE"]).unwrap();
    assert_eq!(records.trim(), "601", "600 hashes and the index");
}

/// `loadcell ARGS` that must fail before any load, with one line on stderr
/// saying what is not there and to run prepare.
fn refused_as_not_prepared(dir: &Path, args: &[&str], what: &str) {
    let o = loadcell(dir, args);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("{args:?}: no '{what}' in {err}"));
    assert!(
        line.contains(&format!("run `loadcell prepare {} --target", args[1]))
            && line.contains("--prepare"),
        "{line}"
    );
    assert!(!err.contains("Running "), "refused before any load: {err}");
}

/// A run's result, whatever its errors: the workload's reads of records
/// that are not there must show as misses and as "not found" errors.
fn run_with_misses(dir: &Path, workload: &str, events: u64, extra: &[&str]) -> Value {
    let out = format!("{workload}-{}.json", rand_suffix());
    let n = events.to_string();
    let mut args = vec!["run", workload, "--events", &n, "--out", &out];
    args.extend(extra);
    let o = ok(loadcell(dir, &args));
    let r = read_json(&dir.join(&out));
    assert_valid_result(&r);
    assert_eq!(s(&r, "/status"), "complete", "{workload}");
    let text = stdout(&o);
    let (hits, misses) = (u(&r, "/summary/hits"), u(&r, "/summary/misses"));
    assert!(
        misses > 0 && hits > 0,
        "{workload}: {hits} hits, {misses} misses"
    );
    assert!(
        text.contains(&format!("{hits} hits, {misses} misses")),
        "{text}"
    );
    let samples = r["error_samples"].as_array().unwrap();
    assert!(
        samples.iter().all(|e| e["class"] == "not found"),
        "{samples:?}"
    );
    assert!(text.contains("Error (not found, "), "{text}");
    let sampled: u64 = samples.iter().map(|e| e["count"].as_u64().unwrap()).sum();
    assert_eq!(u(&r, "/summary/errors"), sampled, "{workload}");
    r
}

/// Reads of absent records on a SQL database: refused when the table is
/// empty, then (a third of the records missing) misses, each a "not found"
/// error, as are UPDATEs of no row (YCSB's JDBC binding: NOT_FOUND and
/// UNEXPECTED_STATE).
fn sql_absent_records(server: TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let url = server.url().to_string();
    let t = ["--target", url.as_str(), "--record-count", "300"];
    let mut args = vec!["prepare", "ycsb-c"];
    args.extend(t);
    ok(loadcell(dir.path(), &args));
    sql(&server, "DELETE FROM usertable");
    let mut run = vec!["run", "ycsb-c", "--time", "2s"];
    run.extend(t);
    refused_as_not_prepared(
        dir.path(),
        &run,
        "table usertable holds 0 of 16 records sampled from the 300 of --record-count",
    );
    ok(loadcell(dir.path(), &args));

    // Every read hits on the records prepared, and the summary says so.
    let r = run_with_no_errors(dir.path(), "ycsb-c", &t);
    assert_eq!(u(&r, "/summary/hits"), 1000);

    // 450 records asked for, 300 there.
    let wider = ["--target", url.as_str(), "--record-count", "450"];
    let mut extra = wider.to_vec();
    extra.extend(["--request-distribution", "uniform"]);
    let r = run_with_misses(dir.path(), "ycsb-a", 1000, &extra);
    assert_eq!(u(&r, "/ops/read/errors"), u(&r, "/summary/misses"));
    assert!(
        u(&r, "/ops/update/errors") > 0,
        "an UPDATE of no row is an error"
    );
    let r = run_with_misses(dir.path(), "ycsb-f", 1000, &extra);
    let rmw_errors = u(&r, "/ops/read_modify_write/errors");
    assert!(rmw_errors > 0);
    assert_eq!(
        u(&r, "/ops/read/errors") + rmw_errors,
        u(&r, "/summary/misses")
    );
    ok(loadcell(
        dir.path(),
        &["cleanup", "ycsb-a", "--target", &url],
    ));
}

/// `run WORKLOAD --events 1000` (the text summary) on a fully loaded data
/// set: no error, every read a hit, shown as such.
fn run_with_no_errors(dir: &Path, workload: &str, extra: &[&str]) -> Value {
    let out = format!("{workload}-{}.json", rand_suffix());
    let mut args = vec!["run", workload, "--events", "1000", "--out", &out];
    args.extend(extra);
    let o = ok(loadcell(dir, &args));
    let r = read_json(&dir.join(&out));
    assert_eq!(u(&r, "/summary/errors"), 0, "{workload}");
    assert_eq!(u(&r, "/summary/misses"), 0, "{workload}");
    let hits = u(&r, "/summary/hits");
    assert!(
        stdout(&o).contains(&format!("{hits} hits, 0 misses (100.0% hit)")),
        "{}",
        stdout(&o)
    );
    r
}

#[test]
fn mariadb_absent_records() {
    sql_absent_records(loadcell_testkit::mariadb().expect("MariaDB starts"));
}

#[test]
fn postgres_absent_records() {
    sql_absent_records(loadcell_testkit::postgres().expect("PostgreSQL starts"));
}

/// The same on a key-value store: refused when empty, misses and "not
/// found" errors when records are missing.
fn kv_absent_records(url: &str, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let t = ["--target", url, "--record-count", "300"];
    let mut run = vec!["run", "ycsb-c", "--time", "2s"];
    run.extend(t);
    refused_as_not_prepared(
        dir.path(),
        &run,
        &format!("{what} holds 0 of 16 records sampled from the 300 of --record-count"),
    );
    let mut args = vec!["prepare", "ycsb-c"];
    args.extend(t);
    ok(loadcell(dir.path(), &args));
    let r = run_with_no_errors(dir.path(), "ycsb-c", &t);
    assert_eq!(u(&r, "/summary/hits"), 1000);
    let wider = [
        "--target",
        url,
        "--record-count",
        "450",
        "--request-distribution",
        "uniform",
    ];
    let r = run_with_misses(dir.path(), "ycsb-c", 1000, &wider);
    assert_eq!(u(&r, "/ops/read/errors"), u(&r, "/summary/misses"));
}

#[test]
fn redis_absent_records() {
    let server = loadcell_testkit::redis().expect("Redis starts");
    kv_absent_records(server.url(), "the store");
}

#[test]
fn memcached_absent_records() {
    let server = loadcell_testkit::memcached().expect("memcached starts");
    kv_absent_records(server.url(), "the store");
}

/// Java's `String.hashCode()`, by which YCSB's Redis binding scores a key.
fn java_hash_code(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// YCSB's key of record `n` (`insertorder=hashed`): `user` + FNV-1a 64.
fn ycsb_key(n: u64) -> String {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for byte in n.to_le_bytes() {
        h ^= u64::from(byte);
        h = h.wrapping_mul(1_099_511_628_211);
    }
    format!("user{}", (h as i64).wrapping_abs())
}

/// Sends `commands` to Redis in one pipeline; each must answer one line.
fn redis_pipeline(port: u16, commands: &[Vec<String>]) {
    let mut request = Vec::new();
    for args in commands {
        request.extend(format!("*{}\r\n", args.len()).bytes());
        for a in args {
            request.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
        }
    }
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(&request).unwrap();
    let mut replies = Vec::new();
    let mut chunk = [0u8; 4096];
    while replies.windows(2).filter(|w| w == b"\r\n").count() < commands.len() {
        let n = c.read(&mut chunk).unwrap();
        assert!(n > 0, "Redis closed the connection");
        replies.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&replies);
    assert!(!text.contains('-'), "an error reply: {text}");
}

/// Records `0..n` written as YCSB's Redis binding writes them
/// (`site.ycsb.db.RedisClient.insert`): `HMSET key field0 v … field9 v`,
/// then `ZADD _indices hash(key) key`, hash being Java's hashCode.
fn write_as_ycsb(port: u16, n: u64) {
    let mut commands = Vec::new();
    for i in 0..n {
        let key = ycsb_key(i);
        let mut hmset = vec!["HMSET".to_string(), key.clone()];
        for f in 0..10 {
            hmset.extend([format!("field{f}"), format!("v{i}-{f}")]);
        }
        commands.push(hmset);
        let score = java_hash_code(&key).to_string();
        commands.push(vec!["ZADD".into(), "_indices".into(), score, key]);
    }
    redis_pipeline(port, &commands);
}

/// YCSB's scan, `ZRANGEBYSCORE _indices hash(start) +inf LIMIT 0 len`,
/// worked out from the scores of `keys`: how many records it reads.
fn ycsb_scan_len(keys: &[String], start: &str, len: usize) -> usize {
    let from = java_hash_code(start);
    keys.iter()
        .filter(|k| java_hash_code(k) >= from)
        .count()
        .min(len)
}

#[test]
fn redis_scans_read_what_ycsb_reads() {
    let server = loadcell_testkit::redis().expect("Redis starts");
    let dir = tempfile::tempdir().unwrap();
    let url = server.url().to_string();
    let cli = |args: &[&str]| {
        loadcell_testkit::redis_cli(server.port, args)
            .unwrap()
            .trim()
            .to_string()
    };

    // Data YCSB wrote, scanned by loadcell: every scan starts at record 0
    // (a hot set of one record) and reads up to 5 records. YCSB reads the 5
    // keys its sorted set holds from hash(record 0) on; loadcell must read
    // those, and not records 1, 2, 3… by number. Records read have just
    // been touched: their idle time is below the pause before the run.
    write_as_ycsb(server.port, 1000);
    std::thread::sleep(std::time::Duration::from_secs(3));
    let r = run(
        dir.path(),
        "ycsb-e",
        200,
        &[
            "--target",
            &url,
            "--record-count",
            "500",
            "--request-distribution",
            "hotspot",
            "--hotspot-data-fraction",
            "0.002",
            "--hotspot-opn-fraction",
            "1",
            "--max-scan-length",
            "5",
        ],
    );
    assert_eq!(u(&r, "/ops/scan/count"), 190);
    let from = java_hash_code(&ycsb_key(0)).to_string();
    let ycsb_reads = cli(&[
        "ZRANGEBYSCORE",
        "_indices",
        &from,
        "+inf",
        "LIMIT",
        "0",
        "5",
    ]);
    let ycsb_reads: Vec<&str> = ycsb_reads.lines().collect();
    assert_eq!(ycsb_reads.len(), 5);
    assert_eq!(
        ycsb_reads[0],
        ycsb_key(0),
        "a scan starts at its own record"
    );
    let idle = |key: &str| cli(&["OBJECT", "IDLETIME", key]).parse::<u64>().unwrap();
    for key in &ycsb_reads {
        assert!(
            idle(key) < 3,
            "{key}, which YCSB's scan reads, was not read"
        );
    }
    // Records by number (the check before the run reads record 0 and
    // every 33rd, inserts write 500 on).
    let by_number: Vec<String> = (1..5)
        .map(ycsb_key)
        .filter(|k| !ycsb_reads.contains(&k.as_str()))
        .collect();
    assert!(!by_number.is_empty());
    for key in &by_number {
        assert!(
            idle(key) >= 3,
            "{key} was read, though YCSB's scan does not"
        );
    }

    // Data loadcell prepared, scanned by YCSB: every key scored by its
    // hashCode, so a YCSB scan from any record reads what it would read
    // on data YCSB wrote (with record numbers as scores, one from a key of
    // positive hash read nothing).
    cli(&["FLUSHALL"]);
    ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "ycsb-e",
            "--target",
            &url,
            "--record-count",
            "1000",
        ],
    ));
    let keys: Vec<String> = (0..1000).map(ycsb_key).collect();
    let scored = cli(&["ZRANGE", "_indices", "0", "-1", "WITHSCORES"]);
    let scored: Vec<&str> = scored.lines().collect();
    assert_eq!(scored.len(), 2000);
    for pair in scored.chunks(2) {
        assert!(keys.iter().any(|k| k == pair[0]), "{}", pair[0]);
        assert_eq!(pair[1], java_hash_code(pair[0]).to_string(), "{}", pair[0]);
    }
    for start in &keys[..50] {
        let from = java_hash_code(start).to_string();
        let got = cli(&[
            "ZRANGEBYSCORE",
            "_indices",
            &from,
            "+inf",
            "LIMIT",
            "0",
            "100",
        ]);
        assert_eq!(
            got.lines().count(),
            ycsb_scan_len(&keys, start, 100),
            "{start}"
        );
    }

    // An index scored by record number (an earlier loadcell's prepare):
    // scans are refused before any load, until prepare scores it again.
    let by_number: Vec<Vec<String>> = (0..1000)
        .map(|n| vec!["ZADD".into(), "_indices".into(), n.to_string(), ycsb_key(n)])
        .collect();
    redis_pipeline(server.port, &by_number);
    let t = ["--target", url.as_str(), "--record-count", "1000"];
    let mut args = vec!["run", "ycsb-e", "--events", "100"];
    args.extend(t);
    refused_as_not_prepared(
        dir.path(),
        &args,
        "the sorted set _indices scores 16 of 16 sampled records otherwise than YCSB",
    );
    let mut prepare = vec!["prepare", "ycsb-e"];
    prepare.extend(t);
    ok(loadcell(dir.path(), &prepare));
    ok(loadcell(dir.path(), &args));
}
