//! Redis Streams: the change-stream family on the RESP connection
//! (`redis://` and `rediss://`; not Redis Cluster, where a stream's keys
//! would need a hash tag to share a node).
//!
//! A stream of `n` channels is `n` stream keys `<stream>:0..n` and a hash
//! `<stream>:meta` holding loadcell's marker and `n`. A row is one entry
//! with one field, `row`, in [`RowCodec`]'s layout; XADD never trims
//! (no MAXLEN: nothing produced is dropped). A group is a consumer group
//! of that name on every key.
//!
//! Redis has no coordinator: a consumer reads the keys it is given
//! ([`Channels::Assigned`]; [`Channels::Group`] is every key), and when
//! several consumers read one key through the group, Redis hands each new
//! entry to one of them, so order holds per consumer, not per channel
//! across consumers. A consumer that dies leaves its delivered,
//! unacknowledged entries pending: every poll past half the target's
//! `claim_idle`, the others claim (XAUTOCLAIM) entries idle longer than
//! `claim_idle` and deliver them with [`PollOutcome::reassigned`].
//!
//! The hot path allocates nothing per row: XADDs are encoded straight
//! into the write buffer, entries are decoded from the read buffer in
//! place, and the ids to acknowledge are kept as RESP bulk strings in a
//! buffer per key, ready to be written after the acknowledging script's
//! arguments.
//!
//! ## The group's record
//!
//! Redis keeps no count of what a group acknowledged, and its own
//! counters (XINFO GROUPS' `entries-read` and `lag`) count positions: they
//! go empty when an entry ahead of the group was deleted, and count
//! entries trimmed before the group read them as read. So loadcell keeps
//! the group's record in `<stream>:meta`, per channel: `start:<c>:<group>`,
//! the stream's `entries-added` when the group was created (every entry
//! added since is owed to the group, deleted or not), and
//! `acked:<c>:<group>`, what XACK answered it acknowledged, added in the
//! same script as the XACK ([`ACK_SCRIPT`]), so each entry counts once
//! whichever member of the group, in whichever process, acknowledged it.
//! `entries-added` (XINFO STREAM) is Redis 7.0's.

use std::time::{Duration, Instant};

use loadcell_core::kv::KvCapabilities;
use loadcell_core::stream::{
    ChannelPosition, Channels, OnRow, PollOutcome, ProduceOutcome, RowCodec, StartFrom, StreamConn,
    StreamMeta, StreamRow,
};
use loadcell_core::{DriverError, DriverInfo, Family};

use super::*;

pub use super::RedisDriver;

pub const INFO: DriverInfo = DriverInfo {
    name: "redis-streams",
    schemes: &["redis", "rediss"],
    family: Family::STREAM,
    url_form: "redis://[user:pass@]host:port[/db][?claim_idle=5s] | rediss://…",
    about: "Redis Streams: XADD pipelined, XREADGROUP, XACK, XAUTOCLAIM of a dead consumer's rows (standalone Redis 7)",
    kv: KvCapabilities { commands: false },
    blocking: false,
};

/// The entry field that holds the row.
const ROW_FIELD: &[u8] = b"row";

/// Creates group ARGV[1] on stream key KEYS[1] at ARGV[2] (`0` or `$`) and
/// records in KEYS[2] where it starts: the entries added before the first
/// one it is owed. One script, so the record is the group's at creation.
const CREATE_GROUP_SCRIPT: &[u8] = b"\
local made = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[2], 'MKSTREAM')
if type(made) == 'table' and made.err then return made end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local added, length
for i = 1, #info, 2 do
  if info[i] == 'entries-added' then added = info[i + 1] end
  if info[i] == 'length' then length = info[i + 1] end
end
if not added then
  redis.call('XGROUP', 'DESTROY', KEYS[1], ARGV[1])
  return redis.error_reply('OLDREDIS Redis 7.0 or later is needed: XINFO STREAM reports no entries-added')
