//! Your own workload (`script --file`): each example file prepared, run
//! and cleaned up against its real server, and bad files refused in one
//! line before any connection.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

fn example(name: &str) -> String {
    format!(
        "{}/../../examples/workloads/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Runs `loadcell JOB script --file FILE --target URL ARGS…`.
fn script(dir: &Path, job: &str, file: &str, url: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec![job, "script", "--file", file, "--target", url];
    all.extend_from_slice(args);
    loadcell(dir, &all)
}

/// The count of each op kind; asserts they add up to the run's events.
fn op_counts(r: &Value, names: &[&str]) -> Vec<u64> {
    let counts: Vec<u64> = names
        .iter()
        .map(|n| u(r, &format!("/ops/{n}/count")))
        .collect();
    assert!(counts.iter().all(|&c| c > 0), "every op ran: {counts:?}");
    assert_eq!(counts.iter().sum::<u64>(), u(r, "/summary/events"));
    assert_eq!(u(r, "/summary/errors"), 0);
    counts
}

/// The SQL examples: prepare creates and loads the file's tables beside
/// one of someone else's; the run's transfers keep the total balance (both
/// statements of each transaction ran); cleanup drops the file's tables
/// and leaves the other.
fn sql_example(server: &loadcell_testkit::TestServer, file: &str, accounts: &str, ops: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let url = server.url().to_string();
    sql(server, "CREATE TABLE theirs (id INT PRIMARY KEY)");
    // Not prepared: refused before any load.
    let o = script(dir.path(), "run", file, &url, &["--time", "1s"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("table {accounts} does not exist")),
        "{}",
        stderr(&o)
    );
    ok(script(dir.path(), "prepare", file, &url, &[]));
    assert_eq!(
        sql(
            server,
            &format!("SELECT COUNT(*), SUM(balance) FROM {accounts}")
        )
        .replace('|', "\t"),
        "10000\t10000000"
    );
    // Again: the file's tables are loadcell's, nothing is loaded twice.
    let o = stderr(&ok(script(dir.path(), "prepare", file, &url, &[])));
    assert!(o.contains("nothing to do"), "{o}");

    let r = run_json(
        dir.path(),
        "script",
        &url,
        &["--file", file, "--time", "2s", "--threads", "4"],
    );
    let counts = op_counts(&r, ops);
    assert_eq!(s(&r, "/config/workload"), "script");
    assert_eq!(
        sql(server, &format!("SELECT SUM(balance) FROM {accounts}")),
        "10000000",
        "transfers move money, they do not make it"
    );
    let changed: u64 = sql(
        server,
        &format!("SELECT COUNT(*) FROM {accounts} WHERE balance <> 1000"),
    )
    .parse()
    .unwrap();
    assert!(changed > 0 && counts[1] > 0, "{changed} accounts changed");

    ok(script(dir.path(), "cleanup", file, &url, &[]));
    let tables = sql(server, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE 'lc%' OR table_name = 'loadcell_objects'");
    assert_eq!(tables, "0", "the file's tables and the marker are gone");
    assert_eq!(
        sql(server, "SELECT COUNT(*) FROM theirs"),
        "0",
        "theirs is still there"
    );
}

#[test]
fn mariadb_example_prepares_runs_and_cleans_up() {
    let server = loadcell_testkit::mariadb().expect("MariaDB starts");
    sql_example(
        &server,
        &example("mysql.toml"),
        "lc_accounts",
        &["balance", "transfer", "rich_list"],
    );
}

#[test]
fn postgres_example_records_each_transfer_in_its_history() {
    let server = loadcell_testkit::postgres().expect("PostgreSQL starts");
    let dir = tempfile::tempdir().unwrap();
    let file = example("postgres.toml");
    let url = server.url().to_string();
    ok(script(dir.path(), "prepare", &file, &url, &[]));
    let r = run_json(
        dir.path(),
        "script",
        &url,
        &["--file", &file, "--time", "2s", "--threads", "2"],
    );
    let counts = op_counts(&r, &["balance", "transfer"]);
    // Each transfer committed its three statements, the history row too.
    assert_eq!(
        sql(&server, "SELECT COUNT(*) FROM lc_pg_history"),
        counts[1].to_string()
    );
    assert_eq!(
        sql(&server, "SELECT SUM(balance) FROM lc_pg_accounts"),
        "10000000"
    );
    assert_eq!(
        sql(&server, "SELECT COUNT(*) FROM lc_pg_history WHERE note NOT IN ('rent', 'salary', 'groceries', 'refund')"),
        "0",
        "notes come from the file's list"
    );
    assert!(r.pointer("/summary/txn_per_sec").is_some());
    // Someone else's table under a name of the file's is left alone.
    ok(script(dir.path(), "cleanup", &file, &url, &[]));
    sql(&server, "CREATE TABLE lc_pg_accounts (id INT)");
    let o = script(dir.path(), "prepare", &file, &url, &[]);
    assert!(
        stderr(&o).contains("table 'lc_pg_accounts' already exists and was not created by loadcell: nothing prepared"),
        "{}",
        stderr(&o)
    );
    let o = stderr(&ok(script(dir.path(), "cleanup", &file, &url, &[])));
    assert!(
        o.contains("Leaving table 'lc_pg_accounts': it is not loadcell's"),
        "{o}"
    );
    assert_eq!(sql(&server, "SELECT COUNT(*) FROM lc_pg_accounts"), "0");
}

#[test]
fn redis_example_sets_its_keys_and_cleanup_deletes_only_those() {
    let server = loadcell_testkit::redis().expect("Redis starts");
    let dir = tempfile::tempdir().unwrap();
    let cli = |args: &[&str]| {
        loadcell_testkit::redis_cli(server.port, args)
            .unwrap()
            .trim()
            .to_string()
    };
    let file = example("redis.toml");
    let url = server.url().to_string();
    cli(&["SET", "theirs", "1"]);
    ok(script(dir.path(), "prepare", &file, &url, &[]));
    assert_eq!(
        cli(&["DBSIZE"]),
        "5002",
        "5000 sessions, the marker and theirs"
    );
    assert_eq!(cli(&["STRLEN", "lc:session:4321"]), "32");
    let r = run_json(
        dir.path(),
        "script",
        &url,
        &["--file", &file, "--time", "2s", "--clients", "4"],
    );
    let counts = op_counts(&r, &["read_session", "touch", "track"]);
    // Every session key was loaded, so every GET hit.
    assert_eq!(u(&r, "/summary/hits"), counts[0], "{r}");
    let lists: u64 = cli(&["EVAL", "local n = 0 for _, k in ipairs(redis.call('KEYS', 'lc:visits:*')) do n = n + redis.call('LLEN', k) end return n", "0"]).parse().unwrap();
    assert_eq!(lists, counts[2], "each track op pushed one visit");
    // A session someone else wrote since prepare is theirs now.
    cli(&["SET", "lc:session:7", "changed"]);
    let o = stderr(&ok(script(dir.path(), "cleanup", &file, &url, &[])));
    assert!(
        o.contains("Deleted 4999 keys") && o.contains("left 1"),
        "{o}"
    );
    assert_eq!(cli(&["GET", "theirs"]), "1");
    assert_eq!(cli(&["GET", "lc:session:7"]), "changed");
    assert_eq!(
        cli(&[
            "EXISTS",
            "lc:session:8",
            "loadcell:script:lc:session:${load_user}"
        ]),
        "0"
    );
}

#[test]
fn http_example_sends_each_op_as_its_kind() {
    let server = loadcell_testkit::nginx().expect("nginx starts");
    let dir = tempfile::tempdir().unwrap();
    let file = example("http.toml");
    let r = run_json(
        dir.path(),
        "script",
        server.url(),
        &["--file", &file, "--events", "300", "--clients", "3"],
    );
    let counts = op_counts(&r, &["home", "item", "search", "health"]);
    assert_eq!(u(&r, "/summary/counters/2xx"), 300, "{r}");
    let log = std::fs::read_to_string(server.data_dir().join(loadcell_testkit::ECHO_LOG)).unwrap();
    let items = log
        .lines()
        .filter(|l| l.starts_with("GET /echo?item="))
        .count() as u64;
    let searches = log
        .lines()
        .filter(|l| l.starts_with("POST /echo?q="))
        .count() as u64;
    assert_eq!((items, searches), (counts[1], counts[2]), "{log}");
}

#[test]
fn bad_files_are_refused_in_one_line_before_any_connection() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("mysql://u@127.0.0.1:{}/db", loadcell_testkit::closed_port());
    let cases: [(&str, &str, &str); 5] = [
        (
            "[[op]]\nname = \"a\"\nsql = \"SELECT 1\"\nwieght = 2\n",
            &target,
            "w.toml:4: unknown field `wieght`",
        ),
        (
            "[params]\nx = { type = \"zipf\", min = 1, max = 9 }\n[[op]]\nname = \"a\"\nsql = \"SELECT ${x}\"\n",
            &target,
            "w.toml: [params] x: unknown type 'zipf'; use sequence, uniform, gaussian",
        ),
        (
            "[[op]]\nname = \"a\"\nsql = \"SELECT ${id}\"\n",
            &target,
            "w.toml: op 'a': 'SELECT ${id}': no parameter 'id' in [params]",
        ),
        (
            "[[op]]\nname = \"a\"\nsql = \"SELECT 1\"\n",
            "redis://127.0.0.1:1",
            "workload script needs a sql driver",
        ),
        (
            "[[op]]\nname = \"a\"\nweight = 0\nsql = \"SELECT 1\"\n",
            &target,
            "w.toml: every op has weight 0",
        ),
    ];
    for (text, target, expected) in cases {
        std::fs::write(dir.path().join("w.toml"), text).unwrap();
        let o = script(dir.path(), "run", "w.toml", target, &["--time", "1s"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(expected), "{expected}\n{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(!err.contains("connect"), "refused before connecting: {err}");
    }
}
