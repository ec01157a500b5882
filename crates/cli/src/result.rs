//! Assembles the result file from what the engine measured and what the
//! run was asked to do.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use loadcell_analysis::ramp::{self, RampKnee, RampPoint};
use loadcell_core::{ServerInfo, Target};
use loadcell_drivers::Family;
use loadcell_engine::shape::{Shape, StageSpan};
use loadcell_engine::{Category, OpSpec, RateSpec, RunOutcome, RunSpec};
use loadcell_record::details::{Details, FirstFailure, HeldConnections};
use loadcell_record::env::HostInfo;
use loadcell_record::file::Destination;
use loadcell_record::hist::{self, LatencySummary, Micros};
use loadcell_record::result::{
    counted_rate, Environment, GroupSummary, Histograms, Interval, LoopMode, OpSummary,
    QueryCounts, Recovery, Resources, RunConfig, RunResult, Schedule, ServerDescription,
    ShardConfig, StageSummary, StageTarget, Summary, SCHEMA_ID,
};
use loadcell_record::OpStats;
use loadcell_workloads::http::recorded_header;

pub struct ResultContext<'a> {
    pub argv: &'a [String],
    pub workload: &'a str,
    pub workload_options: BTreeMap<String, serde_json::Value>,
    pub target: &'a Target,
    pub driver: &'a str,
    pub family: Family,
    pub server: Option<ServerInfo>,
    pub spec: &'a RunSpec,
    pub labels: BTreeMap<String, String>,
    pub ops: &'a [OpSpec],
    pub transactional: bool,
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// Where a result goes: `--out` as given, else a new file
/// `RESULTS_DIR/20261121T101500Z-oltp_read_write.json` (with `-2`, `-3`, ...
/// when runs finish within the same second).
pub fn destination(out: Option<&Path>, dir: &Path, name: &str) -> Destination {
    match out {
        Some(path) => Destination::Named(path.to_path_buf()),
        None => {
            let stamp: String = humantime::format_rfc3339_seconds(SystemTime::now())
                .to_string()
                .chars()
                .filter(|c| !matches!(c, '-' | ':'))
                .collect();
            Destination::New {
                dir: dir.to_path_buf(),
                stem: format!("{stamp}-{name}"),
            }
        }
    }
}

/// The command line as recorded: passwords in URLs, and the values of
/// secret headers (`-H 'Authorization: Bearer …'`), as `***`.
fn recorded_command(argv: &[String]) -> Vec<String> {
    let header = |text: &str| match text.split_once(':') {
        Some((name, value)) => recorded_header(name, value),
        None => text.to_string(),
    };
    let mut after_flag = false;
    argv.iter()
        .map(|a| {
            let recorded = if after_flag {
                header(a)
            } else if let Some(text) = a.strip_prefix("--header=") {
                format!("--header={}", header(text))
            } else if let Some(text) = a.strip_prefix("-H").filter(|t| !t.is_empty()) {
                format!("-H{}", header(text))
            } else {
                loadcell_core::target::redact_raw(a)
            };
            after_flag = a == "-H" || a == "--header";
            recorded
        })
        .collect()
}

/// The schedule of events at `rate` (`None`: closed loop) that achieved
/// `achieved` per second, `late` and `dropped` of them, started `lag`
/// behind.
fn schedule(
    rate: Option<RateSpec>,
    achieved: f64,
    (late, dropped): (u64, u64),
    lag: &Micros,
) -> Schedule {
    Schedule {
        mode: if rate.is_some() {
            LoopMode::OpenLoop
        } else {
            LoopMode::ClosedLoop
        },
        target_rate: rate.map(|r| r.per_sec),
        achieved_rate: achieved,
        late,
        dropped,
        lag_ms: rate.map(|_| LatencySummary::of(lag)),
    }
}

