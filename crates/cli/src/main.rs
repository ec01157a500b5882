//! `loadcell`: parse, validate, dispatch. Everything that runs lives in
//! the library crates; this binary only composes them.

mod analysis;
mod args;
mod compare;
mod hdr;
mod launch;
mod list;
mod metrics;
mod multi;
mod plan;
mod progress;
mod result;
mod sweep;
mod values;
mod views;
mod workload;

use std::path::Path;
use std::process::ExitCode;

use anyhow::anyhow;
use clap::error::ErrorKind;
use clap::Parser;
use loadcell_core::Target;
use loadcell_drivers::{DriverInfo, Family};

use crate::args::{Cli, Command, RunArgs, TargetArgs};
use crate::launch::{CleanupJob, PrepareJob, RunJob};
use crate::workload::WorkloadSpec;
use loadcell_record::result::RunResult;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = match Cli::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    match dispatch(cli, argv) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("loadcell: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Help and version print as usual; usage errors print one line that says
/// what is wrong, and where to look.
fn clap_error(e: clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            let first = loadcell_core::target::redact_raw(first);
            eprintln!("loadcell: error: {first} (see `loadcell --help`)");
            ExitCode::from(2)
        }
    }
}

/// The target to use, and whether it is the embedded default.
fn resolve_target(t: &TargetArgs) -> anyhow::Result<(Target, bool)> {
    match &t.target {
        Some(raw) => Ok((Target::parse(raw)?, false)),
        None => {
            std::fs::create_dir_all(&t.results_dir).map_err(|e| {
                anyhow!(
                    "cannot create the results directory {}: {e}",
                    t.results_dir.display()
                )
            })?;
            let path = t.results_dir.join("loadcell.sqlite");
            Ok((default_sqlite(&path)?, true))
        }
    }
}

fn default_sqlite(path: &Path) -> anyhow::Result<Target> {
    // What a URL would read otherwise: '%' as an escape, '?' as the start
    // of the parameters and '#' as a fragment.
    let mut escaped = String::new();
    for c in path.display().to_string().chars() {
        match c {
            '%' => escaped.push_str("%25"),
            '?' => escaped.push_str("%3F"),
            '#' => escaped.push_str("%23"),
            c => escaped.push(c),
        }
    }
    Ok(Target::parse(&format!("sqlite:{escaped}"))?)
}

/// Rejects a workload that the target's driver cannot serve, before any
/// connection is opened.
fn check_family(spec: &WorkloadSpec, target: &Target) -> anyhow::Result<()> {
    let Some(info) = loadcell_drivers::find(target.scheme()) else {
        return Ok(()); // `open` names the supported schemes.
    };
    let needs = spec.needs();
    if !needs.accepts(info.family) {
        let fitting: Vec<_> = loadcell_drivers::REGISTRY
            .iter()
            .filter(|d| needs.accepts(d.family))
            .map(|d| d.name)
            .collect();
        return Err(anyhow!(
            "workload {} needs a {} driver ({}), but {}: is a {} driver",
            spec.name(),
            needs.as_str(),
            fitting.join(", "),
            target.scheme(),
            info.family.as_str()
        ));
    }
    if let WorkloadSpec::Ycsb { opts, .. } = spec {
        // Scans need an ordered index: SQL's primary key, or a sorted set
        // kept with commands. GET/SET-only stores have neither.
        let can_scan = |d: &DriverInfo| d.family == Family::Sql || d.kv.commands;
        if opts.needs_scan() && !can_scan(info) {
            let fitting: Vec<_> = loadcell_drivers::REGISTRY
                .iter()
                .filter(|d| can_scan(d))
                .map(|d| d.name)
                .collect();
            let share = 100.0 * opts.proportions.scan as f64 / opts.proportions.total() as f64;
            return Err(anyhow!(
                "workload {} scans records ({share:.0}% of its operations), and {} cannot scan: \
                 it only gets and sets single keys, with no ordered index to read a range from; \
                 drivers that can scan: {}",
                spec.name(),
                info.name,
                fitting.join(", ")
            ));
        }
    }
    if let WorkloadSpec::Kv { opts } = spec {
        if opts.needs_commands() && !info.kv.commands {
            return Err(anyhow!(
                "{} does not support arbitrary commands (--command); drivers that do: {}",
                info.name,
                commands_drivers().join(", ")
            ));
        }
    }
    if let WorkloadSpec::Dataset { set, .. } = spec {
        if let Some(t) = set.hash_type().filter(|_| !info.kv.commands) {
            return Err(anyhow!(
                "data set '{}' ({}) has hash keys (type '{}'), and {} only gets and sets strings: \
                 hashes need a driver with commands ({}); a data set of strings only runs on {} too",
                set.name,
                set.path,
                t.name,
                info.name,
                commands_drivers().join(", "),
                info.name
            ));
        }
    }
    Ok(())
}

fn commands_drivers() -> Vec<&'static str> {
    loadcell_drivers::REGISTRY
        .iter()
        .filter(|d| d.kv.commands)
        .map(|d| d.name)
        .collect()
}

