//! The change-stream family (Kafka, Redis Streams, PostgreSQL logical
//! replication): rows produced into a stream of ordered channels and
//! consumed back, as Tablestore Tunnel's model has it.
//!
//! A stream has `channels` (Kafka partitions, one Redis stream key each,
//! one replicated table each). A row belongs to one channel, chosen by the
//! producer from its partition key; within a channel rows are consumed in
//! the order they were produced. Every row carries what the consumer needs
//! to prove order and completeness and to time the trip: its channel, its
//! sequence number in that channel, the producer's wall clock and the
//! producing run's origin ([`StreamRow`]). Kafka and Redis carry the row as
//! opaque bytes in [`RowCodec`]'s layout; PostgreSQL carries it as the
//! columns of a table row, and its driver decodes the replicated tuple into
//! the same [`StreamRow`].
//!
//! Consumers read through a group (`--group`): a Kafka consumer group, a
//! Redis consumer group per stream key, a replication slot per channel for
//! PostgreSQL. Several consumer sessions, in one process or several, share
//! a group's channels; what each has acknowledged ([`StreamConn::commit`])
//! is the group's position, from which [`StreamConn::positions`] gives the
//! lag, and a consumer that dies leaves its channels (or its unacknowledged
//! rows) to the others.

use std::time::Duration;

use crate::DriverError;

/// One row as produced and as consumed. Borrowed from the producer's
/// buffers or the connection's read buffer: nothing is owned per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamRow<'a> {
    /// The channel (partition) it was produced into.
    pub channel: u32,
    /// Its position in the channel, counted by its producer from 0.
    pub seq: u64,
    /// The producer's wall clock when the row was made, nanoseconds since
    /// the Unix epoch: end-to-end latency is the consumer's clock minus
    /// this, valid when both clocks are the same machine's.
    pub produced_ns: i64,
    /// Which run on which machine produced it (a hash of the host and the
    /// run), so that a consumer times only rows its own host produced and
    /// tells a backlog from an earlier run apart.
    pub origin: u64,
    /// The row's key columns; the partition key is a hash of them.
    pub keys: [&'a [u8]; 4],
    /// The rest of the row, up to the report's ~220 bytes in all.
    pub payload: &'a [u8],
}

/// What a produce request's answer said about its rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProduceOutcome {
    /// Rows the request carried.
    pub rows: u64,
    /// Rows among them the server did not store, each failure's reason
    /// given to the `on_failure` callback.
    pub failed: u64,
}

/// Which channels a consumer session reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channels<'a> {
    /// These channels, chosen by the workload (each session its share):
    /// for systems without server-side assignment, and for consume-only
    /// runs that split a backlog among sessions.
    Assigned(&'a [u32]),
    /// Whatever the group's coordinator assigns this consumer, changing as
    /// consumers join and leave (a Kafka consumer group's rebalance). The
    /// driver reports changes through [`PollOutcome::reassigned`].
    Group,
}

/// Where a group created by [`StreamConn::create_group`] starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    /// At the first row the stream holds: a backlog is consumed (the
    /// catch-up case).
    Beginning,
    /// At the rows produced after the group was created.
    End,
}

/// What one poll brought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollOutcome {
    /// Rows handed to `on_row`.
    pub rows: u64,
    /// Rows the server delivered that did not decode as loadcell's rows
    /// (the stream holds someone else's data): counted, never guessed at.
    pub undecodable: u64,
    /// Bytes read from the server for these rows, for bandwidth.
    pub bytes: u64,
    /// Rows this consumer's channels lost before it read them: deleted
    /// from the channel (Kafka's DeleteRecords or retention) between the
    /// group's position and the channel's first row. The driver moved the
    /// group's position past them, so [`StreamConn::positions`] no longer
    /// counts them: they are missing from the run that passed them.
    pub vanished: u64,
    /// The channels this consumer reads changed before these rows (a
    /// rebalance, or rows claimed from a consumer that died): order is
    /// checked afresh from each channel's next row.
    pub reassigned: bool,
}

