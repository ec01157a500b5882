//! The `sweep` and `findmax` commands: their own options split from the
//! `run` options they pass on, every step checked before any load is sent,
//! then the steps run and one sweep file written.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context as _};
use loadcell_record::result::StopReason;
use loadcell_record::sweep::{SweepKind, SweepResult};
use loadcell_report::gate::Gate;
use loadcell_report::input::Input;

use loadcell_analysis::findmax::{FindmaxPlan, Sla};

use crate::config::RunConfig;
use crate::run;
use crate::values::Warmup;
use crate::{sweep, values};

/// Takes `names` (with their values) out of `raw`; the rest is returned.
fn split_own(
    raw: &[String],
    names: &[&str],
    switches: &[&str],
) -> anyhow::Result<(HashMap<String, String>, Vec<String>)> {
    let mut own = HashMap::new();
    let mut rest = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        let arg = &raw[i];
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        if switches.contains(&name.as_str()) {
            own.insert(name, "on".into());
        } else if names.contains(&name.as_str()) {
            let value = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    raw.get(i)
                        .cloned()
                        .ok_or_else(|| anyhow!("{name} needs a value"))?
                }
            };
            own.insert(name, value);
        } else {
            rest.push(arg.clone());
        }
        i += 1;
    }
    Ok((own, rest))
}

/// Takes every `--threshold` out of `raw`: a sweep judges them itself, on
/// each run and on the whole, so the steps get none.
fn take_gates(raw: &[String], kind: SweepKind) -> anyhow::Result<(Vec<Gate>, Vec<String>)> {
    let mut gates = Vec::new();
    let mut rest = Vec::new();
    let mut args = raw.iter();
    while let Some(arg) = args.next() {
        let text = match arg.strip_prefix("--threshold") {
            Some("") => args
                .next()
                .ok_or_else(|| anyhow!("--threshold needs a gate, e.g. 'p99 <= 2ms'"))?,
            Some(inline) if inline.starts_with('=') => &inline[1..],
            _ => {
                rest.push(arg.clone());
                continue;
            }
        };
        let gate = Gate::parse(text).map_err(|e| anyhow!("--threshold: {e}"))?;
        gate.fits(kind).map_err(|e| anyhow!("--threshold: {e}"))?;
        gates.push(gate);
    }
    Ok((gates, rest))
}

/// The value of own option `name`, if given, read by `parse` (one of
/// [`crate::values`]); an error names the option and the value.
fn own_value<T>(
    own: &HashMap<String, String>,
    name: &str,
    parse: fn(&str) -> Result<T, String>,
) -> anyhow::Result<Option<T>> {
    own.get(name)
        .map(|v| parse(v).map_err(|e| anyhow!("{name} '{v}' {e}")))
        .transpose()
}

/// Judges the gates, writes the file, prints findings, the table and any
/// failed gate, and returns the exit code.
fn finish(
    mut result: SweepResult,
    args: &crate::args::RunArgs,
    gates: &[Gate],
    out: Option<&String>,
    json: bool,
    what: &str,
) -> anyhow::Result<i32> {
    let dest = crate::result::destination(
        out.map(Path::new),
        &args.target.results_dir,
        &format!("{what}-{}", args.target.workload),
    );
    result.gates = gates.iter().flat_map(|g| g.judge_sweep(&result)).collect();
    let path = result
        .write(&dest)
        .with_context(|| format!("cannot write the sweep file {dest}"))?;
    if json {
        println!("{}", result.to_json_pretty());
    } else {
        let input = Input::sweep(path.display().to_string(), result.clone());
        print!(
            "{}",
            loadcell_report::table::markdown(std::slice::from_ref(&input))
        );
        println!();
        for f in &result.findings {
            println!("- {f}");
        }
        if !result.gates.is_empty() {
            println!("{}", loadcell_report::text::gates(&result.gates));
        }
    }
    eprintln!(
        "{} written to {}",
        if what == "sweep" { "Sweep" } else { "Findmax" },
        path.display()
    );
    crate::history::remember(args, &path);
    if let Some(e) = &result.error {
        eprintln!("error: {e}");
    }
    let interrupted = result
        .points
        .iter()
        .flat_map(|p| &p.runs)
        .any(|r| r.stop_reason == StopReason::Interrupted);
    Ok(if interrupted {
        crate::launch::EXIT_INTERRUPTED
    } else if !result.complete {
        1
    } else if result.gates.iter().any(|g| !g.passed) {
        crate::launch::EXIT_BELOW_EXPECTATION
    } else {
        0
    })
}

/// How long a sweep with `--start-at` leaves between one step's end and
/// the next one's start by default: time for every shard to connect and
/// check before the instant.
const STEP_GAP: Duration = Duration::from_secs(10);

