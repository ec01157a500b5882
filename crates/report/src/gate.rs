//! Gates (k6's thresholds): `p99 <= 2ms`, `error_rate < 0.1%`,
//! `ops_per_sec >= 50k`, `verification ok` on a run; `knee >= 32` on a
//! sweep, `rate >= 10k` on a findmax; `nodes <= 8`, `monthly_cost <= 5k`
//! on a capacity plan (its cheapest answer). A gate is parsed once, before any
//! load, and judged on the result afterwards; a failed one sets exit
//! status 3, as a failed verification does.

use loadcell_analysis::plan::Plan;
use loadcell_record::hist::LatencySummary;
use loadcell_record::result::{GateVerdict, RunResult};
use loadcell_record::sweep::{SweepKind, SweepResult};

/// One gate: what is measured, how it compares, and the bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// As written, for messages and the result file.
    text: String,
    metric: Metric,
    /// `None` for `verification ok`.
    bound: Option<(Cmp, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Metric {
    /// A latency statistic in ms: of responses (from the intended start
    /// under a rate), of service time, or of one operation kind.
    Latency {
        of: LatencyOf,
        stat: Stat,
    },
    ErrorRate,
    Errors,
    PerSec(PerSec),
    /// `client.utilisation`: how near its own ceiling the client ran.
    ClientUtilisation,
    /// Of what the run's check expected, the share it did not find: an
    /// MQTT QoS 0 run's lost messages (its verification passes).
    Loss,
    VerificationOk,
    /// The sweep's knee: the first value that no longer scaled.
    Knee,
    /// The highest rate a findmax found meeting its SLA.
    Rate,
    /// A capacity plan's cheapest answer: its node count, and its cost a
    /// month.
    Nodes,
    MonthlyCost,
}

#[derive(Debug, Clone, PartialEq)]
enum LatencyOf {
    Response,
    Service,
    Op(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum PerSec {
    Ops,
    Events,
    Txn,
    Items,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmp {
    Le,
    Lt,
    Ge,
    Gt,
}

impl Cmp {
    fn holds(self, measured: f64, bound: f64) -> bool {
        match self {
            Cmp::Le => measured <= bound,
            Cmp::Lt => measured < bound,
            Cmp::Ge => measured >= bound,
            Cmp::Gt => measured > bound,
        }
    }
}

/// A statistic of a [`LatencySummary`].
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stat {
    Min,
    Mean,
    P50,
    P90,
    P95,
    P99,
    P999,
    P9999,
    Max,
}

const STATS: &[(&str, Stat)] = &[
    ("min", Stat::Min),
    ("mean", Stat::Mean),
    ("avg", Stat::Mean),
    ("p50", Stat::P50),
    ("median", Stat::P50),
    ("p90", Stat::P90),
    ("p95", Stat::P95),
    ("p99", Stat::P99),
    ("p999", Stat::P999),
    ("p99.9", Stat::P999),
    ("p9999", Stat::P9999),
    ("p99.99", Stat::P9999),
    ("max", Stat::Max),
];

impl Stat {
    fn of(self, l: &LatencySummary) -> f64 {
        match self {
            Stat::Min => l.min,
            Stat::Mean => l.mean,
            Stat::P50 => l.p50,
            Stat::P90 => l.p90,
            Stat::P95 => l.p95,
            Stat::P99 => l.p99,
            Stat::P999 => l.p999,
            Stat::P9999 => l.p9999,
            Stat::Max => l.max,
        }
    }
}

const HELP: &str = "e.g. 'p99 <= 2ms', 'service.p999 < 10ms', 'read.p99 <= 1ms', \
                    'error_rate < 0.1%', 'ops_per_sec >= 50k', 'verification ok', \
                    'loss < 0.1%', 'knee >= 32' (sweep), 'rate >= 10k' (findmax), \
                    'nodes <= 8', 'monthly_cost <= 5k' (plan)";

impl Gate {
    /// Parses a gate, or says in one line what is wrong with it.
    pub fn parse(text: &str) -> Result<Gate, String> {
        let text = text.trim();
        let bad = |why: &str| format!("gate '{text}': {why} ({HELP})");
        let squeezed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if squeezed == "verification ok" {
            return Ok(Gate {
                text: squeezed,
                metric: Metric::VerificationOk,
                bound: None,
            });
        }
        let (at, op, cmp) = [
            ("<=", Cmp::Le),
            (">=", Cmp::Ge),
            ("<", Cmp::Lt),
            (">", Cmp::Gt),
        ]
        .into_iter()
        .find_map(|(op, cmp)| text.find(op).map(|at| (at, op, cmp)))
        .ok_or_else(|| bad("no comparison: use <=, <, >= or >"))?;
        let name = text[..at].trim();
        let value = text[at + op.len()..].trim();
        if value.is_empty() {
            return Err(bad("no bound after the comparison"));
        }
        let metric = metric(name).ok_or_else(|| bad(&format!("unknown measure '{name}'")))?;
        let bound = match &metric {
            Metric::Latency { .. } => duration_ms(value),
            Metric::ErrorRate | Metric::ClientUtilisation | Metric::Loss => fraction(value),
            Metric::Errors | Metric::Knee | Metric::Nodes => plain(value),
            Metric::PerSec(_) | Metric::Rate | Metric::MonthlyCost => {
                count(value.trim_start_matches('$'))
            }
            Metric::VerificationOk => unreachable!("parsed above"),
        }
        .map_err(|why| format!("gate '{text}': {why}"))?;
        Ok(Gate {
            text: format!("{name} {op} {value}"),
            metric,
            bound: Some((cmp, bound)),
        })
    }

    /// Whether this gate is judged on a sweep or findmax as a whole
    /// rather than on each run.
    pub fn on_whole_sweep(&self) -> bool {
        matches!(self.metric, Metric::Knee | Metric::Rate)
    }

    /// Whether this gate is judged on a capacity plan.
    pub fn on_plan(&self) -> bool {
        matches!(self.metric, Metric::Nodes | Metric::MonthlyCost)
    }

    /// Refuses a gate the command cannot judge: a knee on a findmax, a
    /// rate on a sweep, a plan's answer on either.
    pub fn fits(&self, kind: SweepKind) -> Result<(), String> {
        if self.on_plan() {
            return Err(format!(
                "gate '{}': a capacity plan's answer; give it to `loadcell plan`",
                self.text
            ));
        }
        match (&self.metric, kind) {
            (Metric::Knee, SweepKind::Findmax) => Err(format!(
                "gate '{}': a findmax has no knee; gate its 'rate' instead",
                self.text
            )),
            (Metric::Rate, SweepKind::Sweep) => Err(format!(
                "gate '{}': 'rate' is a findmax's answer; gate a sweep's 'knee' or its runs",
                self.text
            )),
            _ => Ok(()),
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The verdict on one run; `at` names the run within a sweep.
    pub fn judge_run(&self, r: &RunResult, at: Option<String>) -> GateVerdict {
        let s = &r.summary;
        let measured = match &self.metric {
            Metric::VerificationOk => {
                return match &r.verification {
                    Some(v) => {
                        self.verdict(at, v.ok, format!("found {} of {}", v.found, v.expected))
                    }
                    None => self.verdict(at, false, "the run made no check of its data".into()),
                };
            }
            Metric::Latency { of, stat } => match of {
                LatencyOf::Response => Some(stat.of(&s.latency_ms)),
                LatencyOf::Service => Some(stat.of(&s.service_time_ms)),
                LatencyOf::Op(kind) => r.ops.get(kind).map(|o| stat.of(&o.latency_ms)),
            },
            Metric::ErrorRate => Some(if s.ops == 0 {
                if s.errors > 0 {
                    1.0
                } else {
                    0.0
                }
            } else {
                s.errors as f64 / s.ops as f64
            }),
            Metric::Errors => Some(s.errors as f64),
            Metric::PerSec(PerSec::Ops) => Some(s.ops_per_sec),
            Metric::PerSec(PerSec::Events) => Some(s.events_per_sec),
            Metric::PerSec(PerSec::Txn) => s.txn_per_sec,
            Metric::PerSec(PerSec::Items) => s.items_per_sec,
            Metric::ClientUtilisation => r.client.as_ref().map(|c| c.utilisation),
            Metric::Loss => r.verification.as_ref().map(|v| {
                if v.expected == 0 {
                    0.0
                } else {
                    v.expected.saturating_sub(v.found) as f64 / v.expected as f64
                }
            }),
            Metric::Knee | Metric::Rate => {
                return self.verdict(at, false, "judged on a sweep, not on one run".into())
            }
            Metric::Nodes | Metric::MonthlyCost => {
                return self.verdict(at, false, "judged on a plan, not on one run".into())
            }
        };
        self.against(measured, at, || match &self.metric {
            Metric::Latency {
                of: LatencyOf::Op(kind),
                ..
            } => format!("the run has no operation kind '{kind}'"),
            _ => "the run does not measure it".into(),
        })
    }

    /// The verdicts on a sweep: a run gate on every run (one verdict per
    /// run that failed it, or one that says all passed), a sweep gate on
    /// its analysis.
    pub fn judge_sweep(&self, sweep: &SweepResult) -> Vec<GateVerdict> {
        match self.metric {
            Metric::Knee => {
                let measured = sweep.analysis.knee.as_ref().map(|k| k.x);
                let last = sweep.points.last().map_or(0.0, |p| p.value);
                vec![match measured {
                    Some(x) => self.against(Some(x), None, String::new),
                    // No knee: it scaled to the last value swept and beyond.
                    None => {
                        let (cmp, bound) = self.bound.expect("knee gates have a bound");
                        let passed = matches!(cmp, Cmp::Ge | Cmp::Gt) && last >= bound;
                        self.verdict(
                            None,
                            passed,
                            format!("no knee: it scaled up to {} = {last}", sweep.parameter),
                        )
                    }
                }]
            }
            Metric::Rate => {
                let found = sweep.analysis.findmax.as_ref().and_then(|f| f.best_rate);
                vec![self.against(found, None, || "no rate met the SLA".into())]
            }
            _ => {
                let mut failed: Vec<GateVerdict> = Vec::new();
                let mut runs = 0;
                for p in &sweep.points {
                    for (i, r) in p.runs.iter().enumerate() {
                        runs += 1;
                        let at = format!("{} = {}, run {}", sweep.parameter, p.value, i + 1);
                        let v = self.judge_run(r, Some(at));
                        if !v.passed {
                            failed.push(v);
                        }
                    }
                }
                if failed.is_empty() {
                    vec![self.verdict(None, true, format!("all {runs} runs"))]
                } else {
                    failed
                }
            }
        }
    }

    /// The verdict on a capacity plan, from its cheapest instance type
    /// that meets the target; a plan none meets fails every plan gate.
    pub fn judge_plan(&self, plan: &Plan) -> GateVerdict {
        let cheapest = plan
            .cheapest
            .as_ref()
            .and_then(|c| plan.instances.iter().find(|p| &p.name == c));
        let measured = match self.metric {
            Metric::Nodes => cheapest.and_then(|p| p.nodes).map(|n| n as f64),
            Metric::MonthlyCost => cheapest.and_then(|p| p.monthly_cost),
            _ => {
                return self.verdict(
                    None,
                    false,
                    "judged on runs, not on a plan: gate the runs the plan reads".into(),
                )
            }
        };
        let at = cheapest.map(|p| p.name.clone());
        self.against(measured, at, || "no instance type meets the target".into())
    }

    fn against(
        &self,
        measured: Option<f64>,
        at: Option<String>,
        absent: impl FnOnce() -> String,
    ) -> GateVerdict {
        let Some(value) = measured else {
            return self.verdict(at, false, absent());
        };
        let (cmp, bound) = self
            .bound
            .expect("every gate but verification ok has a bound");
        let mut v = self.verdict(at, cmp.holds(value, bound), self.show(value));
        v.value = Some(value);
        v
    }

    fn verdict(&self, at: Option<String>, passed: bool, measured: String) -> GateVerdict {
        GateVerdict {
            gate: self.text.clone(),
            at,
            passed,
            measured,
            value: None,
        }
    }

    /// The measured value in the gate's own unit.
    fn show(&self, value: f64) -> String {
        match self.metric {
            Metric::Latency { .. } => format!("{value:.3} ms"),
            Metric::ErrorRate | Metric::Loss => format!("{:.4}%", value * 100.0),
            Metric::ClientUtilisation => format!("{:.0}%", value * 100.0),
            Metric::PerSec(_) | Metric::Rate => format!("{value:.1}/s"),
            Metric::MonthlyCost => format!("${value:.2}/month"),
            _ => format!("{value}"),
        }
    }
}

fn metric(name: &str) -> Option<Metric> {
    let name = name.to_ascii_lowercase();
    let fixed = match name.as_str() {
        "error_rate" | "errors_rate" => Some(Metric::ErrorRate),
        "errors" => Some(Metric::Errors),
        "ops_per_sec" | "ops" | "qps" => Some(Metric::PerSec(PerSec::Ops)),
        "events_per_sec" | "events" => Some(Metric::PerSec(PerSec::Events)),
        "txn_per_sec" | "tps" => Some(Metric::PerSec(PerSec::Txn)),
        "items_per_sec" | "items" => Some(Metric::PerSec(PerSec::Items)),
        "client_utilisation" | "client" => Some(Metric::ClientUtilisation),
        "loss" | "loss_rate" => Some(Metric::Loss),
        "knee" => Some(Metric::Knee),
        "rate" => Some(Metric::Rate),
        "nodes" => Some(Metric::Nodes),
        "monthly_cost" | "cost" => Some(Metric::MonthlyCost),
        _ => None,
    };
    if fixed.is_some() {
        return fixed;
    }
    let stat = |s: &str| STATS.iter().find(|(n, _)| *n == s).map(|(_, st)| *st);
    if let Some(stat) = stat(&name) {
        return Some(Metric::Latency {
            of: LatencyOf::Response,
            stat,
        });
    }
    // `service.p99`, or an operation kind's: `read.p99`, `point_select.max`.
    let (of, st) = name
        .match_indices('.')
        .map(|(i, _)| (&name[..i], &name[i + 1..]))
        .find(|(_, st)| stat(st).is_some())?;
    let of = match of {
        "" => return None,
        "service" => LatencyOf::Service,
        "response" | "latency" => LatencyOf::Response,
        kind => LatencyOf::Op(kind.to_string()),
    };
    Some(Metric::Latency {
        of,
        stat: stat(st)?,
    })
}

/// `2ms`, `250us`, `1.5s` in ms; a bare number is refused (2 what?).
fn duration_ms(v: &str) -> Result<f64, String> {
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("'{v}' needs a unit: ms, us or s (e.g. 2ms)"))?;
    let (n, unit) = v.split_at(split);
    let n: f64 = n.parse().map_err(|_| format!("'{v}' is not a duration"))?;
    let scale = match unit.trim() {
        "ns" => 1e-6,
        "us" | "µs" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        other => return Err(format!("unknown unit '{other}' in '{v}': use ms, us or s")),
    };
    Ok(n * scale)
}

/// `0.1%` or `0.001`.
fn fraction(v: &str) -> Result<f64, String> {
    let (n, scale) = match v.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (v, 1.0),
    };
    let f = n
        .parse::<f64>()
        .map_err(|_| format!("'{v}' is not a rate such as 0.1%"))?
        * scale;
    if (0.0..=1.0).contains(&f) {
        Ok(f)
    } else {
        Err(format!("'{v}' is not between 0% and 100%"))
    }
}

/// `50000`, `50k`, `1.5M`.
fn count(v: &str) -> Result<f64, String> {
    let (n, scale) = match v.chars().last() {
        Some('k' | 'K') => (&v[..v.len() - 1], 1e3),
        Some('m' | 'M') => (&v[..v.len() - 1], 1e6),
        Some('g' | 'G') => (&v[..v.len() - 1], 1e9),
        _ => (v, 1.0),
    };
    n.trim()
        .parse::<f64>()
        .map(|n| n * scale)
        .map_err(|_| format!("'{v}' is not a number such as 50k"))
}

fn plain(v: &str) -> Result<f64, String> {
    v.parse().map_err(|_| format!("'{v}' is not a number"))
}

/// The gates that failed, one line each, for a summary.
pub fn failures(verdicts: &[GateVerdict]) -> Vec<String> {
    verdicts
        .iter()
        .filter(|v| !v.passed)
        .map(|v| match &v.at {
            Some(at) => format!("GATE FAILED: {} at {at}: measured {}", v.gate, v.measured),
            None => format!("GATE FAILED: {}: measured {}", v.gate, v.measured),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    fn judged(gate: &str, r: &RunResult) -> GateVerdict {
        Gate::parse(gate).unwrap().judge_run(r, None)
    }

    #[test]
    fn latency_rate_and_error_gates_pass_and_fail_on_a_run() {
        let mut r = fixture::run(4, 1000.0);
        let p99 = r.summary.latency_ms.p99;
        assert!(judged(&format!("p99 <= {}ms", p99 + 0.5), &r).passed);
        let failed = judged(&format!("p99<{}us", (p99 * 1000.0 - 1.0).max(0.0)), &r);
        assert!(!failed.passed);
        assert_eq!(failed.value, Some(p99));
        assert!(judged("ops_per_sec >= 1", &r).passed);
        assert!(!judged("ops_per_sec >= 1G", &r).passed);
        r.summary.ops = 1000;
        r.summary.errors = 2;
        assert!(judged("error_rate <= 0.2%", &r).passed);
        assert!(!judged("error_rate < 0.2%", &r).passed);
        assert_eq!(
            failures(&[judged("error_rate < 0.1%", &r)]),
            ["GATE FAILED: error_rate < 0.1%: measured 0.2000%"]
        );
        assert!(
            !judged("client_utilisation < 90%", &r).passed,
            "no ceiling recorded"
        );
        r.client = loadcell_analysis::ceiling::from_run_cpu(10_000, 10.0, 9.6, 1, 2);
        assert_eq!(
            failures(&[judged("client_utilisation < 90%", &r)]),
            ["GATE FAILED: client_utilisation < 90%: measured 96%"]
        );
    }

    #[test]
    fn an_operation_kinds_latency_and_verification_are_gated() {
        let r = fixture::run(4, 1000.0);
        let kind = r.ops.keys().next().unwrap().clone();
        assert!(judged(&format!("{kind}.max <= 3600s"), &r).passed);
        assert!(!judged("nosuchop.p99 <= 1s", &r).passed);
        assert!(judged("nosuchop.p99 <= 1s", &r)
            .measured
            .contains("no operation kind 'nosuchop'"));
        assert!(!judged("verification ok", &r).passed);
        let mut checked = r.clone();
        checked.verification = Some(loadcell_record::result::Verification::new(
            5,
            5,
            true,
            "count".into(),
        ));
        assert!(judged("verification   ok", &checked).passed);
        assert!(
            !judged("loss < 1%", &r).passed,
            "no check, no loss measured"
        );
        checked.verification = Some(loadcell_record::result::Verification::new(
            1000,
            995,
            true,
            "QoS 0".into(),
        ));
        assert!(judged("loss <= 0.5%", &checked).passed);
        assert_eq!(
            failures(&[judged("loss < 0.1%", &checked)]),
            ["GATE FAILED: loss < 0.1%: measured 0.5000%"]
        );
    }

    #[test]
    fn bad_gates_say_what_is_wrong_in_one_line() {
        for (gate, says) in [
            ("p99 2ms", "no comparison"),
            ("p98 <= 2ms", "unknown measure 'p98'"),
            ("p99 <= 2", "needs a unit"),
            ("error_rate < 5 apples", "not a rate"),
            ("ops_per_sec >=", "no bound"),
            ("error_rate < 150%", "between 0% and 100%"),
        ] {
            let e = Gate::parse(gate).unwrap_err();
            assert!(e.contains(says) && !e.contains('\n'), "{gate}: {e}");
        }
        assert_eq!(
            Gate::parse("p99.9<=250us").unwrap().text(),
            "p99.9 <= 250us"
        );
        let knee = Gate::parse("knee >= 32").unwrap();
        assert!(knee.on_whole_sweep());
        assert!(knee.fits(SweepKind::Sweep).is_ok());
        assert!(knee
            .fits(SweepKind::Findmax)
            .unwrap_err()
            .contains("no knee"));
        let rate = Gate::parse("rate >= 10k").unwrap();
        assert!(rate.fits(SweepKind::Sweep).is_err());
    }

    #[test]
    fn a_sweep_is_gated_on_its_knee_and_on_every_run() {
        let sweep = fixture::sweep(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], 1);
        let knee = sweep.analysis.knee.as_ref().map(|k| k.x);
        let v = Gate::parse("knee >= 8").unwrap().judge_sweep(&sweep);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].passed, knee.is_none_or(|x| x >= 8.0), "{v:?}");
        let all = Gate::parse("p99 <= 3600s").unwrap().judge_sweep(&sweep);
        assert!(all[0].passed && all[0].measured == "all 7 runs", "{all:?}");
        let none = Gate::parse("p99 <= 1ns").unwrap().judge_sweep(&sweep);
        assert_eq!(none.len(), 7);
        assert!(
            none[0].at.as_deref().unwrap().ends_with("= 1, run 1"),
            "{none:?}"
        );
    }

    #[test]
    fn plan_gates_judge_the_cheapest_answer() {
        // small: 13 nodes, $1,898 a month; <big> 4 nodes, $2,920.
        let view = fixture::plan_view("<big>");
        let judge = |g: &str| Gate::parse(g).unwrap().judge_plan(&view.plan);
        let v = judge("nodes <= 13");
        assert!(v.passed, "{v:?}");
        assert_eq!((v.at.as_deref(), v.value), (Some("small"), Some(13.0)));
        assert!(judge("monthly_cost <= 2k").passed);
        let v = judge("cost < $1.5k");
        assert!(!v.passed);
        assert!(v.measured.ends_with("/month"), "{v:?}");
        let v = judge("p99 <= 2ms");
        assert!(
            !v.passed && v.measured.starts_with("judged on runs"),
            "{v:?}"
        );
        let nodes = Gate::parse("nodes <= 4").unwrap();
        assert!(nodes.on_plan() && !nodes.on_whole_sweep());
        assert!(nodes.fits(SweepKind::Sweep).is_err());
        let run = fixture::run(1, 100.0);
        assert!(!nodes.judge_run(&run, None).passed);
    }
}
