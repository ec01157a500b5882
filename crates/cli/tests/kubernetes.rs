//! deploy/kubernetes validated offline: the kustomize base built with
//! `kubectl kustomize` and checked against Kubernetes' schemas by
//! `kubernetes-validate` (PyPI), each skipped with a message when the tool
//! is not installed.

use std::path::PathBuf;
use std::process::Command;

fn base() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

/// A field's value on its own `name: value` line of the manifests.
fn field<'a>(manifests: &'a str, name: &str) -> Vec<&'a str> {
    manifests
        .lines()
        .filter_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().trim_matches('"'))
        .collect()
}

#[test]
fn the_kustomize_base_is_a_valid_indexed_job_of_as_many_pods_as_shards() {
    let built = match Command::new("kubectl")
        .arg("kustomize")
        .arg(base())
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout).unwrap(),
        Ok(out) => panic!(
            "kubectl kustomize failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => {
            eprintln!("skipped: kubectl is not installed ({e})");
            return;
        }
    };
    assert_eq!(field(&built, "completionMode"), ["Indexed"]);
    let shards = field(&built, "SHARDS");
    assert_eq!(field(&built, "completions"), shards);
    assert_eq!(field(&built, "parallelism"), shards);
    assert_eq!(field(&built, "clusterIP"), ["None"]);
    // The pods run the image's shard entry point (Swarm's too), with every
    // variable it reads from the ConfigMap.
    assert!(
        built.contains("- command:\n        - /usr/local/bin/loadcell-shard\n"),
        "{built}"
    );
    for var in ["SHARDS", "WORKLOAD", "TARGET", "OPTIONS", "START_AT"] {
        assert_eq!(field(&built, var).len(), 1, "{var} in the ConfigMap");
    }
    let script = std::fs::read_to_string(base().join("../image/loadcell-shard")).unwrap();
    assert!(
        script.contains("--shard-count \"$SHARDS\"") && script.contains("--start-at \"$START_AT\"")
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("loadcell.yaml");
    std::fs::write(&file, &built).unwrap();
    match Command::new("kubernetes-validate")
        .arg("--strict")
        .arg(&file)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("skipped the schema check: kubernetes-validate is not installed ({e})"),
    }
}
