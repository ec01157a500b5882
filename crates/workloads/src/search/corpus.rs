//! `--corpus FILE`: documents to replay, one JSON object per line, as
//! esrally's `documents.json` (plain, `.gz` or `.bz2`).
//!
//! The file is read into memory once, when the workload is built, and
//! checked line by line there: a malformed line is a one-line error
//! naming the file and the line before any load. Held in memory, a bulk
//! is a copy of consecutive lines, so the run's hot path does no file
//! reads, no decompression and shares no reader among sessions. The
//! price is memory: files beyond [`MAX_BYTES`] uncompressed are refused
//! (split them, or replay a part with `--documents`).

use std::io::Read;
use std::path::{Path, PathBuf};

/// The most uncompressed bytes a corpus may hold.
pub const MAX_BYTES: u64 = 4 << 30;

/// A corpus file, in memory: its documents, each ending in a newline.
pub struct Corpus {
    pub path: PathBuf,
    text: Vec<u8>,
    /// Where each document starts in `text`, and where the text ends.
    starts: Vec<u64>,
}

impl Corpus {
    /// Reads and checks `path`: every error is one line naming it.
    pub fn read(path: &Path) -> Result<Corpus, String> {
        let at = |e: std::io::Error| format!("--corpus {}: {e}", path.display());
        let file = std::fs::File::open(path).map_err(at)?;
        let name = path.to_string_lossy();
        let reader: Box<dyn Read> = if name.ends_with(".gz") {
            Box::new(flate2::read::MultiGzDecoder::new(file))
        } else if name.ends_with(".bz2") {
            Box::new(bzip2::read::MultiBzDecoder::new(file))
        } else {
            Box::new(file)
        };
        let mut text = Vec::new();
        reader
            .take(MAX_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(at)?;
        if text.len() as u64 > MAX_BYTES {
            return Err(format!(
                "--corpus {}: more than {} GiB uncompressed, more than loadcell holds in memory: split it",
                path.display(),
                MAX_BYTES >> 30
            ));
        }
        Corpus::parse(path, text)
    }

    /// Checks every line and packs the documents in place: blank lines
    /// dropped, each document trimmed and ended by one newline.
    fn parse(path: &Path, mut text: Vec<u8>) -> Result<Corpus, String> {
        let mut starts = vec![0];
        let (mut read, mut write, mut line_no) = (0, 0, 0);
        while read < text.len() {
            line_no += 1;
            let end = text[read..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(text.len(), |i| read + i);
            let line = text[read..end].trim_ascii();
            if !line.is_empty() {
                if let Err(why) = check_object(line) {
                    return Err(format!("--corpus {}:{line_no}: {why}", path.display()));
                }
                let from = line.as_ptr() as usize - text.as_ptr() as usize;
                let len = line.len();
                text.copy_within(from..from + len, write);
                // The last line may have no newline of its own.
                match text.get_mut(write + len) {
                    Some(b) => *b = b'\n',
                    None => text.push(b'\n'),
                }
                write += len + 1;
                starts.push(write as u64);
            }
            read = end + 1;
        }
        text.truncate(write);
        if starts.len() == 1 {
            return Err(format!("--corpus {}: holds no documents", path.display()));
        }
        Ok(Corpus {
            path: path.to_path_buf(),
            text,
            starts,
        })
    }

    /// How many documents it holds.
    pub fn documents(&self) -> u64 {
        self.starts.len() as u64 - 1
    }

    /// Document `n` (wrapping around), without its newline.
    #[inline]
    pub fn line(&self, n: u64) -> &[u8] {
        let i = (n % self.documents()) as usize;
        &self.text[self.starts[i] as usize..self.starts[i + 1] as usize - 1]
    }

    /// Up to `most` values of `field` (a dotted path: `geo.country`) in
    /// the documents, from lines spread over the file, each written as it
    /// goes inside a JSON string (or a number as it is). An error names
    /// the field when no document holds it.
    pub fn values(&self, field: &str, most: u64) -> Result<Vec<Box<[u8]>>, String> {
        let step = (self.documents() / most).max(1);
        let mut values = Vec::new();
        for n in (0..self.documents()).step_by(step as usize) {
            let doc: serde_json::Value =
                serde_json::from_slice(self.line(n)).expect("checked when read");
            let found = field.split('.').try_fold(&doc, |v, key| v.get(key));
            let text = match found {
                Some(serde_json::Value::String(s)) => {
                    let quoted = serde_json::to_string(s).expect("a string serializes");
                    quoted[1..quoted.len() - 1].to_string()
                }
                Some(v @ serde_json::Value::Number(_)) => v.to_string(),
                _ => continue,
            };
            values.push(text.into_bytes().into_boxed_slice());
        }
        if values.is_empty() {
            return Err(format!(
                "--corpus {}: no document has a string or number field '{field}' to query",
                self.path.display()
            ));
        }
        Ok(values)
    }
}

/// Its path and size, not its gigabytes of text.
impl std::fmt::Debug for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Corpus")
            .field("path", &self.path)
            .field("documents", &self.documents())
            .field("bytes", &self.text.len())
            .finish()
    }
}

