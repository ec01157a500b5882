//! `loadcell watch`: one live view of a run's shards. Shards given
//! `--watch http://HOST:PORT` post each interval's histograms there
//! (`feed`); the watcher adds them where they fall on the wall clock
//! (`board`), shows merged lines with exact percentiles and how many
//! shards report, serves `/metrics` and a live page, names a shard that
//! went silent, and at the end merges the results the shards posted
//! exactly as `loadcell merge` does, judging `--threshold` gates on that.
//! It is only a viewer: the shards never wait on it.

mod board;
pub mod feed;
pub mod wire;

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use clap::Args;
use loadcell_core::clock::wall_ns;
use loadcell_record::file::Destination;
use loadcell_record::hist::{self, LatencySummary};
use loadcell_record::merge::{merge, ShardResult};
use loadcell_record::result::GateVerdict;
use loadcell_report::gate::Gate;
use loadcell_report::prometheus::{render_watch, WatchFigures};
use serde::Serialize;

use board::{Board, Line, ShardView, State};
use wire::Report;

const PAGE: &str = include_str!("page.html");
/// How long the loop waits for a request before it looks at the clock.
const TICK: Duration = Duration::from_millis(100);
/// The largest report taken: a long run's whole result.
const MAX_REPORT: u64 = 256 << 20;

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Where the shards post (give them --watch http://THIS_HOST:PORT) and
    /// where the live page (/) and Prometheus metrics (/metrics) are
    /// served, e.g. 0.0.0.0:9750.
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// A shard that says nothing for this long, and did not end, is named
    /// silent (default: three intervals, at least 3s).
    #[arg(long, value_name = "DURATION", value_parser = crate::values::positive_duration)]
    pub silent_after: Option<Duration>,
    /// Write the shards' results, merged exactly as `loadcell merge`
    /// merges them, to this file.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// A gate judged on the merged result at the end, as `run
    /// --threshold`; a failed one exits 3 (repeatable).
    #[arg(long = "threshold", value_name = "GATE", value_parser = Gate::parse)]
    pub thresholds: Vec<Gate>,
}

/// What the watch ends with (`--json`), the measured work of every
/// shard's intervals added.
#[derive(Debug, Serialize)]
struct Summary {
    workload: String,
    target: String,
    shards: Vec<ShardView>,
    ops: u64,
    events: u64,
    errors: u64,
    ops_per_sec: f64,
    latency_ms: LatencySummary,
    /// The added histogram, encoded as result files encode theirs.
    histogram: String,
    lost_reports: u64,
    /// The shards' posted results merged, when `--out` was given.
    merged: Option<String>,
    gates: Vec<GateVerdict>,
    interrupted: bool,
}

pub fn command(a: &WatchArgs) -> anyhow::Result<i32> {
    crate::views::refuse_overwriting_results(&[("--out", &a.out)])?;
    let server = tiny_http::Server::http(a.listen)
        .map_err(|e| anyhow!("cannot listen on {}: {e} (is the port in use?)", a.listen))?;
    let shown = server
        .server_addr()
        .to_ip()
        .map_or(a.listen.to_string(), |addr| addr.to_string());
    eprintln!(
        "Watching at http://{shown}: give each shard --watch http://HOST:{}; live page at /, \
         Prometheus at /metrics",
        shown.rsplit(':').next().unwrap_or_default()
    );
    let interrupted = interrupt_flag()?;
    let mut board = Board::new(a.silent_after);
    loop {
        if let Some(request) = server.recv_timeout(TICK)? {
            answer(&mut board, request);
        }
        let now = Instant::now();
        for note in board.check_silence(now) {
            eprintln!("WARNING: {note}");
        }
        for line in board.due(wall_ns() as f64 / 1e6) {
            eprintln!("{}", text_line(&line));
        }
        if board.finished(now) || interrupted.load(Ordering::Relaxed) {
            break;
        }
    }
    for line in board.due(f64::INFINITY) {
        eprintln!("{}", text_line(&line));
    }
    finish(a, board, interrupted.load(Ordering::Relaxed))
}

