//! Capacity and cost planning (scenario S8): from measured node-count
//! scaling per instance type, how many nodes and how many dollars a month a
//! target throughput needs, and which instance type is cheapest.
//!
//! Per instance type, the throughput of an `N`-node cluster is modelled by
//! the Universal Scalability Law ([`crate::usl::UslModel`]), either fitted
//! to the measured points ([`Scaling::Fit`], at least 3 node counts) or
//! stated ([`Scaling::Linear`], [`Scaling::Usl`]) and calibrated on the
//! measured point(s), which may be a single node. The plan is the smallest
//! whole `N` with `X(N)·(1 − headroom) ≥ target`, costing
//! `N × $/hour × 730` a month.

use serde::{Deserialize, Serialize};

use crate::error::{invalid, AnalysisError};
use crate::knee::average_repeats;
use crate::text;
use crate::usl::{fit_usl, UslFit, UslModel};

/// Hours in a month as cloud price lists count them (8760 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Per-node efficiency at or above this share of the first point's counts
/// as linear scaling.
pub const LINEAR_EFFICIENCY: f64 = 0.9;

/// One measurement: a cluster of `nodes` nodes sustained `throughput`
/// (ops/s, TPS...), optionally with its p99 latency at that load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NodePoint {
    pub nodes: f64,
    pub throughput: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
}

/// How an instance type's throughput scales with node count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Scaling {
    /// Fit the USL to the measured points (needs 3 or more node counts).
    #[default]
    Fit,
    /// Assume linear scaling (σ = κ = 0) from the measured point(s).
    Linear,
    /// Assume the USL with these σ and κ; λ is calibrated on the measured
    /// point(s).
    Usl { sigma: f64, kappa: f64 },
}

/// An instance type to plan for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceType {
    pub name: String,
    /// On-demand price of one node, $/hour.
    pub price_per_hour: f64,
    /// Measured cluster throughput by node count (repeats at one node count
    /// are averaged).
    pub points: Vec<NodePoint>,
    #[serde(default)]
    pub scaling: Scaling,
}

/// What the plan must deliver.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlanTarget {
    /// Required throughput, in the measured points' unit.
    pub throughput: f64,
    /// Optional bound on p99 latency, in ms, checked against the measured
    /// p99 at the planned node count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_p99_ms: Option<f64>,
    /// Fraction of capacity kept free (0.3 = plan the cluster so the target
    /// is 70% of its predicted throughput). In [0, 1).
    #[serde(default)]
    pub headroom: f64,
}

/// Per-node efficiency at one measured node count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeEfficiency {
    pub nodes: f64,
    /// Throughput per node, `X / nodes`.
    pub per_node: f64,
    /// `per_node` relative to the first (smallest) measured node count.
    pub relative: f64,
}

/// The node counts over which scaling was measured to stay linear.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearRange {
    /// First measured node count.
    pub from_nodes: f64,
    /// Last node count of the run of points, from the first, whose per-node
    /// efficiency stays ≥ [`LINEAR_EFFICIENCY`] of the first point's.
    pub to_nodes: f64,
    pub efficiency: Vec<NodeEfficiency>,
}

/// Finds the linear-scaling range of measured points: the longest run from
/// the smallest node count whose per-node throughput stays ≥ 90% of the
/// first point's (sorted by node count, repeats averaged). With a single
/// node count the range is that point.
pub fn linear_range(points: &[NodePoint]) -> Result<LinearRange, AnalysisError> {
    let pts = averaged(points)?;
    let first = pts[0].1 / pts[0].0;
    let efficiency: Vec<NodeEfficiency> = pts
        .iter()
        .map(|&(n, x)| NodeEfficiency {
            nodes: n,
            per_node: x / n,
            relative: (x / n) / first,
        })
        .collect();
    let to_nodes = efficiency
        .iter()
        .take_while(|e| e.relative >= LINEAR_EFFICIENCY)
        .last()
        .map_or(pts[0].0, |e| e.nodes);
    Ok(LinearRange {
        from_nodes: pts[0].0,
        to_nodes,
        efficiency,
    })
}

fn averaged(points: &[NodePoint]) -> Result<Vec<(f64, f64)>, AnalysisError> {
    if points.is_empty() {
        return Err(AnalysisError::NotEnoughPoints {
            what: "measured points",
            needed: 1,
            got: 0,
        });
    }
    if points.iter().any(|p| {
        !(p.nodes.is_finite() && p.nodes > 0.0 && p.throughput.is_finite() && p.throughput > 0.0)
    }) {
        return Err(invalid(
            "plan: node counts and throughputs must be finite and > 0",
        ));
    }
    let raw: Vec<(f64, f64)> = points.iter().map(|p| (p.nodes, p.throughput)).collect();
    Ok(average_repeats(&raw))
}

