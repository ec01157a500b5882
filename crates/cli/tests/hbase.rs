//! HBase PE's tests on a real HBase 2.5.8 through its Thrift2 gateway,
//! one server for the whole binary (it takes 20–30 s to start): one test
//! walks prepare, sequentialWrite without the WAL, randomRead with the
//! block cache off, scanRange100 and cleanup, in order, then YCSB's
//! load and workload a on YCSB's HBase table.

mod common;

use common::{loadcell, ok, run_json, s, stderr, u};

#[test]
fn pe_tests_run_on_hbase_through_its_thrift2_gateway() {
    let server = loadcell_testkit::hbase().unwrap_or_else(|e| panic!("HBase: {e}"));
    // With the master's web UI: HBase's version in the result.
    let url = format!(
        "{}?master_info=127.0.0.1:{}",
        server.url, server.master_info_port
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rows = ["--rows", "500", "--threads", "2", "--value-size", "100"];
    let with = |more: &[&'static str]| -> Vec<&str> {
        let mut all = rows.to_vec();
        all.extend_from_slice(more);
        all
    };

    ok(loadcell(
        d,
        &["prepare", "sequentialWrite", "--target", &url],
    ));

    // 2 clients x 500 rows, without the WAL.
    let r = run_json(
        d,
        "sequentialWrite",
        &url,
        &with(&["--write-to-wal", "false"]),
    );
    assert_eq!(u(&r, "/ops/put/errors"), 0, "{}", r["error_samples"]);
    assert_eq!(u(&r, "/ops/put/items"), 1000);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/found"), 1000);
    assert_eq!(s(&r, "/environment/server/product"), "HBase");
    assert_eq!(
        s(&r, "/environment/server/version"),
        "2.5.8 via Thrift2 gateway"
    );

    // Every row read is found, the family's block cache off meanwhile and
    // restored after.
    let r = run_json(d, "randomRead", &url, &with(&["--block-cache", "off"]));
    assert_eq!(u(&r, "/ops/get/count"), 1000);
    assert_eq!(u(&r, "/ops/get/errors"), 0);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    let how = s(&r, "/verification/how");
    assert!(
        how.contains("BLOCKCACHE") && how.contains("restored"),
        "{how}"
    );

    // Range scans of at most 100 rows, 100 a round trip.
    let r = run_json(d, "scanRange100", &url, &with(&["--caching", "100"]));
    assert_eq!(u(&r, "/ops/scan/count"), 10, "1000 rows / 100");
    assert!(u(&r, "/ops/scan/items") > 0);
    assert_eq!(u(&r, "/ops/scan/errors"), 0);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);

    // Cleanup drops loadcell's table: the read test then finds none.
    ok(loadcell(
        d,
        &["cleanup", "sequentialWrite", "--target", &url],
    ));
    let o = loadcell(
        d,
        &[&["run", "randomRead", "--target", &url][..], &rows].concat(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));

    // YCSB: usertable, family info0, a qualifier a field; the load's
    // rows counted, then workload a's reads all find theirs.
    let ycsb = ["--record-count", "1000", "--operation-count", "2000"];
    ok(loadcell(
        d,
        &[&["prepare", "ycsb-a", "--target", &url][..], &ycsb].concat(),
    ));
    let r = run_json(d, "ycsb-a", &url, &ycsb);
    let (reads, updates) = (u(&r, "/ops/read/count"), u(&r, "/ops/update/count"));
    assert_eq!(reads + updates, 2000);
    assert!(
        reads > 800 && updates > 800,
        "{reads} reads, {updates} updates"
    );
    // A read that misses its row is an error: none missed.
    assert_eq!(u(&r, "/ops/read/errors") + u(&r, "/ops/update/errors"), 0);
    ok(loadcell(d, &["cleanup", "ycsb-a", "--target", &url]));
    let o = loadcell(
        d,
        &[&["run", "ycsb-a", "--target", &url][..], &ycsb].concat(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}
