//! `local:` — the machine loadcell runs on, for the machine family's
//! workloads (`cpu`). Nothing is connected to: a session is a place for
//! the workload's events to run, one worker thread each.

use loadcell_core::kv::KvCapabilities;
use loadcell_core::machine::MachineConn;
use loadcell_core::{Driver, DriverError, ServerInfo, Target};

use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "local",
    schemes: &["local"],
    family: Family::MACHINE,
    url_form: "local:",
    about: "this machine itself, for the machine baselines (cpu; disk workloads run fio)",
    kv: KvCapabilities::NONE,
    // A CPU event never yields: each session needs a thread of its own.
    blocking: true,
};

pub struct LocalDriver;

impl LocalDriver {
    pub fn from_target(target: &Target) -> Result<Self, String> {
        match target.url().path() {
            "" => Ok(LocalDriver),
            path => Err(format!(
                "local: takes nothing after the scheme (got '{path}'); disk workloads take --directory"
            )),
        }
    }
}

/// A session on this machine.
pub struct LocalConn;

impl MachineConn for LocalConn {}

impl Driver for LocalDriver {
    type Conn = LocalConn;

    fn endpoint(&self) -> String {
        "local".to_string()
    }

    async fn connect(&self) -> Result<LocalConn, DriverError> {
        Ok(LocalConn)
    }

    /// What ran the load; the CPU model is in the result's host facts.
    async fn server_info(&self, _conn: &mut LocalConn) -> Result<ServerInfo, DriverError> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(ServerInfo::new(
            "this machine",
            loadcell_core::words::counted(cpus as u64, "CPU"),
        ))
    }
}
