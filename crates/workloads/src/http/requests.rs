//! The request file (`--request-file FILE`, TOML): several weighted requests
//! whose paths and bodies take parameters, expanded per request into a
//! session's reused buffers.
//!
//! ```toml
//! [params]
//! id = { type = "zipfian", min = 1, max = 100000 }   # also uniform, gaussian
//! n = { type = "sequence", start = 1 }
//! word = { type = "string", length = 8 }             # [A-Za-z0-9]; or min_length, max_length
//! hot = { type = "hotset", min = 1, max = 1000, hot_keys = 0.2, hot_ops = 0.8 }
//! color = { type = "list", values = ["red", "blue"] }
//! user = { type = "csv", file = "users.csv", column = "name" }  # or column = 2
//!
//! [[request]]
//! weight = 9                     # default 1
//! path = "/items/${id}"          # method defaults to GET
//! headers = ["Accept: application/json"]
//!
//! [[request]]
//! method = "POST"
//! path = "/items"
//! body = '{"n": ${n}, "name": "${word}"}'
//! ```
//!
//! `${name}` is replaced by the parameter's value, the same value
//! wherever it occurs in one request. A sequence counts up across the
//! run's sessions (session `i` of `k` takes `start+i`, `start+i+k`, …), so
//! its values are distinct; random values come from the session's
//! generator, seeded from `--seed`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::Rng;
use serde::Deserialize;

use crate::distribution::{Distribution, RandParams, RandType};

/// One request of a set: a literal or a template for its path and body.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    pub weight: u32,
    pub method: &'static str,
    pub path: Template,
    /// `(name, value)` pairs, sent in order.
    pub headers: Vec<(String, String)>,
    pub body: Template,
}

/// Text with `${param}` holes, split once when the file is read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    pieces: Vec<Piece>,
    /// The text as written, for the result file; empty for a literal,
    /// whose one piece is the text (a body file is not held twice).
    source: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(Vec<u8>),
    /// An index into the set's parameters.
    Param(usize),
}

impl Template {
    /// A template without holes.
    pub fn literal(bytes: &[u8]) -> Template {
        let pieces = if bytes.is_empty() {
            Vec::new()
        } else {
            vec![Piece::Text(bytes.to_vec())]
        };
        Template {
            pieces,
            source: String::new(),
        }
    }

    /// Splits `text` at each `${name}`, `position` giving the index of
    /// each name among the parameters (`None`: there is no such one).
    pub(crate) fn parse(
        text: &str,
        position: impl Fn(&str) -> Option<usize>,
    ) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("${") {
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("'{text}': '${{' without a closing '}}'"))?;
            let name = &rest[open + 2..open + close];
            let index = position(name)
                .ok_or_else(|| format!("'{text}': no parameter '{name}' in [params]"))?;
            if open > 0 {
                pieces.push(Piece::Text(rest.as_bytes()[..open].to_vec()));
            }
            pieces.push(Piece::Param(index));
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.as_bytes().to_vec()));
        }
        let source = if pieces.iter().any(|p| matches!(p, Piece::Param(_))) {
            text.to_string()
        } else {
            String::new()
        };
        Ok(Template { pieces, source })
    }

    /// The text as written, `${name}`s included.
    pub fn source(&self) -> Cow<'_, str> {
        match self.as_literal() {
            Some(bytes) => String::from_utf8_lossy(bytes),
            None => Cow::Borrowed(&self.source),
        }
    }

    /// The length of the text as written, in bytes.
    pub fn source_len(&self) -> usize {
        self.as_literal().map_or(self.source.len(), <[u8]>::len)
    }

    /// The bytes when there are no holes: sent as they are, uncopied.
    pub fn as_literal(&self) -> Option<&[u8]> {
        match self.pieces.as_slice() {
            [] => Some(b""),
            [Piece::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// The parameters this template uses, by index.
    pub(crate) fn params(&self) -> impl Iterator<Item = usize> + '_ {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Param(i) => Some(*i),
            Piece::Text(_) => None,
        })
    }

    /// The text with each hole replaced by what `placeholder` gives for
    /// the hole's position, counted from 1 (a SQL statement's `?`, `$1`).
    pub(crate) fn with_placeholders(&self, placeholder: impl Fn(usize) -> String) -> String {
        let mut text = String::new();
        let mut holes = 0;
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => text.push_str(&String::from_utf8_lossy(t)),
                Piece::Param(_) => {
                    holes += 1;
                    text.push_str(&placeholder(holes));
                }
            }
        }
        text
    }

    /// Writes the text with each hole filled from `values` into `out`.
    #[inline]
    pub(crate) fn expand(&self, values: &[Vec<u8>], out: &mut Vec<u8>) {
        out.clear();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.extend_from_slice(t),
                Piece::Param(i) => out.extend_from_slice(&values[*i]),
            }
        }
    }
}