end
if ARGV[2] == '0' then added = added - length end
redis.call('HSET', KEYS[2], ARGV[3], added, ARGV[4], 0)
return 1";

/// XACK of ARGV[3..] on KEYS[1] for group ARGV[1], adding what it
/// acknowledged to field ARGV[2] of KEYS[2]; in chunks, as Lua's unpack
/// takes a few thousand values at most.
const ACK_SCRIPT: &[u8] = b"\
local acked = 0
for i = 3, #ARGV, 4000 do
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, i, math.min(i + 3999, #ARGV)))
end
redis.call('HINCRBY', KEYS[2], ARGV[2], acked)
return acked";

/// The group record's field of where `group` starts on `channel`.
fn start_field(channel: u32, group: &str) -> Vec<u8> {
    format!("start:{channel}:{group}").into_bytes()
}

/// The group record's field of what `group` acknowledged on `channel`.
fn acked_field(channel: u32, group: &str) -> Vec<u8> {
    format!("acked:{channel}:{group}").into_bytes()
}

/// A subscribed connection's keys and what it owes the group.
pub(crate) struct Consumer {
    group: Vec<u8>,
    name: Vec<u8>,
    /// `<stream>:meta`, where acknowledgements are counted.
    meta: Vec<u8>,
    keys: Vec<Key>,
    claim_idle: Duration,
    next_claim: Instant,
}

struct Key {
    name: Vec<u8>,
    /// The group record's count of this key's acknowledgements.
    acked_field: Vec<u8>,
    /// Ids polled and not yet acknowledged, as RESP bulk strings.
    acks: Vec<u8>,
    unacked: usize,
    /// Where the next XAUTOCLAIM scan starts.
    claim_from: Vec<u8>,
}

fn key_name(stream: &str, channel: u32) -> Vec<u8> {
    format!("{stream}:{channel}").into_bytes()
}

fn meta_key(stream: &str) -> Vec<u8> {
    format!("{stream}:meta").into_bytes()
}

fn encode_xadd(buf: &mut Vec<u8>, stream: &str, row: &StreamRow<'_>) {
    let mut digits = [0u8; 20];
    let channel = format_usize(&mut digits, row.channel as usize);
    let len = RowCodec::encoded_len(row);
    buf.reserve(stream.len() + len + 80);
    buf.extend_from_slice(b"*5\r\n$4\r\nXADD\r\n");
    put_len(buf, b'$', stream.len() + 1 + channel.len());
    buf.extend_from_slice(stream.as_bytes());
    buf.push(b':');
    buf.extend_from_slice(channel);
    buf.extend_from_slice(b"\r\n$1\r\n*\r\n");
    put_bulk(buf, ROW_FIELD);
    put_len(buf, b'$', len);
    RowCodec::encode(row, buf);
    buf.extend_from_slice(b"\r\n");
}

/// Steps through a reply's elements, which `parse_reply` has checked are
/// whole.
struct Walk<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Walk<'a> {
    fn header(&mut self) -> Reply {
        match parse_header(self.buf, self.pos) {
            Ok(Parsed::Done(reply, next)) => {
                self.pos = next;
                reply
            }
            _ => Reply::Nil,
        }
    }

    fn bulk(&mut self) -> Option<&'a [u8]> {
        match self.header() {
            Reply::Bulk(s) => Some(&self.buf[s.start..s.end]),
            _ => None,
        }
    }

    fn count(&mut self) -> usize {
        match self.header() {
            Reply::Array(n) => n,
            _ => 0,
        }
    }

    /// Steps over one whole value.
    fn skip(&mut self) {
        if let Ok(Parsed::Done(_, next)) = parse_reply(self.buf, self.pos) {
            self.pos = next;
        }
    }
}