/// Why `line` is not one JSON object.
fn check_object(line: &[u8]) -> Result<(), String> {
    match serde_json::from_slice::<serde::de::IgnoredAny>(line) {
        Err(e) => Err(format!("not JSON ({})", e.to_string().replace('\n', " "))),
        Ok(_) if line[0] != b'{' => Err("not a JSON object".to_string()),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const DOCS: &str =
        "{\"a\": 1, \"geo\": {\"cc\": \"AT\"}}\n\n{\"a\": 2, \"s\": \"say \\\"hi\\\"\"}\n";

    #[test]
    fn plain_and_gzip_files_give_their_lines() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("docs.json");
        std::fs::write(&plain, DOCS).unwrap();
        let gz = dir.path().join("docs.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(DOCS.as_bytes()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let bz = dir.path().join("docs.json.bz2");
        let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        enc.write_all(DOCS.as_bytes()).unwrap();
        std::fs::write(&bz, enc.finish().unwrap()).unwrap();
        for path in [plain, gz, bz] {
            let c = Corpus::read(&path).unwrap();
            assert_eq!(c.documents(), 2, "the blank line is skipped");
            assert_eq!(c.line(0), br#"{"a": 1, "geo": {"cc": "AT"}}"#);
            assert_eq!(c.line(3), c.line(1), "documents wrap around");
            assert_eq!(c.values("geo.cc", 10).unwrap(), vec![b"AT".to_vec().into()]);
            let a: Vec<_> = c.values("a", 10).unwrap();
            assert_eq!(a, vec![b"1".to_vec().into(), b"2".to_vec().into()]);
            assert_eq!(c.values("s", 10).unwrap()[0].as_ref(), br#"say \"hi\""#);
            let e = c.values("nope", 10).unwrap_err();
            assert!(e.contains("field 'nope'"), "{e}");
        }
    }

    #[test]
    fn a_malformed_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        std::fs::write(&path, "{\"a\": 1}\n{\"a\": \n[1]\n").unwrap();
        let e = Corpus::read(&path).unwrap_err();
        assert!(
            e.starts_with(&format!("--corpus {}:2: not JSON", path.display())),
            "{e}"
        );
        assert!(!e.contains('\n'));
        std::fs::write(&path, "{\"a\": 1}\n[1]\n").unwrap();
        let e = Corpus::read(&path).unwrap_err();
        assert!(e.ends_with(":2: not a JSON object"), "{e}");
        let e = Corpus::read(&dir.path().join("missing.json")).unwrap_err();
        assert!(
            e.starts_with("--corpus ") && e.contains("missing.json"),
            "{e}"
        );
        std::fs::write(&path, "\n\n").unwrap();
        assert!(Corpus::read(&path)
            .unwrap_err()
            .ends_with("holds no documents"));
    }
}
