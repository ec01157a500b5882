//! The disk workloads' run: fio does the I/O on a file loadcell creates
//! (and always removes), and its `json+` reports become a normal result
//! file — IOPS as operations, bytes/s, the completion-latency bins in the
//! HDR histograms and one interval per status report — so report,
//! compare and sweep treat a disk as they treat a database.

use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context as _};
use loadcell_core::{Family, ServerInfo};
use loadcell_engine::{Category, Interrupts, OpSpec, RunOutcome, Shard, StopReason};
use loadcell_record::details::{DeviceUtil, DiskRun, Filesystem, IopsExpectation};
use loadcell_record::env::CpuTime;
use loadcell_record::result::{Interval, RunResult};
use loadcell_record::{hist, Stats};
use loadcell_workloads::disk::fio::{self, Direction, Report};
use loadcell_workloads::disk::{DiskOptions, DiskWorkload};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::args::RunArgs;
use crate::launch::RunJob;
use crate::result::{self, ResultContext};

const OPS: &[OpSpec] = &[
    OpSpec {
        name: "read",
        category: Category::Read,
    },
    OpSpec {
        name: "write",
        category: Category::Write,
    },
];

/// `bytes` in MiB, for messages.
fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes / (1024 * 1024))
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// How long fio may take to stop and print its report once interrupted.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// fio's version (`fio-3.33`), or why it cannot run.
fn fio_version() -> anyhow::Result<String> {
    match std::process::Command::new("fio").arg("--version").output() {
        Ok(out) => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            bail!("fio is not installed: apt-get install fio")
        }
        Err(e) => bail!("cannot run fio: {e}"),
    }
}

/// Whether `r` is a disk run that fell short of its `--expect-iops`: it
/// exits as a failed verification does.
pub fn short_of_expectation(r: &RunResult) -> bool {
    r.details
        .get::<DiskRun>()
        .is_some_and(|d| d.short_of_expectation())
}

/// A workload another program runs, not the engine (fio's disk
/// profiles): it prepares and cleans up nothing, runs on this machine
/// only and unsharded, and makes its result itself.
pub trait OwnRunner {
    /// Why `prepare` has nothing to do.
    fn nothing_to_prepare(&self) -> String;
    /// Why `cleanup` has nothing to do.
    fn nothing_to_clean_up(&self) -> String;
    /// Why `--target raw` is refused, if it is.
    fn refuses_target(&self, raw: &str) -> Option<String>;
    /// Everything the run can refuse before it starts.
    fn check(&self, args: &RunArgs, shard: Option<Shard>) -> anyhow::Result<()>;
    /// Runs it and returns (and unless a sweep step, writes and prints)
    /// its result.
    fn run(&self, job: RunJob<'_>) -> anyhow::Result<RunResult>;
}

impl OwnRunner for DiskWorkload {
    fn nothing_to_prepare(&self) -> String {
        format!(
            "{} needs nothing prepared: each run creates its own file",
            self.name
        )
    }

    fn nothing_to_clean_up(&self) -> String {
        format!(
            "{} leaves nothing to clean up: each run removes its file",
            self.name
        )
    }

    fn refuses_target(&self, raw: &str) -> Option<String> {
        (raw != crate::config::LOCAL).then(|| {
            format!(
                "{} takes --directory DIR (where loadcell creates, and removes, a file of its own), \
                 not --target {raw}: it never writes to a device or an existing file",
                self.name
            )
        })
    }

    fn check(&self, args: &RunArgs, shard: Option<Shard>) -> anyhow::Result<()> {
        if let Some(shard) = shard {
            bail!(
                "--shard {shard}: {} measures this machine's disk with fio, which has no share \
                 to split; run it on each machine by itself",
                self.name
            );
        }
        check(args, self)
    }

