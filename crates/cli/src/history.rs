//! The run history: every run, sweep and findmax remembered after its file
//! is written (`loadcell_history`), `history import DIR` for files written
//! before, and `trend` over what the store holds.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::{Args, Subcommand};
use loadcell_analysis::changepoint::ChangePointConfig;
use loadcell_history::store::SeriesFilter;
use loadcell_history::{Entry, History};
use loadcell_report::trend::{self, SeriesTrend, TrendChange, TrendRun};

use crate::args::RunArgs;

/// Where the history is: `--history`, else the results directory's
/// `history.sqlite`.
fn open(location: Option<&str>, results_dir: &Path) -> anyhow::Result<History> {
    match location {
        Some(l) => History::connect(l),
        None => History::open_in(results_dir),
    }
    .map_err(|e| anyhow!("the run history: {e}"))
}

/// The commit a run is recorded under when it has no `commit` label.
fn commit_from_env() -> Option<String> {
    std::env::var("GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
}

/// With `--git-commit`, labels the run `commit=` the working tree's HEAD,
/// unless it has a commit label: before any load, so a directory that is
/// no git checkout is a clear error, not a run recorded without it.
pub fn label_git_commit(args: &mut RunArgs) -> anyhow::Result<()> {
    if !args.git_commit || args.labels.iter().any(|(k, _)| k == "commit") {
        return Ok(());
    }
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .map_err(|e| anyhow!("--git-commit: cannot run git: {e}"))?;
    let head = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || head.is_empty() {
        anyhow::bail!(
            "--git-commit: this directory is no git checkout with a commit ({}); give --label commit=… instead",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    args.labels.push(("commit".into(), head));
    Ok(())
}

/// Records the result (or sweep) file just written, unless
/// `--no-history`. The result is written already: a store that cannot
/// take it costs a warning, never the run.
pub fn remember(args: &RunArgs, file: &Path) {
    // A result written to a device (`--out /dev/null`) is nothing to keep.
    if args.no_history || !file.is_file() {
        return;
    }
    let recorded = open(args.history.as_deref(), &args.target.results_dir).and_then(|mut h| {
        h.record_file(file, commit_from_env().as_deref())
            .map_err(|e| anyhow!("{e}"))
    });
    if let Err(e) = recorded {
        eprintln!("loadcell: warning: not recorded in the run history: {e:#}");
    }
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    pub command: HistoryCommand,
}

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Record every result, sweep and suite file under DIR (files written
    /// before the history existed, or with --no-history).
    Import {
        /// A results directory (searched recursively).
        dir: PathBuf,
        /// The store: a SQLite file or directory, or postgres://… (default:
        /// DIR/history.sqlite).
        #[arg(long, value_name = "URL")]
        history: Option<String>,
    },
}

pub fn history(a: &HistoryArgs) -> anyhow::Result<i32> {
    match &a.command {
        HistoryCommand::Import { dir, history } => {
            let mut h = open(history.as_deref(), dir)?;
            let imported = h.import(dir).map_err(|e| anyhow!("{e}"))?;
            for s in &imported.skipped {
                eprintln!("skipped {}: {}", s.path.display(), s.reason);
            }
            println!(
                "{} runs from {} files recorded ({} files skipped)",
                imported.runs.added,
                imported.files,
                imported.skipped.len()
            );
            Ok(0)
        }
    }
}

#[derive(Debug, Args)]
pub struct TrendArgs {
    /// The results directory whose history.sqlite to read.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub results_dir: PathBuf,
    /// The store: a SQLite file or directory, or postgres://… .
    #[arg(long, value_name = "URL")]
    pub history: Option<String>,
    /// Only series of this workload.
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,
    /// Only series whose target contains this (e.g. 127.0.0.1:6379).
    #[arg(long = "target", value_name = "TEXT")]
    pub target_contains: Option<String>,
    /// Only series with this label (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Print the trend as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the trend page here.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Write the one selected series as CSV, a run per row, for other
    /// change-point tools (e.g. Apache Otava); "-" for stdout.
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Exit 3 when a series regressed at one of its newest runs (the
    /// first run after the change among the newest 5 trusted ones).
    #[arg(long)]
    pub fail_on_change: bool,
    /// With --fail-on-change: the smallest regression that fails, e.g. 5%
    /// (smaller steps are shown, not failed on).
    #[arg(long, value_name = "PERCENT", default_value = "2%", value_parser = crate::values::threshold)]
    pub min_change: f64,
}

/// How many of the newest trusted runs `--fail-on-change` looks at: the
/// detector needs three runs after a change to call it (its minimum
/// segment), so a change is "at the newest run" for two more.
const RECENT: usize = 5;

fn trend_run(e: &Entry) -> TrendRun {
    let f = &e.flags;
    let flags = [
        (f.partial, "partial"),
        (f.verification_failed, "verification_failed"),
        (f.rate_not_reached, "rate_not_reached"),
        (f.client_saturated, "client_saturated"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| name.to_string())
    .collect();
    let m = &e.metrics;
    let mut metrics: std::collections::BTreeMap<String, f64> = [
        ("throughput", m.throughput),
        ("latency_p50", m.p50_ms),
        ("latency_p90", m.p90_ms),
        ("latency_p99", m.p99_ms),
        ("latency_p999", m.p999_ms),
        ("error_rate", m.error_rate),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(cpu) = m.client_cpu_us_per_op {
        metrics.insert("client_cpu_us_per_op".into(), cpu);
    }
    for (name, v) in &m.server {
        metrics.insert(format!("server.{name}"), *v);
    }
    TrendRun {
        started_at: e.started_at.clone(),
        commit: e.commit.clone(),
        host: e.host.clone(),
        file: e.file.clone(),
        flags,
        metrics,
    }
}

/// The trend of the series `id` (`key` its text).
fn series_trend(h: &mut History, id: &str, key: &str) -> anyhow::Result<SeriesTrend> {
    let entries = h.entries(id).map_err(|e| anyhow!("{e}"))?;
    let runs = entries.iter().map(trend_run).collect();
    Ok(trend::analyse(id, key, runs, &ChangePointConfig::default()))
}

/// A regression as `--fail-on-change` names it: the metric, the size of
/// the change and the first bad run.
fn change_line(c: &TrendChange) -> String {
    format!(
        "{} {} -> {} ({}) from run {} ({}{})",
        c.metric,
        loadcell_report::svg::si(c.before),
        loadcell_report::svg::si(c.after),
        c.change
            .map_or("from 0".into(), |x| format!("{:+.1}%", x * 100.0)),
        c.at,
        c.first_after,
        c.commit
            .as_ref()
            .map(|x| format!(", commit {x}"))
            .unwrap_or_default()
    )
}

/// The regressions among the newest runs of each series that `file`'s
/// runs belong to, one line each (`suite run --history` fails a step on
/// them). `file` is recorded in the store already.
pub fn recent_regressions_of(location: &str, file: &Path) -> anyhow::Result<Vec<String>> {
    let any = loadcell_record::sweep::AnyResult::read_from(file).map_err(|e| anyhow!(e))?;
    let mut ids: Vec<(String, String)> = Entry::of_any(&any, file, None)
        .iter()
        .map(|e| (e.series.id(), e.series.text()))
        .collect();
    ids.sort();
    ids.dedup();
    let mut h = open(Some(location), Path::new("."))?;
    let mut lines = Vec::new();
    for (id, key) in ids {
        let t = series_trend(&mut h, &id, &key)?;
        for c in trend::recent_regressions(&t, RECENT, trend::CI_MIN_CHANGE) {
            lines.push(change_line(c));
        }
    }
    Ok(lines)
}

pub fn trend(a: &TrendArgs) -> anyhow::Result<i32> {
    crate::views::refuse_overwriting_results(&[("--html", &a.html), ("--csv", &a.csv)])?;
    let mut filter = SeriesFilter {
        workload: a.workload.clone(),
        target_contains: a.target_contains.clone(),
        labels: Vec::new(),
    };
    for l in &a.labels {
        filter = filter.label(l).map_err(|e| anyhow!("--label: {e}"))?;
    }
    if a.json && a.csv.as_deref() == Some(Path::new("-")) {
        anyhow::bail!("--json and --csv - both write to stdout: give --csv a file name");
    }
    let mut h = open(a.history.as_deref(), &a.results_dir)?;
    let mut series: Vec<SeriesTrend> = Vec::new();
    for info in h.series(&filter).map_err(|e| anyhow!("{e}"))? {
        series.push(series_trend(&mut h, &info.id, &info.text)?);
    }
    if a.csv.is_some() && series.len() != 1 {
        anyhow::bail!(
            "--csv writes one series and {} match: narrow them with --workload, --target or --label",
            series.len()
        );
    }
    if series.is_empty() {
        eprintln!("loadcell: no series in the history match (record runs, or `loadcell history import DIR`)");
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "series": series }))?
        );
    } else if a.csv.as_deref() != Some(Path::new("-")) {
        // `--csv -` is the whole of stdout.
        print!("{}", trend::text(&series));
    }
    if let Some(path) = &a.html {
        crate::views::write(path, &trend::html(&series))?;
    }
    if let Some(path) = &a.csv {
        crate::views::write(path, &trend::csv(&series[0]))?;
    }
    let mut failed = false;
    if a.fail_on_change {
        for s in &series {
            for c in trend::recent_regressions(s, RECENT, a.min_change) {
                failed = true;
                eprintln!("CHANGE FAILED: {}: {}", s.key, change_line(c));
            }
        }
    }
    Ok(if failed {
        crate::launch::EXIT_BELOW_EXPECTATION
    } else {
        0
    })
}
