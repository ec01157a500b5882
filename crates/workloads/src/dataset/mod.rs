//! Mixed data sets (`kv --dataset FILE`): a TOML file declares key types —
//! hashes of N fields and strings with a value size range — their shares
//! (2:7:1), key lengths and a hot set. `prepare` loads every key; the
//! access phase reads and writes keys of every type in their shares, the
//! hot set taking its fraction of the accesses. Keys are derived from the
//! type and record number, so prepare and run agree without storing
//! anything; a marker key records what prepare loaded, for cleanup.
//!
//! Every value loadcell writes (prepare's and the runs') begins with the
//! random id `prepare` drew and recorded in the marker (values shorter
//! than the id, with its first bytes). Cleanup deletes a key only if its
//! value still carries that id: a key another writer has written since
//! under the same name is left alone, and so is everything under a marker
//! whose id the values do not carry. A marker written by an earlier
//! loadcell has no id, and its values carry none: cleanup deletes nothing
//! then (it cannot tell loadcell's keys from another writer's) and says
//! which keys to delete by hand; prepare does not resume loading it.

use std::collections::BTreeMap;
use std::path::Path;

use loadcell_core::kv::KvConn;
use loadcell_core::DriverError;
use rand::rngs::SmallRng;
use rand::Rng;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use toml::Spanned;

use crate::kv::{DataSize, KvOptions};

mod prepare;
mod script;
#[cfg(test)]
mod tests;
mod workload;

use prepare::*;
pub use script::{DataSetKv, DataSetSession};
pub use workload::DataSetWorkload;

/// Most fields a hash type may have (HSET's arguments fit on the stack).
pub const MAX_FIELDS: usize = 64;
const HSET_ARGS: usize = 2 + 2 * MAX_FIELDS;
/// memcached's longest key; Redis takes longer ones, but no realistic data
/// set needs them.
const MAX_KEY_LEN: usize = 250;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    Hash,
    String,
}

// The file's shape. Unknown fields are errors, which toml reports with the
// field's name and line.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    name: Spanned<String>,
    keys: Spanned<u64>,
    key_prefix: Option<Spanned<String>>,
    hot_set: Option<Spanned<f64>>,
    hot_access: Option<Spanned<f64>>,
    #[serde(rename = "type")]
    types: Vec<TypeSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypeSpec {
    name: Spanned<String>,
    kind: KeyKind,
    share: Spanned<u32>,
    key_length: Spanned<usize>,
    #[serde(deserialize_with = "value_size")]
    value_size: DataSize,
    fields: Option<Spanned<usize>>,
    field_name_length: Option<Spanned<usize>>,
}

/// `value_size = 32` or `value_size = "500-2000"`.
fn value_size<'de, D: Deserializer<'de>>(d: D) -> Result<DataSize, D::Error> {
    struct V;
    impl de::Visitor<'_> for V {
        type Value = DataSize;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a size in bytes (32) or a range \"MIN-MAX\" (\"500-2000\")")
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<DataSize, E> {
            match usize::try_from(n) {
                Ok(n) if n > 0 => Ok(DataSize::Fixed(n)),
                _ => Err(E::custom(format!("value_size {n}: must be at least 1"))),
            }
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<DataSize, E> {
            let bad = || {
                E::custom(format!("value_size \"{s}\": must be \"MIN-MAX\" with 1 <= MIN <= MAX, e.g. \"500-2000\""))
            };
            let (a, b) = s.split_once('-').ok_or_else(bad)?;
            let (a, b): (usize, usize) = (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            );
            if a == 0 || a > b {
                return Err(bad());
            }
            Ok(if a == b {
                DataSize::Fixed(a)
            } else {
                DataSize::Range(a, b)
            })
        }
    }
    d.deserialize_any(V)
}

