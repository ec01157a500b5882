//! Command-line arguments. Parsed here, validated once into typed plans in
//! `plan.rs`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  loadcell run oltp_read_write                      # embedded SQLite, prepared on first use
  loadcell prepare oltp_read_write --target mysql://root@127.0.0.1:3306/sbtest --tables 4 --table-size 100000 --threads 4
  loadcell run oltp_read_write --target mysql://root@127.0.0.1:3306/sbtest --tables 4 --table-size 100000 \\
      --threads 8 --time 60s --warmup 10s --report-interval 1s
  loadcell run oltp_point_select --target postgres://bench:secret@127.0.0.1/bench --threads 16 --rate 5000
  loadcell cleanup oltp_read_write --target mysql://root@127.0.0.1:3306/sbtest
  loadcell list";

#[derive(Debug, Parser)]
#[command(
    name = "loadcell",
    version,
    about = "Load-test and benchmark data systems: one tool, one result format.",
    after_help = EXAMPLES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a workload and write a result file.
    #[command(after_help = EXAMPLES)]
    Run(RunArgs),
    /// Create and load the data set a workload needs.
    #[command(after_help = EXAMPLES)]
    Prepare(PrepareArgs),
    /// Drop what `prepare` created, and nothing else.
    #[command(after_help = EXAMPLES)]
    Cleanup(CleanupArgs),
    /// List workloads, drivers and their options.
    List,
}

#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Workload to run (see `loadcell list`).
    pub workload: String,
    /// What to test, as a URL: sqlite:PATH, mysql://user:pass@host:port/db,
    /// postgres://user:pass@host:port/db. Default: an embedded SQLite file
    /// under the results directory.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Where result files (and the default SQLite target) go.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub results_dir: PathBuf,
    /// Give up connecting after this long (e.g. 5s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = positive_duration)]
    pub connect_timeout: Duration,
}

#[derive(Debug, Args)]
pub struct PrepareArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Connections loading tables in parallel.
    #[arg(long, value_name = "N", default_value = "1", value_parser = positive_usize, allow_negative_numbers = true)]
    pub threads: usize,
    #[command(flatten)]
    pub oltp: OltpArgs,
}

#[derive(Debug, Args)]
pub struct CleanupArgs {
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Worker threads, each with --clients sessions (sysbench's threads).
    #[arg(long, value_name = "N", default_value = "1", value_parser = positive_usize, allow_negative_numbers = true)]
    pub threads: usize,
    /// Sessions (connections) per thread.
    #[arg(long, value_name = "N", default_value = "1", value_parser = positive_usize, allow_negative_numbers = true)]
    pub clients: usize,
    /// Measure for this long (30s, 5m; plain numbers are seconds).
    /// Default 10s, or no time limit when --events is given.
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, allow_hyphen_values = true)]
    pub time: Option<Duration>,
    /// Stop after this many measured events (transactions).
    #[arg(long, value_name = "N", value_parser = positive_u64, allow_negative_numbers = true)]
    pub events: Option<u64>,
    /// Run this long first, unmeasured.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = duration, allow_hyphen_values = true)]
    pub warmup: Duration,
    /// Total target rate in events per second, open loop: latency counts
    /// from each event's intended start. Without it, runs closed loop.
    #[arg(long, value_name = "PER_SEC", value_parser = positive_f64, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Arrival process for --rate.
    #[arg(long, value_name = "KIND", default_value = "poisson", value_parser = ["uniform", "poisson"])]
    pub arrival: String,
    /// Print a line of live statistics this often (e.g. 1s).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub report_interval: Option<Duration>,
    /// Give up on a lost server after failing to reconnect for this long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    pub reconnect_timeout: Duration,
    /// Result file (default: RESULTS_DIR/<UTC time>-<workload>.json).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Print the result as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Prepare the data set first (idempotent).
    #[arg(long)]
    pub prepare: bool,
    /// Seed for all random choices (default: from the clock; recorded).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// A label carried into the result, e.g. --label instance=4c16g.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    pub labels: Vec<(String, String)>,
    #[command(flatten)]
    pub oltp: OltpArgs,
}

