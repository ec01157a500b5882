//! `loadcell advise` on PostgreSQL: each rule against a server configured
//! to trigger it and one configured not to, with real load moving the
//! counters. One server keeps testkit's settings and takes the reloadable
//! ones (ALTER SYSTEM + reload, restored after each case); a second starts
//! with 128 kB of shared_buffers and 20 connections.

mod common;

use std::path::Path;
use std::time::Duration;

use common::advise::*;
use common::*;
use loadcell_testkit::TestServer;

const SMALL: &[(&str, &str)] = &[("shared_buffers", "128kB"), ("max_connections", "20")];

#[test]
fn postgres_rules_fire_on_the_server_set_to_trigger_them_and_pass_on_the_other() {
    let roomy = loadcell_testkit::postgres().unwrap_or_else(|e| panic!("{e}"));
    let small = loadcell_testkit::postgres_with(SMALL).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();

    reads_missing_shared_buffers(dir, &roomy, &small);
    more_sessions_than_connections(dir, &roomy, &small);
    checkpoints_requested_by_wal_volume(dir, &roomy);
}

/// Point selects over 20,000 rows (a few MB) through 16 buffers miss:
/// fires; through testkit's 128 MB they hit: passes.
fn reads_missing_shared_buffers(dir: &Path, roomy: &TestServer, small: &TestServer) {
    let args = [
        "--tables",
        "1",
        "--table-size",
        "20000",
        "--prepare",
        "--threads",
        "2",
        "--time",
        "2s",
    ];
    for (name, server) in [("select-roomy", roomy), ("select-small", small)] {
        let r = read_json(&run_to(dir, name, "oltp_point_select", server.url(), &args));
        assert_eq!(s(&r, "/status"), "complete");
    }
    let evidence = fires(&advise(dir, small.url(), None), "shared_buffers");
    assert!(evidence.contains("shared_buffers = 128K"), "{evidence}");
    passes(&advise(dir, roomy.url(), None), "shared_buffers");
}

/// 24 sessions against 20 connections, 3 of them reserved: refused, fires;
/// against 300: passes.
fn more_sessions_than_connections(dir: &Path, roomy: &TestServer, small: &TestServer) {
    let args = [
        "--tables",
        "1",
        "--table-size",
        "20000",
        "--threads",
        "24",
        "--time",
        "1s",
    ];
    let refused = run_to(dir, "many-small", "oltp_point_select", small.url(), &args);
    let evidence = fires(&advise(dir, small.url(), Some(&refused)), "max_connections");
    assert!(evidence.contains("max_connections = 20"), "{evidence}");
    assert!(evidence.contains("the run's sessions: 24"), "{evidence}");
    let fine = run_to(dir, "many-roomy", "oltp_point_select", roomy.url(), &args);
    passes(&advise(dir, roomy.url(), Some(&fine)), "max_connections");
}

/// 20 bulk inserts of ~6 MB of WAL each, about 120 MB whatever the
/// machine's speed (a timed run wrote 1.6 GB on a quiet one, past even
/// 1 GB): with max_wal_size at 32 MB checkpoints are requested, fires; at
/// the default 1 GB none are: passes.
fn checkpoints_requested_by_wal_volume(dir: &Path, server: &TestServer) {
    let file = dir.join("bulk.toml");
    std::fs::write(
        &file,
        "[[op]]\nname = \"bulk_insert\"\n\
         sql = \"INSERT INTO lc_wal SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g\"\n\
         [prepare]\ntables = [{ name = \"lc_wal\", columns = \"(id INT, pad TEXT)\" }]\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    ok(loadcell(
        dir,
        &[
            "prepare",
            "script",
            "--file",
            file,
            "--target",
            server.url(),
        ],
    ));
    let bulk = |wal: &str| {
        admin_sql(server, &format!("ALTER SYSTEM SET max_wal_size = '{wal}'"));
        admin_sql(server, "SELECT pg_reload_conf()");
        admin_sql(server, "SELECT pg_stat_reset_shared('bgwriter')");
        let args = ["--file", file, "--threads", "2", "--events", "20"];
        let r = run_to(dir, &format!("bulk-{wal}"), "script", server.url(), &args);
        // A checkpoint requested at the end is counted once it starts.
        std::thread::sleep(Duration::from_secs(1));
        advise(dir, server.url(), Some(&r))
    };
    let evidence = fires(&bulk("32MB"), "max_wal_size");
    assert!(evidence.contains("max_wal_size = 32M"), "{evidence}");
    passes(&bulk("1GB"), "max_wal_size");
    admin_sql(server, "ALTER SYSTEM RESET max_wal_size");
    admin_sql(server, "SELECT pg_reload_conf()");
}
