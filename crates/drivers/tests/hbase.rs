//! The HBase driver against a real HBase 2.5.8 standalone and its Thrift2
//! gateway, one shared by every test here (the master takes 15 s or more
//! to start): each test uses tables of its own.

mod local_runtime;

use loadcell_core::wide::{Cell, Durability, Scan, ScanStart, TableSpec, WideConn};
use loadcell_core::{Driver, ErrorClass, Target};
use loadcell_drivers::hbase::{HbaseConn, HbaseDriver};
use local_runtime::block_on;

fn driver(url: &str) -> HbaseDriver {
    HbaseDriver::from_target(&Target::parse(url).expect("valid URL")).expect("valid target")
}

fn server() -> &'static loadcell_testkit::HbaseServer {
    loadcell_testkit::hbase().unwrap_or_else(|e| panic!("cannot start HBase: {e}"))
}

/// The gateway, with the master's web UI for version and counters.
fn with_master_info() -> String {
    let server = server();
    format!(
        "{}?master_info=127.0.0.1:{}",
        server.url, server.master_info_port
    )
}

async fn connect() -> HbaseConn {
    let server = server();
    driver(&server.url)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", server.log_tail(20)))
}

/// The master's count of mutations written without the WAL, once it is
/// at least `at_least`: the region server's metrics show in the master's
/// `/jmx` only once sampled (every few seconds).
async fn mutations_without_wal(driver: &HbaseDriver, conn: &mut HbaseConn, at_least: f64) -> f64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let counters = driver.server_counters(conn).await.unwrap();
        let count = counters
            .iter()
            .find(|(name, _)| name == "hbase_mutations_without_wal_total")
            .map(|(_, count)| *count);
        match count {
            Some(count) if count >= at_least => return count,
            _ if std::time::Instant::now() > deadline => {
                panic!("no WAL counter of {at_least} or more within a minute: {counters:?}")
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
        }
    }
}

/// PerformanceEvaluation's row key: 26 zero-padded digits.
fn row(i: u32) -> Vec<u8> {
    format!("{i:026}").into_bytes()
}

/// A 1000-byte value that differs from row to row.
fn value(i: u32) -> Vec<u8> {
    (0..1000u32)
        .map(|j| b'A' + ((i * 7 + j) % 26) as u8)
        .collect()
}

const FAMILY: &str = "info";
const MARKER: &str = "loadcell wide-column test";

async fn create(conn: &mut HbaseConn, table: &str, marker: &str, split_keys: &[&[u8]]) {
    if conn.table_marker(table).await.unwrap().is_some() {
        conn.drop_table(table).await.unwrap();
    }
    let spec = TableSpec {
        table,
        family: FAMILY,
        key_column: "",
        qualifiers: &[],
        split_keys,
        marker,
    };
    conn.create_table(&spec)
        .await
        .unwrap_or_else(|e| panic!("create {table}: {e}"));
}

/// Puts rows `rows` in batches of `batch`, with `durability`.
async fn put_rows(
    conn: &mut HbaseConn,
    table: &str,
    rows: std::ops::Range<u32>,
    batch: u32,
    durability: Durability,
) {
    for first in rows.clone().step_by(batch as usize) {
        let last = (first + batch).min(rows.end);
        for i in first..last {
            let v = value(i);
            let cells = [Cell {
                qualifier: b"0",
                value: &v,
            }];
            conn.queue_put(table, &row(i), FAMILY, &cells, durability);
        }
        let written = conn
            .flush_puts()
            .await
            .unwrap_or_else(|e| panic!("put: {e}"));
        assert_eq!(written, u64::from(last - first));
    }
}

