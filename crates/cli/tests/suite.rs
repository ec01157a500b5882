//! `loadcell suite` end to end against a real Redis: gates that pass and
//! fail, a secret from the environment (and a missing one caught before
//! any load), a misspelt option named by its line, a SIGKILL, a Ctrl-C and
//! a dead server in the middle of a step then `--resume`, a baseline
//! regression, two shards merged, and the smallest suite file as the
//! issue that asked for suites wrote it.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn steps(dir: &Path) -> Vec<Value> {
    read_json(&dir.join("suite.json"))["steps"]
        .as_array()
        .unwrap()
        .clone()
}

/// Two runs: one whose gates pass, one whose `ops_per_sec` gate cannot.
const GATED: &str = r#"
[vars]
redis = "redis://127.0.0.1:1"

[targets.cache]
url = "${redis}"
labels = { instance = "local" }

[[step]]
name = "easy"
command = "run"
workload = "kv"
target = "cache"
options = { time = "1s", clients = 2 }
gates = ["p99 <= 5s", "error_rate < 1%"]

[[step]]
name = "hard"
command = "run"
workload = "kv"
target = "cache"
options = { time = "1s", clients = 2 }
gates = ["ops_per_sec >= 1G"]
"#;

#[test]
fn gates_pass_and_fail_and_the_failed_one_sets_exit_3_with_its_step_and_value() {
    let redis = loadcell_testkit::redis().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "gated.toml", GATED);
    let var = format!("redis={}", redis.url());
    let o = loadcell(
        dir.path(),
        &["suite", "run", &file, "--var", &var, "--out", "s"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let s = dir.path().join("s");
    let steps = steps(&s);
    assert_eq!(steps.len(), 2);
    assert!(steps.iter().all(|st| st["status"] == "done"));
    assert_eq!(steps[0]["gates"].as_array().unwrap().len(), 2);
    assert!(steps[0]["gates"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["passed"] == true));
    let failed = &steps[1]["gates"][0];
    assert_eq!(failed["passed"], false);
    // The verdict is the step's result's own, and the summary says it.
    let result = read_json(&s.join(steps[1]["file"].as_str().unwrap()));
    assert_valid_result(&result);
    assert_eq!(
        f(&result, "/gates/0/value"),
        failed["value"].as_f64().unwrap()
    );
    let line = stdout(&o)
        .lines()
        .find(|l| l.starts_with("GATE FAILED  02-hard: ops_per_sec >= 1G"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{}", stdout(&o)));
    assert!(
        line.contains(failed["measured"].as_str().unwrap()),
        "{line}"
    );
    // The tables are written, and the result carries the target's label.
    assert_eq!(result["labels"]["instance"], "local");
    assert!(s.join("report.md").is_file() && s.join("report.html").is_file());
}

#[test]
fn a_secret_comes_from_the_environment_and_a_missing_one_stops_the_suite_before_any_load() {
    let redis =
        loadcell_testkit::redis_with_password("s3cr3t-pw").unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[targets.locked]\nurl = \"redis://127.0.0.1:{}\"\npassword_env = \"LC_SUITE_TEST_PW\"\n\n\
         [[step]]\nname = \"r\"\ncommand = \"run\"\nworkload = \"kv\"\ntarget = \"locked\"\noptions = {{ time = \"1s\" }}\n",
        redis.port
    );
    let file = write(dir.path(), "secret.toml", &text);
    let o = loadcell(dir.path(), &["suite", "run", &file, "--out", "s"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("secret.toml:3: target locked: password_env LC_SUITE_TEST_PW is not set"),
        "{e}"
    );
    assert!(
        !dir.path().join("s").exists(),
        "nothing ran, nothing written"
    );

    let o = Command::new(bin())
        .current_dir(dir.path())
        .args(["suite", "run", &file, "--out", "s"])
        .env("LC_SUITE_TEST_PW", "s3cr3t-pw")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = format!(
        "{}{}{}",
        stdout(&o),
        stderr(&o),
        std::fs::read_to_string(dir.path().join("s/suite.json")).unwrap()
    );
    let result = std::fs::read_to_string(dir.path().join("s/steps/01-r.json")).unwrap();
    assert!(!all.contains("s3cr3t-pw") && !result.contains("s3cr3t-pw"));
    let r: Value = serde_json::from_str(&result).unwrap();
    assert!(u(&r, "/summary/ops") > 0);
    assert_eq!(u(&r, "/summary/errors"), 0);
}

#[test]
fn a_misspelt_option_is_named_by_its_line_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    let text = GATED.replace(
        "options = { time = \"1s\", clients = 2 }\ngates = [\"ops",
        "options = { time = \"1s\",\n  thread = 2 }\ngates = [\"ops",
    );
    let file = write(dir.path(), "typo.toml", &text);
    // The target is unreachable: the check comes before reaching it.
    let o = loadcell(dir.path(), &["suite", "run", &file, "--out", "s"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    let line = text.lines().position(|l| l.contains("thread = 2")).unwrap() + 1;
    assert!(
        e.starts_with(&format!("loadcell: error: {file}:{line}: step hard: ")),
        "{e}"
    );
    assert!(e.contains("'--thread'"), "{e}");
    assert!(!dir.path().join("s").exists());
}

/// Three one-step runs against `url`, each `time` long, one, two and
/// three clients.
fn three_steps(dir: &Path, url: &str, time: &str) -> String {
    let text = format!(
        "[targets.cache]\nurl = \"{url}\"\n\n[[step]]\nname = \"r\"\ncommand = \"run\"\nworkload = \"kv\"\n\
         target = \"cache\"\nfor = {{ clients = [1, 2, 3] }}\noptions = {{ time = \"{time}\", reconnect_timeout = \"2s\" }}\n"
    );
    write(dir, "three.toml", &text)
}

/// Starts the suite `file` into `dir/s` and returns it once its second
/// step has run for a second.
fn started_into_its_second_step(dir: &Path, file: &str) -> std::process::Child {
    let s = dir.join("s");
    let child = Command::new(bin())
        .current_dir(dir)
        .args(["suite", "run", file, "--out", "s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the second step never started");
        if s.join("suite.json").exists() && steps(&s)[1]["status"] == "running" {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    child
}

/// The stopped suite in `dir/s` had its first step done, its second
/// `stopped` and its third pending; `--resume` keeps the first byte for
/// byte, redoes the second, runs the third, and leaves one complete
/// result per step.
fn resumes_keeping_the_first_step(dir: &Path, stopped: &str) {
    let s = dir.join("s");
    let before = steps(&s);
    assert_eq!(before[0]["status"], "done");
    assert_eq!(before[1]["status"], stopped);
    assert_eq!(before[2]["status"], "pending");
    let first = s.join(before[0]["file"].as_str().unwrap());
    let first_bytes = std::fs::read(&first).unwrap();
    let first_meta = std::fs::metadata(&first).unwrap().modified().unwrap();

    let o = loadcell(dir, &["suite", "run", "--resume", "s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let after = steps(&s);
    assert!(after.iter().all(|st| st["status"] == "done"), "{after:?}");
    assert_eq!(std::fs::read(&first).unwrap(), first_bytes);
    assert_eq!(
        std::fs::metadata(&first).unwrap().modified().unwrap(),
        first_meta
    );
    assert_eq!(
        after[0], before[0],
        "the finished step's record is kept as it was"
    );
    // Each step once: three result files, each with its own clients, each
    // whole (the stopped step's partial result is replaced).
    let mut files: Vec<_> = std::fs::read_dir(s.join("steps"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    assert_eq!(files, ["01-r-1.json", "02-r-2.json", "03-r-3.json"]);
    for (i, name) in files.iter().enumerate() {
        let r = read_json(&s.join("steps").join(name));
        assert_valid_result(&r);
        assert_eq!(common::s(&r, "/status"), "complete", "{name}");
        assert_eq!(u(&r, "/config/clients_per_thread"), i as u64 + 1);
        assert!(u(&r, "/summary/ops") > 0);
    }
    // Only the second step's time was lost and redone: the first ran once.
    assert_eq!(
        stderr(&o).matches("loadcell: suite step").count(),
        2,
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_suite_killed_in_a_step_resumes_keeping_finished_steps_byte_for_byte() {
    let redis = loadcell_testkit::redis().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let file = three_steps(dir.path(), redis.url(), "2s");
    let mut child = started_into_its_second_step(dir.path(), &file);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    resumes_keeping_the_first_step(dir.path(), "running");
}

#[test]
fn a_suite_stopped_by_ctrl_c_in_a_step_writes_its_result_and_resumes() {
    let redis = loadcell_testkit::redis().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let file = three_steps(dir.path(), redis.url(), "4s");
    let child = started_into_its_second_step(dir.path(), &file);
    // SAFETY: signalling the child this test spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = output_within(child);
    assert_eq!(o.status.code(), Some(130));
    // Nothing lost: the interrupted step's result is on disk, marked so.
    let s = dir.path().join("s");
    let partial = read_json(&s.join("steps/02-r-2.json"));
    assert_valid_result(&partial);
    assert_eq!(common::s(&partial, "/status"), "partial");
    assert_eq!(common::s(&partial, "/stop_reason"), "interrupted");
    resumes_keeping_the_first_step(dir.path(), "interrupted");
}

#[test]
fn a_suite_whose_server_died_in_a_step_stops_there_and_resumes_once_it_is_back() {
    let mut redis = loadcell_testkit::redis().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let file = three_steps(dir.path(), redis.url(), "4s");
    let child = started_into_its_second_step(dir.path(), &file);
    redis.kill();
    let o = output_within(child);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("Suite stopped at 02-r-2 (Failed") && e.contains("suite run --resume"),
        "{e}"
    );
    let s = dir.path().join("s");
    let partial = read_json(&s.join("steps/02-r-2.json"));
    assert_eq!(common::s(&partial, "/stop_reason"), "server_unreachable");
    // The server back where it was, and the suite goes on.
    let _back = loadcell_testkit::redis_at(redis.port).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(_back.port, redis.port, "the port was free again");
    resumes_keeping_the_first_step(dir.path(), "failed");
}

#[test]
fn a_regression_against_the_baseline_suite_exits_3() {
    let redis = loadcell_testkit::redis().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let text = "[vars]\nredis = \"\"\nrate = \"20000\"\n\n[targets.cache]\nurl = \"${redis}\"\n\n\
                [[step]]\nname = \"paced\"\ncommand = \"run\"\nworkload = \"kv\"\ntarget = \"cache\"\n\
                options = { time = \"2s\", rate = \"${rate}\", report_interval = \"100ms\", clients = 4 }\n";
    let file = write(dir.path(), "paced.toml", text);
    let var = format!("redis={}", redis.url());
    let o = loadcell(
        dir.path(),
        &["suite", "run", &file, "--var", &var, "--out", "base"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The same rate again: no regression.
    let o = loadcell(
        dir.path(),
        &[
            "suite",
            "run",
            &file,
            "--var",
            &var,
            "--out",
            "same",
            "--baseline",
            "base",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(
        steps(&dir.path().join("same"))[0]["gates"][0]["passed"],
        true
    );
    // A tenth of the rate: throughput falls 90%, far beyond 5%.
    let o = loadcell(
        dir.path(),
        &[
            "suite",
            "run",
            &file,
            "--var",
            &var,
            "--var",
            "rate=2000",
            "--out",
            "slow",
            "--baseline",
            "base",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    let gate = &steps(&dir.path().join("slow"))[0]["gates"][0];
    assert_eq!(gate["gate"], "regression <= 5%");
    assert_eq!(gate["passed"], false);
    assert!(f(gate, "/value") > 80.0, "{gate}");
    assert!(stdout(&o).contains("GATE FAILED  01-paced: regression <= 5%"));
}

#[test]
fn two_shards_of_a_suite_merge_step_by_step() {
    let redis = loadcell_testkit::redis().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[targets.cache]\nurl = \"{}\"\n\n[[step]]\nname = \"r\"\ncommand = \"run\"\nworkload = \"kv\"\n\
         target = \"cache\"\noptions = {{ time = \"1s\", clients = 2 }}\ngates = [\"error_rate < 1%\"]\n\n\
         [[step]]\nname = \"sw\"\ncommand = \"sweep\"\nworkload = \"kv\"\ntarget = \"cache\"\n\
         options = {{ time = \"1s\", clients = \"2,4\", step_gap = \"2s\" }}\n",
        redis.url()
    );
    let file = write(dir.path(), "sharded.toml", &text);
    run_two_suite_shards(dir.path(), &file, Duration::from_secs(4));
    let o = loadcell(dir.path(), &["merge", "d0", "d1", "--out", "m"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = dir.path().join("m");
    let merged = steps(&m);
    assert!(merged.iter().all(|st| st["status"] == "done"));
    let run = read_json(&m.join("steps/01-r.json"));
    let parts: Vec<Value> = (0..2)
        .map(|i| read_json(&dir.path().join(format!("d{i}/steps/01-r.json"))))
        .collect();
    assert_eq!(
        u(&run, "/summary/ops"),
        parts.iter().map(|p| u(p, "/summary/ops")).sum::<u64>()
    );
    assert_eq!(run["merge"]["shards"].as_array().unwrap().len(), 2);
    assert_eq!(merged[0]["gates"][0]["passed"], true);
    let sweep = read_json(&m.join("steps/02-sw.json"));
    for (k, point) in sweep["points"].as_array().unwrap().iter().enumerate() {
        let ops: u64 = (0..2)
            .map(|i| {
                let p = read_json(&dir.path().join(format!("d{i}/steps/02-sw.json")));
                u(&p, &format!("/points/{k}/runs/0/summary/ops"))
            })
            .sum();
        assert_eq!(u(point, "/runs/0/summary/ops"), ops);
    }
    assert!(read_json(&m.join("suite.json"))["merged_from"]
        .as_array()
        .is_some_and(|a| a.len() == 2));
    assert!(std::fs::read_to_string(m.join("report.md"))
        .unwrap()
        .contains("## sw"));
}

/// The suite file the issue asking for suites gave, word for word: it
/// must run as written, its Redis given by `--var`.
const MINIMAL: &str = r#"
[vars]
redis = "redis://127.0.0.1:6379"

[targets.cache]
url = "${redis}"
labels = { instance = "local" }

[[step]]
name = "kv-threads"
command = "sweep"            # run | sweep | findmax | prepare | cleanup | advise | plan
workload = "kv"
target = "cache"
options = { threads = "1,2", clients = 4, time = "1s", ratio = "1:1" }
repeat = 2
gates = ["p99 <= 50ms"]
"#;

#[test]
fn the_smallest_suite_file_runs_as_written() {
    let redis = loadcell_testkit::redis().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "minimal.toml", MINIMAL);
    let var = format!("redis={}", redis.url());
    let o = loadcell(
        dir.path(),
        &["suite", "run", &file, "--var", &var, "--out", "s"],
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let s = dir.path().join("s");
    let steps = steps(&s);
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0]["status"], "done");
    let gate = &steps[0]["gates"][0];
    assert_eq!(
        (gate["gate"].as_str(), gate["passed"].as_bool()),
        (Some("p99 <= 50ms"), Some(true)),
        "{gate}"
    );
    // Two values of threads, each run twice, labelled with the target's.
    let sweep = read_json(&s.join(steps[0]["file"].as_str().unwrap()));
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (point, threads) in points.iter().zip([1.0, 2.0]) {
        assert_eq!(f(point, "/value"), threads);
        let runs = point["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "repeat = 2");
        for r in runs {
            assert_eq!(r["labels"]["instance"], "local");
            assert!(u(r, "/summary/ops") > 0);
        }
    }
    // The table has a row per thread count.
    let md = std::fs::read_to_string(s.join("report.md")).unwrap();
    assert!(md.contains("## kv-threads"), "{md}");
    for threads in ["1", "2"] {
        assert!(
            md.lines().any(|l| l.starts_with(&format!("| {threads} |"))),
            "{md}"
        );
    }
}

/// A price file of one instance type, `small` at $0.10 an hour, in `dir`,
/// and a suite of runs on one and two sim "nodes" (a 20 ms slot each,
/// labelled for the plan) with `clients` sessions, then a plan of 120/s
/// over them gated by `gates` (TOML strings).
fn sim_nodes_and_plan(dir: &Path, clients: u32, gates: &str) -> String {
    write(
        dir,
        "prices.toml",
        "[[instance]]\nname = \"small\"\nvcpus = 2\nmemory_gib = 4\nusd_per_hour = 0.1\n",
    );
    format!(
        "[targets.one]\nurl = \"sim://?concurrency=1&latency=fixed:20ms\"\nlabels = {{ instance = \"small\", nodes = \"1\" }}\n\n\
         [targets.two]\nurl = \"sim://?concurrency=2&latency=fixed:20ms\"\nlabels = {{ instance = \"small\", nodes = \"2\" }}\n\n\
         [[step]]\nname = \"nodes\"\ncommand = \"run\"\nworkload = \"kv\"\nfor = {{ target = [\"one\", \"two\"] }}\n\
         options = {{ ratio = \"0:1\", threads = 1, clients = {clients}, time = \"1s\" }}\n\n\
         [[step]]\nname = \"cost\"\ncommand = \"plan\"\ninputs = [\"nodes\"]\n\
         options = {{ prices = \"prices.toml\", target-throughput = \"120\", scaling = \"linear\" }}\n\
         gates = [{gates}]\n"
    )
}

/// A plan step's gates judge its cheapest answer: one sim "node" serves
/// 50 requests/s (one 20 ms slot), so 120/s needs 3 nodes of `small` at
/// $0.10 an hour, $219 a month; a budget of $200 fails, exit 3.
#[test]
fn a_plan_steps_gates_judge_its_cheapest_answer() {
    let dir = tempfile::tempdir().unwrap();
    let text = sim_nodes_and_plan(dir.path(), 4, "\"nodes <= 3\", \"monthly_cost <= 200\"");
    let file = write(dir.path(), "plan.toml", &text);
    let o = loadcell(dir.path(), &["suite", "run", &file, "--out", "s"]);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    let steps = steps(&dir.path().join("s"));
    let gates = steps[2]["gates"].as_array().unwrap();
    assert_eq!(gates.len(), 2, "{gates:?}");
    assert_eq!(gates[0]["passed"], true, "{gates:?}");
    assert_eq!(gates[0]["value"], 3.0);
    assert_eq!(gates[1]["passed"], false, "{gates:?}");
    assert!(
        stdout(&o)
            .contains("GATE FAILED  03-cost: monthly_cost <= 200 (small): measured $219.00/month"),
        "{}",
        stdout(&o)
    );
    // A gate on a step that measures nothing is refused before any load.
    let text = text
        + "\n[[step]]\nname = \"tidy\"\ncommand = \"cleanup\"\nworkload = \"kv\"\ntarget = \"one\"\ngates = [\"p99 <= 1ms\"]\n";
    let file = write(dir.path(), "bad.toml", &text);
    let o = loadcell(dir.path(), &["suite", "run", &file, "--out", "t"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("step tidy: gates are judged on run, sweep, findmax and plan steps (cleanup measures nothing)"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("t").exists());
}

/// A findmax step against its baseline: the same search on a server with
/// a quarter of the capacity (two 2 ms slots, 1,000/s, against eight,
/// 4,000/s) finds a rate far lower, the two intervals apart: exit 3. The
/// contrast is wide so that tests running beside it cannot blur it.
#[test]
fn a_findmax_whose_rate_fell_against_the_baseline_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[vars]\nslots = \"8\"\n\n[targets.sim]\nurl = \"sim://?latency=fixed:2ms&concurrency=${slots}\"\n\n\
                [[step]]\nname = \"edge\"\ncommand = \"findmax\"\nworkload = \"kv\"\ntarget = \"sim\"\n\
                options = { threads = 1, clients = 64, time = \"1s\", warmup = \"200ms\", sla = \"p99<=50ms\", \
                start-rate = \"1000\", precision = \"20%\", max-probes = 12 }\n";
    let file = write(dir.path(), "edge.toml", text);
    let o = loadcell(dir.path(), &["suite", "run", &file, "--out", "base"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let o = loadcell(
        dir.path(),
        &[
            "suite",
            "run",
            &file,
            "--var",
            "slots=2",
            "--out",
            "quarter",
            "--baseline",
            "base",
        ],
    );
    let gate = &steps(&dir.path().join("quarter"))[0]["gates"][0];
    assert_eq!(
        o.status.code(),
        Some(3),
        "{gate}\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    assert_eq!(gate["gate"], "regression <= 5%");
    assert_eq!(gate["passed"], false, "{gate}");
    assert!(
        (40.0..=90.0).contains(&f(gate, "/value")),
        "about three quarters lower: {gate}"
    );
    assert!(s(gate, "/measured").contains("(regressed)"), "{gate}");
}

/// A sharded suite's plan is deferred by each shard and run by `merge`
/// over the merged results. Each shard runs its own in-process sim, so
/// the merged load of one "node" (a 20 ms slot per shard) is 100/s, not
/// a shard's 50/s: 120/s takes 2 nodes of the merged numbers (3 of one
/// shard's).
#[test]
fn a_sharded_suites_plan_runs_at_merge_over_the_merged_results() {
    let dir = tempfile::tempdir().unwrap();
    let text = sim_nodes_and_plan(dir.path(), 8, "\"nodes <= 2\"");
    let file = write(dir.path(), "sharded-plan.toml", &text);
    run_two_suite_shards(dir.path(), &file, Duration::from_secs(3));
    for i in 0..2 {
        let own = steps(&dir.path().join(format!("d{i}")));
        assert_eq!(own[2]["status"], "deferred", "{own:?}");
        assert!(!dir.path().join(format!("d{i}/steps/03-cost.json")).exists());
    }
    let o = loadcell(dir.path(), &["merge", "d0", "d1", "--out", "m"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = dir.path().join("m");
    let merged = steps(&m);
    assert!(merged.iter().all(|st| st["status"] == "done"), "{merged:?}");
    let one = read_json(&m.join("steps/01-nodes-one.json"));
    assert!(
        (90.0..=105.0).contains(&f(&one, "/summary/ops_per_sec")),
        "two shards' 50/s: {}",
        one["summary"]
    );
    let plan = read_json(&m.join(merged[2]["file"].as_str().unwrap()));
    let small = &plan["plan"]["instances"][0];
    assert_eq!(small["nodes"], 2, "{small:#}");
    assert_eq!(merged[2]["gates"][0]["passed"], true, "{:?}", merged[2]);
    // The plan read the merged files, not a shard's.
    let line = merged[2]["command_line"].as_array().unwrap();
    assert!(
        line.iter()
            .any(|a| a.as_str().unwrap().ends_with("m/steps/01-nodes-one.json")),
        "{line:?}"
    );
    assert!(std::fs::read_to_string(m.join("report.md"))
        .unwrap()
        .contains("Capacity plan"));
}
