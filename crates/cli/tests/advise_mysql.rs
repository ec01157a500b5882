//! `loadcell advise` on MariaDB: each rule against a server configured to
//! trigger it and one configured not to, with real load moving the
//! counters. One server keeps the defaults and takes the dynamic settings
//! (SET GLOBAL, restored after each case); a second starts with the
//! settings that need a restart.

mod common;

use std::path::Path;
use std::time::Duration;

use common::advise::*;
use common::*;
use loadcell_testkit::TestServer;

/// Restart-only settings: a short listen queue, interleaved AUTO-INC
/// locks, the query cache on, and a thread pool capping running threads.
const RESTART_SETTINGS: &[&str] = &[
    "--back-log=8",
    "--innodb-autoinc-lock-mode=2",
    "--query-cache-type=1",
    "--query-cache-size=1M",
    "--thread-handling=pool-of-threads",
];

const OLTP: &[&str] = &["--tables", "1", "--table-size", "1000", "--prepare"];

fn oltp(extra: &[&str]) -> Vec<String> {
    OLTP.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A workload file of one statement that sleeps `secs`.
fn sleeper(dir: &Path, secs: f64) -> String {
    let path = dir.join(format!("sleep-{secs}.toml"));
    std::fs::write(
        &path,
        format!("[[op]]\nname = \"sleep\"\nsql = \"SELECT SLEEP({secs})\"\n"),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn mariadb_rules_fire_on_the_server_set_to_trigger_them_and_pass_on_the_other() {
    let defaults = loadcell_testkit::mariadb().unwrap_or_else(|e| panic!("{e}"));
    let restarted =
        loadcell_testkit::mariadb_with(RESTART_SETTINGS).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();

    inserts_under_autoinc_lock_mode_and_the_query_cache(dir, &defaults, &restarted);
    many_sleeping_sessions(dir, &defaults, &restarted);
    statements_killed_by_max_statement_time(dir, &defaults);
    temporary_tables_on_disk(dir, &defaults);
    connections_lost_under_a_short_net_write_timeout(dir, &defaults);
    the_text_names_the_rules_and_hides_the_password(dir, &defaults);
}

/// Four sessions inserting: mode 1 (the default) fires, mode 2 passes; the
/// query cache fires where it is on and written, passes where it is off.
fn inserts_under_autoinc_lock_mode_and_the_query_cache(
    dir: &Path,
    defaults: &TestServer,
    restarted: &TestServer,
) {
    let args = oltp(&["--threads", "4", "--time", "2s"]);
    let on_defaults = run_to(dir, "insert-a", "oltp_insert", defaults.url(), &strs(&args));
    let on_restarted = run_to(
        dir,
        "insert-b",
        "oltp_insert",
        restarted.url(),
        &strs(&args),
    );

    let a = advise(dir, defaults.url(), Some(&on_defaults));
    let evidence = fires(&a, "innodb_autoinc_lock_mode");
    assert!(
        evidence.contains("innodb_autoinc_lock_mode = 1"),
        "{evidence}"
    );
    assert!(evidence.contains("over 4 sessions"), "{evidence}");
    passes(&a, "query_cache");

    let b = advise(dir, restarted.url(), Some(&on_restarted));
    passes(&b, "innodb_autoinc_lock_mode");
    let evidence = fires(&b, "query_cache");
    assert!(evidence.contains("query_cache_type = ON"), "{evidence}");
    // Without a run, whether inserts are concurrent is unknown.
    let alone = advise(dir, defaults.url(), None);
    assert!(finding(&alone, "innodb_autoinc_lock_mode").is_none());
    assert!(alone["advice"]["not_checked"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["rule"] == "innodb_autoinc_lock_mode"));
}

/// 32 sessions each in a 1.1 s statement on 2 cores, after a refused
/// login: back_log fires where it is 8 and passes at the default; the
/// threads-running limit fires without a cap and passes under the thread
/// pool; max_statement_time, unset, fires with statements that long.
fn many_sleeping_sessions(dir: &Path, defaults: &TestServer, restarted: &TestServer) {
    let script = sleeper(dir, 1.1);
    let args = [
        "--file",
        &script,
        "--threads",
        "32",
        "--time",
        "3s",
        "--report-interval",
        "1s",
    ];
    let mut results = Vec::new();
    for (name, server) in [("sleep-a", defaults), ("sleep-b", restarted)] {
        let wrong = server.url().replace("lcpass", "wrong");
        let refused = loadcell(dir, &["run", "oltp_point_select", "--target", &wrong]);
        assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
        results.push(run_to(dir, name, "script", server.url(), &args));
    }

    let a = advise(dir, defaults.url(), Some(&results[0]));
    passes(&a, "back_log");
    let evidence = fires(&a, "threads_running_limit");
    assert!(evidence.contains("32 on 2 cores"), "{evidence}");
    let evidence = fires(&a, "statement_time_limit");
    assert!(evidence.contains("max_statement_time = 0 s"), "{evidence}");

    let b = advise(dir, restarted.url(), Some(&results[1]));
    let evidence = fires(&b, "back_log");
    assert!(evidence.contains("back_log = 8"), "{evidence}");
    assert!(!evidence.contains("Aborted_connects = 0"), "{evidence}");
    passes(&b, "threads_running_limit");
}

/// max_statement_time at 0.5 s kills 1.1 s statements: fires; at 5 s they
/// finish: passes.
fn statements_killed_by_max_statement_time(dir: &Path, server: &TestServer) {
    let script = sleeper(dir, 1.1);
    let args = ["--file", &script, "--threads", "2", "--time", "2s"];
    admin_sql(server, "SET GLOBAL max_statement_time = 0.5");
    let killed = run_to(dir, "killed", "script", server.url(), &args);
    let evidence = fires(
        &advise(dir, server.url(), Some(&killed)),
        "statement_time_limit",
    );
    assert!(
        evidence.contains("max_statement_time = 0.5 s"),
        "{evidence}"
    );
    assert!(
        !evidence.contains("statements the run saw interrupted: 0"),
        "{evidence}"
    );

    admin_sql(server, "SET GLOBAL max_statement_time = 5");
    let finished = run_to(dir, "finished", "script", server.url(), &args);
    passes(
        &advise(dir, server.url(), Some(&finished)),
        "statement_time_limit",
    );
    admin_sql(server, "SET GLOBAL max_statement_time = 0");
}

/// DISTINCT and ORDER BY ranges with 16 KB of heap for temporary tables
/// go to disk: fires; at the defaults they stay in memory: passes. Judged
/// on the tables each run made (its sampled counters).
fn temporary_tables_on_disk(dir: &Path, server: &TestServer) {
    let args = oltp(&["--threads", "2", "--time", "2s"]);
    admin_sql(
        server,
        "SET GLOBAL tmp_table_size = 1024, GLOBAL max_heap_table_size = 16384",
    );
    let small = run_to(
        dir,
        "tmp-small",
        "oltp_read_only",
        server.url(),
        &strs(&args),
    );
    let evidence = fires(&advise(dir, server.url(), Some(&small)), "tmp_table_size");
    assert!(evidence.contains("max_heap_table_size = 16K"), "{evidence}");
    assert!(evidence.contains("counted during the run"), "{evidence}");

    admin_sql(
        server,
        "SET GLOBAL tmp_table_size = DEFAULT, GLOBAL max_heap_table_size = DEFAULT",
    );
    let default = run_to(
        dir,
        "tmp-default",
        "oltp_read_only",
        server.url(),
        &strs(&args),
    );
    passes(&advise(dir, server.url(), Some(&default)), "tmp_table_size");
}

/// A run whose connections the server kills midway loses them: with
/// net_write_timeout at 5 s that fires; at 60 s it passes.
fn connections_lost_under_a_short_net_write_timeout(dir: &Path, server: &TestServer) {
    let out = dir.join("lost.json");
    let run = std::process::Command::new(bin())
        .args(["run", "oltp_point_select", "--target", server.url()])
        .args(oltp(&["--threads", "2", "--time", "3s"]))
        .arg("--out")
        .arg(&out)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let ids = admin_sql(
        server,
        "SELECT id FROM information_schema.processlist WHERE user = 'lc'",
    );
    for id in ids.lines() {
        admin_sql(server, &format!("KILL CONNECTION {id}"));
    }
    output_within(run);

    admin_sql(server, "SET GLOBAL net_write_timeout = 5");
    let evidence = fires(&advise(dir, server.url(), Some(&out)), "net_write_timeout");
    assert!(evidence.contains("net_write_timeout = 5 s"), "{evidence}");
    admin_sql(server, "SET GLOBAL net_write_timeout = 60");
    passes(&advise(dir, server.url(), Some(&out)), "net_write_timeout");
}

/// The text output: a heading with the server, the masked target, then
/// the findings and the rules passed; the password never.
fn the_text_names_the_rules_and_hides_the_password(dir: &Path, server: &TestServer) {
    let o = ok(loadcell(dir, &["advise", "--target", server.url()]));
    let text = stdout(&o);
    assert!(text.starts_with("advise: MariaDB 10."), "{text}");
    assert!(text.contains("lc:***@127.0.0.1"), "{text}");
    assert!(!text.contains("lcpass"), "{text}");
    assert!(text.contains("checked and passed: "), "{text}");
    assert!(
        text.contains("not checked: innodb_autoinc_lock_mode (needs a run's result"),
        "{text}"
    );
}
