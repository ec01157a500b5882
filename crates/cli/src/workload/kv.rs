//! The `kv` workload's options (memtier_benchmark's names and defaults):
//! parsed, validated into [`KvOptions`], listed.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use loadcell_core::Family;
use loadcell_workloads::dataset::{DataSet, DataSetWorkload};
use loadcell_workloads::kv::{CommandTemplate, DataSize, KeyPattern, KvOptions, KvWorkload};

use loadcell_core::Target;
use loadcell_drivers::OpenError;
use loadcell_workloads::workload::Workload;

use super::{CliFamily, Entry, FamilySpec, WorkloadArgs};
use crate::launch::{Job, Launch};
use crate::values::{positive_u64, positive_usize};

/// memtier_benchmark's options for the `kv` workload. Unset options take
/// memtier's defaults.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Key-value workload options (memtier_benchmark names)")]
pub struct KvArgs {
    /// SET:GET ratio (default 1:10).
    #[arg(long, value_name = "SET:GET")]
    pub ratio: Option<String>,
    /// Key prefix (default "memtier-").
    #[arg(long, value_name = "PREFIX")]
    pub key_prefix: Option<String>,
    /// Lowest key number (default 0).
    #[arg(long, value_name = "N")]
    pub key_minimum: Option<u64>,
    /// Highest key number (default 10000000).
    #[arg(long, value_name = "N")]
    pub key_maximum: Option<u64>,
    /// SET:GET key patterns: R random, S sequential, G gaussian, P parallel per client, Z zipfian (default R:R).
    #[arg(long, value_name = "SET:GET")]
    pub key_pattern: Option<String>,
    /// Median key for G (default: middle of the range).
    #[arg(long, value_name = "KEY")]
    pub key_median: Option<f64>,
    /// Standard deviation for G (default: range / 6).
    #[arg(long, value_name = "N")]
    pub key_stddev: Option<f64>,
    /// Exponent for Z (default 1).
    #[arg(long, value_name = "EXP")]
    pub key_zipf_exp: Option<f64>,
    /// Value size in bytes (default 32).
    #[arg(short = 'd', long, value_name = "BYTES", allow_negative_numbers = true)]
    pub data_size: Option<i64>,
    /// Value sizes uniformly in a range.
    #[arg(long, value_name = "MIN-MAX")]
    pub data_size_range: Option<String>,
    /// Value sizes with weights.
    #[arg(long, value_name = "SIZE:WEIGHT,...")]
    pub data_size_list: Option<String>,
    /// Random bytes in values instead of 'x'.
    #[arg(long)]
    pub random_data: bool,
    /// A different random seed for every connection (memtier's default is one seed for all).
    #[arg(long)]
    pub distinct_client_seed: bool,
    /// Seed from the clock (the default when --seed is not given).
    #[arg(long)]
    pub randomize: bool,
    /// Requests per client instead of a time limit.
    #[arg(long, value_name = "N", value_parser = positive_u64, allow_negative_numbers = true)]
    pub requests: Option<u64>,
    /// Requests in flight per connection (sent together, replies read in order).
    #[arg(long, value_name = "N", value_parser = positive_usize, allow_negative_numbers = true)]
    pub pipeline: Option<usize>,
    /// An arbitrary command, e.g. 'hset __key__ f1 __data__' (repeatable).
    #[arg(long, value_name = "TEMPLATE")]
    pub command: Vec<String>,
    /// Weight of each --command, in order (default 1 each).
    #[arg(long, value_name = "N")]
    pub command_ratio: Vec<u32>,
    /// Key pattern of each --command, in order (default R).
    #[arg(long, value_name = "R|S|G|P|Z")]
    pub command_key_pattern: Vec<String>,
    /// Derive values from their keys and check every GET hit returns the bytes that were SET.
    #[arg(long)]
    pub verify: bool,
    /// A mixed data set file (TOML: key types, shares, hot set) instead of one key range.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
}

