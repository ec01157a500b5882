//! The `script` workload's option: the workload file (sysbench's Lua
//! script, pgbench's `-f`, as a TOML file of weighted operations).

use std::path::PathBuf;

use clap::Args;
use loadcell_core::Family;
use loadcell_workloads::script::{ScriptFile, ScriptWorkload};

use super::WorkloadSpec;

pub(super) const WHAT: &str = "a script workload option";

#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Script workload options (your own operations)")]
pub struct ScriptArgs {
    /// The workload file: weighted SQL, key-value, HTTP, CQL or search
    /// operations with parameters, and what prepare creates (see README,
    /// "Your own workload").
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// `cleanup --force`: drop the file's CQL tables with rows in them.
    #[arg(skip)]
    pub force_cleanup: bool,
}

pub(super) fn catalog() -> Vec<(&'static str, &'static [Family], &'static str)> {
    vec![(
        "script",
        &[
            Family::Sql,
            Family::Kv,
            Family::Http,
            Family::WideColumn,
            Family::Search,
        ],
        "your own operations from a TOML file (--file): weighted SQL statements and transactions (prepared), key-value commands, HTTP requests, CQL statements (prepared) or search queries, with generated parameters; prepare creates, cleanup drops, only the file's own tables, indexes and keys",
    )]
}

pub(super) fn resolve(a: &ScriptArgs) -> Result<WorkloadSpec, String> {
    let Some(path) = &a.file else {
        return Err(
            "workload script needs its file: --file W.toml (see examples/workloads/)".to_string(),
        );
    };
    Ok(WorkloadSpec::Script(ScriptWorkload {
        file: ScriptFile::read(path)?,
        force_cleanup: a.force_cleanup,
    }))
}

/// The option `prepare` and `cleanup` take to find the same file.
pub(super) fn prepare_hint(w: &ScriptWorkload) -> String {
    format!("--file {}", w.file.path.display())
}