    fn run(&self, job: RunJob<'_>) -> anyhow::Result<RunResult> {
        run(job, self)
    }
}

/// Everything a disk run can refuse before any I/O.
fn check(args: &RunArgs, w: &DiskWorkload) -> anyhow::Result<()> {
    if args.rate.is_some() {
        bail!(
            "--rate does not apply to {}: fio runs it closed loop with --iodepth I/Os in flight \
             (fio's rate_iops would time each I/O from its late submission, not from when it was due, \
             hiding the backlog); lower --iodepth to load the disk less",
            w.name
        );
    }
    if args.events.is_some() {
        bail!("--events does not apply to {}: give --time", w.name);
    }
    if args.watch.is_some() {
        bail!(
            "--watch does not apply to {}: fio reports once, at its end; merge the shards' \
             results with `loadcell merge`",
            w.name
        );
    }
    if args.threads != 1 || args.clients != 1 {
        bail!(
            "--threads and --clients do not apply to {}: fio's --numjobs sets its jobs",
            w.name
        );
    }
    check_directory(&w.opts.directory)?;
    fio_version()?;
    Ok(())
}

/// The directory must exist and be one: loadcell never writes to a device
/// or to a file that is already there.
fn check_directory(dir: &Path) -> anyhow::Result<()> {
    let shown = dir.display();
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            bail!("--directory {shown} does not exist: give an existing directory on the disk to measure")
        }
        Err(e) => bail!("--directory {shown}: {e}"),
    };
    let kind = meta.file_type();
    if kind.is_block_device() || kind.is_char_device() {
        bail!(
            "--directory {shown} is a device: loadcell never writes to a device; give a directory \
             on its filesystem, where loadcell creates (and removes) a file of its own"
        );
    }
    if !kind.is_dir() {
        bail!(
            "--directory {shown} is an existing file: loadcell never writes to a file it did not \
             create; give a directory, where it creates (and removes) a file of its own"
        );
    }
    Ok(())
}

/// A file loadcell created, removed when dropped: after the run, on an
/// error and once fio stopped on Ctrl-C.
struct OwnFile(PathBuf);

impl OwnFile {
    /// A new file with a name no other run uses; never an existing one.
    fn create(dir: &Path) -> anyhow::Result<OwnFile> {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = dir.join(format!("loadcell-fio-{}-{nanos}.tmp", std::process::id()));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("cannot create loadcell's file {}", path.display()))?;
        Ok(OwnFile(path))
    }
}

impl Drop for OwnFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What fio printed, and whether loadcell was interrupted meanwhile.
struct FioRun {
    stdout: String,
    stderr: String,
    succeeded: bool,
    interrupted: bool,
}

/// Asks fio to stop as Ctrl-C does (it then prints its report) and waits.
async fn stop(child: &mut tokio::process::Child) -> std::io::Result<std::process::ExitStatus> {
    if let Some(pid) = child.id() {
        // SAFETY: kill only sends a signal, to our own child, not yet reaped.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    }
    child.wait().await
}

/// Runs fio to its end. On Ctrl-C or SIGTERM fio is asked to stop and
/// given [`STOP_TIMEOUT`] to print its report, and is killed after that.
fn run_fio(args: &[String]) -> anyhow::Result<FioRun> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime can always be built");
    runtime.block_on(async {
        let mut interrupts = Interrupts::listen();
        let mut child = tokio::process::Command::new("fio")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start fio")?;
        let stdout = tokio::spawn(read_all(child.stdout.take()));
        let stderr = tokio::spawn(read_all(child.stderr.take()));
        let (status, interrupted) = tokio::select! {
            status = child.wait() => (status?, false),
            // Without handlers fio runs to its end.
            () = interrupts.recv() => match tokio::time::timeout(STOP_TIMEOUT, stop(&mut child)).await {
                Ok(status) => (status?, true),
                Err(_) => {
                    child.kill().await?;
                    (child.wait().await?, true)
                }
            },
        };
        Ok(FioRun {
            stdout: stdout.await?,
            stderr: stderr.await?,
            succeeded: status.success(),
            interrupted,
        })
    })
}

/// Everything a child's pipe gives until it closes.
async fn read_all<R: AsyncRead + Unpin>(pipe: Option<R>) -> String {
    let mut text = String::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_string(&mut text).await;
    }
    text
}

/// The I/O between two cumulative reports (`prev` `None`: since the
/// start of measurement) as a worker's stats: reads and writes as the two
/// operation kinds, each I/O an event, completion latency as both
/// response and service time (fio keeps its queue full: closed loop).
fn stats_between(prev: Option<&Report>, cur: &Report) -> Stats {
    let mut stats = Stats::new(OPS.len());
    let zero = Direction::default();
    let pairs = [
        (&cur.read, prev.map_or(&zero, |p| &p.read)),
        (&cur.write, prev.map_or(&zero, |p| &p.write)),
    ];
    for (kind, (now, before)) in pairs.into_iter().enumerate() {
        let op = &mut stats.ops[kind];
        op.count = now.ios.saturating_sub(before.ios);
        stats.events += op.count;
        for (&ns, &n) in &now.clat_ns {
            let n = n.saturating_sub(before.clat_ns.get(&ns).copied().unwrap_or(0));
            if n > 0 {
                let took = Duration::from_nanos(ns);
                hist::record_n(&mut op.latency, took, n);
                hist::record_n(&mut stats.response, took, n);
                hist::record_n(&mut stats.service, took, n);
            }
        }
    }
    stats
}

