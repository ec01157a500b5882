//! HBase PE's tests on a real HBase 2.5.8 through its Thrift2 gateway,
//! one server for the whole binary (it takes 20–30 s to start): one test
//! walks prepare, sequentialWrite without the WAL, randomRead with the
//! block cache off, scanRange100, a run whose rows were hidden by deletes
//! dated 2100 and cleanup, in order, then YCSB's load and workload a on
//! YCSB's HBase table.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{loadcell, ok, run_json, s, stderr, stdout, u};
use loadcell_core::wide::{Cell, Durability, WideConn};
use loadcell_core::{Driver, Target};
use loadcell_drivers::hbase::HbaseDriver;

/// Deletes each of `rows` of `table` as of `timestamp` (ms), which hides
/// any write dated before it: Thrift2's `deleteSingle` with a TDelete's
/// timestamp, written by hand, as loadcell's driver deletes at no
/// timestamp.
fn delete_as_of(port: u16, table: &str, rows: &[Vec<u8>], timestamp: i64) {
    let mut gateway = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let binary = |m: &mut Vec<u8>, bytes: &[u8]| {
        m.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        m.extend_from_slice(bytes);
    };
    for (seq, row) in rows.iter().enumerate() {
        let mut m = Vec::new();
        m.extend_from_slice(&0x8001_0001u32.to_be_bytes()); // a call
        binary(&mut m, b"deleteSingle");
        m.extend_from_slice(&(seq as i32).to_be_bytes());
        m.extend_from_slice(&[11, 0, 1]); // table
        binary(&mut m, table.as_bytes());
        m.extend_from_slice(&[12, 0, 2, 11, 0, 1]); // the TDelete; its row
        binary(&mut m, row);
        m.extend_from_slice(&[10, 0, 3]); // its timestamp
        m.extend_from_slice(&timestamp.to_be_bytes());
        m.extend_from_slice(&[0, 0]); // ends of the TDelete and the args
        gateway.write_all(&m).unwrap();
        // The reply: header, name, sequence, then an empty struct.
        let mut head = [0; 8];
        gateway.read_exact(&mut head).unwrap();
        let name_len = i32::from_be_bytes(head[4..].try_into().unwrap()) as usize;
        let mut rest = vec![0; name_len + 5];
        gateway.read_exact(&mut rest).unwrap();
        assert_eq!(
            (head[3], rest[name_len + 4]),
            (2, 0),
            "deleteSingle failed: {rest:?}"
        );
    }
}

/// Puts a row under a key PE never writes, as another writer would.
fn put_anothers_row(url: &str, table: &str) {
    let driver = HbaseDriver::from_target(&Target::parse(url).unwrap()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut conn = driver.connect().await.unwrap();
        let cell = Cell {
            qualifier: b"0",
            value: b"v",
        };
        conn.queue_put(table, b"mine", "info0", &[cell], Durability::Wal);
        conn.flush_puts().await.unwrap();
    });
}

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

    // Issue 35's case: every 20th row of the next run's 20,000 deleted
    // as of 2100, after a run of 40,000 rows; the run fails, naming them.
    let small = ["--threads", "8", "--value-size", "100", "--rows"];
    let r = run_json(
        d,
        "sequentialWrite",
        &url,
        &[&small[..], &["5000"]].concat(),
    );
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/expected"), 32768);
    let hidden: Vec<Vec<u8>> = (0..20_000)
        .step_by(20)
        .map(|n: u32| format!("{n:026}").into_bytes())
        .collect();
    delete_as_of(server.port, "TestTable", &hidden, 4_102_444_800_000);
    let mut run = vec!["run", "sequentialWrite", "--target", &url, "--json"];
    run.extend_from_slice(&small);
    run.push("2500");
    let o = loadcell(d, &run);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(u(&r, "/verification/expected"), 20_000);
    assert_eq!(u(&r, "/verification/found"), 19_000);
    let how = s(&r, "/verification/how");
    assert!(
        how.starts_with(
            "1000 of the 20000 rows read back missing (e.g. 00000000000000000000000000"
        ),
        "{how}"
    );

    // Another writer's row in loadcell's table: cleanup leaves the table
    // unless --force.
    put_anothers_row(&server.url, "TestTable");
    let o = loadcell(d, &["cleanup", "sequentialWrite", "--target", &url]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("1 of its 39001 rows are under keys loadcell never writes (e.g. \"mine\")"),
        "{}",
        stderr(&o)
    );
    ok(loadcell(
        d,
        &["cleanup", "sequentialWrite", "--target", &url, "--force"],
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
