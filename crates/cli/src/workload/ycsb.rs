//! The record workloads' options (YCSB's names and defaults): parsed,
//! validated into [`YcsbOptions`], listed.

use std::time::SystemTime;

use clap::Args;
use loadcell_core::Family;
use loadcell_engine::Shard;
use loadcell_workloads::workload::Workload;
use loadcell_workloads::ycsb::{Preset, RequestDistribution, YcsbOptions, YcsbWorkload};

use super::{CliFamily, Entry, FamilySpec, WorkloadArgs};

use crate::values::{on_off, positive_u32, positive_u64, positive_usize};

/// YCSB's options for the record workloads (`ycsb-a` … `ycsb-f`, `mix-*`);
/// YCSB's property names (`--recordcount`) work too. Unset options take
/// the workload's defaults.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Record workload options (ycsb-a..ycsb-f, mix-*; YCSB names)")]
pub struct YcsbArgs {
    /// Records prepare loads and run reads (default 1000).
    #[arg(long, alias = "recordcount", value_name = "N", value_parser = positive_u64, allow_negative_numbers = true)]
    pub record_count: Option<u64>,
    /// Operations a run performs when neither --time nor --events is given
    /// (default 1000); also sizes the key space inserts grow into.
    #[arg(long, alias = "operationcount", value_name = "N", value_parser = positive_u64, allow_negative_numbers = true)]
    pub operation_count: Option<u64>,
    /// Fields per record (default 10).
    #[arg(long, alias = "fieldcount", value_name = "N", value_parser = positive_u32, allow_negative_numbers = true)]
    pub field_count: Option<u32>,
    /// Bytes per field (default 100; 10 for the mix-* workloads).
    #[arg(long, alias = "fieldlength", value_name = "BYTES", value_parser = positive_usize, allow_negative_numbers = true)]
    pub field_length: Option<usize>,
    /// Which records operations choose: uniform, zipfian, latest or hotspot
    /// (default: the workload's).
    #[arg(long, alias = "requestdistribution", value_name = "KIND")]
    pub request_distribution: Option<String>,
    /// Longest scan in records; lengths are uniform from 1 (default 1000, 100
    /// for ycsb-e, as in YCSB).
    #[arg(long, alias = "maxscanlength", value_name = "N", value_parser = positive_u64, allow_negative_numbers = true)]
    pub max_scan_length: Option<u64>,
    /// hotspot: the fraction of records that are hot (default 0.2).
    #[arg(
        long,
        alias = "hotspotdatafraction",
        value_name = "FRACTION",
        allow_negative_numbers = true
    )]
    pub hotspot_data_fraction: Option<f64>,
    /// hotspot: the fraction of operations on hot records (default 0.8).
    #[arg(
        long,
        alias = "hotspotopnfraction",
        value_name = "FRACTION",
        allow_negative_numbers = true
    )]
    pub hotspot_opn_fraction: Option<f64>,
    /// Updates write every field instead of one (default off; on for mix-*).
    #[arg(long, alias = "writeallfields", value_name = "on|off", value_parser = on_off)]
    pub write_all_fields: Option<bool>,
}

fn options(preset: Preset, a: &YcsbArgs) -> Result<YcsbOptions, String> {
    let d = preset.options();
    let opts = YcsbOptions {
        request_distribution: match &a.request_distribution {
            Some(r) => RequestDistribution::parse(r)?,
            None => d.request_distribution,
        },
        record_count: a.record_count.unwrap_or(d.record_count),
        operation_count: a.operation_count.unwrap_or(d.operation_count),
        field_count: a.field_count.unwrap_or(d.field_count),
        field_length: a.field_length.unwrap_or(d.field_length),
        max_scan_length: a.max_scan_length.unwrap_or(d.max_scan_length),
        hotspot_data_fraction: a.hotspot_data_fraction.unwrap_or(d.hotspot_data_fraction),
        hotspot_opn_fraction: a.hotspot_opn_fraction.unwrap_or(d.hotspot_opn_fraction),
        write_all_fields: a.write_all_fields.unwrap_or(d.write_all_fields),
        ..d
    };
    opts.validate()?;
    Ok(opts)
}

impl CliFamily for YcsbArgs {
    const WHAT: &'static str = "a record workload (ycsb, mix) option";
    type Spec = YcsbWorkload;

    fn catalog() -> Vec<Entry> {
        Preset::ALL
            .iter()
            .map(|(name, _, about)| (*name, &[Family::SQL, Family::KV][..], *about))
            .collect()
    }

    fn names(name: &str) -> bool {
        Preset::parse(name).is_some()
    }

    fn resolve(name: &str, all: &WorkloadArgs, _given: &[String]) -> Result<YcsbWorkload, String> {
        let preset = Preset::parse(name).expect("names() said it is a preset");
        Ok(YcsbWorkload {
            preset,
            opts: options(preset, &all.ycsb)?,
        })
    }
}

impl FamilySpec for YcsbWorkload {
    fn workload(&self) -> &dyn Workload {
        self
    }

    fn prepare_hint(&self) -> String {
        let o = &self.opts;
        format!(
            "--record-count {} --field-count {} --field-length {}",
            o.record_count, o.field_count, o.field_length
        )
    }

    /// YCSB's `--operation-count` (one operation per event), given or,
    /// without `--time`, its default.
    fn implied_events(&self, all: &WorkloadArgs, _sessions: u64, timed: bool) -> Option<u64> {
        all.ycsb
            .operation_count
            .or_else(|| (!timed).then_some(self.opts.operation_count))
    }

    /// Inserts continue the key sequence: each shard takes its share.
    fn take_insert_share(&mut self, shard: Shard, _start_at: Option<SystemTime>) {
        self.opts.shard = Some(shard);
    }
}

crate::launch::runs_on!(YcsbWorkload: sql, kv, wide);
