//! HBase PE's tests over CQL, against one real Cassandra 4.1.10 for the
//! whole binary (it takes ~40 s to start): one test walks prepare, the
//! tests, refusals and cleanup in order, and kills the server last.

mod common;

use std::time::Duration;

use common::{loadcell, ok, run_and_kill_server, run_json, s, stderr, u};
use loadcell_core::wide::{TableSpec, WideConn};
use loadcell_core::{Driver, Target};
use loadcell_drivers::cql::CqlDriver;

/// A table no loadcell `prepare` made: no marker.
fn make_table_by_hand(url: &str, table: &str) {
    let driver = CqlDriver::from_target(&Target::parse(url).unwrap()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut conn = driver.connect().await.unwrap();
        let spec = TableSpec {
            table,
            family: "info0",
            key_column: "key",
            qualifiers: &[b"0"],
            split_keys: &[],
            marker: "made by hand",
        };
        conn.create_table(&spec).await.unwrap();
    });
}

fn one_line_error(o: &std::process::Output) -> String {
    assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    e
}

#[test]
fn pe_tests_run_on_cassandra_and_cleanup_drops_only_loadcells_table() {
    let server = loadcell_testkit::cassandra().unwrap_or_else(|e| panic!("Cassandra: {e}"));
    let url = server.url("lc_pe");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rows = ["--rows", "500", "--threads", "2", "--value-size", "100"];
    let with = |more: &[&'static str]| -> Vec<&str> {
        let mut all = rows.to_vec();
        all.extend_from_slice(more);
        all
    };

    // No table yet: refused before any load, naming prepare.
    let o = loadcell(
        d,
        &[&["run", "randomRead", "--target", &url][..], &rows].concat(),
    );
    let e = one_line_error(&o);
    assert!(
        e.contains("table TestTable does not exist") && e.contains("loadcell prepare randomRead"),
        "{e}"
    );

    ok(loadcell(
        d,
        &["prepare", "sequentialWrite", "--target", &url],
    ));

    // Rows the read test reads are not there yet.
    let o = loadcell(
        d,
        &[&["run", "randomRead", "--target", &url][..], &rows].concat(),
    );
    let e = one_line_error(&o);
    assert!(e.contains("run sequentialWrite"), "{e}");

    // 2 clients x 500 rows, a 2 MB buffer a request: one request each.
    let r = run_json(d, "sequentialWrite", &url, &rows);
    assert_eq!(u(&r, "/ops/put/items"), 1000);
    assert_eq!(u(&r, "/ops/put/errors"), 0);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/found"), 1000);
    assert_eq!(u(&r, "/verification/expected"), 1000);

    // Every row read is found, with a value of PE's pattern.
    let r = run_json(d, "randomRead", &url, &with(&["--block-cache", "off"]));
    assert_eq!(u(&r, "/ops/get/count"), 1000);
    assert_eq!(u(&r, "/ops/get/items"), 1000);
    assert_eq!(u(&r, "/ops/get/errors"), 0);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    let how = s(&r, "/verification/how");
    assert!(how.contains("caching") && how.contains("restored"), "{how}");

    // Range scans return at most their range.
    let r = run_json(d, "scanRange100", &url, &with(&["--caching", "100"]));
    assert_eq!(u(&r, "/ops/scan/count"), 10, "1000 rows / 100");
    assert!(u(&r, "/ops/scan/items") > 0);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert!(u(&r, "/verification/found") <= 100);

    // Batches of 100 puts: rows are the items, 100 a request.
    let r = run_json(
        d,
        "randomWrite",
        &url,
        &with(&["--auto-flush", "true", "--multi-put", "100"]),
    );
    assert_eq!(u(&r, "/ops/put/count"), 10);
    assert_eq!(u(&r, "/ops/put/items"), 1000);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);

    // YCSB's workload a on YCSB's Cassandra table, and e's scans.
    let ycsb = ["--record-count", "1000", "--operation-count", "2000"];
    ok(loadcell(
        d,
        &[&["prepare", "ycsb-a", "--target", &url][..], &ycsb].concat(),
    ));
    let r = run_json(d, "ycsb-a", &url, &ycsb);
    let (reads, updates) = (u(&r, "/ops/read/count"), u(&r, "/ops/update/count"));
    assert_eq!((reads, updates), (1000, 1000));
    assert_eq!(u(&r, "/ops/read/errors") + u(&r, "/ops/update/errors"), 0);
    let r = run_json(d, "ycsb-e", &url, &ycsb);
    assert!(u(&r, "/ops/scan/count") > 0);
    assert_eq!(u(&r, "/ops/scan/errors"), 0);
    ok(loadcell(d, &["cleanup", "ycsb-a", "--target", &url]));

    // Cassandra cannot skip its commit log: one line, before any load.
    let o = loadcell(
        d,
        &[
            &["run", "randomWrite", "--target", &url][..],
            &with(&["--write-to-wal", "false"]),
        ]
        .concat(),
    );
    let e = one_line_error(&o);
    assert!(
        e.contains("--write-to-wal false") && e.contains("commit log"),
        "{e}"
    );

    // Cleanup drops loadcell's table and refuses one made by hand.
    make_table_by_hand(&url, "HandMade");
    let o = loadcell(
        d,
        &[
            "cleanup",
            "sequentialWrite",
            "--target",
            &url,
            "--table",
            "HandMade",
        ],
    );
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("not created by loadcell"),
        "{}",
        stderr(&o)
    );
    ok(loadcell(
        d,
        &["cleanup", "sequentialWrite", "--target", &url],
    ));
    let o = loadcell(
        d,
        &[&["run", "randomRead", "--target", &url][..], &rows].concat(),
    );
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));

    // Last, as it takes the server from every later test: a killed
    // server leaves a partial result with the rows sent before.
    ok(loadcell(d, &["prepare", "randomWrite", "--target", &url]));
    let (_, r) = run_and_kill_server(
        d,
        &[
            "randomWrite",
            "--target",
            &url,
            "--rows",
            "100000000",
            "--auto-flush",
            "true",
        ],
        || server.kill(),
        Duration::from_secs(3),
    );
    assert!(
        u(&r, "/summary/items") > 0,
        "rows put before the kill are kept"
    );
}