/// A named parameter and how its values are drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ParamKind {
    Sequence {
        start: u64,
    },
    /// Integers in `[min, max]` from one of sysbench's distributions.
    Random {
        kind: RandType,
        min: u64,
        max: u64,
    },
    /// Integers in `[min, max]`: `hot_ops` of the draws fall, uniformly,
    /// in the lowest `hot_keys` fraction of the range (YCSB's hotspot).
    HotSet {
        min: u64,
        max: u64,
        hot_keys: f64,
        hot_ops: f64,
    },
    /// Alphanumeric text of a length uniform in `[min_length, max_length]`.
    String {
        min_length: usize,
        max_length: usize,
    },
    /// One of a list's values, uniformly: given in the file, or a CSV
    /// file's column read when the file is.
    List(ListValues),
}

/// A list parameter's values, shared by the sessions; when every value is
/// an integer, the numbers too (bound as integers in SQL).
#[derive(Debug, Clone, PartialEq)]
pub struct ListValues {
    pub texts: Arc<[String]>,
    numbers: Option<Arc<[i64]>>,
}

impl ListValues {
    pub fn new(texts: Vec<String>) -> ListValues {
        let numbers: Option<Vec<i64>> = texts.iter().map(|t| t.parse().ok()).collect();
        ListValues {
            texts: texts.into(),
            numbers: numbers.map(Into::into),
        }
    }
}

/// The characters of a random string: safe unescaped in a path, a query
/// and a JSON string.
const ALPHANUMERIC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A parameter ready to draw from, one per session.
#[derive(Debug, Clone)]
pub(crate) enum Drawer {
    Sequence {
        next: u64,
        step: u64,
    },
    Random(Distribution),
    HotSet {
        min: u64,
        hot: u64,
        cold: u64,
        hot_ops: f64,
    },
    String {
        min_length: usize,
        max_length: usize,
    },
    List(ListValues),
}

impl Drawer {
    /// Session `session` of `sessions`'s drawer for `param`.
    pub(crate) fn new(param: &Param, session: usize, sessions: usize) -> Drawer {
        match param.kind {
            ParamKind::Sequence { start } => Drawer::Sequence {
                next: start + session as u64,
                step: sessions.max(1) as u64,
            },
            ParamKind::Random { kind, min, max } => {
                Drawer::Random(Distribution::new(kind, RandParams::default(), min, max))
            }
            ParamKind::HotSet {
                min,
                max,
                hot_keys,
                hot_ops,
            } => {
                let span = max - min + 1;
                let hot = ((span as f64 * hot_keys).round() as u64).clamp(1, span);
                Drawer::HotSet {
                    min,
                    hot,
                    cold: span - hot,
                    hot_ops,
                }
            }
            ParamKind::String {
                min_length,
                max_length,
            } => Drawer::String {
                min_length,
                max_length,
            },
            ParamKind::List(ref values) => Drawer::List(values.clone()),
        }
    }

