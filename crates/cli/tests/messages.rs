//! What loadcell says: help examples that stay whole at any terminal width,
//! counts in the singular for one, target URLs whose errors name the
//! problem without the password, and a target at a port where another
//! system answers named as such, in one line, before any load.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;

/// Runs loadcell in `dir` with `COLUMNS` set (clap wraps help to it when
/// stdout is not a terminal).
fn loadcell_at_width(dir: &std::path::Path, columns: u16, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("COLUMNS", columns.to_string())
        .output()
        .expect("the loadcell binary runs")
}

/// The help's examples section: from its "Examples:" (or "Example:")
/// line to the end.
fn examples(help: &str) -> Vec<String> {
    let lines: Vec<&str> = help.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == "Examples:" || *l == "Example:")
        .unwrap_or_else(|| panic!("no examples in:\n{help}"));
    lines[start..]
        .iter()
        .map(|l| l.trim_end().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn help_examples_are_whole_command_lines_at_any_width() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["prepare", "--help"],
        &["cleanup", "--help"],
        &["sweep", "--help"],
        &["findmax", "--help"],
        &["plan", "--help"],
    ] {
        let narrow = stdout(&ok(loadcell_at_width(dir.path(), 60, args)));
        let wide = stdout(&ok(loadcell_at_width(dir.path(), 250, args)));
        let shown = examples(&narrow);
        assert_eq!(shown, examples(&wide), "{args:?} at 60 and 250 columns");
        // Every line is a command, or the continuation of one that ends
        // in a backslash.
        for pair in shown.windows(2) {
            let whole = pair[1].starts_with("  loadcell ")
                || (pair[0].ends_with(" \\") && pair[1].starts_with("      --"));
            assert!(
                whole,
                "{args:?}: a command cut short:\n{}",
                shown.join("\n")
            );
        }
        assert!(
            shown.iter().any(|l| l.len() > 60),
            "{args:?}: no line longer than the terminal, so nothing was tested"
        );
    }
    let help = stdout(&ok(loadcell_at_width(dir.path(), 60, &["run", "--help"])));
    assert!(
        help.lines().any(|l| l
            == "  loadcell run ycsb-a --target postgres://bench:secret@127.0.0.1/bench \
                --record-count 100000 --threads 8 --time 60s"),
        "{help}"
    );
    // The prose around them still wraps.
    let help = stdout(&ok(loadcell_at_width(dir.path(), 60, &["sweep", "--help"])));
    assert!(
        help.lines()
            .take_while(|l| !l.starts_with("Sweep options:"))
            .all(|l| l.chars().count() <= 60),
        "{help}"
    );
}

#[test]
fn one_session_is_one_session() {
    let dir = tempfile::tempdir().unwrap();
    for (threads, clients, said) in [("1", "1", ": 1 session, "), ("2", "1", ": 2 sessions, ")] {
        let o = ok(loadcell(
            dir.path(),
            &[
                "run",
                "kv",
                "--target",
                "sim:?latency=fixed:100us",
                "--threads",
                threads,
                "--clients",
                clients,
                "--time",
                "300ms",
            ],
        ));
        let err = stderr(&o);
        assert!(err.contains(said), "expected '{said}' in:\n{err}");
    }
    // Prepare's messages too: one record.
    let o = ok(loadcell(
        dir.path(),
        &[
            "prepare",
            "oltp_read_write",
            "--tables",
            "1",
            "--table-size",
            "1",
        ],
    ));
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(said.contains("Inserting 1 record into 'sbtest1'"), "{said}");
}

/// Fails with one line on stderr, nothing on stdout and no result file;
/// the line.
fn one_line_error(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let o = loadcell(dir.path(), args);
    assert!(!o.status.success(), "{args:?} should fail");
    let err = stderr(&o);
    assert_eq!(
        err.trim().lines().count(),
        1,
        "one line for {args:?}: {err}"
    );
    assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
    let results = dir.path().join("results");
    let wrote = std::fs::read_dir(&results)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.path().extension().is_some_and(|x| x == "json"))
        })
        .unwrap_or(false);
    assert!(!wrote, "{args:?} wrote a result");
    err.trim().to_string()
}

