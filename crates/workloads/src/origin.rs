//! What a run's own data carries to tell it from anyone else's, and the
//! counters its sessions share.

use std::sync::atomic::AtomicU64;

use loadcell_core::clock::wall_ns;

use crate::stream::rows::mix;

/// Which run on which machine: the host's name, this process, the wall
/// clock and `salt`; data of any other origin is not this run's.
pub(crate) fn origin(salt: u64) -> u64 {
    let host = std::fs::read("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.iter().fold(0, |h, &b| mix(h ^ u64::from(b)));
    mix(host ^ mix(u64::from(std::process::id()) ^ mix(salt ^ wall_ns() as u64)))
}

/// A counter on a cache line of its own: one per session that adds to it,
/// so sessions on different threads never share a line.
#[derive(Default)]
#[repr(align(64))]
pub(crate) struct Padded(pub(crate) AtomicU64);
