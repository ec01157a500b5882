//! YCSB's core workloads (`ycsb-a` … `ycsb-f`) and the S8 read/write mixes
//! (`mix-write`, `mix-50-50`, `mix-80-20`, `mix-95-5`, `mix-read`): keyed
//! records of N fields, read, updated, inserted, scanned and
//! read-modify-written, on every driver that can store records.
//!
//! As YCSB's `CoreWorkload` does:
//! - keys are `user` + the FNV-1a 64-bit hash of the key number
//!   (`insertorder=hashed`), e.g. `user6284781860667377211` for record 0;
//! - `zipfian` is YCSB's scrambled zipfian (constant 0.99): a Zipf rank of
//!   YCSB's 10^10 (Gray's method, YCSB's zeta), hashed onto a key number
//!   below the records plus the inserts a run expects plus one (`2 ×
//!   operationcount × insertproportion`), redrawn if that record has not
//!   been inserted yet;
//! - `latest` is a zipfian over recency: the newest record is the most
//!   popular, counted from the highest key below which every insert is over
//!   (YCSB's acknowledged counter, shared by every session);
//! - `hotspot` sends `--hotspot-opn-fraction` of the operations to the first
//!   `--hotspot-data-fraction` of the records; `uniform` spreads them evenly;
//! - values are random alphanumeric text, sliced at random offsets from a
//!   1 MiB pool shared by the sessions (YCSB draws each value afresh): a
//!   16 KB page of them compresses as fresh random text does (zlib: 0.75),
//!   where slices of a few kilobytes' pool compressed to 0.28;
//! - an update writes one random field (`writeallfields=false`) unless
//!   `--write-all-fields`; reads read every field; a scan reads 1 to
//!   `--max-scan-length` records (uniform) from a chosen key on.
//!
//! Deliberate differences: each session interleaves operations by smooth
//! weighted round robin, so the mix is exact over every 100 operations
//! instead of drawn at random; a read-modify-write is one operation
//! (`read_modify_write`, timed from the read to the end of the write).
//!
//! Absent records: a read (or read-modify-write) that finds no record is a
//! miss and a failed operation of class "not found" (YCSB: NOT_FOUND on
//! JDBC, ERROR on Redis), as is an UPDATE of no row (JDBC's
//! UNEXPECTED_STATE) and a scan that finds nothing from its start key on
//! (the start is an inserted record, so it should be there). An update on
//! a key-value store writes the record whether or not it was there, as
//! YCSB's Redis binding does. Before a run, [`YcsbSql::check`] and
//! [`YcsbKv::check`] look for a sample of the records and refuse to start
//! when most are missing.
//!
//! Storage, one wrapper per driver family (the two `Script` impls would
//! otherwise overlap):
//! - [`YcsbSql`]: table `usertable` (`YCSB_KEY VARCHAR(255) PRIMARY KEY,
//!   FIELD0..FIELDn TEXT`, YCSB's JDBC schema), prepared statements; a scan
//!   is `SELECT * … WHERE YCSB_KEY >= ? ORDER BY YCSB_KEY LIMIT ?`.
//! - [`YcsbKv`] on drivers with commands (Redis): a hash per record
//!   (`HSET`/`HGETALL`) and a sorted set `_indices` of every key for scans,
//!   exactly as YCSB's Redis binding (`site.ycsb.db.RedisClient`) keeps
//!   them, so data either tool prepared serves the other: a key's score is
//!   Java's `String.hashCode()` of it ([`java_string_hash`]), and a scan
//!   reads `ZRANGEBYSCORE _indices hash(start) +inf LIMIT 0 len`, then
//!   `HGETALL` of each key that range holds.
//! - [`YcsbKv`] without commands (memcached): one value per record, the
//!   fields concatenated (they have a fixed length), `GET`/`SET`; an update
//!   rewrites the whole record, and there is no scan.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::sql::{Dialect, SqlConn, SqlParam};
use loadcell_core::{Driver, DriverError, ErrorClass};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::{json, Value};

use crate::distribution::{Distribution, RandParams, RandType};
use crate::load::load_in_parallel;
use crate::marker::{self, table_exists, Owner};
use crate::oltp::{CheckError, PrepareObserver};
use crate::NotPrepared;

/// The SQL table, as YCSB's JDBC binding names it.
pub const TABLE: &str = "usertable";
/// The sorted set indexing every key, as YCSB's Redis binding names it.
pub const INDEX_KEY: &str = "_indices";
/// The `workload` column of this family's marker rows.
const MARKER_WORKLOAD: &str = "ycsb";
/// Largest `--record-count` (a trillion: far beyond any data set, and far
/// from overflowing key arithmetic).
pub const MAX_RECORDS: u64 = 1_000_000_000_000;
/// Largest `--field-count` (SQL databases limit the columns of a table).
pub const MAX_FIELDS: u32 = 1000;
/// Largest `--field-length`.
pub const MAX_FIELD_LENGTH: usize = 1 << 20;
/// Largest record (`--field-count` × `--field-length`).
pub const MAX_RECORD_BYTES: usize = 16 << 20;
/// YCSB's zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// The workloads, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    A,
    B,
    C,
    D,
    E,
    F,
    MixWrite,
    Mix50_50,
    Mix80_20,
    Mix95_5,
    MixRead,
}

impl Preset {
    pub const ALL: [(&'static str, Preset, &'static str); 11] = [
        (
            "ycsb-a",
            Preset::A,
            "YCSB workload A (update heavy): 50% read, 50% update, zipfian",
        ),
        (
            "ycsb-b",
            Preset::B,
            "YCSB workload B (read mostly): 95% read, 5% update, zipfian",
        ),
        (
            "ycsb-c",
            Preset::C,
            "YCSB workload C (read only): 100% read, zipfian",
        ),
        (
            "ycsb-d",
            Preset::D,
            "YCSB workload D (read latest): 95% read, 5% insert, latest",
        ),
        (
            "ycsb-e",
            Preset::E,
            "YCSB workload E (short ranges): 95% scan of 1-100 records, 5% insert, zipfian",
        ),
        (
            "ycsb-f",
            Preset::F,
            "YCSB workload F: 50% read, 50% read-modify-write, zipfian",
        ),
        (
            "mix-write",
            Preset::MixWrite,
            "100% write of 100-byte records (10 fields of 10 bytes), uniform keys",
        ),
        (
            "mix-50-50",
            Preset::Mix50_50,
            "50% read, 50% write of 100-byte records, uniform keys",
        ),
        (
            "mix-80-20",
            Preset::Mix80_20,
            "80% read, 20% write of 100-byte records, uniform keys",
        ),
        (
            "mix-95-5",
            Preset::Mix95_5,
            "95% read, 5% write of 100-byte records, uniform keys",
        ),
        (
            "mix-read",
            Preset::MixRead,
            "100% read of 100-byte records, uniform keys",
        ),
    ];

    pub fn parse(name: &str) -> Option<Preset> {
        Self::ALL
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, p, _)| *p)
    }

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, p, _)| *p == self)
            .expect("all presets listed")
            .0
    }

    /// The S8 mixes (as opposed to YCSB's lettered workloads).
    pub fn is_mix(self) -> bool {
        matches!(
            self,
            Preset::MixWrite
                | Preset::Mix50_50
                | Preset::Mix80_20
                | Preset::Mix95_5
                | Preset::MixRead
        )
    }

    /// The preset's options before any command-line override: YCSB's
    /// defaults and workload files, or S8's 100-byte records.
    pub fn options(self) -> YcsbOptions {
        let p = |read, update, insert, scan, read_modify_write| Proportions {
            read,
            update,
            insert,
            scan,
            read_modify_write,
        };
        let (proportions, distribution) = match self {
            Preset::A => (p(50, 50, 0, 0, 0), RequestDistribution::Zipfian),
            Preset::B => (p(95, 5, 0, 0, 0), RequestDistribution::Zipfian),
            Preset::C => (p(100, 0, 0, 0, 0), RequestDistribution::Zipfian),
            Preset::D => (p(95, 0, 5, 0, 0), RequestDistribution::Latest),
            Preset::E => (p(0, 0, 5, 95, 0), RequestDistribution::Zipfian),
            Preset::F => (p(50, 0, 0, 0, 50), RequestDistribution::Zipfian),
            Preset::MixWrite => (p(0, 100, 0, 0, 0), RequestDistribution::Uniform),
            Preset::Mix50_50 => (p(50, 50, 0, 0, 0), RequestDistribution::Uniform),
            Preset::Mix80_20 => (p(80, 20, 0, 0, 0), RequestDistribution::Uniform),
            Preset::Mix95_5 => (p(95, 5, 0, 0, 0), RequestDistribution::Uniform),
            Preset::MixRead => (p(100, 0, 0, 0, 0), RequestDistribution::Uniform),
        };
        let mix = self.is_mix();
        YcsbOptions {
            proportions,
            request_distribution: distribution,
            field_length: if mix { 10 } else { 100 },
            // A write in the mixes is a whole record, as in S8's model.
            write_all_fields: mix,
            // CoreWorkload's default is 1000; YCSB's workloade sets 100.
            max_scan_length: if self == Preset::E { 100 } else { 1000 },
            ..YcsbOptions::default()
        }
    }
}

/// How records are chosen (YCSB's `requestdistribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestDistribution {
    Uniform,
    Zipfian,
    Latest,
    Hotspot,
}

