//! `loadcell advise` in the tests of each server kind: runs that leave a
//! result file, advice as JSON, and what it says of one rule.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{loadcell, ok, stdout};

/// `loadcell run WORKLOAD --target URL ARGS… --out DIR/NAME.json`, which
/// may fail (a run the server refuses still writes its result); the result
/// file's path.
pub fn run_to(dir: &Path, name: &str, workload: &str, url: &str, args: &[&str]) -> PathBuf {
    let out = dir.join(format!("{name}.json"));
    let mut all = vec!["run", workload, "--target", url, "--out"];
    let out_str = out.to_str().expect("a UTF-8 temp path").to_string();
    all.push(&out_str);
    all.extend_from_slice(args);
    let o = loadcell(dir, &all);
    assert!(
        out.exists(),
        "no result from {all:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// `loadcell advise --target URL [--result FILE] --json`.
pub fn advise(dir: &Path, url: &str, result: Option<&Path>) -> Value {
    let mut all = vec!["advise", "--target", url, "--json"];
    let result = result.map(|p| p.to_str().expect("a UTF-8 temp path").to_string());
    if let Some(r) = &result {
        all.extend(["--result", r.as_str()]);
    }
    let o = ok(loadcell(dir, &all));
    serde_json::from_str(&stdout(&o)).expect("advise --json prints JSON")
}

/// The finding of `rule`, if it fired.
pub fn finding<'a>(advice: &'a Value, rule: &str) -> Option<&'a Value> {
    advice["advice"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["rule"] == rule)
}

/// Asserts that `rule` fired, and returns its evidence joined.
pub fn fires(advice: &Value, rule: &str) -> String {
    let f = finding(advice, rule).unwrap_or_else(|| panic!("{rule} did not fire: {advice:#}"));
    f["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .map(|e| e.as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Asserts that `rule` was checked and passed.
pub fn passes(advice: &Value, rule: &str) {
    let passed = advice["advice"]["passed"].as_array().expect("passed");
    assert!(
        passed.iter().any(|p| p == rule),
        "{rule} did not pass: {advice:#}"
    );
}