/// The plan for one instance type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstancePlan {
    pub name: String,
    pub price_per_hour: f64,
    /// The scaling assumption used.
    pub scaling: Scaling,
    /// The throughput model `X(N)` used (fitted or stated and calibrated).
    pub model: UslModel,
    /// The fit, with its R², when `scaling` is [`Scaling::Fit`].
    pub fit: Option<UslFit>,
    pub linear_range: LinearRange,
    /// Smallest and largest measured node counts.
    pub measured_from_nodes: f64,
    pub measured_to_nodes: f64,
    /// Nodes needed; `None` when the target is unreachable.
    pub nodes: Option<u64>,
    /// Predicted throughput `X(nodes)` of the planned cluster.
    pub capacity: Option<f64>,
    /// `capacity × (1 − headroom)`: what the plan lets the target use.
    pub usable_capacity: Option<f64>,
    /// `nodes × price_per_hour × 730`.
    pub monthly_cost: Option<f64>,
    /// Price-performance: `monthly_cost / (capacity / 1000)`, dollars a
    /// month per 1,000 ops/s of predicted capacity.
    pub cost_per_1k_ops: Option<f64>,
    /// The model's peak: node count (`None` = no peak, κ = 0) and
    /// throughput (`None` = unbounded).
    pub peak_nodes: Option<f64>,
    pub peak_throughput: Option<f64>,
    /// The target, with headroom, lies beyond the model's peak throughput.
    pub unreachable: bool,
    /// The planned node count lies outside the measured node counts, or
    /// the target is unreachable by a peak beyond them: the verdict
    /// extrapolates the model.
    pub extrapolated: bool,
    /// The planned node count lies beyond the measured linear range (only
    /// set when 2 or more node counts were measured: with one, there is no
    /// measured range, and `extrapolated` says it).
    pub beyond_linear_range: bool,
    /// Measured p99 at the planned node count (linear interpolation between
    /// measured node counts; the nearest one outside them). Measured at full
    /// load, so an upper estimate of the p99 at the planned load.
    pub p99_ms: Option<f64>,
    /// `p99_ms ≤ max_p99_ms`, when both are known.
    pub latency_ok: Option<bool>,
    /// Reachable and not known to break the latency bound: eligible for the
    /// rankings.
    pub feasible: bool,
}

impl InstancePlan {
    /// The measured node counts, e.g. "1–3 nodes".
    fn measured_words(&self) -> String {
        if self.measured_from_nodes == self.measured_to_nodes {
            nodes_words(self.measured_from_nodes)
        } else {
            format!(
                "{}–{} nodes",
                text::count(self.measured_from_nodes),
                text::count(self.measured_to_nodes)
            )
        }
    }

    /// Plain words, e.g. "r5.large: 53 nodes, $8,552/month ($161 per 1k
    /// ops/s) for 1M ops/s with 30% headroom; extrapolated beyond 8 measured
    /// nodes".
    pub fn sentence(&self, target: &PlanTarget, unit: &str) -> String {
        let goal = format!(
            "{} {unit} with {} headroom",
            text::si(target.throughput),
            text::pct_unsigned(target.headroom)
        );
        let (Some(nodes), Some(cost), Some(per_1k)) =
            (self.nodes, self.monthly_cost, self.cost_per_1k_ops)
        else {
            let peak = match (self.peak_throughput, self.peak_nodes) {
                (Some(x), Some(n)) => format!(
                    ": predicted peak {} {unit} at {}",
                    text::si(x),
                    nodes_words(n.round())
                ),
                (Some(x), None) => format!(": throughput levels off at {} {unit}", text::si(x)),
                _ => String::new(),
            };
            let estimate = if self.extrapolated {
                format!(
                    " (the peak is extrapolated from {}: measure more node counts before \
                     ruling this type out)",
                    self.measured_words()
                )
            } else {
                String::new()
            };
            return format!("{}: cannot reach {goal}{peak}{estimate}", self.name);
        };
        let mut s = format!(
            "{}: {}, {}/month ({} per 1k {unit}) for {goal}",
            self.name,
            nodes_words(nodes as f64),
            text::dollars(cost),
            text::dollars(per_1k)
        );
        if self.extrapolated {
            s.push_str(&format!(
                "; extrapolated from measurements at {}",
                self.measured_words()
            ));
        }
        if self.beyond_linear_range {
            s.push_str(&format!(
                "; past the linear range (up to {})",
                nodes_words(self.linear_range.to_nodes)
            ));
        }
        if let (Some(false), Some(p99), Some(bound)) =
            (self.latency_ok, self.p99_ms, target.max_p99_ms)
        {
            s.push_str(&format!(
                "; measured p99 {p99:.1} ms exceeds the {bound} ms bound"
            ));
        }
        s
    }
}

fn nodes_words(n: f64) -> String {
    format!("{} node{}", text::count(n), if n == 1.0 { "" } else { "s" })
}