impl Consumer {
    /// Delivers the `count` entries at `walk` (each `[id, [field, value…]]`)
    /// of key `key`, noting their ids for XACK.
    fn deliver(
        &mut self,
        key: usize,
        walk: &mut Walk<'_>,
        count: usize,
        outcome: &mut PollOutcome,
        on_row: &mut OnRow<'_>,
    ) {
        let key = &mut self.keys[key];
        for _ in 0..count {
            if walk.count() != 2 {
                continue; // an entry deleted while pending (Redis 6.2)
            }
            let Some(id) = walk.bulk() else { continue };
            put_bulk(&mut key.acks, id);
            key.unacked += 1;
            let mut value = None;
            for _ in 0..walk.count() / 2 {
                match walk.bulk() {
                    Some(ROW_FIELD) => value = walk.bulk(),
                    _ => walk.skip(),
                }
            }
            match value.map(RowCodec::decode) {
                Some(Ok(row)) => {
                    outcome.rows += 1;
                    on_row(row);
                }
                _ => outcome.undecodable += 1,
            }
        }
    }

    fn key_index(&self, name: &[u8]) -> Option<usize> {
        self.keys.iter().position(|k| k.name == name)
    }
}

fn not_standalone() -> DriverError {
    DriverError::fatal("Redis Streams are served on a standalone Redis (redis://), not a cluster")
}

impl RedisConn {
    fn single(&mut self) -> Result<&mut Single, DriverError> {
        match &mut self.inner {
            Inner::Single(s) => Ok(s),
            Inner::Cluster(_) => Err(not_standalone()),
        }
    }

    /// One command off the hot path; an error reply is an error.
    async fn call(&mut self, args: &[&[u8]]) -> Result<Value, DriverError> {
        let link = &mut self.single()?.link;
        match link.call(args, Phase::Use).await? {
            Value::Error(text) => Err(reply_error(text.as_bytes(), &link.ep)),
            value => Ok(value),
        }
    }

    async fn channels(&mut self, stream: &str) -> Result<u32, DriverError> {
        match self.stream_meta(stream).await? {
            Some(meta) if meta.channels > 0 => Ok(meta.channels),
            _ => Err(DriverError::fatal(format!(
                "there is no stream '{stream}' of loadcell's (no {stream}:meta): prepare it first"
            ))),
        }
    }

    fn consumer(&mut self) -> Result<(&mut Single, &mut Consumer), DriverError> {
        let RedisConn {
            inner, consumer, ..
        } = self;
        match (inner, consumer) {
            (Inner::Single(s), Some(c)) => Ok((s, c)),
            (Inner::Cluster(_), _) => Err(not_standalone()),
            (_, None) => Err(DriverError::fatal("poll before subscribe")),
        }
    }

    /// XAUTOCLAIM on every key: entries idle past `claim_idle`, delivered.
    async fn claim(
        &mut self,
        max_rows: usize,
        on_row: &mut OnRow<'_>,
    ) -> Result<PollOutcome, DriverError> {
        let (s, c) = self.consumer()?;
        let mut idle = [0u8; 20];
        let idle = format_usize(&mut idle, c.claim_idle.as_millis() as usize);
        let mut count = [0u8; 20];
        let count = format_usize(&mut count, max_rows.div_ceil(c.keys.len()).max(1));
        for key in &c.keys {
            let args: [&[u8]; 8] = [
                b"XAUTOCLAIM",
                &key.name,
                &c.group,
                &c.name,
                idle,
                &key.claim_from,
                b"COUNT",
                count,
            ];
            encode_command(&mut s.wbuf, &args);
            s.queued += 1;
        }
        let mut outcome = PollOutcome::default();
        let mut error = None;
        s.exchange(|link, i, reply| {
            let received = link.rbuf.received();
            let span = match reply {
                Reply::Elements(_, span) => span,
                Reply::Error(e) => {
                    error.get_or_insert_with(|| reply_error(&received[e.start..e.end], &link.ep));
                    return;
                }
                _ => return,
            };
            let mut walk = Walk {
                buf: &received[..span.end],
                pos: span.start,
            };
            let next = walk.bulk().unwrap_or(b"0-0");
            let key = &mut c.keys[i].claim_from;
            key.clear();
            key.extend_from_slice(next);
            let count = walk.count();
            c.deliver(i, &mut walk, count, &mut outcome, on_row);
            outcome.bytes += (span.end - span.start) as u64;
        })
        .await?;
        if let Some(e) = error {
            return Err(e);
        }
        outcome.reassigned = outcome.rows + outcome.undecodable > 0;
        Ok(outcome)
    }
}

