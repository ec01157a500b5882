//! What the report views take: result files, each a single run or a
//! sweep, with the name it was given by.

use std::path::Path;

use loadcell_record::hdrlog;
use loadcell_record::result::RunResult;
use loadcell_record::sweep::{AnyResult, SweepResult};

/// One file given to a report.
#[derive(Debug, Clone)]
pub struct Input {
    /// How the file is named in the report (usually its file name).
    pub name: String,
    pub result: AnyResult,
}

impl Input {
    pub fn new(name: impl Into<String>, result: AnyResult) -> Input {
        Input {
            name: name.into(),
            result,
        }
    }

    pub fn run(name: impl Into<String>, run: RunResult) -> Input {
        Input::new(name, AnyResult::Run(Box::new(run)))
    }

    pub fn sweep(name: impl Into<String>, sweep: SweepResult) -> Input {
        Input::new(name, AnyResult::Sweep(Box::new(sweep)))
    }

    /// Reads a result or sweep file, or rebuilds a partial result from a
    /// run's interval log (`.hlog`, a run killed before it wrote its
    /// result); the input is named by the file name.
    pub fn read(path: &Path) -> Result<Input, String> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let result = if path.extension().is_some_and(|e| e == "hlog") {
            let log =
                std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            AnyResult::Run(Box::new(hdrlog::rebuild(&log, &name)?))
        } else {
            AnyResult::read_from(path)?
        };
        Ok(Input::new(name, result))
    }

    pub fn as_run(&self) -> Option<&RunResult> {
        match &self.result {
            AnyResult::Run(r) => Some(r),
            AnyResult::Sweep(_) => None,
        }
    }

    pub fn as_sweep(&self) -> Option<&SweepResult> {
        match &self.result {
            AnyResult::Sweep(s) => Some(s),
            AnyResult::Run(_) => None,
        }
    }
}
