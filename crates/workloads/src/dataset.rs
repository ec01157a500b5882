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
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::{Driver, DriverError};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use toml::Spanned;

use crate::kv::{flush_all, DataSize, KvOptions, LOAD_BATCH};
use crate::load::load_in_parallel;
use crate::marker::random_id;
use crate::oltp::{CheckError, PrepareObserver};
use crate::NotPrepared;

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

/// The access phase on a data set. Op kinds are `<type>_read` and
/// `<type>_write` for each type, in the file's order.
pub struct DataSetKv {
    set: Arc<DataSet>,
    opts: KvOptions,
    ops: Vec<OpSpec>,
    total_share: u32,
    /// The id in the marker, read when the first session opens: the
    /// run's writes carry it too, so cleanup knows them for loadcell's.
    id: OnceLock<Vec<u8>>,
}

pub struct DataSetSession {
    rng: SmallRng,
    cycle: u64,
    key: Vec<u8>,
    data: Vec<u8>,
    /// Per request in the batch: its op kind.
    kinds: Vec<usize>,
}

impl DataSetKv {
    /// `opts` gives the SET:GET ratio, pipeline depth and seeding.
    pub fn new(set: Arc<DataSet>, opts: KvOptions) -> DataSetKv {
        let mut ops = Vec::new();
        for t in &set.types {
            for (suffix, category) in [("read", Category::Read), ("write", Category::Write)] {
                // Operation names live as long as the run.
                let name: &'static str = Box::leak(format!("{}_{suffix}", t.name).into_boxed_str());
                ops.push(OpSpec { name, category });
            }
        }
        let total_share = set.types.iter().map(|t| t.share).sum();
        DataSetKv {
            set,
            opts,
            ops,
            total_share,
            id: OnceLock::new(),
        }
    }

    /// The id the data set's values carry (empty if its marker has none).
    async fn id<C: KvConn>(&self, conn: &mut C) -> Result<&[u8], DriverError> {
        if let Some(id) = self.id.get() {
            return Ok(id);
        }
        let id = match read_marker(conn, &self.set.marker_key()).await? {
            Some(Ok(Recorded { id: Some(id), .. })) => id.into_bytes(),
            _ => Vec::new(),
        };
        Ok(self.id.get_or_init(|| id))
    }

    /// A type by share, and a record of it: from the hot set with
    /// probability `hot_access`, otherwise from the rest.
    fn pick(&self, rng: &mut SmallRng) -> (usize, u64) {
        let mut r = rng.random_range(0..self.total_share);
        let i = self
            .set
            .types
            .iter()
            .position(|t| {
                let hit = r < t.share;
                r = r.saturating_sub(t.share);
                hit
            })
            .expect("r is below the total share");
        let t = &self.set.types[i];
        let n = if t.hot == t.count || rng.random::<f64>() < self.set.hot_access {
            rng.random_range(0..t.hot)
        } else {
            rng.random_range(t.hot..t.count)
        };
        (i, n)
    }
}

