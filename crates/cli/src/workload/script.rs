//! The `script` workload's option: the workload file (sysbench's Lua
//! script, pgbench's `-f`, as a TOML file of weighted operations).

use std::path::PathBuf;

use clap::Args;
use loadcell_core::Family;
use loadcell_workloads::script::{ScriptFile, ScriptWorkload};
use loadcell_workloads::workload::Workload;

use super::{CliFamily, Entry, FamilySpec, WorkloadArgs};

#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Script workload options (your own operations)")]
pub struct ScriptArgs {
    /// The workload file: weighted SQL, key-value, HTTP, CQL or search
    /// operations with parameters, and what prepare creates (see
    /// docs/families/script.md).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
}

impl CliFamily for ScriptArgs {
    const WHAT: &'static str = "a script workload option";
    type Spec = ScriptWorkload;

    fn catalog() -> Vec<Entry> {
        vec![(
            "script",
            &[
                Family::SQL,
                Family::KV,
                Family::HTTP,
                Family::WIDE_COLUMN,
                Family::SEARCH,
            ],
            "your own operations from a TOML file (--file): weighted SQL statements and transactions (prepared), key-value commands, HTTP requests, CQL statements (prepared) or search queries, with generated parameters; prepare creates, cleanup drops, only the file's own tables, indexes and keys",
        )]
    }

    fn resolve(_name: &str, all: &WorkloadArgs, _given: &[String]) -> Result<ScriptWorkload, String> {
        let Some(path) = &all.script.file else {
            return Err(
                "workload script needs its file: --file W.toml (see examples/workloads/)"
                    .to_string(),
            );
        };
        Ok(ScriptWorkload {
            file: ScriptFile::read(path)?,
        })
    }
}

impl FamilySpec for ScriptWorkload {
    fn workload(&self) -> &dyn Workload {
        self
    }

    /// The option `prepare` and `cleanup` take to find the same file.
    fn prepare_hint(&self) -> String {
        format!("--file {}", self.file.path.display())
    }
}

crate::launch::runs_on!(ScriptWorkload: sql, kv, http, search, wide);
