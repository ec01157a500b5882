//! Events that start late under `--rate`: the warning says whose delay it
//! was. A server that stalls (`sim://`'s stall, or a real Redis in `DEBUG
//! SLEEP`) leaves every session waiting on it with a request in flight and
//! the client idle: the server's delay, never the client's, and no missed
//! rate when the run achieved it. A client asked for far more than one
//! worker thread can send is busy all along: the client's delay. The
//! bounds are coarse (a stall of 500 ms, a floor of 100 ms), so that a
//! loaded 2-core machine gives the same verdicts.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

const SERVER: &str = "because every session was waiting on the server";
const CLIENT: &str = "the client is saturated";

fn warnings(r: &Value) -> Vec<String> {
    r["warnings"]
        .as_array()
        .expect("warnings[] is always there")
        .iter()
        .map(|w| w.as_str().unwrap_or_default().to_string())
        .collect()
}

/// The server's delay, said once, with nothing on the client and no
/// missed rate (the run reached it).
fn assert_the_servers_delay(r: &Value, err: &str) {
    let w = warnings(r);
    let said: Vec<&String> = w.iter().filter(|w| w.contains(SERVER)).collect();
    assert_eq!(said.len(), 1, "one warning on the server's delay: {w:?}");
    assert!(said[0].contains("behind schedule"), "{}", said[0]);
    assert!(
        !w.iter()
            .any(|w| w.contains(CLIENT) || w.contains("cannot keep up")),
        "the client was blamed for the server's stall: {w:?}"
    );
    let target = f(r, "/summary/schedule/target_rate");
    let achieved = f(r, "/summary/schedule/achieved_rate");
    assert!(achieved >= 0.95 * target, "{achieved}/s of {target}/s");
    assert!(
        !w.iter().any(|w| w.contains("rate not reached")),
        "the rate was reached ({achieved}/s of {target}/s): {w:?}"
    );
    // Said live too.
    assert!(err.contains(&format!("WARNING: {}", said[0])), "{err}");
}

#[test]
fn a_sim_server_stall_is_the_servers_delay() {
    let dir = tempfile::tempdir().unwrap();
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "kv",
            "--target",
            "sim:?latency=fixed:1ms&stall=500ms@1s",
            "--rate",
            "1000",
            "--arrival",
            "uniform",
            "--threads",
            "1",
            "--clients",
            "4",
            "--time",
            "3s",
            "--json",
        ],
    ));
    let r: Value = serde_json::from_str(&stdout(&o)).expect("--json prints the result");
    assert_valid_result(&r);
    assert_the_servers_delay(&r, &stderr(&o));
    // The stall is in the numbers: the lag warning is not about noise.
    assert!(
        f(&r, "/summary/latency_ms/max") >= 400.0,
        "{:#}",
        r["summary"]
    );
}

#[test]
fn a_redis_in_debug_sleep_is_the_servers_delay() {
    let dir = tempfile::tempdir().unwrap();
    let server = loadcell_testkit::redis().expect("Redis starts");
    // The report in the issue: --rate 2000 --threads 1 --clients 10.
    let child = Command::new(bin())
        .args([
            "run",
            "kv",
            "--target",
            server.url(),
            "--rate",
            "2000",
            "--threads",
            "1",
            "--clients",
            "10",
            "--time",
            "4s",
            "--json",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let slept = loadcell_testkit::redis_cli(server.port, &["DEBUG", "SLEEP", "0.5"]);
    let o = ok(output_within(child));
    assert_eq!(slept.as_deref().map(str::trim), Ok("OK"), "DEBUG SLEEP ran");
    let r: Value = serde_json::from_str(&stdout(&o)).expect("--json prints the result");
    assert_valid_result(&r);
    assert!(
        f(&r, "/summary/latency_ms/max") >= 400.0,
        "{:#}",
        r["summary"]
    );
    assert_the_servers_delay(&r, &stderr(&o));
}

#[test]
fn a_client_asked_for_more_than_it_can_send_is_the_clients_delay() {
    let dir = tempfile::tempdir().unwrap();
    // No server latency at all, one session on one thread, a rate no
    // thread can send: the worker never waits for anything.
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "kv",
            "--target",
            "sim://",
            "--rate",
            "50000000",
            "--threads",
            "1",
            "--clients",
            "1",
            "--time",
            "2s",
            "--json",
        ],
    ));
    let r: Value = serde_json::from_str(&stdout(&o)).expect("--json prints the result");
    let w = warnings(&r);
    assert!(
        w.iter()
            .any(|w| w.contains("behind schedule") && w.contains("because the client is saturated")),
        "no client lag warning: {w:?}"
    );
    let missed: Vec<&String> = w
        .iter()
        .filter(|w| w.contains("rate not reached"))
        .collect();
    assert_eq!(missed.len(), 1, "{w:?}");
    assert!(
        missed[0].contains("The client is saturated: worker thread 0 was busy"),
        "{}",
        missed[0]
    );
    assert!(
        !w.iter().any(|w| w.contains("waiting on the server")),
        "the server was blamed for the client: {w:?}"
    );
}
