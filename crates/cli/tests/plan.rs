//! `loadcell plan` end to end: labelled result files made by really running
//! loadcell against the in-process `sim://` server, whose concurrency limit
//! and fixed service time give a known throughput per "node" (a node is
//! one slot: `concurrency=N&latency=fixed:20ms` serves N / 20 ms = 50·N
//! requests/s while enough clients keep every slot busy). Service times of
//! 20 ms, not 2: a VM's millisecond scheduling hiccups then move a 1 s
//! run's throughput and p99 by a few percent, not by the margin between
//! two node counts.

mod common;

use std::path::Path;

use common::{loadcell, ok, stderr, stdout};
use serde_json::Value;

const PRICES: &str = "\
[[instance]]
name = \"small\"
vcpus = 2
memory_gib = 4
usd_per_hour = 0.1

[[instance]]
name = \"big\"
vcpus = 4
memory_gib = 8
usd_per_hour = 0.25
";

/// One closed-loop run of `nodes` sim slots at `latency`, with twice as
/// many clients as slots, labelled for the plan.
fn run(dir: &Path, out: &str, instance: &str, nodes: u32, latency: &str, labels: &[&str]) {
    let target = format!("sim://?concurrency={nodes}&latency=fixed:{latency}");
    let clients = (2 * nodes).to_string();
    let mut args = vec![
        "run",
        "kv",
        "--target",
        &target,
        "--ratio",
        "0:1",
        "--threads",
        "1",
        "--clients",
        &clients,
        "--time",
        "1s",
        "--out",
        out,
    ];
    let instance = format!("instance={instance}");
    let nodes = format!("nodes={nodes}");
    for l in [instance.as_str(), nodes.as_str()] {
        args.extend(["--label", l]);
    }
    for l in labels {
        args.extend(["--label", l]);
    }
    ok(loadcell(dir, &args));
}

fn plan_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["plan", "--prices", "prices.toml", "--json"];
    args.extend(extra);
    serde_json::from_str(&stdout(&ok(loadcell(dir, &args)))).expect("plan --json is JSON")
}