impl StreamConn for RedisConn {
    fn queue_row(&mut self, stream: &str, row: &StreamRow<'_>) {
        match &mut self.inner {
            Inner::Single(s) => {
                encode_xadd(&mut s.wbuf, stream, row);
                s.queued += 1;
            }
            // `INFO` serves no cluster scheme: a stream workload never
            // gets a cluster connection.
            Inner::Cluster(_) => unreachable!("{}", not_standalone()),
        }
    }

    async fn produce(
        &mut self,
        on_failure: &mut dyn FnMut(&str),
    ) -> Result<ProduceOutcome, DriverError> {
        let s = self.single()?;
        let mut outcome = ProduceOutcome {
            rows: s.queued as u64,
            failed: 0,
        };
        s.exchange(|link, _, reply| {
            if let Reply::Error(e) = reply {
                outcome.failed += 1;
                on_failure(&String::from_utf8_lossy(
                    &link.rbuf.received()[e.start..e.end],
                ));
            }
        })
        .await?;
        Ok(outcome)
    }

    async fn subscribe(
        &mut self,
        stream: &str,
        group: &str,
        consumer: &str,
        channels: Channels<'_>,
    ) -> Result<(), DriverError> {
        let all: Vec<u32>;
        let channels = match channels {
            Channels::Assigned(list) => list,
            Channels::Group => {
                all = (0..self.channels(stream).await?).collect();
                &all
            }
        };
        self.single()?;
        let claim_idle = self.claim_idle;
        self.consumer = Some(Box::new(Consumer {
            group: group.as_bytes().to_vec(),
            name: consumer.as_bytes().to_vec(),
            meta: meta_key(stream),
            keys: channels
                .iter()
                .map(|&c| Key {
                    name: key_name(stream, c),
                    acked_field: acked_field(c, group),
                    acks: Vec::new(),
                    unacked: 0,
                    claim_from: b"0-0".to_vec(),
                })
                .collect(),
            claim_idle,
            next_claim: Instant::now() + claim_idle / 2,
        }));
        Ok(())
    }

