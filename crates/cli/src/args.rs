//! Command-line arguments. Parsed here, validated once into typed plans in
//! `plan.rs`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::workload::WorkloadArgs;

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
    Cleanup(Box<CleanupArgs>),
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
    /// Merge the results of one run's shards (--shard I/N) into one
    /// result: histograms added, intervals added on the wall clock,
    /// throughput over the window every shard measured.
    #[command(help_template = MERGE_HELP)]
    Merge(MergeArgs),
    /// One live view of a run's shards (each given --watch URL): merged
    /// lines with exact percentiles, /metrics and a live page; at the end
    /// the shards' results merged and --threshold gates judged.
    #[command(help_template = WATCH_HELP)]
    Watch(crate::watch::WatchArgs),
    /// Nodes and dollars a month for a target throughput, per instance
    /// type, from results labelled instance=NAME and nodes=N.
    #[command(
        after_help = "Each result (or sweep step) is one cluster: label it --label instance=NAME \
                      --label nodes=N. Per node count the fastest setting whose p99 meets --latency \
                      is planned on; repeats are averaged.",
        help_template = PLAN_HELP
    )]
    Plan(PlanArgs),
    /// What to change in a MySQL, MariaDB, PostgreSQL or Redis server's
    /// configuration, why, and the numbers read: its settings and status,
    /// and a run's result when given.
    #[command(help_template = ADVISE_HELP)]
    Advise(AdviseArgs),
    /// A whole campaign as one TOML file: targets, steps, matrices,
    /// repeats and gates, run into one directory with the field reports'
    /// tables (`suite run FILE`, `suite run --resume DIR`).
    Suite(crate::suite::SuiteArgs),
    /// Each series of remembered runs over time: its change points beyond
    /// its own noise, flagged runs left out (`--fail-on-change` for CI).
    Trend(crate::history::TrendArgs),
    /// The run history: `history import DIR` records files written before.
    History(crate::history::HistoryArgs),
}

const WATCH_HELP: &str = help_then_verbatim!(
    "\
Examples:
  loadcell watch --listen 0.0.0.0:9750 --out merged.json --threshold 'p99 <= 5ms'
  loadcell run kv --target redis://cache:6379 --shard 0/3 --start-at +30s --watch http://watcher:9750"
);

const ADVISE_HELP: &str = help_then_verbatim!(
    "\
Examples:
  loadcell advise --target mysql://root@127.0.0.1:3306/sbtest
  loadcell advise --target postgres://bench:secret@db1/bench --result results/run.json --server-cores 16
  loadcell advise --target redis://127.0.0.1:6379 --result results/run.json --json"
);

#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// The server, as a URL: mysql://, postgres:// or redis://.
    #[arg(long, value_name = "URL")]
    pub target: String,
    /// A run's result against this server: its sessions, writes, errors
    /// and the server's counters during it weigh in the advice.
    #[arg(long, value_name = "PATH")]
    pub result: Option<PathBuf>,
    /// Cores of the server's machine (default: this machine's, for a
    /// server on a loopback address).
    #[arg(long, value_name = "N", value_parser = crate::values::positive_usize)]
    pub server_cores: Option<usize>,
    /// Give up connecting after this long (e.g. 5s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::values::positive_duration)]
    pub connect_timeout: Duration,
    /// Print the advice as JSON.
    #[arg(long)]
    pub json: bool,
}