/// The knees of a stage whose rate rises (a ramp), read from its
/// intervals, each with its mean target; `None` for any other stage and
/// for a ramp of fewer than [`ramp::MIN_POINTS`] intervals.
fn ramp_knee(span: &StageSpan, shape: &Shape, intervals: &[Interval]) -> Option<RampKnee> {
    if span.target_end <= span.target_start {
        return None;
    }
    // Intervals are cut at stage ends; one merged over a longer run may
    // straddle two stages, and is left out, as is the stub a run's last
    // answers make just after its end (its target, past the shape, is 0).
    const SLACK_S: f64 = 1e-3;
    let points: Vec<RampPoint> = intervals
        .iter()
        .map(|i| (i.t_s - i.duration_s, i))
        .filter(|(from, i)| {
            *from >= span.start_s - SLACK_S
                && *from < span.end_s - SLACK_S
                && i.t_s <= span.end_s + SLACK_S
        })
        .map(|(from, i)| RampPoint {
            t_s: i.t_s,
            target: shape.mean_over(from, i.t_s),
            achieved: i.events_per_sec,
            p99_ms: i.latency_ms.p99,
        })
        .collect();
    ramp::ramp_knee(&points).ok()
}

/// Each stage's numbers, and after a stage whose target is above the
/// next one's how long p99 took to come back to the stage before it; on
/// a ramp, its knees.
fn stage_summaries(outcome: &RunOutcome, spec: &RunSpec) -> Option<Vec<StageSummary>> {
    if outcome.stages.is_empty() {
        return None;
    }
    let target_of = spec.stages.as_ref().map_or(StageTarget::Rate, |s| s.of);
    let measured_s = outcome.duration.as_secs_f64();
    let mut stages: Vec<StageSummary> = outcome
        .stages
        .iter()
        .map(|st| {
            // A run stopped early measured only part of its last stages.
            let secs = (st.span.end_s.min(measured_s) - st.span.start_s).max(0.0);
            let per_sec = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
            let s = &st.stats;
            StageSummary {
                start_s: st.span.start_s,
                duration_s: st.span.end_s - st.span.start_s,
                target_of,
                target_start: st.span.target_start,
                target_end: st.span.target_end,
                events: s.events,
                ops_per_sec: per_sec(s.ops_total()),
                events_per_sec: per_sec(s.events),
                errors: s.op_errors_total(),
                latency_ms: LatencySummary::of(&s.response),
                service_time_ms: LatencySummary::of(&s.service),
                recovery: None,
                knee: spec
                    .rate_shape()
                    .and_then(|shape| ramp_knee(&st.span, shape, &outcome.intervals)),
            }
        })
        .collect();
    for k in 1..stages.len().saturating_sub(1) {
        let (before, high, next) = (&stages[k - 1], &stages[k], &stages[k + 1]);
        if high.target_end > next.target_start && before.events > 0 {
            let recovery = Recovery::after(
                high.start_s + high.duration_s,
                before.latency_ms.p99,
                &outcome.intervals,
            );
            stages[k].recovery = Some(recovery);
        }
    }
    Some(stages)
}

