//! What the report views take: result files, each a single run or a
//! sweep, with the name it was given by.

use std::path::Path;

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

    /// Reads a result or sweep file; the input is named by the file name.
    pub fn read(path: &Path) -> Result<Input, String> {
        let result = AnyResult::read_from(path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
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