/// One interval per status report of the measurement phase (fio counts
/// I/O during its ramp but records no latency then).
fn intervals(reports: &[Report]) -> Vec<Interval> {
    let measured: Vec<&Report> = reports.iter().filter(|r| r.measured()).collect();
    let mut out = Vec::new();
    let mut prev: Option<&Report> = None;
    for cur in measured {
        let since_ms = prev.map_or(0, |p| p.runtime_ms);
        if cur.runtime_ms > since_ms {
            let stats = stats_between(prev, cur);
            let duration_s = (cur.runtime_ms - since_ms) as f64 / 1000.0;
            out.push(Interval::from_stats(
                cur.runtime_ms as f64 / 1000.0,
                duration_s,
                &stats,
            ));
        }
        prev = Some(cur);
    }
    out
}

/// The filesystem holding `dir`, as `df` reports it.
fn filesystem(dir: &Path) -> Option<Filesystem> {
    let out = std::process::Command::new("df")
        .args(["-PT", "--block-size=1"])
        .arg(dir)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = text.lines().nth(1)?.split_whitespace().collect();
    Some(Filesystem {
        device: fields.first()?.to_string(),
        fs_type: fields.get(1)?.to_string(),
        size_bytes: fields.get(2)?.parse().ok()?,
        mount_point: fields.get(6..)?.join(" "),
    })
}

/// `--expect-iops` against what was measured, at `--disk-size` or the
/// filesystem's size.
fn expectation(
    opts: &DiskOptions,
    fs: Option<&Filesystem>,
    measured_iops: f64,
) -> anyhow::Result<Option<IopsExpectation>> {
    let Some(formula) = &opts.expect_iops else {
        return Ok(None);
    };
    let bytes = opts.disk_size.or(fs.map(|f| f.size_bytes)).ok_or_else(|| {
        anyhow!("--expect-iops needs the volume's size: df could not tell it, give --disk-size")
    })?;
    let gib = bytes as f64 / GIB;
    let expected_iops = formula.eval(gib);
    Ok(Some(IopsExpectation {
        formula: formula.text().to_string(),
        gib,
        expected_iops,
        measured_iops,
        ratio: measured_iops / expected_iops,
        met: measured_iops >= expected_iops,
    }))
}