impl RequestDistribution {
    pub const NAMES: &'static [&'static str] = &["uniform", "zipfian", "latest", "hotspot"];

    pub fn parse(s: &str) -> Result<RequestDistribution, String> {
        Ok(match s {
            "uniform" => RequestDistribution::Uniform,
            "zipfian" => RequestDistribution::Zipfian,
            "latest" => RequestDistribution::Latest,
            "hotspot" => RequestDistribution::Hotspot,
            _ => {
                return Err(format!(
                    "unknown --request-distribution '{s}': expected one of {}",
                    Self::NAMES.join(", ")
                ))
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// The operation mix, in percent (any weights work; the presets use
/// percent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Proportions {
    pub read: u32,
    pub update: u32,
    pub insert: u32,
    pub scan: u32,
    pub read_modify_write: u32,
}

impl Proportions {
    /// Weights indexed like [`OPS`].
    fn weights(&self) -> [u32; 5] {
        [
            self.read,
            self.update,
            self.insert,
            self.scan,
            self.read_modify_write,
        ]
    }

    /// The sum of the weights.
    pub fn total(&self) -> u64 {
        self.weights().iter().map(|&w| w as u64).sum()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct YcsbOptions {
    pub proportions: Proportions,
    pub request_distribution: RequestDistribution,
    pub record_count: u64,
    pub operation_count: u64,
    pub field_count: u32,
    pub field_length: usize,
    pub max_scan_length: u64,
    pub hotspot_data_fraction: f64,
    pub hotspot_opn_fraction: f64,
    pub write_all_fields: bool,
}

impl Default for YcsbOptions {
    /// YCSB's `CoreWorkload` defaults (its read/update 95/5 uniform mix).
    fn default() -> Self {
        YcsbOptions {
            proportions: Proportions {
                read: 95,
                update: 5,
                ..Proportions::default()
            },
            request_distribution: RequestDistribution::Uniform,
            record_count: 1000,
            operation_count: 1000,
            field_count: 10,
            field_length: 100,
            // CoreWorkload's maxscanlength default.
            max_scan_length: 1000,
            hotspot_data_fraction: 0.2,
            hotspot_opn_fraction: 0.8,
            write_all_fields: false,
        }
    }
}

impl YcsbOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.proportions.total() == 0 {
            return Err("the operation mix is empty: every proportion is 0".into());
        }
        if self.record_count == 0 || self.record_count > MAX_RECORDS {
            return Err(format!(
                "--record-count must be between 1 and {MAX_RECORDS}"
            ));
        }
        if self.operation_count == 0 {
            return Err("--operation-count must be at least 1".into());
        }
        if !(1..=MAX_FIELDS).contains(&self.field_count) {
            return Err(format!("--field-count must be between 1 and {MAX_FIELDS}"));
        }
        if !(1..=MAX_FIELD_LENGTH).contains(&self.field_length) {
            return Err(format!(
                "--field-length must be between 1 and {MAX_FIELD_LENGTH} bytes"
            ));
        }
        if self.record_bytes() > MAX_RECORD_BYTES {
            return Err(format!(
                "a record of {} of {} is {} bytes; at most {MAX_RECORD_BYTES} \
                 (lower --field-count or --field-length)",
                loadcell_core::words::counted(self.field_count as u64, "field"),
                self.field_length,
                self.record_bytes()
            ));
        }
        if self.max_scan_length == 0 {
            return Err("--max-scan-length must be at least 1".into());
        }
        for (name, v) in [
            ("--hotspot-data-fraction", self.hotspot_data_fraction),
            ("--hotspot-opn-fraction", self.hotspot_opn_fraction),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{name} must be between 0 and 1"));
            }
        }
        Ok(())
    }

    /// Whether the mix has scans (which not every driver can do).
    pub fn needs_scan(&self) -> bool {
        self.proportions.scan > 0
    }

    /// Bytes of one record's field values.
    pub fn record_bytes(&self) -> usize {
        self.field_count as usize * self.field_length
    }

    /// Every option as resolved, for the result file (YCSB's property
    /// names, in snake case).
    pub fn to_map(&self) -> BTreeMap<String, Value> {
        let total = self.proportions.total() as f64;
        let share = |w: u32| w as f64 / total;
        let p = &self.proportions;
        let v = json!({
            "read_proportion": share(p.read),
            "update_proportion": share(p.update),
            "insert_proportion": share(p.insert),
            "scan_proportion": share(p.scan),
            "read_modify_write_proportion": share(p.read_modify_write),
            "request_distribution": self.request_distribution.as_str(),
            "record_count": self.record_count,
            "operation_count": self.operation_count,
            "field_count": self.field_count,
            "field_length": self.field_length,
            "max_scan_length": self.max_scan_length,
            "scan_length_distribution": "uniform",
            "hotspot_data_fraction": self.hotspot_data_fraction,
            "hotspot_opn_fraction": self.hotspot_opn_fraction,
            "write_all_fields": self.write_all_fields,
            "read_all_fields": true,
            "insert_order": "hashed",
            "zipfian_constant": ZIPFIAN_CONSTANT,
        });
        serde_json::from_value(v).expect("an object")
    }
}

// Operation kinds, indexes into `OPS`.
const READ: usize = 0;
const UPDATE: usize = 1;
const INSERT: usize = 2;
const SCAN: usize = 3;
const RMW: usize = 4;

const fn op(name: &'static str, category: Category) -> OpSpec {
    OpSpec { name, category }
}

pub const OPS: [OpSpec; 5] = [
    op("read", Category::Read),
    op("update", Category::Write),
    op("insert", Category::Write),
    op("scan", Category::Read),
    op("read_modify_write", Category::Write),
];

/// Records an operation of kind `op` that found no record: the error's
/// message names the operation, not the key, so that samples add up.
fn not_found(ctx: &mut Ctx, op: usize) {
    let message = match op {
        READ => "read: no record with the chosen key",
        UPDATE => "update: no record with the chosen key (0 rows updated)",
        SCAN => "scan: no record at or after the chosen key",
        RMW => "read_modify_write: no record with the chosen key",
        _ => unreachable!("an insert finds no record by design"),
    };
    ctx.not_found(op, message);
}

/// Counts a read (or read-modify-write) as a hit or a miss; a miss is a
/// failed operation too, as YCSB counts it.
fn count_read(ctx: &mut Ctx, op: usize, found: bool) {
    ctx.count_read(found);
    if !found {
        not_found(ctx, op);
    }
}

/// How many records a run's check looks for.
const SAMPLED_RECORDS: u64 = 16;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 bytes of the number, low
/// byte first, then the absolute value as a signed 64-bit number.
pub fn fnv1a_64(n: u64) -> i64 {
    const OFFSET_BASIS: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET_BASIS;
    let mut v = n;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(PRIME);
        v >>= 8;
    }
    // Java's Math.abs: i64::MIN stays negative.
    (h as i64).wrapping_abs()
}

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + … + s[n-1]` over the UTF-16
/// code units, in wrapping 32-bit arithmetic. YCSB's Redis binding scores a
/// key by it in the `_indices` sorted set.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Writes the key of record `n` into `buf`: `user` + its hash, as YCSB
/// names records with `insertorder=hashed` (and no zero padding).
pub fn push_key(buf: &mut String, n: u64) {
    buf.clear();
    buf.push_str("user");
    buf.push_str(itoa::Buffer::new().format(fnv1a_64(n)));
}

/// Inserts that may be in flight at once, beyond the lowest unfinished one,
/// and still be acknowledged in order.
const ACK_WINDOW: usize = 1 << 16;

/// How often a key draw may land on a record not inserted yet before it
/// falls back to an inserted one (YCSB redraws without limit).
const MAX_REDRAWS: usize = 64;

/// YCSB's `ScrambledZipfianGenerator`: Zipf(0.99) ranks over a fixed 10^10
/// items, drawn by Gray et al.'s method with YCSB's precomputed zeta, then
/// hashed onto the key space. The hot keys' shares do not depend on the
/// record count: the hottest gets 1/26.47 ≈ 3.8% of the requests (a Zipf
/// over just the records would give it 13% of 1000).
#[derive(Debug, Clone)]
struct ScrambledZipfian {
    alpha: f64,
    eta: f64,
    /// Where rank 1 ends: 1 + 0.5^theta.
    rank_1_end: f64,
}

impl ScrambledZipfian {
    /// YCSB's `ITEM_COUNT` and its zeta at the constant 0.99.
    const ITEM_COUNT: u64 = 10_000_000_000;
    const ZETAN: f64 = 26.469_028_201_783_02;

    fn new() -> ScrambledZipfian {
        let theta = ZIPFIAN_CONSTANT;
        // `new ZipfianGenerator(0, ITEM_COUNT, ...)`: ITEM_COUNT + 1 items.
        let items = (Self::ITEM_COUNT + 1) as f64;
        let zeta_2 = 1.0 + 0.5f64.powf(theta);
        ScrambledZipfian {
            alpha: 1.0 / (1.0 - theta),
            eta: (1.0 - (2.0 / items).powf(1.0 - theta)) / (1.0 - zeta_2 / Self::ZETAN),
            rank_1_end: zeta_2,
        }
    }

    /// `ZipfianGenerator.nextLong(ITEM_COUNT + 1)`.
    #[inline]
    fn rank(&self, rng: &mut SmallRng) -> u64 {
        let u: f64 = rng.random();
        let uz = u * Self::ZETAN;
        if uz < 1.0 {
            0
        } else if uz < self.rank_1_end {
            1
        } else {
            let items = (Self::ITEM_COUNT + 1) as f64;
            (items * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        }
    }
}

/// The workload logic shared by both families: the operation mix, the
/// key choosers and the insert counter. Shared by all sessions.
pub struct Ycsb {
    opts: YcsbOptions,
    weights: [u32; 5],
    total_weight: i64,
    /// Zipf ranks `0..item_count` (0 the most popular), for latest.
    ranks: Option<Distribution>,
    /// YCSB's scrambled zipfian ranks, for zipfian.
    scrambled: ScrambledZipfian,
    /// Records plus the inserts a run is expected to make, plus one (YCSB's
    /// key chooser spans `0..=recordcount + expectednewkeys`).
    item_count: u64,
    /// The next key number an insert takes.
    next_insert: AtomicU64,
    /// One past the highest key number below which every insert has
    /// finished: reads choose below it.
    inserted: AtomicU64,
    /// Inserts finished ahead of one below them, waiting for it, as in
    /// YCSB's `AcknowledgedCounterGenerator` (a ring of flags indexed by
    /// key number; empty when the mix has no inserts).
    acked: Mutex<Vec<bool>>,
    /// Hash field names for key-value stores (`field0`…).
    field_names: Vec<String>,
    /// Random alphanumeric text that field values are sliced from, shared
    /// by every session.
    pool: Arc<str>,
}

/// One operation as chosen, kept until it succeeds so that a retried
/// event repeats it (same key, same insert key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Choice {
    op: usize,
    key: u64,
    /// Records a scan reads.
    len: u64,
    /// The field an update writes (unless every field is written).
    field: usize,
}

/// Per-session random state and buffers, the same for both families.
struct Draw {
    rng: SmallRng,
    /// Smooth weighted round robin state, one per operation kind.
    cycle: [i64; 5],
    pending: Option<Choice>,
    /// The workload's value pool.
    pool: Arc<str>,
    key: String,
}

/// Pool bytes beyond the longest value. Values are slices at random
/// offsets; a pool much larger than a storage engine's compression block
/// keeps slices in one block from overlapping, so values compress about as
/// YCSB's fresh random ones do, not as repeats of a few kilobytes.
const POOL_EXTRA: usize = 1 << 20;

/// The pool is the same on every run.
const POOL_SEED: u64 = 0x5943_5342;

/// `len` random characters of `[A-Za-z0-9]` (nothing to escape in SQL text
/// or a protocol), six bits of the generator at a time.
fn random_text(rng: &mut SmallRng, len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut text = Vec::with_capacity(len);
    while text.len() < len {
        let mut bits = rng.next_u64();
        for _ in 0..10 {
            let i = (bits & 63) as usize;
            bits >>= 6;
            // 62 and 63 are skipped, so every character is equally likely.
            if i < ALPHABET.len() && text.len() < len {
                text.push(ALPHABET[i]);
            }
        }
    }
    String::from_utf8(text).expect("the alphabet is ASCII")
}

impl Draw {
    fn new(y: &Ycsb, seed: u64) -> Draw {
        let mut d = Draw {
            rng: SmallRng::seed_from_u64(seed),
            cycle: [0; 5],
            pending: None,
            pool: Arc::clone(&y.pool),
            key: String::with_capacity(24),
        };
        // Sessions start at different points of the cycle.
        let skip = d.rng.random_range(0..y.total_weight);
        for _ in 0..skip {
            y.next_op(&mut d.cycle);
        }
        d
    }
}

/// `len` random bytes of text from `pool`.
#[inline]
fn pick<'a>(pool: &'a str, rng: &mut SmallRng, len: usize) -> &'a str {
    let off = rng.random_range(0..=pool.len() - len);
    &pool[off..off + len]
}

/// A slice of `n` items: on the stack when it fits, else on the heap.
#[inline]
fn scratch<'s, T: Copy>(stack: &'s mut [T], heap: &'s mut Vec<T>, n: usize) -> &'s mut [T] {
    if n <= stack.len() {
        &mut stack[..n]
    } else {
        heap.clear();
        heap.resize(n, stack[0]);
        &mut heap[..]
    }
}

impl Ycsb {
    pub fn new(opts: YcsbOptions) -> Ycsb {
        let weights = opts.proportions.weights();
        let total = opts.proportions.total();
        let insert_share = opts.proportions.insert as f64 / total.max(1) as f64;
        // YCSB: expectednewkeys = operationcount * insertproportion * 2.
        let expected_new = (opts.operation_count as f64 * insert_share * 2.0) as u64;
        let item_count = opts
            .record_count
            .saturating_add(expected_new)
            .saturating_add(1)
            .min(1 << 62);
        let ranks = (opts.request_distribution == RequestDistribution::Latest).then(|| {
            Distribution::new(
                RandType::Zipfian,
                RandParams {
                    zipfian_exp: ZIPFIAN_CONSTANT,
                    ..RandParams::default()
                },
                0,
                item_count - 1,
            )
        });
        let field_names = (0..opts.field_count).map(|i| format!("field{i}")).collect();
        // The longest value is a field, or a whole record where a record is
        // one value (memcached).
        let longest = opts.record_bytes().max(opts.field_length);
        let pool = random_text(
            &mut SmallRng::seed_from_u64(POOL_SEED),
            longest + POOL_EXTRA,
        );
        Ycsb {
            pool: pool.into(),
            weights,
            total_weight: total as i64,
            ranks,
            scrambled: ScrambledZipfian::new(),
            item_count,
            next_insert: AtomicU64::new(opts.record_count),
            inserted: AtomicU64::new(opts.record_count),
            acked: Mutex::new(if opts.proportions.insert > 0 {
                vec![false; ACK_WINDOW]
            } else {
                Vec::new()
            }),
            field_names,
            opts,
        }
    }

    pub fn options(&self) -> &YcsbOptions {
        &self.opts
    }

    /// Inserts continue from key number `n` (when the store already holds
    /// records beyond `--record-count` from earlier runs' inserts).
    pub fn start_inserts_at(&self, n: u64) {
        let n = n.max(self.opts.record_count);
        let mut acked = self.acked.lock().unwrap_or_else(|e| e.into_inner());
        acked.iter_mut().for_each(|a| *a = false);
        self.next_insert.store(n, Ordering::Relaxed);
        self.inserted.store(n, Ordering::Relaxed);
    }

    /// The insert of key number `key` is over, done or failed (YCSB
    /// acknowledges in a `finally`): `inserted` moves past it once every
    /// insert below it is over too, so reads never choose a key whose
    /// insert may still be in flight.
    fn acknowledge(&self, key: u64) {
        let mut acked = self.acked.lock().unwrap_or_else(|e| e.into_inner());
        let mut limit = self.inserted.load(Ordering::Relaxed);
        let window = acked.len() as u64;
        if key < limit || window == 0 {
            return;
        }
        if key - limit >= window {
            // More inserts in flight than the window holds: order is given
            // up for the ones below.
            acked.iter_mut().for_each(|a| *a = false);
            self.inserted.store(key + 1, Ordering::Relaxed);
            return;
        }
        acked[(key % window) as usize] = true;
        while acked[(limit % window) as usize] {
            acked[(limit % window) as usize] = false;
            limit += 1;
        }
        self.inserted.store(limit, Ordering::Relaxed);
    }

    /// One past the highest key number inserted so far.
    pub fn inserted(&self) -> u64 {
        self.inserted.load(Ordering::Relaxed)
    }

    /// The records a check before a run looks for: the first, the last,
    /// and others evenly spaced between them.
    fn sampled_records(&self) -> Vec<u64> {
        let records = self.opts.record_count;
        let samples = SAMPLED_RECORDS.min(records);
        (0..samples)
            .map(|i| match samples {
                1 => 0,
                _ => i * (records - 1) / (samples - 1),
            })
            .collect()
    }

    /// The check's verdict on `store`, which holds `present` of the
    /// `sampled` records: a data set missing most of them (empty, or
    /// prepared with far fewer records) is not prepared. A few missing
    /// (evicted by a cache) still run, each read of them a "not found".
    fn judge_sample(&self, store: &str, present: usize, sampled: usize) -> Result<(), CheckError> {
        if 2 * present >= sampled {
            return Ok(());
        }
        Err(CheckError::NotPrepared(NotPrepared(format!(
            "{store} holds {present} of {sampled} records sampled from the {} of --record-count",
            self.opts.record_count
        ))))
    }

    /// The next operation kind: smooth weighted round robin, so every
    /// `total_weight` consecutive operations hold each kind exactly its
    /// weight's number of times, evenly spread.
    #[inline]
    fn next_op(&self, cycle: &mut [i64; 5]) -> usize {
        let mut best = 0;
        for i in 0..5 {
            cycle[i] += self.weights[i] as i64;
            if cycle[i] > cycle[best] {
                best = i;
            }
        }
        cycle[best] -= self.total_weight;
        best
    }

    /// A key number for a read, update, scan or read-modify-write.
    #[inline]
    fn next_key(&self, rng: &mut SmallRng) -> u64 {
        let records = self.opts.record_count;
        match self.opts.request_distribution {
            RequestDistribution::Uniform => rng.random_range(0..records),
            RequestDistribution::Zipfian => {
                let inserted = self.inserted();
                for _ in 0..MAX_REDRAWS {
                    let rank = self.scrambled.rank(rng);
                    let k = fnv1a_64(rank).unsigned_abs() % self.item_count;
                    if k < inserted {
                        return k;
                    }
                }
                fnv1a_64(self.scrambled.rank(rng)).unsigned_abs() % inserted
            }
            RequestDistribution::Latest => {
                let ranks = self.ranks.as_ref().expect("built for latest");
                let newest = self.inserted() - 1;
                for _ in 0..MAX_REDRAWS {
                    let back = ranks.sample(rng);
                    if back <= newest {
                        return newest - back;
                    }
                }
                newest
            }
            RequestDistribution::Hotspot => {
                let hot = ((records as f64 * self.opts.hotspot_data_fraction) as u64).min(records);
                let cold = records - hot;
                let to_hot = rng.random::<f64>() < self.opts.hotspot_opn_fraction;
                if hot > 0 && (to_hot || cold == 0) {
                    rng.random_range(0..hot)
                } else {
                    hot + rng.random_range(0..cold)
                }
            }
        }
    }

    /// The operation to run: the one that failed last time, if any (so a
    /// retry repeats it), else the next of the mix.
    fn choose(&self, d: &mut Draw) -> Choice {
        if let Some(c) = d.pending {
            return c;
        }
        let op = self.next_op(&mut d.cycle);
        let key = if op == INSERT {
            self.next_insert.fetch_add(1, Ordering::Relaxed)
        } else {
            self.next_key(&mut d.rng)
        };
        let len = if op == SCAN {
            d.rng.random_range(1..=self.opts.max_scan_length)
        } else {
            0
        };
        let field = d.rng.random_range(0..self.opts.field_count as usize);
        let c = Choice {
            op,
            key,
            len,
            field,
        };
        d.pending = Some(c);
        c
    }

    /// The chosen operation succeeded.
    fn done(&self, d: &mut Draw, c: Choice) {
        d.pending = None;
        self.finished(c);
    }

    /// The chosen operation is over, done or failed: an insert is
    /// acknowledged either way (a retry of the same key, if any, finds it
    /// acknowledged).
    fn finished(&self, c: Choice) {
        if c.op == INSERT {
            self.acknowledge(c.key);
        }
    }
}

// ---------------------------------------------------------------------------
// SQL

/// Statement text with the dialect's placeholders.
struct SqlText {
    dialect: Dialect,
    sql: String,
    params: usize,
}

impl SqlText {
    fn new(dialect: Dialect) -> SqlText {
        SqlText {
            dialect,
            sql: String::with_capacity(128),
            params: 0,
        }
    }

    fn push(mut self, s: &str) -> SqlText {
        self.sql.push_str(s);
        self
    }

    fn param(mut self) -> SqlText {
        self.params += 1;
        let p = self.dialect.placeholder(self.params);
        self.sql.push_str(&p);
        self
    }
}

fn read_sql(d: Dialect) -> String {
    SqlText::new(d)
        .push(&format!("SELECT * FROM {TABLE} WHERE YCSB_KEY = "))
        .param()
        .sql
}

fn scan_sql(d: Dialect) -> String {
    SqlText::new(d)
        .push(&format!("SELECT * FROM {TABLE} WHERE YCSB_KEY >= "))
        .param()
        .push(" ORDER BY YCSB_KEY LIMIT ")
        .param()
        .sql
}

fn insert_sql(d: Dialect, fields: u32) -> String {
    let mut t = SqlText::new(d).push(&format!("INSERT INTO {TABLE} (YCSB_KEY"));
    for i in 0..fields {
        t = t.push(&format!(", FIELD{i}"));
    }
    t = t.push(") VALUES (").param();
    for _ in 0..fields {
        t = t.push(", ").param();
    }
    t.push(")").sql
}

/// `UPDATE usertable SET FIELDi = ?, … WHERE YCSB_KEY = ?`.
fn update_sql(d: Dialect, fields: impl Iterator<Item = u32>) -> String {
    let mut t = SqlText::new(d).push(&format!("UPDATE {TABLE} SET "));
    for (n, i) in fields.enumerate() {
        if n > 0 {
            t = t.push(", ");
        }
        t = t.push(&format!("FIELD{i} = ")).param();
    }
    t.push(" WHERE YCSB_KEY = ").param().sql
}

/// What follows `CREATE TABLE usertable`: YCSB's JDBC binding's columns.
fn table_definition(dialect: Dialect, fields: u32) -> String {
    let mut sql = "(YCSB_KEY VARCHAR(255) PRIMARY KEY".to_string();
    for i in 0..fields {
        let _ = write!(sql, ", FIELD{i} TEXT");
    }
    sql.push(')');
    if dialect == Dialect::MySql {
        sql.push_str(" /*! ENGINE = innodb */");
    }
    sql
}

/// Parameters that fit on the stack (a key and 32 fields).
const STACK_PARAMS: usize = 33;

/// YCSB on a SQL database: `usertable` with prepared statements.
pub struct YcsbSql {
    core: Ycsb,
}

/// A session's prepared statements (`None` where the mix never uses them).
pub struct YcsbSqlSession<S> {
    d: Draw,
    read: Option<S>,
    scan: Option<S>,
    insert: Option<S>,
    /// One per field, or one writing every field; prepared on first use
    /// when there are many fields.
    update: Vec<Option<S>>,
}

/// Up to this many per-field UPDATE statements are prepared when a session
/// opens; beyond it, each on first use.
const EAGER_UPDATES: u32 = 32;

impl YcsbSql {
    pub fn new(opts: YcsbOptions) -> YcsbSql {
        YcsbSql {
            core: Ycsb::new(opts),
        }
    }

    pub fn core(&self) -> &Ycsb {
        &self.core
    }

    /// Before a run: `usertable` must exist with enough fields and hold
    /// most of a sample of the records, and inserts continue after the
    /// records already there.
    pub async fn check<C: SqlConn>(&self, conn: &mut C) -> Result<(), CheckError> {
        if !table_exists(conn, TABLE).await? {
            return Err(CheckError::NotPrepared(NotPrepared::missing(&format!(
                "table {TABLE}"
            ))));
        }
        check_fields(conn, self.core.opts.field_count).await?;
        let sampled = self.core.sampled_records();
        let mut keys = String::new();
        let mut key = String::new();
        for (i, &n) in sampled.iter().enumerate() {
            push_key(&mut key, n);
            // Keys are `user` and digits: nothing to escape.
            let _ = write!(keys, "{}'{key}'", if i > 0 { ", " } else { "" });
        }
        let present = conn
            .query_i64(&format!(
                "SELECT COUNT(*) FROM {TABLE} WHERE YCSB_KEY IN ({keys})"
            ))
            .await?
            .unwrap_or(0)
            .max(0) as usize;
        self.core
            .judge_sample(&format!("table {TABLE}"), present, sampled.len())?;
        if self.core.opts.proportions.insert > 0 {
            let rows = conn
                .query_i64(&format!("SELECT COUNT(*) FROM {TABLE}"))
                .await?
                .unwrap_or(0)
                .max(0) as u64;
            self.core.start_inserts_at(rows);
        }
        Ok(())
    }

    /// The UPDATE statement for `field` (or for every field), prepared if
    /// it is not yet.
    async fn update_stmt<'s, C: SqlConn>(
        &self,
        conn: &mut C,
        stmts: &'s mut [Option<C::Stmt>],
        field: usize,
    ) -> Result<&'s C::Stmt, DriverError> {
        let o = &self.core.opts;
        let (slot, fields) = if o.write_all_fields {
            (0, 0..o.field_count)
        } else {
            (field, field as u32..field as u32 + 1)
        };
        if stmts[slot].is_none() {
            let sql = update_sql(conn.dialect(), fields);
            stmts[slot] = Some(conn.prepare(&sql).await?);
        }
        Ok(stmts[slot].as_ref().expect("just prepared"))
    }

    async fn update<C: SqlConn>(
        &self,
        conn: &mut C,
        stmt: &C::Stmt,
        d: &mut Draw,
    ) -> Result<u64, DriverError> {
        let len = self.core.opts.field_length;
        let Draw { rng, pool, key, .. } = d;
        let pool: &str = pool;
        if self.core.opts.write_all_fields {
            let n = self.core.opts.field_count as usize + 1;
            let mut stack = [SqlParam::Int(0); STACK_PARAMS];
            let mut heap = Vec::new();
            let params = scratch(&mut stack, &mut heap, n);
            for p in &mut params[..n - 1] {
                *p = SqlParam::Text(pick(pool, rng, len));
            }
            params[n - 1] = SqlParam::Text(key);
            conn.exec(stmt, params).await
        } else {
            let value = pick(pool, rng, len);
            conn.exec(stmt, &[SqlParam::Text(value), SqlParam::Text(key)])
                .await
        }
    }

    async fn insert<C: SqlConn>(
        &self,
        conn: &mut C,
        stmt: &C::Stmt,
        d: &mut Draw,
    ) -> Result<u64, DriverError> {
        let len = self.core.opts.field_length;
        let Draw { rng, pool, key, .. } = d;
        let pool: &str = pool;
        let n = self.core.opts.field_count as usize + 1;
        let mut stack = [SqlParam::Int(0); STACK_PARAMS];
        let mut heap = Vec::new();
        let params = scratch(&mut stack, &mut heap, n);
        params[0] = SqlParam::Text(key);
        for p in &mut params[1..] {
            *p = SqlParam::Text(pick(pool, rng, len));
        }
        conn.exec(stmt, params).await
    }
}

/// Fails unless `usertable` has a column for every field.
async fn check_fields<C: SqlConn>(conn: &mut C, fields: u32) -> Result<(), DriverError> {
    let last = fields - 1;
    match conn
        .query_i64(&format!(
            "SELECT COUNT(*) FROM {TABLE} WHERE 1 = 0 AND FIELD{last} IS NULL"
        ))
        .await
    {
        Err(e) if e.class == ErrorClass::Fatal => Err(DriverError::fatal(format!(
            "table {TABLE} has no column FIELD{last}: it was prepared with fewer fields than \
             --field-count {fields}; give the --field-count it was prepared with, or run \
             `loadcell cleanup` and prepare it again ({e})"
        ))),
        other => other.map(|_| ()),
    }
}

impl<C: SqlConn> Script<C> for YcsbSql {
    type Session = YcsbSqlSession<C::Stmt>;

    fn ops(&self) -> &[OpSpec] {
        &OPS
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, conn: &mut C, info: SessionInfo) -> Result<Self::Session, DriverError> {
        let dialect = conn.dialect();
        let o = &self.core.opts;
        let w = &self.core.weights;
        let read = match w[READ] + w[RMW] {
            0 => None,
            _ => Some(conn.prepare(&read_sql(dialect)).await?),
        };
        let scan = match w[SCAN] {
            0 => None,
            _ => Some(conn.prepare(&scan_sql(dialect)).await?),
        };
        let insert = match w[INSERT] {
            0 => None,
            _ => Some(conn.prepare(&insert_sql(dialect, o.field_count)).await?),
        };
        let mut update = Vec::new();
        if w[UPDATE] + w[RMW] > 0 {
            let slots = if o.write_all_fields { 1 } else { o.field_count };
            update.extend((0..slots).map(|_| None));
            if slots <= EAGER_UPDATES {
                for field in 0..slots as usize {
                    self.update_stmt(conn, &mut update, field).await?;
                }
            }
        }
        Ok(YcsbSqlSession {
            d: Draw::new(&self.core, info.seed),
            read,
            scan,
            insert,
            update,
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut Self::Session,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let c = self.core.choose(&mut s.d);
        push_key(&mut s.d.key, c.key);
        const PREPARED: &str = "prepared in open()";
        match c.op {
            READ => {
                let stmt = s.read.as_ref().expect(PREPARED);
                let rows = ctx
                    .op(READ, conn.exec(stmt, &[SqlParam::Text(&s.d.key)]))
                    .await?;
                count_read(ctx, READ, rows > 0);
            }
            UPDATE => {
                let stmt = self.update_stmt(conn, &mut s.update, c.field).await?;
                let rows = ctx.op(UPDATE, self.update(conn, stmt, &mut s.d)).await?;
                if rows == 0 {
                    not_found(ctx, UPDATE);
                }
            }
            INSERT => {
                let stmt = s.insert.as_ref().expect(PREPARED);
                ctx.op(INSERT, self.insert(conn, stmt, &mut s.d))
                    .await
                    .inspect_err(|_| self.core.finished(c))?;
            }
            SCAN => {
                let stmt = s.scan.as_ref().expect(PREPARED);
                let params = [SqlParam::Text(&s.d.key), SqlParam::Int(c.len as i64)];
                if ctx.op(SCAN, conn.exec(stmt, &params)).await? == 0 {
                    not_found(ctx, SCAN);
                }
            }
            _ => {
                let read = s.read.as_ref().expect(PREPARED);
                let update = self.update_stmt(conn, &mut s.update, c.field).await?;
                let d = &mut s.d;
                let (read_rows, updated_rows) = ctx
                    .op(RMW, async {
                        let read_rows = conn.exec(read, &[SqlParam::Text(&d.key)]).await?;
                        let updated_rows = self.update(conn, update, d).await?;
                        Ok((read_rows, updated_rows))
                    })
                    .await?;
                ctx.count_read(read_rows > 0);
                if read_rows == 0 || updated_rows == 0 {
                    not_found(ctx, RMW);
                }
            }
        }
        self.core.done(&mut s.d, c);
        Ok(())
    }
}

/// A bulk INSERT is sent before it would pass this size.
const BULK_INSERT_BYTES: usize = 512 * 1024;

/// Creates and loads `usertable` with records `0..record_count`, spread
/// over `threads` connections (one for SQLite). Idempotent: a table
/// loadcell created and fully loaded is left alone, a partly loaded one is
/// completed, and a table it did not create is never touched.
pub async fn prepare_sql<D>(
    driver: Arc<D>,
    opts: &YcsbOptions,
    threads: usize,
    connect_timeout: std::time::Duration,
    seed: u64,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: SqlConn,
{
    let (mut first, _) = loadcell_engine::connect_once(&*driver, connect_timeout).await?;
    let dialect = first.dialect();
    marker::ensure(&mut first).await?;
    let owner = marker::owner(&mut first, TABLE).await?;
    let records = opts.record_count;
    match owner {
        Owner::Other => {
            observer.message(&format!(
                "Table '{TABLE}' already exists and was not created by loadcell: left as it is"
            ));
            return Ok(());
        }
        Owner::Earlier => {
            observer.message(&marker::earlier_prepare_message(TABLE));
            return Ok(());
        }
        Owner::Loadcell(_) | Owner::Nobody => {}
    }
    let complete = if matches!(owner, Owner::Loadcell(_)) {
        check_fields(&mut first, opts.field_count).await?;
        let have = first
            .query_i64(&format!("SELECT COUNT(*) FROM {TABLE}"))
            .await?
            .unwrap_or(0)
            .max(0) as u64;
        if have >= records {
            observer.message(&format!(
                "Table '{TABLE}' already exists with {}: nothing to do",
                loadcell_core::words::counted(have, "record")
            ));
            return Ok(());
        }
        observer.message(&format!(
            "Table '{TABLE}' exists with {have} of {}: loading the missing ones",
            loadcell_core::words::counted(records, "record")
        ));
        true
    } else {
        observer.message(&format!("Creating table '{TABLE}'..."));
        // Record first, so an interrupted prepare can still be cleaned up;
        // the table carries the same tag from its creation on.
        let tag = marker::Tag::new();
        marker::record(&mut first, TABLE, MARKER_WORKLOAD, &tag).await?;
        let definition = table_definition(dialect, opts.field_count);
        marker::create(&mut first, TABLE, &definition, &tag).await?;
        observer.message(&format!(
            "Inserting {} into '{TABLE}'",
            loadcell_core::words::counted(records, "record")
        ));
        false
    };
    observer.add_total(records);
    // SQLite has one writer at a time: more connections only wait.
    let threads = if dialect == Dialect::Sqlite {
        1
    } else {
        threads.clamp(1, 64).min(records as usize)
    };
    drop(first);
    let ycsb = Rc::new(Ycsb::new(opts.clone()));
    load_in_parallel(
        driver,
        records,
        threads,
        connect_timeout,
        observer,
        move |mut conn, i, _, keys, observer| {
            let ycsb = Rc::clone(&ycsb);
            async move {
                let mut d = Draw::new(&ycsb, session_seed(seed, i));
                load_sql(&mut conn, &ycsb, &mut d, keys, complete, &*observer).await
            }
        },
    )
    .await
}

/// A loading connection's seed, apart from every other connection's.
fn session_seed(seed: u64, connection: usize) -> u64 {
    seed ^ (connection as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Inserts records `keys` with multi-row INSERTs; `skip_existing` makes the
/// INSERT ignore records already there.
async fn load_sql<C: SqlConn>(
    conn: &mut C,
    y: &Ycsb,
    d: &mut Draw,
    keys: std::ops::Range<u64>,
    skip_existing: bool,
    observer: &dyn PrepareObserver,
) -> Result<(), DriverError> {
    let dialect = conn.dialect();
    let o = &y.opts;
    let verb = match (skip_existing, dialect) {
        (true, Dialect::MySql) => "INSERT IGNORE INTO",
        (true, Dialect::Sqlite) => "INSERT OR IGNORE INTO",
        _ => "INSERT INTO",
    };
    let suffix = match (skip_existing, dialect) {
        (true, Dialect::Postgres) => " ON CONFLICT DO NOTHING",
        _ => "",
    };
    let mut header = format!("{verb} {TABLE} (YCSB_KEY");
    for i in 0..o.field_count {
        let _ = write!(header, ", FIELD{i}");
    }
    header.push_str(") VALUES ");
    let row_bytes = 30 + o.field_count as usize * (o.field_length + 3);
    let mut sql = String::with_capacity(BULK_INSERT_BYTES.max(row_bytes) + header.len() + 64);
    let mut in_batch = 0u64;
    for k in keys {
        if in_batch > 0 && sql.len() + row_bytes > BULK_INSERT_BYTES {
            sql.push_str(suffix);
            conn.simple(&sql).await?;
            observer.loaded(in_batch);
            in_batch = 0;
        }
        if in_batch == 0 {
            sql.clear();
            sql.push_str(&header);
        } else {
            sql.push(',');
        }
        push_key(&mut d.key, k);
        // Keys and values are alphanumeric: nothing to escape.
        let _ = write!(sql, "('{}'", d.key);
        for _ in 0..o.field_count {
            sql.push_str(",'");
            sql.push_str(pick(&d.pool, &mut d.rng, o.field_length));
            sql.push('\'');
        }
        sql.push(')');
        in_batch += 1;
    }
    if in_batch > 0 {
        sql.push_str(suffix);
        conn.simple(&sql).await?;
        observer.loaded(in_batch);
    }
    Ok(())
}

/// Drops `usertable` if loadcell's `prepare` created it and it still
/// carries its tag, and nothing else.
pub async fn cleanup<C: SqlConn>(
    conn: &mut C,
    observer: &dyn PrepareObserver,
) -> Result<Vec<String>, DriverError> {
    marker::cleanup(conn, MARKER_WORKLOAD, observer).await
}

// ---------------------------------------------------------------------------
// Key-value

/// Arguments that fit on the stack: a command, a key and 32 fields with
/// their names.
const STACK_ARGS: usize = 2 + 2 * 32;

/// YCSB on a key-value store: a hash per record and a sorted set for scans
/// where the driver takes commands (`hashes`), one serialized value per
/// record where it only has GET and SET.
pub struct YcsbKv {
    core: Ycsb,
    hashes: bool,
}

pub struct YcsbKvSession {
    d: Draw,
    /// Decimal numbers for command arguments.
    num: Vec<u8>,
    len: Vec<u8>,
    /// The keys a scan's range holds, end to end, and where each ends.
    range_keys: Vec<u8>,
    range_ends: Vec<usize>,
}

/// Whether a reply found what it asked for: a value, or a non-empty array
/// (a hash's fields). `None` when it cannot tell: a write's reply, or a
/// driver that stores nothing (the simulator answers commands with Done).
fn found(reply: &KvReply<'_>) -> Option<bool> {
    match reply {
        KvReply::Hit(_) => Some(true),
        KvReply::Miss => Some(false),
        KvReply::Array(a) => Some(!a.is_empty()),
        KvReply::Done => None,
    }
}

/// Sends everything queued and calls `on_reply` with each reply's index
/// and reply; the first error of any reply fails it.
async fn flush_with<C: KvConn>(
    conn: &mut C,
    mut on_reply: impl FnMut(usize, KvReply<'_>),
) -> Result<(), DriverError> {
    let mut failure = None;
    conn.flush(&mut |at, reply| match reply {
        Ok(reply) => on_reply(at.index, reply),
        Err(e) => {
            failure.get_or_insert(e);
        }
    })
    .await?;
    failure.map_or(Ok(()), Err)
}

/// Sends everything queued; returns whether the first reply found its
/// record (see [`found`]).
async fn flush<C: KvConn>(conn: &mut C) -> Result<Option<bool>, DriverError> {
    let mut first = None;
    flush_with(conn, |index, reply| {
        if index == 0 {
            first = found(&reply);
        }
    })
    .await?;
    Ok(first)
}

impl YcsbKv {
    /// `hashes`: the driver takes arbitrary commands (Redis hashes and a
    /// sorted-set index); otherwise one GET/SET value per record.
    pub fn new(opts: YcsbOptions, hashes: bool) -> YcsbKv {
        YcsbKv {
            core: Ycsb::new(opts),
            hashes,
        }
    }

    pub fn core(&self) -> &Ycsb {
        &self.core
    }

    fn new_session(&self, seed: u64) -> YcsbKvSession {
        YcsbKvSession {
            d: Draw::new(&self.core, seed),
            num: Vec::with_capacity(20),
            len: Vec::with_capacity(20),
            range_keys: Vec::new(),
            range_ends: Vec::new(),
        }
    }

    /// Before a run: most of a sample of the records must be there (a
    /// driver that cannot tell, the simulator, is taken at its word), and
    /// where the mix scans, in the `_indices` sorted set with YCSB's
    /// scores.
    pub async fn check<C: KvConn>(&self, conn: &mut C) -> Result<(), CheckError> {
        let sampled = self.core.sampled_records();
        let scans = self.hashes && self.core.opts.needs_scan();
        let mut key = String::new();
        for &n in &sampled {
            push_key(&mut key, n);
            if self.hashes {
                let field = self.core.field_names[0].as_bytes();
                conn.queue_command(&[b"HGET", key.as_bytes(), field])?;
            } else {
                conn.queue_get(key.as_bytes());
            }
            if scans {
                conn.queue_command(&[b"ZSCORE", INDEX_KEY.as_bytes(), key.as_bytes()])?;
            }
        }
        let per_record = if scans { 2 } else { 1 };
        let (mut present, mut unknown, mut indexed, mut misscored) = (0, 0, 0, 0);
        flush_with(conn, |index, reply| {
            if index % per_record == 0 {
                match found(&reply) {
                    Some(true) => present += 1,
                    Some(false) => {}
                    None => unknown += 1,
                }
            } else if let KvReply::Hit(score) = reply {
                indexed += 1;
                push_key(&mut key, sampled[index / per_record]);
                let scored_as_ycsb = std::str::from_utf8(score)
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
                    == Some(f64::from(java_string_hash(&key)));
                misscored += usize::from(!scored_as_ycsb);
            }
        })
        .await?;
        if unknown > 0 {
            return Ok(());
        }
        self.core
            .judge_sample("the store", present, sampled.len())?;
        if scans {
            if misscored > 0 {
                return Err(CheckError::NotPrepared(NotPrepared(format!(
                    "the sorted set {INDEX_KEY} scores {misscored} of {indexed} sampled records \
                     otherwise than YCSB (by Java's hashCode of the key), so scans would read \
                     the wrong records (an earlier loadcell scored them by record number)"
                ))));
            }
            self.core.judge_sample(
                &format!("the sorted set {INDEX_KEY}"),
                indexed,
                sampled.len(),
            )?;
        }
        Ok(())
    }

    fn queue_read<C: KvConn>(&self, conn: &mut C, key: &str) -> Result<(), DriverError> {
        if self.hashes {
            conn.queue_command(&[b"HGETALL", key.as_bytes()])
        } else {
            conn.queue_get(key.as_bytes());
            Ok(())
        }
    }

    /// Writes field `field` of the record (every field with `all`); without
    /// hashes, the whole record.
    fn queue_write<C: KvConn>(
        &self,
        conn: &mut C,
        d: &mut Draw,
        field: usize,
        all: bool,
    ) -> Result<(), DriverError> {
        let o = &self.core.opts;
        let Draw { rng, pool, key, .. } = d;
        let pool: &str = pool;
        if !self.hashes {
            conn.queue_set(key.as_bytes(), pick(pool, rng, o.record_bytes()).as_bytes());
            return Ok(());
        }
        let fields = if all { o.field_count as usize } else { 1 };
        let n = 2 + 2 * fields;
        let mut stack: [&[u8]; STACK_ARGS] = [&[]; STACK_ARGS];
        let mut heap = Vec::new();
        let args = scratch(&mut stack, &mut heap, n);
        args[0] = b"HSET";
        args[1] = key.as_bytes();
        for i in 0..fields {
            let f = if all { i } else { field };
            args[2 + 2 * i] = self.core.field_names[f].as_bytes();
            args[3 + 2 * i] = pick(pool, rng, o.field_length).as_bytes();
        }
        conn.queue_command(args)
    }

    /// A new record (the session's key): every field, and its entry in the
    /// scan index, scored as YCSB scores it.
    fn queue_insert<C: KvConn>(
        &self,
        conn: &mut C,
        s: &mut YcsbKvSession,
    ) -> Result<(), DriverError> {
        self.queue_write(conn, &mut s.d, 0, true)?;
        if self.hashes {
            s.num.clear();
            let score = java_string_hash(&s.d.key);
            s.num
                .extend_from_slice(itoa::Buffer::new().format(score).as_bytes());
            conn.queue_command(&[b"ZADD", INDEX_KEY.as_bytes(), &s.num, s.d.key.as_bytes()])?;
        }
        Ok(())
    }

    /// Queues the read of the range of `len` keys the sorted set holds
    /// from the session's key's score on (YCSB's scan, first step).
    fn queue_range<C: KvConn>(
        &self,
        conn: &mut C,
        s: &mut YcsbKvSession,
        len: u64,
    ) -> Result<(), DriverError> {
        if !self.hashes {
            return Err(DriverError::fatal(
                "scan needs a driver that takes commands (a sorted-set index)",
            ));
        }
        s.num.clear();
        s.num.extend_from_slice(
            itoa::Buffer::new()
                .format(java_string_hash(&s.d.key))
                .as_bytes(),
        );
        s.len.clear();
        s.len
            .extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
        conn.queue_command(&[
            b"ZRANGEBYSCORE",
            INDEX_KEY.as_bytes(),
            &s.num,
            b"+inf",
            b"LIMIT",
            b"0",
            &s.len,
        ])
    }

    /// YCSB's scan: the keys the range from the session's key on holds,
    /// then every record of them. Returns how many keys the range held
    /// (`None` if the driver returned no array: the simulator).
    async fn scan<C: KvConn>(
        &self,
        conn: &mut C,
        s: &mut YcsbKvSession,
        len: u64,
    ) -> Result<Option<usize>, DriverError> {
        self.queue_range(conn, s, len)?;
        let YcsbKvSession {
            range_keys,
            range_ends,
            ..
        } = s;
        range_keys.clear();
        range_ends.clear();
        let mut array = false;
        flush_with(conn, |_, reply| {
            if let KvReply::Array(keys) = reply {
                array = true;
                for key in keys.strings().flatten() {
                    range_keys.extend_from_slice(key);
                    range_ends.push(range_keys.len());
                }
            }
        })
        .await?;
        let mut start = 0;
        for &end in range_ends.iter() {
            conn.queue_command(&[b"HGETALL", &range_keys[start..end]])?;
            start = end;
        }
        flush(conn).await?;
        Ok(array.then_some(range_ends.len()))
    }
}

impl<C: KvConn> Script<C> for YcsbKv {
    type Session = YcsbKvSession;

    fn ops(&self) -> &[OpSpec] {
        &OPS
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, info: SessionInfo) -> Result<YcsbKvSession, DriverError> {
        Ok(self.new_session(info.seed))
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut YcsbKvSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let c = self.core.choose(&mut s.d);
        push_key(&mut s.d.key, c.key);
        let all = self.core.opts.write_all_fields;
        match c.op {
            READ => {
                let found = ctx
                    .op(READ, async {
                        self.queue_read(conn, &s.d.key)?;
                        flush(conn).await
                    })
                    .await?;
                if let Some(found) = found {
                    count_read(ctx, READ, found);
                }
            }
            UPDATE => {
                ctx.op(UPDATE, async {
                    self.queue_write(conn, &mut s.d, c.field, all)?;
                    flush(conn).await
                })
                .await?;
            }
            INSERT => {
                ctx.op(INSERT, async {
                    self.queue_insert(conn, s)?;
                    flush(conn).await
                })
                .await
                .inspect_err(|_| self.core.finished(c))?;
            }
            SCAN => {
                let held = ctx.op(SCAN, self.scan(conn, s, c.len)).await?;
                if held == Some(0) {
                    not_found(ctx, SCAN);
                }
            }
            _ => {
                // As YCSB: the write goes ahead (creating the record on
                // Redis) whether or not the read found it.
                let found = ctx
                    .op(RMW, async {
                        self.queue_read(conn, &s.d.key)?;
                        let found = flush(conn).await?;
                        self.queue_write(conn, &mut s.d, c.field, all)?;
                        flush(conn).await?;
                        Ok(found)
                    })
                    .await?;
                if let Some(found) = found {
                    count_read(ctx, RMW, found);
                }
            }
        }
        self.core.done(&mut s.d, c);
        Ok(())
    }
}

/// Loads records `0..record_count` (pipelined, 100 records a batch),
/// spread over `connections` connections. Records already there are
/// overwritten with new values.
pub async fn prepare_kv<D>(
    driver: Arc<D>,
    opts: &YcsbOptions,
    hashes: bool,
    connections: usize,
    connect_timeout: std::time::Duration,
    seed: u64,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: KvConn,
{
    const BATCH: u64 = 100;
    let records = opts.record_count;
    let connections = connections.clamp(1, 64).min(records as usize);
    observer.message(&format!(
        "Loading {} ({}) with {}",
        loadcell_core::words::counted(records, "record"),
        if hashes {
            "hashes, indexed in the sorted set '_indices'"
        } else {
            "one value each"
        },
        loadcell_core::words::counted(connections as u64, "connection")
    ));
    observer.add_total(records);
    let kv = Rc::new(YcsbKv::new(opts.clone(), hashes));
    load_in_parallel(
        driver,
        records,
        connections,
        connect_timeout,
        observer,
        move |mut conn, c, _, keys, observer| {
            let kv = Rc::clone(&kv);
            async move {
                let mut s = kv.new_session(session_seed(seed, c));
                let mut n = keys.start;
                while n < keys.end {
                    let end = (n + BATCH).min(keys.end);
                    for k in n..end {
                        push_key(&mut s.d.key, k);
                        kv.queue_insert(&mut conn, &mut s)?;
                    }
                    flush(&mut conn).await?;
                    observer.loaded(end - n);
                    n = end;
                }
                Ok(())
            }
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;

    fn ycsb(preset: Preset, edit: impl FnOnce(&mut YcsbOptions)) -> Ycsb {
        let mut o = preset.options();
        edit(&mut o);
        o.validate().unwrap();
        Ycsb::new(o)
    }

    fn draw(y: &Ycsb, seed: u64) -> Draw {
        Draw::new(y, seed)
    }

    /// `n` operations as a session would run them (each succeeding).
    fn run_ops(y: &Ycsb, d: &mut Draw, n: usize) -> Vec<Choice> {
        (0..n)
            .map(|_| {
                let c = y.choose(d);
                y.done(d, c);
                c
            })
            .collect()
    }

    fn counts(y: &Ycsb, seed: u64, n: usize) -> [usize; 5] {
        let mut d = draw(y, seed);
        let mut counts = [0; 5];
        for c in run_ops(y, &mut d, n) {
            counts[c.op] += 1;
        }
        counts
    }

    #[test]
    fn keys_are_hashed_as_ycsb_names_them() {
        assert_eq!(fnv1a_64(0), 6_284_781_860_667_377_211);
        assert_eq!(fnv1a_64(1), 8_517_097_267_634_966_620);
        assert_eq!(fnv1a_64(2), 1_820_151_046_732_198_393);
        assert_eq!(fnv1a_64(4), 3_232_700_585_171_816_769);
        let mut k = String::new();
        push_key(&mut k, 0);
        assert_eq!(k, "user6284781860667377211");
        push_key(&mut k, 3);
        assert_eq!(k, "user4052466453699787802");
        // Hashing spreads neighbouring numbers and never collides here.
        let keys: std::collections::HashSet<i64> = (0..100_000).map(fnv1a_64).collect();
        assert_eq!(keys.len(), 100_000);
        assert!(keys.iter().all(|&h| h >= 0));
    }

    /// Values of `s.hashCode()` printed by Java 17.
    #[test]
    fn keys_are_scored_by_java_string_hash_code() {
        for (s, java) in [
            ("", 0),
            ("a", 97),
            ("user1234", -267_577_715),
            ("hello world", 1_794_106_052),
            ("user6284781860667377211", -594_971_599),
            ("user4052466453699787802", -1_414_300_200),
            // UTF-16 code units: a character beyond the BMP is two.
            ("é😀", 1_996_812),
        ] {
            assert_eq!(java_string_hash(s), java, "{s:?}");
        }
    }

    #[test]
    fn a_check_samples_the_first_the_last_and_records_between() {
        let y = ycsb(Preset::C, |o| o.record_count = 1000);
        let sampled = y.sampled_records();
        assert_eq!(sampled.len(), 16);
        assert_eq!((sampled[0], sampled[15]), (0, 999));
        assert!(sampled.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            ycsb(Preset::C, |o| o.record_count = 3).sampled_records(),
            [0, 1, 2]
        );
        assert_eq!(
            ycsb(Preset::C, |o| o.record_count = 1).sampled_records(),
            [0]
        );
        assert!(y.judge_sample("t", 8, 16).is_ok(), "a cache may evict some");
        let e = y.judge_sample("table usertable", 7, 16).unwrap_err();
        assert_eq!(
            e.to_string(),
            "table usertable holds 7 of 16 records sampled from the 1000 of --record-count"
        );
    }

    #[test]
    fn presets_have_ycsb_and_s8_mixes() {
        let mix = |p: Preset| {
            let o = p.options();
            (o.proportions.weights(), o.request_distribution)
        };
        use RequestDistribution::*;
        assert_eq!(mix(Preset::A), ([50, 50, 0, 0, 0], Zipfian));
        assert_eq!(mix(Preset::B), ([95, 5, 0, 0, 0], Zipfian));
        assert_eq!(mix(Preset::C), ([100, 0, 0, 0, 0], Zipfian));
        assert_eq!(mix(Preset::D), ([95, 0, 5, 0, 0], Latest));
        assert_eq!(mix(Preset::E), ([0, 0, 5, 95, 0], Zipfian));
        assert_eq!(mix(Preset::F), ([50, 0, 0, 0, 50], Zipfian));
        assert_eq!(mix(Preset::MixWrite), ([0, 100, 0, 0, 0], Uniform));
        assert_eq!(mix(Preset::Mix80_20), ([80, 20, 0, 0, 0], Uniform));
        let a = Preset::A.options();
        assert_eq!(
            (
                a.record_count,
                a.operation_count,
                a.field_count,
                a.field_length
            ),
            (1000, 1000, 10, 100)
        );
        assert_eq!(a.max_scan_length, 1000);
        assert_eq!(Preset::E.options().max_scan_length, 100);
        assert!(!a.write_all_fields);
        let m = Preset::Mix95_5.options();
        assert_eq!(m.record_bytes(), 100);
        assert!(m.write_all_fields);
        for (name, p, _) in Preset::ALL {
            assert_eq!(Preset::parse(name), Some(p));
            assert_eq!(p.name(), name);
            assert!(p.options().validate().is_ok());
        }
        assert_eq!(Preset::parse("ycsb-g"), None);
    }

    #[test]
    fn operation_mixes_are_exact() {
        for (name, p, _) in Preset::ALL {
            let y = ycsb(p, |_| {});
            let w = p.options().proportions.weights();
            for seed in [1, 2, 3] {
                let c = counts(&y, seed, 10_000);
                let expected = w.map(|x| x as usize * 100);
                assert_eq!(c, expected, "{name} seed {seed}");
            }
            // Exact within every window of 100 operations, too.
            let mut d = draw(&y, 9);
            for _ in 0..5 {
                let mut window = [0usize; 5];
                for c in run_ops(&y, &mut d, 100) {
                    window[c.op] += 1;
                }
                assert_eq!(window, w.map(|x| x as usize), "{name}");
            }
        }
        // Evenly spread: 95/5 never runs two updates back to back.
        let y = ycsb(Preset::B, |_| {});
        let mut d = draw(&y, 4);
        let ops: Vec<usize> = run_ops(&y, &mut d, 1000).iter().map(|c| c.op).collect();
        assert!(ops.windows(2).all(|w| !(w[0] == UPDATE && w[1] == UPDATE)));
        // Sessions start at different points of the cycle.
        let starts: std::collections::HashSet<Vec<usize>> = (0..8)
            .map(|seed| {
                let mut d = draw(&y, seed);
                run_ops(&y, &mut d, 20).iter().map(|c| c.op).collect()
            })
            .collect();
        assert!(starts.len() > 1);
    }

    #[test]
    fn a_failed_operation_is_repeated() {
        let y = ycsb(Preset::D, |_| {});
        let mut d = draw(&y, 5);
        // Run until an insert comes up, fail it twice, then succeed.
        let insert = loop {
            let c = y.choose(&mut d);
            if c.op == INSERT {
                break c;
            }
            y.done(&mut d, c);
        };
        assert_eq!(insert.key, 1000, "inserts continue after the records");
        assert_eq!(y.choose(&mut d), insert);
        assert_eq!(y.choose(&mut d), insert);
        assert_eq!(y.inserted(), 1000);
        y.done(&mut d, insert);
        assert_eq!(y.inserted(), 1001);
        let next = loop {
            let c = y.choose(&mut d);
            y.done(&mut d, c);
            if c.op == INSERT {
                break c;
            }
        };
        assert_eq!(next.key, 1001);
        y.start_inserts_at(5000);
        assert_eq!(y.inserted(), 5000);
        y.start_inserts_at(10);
        assert_eq!(y.inserted(), 1000, "never below the record count");
    }

    #[test]
    fn reads_pass_an_insert_only_once_every_insert_below_it_is_over() {
        let y = ycsb(Preset::D, |_| {});
        let key = |k| Choice {
            op: INSERT,
            key: k,
            len: 0,
            field: 0,
        };
        // Three inserts in flight: 1000, 1001, 1002.
        y.acknowledge(1002);
        assert_eq!(y.inserted(), 1000, "1000 and 1001 may still be in flight");
        y.finished(key(1000));
        assert_eq!(y.inserted(), 1001, "a failed insert is over too");
        y.acknowledge(1001);
        assert_eq!(y.inserted(), 1003);
        // Acknowledging again (a retry of 1001) changes nothing.
        y.acknowledge(1001);
        assert_eq!(y.inserted(), 1003);
    }

    fn key_draws(y: &Ycsb, n: usize) -> Vec<u64> {
        let mut rng = SmallRng::seed_from_u64(77);
        (0..n).map(|_| y.next_key(&mut rng)).collect()
    }

    fn frequencies(keys: &[u64]) -> Vec<(u64, usize)> {
        let mut m = std::collections::HashMap::new();
        for &k in keys {
            *m.entry(k).or_insert(0usize) += 1;
        }
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    #[test]
    fn uniform_covers_the_records_evenly() {
        let y = ycsb(Preset::MixRead, |_| {});
        let keys = key_draws(&y, 200_000);
        assert!(keys.iter().all(|&k| k < 1000));
        let f = frequencies(&keys);
        assert_eq!(f.len(), 1000);
        // 200 expected per key: none far off.
        assert!(f[0].1 < 300 && f[999].1 > 120, "{:?} {:?}", f[0], f[999]);
    }

    #[test]
    fn zipfian_is_skewed_and_scrambled() {
        let y = ycsb(Preset::A, |_| {});
        let n = 200_000;
        let keys = key_draws(&y, n);
        assert!(keys.iter().all(|&k| k < 1000));
        let f = frequencies(&keys);
        // YCSB's scrambled zipfian: rank 0 of its 10^10 gets 1/26.47 of
        // the draws (plus its share of the hashed tail), rank 1 half that,
        // whatever the record count; the top 10% of keys get about a third.
        let top = f[0].1 as f64 / n as f64;
        assert!((0.033..0.045).contains(&top), "{top}");
        let second = f[1].1 as f64 / n as f64;
        assert!((0.016..0.025).contains(&second), "{second}");
        let top100: usize = f.iter().take(100).map(|x| x.1).sum();
        let share = top100 as f64 / n as f64;
        assert!((0.2..0.4).contains(&share), "{share}");
        // Rank 0 is scrambled onto fnv(0) % 1001 (YCSB's item count is
        // records + expected inserts + 1), not onto record 0.
        assert_eq!(f[0].0, 6_284_781_860_667_377_211 % 1001);
        assert_eq!(f[1].0, 8_517_097_267_634_966_620 % 1001);
        // The hot records are spread over the key space.
        let hot_low = f.iter().take(20).filter(|x| x.0 < 500).count();
        assert!((4..=16).contains(&hot_low), "{hot_low}");
    }

    #[test]
    fn zipfian_counts_expected_inserts_but_reads_only_inserted_records() {
        // ycsb-e expects 2 * 1000 * 5% = 100 new records.
        let y = ycsb(Preset::E, |_| {});
        assert_eq!(y.item_count, 1101);
        let keys = key_draws(&y, 50_000);
        assert!(keys.iter().all(|&k| k < 1000));
        y.start_inserts_at(1100);
        let keys = key_draws(&y, 50_000);
        assert!(keys.iter().any(|&k| k >= 1000));
        assert!(keys.iter().all(|&k| k < 1100));
    }

    #[test]
    fn latest_favours_recent_inserts() {
        let y = ycsb(Preset::D, |_| {});
        let n = 100_000;
        let keys = key_draws(&y, n);
        assert!(keys.iter().all(|&k| k < 1000));
        let f = frequencies(&keys);
        assert_eq!(f[0].0, 999, "the newest record is the most popular");
        assert_eq!(f[1].0, 998);
        let recent = keys.iter().filter(|&&k| k >= 900).count() as f64 / n as f64;
        assert!(recent > 0.6, "{recent}");
        // Inserts move the hot spot along.
        let mut d = draw(&y, 3);
        let inserted = run_ops(&y, &mut d, 2000)
            .iter()
            .filter(|c| c.op == INSERT)
            .count() as u64;
        assert_eq!(inserted, 100);
        assert_eq!(y.inserted(), 1100);
        let keys = key_draws(&y, n);
        let f = frequencies(&keys);
        assert_eq!(f[0].0, 1099);
        let newest = keys.iter().filter(|&&k| k >= 1000).count() as f64 / n as f64;
        assert!(newest > 0.6, "{newest}");
    }

    #[test]
    fn hotspot_sends_most_operations_to_few_records() {
        let y = ycsb(Preset::A, |o| {
            o.request_distribution = RequestDistribution::Hotspot
        });
        let n = 200_000;
        let keys = key_draws(&y, n);
        assert!(keys.iter().all(|&k| k < 1000));
        let hot = keys.iter().filter(|&&k| k < 200).count() as f64 / n as f64;
        assert!((hot - 0.8).abs() < 0.01, "{hot}");
        let f = frequencies(&keys);
        assert_eq!(f.len(), 1000, "cold records are read too");

        let y = ycsb(Preset::A, |o| {
            o.request_distribution = RequestDistribution::Hotspot;
            o.hotspot_data_fraction = 0.1;
            o.hotspot_opn_fraction = 0.95;
        });
        let keys = key_draws(&y, n);
        let hot = keys.iter().filter(|&&k| k < 100).count() as f64 / n as f64;
        assert!((hot - 0.95).abs() < 0.01, "{hot}");
        // Degenerate fractions stay in range.
        for (data, opn) in [(0.0, 0.8), (1.0, 0.8), (0.2, 0.0), (0.2, 1.0)] {
            let y = ycsb(Preset::A, |o| {
                o.request_distribution = RequestDistribution::Hotspot;
                o.hotspot_data_fraction = data;
                o.hotspot_opn_fraction = opn;
            });
            assert!(key_draws(&y, 1000).iter().all(|&k| k < 1000));
        }
    }

    #[test]
    fn scans_and_updates_draw_within_bounds() {
        let y = ycsb(Preset::E, |o| o.max_scan_length = 10);
        let mut d = draw(&y, 8);
        let scans: Vec<Choice> = run_ops(&y, &mut d, 5000)
            .into_iter()
            .filter(|c| c.op == SCAN)
            .collect();
        assert_eq!(scans.len(), 4750);
        assert!(scans.iter().all(|c| (1..=10).contains(&c.len)));
        assert!(scans.iter().any(|c| c.len == 1) && scans.iter().any(|c| c.len == 10));
        assert!(scans.iter().all(|c| c.field < 10));
        let v = pick(&d.pool, &mut d.rng, 100);
        assert_eq!(v.len(), 100);
        assert!(v.bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    /// A 16 KB page of 100-byte values: with a pool of a few kilobytes most
    /// pairs overlapped (repeated text a block compressor shrinks); now
    /// about two pairs of the 12,720 may.
    #[test]
    fn values_in_one_block_rarely_share_text() {
        let y = ycsb(Preset::A, |_| {});
        let (mut a, mut b) = (draw(&y, 1), draw(&y, 2));
        assert!(Arc::ptr_eq(&a.pool, &b.pool), "one pool for every session");
        let base = y.pool.as_ptr() as usize;
        let offsets: Vec<usize> = (0..160)
            .map(|i| {
                let d = if i % 2 == 0 { &mut a } else { &mut b };
                pick(&d.pool, &mut d.rng, 100).as_ptr() as usize - base
            })
            .collect();
        let overlapping = (0..offsets.len())
            .flat_map(|i| (0..i).map(move |j| (i, j)))
            .filter(|&(i, j)| offsets[i].abs_diff(offsets[j]) < 100)
            .count();
        assert!(overlapping <= 10, "{overlapping} overlapping pairs");
    }

    #[test]
    fn options_are_validated() {
        let bad = |edit: fn(&mut YcsbOptions)| {
            let mut o = Preset::A.options();
            edit(&mut o);
            o.validate().unwrap_err()
        };
        assert!(bad(|o| o.record_count = 0).contains("--record-count"));
        assert!(bad(|o| o.field_count = 0).contains("--field-count"));
        assert!(bad(|o| o.field_count = 5000).contains("--field-count"));
        assert!(bad(|o| o.field_length = 0).contains("--field-length"));
        assert!(bad(|o| o.max_scan_length = 0).contains("--max-scan-length"));
        assert!(bad(|o| {
            o.field_count = 1000;
            o.field_length = 1 << 20
        })
        .contains("at most 16777216"));
        assert!(bad(|o| o.hotspot_opn_fraction = 1.5).contains("--hotspot-opn-fraction"));
        assert!(bad(|o| o.proportions = Proportions::default()).contains("empty"));
        assert_eq!(
            RequestDistribution::parse("latest"),
            Ok(RequestDistribution::Latest)
        );
        assert!(RequestDistribution::parse("normal")
            .unwrap_err()
            .contains("uniform, zipfian, latest, hotspot"));
        assert!(bad(|o| o.record_count = MAX_RECORDS + 1).contains("--record-count"));
        // Huge operation counts do not overflow the key space.
        let y = ycsb(Preset::D, |o| o.operation_count = u64::MAX);
        assert!(key_draws(&y, 100).iter().all(|&k| k < 1000));
        let m = Preset::E.options().to_map();
        assert_eq!(m["scan_proportion"], json!(0.95));
        assert_eq!(m["request_distribution"], json!("zipfian"));
    }

    #[test]
    fn statements_per_dialect() {
        assert_eq!(
            read_sql(Dialect::Postgres),
            "SELECT * FROM usertable WHERE YCSB_KEY = $1"
        );
        assert_eq!(
            scan_sql(Dialect::MySql),
            "SELECT * FROM usertable WHERE YCSB_KEY >= ? ORDER BY YCSB_KEY LIMIT ?"
        );
        assert_eq!(
            scan_sql(Dialect::Postgres),
            "SELECT * FROM usertable WHERE YCSB_KEY >= $1 ORDER BY YCSB_KEY LIMIT $2"
        );
        assert_eq!(
            insert_sql(Dialect::Postgres, 2),
            "INSERT INTO usertable (YCSB_KEY, FIELD0, FIELD1) VALUES ($1, $2, $3)"
        );
        assert_eq!(
            update_sql(Dialect::Sqlite, 3..4),
            "UPDATE usertable SET FIELD3 = ? WHERE YCSB_KEY = ?"
        );
        assert_eq!(
            update_sql(Dialect::Postgres, 0..2),
            "UPDATE usertable SET FIELD0 = $1, FIELD1 = $2 WHERE YCSB_KEY = $3"
        );
        assert_eq!(
            table_definition(Dialect::Sqlite, 2),
            "(YCSB_KEY VARCHAR(255) PRIMARY KEY, FIELD0 TEXT, FIELD1 TEXT)"
        );
    }

    #[test]
    fn hashes_with_a_sorted_set_index() {
        let kv = YcsbKv::new(Preset::E.options(), true);
        let mut s = kv.new_session(1);
        let mut conn = Recorder::default();
        push_key(&mut s.d.key, 7);
        kv.queue_insert(&mut conn, &mut s).unwrap();
        let sent = conn.sent();
        let hset = &sent[0];
        assert_eq!(hset[0], "HSET");
        assert_eq!(hset[1], format!("user{}", fnv1a_64(7)));
        assert_eq!(hset.len(), 2 + 2 * 10);
        assert_eq!(hset[2], "field0");
        assert_eq!(hset[21].len(), 100);
        // Scored by Java's "user4052466453699787802".hashCode(), as YCSB's
        // Redis binding scores it, not by the record number.
        let mut k = String::new();
        push_key(&mut k, 3);
        assert_eq!(k, "user4052466453699787802");
        push_key(&mut s.d.key, 3);
        conn.queued.clear();
        kv.queue_insert(&mut conn, &mut s).unwrap();
        assert_eq!(conn.sent()[1], ["ZADD", "_indices", "-1414300200", &k]);
        conn.queued.clear();
        kv.queue_range(&mut conn, &mut s, 10).unwrap();
        assert_eq!(
            conn.sent(),
            [[
                "ZRANGEBYSCORE",
                "_indices",
                "-1414300200",
                "+inf",
                "LIMIT",
                "0",
                "10"
            ]]
        );
        conn.queued.clear();
        push_key(&mut s.d.key, 3);
        kv.queue_write(&mut conn, &mut s.d, 4, false).unwrap();
        assert_eq!(conn.sent()[0].len(), 4);
        assert_eq!(conn.sent()[0][2], "field4");
    }

    #[test]
    fn serialized_records_without_commands() {
        let kv = YcsbKv::new(Preset::Mix50_50.options(), false);
        let mut s = kv.new_session(1);
        let mut conn = Recorder::default();
        push_key(&mut s.d.key, 1);
        kv.queue_insert(&mut conn, &mut s).unwrap();
        kv.queue_write(&mut conn, &mut s.d, 3, false).unwrap();
        kv.queue_read(&mut conn, &s.d.key).unwrap();
        assert_eq!(
            conn.sent(),
            vec![
                vec!["SET", "user8517097267634966620", "100 bytes"],
                vec!["SET", "user8517097267634966620", "100 bytes"],
                vec!["GET", "user8517097267634966620"],
            ]
        );
        assert!(kv.queue_range(&mut conn, &mut s, 5).is_err());
    }
}