/// One request: a shard's report, the page, its state, or the metrics.
fn answer(board: &mut Board, mut request: tiny_http::Request) {
    let json = header("Content-Type", "application/json");
    let response = match (request.method(), request.url()) {
        (tiny_http::Method::Post, wire::PATH) => {
            let mut body = Vec::new();
            let read = request.as_reader().take(MAX_REPORT).read_to_end(&mut body);
            let taken = read
                .map_err(|e| e.to_string())
                .and_then(|_| {
                    serde_json::from_slice::<Report>(&body)
                        .map_err(|e| format!("not a report: {e}"))
                })
                .and_then(|report| board.take(report, Instant::now()));
            match taken {
                Ok(notes) => {
                    for note in notes {
                        eprintln!("{note}");
                    }
                    tiny_http::Response::from_string("").with_status_code(204)
                }
                Err(e) => {
                    eprintln!("WARNING: a report was refused: {e}");
                    tiny_http::Response::from_string(format!("{e}\n")).with_status_code(400)
                }
            }
        }
        (tiny_http::Method::Get, "/") => tiny_http::Response::from_string(PAGE)
            .with_header(header("Content-Type", "text/html; charset=utf-8")),
        (tiny_http::Method::Get, "/state") => {
            tiny_http::Response::from_string(state(board)).with_header(json)
        }
        (tiny_http::Method::Get, "/metrics") => tiny_http::Response::from_string(metrics(board))
            .with_header(header(
                "Content-Type",
                "text/plain; version=0.0.4; charset=utf-8",
            )),
        _ => tiny_http::Response::from_string(format!(
            "not found: shards POST {}, and there are / (the live page), /state and /metrics\n",
            wire::PATH
        ))
        .with_status_code(404),
    };
    let _ = request.respond(response);
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
}

/// The live page's data.
fn state(board: &Board) -> String {
    let m = &board.measured;
    serde_json::json!({
        "run": board.run(),
        "shards": board.shards(Instant::now()),
        "lines": board.lines,
        "total": {
            "ops": m.ops,
            "errors": m.errors,
            "ops_per_sec": m.ops_per_sec(),
            "latency_ms": LatencySummary::of(&m.response),
        },
    })
    .to_string()
}

fn metrics(board: &Board) -> String {
    let shards = board.shards(Instant::now());
    let count = |state: State| shards.iter().filter(|s| s.state == state).count();
    let by_state = [
        ("reporting", count(State::Reporting)),
        ("ended", count(State::Ended)),
        ("silent", count(State::Silent)),
        ("never_reported", count(State::NeverReported)),
    ];
    let (workload, target) = board
        .run()
        .map_or(("", ""), |r| (r.workload.as_str(), r.target.as_str()));
    let m = &board.measured;
    render_watch(&WatchFigures {
        workload,
        target,
        shards: &by_state,
        ops: m.ops,
        events: m.events,
        errors: m.errors,
        lost_reports: shards.iter().map(|s| s.lost).sum(),
        response: &m.response,
        latest: board.lines.last().map(|l| (l.ops_per_sec, l.p99_ms)),
    })
}

/// One merged interval on stderr.
fn text_line(l: &Line) -> String {
    format!(
        "[{:>6.1}s] {} shards {}/{}  ops/s {:>10.1}  errors {:>5}  p50 {:>8.3}  p99 {:>8.3}  max {:>8.3} ms",
        l.t_s,
        if l.measured { "measure" } else { "warm-up" },
        l.shards,
        l.of,
        l.ops_per_sec,
        l.errors,
        l.p50_ms,
        l.p99_ms,
        l.max_ms
    )
}

