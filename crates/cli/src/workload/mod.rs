//! Workloads on the command line: each family's options (their own file
//! and `run --help` heading), which options the user gave (clap's record),
//! and the resolution of a workload name and its options into a typed,
//! validated [`WorkloadSpec`].

use std::fmt;
use std::time::{Duration, SystemTime};

use clap::{ArgMatches, Args, Command};
use loadcell_core::Family;
use loadcell_engine::{ConnectionPolicy, Hold, RateSpec, SessionGroups, Shard};
use loadcell_workloads::workload::Workload;

use crate::disk::OwnRunner;
use crate::launch::Launch;

/// A workload in `loadcell list`: its name, the families it runs on, one
/// line about it.
pub type Entry = (&'static str, &'static [Family], &'static str);

/// A family's command line: its options (a clap group under its own
/// `run --help` heading), its workloads, and their resolution into the
/// family's [`FamilySpec`]. One row of `cli_families!` adds it to every
/// command.
pub trait CliFamily: Args + Clone + fmt::Debug {
    /// What its options are called when another workload refuses them
    /// ("an OLTP (sysbench) option").
    const WHAT: &'static str;
    /// A resolved workload of the family.
    type Spec: FamilySpec + Launch + Clone + fmt::Debug;
    fn catalog() -> Vec<Entry>;
    /// Whether `name` is one of its workloads.
    fn names(name: &str) -> bool {
        Self::catalog().iter().any(|(n, _, _)| *n == name)
    }
    /// Other families' options its workloads take too (`http-conns`
    /// takes the HTTP request's), by their [`CliFamily::WHAT`].
    fn takes_also() -> &'static [&'static str] {
        &[]
    }
    /// Workload `name` with its options; `given` are the options of this
    /// family that the command line gave.
    fn resolve(name: &str, all: &WorkloadArgs, given: &[String]) -> Result<Self::Spec, String>;
}

/// What the commands need of a resolved workload beyond running it. Every
/// method but `workload` has the answer of a family that needs nothing.
pub trait FamilySpec {
    /// The workload, for what does not depend on the driver: its name,
    /// families, refusals and options.
    fn workload(&self) -> &dyn Workload;
    /// The options needed to repeat a `prepare` for this workload, for hints.
    fn prepare_hint(&self) -> String {
        String::new()
    }
    /// An event limit the workload's own options imply, for `sessions`
    /// sessions and a run with or without `--time`.
    fn implied_events(&self, _all: &WorkloadArgs, _sessions: u64, _timed: bool) -> Option<u64> {
        None
    }
    /// Makes the run what the workload needs of it (the connection
    /// workloads decide connections and sessions), or says why it cannot
    /// be, before any load.
    fn fit_run(&mut self, _run: &mut RunShape) -> Result<(), String> {
        Ok(())
    }
    /// Session groups beside the `threads × clients` sessions, each with
    /// its rate: a workload that runs two kinds of session at once.
    fn groups(&self, _run: &RunShape) -> Option<SessionGroups> {
        None
    }
    /// Sessions that hold connections instead of running the schedule.
    fn hold(&self, _run: &RunShape) -> Option<Hold> {
        None
    }
    /// Gives a workload whose inserts continue a key sequence this
    /// process's shard of it, so that shards never insert the same key;
    /// `start_at`, the instant all shards share, seeds what they draw from.
    fn take_insert_share(&mut self, _shard: Shard, _start_at: Option<SystemTime>) {}
    /// Makes a run step `step` of a sweep (or probe `step` of a findmax)
    /// of at most `steps` into the same tables, its inserts drawn from
    /// the step's own part of `seed`'s (or the shards') permutation.
    fn take_insert_step(&mut self, _step: usize, _steps: usize, _seed: u64) {}
    /// A workload another program runs (fio), not the engine.
    fn own_runner(&self) -> Option<&dyn OwnRunner> {
        None
    }
}

/// What a family may read and decide of a run: its sessions, rate and
/// connection policy (see [`FamilySpec::fit_run`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunShape {
    pub threads: usize,
    pub clients: usize,
    /// `--rate`, in events per second.
    pub rate: Option<f64>,
    pub connection_policy: ConnectionPolicy,
    /// `--report-interval`, when given.
    pub report_interval: Option<Duration>,
    pub connect_timeout: Duration,
    /// How long sessions may finish after the run is told to stop.
    pub drain_timeout: Duration,
    /// How the run's events arrive (`--arrival`, `--rate-tick`), for a
    /// session group's own rate.
    arrivals: RateSpec,
}

