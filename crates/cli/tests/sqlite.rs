//! End-to-end runs of the binary on the embedded SQLite target: the
//! default job, result files, phases, limits, interrupts, prepare/cleanup.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

#[test]
fn default_run_prepares_and_writes_a_valid_result() {
    let dir = tempfile::tempdir().unwrap();
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "oltp_read_write",
            "--time",
            "2s",
            "--table-size",
            "2000",
            "--out",
            "r.json",
        ],
    ));
    let out = stdout(&o);
    assert!(out.contains("SQL statistics:"), "{out}");
    assert!(out.contains("Latency (ms):"), "{out}");
    assert!(out.contains("closed loop"), "{out}");
    assert!(dir.path().join("results/loadcell.sqlite").exists());

    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    assert_eq!(s(&r, "/status"), "complete");
    assert_eq!(s(&r, "/summary/schedule/mode"), "closed_loop");
    let events = u(&r, "/summary/events");
    assert!(events > 10, "{events} transactions");
    // sysbench's 20 queries per read/write transaction, BEGIN and COMMIT included.
    assert_eq!(u(&r, "/summary/ops"), 20 * events);
    assert_eq!(u(&r, "/summary/queries/read"), 14 * events);
    assert_eq!(u(&r, "/summary/queries/write"), 4 * events);
    assert_eq!(u(&r, "/summary/queries/other"), 2 * events);
    assert_eq!(u(&r, "/ops/point_select/count"), 10 * events);
    assert!(f(&r, "/summary/txn_per_sec") > 0.0);
    assert!(f(&r, "/summary/latency_ms/p99") >= f(&r, "/summary/latency_ms/p50"));
    assert_eq!(s(&r, "/environment/server/product"), "SQLite");
    assert_eq!(s(&r, "/config/workload_options/rand_type"), "special");

    // The second run finds the data set prepared and says nothing about it.
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "oltp_point_select",
            "--time",
            "1s",
            "--table-size",
            "2000",
        ],
    ));
    assert!(!stderr(&o).contains("Preparing"), "{}", stderr(&o));
    let files: Vec<_> = std::fs::read_dir(dir.path().join("results"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with("-oltp_point_select.json")
        })
        .collect();
    assert_eq!(
        files.len(),
        1,
        "default result path is results/<time>-<workload>.json"
    );
}

#[test]
fn events_limit_warmup_and_intervals_add_up() {
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &["prepare", "oltp_point_select", "--table-size", "1000"],
    ));
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "oltp_point_select",
            "--table-size",
            "1000",
            "--threads",
            "3",
            "--events",
            "3000",
            "--warmup",
            "1s",
            "--report-interval",
            "500ms",
            "--json",
        ],
    ));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("--json prints the result");
    assert_valid_result(&r);
    // SQLite's calls block the thread: a worker thread per --threads,
    // whatever the cores.
    assert_eq!(u(&r, "/config/worker_threads"), 3);
    // Exactly the measured events; warm-up events are not in the totals.
    assert_eq!(u(&r, "/summary/events"), 3000);
    assert_eq!(u(&r, "/summary/ops"), 3000);
    let intervals = r["intervals"].as_array().unwrap();
    assert!(!intervals.is_empty());
    let sum: u64 = intervals.iter().map(|i| i["ops"].as_u64().unwrap()).sum();
    assert_eq!(sum, 3000, "intervals add up to the totals");
    let err = stderr(&o);
    assert!(err.contains("(warm-up)"), "live lines mark warm-up: {err}");
    assert!(err.contains("tps:") && err.contains("p99:"), "{err}");
}

