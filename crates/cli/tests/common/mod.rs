//! Helpers for running the built `loadcell` binary in tests.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod advise;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_loadcell")
}

/// The longest one loadcell command may take in a test. One that hangs
/// fails its own test with what it printed, instead of holding the whole
/// test run until CI's limit.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(300);
/// How long a command past its limit has, after Ctrl-C, to write its
/// result before it is killed.
const INTERRUPT_GRACE: Duration = Duration::from_secs(15);

/// Runs loadcell in `dir` with `args`, for up to [`COMMAND_LIMIT`].
pub fn loadcell(dir: &Path, args: &[&str]) -> Output {
    output_within(spawn(dir, args))
}

/// Starts loadcell in `dir` with `args`: no stdin, stdout and stderr
/// piped for [`output_within`].
pub fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the loadcell binary runs")
}

/// `suite run FILE` as shard I of 2 into `dDIR`, both shards starting
/// `after` from now; each must exit 0.
pub fn run_two_suite_shards(dir: &Path, file: &str, after: Duration) {
    let start = humantime::format_rfc3339_seconds(std::time::SystemTime::now() + after).to_string();
    let shards: Vec<Child> = (0..2)
        .map(|i| {
            let (out, shard) = (format!("d{i}"), format!("{i}/2"));
            spawn(
                dir,
                &[
                    "suite",
                    "run",
                    file,
                    "--out",
                    &out,
                    "--shard",
                    &shard,
                    "--start-at",
                    &start,
                ],
            )
        })
        .collect();
    for child in shards {
        let o = output_within(child);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

/// `loadcell watch` on a free loopback port, started in `dir`; returns
/// it and the URL its shards report to.
pub fn watcher(dir: &Path, extra: &[&str]) -> (Child, String) {
    let listen = format!("127.0.0.1:{}", loadcell_testkit::free_port());
    let mut args = vec!["watch", "--listen", &listen];
    args.extend_from_slice(extra);
    (spawn(dir, &args), format!("http://{listen}"))
}

/// `child.wait_with_output()`, bounded by [`COMMAND_LIMIT`]: past it the
/// child gets Ctrl-C, then is killed, and the test fails showing what it
/// printed (its result file, if it wrote one, is left for the test's
/// directory).
pub fn output_within(mut child: Child) -> Output {
    let out = child.stdout.take().map(collect);
    let err = child.stderr.take().map(collect);
    let deadline = Instant::now() + COMMAND_LIMIT;
    let mut interrupted = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for loadcell") {
            break status;
        }
        let now = Instant::now();
        if now >= deadline + INTERRUPT_GRACE {
            let _ = child.kill();
            break child.wait().expect("waiting for loadcell");
        }
        if now >= deadline && !interrupted {
            // SAFETY: signalling the child this test spawned.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            interrupted = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if interrupted {
        // Not joined: whatever the child started may still hold the pipes.
        let printed = err.map(|(so_far, _)| so_far.lock().unwrap().clone());
        panic!(
            "loadcell ran past {COMMAND_LIMIT:?} and was stopped ({status}); it printed:\n{}",
            String::from_utf8_lossy(&printed.unwrap_or_default())
        );
    }
    Output {
        status,
        stdout: out.map(joined).unwrap_or_default(),
        stderr: err.map(joined).unwrap_or_default(),
    }
}

type Collected = (Arc<Mutex<Vec<u8>>>, JoinHandle<()>);

/// Reads `pipe` to its end on a thread of its own, keeping what arrived
/// readable before the end.
fn collect(mut pipe: impl Read + Send + 'static) -> Collected {
    let so_far = Arc::new(Mutex::new(Vec::new()));
    let sink = so_far.clone();
    let reader = std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n @ 1..) = pipe.read(&mut chunk) {
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    (so_far, reader)
}

fn joined((so_far, reader): Collected) -> Vec<u8> {
    reader.join().expect("a pipe reader panicked");
    std::mem::take(&mut *so_far.lock().unwrap())
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts success, showing both streams if not.
pub fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "loadcell failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    o
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("result is JSON")
}

/// Validates a result against the checked-in schema.
pub fn assert_valid_result(result: &Value) {
    let schema_path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/result.schema.json");
    let schema = read_json(&schema_path);
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(result)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "result does not match docs/result.schema.json: {errors:#?}"
    );
}