impl PollOutcome {
    /// Counts a value the server delivered and hands it to `on_row` if it
    /// decodes as one of loadcell's rows ([`RowCodec`]).
    #[inline]
    pub fn take(&mut self, value: &[u8], on_row: &mut OnRow<'_>) {
        self.bytes += value.len() as u64;
        match RowCodec::decode(value) {
            Ok(row) => {
                self.rows += 1;
                on_row(row);
            }
            Err(_) => self.undecodable += 1,
        }
    }
}

/// One channel's position for a group: the rows owed to it and what it
/// has acknowledged, so `lag = end - committed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelPosition {
    pub channel: u32,
    /// Rows owed to the group: on Redis every entry added since the group
    /// was created, deleted or not; on Kafka the rows from the group's
    /// committed offset or the partition's start offset, whichever is
    /// lower, to its end offset (rows deleted before the group read them
    /// included); else the rows of the channel's table.
    pub end: u64,
    /// Rows the group has acknowledged, counted the same way.
    pub committed: u64,
    /// Of the rows owed and not acknowledged, those the group can no
    /// longer get: deleted from the channel before it read them (Redis,
    /// told once the group was handed the channel's last entry; Kafka,
    /// the rows between the group's committed offset and a start offset
    /// that moved past it). Missing all the same, but not worth waiting
    /// for. A Kafka consumer that passes them counts them in
    /// [`PollOutcome::vanished`] instead.
    pub vanished: u64,
}

impl ChannelPosition {
    /// Rows owed and not acknowledged.
    pub fn lag(&self) -> u64 {
        self.end.saturating_sub(self.committed)
    }

    /// Rows owed that the group may still get.
    pub fn awaited(&self) -> u64 {
        self.lag().saturating_sub(self.vanished)
    }
}

/// What [`StreamConn::lag`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LagUnit {
    /// Rows produced and not yet acknowledged by the group.
    Rows,
    /// Bytes of WAL between the server's current position and what the
    /// group's slots have confirmed (PostgreSQL): every table's changes
    /// count, not only the stream's.
    WalBytes,
}

impl LagUnit {
    /// The name of the interval gauge the lag is recorded under.
    pub fn gauge(self) -> &'static str {
        match self {
            LagUnit::Rows => "lag_rows",
            LagUnit::WalBytes => "lag_wal_bytes",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LagUnit::Rows => "rows",
            LagUnit::WalBytes => "wal_bytes",
        }
    }
}

/// What [`StreamConn::create_stream`] recorded: found again by
/// [`StreamConn::stream_meta`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMeta {
    /// The marker given at creation; empty for a stream loadcell did not
    /// create.
    pub marker: String,
    pub channels: u32,
}

/// Called with each consumed row, in channel order.
pub type OnRow<'f> = dyn FnMut(StreamRow<'_>) + 'f;

pub trait StreamConn {
    /// The server assigns a group's channels to its consumers, each
    /// channel to one consumer at a time (Kafka's group coordinator): the
    /// workload subscribes with [`Channels::Group`] and every row of a
    /// channel it is given reaches it. Without one (Redis Streams,
    /// PostgreSQL) the workload shares the channels out itself with
    /// [`Channels::Assigned`], and on Redis several processes in one group
    /// split each channel's rows between them.
    const COORDINATED: bool = false;

    /// What [`StreamConn::lag`] counts.
    const LAG_UNIT: LagUnit = LagUnit::Rows;

