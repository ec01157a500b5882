//! The OLTP workloads' options (sysbench's names and defaults): parsed,
//! validated into [`OltpOptions`], listed.

use clap::{ArgAction, Args};
use loadcell_core::Family;
use loadcell_workloads::distribution::{RandParams, RandType};
use loadcell_workloads::oltp::{OltpKind, OltpOptions};

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

pub(super) fn options(oltp: &OltpArgs) -> Result<OltpOptions, String> {
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

/// How a workload names these options when it refuses them.
pub(super) const WHAT: &str = "an OLTP (sysbench) option";

pub(super) fn catalog() -> Vec<(&'static str, &'static [Family], &'static str)> {
    OltpKind::ALL
        .iter()
        .map(|(name, _, about)| (*name, &[Family::Sql][..], *about))
        .collect()
}

pub(super) fn prepare_hint(opts: &OltpOptions) -> String {
    format!("--tables {} --table-size {}", opts.tables, opts.table_size)
}
