//! The machine family: workloads that measure the host loadcell runs on
//! (its CPU) rather than a server. There is nothing to speak to, so the
//! connection only marks a session's place on the machine.

/// A session on the local machine. Its events run on the worker thread
/// itself, so drivers of this family are `DriverInfo::blocking`.
pub trait MachineConn {}
