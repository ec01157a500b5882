//! The image (`deploy/image`: FROM scratch, the binary and what it links,
//! and the shard entry point `loadcell-shard` on busybox's sh) built on a
//! private Docker engine, and a run in three shards two ways, each through
//! the entry point: as three containers on `--network host` given their
//! index as a Kubernetes Indexed Job gives it (`JOB_COMPLETION_INDEX`), and
//! as a Docker Swarm `replicated-job` through `deploy/swarm/run.sh`. Their
//! results are gathered from the logs, merged, and held to Redis's own
//! count.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime};

use common::*;

/// `docker ARGS` against the private engine.
fn docker(host: &str, args: &[&str]) -> Output {
    Command::new("docker")
        .env("DOCKER_HOST", host)
        .args(args)
        .output()
        .expect("the docker client runs")
}

fn checked(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// GET and SET calls Redis counted (`INFO commandstats`).
fn redis_calls(port: u16) -> u64 {
    let o = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "info", "commandstats"])
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with("cmdstat_get:") || l.starts_with("cmdstat_set:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The tests take turns: they count Redis's calls around their runs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The image, built once per test binary from the test's own binary by
/// `deploy/image/build.sh`; the engine goes with it at the end.
fn image(host: &str) -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let tag = format!("loadcell-test:{}", std::process::id());
        let built = Command::new(root().join("deploy/image/build.sh"))
            .env("DOCKER_HOST", host)
            .args([bin(), &tag])
            .output()
            .expect("build.sh runs");
        checked(built, "deploy/image/build.sh");
        tag
    })
}

/// One run's settings, as the ConfigMap (Kubernetes) and the env file
/// (Swarm) give them: 1,500/s for 2 s in all, measured from a few seconds
/// ahead, when every shard can be running.
fn run_env(redis: &str, ahead: Duration) -> Vec<(&'static str, String)> {
    let start = humantime::format_rfc3339_seconds(SystemTime::now() + ahead).to_string();
    vec![
        ("SHARDS", "3".to_string()),
        ("WORKLOAD", "kv".to_string()),
        ("TARGET", redis.to_string()),
        (
            "OPTIONS",
            "--clients 6 --rate 1500 --time 2s --warmup 0s".to_string(),
        ),
        ("START_AT", start),
    ]
}

/// The results a log holds between loadcell-shard's markers, by shard.
fn results_in(log: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for line in log.lines() {
        if let Some(index) = line
            .strip_prefix("--- loadcell result shard ")
            .and_then(|rest| rest.strip_suffix(" ---"))
        {
            current = Some((index.parse().expect("a shard index"), String::new()));
        } else if line == "--- end loadcell result ---" {
            found.extend(current.take());
        } else if let Some((_, text)) = &mut current {
            text.push_str(line);
            text.push('\n');
        }
    }
    found
}

/// `loadcell merge` of `files` in `dir`; the merged result, checked
/// against the calls Redis counted.
fn merged_matches(dir: &Path, files: &[PathBuf], counted: u64) {
    let mut args = vec!["merge".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["--out".to_string(), "merged.json".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(loadcell(dir, &args));
    held_to_count(&read_json(&dir.join("merged.json")), counted);
}

fn held_to_count(merged: &serde_json::Value, counted: u64) {
    assert_valid_result(merged);
    let ops: u64 = merged["ops"]
        .as_object()
        .unwrap()
        .values()
        .map(|op| op["count"].as_u64().unwrap())
        .sum();
    // 1,500/s for 2 s in all.
    assert!((2700..=3300).contains(&ops), "{ops}");
    assert_eq!(ops, counted, "the shards' operations against Redis's count");
    assert_eq!(merged["merge"]["shards"].as_array().unwrap().len(), 3);
}

#[test]
fn three_shards_in_containers_merge_to_the_servers_own_count() {
    let _turn = alone();
    let engine = loadcell_testkit::docker_engine().expect("dockerd starts");
    let host = engine.url.as_str();
    let tag = image(host);
    let redis = loadcell_testkit::redis().expect("redis starts");
    let before = redis_calls(redis.port);
    let dir = tempfile::tempdir().unwrap();
    // The containers start one after another.
    let env = run_env(redis.url(), Duration::from_secs(5));
    let shards: Vec<String> = (0..3)
        .map(|i| format!("shard-{}-{i}", std::process::id()))
        .collect();
    for (i, name) in shards.iter().enumerate() {
        let mut args: Vec<String> = ["run", "-d", "--name", name, "--network", "host"]
            .map(String::from)
            .to_vec();
        args.extend(["-e".to_string(), format!("JOB_COMPLETION_INDEX={i}")]);
        for (key, value) in &env {
            args.extend(["-e".to_string(), format!("{key}={value}")]);
        }
        args.extend(["--entrypoint", "/usr/local/bin/loadcell-shard", tag].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        checked(docker(host, &args), "docker run");
    }
    let mut files = Vec::new();
    for (i, name) in shards.iter().enumerate() {
        assert_eq!(checked(docker(host, &["wait", name]), "docker wait"), "0");
        // Gathered as gather.sh gathers from pods: the container's log.
        let log = docker(host, &["logs", name]);
        let results = results_in(&String::from_utf8_lossy(&log.stdout));
        assert_eq!(results.len(), 1, "{}", String::from_utf8_lossy(&log.stderr));
        assert_eq!(results[0].0, i, "the shard its index made it");
        let file = dir.path().join(format!("shard{i}.json"));
        std::fs::write(&file, &results[0].1).unwrap();
        files.push(file);
        checked(docker(host, &["rm", name]), "docker rm");
    }
    merged_matches(dir.path(), &files, redis_calls(redis.port) - before);
}

#[test]
fn three_shards_as_a_swarm_replicated_job_merge_to_the_servers_own_count() {
    let _turn = alone();
    let engine = loadcell_testkit::docker_engine().expect("dockerd starts");
    let host = engine.url.as_str();
    let tag = image(host);
    // A one-node swarm of the private engine, on ports of its own.
    let listen = format!("127.0.0.1:{}", loadcell_testkit::free_port());
    checked(
        docker(
            host,
            &[
                "swarm",
                "init",
                "--advertise-addr",
                "127.0.0.1",
                "--listen-addr",
                &listen,
            ],
        ),
        "docker swarm init",
    );
    let redis = loadcell_testkit::redis().expect("redis starts");
    let before = redis_calls(redis.port);
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("run.env");
    let env = run_env(redis.url(), Duration::from_secs(8));
    let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(&env_file, text).unwrap();
    let out = dir.path().join("out");
    let ran = Command::new(root().join("deploy/swarm/run.sh"))
        .env("DOCKER_HOST", host)
        .env("LOADCELL", bin())
        .env("SERVICE", format!("loadcell-test-{}", std::process::id()))
        .arg(&env_file)
        .arg(&out)
        .arg(tag)
        .current_dir(dir.path())
        .output()
        .expect("run.sh runs");
    checked(ran, "deploy/swarm/run.sh");
    let counted = redis_calls(redis.port) - before;
    for i in 0..3 {
        assert!(
            out.join(format!("shard-{i}.json")).is_file(),
            "shard {i} gathered"
        );
    }
    held_to_count(&read_json(&out.join("merged.json")), counted);
    checked(
        docker(host, &["swarm", "leave", "--force"]),
        "docker swarm leave",
    );
}