    /// Writes the next value into `out`.
    #[inline]
    pub(crate) fn draw(&mut self, rng: &mut SmallRng, out: &mut Vec<u8>) {
        self.draw_value(rng, out);
    }

    /// Writes the next value into `out`; returns it as a number too when
    /// it is one (for SQL, which binds numbers as integers).
    #[inline]
    pub(crate) fn draw_value(&mut self, rng: &mut SmallRng, out: &mut Vec<u8>) -> Option<i64> {
        let number = self.draw_number(rng, out);
        if let (Some(n), true) = (number, out.is_empty()) {
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        }
        number
    }

    /// The next value: returned when it is a number, without its text
    /// (what binds it as an integer needs no more); written into `out`
    /// when it is text, and for a list's numbers too.
    #[inline]
    pub(crate) fn draw_number(&mut self, rng: &mut SmallRng, out: &mut Vec<u8>) -> Option<i64> {
        out.clear();
        let number = match self {
            Drawer::Sequence { next, step } => {
                let n = *next;
                *next += *step;
                n
            }
            Drawer::Random(d) => d.sample(rng),
            Drawer::HotSet {
                min,
                hot,
                cold,
                hot_ops,
            } => {
                if *cold == 0 || rng.random::<f64>() < *hot_ops {
                    *min + rng.random_range(0..*hot)
                } else {
                    *min + *hot + rng.random_range(0..*cold)
                }
            }
            Drawer::String {
                min_length,
                max_length,
            } => {
                let length = rng.random_range(*min_length..=*max_length);
                out.extend(
                    (0..length).map(|_| ALPHANUMERIC[rng.random_range(0..ALPHANUMERIC.len())]),
                );
                return None;
            }
            Drawer::List(values) => {
                let i = rng.random_range(0..values.texts.len());
                out.extend_from_slice(values.texts[i].as_bytes());
                return values.numbers.as_ref().map(|n| n[i]);
            }
        };
        Some(number as i64)
    }
}

/// A request file, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestFile {
    pub requests: Vec<RequestSpec>,
    pub params: Vec<Param>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    params: std::collections::BTreeMap<String, RawParam>,
    request: Vec<RawRequest>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRequest {
    #[serde(default = "one")]
    pub weight: u32,
    pub method: Option<String>,
    pub path: String,
    #[serde(default)]
    pub headers: Vec<String>,
    #[serde(default)]
    pub body: String,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawParam {
    #[serde(rename = "type")]
    kind: String,
    start: Option<u64>,
    min: Option<u64>,
    max: Option<u64>,
    length: Option<usize>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    hot_keys: Option<f64>,
    hot_ops: Option<f64>,
    values: Option<Vec<ListItem>>,
    file: Option<PathBuf>,
    column: Option<Column>,
}

/// A list's value as written: text or a number.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum ListItem {
    Integer(i64),
    Text(String),
}

/// A CSV file's column: by its header's name, or by number from 1.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Column {
    Number(usize),
    Name(String),
}

/// The most requests a file may hold (a mix, not a replay log).
const MAX_REQUESTS: usize = 256;

impl RequestFile {
    /// Reads and checks `path`. Every error is one line naming the file,
    /// and the line when the TOML parser can point at one.
    pub fn read(path: &Path) -> Result<RequestFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--request-file {}: {e}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        Self::parse(&text, dir).map_err(|e| format!("--request-file {}{e}", path.display()))
    }

    /// Parses a file's text; errors start with `:LINE: ` or `: `.
    fn parse(text: &str, dir: &Path) -> Result<RequestFile, String> {
        let raw: RawFile = toml_file(text)?;
        let params = params(raw.params, dir)?;
        if raw.request.is_empty() || raw.request.len() > MAX_REQUESTS {
            return Err(format!(
                ": give 1 to {MAX_REQUESTS} [[request]] tables, not {}",
                raw.request.len()
            ));
        }
        let requests = raw
            .request
            .into_iter()
            .enumerate()
            .map(|(i, r)| request(r, &params).map_err(|e| format!(": request {}: {e}", i + 1)))
            .collect::<Result<_, _>>()?;
        Ok(RequestFile { requests, params })
    }
}

