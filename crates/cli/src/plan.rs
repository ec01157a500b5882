//! `loadcell plan`: reads the price file and the labelled result files,
//! groups the runs by instance type and node count, and hands them to the
//! planning math (`loadcell_analysis::plan`); the views come from
//! `loadcell_report::plan`.

use std::ops::Range;
use std::path::Path;

use anyhow::{anyhow, bail};
use loadcell_analysis::plan::{operating_points, InstanceType, Measurement, PlanTarget, Scaling};
use loadcell_record::result::{RunResult, RunStatus};
use loadcell_record::sweep::{AnyResult, SweepKind};
use loadcell_report::input::Input;
use loadcell_report::plan::{InstanceFacts, PlanView};
use loadcell_report::table::number;
use serde::Deserialize;
use toml::Spanned;

use crate::args::PlanArgs;

/// The labels that place a run: which instance type, how many nodes.
const INSTANCE: &str = "instance";
const NODES: &str = "nodes";

/// One `[[instance]]` of the price file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub name: Spanned<String>,
    pub vcpus: u32,
    pub memory_gib: f64,
    pub usd_per_hour: Spanned<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    #[serde(default)]
    instance: Vec<Price>,
}

/// ` line L, column C` of a byte span in `text`.
fn location(text: &str, span: Option<Range<usize>>) -> String {
    let Some(span) = span else {
        return String::new();
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    format!(" line {line}, column {column}")
}

/// Reads and checks a price file; errors name the file, line and field.
pub fn read_prices(path: &Path) -> anyhow::Result<Vec<Price>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("cannot read the price file {}: {e}", path.display()))?;
    let file: PriceFile = toml::from_str(&text).map_err(|e| {
        anyhow!(
            "{}{}: {}",
            path.display(),
            location(&text, e.span()),
            e.message().trim()
        )
    })?;
    if file.instance.is_empty() {
        bail!(
            "{}: no [[instance]] entries (see examples/prices.toml)",
            path.display()
        );
    }
    for (i, p) in file.instance.iter().enumerate() {
        let at = |span| format!("{}{}", path.display(), location(&text, Some(span)));
        if p.name.get_ref().trim().is_empty() {
            bail!("{}: name must not be empty", at(p.name.span()));
        }
        if file.instance[..i]
            .iter()
            .any(|q| q.name.get_ref() == p.name.get_ref())
        {
            bail!(
                "{}: instance `{}` is listed twice",
                at(p.name.span()),
                p.name.get_ref()
            );
        }
        let usd = *p.usd_per_hour.get_ref();
        if !(usd.is_finite() && usd >= 0.0) {
            bail!(
                "{}: usd_per_hour must be 0 or more",
                at(p.usd_per_hour.span())
            );
        }
        if !(p.memory_gib.is_finite() && p.memory_gib >= 0.0) {
            bail!("{}: memory_gib must be 0 or more", at(p.name.span()));
        }
    }
    Ok(file.instance)
}

/// `fit`, `linear` or `usl:SIGMA:KAPPA`, optionally for one instance type
/// as `NAME=MODEL`.
pub fn parse_scaling(s: &str) -> Result<(Option<String>, Scaling), String> {
    let (name, model) = match s.split_once('=') {
        Some((n, m)) if !n.trim().is_empty() => (Some(n.trim().to_string()), m.trim()),
        _ => (None, s.trim()),
    };
    let bad = || "must be fit, linear or usl:SIGMA:KAPPA (optionally INSTANCE=MODEL)".to_string();
    let scaling = match model.split(':').collect::<Vec<_>>().as_slice() {
        ["fit"] => Scaling::Fit,
        ["linear"] => Scaling::Linear,
        ["usl", sigma, kappa] => {
            let num = |v: &str| v.trim().parse::<f64>().map_err(|_| bad());
            let (sigma, kappa) = (num(sigma)?, num(kappa)?);
            if !((0.0..=1.0).contains(&sigma) && kappa.is_finite() && kappa >= 0.0) {
                return Err("usl:SIGMA:KAPPA needs 0 <= SIGMA <= 1 and KAPPA >= 0".into());
            }
            Scaling::Usl { sigma, kappa }
        }
        _ => return Err(bad()),
    };
    Ok((name, scaling))
}

/// The runs a file holds: itself, or a sweep's steps (a findmax's probes
/// that missed its SLA left out: they are not a sustainable load).
fn runs_of(input: &Input) -> Vec<&RunResult> {
    match &input.result {
        AnyResult::Run(r) => vec![r],
        AnyResult::Sweep(s) => s
            .points
            .iter()
            .filter(|p| !(s.kind == SweepKind::Findmax && p.passed == Some(false)))
            .flat_map(|p| p.runs.iter())
            .collect(),
    }
}

