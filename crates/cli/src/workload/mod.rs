//! Workloads on the command line: each family's options (their own file
//! and `run --help` heading), which options the user gave (clap's record),
//! and the resolution of a workload name and its options into a typed,
//! validated [`WorkloadSpec`].

mod http;
mod http_conns;
mod kv;
mod machine;
mod oltp;
mod script;
mod search;
mod stream;
mod ts;
mod wide;
mod ycsb;

use std::time::SystemTime;

use clap::{ArgMatches, Args, Command, Parser};
use loadcell_core::Family;
use loadcell_engine::Shard;
use loadcell_workloads::cpu::CpuWorkload;
use loadcell_workloads::dataset::DataSetWorkload;
use loadcell_workloads::disk::DiskWorkload;
use loadcell_workloads::http::HttpWorkload;
use loadcell_workloads::http_conns::HttpConnectionsWorkload;
use loadcell_workloads::kv::KvWorkload;

use loadcell_workloads::oltp::{InsertShare, OltpKind, OltpWorkload};
use loadcell_workloads::script::ScriptWorkload;
use loadcell_workloads::search::mixed::SearchMixedWorkload;
use loadcell_workloads::search::{SearchBulkWorkload, SearchQueryWorkload};
use loadcell_workloads::stream::StreamWorkload;
use loadcell_workloads::ts::{TsIngestWorkload, TsQueryWorkload};
use loadcell_workloads::wide::PeWorkload;
use loadcell_workloads::workload::Workload;
use loadcell_workloads::ycsb::{Preset, YcsbWorkload};

pub use http::HttpArgs;
pub use http_conns::HttpConnsArgs;
pub use kv::KvArgs;
pub use machine::MachineArgs;
pub use oltp::OltpArgs;
pub use script::ScriptArgs;
pub use search::SearchArgs;
pub use stream::StreamArgs;
pub use ts::TsArgs;
pub use wide::WideArgs;
pub use ycsb::YcsbArgs;

/// Every workload, typed. `Dataset` is `kv --dataset FILE`.
#[derive(Debug, Clone)]
pub enum WorkloadSpec {
    Oltp(OltpWorkload),
    Kv(KvWorkload),
    Dataset(DataSetWorkload),
    Ycsb(YcsbWorkload),
    Http(HttpWorkload),
    Cpu(CpuWorkload),
    /// Run by fio, not by the engine (see `crate::disk`).
    Disk(DiskWorkload),
    /// `http-cps` and `http-conns`.
    HttpConnections(HttpConnectionsWorkload),
    SearchBulk(SearchBulkWorkload),
    SearchQuery(SearchQueryWorkload),
    SearchMixed(SearchMixedWorkload),
    TsIngest(TsIngestWorkload),
    TsQuery(TsQueryWorkload),
    Stream(StreamWorkload),
    /// HBase PerformanceEvaluation's tests.
    Pe(PeWorkload),
    /// The user's own operations, from `--file`.
    Script(ScriptWorkload),
}

/// Every family's workload options, each group under its own heading.
#[derive(Debug, Clone, Args)]
pub struct WorkloadArgs {
    #[command(flatten)]
    pub oltp: OltpArgs,
    #[command(flatten)]
    pub kv: KvArgs,
    #[command(flatten)]
    pub ycsb: YcsbArgs,
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub machine: MachineArgs,
    #[command(flatten)]
    pub http_conns: HttpConnsArgs,
    #[command(flatten)]
    pub search: SearchArgs,
    #[command(flatten)]
    pub ts: TsArgs,
    #[command(flatten)]
    pub stream: StreamArgs,
    #[command(flatten)]
    pub wide: WideArgs,
    #[command(flatten)]
    pub script: ScriptArgs,
    /// The options the command line gave, by flag (`--ratio`), as clap
    /// recorded them: a workload refuses another family's options.
    #[arg(skip)]
    given: Vec<String>,
}

impl WorkloadArgs {
    /// Every option at its default, none given.
    pub fn defaults() -> WorkloadArgs {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            workload: WorkloadArgs,
        }
        Only::parse_from(["loadcell"]).workload
    }

    /// Notes which options `matches` (a command's) took from the command line.
    pub fn note_given(&mut self, matches: &ArgMatches) {
        self.given = flags::<WorkloadArgs>()
            .into_iter()
            .filter(|(id, _)| {
                matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
            })
            .map(|(_, flag)| flag)
            .collect();
    }

    /// The options of group `A` the command line gave, in declaration order.
    fn given_in<A: Args>(&self) -> Vec<String> {
        flags::<A>()
            .into_iter()
            .map(|(_, flag)| flag)
            .filter(|flag| self.given.contains(flag))
            .collect()
    }
}

