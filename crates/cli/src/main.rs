//! `loadcell`: parse, validate, dispatch. Everything that runs lives in
//! the library crates; this binary only composes them.

mod advise;
mod analysis;
mod args;
mod compare;
mod config;
mod disk;
mod export;
mod hdr;
mod history;
mod launch;
mod list;
mod merge;
mod metrics;
mod multi;
mod plan;
mod progress;
mod result;
mod scrape;
mod suite;
mod sweep;
mod values;
mod views;
mod watch;
mod workload;

use std::process::ExitCode;

use anyhow::anyhow;
use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches};
use loadcell_workloads::workload::{Cleanup, Loading};

use crate::args::{Cli, Command, RunArgs};
use crate::config::{resolve, RunConfig};
use crate::launch::{launch, CleanupJob, PrepareJob, RunJob};
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
        (Command::Cleanup(a), Some(m)) => a.workload.note_given(m),
        _ => {}
    }
    Ok(cli)
}

/// A usage error on one line, without clap's "error: " and with any
/// password in it redacted: its first line, and the indented lines under
/// it that name what it is about (the arguments missing, for one).
fn usage_error(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut lines = rendered.lines();
    let first = lines.next().unwrap_or("invalid arguments");
    let mut text = first.strip_prefix("error: ").unwrap_or(first).to_string();
    let named: Vec<&str> = lines
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    if !named.is_empty() {
        text = format!("{} {}", text, named.join(", "));
    }
    loadcell_core::target::redact_raw(&text)
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
            eprintln!(
                "loadcell: error: {} (see `loadcell --help`)",
                usage_error(&e)
            );
            ExitCode::from(2)
        }
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
            let (spec, target, _) = resolve(&a.target, &a.workload)?;
            if let Some(own) = spec.own_runner() {
                eprintln!("{}", own.nothing_to_prepare());
                return Ok(0);
            }
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
            let (spec, target, _) = resolve(&a.target, &a.workload)?;
            if let Some(own) = spec.own_runner() {
                eprintln!("{}", own.nothing_to_clean_up());
                return Ok(0);
            }
            let job = CleanupJob {
                how: Cleanup {
                    connect_timeout: a.target.connect_timeout,
                    force: a.force,
                },
            };
            launch(&spec, &target, job)??;
            Ok(0)
        }
        Command::Run(a) => {
            let config = RunConfig::new(*a, argv)?;
            Ok(launch::exit_code(&run(&config, false)?))
        }
        Command::Sweep(a) => multi::SweepJob::new(&a.args, argv)?.run(),
        Command::Findmax(a) => multi::FindmaxJob::new(&a.args, argv)?.run(),
        Command::Report(a) => {
            views::report(&a)?;
            Ok(0)
        }
        Command::Compare(a) => views::compare(&a),
        Command::Merge(a) => {
            merge::run(&a)?;
            Ok(0)
        }
        Command::Watch(a) => watch::command(&a),
        Command::Plan(a) => plan::run(&a),
        Command::Advise(a) => advise::run(&a),
        Command::Suite(a) => suite::command(&a),
        Command::Trend(a) => history::trend(&a),
        Command::History(a) => history::history(&a),
    }
}

/// One run: from its configuration to its result. With `quiet` (a sweep
/// step) nothing is printed and no result file is written.
fn run(config: &RunConfig, quiet: bool) -> anyhow::Result<RunResult> {
    let job = RunJob { config, quiet };
    match config.spec.own_runner() {
        Some(own) => own.run(job),
        None => launch(&config.spec, &config.target, job)?,
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
        Err(e) => Err(anyhow!("{}", usage_error(&e))),
    }
}
