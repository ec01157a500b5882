//! What the SQLite history store costs: fills a store with 10,000 runs
//! (each recorded in its own transaction, as the CLI records a run), then
//! times listing the series and reading one series' entries (every
//! field, histograms included).
//!
//! `cargo bench -p loadcell-history --bench store` (optimized); the
//! output says which build it is. `LOADCELL_HISTORY_BENCH_RUNS` changes
//! the number of runs; `LOADCELL_HISTORY_BENCH_RESULT` names a result
//! file to record instead of the synthetic run.

use std::path::Path;
use std::time::{Duration, Instant, UNIX_EPOCH};

use loadcell_history::{History, SeriesFilter, FILE_NAME};

fn time(seconds: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_secs(1_735_689_600 + seconds))
        .to_string()
}

/// The fastest and the median of `n` timings of `f`.
fn timed<T>(n: usize, mut f: impl FnMut() -> T) -> (Duration, Duration, T) {
    let mut times = Vec::with_capacity(n);
    let mut last = None;
    for _ in 0..n {
        let t = Instant::now();
        last = Some(f());
        times.push(t.elapsed());
    }
    times.sort();
    (times[0], times[n / 2], last.expect("n > 0"))
}

/// The fixture's run with a response-time histogram the size of a real
/// run's (real ones hold 4-6 kB encoded, many more distinct values than
/// the fixture's 2000).
/// `LOADCELL_HISTORY_BENCH_RESULT` names a real result file to use instead.
fn sample_run() -> loadcell_record::result::RunResult {
    if let Ok(path) = std::env::var("LOADCELL_HISTORY_BENCH_RESULT") {
        return loadcell_record::result::RunResult::read_from(Path::new(&path)).unwrap();
    }
    let mut r = loadcell_report::fixture::run(4, 1000.0);
    // Log-uniform from 20 µs to 200 ms: every bucket on the way holds some.
    let mut h = loadcell_record::hist::new_histogram();
    let n = 300_000;
    for i in 0..n {
        let us = 20.0 * 10f64.powf(4.0 * i as f64 / n as f64);
        loadcell_record::hist::record(&mut h, Duration::from_secs_f64(us / 1e6));
    }
    r.histograms.response = loadcell_record::hist::encode(&h);
    r
}

/// Fills a store with `runs` runs spread over `series` series; returns
/// how long recording took.
fn fill(db: &Path, runs: u64, series: u64) -> Duration {
    let mut h = History::open(db).unwrap();
    let r = &mut sample_run();
    let file = db.with_file_name("run.json");
    let t = Instant::now();
    let (tps, l) = (r.summary.txn_per_sec, r.summary.latency_ms);
    let mut x = 7u64;
    for i in 0..runs {
        r.started_at = time(i);
        // ±1% noise and a 10% step every 1,000 runs of a series, so that
        // `trend` has change points to find, as in `timing_10k`.
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let noise = 0.02 * ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5);
        let f = 1.0 + noise + 0.1 * ((i / series / 1000) % 2) as f64;
        r.summary.txn_per_sec = tps.map(|t| t / f);
        r.summary.latency_ms.p50 = l.p50 * f;
        r.summary.latency_ms.p90 = l.p90 * f;
        r.summary.latency_ms.p99 = l.p99 * f;
        r.summary.latency_ms.p999 = l.p999 * f;
        r.labels.insert("series".into(), (i % series).to_string());
        let done = h.record(r, &file, Some("0123abcd")).unwrap();
        assert_eq!(done.added, 1);
    }
    t.elapsed()
}

fn report(db: &Path, runs: u64, series: u64, fill_time: Duration) {
    let mut h = History::open(db).unwrap();
    let bytes = std::fs::metadata(db).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(db.with_extension("sqlite-wal")).map_or(0, |m| m.len());
    println!(
        "{runs} runs in {series} series: recorded in {:.2} s ({:.0} µs per run, one transaction each), {:.1} MB on disk",
        fill_time.as_secs_f64(),
        fill_time.as_secs_f64() * 1e6 / runs as f64,
        bytes as f64 / 1e6
    );
    let (best, median, all) = timed(5, || h.series(&SeriesFilter::default()).unwrap());
    println!(
        "  list all {} series: best {:.2} ms, median {:.2} ms",
        all.len(),
        best.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3
    );
    let filter = SeriesFilter::default().label("series=0").unwrap();
    let (best, median, one) = timed(20, || h.series(&filter).unwrap());
    println!(
        "  find one series by label: best {:.3} ms, median {:.3} ms",
        best.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3
    );
    let id = one[0].id.clone();
    let (best, median, entries) = timed(20, || h.entries(&id).unwrap());
    println!(
        "  one series' {} entries (every field and histogram): best {:.2} ms, median {:.2} ms",
        entries.len(),
        best.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3
    );
}

fn main() {
    let runs: u64 = std::env::var("LOADCELL_HISTORY_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    println!(
        "loadcell-history store bench ({} build)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "optimized"
        }
    );
    println!(
        "each run's histogram: {} bytes encoded",
        sample_run().histograms.response.len()
    );
    // `LOADCELL_HISTORY_BENCH_KEEP=DIR` keeps the stores (DIR/50-series/
    // and DIR/1-series/history.sqlite) for timing `loadcell trend` on them.
    let keep = std::env::var_os("LOADCELL_HISTORY_BENCH_KEEP").map(std::path::PathBuf::from);
    for series in [50, 1] {
        let temp = tempfile::tempdir().unwrap();
        let dir = match &keep {
            Some(k) => k.join(format!("{series}-series")),
            None => temp.path().to_path_buf(),
        };
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join(FILE_NAME);
        let took = fill(&db, runs, series);
        report(&db, runs, series, took);
    }
}