/// Where a sweep's step `n` (counting repeats, from 0) starts on the wall
/// clock with `--start-at`: `n` slots of the longest step (warm-up, time
/// and `gap`) after it, so that shards running the same sweep start every
/// step together without talking to each other.
fn step_starts(
    steps: &[RunConfig],
    gap: Duration,
) -> anyhow::Result<Option<(SystemTime, Duration)>> {
    let Some(first) = steps[0].args.start_at else {
        return Ok(None);
    };
    let mut slot = Duration::ZERO;
    for step in steps {
        let Some(time) = step.args.time else {
            bail!("a sweep with --start-at needs --time, so that every step starts at an instant all shards know");
        };
        slot = slot.max(step.args.warmup.fixed() + time + gap);
    }
    Ok(Some((first, slot)))
}

/// A sweep, checked: every step configured before any load is sent.
pub struct SweepJob {
    gates: Vec<Gate>,
    own: HashMap<String, String>,
    swept: sweep::SweptOption,
    steps: Vec<RunConfig>,
    repeat: usize,
    gap: Duration,
    argv: Vec<String>,
}

impl SweepJob {
    pub fn new(raw: &[String], argv: Vec<String>) -> anyhow::Result<SweepJob> {
        let (gates, raw) = take_gates(raw, SweepKind::Sweep)?;
        let (own, run_argv) = split_own(&raw, &["--repeat", "--out", "--step-gap"], &["--json"])?;
        let repeat = own_value(&own, "--repeat", values::positive_usize)?.unwrap_or(1);
        let gap = own_value(&own, "--step-gap", values::positive_duration)?.unwrap_or(STEP_GAP);
        let swept = sweep::find_swept(&run_argv)?;
        let steps = swept
            .steps(&run_argv)
            .iter()
            .map(|step| RunConfig::parse(step))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let first = &steps[0].args;
        if first.out.is_some() || first.json {
            bail!("--out and --json of a sweep apply to the sweep file; give them once, outside the run options");
        }
        if first.watch.is_some() {
            bail!("--watch follows one run's shards: give it to `loadcell run`, not to a sweep");
        }
        step_starts(&steps, gap)?;
        Ok(SweepJob {
            gates,
            own,
            swept,
            steps,
            repeat,
            gap,
            argv,
        })
    }

    /// The first step's configuration (every step's target and workload).
    pub fn first(&self) -> &RunConfig {
        &self.steps[0]
    }

    /// How long the sweep takes when its steps have a --time: with
    /// --start-at, one slot of the longest step per run, else the runs'
    /// own warm-up and time.
    pub fn estimate(&self) -> Option<Duration> {
        if let Ok(Some((_, slot))) = step_starts(&self.steps, self.gap) {
            return Some(slot * (self.steps.len() * self.repeat) as u32);
        }
        let one: Option<Duration> = self.steps.iter().map(run_estimate).sum();
        one.map(|d| d * self.repeat as u32)
    }

    /// Runs every step quietly (a failure before any load ends the whole
    /// command) and writes one sweep file.
    pub fn run(mut self) -> anyhow::Result<i32> {
        let first = &self.steps[0].args;
        let labels = first.labels.iter().cloned().collect();
        let command = redacted(&self.argv);
        let starts = step_starts(&self.steps, self.gap)?;
        let total = self.steps.len() * self.repeat;
        // One permutation of inserted ids for every step.
        let seed = self.steps[0].seed();
        let mut started = 0u32;
        let steps = &mut self.steps;
        let result = sweep::sweep(self.swept, self.repeat, labels, command, &mut |k| {
            if let Some((first, slot)) = starts {
                steps[k].start_at(first + slot * started);
            }
            steps[k].as_step(started as usize, total, seed);
            started += 1;
            run(&steps[k], true)
        })?;
        finish(
            result,
            &self.steps[0].args,
            &self.gates,
            self.own.get("--out"),
            self.own.contains_key("--json"),
            "sweep",
        )
    }
}

/// A run's warm-up (its longest, under `--warmup auto`) and time, when it
/// has a time.
pub fn run_estimate(config: &RunConfig) -> Option<Duration> {
    let a = &config.args;
    let warmup = match a.warmup {
        Warmup::Auto => a.warmup_max,
        fixed => fixed.fixed(),
    };
    a.time.map(|t| t + warmup)
}

fn redacted(argv: &[String]) -> Vec<String> {
    argv.iter()
        .map(|a| loadcell_core::target::redact_raw(a))
        .collect()
}

/// A findmax, checked: its SLA, bounds and run options read before any
/// load is sent.
pub struct FindmaxJob {
    gates: Vec<Gate>,
    own: HashMap<String, String>,
    sla: Sla,
    plan: FindmaxPlan,
    base: RunConfig,
    argv: Vec<String>,
}

