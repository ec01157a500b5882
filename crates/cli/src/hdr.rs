//! `loadcell hdr`: a result's measured intervals as an HdrHistogram
//! interval log, from the histograms the result file embeds.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use loadcell_record::result::RunResult;
use loadcell_record::{hdrlog, hist};

pub fn export(result: &Path, out: Option<&Path>) -> anyhow::Result<()> {
    let r = RunResult::read_from(result).map_err(|e| anyhow!(e))?;
    let started = humantime::parse_rfc3339(&r.started_at).map_err(|e| {
        anyhow!(
            "{}: bad started_at '{}': {e}",
            result.display(),
            r.started_at
        )
    })?;
    // Interval times in results count from the end of the warm-up.
    let base = started + Duration::from_secs_f64(r.config.warmup_s);
    let mut text = Vec::new();
    hdrlog::write_header(
        &mut text,
        base,
        &format!(
            "loadcell {} on {}, from {}",
            r.config.workload,
            r.config.target,
            result.display()
        ),
    )?;
    for (i, interval) in r.intervals.iter().enumerate() {
        let h = hist::decode(&interval.histogram)
            .map_err(|e| anyhow!("{}: interval {i}: {e}", result.display()))?;
        let start = Duration::from_secs_f64((interval.t_s - interval.duration_s).max(0.0));
        hdrlog::write_interval(
            &mut text,
            start,
            Duration::from_secs_f64(interval.duration_s),
            &h,
            None,
        )?;
    }
    match out {
        Some(path) => std::fs::write(path, &text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => std::io::stdout().write_all(&text)?,
    }
    Ok(())
}
