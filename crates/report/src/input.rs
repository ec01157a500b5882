//! What the report views take: result files, each a single run or a
//! sweep, with the name it was given by.

use std::path::Path;

use loadcell_record::fine::FullResolution;
use loadcell_record::hdrlog;
use loadcell_record::result::RunResult;
use loadcell_record::sweep::{AnyResult, SweepResult};

/// One file given to a report.
#[derive(Debug, Clone)]
pub struct Input {
    /// How the file is named in the report (usually its file name).
    pub name: String,
    pub result: AnyResult,
    /// A run's every interval: from its interval log when the result's
    /// own intervals were merged (a long run), else from the result.
    pub full: Option<FullResolution>,
    /// Why a merged result's interval log was not read.
    pub note: Option<String>,
    /// Rebuilt from an interval log alone: the events and their times are
    /// known, the configuration, operations and errors are not (their
    /// zeros in the result are no measurement; views say `unknown`).
    pub rebuilt: bool,
}

impl Input {
    pub fn new(name: impl Into<String>, result: AnyResult) -> Input {
        let full = match &result {
            AnyResult::Run(r) => FullResolution::of_result(r),
            AnyResult::Sweep(_) => None,
        };
        Input {
            name: name.into(),
            result,
            full,
            note: None,
            rebuilt: false,
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
        if path.extension().is_some_and(|e| e == "hlog") {
            let log =
                std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let r = hdrlog::rebuild(&log, &name)?;
            let full = FullResolution::of_log(&log, &name, &r).ok();
            return Ok(Input {
                full,
                rebuilt: true,
                ..Input::run(name, r)
            });
        }
        Ok(match AnyResult::read_from(path)? {
            AnyResult::Run(r) => {
                let (full, note) = FullResolution::of_run(path, &r);
                Input {
                    name,
                    result: AnyResult::Run(r),
                    full,
                    note,
                    rebuilt: false,
                }
            }
            sweep => Input::new(name, sweep),
        })
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
