//! ts-ingest and ts-query against real servers: InfluxDB over line
//! protocol, VictoriaMetrics and Prometheus over remote write. Each test
//! starts its own server (each starts in a fraction of a second).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, SystemTime};

use common::{loadcell, ok, read_json, run_and_kill_server, run_json, s, stderr, stdout, u};
use loadcell_testkit::TsServer;
use serde_json::Value;

fn start(server: Result<TsServer, String>, what: &str) -> TsServer {
    server.unwrap_or_else(|e| panic!("cannot start {what}: {e}"))
}

/// InfluxQL `q` on the server's HTTP API, its answer's body.
fn influxql(port: u16, q: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = format!("q={}", q.replace(' ', "+"));
    write!(
        stream,
        "POST /query HTTP/1.0\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.split_once("\r\n\r\n").unwrap().1.to_string()
}

fn databases(port: u16) -> String {
    influxql(port, "SHOW DATABASES")
}

/// POSTs `body` to `path` on the server's HTTP API (another writer's
/// points); the answer's status line.
fn post(port: u16, path: &str, body: &str) -> String {
    post_answer(port, path, body).0
}

/// POSTs `body` to `path`; the answer's body.
fn post_body(port: u16, path: &str, body: &str) -> String {
    post_answer(port, path, body).1
}

fn post_answer(port: u16, path: &str, body: &str) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.lines().next().unwrap_or_default().to_string();
    (status, body.to_string())
}

/// `--start` and `--end` for `seconds` of back-fill ending on a multiple
/// of 10 s, so each series gets `seconds / 10` points.
fn backfill(seconds: u64) -> [String; 4] {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 10
        * 10;
    let at = |s: u64| {
        humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(s))
            .to_string()
    };
    ["--start".into(), at(now - seconds), "--end".into(), at(now)]
}