impl RunShape {
    pub fn of(args: &crate::args::RunArgs) -> RunShape {
        RunShape {
            threads: args.threads,
            clients: args.clients,
            rate: args.rate,
            connection_policy: args.connection_policy,
            report_interval: args.report_interval,
            connect_timeout: args.target.connect_timeout,
            drain_timeout: args.drain_timeout.unwrap_or(crate::config::DRAIN_TIMEOUT),
            arrivals: args.rate_at(0.0),
        }
    }

    /// Puts what the family decided back into the run's options.
    pub fn apply(self, args: &mut crate::args::RunArgs) {
        args.threads = self.threads;
        args.clients = self.clients;
        args.rate = self.rate;
        args.connection_policy = self.connection_policy;
        args.drain_timeout = Some(self.drain_timeout);
    }

    /// A closed-loop run of `threads × clients` sessions, for tests.
    #[cfg(test)]
    pub fn closed_loop(threads: usize, clients: usize) -> RunShape {
        RunShape {
            threads,
            clients,
            rate: None,
            connection_policy: ConnectionPolicy::Persistent,
            report_interval: None,
            connect_timeout: Duration::from_secs(5),
            drain_timeout: crate::config::DRAIN_TIMEOUT,
            arrivals: RateSpec {
                per_sec: 0.0,
                arrival: loadcell_engine::Arrival::Uniform,
                tick: None,
            },
        }
    }

    /// A rate of `per_sec` events arriving as the run's do.
    pub fn rate_at(&self, per_sec: f64) -> RateSpec {
        RateSpec {
            per_sec,
            ..self.arrivals
        }
    }
}

/// The families on the command line, one row each: the variant of
/// [`WorkloadSpec`], the module (its field in [`WorkloadArgs`]) and its
/// options type, a [`CliFamily`]. It generates the modules, the
/// arguments, the spec, the catalog and the dispatch; nothing else
/// matches on a [`WorkloadSpec`].
macro_rules! cli_families {
    ($($variant:ident $module:ident: $args:ident;)+) => {
        $(mod $module; pub use $module::$args;)+

        /// Every workload, typed: one variant per family, holding its spec.
        #[derive(Debug, Clone)]
        pub enum WorkloadSpec {
            $($variant(<$args as CliFamily>::Spec),)+
        }

        /// Every family's workload options, each group under its own heading.
        #[derive(Debug, Clone, Args)]
        pub struct WorkloadArgs {
            $(#[command(flatten)] pub $module: $args,)+
            /// The options the command line gave, by flag (`--ratio`), as
            /// clap recorded them: a workload refuses another family's options.
            #[arg(skip)]
            given: Vec<String>,
        }

        /// Every workload: name, the families it runs on, one line about it.
        pub fn catalog() -> Vec<Entry> {
            let mut all = Vec::new();
            $(all.extend(<$args as CliFamily>::catalog());)+
            all
        }

        impl WorkloadArgs {
            /// Each family's options the command line gave, by what they
            /// are called in messages.
            fn given_by_family(&self) -> Vec<(&'static str, Vec<String>)> {
                vec![$((<$args as CliFamily>::WHAT, self.given_in::<$args>()),)+]
            }
        }

        impl WorkloadSpec {
            /// Workload `name`, by the family that names it, refusing the
            /// options of the families it does not take.
            fn by_family(name: &str, args: &WorkloadArgs) -> Option<Result<WorkloadSpec, String>> {
                $(
                    if <$args as CliFamily>::names(name) {
                        return Some(resolve_in::<$args>(name, args).map(WorkloadSpec::$variant));
                    }
                )+
                None
            }

            /// The family's view of the spec.
            pub fn family(&self) -> &dyn FamilySpec {
                match self {
                    $(WorkloadSpec::$variant(spec) => spec,)+
                }
            }

            fn family_mut(&mut self) -> &mut dyn FamilySpec {
                match self {
                    $(WorkloadSpec::$variant(spec) => spec,)+
                }
            }

            /// Opens the target's driver in a family the workload runs on
            /// and hands the job both.
            pub fn launch<J: crate::launch::Job>(
                &self,
                target: &loadcell_core::Target,
                job: J,
            ) -> Result<J::Output, loadcell_drivers::OpenError> {
                match self {
                    $(WorkloadSpec::$variant(spec) => spec.launch(target, job),)+
                }
            }

            /// The driver families the dispatch serves the workload on.
            #[cfg(test)]
            pub(crate) fn dispatched(&self) -> Vec<&'static str> {
                match self {
                    $(WorkloadSpec::$variant(spec) => spec.dispatched(),)+
                }
            }
        }
    };
}

