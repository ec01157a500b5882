//! The OLTP workloads' options (sysbench's names and defaults): parsed,
//! validated into [`OltpOptions`], listed.

use std::time::SystemTime;

use clap::{ArgAction, Args};
use loadcell_core::Family;
use loadcell_engine::Shard;
use loadcell_workloads::distribution::{RandParams, RandType};
use loadcell_workloads::oltp::{InsertShare, OltpKind, OltpOptions, OltpWorkload};
use loadcell_workloads::workload::Workload;

use super::{CliFamily, Entry, FamilySpec, WorkloadArgs};

use crate::values::{on_off, positive_u32, positive_u64};

/// sysbench's OLTP options; underscore spellings are accepted too.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "OLTP workload options (sysbench names and defaults)")]
pub struct OltpArgs {
    /// Number of tables.
    #[arg(long, value_name = "N", default_value = "1", value_parser = positive_u32, allow_negative_numbers = true)]
    pub tables: u32,
    /// Rows per table.
    #[arg(long, alias = "table_size", value_name = "N", default_value = "10000", value_parser = positive_u64, allow_negative_numbers = true)]
    pub table_size: u64,
    /// Rows per range query.
    #[arg(long, alias = "range_size", value_name = "N", default_value = "100", value_parser = positive_u64, allow_negative_numbers = true)]
    pub range_size: u64,
    #[arg(long, alias = "point_selects", value_name = "N", default_value = "10")]
    pub point_selects: u32,
    #[arg(long, alias = "simple_ranges", value_name = "N", default_value = "1")]
    pub simple_ranges: u32,
    #[arg(long, alias = "sum_ranges", value_name = "N", default_value = "1")]
    pub sum_ranges: u32,
    #[arg(long, alias = "order_ranges", value_name = "N", default_value = "1")]
    pub order_ranges: u32,
    #[arg(long, alias = "distinct_ranges", value_name = "N", default_value = "1")]
    pub distinct_ranges: u32,
    #[arg(long, alias = "index_updates", value_name = "N", default_value = "1")]
    pub index_updates: u32,
    #[arg(
        long,
        alias = "non_index_updates",
        value_name = "N",
        default_value = "1"
    )]
    pub non_index_updates: u32,
    #[arg(long, alias = "delete_inserts", value_name = "N", default_value = "1")]
    pub delete_inserts: u32,
    /// Run the range queries at all.
    #[arg(long, alias = "range_selects", value_name = "on|off", default_value = "on", value_parser = on_off, action = ArgAction::Set)]
    pub range_selects: bool,
    /// Leave out BEGIN/COMMIT.
    #[arg(long, alias = "skip_trx", value_name = "on|off", default_value = "off", num_args = 0..=1, default_missing_value = "on", value_parser = on_off)]
    pub skip_trx: bool,
    /// Let the database assign ids (off: oltp_insert uses unique random ids).
    #[arg(long, alias = "auto_inc", value_name = "on|off", default_value = "on", value_parser = on_off, action = ArgAction::Set)]
    pub auto_inc: bool,
    /// Create the secondary index k_N on prepare.
    #[arg(long, alias = "create_secondary", value_name = "on|off", default_value = "on", value_parser = on_off)]
    pub create_secondary: bool,
    /// Id distribution: uniform, gaussian, special (sysbench 1.0's default), zipfian, pareto.
    #[arg(
        long,
        alias = "rand_type",
        value_name = "TYPE",
        default_value = "special"
    )]
    pub rand_type: String,
    #[arg(long, alias = "rand_spec_iter", value_name = "N", default_value = "12")]
    pub rand_spec_iter: u32,
    #[arg(long, alias = "rand_spec_pct", value_name = "PCT", default_value = "1")]
    pub rand_spec_pct: f64,
    #[arg(
        long,
        alias = "rand_spec_res",
        value_name = "PCT",
        default_value = "75"
    )]
    pub rand_spec_res: f64,
    #[arg(
        long,
        alias = "rand_zipfian_exp",
        value_name = "EXP",
        default_value = "0.8"
    )]
    pub rand_zipfian_exp: f64,
    #[arg(long, alias = "rand_pareto_h", value_name = "H", default_value = "0.2")]
    pub rand_pareto_h: f64,
}

fn options(oltp: &OltpArgs) -> Result<OltpOptions, String> {
    let opts = OltpOptions {
        tables: oltp.tables,
        table_size: oltp.table_size,
        range_size: oltp.range_size,
        point_selects: oltp.point_selects,
        simple_ranges: oltp.simple_ranges,
        sum_ranges: oltp.sum_ranges,
        order_ranges: oltp.order_ranges,
        distinct_ranges: oltp.distinct_ranges,
        index_updates: oltp.index_updates,
        non_index_updates: oltp.non_index_updates,
        delete_inserts: oltp.delete_inserts,
        range_selects: oltp.range_selects,
        skip_trx: oltp.skip_trx,
        auto_inc: oltp.auto_inc,
        create_secondary: oltp.create_secondary,
        rand_type: RandType::parse(&oltp.rand_type)?,
        rand: RandParams {
            spec_iter: oltp.rand_spec_iter,
            spec_pct: oltp.rand_spec_pct,
            spec_res: oltp.rand_spec_res,
            zipfian_exp: oltp.rand_zipfian_exp,
            pareto_h: oltp.rand_pareto_h,
        },
        // Set from --shard once the run's shard is known.
        shard: None,
    };
    opts.validate()?;
    Ok(opts)
}

impl CliFamily for OltpArgs {
    const WHAT: &'static str = "an OLTP (sysbench) option";
    type Spec = OltpWorkload;

    fn catalog() -> Vec<Entry> {
        OltpKind::ALL
            .iter()
            .map(|(name, _, about)| (*name, &[Family::SQL][..], *about))
            .collect()
    }

    fn names(name: &str) -> bool {
        OltpKind::parse(name).is_some()
    }

    fn resolve(name: &str, all: &WorkloadArgs, _given: &[String]) -> Result<OltpWorkload, String> {
        Ok(OltpWorkload {
            kind: OltpKind::parse(name).expect("names() said it is an OLTP workload"),
            opts: options(&all.oltp)?,
        })
    }
}

impl FamilySpec for OltpWorkload {
    fn workload(&self) -> &dyn Workload {
        self
    }

    fn prepare_hint(&self) -> String {
        format!(
            "--tables {} --table-size {}",
            self.opts.tables, self.opts.table_size
        )
    }

    /// `--auto-inc=off` inserts continue one id permutation: each shard
    /// takes its share of it.
    fn take_insert_share(&mut self, shard: Shard, start_at: Option<SystemTime>) {
        let seed = start_at
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        self.opts.shard = Some(InsertShare {
            shard,
            seed,
            first: 0,
        });
    }

    /// `oltp_insert --auto-inc=off` takes its ids from the step's own part
    /// of one permutation, so that no step inserts an id an earlier one
    /// did (a duplicate key ends a run). Sharded, the permutation is the
    /// one the shards' `--start-at` seeded; otherwise `seed`'s.
    fn take_insert_step(&mut self, step: usize, steps: usize, seed: u64) {
        let share = self.opts.shard.get_or_insert(InsertShare {
            shard: Shard::new(0, 1).expect("shard 0 of 1 exists"),
            seed,
            first: 0,
        });
        share.first = (((step as u64) << 32) / steps as u64) as u32;
    }
}

crate::launch::runs_on!(OltpWorkload: sql);
