//! One result from the results of a run's shards (`loadcell merge`): the
//! histograms added, never percentiles averaged; intervals added where
//! they fall on the wall clock; throughput over the window every shard
//! measured; each shard's own figures, host and resource samples kept in
//! the `merge` section. A merged result is a normal result file.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use crate::env::CpuTime;
use crate::hist::{self, LatencySummary, Micros};
use crate::result::{
    counted_rate, Environment, Histograms, Interval, IntervalLatency, MergeSection, MergedShard,
    OpSummary, QueryCounts, Resources, RunConfig, RunResult, RunStatus, Schedule, ShardSpread,
    Summary,
};

/// Config fields that differ between shards of one run by design: each
/// shard's share, its seed, its place, and its start (shards not started
/// together are put into one interval grid).
const SHARE_FIELDS: &[&str] = &[
    "start_at",
    "threads",
    "clients_per_thread",
    "worker_threads",
    "rate",
    "events",
    "seed",
    "shard",
];

/// How far apart measurement starts may be and still count as one start
/// (`--start-at` meets its instant within a sleep's overshoot).
const SAME_START: Duration = Duration::from_millis(50);

/// A shard's result and the name it is known by (its file).
pub struct ShardResult {
    pub name: String,
    pub result: RunResult,
}

/// Merges `shards`. Refused, with one line saying why: different
/// workloads or options, a shard given twice, shards that never measured
/// at the same time, or a missing one unless `allow_partial`.
pub fn merge(shards: Vec<ShardResult>, allow_partial: bool) -> Result<RunResult, String> {
    let Some(first) = shards.first() else {
        return Err("nothing to merge: give the shards' result files".to_string());
    };
    check_same_run(&shards)?;
    let (order, missing) = shard_order(&shards, allow_partial)?;
    let spans: Vec<(SystemTime, SystemTime)> = shards
        .iter()
        .map(|s| measured_span(&s.result).map_err(|e| format!("{}: {e}", s.name)))
        .collect::<Result<_, _>>()?;
    let window_start = spans.iter().map(|s| s.0).max().expect("one shard at least");
    let window_end = spans.iter().map(|s| s.1).min().expect("one shard at least");
    let window = match window_end.duration_since(window_start) {
        Ok(w) if !w.is_zero() => w,
        _ => {
            return Err(format!(
                "the shards did not measure at the same time: {} ended before {} began; start \
                 them together with --start-at",
                shards[spans.iter().position(|s| s.1 == window_end).unwrap_or(0)].name,
                shards[spans.iter().position(|s| s.0 == window_start).unwrap_or(0)].name,
            ))
        }
    };
    let secs = window.as_secs_f64();
    let per_sec = |n: u64| n as f64 / secs;
    let grid_start = spans.iter().map(|s| s.0).min().expect("one shard at least");
    let aligned = spans
        .iter()
        .all(|s| s.0.duration_since(grid_start).unwrap_or_default() <= SAME_START);

    let interval_s = first.result.config.report_interval_s;
    let intervals = merge_intervals(&shards, &spans, grid_start, interval_s)?;
    let in_window = |pick: fn(&Interval) -> u64| -> u64 {
        shards
            .iter()
            .zip(&spans)
            .map(|(s, span)| within(&s.result.intervals, span.0, window_start, window_end, pick))
            .sum()
    };
    let (ops_in_window, events_in_window) = (in_window(|i| i.ops), in_window(|i| i.events));

    let mut sum = Sums::default();
    for s in &shards {
        sum.add(&s.result)?;
    }
    let runs: Vec<&RunResult> = shards.iter().map(|s| &s.result).collect();
    let total = |f: fn(&Summary) -> u64| runs.iter().map(|r| f(&r.summary)).sum::<u64>();
    let total_opt = |f: fn(&Summary) -> Option<u64>| {
        runs.iter()
            .filter_map(|r| f(&r.summary))
            .reduce(|a, b| a + b)
    };
    let s0 = &first.result.summary;
    let (items, items_per_sec) = counted_rate(total_opt(|s| s.items).unwrap_or(0), secs);
    let (connects, connects_per_sec) = counted_rate(total_opt(|s| s.connects).unwrap_or(0), secs);
    let (bytes, bytes_per_sec) = counted_rate(total_opt(|s| s.bytes).unwrap_or(0), secs);
    let target_rates: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.summary.schedule.target_rate)
        .collect();
    let summary = Summary {
        duration_s: secs,
        ops: total(|s| s.ops),
        errors: total(|s| s.errors),
        ops_per_sec: per_sec(ops_in_window),
        events: total(|s| s.events),
        events_per_sec: per_sec(events_in_window),
        txn_per_sec: s0.txn_per_sec.map(|_| per_sec(events_in_window)),
        retries: total(|s| s.retries),
        reconnects: total(|s| s.reconnects),
        failed_events: total(|s| s.failed_events),
        latency_ms: LatencySummary::of(&sum.response),
        service_time_ms: LatencySummary::of(&sum.service),
        schedule: Schedule {
            mode: s0.schedule.mode,
            target_rate: (!target_rates.is_empty()).then(|| target_rates.iter().sum()),
            achieved_rate: per_sec(events_in_window),
            late: total(|s| s.schedule.late),
            dropped: total(|s| s.schedule.dropped),
            lag_ms: s0.schedule.lag_ms.map(|_| LatencySummary::of(&sum.lag)),
        },
        queries: runs
            .iter()
            .filter_map(|r| r.summary.queries)
            .reduce(|a, b| QueryCounts {
                read: a.read + b.read,
                write: a.write + b.write,
                other: a.other + b.other,
                total: a.total + b.total,
            }),
        hits: total_opt(|s| s.hits),
        misses: total_opt(|s| s.misses),
        items,
        items_per_sec,
        connects,
        connects_per_sec,
        counters: add_counters(runs.iter().filter_map(|r| r.summary.counters.as_ref())),
        client_cpu: runs.iter().fold(CpuTime::default(), |a, r| CpuTime {
            user_s: a.user_s + r.summary.client_cpu.user_s,
            sys_s: a.sys_s + r.summary.client_cpu.sys_s,
        }),
        // Results keep no per-group histograms to add: a warning says so.
        groups: None,
        bytes,
        bytes_per_sec,
        // Stages keep no histograms to add either, and each shard settled
        // on its own: left out of a merge.
        stages: None,
        steady_state: None,
    };

    let ops = sum
        .ops
        .iter()
        .map(|(kind, (category, h))| {
            let count = |f: fn(&OpSummary) -> u64| {
                runs.iter()
                    .filter_map(|r| r.ops.get(kind))
                    .map(f)
                    .sum::<u64>()
            };
            let (items, items_per_sec) = counted_rate(count(|o| o.items.unwrap_or(0)), secs);
            let summary = OpSummary {
                category: category.clone(),
                count: count(|o| o.count),
                errors: count(|o| o.errors),
                items,
                items_per_sec,
                latency_ms: LatencySummary::of(h),
            };
            (kind.clone(), summary)
        })
        .collect();

    let mut warnings: Vec<String> = shards
        .iter()
        .flat_map(|s| {
            s.result
                .warnings
                .iter()
                .map(move |w| format!("{}: {w}", s.name))
        })
        .collect();
    if runs.iter().any(|r| r.summary.groups.is_some()) {
        warnings.push(
            "session groups' latencies are not merged (results keep no histogram per group); \
             see each shard's result for them"
                .to_string(),
        );
    }
    if !missing.is_empty() {
        warnings.push(format!(
            "merged without shard(s) {missing:?} of {} (--allow-partial): the totals are short \
             of the whole run's",
            first.result.config.shard.map_or(0, |s| s.count)
        ));
    }
    let merged_shards: Vec<MergedShard> = order
        .iter()
        .map(|&(index, i)| {
            let r = &shards[i].result;
            MergedShard {
                index,
                file: shards[i].name.clone(),
                started_at: r.started_at.clone(),
                ended_at: r.ended_at.clone(),
                ops: r.summary.ops,
                events: r.summary.events,
                ops_per_sec: r.summary.ops_per_sec,
                events_per_sec: r.summary.events_per_sec,
                p99_ms: r.summary.latency_ms.p99,
                host: r.environment.host.clone(),
                resources: r.resources.clone(),
                verification: r.verification.clone(),
                client: r.client.clone(),
            }
        })
        .collect();
    let spread = spread(&merged_shards);
    let rfc3339 = |t: SystemTime| humantime::format_rfc3339_millis(t).to_string();
    let earliest = &shards[spans.iter().position(|s| s.0 == grid_start).unwrap_or(0)].result;
    let status = if runs.iter().all(|r| r.status == RunStatus::Complete) && missing.is_empty() {
        RunStatus::Complete
    } else {
        RunStatus::Partial
    };
    Ok(RunResult {
        schema: first.result.schema.clone(),
        loadcell_version: env!("CARGO_PKG_VERSION").to_string(),
        status,
        stop_reason: runs
            .iter()
            .map(|r| r.stop_reason)
            .find(|r| r.status() == RunStatus::Partial)
            .unwrap_or(first.result.stop_reason),
        error: runs.iter().find_map(|r| r.error.clone()),
        started_at: earliest.started_at.clone(),
        ended_at: runs
            .iter()
            .map(|r| r.ended_at.clone())
            .max()
            .unwrap_or_default(),
        command: first.result.command.clone(),
        labels: common_labels(&runs),
        config: whole_config(&runs),
        environment: Environment {
            host: first.result.environment.host.clone(),
            server: first.result.environment.server.clone(),
        },
        summary,
        ops,
        intervals,
        histograms: Histograms {
            encoding: hist::ENCODING.to_string(),
            unit: "us".to_string(),
            response: hist::encode(&sum.response),
            service: hist::encode(&sum.service),
            lag: hist::encode(&sum.lag),
            ops: sum
                .ops
                .iter()
                .map(|(k, (_, h))| (k.clone(), hist::encode(h)))
                .collect(),
        },
        warnings,
        error_samples: runs
            .iter()
            .flat_map(|r| r.error_samples.iter().cloned())
            .collect(),
        // Each shard is a machine of its own: its samples stay with it.
        resources: Resources::default(),
        details: Default::default(),
        verification: None,
        hdr_log: None,
        exports: Vec::new(),
        gates: Vec::new(),
        client: loadcell_analysis::ceiling::worst(runs.iter().filter_map(|r| r.client.as_ref()))
            .cloned(),
        merge: Some(MergeSection {
            shards: merged_shards,
            missing,
            window_start: rfc3339(window_start),
            window_end: rfc3339(window_end),
            window_s: secs,
            aligned,
            spread,
        }),
    })
}

