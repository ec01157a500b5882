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
use clap::{CommandFactory, FromArgMatches};
use loadcell_core::Target;
use loadcell_drivers::OpenError;
use loadcell_workloads::workload::Loading;

use crate::args::{Cli, Command, RunArgs, TargetArgs};
use crate::launch::{launch, CleanupJob, PrepareJob, RunJob};
use crate::workload::{families_label, WorkloadArgs, WorkloadSpec};
use loadcell_record::result::RunResult;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = match parse_cli(&argv) {
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

/// Parses a command line, noting which workload options it gave (clap's
/// own record of where each value came from).
fn parse_cli(argv: &[String]) -> Result<Cli, clap::Error> {
    let matches = Cli::command().try_get_matches_from(argv)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    let sub = matches.subcommand().map(|(_, m)| m);
    match (&mut cli.command, sub) {
        (Command::Run(a), Some(m)) => a.workload.note_given(m),
        (Command::Prepare(a), Some(m)) => a.workload.note_given(m),
        _ => {}
    }
    Ok(cli)
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
/// connection is opened, naming the drivers that can.
fn check_driver(spec: &WorkloadSpec, target: &Target) -> anyhow::Result<()> {
    let workload = spec.workload();
    let families = workload.families();
    let fitting = || {
        let names: Vec<_> = loadcell_drivers::REGISTRY
            .iter()
            .filter(|d| families.contains(&d.family) && workload.refuses(d).is_none())
            .map(|d| d.name)
            .collect();
        names.join(", ")
    };
    let info = match loadcell_drivers::find(target.scheme(), families) {
        Ok(info) => info,
        Err(OpenError::OtherFamily { scheme, family }) => {
            return Err(anyhow!(
                "workload {} needs a {} driver ({}), but {scheme}: is a {family} driver",
                workload.name(),
                families_label(families),
                fitting(),
            ))
        }
        Err(_) => return Ok(()), // `open` names the supported schemes.
    };
    match workload.refuses(info) {
        Some(why) => Err(anyhow!("{why}; drivers that can run it: {}", fitting())),
        None => Ok(()),
    }
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
            let spec =
                WorkloadSpec::resolve(&a.target.workload, &a.workload).map_err(|e| anyhow!(e))?;
            let (target, _) = resolve_target(&a.target)?;
            check_driver(&spec, &target)?;
            let job = PrepareJob {
                loading: Loading {
                    connections: a.threads * a.clients,
                    connect_timeout: a.target.connect_timeout,
                },
            };
            launch(&spec, &target, job)??;
            Ok(0)
        }
        Command::Cleanup(a) => {
            // Validates the workload name; cleanup itself is driven by
            // what prepare recorded.
            let mut workload = WorkloadArgs::defaults();
            workload.kv.dataset = a.dataset.clone();
            let spec =
                WorkloadSpec::resolve(&a.target.workload, &workload).map_err(|e| anyhow!(e))?;
            let (target, _) = resolve_target(&a.target)?;
            check_driver(&spec, &target)?;
            let job = CleanupJob {
                connect_timeout: a.target.connect_timeout,
            };
            launch(&spec, &target, job)??;
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
    let spec = WorkloadSpec::resolve(&a.target.workload, &a.workload).map_err(|e| anyhow!(e))?;
    let (target, default_target) = resolve_target(&a.target)?;
    check_driver(&spec, &target)?;
    let job = RunJob {
        args: a,
        spec: spec.clone(),
        target: target.clone(),
        default_target,
        argv,
        quiet,
    };
    launch(&spec, &target, job)?
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
    match parse_cli(&full) {
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
