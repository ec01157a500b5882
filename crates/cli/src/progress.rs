//! What the user sees while things happen: a progress bar for `prepare`
//! and live interval lines during `run`, all of it on stderr. Stdout holds
//! a command's result only (the summary, or with `--json` one JSON
//! document), whatever was prepared or cleaned up on the way.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use loadcell_record::resources::ResourceSample;
use loadcell_record::{hdrlog, Micros, Stats};

use crate::export::Exporter;
use crate::metrics::Exposition;
use loadcell_engine::{IntervalView, Observer, Phase};
use loadcell_workloads::prepare::PrepareObserver;

/// Messages and a bar on stderr; the bar is drawn only when stderr is a
/// terminal (redirected to a file or a pipe, only the messages show).
pub struct PrepareProgress {
    bar: ProgressBar,
}

impl PrepareProgress {
    pub fn new() -> PrepareProgress {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] [{bar:40}] {human_pos}/{human_len} rows ({per_sec}, eta {eta})",
            )
            .expect("static template is valid")
            .progress_chars("=> "),
        );
        PrepareProgress { bar }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl PrepareObserver for PrepareProgress {
    fn message(&self, text: &str) {
        self.bar.suspend(|| eprintln!("{text}"));
    }

    fn add_total(&self, rows: u64) {
        self.bar.inc_length(rows);
    }

    fn loaded(&self, rows: u64) {
        self.bar.inc(rows);
    }
}

/// Everything a run shows or exports while it runs: live lines on
/// stderr, warnings, the HDR interval log, the metrics endpoint and the
/// `--export`s.
pub struct RunObserver {
    pub live_lines: bool,
    pub sessions: usize,
    pub ops: Vec<&'static str>,
    pub categories: Vec<&'static str>,
    pub hdr_log: Option<HdrLog>,
    pub metrics: Option<Metrics>,
    pub exports: Vec<Exporter>,
    pub watch: Option<crate::watch::feed::Feed>,
}

pub struct HdrLog {
    pub path: PathBuf,
    pub file: BufWriter<File>,
    /// When the log was last forced to disk.
    synced: Instant,
}

/// How often the interval log is forced to disk, so that a power loss
/// after hours loses at most this much of it: once a second costs one
/// fsync a second on the collector's thread, never on a worker's.
const SYNC_EVERY: Duration = Duration::from_secs(1);

impl HdrLog {
    /// Writes one measured interval, flushed so that a killed process
    /// leaves it whole, and synced to disk at most every [`SYNC_EVERY`].
    fn write(&mut self, start: Duration, length: Duration, h: &Micros) -> std::io::Result<()> {
        hdrlog::write_interval(&mut self.file, start, length, h, None)?;
        self.file.flush()?;
        if self.synced.elapsed() >= SYNC_EVERY {
            self.file.get_ref().sync_data()?;
            self.synced = Instant::now();
        }
        Ok(())
    }
}

impl HdrLog {
    pub fn create(path: &Path, comment: &str) -> anyhow::Result<HdrLog> {
        let file = File::create(path)
            .with_context(|| format!("cannot create the HDR log {}", path.display()))?;
        HdrLog::begin(path, file, comment)
    }

    /// A new log in `dir` named `stem.hlog`, or `stem-2.hlog` ... if that
    /// exists (runs side by side), as result files are named.
    pub fn create_new(dir: &Path, stem: &str, comment: &str) -> anyhow::Result<HdrLog> {
        for n in 1u32.. {
            let path = match n {
                1 => dir.join(format!("{stem}.hlog")),
                n => dir.join(format!("{stem}-{n}.hlog")),
            };
            match File::create_new(&path) {
                Ok(file) => return HdrLog::begin(&path, file, comment),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("cannot create the HDR log {}", path.display()))
                }
            }
        }
        unreachable!("some suffix is free")
    }

    fn begin(path: &Path, file: File, comment: &str) -> anyhow::Result<HdrLog> {
        let mut file = BufWriter::new(file);
        hdrlog::write_header(&mut file, SystemTime::now(), comment)?;
        // The header is on disk before the first interval.
        file.flush()?;
        Ok(HdrLog {
            path: path.to_path_buf(),
            file,
            synced: Instant::now(),
        })
    }
}

impl Drop for HdrLog {
    /// The last intervals go to disk with the result, not a second later.
    fn drop(&mut self) {
        if self.file.flush().is_ok() {
            let _ = self.file.get_ref().sync_data();
        }
    }
}

pub struct Metrics {
    pub exposition: Exposition,
    pub cumulative: Stats,
    pub workload: String,
    pub target: String,
}

impl Observer for RunObserver {
    fn interval(&mut self, view: &IntervalView<'_>) {
        if self.live_lines {
            eprintln!(
                "{}",
                loadcell_report::live::line(
                    view.elapsed.as_secs_f64(),
                    view.sessions,
                    view.duration.as_secs_f64(),
                    view.stats,
                    &self.categories,
                    view.phase == Phase::Warmup,
                    view.target_per_sec,
                )
            );
        }
        if let (Some(log), Phase::Measure) = (&mut self.hdr_log, view.phase) {
            let start = view.elapsed.saturating_sub(view.duration);
            let written = log.write(start, view.duration, &view.stats.response);
            if let Err(e) = written {
                eprintln!(
                    "WARNING: cannot write the HDR log {}: {e}; no longer writing it",
                    log.path.display()
                );
                self.hdr_log = None;
            }
        }
        if let Some(feed) = &mut self.watch {
            feed.interval(view);
        }
        if view.phase == Phase::Measure {
            for export in &mut self.exports {
                export.interval(view, &self.ops, self.sessions);
            }
        }
        if let Some(m) = &mut self.metrics {
            m.cumulative.merge(view.stats);
            m.exposition.set(loadcell_report::prometheus::render(
                &m.cumulative,
                &self.ops,
                &m.workload,
                &m.target,
            ));
        }
    }

    fn warning(&mut self, message: &str) {
        eprintln!("WARNING: {message}");
    }

    fn resources(&mut self, sample: &ResourceSample) {
        for export in &mut self.exports {
            export.resources(sample);
        }
    }
}
