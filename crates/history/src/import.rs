//! Importing a results directory: every result and sweep file under it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::store::Recorded;

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Imported {
    /// Result and sweep files recorded.
    pub files: usize,
    /// Their runs: new, and already in the store.
    pub runs: Recorded,
    /// `*.json` files that are not results (a suite's `suite.json`, a
    /// plan, advice, a damaged file), each with why.
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

/// Every `*.json` file under `dir` (`dir` itself when it is a file), in
/// name order, descending into every directory (a suite's `steps/`, a
/// sweep's), never through symbolic links to directories.
pub fn json_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if std::fs::metadata(dir)?.is_file() {
        out.push(dir.to_path_buf());
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&d)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        names.sort();
        let mut subdirs = Vec::new();
        for path in names {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                subdirs.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                // A link to a file counts as the file.
                if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                    out.push(path);
                }
            }
        }
        // Depth first, in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(out)
}