#[test]
fn open_loop_reports_response_and_service_time() {
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &["prepare", "oltp_point_select", "--table-size", "1000"],
    ));
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "oltp_point_select",
            "--table-size",
            "1000",
            "--rate",
            "500",
            "--arrival",
            "uniform",
            "--time",
            "2s",
            "--out",
            "r.json",
        ],
    ));
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    assert_eq!(s(&r, "/summary/schedule/mode"), "open_loop");
    let achieved = f(&r, "/summary/schedule/achieved_rate");
    assert!(
        (achieved - 500.0).abs() < 25.0,
        "achieved {achieved}/s of 500/s"
    );
    assert!(f(&r, "/summary/latency_ms/p50") >= f(&r, "/summary/service_time_ms/p50"));
    assert!(
        stdout(&o).contains("open loop at 500.0 events/s"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn sigint_still_writes_a_partial_result() {
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &["prepare", "oltp_read_only", "--table-size", "1000"],
    ));
    let child = Command::new(bin())
        .args([
            "run",
            "oltp_read_only",
            "--table-size",
            "1000",
            "--time",
            "60s",
            "--out",
            "r.json",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: signalling the child we just spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = output_within(child);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let r = read_json(&dir.path().join("r.json"));
    assert_valid_result(&r);
    assert_eq!(s(&r, "/status"), "partial");
    assert_eq!(s(&r, "/stop_reason"), "interrupted");
    assert!(u(&r, "/summary/events") > 0);
    assert!(f(&r, "/summary/duration_s") < 30.0);
}

#[test]
fn prepare_is_idempotent_and_cleanup_drops_only_its_own_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let target = format!("sqlite:{}", db.display());
    let o = ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "oltp_read_write",
            "--target",
            &target,
            "--tables",
            "3",
            "--table-size",
            "500",
            "--threads",
            "2",
        ],
    ));
    let out = stderr(&o);
    assert!(out.contains("Creating table 'sbtest3'"), "{out}");
    assert!(
        out.contains("Creating a secondary index on 'sbtest1'"),
        "{out}"
    );
    let sqlite = |sql: &str| rusqlite_count(&db, sql);
    for t in 1..=3 {
        assert_eq!(sqlite(&format!("SELECT COUNT(*) FROM sbtest{t}")), 500);
    }
    // Prepare the 3 tables at a table size.
    let prepare = |size: &str| {
        ok(loadcell(
            dir.path(),
            &[
                "prepare",
                "oltp_read_write",
                "--target",
                &target,
                "--tables",
                "3",
                "--table-size",
                size,
            ],
        ))
    };
    // Again: nothing to do.
    let o = prepare("500");
    assert!(stderr(&o).contains("nothing to do"), "{}", stderr(&o));
    // A bigger table size completes the existing tables.
    prepare("800");
    assert_eq!(sqlite("SELECT COUNT(*) FROM sbtest2"), 800);
    // A table of loadcell's dropped behind its back is simply created again
    // (its stale marker row once made prepare fail on a duplicate key).
    sqlite_exec(&db, "DROP TABLE sbtest3");
    let o = prepare("800");
    assert!(
        stderr(&o).contains("Creating table 'sbtest3'"),
        "{}",
        stderr(&o)
    );
    assert_eq!(sqlite("SELECT COUNT(*) FROM sbtest3"), 800);

    // A table loadcell did not create, named like one it would.
    sqlite_exec(
        &db,
        "CREATE TABLE sbtest4(id INTEGER PRIMARY KEY); CREATE TABLE users(id INTEGER)",
    );
    let o = ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "oltp_read_write",
            "--target",
            &target,
            "--tables",
            "4",
            "--table-size",
            "800",
        ],
    ));
    assert!(
        stderr(&o).contains("'sbtest4' already exists and was not created by loadcell"),
        "{}",
        stderr(&o)
    );

    ok(loadcell(
        dir.path(),
        &["cleanup", "oltp_read_write", "--target", &target],
    ));
    let left = sqlite_names(&db);
    assert_eq!(left, vec!["sbtest4".to_string(), "users".to_string()]);
}