/// A TOML file's text read as `T`; an error is one line, starting with
/// `:LINE: ` where TOML says where (`: ` otherwise), for the caller to put
/// the file's name before.
pub(crate) fn toml_file<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| format!(":{}", text[..s.start].matches('\n').count() + 1))
            .unwrap_or_default();
        format!("{line}: {}", e.message().trim().replace('\n', " "))
    })
}

/// The generators a `[params]` entry may name.
const PARAM_TYPES: &str =
    "sequence, uniform, gaussian, zipfian, special, pareto, hotset, string, list or csv";

/// A `[params]` entry checked; a CSV file is read from `dir` (the
/// directory of the file that names it) when it is not absolute.
/// A file's `[params]` table, each parameter's error named by it.
pub(crate) fn params(
    raw: impl IntoIterator<Item = (String, RawParam)>,
    dir: &Path,
) -> Result<Vec<Param>, String> {
    raw.into_iter()
        .map(|(name, raw)| {
            let context = format!(": [params] {name}: ");
            param(name, raw, dir).map_err(|e| format!("{context}{e}"))
        })
        .collect()
}

pub(crate) fn param(name: String, raw: RawParam, dir: &Path) -> Result<Param, String> {
    let given = [
        ("start", raw.start.is_some()),
        ("min", raw.min.is_some()),
        ("max", raw.max.is_some()),
        ("length", raw.length.is_some()),
        ("min_length", raw.min_length.is_some()),
        ("max_length", raw.max_length.is_some()),
        ("hot_keys", raw.hot_keys.is_some()),
        ("hot_ops", raw.hot_ops.is_some()),
        ("values", raw.values.is_some()),
        ("file", raw.file.is_some()),
        ("column", raw.column.is_some()),
    ];
    let only = |allowed: &[&str]| match given
        .iter()
        .find(|(field, set)| *set && !allowed.contains(field))
    {
        Some((field, _)) => Err(format!("'{field}' does not apply to type '{}'", raw.kind)),
        None => Ok(()),
    };
    let range = || match (raw.min, raw.max) {
        (Some(min), Some(max)) if min <= max => Ok((min, max)),
        (Some(min), Some(max)) => Err(format!("min {min} is above max {max}")),
        _ => Err(format!("type '{}' needs min and max", raw.kind)),
    };
    let kind = match raw.kind.as_str() {
        "sequence" => {
            only(&["start"])?;
            ParamKind::Sequence {
                start: raw.start.unwrap_or(1),
            }
        }
        "uniform" | "gaussian" | "zipfian" | "special" | "pareto" => {
            only(&["min", "max"])?;
            let (min, max) = range()?;
            ParamKind::Random {
                kind: RandType::parse(&raw.kind)?,
                min,
                max,
            }
        }
        "hotset" => {
            only(&["min", "max", "hot_keys", "hot_ops"])?;
            let (min, max) = range()?;
            let fraction = |field: &str, value: Option<f64>| match value {
                Some(v) if v > 0.0 && v <= 1.0 => Ok(v),
                _ => Err(format!("type 'hotset' needs {field} above 0 and at most 1")),
            };
            ParamKind::HotSet {
                min,
                max,
                hot_keys: fraction("hot_keys", raw.hot_keys)?,
                hot_ops: fraction("hot_ops", raw.hot_ops)?,
            }
        }
        "string" => {
            only(&["length", "min_length", "max_length"])?;
            let (min_length, max_length) = match (raw.length, raw.min_length, raw.max_length) {
                (Some(n), None, None) => (n, n),
                (None, Some(min), Some(max)) => (min, max),
                _ => {
                    return Err(
                        "type 'string' needs a length, or min_length and max_length".to_string()
                    )
                }
            };
            if min_length == 0 || max_length > 65536 || min_length > max_length {
                return Err(format!(
                    "type 'string' needs lengths from 1 to 65536, the least first, not {min_length} to {max_length}"
                ));
            }
            ParamKind::String {
                min_length,
                max_length,
            }
        }
        "list" => {
            only(&["values"])?;
            let values: Vec<String> = raw
                .values
                .unwrap_or_default()
                .into_iter()
                .map(|v| match v {
                    ListItem::Integer(n) => n.to_string(),
                    ListItem::Text(t) => t,
                })
                .collect();
            if values.is_empty() {
                return Err("type 'list' needs values = [...], at least one".to_string());
            }
            ParamKind::List(ListValues::new(values))
        }
        "csv" => {
            only(&["file", "column"])?;
            let (Some(file), Some(column)) = (raw.file, raw.column) else {
                return Err("type 'csv' needs file and column".to_string());
            };
            ParamKind::List(ListValues::new(csv_column(&dir.join(file), &column)?))
        }
        other => return Err(format!("unknown type '{other}'; use {PARAM_TYPES}")),
    };
    Ok(Param { name, kind })
}

