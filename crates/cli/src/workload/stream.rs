//! The `stream` workload's options (OMB's and kafka-perf-test's names where
//! they have them): parsed, validated into [`StreamOptions`], listed, and
//! its producer and consumer session groups.

use std::time::Duration;

use clap::Args;
use loadcell_core::Family;
use loadcell_engine::{SessionGroup, SessionGroups};
use loadcell_workloads::stream::rows::fixed_size;
use loadcell_workloads::stream::{
    Mode, StreamOptions, StreamWorkload, CONSUMER_GROUP, DEFAULT_STREAM, PRODUCER_GROUP,
};

use loadcell_workloads::workload::Workload;

use super::{CliFamily, Entry, FamilySpec, RunShape, WorkloadArgs};

/// The report interval when none is given (as the run's).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// Consumers by default: one per partition, up to this many.
const DEFAULT_CONSUMERS_MAX: u32 = 16;

/// The stream, its rows and who produces and consumes them.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Stream workload options (stream)")]
pub struct StreamArgs {
    /// The stream (a Kafka topic; Redis keys NAME:0.., NAME:meta; PostgreSQL tables NAME_0..).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_STREAM)]
    pub stream: String,
    /// Channels (partitions), each ordered, produced and consumed in parallel.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub partitions: u32,
    /// Bytes of a row: fixed fields, 4 key columns and a payload (the Tunnel report's 220).
    #[arg(long, value_name = "BYTES", default_value_t = 220)]
    pub row_size: usize,
    /// Rows per second over all producers, open loop (OMB's producerRate); 0 or absent: closed loop.
    #[arg(long, value_name = "ROWS_PER_SEC")]
    pub produce_rate: Option<f64>,
    /// Producer sessions; each owns every Nth channel.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub producers: usize,
    /// Consumer sessions (default: one per partition, at most 16).
    #[arg(long, value_name = "N")]
    pub consumers: Option<usize>,
    /// The consumer group: processes that give the same one share the stream's rows (default loadcell-STREAM).
    #[arg(long, value_name = "ID")]
    pub group: Option<String>,
    /// produce, consume (drain what is there: the catch-up case) or both.
    #[arg(long, value_name = "MODE", default_value = "both")]
    pub mode: String,
    /// Rows per produce request.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub batch: usize,
    /// Rows per poll, at most.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub poll_max: usize,
    /// How long a poll waits for rows.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = crate::values::positive_duration)]
    pub poll_wait: Duration,
    /// Rows `prepare` loads for a consume-only run to catch up on.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub backlog: u64,
    /// How long the check after the run consumes what the group has not acknowledged before counting it missing.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::values::duration)]
    pub drain_timeout: Duration,
}

impl CliFamily for StreamArgs {
    const WHAT: &'static str = "a stream workload option";
    type Spec = StreamWorkload;

    fn catalog() -> Vec<Entry> {
        vec![(
            "stream",
            &[Family::STREAM],
            "Tunnel/OMB-style change stream: --producers write --row-size rows into --partitions ordered channels at --produce-rate, --consumers read them through --group; rows/s, latency per poll and end to end, order per channel (gaps, duplicates, reorders), then produced, consumed and missing after a drain",
        )]
    }

    fn resolve(_name: &str, all: &WorkloadArgs, given: &[String]) -> Result<StreamWorkload, String> {
        resolve(&all.stream, given)
    }
}

impl FamilySpec for StreamWorkload {
    fn workload(&self) -> &dyn Workload {
        self
    }

    fn prepare_hint(&self) -> String {
        format!(
            "--stream {} --partitions {}",
            self.opts.stream, self.opts.partitions
        )
    }

    /// The first session group runs `threads × clients` sessions at
    /// `--rate`: here the producers at `--produce-rate` (one event a
    /// `--batch`), or the consumers of a consume-only run. A consumer
    /// samples the group's lag once a report interval.
    fn fit_run(&mut self, run: &mut RunShape) -> Result<(), String> {
        if run.rate.is_some() {
            return Err(
                "--rate does not apply to stream: give --produce-rate, in rows per second"
                    .to_string(),
            );
        }
        if run.threads * run.clients != 1 {
            return Err(
                "stream runs --producers and --consumers sessions: leave out --threads and --clients"
                    .to_string(),
            );
        }
        self.opts.lag_every = run.report_interval.unwrap_or(DEFAULT_INTERVAL);
        let o = &self.opts;
        if o.mode.produces() {
            run.threads = o.producers;
            run.rate = o.produce_rate.map(|rows| rows / o.batch as f64);
        } else {
            run.threads = o.consumers;
        }
        Ok(())
    }

    /// Producers, then consumers, when the run does both.
    fn groups(&self, _run: &RunShape) -> Option<SessionGroups> {
        (self.opts.mode == Mode::Both).then(|| SessionGroups {
            first: PRODUCER_GROUP,
            others: vec![SessionGroup {
                name: CONSUMER_GROUP,
                sessions: self.opts.consumers,
                rate: None,
            }],
        })
    }
}

crate::launch::runs_on!(StreamWorkload: stream);