    async fn poll(
        &mut self,
        max_rows: usize,
        wait: Duration,
        on_row: &mut OnRow<'_>,
    ) -> Result<PollOutcome, DriverError> {
        let (_, c) = self.consumer()?;
        if c.keys.is_empty() {
            tokio::time::sleep(wait).await;
            return Ok(PollOutcome::default());
        }
        let now = Instant::now();
        if now >= c.next_claim {
            c.next_claim = now + c.claim_idle / 2;
            let claimed = self.claim(max_rows, on_row).await?;
            if claimed.reassigned {
                return Ok(claimed);
            }
        }
        let (s, c) = self.consumer()?;
        let mut count = [0u8; 20];
        let count = format_usize(&mut count, max_rows.div_ceil(c.keys.len()).max(1));
        let mut block = [0u8; 20];
        let block = format_usize(&mut block, wait.as_millis().max(1) as usize);
        let buf = &mut s.wbuf;
        put_len(buf, b'*', 9 + 2 * c.keys.len());
        for arg in [
            &b"XREADGROUP"[..],
            b"GROUP",
            &c.group,
            &c.name,
            b"COUNT",
            count,
            b"BLOCK",
            block,
            b"STREAMS",
        ] {
            put_bulk(buf, arg);
        }
        for key in &c.keys {
            put_bulk(buf, &key.name);
        }
        for _ in &c.keys {
            buf.extend_from_slice(b"$1\r\n>\r\n");
        }
        s.queued += 1;
        let mut outcome = PollOutcome::default();
        let mut error = None;
        s.exchange(|link, _, reply| {
            let received = link.rbuf.received();
            let (streams, span) = match reply {
                Reply::Elements(n, span) => (n, span),
                Reply::Error(e) => {
                    error = Some(reply_error(&received[e.start..e.end], &link.ep));
                    return;
                }
                _ => return, // nil: nothing came within `wait`
            };
            outcome.bytes = (span.end - span.start) as u64;
            let mut walk = Walk {
                buf: &received[..span.end],
                pos: span.start,
            };
            for _ in 0..streams {
                walk.count();
                let key = walk.bulk().and_then(|name| c.key_index(name));
                let entries = walk.count();
                match key {
                    Some(key) => c.deliver(key, &mut walk, entries, &mut outcome, on_row),
                    None => (0..entries).for_each(|_| walk.skip()),
                }
            }
        })
        .await?;
        match error {
            Some(e) => Err(e),
            None => Ok(outcome),
        }
    }

    async fn commit(&mut self) -> Result<(), DriverError> {
        let (s, c) = self.consumer()?;
        for key in c.keys.iter_mut().filter(|k| k.unacked > 0) {
            let buf = &mut s.wbuf;
            put_len(buf, b'*', 7 + key.unacked);
            for arg in [
                &b"EVAL"[..],
                ACK_SCRIPT,
                b"2",
                &key.name,
                &c.meta,
                &c.group,
                &key.acked_field,
            ] {
                put_bulk(buf, arg);
            }
            buf.extend_from_slice(&key.acks);
            key.acks.clear();
            key.unacked = 0;
            s.queued += 1;
        }
        let mut error = None;
        s.exchange(|link, _, reply| {
            if let Reply::Error(e) = reply {
                let received = link.rbuf.received();
                error.get_or_insert_with(|| reply_error(&received[e.start..e.end], &link.ep));
            }
        })
        .await?;
        error.map_or(Ok(()), Err)
    }

    async fn create_stream(
        &mut self,
        stream: &str,
        channels: u32,
        marker: &str,
    ) -> Result<bool, DriverError> {
        let meta = meta_key(stream);
        let created = self
            .call(&[b"HSETNX", &meta, b"marker", marker.as_bytes()])
            .await?;
        if created != Value::Int(1) {
            return Ok(false);
        }
        let channels = channels.to_string();
        self.call(&[b"HSET", &meta, b"channels", channels.as_bytes()])
            .await?;
        Ok(true)
    }

    async fn stream_meta(&mut self, stream: &str) -> Result<Option<StreamMeta>, DriverError> {
        let meta = meta_key(stream);
        let reply = self
            .call(&[b"HMGET", &meta, b"marker", b"channels"])
            .await?;
        let text = |v: &Value| match v {
            Value::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        };
        if let Value::Array(fields) = &reply {
            if let [marker, channels] = &fields[..] {
                if let (Some(marker), channels) = (text(marker), text(channels)) {
                    let channels = channels.and_then(|c| c.parse().ok()).unwrap_or(0);
                    return Ok(Some(StreamMeta { marker, channels }));
                }
            }
        }
        // No marker: a stream by that name that someone else made.
        let first = key_name(stream, 0);
        Ok(match self.call(&[b"EXISTS", &first]).await? {
            Value::Int(1) => Some(StreamMeta {
                marker: String::new(),
                channels: 0,
            }),
            _ => None,
        })
    }