impl FindmaxJob {
    pub fn new(raw: &[String], argv: Vec<String>) -> anyhow::Result<FindmaxJob> {
        let (gates, raw) = take_gates(raw, SweepKind::Findmax)?;
        let (own, run_argv) = split_own(
            &raw,
            &[
                "--sla",
                "--start-rate",
                "--max-rate",
                "--precision",
                "--min-achieved",
                "--max-probes",
                "--out",
            ],
            &["--json"],
        )?;
        let min_achieved = own_value(&own, "--min-achieved", values::share)?.unwrap_or(0.95);
        let bound = own_value(&own, "--sla", values::latency_bound)?
            .ok_or_else(|| anyhow!("findmax needs --sla, e.g. --sla 'p99<=10ms'"))?;
        let sla = Sla {
            percentile: bound.percentile,
            bound_ms: bound.bound_ms,
            min_achieved,
        };
        let plan = FindmaxPlan {
            start_rate: own_value(&own, "--start-rate", values::positive_f64)?.unwrap_or(1000.0),
            max_rate: own_value(&own, "--max-rate", values::positive_f64)?,
            precision: own_value(&own, "--precision", values::share)?.unwrap_or(0.05),
            max_probes: own_value(&own, "--max-probes", values::positive_usize)?.unwrap_or(20),
        };
        let base = RunConfig::parse(&run_argv)?;
        let a = &base.args;
        if a.stages.is_some() || a.session_stages.is_some() {
            bail!("findmax probes one fixed rate at a time: leave out --stages and --session-stages (a slow --stages ramp answers the same question in one run)");
        }
        if a.rate.is_some() {
            bail!("findmax chooses --rate itself; use --start-rate and --max-rate to bound it");
        }
        if a.out.is_some() || a.json {
            bail!("--out and --json of findmax apply to the findmax file; give them once, outside the run options");
        }
        if a.watch.is_some() {
            bail!("--watch follows one run's shards: give it to `loadcell run`, not to findmax");
        }
        Ok(FindmaxJob {
            gates,
            own,
            sla,
            plan,
            base,
            argv,
        })
    }

    /// The run every probe is, at its own rate.
    pub fn base(&self) -> &RunConfig {
        &self.base
    }

    /// At most: every probe's warm-up and time.
    pub fn estimate(&self) -> Option<Duration> {
        run_estimate(&self.base).map(|d| d * self.plan.max_probes as u32)
    }

    pub fn run(self) -> anyhow::Result<i32> {
        let a = &self.base.args;
        let labels = a.labels.iter().cloned().collect();
        let command = redacted(&self.argv);
        let (max_probes, seed) = (self.plan.max_probes, self.base.seed());
        let mut probes = 0;
        let base = &self.base;
        let result = sweep::findmax(&self.sla, self.plan, labels, command, &mut |rate| {
            let mut probe = base.at_rate(rate);
            probe.as_step(probes, max_probes, seed);
            probes += 1;
            run(&probe, true)
        })?;
        finish(
            result,
            a,
            &self.gates,
            self.own.get("--out"),
            self.own.contains_key("--json"),
            "findmax",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn own_options_are_split_off_and_read_by_the_shared_parsers() {
        let (own, rest) = split_own(
            &argv("kv --sla p99<=2ms --precision=2% --json --threads 4"),
            &["--sla", "--precision"],
            &["--json"],
        )
        .unwrap();
        assert_eq!(rest, argv("kv --threads 4"));
        assert_eq!(
            own_value(&own, "--precision", values::share).unwrap(),
            Some(0.02)
        );
        assert_eq!(
            own_value(&own, "--sla", values::latency_bound)
                .unwrap()
                .map(|b| b.bound_ms),
            Some(2.0)
        );
        assert_eq!(
            own_value(&own, "--max-rate", values::positive_f64).unwrap(),
            None
        );
        let (own, _) = split_own(
            &argv("--min-achieved 0 --sla p99"),
            &["--min-achieved", "--sla"],
            &[],
        )
        .unwrap();
        assert_eq!(
            own_value(&own, "--min-achieved", values::share)
                .unwrap_err()
                .to_string(),
            "--min-achieved '0' must be above 0% and at most 100%"
        );
        assert_eq!(
            own_value(&own, "--sla", values::latency_bound)
                .unwrap_err()
                .to_string(),
            "--sla 'p99' must look like p99<=10ms (a percentile, <=, and a duration)"
        );
    }

    #[test]
    fn a_sweep_with_start_at_starts_each_step_a_slot_of_the_longest_later() {
        let steps = |a: &str| -> Vec<RunConfig> {
            ["3s", "5s"]
                .iter()
                .map(|t| RunConfig::parse(&argv(&format!("cpu --warmup 1s {a} {t}"))).unwrap())
                .collect()
        };
        let at = "--start-at 2999-01-01T00:00:00Z --time";
        let (first, slot) = step_starts(&steps(at), Duration::from_secs(4))
            .unwrap()
            .unwrap();
        assert_eq!(first, values::start_at("2999-01-01T00:00:00Z").unwrap());
        assert_eq!(slot, Duration::from_secs(10), "1s + the longest 5s + 4s");
        assert!(step_starts(&steps("--time"), STEP_GAP).unwrap().is_none());
        let events = [
            RunConfig::parse(&argv("cpu --start-at 2999-01-01T00:00:00Z --events 100")).unwrap(),
        ];
        let e = step_starts(&events, STEP_GAP).unwrap_err().to_string();
        assert!(e.contains("needs --time"), "{e}");
    }
}
