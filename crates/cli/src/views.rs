//! `report` and `compare`: views of result and sweep files.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context as _};
use loadcell_record::sweep::AnyResult;

use crate::args::{CompareArgs, ReportArgs};

/// Exit status when `--fail-if-regressed` finds a regression.
pub const EXIT_REGRESSED: i32 = 3;

/// Writes a view to `path`, or to stdout for `-`.
pub fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if path == Path::new("-") {
        print!("{text}");
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("Wrote {}", path.display());
    Ok(())
}

pub fn report(a: &ReportArgs) -> anyhow::Result<()> {
    refuse_overwriting_results(&[
        ("--html", &a.html),
        ("--markdown", &a.markdown),
        ("--csv", &a.csv),
    ])?;
    let inputs = crate::merge::read_inputs(&a.files, false)?;
    if let Some(path) = &a.html {
        write(path, &loadcell_report::html::render(&inputs))?;
    }
    if let Some(path) = &a.markdown {
        write(path, &loadcell_report::table::markdown(&inputs))?;
    }
    if let Some(path) = &a.csv {
        write(path, &loadcell_report::table::csv(&inputs))?;
    }
    if a.html.is_none() && a.markdown.is_none() && a.csv.is_none() {
        print!("{}", loadcell_report::table::markdown(&inputs));
    }
    Ok(())
}

/// Refuses an output path that holds a loadcell result (an input among
/// them): with `report --html results/*.json` the shell hands the first
/// result to `--html`, which would overwrite it.
pub fn refuse_overwriting_results(outputs: &[(&str, &Option<PathBuf>)]) -> anyhow::Result<()> {
    for (option, out) in outputs {
        let Some(out) = out.as_deref().filter(|o| *o != Path::new("-")) else {
            continue;
        };
        if AnyResult::read_from(out).is_ok() {
            return Err(anyhow!(
                "{option} {} is a loadcell result file and would be overwritten; give \
                 {option} a new file name (e.g. report.html), before the input files",
                out.display()
            ));
        }
    }
    Ok(())
}

pub fn compare(a: &CompareArgs) -> anyhow::Result<i32> {
    let inputs = crate::merge::read_inputs(&a.files, true)?;
    let c = crate::compare::compare(&inputs, a.fail_if_regressed)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&c.json()).expect("JSON values serialize")
        );
    } else {
        print!("{}", c.text());
    }
    Ok(if c.regressed() { EXIT_REGRESSED } else { 0 })
}
