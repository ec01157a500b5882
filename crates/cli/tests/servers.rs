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

    // A table that is not ours survives cleanup; so does one of loadcell's
    // names that another tool dropped and created again (sysbench uses the
    // same names).
    sql(
        &server,
        "CREATE TABLE customer_data (id INTEGER PRIMARY KEY)",
    );
    std::thread::sleep(std::time::Duration::from_millis(1100)); // MySQL's CREATE_TIME is in seconds.
    sql(&server, "DROP TABLE sbtest2");
    sql(&server, "CREATE TABLE sbtest2 (id INTEGER PRIMARY KEY)");
    let o = ok(loadcell(
        dir.path(),
        &["cleanup", "oltp_read_write", "--target", &url],
    ));
    assert!(
        stdout(&o).contains("Leaving table 'sbtest2': it was dropped and created again"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        tables_in_db(&server),
        vec!["customer_data".to_string(), "sbtest2".to_string()]
    );
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
        &mut server,
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