fn dispatch(cli: Cli, argv: Vec<String>) -> anyhow::Result<i32> {
    match cli.command {
        Command::List => {
            print!("{}", list::render());
            Ok(0)
        }
        Command::Hdr(a) => {
            hdr::export(&a.result, a.out.as_deref())?;
            Ok(0)
        }
        Command::Prepare(a) => {
            let spec = WorkloadSpec::resolve(&a.target.workload, &a.oltp, &a.kv, &a.ycsb)
                .map_err(|e| anyhow!(e))?;
            let (target, _) = resolve_target(&a.target)?;
            check_family(&spec, &target)?;
            let job = PrepareJob {
                spec,
                threads: a.threads,
                connect_timeout: a.target.connect_timeout,
            };
            loadcell_drivers::open(&target, job)??;
            Ok(0)
        }
        Command::Cleanup(a) => {
            // Validates the workload name; cleanup itself is driven by
            // what prepare recorded.
            let spec = WorkloadSpec::resolve(
                &a.target.workload,
                &crate::args::OltpArgs::defaults(),
                &crate::args::KvArgs {
                    dataset: a.dataset.clone(),
                    ..Default::default()
                },
                &crate::args::YcsbArgs::default(),
            )
            .map_err(|e| anyhow!(e))?;
            let (target, _) = resolve_target(&a.target)?;
            check_family(&spec, &target)?;
            let job = CleanupJob {
                spec,
                connect_timeout: a.target.connect_timeout,
            };
            loadcell_drivers::open(&target, job)??;
            Ok(0)
        }
        Command::Run(a) => Ok(launch::exit_code(&run(&a, argv, false)?)),
        Command::Sweep(a) => multi::sweep(&a.args, argv),
        Command::Findmax(a) => multi::findmax(&a.args, argv),
        Command::Report(a) => {
            views::report(&a)?;
            Ok(0)
        }
        Command::Compare(a) => views::compare(&a),
        Command::Plan(a) => {
            plan::run(&a)?;
            Ok(0)
        }
    }
}

/// One run: from its arguments to its result. With `quiet` (a sweep step)
/// nothing is printed and no result file is written.
fn run(a: &RunArgs, argv: Vec<String>, quiet: bool) -> anyhow::Result<RunResult> {
    check_server_pid(a)?;
    check_workers(a)?;
    let spec = WorkloadSpec::resolve(&a.target.workload, &a.oltp, &a.kv, &a.ycsb)
        .map_err(|e| anyhow!(e))?;
    let (target, default_target) = resolve_target(&a.target)?;
    check_family(&spec, &target)?;
    let job = RunJob {
        args: a,
        spec,
        target: target.clone(),
        default_target,
        argv,
        quiet,
    };
    loadcell_drivers::open(&target, job)?
}

/// `--workers` is at most the number of sessions: a worker thread with no
/// session would only idle (sweep and findmax check it before their first
/// step, too).
fn check_workers(a: &RunArgs) -> anyhow::Result<()> {
    const MAX_SESSIONS: usize = 1_000_000;
    let sessions = match a.threads.checked_mul(a.clients) {
        Some(n) if n <= MAX_SESSIONS => n,
        _ => {
            return Err(anyhow!(
                "--threads {} x --clients {} is more sessions than loadcell runs from one \
                 process ({MAX_SESSIONS}); spread the load over several loadcell processes",
                a.threads,
                a.clients
            ))
        }
    };
    match a.workers {
        Some(w) if w > sessions => Err(anyhow!(
            "--workers {w} is more than the sessions to run (--threads {} x --clients {} = \
             {sessions}): give --workers {sessions} at most",
            a.threads,
            a.clients,
        )),
        _ => Ok(()),
    }
}

/// `--server-pid` names a process that exists (sweep and findmax check it
/// before their first step, too).
fn check_server_pid(a: &RunArgs) -> anyhow::Result<()> {
    match a.server_pid {
        Some(pid) if !loadcell_record::resources::process_exists(pid) => Err(anyhow!(
            "--server-pid {pid}: no such process on this host; give the server's PID \
             (e.g. from `pgrep -x redis-server`), or leave the option out to find the \
             process listening on the target's port"
        )),
        _ => Ok(()),
    }
}

/// Parses a `run` command line (as a sweep step builds it).
fn parse_run(argv: &[String]) -> anyhow::Result<RunArgs> {
    let full: Vec<String> = ["loadcell".to_string(), "run".to_string()]
        .into_iter()
        .chain(argv.iter().cloned())
        .collect();
    match Cli::try_parse_from(&full) {
        Ok(Cli {
            command: Command::Run(a),
        }) => Ok(*a),
        Ok(_) => unreachable!("the command is run"),
        Err(e) => {
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or("invalid arguments");
            Err(anyhow!(
                "{}",
                loadcell_core::target::redact_raw(first.strip_prefix("error: ").unwrap_or(first))
            ))
        }
    }
}