/// The values of one column of a CSV file (fields split at commas, each
/// trimmed of spaces and double quotes; no commas inside fields). A
/// column named by its header skips the header line.
fn csv_column(path: &Path, column: &Column) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let field = |line: &str, i: usize| {
        line.split(',')
            .nth(i)
            .map(|f| f.trim().trim_matches('"').to_string())
    };
    let index = match column {
        Column::Number(n @ 1..) => n - 1,
        Column::Number(_) => return Err("column numbers start at 1".to_string()),
        Column::Name(name) => {
            let header = lines.next().unwrap_or_default();
            (0..)
                .map_while(|i| field(header, i))
                .position(|f| f == *name)
                .ok_or_else(|| {
                    format!("{}: no column '{name}' in the header line", path.display())
                })?
        }
    };
    let values = lines
        .enumerate()
        .map(|(i, line)| {
            field(line, index).ok_or_else(|| {
                format!(
                    "{}: row {} has no column {}",
                    path.display(),
                    i + 1,
                    index + 1
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if values.is_empty() {
        return Err(format!("{}: no rows", path.display()));
    }
    Ok(values)
}

pub(crate) fn request(raw: RawRequest, params: &[Param]) -> Result<RequestSpec, String> {
    let method = loadcell_core::http::method(raw.method.as_deref().unwrap_or("GET"))?;
    check_path(&raw.path)?;
    if raw.weight == 0 {
        return Err("weight must be at least 1".to_string());
    }
    let position = |name: &str| params.iter().position(|p| p.name == name);
    let headers = raw
        .headers
        .iter()
        .map(|h| super::parse_header(h))
        .collect::<Result<_, _>>()?;
    Ok(RequestSpec {
        weight: raw.weight,
        method,
        path: Template::parse(&raw.path, position)?,
        headers,
        body: Template::parse(&raw.body, position)?,
    })
}

/// A path is sent as written: it must start with `/` and hold nothing
/// that would break the request line.
pub fn check_path(path: &str) -> Result<(), String> {
    if !path.is_empty() && !path.starts_with('/') {
        return Err(format!("path '{path}' must start with '/'"));
    }
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "path '{path}' holds a space or control character: percent-encode it (%20)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    const FILE: &str = r#"
[params]
id = { type = "zipfian", min = 1, max = 100 }
n = { type = "sequence", start = 10 }
word = { type = "string", length = 6 }

[[request]]
weight = 3
path = "/echo?id=${id}&again=${id}"
headers = ["Accept: application/json"]

[[request]]
method = "post"
path = "/items"
body = '{"n": ${n}, "w": "${word}"}'
"#;

    #[test]
    fn a_file_gives_weighted_requests_with_templates() {
        let f = RequestFile::parse(FILE, Path::new("")).unwrap();
        assert_eq!(f.params.len(), 3);
        let r = &f.requests;
        assert_eq!(
            (r[0].weight, r[0].method, r[1].weight, r[1].method),
            (3, "GET", 1, "POST")
        );
        assert_eq!(
            r[0].headers,
            vec![("Accept".into(), "application/json".into())]
        );
        assert_eq!(r[0].path.as_literal(), None);
        assert_eq!(r[1].path.as_literal(), Some(&b"/items"[..]));
        // Parameters are kept in name order: id, n, word.
        let values = [b"7".to_vec(), b"10".to_vec(), b"abcdef".to_vec()];
        let mut out = Vec::new();
        r[0].path.expand(&values, &mut out);
        assert_eq!(out, b"/echo?id=7&again=7");
        r[1].body.expand(&values, &mut out);
        assert_eq!(out, br#"{"n": 10, "w": "abcdef"}"#);
    }

    #[test]
    fn a_literal_body_keeps_its_exact_length_and_is_held_once() {
        let binary = Template::literal(&[0xff, 0xfe, b'x']);
        assert_eq!(binary.source_len(), 3, "not the length of a lossy text");
        assert_eq!(binary.as_literal(), Some(&[0xff, 0xfe, b'x'][..]));
        assert!(
            binary.source.is_empty(),
            "the bytes are not copied into the source"
        );
    }

    #[test]
    fn sequences_interleave_sessions_and_draws_follow_the_seed() {
        let seq = Param {
            name: "n".into(),
            kind: ParamKind::Sequence { start: 5 },
        };
        let (mut a, mut b) = (Drawer::new(&seq, 0, 2), Drawer::new(&seq, 1, 2));
        let mut rng = SmallRng::seed_from_u64(1);
        let mut out = Vec::new();
        let mut seen = Vec::new();
        for _ in 0..2 {
            for d in [&mut a, &mut b] {
                d.draw(&mut rng, &mut out);
                seen.push(String::from_utf8(out.clone()).unwrap());
            }
        }
        assert_eq!(seen, ["5", "6", "7", "8"]);
        let word = Param {
            name: "w".into(),
            kind: ParamKind::String {
                min_length: 12,
                max_length: 12,
            },
        };
        let draw = |seed| {
            let mut out = Vec::new();
            Drawer::new(&word, 0, 1).draw(&mut SmallRng::seed_from_u64(seed), &mut out);
            out
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        assert!(draw(3).iter().all(u8::is_ascii_alphanumeric));
    }

    #[test]
    fn mistakes_are_one_line_naming_the_line_or_the_part() {
        let err = |text: &str| RequestFile::parse(text, Path::new("")).unwrap_err();
        let e = err("[[request]]\npath = \"/\"\nmethd = \"GET\"\n");
        assert!(e.starts_with(":3: unknown field `methd`"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e =
            err("[params]\nx = { type = \"zipf\", min = 1, max = 2 }\n[[request]]\npath = \"/\"\n");
        assert!(e.starts_with(": [params] x: unknown type 'zipf'"), "{e}");
        let e = err("[[request]]\npath = \"/${nope}\"\n");
        assert!(
            e.contains("request 1: '/${nope}': no parameter 'nope'"),
            "{e}"
        );
        let e = err("[[request]]\npath = \"/\"\nmethod = \"GTE\"\n");
        assert!(e.contains("request 1: unknown HTTP method 'GTE'"), "{e}");
        let e = err("[[request]]\npath = \"x\"\n");
        assert!(e.contains("must start with '/'"), "{e}");
        let e = err("[params]\nx = { type = \"string\", size = 3 }\n[[request]]\npath = \"/\"\n");
        assert!(e.starts_with(":2: unknown field `size`"), "{e}");
        let e = err("[params]\nx = { type = \"string\" }\n[[request]]\npath = \"/\"\n");
        assert!(e.contains("needs a length"), "{e}");
    }
}