    /// Queues `row` for `stream`, encoded at once into the request being
    /// built, into the channel `row.channel`.
    fn queue_row(&mut self, stream: &str, row: &StreamRow<'_>);

    /// Sends the rows queued since the last `produce` and waits until the
    /// server has acknowledged them (Kafka `acks=all`, XADD's ids, the
    /// INSERT's commit); empties the queue whatever the answer.
    async fn produce(
        &mut self,
        on_failure: &mut dyn FnMut(&str),
    ) -> Result<ProduceOutcome, DriverError>;

    /// Makes this connection a consumer named `consumer` in `group` of
    /// `stream`, reading `channels`. Called once per session, before any
    /// [`StreamConn::poll`]; the group must exist.
    async fn subscribe(
        &mut self,
        stream: &str,
        group: &str,
        consumer: &str,
        channels: Channels<'_>,
    ) -> Result<(), DriverError>;

    /// Waits up to `wait` for rows and hands up to `max_rows` of them to
    /// `on_row`, in order within each channel. Returns with what came,
    /// possibly nothing, when `wait` is up.
    async fn poll(
        &mut self,
        max_rows: usize,
        wait: Duration,
        on_row: &mut OnRow<'_>,
    ) -> Result<PollOutcome, DriverError>;

    /// Acknowledges every row polled so far as the group's (Kafka's offset
    /// commit, XACK, a standby status update that lets PostgreSQL release
    /// WAL).
    async fn commit(&mut self) -> Result<(), DriverError>;

    /// Stops consuming after the last [`StreamConn::commit`], in the
    /// protocol's orderly way, so that the acknowledgements reach the
    /// server before the connection closes. Rows arriving meanwhile are
    /// not handed over: the channel's next reader gets them. By default
    /// nothing: an acknowledgement that waits for its answer (XACK) or a
    /// client that leaves on drop (Kafka's) needs no more.
    async fn leave(&mut self) -> Result<(), DriverError> {
        Ok(())
    }

    /// Creates `stream` with `channels` channels and records `marker` with
    /// it, so that `cleanup` can tell it is loadcell's; `Ok(false)` when
    /// it already exists (and is left as it is).
    async fn create_stream(
        &mut self,
        stream: &str,
        channels: u32,
        marker: &str,
    ) -> Result<bool, DriverError>;

    /// What `create_stream` recorded; `None` when the stream does not exist.
    async fn stream_meta(&mut self, stream: &str) -> Result<Option<StreamMeta>, DriverError>;

    /// Drops the stream `create_stream` made, with every group of it.
    async fn drop_stream(&mut self, stream: &str) -> Result<(), DriverError>;

    /// Rows `stream` holds that are not loadcell's (another producer's),
    /// found by reading every row: what dropping it would take of other
    /// writers' data. A read of the whole stream, for `cleanup` only.
    async fn foreign_rows(&mut self, stream: &str) -> Result<u64, DriverError>;

    /// Creates consumer group `group` on `stream` (a PostgreSQL slot per
    /// channel); `Ok(false)` when it already exists.
    async fn create_group(
        &mut self,
        stream: &str,
        group: &str,
        from: StartFrom,
    ) -> Result<bool, DriverError>;

    /// Drops `group` (a Kafka group with no members, Redis's XGROUP
    /// DESTROY, PostgreSQL's slots) so the server keeps nothing for it.
    async fn drop_group(&mut self, stream: &str, group: &str) -> Result<(), DriverError>;

    /// Every channel's position for `group`, in channel order: exact, in
    /// rows, for the check after a run (it may cost a scan).
    async fn positions(
        &mut self,
        stream: &str,
        group: &str,
    ) -> Result<Vec<ChannelPosition>, DriverError>;

    /// What `group` has yet to acknowledge of `stream`, in
    /// [`StreamConn::LAG_UNIT`]s: cheap enough to ask once an interval
    /// while the run goes on (no scan of the stream). By default the sum
    /// of [`StreamConn::positions`]' lags, for drivers whose positions are
    /// offsets read from the server.
    async fn lag(&mut self, stream: &str, group: &str) -> Result<u64, DriverError> {
        Ok(self
            .positions(stream, group)
            .await?
            .iter()
            .map(ChannelPosition::lag)
            .sum())
    }
}

/// The byte layout of a [`StreamRow`] where the system carries rows as
/// opaque bytes (a Kafka record's value, a Redis stream entry's field):
/// a magic byte, the version, the fixed fields little-endian, then each key
/// and the payload with a `u16` length before it.
pub struct RowCodec;

/// Why bytes did not decode as a [`StreamRow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RowDecodeError {
    #[error("not a loadcell row (no magic byte)")]
    NotARow,
    #[error("a loadcell row of version {0}, which this build does not read")]
    Version(u8),
    #[error("a loadcell row cut short")]
    Truncated,
}

