//! The disk workloads' section: what fio ran on, how, and the IOPS
//! expected of the volume.

use serde::{Deserialize, Serialize};

use super::Detail;

/// A disk workload's facts: fio, the file and what holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskRun {
    pub fio_version: String,
    /// fio's exact command line.
    pub fio_command: Vec<String>,
    /// The file loadcell created for the run (removed afterwards).
    pub file: String,
    pub file_bytes: u64,
    pub filesystem: Option<Filesystem>,
    /// The devices fio found under the file, and how busy they were.
    pub devices: Vec<DeviceUtil>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_iops: Option<IopsExpectation>,
}

/// The filesystem holding a file, as `df` reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Filesystem {
    pub device: String,
    pub fs_type: String,
    pub size_bytes: u64,
    pub mount_point: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceUtil {
    pub name: String,
    pub util_percent: f64,
}

/// `--expect-iops`: the formula, evaluated at the volume's size, against
/// the IOPS measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IopsExpectation {
    pub formula: String,
    /// The volume's size the formula's `GiB` took.
    pub gib: f64,
    pub expected_iops: f64,
    pub measured_iops: f64,
    /// measured / expected.
    pub ratio: f64,
    /// Whether the measured IOPS reached the expected.
    pub met: bool,
}

impl Detail for DiskRun {
    const KEY: &'static str = "disk";
}

impl DiskRun {
    /// Whether the run fell short of `--expect-iops`.
    pub fn short_of_expectation(&self) -> bool {
        self.expect_iops.as_ref().is_some_and(|e| !e.met)
    }
}
