//! Resolves a workload name and its options into a typed spec.

use std::collections::BTreeMap;

use loadcell_drivers::Family;
use loadcell_workloads::distribution::{RandParams, RandType};
use loadcell_workloads::oltp::{OltpKind, OltpOptions};

use crate::args::OltpArgs;

#[derive(Debug, Clone)]
pub enum WorkloadSpec {
    Oltp { kind: OltpKind, opts: OltpOptions },
}

/// Every workload: name, the driver family it needs, one line about it.
pub fn catalog() -> Vec<(&'static str, Family, &'static str)> {
    OltpKind::ALL
        .iter()
        .map(|(name, _, about)| (*name, Family::Sql, *about))
        .collect()
}

impl WorkloadSpec {
    pub fn resolve(name: &str, oltp: &OltpArgs) -> Result<WorkloadSpec, String> {
        if let Some(kind) = OltpKind::parse(name) {
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
            };
            opts.validate()?;
            return Ok(WorkloadSpec::Oltp { kind, opts });
        }
        let names: Vec<_> = catalog().iter().map(|(n, _, _)| *n).collect();
        Err(format!(
            "unknown workload '{name}'; valid workloads: {}",
            names.join(", ")
        ))
    }

    pub fn name(&self) -> &'static str {
        match self {
            WorkloadSpec::Oltp { kind, .. } => kind.name(),
        }
    }

    pub fn family(&self) -> Family {
        match self {
            WorkloadSpec::Oltp { .. } => Family::Sql,
        }
    }

    pub fn options(&self) -> BTreeMap<String, serde_json::Value> {
        match self {
            WorkloadSpec::Oltp { opts, .. } => opts.to_map(),
        }
    }

    /// The options needed to repeat a `prepare` for this spec, for hints.
    pub fn prepare_hint(&self) -> String {
        match self {
            WorkloadSpec::Oltp { opts, .. } => {
                format!("--tables {} --table-size {}", opts.tables, opts.table_size)
            }
        }
    }
}
