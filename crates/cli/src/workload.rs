//! Resolves a workload name and its options into a typed spec.

use std::sync::Arc;

use loadcell_core::Family;
use loadcell_workloads::dataset::{DataSet, DataSetWorkload};
use loadcell_workloads::distribution::{RandParams, RandType};
use loadcell_workloads::kv::{CommandTemplate, DataSize, KeyPattern, KvOptions, KvWorkload};
use loadcell_workloads::oltp::{OltpKind, OltpOptions, OltpWorkload};
use loadcell_workloads::workload::Workload;
use loadcell_workloads::ycsb::{Preset, RequestDistribution, YcsbOptions, YcsbWorkload};

use crate::args::{KvArgs, OltpArgs, YcsbArgs};

/// Every workload, typed. `Dataset` is `kv --dataset FILE`.
#[derive(Debug, Clone)]
pub enum WorkloadSpec {
    Oltp(OltpWorkload),
    Kv(KvWorkload),
    Dataset(DataSetWorkload),
    Ycsb(YcsbWorkload),
}

/// The families' names, as `loadcell list` shows what a workload runs on.
pub fn families_label(families: &[Family]) -> String {
    let names: Vec<_> = families.iter().map(|f| f.as_str()).collect();
    names.join(", ")
}

const KV_ABOUT: &str = "memtier_benchmark-style SET:GET mix or weighted command templates, key patterns, value sizes, pipelining";

/// Every workload: name, the drivers it needs, one line about it.
pub fn catalog() -> Vec<(&'static str, &'static [Family], &'static str)> {
    const SQL: &[Family] = &[Family::Sql];
    const KV: &[Family] = &[Family::Kv];
    const RECORDS: &[Family] = &[Family::Sql, Family::Kv];
    let mut all: Vec<_> = OltpKind::ALL
        .iter()
        .map(|(name, _, about)| (*name, SQL, *about))
        .collect();
    all.push(("kv", KV, KV_ABOUT));
    all.extend(
        Preset::ALL
            .iter()
            .map(|(name, _, about)| (*name, RECORDS, *about)),
    );
    all
}

impl WorkloadSpec {
    pub fn resolve(
        name: &str,
        oltp: &OltpArgs,
        kv: &KvArgs,
        ycsb: &YcsbArgs,
    ) -> Result<WorkloadSpec, String> {
        let refuse = |flags: Vec<&'static str>, what: &str| match flags.first() {
            Some(flag) => Err(format!(
                "{flag} is {what}; workload {name} does not take it (see `loadcell list`)"
            )),
            None => Ok(()),
        };
        if let Some(kind) = OltpKind::parse(name) {
            refuse(kv.given(), "a key-value option")?;
            refuse(ycsb.given(), "a record workload (ycsb, mix) option")?;
            return Ok(WorkloadSpec::Oltp(OltpWorkload {
                kind,
                opts: oltp_options(oltp)?,
            }));
        }
        if name == "kv" {
            refuse(ycsb.given(), "a record workload (ycsb, mix) option")?;
            if let Some(path) = &kv.dataset {
                // The file declares keys and values; only the access options apply.
                if let Some(flag) = kv.given().into_iter().find(|f| {
                    !matches!(
                        *f,
                        "--dataset"
                            | "--ratio"
                            | "--pipeline"
                            | "--requests"
                            | "--distinct-client-seed"
                            | "--randomize"
                    )
                }) {
                    return Err(format!(
                        "{flag} does not apply with --dataset: the data set file declares the keys and values \
                         (with a data set, kv takes --ratio, --pipeline, --requests, --distinct-client-seed and --randomize)"
                    ));
                }
                return Ok(WorkloadSpec::Dataset(DataSetWorkload {
                    set: Arc::new(DataSet::load(path)?),
                    opts: kv_options(kv)?,
                }));
            }
            return Ok(WorkloadSpec::Kv(KvWorkload {
                opts: kv_options(kv)?,
            }));
        }
        if let Some(preset) = Preset::parse(name) {
            refuse(kv.given(), "a key-value (kv workload) option")?;
            return Ok(WorkloadSpec::Ycsb(YcsbWorkload {
                preset,
                opts: ycsb_options(preset, ycsb)?,
            }));
        }
        let names: Vec<_> = catalog().iter().map(|(n, _, _)| *n).collect();
        Err(format!(
            "unknown workload '{name}'; valid workloads: {}",
            names.join(", ")
        ))
    }

    /// The workload, whatever its type, for what does not depend on the
    /// driver: its name, families, refusals and options.
    pub fn workload(&self) -> &dyn Workload {
        match self {
            WorkloadSpec::Oltp(w) => w,
            WorkloadSpec::Kv(w) => w,
            WorkloadSpec::Dataset(w) => w,
            WorkloadSpec::Ycsb(w) => w,
        }
    }

    pub fn name(&self) -> &'static str {
        self.workload().name()
    }

    /// The options needed to repeat a `prepare` for this spec, for hints.
    pub fn prepare_hint(&self) -> String {
        match self {
            WorkloadSpec::Oltp(OltpWorkload { opts, .. }) => {
                format!("--tables {} --table-size {}", opts.tables, opts.table_size)
            }
            WorkloadSpec::Kv(KvWorkload { opts }) => {
                format!(
                    "--key-minimum {} --key-maximum {}",
                    opts.key_min, opts.key_max
                )
            }
            WorkloadSpec::Dataset(DataSetWorkload { set, .. }) => format!("--dataset {}", set.path),
            WorkloadSpec::Ycsb(YcsbWorkload { opts, .. }) => {
                format!(
                    "--record-count {} --field-count {} --field-length {}",
                    opts.record_count, opts.field_count, opts.field_length
                )
            }
        }
    }
}

