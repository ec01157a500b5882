//! YCSB's options: the core workloads' presets, the request distributions,
//! the operation proportions and the limits that keep them sane.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use loadcell_engine::Shard;

/// The SQL table, as YCSB's JDBC binding names it.
pub const TABLE: &str = "usertable";
/// The sorted set indexing every key, as YCSB's Redis binding names it.
pub const INDEX_KEY: &str = "_indices";
/// The `workload` column of this family's marker rows.
pub(super) const MARKER_WORKLOAD: &str = "ycsb";
/// Largest `--record-count` (a trillion: far beyond any data set, and far
/// from overflowing key arithmetic).
pub const MAX_RECORDS: u64 = 1_000_000_000_000;
/// Largest `--field-count` (SQL databases limit the columns of a table).
pub const MAX_FIELDS: u32 = 1000;
/// Largest `--field-length`.
pub const MAX_FIELD_LENGTH: usize = 1 << 20;
/// Largest record (`--field-count` × `--field-length`).
pub const MAX_RECORD_BYTES: usize = 16 << 20;
/// YCSB's zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// The workloads, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    A,
    B,
    C,
    D,
    E,
    F,
    MixWrite,
    Mix50_50,
    Mix80_20,
    Mix95_5,
    MixRead,
}

impl Preset {
    pub const ALL: [(&'static str, Preset, &'static str); 11] = [
        (
            "ycsb-a",
            Preset::A,
            "YCSB workload A (update heavy): 50% read, 50% update, zipfian",
        ),
        (
            "ycsb-b",
            Preset::B,
            "YCSB workload B (read mostly): 95% read, 5% update, zipfian",
        ),
        (
            "ycsb-c",
            Preset::C,
            "YCSB workload C (read only): 100% read, zipfian",
        ),
        (
            "ycsb-d",
            Preset::D,
            "YCSB workload D (read latest): 95% read, 5% insert, latest",
        ),
        (
            "ycsb-e",
            Preset::E,
            "YCSB workload E (short ranges): 95% scan of 1-100 records, 5% insert, zipfian",
        ),
        (
            "ycsb-f",
            Preset::F,
            "YCSB workload F: 50% read, 50% read-modify-write, zipfian",
        ),
        (
            "mix-write",
            Preset::MixWrite,
            "100% write of 100-byte records (10 fields of 10 bytes), uniform keys",
        ),
        (
            "mix-50-50",
            Preset::Mix50_50,
            "50% read, 50% write of 100-byte records, uniform keys",
        ),
        (
            "mix-80-20",
            Preset::Mix80_20,
            "80% read, 20% write of 100-byte records, uniform keys",
        ),
        (
            "mix-95-5",
            Preset::Mix95_5,
            "95% read, 5% write of 100-byte records, uniform keys",
        ),
        (
            "mix-read",
            Preset::MixRead,
            "100% read of 100-byte records, uniform keys",
        ),
    ];

    pub fn parse(name: &str) -> Option<Preset> {
        Self::ALL
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, p, _)| *p)
    }

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, p, _)| *p == self)
            .expect("all presets listed")
            .0
    }

    /// The S8 mixes (as opposed to YCSB's lettered workloads).
    pub fn is_mix(self) -> bool {
        matches!(
            self,
            Preset::MixWrite
                | Preset::Mix50_50
                | Preset::Mix80_20
                | Preset::Mix95_5
                | Preset::MixRead
        )
    }

    /// The preset's options before any command-line override: YCSB's
    /// defaults and workload files, or S8's 100-byte records.
    pub fn options(self) -> YcsbOptions {
        let p = |read, update, insert, scan, read_modify_write| Proportions {
            read,
            update,
            insert,
            scan,
            read_modify_write,
        };
        let (proportions, distribution) = match self {
            Preset::A => (p(50, 50, 0, 0, 0), RequestDistribution::Zipfian),
            Preset::B => (p(95, 5, 0, 0, 0), RequestDistribution::Zipfian),
            Preset::C => (p(100, 0, 0, 0, 0), RequestDistribution::Zipfian),
            Preset::D => (p(95, 0, 5, 0, 0), RequestDistribution::Latest),
            Preset::E => (p(0, 0, 5, 95, 0), RequestDistribution::Zipfian),
            Preset::F => (p(50, 0, 0, 0, 50), RequestDistribution::Zipfian),
            Preset::MixWrite => (p(0, 100, 0, 0, 0), RequestDistribution::Uniform),
            Preset::Mix50_50 => (p(50, 50, 0, 0, 0), RequestDistribution::Uniform),
            Preset::Mix80_20 => (p(80, 20, 0, 0, 0), RequestDistribution::Uniform),
            Preset::Mix95_5 => (p(95, 5, 0, 0, 0), RequestDistribution::Uniform),
            Preset::MixRead => (p(100, 0, 0, 0, 0), RequestDistribution::Uniform),
        };
        let mix = self.is_mix();
        YcsbOptions {
            proportions,
            request_distribution: distribution,
            field_length: if mix { 10 } else { 100 },
            // A write in the mixes is a whole record, as in S8's model.
            write_all_fields: mix,
            // CoreWorkload's default is 1000; YCSB's workloade sets 100.
            max_scan_length: if self == Preset::E { 100 } else { 1000 },
            ..YcsbOptions::default()
        }
    }
}

/// How records are chosen (YCSB's `requestdistribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestDistribution {
    Uniform,
    Zipfian,
    Latest,
    Hotspot,
}