/// Plans one instance type for a target.
///
/// Method: build `X(N)` (fit the USL over node counts with
/// [`fit_usl`], or calibrate the stated model's λ on the measured points by
/// least squares, `λ = Σ Xᵢgᵢ / Σ gᵢ²` with `gᵢ = Nᵢ/(1 + σ(Nᵢ−1) +
/// κNᵢ(Nᵢ−1))`, exact for one point); solve `X(N) = target / (1 − headroom)`
/// in closed form ([`UslModel::min_concurrency_for`]) and round up to whole
/// nodes (at least 1). Unreachable when the required throughput exceeds the
/// model's peak (or its asymptote when κ = 0).
///
/// Assumptions: the measured throughputs are each cluster's sustained
/// maximum for the workload; the scaling model holds beyond the measured
/// range when `extrapolated` is set (treat such plans as estimates and
/// measure near them); price is per node and linear in node count.
pub fn plan_instance(
    it: &InstanceType,
    target: &PlanTarget,
) -> Result<InstancePlan, AnalysisError> {
    check_target(target)?;
    if !(it.price_per_hour.is_finite() && it.price_per_hour >= 0.0) {
        return Err(invalid(format!(
            "plan {}: price_per_hour must be >= 0",
            it.name
        )));
    }
    let pts = averaged(&it.points)?;
    let range = linear_range(&it.points)?;
    let (model, fit) = match it.scaling {
        Scaling::Fit => {
            let fit = fit_usl(&pts).map_err(|e| match e {
                AnalysisError::NotEnoughPoints { got, .. } => invalid(format!(
                    "plan {}: fitting the scaling needs 3 or more node counts, got {got}; \
                     state a scaling model (linear, or usl with sigma and kappa) instead",
                    it.name
                )),
                other => other,
            })?;
            (fit.model(), Some(fit))
        }
        Scaling::Linear => (calibrate(&pts, 0.0, 0.0), None),
        Scaling::Usl { sigma, kappa } => {
            if !((0.0..=1.0).contains(&sigma) && kappa >= 0.0 && kappa.is_finite()) {
                return Err(invalid(format!(
                    "plan {}: stated USL needs 0 <= sigma <= 1 and kappa >= 0",
                    it.name
                )));
            }
            (calibrate(&pts, sigma, kappa), None)
        }
    };
    let required = target.throughput / (1.0 - target.headroom);
    let nodes = whole_nodes(&model, required);
    let measured_from_nodes = pts[0].0;
    let measured_to_nodes = pts[pts.len() - 1].0;
    let capacity = nodes.map(|n| model.throughput(n as f64));
    let monthly_cost = nodes.map(|n| n as f64 * it.price_per_hour * HOURS_PER_MONTH);
    let p99_ms = nodes.and_then(|n| p99_at(&it.points, n as f64));
    let latency_ok = match (p99_ms, target.max_p99_ms) {
        (Some(p), Some(bound)) => Some(p <= bound),
        _ => None,
    };
    let unreachable = nodes.is_none();
    Ok(InstancePlan {
        name: it.name.clone(),
        price_per_hour: it.price_per_hour,
        scaling: it.scaling,
        model,
        fit,
        measured_from_nodes,
        measured_to_nodes,
        nodes,
        capacity,
        usable_capacity: capacity.map(|c| c * (1.0 - target.headroom)),
        monthly_cost,
        cost_per_1k_ops: match (monthly_cost, capacity) {
            (Some(m), Some(c)) if c > 0.0 => Some(m / (c / 1000.0)),
            _ => None,
        },
        peak_nodes: model.peak_concurrency(),
        peak_throughput: model.peak_throughput(),
        unreachable,
        // Also when the verdict "unreachable" rests on a peak the model
        // puts beyond the measured node counts (a fit to 3 of them, say).
        extrapolated: nodes
            .is_some_and(|n| (n as f64) > measured_to_nodes || (n as f64) < measured_from_nodes)
            || (unreachable
                && model
                    .peak_concurrency()
                    .is_some_and(|p| p > measured_to_nodes)),
        beyond_linear_range: range.efficiency.len() > 1
            && nodes.is_some_and(|n| (n as f64) > range.to_nodes),
        linear_range: range,
        p99_ms,
        latency_ok,
        feasible: !unreachable && latency_ok != Some(false),
    })
}

fn check_target(target: &PlanTarget) -> Result<(), AnalysisError> {
    if !(target.throughput.is_finite() && target.throughput > 0.0) {
        return Err(invalid("plan: target throughput must be > 0"));
    }
    if !(0.0..1.0).contains(&target.headroom) {
        return Err(invalid("plan: headroom must be in [0, 1)"));
    }
    if let Some(b) = target.max_p99_ms {
        if !(b.is_finite() && b > 0.0) {
            return Err(invalid("plan: max_p99_ms must be > 0"));
        }
    }
    Ok(())
}

/// λ by least squares for fixed σ, κ.
fn calibrate(pts: &[(f64, f64)], sigma: f64, kappa: f64) -> UslModel {
    let shape = UslModel {
        lambda: 1.0,
        sigma,
        kappa,
    };
    let (num, den) = pts.iter().fold((0.0, 0.0), |(num, den), &(n, x)| {
        let g = shape.throughput(n);
        (num + x * g, den + g * g)
    });
    UslModel {
        lambda: num / den,
        sigma,
        kappa,
    }
}