/// `loadcell run WORKLOAD --target URL ARGS... --json`, which must succeed
/// with a complete result valid against the schema.
pub fn run_json(dir: &Path, workload: &str, url: &str, args: &[&str]) -> Value {
    let mut all = vec!["run", workload, "--target", url];
    all.extend_from_slice(args);
    all.push("--json");
    let o = ok(loadcell(dir, &all));
    let r: Value = serde_json::from_str(&stdout(&o)).expect("--json prints the result");
    assert_valid_result(&r);
    assert_eq!(s(&r, "/status"), "complete", "{}", stderr(&o));
    r
}

pub fn f(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer}"))
}

pub fn u(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no integer at {pointer}"))
}

pub fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer}"))
}

/// Runs `query` as the test user with the server's own client; its
/// output, tab-separated, trimmed.
pub fn sql(server: &loadcell_testkit::TestServer, query: &str) -> String {
    client(server, query, false)
}

/// Runs `query` as the server's superuser (MariaDB's root, PostgreSQL's
/// postgres over its socket), for settings the test user may not change.
pub fn admin_sql(server: &loadcell_testkit::TestServer, query: &str) -> String {
    client(server, query, true)
}

fn client(server: &loadcell_testkit::TestServer, query: &str, admin: bool) -> String {
    use loadcell_testkit::{ServerKind, DB_NAME, DB_PASSWORD, DB_USER};
    let port = server.port.to_string();
    let out = match server.kind() {
        ServerKind::MariaDb => {
            let mut c = Command::new("mariadb");
            c.args(["-h", "127.0.0.1", "-P", &port]);
            if admin {
                c.args(["-u", "root"]);
            } else {
                c.args(["-u", DB_USER]).arg(format!("-p{DB_PASSWORD}"));
            }
            c.args(["-N", "-B", DB_NAME, "-e", query]).output()
        }
        ServerKind::Postgres => {
            let mut c = Command::new("psql");
            if admin {
                c.arg("-h").arg(server.data_dir()).args(["-U", "postgres"]);
            } else {
                c.env("PGPASSWORD", DB_PASSWORD)
                    .args(["-h", "127.0.0.1", "-U", DB_USER]);
            }
            c.args(["-p", &port, "-d", DB_NAME, "-tA", "-c", query])
                .output()
        }
        other => panic!("{other:?} is not a SQL server"),
    }
    .expect("the database client runs");
    assert!(
        out.status.success(),
        "{query}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Asserts that the result's resource samples carry a server counter whose
/// name contains `needle` (any case), as a positive rate in some sample.
pub fn assert_server_counter(r: &Value, needle: &str) {
    let samples = r["resources"]["samples"]
        .as_array()
        .expect("resources.samples");
    let seen = samples.iter().any(|sample| {
        sample["server"].as_object().is_some_and(|counters| {
            counters.iter().any(|(name, v)| {
                name.to_lowercase().contains(needle)
                    && name.ends_with("_per_s")
                    && v.as_f64() > Some(0.0)
            })
        })
    });
    assert!(
        seen,
        "no positive '{needle}' rate among the server counters: {samples:#?}"
    );
}

/// Starts `loadcell run ARGS` for up to 30 s, kills `server` after
/// `after`, and checks what must hold whatever the system: exit status 1,
/// and a valid result file marked partial because the server became
/// unreachable, written well before the 30 s. Returns the output and the
/// result for the caller's own checks.
pub fn run_and_kill_server(
    dir: &Path,
    args: &[&str],
    kill_server: impl FnOnce(),
    after: std::time::Duration,
) -> (Output, Value) {
    let child = Command::new(bin())
        .arg("run")
        .args(args)
        .args([
            "--time",
            "30s",
            "--reconnect-timeout",
            "2s",
            "--out",
            "killed.json",
        ])
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    kill_server();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let r = read_json(&dir.join("killed.json"));
    assert_valid_result(&r);
    assert_eq!(s(&r, "/status"), "partial");
    assert_eq!(s(&r, "/stop_reason"), "server_unreachable");
    assert!(f(&r, "/summary/duration_s") < 20.0);
    (o, r)
}

/// `loadcell run kv --target TARGET --time TIME --clients 4 --workers 1
/// --label commit=COMMIT EXTRA…`: one short run of a series the run
/// history keeps, which must succeed.
pub fn run_kv_at_commit(dir: &Path, target: &str, time: &str, commit: &str, extra: &[&str]) {
    let label = format!("commit={commit}");
    let mut args = vec![
        "run",
        "kv",
        "--target",
        target,
        "--time",
        time,
        "--clients",
        "4",
        "--workers",
        "1",
        "--label",
        &label,
    ];
    args.extend_from_slice(extra);
    ok(loadcell(dir, &args));
}

/// A findmax file's points, checked to hold one run per probe it counts
/// (a rate's repeats are one point).
pub fn every_probe_recorded(fm: &Value) -> &Vec<Value> {
    let points = fm["points"].as_array().expect("points");
    let runs: usize = points
        .iter()
        .map(|p| p["runs"].as_array().unwrap().len())
        .sum();
    assert_eq!(runs as u64, u(fm, "/analysis/probes"));
    points
}

/// `args` fails before any load: one line on stderr holding every one of
/// `expected`, nothing on stdout and no result file in `dir`.
pub fn refused_in_one_line(dir: &Path, args: &[&str], expected: &[&str]) {
    let o = loadcell(dir, args);
    assert!(!o.status.success(), "{args:?} should fail");
    let err = stderr(&o);
    assert_eq!(
        err.trim().lines().count(),
        1,
        "one line for {args:?}: {err}"
    );
    for e in expected {
        assert!(err.contains(e), "{args:?}: expected '{e}' in: {err}");
    }
    assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
    let wrote_result = std::fs::read_dir(dir.join("results"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.path().extension().is_some_and(|x| x == "json"))
        })
        .unwrap_or(false);
    assert!(!wrote_result, "{args:?} wrote a result");
}

/// [`refused_in_one_line`] in a directory of its own.
pub fn fails_with(args: &[&str], expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    refused_in_one_line(dir.path(), args, expected);
}

/// Each `run WORKLOAD ARGS… --target TARGET` of `cases` is
/// [`refused_in_one_line`] with the case's words.
pub fn each_refused_in_one_line(dir: &Path, target: &str, cases: &[(Vec<&str>, &str)]) {
    for (args, expected) in cases {
        let mut all = vec!["run"];
        all.extend(args);
        all.extend(["--target", target]);
        refused_in_one_line(dir, &all, &[expected]);
    }
}

const CHROMIUM: &str = "/usr/bin/chromium";
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs headless Chromium (Debian's `chromium`) on `url` with `args`;
/// returns its stdout. Kills it (by its PID) if it outlives
/// [`BROWSER_TIMEOUT`].
pub fn chromium(url: &str, args: &[&str]) -> String {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: run scripts/install-test-deps.sh (it installs Debian's chromium)"
    );
    let profile = tempfile::tempdir().unwrap();
    // A file, not a pipe: the DOM is larger than a pipe's buffer, and the
    // loop below waits for the exit without reading.
    let stdout_path = profile.path().join("stdout");
    let stdout_file = std::fs::File::create(&stdout_path).unwrap();
    let stderr_path = profile.path().join("stderr");
    let stderr_file = std::fs::File::create(&stderr_path).unwrap();
    // Root, no sandbox; the network is closed, so nothing in the background.
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .stdout(stdout_file)
        .stderr(stderr_file)
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > BROWSER_TIMEOUT {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("chromium did not finish within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "chromium failed: {status:?}\n{}",
        std::fs::read_to_string(&stderr_path).unwrap_or_default()
    );
    std::fs::read_to_string(&stdout_path).unwrap()
}
