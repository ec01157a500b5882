//! Command-line arguments. Parsed here, validated once into typed plans in
//! `plan.rs`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// clap's default help layout, followed by `$text` as written. clap wraps
/// `after_help` to the terminal's width (the `wrap_help` feature), which
/// cuts example command lines in the middle; text in the template itself is
/// printed verbatim. What `{after-help}` still gives is prose, fine wrapped.
macro_rules! help_then_verbatim {
    ($text:expr) => {
        concat!(
            "{before-help}{about-with-newline}\n",
            "{usage-heading} {usage}\n\n",
            "{all-args}{after-help}\n\n",
            $text
        )
    };
}

/// The examples under `loadcell --help`, `run --help`, `prepare --help`
/// and `cleanup --help`: whole command lines, never wrapped.
macro_rules! examples {
    () => {
        "\
Examples:
  loadcell run oltp_read_write                      # embedded SQLite, prepared on first use
  loadcell prepare oltp_read_write --target mysql://root@127.0.0.1:3306/sbtest --tables 4 --table-size 100000 --threads 4
  loadcell run oltp_read_write --target mysql://root@127.0.0.1:3306/sbtest --tables 4 --table-size 100000 \\
      --threads 8 --time 60s --warmup 10s --report-interval 1s
  loadcell run oltp_point_select --target postgres://bench:secret@127.0.0.1/bench --threads 16 --rate 5000
  loadcell cleanup oltp_read_write --target mysql://root@127.0.0.1:3306/sbtest
  loadcell prepare ycsb-a --target postgres://bench:secret@127.0.0.1/bench --record-count 100000
  loadcell run ycsb-a --target postgres://bench:secret@127.0.0.1/bench --record-count 100000 --threads 8 --time 60s
  loadcell run mix-80-20 --target redis://127.0.0.1:6379 --prepare --record-count 1000000 --time 30s
  loadcell list"
    };
}

const EXAMPLES_HELP: &str = help_then_verbatim!(examples!());

#[derive(Debug, Parser)]
#[command(
    name = "loadcell",
    version,
    about = "Load-test and benchmark data systems: one tool, one result format.",
    help_template = EXAMPLES_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a workload and write a result file.
    #[command(help_template = EXAMPLES_HELP)]
    Run(Box<RunArgs>),
    /// Create and load the data set a workload needs.
    #[command(help_template = EXAMPLES_HELP)]
    Prepare(Box<PrepareArgs>),
    /// Drop what `prepare` created, and nothing else.
    #[command(help_template = EXAMPLES_HELP)]
    Cleanup(CleanupArgs),
    /// List workloads, drivers and their options.
    List,
    /// Export a result's intervals as an HdrHistogram interval log.
    Hdr(HdrArgs),
    /// Run a workload once per value of one option given as a list
    /// (e.g. --threads 1,2,4,8) and find where it stops scaling.
    #[command(
        after_help = "Takes every `run` option; exactly one of them gets a comma-separated list.",
        help_template = SWEEP_HELP
    )]
    Sweep(MultiArgs),
    /// Find the highest --rate at which the achieved rate holds and a
    /// latency percentile stays under a bound.
    #[command(after_help = "Takes every `run` option except --rate.", help_template = FINDMAX_HELP)]
    Findmax(MultiArgs),
    /// Render result and sweep files as HTML, Markdown or CSV.
    Report(ReportArgs),
    /// Compare results (or sweeps) against the first, with significance
    /// tests and an optional regression gate.
    Compare(CompareArgs),
    /// Nodes and dollars a month for a target throughput, per instance
    /// type, from results labelled instance=NAME and nodes=N.
    #[command(
        after_help = "Each result (or sweep step) is one cluster: label it --label instance=NAME \
                      --label nodes=N. Per node count the fastest setting whose p99 meets --latency \
                      is planned on; repeats are averaged.",
        help_template = PLAN_HELP
    )]
    Plan(PlanArgs),
}