/// Smallest whole N ≥ 1 with `X(N) ≥ required` (to a relative 1e-12, so
/// that an exact multiple is not rounded up by floating-point noise).
fn whole_nodes(model: &UslModel, required: f64) -> Option<u64> {
    let meets = |n: u64| model.throughput(n as f64) >= required * (1.0 - 1e-12);
    let n = model.min_concurrency_for(required)?;
    if !n.is_finite() || n > 1e15 {
        return None;
    }
    let mut whole = (n.ceil() as u64).max(1);
    while whole > 1 && meets(whole - 1) {
        whole -= 1;
    }
    if meets(whole) {
        Some(whole)
    } else if meets(whole + 1) {
        Some(whole + 1)
    } else {
        // Reachable only between two whole node counts.
        None
    }
}

/// p99 at `nodes` from the measured points that have one: interpolated
/// between neighbours, the nearest measured value outside the range.
fn p99_at(points: &[NodePoint], nodes: f64) -> Option<f64> {
    let mut with: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| p.p99_ms.filter(|v| v.is_finite()).map(|v| (p.nodes, v)))
        .collect();
    if with.is_empty() {
        return None;
    }
    with = average_repeats(&with);
    let (first, last) = (with[0], with[with.len() - 1]);
    if nodes <= first.0 {
        return Some(first.1);
    }
    if nodes >= last.0 {
        return Some(last.1);
    }
    with.windows(2).find(|w| nodes <= w[1].0).map(|w| {
        let ((n0, p0), (n1, p1)) = (w[0], w[1]);
        p0 + (p1 - p0) * (nodes - n0) / (n1 - n0)
    })
}

/// Plans for every instance type and ranks them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub target: PlanTarget,
    /// One plan per instance type, in input order.
    pub instances: Vec<InstancePlan>,
    /// Names of the feasible instance types, cheapest monthly cost first
    /// (ties: fewer nodes first).
    pub by_monthly_cost: Vec<String>,
    /// Names of the feasible instance types, best price-performance ($ a
    /// month per 1k ops/s of capacity) first.
    pub by_cost_per_1k_ops: Vec<String>,
    /// The cheapest feasible instance type for the target.
    pub cheapest: Option<String>,
}

impl Plan {
    /// One sentence per instance type, then the verdict.
    pub fn sentences(&self, unit: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .instances
            .iter()
            .map(|p| p.sentence(&self.target, unit))
            .collect();
        match self
            .cheapest
            .as_ref()
            .and_then(|c| self.instances.iter().find(|p| &p.name == c))
        {
            Some(p) => out.push(format!(
                "cheapest for {} {unit}: {} ({}, {}/month)",
                text::si(self.target.throughput),
                p.name,
                nodes_words(p.nodes.unwrap_or(0) as f64),
                text::dollars(p.monthly_cost.unwrap_or(0.0))
            )),
            None => out.push(format!(
                "no instance type reaches {} {unit} within the bounds",
                text::si(self.target.throughput)
            )),
        }
        out
    }
}

/// Plans every instance type for `target` ([`plan_instance`]) and ranks the
/// feasible ones by monthly cost and by price-performance. Instance types
/// that cannot reach the target, or whose measured p99 breaks the latency
/// bound, stay in `instances` with their flags but are left out of the
/// rankings.
pub fn plan(types: &[InstanceType], target: &PlanTarget) -> Result<Plan, AnalysisError> {
    check_target(target)?;
    if types.is_empty() {
        return Err(AnalysisError::NotEnoughPoints {
            what: "instance types",
            needed: 1,
            got: 0,
        });
    }
    let instances = types
        .iter()
        .map(|t| plan_instance(t, target))
        .collect::<Result<Vec<_>, _>>()?;
    let feasible: Vec<&InstancePlan> = instances.iter().filter(|p| p.feasible).collect();
    let mut by_cost = feasible.clone();
    by_cost.sort_by(|a, b| {
        a.monthly_cost
            .unwrap_or(f64::INFINITY)
            .total_cmp(&b.monthly_cost.unwrap_or(f64::INFINITY))
            .then(a.nodes.cmp(&b.nodes))
    });
    let mut by_perf = feasible;
    by_perf.sort_by(|a, b| {
        a.cost_per_1k_ops
            .unwrap_or(f64::INFINITY)
            .total_cmp(&b.cost_per_1k_ops.unwrap_or(f64::INFINITY))
    });
    let by_monthly_cost: Vec<String> = by_cost.iter().map(|p| p.name.clone()).collect();
    let by_cost_per_1k_ops = by_perf.iter().map(|p| p.name.clone()).collect();
    Ok(Plan {
        target: *target,
        cheapest: by_monthly_cost.first().cloned(),
        by_monthly_cost,
        by_cost_per_1k_ops,
        instances,
    })
}

/// One measured run of a cluster: its node count, the load setting it ran
/// at (threads, clients, rate…: runs with equal settings are repeats), and
/// what it sustained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub nodes: f64,
    pub setting: String,
    pub throughput: f64,
    pub p99_ms: f64,
}

