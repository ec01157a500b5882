//! The machine baselines' options: `cpu`'s prime limit (sysbench's name)
//! and the disk workloads' fio job (fio's names), parsed, validated, listed.

use std::path::PathBuf;

use clap::Args;
use loadcell_core::Family;
use loadcell_workloads::cpu::{CpuWorkload, DEFAULT_MAX_PRIME};
use loadcell_workloads::disk::expect::Formula;
use loadcell_workloads::disk::{parse_size, DiskOptions, DiskWorkload, PROFILES};

use loadcell_core::Target;
use loadcell_drivers::OpenError;
use loadcell_workloads::workload::Workload;

use super::{CliFamily, Entry, FamilySpec, WorkloadArgs};
use crate::disk::OwnRunner;
use crate::launch::{Job, Launch};
use crate::values::{positive_u32, positive_u64};

/// Options of `cpu` (sysbench's) and of the disk workloads (fio's).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Machine baseline options (cpu: sysbench's; disk*: fio's)")]
pub struct MachineArgs {
    /// cpu: each event counts the primes below this, as sysbench's cpu test (default 10000).
    #[arg(long, value_name = "N", value_parser = positive_u64, allow_negative_numbers = true)]
    pub cpu_max_prime: Option<u64>,
    /// disk: fio's I/O pattern: read, write, randread, randwrite, rw, randrw (default read).
    #[arg(long, value_name = "MODE")]
    pub rw: Option<String>,
    /// disk*: block size, e.g. 4k, 1m (default 4k; 1m for disk-seqwrite).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub bs: Option<u64>,
    /// disk*: I/Os in flight per job (default 128; 64 for disk-seqwrite; 1 for disk).
    #[arg(long, value_name = "N", value_parser = positive_u32, allow_negative_numbers = true)]
    pub iodepth: Option<u32>,
    /// disk*: fio jobs (processes) on the file (default 1).
    #[arg(long, value_name = "N", value_parser = positive_u32, allow_negative_numbers = true)]
    pub numjobs: Option<u32>,
    /// disk*: size of the file loadcell creates, e.g. 64m, 1g (default 1g).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub size: Option<u64>,
    /// disk*: 1 for direct I/O (O_DIRECT), 0 through the page cache (default 1).
    #[arg(long, value_name = "0|1", value_parser = clap::value_parser!(u8).range(0..=1))]
    pub direct: Option<u8>,
    /// disk*: fio's I/O engine (default libaio).
    #[arg(long, value_name = "ENGINE")]
    pub ioengine: Option<String>,
    /// disk --rw rw|randrw: percentage of reads (fio's default 50).
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub rwmixread: Option<u32>,
    /// disk*: an existing directory where loadcell creates its file (removed afterwards; default .).
    #[arg(long, value_name = "DIR")]
    pub directory: Option<PathBuf>,
    /// disk*: the IOPS the volume should reach, as a formula of its size: numbers,
    /// GiB, + - * /, min, max, parentheses, e.g. 'min(1200+30*GiB,20000)'.
    #[arg(long, value_name = "FORMULA", value_parser = Formula::parse)]
    pub expect_iops: Option<Formula>,
    /// disk*: the volume's size for --expect-iops's GiB, e.g. 356g
    /// (default: the size of --directory's filesystem).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub disk_size: Option<u64>,
}

/// `cpu`, run by the engine, or a disk profile, run by fio.
#[derive(Debug, Clone)]
pub enum MachineSpec {
    Cpu(CpuWorkload),
    Disk(DiskWorkload),
}

impl CliFamily for MachineArgs {
    const WHAT: &'static str = "a machine baseline (cpu, disk) option";
    type Spec = MachineSpec;

    fn catalog() -> Vec<Entry> {
        let mut all = vec![(
            "cpu",
            &[Family::MACHINE][..],
            "sysbench's cpu test: events/s of its prime loop (--cpu-max-prime), per --threads",
        )];
        all.extend(
            PROFILES
                .iter()
                .map(|(name, about)| (*name, &[Family::MACHINE][..], *about)),
        );
        all
    }

    /// The workload `name` with its options; `given` are the options of
    /// this family the command line gave.
    fn resolve(name: &str, all: &WorkloadArgs, given: &[String]) -> Result<MachineSpec, String> {
        let a = &all.machine;
        let refuse = |flag: &str| {
            Err(format!(
                "{flag} is not an option of workload {name} (see `loadcell run --help`)"
            ))
        };
        if name == "cpu" {
            if let Some(flag) = given.iter().find(|f| *f != "--cpu-max-prime") {
                return refuse(flag);
            }
            return Ok(MachineSpec::Cpu(CpuWorkload {
                max_prime: a.cpu_max_prime.unwrap_or(DEFAULT_MAX_PRIME),
            }));
        }
        if given.iter().any(|f| f == "--cpu-max-prime") {
            return refuse("--cpu-max-prime");
        }
        let mut opts =
            DiskOptions::profile(name).expect("a machine workload other than cpu is a disk profile");
        let profile = name != "disk";
        match &a.rw {
            Some(rw) if profile => {
                return Err(format!(
                    "--rw is the disk workload's: {name} runs --rw {}; for another pattern run `disk --rw {rw}`",
                    opts.rw
                ))
            }
            Some(rw) => opts.rw = rw.clone(),
            None => {}
        }
        opts.bs = a.bs.unwrap_or(opts.bs);
        opts.iodepth = a.iodepth.unwrap_or(opts.iodepth);
        opts.numjobs = a.numjobs.unwrap_or(opts.numjobs);
        opts.size = a.size.unwrap_or(opts.size);
        opts.direct = a.direct.map_or(opts.direct, |d| d == 1);
        opts.ioengine = a.ioengine.clone().unwrap_or(opts.ioengine);
        opts.rwmixread = a.rwmixread;
        opts.directory = a.directory.clone().unwrap_or(opts.directory);
        opts.expect_iops = a.expect_iops.clone();
        opts.disk_size = a.disk_size;
        opts.validate()?;
        let name = PROFILES
            .iter()
            .map(|(n, _)| *n)
            .find(|n| *n == name)
            .expect("a disk profile is listed");
        Ok(MachineSpec::Disk(DiskWorkload { name, opts }))
    }
}

impl FamilySpec for MachineSpec {
    fn workload(&self) -> &dyn Workload {
        match self {
            MachineSpec::Cpu(w) => w,
            MachineSpec::Disk(w) => w,
        }
    }

    fn own_runner(&self) -> Option<&dyn OwnRunner> {
        match self {
            MachineSpec::Cpu(_) => None,
            MachineSpec::Disk(w) => Some(w),
        }
    }
}

impl Launch for MachineSpec {
    fn launch<J: Job>(&self, target: &Target, job: J) -> Result<J::Output, OpenError> {
        match self {
            MachineSpec::Cpu(w) => w.launch(target, job),
            MachineSpec::Disk(w) => unreachable!("fio runs {}, not a driver", w.name),
        }
    }

    #[cfg(test)]
    fn dispatched(&self) -> Vec<&'static str> {
        match self {
            MachineSpec::Cpu(w) => w.dispatched(),
            MachineSpec::Disk(_) => Vec::new(),
        }
    }
}

crate::launch::runs_on!(CpuWorkload: machine);
