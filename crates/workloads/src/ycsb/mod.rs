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
//! - [`YcsbWide`] on wide-column stores: YCSB's Cassandra binding's
//!   `usertable` (`y_id` and a column per field), a scan from the key's
//!   token on.
//! - [`YcsbKv`] without commands (memcached): one value per record, the
//!   fields concatenated (they have a fixed length), `GET`/`SET`; an update
//!   rewrites the whole record, and there is no scan.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use loadcell_engine::{Category, Ctx, OpSpec};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

use crate::distribution::{Distribution, RandParams, RandType};
use crate::prepare::CheckError;
use crate::prepare::NotPrepared;

mod kv;
mod options;
mod sql;
#[cfg(test)]
mod tests;
mod wide;
mod workload;

use kv::prepare_kv;
pub use kv::{YcsbKv, YcsbKvSession};
pub use options::*;
use sql::*;
pub use sql::{YcsbSql, YcsbSqlSession};
use wide::prepare_wide;
pub use wide::{YcsbWide, YcsbWideSession};
pub use workload::YcsbWorkload;

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
    /// The key number inserts continue from: the records, or more where
    /// earlier runs inserted beyond them.
    insert_base: AtomicU64,
    /// This process's inserts are numbered 0, 1, 2… and take every
    /// `stride`-th key number from `insert_base + offset` on (one shard
    /// of `stride`; 1 and 0 unsharded).
    stride: u64,
    offset: u64,
    /// The number the next insert takes.
    next_insert: AtomicU64,
    /// How many of this process's inserts are over, each with every one
    /// numbered below it.
    inserts_over: AtomicU64,
    /// Inserts finished ahead of one below them, waiting for it, as in
    /// YCSB's `AcknowledgedCounterGenerator` (a ring of flags indexed by
    /// insert number; empty when the mix has no inserts).
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
            insert_base: AtomicU64::new(opts.record_count),
            stride: opts.shard.map_or(1, |s| s.count as u64),
            offset: opts.shard.map_or(0, |s| s.index as u64),
            next_insert: AtomicU64::new(0),
            inserts_over: AtomicU64::new(0),
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
        self.insert_base.store(n, Ordering::Relaxed);
        self.next_insert.store(0, Ordering::Relaxed);
        self.inserts_over.store(0, Ordering::Relaxed);
    }

    /// The key number insert number `n` takes.
    #[inline]
    fn insert_key(&self, n: u64) -> u64 {
        self.insert_base.load(Ordering::Relaxed) + self.offset + n * self.stride
    }

    /// Key number `k` below [`Ycsb::inserted`], or in a sharded run the
    /// key this shard inserted in its place (the others' may not be there
    /// yet): records stay as they are.
    #[inline]
    fn own_insert(&self, k: u64) -> u64 {
        let base = self.insert_base.load(Ordering::Relaxed);
        if self.stride == 1 || k < base {
            return k;
        }
        base + self.offset + (k - base) / self.stride * self.stride
    }

    /// The insert of key number `key` is over, done or failed (YCSB
    /// acknowledges in a `finally`): `inserted` moves past it once every
    /// insert below it is over too, so reads never choose a key whose
    /// insert may still be in flight.
    fn acknowledge(&self, key: u64) {
        let n = (key - self.insert_base.load(Ordering::Relaxed) - self.offset) / self.stride;
        let mut acked = self.acked.lock().unwrap_or_else(|e| e.into_inner());
        let mut limit = self.inserts_over.load(Ordering::Relaxed);
        let window = acked.len() as u64;
        if n < limit || window == 0 {
            return;
        }
        if n - limit >= window {
            // More inserts in flight than the window holds: order is given
            // up for the ones below.
            acked.iter_mut().for_each(|a| *a = false);
            self.inserts_over.store(n + 1, Ordering::Relaxed);
            return;
        }
        acked[(n % window) as usize] = true;
        while acked[(limit % window) as usize] {
            acked[(limit % window) as usize] = false;
            limit += 1;
        }
        self.inserts_over.store(limit, Ordering::Relaxed);
    }

    /// One past the highest key number inserted so far: in a sharded run,
    /// the other shards are taken to have inserted as many as this one.
    pub fn inserted(&self) -> u64 {
        self.insert_base.load(Ordering::Relaxed)
            + self.inserts_over.load(Ordering::Relaxed) * self.stride
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
                        return self.own_insert(k);
                    }
                }
                self.own_insert(fnv1a_64(self.scrambled.rank(rng)).unsigned_abs() % inserted)
            }
            RequestDistribution::Latest => {
                let ranks = self.ranks.as_ref().expect("built for latest");
                let newest = self.inserted() - 1;
                for _ in 0..MAX_REDRAWS {
                    let back = ranks.sample(rng);
                    if back <= newest {
                        return self.own_insert(newest - back);
                    }
                }
                self.own_insert(newest)
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
            self.insert_key(self.next_insert.fetch_add(1, Ordering::Relaxed))
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