#[test]
fn rows_put_with_and_without_the_wal_come_back_byte_identical_and_scan_in_order() {
    block_on(async {
        let mut conn = connect().await;
        let table = "lc_roundtrip";
        let middle = row(500);
        create(&mut conn, table, MARKER, &[&middle]).await;
        assert_eq!(
            conn.table_marker(table).await.unwrap().as_deref(),
            Some(MARKER)
        );
        assert_eq!(conn.flush_puts().await.unwrap(), 0, "nothing queued");
        put_rows(&mut conn, table, 0..500, 100, Durability::SkipWal).await;
        put_rows(&mut conn, table, 500..990, 2, Durability::Wal).await;
        put_rows(&mut conn, table, 990..1000, 1, Durability::Wal).await;
        assert_eq!(conn.each_key(table, &mut |_| {}).await.unwrap(), 1000);
        // The server counted the puts without the WAL, and only those (no
        // other test here skips it).
        let master = driver(&with_master_info());
        assert_eq!(
            mutations_without_wal(&master, &mut conn, 500.0).await,
            500.0
        );

        for i in 0..1000 {
            let mut cells = Vec::new();
            let found = conn
                .get(table, &row(i), FAMILY, &[], &mut |c| {
                    cells.push((c.qualifier.to_vec(), c.value.to_vec()))
                })
                .await
                .unwrap();
            assert!(found, "row {i}");
            assert_eq!(cells, vec![(b"0".to_vec(), value(i))], "row {i}");
        }
        let mut named = 0;
        assert!(conn
            .get(table, &row(7), FAMILY, &[b"0"], &mut |_| named += 1)
            .await
            .unwrap());
        assert_eq!(named, 1);
        assert!(!conn
            .get(table, &row(5000), FAMILY, &[], &mut |_| panic!("no cell"))
            .await
            .unwrap());

        // One round trip of 100 rows, across the split at row 500.
        let mut keys = Vec::new();
        let start = row(450);
        let scan = Scan {
            table,
            family: FAMILY,
            start: ScanStart::At(&start),
            stop_row: None,
            limit: Some(100),
            caching: 100,
        };
        let outcome = conn
            .scan(&scan, &mut |k| keys.push(k.to_vec()))
            .await
            .unwrap();
        assert_eq!((outcome.rows, outcome.cells), (100, 100));
        assert_eq!(keys, (450..550).map(row).collect::<Vec<_>>());

        // A scanner, 30 rows per round trip, to a stop row.
        let (after, stop) = (row(9), row(75));
        let scan = Scan {
            start: ScanStart::After(&after),
            stop_row: Some(&stop),
            limit: None,
            caching: 30,
            ..scan
        };
        keys.clear();
        let outcome = conn
            .scan(&scan, &mut |k| keys.push(k.to_vec()))
            .await
            .unwrap();
        assert_eq!(outcome.rows, 65);
        assert_eq!(keys, (10..75).map(row).collect::<Vec<_>>());

        conn.delete(table, &row(3)).await.unwrap();
        assert!(!conn
            .get(table, &row(3), FAMILY, &[], &mut |_| {})
            .await
            .unwrap());
        assert_eq!(conn.each_key(table, &mut |_| {}).await.unwrap(), 999);
        conn.drop_table(table).await.unwrap();
    });
}

#[test]
fn the_block_cache_goes_off_and_back_on_and_says_what_it_was() {
    block_on(async {
        let mut conn = connect().await;
        let table = "lc_block_cache";
        create(&mut conn, table, MARKER, &[]).await;
        let off = conn.set_block_cache(table, FAMILY, false).await.unwrap();
        assert!(off.was_on, "HBase's default is on");
        assert!(off.setting.contains("BLOCKCACHE"));
        let on = conn.set_block_cache(table, FAMILY, true).await.unwrap();
        assert!(!on.was_on, "the change took");
        assert!(
            conn.set_block_cache(table, FAMILY, true)
                .await
                .unwrap()
                .was_on
        );
        // The table still serves, its marker kept.
        put_rows(&mut conn, table, 0..10, 10, Durability::Wal).await;
        assert_eq!(conn.each_key(table, &mut |_| {}).await.unwrap(), 10);
        assert_eq!(
            conn.table_marker(table).await.unwrap().as_deref(),
            Some(MARKER)
        );
        let e = conn
            .set_block_cache(table, "nope", false)
            .await
            .unwrap_err();
        assert_eq!(e.message, "table lc_block_cache has no column family nope");
        conn.drop_table(table).await.unwrap();
    });
}

#[test]
fn a_table_without_a_marker_says_so_and_a_dropped_one_is_gone() {
    block_on(async {
        let mut conn = connect().await;
        create(&mut conn, "lc_foreign", "", &[]).await;
        create(&mut conn, "lc_marked", MARKER, &[]).await;
        assert_eq!(
            conn.table_marker("lc_foreign").await.unwrap().as_deref(),
            Some("")
        );
        assert_eq!(conn.table_marker("lc_absent").await.unwrap(), None);
        conn.drop_table("lc_marked").await.unwrap();
        assert_eq!(conn.table_marker("lc_marked").await.unwrap(), None);
        assert_eq!(
            conn.table_marker("lc_foreign").await.unwrap().as_deref(),
            Some("")
        );
        // An error from HBase is one line, and the connection goes on.
        let e = conn.drop_table("lc_absent").await.unwrap_err();
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(
            e.message.contains("lc_absent") && !e.message.contains('\n'),
            "{e}"
        );
        conn.drop_table("lc_foreign").await.unwrap();
    });
}

#[test]
fn the_version_comes_from_the_masters_web_ui_and_every_result_names_the_gateway() {
    block_on(async {
        let mut conn = connect().await;
        let info = driver(&with_master_info())
            .server_info(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            (info.product.as_str(), info.version.as_str()),
            ("HBase", "2.5.8 via Thrift2 gateway")
        );
        let plain = driver(&server().url);
        let info = plain.server_info(&mut conn).await.unwrap();
        assert_eq!(info.version, "version unknown via Thrift2 gateway");
        assert!(plain.server_counters(&mut conn).await.unwrap().is_empty());
    });
}

#[test]
fn a_closed_port_is_a_one_line_connection_error() {
    let port = loadcell_testkit::closed_port();
    let e = block_on(driver(&format!("hbase+thrift://127.0.0.1:{port}")).connect()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Connection);
    assert_eq!(
        e.message,
        format!("cannot connect to 127.0.0.1:{port}: connection refused (is the server running?)")
    );
}
