//! `loadcell advise` on Redis: each rule against the server configured to
//! trigger it (CONFIG SET, restored after each case) and configured not
//! to, with real load moving the counters.

mod common;

use std::path::Path;

use common::advise::*;
use loadcell_testkit::{redis_cli, TestServer};

#[test]
fn redis_rules_fire_when_set_to_trigger_them_and_pass_when_not() {
    let server = loadcell_testkit::redis().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();

    more_connections_than_maxclients(dir, &server);
    persistence_during_writes(dir, &server);
}

fn config(server: &TestServer, args: &[&str]) {
    let mut all = vec!["CONFIG", "SET"];
    all.extend_from_slice(args);
    redis_cli(server.port, &all).unwrap_or_else(|e| panic!("{e}"));
}

/// One second of 16 connections writing.
fn writes(dir: &Path, server: &TestServer, name: &str) -> std::path::PathBuf {
    let args = [
        "--threads",
        "2",
        "--clients",
        "8",
        "--ratio",
        "1:0",
        "--time",
        "1s",
    ];
    run_to(dir, name, "kv", server.url(), &args)
}

/// 16 connections against maxclients 10: rejected, fires; against 10,000:
/// passes.
fn more_connections_than_maxclients(dir: &Path, server: &TestServer) {
    config(server, &["maxclients", "10"]);
    redis_cli(server.port, &["CONFIG", "RESETSTAT"]).unwrap();
    let refused = writes(dir, server, "maxclients-10");
    let evidence = fires(&advise(dir, &server.url, Some(&refused)), "maxclients");
    assert!(evidence.contains("maxclients = 10"), "{evidence}");
    assert!(!evidence.contains("rejected_connections = 0"), "{evidence}");

    config(server, &["maxclients", "10000"]);
    redis_cli(server.port, &["CONFIG", "RESETSTAT"]).unwrap();
    let fine = writes(dir, server, "maxclients-10000");
    passes(&advise(dir, &server.url, Some(&fine)), "maxclients");
}

/// Writes with `appendfsync always`, and writes during which a save point
/// fires, each fire; with neither, and no save points, passes.
fn persistence_during_writes(dir: &Path, server: &TestServer) {
    config(server, &["appendonly", "yes", "appendfsync", "always"]);
    let fsynced = writes(dir, server, "fsync-always");
    let evidence = fires(&advise(dir, &server.url, Some(&fsynced)), "persistence");
    assert!(evidence.contains("appendfsync = always"), "{evidence}");
    config(server, &["appendonly", "no", "appendfsync", "everysec"]);

    // A snapshot after 1 s with a change, inside a 3 s run.
    config(server, &["save", "1 1"]);
    let args = ["--threads", "1", "--ratio", "1:0", "--time", "3s"];
    let snapshotted = run_to(dir, "save-1-1", "kv", server.url(), &args);
    let evidence = fires(&advise(dir, &server.url, Some(&snapshotted)), "persistence");
    assert!(
        evidence.contains("snapshot during the run: yes"),
        "{evidence}"
    );
    config(server, &["save", ""]);

    let quiet = writes(dir, server, "no-persistence");
    passes(&advise(dir, &server.url, Some(&quiet)), "persistence");
}