impl RequestDistribution {
    pub const NAMES: &'static [&'static str] = &["uniform", "zipfian", "latest", "hotspot"];

    pub fn parse(s: &str) -> Result<RequestDistribution, String> {
        Ok(match s {
            "uniform" => RequestDistribution::Uniform,
            "zipfian" => RequestDistribution::Zipfian,
            "latest" => RequestDistribution::Latest,
            "hotspot" => RequestDistribution::Hotspot,
            _ => {
                return Err(format!(
                    "unknown --request-distribution '{s}': expected one of {}",
                    Self::NAMES.join(", ")
                ))
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// The operation mix, in percent (any weights work; the presets use
/// percent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Proportions {
    pub read: u32,
    pub update: u32,
    pub insert: u32,
    pub scan: u32,
    pub read_modify_write: u32,
}

impl Proportions {
    /// Weights indexed like [`OPS`].
    pub(super) fn weights(&self) -> [u32; 5] {
        [
            self.read,
            self.update,
            self.insert,
            self.scan,
            self.read_modify_write,
        ]
    }

    /// The sum of the weights.
    pub fn total(&self) -> u64 {
        self.weights().iter().map(|&w| w as u64).sum()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct YcsbOptions {
    pub proportions: Proportions,
    pub request_distribution: RequestDistribution,
    pub record_count: u64,
    pub operation_count: u64,
    pub field_count: u32,
    pub field_length: usize,
    pub max_scan_length: u64,
    pub hotspot_data_fraction: f64,
    pub hotspot_opn_fraction: f64,
    pub write_all_fields: bool,
    /// This process's shard of a run split over several (`--shard I/N`):
    /// its inserts take key numbers I, I + N, I + 2N… after the records,
    /// so shards never insert the same key and together insert the keys
    /// one process would have. Not an option of the workload: shards of
    /// one run record the same options.
    pub shard: Option<Shard>,
}

impl Default for YcsbOptions {
    /// YCSB's `CoreWorkload` defaults (its read/update 95/5 uniform mix).
    fn default() -> Self {
        YcsbOptions {
            proportions: Proportions {
                read: 95,
                update: 5,
                ..Proportions::default()
            },
            request_distribution: RequestDistribution::Uniform,
            record_count: 1000,
            operation_count: 1000,
            field_count: 10,
            field_length: 100,
            // CoreWorkload's maxscanlength default.
            max_scan_length: 1000,
            hotspot_data_fraction: 0.2,
            hotspot_opn_fraction: 0.8,
            write_all_fields: false,
            shard: None,
        }
    }
}

impl YcsbOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.proportions.total() == 0 {
            return Err("the operation mix is empty: every proportion is 0".into());
        }
        if self.record_count == 0 || self.record_count > MAX_RECORDS {
            return Err(format!(
                "--record-count must be between 1 and {MAX_RECORDS}"
            ));
        }
        if self.operation_count == 0 {
            return Err("--operation-count must be at least 1".into());
        }
        if !(1..=MAX_FIELDS).contains(&self.field_count) {
            return Err(format!("--field-count must be between 1 and {MAX_FIELDS}"));
        }
        if !(1..=MAX_FIELD_LENGTH).contains(&self.field_length) {
            return Err(format!(
                "--field-length must be between 1 and {MAX_FIELD_LENGTH} bytes"
            ));
        }
        if self.record_bytes() > MAX_RECORD_BYTES {
            return Err(format!(
                "a record of {} of {} is {} bytes; at most {MAX_RECORD_BYTES} \
                 (lower --field-count or --field-length)",
                loadcell_core::words::counted(self.field_count as u64, "field"),
                self.field_length,
                self.record_bytes()
            ));
        }
        if self.max_scan_length == 0 {
            return Err("--max-scan-length must be at least 1".into());
        }
        for (name, v) in [
            ("--hotspot-data-fraction", self.hotspot_data_fraction),
            ("--hotspot-opn-fraction", self.hotspot_opn_fraction),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{name} must be between 0 and 1"));
            }
        }
        Ok(())
    }

    /// Whether the mix has scans (which not every driver can do).
    pub fn needs_scan(&self) -> bool {
        self.proportions.scan > 0
    }

    /// Bytes of one record's field values.
    pub fn record_bytes(&self) -> usize {
        self.field_count as usize * self.field_length
    }

    /// Every option as resolved, for the result file (YCSB's property
    /// names, in snake case).
    pub fn to_map(&self) -> BTreeMap<String, Value> {
        let total = self.proportions.total() as f64;
        let share = |w: u32| w as f64 / total;
        let p = &self.proportions;
        let v = json!({
            "read_proportion": share(p.read),
            "update_proportion": share(p.update),
            "insert_proportion": share(p.insert),
            "scan_proportion": share(p.scan),
            "read_modify_write_proportion": share(p.read_modify_write),
            "request_distribution": self.request_distribution.as_str(),
            "record_count": self.record_count,
            "operation_count": self.operation_count,
            "field_count": self.field_count,
            "field_length": self.field_length,
            "max_scan_length": self.max_scan_length,
            "scan_length_distribution": "uniform",
            "hotspot_data_fraction": self.hotspot_data_fraction,
            "hotspot_opn_fraction": self.hotspot_opn_fraction,
            "write_all_fields": self.write_all_fields,
            "read_all_fields": true,
            "insert_order": "hashed",
            "zipfian_constant": ZIPFIAN_CONSTANT,
        });
        serde_json::from_value(v).expect("an object")
    }
}

// Operation kinds, indexes into `OPS`.