/// The shards ran the same workload with the same options: their configs
/// agree but for each shard's share, seed and place.
fn check_same_run(shards: &[ShardResult]) -> Result<(), String> {
    let comparable = |r: &RunResult| {
        let mut v = serde_json::to_value(&r.config).expect("a config always serializes");
        if let Some(map) = v.as_object_mut() {
            for field in SHARE_FIELDS {
                map.remove(*field);
            }
        }
        v
    };
    let first = &shards[0];
    let base = comparable(&first.result);
    for s in &shards[1..] {
        let other = comparable(&s.result);
        if let Some(field) = first_difference(&base, &other, "") {
            return Err(format!(
                "{} and {} ran different runs (config.{field} differs): only shards of one run \
                 merge",
                first.name, s.name
            ));
        }
    }
    Ok(())
}

/// The path of the first field that differs between two JSON values.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Option<String> {
    match (a.as_object(), b.as_object()) {
        (Some(x), Some(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, &path),
                    _ => Some(path),
                }
            })
        }
        _ => (a != b).then(|| at.to_string()),
    }
}

/// Each result's shard index and position, in shard order, and the
/// indexes missing. Plain results (no `config.shard`) are taken in the
/// order given.
type Order = (Vec<(usize, usize)>, Vec<usize>);

fn shard_order(shards: &[ShardResult], allow_partial: bool) -> Result<Order, String> {
    let places: Vec<_> = shards.iter().map(|s| s.result.config.shard).collect();
    if places.iter().all(Option::is_none) {
        return Ok(((0..shards.len()).map(|i| (i, i)).collect(), Vec::new()));
    }
    let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
    let mut count = None;
    for (i, (place, s)) in places.iter().zip(shards).enumerate() {
        let Some(place) = place else {
            return Err(format!(
                "{} is not a shard's result (no config.shard) but the others are",
                s.name
            ));
        };
        if *count.get_or_insert(place.count) != place.count {
            return Err(format!(
                "{} is shard {}/{}, but {} is of {} shards",
                s.name,
                place.index,
                place.count,
                shards[0].name,
                count.unwrap_or_default()
            ));
        }
        if let Some(j) = seen.insert(place.index, i) {
            return Err(format!(
                "{} and {} are both shard {}/{}: give each shard once",
                shards[j].name, s.name, place.index, place.count
            ));
        }
    }
    let count = count.unwrap_or_default();
    let missing: Vec<usize> = (0..count).filter(|i| !seen.contains_key(i)).collect();
    if !missing.is_empty() && !allow_partial {
        return Err(format!(
            "shard(s) {} of {count} missing: give every shard's result, or --allow-partial to \
             merge what there is",
            missing
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok((seen.into_iter().collect(), missing))
}

/// When a result's measurement began and ended on the wall clock.
fn measured_span(r: &RunResult) -> Result<(SystemTime, SystemTime), String> {
    let started = humantime::parse_rfc3339_weak(&r.started_at)
        .map_err(|e| format!("started_at '{}' is not a time: {e}", r.started_at))?;
    let start = started + Duration::from_secs_f64(r.config.warmup_s);
    Ok((start, start + Duration::from_secs_f64(r.summary.duration_s)))
}

/// `pick` summed over the intervals wholly inside the window (a tenth of
/// an interval's slack for clock rounding); `start` is when the result's
/// measurement began.
fn within(
    intervals: &[Interval],
    start: SystemTime,
    from: SystemTime,
    to: SystemTime,
    pick: fn(&Interval) -> u64,
) -> u64 {
    intervals
        .iter()
        .filter(|i| {
            let end = start + Duration::from_secs_f64(i.t_s);
            let slack = Duration::from_secs_f64(i.duration_s / 10.0);
            let begin = end - Duration::from_secs_f64(i.duration_s);
            begin + slack >= from && end <= to + slack
        })
        .map(pick)
        .sum()
}

/// Every shard's intervals added where they fall in the interval grid of
/// the earliest shard: interval k spans `grid_start + k × interval_s` to
/// the next.
fn merge_intervals(
    shards: &[ShardResult],
    spans: &[(SystemTime, SystemTime)],
    grid_start: SystemTime,
    interval_s: f64,
) -> Result<Vec<Interval>, String> {
    let mut slots: BTreeMap<u64, (Interval, Micros)> = BTreeMap::new();
    for (s, span) in shards.iter().zip(spans) {
        let offset = span.0.duration_since(grid_start).unwrap_or_default();
        for i in &s.result.intervals {
            let end = offset.as_secs_f64() + i.t_s;
            // The slot the interval's middle falls in (a coarsened
            // interval, two or more long, by its last), ended on the grid.
            let slot = ((end - i.duration_s / 2.0) / interval_s + 1e-6).max(0.0) as u64;
            let grid_end = (end / interval_s).round() * interval_s;
            let h = hist::decode(&i.histogram).map_err(|e| format!("{}: {e}", s.name))?;
            match slots.get_mut(&slot) {
                None => {
                    let mut first = i.clone();
                    first.t_s = grid_end;
                    slots.insert(slot, (first, h));
                }
                Some((sum, hsum)) => {
                    add_interval(sum, i);
                    hsum.add(&h).map_err(|e| format!("{}: {e:?}", s.name))?;
                }
            }
        }
    }
    Ok(slots
        .into_values()
        .map(|(mut i, h)| {
            let per_sec = |n: u64| {
                if i.duration_s > 0.0 {
                    n as f64 / i.duration_s
                } else {
                    0.0
                }
            };
            i.ops_per_sec = per_sec(i.ops);
            i.events_per_sec = per_sec(i.events);
            i.items_per_sec = i.items.map(per_sec);
            let l = LatencySummary::of(&h);
            i.latency_ms = IntervalLatency {
                p50: l.p50,
                p95: l.p95,
                p99: l.p99,
                max: l.max,
            };
            i.histogram = hist::encode(&h);
            i
        })
        .collect())
}

/// Adds another shard's interval of the same slot into `sum` (rates and
/// percentiles are recomputed from the sums afterwards).
fn add_interval(sum: &mut Interval, i: &Interval) {
    sum.duration_s = sum.duration_s.max(i.duration_s);
    sum.ops += i.ops;
    sum.events += i.events;
    sum.errors += i.errors;
    sum.retries += i.retries;
    sum.reconnects += i.reconnects;
    sum.items = match (sum.items, i.items) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    sum.counters = add_counters(
        [sum.counters.as_ref(), i.counters.as_ref()]
            .into_iter()
            .flatten(),
    );
    sum.connections_held = match (sum.connections_held, i.connections_held) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    sum.gauges = crate::result::highest_gauges(sum.gauges.take(), i.gauges.as_ref());
    // The finer intervals' extremes cannot be added: leave them out.
    sum.merged = None;
}

fn add_counters<'a>(
    all: impl Iterator<Item = &'a BTreeMap<String, u64>>,
) -> Option<BTreeMap<String, u64>> {
    all.fold(None, |acc, c| {
        let mut acc = acc.unwrap_or_default();
        for (k, v) in c {
            *acc.entry(k.clone()).or_insert(0) += v;
        }
        Some(acc)
    })
}

/// The total histograms, added.
struct Sums {
    response: Micros,
    service: Micros,
    lag: Micros,
    /// Per operation kind: its category and latencies.
    ops: BTreeMap<String, (String, Micros)>,
}

impl Default for Sums {
    fn default() -> Sums {
        Sums {
            response: hist::new_histogram(),
            service: hist::new_histogram(),
            lag: hist::new_histogram(),
            ops: BTreeMap::new(),
        }
    }
}

impl Sums {
    fn add(&mut self, r: &RunResult) -> Result<(), String> {
        let add = |sum: &mut Micros, text: &str| -> Result<(), String> {
            sum.add(hist::decode(text)?).map_err(|e| format!("{e:?}"))
        };
        add(&mut self.response, &r.histograms.response)?;
        add(&mut self.service, &r.histograms.service)?;
        add(&mut self.lag, &r.histograms.lag)?;
        for (kind, text) in &r.histograms.ops {
            let category = r.ops.get(kind).map_or("other", |o| &o.category);
            let (_, sum) = self
                .ops
                .entry(kind.clone())
                .or_insert_with(|| (category.to_string(), hist::new_histogram()));
            add(sum, text)?;
        }
        Ok(())
    }
}

/// The whole run's configuration: the first shard's, with the shares
/// added back up.
fn whole_config(runs: &[&RunResult]) -> RunConfig {
    let mut config = runs[0].config.clone();
    let sessions: usize = runs
        .iter()
        .map(|r| r.config.threads * r.config.clients_per_thread)
        .sum();
    if runs
        .iter()
        .all(|r| r.config.clients_per_thread == config.clients_per_thread)
    {
        config.threads = runs.iter().map(|r| r.config.threads).sum();
    } else {
        (config.threads, config.clients_per_thread) = (sessions, 1);
    }
    config.worker_threads = runs
        .iter()
        .map(|r| r.config.worker_threads)
        .sum::<Option<usize>>();
    config.rate = runs.iter().map(|r| r.config.rate).sum::<Option<f64>>();
    config.events = runs.iter().map(|r| r.config.events).sum::<Option<u64>>();
    config.shard = None;
    config
}

/// The labels every shard carries with the same value.
fn common_labels(runs: &[&RunResult]) -> BTreeMap<String, String> {
    let mut labels = runs[0].labels.clone();
    labels.retain(|k, v| runs.iter().all(|r| r.labels.get(k) == Some(v)));
    labels
}

fn spread(shards: &[MergedShard]) -> ShardSpread {
    let range = |f: fn(&MergedShard) -> f64| {
        shards
            .iter()
            .map(f)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            })
    };
    let (ops_per_sec_min, ops_per_sec_max) = range(|s| s.ops_per_sec);
    let (p99_ms_min, p99_ms_max) = range(|s| s.p99_ms);
    ShardSpread {
        ops_per_sec_min,
        ops_per_sec_max,
        p99_ms_min,
        p99_ms_max,
    }
}