/// The (id, `--flag`) of every option of group `A`.
fn flags<A: Args>() -> Vec<(String, String)> {
    A::augment_args(Command::new("group"))
        .get_arguments()
        .filter_map(|a| Some((a.get_id().to_string(), format!("--{}", a.get_long()?))))
        .collect()
}

/// The families' names, as `loadcell list` shows what a workload runs on.
pub fn families_label(families: &[Family]) -> String {
    let names: Vec<_> = families.iter().map(|f| f.as_str()).collect();
    names.join(", ")
}

/// Every workload: name, the families it runs on, one line about it.
pub fn catalog() -> Vec<(&'static str, &'static [Family], &'static str)> {
    let mut all = oltp::catalog();
    all.extend(kv::catalog());
    all.extend(ycsb::catalog());
    all.extend(http::catalog());
    all.extend(http_conns::catalog());
    all.extend(search::catalog());
    all.extend(ts::catalog());
    all.extend(stream::catalog());
    all.extend(wide::catalog());
    all.extend(machine::catalog());
    all.extend(script::catalog());
    all
}

impl WorkloadSpec {
    pub fn resolve(name: &str, args: &WorkloadArgs) -> Result<WorkloadSpec, String> {
        // Each family's options, by what they are called in messages.
        let groups = [
            (oltp::WHAT, args.given_in::<OltpArgs>()),
            (kv::WHAT, args.given_in::<KvArgs>()),
            (ycsb::WHAT, args.given_in::<YcsbArgs>()),
            (http::WHAT, args.given_in::<HttpArgs>()),
            (machine::WHAT, args.given_in::<MachineArgs>()),
            (http_conns::WHAT, args.given_in::<HttpConnsArgs>()),
            (search::WHAT, args.given_in::<SearchArgs>()),
            (ts::WHAT, args.given_in::<TsArgs>()),
            (stream::WHAT, args.given_in::<StreamArgs>()),
            (wide::WHAT, args.given_in::<WideArgs>()),
            (script::WHAT, args.given_in::<ScriptArgs>()),
        ];
        let given = |own: &str| {
            let group = groups.iter().find(|(what, _)| *what == own);
            group.map_or(&[][..], |(_, given)| given.as_slice())
        };
        // Refuses the options of every group but `own`.
        let refuse_others = |own: &[&str]| match groups
            .iter()
            .find_map(|(what, given)| Some((what, given.first()?)).filter(|_| !own.contains(what)))
        {
            Some((what, flag)) => Err(format!(
                "{flag} is {what}; workload {name} does not take it (see `loadcell list`)"
            )),
            None => Ok(()),
        };
        if let Some(kind) = OltpKind::parse(name) {
            refuse_others(&[oltp::WHAT])?;
            return Ok(WorkloadSpec::Oltp(OltpWorkload {
                kind,
                opts: oltp::options(&args.oltp)?,
            }));
        }
        if name == "kv" {
            refuse_others(&[kv::WHAT])?;
            return kv::resolve(&args.kv, given(kv::WHAT));
        }
        if let Some(preset) = Preset::parse(name) {
            refuse_others(&[ycsb::WHAT])?;
            return Ok(WorkloadSpec::Ycsb(YcsbWorkload {
                preset,
                opts: ycsb::options(preset, &args.ycsb)?,
            }));
        }
        if name == "http" {
            refuse_others(&[http::WHAT])?;
            return http::resolve(&args.http);
        }
        if machine::names(name) {
            refuse_others(&[machine::WHAT])?;
            return machine::resolve(name, &args.machine, given(machine::WHAT));
        }
        if search::names(name) {
            refuse_others(&[search::WHAT])?;
            return search::resolve(name, &args.search, given(search::WHAT));
        }
        if ts::names(name) {
            refuse_others(&[ts::WHAT])?;
            return ts::resolve(name, &args.ts, given(ts::WHAT));
        }
        if stream::names(name) {
            refuse_others(&[stream::WHAT])?;
            return stream::resolve(&args.stream, given(stream::WHAT));
        }
        if wide::names(name) {
            refuse_others(&[wide::WHAT])?;
            return wide::resolve(name, &args.wide, given(wide::WHAT));
        }
        if name == "script" {
            refuse_others(&[script::WHAT])?;
            return script::resolve(&args.script);
        }
        if let Some(spec) = http_conns::resolve(name, &args.http, &args.http_conns) {
            refuse_others(&[http::WHAT, http_conns::WHAT])?;
            return spec;
        }
        let names: Vec<_> = catalog().iter().map(|(n, _, _)| *n).collect();
        Err(format!(
            "unknown workload '{name}'; valid workloads: {}",
            names.join(", ")
        ))
    }

