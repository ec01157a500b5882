//! The image (`deploy/image`: FROM scratch, the binary and what it links)
//! built on a private Docker engine, and a run in three shards as three
//! containers on `--network host`, each given its index as a Kubernetes
//! Indexed Job gives it (`JOB_COMPLETION_INDEX`): their results gathered
//! from the containers' logs, merged, and held to Redis's own count.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
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

#[test]
fn three_shards_in_containers_merge_to_the_servers_own_count() {
    let engine = loadcell_testkit::docker_engine().expect("dockerd starts");
    let host = engine.url.as_str();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tag = format!("loadcell-test:{}", std::process::id());
    let built = Command::new(root.join("deploy/image/build.sh"))
        .env("DOCKER_HOST", host)
        .args([bin(), &tag])
        .output()
        .expect("build.sh runs");
    checked(built, "deploy/image/build.sh");

    let redis = loadcell_testkit::redis().expect("redis starts");
    let before = redis_calls(redis.port);
    let dir = tempfile::tempdir().unwrap();
    // One start for all three, a few seconds ahead: the containers start
    // one after another.
    let start =
        humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(5)).to_string();
    let shards: Vec<String> = (0..3)
        .map(|i| format!("shard-{}-{i}", std::process::id()))
        .collect();
    for (i, name) in shards.iter().enumerate() {
        let index = format!("JOB_COMPLETION_INDEX={i}");
        checked(
            docker(
                host,
                &[
                    "run",
                    "-d",
                    "--name",
                    name,
                    "--network",
                    "host",
                    "-e",
                    &index,
                    &tag,
                    "run",
                    "kv",
                    "--target",
                    redis.url(),
                    "--shard-count",
                    "3",
                    "--clients",
                    "6",
                    "--start-at",
                    &start,
                    "--time",
                    "2s",
                    "--warmup",
                    "0s",
                    "--rate",
                    "1500",
                    "--no-history",
                    "--json",
                ],
            ),
            "docker run",
        );
    }
    let mut files = Vec::new();
    for (i, name) in shards.iter().enumerate() {
        assert_eq!(checked(docker(host, &["wait", name]), "docker wait"), "0");
        // Gathered as gather.sh gathers from pods: the container's log.
        let log = docker(host, &["logs", name]);
        let file = dir.path().join(format!("shard{i}.json"));
        std::fs::write(&file, &log.stdout).unwrap();
        files.push(file);
        checked(docker(host, &["rm", name]), "docker rm");
    }
    let counted = redis_calls(redis.port) - before;

    let mut args = vec!["merge".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["--out".to_string(), "merged.json".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(loadcell(dir.path(), &args));
    let merged = read_json(&dir.path().join("merged.json"));
    assert_valid_result(&merged);
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
    checked(docker(host, &["rmi", &tag]), "docker rmi");
}
