//! Writing result files: atomically (a crash or Ctrl-C never leaves half a
//! file), durably (flushed before the rename), and never over an existing
//! file unless the user named it. A named path that is a device or a pipe
//! (`/dev/null`, `/dev/stdout`) is written to, not replaced, and a named
//! symbolic link keeps pointing where it did: the file it names is the one
//! replaced.

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

/// What a path the user named really is.
enum NamedTarget {
    /// A regular file, or nothing yet: replaced by a rename.
    File(PathBuf),
    /// A device, a pipe or a socket: written to in place.
    Special,
}

/// Follows a symbolic link to the file it names (existing or not), so the
/// rename replaces that file and not the link.
fn named_target(path: &Path) -> io::Result<NamedTarget> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("{} is a directory", path.display()),
        )),
        Ok(meta) if !meta.is_file() => Ok(NamedTarget::Special),
        Ok(_) => Ok(NamedTarget::File(std::fs::canonicalize(path)?)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A link to a file not there yet: create that file.
            match std::fs::read_link(path) {
                Ok(to) => Ok(NamedTarget::File(parent(path).join(to))),
                Err(_) => Ok(NamedTarget::File(path.to_path_buf())),
            }
        }
        Err(e) => Err(e),
    }
}

/// A temporary file of its own in `dir` (created if need be), so
/// concurrent writers never share one and the rename stays on one file
/// system.
fn temp_file(dir: &Path) -> io::Result<tempfile::NamedTempFile> {
    let dir = match dir {
        d if d.as_os_str().is_empty() => Path::new("."),
        d => d,
    };
    std::fs::create_dir_all(dir)?;
    tempfile::Builder::new()
        .prefix(".loadcell-")
        .suffix(".tmp")
        .tempfile_in(dir)
}

fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

/// Whether this process may write to `path`, without opening it (opening a
/// pipe for writing waits for its reader).
fn may_write(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: access reads the NUL-terminated path and nothing else.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Checks that a file can be written to `dest`, before a run whose result
/// would otherwise be lost at its end.
pub fn check_writable(dest: &Destination) -> io::Result<()> {
    match dest {
        Destination::Named(path) => match named_target(path)? {
            NamedTarget::File(file) => temp_file(parent(&file)).map(drop),
            NamedTarget::Special => may_write(path),
        },
        Destination::New { dir, .. } => temp_file(dir).map(drop),
    }
}

/// Writes `text` to `dest` and returns the path written.
pub fn write_atomically(dest: &Destination, text: &str) -> io::Result<PathBuf> {
    match dest {
        Destination::Named(path) => {
            match named_target(path)? {
                NamedTarget::File(file) => {
                    filled_temp(parent(&file), text)?
                        .persist(&file)
                        .map_err(|e| e.error)?;
                }
                NamedTarget::Special => std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)?
                    .write_all(text.as_bytes())?,
            }
            Ok(path.clone())
        }
        Destination::New { dir, stem } => {
            let mut tmp = filled_temp(dir, text)?;
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

/// A temporary file in `dir` holding `text`, on disk.
fn filled_temp(dir: &Path, text: &str) -> io::Result<tempfile::NamedTempFile> {
    let mut tmp = temp_file(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    Ok(tmp)
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

    /// A named pipe or device (`--out /dev/null`, `/dev/stdout`) gets the
    /// result written into it; it used to have a file renamed over it.
    #[test]
    fn a_pipe_is_written_to_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("results.pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success(), "mkfifo");
        let dest = Destination::Named(fifo.clone());
        // The check does not wait for a reader.
        check_writable(&dest).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write_atomically(&dest, "through the pipe").unwrap();
        let meta = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(meta.file_type().is_fifo(), "the pipe was replaced");
        assert_eq!(reader.join().unwrap(), "through the pipe");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// A named link keeps pointing where it did; its file gets the result,
    /// also when that file does not exist yet.
    #[test]
    fn a_named_link_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("real.json");
        std::fs::write(&file, "old").unwrap();
        let link = dir.path().join("latest.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        write_atomically(&Destination::Named(link.clone()), "new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");

        let dangling = dir.path().join("next.json");
        std::os::unix::fs::symlink("later.json", &dangling).unwrap();
        write_atomically(&Destination::Named(dangling.clone()), "first").unwrap();
        assert!(std::fs::symlink_metadata(&dangling).unwrap().is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("later.json")).unwrap(),
            "first"
        );
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_writable(&Destination::Named(dir.path().to_path_buf())).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
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
