//! YCSB over key-value stores: a hash per record on Redis (with YCSB's
//! `_indices` sorted set for scans), one value per record on memcached.

use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::{Driver, DriverError};
use loadcell_engine::{Ctx, OpSpec, Script, SessionInfo};

use crate::prepare::load::load_in_parallel;
use crate::prepare::NotPrepared;
use crate::prepare::{CheckError, PrepareObserver};
use crate::workload::Loading;

use super::*;

/// Arguments that fit on the stack: a command, a key and 32 fields with
/// their names.
pub(super) const STACK_ARGS: usize = 2 + 2 * 32;

/// YCSB on a key-value store: a hash per record and a sorted set for scans
/// where the driver takes commands (`hashes`), one serialized value per
/// record where it only has GET and SET.
pub struct YcsbKv {
    core: Ycsb,
    hashes: bool,
}

pub struct YcsbKvSession {
    pub(super) d: Draw,
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
pub(super) fn found(reply: &KvReply<'_>) -> Option<bool> {
    match reply {
        KvReply::Hit(_) => Some(true),
        KvReply::Miss => Some(false),
        KvReply::Array(a) => Some(!a.is_empty()),
        KvReply::Done => None,
    }
}

/// Sends everything queued and calls `on_reply` with each reply's index
/// and reply; the first error of any reply fails it.
pub(super) async fn flush_with<C: KvConn>(
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
pub(super) async fn flush<C: KvConn>(conn: &mut C) -> Result<Option<bool>, DriverError> {
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

    pub(super) fn new_session(&self, seed: u64) -> YcsbKvSession {
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

    pub(super) fn queue_read<C: KvConn>(&self, conn: &mut C, key: &str) -> Result<(), DriverError> {
        if self.hashes {
            conn.queue_command(&[b"HGETALL", key.as_bytes()])
        } else {
            conn.queue_get(key.as_bytes());
            Ok(())
        }
    }

    /// Writes field `field` of the record (every field with `all`); without
    /// hashes, the whole record.
    pub(super) fn queue_write<C: KvConn>(
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
    pub(super) fn queue_insert<C: KvConn>(
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
    pub(super) fn queue_range<C: KvConn>(
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
/// spread over the loading connections. Records already there are
/// overwritten with new values.
pub(super) async fn prepare_kv<D>(
    driver: Arc<D>,
    opts: &YcsbOptions,
    hashes: bool,
    loading: Loading,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: KvConn,
{
    let connect_timeout = loading.connect_timeout;
    const BATCH: u64 = 100;
    let records = opts.record_count;
    let connections = loading.connections.clamp(1, 64).min(records as usize);
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
                let mut s = kv.new_session(load_seed(c));
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