cli_families! {
    Oltp oltp: OltpArgs;
    Kv kv: KvArgs;
    Ycsb ycsb: YcsbArgs;
    Http http: HttpArgs;
    Machine machine: MachineArgs;
    HttpConns http_conns: HttpConnsArgs;
    Search search: SearchArgs;
    Ts ts: TsArgs;
    Stream stream: StreamArgs;
    Wide wide: WideArgs;
    Script script: ScriptArgs;
    Mqtt mqtt: MqttArgs;
}

/// Family `F`'s workload `name`, once the options of the families it does
/// not take are refused.
fn resolve_in<F: CliFamily>(name: &str, args: &WorkloadArgs) -> Result<F::Spec, String> {
    let takes = |what: &str| what == F::WHAT || F::takes_also().contains(&what);
    let groups = args.given_by_family();
    if let Some((what, flag)) = groups
        .iter()
        .filter(|(what, _)| !takes(what))
        .find_map(|(what, given)| Some((what, given.first()?)))
    {
        return Err(format!(
            "{flag} is {what}; workload {name} does not take it (see `loadcell list`)"
        ));
    }
    let own = groups
        .into_iter()
        .find(|(what, _)| *what == F::WHAT)
        .map(|(_, given)| given)
        .unwrap_or_default();
    F::resolve(name, args, &own)
}

impl WorkloadArgs {
    /// Every option at its default, none given.
    #[cfg(test)]
    pub fn defaults() -> WorkloadArgs {
        use clap::Parser;
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

impl WorkloadSpec {
    pub fn resolve(name: &str, args: &WorkloadArgs) -> Result<WorkloadSpec, String> {
        WorkloadSpec::by_family(name, args).unwrap_or_else(|| {
            let names: Vec<_> = catalog().iter().map(|(n, _, _)| *n).collect();
            Err(format!(
                "unknown workload '{name}'; valid workloads: {}",
                names.join(", ")
            ))
        })
    }

    /// The workload, whatever its type, for what does not depend on the
    /// driver: its name, families, refusals and options.
    pub fn workload(&self) -> &dyn Workload {
        self.family().workload()
    }

    pub fn name(&self) -> &'static str {
        self.workload().name()
    }

    /// See [`FamilySpec::prepare_hint`].
    pub fn prepare_hint(&self) -> String {
        self.family().prepare_hint()
    }

    /// See [`FamilySpec::take_insert_share`].
    pub fn take_insert_share(&mut self, shard: Shard, start_at: Option<SystemTime>) {
        self.family_mut().take_insert_share(shard, start_at)
    }

    /// See [`FamilySpec::take_insert_step`].
    pub fn take_insert_step(&mut self, step: usize, steps: usize, seed: u64) {
        self.family_mut().take_insert_step(step, steps, seed)
    }

    /// See [`FamilySpec::implied_events`].
    pub fn implied_events(&self, args: &WorkloadArgs, sessions: u64, timed: bool) -> Option<u64> {
        self.family().implied_events(args, sessions, timed)
    }

    /// Fits the run's options to the workload (see [`FamilySpec::fit_run`]).
    pub fn fit_run(&mut self, args: &mut crate::args::RunArgs) -> Result<(), String> {
        let mut shape = RunShape::of(args);
        self.family_mut().fit_run(&mut shape)?;
        shape.apply(args);
        Ok(())
    }

    /// See [`FamilySpec::groups`].
    pub fn groups(&self, args: &crate::args::RunArgs) -> Option<SessionGroups> {
        self.family().groups(&RunShape::of(args))
    }

    /// See [`FamilySpec::hold`].
    pub fn hold(&self, args: &crate::args::RunArgs) -> Option<Hold> {
        self.family().hold(&RunShape::of(args))
    }

    /// See [`FamilySpec::own_runner`].
    pub fn own_runner(&self) -> Option<&dyn OwnRunner> {
        self.family().own_runner()
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
        assert!(matches!(spec, WorkloadSpec::Kv(kv::KvSpec::Kv(w)) if w.opts.pipeline == 4));
    }
}