const PLAN_HELP: &str = help_then_verbatim!(
    "\
Examples:
  loadcell plan --prices examples/prices.toml --target-throughput 1M --headroom 30% results/*.json
  loadcell plan --prices prices.toml --target-throughput 150k --latency 'p99<=2ms' --scaling linear one-node.json"
);

const MERGE_HELP: &str = help_then_verbatim!(
    "\
Examples:
  loadcell merge shard-0.json shard-1.json shard-2.json --out merged.json
  loadcell merge results/shards/ --out merged.json      # every result file in the directory
  loadcell report results/shards/                      # report, compare and plan merge shard sets themselves"
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
  --precision 5%       end once the 95% interval of the edge is this narrow (default 5%)
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
    /// Result or sweep files; or a run's interval log (.hlog) for a
    /// partial view of a run killed before it wrote its result. A
    /// directory, or several results of one run's shards, is merged first.
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
pub struct MergeArgs {
    /// The shards' result files, or directories holding them.
    #[arg(required = true, value_name = "RESULTS")]
    pub files: Vec<PathBuf>,
    /// The merged result file.
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    /// Merge even if some shards' results are missing (the totals are then
    /// short of the whole run's, and the result says so).
    #[arg(long)]
    pub allow_partial: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Result or sweep files, labelled instance=NAME and nodes=N (a
    /// directory of one run's shard results is merged first).
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
    /// A gate on the plan's cheapest answer, e.g. 'nodes <= 8' or
    /// 'monthly_cost <= 5k' (repeatable); a failed one, or a target no
    /// instance type meets, exits 3.
    #[arg(long = "threshold", value_name = "GATE", value_parser = loadcell_report::gate::Gate::parse)]
    pub thresholds: Vec<loadcell_report::gate::Gate>,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the HTML report of the results with the plan section.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline, then one or more candidates (results, or sweeps; a
    /// directory of one run's shard results is merged first).
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

#[derive(Debug, Clone, Args)]
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
    /// Threads of loading sessions, each with --clients connections, as
    /// in `run` (sysbench's prepare --threads): prepare loads over
    /// threads x clients connections.
    #[arg(long, value_name = "N", default_value = "1", value_parser = crate::values::positive_usize, allow_negative_numbers = true)]
    pub threads: usize,
    /// Loading connections per thread.
    #[arg(long, value_name = "N", default_value = "1", value_parser = crate::values::positive_usize, allow_negative_numbers = true)]
    pub clients: usize,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

#[derive(Debug, Args)]
pub struct CleanupArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// The same workload options as `prepare`: they name what it created
    /// (`--index`, `--measurement`, `--stream`, `--table`, `--file`, …).
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Also remove data loadcell cannot prove is its own (another writer's
    /// documents, rows or entries in what loadcell created).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Args)]
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
    /// Run this long first, unmeasured; or `auto`: until throughput and
    /// latency have settled (MSER-5 over the intervals), at most
    /// --warmup-max.
    #[arg(long, value_name = "DURATION|auto", default_value = "0s", value_parser = crate::values::warmup, allow_hyphen_values = true)]
    pub warmup: crate::values::Warmup,
    /// With --warmup auto: the longest warm-up; a run that has not settled
    /// by then is measured anyway, and says so.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = crate::values::positive_duration, allow_hyphen_values = true)]
    pub warmup_max: Duration,
    /// Total target rate in events per second, open loop: latency counts
    /// from each event's intended start. Without it, runs closed loop.
    #[arg(long, value_name = "PER_SEC", value_parser = crate::values::positive_f64, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Shape the open-loop rate over the run, as k6's ramping-arrival-rate:
    /// 'DUR:RATE,…', each stage moving linearly from the previous target
    /// (0 before the first) to its own; a 0s stage jumps. Replaces --rate
    /// and --time; a --warmup runs before it at the first stage's rate.
    /// E.g. '0s:2000,30s:2000,0s:8000,10s:8000,0s:2000,1m:2000'.
    #[arg(long, value_name = "STAGES", value_parser = crate::values::stages, conflicts_with_all = ["rate", "time"], allow_hyphen_values = true)]
    pub stages: Option<loadcell_engine::shape::Shape>,
    /// Shape the sessions running events over the run, in closed loop, as
    /// k6's ramping-vus: 'DUR:SESSIONS,…', each stage moving linearly from
    /// the previous count (0 before the first) to its own; a 0s stage
    /// jumps. All of the peak's sessions connect before the run and are
    /// parked or woken in order, so a ramp measures no connects. Replaces
    /// --rate, --time, --threads and --clients; a --warmup runs before it
    /// with the first stage's sessions. E.g. '0s:8,1m:8,2m:64,1m:64'.
    #[arg(long, value_name = "STAGES", value_parser = crate::values::session_stages, conflicts_with_all = ["rate", "time", "stages", "threads", "clients"], allow_hyphen_values = true)]
    pub session_stages: Option<loadcell_engine::shape::Shape>,
    /// Arrival process for --rate.
    #[arg(long, value_name = "KIND", default_value = "poisson", value_parser = ["uniform", "poisson"])]
    pub arrival: String,
    /// Send --rate's events in bursts, one every DURATION (e.g. 1ms, as
    /// wrk2's timer does): the events due within a tick leave together at
    /// its end, and their latency counts from it. The client then wakes
    /// once per tick instead of once per event, which costs far less CPU
    /// at high rates; the server sees bursts of rate × DURATION events.
    #[arg(long, value_name = "DURATION", requires = "rate", value_parser = crate::values::positive_duration, allow_hyphen_values = true)]
    pub rate_tick: Option<Duration>,
    /// Print a line of live statistics this often (e.g. 1s).
    #[arg(long, value_name = "DURATION", value_parser = crate::values::positive_duration)]
    pub report_interval: Option<Duration>,
    /// When sessions open new connections: persistent (once, kept),
    /// per-event (connect, run the event, close: ab without -k) or every:N
    /// (every N events). Connects made during the run are timed as the
    /// operation `connect`, inside their event's latency.
    #[arg(long, value_name = "POLICY", default_value = "persistent")]
    pub connection_policy: loadcell_engine::ConnectionPolicy,
    /// Give up on a lost server after failing to reconnect for this long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::values::positive_duration)]
    pub reconnect_timeout: Duration,
    /// How long sessions may finish after the run is told to stop; a
    /// workload that drains after its run raises it (`FamilySpec::fit_run`).
    #[arg(skip)]
    pub drain_timeout: Option<Duration>,
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
    /// Scrape a Prometheus exporter on the server's host every interval
    /// (repeatable): node_exporter for its CPU, memory, load, disk and
    /// network, mysqld_exporter, postgres_exporter or redis_exporter for
    /// the server's counters, e.g. http://db1:9100/metrics.
    #[arg(long, value_name = "URL")]
    pub server_metrics: Vec<String>,
    /// Push each interval's numbers while running (repeatable), as k6's
    /// outputs: prometheus-rw=URL (or experimental-prometheus-rw=URL; a
    /// remote-write receiver, e.g. http://prom:9090/api/v1/write) or
    /// influxdb=URL/DB (e.g. http://influx:8086/loadcell).
    #[arg(long, value_name = "KIND=URL", value_parser = crate::export::parse_output)]
    pub export: Vec<crate::export::Output>,
    /// Post each interval's histograms, and the result at the end, to a
    /// `loadcell watch` at this URL (http://HOST:PORT), for one live view
    /// of every shard. The run never waits on it.
    #[arg(long, value_name = "URL", value_parser = crate::watch::feed::parse_url)]
    pub watch: Option<crate::watch::feed::WatchUrl>,
    /// The server's process on this host, for its CPU and memory samples
    /// (default: the process listening on the target's loopback port).
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Run shard I (0-based, as a Kubernetes Indexed Job's
    /// JOB_COMPLETION_INDEX) of a run split over N load generators: its
    /// part of the sessions (of every group), of --rate and of --events,
    /// its sessions numbered among all shards' so that per-session key
    /// ranges split too. Merge the shards' results with `loadcell merge`.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<loadcell_engine::Shard>,
    /// Split over N shards, this one's index (0-based) read from
    /// JOB_COMPLETION_INDEX, as a Kubernetes Indexed Job sets it. (Not
    /// --shards: that is the search workloads' index shards.)
    #[arg(long, value_name = "N", value_parser = crate::values::positive_usize, allow_negative_numbers = true)]
    pub shard_count: Option<usize>,
    /// Start measuring at this wall-clock time (RFC 3339 in UTC, e.g.
    /// 2026-11-24T22:00:00Z, or +30s from now): connect, wait, and warm
    /// up for --warmup just before it. Give every shard the same time.
    #[arg(long, value_name = "TIME", value_parser = crate::values::start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// A label carried into the result, e.g. --label instance=4c16g.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = crate::values::label)]
    pub labels: Vec<(String, String)>,
    /// A gate the run must pass, else it exits 3 (repeatable): 'p99 <= 2ms',
    /// 'service.p999 < 10ms', 'read.p99 <= 1ms', 'error_rate < 0.1%',
    /// 'ops_per_sec >= 50k', 'verification ok'; on sweep also 'knee >= 32',
    /// on findmax 'rate >= 10k'.
    #[arg(long = "threshold", value_name = "GATE", value_parser = loadcell_report::gate::Gate::parse)]
    pub thresholds: Vec<loadcell_report::gate::Gate>,
    /// Keep this run out of the run history (`loadcell trend`).
    #[arg(long)]
    pub no_history: bool,
    /// Label the run `commit=` the commit checked out here (`git rev-parse
    /// HEAD`), for the run history; a `--label commit=…` wins.
    #[arg(long)]
    pub git_commit: bool,
    /// The run history: a SQLite file or directory, or postgres://…
    /// shared by a team (default: RESULTS_DIR/history.sqlite).
    #[arg(long, value_name = "URL")]
    pub history: Option<String>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

impl RunArgs {
    /// Events at `per_sec` under the run's `--arrival` and `--rate-tick`.
    pub fn rate_at(&self, per_sec: f64) -> loadcell_engine::RateSpec {
        loadcell_engine::RateSpec {
            per_sec,
            arrival: if self.arrival == "uniform" {
                loadcell_engine::Arrival::Uniform
            } else {
                loadcell_engine::Arrival::Poisson
            },
            tick: self.rate_tick,
        }
    }
}