    async fn drop_stream(&mut self, stream: &str) -> Result<(), DriverError> {
        let channels = self.channels(stream).await?;
        let mut keys: Vec<Vec<u8>> = (0..channels).map(|c| key_name(stream, c)).collect();
        keys.push(meta_key(stream));
        let mut args: Vec<&[u8]> = vec![b"DEL"];
        args.extend(keys.iter().map(|k| &k[..]));
        self.call(&args).await?;
        Ok(())
    }

    /// Every entry of every key, read with XRANGE a page at a time: one
    /// is loadcell's when its only field is `row`, holding a row.
    async fn foreign_rows(&mut self, stream: &str) -> Result<u64, DriverError> {
        const PAGE: &[u8] = b"10000";
        let mut foreign = 0;
        for channel in 0..self.channels(stream).await? {
            let key = key_name(stream, channel);
            let mut from = b"-".to_vec();
            loop {
                let Value::Array(entries) = self
                    .call(&[b"XRANGE", &key, &from, b"+", b"COUNT", PAGE])
                    .await?
                else {
                    break;
                };
                let Some(Value::Array(last)) = entries.last() else {
                    break;
                };
                let Some(Value::Bulk(last_id)) = last.first() else {
                    break;
                };
                // Exclusive of the last entry read (Redis 6.2's `(`).
                from = [&b"("[..], last_id].concat();
                foreign += entries
                    .iter()
                    .filter(|entry| !is_loadcell_entry(entry))
                    .count() as u64;
            }
        }
        Ok(foreign)
    }

    async fn create_group(
        &mut self,
        stream: &str,
        group: &str,
        from: StartFrom,
    ) -> Result<bool, DriverError> {
        let id: &[u8] = match from {
            StartFrom::Beginning => b"0",
            StartFrom::End => b"$",
        };
        let meta = meta_key(stream);
        let mut created = false;
        for c in 0..self.channels(stream).await? {
            let key = key_name(stream, c);
            let args: [&[u8]; 9] = [
                b"EVAL",
                CREATE_GROUP_SCRIPT,
                b"2",
                &key,
                &meta,
                group.as_bytes(),
                id,
                &start_field(c, group),
                &acked_field(c, group),
            ];
            match self.call(&args).await {
                Ok(_) => created = true,
                Err(e) if e.code.as_deref() == Some("BUSYGROUP") => {}
                Err(e) => return Err(e),
            }
        }
        Ok(created)
    }

    async fn drop_group(&mut self, stream: &str, group: &str) -> Result<(), DriverError> {
        let meta = meta_key(stream);
        for c in 0..self.channels(stream).await? {
            let key = key_name(stream, c);
            match self
                .call(&[b"XGROUP", b"DESTROY", &key, group.as_bytes()])
                .await
            {
                // No key, no group on it: nothing to drop.
                Err(e) if e.message.contains("no such key") => {}
                other => {
                    other?;
                }
            }
            self.call(&[
                b"HDEL",
                &meta,
                &start_field(c, group),
                &acked_field(c, group),
            ])
            .await?;
        }
        Ok(())
    }

