//! Every step checked by the parsers and validation of the command it
//! stands for, and every target reached, before the first step runs.

use std::time::Duration;

use anyhow::anyhow;
use loadcell_core::{Driver, DriverInfo, ServerInfo, Target};
use loadcell_workloads::workload::Lifecycle;

use crate::args::Command;
use crate::config::{resolve, RunConfig};
use crate::launch::{block_on, connect_error, launch, Job};
use crate::multi::{run_estimate, FindmaxJob, SweepJob};
use crate::workload::WorkloadSpec;

/// What a checked step tells the suite before it runs.
pub struct Checked {
    /// How long it should take, when its options say.
    pub estimate: Option<Duration>,
    /// The workload and target to reach first.
    pub reach: Option<(WorkloadSpec, Target)>,
}

/// Checks one step's command line as its command would, without sending
/// any load: the error is the command's own, on one line.
pub fn check(argv: &[String]) -> anyhow::Result<Checked> {
    let cli = crate::parse_cli(argv).map_err(|e| anyhow!("{}", crate::usage_error(&e)))?;
    let reach = |c: &RunConfig| {
        (c.spec.own_runner().is_none() && !c.default_target)
            .then(|| (c.spec.clone(), c.target.clone()))
    };
    Ok(match cli.command {
        Command::Run(a) => {
            let config = RunConfig::new(*a, argv.to_vec())?;
            Checked {
                estimate: run_estimate(&config),
                reach: reach(&config),
            }
        }
        Command::Sweep(a) => {
            let job = SweepJob::new(&a.args, argv.to_vec())?;
            Checked {
                estimate: job.estimate(),
                reach: reach(job.first()),
            }
        }
        Command::Findmax(a) => {
            let job = FindmaxJob::new(&a.args, argv.to_vec())?;
            Checked {
                estimate: job.estimate(),
                reach: reach(job.base()),
            }
        }
        Command::Prepare(a) => {
            let (spec, target, default) = resolve(&a.target, &a.workload)?;
            Checked {
                estimate: None,
                reach: (spec.own_runner().is_none() && !default).then_some((spec, target)),
            }
        }
        Command::Cleanup(a) => {
            let (spec, target, default) = resolve(&a.target, &a.workload)?;
            Checked {
                estimate: None,
                reach: (spec.own_runner().is_none() && !default).then_some((spec, target)),
            }
        }
        Command::Advise(a) => {
            Target::parse(&a.target)?;
            Checked {
                estimate: None,
                reach: None,
            }
        }
        Command::Plan(a) => {
            crate::plan::check_gates(&a)?;
            crate::plan::read_prices(&a.prices)?;
            Checked {
                estimate: None,
                reach: None,
            }
        }
        _ => unreachable!("a suite's commands are checked when it is read"),
    })
}

/// Connects once to the target with the driver the workload would use,
/// and hands back what the server says it is.
pub fn reach(
    spec: &WorkloadSpec,
    target: &Target,
    timeout: Duration,
) -> anyhow::Result<ServerInfo> {
    launch(spec, target, Reach { timeout })?
}

struct Reach {
    timeout: Duration,
}

impl Job for Reach {
    type Output = anyhow::Result<ServerInfo>;
    fn drive<D, W, F>(self, _info: &'static DriverInfo, driver: D, _workload: &W) -> Self::Output
    where
        D: Driver,
        W: Lifecycle<D::Conn, F>,
    {
        let endpoint = driver.endpoint();
        block_on(async {
            loadcell_engine::connect_once(&driver, self.timeout)
                .await
                .map(|(_, info)| info)
                .map_err(|e| connect_error(&endpoint, e))
        })
    }
}
