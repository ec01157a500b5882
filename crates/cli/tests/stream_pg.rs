//! The `stream` workload against a real PostgreSQL with logical
//! replication: produce and consume on 8 channels (a table, publication
//! and slot each) with order and completeness checked, cleanup dropping
//! the slots and publications and refusing what is not loadcell's, and a
//! backlog drained.

mod common;

use common::*;
use loadcell_testkit::TestServer;

fn postgres() -> TestServer {
    loadcell_testkit::postgres_logical(&[]).expect("postgres starts")
}

/// Names in `catalog`'s `column` that start with `prefix`, sorted.
fn names(server: &TestServer, catalog: &str, column: &str, prefix: &str) -> Vec<String> {
    let rows = sql(
        server,
        &format!("SELECT {column} FROM {catalog} WHERE {column} LIKE '{prefix}%' ORDER BY 1"),
    );
    rows.lines().map(str::to_string).collect()
}

#[test]
fn rows_on_8_channels_are_consumed_in_order_and_cleanup_drops_slots_and_publications_only() {
    let server = postgres();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let shape = ["--stream", "lceight", "--partitions", "8"];
    ok(loadcell(
        dir.path(),
        &[&["prepare", "stream", "--target", url][..], &shape].concat(),
    ));
    assert_eq!(
        names(
            &server,
            "pg_replication_slots",
            "slot_name",
            "loadcell_lceight"
        )
        .len(),
        8,
        "a slot per channel"
    );
    let r = run_json(
        dir.path(),
        "stream",
        url,
        &[
            &shape[..],
            &["--mode", "both", "--produce-rate", "10000", "--time", "2s"],
        ]
        .concat(),
    );
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    let produced = u(&r, "/verification/stream/produced");
    assert!(produced > 5_000, "{produced}");
    // Polls take whole transactions, so the drain gets none again.
    assert_eq!(u(&r, "/verification/stream/consumed"), produced);
    for field in ["missing", "duplicated", "gaps", "reorders", "untimed"] {
        assert_eq!(
            u(&r, &format!("/verification/stream/{field}")),
            0,
            "{field}"
        );
    }
    // The lag is sampled in WAL bytes from the slot catalogue.
    assert_eq!(s(&r, "/verification/stream/lag_unit"), "wal_bytes");
    assert!(
        r["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.pointer("/gauges/lag_wal_bytes").is_some()),
        "{}",
        r["intervals"]
    );

    // Someone else's table by a stream's name, and their slot.
    sql(&server, "CREATE TABLE theirs_0 (id int)");
    sql(
        &server,
        "SELECT pg_create_logical_replication_slot('theirs', 'pgoutput')",
    );
    for verb in ["prepare", "cleanup"] {
        let o = loadcell(
            dir.path(),
            &[verb, "stream", "--target", url, "--stream", "theirs"],
        );
        assert!(!o.status.success(), "{verb}");
        let err = stderr(&o);
        assert_eq!(err.trim().lines().count(), 1, "{verb}: {err}");
        assert!(
            err.contains("not loadcell's") || err.contains("not created by loadcell"),
            "{verb}: {err}"
        );
    }

    ok(loadcell(
        dir.path(),
        &["cleanup", "stream", "--target", url, "--stream", shape[1]],
    ));
    assert_eq!(
        names(&server, "pg_replication_slots", "slot_name", "loadcell"),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&server, "pg_publication", "pubname", "lceight"),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&server, "pg_tables", "tablename", "lceight"),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&server, "pg_replication_slots", "slot_name", "theirs"),
        ["theirs"]
    );
    assert_eq!(
        names(&server, "pg_tables", "tablename", "theirs"),
        ["theirs_0"]
    );
}

