//! Disk baselines: fio runs the I/O, loadcell chooses the profile, checks
//! the options before anything is written and reads fio's `json+` output
//! (see [`fio`]). The report's profiles are `disk-randread`,
//! `disk-randwrite` and `disk-seqwrite`; `disk` takes fio's own options.

pub mod expect;
pub mod fio;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use loadcell_core::Family;
use serde_json::Value;

use crate::workload::Workload;
use expect::Formula;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// fio's `rw` modes loadcell runs: those a regular file takes (the trim
/// modes need a block device, which loadcell never writes to).
pub const RW_MODES: &[&str] = &[
    "read",
    "write",
    "randread",
    "randwrite",
    "rw",
    "readwrite",
    "randrw",
];

/// The workloads of this module, with what they run.
pub const PROFILES: &[(&str, &str)] = &[
    (
        "disk-randread",
        "fio 4 KiB random reads at iodepth 128, direct I/O, 1 GiB file (IOPS, latency)",
    ),
    (
        "disk-randwrite",
        "fio 4 KiB random writes at iodepth 128, direct I/O, 1 GiB file (IOPS, latency)",
    ),
    (
        "disk-seqwrite",
        "fio 1 MiB sequential writes at iodepth 64, direct I/O, 1 GiB file (bandwidth)",
    ),
    (
        "disk",
        "fio with its own options (--rw, --bs, --iodepth, --numjobs, --size, --direct, --ioengine, --rwmixread)",
    ),
];

/// One fio job, as loadcell runs it. Field names are fio's.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskOptions {
    pub rw: String,
    /// Block size in bytes.
    pub bs: u64,
    pub iodepth: u32,
    pub numjobs: u32,
    /// The file's size in bytes.
    pub size: u64,
    pub direct: bool,
    pub ioengine: String,
    /// Percentage of reads in a mixed (`rw`, `randrw`) job.
    pub rwmixread: Option<u32>,
    /// Where loadcell creates its file.
    pub directory: PathBuf,
    pub expect_iops: Option<Formula>,
    /// The volume's size for the formula's `GiB`, in bytes: `--disk-size`,
    /// else the size of the directory's filesystem.
    pub disk_size: Option<u64>,
}

impl DiskOptions {
    /// The profile `name` runs, before options the user gave.
    pub fn profile(name: &str) -> Option<DiskOptions> {
        let (rw, bs, iodepth) = match name {
            "disk-randread" => ("randread", 4 * KIB, 128),
            "disk-randwrite" => ("randwrite", 4 * KIB, 128),
            "disk-seqwrite" => ("write", MIB, 64),
            // fio's own defaults for the job's shape; direct I/O, libaio
            // and 1 GiB as in the profiles, since buffered I/O would
            // measure the page cache.
            "disk" => ("read", 4 * KIB, 1),
            _ => return None,
        };
        Some(DiskOptions {
            rw: rw.to_string(),
            bs,
            iodepth,
            numjobs: 1,
            size: GIB,
            direct: true,
            ioengine: "libaio".to_string(),
            rwmixread: None,
            directory: PathBuf::from("."),
            expect_iops: None,
            disk_size: None,
        })
    }

    /// Checks what fio would only find out once running.
    pub fn validate(&self) -> Result<(), String> {
        if !RW_MODES.contains(&self.rw.as_str()) {
            return Err(format!(
                "unknown --rw '{}'; fio's modes loadcell runs on a file: {}",
                self.rw,
                RW_MODES.join(", ")
            ));
        }
        let mixed = matches!(self.rw.as_str(), "rw" | "readwrite" | "randrw");
        match self.rwmixread {
            Some(_) if !mixed => {
                return Err(format!(
                    "--rwmixread applies to mixed jobs (--rw rw or randrw), not --rw {}",
                    self.rw
                ))
            }
            Some(p) if p > 100 => return Err(format!("--rwmixread {p}: a percentage, 0 to 100")),
            _ => {}
        }
        if self.bs == 0 || self.iodepth == 0 || self.numjobs == 0 {
            return Err("--bs, --iodepth and --numjobs must be at least 1".to_string());
        }
        if self.size < self.bs {
            return Err(format!(
                "--size {} is smaller than one block (--bs {})",
                self.size, self.bs
            ));
        }
        Ok(())
    }