fn resolve(a: &StreamArgs, given: &[String]) -> Result<StreamWorkload, String> {
    let mode = Mode::parse(&a.mode)
        .ok_or_else(|| format!("--mode '{}' is not a mode: use {}", a.mode, Mode::NAMES))?;
    if a.partitions == 0 {
        return Err("--partitions must be at least 1".to_string());
    }
    let fixed = fixed_size();
    if a.row_size < fixed {
        return Err(format!(
            "--row-size {} is below the {fixed} bytes of a row's fixed fields and keys",
            a.row_size
        ));
    }
    if a.row_size > u16::MAX as usize + fixed {
        return Err(format!(
            "--row-size {}: a row's payload is at most 65535 bytes",
            a.row_size
        ));
    }
    if mode == Mode::Produce && a.group.is_some() {
        return Err("--group does not apply with --mode produce: nothing consumes".to_string());
    }
    let for_mode = |flags: &[&str], applies: bool, what: &str| match given
        .iter()
        .find(|f| flags.contains(&f.as_str()))
    {
        Some(flag) if !applies => Err(format!(
            "{flag} does not apply with --mode {}: {what}",
            mode.as_str()
        )),
        _ => Ok(()),
    };
    for_mode(
        &["--produce-rate", "--producers", "--batch"],
        mode.produces(),
        "nothing is produced",
    )?;
    for_mode(
        &["--consumers", "--poll-max", "--poll-wait"],
        mode.consumes(),
        "nothing is consumed",
    )?;
    let positive = |n: usize, flag: &str| {
        if n == 0 {
            Err(format!("{flag} must be at least 1"))
        } else {
            Ok(n)
        }
    };
    let producers = positive(a.producers, "--producers")?;
    if producers > a.partitions as usize {
        return Err(format!(
            "--producers {producers} is more than --partitions {}: each channel has one producer",
            a.partitions
        ));
    }
    let consumers = match a.consumers {
        Some(n) => positive(n, "--consumers")?,
        None => a.partitions.min(DEFAULT_CONSUMERS_MAX) as usize,
    };
    if consumers > a.partitions as usize {
        return Err(format!(
            "--consumers {consumers} is more than --partitions {}: a consumer reads at least one channel",
            a.partitions
        ));
    }
    let produce_rate = a.produce_rate.filter(|r| *r > 0.0);
    if a.produce_rate.is_some_and(|r| r < 0.0 || !r.is_finite()) {
        return Err("--produce-rate must be 0 (closed loop) or more".to_string());
    }
    Ok(StreamWorkload {
        opts: StreamOptions {
            stream: a.stream.clone(),
            partitions: a.partitions,
            row_size: a.row_size,
            produce_rate,
            producers,
            consumers,
            group: a
                .group
                .clone()
                .unwrap_or_else(|| format!("loadcell-{}", a.stream)),
            group_given: a.group.is_some(),
            mode,
            batch: positive(a.batch, "--batch")?,
            poll_max: positive(a.poll_max, "--poll-max")?,
            poll_wait: a.poll_wait,
            backlog: a.backlog,
            drain_timeout: a.drain_timeout,
            lag_every: DEFAULT_INTERVAL,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> StreamArgs {
        super::super::WorkloadArgs::defaults().stream
    }

    fn err(a: StreamArgs, given: &[&str]) -> String {
        let given: Vec<String> = given.iter().map(|f| f.to_string()).collect();
        match resolve(&a, &given) {
            Err(e) => e,
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn mistakes_are_refused_in_one_line() {
        let e = err(
            StreamArgs {
                partitions: 0,
                ..args()
            },
            &[],
        );
        assert_eq!(e, "--partitions must be at least 1");
        let e = err(
            StreamArgs {
                mode: "produce".into(),
                group: Some("g".into()),
                ..args()
            },
            &["--group"],
        );
        assert!(
            e.starts_with("--group does not apply with --mode produce"),
            "{e}"
        );
        let e = err(
            StreamArgs {
                row_size: 50,
                ..args()
            },
            &[],
        );
        assert_eq!(
            e,
            "--row-size 50 is below the 84 bytes of a row's fixed fields and keys"
        );
        let e = err(
            StreamArgs {
                producers: 9,
                ..args()
            },
            &[],
        );
        assert!(e.contains("each channel has one producer"), "{e}");
        let e = err(
            StreamArgs {
                mode: "consume".into(),
                ..args()
            },
            &["--produce-rate"],
        );
        assert_eq!(
            e,
            "--produce-rate does not apply with --mode consume: nothing is produced"
        );
    }

    #[test]
    fn consumers_default_to_the_partitions_and_the_group_to_the_stream() {
        let a = StreamArgs {
            partitions: 64,
            ..args()
        };
        let w = resolve(&a, &[]).unwrap();
        assert_eq!(w.opts.consumers, 16);
        assert_eq!(w.opts.group, "loadcell-loadcell_stream");
        assert!(!w.opts.group_given);
        assert_eq!(
            w.groups(&RunShape::closed_loop(1, 1)).unwrap().other_sessions(),
            16
        );
    }
}