/// One key type, resolved: how its keys are spelled and how many there are.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyType {
    pub name: String,
    pub kind: KeyKind,
    pub share: u32,
    /// Keys are `prefix` + the record number, zero-padded to `key_length`.
    pub prefix: String,
    pub key_length: usize,
    pub count: u64,
    /// Records `0..hot` are the hot set.
    pub hot: u64,
    /// A string's value, or each field's value of a hash.
    pub value: DataSize,
    /// Field names of a hash (empty for strings).
    pub fields: Vec<String>,
}

impl KeyType {
    /// Writes key number `n` of this type into `buf`.
    pub fn key(&self, buf: &mut Vec<u8>, n: u64) {
        buf.clear();
        buf.extend_from_slice(self.prefix.as_bytes());
        let mut number = itoa::Buffer::new();
        let number = number.format(n);
        buf.resize(self.key_length - number.len(), b'0');
        buf.extend_from_slice(number.as_bytes());
    }
}

fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// A data set, parsed and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct DataSet {
    /// The file it came from, for messages and hints.
    pub path: String,
    pub name: String,
    pub keys: u64,
    pub key_prefix: String,
    /// Fraction of each type's keys that are hot.
    pub hot_set: f64,
    /// Fraction of accesses that go to the hot keys.
    pub hot_access: f64,
    pub types: Vec<KeyType>,
}

/// What `prepare` records in the marker key: enough to delete exactly the
/// keys it wrote, and to tell whether a file still describes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Recorded {
    state: String,
    types: Vec<RecordedType>,
    /// The random id every value loadcell writes begins with; `None` in a
    /// marker of an earlier loadcell, which did not tag its values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RecordedType {
    name: String,
    kind: KeyKind,
    prefix: String,
    key_length: usize,
    count: u64,
    value_size: String,
    fields: Vec<String>,
}

const LOADING: &str = "loading";
const COMPLETE: &str = "complete";
/// Characters of the id values begin with: 62^16, about 95 bits.
const ID_LEN: usize = 16;

/// Whether `value` begins with `id` (a value shorter than the id, with as
/// much of it as fits).
fn carries_id(value: &[u8], id: &[u8]) -> bool {
    let n = value.len().min(id.len());
    n > 0 && value[..n] == id[..n]
}