pub fn build(ctx: &ResultContext<'_>, outcome: RunOutcome) -> RunResult {
    let total = &outcome.total;
    let secs = outcome.duration.as_secs_f64();
    let per_sec = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let spec = ctx.spec;

    let mut queries = QueryCounts::default();
    let mut ops = BTreeMap::new();
    let mut op_histograms = BTreeMap::new();
    let mut add_op = |name: &str, category: Category, op: &OpStats| {
        ops.insert(name.to_string(), OpSummary::of(category.as_str(), op, secs));
        op_histograms.insert(name.to_string(), hist::encode(&op.latency));
    };
    for (spec, op) in ctx.ops.iter().zip(&total.ops) {
        if op.count == 0 {
            continue;
        }
        match spec.category {
            Category::Read => queries.read += op.count,
            Category::Write => queries.write += op.count,
            Category::Other => queries.other += op.count,
        }
        add_op(spec.name, spec.category, op);
    }
    // Connects made inside events (a policy that churns connections): an
    // operation kind of their own, but no query.
    if total.connects.count > 0 {
        add_op("connect", Category::Other, &total.connects);
    }
    queries.total = queries.read + queries.write + queries.other;

    let reads_counted = total.hits + total.misses > 0;
    let (items, items_per_sec) = counted_rate(total.items_total(), secs);
    let (connects, connects_per_sec) =
        counted_rate(total.connects.count - total.connects.errors, secs);
    let groups = spec.groups.as_ref().map(|_| {
        spec.rates()
            .into_iter()
            .zip(&total.groups)
            .enumerate()
            .map(|(g, (rate, events))| GroupSummary {
                name: spec.group_name(g).to_string(),
                sessions: spec.group_sessions(g),
                events: events.events,
                events_per_sec: per_sec(events.events),
                latency_ms: LatencySummary::of(&events.response),
                service_time_ms: LatencySummary::of(&events.service),
                schedule: schedule(
                    rate,
                    per_sec(events.events),
                    (events.late, events.dropped),
                    &events.lag,
                ),
            })
            .collect::<Vec<_>>()
    });
    let summary = Summary {
        duration_s: secs,
        ops: total.ops_total(),
        errors: total.op_errors_total(),
        ops_per_sec: per_sec(total.ops_total()),
        events: total.events,
        events_per_sec: per_sec(total.events),
        txn_per_sec: ctx.transactional.then(|| per_sec(total.events)),
        retries: total.retries,
        reconnects: total.reconnects,
        failed_events: total.failed_events,
        latency_ms: LatencySummary::of(&total.response),
        service_time_ms: LatencySummary::of(&total.service),
        schedule: match groups.as_ref().and_then(|g| g.first()) {
            Some(first) => first.schedule.clone(),
            None => schedule(
                spec.rate,
                per_sec(total.events),
                (total.late, total.dropped),
                &total.lag,
            ),
        },
        queries: (ctx.family == Family::SQL).then_some(queries),
        // Only reads that could tell a hit from a miss are counted: with
        // none, there is no hit ratio to give (not 0%).
        hits: reads_counted.then_some(total.hits),
        misses: reads_counted.then_some(total.misses),
        items,
        items_per_sec,
        connects,
        connects_per_sec,
        counters: total.counters_map(),
        client_cpu: outcome.client_cpu,
        groups,
        bytes: None,
        bytes_per_sec: None,
        stages: stage_summaries(&outcome, spec),
        steady_state: outcome.steady_state.clone(),
    };

    // What a run that held connections found: the engine's hold mode.
    let mut details = Details::default();
    if let Some(held) = &outcome.held {
        details.insert(&HeldConnections {
            requested: spec.sessions() as u64,
            held_max: held.peak,
            held_at_end: held.at_end,
            first_failure: held.first_failure.as_ref().map(|f| FirstFailure {
                t_s: f.t_s,
                held: f.held,
                error: f.message.clone(),
                client_limit: f.client_limit,
            }),
        });
    }
    let host = HostInfo::collect();
    // A machine baseline measures the client itself: it has no ceiling
    // apart from what it measured.
    let client = (ctx.family != Family::MACHINE)
        .then(|| {
            loadcell_analysis::ceiling::from_run_cpu(
                summary.ops,
                secs,
                summary.client_cpu.user_s + summary.client_cpu.sys_s,
                spec.workers,
                host.cpus,
            )
        })
        .flatten();
    RunResult {
        schema: SCHEMA_ID.to_string(),
        loadcell_version: env!("CARGO_PKG_VERSION").to_string(),
        status: outcome.stop_reason.status(),
        stop_reason: outcome.stop_reason,
        error: outcome.error.clone(),
        started_at: rfc3339(outcome.started_at),
        ended_at: rfc3339(outcome.ended_at),
        command: recorded_command(ctx.argv),
        labels: ctx.labels.clone(),
        config: RunConfig {
            workload: ctx.workload.to_string(),
            target: ctx.target.redacted(),
            driver: ctx.driver.to_string(),
            threads: spec.threads,
            clients_per_thread: spec.clients,
            worker_threads: Some(spec.workers),
            time_s: spec.time.map(|t| t.as_secs_f64()),
            events: spec.events,
            warmup_s: spec.warmup.as_secs_f64(),
            rate: spec.rate.map(|r| r.per_sec),
            arrival: spec.rate.map(|r| r.arrival.as_str().to_string()),
            rate_tick_s: spec.rate.and_then(|r| r.tick).map(|t| t.as_secs_f64()),
            answers_timed_on_receipt: outcome.answers_timed_on_receipt,
            report_interval_s: spec.interval.as_secs_f64(),
            connect_timeout_s: spec.connect_timeout.as_secs_f64(),
            connection_policy: Some(spec.connection_policy.to_string()),
            seed: spec.seed,
            workload_options: ctx.workload_options.clone(),
            shard: spec.shard.as_ref().map(|p| ShardConfig {
                index: p.shard.index,
                count: p.shard.count,
            }),
            start_at: spec.start_at.map(rfc3339),
        },
        environment: Environment {
            host,
            server: ctx.server.as_ref().map(|s| ServerDescription {
                product: s.product.clone(),
                version: s.version.clone(),
                extras: s.extras.clone(),
            }),
        },
        summary,
        ops,
        intervals: outcome.intervals,
        histograms: Histograms {
            encoding: hist::ENCODING.to_string(),
            unit: "us".to_string(),
            response: hist::encode(&total.response),
            service: hist::encode(&total.service),
            lag: hist::encode(&total.lag),
            ops: op_histograms,
        },
        warnings: outcome.warnings,
        error_samples: total.error_samples.clone(),
        resources: Resources {
            server_pid: spec.server_pid,
            bottleneck: outcome.bottleneck,
            samples: outcome.resources,
            server_metrics: spec
                .server_metrics
                .as_ref()
                .map(|r| r.sources())
                .unwrap_or_default(),
        },
        details,
        verification: None,
        hdr_log: None,
        exports: Vec::new(),
        gates: Vec::new(),
        merge: None,
        client,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ramp read from its intervals, the stub after the run's end left
    /// out: its mean target, past the shape, would read as a fall.
    #[test]
    fn a_ramp_is_read_from_the_intervals_inside_it() {
        let shape = Shape::new(loadcell_engine::shape::parse("10s:8000").unwrap()).unwrap();
        let span = shape.spans()[0];
        let mut intervals: Vec<Interval> = (1..=10)
            .map(|t| {
                let mut stats = loadcell_record::Stats::new(1);
                let served = (800.0 * (t as f64 - 0.5)).min(4000.0) as u64;
                for _ in 0..served {
                    stats.record_event(
                        std::time::Duration::from_millis(1),
                        std::time::Duration::from_millis(1),
                        None,
                    );
                }
                Interval::from_stats(t as f64, 1.0, &stats)
            })
            .collect();
        intervals.push(Interval::from_stats(
            10.0008,
            0.0008,
            &loadcell_record::Stats::new(1),
        ));
        let knee = ramp_knee(&span, &shape, &intervals).expect("a ramp of 10 intervals");
        // 4,000/s is under 95% of the 4,400/s target of the 6th second.
        let stopped = knee.throughput_stopped_at.unwrap();
        assert_eq!((stopped.target, stopped.t_s), (4400.0, 6.0));
        // Fewer than 5 intervals: no reading.
        assert!(ramp_knee(&span, &shape, &intervals[..4]).is_none());
    }

    #[test]
    fn secret_headers_and_passwords_are_redacted_in_the_recorded_command() {
        let argv: Vec<String> = [
            "loadcell",
            "run",
            "http",
            "-H",
            "Authorization: Bearer s3cret",
            "--header=Cookie: id=s3cret",
            "-HX-Api-Key: s3cret",
            "--header",
            "Accept: */*",
            "--target",
            "http://u:s3cret@h/",
        ]
        .map(String::from)
        .to_vec();
        let recorded = recorded_command(&argv);
        assert!(!recorded.join(" ").contains("s3cret"), "{recorded:?}");
        assert_eq!(recorded[4], "Authorization: ***");
        assert_eq!(recorded[5], "--header=Cookie: ***");
        assert_eq!(recorded[6], "-HX-Api-Key: ***");
        assert_eq!(recorded[8], "Accept: */*");
    }
}