fn ycsb_options(preset: Preset, a: &YcsbArgs) -> Result<YcsbOptions, String> {
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

fn oltp_options(oltp: &OltpArgs) -> Result<OltpOptions, String> {
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
    Ok(opts)
}

fn kv_options(a: &KvArgs) -> Result<KvOptions, String> {
    let d = KvOptions::default();
    let (ratio_set, ratio_get) = match &a.ratio {
        None => (d.ratio_set, d.ratio_get),
        Some(r) => {
            let bad = || format!("--ratio '{r}' must be SET:GET with whole numbers, e.g. 1:10");
            let (s, g) = r.split_once(':').ok_or_else(bad)?;
            (
                s.trim().parse().map_err(|_| bad())?,
                g.trim().parse().map_err(|_| bad())?,
            )
        }
    };
    let (pattern_set, pattern_get) = match &a.key_pattern {
        None => (d.pattern_set, d.pattern_get),
        Some(p) => KeyPattern::parse_pair(p)?,
    };
    let sizes_given = [
        a.data_size.is_some(),
        a.data_size_range.is_some(),
        a.data_size_list.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if sizes_given > 1 {
        return Err(
            "give only one of -d/--data-size, --data-size-range and --data-size-list".into(),
        );
    }
    let data_size = match (&a.data_size, &a.data_size_range, &a.data_size_list) {
        (Some(n), _, _) if *n <= 0 => {
            return Err(format!(
                "-d/--data-size {n}: a value size must be at least 1 byte"
            ))
        }
        (Some(n), _, _) => DataSize::Fixed(*n as usize),
        (_, Some(r), _) => DataSize::parse_range(r)?,
        (_, _, Some(l)) => DataSize::parse_list(l)?,
        _ => d.data_size.clone(),
    };
    if !a.command_ratio.is_empty() && a.command_ratio.len() != a.command.len() {
        return Err(format!(
            "{} --command-ratio {} for {} --command {}: give one per command",
            a.command_ratio.len(),
            loadcell_core::words::plural(a.command_ratio.len() as u64, "value"),
            a.command.len(),
            loadcell_core::words::plural(a.command.len() as u64, "template")
        ));
    }
    if !a.command_key_pattern.is_empty() && a.command_key_pattern.len() != a.command.len() {
        return Err(format!(
            "{} --command-key-pattern {} for {} --command {}: give one per command",
            a.command_key_pattern.len(),
            loadcell_core::words::plural(a.command_key_pattern.len() as u64, "value"),
            a.command.len(),
            loadcell_core::words::plural(a.command.len() as u64, "template")
        ));
    }
    let commands = a
        .command
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let weight = a.command_ratio.get(i).copied().unwrap_or(1);
            let pattern = match a.command_key_pattern.get(i) {
                Some(p) => KeyPattern::parse_pair(&format!("{p}:{p}"))?.0,
                None => KeyPattern::Random,
            };
            CommandTemplate::parse(text, weight, pattern)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let opts = KvOptions {
        ratio_set,
        ratio_get,
        key_prefix: a.key_prefix.clone().unwrap_or(d.key_prefix),
        key_min: a.key_minimum.unwrap_or(d.key_min),
        key_max: a.key_maximum.unwrap_or(d.key_max),
        pattern_set,
        pattern_get,
        key_median: a.key_median,
        key_stddev: a.key_stddev,
        key_zipf_exp: a.key_zipf_exp.unwrap_or(d.key_zipf_exp),
        data_size,
        random_data: a.random_data,
        distinct_client_seed: a.distinct_client_seed,
        pipeline: a.pipeline.unwrap_or(d.pipeline),
        commands,
        verify: a.verify,
    };
    opts.validate()?;
    Ok(opts)
}