/// The measurement a node count is planned on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatingPoint {
    #[serde(flatten)]
    pub point: NodePoint,
    pub setting: String,
    /// Runs averaged into `point`.
    pub repeats: usize,
    /// Settings measured at this node count.
    pub settings: usize,
}

/// Per node count, the point to plan on. Repeats (same node count and
/// setting) are averaged; then, of the settings, the one with the highest
/// throughput whose p99 stays within `max_p99_ms` (any, without a bound).
/// When none does, the highest-throughput setting is kept, so that the
/// plan reports the broken bound rather than dropping the node count.
/// Sorted by node count.
pub fn operating_points(ms: &[Measurement], max_p99_ms: Option<f64>) -> Vec<OperatingPoint> {
    let mut avg: Vec<OperatingPoint> = Vec::new();
    for m in ms {
        match avg
            .iter_mut()
            .find(|o| o.point.nodes == m.nodes && o.setting == m.setting)
        {
            Some(o) => {
                o.repeats += 1;
                let k = o.repeats as f64;
                o.point.throughput += (m.throughput - o.point.throughput) / k;
                let p = o.point.p99_ms.unwrap_or(m.p99_ms);
                o.point.p99_ms = Some(p + (m.p99_ms - p) / k);
            }
            None => avg.push(OperatingPoint {
                point: NodePoint {
                    nodes: m.nodes,
                    throughput: m.throughput,
                    p99_ms: Some(m.p99_ms),
                },
                setting: m.setting.clone(),
                repeats: 1,
                settings: 0,
            }),
        }
    }
    let within = |o: &OperatingPoint| match (o.point.p99_ms, max_p99_ms) {
        (Some(p), Some(bound)) => p <= bound,
        _ => true,
    };
    let mut nodes: Vec<f64> = avg.iter().map(|o| o.point.nodes).collect();
    nodes.sort_by(f64::total_cmp);
    nodes.dedup();
    nodes
        .into_iter()
        .map(|n| {
            let here: Vec<&OperatingPoint> = avg.iter().filter(|o| o.point.nodes == n).collect();
            let fastest = |ok: &dyn Fn(&OperatingPoint) -> bool| {
                here.iter()
                    .copied()
                    .filter(|o| ok(o))
                    .max_by(|a, b| a.point.throughput.total_cmp(&b.point.throughput))
            };
            let chosen = fastest(&within)
                .or_else(|| fastest(&|_| true))
                .expect("every node count has a setting");
            OperatingPoint {
                settings: here.len(),
                ..chosen.clone()
            }
        })
        .collect()
}

/// One step of monthly cost against target throughput: targets in
/// `(from, to]` need `nodes` nodes at `monthly_cost`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostStep {
    pub nodes: u64,
    pub from: f64,
    pub to: f64,
    pub monthly_cost: f64,
}

impl InstancePlan {
    /// What `nodes` nodes can carry with `headroom` kept free.
    pub fn usable_capacity(&self, nodes: u64, headroom: f64) -> f64 {
        self.model.throughput(nodes as f64) * (1.0 - headroom)
    }