fn run(dir: &Path, workload: &str, target: &str, args: &[&str]) -> Output {
    let mut all = vec!["run", workload, "--target", target];
    all.extend_from_slice(args);
    loadcell(dir, &all)
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn influxdb_ingest_is_verified_queried_and_only_loadcells_database_dropped() {
    let server = start(loadcell_testkit::influxdb(), "InfluxDB");
    let port = server.server.port;
    let target = format!("influx://127.0.0.1:{port}/lc");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let range = backfill(200);
    let mut args = vec![
        "--use-case",
        "cpu-only",
        "--series",
        "1000",
        "--threads",
        "2",
    ];
    args.extend(strs(&range));

    // No database yet: refused before any load, naming prepare.
    let o = run(d, "ts-ingest", &target, &args);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("the store of 'cpu' does not exist")
            && e.contains("database not found")
            && e.contains("run `loadcell prepare ts-ingest")
            && e.contains("--use-case cpu-only"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");

    ok(loadcell(
        d,
        &[
            "prepare",
            "ts-ingest",
            "--target",
            &target,
            "--use-case",
            "cpu-only",
        ],
    ));
    let r = run_json(d, "ts-ingest", &target, &args);
    assert_eq!(u(&r, "/ops/write/items"), 20_000, "1000 series x 20 points");
    assert_eq!(u(&r, "/ops/write/count"), 40, "500 points a request");
    assert_eq!(u(&r, "/ops/write/errors"), 0);
    let v = &r["verification"];
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        (
            u(&r, "/verification/expected"),
            u(&r, "/verification/found")
        ),
        (1000, 1000)
    );
    assert!(
        s(&r, "/verification/how").contains("20 random series read back"),
        "{v}"
    );
    assert_eq!(s(&r, "/config/workload_options/use_case"), "cpu-only");

    // Queries of the same space hit what was written.
    let mut q = vec!["--use-case", "cpu-only", "--series", "1000", "--time", "2s"];
    q.extend(strs(&range));
    let r = run_json(d, "ts-query", &target, &q);
    for kind in ["last-point", "range-mean", "group-by"] {
        let op = format!("/ops/{kind}");
        assert!(u(&r, &format!("{op}/count")) > 0, "{kind}: {}", r["ops"]);
        assert_eq!(u(&r, &format!("{op}/errors")), 0, "{kind}");
        assert!(u(&r, &format!("{op}/items")) > 0, "{kind} returned rows");
    }
    assert!(
        r["summary"]["counters"].get("no_rows").is_none(),
        "{}",
        r["summary"]
    );

    // A database someone else made is left alone; loadcell's is dropped.
    influxql(port, "CREATE DATABASE theirs");
    let theirs = format!("influx://127.0.0.1:{port}/theirs");
    let o = loadcell(d, &["cleanup", "ts-ingest", "--target", &theirs]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("was not created by loadcell"),
        "{}",
        stderr(&o)
    );
    let o = loadcell(
        d,
        &[
            "cleanup",
            "ts-ingest",
            "--target",
            &target,
            "--use-case",
            "cpu-only",
        ],
    );
    ok(o);
    let dbs = databases(port);
    assert!(dbs.contains("theirs") && !dbs.contains("\"lc\""), "{dbs}");
}

/// Issue 35: cleanup dropped the whole database, another writer's
/// measurement in it included.
#[test]
fn influxdb_cleanup_drops_loadcells_measurements_and_leaves_another_writers() {
    let server = start(loadcell_testkit::influxdb(), "InfluxDB");
    let port = server.server.port;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let range = backfill(100);
    let cpu_only = ["--use-case", "cpu-only"];
    let ingest = |target: &str| {
        let mut args = vec!["--use-case", "cpu-only", "--series", "100"];
        args.extend(strs(&range));
        let r = run_json(d, "ts-ingest", target, &args);
        assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    };
    let cleanup = |target: &str, more: &[&str]| {
        let mut args = vec!["cleanup", "ts-ingest", "--target", target];
        args.extend(cpu_only);
        args.extend(more);
        loadcell(d, &args)
    };

    // Another writer's measurement beside loadcell's: cpu goes, it stays,
    // and so does the database, with a line saying why.
    let target = format!("influx://127.0.0.1:{port}/bench2");
    let mut prepare = vec!["prepare", "ts-ingest", "--target", &target];
    prepare.extend(cpu_only);
    ok(loadcell(d, &prepare));
    ingest(&target);
    assert!(post(port, "/write?db=bench2", "mine v=1").contains("204"));
    let o = ok(cleanup(&target, &[]));
    let e = stderr(&o);
    assert!(
        e.contains("Left database 'bench2' as it is: it still holds mine"),
        "{e}"
    );
    let left = influxql(port, "SHOW MEASUREMENTS ON bench2");
    assert!(
        left.contains("\"mine\"") && !left.contains("\"cpu\""),
        "{left}"
    );
    let mine = influxql(port, "SELECT v FROM bench2..mine");
    assert!(mine.contains(",1]"), "{mine}");

    // Another writer's points in loadcell's own measurement: refused in
    // one line naming them and --force, then dropped with --force, and the
    // database with it, nothing else being in it.
    let target = format!("influx://127.0.0.1:{port}/bench3");
    let mut prepare = vec!["prepare", "ts-ingest", "--target", &target];
    prepare.extend(cpu_only);
    ok(loadcell(d, &prepare));
    ingest(&target);
    assert!(post(port, "/write?db=bench3", "cpu,owner=them usage_user=1").contains("204"));
    let o = cleanup(&target, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("another writer's points (tag owner in cpu)") && e.contains("--force"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(databases(port).contains("bench3"));
    let o = ok(cleanup(&target, &["--force"]));
    assert!(
        stderr(&o).contains("Dropped database 'bench3'"),
        "{}",
        stderr(&o)
    );
    assert!(!databases(port).contains("bench3"));
}

#[test]
fn bad_options_are_one_line_errors_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    // A closed port: these must fail before connecting.
    let target = format!("influx://127.0.0.1:{}/lc", loadcell_testkit::closed_port());
    for (args, message) in [
        (&["--series", "0"][..], "--series must be at least 1"),
        (
            &["--use-case", "iot"],
            "--use-case 'iot' is not a use case: use cpu-only or devops",
        ),
        (
            &["--points-per-request", "200000"],
            "--points-per-request 200000: requests would be over 25 MB",
        ),
        (
            &[
                "--start",
                "2024-01-02T00:00:00Z",
                "--end",
                "2024-01-01T00:00:00Z",
            ],
            "--end 2024-01-01T00:00:00Z is not after --start",
        ),
        (
            &["--queries", "last-point"],
            "--queries does not apply to ts-ingest",
        ),
    ] {
        let o = run(dir.path(), "ts-ingest", &target, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let e = stderr(&o);
        assert!(
            e.contains(message) && e.trim().lines().count() == 1,
            "{args:?}: {e}"
        );
    }
}

#[test]
fn victoriametrics_over_remote_write_with_a_sweep_over_series() {
    let server = start(loadcell_testkit::victoriametrics(), "VictoriaMetrics");
    let target = format!("prom-rw://127.0.0.1:{}/api/v1/write", server.server.port);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let range = backfill(100);
    // Nothing to prepare: VictoriaMetrics keeps no stores.
    let o = ok(loadcell(d, &["prepare", "ts-ingest", "--target", &target]));
    assert!(stderr(&o).contains("keeps no stores"), "{}", stderr(&o));

    let mut args = vec![
        "--series",
        "300,1000",
        "--tags",
        "4",
        "--fields",
        "2",
        "--threads",
        "2",
    ];
    args.extend(strs(&range));
    let mut all = vec!["sweep", "ts-ingest", "--target", &target];
    all.extend(&args);
    all.extend(["--out", "sweep.json"]);
    ok(loadcell(d, &all));
    let sweep = read_json(&d.join("sweep.json"));
    assert_eq!(sweep["kind"], "sweep");
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{sweep}");
    let values: Vec<f64> = points
        .iter()
        .map(|p| p["value"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [300.0, 1000.0]);

    // The series written, queried back.
    let mut q = vec![
        "--series", "1000", "--tags", "4", "--fields", "2", "--time", "2s",
    ];
    q.extend(strs(&range));
    let r = run_json(d, "ts-query", &target, &q);
    for kind in ["last-point", "range-mean", "group-by"] {
        assert!(
            u(&r, &format!("/ops/{kind}/items")) > 0,
            "{kind}: {}",
            r["ops"]
        );
    }

    // Nothing records who wrote a series: cleanup asks for --force, which
    // deletes loadcell's metric names only, not another writer's metric
    // that shares their prefix.
    let port = server.server.port;
    let theirs = post(
        port,
        "/api/v1/import/prometheus",
        "cpu_temperature{host=\"theirs\"} 42\n",
    );
    assert!(theirs.contains("204"), "{theirs}");
    let o = loadcell(d, &["cleanup", "ts-ingest", "--target", &target]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("nothing records who wrote cpu_field0, cpu_field1") && e.contains("--force"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    ok(loadcell(
        d,
        &["cleanup", "ts-ingest", "--target", &target, "--force"],
    ));
    post(port, "/internal/force_flush", "");
    let left = post_body(port, "/api/v1/label/__name__/values", "");
    assert!(
        left.contains("cpu_temperature") && !left.contains("cpu_field"),
        "{left}"
    );
}

/// Issue 35: the series count was the database's total, which an earlier
/// run's series satisfied when every point of this run was dropped.
#[test]
fn victoriametrics_counts_only_the_series_in_the_runs_time_range() {
    let server = start(loadcell_testkit::victoriametrics(), "VictoriaMetrics");
    let target = format!("prom-rw://127.0.0.1:{}/api/v1/write", server.server.port);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shape = ["--measurement", "gone", "--series", "100", "--fields", "1"];
    let mut now = shape.to_vec();
    now.extend(["--time", "2s"]);
    let r = run_json(d, "ts-ingest", &target, &now);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    // Older than VictoriaMetrics' retention (a month): acknowledged, and
    // dropped. Without spot checks, only the count can tell.
    let mut old = shape.to_vec();
    old.extend([
        "--start",
        "-60d",
        "--end",
        "-59d23h",
        "--interval",
        "1m",
        "--verify-sample",
        "0",
        "--verify-timeout",
        "1s",
        "--json",
    ]);
    let o = run(d, "ts-ingest", &target, &old);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(u(&r, "/ops/write/errors"), 0, "acknowledged");
    assert_eq!(
        (
            u(&r, "/verification/expected"),
            u(&r, "/verification/found")
        ),
        (100, 0)
    );
    assert!(
        s(&r, "/verification/how")
            .starts_with("100 of the 100 series written missing from the run's time range;"),
        "{}",
        r["verification"]
    );
}

#[test]
fn prometheus_in_real_time_and_a_refused_backfill_failing_the_check() {
    let server = start(loadcell_testkit::prometheus(), "Prometheus");
    let target = format!("prom-rw://127.0.0.1:{}/api/v1/write", server.server.port);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = [
        "--series",
        "200",
        "--fields",
        "1",
        "--threads",
        "2",
        "--time",
        "2s",
    ];
    let r = run_json(d, "ts-ingest", &target, &args);
    assert!(u(&r, "/ops/write/items") > 200, "{}", r["ops"]);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/found"), 200);

    // Prometheus refuses samples older than its head: every point fails.
    let old = [
        "--measurement",
        "old",
        "--series",
        "50",
        "--fields",
        "1",
        "--start",
        "-30d",
        "--end",
        "-29d",
        "--interval",
        "1h",
        "--verify-timeout",
        "1s",
        "--json",
    ];
    let o = run(d, "ts-ingest", &target, &old);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let v = &r["verification"];
    assert_eq!(v["ok"], false);
    assert_eq!(
        (
            u(&r, "/verification/expected"),
            u(&r, "/verification/found")
        ),
        (50, 0)
    );
    // The cause first, a few series named in a few words each: not a
    // line of kilobytes with the cause in its middle.
    let how = s(&r, "/verification/how");
    let failed = u(&r, "/ops/write/errors");
    assert!(failed >= 50 * 24, "{}", r["ops"]);
    assert!(
        how.starts_with(&format!(
            "{failed} points failed; 50 of the 50 series written missing from the run's time \
             range; 20 of 20 spot-checked series short: old{{tag0="
        )),
        "{how}"
    );
    assert!(
        how.contains("} 0 of ") && how.contains(" and 17 more; checked: "),
        "{how}"
    );
    assert!(how.len() < 500, "{} characters: {how}", how.len());
    let sample = &r["error_samples"][0];
    assert_eq!(sample["class"], "point failed");
    assert!(
        sample["message"]
            .as_str()
            .unwrap()
            .contains("out of bounds"),
        "{sample}"
    );
    assert!(stdout(&o).contains("\"ok\": false"));

    // Nothing records who wrote a series: cleanup asks for --force, then
    // deletes loadcell's metric names.
    let o = loadcell(d, &["cleanup", "ts-ingest", "--target", &target]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("nothing records who wrote cpu_field0: loadcell cannot tell"),
        "{}",
        stderr(&o)
    );
    ok(loadcell(
        d,
        &["cleanup", "ts-ingest", "--target", &target, "--force"],
    ));
    let left = post_body(
        server.server.port,
        "/api/v1/query?query=count(cpu_field0)",
        "",
    );
    assert!(left.contains("\"result\":[]"), "{left}");
}

#[test]
fn questdb_over_line_protocol_is_verified_queried_and_its_table_dropped() {
    let server = start(loadcell_testkit::questdb(), "QuestDB");
    let port = server.server.port;
    // QuestDB ignores the database: a point's measurement is its table.
    let target = format!("influx://127.0.0.1:{}/qdb", server.server.port);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let range = backfill(100);
    let mut args = vec!["--series", "200", "--tags", "3", "--fields", "2"];
    args.extend(strs(&range));
    ok(loadcell(d, &["prepare", "ts-ingest", "--target", &target]));

    let r = run_json(d, "ts-ingest", &target, &args);
    assert_eq!(u(&r, "/ops/write/items"), 2000, "200 series x 10 points");
    assert_eq!(u(&r, "/ops/write/errors"), 0);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/found"), 200, "series counted by SQL");

    let mut q = vec![
        "--series", "200", "--tags", "3", "--fields", "2", "--time", "2s",
    ];
    q.extend(strs(&range));
    let r = run_json(d, "ts-query", &target, &q);
    for kind in ["last-point", "range-mean", "group-by"] {
        assert!(
            u(&r, &format!("/ops/{kind}/items")) > 0,
            "{kind}: {}",
            r["ops"]
        );
    }
    // Another writer's rows in loadcell's table, with a column loadcell
    // never writes: refused, then dropped with --force.
    questdb_sql(port, "ALTER TABLE cpu ADD COLUMN note VARCHAR");
    let theirs = questdb_sql(
        port,
        "INSERT INTO cpu (note, timestamp) VALUES ('theirs', now())",
    );
    assert!(theirs.contains("200 OK"), "{theirs}");
    let o = loadcell(d, &["cleanup", "ts-ingest", "--target", &target]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("another writer's points (column note)") && e.contains("--force"),
        "{e}"
    );
    assert!(questdb_sql(port, "SELECT count() FROM cpu").contains("[2001]"));
    let o = ok(loadcell(
        d,
        &["cleanup", "ts-ingest", "--target", &target, "--force"],
    ));
    assert!(
        stderr(&o).contains("with another writer's points in it (column note) (--force)"),
        "{}",
        stderr(&o)
    );
    // Dropped: a run now finds no table and names prepare.
    let o = run(d, "ts-ingest", &target, &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("loadcell prepare ts-ingest"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_influxdb_killed_mid_run_still_leaves_a_partial_result() {
    let mut server = start(loadcell_testkit::influxdb(), "InfluxDB");
    let target = format!("influx://127.0.0.1:{}/killed", server.server.port);
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &["prepare", "ts-ingest", "--target", &target],
    ));
    // Real time, so the run lasts until the server goes.
    let (o, r) = run_and_kill_server(
        dir.path(),
        &[
            "ts-ingest",
            "--target",
            &target,
            "--series",
            "10000",
            "--threads",
            "2",
        ],
        || server.server.kill(),
        Duration::from_secs(2),
    );
    assert!(
        u(&r, "/summary/items") > 0,
        "points sent before the kill are kept"
    );
    assert!(
        stdout(&o).contains("partial run (server_unreachable)"),
        "{}",
        stdout(&o)
    );
}

/// QuestDB's HTTP API, `query`'s answer: up to the end of its chunked
/// body (QuestDB keeps the connection open).
fn questdb_sql(port: u16, query: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut path = String::from("/exec?query=");
    for b in query.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' => path.push(b as char),
            _ => path += &format!("%{b:02X}"),
        }
    }
    write!(stream, "GET {path} HTTP/1.1\r\nHost: loadcell\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !answer.ends_with(b"0\r\n\r\n") {
        match stream.read(&mut chunk).unwrap() {
            0 => break,
            n => answer.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn victoriametrics_over_tcp_counts_points_as_sent_and_verifies_them() {
    let server = start(loadcell_testkit::victoriametrics(), "VictoriaMetrics");
    let query = format!("query=http://127.0.0.1:{}", server.server.port);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let range = backfill(100);
    for (scheme, port, measurement) in [
        ("influx+tcp", server.influx_tcp_port, "line"),
        ("opentsdb+tcp", server.opentsdb_tcp_port, "put"),
    ] {
        let target = format!("{scheme}://127.0.0.1:{}?{query}", port.unwrap());
        let mut args = vec![
            "--measurement",
            measurement,
            "--series",
            "300",
            "--tags",
            "4",
            "--fields",
            "2",
            "--threads",
            "2",
        ];
        args.extend(strs(&range));
        let r = run_json(d, "ts-ingest", &target, &args);
        assert_eq!(u(&r, "/ops/write/items"), 3000, "{scheme}: 300 series x 10");
        assert_eq!(
            u(&r, "/summary/counters/points_unacknowledged"),
            3000,
            "{scheme}"
        );
        assert_eq!(
            r["verification"]["ok"], true,
            "{scheme}: {}",
            r["verification"]
        );
        assert_eq!(u(&r, "/verification/found"), 300, "{scheme}");
        assert!(
            s(&r, "/verification/how")
                .contains("acknowledges none: this check is their only proof"),
            "{scheme}: {}",
            r["verification"]
        );

        // Without spot checks nothing would prove the points arrived.
        args.extend(["--verify-sample", "0"]);
        let o = run(d, "ts-ingest", &target, &args);
        assert_eq!(o.status.code(), Some(1), "{scheme}");
        let e = stderr(&o);
        assert!(
            e.contains("--verify-sample 0: this target's transport acknowledges no point")
                && e.trim().lines().count() == 1,
            "{scheme}: {e}"
        );
    }
}

#[test]
fn questdb_over_ilp_tcp_is_verified_and_a_table_that_rejects_the_lines_fails_the_check() {
    let server = start(loadcell_testkit::questdb(), "QuestDB");
    let http = server.server.port;
    let target = format!(
        "influx+tcp://127.0.0.1:{}?query=http://127.0.0.1:{http}",
        server.influx_tcp_port.unwrap()
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let range = backfill(100);
    let mut args = vec!["--series", "200", "--tags", "3", "--fields", "2"];
    args.extend(strs(&range));
    ok(loadcell(d, &["prepare", "ts-ingest", "--target", &target]));
    let r = run_json(d, "ts-ingest", &target, &args);
    assert_eq!(u(&r, "/ops/write/items"), 2000, "200 series x 10 points");
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/found"), 200, "series counted by SQL");

    // A table whose field0 is BOOLEAN: QuestDB drops the lines and closes
    // the connection, which the run reports and the check proves.
    let created = questdb_sql(
        http,
        "CREATE TABLE strict (tag0 SYMBOL, tag1 SYMBOL, tag2 SYMBOL, field0 BOOLEAN, \
         field1 DOUBLE, timestamp TIMESTAMP) TIMESTAMP(timestamp) PARTITION BY DAY WAL",
    );
    assert!(created.contains("\"ddl\":\"OK\""), "{created}");
    // In real time, long enough for later writes to find the connections closed.
    let strict = [
        "--measurement",
        "strict",
        "--series",
        "200",
        "--tags",
        "3",
        "--fields",
        "2",
        "--time",
        "2s",
        "--verify-timeout",
        "3s",
        "--json",
    ];
    let o = run(d, "ts-ingest", &target, &strict);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["verification"]["ok"], false, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/found"), 0);
    let how = s(&r, "/verification/how");
    assert!(how.contains("acknowledges none"), "{how}");
    assert!(u(&r, "/ops/write/errors") > 0, "{}", r["ops"]);
    let samples = r["error_samples"].to_string();
    assert!(
        samples.contains("127.0.0.1")
            && samples.contains("may be lost (Influx line protocol over TCP acknowledges nothing"),
        "the closes are errors: {samples}"
    );
}

#[test]
fn an_influxdb_with_a_small_max_body_size_names_points_per_request() {
    let server = start(
        loadcell_testkit::influxdb_with_http("max-body-size = 10000"),
        "InfluxDB",
    );
    let target = format!("influx://127.0.0.1:{}/small", server.server.port);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(loadcell(d, &["prepare", "ts-ingest", "--target", &target]));
    let mut args = vec!["--series", "1000", "--json"];
    let range = backfill(100);
    args.extend(strs(&range));
    let o = run(d, "ts-ingest", &target, &args);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        all.contains("HTTP 413")
            && all.contains("the server takes smaller requests; lower --points-per-request"),
        "{all}"
    );
}
