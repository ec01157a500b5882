//! The CQL driver against a real Cassandra 4.1.10, one shared by every
//! test here (it takes ~40 s to start): each test uses a keyspace of its
//! own.

mod local_runtime;

use loadcell_core::wide::{Cell, Durability, Scan, ScanStart, TableSpec, WideConn};
use loadcell_core::{Driver, ErrorClass, Target};
use loadcell_drivers::cql::{CqlConnection, CqlDriver};
use local_runtime::block_on;

fn driver(keyspace: &str) -> CqlDriver {
    let server =
        loadcell_testkit::cassandra().unwrap_or_else(|e| panic!("cannot start Cassandra: {e}"));
    eprintln!(
        "Cassandra up in {:.1} s (pid {})",
        server.started_in.as_secs_f64(),
        server.pid
    );
    CqlDriver::from_target(&Target::parse(&server.url(keyspace)).expect("valid URL"))
        .expect("valid target")
}

async fn connect(driver: &CqlDriver) -> CqlConnection {
    driver
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

const Q: &[u8] = b"0";

fn spec<'a>(table: &'a str, marker: &'a str) -> TableSpec<'a> {
    TableSpec {
        table,
        family: "info0",
        key_column: "key",
        qualifiers: &[Q, b"other"],
        split_keys: &[],
        marker,
    }
}

fn put(conn: &mut CqlConnection, table: &str, row: &[u8], value: &[u8]) {
    conn.queue_put(
        table,
        row,
        "info0",
        &[Cell {
            qualifier: Q,
            value,
        }],
        Durability::Wal,
    );
}

#[test]
fn puts_gets_scans_deletes_and_counts_rows_with_the_marker_kept() {
    let driver = driver("lc_driver");
    block_on(async {
        let mut conn = connect(&driver).await;
        let info = driver.server_info(&mut conn).await.unwrap();
        assert_eq!(
            (info.product.as_str(), info.version.as_str()),
            ("Cassandra", "4.1.10")
        );
        let _ = conn.drop_table("t").await;
        conn.create_table(&spec("t", "loadcell run 7"))
            .await
            .unwrap();
        assert_eq!(
            conn.table_marker("t").await.unwrap().as_deref(),
            Some("loadcell run 7")
        );
        assert_eq!(conn.table_marker("absent").await.unwrap(), None);

        // One put, then three in one flush.
        put(&mut conn, "t", b"row-0", b"value-0");
        assert_eq!(conn.flush_puts().await.unwrap(), 1);
        for i in 1..4 {
            put(
                &mut conn,
                "t",
                format!("row-{i}").as_bytes(),
                format!("value-{i}").as_bytes(),
            );
        }
        assert_eq!(conn.flush_puts().await.unwrap(), 3);
        let mut keys = Vec::new();
        let rows = conn.each_key("t", &mut |key| keys.push(key.to_vec())).await;
        assert_eq!(rows.unwrap(), 4);
        keys.sort();
        assert_eq!(keys, [&b"row-0"[..], b"row-1", b"row-2", b"row-3"]);

        let mut cells = Vec::new();
        let found = conn
            .get("t", b"row-2", "info0", &[], &mut |c| {
                cells.push((c.qualifier.to_vec(), c.value.to_vec()))
            })
            .await
            .unwrap();
        assert!(found);
        assert_eq!(cells, [(Q.to_vec(), b"value-2".to_vec())]);
        let mut named = 0;
        assert!(conn
            .get("t", b"row-3", "info0", &[Q], &mut |c| {
                assert_eq!(c.value, b"value-3");
                named += 1;
            })
            .await
            .unwrap());
        assert_eq!(named, 1);
        // Only the read of named columns (not `SELECT *`) asks the server
        // to leave the result metadata out of its replies.
        let statements = format!("{conn:?}");
        assert_eq!(
            statements.matches("skip_result_metadata: true").count(),
            1,
            "{statements}"
        );
        assert!(!conn
            .get("t", b"nope", "info0", &[], &mut |_| panic!("no cells"))
            .await
            .unwrap());

        // Token order: a whole scan in pages of one sees every row once;
        // a limited one stops at its limit; one continued after a row
        // sees the rows after it.
        let mut seen = Vec::new();
        let whole = Scan {
            table: "t",
            family: "info0",
            start: ScanStart::First,
            stop_row: None,
            limit: None,
            caching: 1,
        };
        let outcome = conn
            .scan(&whole, &mut |row| seen.push(row.to_vec()))
            .await
            .unwrap();
        assert_eq!((outcome.rows, outcome.cells), (4, 4));
        let mut sorted = seen.clone();
        sorted.sort();
        assert_eq!(sorted, [b"row-0", b"row-1", b"row-2", b"row-3"]);
        let limited = Scan {
            start: ScanStart::At(&seen[0]),
            limit: Some(2),
            caching: 100,
            ..whole
        };
        let mut rows = Vec::new();
        conn.scan(&limited, &mut |row| rows.push(row.to_vec()))
            .await
            .unwrap();
        assert_eq!(rows, seen[..2]);
        let after = Scan {
            start: ScanStart::After(&seen[1]),
            limit: None,
            ..whole
        };
        let mut rows = Vec::new();
        conn.scan(&after, &mut |row| rows.push(row.to_vec()))
            .await
            .unwrap();
        assert_eq!(rows, seen[2..]);

        conn.delete("t", b"row-0").await.unwrap();
        assert_eq!(conn.each_key("t", &mut |_| {}).await.unwrap(), 3);

        let off = conn.set_block_cache("t", "info0", false).await.unwrap();
        assert!(off.was_on && off.setting.contains("caching"), "{off:?}");
        let on = conn.set_block_cache("t", "info0", true).await.unwrap();
        assert!(!on.was_on);

        conn.drop_table("t").await.unwrap();
        assert_eq!(conn.table_marker("t").await.unwrap(), None);
    });
}

#[test]
fn skipping_the_wal_is_refused_with_the_reason() {
    let driver = driver("lc_wal");
    block_on(async {
        let mut conn = connect(&driver).await;
        let why = conn.refuses_skip_wal().expect("Cassandra cannot skip it");
        assert!(why.contains("commit log"), "{why}");
        conn.queue_put(
            "t",
            b"r",
            "info0",
            &[Cell {
                qualifier: Q,
                value: b"v",
            }],
            Durability::SkipWal,
        );
        let e = conn.flush_puts().await.unwrap_err();
        assert_eq!(e.class, ErrorClass::Fatal);
        assert_eq!(e.message, why);
    });
}

#[test]
fn a_missing_table_is_a_fatal_error_that_names_it() {
    let driver = driver("lc_missing");
    block_on(async {
        let mut conn = connect(&driver).await;
        let e = conn
            .get("absent", b"r", "info0", &[], &mut |_| {})
            .await
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(
            e.message.contains("\"absent\"") && e.message.contains("prepare"),
            "{e}"
        );
    });
}

#[test]
fn an_unreachable_node_is_a_connection_error() {
    let port = loadcell_testkit::closed_port();
    let driver =
        CqlDriver::from_target(&Target::parse(&format!("cql://127.0.0.1:{port}/ks")).unwrap())
            .unwrap();
    let e = block_on(driver.connect()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Connection);
    assert!(e.message.contains(&port.to_string()), "{e}");
}