impl DataSet {
    pub fn load(path: &Path) -> Result<DataSet, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the data set file {}: {e}", path.display()))?;
        DataSet::parse(&text, &path.display().to_string())
    }

    /// Parses a data set file's text; `path` names it in messages.
    pub fn parse(text: &str, path: &str) -> Result<DataSet, String> {
        let file: FileSpec =
            toml::from_str(text).map_err(|e| format!("data set file {path}: {e}"))?;
        // Where a value was given, for messages about it.
        let at = |span: std::ops::Range<usize>| {
            format!(
                "data set file {path}, line {}",
                text[..span.start].matches('\n').count() + 1
            )
        };
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.len() <= 64
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        let name = file.name.get_ref().clone();
        if !name_ok(&name) {
            return Err(format!(
                "{}: name '{name}' must be 1 to 64 letters, digits, '_' or '-'",
                at(file.name.span())
            ));
        }
        let key_prefix = match &file.key_prefix {
            None => format!("{name}:"),
            Some(p) if p.get_ref().bytes().any(|b| b <= b' ' || b == 0x7f) => {
                return Err(format!(
                    "{}: key_prefix '{}' has spaces or control characters (memcached refuses such keys)",
                    at(p.span()),
                    p.get_ref()
                ))
            }
            Some(p) => p.get_ref().clone(),
        };
        let fraction = |v: &Option<Spanned<f64>>, what: &str, zero_ok: bool| match v {
            None => Ok(1.0),
            Some(f) => {
                let x = *f.get_ref();
                if (x > 0.0 || (zero_ok && x == 0.0)) && x <= 1.0 {
                    Ok(x)
                } else {
                    Err(format!(
                        "{}: {what} = {x} must be {} 0 and at most 1",
                        at(f.span()),
                        if zero_ok { "at least" } else { "more than" }
                    ))
                }
            }
        };
        let hot_set = fraction(&file.hot_set, "hot_set", false)?;
        let hot_access = fraction(&file.hot_access, "hot_access", true)?;
        let keys = *file.keys.get_ref();
        if file.types.is_empty() {
            return Err(format!(
                "data set file {path}: no [[type]] tables: declare at least one key type"
            ));
        }
        let total_share: u64 = file.types.iter().map(|t| *t.share.get_ref() as u64).sum();
        if total_share == 0 {
            return Err(format!("data set file {path}: every type has share 0"));
        }
        let mut types: Vec<KeyType> = Vec::new();
        let mut cumulative = 0u64;
        for (i, t) in file.types.iter().enumerate() {
            let type_name = t.name.get_ref().clone();
            if !name_ok(&type_name) {
                return Err(format!(
                    "{}: type name '{type_name}' must be 1 to 64 letters, digits, '_' or '-'",
                    at(t.name.span())
                ));
            }
            if types.iter().any(|o| o.name == type_name) {
                return Err(format!(
                    "{}: a second type named '{type_name}'",
                    at(t.name.span())
                ));
            }
            let only_hashes = |field: &str, span| {
                Err(format!(
                    "{}: type '{type_name}' is a string: `{field}` is only for hashes",
                    at(span)
                ))
            };
            let fields = match (t.kind, &t.fields) {
                (KeyKind::String, Some(f)) => return only_hashes("fields", f.span()),
                (KeyKind::String, None) => match &t.field_name_length {
                    Some(l) => return only_hashes("field_name_length", l.span()),
                    None => Vec::new(),
                },
                (KeyKind::Hash, None) => {
                    return Err(format!(
                    "{}: hash type '{type_name}' needs `fields` (how many fields each hash has)",
                    at(t.name.span())
                ))
                }
                (KeyKind::Hash, Some(f)) => {
                    let n = *f.get_ref();
                    if n == 0 || n > MAX_FIELDS {
                        return Err(format!(
                            "{}: type '{type_name}': fields = {n} must be 1 to {MAX_FIELDS}",
                            at(f.span())
                        ));
                    }
                    let shortest = 1 + decimal_digits(n as u64 - 1);
                    let len = match &t.field_name_length {
                        None => shortest,
                        Some(l) if *l.get_ref() < shortest => {
                            return Err(format!(
                                "{}: type '{type_name}': field_name_length {} is too short for {n} field names (at least {shortest})",
                                at(l.span()),
                                l.get_ref()
                            ))
                        }
                        Some(l) => *l.get_ref(),
                    };
                    (0..n)
                        .map(|f| format!("f{f:0>width$}", width = len - 1))
                        .collect()
                }
            };
            // Each type's count is its slice of the cumulative split, so
            // the counts add up to `keys` exactly.
            let share = *t.share.get_ref();
            let start = (keys as u128 * cumulative as u128 / total_share as u128) as u64;
            cumulative += share as u64;
            let end = (keys as u128 * cumulative as u128 / total_share as u128) as u64;
            let count = end - start;
            if count == 0 {
                return Err(format!(
                    "{}: type '{type_name}' gets no keys: keys = {keys} is too few for share {share} of {total_share}",
                    at(t.share.span())
                ));
            }
            let prefix = format!("{key_prefix}{i}:");
            let needed = prefix.len() + decimal_digits(count - 1);
            let key_length = *t.key_length.get_ref();
            if key_length < needed || key_length > MAX_KEY_LEN {
                return Err(format!(
                    "{}: type '{type_name}': key_length {key_length} must be {needed} to {MAX_KEY_LEN} \
                     (prefix '{prefix}' and numbers up to {})",
                    at(t.key_length.span()),
                    count - 1
                ));
            }
            let hot = ((count as f64 * hot_set).round() as u64).clamp(1, count);
            types.push(KeyType {
                name: type_name,
                kind: t.kind,
                share,
                prefix,
                key_length,
                count,
                hot,
                value: t.value_size.clone(),
                fields,
            });
        }
        Ok(DataSet {
            path: path.to_string(),
            name,
            keys,
            key_prefix,
            hot_set,
            hot_access,
            types,
        })
    }

    /// The first hash type, if any: hashes need a driver with commands.
    pub fn hash_type(&self) -> Option<&KeyType> {
        self.types.iter().find(|t| t.kind == KeyKind::Hash)
    }

    /// The shares as `2:7:1`.
    pub fn shares(&self) -> String {
        let shares: Vec<String> = self.types.iter().map(|t| t.share.to_string()).collect();
        shares.join(":")
    }

    /// Where `prepare` records what it loaded.
    pub fn marker_key(&self) -> String {
        format!("loadcell:dataset:{}", self.name)
    }

    fn recorded(&self, state: &str, id: Option<&str>) -> Recorded {
        Recorded {
            state: state.to_string(),
            id: id.map(str::to_string),
            types: self
                .types
                .iter()
                .map(|t| RecordedType {
                    name: t.name.clone(),
                    kind: t.kind,
                    prefix: t.prefix.clone(),
                    key_length: t.key_length,
                    count: t.count,
                    value_size: t.value.describe(),
                    fields: t.fields.clone(),
                })
                .collect(),
        }
    }

    /// `200000 keys: 40000 hash (10 fields), 140000 string, ...`.
    fn describe_counts(&self) -> String {
        let parts: Vec<String> = self
            .types
            .iter()
            .map(|t| match t.kind {
                KeyKind::Hash => format!(
                    "{} {} (hashes of {} fields)",
                    t.count,
                    t.name,
                    t.fields.len()
                ),
                KeyKind::String => format!("{} {}", t.count, t.name),
            })
            .collect();
        format!("{} keys: {}", self.keys, parts.join(", "))
    }

    pub fn to_map(&self, opts: &KvOptions) -> BTreeMap<String, Value> {
        let v = json!({
            "dataset": self.path,
            "dataset_name": self.name,
            "keys": self.keys,
            "key_prefix": self.key_prefix,
            "shares": self.shares(),
            "hot_set": self.hot_set,
            "hot_access": self.hot_access,
            "types": self.types.iter().map(|t| json!({
                "name": t.name,
                "kind": t.kind,
                "count": t.count,
                "hot": t.hot,
                "key_length": t.key_length,
                "value_size": t.value.describe(),
                "fields": t.fields.len(),
            })).collect::<Vec<_>>(),
            "ratio": format!("{}:{}", opts.ratio_set, opts.ratio_get),
            "pipeline": opts.pipeline,
            "distinct_client_seed": opts.distinct_client_seed,
        });
        serde_json::from_value(v).expect("an object")
    }
}