/// The end: each shard's fate, the intervals' merged figures, the posted
/// results merged into `--out` and the gates judged on them.
fn finish(a: &WatchArgs, mut board: Board, interrupted: bool) -> anyhow::Result<i32> {
    let now = Instant::now();
    let shards = board.shards(now);
    let Some(run) = board.run().cloned() else {
        eprintln!("No shard reported.");
        return Ok(if interrupted {
            crate::launch::EXIT_INTERRUPTED
        } else {
            1
        });
    };
    let posted: Vec<ShardResult> = board
        .results()
        .into_iter()
        .map(|(i, result)| ShardResult {
            name: format!("shard {i}"),
            result,
        })
        .collect();
    let complete = shards.iter().all(|s| s.state == State::Ended);
    let (merged_path, gates) = if posted.is_empty() {
        if !a.thresholds.is_empty() {
            eprintln!("WARNING: no shard's result arrived: the gates cannot be judged");
        }
        (None, Vec::new())
    } else {
        let mut merged = merge(posted, true).map_err(|e| anyhow!("merging the shards: {e}"))?;
        merged.gates = a
            .thresholds
            .iter()
            .map(|g| g.judge_run(&merged, None))
            .collect();
        let path = match &a.out {
            Some(out) => {
                let written = merged
                    .write(&Destination::Named(out.clone()))
                    .with_context(|| format!("cannot write {}", out.display()))?;
                Some(written.display().to_string())
            }
            None => None,
        };
        (path, merged.gates)
    };
    let m = &board.measured;
    let summary = Summary {
        workload: run.workload.clone(),
        target: run.target.clone(),
        ops: m.ops,
        events: m.events,
        errors: m.errors,
        ops_per_sec: m.ops_per_sec(),
        latency_ms: LatencySummary::of(&m.response),
        histogram: hist::encode(&m.response),
        lost_reports: shards.iter().map(|s| s.lost).sum(),
        shards,
        merged: merged_path,
        gates,
        interrupted,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", text_summary(&summary, run.shards));
    }
    let unfinished =
        !complete || summary.lost_reports > 0 || a.thresholds.len() > summary.gates.len();
    Ok(if interrupted {
        crate::launch::EXIT_INTERRUPTED
    } else if unfinished || summary.gates.iter().any(|g| !g.passed) {
        crate::launch::EXIT_BELOW_EXPECTATION
    } else {
        0
    })
}

fn text_summary(s: &Summary, of: usize) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let ended = s.shards.iter().filter(|x| x.state == State::Ended).count();
    let _ = writeln!(
        o,
        "Watched {} on {}: {ended} of {of} shards ended{}",
        s.workload,
        s.target,
        if s.interrupted { " (interrupted)" } else { "" }
    );
    for x in &s.shards {
        let fate = match x.state {
            State::Ended => "ended".to_string(),
            State::Reporting => "still reporting".to_string(),
            State::Silent => format!(
                "WENT SILENT after {:.1}s of reports, {:.1}s ago, with no end",
                x.heard_for_s, x.silent_for_s
            ),
            State::NeverReported => "NEVER REPORTED".to_string(),
        };
        let lost = match x.lost {
            0 => String::new(),
            n => format!(", {n} reports lost on the way"),
        };
        let _ = writeln!(
            o,
            "  shard {} {}: {fate}, {} intervals{lost}",
            x.shard, x.host, x.intervals
        );
    }
    let l = &s.latency_ms;
    let _ = writeln!(
        o,
        "Merged from the shards' measured intervals: {} ops ({:.1}/s), {} errors; latency ms p50 \
         {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
        s.ops, s.ops_per_sec, s.errors, l.p50, l.p90, l.p99, l.p999, l.max
    );
    if let Some(path) = &s.merged {
        let _ = writeln!(o, "The shards' results, merged: {path}");
    }
    if !s.gates.is_empty() {
        let _ = writeln!(o, "{}", loadcell_report::text::gates(&s.gates));
    }
    o
}

/// Set at SIGINT or SIGTERM: the watch then ends with what it has.
fn interrupt_flag() -> anyhow::Result<Arc<AtomicBool>> {
    use tokio::signal::unix::{signal, SignalKind};
    let flag = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&flag);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (mut int, mut term) = runtime.block_on(async {
        Ok::<_, std::io::Error>((
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        ))
    })?;
    std::thread::Builder::new()
        .name("loadcell-watch-signals".into())
        .spawn(move || {
            runtime.block_on(async {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            });
            set.store(true, Ordering::Relaxed);
        })?;
    Ok(flag)
}