/// Another writer drops loadcell's tables and creates them again under
/// the same names, right after loadcell's prepare (sysbench's schema, by
/// hand: sysbench has no SQLite driver; YCSB's JDBC `usertable`). SQLite
/// keeps nothing that tells a table from its re-creation; loadcell's tag
/// in the table's CREATE text does. Cleanup leaves the other writer's
/// tables, saying they are not loadcell's, and drops its own.
#[test]
fn cleanup_leaves_tables_another_writer_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let target = format!("sqlite:{}", db.display());
    let sbtest = "(id INTEGER NOT NULL, k INTEGER DEFAULT '0' NOT NULL, \
                  c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id))";
    ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "oltp_read_write",
            "--target",
            &target,
            "--tables",
            "4",
            "--table-size",
            "100",
        ],
    ));
    sqlite_exec(
        &db,
        &format!(
            "DROP TABLE sbtest1; DROP TABLE sbtest2; CREATE TABLE sbtest1{sbtest}; \
             CREATE TABLE sbtest2{sbtest}; INSERT INTO sbtest1 (id) VALUES (7);"
        ),
    );
    // sbtest4 as an earlier loadcell recorded it: no tag.
    sqlite_exec(
        &db,
        "UPDATE loadcell_objects SET identity = NULL WHERE name = 'sbtest4';",
    );
    let o = ok(loadcell(
        dir.path(),
        &["cleanup", "oltp_read_write", "--target", &target],
    ));
    let out = stderr(&o);
    for t in ["sbtest1", "sbtest2"] {
        assert!(
            out.contains(&format!("Leaving table '{t}': it is not loadcell's")),
            "{out}"
        );
    }
    assert!(out.contains("Dropping table 'sbtest3'"), "{out}");
    assert!(
        out.contains("Leaving table 'sbtest4': it was recorded by an earlier loadcell")
            && out.contains("drop it by hand: DROP TABLE sbtest4"),
        "{out}"
    );
    assert_eq!(
        sqlite_names(&db),
        ["loadcell_objects", "sbtest1", "sbtest2", "sbtest4"]
    );
    assert_eq!(rusqlite_count(&db, "SELECT MAX(id) FROM sbtest1"), 7);
    // Prepare neither loads into the earlier loadcell's table nor drops it.
    let o = ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "oltp_read_write",
            "--target",
            &target,
            "--tables",
            "4",
            "--table-size",
            "200",
        ],
    ));
    let out = stderr(&o);
    assert!(
        out.contains("Table 'sbtest4' was recorded by an earlier loadcell"),
        "{out}"
    );
    assert!(
        out.contains("'sbtest1' already exists and was not created by loadcell"),
        "{out}"
    );
    assert_eq!(rusqlite_count(&db, "SELECT COUNT(*) FROM sbtest4"), 100);
    assert_eq!(rusqlite_count(&db, "SELECT COUNT(*) FROM sbtest1"), 1);
    assert_eq!(rusqlite_count(&db, "SELECT COUNT(*) FROM sbtest3"), 200);
    sqlite_exec(
        &db,
        "DROP TABLE sbtest4; DROP TABLE sbtest1; DROP TABLE sbtest2;",
    );
    ok(loadcell(
        dir.path(),
        &["cleanup", "oltp_read_write", "--target", &target],
    ));
    assert!(sqlite_names(&db).is_empty(), "{:?}", sqlite_names(&db));

    // YCSB's usertable: loadcell's is dropped, another writer's is not.
    let ycsb = |cmd: &str| {
        let mut args = vec![cmd, "ycsb-a", "--target", &target];
        if cmd == "prepare" {
            args.extend(["--record-count", "100"]);
        }
        ok(loadcell(dir.path(), &args))
    };
    ycsb("prepare");
    let out = stderr(&ycsb("cleanup"));
    assert!(out.contains("Dropping table 'usertable'"), "{out}");
    assert!(sqlite_names(&db).is_empty(), "{:?}", sqlite_names(&db));
    ycsb("prepare");
    sqlite_exec(
        &db,
        "DROP TABLE usertable; CREATE TABLE usertable (YCSB_KEY VARCHAR(255) PRIMARY KEY, \
         FIELD0 TEXT, FIELD1 TEXT, FIELD2 TEXT, FIELD3 TEXT, FIELD4 TEXT, FIELD5 TEXT, \
         FIELD6 TEXT, FIELD7 TEXT, FIELD8 TEXT, FIELD9 TEXT); \
         INSERT INTO usertable (YCSB_KEY) VALUES ('theirs');",
    );
    let out = stderr(&ycsb("cleanup"));
    assert!(
        out.contains("Leaving table 'usertable': it is not loadcell's"),
        "{out}"
    );
    assert_eq!(sqlite_names(&db), ["usertable"]);
    assert_eq!(rusqlite_count(&db, "SELECT COUNT(*) FROM usertable"), 1);
}

#[test]
fn missing_tables_name_the_prepare_command() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("sqlite:{}", dir.path().join("empty.db").display());
    let o = loadcell(
        dir.path(),
        &[
            "run",
            "oltp_read_write",
            "--target",
            &target,
            "--time",
            "1s",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("table sbtest1 does not exist"), "{err}");
    assert!(
        err.contains("loadcell prepare oltp_read_write --target"),
        "{err}"
    );
}

/// A sweep's steps insert into one table: with `--auto-inc=off` and one
/// `--seed` for every step they drew the same ids, and the second step
/// died on the first's keys. Each step now takes its own part of one
/// permutation, and every insert lands.
#[test]
fn a_sweeps_steps_never_insert_the_same_ids() {
    let dir = tempfile::tempdir().unwrap();
    let table = ["--table-size", "100"];
    let mut prepare = vec!["prepare", "oltp_insert"];
    prepare.extend(table);
    ok(loadcell(dir.path(), &prepare));
    let mut sweep = vec!["sweep", "oltp_insert", "--auto-inc=off", "--seed", "7"];
    sweep.extend(table);
    sweep.extend(["--threads", "1,2", "--events", "300", "--json"]);
    let o = ok(loadcell(dir.path(), &sweep));
    let s: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("the sweep file");
    assert_eq!(s["complete"], true, "{}", stderr(&o));
    let rows = rusqlite_count(
        &dir.path().join("results/loadcell.sqlite"),
        "SELECT COUNT(*) FROM sbtest1",
    );
    assert_eq!(
        rows,
        100 + 2 * 300,
        "the preloaded rows and both steps' inserts"
    );
}

fn rusqlite_count(db: &std::path::Path, sql: &str) -> i64 {
    python_sqlite(db, sql).trim().parse().unwrap()
}

fn sqlite_exec(db: &std::path::Path, sql: &str) {
    python_sqlite(db, sql);
}

fn sqlite_names(db: &std::path::Path) -> Vec<String> {
    python_sqlite(
        db,
        "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name",
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// Python's sqlite3 module is always there on Debian; the sqlite3 CLI is not.
fn python_sqlite(db: &std::path::Path, sql: &str) -> String {
    let script = "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\ncur=c.executescript(sys.argv[2]) if ';' in sys.argv[2] else c.execute(sys.argv[2])\nfor row in cur.fetchall() if ';' not in sys.argv[2] else []: print(row[0])\nc.commit()\n";
    let o = Command::new("python3")
        .args(["-c", script])
        .arg(db)
        .arg(sql)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}