const ROW_MAGIC: u8 = 0x4c; // 'L'
const ROW_VERSION: u8 = 1;
const FIXED_LEN: usize = 2 + 4 + 8 + 8 + 8;

impl RowCodec {
    /// Appends `row` to `out`: one `extend` per field, no allocation once
    /// `out` has grown to a row's size.
    pub fn encode(row: &StreamRow<'_>, out: &mut Vec<u8>) {
        out.reserve(Self::encoded_len(row));
        out.push(ROW_MAGIC);
        out.push(ROW_VERSION);
        out.extend_from_slice(&row.channel.to_le_bytes());
        out.extend_from_slice(&row.seq.to_le_bytes());
        out.extend_from_slice(&row.produced_ns.to_le_bytes());
        out.extend_from_slice(&row.origin.to_le_bytes());
        for field in row.keys.iter().chain([&row.payload]) {
            let len = u16::try_from(field.len()).expect("a row field is under 64 KiB");
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(field);
        }
    }

    /// The length [`RowCodec::encode`] appends for `row`.
    pub fn encoded_len(row: &StreamRow<'_>) -> usize {
        FIXED_LEN
            + row
                .keys
                .iter()
                .chain([&row.payload])
                .map(|field| 2 + field.len())
                .sum::<usize>()
    }

    /// Reads a row back, borrowing its keys and payload from `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<StreamRow<'_>, RowDecodeError> {
        match bytes {
            [ROW_MAGIC, ROW_VERSION, ..] => {}
            [ROW_MAGIC, version, ..] => return Err(RowDecodeError::Version(*version)),
            _ => return Err(RowDecodeError::NotARow),
        }
        if bytes.len() < FIXED_LEN {
            return Err(RowDecodeError::Truncated);
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let channel = u32::from_le_bytes(bytes[2..6].try_into().unwrap());
        let seq = u64_at(6);
        let produced_ns = u64_at(14) as i64;
        let origin = u64_at(22);
        let mut rest = &bytes[FIXED_LEN..];
        let mut field = || -> Result<&[u8], RowDecodeError> {
            let [low, high, tail @ ..] = rest else {
                return Err(RowDecodeError::Truncated);
            };
            let len = usize::from(u16::from_le_bytes([*low, *high]));
            if tail.len() < len {
                return Err(RowDecodeError::Truncated);
            }
            let (value, after) = tail.split_at(len);
            rest = after;
            Ok(value)
        };
        let keys = [field()?, field()?, field()?, field()?];
        let payload = field()?;
        Ok(StreamRow {
            channel,
            seq,
            produced_ns,
            origin,
            keys,
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(payload: &'a [u8]) -> StreamRow<'a> {
        StreamRow {
            channel: 7,
            seq: 123_456_789_012,
            produced_ns: 1_790_000_000_123_456_789,
            origin: 0xdead_beef_cafe_f00d,
            keys: [b"user00042", b"2026-11-24", b"", b"order-9"],
            payload,
        }
    }

    #[test]
    fn a_row_reads_back_as_written() {
        let payload = vec![b'x'; 150];
        let written = row(&payload);
        let mut bytes = vec![0xff];
        RowCodec::encode(&written, &mut bytes);
        assert_eq!(bytes.len(), 1 + RowCodec::encoded_len(&written));
        assert_eq!(RowCodec::decode(&bytes[1..]), Ok(written));
    }

    #[test]
    fn foreign_and_damaged_bytes_are_refused() {
        let mut bytes = Vec::new();
        RowCodec::encode(&row(b"payload"), &mut bytes);
        assert_eq!(
            RowCodec::decode(b"{\"json\":1}"),
            Err(RowDecodeError::NotARow)
        );
        assert_eq!(
            RowCodec::decode(&[ROW_MAGIC, 9, 0]),
            Err(RowDecodeError::Version(9))
        );
        for cut in [3, FIXED_LEN, bytes.len() - 1] {
            assert_eq!(
                RowCodec::decode(&bytes[..cut]),
                Err(RowDecodeError::Truncated),
                "cut at {cut}"
            );
        }
    }
}