    /// fio's command line for one run on `file`, for `time` after a
    /// `warmup` (fio's `ramp_time`), reporting every `interval`.
    pub fn fio_args(
        &self,
        file: &Path,
        time: Duration,
        warmup: Duration,
        interval: Duration,
    ) -> Vec<String> {
        let ms = |d: Duration| format!("{}ms", d.as_millis().max(1));
        let mut args = vec![
            "--name=loadcell".to_string(),
            format!("--filename={}", file.display()),
            format!("--rw={}", self.rw),
            format!("--bs={}", self.bs),
            format!("--iodepth={}", self.iodepth),
            format!("--numjobs={}", self.numjobs),
            format!("--size={}", self.size),
            format!("--direct={}", u8::from(self.direct)),
            format!("--ioengine={}", self.ioengine),
            "--time_based".to_string(),
            format!("--runtime={}", ms(time)),
            "--group_reporting".to_string(),
            "--output-format=json+".to_string(),
            format!("--status-interval={}", ms(interval)),
        ];
        if !warmup.is_zero() {
            args.push(format!("--ramp_time={}", ms(warmup)));
        }
        if let Some(p) = self.rwmixread {
            args.push(format!("--rwmixread={p}"));
        }
        args
    }
}

/// A disk workload: its name and fio job.
#[derive(Debug, Clone)]
pub struct DiskWorkload {
    pub name: &'static str,
    pub opts: DiskOptions,
}

impl Workload for DiskWorkload {
    fn name(&self) -> &'static str {
        self.name
    }

    /// It runs on this machine, through fio rather than the engine: the
    /// family only says which targets it takes (`local:`).
    fn families(&self) -> &'static [Family] {
        &[Family::MACHINE]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        let o = &self.opts;
        let mut map = BTreeMap::from([
            ("rw".to_string(), Value::from(o.rw.clone())),
            ("bs".to_string(), Value::from(o.bs)),
            ("iodepth".to_string(), Value::from(o.iodepth)),
            ("numjobs".to_string(), Value::from(o.numjobs)),
            ("size".to_string(), Value::from(o.size)),
            ("direct".to_string(), Value::from(o.direct)),
            ("ioengine".to_string(), Value::from(o.ioengine.clone())),
            (
                "directory".to_string(),
                Value::from(o.directory.display().to_string()),
            ),
        ]);
        if let Some(p) = o.rwmixread {
            map.insert("rwmixread".to_string(), Value::from(p));
        }
        if let Some(f) = &o.expect_iops {
            map.insert("expect_iops".to_string(), Value::from(f.text()));
        }
        if let Some(size) = o.disk_size {
            map.insert("disk_size".to_string(), Value::from(size));
        }
        map
    }
}

/// A size as fio writes it: a number with an optional binary suffix
/// (`4k`, `1M`, `1GiB`, `512`), in bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let unit = unit.to_ascii_lowercase();
    let scale = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => KIB,
        "m" => MIB,
        "g" => GIB,
        "t" => 1024 * GIB,
        _ => 0,
    };
    let n: Option<u64> = digits.parse().ok();
    match n.and_then(|n| n.checked_mul(scale)) {
        Some(bytes) if scale > 0 => Ok(bytes),
        _ => Err(format!(
            "'{text}' is not a size: a number of bytes, or with k, m, g or t (KiB, MiB, GiB, TiB), e.g. 4k, 1g"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_fio_writes_them() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(MIB));
        assert_eq!(parse_size("1GiB"), Ok(GIB));
        assert_eq!(parse_size("64mb"), Ok(64 * MIB));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("4x").unwrap_err().contains("'4x' is not a size"));
        assert!(parse_size("k").is_err());
    }

    #[test]
    fn profiles_are_the_reports_and_options_are_checked() {
        let seq = DiskOptions::profile("disk-seqwrite").unwrap();
        assert_eq!((seq.rw.as_str(), seq.bs, seq.iodepth), ("write", MIB, 64));
        let mut o = DiskOptions::profile("disk-randread").unwrap();
        assert_eq!((o.bs, o.iodepth, o.size, o.direct), (4096, 128, GIB, true));
        o.rw = "randtrim".into();
        assert!(o
            .validate()
            .unwrap_err()
            .starts_with("unknown --rw 'randtrim'"));
        o.rw = "randread".into();
        o.rwmixread = Some(70);
        assert!(o.validate().unwrap_err().contains("mixed jobs"));
        o.rw = "randrw".into();
        o.validate().unwrap();
        let args = o.fio_args(
            Path::new("/d/f"),
            Duration::from_secs(5),
            Duration::ZERO,
            Duration::from_secs(1),
        );
        assert!(args.contains(&"--runtime=5000ms".to_string()), "{args:?}");
        assert!(args.contains(&"--rwmixread=70".to_string()));
        assert!(!args.iter().any(|a| a.starts_with("--ramp_time")));
        let warmed = o.fio_args(
            Path::new("/d/f"),
            Duration::from_secs(5),
            Duration::from_secs(2),
            Duration::from_secs(1),
        );
        assert!(
            warmed.contains(&"--ramp_time=2000ms".to_string()),
            "{warmed:?}"
        );
    }
}