/// sysbench's OLTP options; underscore spellings are accepted too.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "OLTP workload options (sysbench names and defaults)")]
pub struct OltpArgs {
    /// Number of tables.
    #[arg(long, value_name = "N", default_value = "1", value_parser = positive_u32, allow_negative_numbers = true)]
    pub tables: u32,
    /// Rows per table.
    #[arg(long, alias = "table_size", value_name = "N", default_value = "10000", value_parser = positive_u64, allow_negative_numbers = true)]
    pub table_size: u64,
    /// Rows per range query.
    #[arg(long, alias = "range_size", value_name = "N", default_value = "100", value_parser = positive_u64, allow_negative_numbers = true)]
    pub range_size: u64,
    #[arg(long, alias = "point_selects", value_name = "N", default_value = "10")]
    pub point_selects: u32,
    #[arg(long, alias = "simple_ranges", value_name = "N", default_value = "1")]
    pub simple_ranges: u32,
    #[arg(long, alias = "sum_ranges", value_name = "N", default_value = "1")]
    pub sum_ranges: u32,
    #[arg(long, alias = "order_ranges", value_name = "N", default_value = "1")]
    pub order_ranges: u32,
    #[arg(long, alias = "distinct_ranges", value_name = "N", default_value = "1")]
    pub distinct_ranges: u32,
    #[arg(long, alias = "index_updates", value_name = "N", default_value = "1")]
    pub index_updates: u32,
    #[arg(
        long,
        alias = "non_index_updates",
        value_name = "N",
        default_value = "1"
    )]
    pub non_index_updates: u32,
    #[arg(long, alias = "delete_inserts", value_name = "N", default_value = "1")]
    pub delete_inserts: u32,
    /// Run the range queries at all.
    #[arg(long, alias = "range_selects", value_name = "on|off", default_value = "on", value_parser = on_off)]
    pub range_selects: bool,
    /// Leave out BEGIN/COMMIT.
    #[arg(long, alias = "skip_trx", value_name = "on|off", default_value = "off", num_args = 0..=1, default_missing_value = "on", value_parser = on_off)]
    pub skip_trx: bool,
    /// Let the database assign ids (off: oltp_insert uses unique random ids).
    #[arg(long, alias = "auto_inc", value_name = "on|off", default_value = "on", value_parser = on_off)]
    pub auto_inc: bool,
    /// Create the secondary index k_N on prepare.
    #[arg(long, alias = "create_secondary", value_name = "on|off", default_value = "on", value_parser = on_off)]
    pub create_secondary: bool,
    /// Id distribution: uniform, gaussian, special (sysbench 1.0's default), zipfian, pareto.
    #[arg(
        long,
        alias = "rand_type",
        value_name = "TYPE",
        default_value = "special"
    )]
    pub rand_type: String,
    #[arg(long, alias = "rand_spec_iter", value_name = "N", default_value = "12")]
    pub rand_spec_iter: u32,
    #[arg(long, alias = "rand_spec_pct", value_name = "PCT", default_value = "1")]
    pub rand_spec_pct: f64,
    #[arg(
        long,
        alias = "rand_spec_res",
        value_name = "PCT",
        default_value = "75"
    )]
    pub rand_spec_res: f64,
    #[arg(
        long,
        alias = "rand_zipfian_exp",
        value_name = "EXP",
        default_value = "0.8"
    )]
    pub rand_zipfian_exp: f64,
    #[arg(long, alias = "rand_pareto_h", value_name = "H", default_value = "0.2")]
    pub rand_pareto_h: f64,
}

impl OltpArgs {
    /// The defaults, as if no OLTP option had been given.
    pub fn defaults() -> OltpArgs {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            oltp: OltpArgs,
        }
        Only::parse_from(["loadcell"]).oltp
    }
}

fn positive_usize(s: &str) -> Result<usize, String> {
    match s.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n as usize),
        _ => Err("must be a whole number greater than 0".into()),
    }
}

fn positive_u32(s: &str) -> Result<u32, String> {
    positive_u64(s).and_then(|n| u32::try_from(n).map_err(|_| "is too large".into()))
}

fn positive_u64(s: &str) -> Result<u64, String> {
    match s.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n as u64),
        _ => Err("must be a whole number greater than 0".into()),
    }
}

fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err("must be a number greater than 0".into()),
    }
}

/// `30s`, `5m`, `1h30m`, `250ms`, or plain seconds as sysbench takes them.
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.starts_with('-') {
        return Err("must not be negative".into());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return if secs.is_finite() && secs >= 0.0 {
            Ok(Duration::from_secs_f64(secs))
        } else {
            Err("must be a duration such as 30s or 5m".into())
        };
    }
    humantime::parse_duration(s).map_err(|_| "must be a duration such as 30s, 5m or 250ms".into())
}

fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be greater than 0".into()),
        d => Ok(d),
    }
}

fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err("must be on or off".into()),
    }
}

fn label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err("must be KEY=VALUE, e.g. instance=4c16g".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_sysbench_and_human_forms() {
        assert_eq!(duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(duration("-5s").is_err());
        assert!(duration("soon").is_err());
        assert!(positive_duration("0").is_err());
    }

    #[test]
    fn numbers_must_be_positive() {
        assert!(positive_usize("0").is_err());
        assert!(positive_usize("-3").is_err());
        assert_eq!(positive_usize("8").unwrap(), 8);
        assert!(positive_f64("0").is_err());
        assert!(positive_f64("-1.5").is_err());
        assert!(positive_f64("nan").is_err());
    }

    #[test]
    fn labels_and_switches() {
        assert_eq!(label("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(label("novalue").is_err());
        assert!(on_off("on").unwrap());
        assert!(!on_off("off").unwrap());
        assert!(on_off("maybe").is_err());
    }
}