/// Alphanumeric bytes to slice values from: as long as the longest value,
/// and beginning with `id` (alphanumeric too), so that every value, a
/// prefix of the block, carries it.
fn value_block(set: &DataSet, rng: &mut SmallRng, id: &[u8]) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let max = set.types.iter().map(|t| t.value.max()).max().unwrap_or(1);
    let mut block: Vec<u8> = id.iter().copied().take(max).collect();
    block.extend((block.len()..max).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())]));
    block
}

/// Queues the write of record `n` of type `t`: a SET, or an HSET of
/// `fields` (all of them when loading, one in the access phase).
fn queue_write<C: KvConn>(
    conn: &mut C,
    t: &KeyType,
    key: &[u8],
    data: &[u8],
    rng: &mut SmallRng,
    fields: std::ops::Range<usize>,
) -> Result<(), DriverError> {
    match t.kind {
        KeyKind::String => {
            conn.queue_set(key, &data[..t.value.pick(rng.random())]);
            Ok(())
        }
        KeyKind::Hash => {
            let mut args: [&[u8]; HSET_ARGS] = [&[]; HSET_ARGS];
            args[0] = b"HSET";
            args[1] = key;
            let mut argc = 2;
            for f in fields {
                args[argc] = t.fields[f].as_bytes();
                args[argc + 1] = &data[..t.value.pick(rng.random())];
                argc += 2;
            }
            conn.queue_command(&args[..argc])
        }
    }
}