fn options(a: &KvArgs) -> Result<KvOptions, String> {
    let d = KvOptions::default();
    let (ratio_set, ratio_get) = match &a.ratio {
        None => (d.ratio_set, d.ratio_get),
        Some(r) => {
            let bad = || format!("--ratio '{r}' must be SET:GET with whole numbers, e.g. 1:10");
            let (s, g) = r.split_once(':').ok_or_else(bad)?;
            (
                s.trim().parse().map_err(|_| bad())?,
                g.trim().parse().map_err(|_| bad())?,
            )
        }
    };
    let (pattern_set, pattern_get) = match &a.key_pattern {
        None => (d.pattern_set, d.pattern_get),
        Some(p) => KeyPattern::parse_pair(p)?,
    };
    let sizes_given = [
        a.data_size.is_some(),
        a.data_size_range.is_some(),
        a.data_size_list.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if sizes_given > 1 {
        return Err(
            "give only one of -d/--data-size, --data-size-range and --data-size-list".into(),
        );
    }
    let data_size = match (&a.data_size, &a.data_size_range, &a.data_size_list) {
        (Some(n), _, _) if *n <= 0 => {
            return Err(format!(
                "-d/--data-size {n}: a value size must be at least 1 byte"
            ))
        }
        (Some(n), _, _) => DataSize::Fixed(*n as usize),
        (_, Some(r), _) => DataSize::parse_range(r)?,
        (_, _, Some(l)) => DataSize::parse_list(l)?,
        _ => d.data_size.clone(),
    };
    if !a.command_ratio.is_empty() && a.command_ratio.len() != a.command.len() {
        return Err(format!(
            "{} --command-ratio {} for {} --command {}: give one per command",
            a.command_ratio.len(),
            loadcell_core::words::plural(a.command_ratio.len() as u64, "value"),
            a.command.len(),
            loadcell_core::words::plural(a.command.len() as u64, "template")
        ));
    }
    if !a.command_key_pattern.is_empty() && a.command_key_pattern.len() != a.command.len() {
        return Err(format!(
            "{} --command-key-pattern {} for {} --command {}: give one per command",
            a.command_key_pattern.len(),
            loadcell_core::words::plural(a.command_key_pattern.len() as u64, "value"),
            a.command.len(),
            loadcell_core::words::plural(a.command.len() as u64, "template")
        ));
    }
    let commands = a
        .command
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let weight = a.command_ratio.get(i).copied().unwrap_or(1);
            let pattern = match a.command_key_pattern.get(i) {
                Some(p) => KeyPattern::parse_pair(&format!("{p}:{p}"))?.0,
                None => KeyPattern::Random,
            };
            CommandTemplate::parse(text, weight, pattern)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let opts = KvOptions {
        ratio_set,
        ratio_get,
        key_prefix: a.key_prefix.clone().unwrap_or(d.key_prefix),
        key_min: a.key_minimum.unwrap_or(d.key_min),
        key_max: a.key_maximum.unwrap_or(d.key_max),
        pattern_set,
        pattern_get,
        key_median: a.key_median,
        key_stddev: a.key_stddev,
        key_zipf_exp: a.key_zipf_exp.unwrap_or(d.key_zipf_exp),
        data_size,
        random_data: a.random_data,
        distinct_client_seed: a.distinct_client_seed,
        pipeline: a.pipeline.unwrap_or(d.pipeline),
        commands,
        verify: a.verify,
    };
    opts.validate()?;
    Ok(opts)
}

/// The options that still apply with `--dataset`: the file declares the
/// keys and values.
const DATASET_FLAGS: &[&str] = &[
    "--dataset",
    "--ratio",
    "--pipeline",
    "--requests",
    "--distinct-client-seed",
    "--randomize",
];

/// memtier's model, or with `--dataset` the data set's.
#[derive(Debug, Clone)]
pub enum KvSpec {
    Kv(KvWorkload),
    Dataset(DataSetWorkload),
}

impl CliFamily for KvArgs {
    const WHAT: &'static str = "a key-value (kv workload) option";
    type Spec = KvSpec;

    fn catalog() -> Vec<Entry> {
        vec![(
            "kv",
            &[Family::KV],
            "memtier_benchmark-style SET:GET mix or weighted command templates, key patterns, value sizes, pipelining",
        )]
    }

    fn resolve(_name: &str, all: &WorkloadArgs, given: &[String]) -> Result<KvSpec, String> {
        let a = &all.kv;
        let Some(path) = &a.dataset else {
            return Ok(KvSpec::Kv(KvWorkload { opts: options(a)? }));
        };
        if let Some(flag) = given.iter().find(|f| !DATASET_FLAGS.contains(&f.as_str())) {
            return Err(format!(
                "{flag} does not apply with --dataset: the data set file declares the keys and values \
                 (with a data set, kv takes --ratio, --pipeline, --requests, --distinct-client-seed and --randomize)"
            ));
        }
        Ok(KvSpec::Dataset(DataSetWorkload {
            set: Arc::new(DataSet::load(path)?),
            opts: options(a)?,
        }))
    }
}

impl KvSpec {
    fn opts(&self) -> &KvOptions {
        match self {
            KvSpec::Kv(w) => &w.opts,
            KvSpec::Dataset(w) => &w.opts,
        }
    }
}

impl FamilySpec for KvSpec {
    fn workload(&self) -> &dyn Workload {
        match self {
            KvSpec::Kv(w) => w,
            KvSpec::Dataset(w) => w,
        }
    }

    fn prepare_hint(&self) -> String {
        match self {
            KvSpec::Kv(w) => format!(
                "--key-minimum {} --key-maximum {}",
                w.opts.key_min, w.opts.key_max
            ),
            KvSpec::Dataset(w) => format!("--dataset {}", w.set.path),
        }
    }

    /// memtier's `--requests` (per connection) as a total event count:
    /// with `--pipeline N` an event is a batch of N requests.
    fn implied_events(&self, all: &WorkloadArgs, sessions: u64, _timed: bool) -> Option<u64> {
        all.kv
            .requests
            .map(|r| r.saturating_mul(sessions).div_ceil(self.opts().pipeline as u64))
    }
}

impl Launch for KvSpec {
    fn launch<J: Job>(&self, target: &Target, job: J) -> Result<J::Output, OpenError> {
        match self {
            KvSpec::Kv(w) => w.launch(target, job),
            KvSpec::Dataset(w) => w.launch(target, job),
        }
    }

    #[cfg(test)]
    fn dispatched(&self) -> Vec<&'static str> {
        match self {
            KvSpec::Kv(w) => w.dispatched(),
            KvSpec::Dataset(w) => w.dispatched(),
        }
    }
}

crate::launch::runs_on!(KvWorkload: kv);
crate::launch::runs_on!(DataSetWorkload: kv);
