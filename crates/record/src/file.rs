//! Writing result files: atomically (a crash or Ctrl-C never leaves half a
//! file), durably (flushed before the rename), and never over an existing
//! file unless the user named it.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Where a file goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A path the user named: an existing file there is replaced.
    Named(PathBuf),
    /// A new file in `dir` named `stem.json`, or `stem-2.json`, `stem-3.json`
    /// ... if that exists: runs finishing within the same second, or
    /// running side by side, keep one file each.
    New { dir: PathBuf, stem: String },
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destination::Named(path) => write!(f, "{}", path.display()),
            Destination::New { dir, stem } => write!(f, "{}", dir.join(stem).display()),
        }
    }
}

impl Destination {
    fn dir(&self) -> &Path {
        match self {
            Destination::Named(path) => path.parent().unwrap_or(Path::new("")),
            Destination::New { dir, .. } => dir,
        }
    }
}

/// A temporary file of its own in `dest`'s directory (created if need
/// be), so concurrent writers never share one and the rename stays on one
/// file system.
fn temp_file(dest: &Destination) -> io::Result<tempfile::NamedTempFile> {
    let dir = match dest.dir() {
        d if d.as_os_str().is_empty() => Path::new("."),
        d => d,
    };
    std::fs::create_dir_all(dir)?;
    tempfile::Builder::new()
        .prefix(".loadcell-")
        .suffix(".tmp")
        .tempfile_in(dir)
}

/// Checks that a file can be written to `dest`, before a run whose result
/// would otherwise be lost at its end.
pub fn check_writable(dest: &Destination) -> io::Result<()> {
    temp_file(dest).map(drop)
}

/// Writes `text` to `dest` and returns the path written.
pub fn write_atomically(dest: &Destination, text: &str) -> io::Result<PathBuf> {
    let mut tmp = temp_file(dest)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    match dest {
        Destination::Named(path) => {
            tmp.persist(path).map_err(|e| e.error)?;
            Ok(path.clone())
        }
        Destination::New { dir, stem } => {
            for n in 1u32.. {
                let name = match n {
                    1 => format!("{stem}.json"),
                    n => format!("{stem}-{n}.json"),
                };
                let path = dir.join(name);
                match tmp.persist_noclobber(&path) {
                    Ok(_) => return Ok(path),
                    Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => tmp = e.file,
                    Err(e) => return Err(e.error),
                }
            }
            unreachable!("some suffix is free")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_files_never_replace_existing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let dest = Destination::New {
            dir: dir.path().join("results"),
            stem: "20261123T150000Z-kv".into(),
        };
        let paths: Vec<PathBuf> = ["a", "b", "c"]
            .iter()
            .map(|text| write_atomically(&dest, text).unwrap())
            .collect();
        let names: Vec<_> = paths
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "20261123T150000Z-kv.json",
                "20261123T150000Z-kv-2.json",
                "20261123T150000Z-kv-3.json"
            ]
        );
        assert_eq!(std::fs::read_to_string(&paths[1]).unwrap(), "b");
        // Nothing but the three files is left behind.
        assert_eq!(
            std::fs::read_dir(dir.path().join("results"))
                .unwrap()
                .count(),
            3
        );
    }

    #[test]
    fn an_unwritable_place_is_found_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, "x").unwrap();
        // A directory that cannot be made: a file is in the way.
        let dest = Destination::Named(file.join("r.json"));
        assert!(check_writable(&dest).is_err());
        let fine = Destination::New {
            dir: dir.path().join("new"),
            stem: "s".into(),
        };
        check_writable(&fine).unwrap();
        // Nothing is left behind by the check.
        assert_eq!(
            std::fs::read_dir(dir.path().join("new")).unwrap().count(),
            0
        );
    }

    #[test]
    fn a_named_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        std::fs::write(&path, "old").unwrap();
        let written = write_atomically(&Destination::Named(path.clone()), "new").unwrap();
        assert_eq!(written, path);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