#[test]
fn a_password_with_a_reserved_character_is_named_not_shown() {
    for (target, secret) in [
        ("mysql://u:a#b@127.0.0.1:3306/db", "a#b"),
        ("mysql://u:a/b@127.0.0.1:3306/db", "a/b"),
        ("postgres://u:x?y@127.0.0.1:5432/db", "x?y"),
    ] {
        let err = one_line_error(&["run", "oltp_read_only", "--target", target]);
        assert!(
            err.contains("the password has a character")
                && err.contains("percent-encode")
                && err.contains("'#' as %23"),
            "{err}"
        );
        assert!(!err.contains(secret), "{err}");
        assert!(!err.contains("invalid port"), "{err}");
    }
    let err = one_line_error(&[
        "run",
        "oltp_read_only",
        "--target",
        "mysql://u:pw@127.0.0.1:3306/db#2",
    ]);
    assert!(err.contains("fragment") && err.contains("%23"), "{err}");
}

/// The README's sim URL, whose `stall=1s@5s` has an '@' that is no
/// password's.
#[test]
fn an_at_in_a_parameter_is_no_password() {
    let dir = tempfile::tempdir().unwrap();
    ok(loadcell(
        dir.path(),
        &[
            "run",
            "kv",
            "--target",
            "sim://?latency=fixed:100us&stall=50ms@100ms",
            "--time",
            "300ms",
        ],
    ));
}

#[test]
fn a_target_at_another_systems_port_is_named_before_any_load() {
    let redis = loadcell_testkit::redis().expect("Redis starts");
    let memcached = loadcell_testkit::memcached().expect("memcached starts");
    let mariadb = loadcell_testkit::mariadb().expect("MariaDB starts");
    let sql = |scheme: &str, port: u16| format!("{scheme}://lc:lcpass@127.0.0.1:{port}/loadcell");
    let kv = |scheme: &str, port: u16| format!("{scheme}://127.0.0.1:{port}");
    // The first bytes show it: well before the connect timeout (5 s).
    for (workload, target, system, like) in [
        (
            "oltp_read_only",
            sql("postgres", mariadb.port),
            "PostgreSQL",
            "MySQL/MariaDB server's greeting",
        ),
        (
            "kv",
            kv("redis", mariadb.port),
            "Redis",
            "MySQL/MariaDB server's greeting",
        ),
        (
            "kv",
            kv("redis", memcached.port),
            "Redis",
            "memcached server's reply",
        ),
        (
            "kv",
            kv("memcached", redis.port),
            "memcached",
            "Redis server's reply",
        ),
        (
            "kv",
            kv("memcached", mariadb.port),
            "memcached",
            "MySQL/MariaDB server's greeting",
        ),
    ] {
        let start = Instant::now();
        let err = one_line_error(&["run", workload, "--target", &target]);
        assert!(start.elapsed() < Duration::from_secs(3), "{target}: {err}");
        assert!(
            err.contains(&format!("did not answer as a {system} server")) && err.contains(like),
            "{target}: {err}"
        );
    }
    // A MySQL client waits for the server to speak first; Redis and
    // memcached wait for a request: only the timeout ends it, and it says
    // what it waited for.
    for port in [memcached.port, redis.port] {
        let target = sql("mysql", port);
        let err = one_line_error(&[
            "run",
            "oltp_read_only",
            "--target",
            &target,
            "--connect-timeout",
            "1s",
        ]);
        assert!(
            err.ends_with(&format!(
                "no MySQL handshake from 127.0.0.1:{port} within 1s: is a MySQL server \
                 listening there?"
            )),
            "{err}"
        );
    }
}