const PLAN_HELP: &str = help_then_verbatim!(
    "\
Examples:
  loadcell plan --prices examples/prices.toml --target-throughput 1M --headroom 30% results/*.json
  loadcell plan --prices prices.toml --target-throughput 150k --latency 'p99<=2ms' --scaling linear one-node.json"
);

const SWEEP_HELP: &str = help_then_verbatim!(
    "\
Sweep options:
  --repeat N           run each point N times and report mean and spread (default 1)
  --out PATH           the sweep file (default RESULTS_DIR/<UTC time>-sweep-<workload>.json)
  --json               print the sweep file instead of the table (progress goes to stderr)
Examples:
  loadcell sweep oltp_read_write --target mysql://root@127.0.0.1/sbtest --threads 1,2,4,8,16,32,64 --time 30s --warmup 5s --repeat 3
  loadcell sweep kv --target redis://127.0.0.1:6379 --threads 2 --clients 25 --pipeline 1,4,16,64 --time 10s"
);

const FINDMAX_HELP: &str = help_then_verbatim!(
    "\
Findmax options:
  --sla p99<=10ms      the percentile and bound to hold (required)
  --start-rate R       first rate to probe (default 1000)
  --max-rate R         never probe above this
  --precision 5%       stop bisecting when pass and fail are this close (default 5%)
  --min-achieved 95%   the achieved rate must reach this share of the target (default 95%)
  --max-probes N       at most this many probes (default 20)
  --out PATH           the findmax file (default RESULTS_DIR/<UTC time>-findmax-<workload>.json)
  --json               print the findmax file instead of the table (progress goes to stderr)
Example:
  loadcell findmax kv --target redis://127.0.0.1:6379 --threads 2 --clients 25 --time 10s --sla 'p99<=2ms'"
);

/// `sweep` and `findmax` take `run`'s options (one of them a list), read
/// as raw words because a list is not a valid value for the typed option.
#[derive(Debug, Args)]
pub struct MultiArgs {
    /// The workload, then `run` options and this command's own options.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "WORKLOAD [OPTIONS]"
    )]
    pub args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result or sweep files.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Write one self-contained HTML page here.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Write a Markdown table here ("-" for stdout).
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,
    /// Write a CSV table here ("-" for stdout).
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Result or sweep files, labelled instance=NAME and nodes=N.
    #[arg(required = true, value_name = "RESULTS")]
    pub files: Vec<PathBuf>,
    /// Instance types with vcpus, memory_gib and usd_per_hour (TOML, see examples/prices.toml).
    #[arg(long, value_name = "PATH")]
    pub prices: PathBuf,
    /// Throughput to plan for, in the results' unit (TPS, or ops/s): 1000000, 150k, 1M.
    #[arg(long, value_name = "PER_SEC", value_parser = crate::values::throughput, allow_negative_numbers = true)]
    pub target_throughput: f64,
    /// Bound on the measured p99 at the planned node count, e.g. p99<=2ms.
    #[arg(long, value_name = "p99<=DURATION", value_parser = crate::values::p99_bound)]
    pub latency: Option<f64>,
    /// Share of capacity kept free, in [0%, 100%).
    #[arg(long, value_name = "PCT", default_value = "0%", value_parser = crate::values::headroom, allow_hyphen_values = true)]
    pub headroom: f64,
    /// Scaling over node count: fit (the USL, needs 3 or more node counts),
    /// linear or usl:SIGMA:KAPPA; INSTANCE=MODEL for one type (repeatable).
    #[arg(long, value_name = "[INSTANCE=]MODEL", value_parser = crate::plan::parse_scaling)]
    pub scaling: Vec<(Option<String>, loadcell_analysis::plan::Scaling)>,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the HTML report of the results with the plan section.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline, then one or more candidates (results, or sweeps).
    #[arg(required = true, num_args = 2.., value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Exit with status 3 if throughput or p99 is worse by more than this (e.g. 5%).
    #[arg(long, value_name = "PCT", value_parser = crate::values::threshold)]
    pub fail_if_regressed: Option<f64>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct HdrArgs {
    /// A result file written by `loadcell run`.
    pub result: PathBuf,
    /// Write the log here instead of to stdout.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
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
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::values::positive_duration)]
    pub connect_timeout: Duration,
}

#[derive(Debug, Args)]
pub struct PrepareArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Connections loading tables in parallel.
    #[arg(long, value_name = "N", default_value = "1", value_parser = crate::values::positive_usize, allow_negative_numbers = true)]
    pub threads: usize,
    #[command(flatten)]
    pub oltp: OltpArgs,
    #[command(flatten)]
    pub kv: KvArgs,
    #[command(flatten)]
    pub ycsb: YcsbArgs,
}

#[derive(Debug, Args)]
pub struct CleanupArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// With `kv`: the data set file whose keys to delete.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Threads of sessions, each with --clients sessions (sysbench's and
    /// memtier's threads); they run on --workers OS threads.
    #[arg(long, value_name = "N", default_value = "1", value_parser = crate::values::positive_usize, allow_negative_numbers = true)]
    pub threads: usize,
    /// Sessions (connections) per thread.
    #[arg(long, value_name = "N", default_value = "1", value_parser = crate::values::positive_usize, allow_negative_numbers = true)]
    pub clients: usize,
    /// OS threads the sessions are spread over. Default: one per core, at
    /// most --threads (SQLite, whose calls block: --threads).
    #[arg(long, value_name = "N", value_parser = crate::values::positive_usize, allow_negative_numbers = true)]
    pub workers: Option<usize>,
    /// Measure for this long (30s, 5m; plain numbers are seconds).
    /// Default 10s, or no time limit when --events is given.
    #[arg(long, value_name = "DURATION", value_parser = crate::values::positive_duration, allow_hyphen_values = true)]
    pub time: Option<Duration>,
    /// Stop after this many measured events (transactions).
    #[arg(long, value_name = "N", value_parser = crate::values::positive_u64, allow_negative_numbers = true)]
    pub events: Option<u64>,
    /// Run this long first, unmeasured.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = crate::values::duration, allow_hyphen_values = true)]
    pub warmup: Duration,
    /// Total target rate in events per second, open loop: latency counts
    /// from each event's intended start. Without it, runs closed loop.
    #[arg(long, value_name = "PER_SEC", value_parser = crate::values::positive_f64, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Arrival process for --rate.
    #[arg(long, value_name = "KIND", default_value = "poisson", value_parser = ["uniform", "poisson"])]
    pub arrival: String,
    /// Print a line of live statistics this often (e.g. 1s).
    #[arg(long, value_name = "DURATION", value_parser = crate::values::positive_duration)]
    pub report_interval: Option<Duration>,
    /// Give up on a lost server after failing to reconnect for this long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::values::positive_duration)]
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
    /// Also write an HdrHistogram interval log of response times while running.
    #[arg(long, value_name = "PATH")]
    pub hdr_log: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics while running (e.g. 127.0.0.1:9898).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// The server's process on this host, for its CPU and memory samples
    /// (default: the process listening on the target's loopback port).
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// A label carried into the result, e.g. --label instance=4c16g.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = crate::values::label)]
    pub labels: Vec<(String, String)>,
    #[command(flatten)]
    pub oltp: OltpArgs,
    #[command(flatten)]
    pub kv: KvArgs,
    #[command(flatten)]
    pub ycsb: YcsbArgs,
}

/// YCSB's options for the record workloads (`ycsb-a` … `ycsb-f`, `mix-*`);
/// YCSB's property names (`--recordcount`) work too. Unset options take
/// the workload's defaults.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Record workload options (ycsb-a..ycsb-f, mix-*; YCSB names)")]
pub struct YcsbArgs {
    /// Records prepare loads and run reads (default 1000).
    #[arg(long, alias = "recordcount", value_name = "N", value_parser = crate::values::positive_u64, allow_negative_numbers = true)]
    pub record_count: Option<u64>,
    /// Operations a run performs when neither --time nor --events is given
    /// (default 1000); also sizes the key space inserts grow into.
    #[arg(long, alias = "operationcount", value_name = "N", value_parser = crate::values::positive_u64, allow_negative_numbers = true)]
    pub operation_count: Option<u64>,
    /// Fields per record (default 10).
    #[arg(long, alias = "fieldcount", value_name = "N", value_parser = crate::values::positive_u32, allow_negative_numbers = true)]
    pub field_count: Option<u32>,
    /// Bytes per field (default 100; 10 for the mix-* workloads).
    #[arg(long, alias = "fieldlength", value_name = "BYTES", value_parser = crate::values::positive_usize, allow_negative_numbers = true)]
    pub field_length: Option<usize>,
    /// Which records operations choose: uniform, zipfian, latest or hotspot
    /// (default: the workload's).
    #[arg(long, alias = "requestdistribution", value_name = "KIND")]
    pub request_distribution: Option<String>,
    /// Longest scan in records; lengths are uniform from 1 (default 1000, 100
    /// for ycsb-e, as in YCSB).
    #[arg(long, alias = "maxscanlength", value_name = "N", value_parser = crate::values::positive_u64, allow_negative_numbers = true)]
    pub max_scan_length: Option<u64>,
    /// hotspot: the fraction of records that are hot (default 0.2).
    #[arg(
        long,
        alias = "hotspotdatafraction",
        value_name = "FRACTION",
        allow_negative_numbers = true
    )]
    pub hotspot_data_fraction: Option<f64>,
    /// hotspot: the fraction of operations on hot records (default 0.8).
    #[arg(
        long,
        alias = "hotspotopnfraction",
        value_name = "FRACTION",
        allow_negative_numbers = true
    )]
    pub hotspot_opn_fraction: Option<f64>,
    /// Updates write every field instead of one (default off; on for mix-*).
    #[arg(long, alias = "writeallfields", value_name = "on|off", value_parser = crate::values::on_off)]
    pub write_all_fields: Option<bool>,
}

impl YcsbArgs {
    /// The options given on the command line, by their flag names, so a
    /// workload that does not take them can say so.
    pub fn given(&self) -> Vec<&'static str> {
        [
            (self.record_count.is_some(), "--record-count"),
            (self.operation_count.is_some(), "--operation-count"),
            (self.field_count.is_some(), "--field-count"),
            (self.field_length.is_some(), "--field-length"),
            (
                self.request_distribution.is_some(),
                "--request-distribution",
            ),
            (self.max_scan_length.is_some(), "--max-scan-length"),
            (
                self.hotspot_data_fraction.is_some(),
                "--hotspot-data-fraction",
            ),
            (
                self.hotspot_opn_fraction.is_some(),
                "--hotspot-opn-fraction",
            ),
            (self.write_all_fields.is_some(), "--write-all-fields"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
    }
}

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
    #[arg(long, value_name = "N", value_parser = crate::values::positive_u64, allow_negative_numbers = true)]
    pub requests: Option<u64>,
    /// Requests in flight per connection (sent together, replies read in order).
    #[arg(long, value_name = "N", value_parser = crate::values::positive_usize, allow_negative_numbers = true)]
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

impl KvArgs {
    /// The options given on the command line, by their flag names, so a
    /// workload that does not take them can say so.
    pub fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        let mut note = |set: bool, name: &'static str| {
            if set {
                given.push(name);
            }
        };
        note(self.ratio.is_some(), "--ratio");
        note(self.key_prefix.is_some(), "--key-prefix");
        note(self.key_minimum.is_some(), "--key-minimum");
        note(self.key_maximum.is_some(), "--key-maximum");
        note(self.key_pattern.is_some(), "--key-pattern");
        note(self.key_median.is_some(), "--key-median");
        note(self.key_stddev.is_some(), "--key-stddev");
        note(self.key_zipf_exp.is_some(), "--key-zipf-exp");
        note(self.data_size.is_some(), "--data-size");
        note(self.data_size_range.is_some(), "--data-size-range");
        note(self.data_size_list.is_some(), "--data-size-list");
        note(self.random_data, "--random-data");
        note(self.distinct_client_seed, "--distinct-client-seed");
        note(self.randomize, "--randomize");
        note(self.pipeline.is_some(), "--pipeline");
        note(self.requests.is_some(), "--requests");
        note(!self.command.is_empty(), "--command");
        note(!self.command_ratio.is_empty(), "--command-ratio");
        note(
            !self.command_key_pattern.is_empty(),
            "--command-key-pattern",
        );
        note(self.verify, "--verify");
        note(self.dataset.is_some(), "--dataset");
        given
    }
}

/// sysbench's OLTP options; underscore spellings are accepted too.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "OLTP workload options (sysbench names and defaults)")]
pub struct OltpArgs {
    /// Number of tables.
    #[arg(long, value_name = "N", default_value = "1", value_parser = crate::values::positive_u32, allow_negative_numbers = true)]
    pub tables: u32,
    /// Rows per table.
    #[arg(long, alias = "table_size", value_name = "N", default_value = "10000", value_parser = crate::values::positive_u64, allow_negative_numbers = true)]
    pub table_size: u64,
    /// Rows per range query.
    #[arg(long, alias = "range_size", value_name = "N", default_value = "100", value_parser = crate::values::positive_u64, allow_negative_numbers = true)]
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
    #[arg(long, alias = "range_selects", value_name = "on|off", default_value = "on", value_parser = crate::values::on_off)]
    pub range_selects: bool,
    /// Leave out BEGIN/COMMIT.
    #[arg(long, alias = "skip_trx", value_name = "on|off", default_value = "off", num_args = 0..=1, default_missing_value = "on", value_parser = crate::values::on_off)]
    pub skip_trx: bool,
    /// Let the database assign ids (off: oltp_insert uses unique random ids).
    #[arg(long, alias = "auto_inc", value_name = "on|off", default_value = "on", value_parser = crate::values::on_off)]
    pub auto_inc: bool,
    /// Create the secondary index k_N on prepare.
    #[arg(long, alias = "create_secondary", value_name = "on|off", default_value = "on", value_parser = crate::values::on_off)]
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