fn instance<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["plan"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {plan:#}"))
}

#[test]
fn plan_from_sim_runs_has_known_node_counts_and_costs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("prices.toml"), PRICES).unwrap();
    // small: 1, 2, 3 nodes of 50 ops/s each.
    for n in 1..=3 {
        run(dir, &format!("small-{n}.json"), "small", n, "20ms", &[]);
    }
    // big: one node of 100 ops/s (two 20 ms slots), as a sweep of
    // clients: 1 client uses one slot (50/s), 2 use both; the plan takes
    // the faster setting.
    ok(loadcell(
        dir,
        &[
            "sweep",
            "kv",
            "--target",
            "sim://?concurrency=2&latency=fixed:20ms",
            "--ratio",
            "0:1",
            "--threads",
            "1",
            "--clients",
            "1,2",
            "--time",
            "1s",
            "--label",
            "instance=big",
            "--label",
            "nodes=1",
            "--out",
            "big-sweep.json",
        ],
    ));
    let files = [
        "small-1.json",
        "small-2.json",
        "small-3.json",
        "big-sweep.json",
    ];

    // 165 ops/s with 25% headroom needs 206.25: small ceil(206.25/50) = 5
    // nodes ($0.10 × 730 × 5 = $365), big ceil(206.25/100) = 3 ($547.50).
    let mut args = vec![
        "--target-throughput",
        "165",
        "--headroom",
        "25%",
        "--scaling",
        "big=linear",
        "--html",
        "plan.html",
    ];
    args.extend(files);
    let plan = plan_json(dir, &args);
    assert_eq!(plan["unit"], "ops/s");
    let small = instance(&plan, "small");
    assert_eq!(small["nodes"], 5, "{small:#}");
    assert!((small["monthly_cost"].as_f64().unwrap() - 365.0).abs() < 1e-6);
    assert_eq!(small["scaling"]["model"], "fit");
    let lambda = small["model"]["lambda"].as_f64().unwrap();
    assert!((46.0..=50.5).contains(&lambda), "per-node {lambda}");
    assert_eq!(small["extrapolated"], true);
    let big = instance(&plan, "big");
    assert_eq!(big["nodes"], 3, "{big:#}");
    assert!((big["monthly_cost"].as_f64().unwrap() - 547.5).abs() < 1e-6);
    assert_eq!(plan["plan"]["cheapest"], "small");
    assert_eq!(
        plan["plan"]["by_monthly_cost"],
        serde_json::json!(["small", "big"])
    );
    let big_measured = &plan["instances"][1]["measured"][0];
    assert!(
        big_measured["setting"]
            .as_str()
            .unwrap()
            .contains("clients=2"),
        "{big_measured:#}"
    );
    assert_eq!(big_measured["settings"], 2);
    let html = std::fs::read_to_string(dir.join("plan.html")).unwrap();
    assert!(html.contains("<section id=\"plan\">") && html.contains("Monthly cost against"));

    // The text view says the same.
    let mut args = vec![
        "plan",
        "--prices",
        "prices.toml",
        "--target-throughput",
        "165",
        "--headroom",
        "25%",
        "--scaling",
        "big=linear",
    ];
    args.extend(files);
    let text = stdout(&ok(loadcell(dir, &args)));
    assert!(
        text.contains("cheapest for 165 ops/s: small (5 nodes, $365/month)"),
        "{text}"
    );
    assert!(
        text.contains("ranked by $/month: small ($365), big ($548)"),
        "{text}"
    );

    // Gates on the cheapest answer (small: 5 nodes, $365 a month).
    let gated = |more: &[&str]| {
        let mut all = args.clone();
        all.extend(more);
        loadcell(dir, &all)
    };
    let o = gated(&[
        "--threshold",
        "nodes <= 5",
        "--threshold",
        "monthly_cost <= $400",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("Gates: 2 of 2 passed"),
        "{}",
        stdout(&o)
    );
    let o = gated(&[
        "--threshold",
        "nodes <= 5",
        "--threshold",
        "monthly_cost <= 300",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("GATE FAILED: monthly_cost <= 300 at small: measured $365.00/month"),
        "{}",
        stdout(&o)
    );
    let o = gated(&["--threshold", "nodes <= 4", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let gated_plan: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let gate = &gated_plan["gates"][0];
    assert_eq!(
        (gate["passed"].as_bool(), gate["value"].as_f64()),
        (Some(false), Some(5.0)),
        "{gate}"
    );

    // A p99 bound of 30 ms: small queues each request behind another (p99
    // about 40 ms) and drops out; big at 2 clients (about 20 ms) stays.
    let mut args = vec![
        "--target-throughput",
        "165",
        "--headroom",
        "25%",
        "--scaling",
        "big=linear",
        "--latency",
        "p99<=30ms",
    ];
    args.extend(files);
    let plan = plan_json(dir, &args);
    assert_eq!(instance(&plan, "small")["latency_ok"], false);
    assert_eq!(instance(&plan, "big")["latency_ok"], true);
    assert_eq!(plan["plan"]["cheapest"], "big");

    // Beyond the fitted range with a single node and no stated model: asks
    // for one.
    let o = loadcell(
        dir,
        &[
            "plan",
            "--prices",
            "prices.toml",
            "--target-throughput",
            "165",
            "big-sweep.json",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--scaling big=linear"),
        "{}",
        stderr(&o)
    );

    // The spec table (S1's shape) is `loadcell report`'s: rows keyed by
    // the labels that differ.
    let md = stdout(&ok(loadcell(
        dir,
        &[
            "report",
            "--markdown",
            "-",
            "small-1.json",
            "small-2.json",
            "small-3.json",
        ],
    )));
    assert!(
        md.starts_with("| nodes | clients | events/s | ops/s | p95 (ms) |"),
        "{md}"
    );
}

#[test]
fn bad_input_gets_a_one_line_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("prices.toml"), PRICES).unwrap();
    run(dir, "big.json", "big", 1, "1ms", &[]);
    run(dir, "medium.json", "medium", 1, "1ms", &[]);
    ok(loadcell(
        dir,
        &[
            "run",
            "kv",
            "--target",
            "sim://",
            "--ratio",
            "0:1",
            "--events",
            "100",
            "--label",
            "instance=big",
            "--out",
            "no-nodes.json",
        ],
    ));
    std::fs::write(
        dir.join("typo.toml"),
        PRICES.replace("memory_gib = 8", "memory_gb = 8"),
    )
    .unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--prices", "typo.toml", "big.json"],
            "typo.toml line 10, column 1: unknown field `memory_gb`, expected one of",
        ),
        (
            &["medium.json"],
            "medium.json: instance=medium has no price in prices.toml (priced: small, big)",
        ),
        (
            &["no-nodes.json"],
            "no-nodes.json: a run of big has no `nodes` label",
        ),
        (
            &["--target-throughput", "0", "big.json"],
            "invalid value '0' for '--target-throughput <PER_SEC>': must be greater than 0",
        ),
        (
            &["--target-throughput", "-5", "big.json"],
            "must be greater than 0",
        ),
        (
            &["--headroom", "100%", "big.json"],
            "must be at least 0% and below 100%",
        ),
        (
            &["--headroom", "-5%", "big.json"],
            "must be at least 0% and below 100%",
        ),
        (
            &["--latency", "p95<=2ms", "big.json"],
            "only p99 is planned on",
        ),
        (
            &["--threshold", "p99 <= 2ms", "big.json"],
            "--threshold 'p99 <= 2ms' is judged on runs, not on a plan",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["plan", "--scaling", "linear"];
        if !extra.contains(&"--prices") {
            args.extend(["--prices", "prices.toml"]);
        }
        if !extra.contains(&"--target-throughput") {
            args.extend(["--target-throughput", "1000"]);
        }
        args.extend(*extra);
        let o = loadcell(dir, &args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("loadcell: error: "), "{err}");
    }
}