impl<C: KvConn> Script<C> for DataSetKv {
    type Session = DataSetSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, conn: &mut C, info: SessionInfo) -> Result<DataSetSession, DriverError> {
        let id = self.id(conn).await?;
        let mut rng = self.opts.session_rng(&info);
        let data = value_block(&self.set, &mut rng, id);
        Ok(DataSetSession {
            rng,
            cycle: 0,
            key: Vec::with_capacity(MAX_KEY_LEN),
            data,
            kinds: Vec::with_capacity(self.opts.pipeline),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut DataSetSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let ratio_total = (self.opts.ratio_set + self.opts.ratio_get) as u64;
        s.kinds.clear();
        for _ in 0..self.opts.pipeline {
            // memtier's interleaving: the first `ratio_set` of each cycle write.
            let write = s.cycle % ratio_total < self.opts.ratio_set as u64;
            s.cycle += 1;
            let (i, n) = self.pick(&mut s.rng);
            let t = &self.set.types[i];
            t.key(&mut s.key, n);
            match (t.kind, write) {
                (KeyKind::String, false) => conn.queue_get(&s.key),
                (KeyKind::Hash, false) => {
                    let f = s.rng.random_range(0..t.fields.len());
                    conn.queue_command(&[b"HGET", &s.key, t.fields[f].as_bytes()])?;
                }
                (_, true) => {
                    let f = s.rng.random_range(0..t.fields.len().max(1));
                    queue_write(conn, t, &s.key, &s.data, &mut s.rng, f..f + 1)?;
                }
            }
            s.kinds.push(2 * i + write as usize);
        }
        let clock = ctx.batch_clock();
        let mut failure = None;
        let kinds = &s.kinds;
        conn.flush(&mut |at, reply| {
            let kind = kinds[at.index];
            // Even kinds are reads (`<type>_read`), odd ones writes.
            let read = kind.is_multiple_of(2);
            ctx.record_reply(&clock, at.read, kind, reply.is_ok());
            match reply {
                Ok(KvReply::Hit(_)) if read => ctx.count_read(true),
                Ok(KvReply::Miss) if read => ctx.count_read(false),
                Ok(_) => {}
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        })
        .await?;
        failure.map_or(Ok(()), Err)
    }
}

impl DataSetKv {
    /// Before a run: the marker must say that a prepare of this very data
    /// set completed here (a run over keys that are not there would count
    /// nothing but misses).
    pub async fn check<C: KvConn>(&self, conn: &mut C) -> Result<(), CheckError> {
        let set = &self.set;
        let marker = set.marker_key();
        let fatal = |message: String| Err(CheckError::Driver(DriverError::fatal(message)));
        match read_marker(conn, &marker).await? {
            Some(Ok(r)) if r.types == set.recorded(COMPLETE, None).types => match r.state.as_str() {
                COMPLETE => Ok(()),
                _ => Err(CheckError::NotPrepared(NotPrepared(format!(
                    "data set '{}' was only partly loaded (its prepare was interrupted)",
                    set.name
                )))),
            },
            Some(Ok(_)) => fatal(format!(
                "data set '{}' was loaded here from a different definition than {}: run \
                 `loadcell cleanup kv --dataset {} --target …`, then prepare it again",
                set.name, set.path, set.path
            )),
            Some(Err(e)) => fatal(format!(
                "key '{marker}' exists but was not written by loadcell ({e}): rename the data set in {}",
                set.path
            )),
            None => Err(CheckError::NotPrepared(NotPrepared(format!(
                "data set '{}' is not loaded (no key '{marker}')",
                set.name
            )))),
        }
    }
}

/// Reads the marker: what a previous `prepare` recorded, if anything.
async fn read_marker<C: KvConn>(
    conn: &mut C,
    key: &str,
) -> Result<Option<Result<Recorded, String>>, DriverError> {
    let mut found = None;
    let mut failure = None;
    conn.queue_get(key.as_bytes());
    conn.flush(&mut |_, reply| match reply {
        Ok(KvReply::Hit(bytes)) => {
            found = Some(serde_json::from_slice::<Recorded>(bytes).map_err(|e| e.to_string()))
        }
        Ok(_) => {}
        Err(e) => {
            failure.get_or_insert(e);
        }
    })
    .await?;
    failure.map_or(Ok(found), Err)
}

async fn write_marker<C: KvConn>(
    conn: &mut C,
    set: &DataSet,
    state: &str,
    id: &str,
) -> Result<(), DriverError> {
    let value = serde_json::to_vec(&set.recorded(state, Some(id))).expect("serializable");
    conn.queue_set(set.marker_key().as_bytes(), &value);
    flush_all(conn).await
}

/// The first key of a type that already exists, if any (GET for strings,
/// HGET of the first field for hashes).
async fn first_existing<C: KvConn>(
    conn: &mut C,
    set: &DataSet,
) -> Result<Option<String>, DriverError> {
    let mut key = Vec::new();
    for t in &set.types {
        t.key(&mut key, 0);
        match t.kind {
            KeyKind::String => conn.queue_get(&key),
            KeyKind::Hash => conn.queue_command(&[b"HGET", &key, t.fields[0].as_bytes()])?,
        }
    }
    let mut exists = None;
    let mut failure = None;
    conn.flush(&mut |at, reply| match reply {
        Ok(KvReply::Hit(_)) => {
            exists.get_or_insert(at.index);
        }
        Ok(_) => {}
        // A key of another type (WRONGTYPE) is there too.
        Err(e) if e.message.contains("WRONGTYPE") => {
            exists.get_or_insert(at.index);
        }
        Err(e) => {
            failure.get_or_insert(e);
        }
    })
    .await?;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(exists.map(|i| {
        set.types[i].key(&mut key, 0);
        String::from_utf8_lossy(&key).into_owned()
    }))
}

/// Loads every key of the data set (pipelined, [`LOAD_BATCH`] keys a
/// batch) over `connections` connections. Idempotent: a data set this
/// prepare completed is left alone, a partly loaded one is loaded again,
/// and keys loadcell did not write are never overwritten.
pub async fn prepare<D>(
    driver: Arc<D>,
    set: Arc<DataSet>,
    connections: usize,
    connect_timeout: std::time::Duration,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: KvConn,
{
    let (mut first, _) = loadcell_engine::connect_once(&*driver, connect_timeout).await?;
    let marker = set.marker_key();
    let cleanup_hint = format!(
        "run `loadcell cleanup kv --dataset {} --target …` first",
        set.path
    );
    let id = match read_marker(&mut first, &marker).await? {
        Some(Ok(r)) if r.types == set.recorded(COMPLETE, None).types => {
            if r.state == COMPLETE {
                observer.message(&format!(
                    "Data set '{}' is already loaded ({}): nothing to do",
                    set.name,
                    set.describe_counts()
                ));
                return Ok(());
            }
            let Some(id) = r.id else {
                return Err(DriverError::fatal(format!(
                    "data set '{}' was partly loaded by an earlier loadcell, which did not tag \
                     its values: loadcell cannot tell its keys from ones another writer put \
                     there since, so it does not load over them. {}",
                    set.name,
                    delete_by_hand(&r, &marker)
                )));
            };
            observer.message(&format!(
                "Data set '{}' was partly loaded (interrupted): loading it again",
                set.name
            ));
            id
        }
        Some(Ok(_)) => {
            return Err(DriverError::fatal(format!(
                "data set '{}' was loaded here from a different definition than {}: {cleanup_hint} \
                 (cleanup deletes what was recorded in '{marker}')",
                set.name, set.path
            )))
        }
        Some(Err(e)) => {
            return Err(DriverError::fatal(format!(
                "key '{marker}' exists but was not written by loadcell ({e}): left as it is; \
                 rename the data set in {}",
                set.path
            )))
        }
        None => {
            if let Some(key) = first_existing(&mut first, &set).await? {
                return Err(DriverError::fatal(format!(
                    "key '{key}' already exists and was not loaded by loadcell: nothing was written; \
                     choose another key_prefix in {}",
                    set.path
                )));
            }
            // Record first, so an interrupted prepare can still be cleaned up.
            let id = random_id(ID_LEN);
            write_marker(&mut first, &set, LOADING, &id).await?;
            id
        }
    };
    observer.message(&format!(
        "Loading data set '{}' ({}; shares {}) with {}",
        set.name,
        set.describe_counts(),
        set.shares(),
        loadcell_core::words::counted(connections as u64, "connection")
    ));
    observer.add_total(set.keys);
    let loader = Arc::clone(&set);
    let block_id: Arc<[u8]> = Arc::from(id.as_bytes());
    load_in_parallel(
        driver,
        set.keys,
        connections,
        connect_timeout,
        observer,
        move |mut conn, c, _, range, observer| {
            let set = Arc::clone(&loader);
            let block_id = Arc::clone(&block_id);
            async move {
                let mut rng = SmallRng::seed_from_u64(c as u64);
                let data = value_block(&set, &mut rng, &block_id);
                let mut key = Vec::with_capacity(MAX_KEY_LEN);
                // Items are the types' records laid end to end.
                let (mut t, mut base) = (0, 0);
                let mut p = range.start;
                while p < range.end {
                    let end = (p + LOAD_BATCH).min(range.end);
                    for q in p..end {
                        while q >= base + set.types[t].count {
                            base += set.types[t].count;
                            t += 1;
                        }
                        let kt = &set.types[t];
                        kt.key(&mut key, q - base);
                        queue_write(&mut conn, kt, &key, &data, &mut rng, 0..kt.fields.len())?;
                    }
                    flush_all(&mut conn).await?;
                    observer.loaded(end - p);
                    p = end;
                }
                Ok(())
            }
        },
    )
    .await?;
    write_marker(&mut first, &set, COMPLETE, &id).await
}

/// What to tell a user whose data set an earlier loadcell loaded: which
/// keys to delete by hand, if they are loadcell's.
fn delete_by_hand(r: &Recorded, marker: &str) -> String {
    let prefixes: Vec<String> = r
        .types
        .iter()
        .map(|t| format!("{} keys named '{}' and a number", t.count, t.prefix))
        .collect();
    format!(
        "If they are loadcell's, delete by hand the {} and the key '{marker}'",
        prefixes.join(", the ")
    )
}

/// What cleanup found at a key it recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Gone already (deleted, evicted, expired).
    Absent,
    /// A value carrying the data set's id: loadcell wrote it.
    Ours,
    /// Someone else's: a value without the id, or a key of another type.
    Theirs,
}

/// Deletes the keys `prepare` recorded in the data set's marker whose
/// values still carry the marker's id, then the marker; nothing else.
/// Each key's value is read right before its deletion (a batch's reads,
/// then its deletes); a key another writer has written since under the
/// same name is left, and so named. Returns the number of keys deleted.
pub async fn cleanup<C: KvConn>(
    conn: &mut C,
    set: &DataSet,
    observer: &dyn PrepareObserver,
) -> Result<u64, DriverError> {
    let marker = set.marker_key();
    let recorded = match read_marker(conn, &marker).await? {
        None => {
            observer.message(&format!(
                "Nothing to clean up: data set '{}' was not loaded by loadcell here",
                set.name
            ));
            return Ok(0);
        }
        Some(Err(e)) => {
            return Err(DriverError::fatal(format!(
                "key '{marker}' was not written by loadcell ({e}): nothing deleted"
            )))
        }
        Some(Ok(r)) => r,
    };
    let Some(id) = recorded.id.clone() else {
        return Err(DriverError::fatal(format!(
            "data set '{}' was loaded by an earlier loadcell, which did not tag the values it \
             wrote: loadcell cannot tell its keys from ones another writer has put under the \
             same names since, so nothing was deleted. {}",
            set.name,
            delete_by_hand(&recorded, &marker)
        )));
    };
    let total: u64 = recorded.types.iter().map(|t| t.count).sum();
    observer.message(&format!(
        "Deleting the {} of data set '{}' that loadcell loaded...",
        loadcell_core::words::counted(total, "key"),
        set.name
    ));
    observer.add_total(total);
    let (mut deleted, mut theirs, mut absent) = (0u64, 0u64, 0u64);
    let mut key = Vec::with_capacity(MAX_KEY_LEN);
    let mut found = Vec::new();
    for r in &recorded.types {
        // Rebuild the keys from what was recorded, not from the file.
        let t = KeyType {
            name: r.name.clone(),
            kind: r.kind,
            share: 0,
            prefix: r.prefix.clone(),
            key_length: r.key_length,
            count: r.count,
            hot: r.count,
            value: DataSize::Fixed(1),
            fields: Vec::new(),
        };
        // A hash is read field by field: a run's write may have created
        // it again with one field, and another writer's field in it makes
        // it theirs.
        let reads = match r.kind {
            KeyKind::String => 1,
            KeyKind::Hash => r.fields.len().max(1),
        };
        let batch = (10 * LOAD_BATCH / reads as u64).max(1);
        let mut n = 0;
        while n < t.count {
            let end = (n + batch).min(t.count);
            for k in n..end {
                t.key(&mut key, k);
                match t.kind {
                    KeyKind::String => conn.queue_get(&key),
                    KeyKind::Hash => {
                        for f in &r.fields {
                            conn.queue_command(&[b"HGET", &key, f.as_bytes()])?;
                        }
                    }
                }
            }
            found.clear();
            found.resize((end - n) as usize, Found::Absent);
            let mut failure = None;
            conn.flush(&mut |at, reply| {
                let f = &mut found[at.index / reads];
                match reply {
                    Ok(KvReply::Hit(value)) if carries_id(value, id.as_bytes()) => {
                        if *f == Found::Absent {
                            *f = Found::Ours;
                        }
                    }
                    Ok(KvReply::Hit(_)) => *f = Found::Theirs,
                    Ok(_) => {}
                    // Another writer made it a key of another type.
                    Err(e)
                        if e.code.as_deref() == Some("WRONGTYPE")
                            || e.message.contains("WRONGTYPE") =>
                    {
                        *f = Found::Theirs
                    }
                    Err(e) => {
                        failure.get_or_insert(e);
                    }
                }
            })
            .await?;
            if let Some(e) = failure {
                return Err(e);
            }
            for (k, f) in (n..end).zip(&found) {
                match f {
                    Found::Ours => {
                        t.key(&mut key, k);
                        conn.queue_delete(&key);
                        deleted += 1;
                    }
                    Found::Theirs => theirs += 1,
                    Found::Absent => absent += 1,
                }
            }
            flush_all(conn).await?;
            observer.loaded(end - n);
            n = end;
        }
    }
    // The marker last, and only if it is still the one read above.
    match read_marker(conn, &marker).await? {
        Some(Ok(now)) if now.id.as_deref() == Some(id.as_str()) => {
            conn.queue_delete(marker.as_bytes());
            flush_all(conn).await?;
        }
        _ => observer.message(&format!(
            "Leaving key '{marker}': it was written again while cleanup ran"
        )),
    }
    let gone = if absent > 0 {
        format!(" ({absent} of the {total} loadcell loaded were gone already)")
    } else {
        String::new()
    };
    observer.message(&format!(
        "Deleted the {} of data set '{}'{gone}",
        loadcell_core::words::counted(deleted, "key"),
        set.name
    ));
    if theirs > 0 {
        observer.message(&format!(
            "Left {} of data set '{}' in place: not loadcell's. Their values do not \
             carry the id loadcell's prepare wrote them with: another writer wrote them since",
            loadcell_core::words::counted(theirs, "key"),
            set.name
        ));
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;

    const RTB: &str = include_str!("../../../examples/datasets/rtb.toml");

    fn parse(text: &str) -> Result<DataSet, String> {
        DataSet::parse(text, "t.toml")
    }

    const SMALL: &str = r#"
name = "t"
keys = 1000
hot_set = 0.5
hot_access = 0.8

[[type]]
name = "h"
kind = "hash"
share = 2
key_length = 20
fields = 3
field_name_length = 4
value_size = "5-9"

[[type]]
name = "s"
kind = "string"
share = 7
key_length = 12
value_size = 32

[[type]]
name = "big"
kind = "string"
share = 1
key_length = 10
value_size = "100-200"
"#;

    #[test]
    fn rtb_example_parses_with_s2_shapes() {
        let set = DataSet::parse(RTB, "rtb.toml").unwrap();
        assert_eq!(set.name, "rtb");
        assert_eq!(set.keys, 200_000);
        assert_eq!(set.shares(), "2:7:1");
        assert_eq!(set.hot_set, 0.5);
        let shape: Vec<_> = set
            .types
            .iter()
            .map(|t| {
                (
                    t.kind,
                    t.count,
                    t.key_length,
                    t.fields.len(),
                    t.value.clone(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                (KeyKind::Hash, 40_000, 34, 10, DataSize::Range(20, 80)),
                (KeyKind::String, 140_000, 68, 0, DataSize::Fixed(32)),
                (KeyKind::String, 20_000, 19, 0, DataSize::Range(500, 2000)),
            ]
        );
        assert!(set.types[0].fields.iter().all(|f| f.len() == 10));
        assert_eq!(set.types[0].hot, 20_000);
    }

    #[test]
    fn unknown_fields_are_named_with_their_line() {
        let bad = SMALL.replace("share = 7", "share = 7\nvalue_sise = 3");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("unknown field `value_sise`"), "{e}");
        assert!(e.contains("line 20"), "{e}");
        assert!(e.contains("t.toml"), "{e}");
        let top = format!("hot_sett = 0.5\n{SMALL}");
        let e = parse(&top).unwrap_err();
        assert!(
            e.contains("unknown field `hot_sett`") && e.contains("line 1"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_are_explained_with_their_line() {
        let cases = [
            (
                "value_size = \"5-9\"",
                "value_size = \"9-5\"",
                "MIN-MAX",
                "line 14",
            ),
            ("value_size = 32", "value_size = 0", "at least 1", "line 21"),
            (
                "key_length = 10",
                "key_length = 5",
                "key_length 5 must be 6 to 250",
                "line 27",
            ),
            (
                "fields = 3",
                "fields = 0",
                "fields = 0 must be 1 to 64",
                "line 12",
            ),
            (
                "field_name_length = 4",
                "field_name_length = 1",
                "too short",
                "line 13",
            ),
            (
                "kind = \"hash\"",
                "kind = \"list\"",
                "unknown variant `list`",
                "line 9",
            ),
            ("hot_set = 0.5", "hot_set = 1.5", "hot_set = 1.5", "line 4"),
        ];
        for (from, to, want, line) in cases {
            let e = parse(&SMALL.replace(from, to)).unwrap_err();
            assert!(e.contains(want) && e.contains(line), "{to}: {e}");
        }
        let e = parse(&SMALL.replace("share = 1", "share = 1\nfields = 2")).unwrap_err();
        assert!(
            e.contains("only for hashes") && e.contains("line 27"),
            "{e}"
        );
        let e = parse(&SMALL.replace("keys = 1000", "keys = 3")).unwrap_err();
        assert!(e.contains("gets no keys") && e.contains("line 10"), "{e}");
        let e = parse(&SMALL.replace("name = \"s\"", "name = \"h\"")).unwrap_err();
        assert!(
            e.contains("a second type named 'h'") && e.contains("line 17"),
            "{e}"
        );
    }

    #[test]
    fn shares_split_the_keys_exactly() {
        let set = parse(SMALL).unwrap();
        let counts: Vec<u64> = set.types.iter().map(|t| t.count).collect();
        assert_eq!(counts, vec![200, 700, 100]);
        let hot: Vec<u64> = set.types.iter().map(|t| t.hot).collect();
        assert_eq!(hot, vec![100, 350, 50]);
        // Keys that do not divide evenly still add up.
        let odd = parse(&SMALL.replace("keys = 1000", "keys = 1003")).unwrap();
        assert_eq!(odd.types.iter().map(|t| t.count).sum::<u64>(), 1003);
    }

    #[test]
    fn keys_have_their_exact_length_and_are_distinct() {
        let set = parse(SMALL).unwrap();
        let mut buf = Vec::new();
        for t in &set.types {
            let mut seen = std::collections::HashSet::new();
            for n in 0..t.count {
                t.key(&mut buf, n);
                assert_eq!(buf.len(), t.key_length);
                assert!(seen.insert(buf.clone()));
            }
        }
        set.types[0].key(&mut buf, 42);
        assert_eq!(buf, b"t:0:0000000000000042");
        set.types[2].key(&mut buf, 99);
        assert_eq!(buf, b"t:2:000099");
        assert_eq!(set.types[0].fields, vec!["f000", "f001", "f002"]);
    }

    #[test]
    fn writes_have_the_declared_value_sizes() {
        let set = parse(SMALL).unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        let data = value_block(&set, &mut rng, b"0123456789abcdef");
        let mut conn = Recorder::default();
        let mut key = Vec::new();
        for _ in 0..200 {
            for t in &set.types {
                t.key(&mut key, 1);
                queue_write(&mut conn, t, &key, &data, &mut rng, 0..t.fields.len()).unwrap();
            }
        }
        let (mut short, mut long) = (usize::MAX, 0);
        for q in conn.queued.chunks(3) {
            // A hash: HSET key and all three fields, values 5 to 9 bytes.
            assert_eq!(q[0].len(), 2 + 2 * 3);
            assert_eq!(q[0][2], b"f000");
            assert!(q[0][3..]
                .iter()
                .step_by(2)
                .all(|v| (5..=9).contains(&v.len())));
            assert_eq!(q[1][2].len(), 32);
            short = short.min(q[2][2].len());
            long = long.max(q[2][2].len());
        }
        assert!(
            (100..=110).contains(&short) && (190..=200).contains(&long),
            "{short}..{long}"
        );
    }

    #[test]
    fn every_value_carries_the_id_and_markers_of_earlier_versions_have_none() {
        let set = parse(SMALL).unwrap();
        let id = random_id(ID_LEN);
        let data = value_block(&set, &mut SmallRng::seed_from_u64(1), id.as_bytes());
        assert_eq!(data.len(), 200);
        assert!(data.iter().all(u8::is_ascii_alphanumeric));
        // Values are prefixes of the block, down to a single byte.
        for len in [1, 5, ID_LEN, 200] {
            assert!(carries_id(&data[..len], id.as_bytes()), "{len}");
        }
        assert!(!carries_id(b"theirs", id.as_bytes()));
        assert!(!carries_id(b"", id.as_bytes()));
        let other = random_id(ID_LEN);
        assert!(!carries_id(&data, other.as_bytes()));
        // A block shorter than the id holds what fits of it.
        let tiny = SMALL
            .replace("\"100-200\"", "3")
            .replace("\"5-9\"", "2")
            .replace("value_size = 32", "value_size = 3");
        let data = value_block(
            &parse(&tiny).unwrap(),
            &mut SmallRng::seed_from_u64(1),
            id.as_bytes(),
        );
        assert_eq!(data, id.as_bytes()[..3]);

        let recorded = set.recorded(COMPLETE, Some(&id));
        let json = serde_json::to_string(&recorded).unwrap();
        assert!(json.contains(&format!("\"id\":\"{id}\"")), "{json}");
        let earlier = json.replace(&format!(",\"id\":\"{id}\""), "");
        let earlier: Recorded = serde_json::from_str(&earlier).unwrap();
        assert_eq!(earlier.id, None);
        assert_eq!(earlier.types, recorded.types);
    }

    #[test]
    fn accesses_follow_shares_ratio_and_hot_set() {
        let set = Arc::new(parse(SMALL).unwrap());
        let kv = DataSetKv::new(
            Arc::clone(&set),
            KvOptions {
                ratio_set: 1,
                ratio_get: 9,
                ..KvOptions::default()
            },
        );
        let names: Vec<_> = Script::<Recorder>::ops(&kv)
            .iter()
            .map(|o| o.name)
            .collect();
        assert_eq!(
            names,
            [
                "h_read",
                "h_write",
                "s_read",
                "s_write",
                "big_read",
                "big_write"
            ]
        );
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut per_type, mut hot) = ([0u64; 3], 0u64);
        let draws = 100_000;
        for _ in 0..draws {
            let (i, n) = kv.pick(&mut rng);
            per_type[i] += 1;
            assert!(n < set.types[i].count);
            hot += (n < set.types[i].hot) as u64;
        }
        let share = |x: u64| x as f64 / draws as f64;
        assert!((share(per_type[0]) - 0.2).abs() < 0.01, "{per_type:?}");
        assert!((share(per_type[1]) - 0.7).abs() < 0.01, "{per_type:?}");
        assert!((share(hot) - 0.8).abs() < 0.01, "{hot}");
    }
}
