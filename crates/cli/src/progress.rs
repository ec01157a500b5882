//! What the user sees while things happen: a progress bar for `prepare`
//! and live interval lines during `run`.

use indicatif::{ProgressBar, ProgressStyle};
use loadcell_engine::{IntervalView, Observer, Phase};
use loadcell_workloads::oltp::PrepareObserver;

pub struct PrepareProgress {
    bar: ProgressBar,
}

impl PrepareProgress {
    pub fn new() -> PrepareProgress {
        let bar = ProgressBar::new(0);
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
        self.bar.suspend(|| println!("{text}"));
    }

    fn add_total(&self, rows: u64) {
        self.bar.inc_length(rows);
    }

    fn loaded(&self, rows: u64) {
        self.bar.inc(rows);
    }
}

/// Prints a sysbench-style line per interval on stderr when asked to.
pub struct LiveLines {
    pub enabled: bool,
    pub sessions: usize,
    pub categories: Vec<&'static str>,
}

impl Observer for LiveLines {
    fn interval(&mut self, view: &IntervalView<'_>) {
        if !self.enabled {
            return;
        }
        eprintln!(
            "{}",
            loadcell_report::live::line(
                view.elapsed.as_secs_f64(),
                self.sessions,
                view.duration.as_secs_f64(),
                view.stats,
                &self.categories,
                view.phase == Phase::Warmup,
            )
        );
    }
}