    /// The workload, whatever its type, for what does not depend on the
    /// driver: its name, families, refusals and options.
    pub fn workload(&self) -> &dyn Workload {
        match self {
            WorkloadSpec::Oltp(w) => w,
            WorkloadSpec::Kv(w) => w,
            WorkloadSpec::Dataset(w) => w,
            WorkloadSpec::Ycsb(w) => w,
            WorkloadSpec::Http(w) => w,
            WorkloadSpec::Cpu(w) => w,
            WorkloadSpec::Disk(w) => w,
            WorkloadSpec::HttpConnections(w) => w,
            WorkloadSpec::SearchBulk(w) => w,
            WorkloadSpec::SearchQuery(w) => w,
            WorkloadSpec::SearchMixed(w) => w,
            WorkloadSpec::TsIngest(w) => w,
            WorkloadSpec::TsQuery(w) => w,
            WorkloadSpec::Stream(w) => w,
            WorkloadSpec::Pe(w) => w,
            WorkloadSpec::Script(w) => w,
        }
    }

    pub fn name(&self) -> &'static str {
        self.workload().name()
    }

    /// The options needed to repeat a `prepare` for this spec, for hints.
    pub fn prepare_hint(&self) -> String {
        match self {
            WorkloadSpec::Oltp(w) => oltp::prepare_hint(&w.opts),
            WorkloadSpec::Kv(w) => kv::prepare_hint(&w.opts),
            WorkloadSpec::Dataset(w) => format!("--dataset {}", w.set.path),
            WorkloadSpec::Ycsb(w) => ycsb::prepare_hint(&w.opts),
            WorkloadSpec::SearchBulk(SearchBulkWorkload { opts })
            | WorkloadSpec::SearchQuery(SearchQueryWorkload { opts, .. })
            | WorkloadSpec::SearchMixed(SearchMixedWorkload {
                queries: SearchQueryWorkload { opts, .. },
                ..
            }) => search::prepare_hint(opts),
            WorkloadSpec::TsIngest(TsIngestWorkload { opts, .. })
            | WorkloadSpec::TsQuery(TsQueryWorkload { opts, .. }) => ts::prepare_hint(opts),
            WorkloadSpec::Stream(w) => stream::prepare_hint(&w.opts),
            WorkloadSpec::Pe(w) => wide::prepare_hint(&w.opts),
            WorkloadSpec::Script(w) => script::prepare_hint(w),
            WorkloadSpec::Http(_)
            | WorkloadSpec::HttpConnections(_)
            | WorkloadSpec::Cpu(_)
            | WorkloadSpec::Disk(_) => String::new(),
        }
    }

    /// Gives workloads whose inserts continue a key sequence (YCSB's
    /// inserts, `oltp_insert --auto-inc=off`) this process's shard of it,
    /// so that shards never insert the same key; `start_at`, the instant
    /// all shards share, seeds what they draw from.
    pub fn take_insert_share(&mut self, shard: Shard, start_at: Option<SystemTime>) {
        match self {
            WorkloadSpec::Ycsb(w) => w.opts.shard = Some(shard),
            WorkloadSpec::Oltp(w) => {
                let seed = start_at
                    .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs());
                w.opts.shard = Some(InsertShare {
                    shard,
                    seed,
                    first: 0,
                });
            }
            _ => {}
        }
    }

    /// Makes a run step `step` of a sweep (or probe `step` of a findmax)
    /// of at most `steps` into the same tables: `oltp_insert
    /// --auto-inc=off` takes its ids from the step's own part of one
    /// permutation, so that no step inserts an id an earlier one did (a
    /// duplicate key ends a run). Sharded, the permutation is the one the
    /// shards' `--start-at` seeded; otherwise `seed`'s.
    pub fn take_insert_step(&mut self, step: usize, steps: usize, seed: u64) {
        if let WorkloadSpec::Oltp(w) = self {
            let share = w.opts.shard.get_or_insert(InsertShare {
                shard: Shard::new(0, 1).expect("shard 0 of 1 exists"),
                seed,
                first: 0,
            });
            share.first = (((step as u64) << 32) / steps as u64) as u32;
        }
    }

    /// An event limit the workload's own options imply, for `sessions`
    /// sessions and a run with or without `--time`.
    pub fn implied_events(&self, args: &WorkloadArgs, sessions: u64, timed: bool) -> Option<u64> {
        match self {
            WorkloadSpec::Oltp(_)
            | WorkloadSpec::Http(_)
            | WorkloadSpec::HttpConnections(_)
            | WorkloadSpec::Cpu(_)
            | WorkloadSpec::Disk(_)
            | WorkloadSpec::SearchQuery(_)
            | WorkloadSpec::SearchMixed(_)
            | WorkloadSpec::TsQuery(_)
            | WorkloadSpec::Stream(_)
            | WorkloadSpec::Script(_) => None,
            WorkloadSpec::SearchBulk(w) => search::implied_events(&w.opts),
            WorkloadSpec::TsIngest(w) => ts::implied_events(w),
            WorkloadSpec::Pe(w) => Some(w.events()),
            WorkloadSpec::Kv(KvWorkload { opts })
            | WorkloadSpec::Dataset(DataSetWorkload { opts, .. }) => {
                kv::implied_events(&args.kv, opts, sessions)
            }
            WorkloadSpec::Ycsb(w) => ycsb::implied_events(&args.ycsb, &w.opts, timed),
        }
    }

    /// Makes the run's options what the workload needs of them (the
    /// connection workloads decide connections and sessions), or says why
    /// they cannot be, before any load.
    pub fn fit_run(&mut self, args: &mut crate::args::RunArgs) -> Result<(), String> {
        match self {
            WorkloadSpec::HttpConnections(w) => http_conns::fit_run(w, args),
            WorkloadSpec::Stream(w) => stream::fit_run(w, args),
            WorkloadSpec::Pe(w) => {
                wide::fit_run(w, args);
                Ok(())
            }
            WorkloadSpec::TsIngest(w) => {
                ts::fit_run(w, args);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Session groups beside the `threads × clients` sessions, each with
    /// its rate: a workload that runs two kinds of session at once.
    pub fn groups(&self, args: &crate::args::RunArgs) -> Option<loadcell_engine::SessionGroups> {
        match self {
            WorkloadSpec::SearchMixed(w) => Some(search::groups(w, args)),
            WorkloadSpec::Stream(w) => stream::groups(w),
            _ => None,
        }
    }

    /// Sessions that hold connections instead of running the schedule.
    pub fn hold(&self, args: &crate::args::RunArgs) -> Option<loadcell_engine::Hold> {
        match self {
            WorkloadSpec::HttpConnections(w) => http_conns::hold_spec(w, args),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches, Parser};

    use super::*;

    /// What a command line gave, as `main` notes it.
    fn given(args: &[&str]) -> WorkloadArgs {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            workload: WorkloadArgs,
        }
        let argv = std::iter::once("loadcell").chain(args.iter().copied());
        let matches = Only::command().get_matches_from(argv);
        let mut only = Only::from_arg_matches(&matches).unwrap();
        only.workload.note_given(&matches);
        only.workload
    }

    #[test]
    fn options_given_come_from_the_command_line_not_from_their_values() {
        // --tables at its default value was still given, and is refused.
        let err = WorkloadSpec::resolve("kv", &given(&["--tables", "1"])).unwrap_err();
        assert_eq!(
            err,
            "--tables is an OLTP (sysbench) option; workload kv does not take it (see `loadcell list`)"
        );
        let err = WorkloadSpec::resolve("ycsb-a", &given(&["-d", "64"])).unwrap_err();
        assert!(err.starts_with("--data-size is a key-value"), "{err}");
        let err =
            WorkloadSpec::resolve("oltp_read_only", &given(&["--record-count", "5"])).unwrap_err();
        assert!(
            err.starts_with("--record-count is a record workload"),
            "{err}"
        );
        // Defaults are not "given": every workload takes an empty command
        // line, but script, which needs its file.
        for (name, _, _) in catalog() {
            match WorkloadSpec::resolve(name, &given(&[])) {
                Err(e) if name == "script" => assert!(e.contains("--file"), "{e}"),
                other => drop(other.unwrap()),
            }
        }
        let spec = WorkloadSpec::resolve("kv", &given(&["--pipeline", "4"])).unwrap();
        assert!(matches!(spec, WorkloadSpec::Kv(KvWorkload { opts }) if opts.pipeline == 4));
    }
}