/// Runs a disk workload and returns (and unless a sweep step, writes and
/// prints) its result.
fn run(job: RunJob<'_>, w: &DiskWorkload) -> anyhow::Result<RunResult> {
    job.check_outputs()?;
    let config = job.config;
    let spec = {
        let mut spec = job.run_spec(0, &loadcell_drivers::local::INFO);
        spec.threads = w.opts.numjobs as usize;
        spec.workers = spec.threads;
        spec
    };
    let time = spec.time.unwrap_or(Duration::from_secs(10));
    let version = fio_version()?;
    let dir = w
        .opts
        .directory
        .canonicalize()
        .with_context(|| format!("--directory {}", w.opts.directory.display()))?;
    let file = OwnFile::create(&dir)?;
    let args = w.opts.fio_args(&file.0, time, spec.warmup, spec.interval);
    let fs = filesystem(&dir);
    eprintln!(
        "Running {} with {version} on {} ({}), {} file: fio {}",
        w.name,
        dir.display(),
        fs.as_ref()
            .map_or("filesystem unknown".to_string(), |f| format!(
                "{} {}",
                f.fs_type, f.device
            )),
        mib(w.opts.size),
        args.join(" ")
    );
    let started_at = SystemTime::now();
    let began = Instant::now();
    let cpu_before = CpuTime::of_children();
    let fio_run = run_fio(&args)?;
    let client_cpu = CpuTime::of_children().since(cpu_before);
    let file_path = file.0.display().to_string();
    drop(file);
    let stderr = fio_run.stderr.trim();
    let reports = match fio::parse(&fio_run.stdout) {
        Ok(reports) => reports,
        Err(_) if !stderr.is_empty() => bail!(
            "fio failed: {}",
            stderr.lines().take(3).collect::<Vec<_>>().join("; ")
        ),
        Err(e) => bail!("{e}"),
    };
    let last = reports.last().expect("parse returns at least one report");
    let (stop_reason, error) = if fio_run.interrupted {
        (StopReason::Interrupted, None)
    } else if last.error != 0 || !fio_run.succeeded {
        let why = if stderr.is_empty() {
            format!("fio's job failed with error {}", last.error)
        } else {
            format!("fio: {}", stderr.lines().next().unwrap_or_default())
        };
        (StopReason::FatalError, Some(why))
    } else {
        (StopReason::Completed, None)
    };
    let total = stats_between(None, last);
    let duration = Duration::from_millis(last.runtime_ms);
    let outcome = RunOutcome {
        stop_reason,
        error,
        started_at,
        ended_at: started_at + began.elapsed(),
        duration,
        total,
        intervals: intervals(&reports),
        open_loop: false,
        answers_timed_on_receipt: false,
        client_cpu,
        warnings: stderr.lines().map(str::to_string).collect(),
        resources: Vec::new(),
        bottleneck: None,
        held: None,
        stages: Vec::new(),
        steady_state: None,
    };
    let ctx = ResultContext {
        argv: &config.argv,
        workload: w.name,
        workload_options: config.spec.workload().options(),
        target: &config.target,
        driver: "fio",
        family: Family::MACHINE,
        server: Some(ServerInfo::new(
            "fio",
            last.version.trim_start_matches("fio-"),
        )),
        spec: &spec,
        labels: config.args.labels.iter().cloned().collect(),
        ops: OPS,
        transactional: false,
    };
    let mut result = result::build(&ctx, outcome);
    let bytes = last.read.bytes + last.write.bytes;
    let secs = duration.as_secs_f64();
    result.summary.bytes = Some(bytes);
    result.summary.bytes_per_sec = Some(if secs > 0.0 { bytes as f64 / secs } else { 0.0 });
    let expect_iops = expectation(&w.opts, fs.as_ref(), result.summary.ops_per_sec)?;
    result.details.insert(&DiskRun {
        fio_version: last.version.clone(),
        fio_command: std::iter::once("fio".to_string()).chain(args).collect(),
        file: file_path,
        file_bytes: w.opts.size,
        filesystem: fs,
        devices: last
            .disk_util
            .iter()
            .map(|(name, util)| DeviceUtil {
                name: name.clone(),
                util_percent: *util,
            })
            .collect(),
        expect_iops,
    });
    job.publish(result, OPS)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn report(runtime_ms: u64, ios: u64, bins: &[(u64, u64)]) -> Report {
        Report {
            version: "fio-3.33".to_string(),
            timestamp_ms: runtime_ms,
            runtime_ms,
            read: Direction {
                ios,
                bytes: ios * 4096,
                clat_ns: bins.iter().copied().collect::<BTreeMap<_, _>>(),
            },
            write: Direction::default(),
            error: 0,
            disk_util: Vec::new(),
        }
    }

    #[test]
    fn intervals_are_the_measured_reports_differences_past_fios_ramp() {
        let reports = [
            // During ramp_time: I/O counted, no latency recorded.
            report(900, 500, &[]),
            // Counts restart when measurement begins.
            report(1000, 1000, &[(100_000, 1000)]),
            report(2000, 2500, &[(100_000, 2000), (2_000_000, 500)]),
            // fio's final report repeats the last status report.
            report(2000, 2500, &[(100_000, 2000), (2_000_000, 500)]),
        ];
        let intervals = intervals(&reports);
        assert_eq!(intervals.len(), 2);
        assert_eq!((intervals[0].t_s, intervals[0].ops), (1.0, 1000));
        assert_eq!((intervals[1].t_s, intervals[1].duration_s), (2.0, 1.0));
        assert_eq!(intervals[1].ops, 1500);
        // The second second's 1000 fast and 500 slow I/Os: p99 is a slow one.
        assert!((intervals[1].latency_ms.p50 - 0.1).abs() < 0.001);
        assert!((intervals[1].latency_ms.p99 - 2.0).abs() < 0.01);
        let total = stats_between(None, &reports[3]);
        assert_eq!(
            (total.events, total.ops[0].count, total.ops[1].count),
            (2500, 2500, 0)
        );
        assert_eq!(total.response.len(), 2500);
    }
}