/// How the run was driven: runs with the same setting are repeats.
fn setting(r: &RunResult) -> String {
    let c = &r.config;
    let mut parts = Vec::new();
    for (k, v) in [
        ("threads", Some(c.threads.to_string())),
        ("clients", Some(c.clients_per_thread.to_string())),
        ("rate", c.rate.map(number)),
    ] {
        if let (Some(v), false) = (v, r.labels.contains_key(k)) {
            parts.push(format!("{k}={v}"));
        }
    }
    parts.extend(
        r.labels
            .iter()
            .filter(|(k, _)| *k != INSTANCE && *k != NODES)
            .map(|(k, v)| format!("{k}={v}")),
    );
    parts.join(" ")
}

/// The measurements of every instance type, in order of first appearance,
/// with the files behind them, and the throughput unit.
struct Measured {
    unit: &'static str,
    by_instance: Vec<(String, Vec<Measurement>, Vec<String>)>,
}

fn measure(inputs: &[Input]) -> anyhow::Result<Measured> {
    let mut unit: Option<(&'static str, String)> = None;
    let mut workload: Option<(String, String)> = None;
    let mut by_instance: Vec<(String, Vec<Measurement>, Vec<String>)> = Vec::new();
    for input in inputs {
        let file = &input.name;
        let mut partial = 0;
        for r in runs_of(input) {
            if r.status != RunStatus::Complete {
                partial += 1;
                continue;
            }
            let instance = r.labels.get(INSTANCE).ok_or_else(|| {
                anyhow!("{file}: a run has no `{INSTANCE}` label; label runs with --label {INSTANCE}=NAME --label {NODES}=N")
            })?;
            let nodes = r.labels.get(NODES).ok_or_else(|| {
                anyhow!("{file}: a run of {instance} has no `{NODES}` label; label runs with --label {NODES}=N (the cluster's node count)")
            })?;
            let nodes = match nodes.trim().parse::<u64>() {
                Ok(n) if n > 0 => n as f64,
                _ => bail!("{file}: label {NODES}={nodes} is not a whole number of nodes above 0"),
            };
            let this_unit = if r.summary.txn_per_sec.is_some() {
                "TPS"
            } else {
                "ops/s"
            };
            match &unit {
                None => unit = Some((this_unit, file.clone())),
                Some((u, first)) if *u != this_unit => bail!(
                    "{file} measures {this_unit} but {first} measures {u}: plan one workload at a time"
                ),
                _ => {}
            }
            match &workload {
                None => workload = Some((r.config.workload.clone(), file.clone())),
                Some((w, first)) if *w != r.config.workload => bail!(
                    "{file} ran {} but {first} ran {w}: plan one workload at a time",
                    r.config.workload
                ),
                _ => {}
            }
            let m = Measurement {
                nodes,
                setting: setting(r),
                throughput: r.summary.txn_per_sec.unwrap_or(r.summary.events_per_sec),
                p99_ms: r.summary.latency_ms.p99,
            };
            match by_instance.iter_mut().find(|(n, _, _)| n == instance) {
                Some((_, ms, files)) => {
                    ms.push(m);
                    if !files.contains(file) {
                        files.push(file.clone());
                    }
                }
                None => by_instance.push((instance.clone(), vec![m], vec![file.clone()])),
            }
        }
        if partial > 0 {
            eprintln!("loadcell: note: {file}: {partial} partial run(s) left out");
        }
    }
    let Some((unit, _)) = unit else {
        bail!("no complete runs in the result files");
    };
    Ok(Measured { unit, by_instance })
}

/// Builds the plan for `a`: every file read, every label and price checked.
pub fn build(a: &PlanArgs, inputs: &[Input]) -> anyhow::Result<PlanView> {
    let prices = read_prices(&a.prices)?;
    let measured = measure(inputs)?;
    let scaling_for = |name: &str| {
        a.scaling
            .iter()
            .rev()
            .find(|(n, _)| n.as_deref() == Some(name))
            .or_else(|| a.scaling.iter().rev().find(|(n, _)| n.is_none()))
            .map(|(_, s)| *s)
            .unwrap_or_default()
    };
    for (n, _) in &a.scaling {
        if let Some(n) = n
            .as_deref()
            .filter(|n| !measured.by_instance.iter().any(|m| m.0 == *n))
        {
            bail!("--scaling names {n}, but no result is labelled {INSTANCE}={n}");
        }
    }
    let mut types = Vec::new();
    let mut facts = Vec::new();
    // In price-file order, so that the same prices always list alike.
    let mut by_instance = measured.by_instance;
    by_instance.sort_by_key(|m| prices.iter().position(|p| *p.name.get_ref() == m.0));
    for (name, ms, files) in by_instance {
        let price = prices
            .iter()
            .find(|p| *p.name.get_ref() == name)
            .ok_or_else(|| {
                let priced: Vec<&str> = prices.iter().map(|p| p.name.get_ref().as_str()).collect();
                anyhow!(
                    "{}: {INSTANCE}={name} has no price in {} (priced: {})",
                    files[0],
                    a.prices.display(),
                    priced.join(", ")
                )
            })?;
        let points = operating_points(&ms, a.latency);
        let scaling = scaling_for(&name);
        if scaling == Scaling::Fit && points.len() < 3 {
            let counts: Vec<String> = points.iter().map(|p| number(p.point.nodes)).collect();
            bail!(
                "{name} was measured at {} node count(s) ({}); fitting its scaling needs 3 or more: \
                 measure more node counts, or state a model with --scaling {name}=linear or --scaling {name}=usl:SIGMA:KAPPA",
                counts.len(),
                counts.join(", ")
            );
        }
        types.push(InstanceType {
            name: name.clone(),
            price_per_hour: *price.usd_per_hour.get_ref(),
            points: points.iter().map(|p| p.point).collect(),
            scaling,
        });
        facts.push(InstanceFacts {
            name,
            vcpus: price.vcpus,
            memory_gib: price.memory_gib,
            measured: points,
            files,
        });
    }
    let target = PlanTarget {
        throughput: a.target_throughput,
        max_p99_ms: a.latency,
        headroom: a.headroom,
    };
    let plan = loadcell_analysis::plan::plan(&types, &target).map_err(|e| anyhow!("{e}"))?;
    let gates = a.thresholds.iter().map(|g| g.judge_plan(&plan)).collect();
    Ok(PlanView {
        unit: measured.unit.to_string(),
        plan,
        instances: facts,
        gates,
    })
}

/// Refuses, before anything is read, a gate a plan cannot judge.
pub fn check_gates(a: &PlanArgs) -> anyhow::Result<()> {
    match a.thresholds.iter().find(|g| !g.on_plan()) {
        Some(g) => Err(anyhow!(
            "--threshold '{}' is judged on runs, not on a plan: a plan takes 'nodes' and 'monthly_cost' gates",
            g.text()
        )),
        None => Ok(()),
    }
}

/// Exit status 3 when a plan gate failed.
pub fn exit_code(view: &PlanView) -> i32 {
    if view.gates.iter().all(|g| g.passed) {
        0
    } else {
        crate::launch::EXIT_BELOW_EXPECTATION
    }
}

/// `loadcell plan`: prints the plan (text or JSON) and writes the HTML
/// report with its plan section when asked.
pub fn run(a: &PlanArgs) -> anyhow::Result<i32> {
    check_gates(a)?;
    crate::views::refuse_overwriting_results(&[("--html", &a.html)])?;
    if a.json && a.html.as_deref() == Some(std::path::Path::new("-")) {
        return Err(anyhow!(
            "--json prints the plan on stdout as one JSON document, and --html - would add the \
             HTML report to it: give --html a file name (e.g. --html plan.html)"
        ));
    }
    let inputs = crate::merge::read_inputs(&a.files, false)?;
    let view = build(a, &inputs)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&view).expect("plans serialize")
        );
    } else {
        print!("{}", loadcell_report::plan::text(&view));
    }
    if let Some(path) = &a.html {
        crate::views::write(
            path,
            &loadcell_report::html::render_with_plan(&inputs, Some(&view)),
        )?;
    }
    Ok(exit_code(&view))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_models() {
        assert_eq!(parse_scaling("linear").unwrap(), (None, Scaling::Linear));
        assert_eq!(
            parse_scaling("r5.large=usl:0.05:0.001").unwrap(),
            (
                Some("r5.large".into()),
                Scaling::Usl {
                    sigma: 0.05,
                    kappa: 0.001
                }
            )
        );
        assert!(parse_scaling("usl:2:0").is_err());
        assert!(parse_scaling("quadratic").is_err());
    }

    #[test]
    fn the_example_price_file_reads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/prices.toml");
        let prices = read_prices(&path).unwrap();
        assert_eq!(prices.len(), 4);
        assert_eq!(prices[1].name.get_ref(), "r5.large");
    }

    #[test]
    fn price_file_errors_name_the_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prices.toml");
        let check = |text: &str, want: &str| {
            std::fs::write(&path, text).unwrap();
            let err = read_prices(&path).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        };
        check(
            "[[instance]]\nname = \"a\"\nvcpus = 2\nmemory_gib = 4\nusd_per_hour = 0.1\ncpus = 3\n",
            "prices.toml line 6, column 1: unknown field `cpus`, expected one of",
        );
        check(
            "[[instance]]\nname = \"a\"\nvcpus = 2\nmemory_gib = 4\n",
            "missing field `usd_per_hour`",
        );
        check(
            "[[instance]]\nname = \"a\"\nvcpus = 2\nmemory_gib = 4\nusd_per_hour = -1\n",
            "line 5, column 16: usd_per_hour must be 0 or more",
        );
        check(
            "[[instance]]\nname = \"a\"\nvcpus = 2\nmemory_gib = 4\nusd_per_hour = 1\n\
             [[instance]]\nname = \"a\"\nvcpus = 2\nmemory_gib = 4\nusd_per_hour = 1\n",
            "line 7, column 8: instance `a` is listed twice",
        );
        check("", "no [[instance]] entries");
    }
}
