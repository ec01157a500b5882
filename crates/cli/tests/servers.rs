//! The OLTP suite through the binary against real MariaDB and PostgreSQL
//! servers started on free loopback ports: tables and row counts, queries
//! per transaction for every workload, cleanup, and failures (wrong
//! password, missing tables, server killed mid-run).

mod common;

use std::time::Duration;

use common::*;
use loadcell_testkit::TestServer;

/// (workload, statements per event) with default options.
const WORKLOADS: &[(&str, u64)] = &[
    ("oltp_read_write", 20),
    ("oltp_read_only", 16),
    ("oltp_write_only", 6),
    ("oltp_point_select", 1),
    ("oltp_update_index", 1),
    ("oltp_update_non_index", 1),
    ("oltp_delete", 1),
    ("oltp_insert", 1),
];

fn tables_in_db(server: &TestServer) -> Vec<String> {
    let q = match server.kind() {
        loadcell_testkit::ServerKind::MariaDb => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name"
        }
        loadcell_testkit::ServerKind::Postgres => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name"
        }
        other => panic!("{other:?} is not a SQL server"),
    };
    sql(server, q).lines().map(str::to_string).collect()
}

fn suite(server: TestServer, product: &str) {
    let dir = tempfile::tempdir().unwrap();
    let url = server.url().to_string();
    let common = [
        "--target",
        url.as_str(),
        "--tables",
        "2",
        "--table-size",
        "2000",
    ];

    let mut args = vec!["prepare", "oltp_read_write", "--threads", "2"];
    args.extend(common);
    ok(loadcell(dir.path(), &args));
    assert_eq!(sql(&server, "SELECT COUNT(*) FROM sbtest1"), "2000");
    assert_eq!(sql(&server, "SELECT COUNT(*) FROM sbtest2"), "2000");
    assert_eq!(sql(&server, "SELECT MAX(id) FROM sbtest2"), "2000");
    let c = sql(&server, "SELECT c FROM sbtest1 WHERE id = 7");
    assert_eq!(c.len(), 119, "{c}");

    for (workload, per_event) in WORKLOADS {
        let out = format!("{workload}.json");
        let mut args = vec![
            "run",
            workload,
            "--threads",
            "2",
            "--events",
            "200",
            "--out",
            &out,
        ];
        args.extend(common);
        ok(loadcell(dir.path(), &args));
        let r = read_json(&dir.path().join(&out));
        assert_valid_result(&r);
        assert_eq!(s(&r, "/status"), "complete", "{workload}");
        assert_eq!(u(&r, "/summary/events"), 200, "{workload}");
        // Statements of attempts rolled back on a deadlock count too.
        let (ops, retries) = (u(&r, "/summary/ops"), u(&r, "/summary/retries"));
        if retries == 0 {
            assert_eq!(ops, 200 * per_event, "{workload}: statements per event");
        } else {
            assert!(
                (200 * per_event..=(200 + retries) * per_event).contains(&ops),
                "{workload}: {ops} statements for 200 events and {retries} retries"
            );
        }
        assert_eq!(s(&r, "/environment/server/product"), product);
        assert!(!s(&r, "/environment/server/version").is_empty());
        assert!(
            !s(&r, "/config/target").contains("lcpass"),
            "password redacted"
        );
        assert!(
            !r["command"].to_string().contains("lcpass"),
            "password redacted in argv"
        );
        assert_eq!(
            u(&r, "/summary/errors"),
            u(&r, "/summary/retries"),
            "{workload}: only retryable errors"
        );
    }
    // The server's own counters are sampled at every interval, counters
    // as rates: rows read by InnoDB, tuples fetched by PostgreSQL.
    let mut args = vec![
        "run",
        "oltp_read_only",
        "--time",
        "2s",
        "--report-interval",
        "500ms",
    ];
    args.extend(["--out", "counters.json"]);
    args.extend(common);
    ok(loadcell(dir.path(), &args));
    let r = read_json(&dir.path().join("counters.json"));
    assert_server_counter(
        &r,
        if product == "PostgreSQL" {
            "tup_fetched"
        } else {
            "rows_read"
        },
    );
    // oltp_insert added rows with database-assigned ids.
    let max_id: u64 = sql(&server, "SELECT MAX(id) FROM sbtest1").parse().unwrap();
    let rows_1: u64 = sql(&server, "SELECT COUNT(*) FROM sbtest1")
        .parse()
        .unwrap();
    let rows_2: u64 = sql(&server, "SELECT COUNT(*) FROM sbtest2")
        .parse()
        .unwrap();
    assert!(max_id > 2000 || rows_1 + rows_2 != 4000, "inserts landed");

    // A table that is not ours survives cleanup; so do loadcell's names
    // that another tool dropped and created again (sysbench uses the same
    // names), even within the second loadcell created the table in.
    sql(
        &server,
        "CREATE TABLE customer_data (id INTEGER PRIMARY KEY)",
    );
    sql(&server, "DROP TABLE sbtest2");
    sql(&server, "CREATE TABLE sbtest2 (id INTEGER PRIMARY KEY)");
    let mut args = vec!["prepare", "oltp_read_write", "--target", &url];
    args.extend(["--tables", "3", "--table-size", "100"]);
    in_one_second(
        || {
            let o = ok(loadcell(dir.path(), &args));
            let out = stderr(&o);
            assert!(out.contains("Creating table 'sbtest3'"), "{out}");
            assert!(
                out.contains("'sbtest2' already exists and was not created by loadcell"),
                "{out}"
            );
            sql(&server, "DROP TABLE sbtest3");
            sql(&server, "CREATE TABLE sbtest3 (id INTEGER PRIMARY KEY)");
        },
        || {
            sql(&server, "DROP TABLE sbtest3");
        },
    );
    let o = ok(loadcell(
        dir.path(),
        &["cleanup", "oltp_read_write", "--target", &url],
    ));
    assert!(
        stderr(&o).contains("Leaving table 'sbtest3': it is not loadcell's"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        tables_in_db(&server),
        ["customer_data", "sbtest2", "sbtest3"]
    );
}

/// Runs sysbench's own `oltp_read_write` `command` (prepare, cleanup) on
/// `server` with `tables` tables of 100 rows.
fn sysbench(server: &TestServer, command: &str, tables: u32) {
    use loadcell_testkit::{ServerKind, DB_NAME, DB_PASSWORD, DB_USER};
    // The driver's name is also its options' prefix (--mysql-port).
    let o = match server.kind() {
        ServerKind::MariaDb => "mysql",
        ServerKind::Postgres => "pgsql",
        other => panic!("{other:?} is not a SQL server"),
    };
    let out = std::process::Command::new("sysbench")
        .arg("oltp_read_write")
        .arg(format!("--db-driver={o}"))
        .arg(format!("--{o}-host=127.0.0.1"))
        .arg(format!("--{o}-port={}", server.port))
        .arg(format!("--{o}-user={DB_USER}"))
        .arg(format!("--{o}-password={DB_PASSWORD}"))
        .arg(format!("--{o}-db={DB_NAME}"))
        .arg(format!("--tables={tables}"))
        .arg("--table-size=100")
        .arg(command)
        .output()
        .expect("sysbench runs (scripts/install-test-deps.sh installs it)");
    assert!(
        out.status.success(),
        "sysbench {command}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `steps` within one wall-clock second (MySQL's CREATE_TIME has
/// one-second resolution), starting just after a second begins; runs
/// `reset` and tries again when they straddled two seconds. After five
/// tries the last one stands: the checks that follow still hold, only
/// less sharply.
fn in_one_second(mut steps: impl FnMut(), mut reset: impl FnMut()) {
    use std::time::{SystemTime, UNIX_EPOCH};
    let now = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    for attempt in 1..=5 {
        std::thread::sleep(Duration::from_nanos(
            1_000_000_000 - u64::from(now().subsec_nanos()) + 5_000_000,
        ));
        let second = now().as_secs();
        steps();
        if now().as_secs() == second {
            return;
        }
        eprintln!("attempt {attempt} took more than the second it started in");
        if attempt < 5 {
            reset();
        }
    }
}

/// loadcell's prepare, then sysbench's cleanup and prepare re-creating two
/// of loadcell's three tables in the same second; YCSB's `usertable`
/// re-created in the same second by plain SQL; and a prepare interrupted
/// before it finished a table, whose table sysbench then re-created.
/// Cleanup leaves every table it did not create, saying so, and drops the
/// ones it did.
fn recreated_by_another_tool(server: TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let url = server.url().to_string();
    let reset = || {
        sql(
            &server,
            "DROP TABLE IF EXISTS sbtest1, sbtest2, sbtest3, usertable, loadcell_objects",
        );
    };
    let cleanup = |workload: &str| {
        stderr(&ok(loadcell(
            dir.path(),
            &["cleanup", workload, "--target", &url],
        )))
    };

    in_one_second(
        || {
            ok(loadcell(
                dir.path(),
                &[
                    "prepare",
                    "oltp_read_write",
                    "--target",
                    &url,
                    "--tables",
                    "3",
                    "--table-size",
                    "100",
                ],
            ));
            sysbench(&server, "cleanup", 2);
            sysbench(&server, "prepare", 2);
        },
        reset,
    );
    let out = cleanup("oltp_read_write");
    for t in ["sbtest1", "sbtest2"] {
        assert!(
            out.contains(&format!("Leaving table '{t}': it is not loadcell's")),
            "{out}"
        );
    }
    assert!(out.contains("Dropping table 'sbtest3'"), "{out}");
    assert_eq!(tables_in_db(&server), ["sbtest1", "sbtest2"]);
    assert_eq!(sql(&server, "SELECT COUNT(*) FROM sbtest2"), "100");
    sysbench(&server, "cleanup", 2);

    let ycsb_prepare = || {
        ok(loadcell(
            dir.path(),
            &[
                "prepare",
                "ycsb-a",
                "--target",
                &url,
                "--record-count",
                "100",
            ],
        ))
    };
    ycsb_prepare();
    let out = cleanup("ycsb-a");
    assert!(out.contains("Dropping table 'usertable'"), "{out}");
    assert!(tables_in_db(&server).is_empty());
    in_one_second(
        || {
            ycsb_prepare();
            sql(&server, "DROP TABLE usertable");
            sql(
                &server,
                "CREATE TABLE usertable (YCSB_KEY VARCHAR(255) PRIMARY KEY, FIELD0 TEXT, \
                 FIELD1 TEXT, FIELD2 TEXT, FIELD3 TEXT, FIELD4 TEXT, FIELD5 TEXT, FIELD6 TEXT, \
                 FIELD7 TEXT, FIELD8 TEXT, FIELD9 TEXT)",
            );
        },
        reset,
    );
    let out = cleanup("ycsb-a");
    assert!(
        out.contains("Leaving table 'usertable': it is not loadcell's"),
        "{out}"
    );
    assert_eq!(tables_in_db(&server), ["usertable"]);
    sql(&server, "DROP TABLE usertable");

    // Interrupted while loading: the marker row is written before the
    // table is created, and the table must not be taken for loadcell's
    // once another tool has created it again.
    let mut prepare = std::process::Command::new(bin())
        .args(["prepare", "oltp_read_write", "--target", &url])
        .args(["--tables", "1", "--table-size", "10000000"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !tables_in_db(&server).contains(&"sbtest1".to_string()) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "prepare never created sbtest1"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    prepare.kill().unwrap();
    prepare.wait().unwrap();
    sysbench(&server, "cleanup", 1);
    sysbench(&server, "prepare", 1);
    let out = cleanup("oltp_read_write");
    assert!(
        out.contains("Leaving table 'sbtest1': it is not loadcell's"),
        "{out}"
    );
    assert_eq!(tables_in_db(&server), ["sbtest1"]);
    assert_eq!(sql(&server, "SELECT COUNT(*) FROM sbtest1"), "100");
}

#[test]
fn mariadb_cleanup_leaves_tables_recreated_by_another_tool() {
    recreated_by_another_tool(loadcell_testkit::mariadb().expect("MariaDB starts"));
}

#[test]
fn postgres_cleanup_leaves_tables_recreated_by_another_tool() {
    recreated_by_another_tool(loadcell_testkit::postgres().expect("PostgreSQL starts"));
}

fn failures(mut server: TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let url = server.url().to_string();

    let wrong = url.replace("lcpass", "wrong-secret");
    let o = loadcell(
        dir.path(),
        &["run", "oltp_point_select", "--target", &wrong],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("check the user and password"), "{err}");
    assert!(!err.contains("wrong-secret"), "{err}");

    let o = loadcell(dir.path(), &["run", "oltp_point_select", "--target", &url]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("run `loadcell prepare oltp_point_select"),
        "{}",
        stderr(&o)
    );

    ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "oltp_point_select",
            "--target",
            &url,
            "--table-size",
            "1000",
        ],
    ));
    let (o, r) = run_and_kill_server(
        dir.path(),
        &[
            "oltp_point_select",
            "--target",
            &url,
            "--table-size",
            "1000",
            "--threads",
            "2",
        ],
        || server.kill(),
        Duration::from_millis(2000),
    );
    assert!(
        u(&r, "/summary/events") > 0,
        "events before the kill are kept"
    );
    assert!(u(&r, "/summary/errors") > 0, "errors are counted");
    assert!(
        stdout(&o).contains("partial run (server_unreachable)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn mariadb_oltp_suite() {
    suite(
        loadcell_testkit::mariadb().expect("MariaDB starts"),
        "MariaDB",
    );
}

#[test]
fn postgres_oltp_suite() {
    suite(
        loadcell_testkit::postgres().expect("PostgreSQL starts"),
        "PostgreSQL",
    );
}

#[test]
fn mariadb_failures() {
    failures(loadcell_testkit::mariadb().expect("MariaDB starts"));
}

#[test]
fn postgres_failures() {
    failures(loadcell_testkit::postgres().expect("PostgreSQL starts"));
}