    /// Monthly cost against target throughput from 0 to `up_to` (or to the
    /// model's peak, when lower), as steps of whole node counts. Past
    /// `max_steps` node counts, every k-th node count is a step (the cost of
    /// its upper end), which keeps a chart small where steps are too fine to
    /// see.
    pub fn cost_steps(&self, headroom: f64, up_to: f64, max_steps: usize) -> Vec<CostStep> {
        let n_max = whole_nodes(&self.model, up_to / (1.0 - headroom))
            .or_else(|| {
                self.peak_throughput
                    .and_then(|p| whole_nodes(&self.model, 0.99 * p))
            })
            .unwrap_or(1);
        let stride = n_max.div_ceil(max_steps.max(1) as u64).max(1);
        let mut steps = Vec::new();
        let mut from = 0.0;
        let mut n = 0;
        while n < n_max {
            n = (n + stride).min(n_max);
            let to = self.usable_capacity(n, headroom).min(up_to);
            if to > from {
                steps.push(CostStep {
                    nodes: n,
                    from,
                    to,
                    monthly_cost: n as f64 * self.price_per_hour * HOURS_PER_MONTH,
                });
                from = to;
            }
        }
        steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(nodes: f64, throughput: f64) -> NodePoint {
        NodePoint {
            nodes,
            throughput,
            p99_ms: None,
        }
    }

    fn target(throughput: f64, headroom: f64) -> PlanTarget {
        PlanTarget {
            throughput,
            max_p99_ms: None,
            headroom,
        }
    }

    #[test]
    fn linear_single_node_known_answer() {
        // 27k/node, 1M with 30% headroom: ceil(1e6 / (27e3 · 0.7)) = 53.
        let it = InstanceType {
            name: "c5.2xlarge".into(),
            price_per_hour: 0.34,
            points: vec![pt(1.0, 27_000.0)],
            scaling: Scaling::Linear,
        };
        let p = plan_instance(&it, &target(1e6, 0.3)).unwrap();
        assert_eq!(p.nodes, Some(53));
        assert_eq!(p.capacity, Some(53.0 * 27_000.0));
        let cost = 53.0 * 0.34 * 730.0;
        assert!((p.monthly_cost.unwrap() - cost).abs() < 1e-9);
        assert!((p.cost_per_1k_ops.unwrap() - cost / 1431.0).abs() < 1e-9);
        assert!(p.extrapolated && !p.beyond_linear_range && !p.unreachable && p.feasible);
        assert_eq!(p.peak_nodes, None);
        assert_eq!(
            p.sentence(&target(1e6, 0.3), "ops/s"),
            "c5.2xlarge: 53 nodes, $13,155/month ($9.19 per 1k ops/s) for 1M ops/s with 30% headroom; \
             extrapolated from measurements at 1 node"
        );
    }

    #[test]
    fn exact_multiple_is_not_rounded_up() {
        let it = InstanceType {
            name: "a".into(),
            price_per_hour: 1.0,
            points: vec![pt(1.0, 27_000.0)],
            scaling: Scaling::Linear,
        };
        assert_eq!(
            plan_instance(&it, &target(270_000.0, 0.0)).unwrap().nodes,
            Some(10)
        );
        assert_eq!(
            plan_instance(&it, &target(270_001.0, 0.0)).unwrap().nodes,
            Some(11)
        );
        assert_eq!(
            plan_instance(&it, &target(10.0, 0.0)).unwrap().nodes,
            Some(1)
        );
    }

    #[test]
    fn fitted_linear_scaling_from_several_node_counts() {
        let it = InstanceType {
            name: "m5".into(),
            price_per_hour: 0.5,
            points: [2.0, 4.0, 6.0, 8.0]
                .iter()
                .map(|&n| pt(n, 27_000.0 * n))
                .collect(),
            scaling: Scaling::Fit,
        };
        let p = plan_instance(&it, &target(1e6, 0.3)).unwrap();
        assert_eq!(p.nodes, Some(53));
        let fit = p.fit.unwrap();
        assert!((fit.r_squared - 1.0).abs() < 1e-12);
        assert_eq!(p.linear_range.to_nodes, 8.0);
        assert!(p.extrapolated && p.beyond_linear_range);
        // Inside the measured range: not extrapolated.
        let p = plan_instance(&it, &target(100_000.0, 0.0)).unwrap();
        assert_eq!(p.nodes, Some(4)); // 3.7 → 4
        assert!(!p.extrapolated && !p.beyond_linear_range);
    }

    #[test]
    fn usl_limited_type_matches_brute_force_and_flags_unreachable() {
        let truth = UslModel {
            lambda: 30_000.0,
            sigma: 0.02,
            kappa: 0.0005,
        };
        let it = InstanceType {
            name: "r5".into(),
            price_per_hour: 0.25,
            points: [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
                .iter()
                .map(|&n| pt(n, truth.throughput(n)))
                .collect(),
            scaling: Scaling::Fit,
        };
        let peak = truth.peak_throughput().unwrap(); // ≈ 470k at N* ≈ 44
        assert!((peak - 470_420.0).abs() < 10.0, "{peak}");
        for t in [100_000.0, 250_000.0, 350_000.0] {
            let p = plan_instance(&it, &target(t, 0.2)).unwrap();
            let brute = (1..10_000u64)
                .find(|&n| truth.throughput(n as f64) * 0.8 >= t)
                .unwrap();
            assert_eq!(p.nodes, Some(brute), "target {t}");
        }
        let p = plan_instance(&it, &target(0.85 * peak, 0.2)).unwrap();
        assert!(p.unreachable && !p.feasible && p.nodes.is_none() && p.monthly_cost.is_none());
        assert!((p.peak_nodes.unwrap() - (0.98f64 / 0.0005).sqrt()).abs() < 1e-3);
        assert!(p.sentence(&target(0.85 * peak, 0.2), "TPS").starts_with(
            "r5: cannot reach 400k TPS with 20% headroom: predicted peak 470k TPS at 44 nodes"
        ));
    }

    #[test]
    fn unreachable_by_a_peak_beyond_the_measurements_says_it_is_extrapolated() {
        // Three node counts, near linear: the fit's peak (about 8 nodes)
        // lies far past the 3 measured.
        let it = InstanceType {
            name: "m5".into(),
            price_per_hour: 0.2,
            points: vec![pt(1.0, 10_000.0), pt(2.0, 19_500.0), pt(3.0, 27_500.0)],
            scaling: Scaling::Fit,
        };
        let goal = target(100_000.0, 0.3);
        let p = plan_instance(&it, &goal).unwrap();
        assert!(p.unreachable && p.extrapolated, "{p:?}");
        let s = p.sentence(&goal, "ops/s");
        assert!(s.contains("extrapolated from 1–3 nodes"), "{s}");
    }

    #[test]
    fn stated_usl_from_one_node() {
        // One measured node at 20k, stated σ = 0.05, κ = 0: asymptote 400k.
        let it = InstanceType {
            name: "x".into(),
            price_per_hour: 1.0,
            points: vec![pt(1.0, 20_000.0)],
            scaling: Scaling::Usl {
                sigma: 0.05,
                kappa: 0.0,
            },
        };
        // X(N) ≥ 100k ⇔ 20k·N ≥ 100k·(1 + 0.05(N − 1)) ⇔ N ≥ 95/15 = 6.33 → 7
        let p = plan_instance(&it, &target(100_000.0, 0.0)).unwrap();
        assert_eq!(p.nodes, Some(7));
        assert_eq!(p.peak_nodes, None);
        assert!((p.peak_throughput.unwrap() - 400_000.0).abs() < 1e-6);
        assert!(
            plan_instance(&it, &target(400_000.0, 0.0))
                .unwrap()
                .unreachable
        );
        // A measured point at 4 nodes calibrates λ through the stated shape.
        let it4 = InstanceType {
            points: vec![pt(4.0, 20_000.0 * 4.0 / 1.15)],
            ..it
        };
        let p = plan_instance(&it4, &target(100_000.0, 0.0)).unwrap();
        assert!((p.model.lambda - 20_000.0).abs() < 1e-9);
        assert_eq!(p.nodes, Some(7));
    }

    #[test]
    fn fit_needs_three_node_counts() {
        let it = InstanceType {
            name: "y".into(),
            price_per_hour: 1.0,
            points: vec![pt(1.0, 10.0), pt(2.0, 19.0)],
            scaling: Scaling::Fit,
        };
        let err = plan_instance(&it, &target(100.0, 0.0)).unwrap_err();
        assert!(err.to_string().contains("state a scaling model"), "{err}");
        assert!(plan_instance(&it, &target(100.0, 1.0)).is_err());
    }

    #[test]
    fn linear_range_stops_at_first_inefficient_point() {
        let pts = [
            pt(1.0, 10_000.0),
            pt(2.0, 19_800.0),
            pt(4.0, 38_000.0),   // 95%
            pt(8.0, 70_000.0),   // 87.5%: out
            pt(16.0, 150_000.0), // 93.75%, but after a break
        ];
        let r = linear_range(&pts).unwrap();
        assert_eq!((r.from_nodes, r.to_nodes), (1.0, 4.0));
        assert!((r.efficiency[3].relative - 0.875).abs() < 1e-12);
    }

    #[test]
    fn latency_bound_and_ranking() {
        // "fast": 40k/node at $1/h; "cheap": 15k/node at $0.30/h;
        // "slow-p99": 50k/node at $0.50/h but p99 20 ms.
        let with_p99 = |n: f64, x: f64, p: f64| NodePoint {
            nodes: n,
            throughput: x,
            p99_ms: Some(p),
        };
        let types = vec![
            InstanceType {
                name: "fast".into(),
                price_per_hour: 1.0,
                points: vec![with_p99(1.0, 40_000.0, 2.0), with_p99(4.0, 160_000.0, 3.0)],
                scaling: Scaling::Linear,
            },
            InstanceType {
                name: "cheap".into(),
                price_per_hour: 0.30,
                points: vec![with_p99(1.0, 15_000.0, 4.0)],
                scaling: Scaling::Linear,
            },
            InstanceType {
                name: "slow-p99".into(),
                price_per_hour: 0.50,
                points: vec![with_p99(1.0, 50_000.0, 20.0)],
                scaling: Scaling::Linear,
            },
        ];
        let t = PlanTarget {
            throughput: 300_000.0,
            max_p99_ms: Some(10.0),
            headroom: 0.25,
        };
        let plan = plan(&types, &t).unwrap();
        // Need 400k raw: fast 10 nodes ($7,300), cheap 27 nodes ($5,913),
        // slow-p99 8 nodes ($2,920) but breaks the latency bound.
        let nodes: Vec<_> = plan.instances.iter().map(|p| p.nodes).collect();
        assert_eq!(nodes, vec![Some(10), Some(27), Some(8)]);
        assert_eq!(plan.instances[0].p99_ms, Some(3.0));
        assert_eq!(plan.instances[2].latency_ok, Some(false));
        assert!(!plan.instances[2].feasible);
        assert_eq!(plan.by_monthly_cost, vec!["cheap", "fast"]);
        assert_eq!(plan.cheapest.as_deref(), Some("cheap"));
        // $/month per 1k ops/s: fast 7300/400 = 18.25, cheap 5913/405 = 14.6
        assert_eq!(plan.by_cost_per_1k_ops, vec!["cheap", "fast"]);
        let s = plan.sentences("TPS");
        assert_eq!(
            s.last().unwrap(),
            "cheapest for 300k TPS: cheap (27 nodes, $5,913/month)"
        );
        assert!(
            s[2].contains("measured p99 20.0 ms exceeds the 10 ms bound"),
            "{}",
            s[2]
        );
        let json = serde_json::to_string(&plan).unwrap();
        assert!(json.contains(r#""scaling":{"model":"linear"}"#), "{json}");
    }

    #[test]
    fn p99_interpolates_between_node_counts() {
        let pts = [
            NodePoint {
                nodes: 2.0,
                throughput: 1.0,
                p99_ms: Some(2.0),
            },
            NodePoint {
                nodes: 6.0,
                throughput: 3.0,
                p99_ms: Some(4.0),
            },
        ];
        assert_eq!(p99_at(&pts, 4.0), Some(3.0));
        assert_eq!(p99_at(&pts, 1.0), Some(2.0));
        assert_eq!(p99_at(&pts, 9.0), Some(4.0));
    }

    fn m(nodes: f64, setting: &str, throughput: f64, p99_ms: f64) -> Measurement {
        Measurement {
            nodes,
            setting: setting.into(),
            throughput,
            p99_ms,
        }
    }

    #[test]
    fn operating_points_average_repeats_and_pick_the_fastest_within_the_bound() {
        let ms = [
            m(2.0, "threads=8", 900.0, 1.0),
            m(2.0, "threads=8", 1100.0, 3.0), // repeat: mean 1000, p99 2
            m(2.0, "threads=64", 1500.0, 9.0),
            m(1.0, "threads=8", 600.0, 1.5),
            m(1.0, "threads=64", 800.0, 12.0),
        ];
        let free = operating_points(&ms, None);
        assert_eq!(free.len(), 2);
        assert_eq!(
            (free[0].point.nodes, free[0].point.throughput),
            (1.0, 800.0)
        );
        assert_eq!(free[1].setting, "threads=64");
        assert_eq!(free[1].settings, 2);
        let bounded = operating_points(&ms, Some(5.0));
        assert_eq!(bounded[0].setting, "threads=8");
        assert_eq!(bounded[1].point.throughput, 1000.0);
        assert_eq!(bounded[1].point.p99_ms, Some(2.0));
        assert_eq!(bounded[1].repeats, 2);
        // Nothing within 0.5 ms: the fastest is kept, and the plan flags it.
        let none = operating_points(&ms, Some(0.5));
        assert_eq!(none[1].point.throughput, 1500.0);
    }

    #[test]
    fn cost_steps_follow_whole_node_counts() {
        let it = InstanceType {
            name: "a".into(),
            price_per_hour: 1.0,
            points: vec![pt(1.0, 1000.0)],
            scaling: Scaling::Linear,
        };
        let p = plan_instance(&it, &target(2500.0, 0.5)).unwrap();
        assert_eq!(p.nodes, Some(5));
        let steps = p.cost_steps(0.5, 2500.0, 100);
        let nodes: Vec<u64> = steps.iter().map(|s| s.nodes).collect();
        assert_eq!(nodes, [1, 2, 3, 4, 5]);
        assert_eq!((steps[0].from, steps[0].to), (0.0, 500.0));
        assert_eq!((steps[4].from, steps[4].to), (2000.0, 2500.0));
        assert_eq!(steps[4].monthly_cost, p.monthly_cost.unwrap());
        // Coarser past max_steps; the last step still ends at the target.
        let coarse = p.cost_steps(0.5, 2500.0, 2);
        let nodes: Vec<u64> = coarse.iter().map(|s| s.nodes).collect();
        assert_eq!(nodes, [3, 5]);
        // A peaked model stops at its peak.
        let truth = UslModel {
            lambda: 1000.0,
            sigma: 0.1,
            kappa: 0.01,
        };
        let it = InstanceType {
            points: [1.0, 2.0, 4.0, 8.0]
                .iter()
                .map(|&n| pt(n, truth.throughput(n)))
                .collect(),
            scaling: Scaling::Fit,
            ..it
        };
        let p = plan_instance(&it, &target(1e6, 0.0)).unwrap();
        assert!(p.unreachable);
        let steps = p.cost_steps(0.0, 1e6, 100);
        let last = steps.last().unwrap();
        assert!(last.to < p.peak_throughput.unwrap() + 1e-6);
        assert!(last.nodes as f64 <= p.peak_nodes.unwrap().ceil());
    }

    #[test]
    fn instance_types_deserialize_from_json() {
        let json = r#"[
            {"name": "a", "price_per_hour": 0.1, "points": [{"nodes": 1, "throughput": 1000}],
             "scaling": {"model": "usl", "sigma": 0.1, "kappa": 0.001}},
            {"name": "b", "price_per_hour": 0.2,
             "points": [{"nodes": 1, "throughput": 1000}, {"nodes": 2, "throughput": 1900},
                        {"nodes": 4, "throughput": 3400, "p99_ms": 2.5}]}
        ]"#;
        let types: Vec<InstanceType> = serde_json::from_str(json).unwrap();
        assert_eq!(types[1].scaling, Scaling::Fit);
        let t: PlanTarget = serde_json::from_str(r#"{"throughput": 2000}"#).unwrap();
        assert_eq!(t.headroom, 0.0);
        let p = plan(&types, &t).unwrap();
        assert_eq!(p.instances.len(), 2);
    }
}