#[test]
fn a_consume_only_run_drains_the_backlog_prepare_loaded() {
    let server = postgres();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let shape = [
        "--stream",
        "lcbacklog",
        "--partitions",
        "4",
        "--mode",
        "consume",
    ];
    ok(loadcell(
        dir.path(),
        &[
            &["prepare", "stream", "--target", url, "--backlog", "5000"][..],
            &shape,
        ]
        .concat(),
    ));
    let r = run_json(
        dir.path(),
        "stream",
        url,
        &[&shape[..], &["--time", "2s"]].concat(),
    );
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    // Polls take whole transactions and acknowledge them, so the drain
    // after the run gets none again.
    assert_eq!(u(&r, "/verification/stream/consumed"), 5000);
    assert_eq!(u(&r, "/verification/stream/untimed"), 5000);
    assert_eq!(u(&r, "/verification/stream/duplicated"), 0);
    assert_eq!(
        u(&r, "/verification/stream/lag_at_end"),
        0,
        "caught up in the run"
    );
    ok(loadcell(
        dir.path(),
        &["cleanup", "stream", "--target", url, "--stream", shape[1]],
    ));
    assert_eq!(
        names(&server, "pg_replication_slots", "slot_name", "loadcell"),
        Vec::<String>::new()
    );
}

#[test]
fn a_consumer_stopped_mid_stream_and_started_again_gets_every_row_once() {
    let server = postgres();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    // The backlog's 100-row requests are transactions of 50 rows a
    // channel; polls of 7 rows end inside one unless a poll takes
    // transactions whole.
    let shape = [
        "--stream",
        "lcstop",
        "--partitions",
        "2",
        "--mode",
        "consume",
        "--poll-max",
        "7",
    ];
    let backlog = 100_000;
    ok(loadcell(
        dir.path(),
        &[
            &["prepare", "stream", "--target", url, "--backlog"][..],
            &[&backlog.to_string()],
            &shape,
        ]
        .concat(),
    ));
    // Stopped after 500 polls (a transaction of 50 rows each, at most)
    // with rows left, and no drain after it: the last acknowledgement
    // must reach the server before the replication connections close.
    let o = loadcell(
        dir.path(),
        &[
            &["run", "stream", "--target", url, "--json"][..],
            &shape,
            &["--events", "500", "--drain-timeout", "0s"],
        ]
        .concat(),
    );
    let first: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("a result");
    let first_consumed = u(&first, "/verification/stream/consumed");
    assert!(
        (1..backlog).contains(&first_consumed),
        "stopped mid-stream: {first_consumed} of {backlog}"
    );
    let second = run_json(
        dir.path(),
        "stream",
        url,
        &[&shape[..], &["--time", "1s"]].concat(),
    );
    assert_eq!(
        second["verification"]["ok"], true,
        "{}",
        second["verification"]
    );
    assert_eq!(
        first_consumed + u(&second, "/verification/stream/consumed"),
        backlog,
        "every row once: {first_consumed} in the first run"
    );
    for r in [&first, &second] {
        for field in ["duplicated", "gaps", "reorders"] {
            assert_eq!(u(r, &format!("/verification/stream/{field}")), 0, "{field}");
        }
    }
    ok(loadcell(
        dir.path(),
        &["cleanup", "stream", "--target", url, "--stream", shape[1]],
    ));
}

#[test]
fn the_default_stream_name_is_a_legal_postgresql_name() {
    let server = postgres();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &["prepare", "stream", "--target", url, "--partitions", "2"],
    ));
    assert_eq!(
        names(&server, "pg_tables", "tablename", "loadcell_stream"),
        ["loadcell_stream_0", "loadcell_stream_1"]
    );
    let r = run_json(
        dir.path(),
        "stream",
        url,
        &[
            "--partitions",
            "2",
            "--produce-rate",
            "2000",
            "--time",
            "1s",
        ],
    );
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert!(u(&r, "/verification/stream/consumed") > 0);
    ok(loadcell(
        dir.path(),
        &["cleanup", "stream", "--target", url],
    ));
    assert_eq!(
        names(&server, "pg_tables", "tablename", "loadcell_stream"),
        Vec::<String>::new()
    );
}