    /// Per channel, from XINFO STREAM and XINFO GROUPS and the group's
    /// record: owed, the entries added since the group's start; committed,
    /// what its members acknowledged. Once the group has been handed the
    /// channel's last entry and has nothing pending, what it still owes
    /// was deleted or trimmed before it was read: vanished. A channel
    /// without the group: the entries it holds, nothing committed.
    async fn positions(
        &mut self,
        stream: &str,
        group: &str,
    ) -> Result<Vec<ChannelPosition>, DriverError> {
        let meta = meta_key(stream);
        let mut positions = Vec::new();
        for channel in 0..self.channels(stream).await? {
            let key = key_name(stream, channel);
            let gone = || {
                DriverError::fatal(format!(
                    "the stream key '{stream}:{channel}' is gone (deleted outside loadcell):                      its rows cannot be counted; prepare the stream again"
                ))
            };
            let stream_info = match self.call(&[b"XINFO", b"STREAM", &key]).await {
                Ok(Value::Array(fields)) => fields,
                Err(e) if e.message.contains("no such key") => return Err(gone()),
                Err(e) => return Err(e),
                Ok(_) => return Err(gone()),
            };
            let held = int_field(&stream_info, b"length").unwrap_or(0);
            let added = int_field(&stream_info, b"entries-added").ok_or_else(|| {
                DriverError::fatal(
                    "Redis 7.0 or later is needed: XINFO STREAM reports no entries-added",
                )
            })?;
            let last_entry = match field(&stream_info, b"last-entry") {
                Some(Value::Array(entry)) => entry.first().and_then(entry_id),
                _ => None,
            };
            let Value::Array(groups) = self.call(&[b"XINFO", b"GROUPS", &key]).await? else {
                return Err(gone());
            };
            let Some(info) = groups.iter().find_map(|g| match g {
                Value::Array(fields) if matches!(field(fields, b"name"), Some(Value::Bulk(n)) if n == group.as_bytes()) => Some(fields),
                _ => None,
            }) else {
                positions.push(ChannelPosition {
                    channel,
                    end: held,
                    ..ChannelPosition::default()
                });
                continue;
            };
            let record = self
                .call(&[
                    b"HMGET",
                    &meta,
                    &start_field(channel, group),
                    &acked_field(channel, group),
                ])
                .await?;
            let (Some(start), Some(acked)) = record_counts(&record) else {
                return Err(DriverError::fatal(format!(
                    "the group '{group}' of stream '{stream}' has no record of loadcell's on \
                     channel {channel} (made by another client, or by an older loadcell): \
                     give another --group, or drop it with cleanup and prepare again"
                )));
            };
            let end = added.saturating_sub(start);
            let committed = acked.min(end);
            let pending = int_field(info, b"pending").unwrap_or(0);
            let delivered = match field(info, b"last-delivered-id") {
                Some(id) => entry_id(id),
                None => None,
            };
            let handed_all = last_entry.is_none_or(|last| delivered.is_some_and(|d| d >= last));
            let vanished = if pending == 0 && handed_all {
                end - committed
            } else {
                0
            };
            positions.push(ChannelPosition {
                channel,
                end,
                committed,
                vanished,
            });
        }
        Ok(positions)
    }
}

/// An XRANGE entry, `[id, [field, value…]]`, is one of loadcell's rows.
fn is_loadcell_entry(entry: &Value) -> bool {
    let Value::Array(entry) = entry else {
        return false;
    };
    match entry.get(1) {
        Some(Value::Array(fields)) => match &fields[..] {
            [Value::Bulk(name), Value::Bulk(row)] => {
                name == ROW_FIELD && RowCodec::decode(row).is_ok()
            }
            _ => false,
        },
        _ => false,
    }
}

/// The value of field `name` in a flat field/value array (XINFO's).
fn field<'v>(fields: &'v [Value], name: &[u8]) -> Option<&'v Value> {
    fields
        .chunks(2)
        .find(|pair| matches!(&pair[0], Value::Bulk(n) if n == name))
        .and_then(|pair| pair.get(1))
}

fn int_field(fields: &[Value], name: &[u8]) -> Option<u64> {
    match field(fields, name) {
        Some(Value::Int(n)) => Some((*n).max(0) as u64),
        _ => None,
    }
}

/// An entry id, `ms-seq`, as a pair that orders as the ids do.
fn entry_id(id: &Value) -> Option<(u64, u64)> {
    let Value::Bulk(id) = id else { return None };
    let (ms, seq) = std::str::from_utf8(id).ok()?.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// The two counts of an HMGET of a group's record.
fn record_counts(reply: &Value) -> (Option<u64>, Option<u64>) {
    let count = |v: &Value| match v {
        Value::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    };
    match reply {
        Value::Array(values) if values.len() == 2 => (count(&values[0]), count(&values[1])),
        _ => (None, None),
    }
}
