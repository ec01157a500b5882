//! PostgreSQL logical replication as a change stream ([`StreamConn`]), on
//! loadcell's own wire session: no other client crate.
//!
//! # Model
//!
//! - **Stream** `s` with `n` channels: one table per channel, `s_0` ..
//!   `s_{n-1}`, columns `channel int, seq bigint, produced_ns bigint,
//!   origin bigint, k1 .. k4 text, payload text`, without a primary key
//!   (the consumer checks order and duplicates itself; an index would only
//!   add a B-tree insert per row). Each table carries the marker as its
//!   `COMMENT ON TABLE` and has its own publication `s_<c>_pub` (inserts
//!   only), so channels replicate in parallel, each through its own slot.
//!   The stream name must be a lower-case identifier; keys and payload
//!   are text columns, so they must be UTF-8 without NUL (loadcell's rows
//!   are ASCII).
//! - **Group** `g`: one logical slot (pgoutput) per channel, named
//!   `loadcell_<s>_<g>_<c>` ([`slot_name`]). A slot starts at its creation:
//!   it sees only rows committed after it, so a catch-up run must create
//!   the group before the backlog is loaded ([`StartFrom::Beginning`] on
//!   tables that already hold rows is refused).
//! - **Produce**: `queue_row` appends Bind + Execute of the channel table's
//!   INSERT, prepared once per channel (its Parse sent ahead of the first
//!   row that needs it); `produce` sends the whole request with one Sync:
//!   one write, one implicit transaction, answered after its COMMIT.
//! - **Consume**: `subscribe` opens one replication connection
//!   (`replication=database`) per assigned channel and runs
//!   `START_REPLICATION` on its slot, from the slot's confirmed position.
//!   `poll` walks the CopyData frames in place in each connection's read
//!   buffer and hands Insert tuples over as [`StreamRow`]s borrowed from
//!   it ([`replication`]), a transaction only once its Commit has come and
//!   then whole (a poll's first transaction even past `max_rows`);
//!   keepalives that ask for a reply get one at once. `commit` sends a
//!   standby status update with the end of the last transaction polled as
//!   flushed, which lets the server advance the slot's
//!   `confirmed_flush_lsn` and release WAL. A slot can only be confirmed
//!   at a transaction's end, so a poll that ended inside one would leave
//!   rows polled but unconfirmed, delivered again to the next consumer.
//! - **Positions**: `end` is `count(*)` of the channel table (a scan: fine
//!   at test and benchmark sizes, not free on a large backlog). The rows a
//!   slot still holds are counted exactly by decoding what it has not
//!   confirmed, on a temporary copy of the slot (it works while a consumer
//!   holds the slot, and the server drops the copy with the session
//!   whatever happens): `committed = end - pending`. That costs a decode of
//!   the unacknowledged WAL, like consuming it once without the network.
//!   Rows committed before a group's slot existed were never the group's
//!   to read ([`StartFrom::End`]) and count as committed. Only the check
//!   after a run asks for positions.
//! - **Lag** (asked once an interval during a run) is in WAL bytes
//!   ([`LagUnit::WalBytes`]): the server's current WAL position minus each
//!   of the group's slots' `confirmed_flush_lsn`, summed, from the slot
//!   catalogue alone (no scan, no decode). It counts every change written
//!   since the slot's confirmation, other tables' too.
//!
//! # Slots left behind
//!
//! A slot keeps WAL until it is dropped. Only `drop_group`, `drop_stream`
//! and the stream workload's cleanup drop slots (no async drop exists for
//! a connection's `Drop`); both are idempotent, drop only slots named with
//! loadcell's prefix for that stream, and terminate the walsender that
//! holds one (a consumer that died leaves its walsender until the server
//! notices). The workload that created a group owns dropping it, on its
//! failure path too.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::future::join_all;
use loadcell_core::sql::SqlConn;
use loadcell_core::stream::{
    ChannelPosition, Channels, LagUnit, OnRow, PollOutcome, ProduceOutcome, StartFrom, StreamConn,
    StreamMeta, StreamRow,
};
use loadcell_core::{Driver, DriverError, ErrorClass, ServerInfo, Target};
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;

use super::*;

mod replication;

use replication::Replica;

pub const INFO: DriverInfo = DriverInfo {
    name: "postgres-stream",
    schemes: &["postgres", "postgresql"],
    family: Family::STREAM,
    url_form: super::INFO.url_form,
    about:
        "PostgreSQL logical replication (pgoutput): a table, a publication and a slot per channel",
    kv: KvCapabilities::NONE,
    blocking: false,
};

/// PostgreSQL's identifier limit (NAMEDATALEN - 1).
const MAX_NAME: usize = 63;
/// Longest stream and group names kept readable in a slot name; longer
/// ones (or ones with other characters) are replaced by a hash.
const STREAM_PART: usize = 16;
const GROUP_PART: usize = 30;
/// How long `drop_group` waits for a terminated walsender to let go.
const SLOT_RELEASE: Duration = Duration::from_secs(10);
/// How long a replication connection may take to end streaming.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The columns of a channel table, in the order the tuple carries them.
const COLUMNS: &str = "channel, seq, produced_ns, origin, k1, k2, k3, k4, payload";
const TABLE_DEFINITION: &str = "(channel int NOT NULL, seq bigint NOT NULL, \
     produced_ns bigint NOT NULL, origin bigint NOT NULL, k1 text NOT NULL, \
     k2 text NOT NULL, k3 text NOT NULL, k4 text NOT NULL, payload text NOT NULL)";
/// The INSERT's parameter types: int4, int8 x 3, text x 5.
const PARAM_TYPES: [u32; 9] = [23, 20, 20, 20, 25, 25, 25, 25, 25];

pub struct PgStreamDriver {
    pg: Arc<PostgresDriver>,
}

impl fmt::Debug for PgStreamDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PgStreamDriver").field(&self.pg).finish()
    }
}

impl PgStreamDriver {
    /// Builds the driver; connects nowhere.
    pub fn from_target(target: &Target) -> Result<PgStreamDriver, String> {
        Ok(PgStreamDriver {
            pg: Arc::new(PostgresDriver::from_target(target)?),
        })
    }

    fn conn(&self, sql: PostgresConn) -> PgStreamConn {
        PgStreamConn {
            sql,
            driver: Arc::clone(&self.pg),
            producer: Producer::default(),
            replicas: Vec::new(),
            first_replica: 0,
        }
    }
}

impl Driver for PgStreamDriver {
    type Conn = PgStreamConn;

    fn endpoint(&self) -> String {
        self.pg.endpoint()
    }

    async fn connect(&self) -> Result<PgStreamConn, DriverError> {
        Ok(self.conn(self.pg.connect().await?))
    }

    async fn connect_within(&self, timeout: Duration) -> Result<PgStreamConn, DriverError> {
        Ok(self.conn(self.pg.connect_within(timeout).await?))
    }

    async fn server_info(&self, conn: &mut PgStreamConn) -> Result<ServerInfo, DriverError> {
        self.pg.server_info(&mut conn.sql).await
    }

    async fn server_counters(
        &self,
        conn: &mut PgStreamConn,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        self.pg.server_counters(&mut conn.sql).await
    }
}

/// A session: an SQL connection for producing and for the stream's
/// administration, and once subscribed, a replication connection per
/// channel it reads.
pub struct PgStreamConn {
    sql: PostgresConn,
    driver: Arc<PostgresDriver>,
    producer: Producer,
    replicas: Vec<Replica>,
    /// The replica the next poll reads first: each poll starts one further,
    /// so that a `max_rows` budget never starves the others.
    first_replica: usize,
}

impl fmt::Debug for PgStreamConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStreamConn")
            .field("sql", &self.sql)
            .field("replicas", &self.replicas.len())
            .finish()
    }
}

/// The request being built: Parse messages for channels not prepared yet,
/// then each row's Bind + Execute.
#[derive(Debug, Default)]
struct Producer {
    stream: String,
    /// Each channel's statement name, once its Parse is queued.
    statements: Vec<Option<Box<str>>>,
    /// Bumped whenever the statements are forgotten, so names never clash
    /// with ones the server may still hold.
    generation: u32,
    parses: BytesMut,
    binds: BytesMut,
    rows: u64,
}

/// One INSERT parameter, in text form.
enum Param<'a> {
    Int(i64),
    Text(&'a [u8]),
}

impl Producer {
    /// Forgets the prepared statements (another stream, or a request that
    /// failed, after which which Parse took effect is unknown).
    fn forget_statements(&mut self) {
        self.statements.clear();
        self.generation += 1;
    }

    fn queue(&mut self, stream: &str, row: &StreamRow<'_>) {
        if self.stream != stream {
            self.stream = stream.to_string();
            self.forget_statements();
        }
        let channel = row.channel as usize;
        if self.statements.len() <= channel {
            self.statements.resize(channel + 1, None);
        }
        let name = match &mut self.statements[channel] {
            Some(name) => name,
            empty => {
                let name = format!("lcs{}_{channel}", self.generation);
                let sql = format!(
                    "INSERT INTO {} ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    table_name(stream, row.channel)
                );
                // Fails only for a NUL in the stream name: the Bind then
                // names a statement the server lacks, and the request fails.
                let _ = frontend::parse(&name, &sql, PARAM_TYPES, &mut self.parses);
                empty.insert(name.into())
            }
        };
        let [k1, k2, k3, k4] = row.keys;
        let params = [
            Param::Int(row.channel.into()),
            Param::Int(row.seq as i64),
            Param::Int(row.produced_ns),
            // The bit pattern: read back as u64 by the consumer.
            Param::Int(row.origin as i64),
            Param::Text(k1),
            Param::Text(k2),
            Param::Text(k3),
            Param::Text(k4),
            Param::Text(row.payload),
        ];
        let bound = frontend::bind(
            "",
            name,
            std::iter::empty(),
            params,
            |p, buf| {
                match p {
                    Param::Int(v) => {
                        buf.extend_from_slice(itoa::Buffer::new().format(v).as_bytes())
                    }
                    Param::Text(t) => buf.extend_from_slice(t),
                }
                Ok(IsNull::No)
            },
            std::iter::empty(),
            &mut self.binds,
        );
        debug_assert!(bound.is_ok());
        let _ = frontend::execute("", 0, &mut self.binds);
        self.rows += 1;
    }
}

/// `<stream>_<channel>`.
fn table_name(stream: &str, channel: u32) -> String {
    format!("{stream}_{channel}")
}

/// `<stream>_<channel>_pub`.
fn publication_name(stream: &str, channel: u32) -> String {
    format!("{stream}_{channel}_pub")
}

/// `loadcell_<stream>_<group>_<channel>`: the stream part never holds `_`
/// and the channel is the digits after the last one, so no two (stream,
/// group, channel) share a name and a stream's slots are found by pattern
/// ([`slots_of_stream`]). A stream or group that is not a short lower-case
/// name is replaced by `h` and a hash of it.
fn slot_name(stream: &str, group: &str, channel: u32) -> String {
    format!("{}{channel}", slot_prefix(stream, group))
}

fn slot_prefix(stream: &str, group: &str) -> String {
    format!("{}{}_", stream_slot_prefix(stream), group_part(group))
}

/// `loadcell_<stream part>_`.
fn stream_slot_prefix(stream: &str) -> String {
    let clean = stream.len() <= STREAM_PART
        && !stream.is_empty()
        && stream
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if clean {
        format!("loadcell_{stream}_")
    } else {
        format!("loadcell_h{:012x}_", fnv1a(stream) >> 16)
    }
}

fn group_part(group: &str) -> String {
    let clean = group.len() <= GROUP_PART
        && !group.is_empty()
        && group
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if clean {
        group.to_string()
    } else {
        format!("h{:012x}", fnv1a(group) >> 16)
    }
}

/// A hash that stays the same across builds (slot names outlive a run).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The condition on `pg_replication_slots` for every slot of `stream`.
fn slots_of_stream(stream: &str) -> String {
    format!(
        "slot_name ~ '^{}[a-z0-9_]+_[0-9]+$' AND database = current_database()",
        stream_slot_prefix(stream)
    )
}

/// The condition on `pg_replication_slots` for the slots of one group.
fn slots_of_group(stream: &str, group: &str) -> String {
    format!(
        "slot_name ~ '^{}[0-9]+$' AND database = current_database()",
        slot_prefix(stream, group)
    )
}

/// A stream name must make plain table names: lower case, so that the
/// unquoted names in SQL and the catalog's agree.
fn check_stream_name(stream: &str) -> Result<(), DriverError> {
    let longest = publication_name(stream, 9_999).len();
    let valid = stream.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && stream
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !valid || longest > MAX_NAME {
        return Err(DriverError::fatal(format!(
            "stream name '{stream}' does not fit PostgreSQL: it names tables, so it must be \
             lower-case letters, digits and '_', start with a letter or '_', and leave room \
             for '_<channel>_pub' within {MAX_NAME} characters"
        )));
    }
    Ok(())
}

/// `'text'` with quotes doubled.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

impl PgStreamConn {
    fn endpoint(&self) -> &str {
        &self.sql.ctx.endpoint
    }

    async fn first_string(&mut self, sql: &str) -> Result<String, DriverError> {
        Ok(self
            .sql
            .query_strings(sql)
            .await?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    async fn count(&mut self, sql: &str) -> Result<u64, DriverError> {
        Ok(self.sql.query_i64(sql).await?.unwrap_or(0).max(0) as u64)
    }

    /// Logical decoding needs `wal_level = logical`, which takes a restart.
    async fn check_wal_level(&mut self) -> Result<(), DriverError> {
        let level = self.first_string("SHOW wal_level").await?;
        if level == "logical" {
            return Ok(());
        }
        Err(DriverError::fatal(format!(
            "PostgreSQL at {} has wal_level = {level}, and logical replication needs \
             wal_level = logical: run ALTER SYSTEM SET wal_level = logical and restart the server",
            self.endpoint()
        )))
    }

    /// The channel tables of `stream`: their number.
    async fn channel_tables(&mut self, stream: &str) -> Result<u32, DriverError> {
        let n = self
            .count(&format!(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND c.relkind = 'r' \
                 AND c.relname ~ '^{stream}_[0-9]+$'"
            ))
            .await?;
        Ok(n as u32)
    }

    /// `stream`'s channel count, or an error saying it does not exist.
    async fn existing_channels(&mut self, stream: &str) -> Result<u32, DriverError> {
        match self.stream_meta(stream).await? {
            Some(meta) => Ok(meta.channels),
            None => Err(DriverError::fatal(format!(
                "stream '{stream}' does not exist at {} (no table {}): create it first (prepare)",
                self.endpoint(),
                table_name(stream, 0)
            ))),
        }
    }

    /// Every channel's publication exists: one that does not is named.
    async fn check_publications(
        &mut self,
        stream: &str,
        channels: &[u32],
    ) -> Result<(), DriverError> {
        for &channel in channels {
            let publication = publication_name(stream, channel);
            let found = self
                .count(&format!(
                    "SELECT count(*) FROM pg_publication WHERE pubname = '{publication}'"
                ))
                .await?;
            if found == 0 {
                return Err(DriverError::fatal(format!(
                    "publication {publication} does not exist at {}: channel {channel} of stream \
                     '{stream}' cannot be replicated (create the stream with loadcell's prepare, \
                     or CREATE PUBLICATION {publication} FOR TABLE {})",
                    self.endpoint(),
                    table_name(stream, channel)
                )));
            }
        }
        Ok(())
    }

    /// A group needs a free slot per channel it lacks, and its consumers a
    /// walsender per channel.
    async fn check_capacity(&mut self, channels: u32, missing: u64) -> Result<(), DriverError> {
        let slots = self
            .count("SELECT current_setting('max_replication_slots')::int")
            .await?;
        let used = self
            .count("SELECT count(*) FROM pg_replication_slots")
            .await?;
        if used + missing > slots {
            return Err(DriverError::fatal(format!(
                "the group needs {missing} more replication slots (one per channel) and \
                 PostgreSQL at {} has {} free of max_replication_slots = {slots}: raise it \
                 (ALTER SYSTEM SET max_replication_slots = {}, then restart the server)",
                self.endpoint(),
                slots.saturating_sub(used),
                used + missing + 8
            )));
        }
        let senders = self
            .count("SELECT current_setting('max_wal_senders')::int")
            .await?;
        if senders < u64::from(channels) {
            return Err(DriverError::fatal(format!(
                "consuming {channels} channels takes {channels} replication connections and \
                 PostgreSQL at {} has max_wal_senders = {senders}: raise it \
                 (ALTER SYSTEM SET max_wal_senders = {}, then restart the server)",
                self.endpoint(),
                channels + 8
            )));
        }
        Ok(())
    }

    /// Drops the slots `filter` selects, terminating the walsenders that
    /// hold them (only these slots' own) and waiting until they let go.
    async fn drop_slots(&mut self, filter: &str) -> Result<(), DriverError> {
        let give_up = tokio::time::Instant::now() + SLOT_RELEASE;
        loop {
            self.sql
                .simple(&format!(
                    "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                     WHERE {filter} AND active_pid IS NOT NULL"
                ))
                .await?;
            let dropped = self
                .sql
                .simple(&format!(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                     WHERE {filter} AND NOT active"
                ))
                .await;
            match dropped {
                // Taken again between the check and the drop: once more.
                Err(e) if e.code.as_deref() == Some("55006") => {}
                other => other?,
            }
            let left = self
                .sql
                .query_strings(&format!(
                    "SELECT slot_name FROM pg_replication_slots WHERE {filter}"
                ))
                .await?;
            if left.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= give_up {
                return Err(DriverError::fatal(format!(
                    "replication slots {} at {} are still in use after {} s: drop them with \
                     SELECT pg_drop_replication_slot(name)",
                    left.join(", "),
                    self.endpoint(),
                    SLOT_RELEASE.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Rows the slot still holds for the channel: the Insert messages a
    /// temporary copy of it decodes (see the module docs).
    async fn pending_rows(
        &mut self,
        slot: &str,
        publication: &str,
        copy: &str,
    ) -> Result<u64, DriverError> {
        self.sql
            .simple(&format!(
                "SELECT pg_copy_logical_replication_slot('{slot}', '{copy}', true)"
            ))
            .await?;
        let pending = self
            .count(&format!(
                "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('{copy}', NULL, NULL, \
                 'proto_version', '1', 'publication_names', '{publication}') \
                 WHERE get_byte(data, 0) = 73"
            ))
            .await;
        let dropped = self
            .sql
            .simple(&format!("SELECT pg_drop_replication_slot('{copy}')"))
            .await;
        let pending = pending?;
        dropped?;
        Ok(pending)
    }

    /// Describes a replica's failure, marking its connection lost when the
    /// failure is the connection's.
    #[cold]
    fn replica_error(replica: &mut Replica, failure: Failure) -> DriverError {
        let failure = match failure {
            Failure::Db { .. } | Failure::Lost(_) => failure,
            other => replica.conn.lose(other),
        };
        replica.conn.error(failure)
    }
}

impl StreamConn for PgStreamConn {
    const LAG_UNIT: LagUnit = LagUnit::WalBytes;

    fn queue_row(&mut self, stream: &str, row: &StreamRow<'_>) {
        self.producer.queue(stream, row);
    }

    async fn produce(
        &mut self,
        on_failure: &mut dyn FnMut(&str),
    ) -> Result<ProduceOutcome, DriverError> {
        let producer = &mut self.producer;
        let rows = std::mem::take(&mut producer.rows);
        if rows == 0 {
            return Ok(ProduceOutcome::default());
        }
        let conn = &mut self.sql;
        // The request becomes the connection's write buffer by a swap: the
        // rows are not copied (the rare Parse messages go before them).
        if !producer.parses.is_empty() {
            producer.parses.extend_from_slice(&producer.binds);
            std::mem::swap(&mut producer.parses, &mut producer.binds);
            producer.parses.clear();
        }
        std::mem::swap(&mut conn.wbuf, &mut producer.binds);
        producer.binds.clear();
        frontend::sync(&mut conn.wbuf);
        let mut out = Outcome::default();
        let sent = match conn.check_usable() {
            Ok(()) => match conn.send().await {
                Ok(()) => conn.finish(&mut out, true).await,
                Err(f) => Err(f),
            },
            Err(f) => Err(f),
        };
        if let Err(f) = sent {
            producer.forget_statements();
            return Err(conn.error(f));
        }
        match out.error {
            None => Ok(ProduceOutcome { rows, failed: 0 }),
            Some(failure) => {
                producer.forget_statements();
                let err = conn.error(*failure);
                if err.class == ErrorClass::Connection {
                    return Err(err);
                }
                // The implicit transaction rolled back: none stored.
                on_failure(&err.message);
                Ok(ProduceOutcome { rows, failed: rows })
            }
        }
    }

    async fn subscribe(
        &mut self,
        stream: &str,
        group: &str,
        _consumer: &str,
        channels: Channels<'_>,
    ) -> Result<(), DriverError> {
        let Channels::Assigned(channels) = channels else {
            return Err(DriverError::fatal(
                "PostgreSQL has no coordinator to assign a group's channels: each consumer \
                 must be given its channels (a slot has one reader at a time)",
            ));
        };
        if !self.replicas.is_empty() {
            return Err(DriverError::fatal("this connection already consumes"));
        }
        if channels.is_empty() {
            return Err(DriverError::fatal("a consumer needs at least one channel"));
        }
        check_stream_name(stream)?;
        self.check_publications(stream, channels).await?;
        for &channel in channels {
            let slot = slot_name(stream, group, channel);
            let found = self
                .count(&format!(
                    "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"
                ))
                .await?;
            if found == 0 {
                return Err(DriverError::fatal(format!(
                    "group '{group}' of stream '{stream}' has no replication slot {slot} for \
                     channel {channel} at {}: create the group first",
                    self.endpoint()
                )));
            }
        }
        for &channel in channels {
            let replica = Replica::start(
                &self.driver,
                &slot_name(stream, group, channel),
                &publication_name(stream, channel),
            )
            .await?;
            self.replicas.push(replica);
        }
        Ok(())
    }

    async fn poll(
        &mut self,
        max_rows: usize,
        wait: Duration,
        on_row: &mut OnRow<'_>,
    ) -> Result<PollOutcome, DriverError> {
        let count = self.replicas.len();
        if count == 0 {
            return Err(DriverError::fatal("poll before subscribe"));
        }
        let deadline = tokio::time::Instant::now() + wait;
        let mut out = PollOutcome::default();
        loop {
            for i in 0..count {
                let replica = &mut self.replicas[(self.first_replica + i) % count];
                if let Err(f) = replica.take(max_rows, on_row, &mut out).await {
                    return Err(Self::replica_error(replica, f));
                }
            }
            self.first_replica = (self.first_replica + 1) % count;
            if out.rows > 0 || out.undecodable > 0 {
                return Ok(out);
            }
            match tokio::time::timeout_at(deadline, replication::read_any(&mut self.replicas)).await
            {
                Err(_) => return Ok(out),
                Ok(Ok(())) => {}
                Ok(Err((index, f))) => {
                    return Err(Self::replica_error(&mut self.replicas[index], f))
                }
            }
        }
    }

    async fn commit(&mut self) -> Result<(), DriverError> {
        for replica in &mut self.replicas {
            if let Err(f) = replica.acknowledge().await {
                return Err(Self::replica_error(replica, f));
            }
        }
        Ok(())
    }

    /// Each replication connection ends streaming and closes, all at
    /// once, each given `LEAVE_TIMEOUT`.
    async fn leave(&mut self) -> Result<(), DriverError> {
        let ended = join_all(self.replicas.iter_mut().map(|replica| async move {
            match tokio::time::timeout(LEAVE_TIMEOUT, replica.end()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(f)) => Err(Self::replica_error(replica, f)),
                Err(_) => Err(DriverError::connection(format!(
                    "the server did not end streaming within {LEAVE_TIMEOUT:?}: \
                     its last acknowledgement may not have been applied"
                ))),
            }
        }))
        .await;
        self.replicas.clear();
        ended.into_iter().collect()
    }

    async fn create_stream(
        &mut self,
        stream: &str,
        channels: u32,
        marker: &str,
    ) -> Result<bool, DriverError> {
        check_stream_name(stream)?;
        if channels == 0 {
            return Err(DriverError::fatal("a stream needs at least one channel"));
        }
        self.check_wal_level().await?;
        if self.stream_meta(stream).await?.is_some() {
            return Ok(false);
        }
        // One simple query: one implicit transaction, so a stream is never
        // half made.
        let mut sql = String::new();
        for channel in 0..channels {
            let table = table_name(stream, channel);
            let _ = write!(
                sql,
                "CREATE TABLE {table} {TABLE_DEFINITION}; \
                 COMMENT ON TABLE {table} IS {}; \
                 CREATE PUBLICATION {} FOR TABLE {table} WITH (publish = 'insert'); ",
                literal(marker),
                publication_name(stream, channel)
            );
        }
        self.sql.simple(&sql).await?;
        Ok(true)
    }

    async fn stream_meta(&mut self, stream: &str) -> Result<Option<StreamMeta>, DriverError> {
        check_stream_name(stream)?;
        let channels = self.channel_tables(stream).await?;
        if channels == 0 {
            return Ok(None);
        }
        let marker = self
            .sql
            .table_comment(&table_name(stream, 0))
            .await?
            .unwrap_or_default();
        Ok(Some(StreamMeta { marker, channels }))
    }

    /// A channel table's columns are loadcell's whoever wrote the row:
    /// all that tells another writer's row is a channel other than the
    /// table's, or a negative sequence number.
    async fn foreign_rows(&mut self, stream: &str) -> Result<u64, DriverError> {
        let channels = self.existing_channels(stream).await?;
        let mut foreign = 0;
        for channel in 0..channels {
            foreign += self
                .count(&format!(
                    "SELECT count(*) FROM {} WHERE channel <> {channel} OR seq < 0",
                    table_name(stream, channel)
                ))
                .await?;
        }
        Ok(foreign)
    }

    async fn drop_stream(&mut self, stream: &str) -> Result<(), DriverError> {
        check_stream_name(stream)?;
        self.drop_slots(&slots_of_stream(stream)).await?;
        let publications = self
            .sql
            .query_strings(&format!(
                "SELECT pubname FROM pg_publication WHERE pubname ~ '^{stream}_[0-9]+_pub$'"
            ))
            .await?;
        let tables = self
            .sql
            .query_strings(&format!(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND c.relkind = 'r' \
                 AND c.relname ~ '^{stream}_[0-9]+$'"
            ))
            .await?;
        let mut sql = String::new();
        if !publications.is_empty() {
            let _ = write!(
                sql,
                "DROP PUBLICATION IF EXISTS {}; ",
                publications.join(", ")
            );
        }
        if !tables.is_empty() {
            let _ = write!(sql, "DROP TABLE IF EXISTS {}; ", tables.join(", "));
        }
        if !sql.is_empty() {
            self.sql.simple(&sql).await?;
        }
        Ok(())
    }

    async fn create_group(
        &mut self,
        stream: &str,
        group: &str,
        from: StartFrom,
    ) -> Result<bool, DriverError> {
        check_stream_name(stream)?;
        self.check_wal_level().await?;
        let channels = self.existing_channels(stream).await?;
        let all: Vec<u32> = (0..channels).collect();
        self.check_publications(stream, &all).await?;
        let existing = self
            .sql
            .query_strings(&format!(
                "SELECT slot_name FROM pg_replication_slots WHERE {}",
                slots_of_group(stream, group)
            ))
            .await?;
        let missing: Vec<String> = all
            .iter()
            .map(|&c| slot_name(stream, group, c))
            .filter(|slot| !existing.contains(slot))
            .collect();
        if missing.is_empty() {
            return Ok(false);
        }
        if from == StartFrom::Beginning {
            let any_row = all
                .iter()
                .map(|&c| format!("EXISTS (SELECT 1 FROM {})", table_name(stream, c)))
                .collect::<Vec<_>>()
                .join(" OR ");
            if self.first_string(&format!("SELECT {any_row}")).await? == "t" {
                return Err(DriverError::fatal(format!(
                    "group '{group}' cannot start at the beginning of stream '{stream}': its \
                     tables already hold rows and a PostgreSQL replication slot sees only rows \
                     committed after it is created; create the group before loading the backlog"
                )));
            }
        }
        self.check_capacity(channels, missing.len() as u64).await?;
        for slot in &missing {
            self.sql
                .simple(&format!(
                    "SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"
                ))
                .await?;
        }
        Ok(true)
    }

    async fn drop_group(&mut self, stream: &str, group: &str) -> Result<(), DriverError> {
        self.drop_slots(&slots_of_group(stream, group)).await
    }

    async fn positions(
        &mut self,
        stream: &str,
        group: &str,
    ) -> Result<Vec<ChannelPosition>, DriverError> {
        check_stream_name(stream)?;
        let channels = self.existing_channels(stream).await?;
        let session = self.count("SELECT pg_backend_pid()").await?;
        let copy = format!("loadcell_peek_{session}");
        let mut positions = Vec::with_capacity(channels as usize);
        for channel in 0..channels {
            let end = self
                .count(&format!(
                    "SELECT count(*) FROM {}",
                    table_name(stream, channel)
                ))
                .await?;
            let slot = slot_name(stream, group, channel);
            let found = self
                .count(&format!(
                    "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"
                ))
                .await?;
            // A group without a slot on this channel has read nothing.
            let committed = if found == 0 {
                0
            } else {
                let pending = self
                    .pending_rows(&slot, &publication_name(stream, channel), &copy)
                    .await?;
                end.saturating_sub(pending)
            };
            positions.push(ChannelPosition {
                channel,
                end,
                committed,
                vanished: 0,
            });
        }
        Ok(positions)
    }

    async fn lag(&mut self, stream: &str, group: &str) -> Result<u64, DriverError> {
        check_stream_name(stream)?;
        self.count(&format!(
            "SELECT coalesce(sum(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)), 0)\
             ::bigint FROM pg_replication_slots WHERE {}",
            slots_of_group(stream, group)
        ))
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_names_are_distinct_per_stream_group_and_channel_and_fit() {
        assert_eq!(slot_name("orders", "g1", 7), "loadcell_orders_g1_7");
        // `_` in the stream would make "a" + group "b_c" and "a_b" + "c" one name.
        assert_ne!(slot_name("a_b", "c", 0), slot_name("a", "b_c", 0));
        assert!(slot_name("a_b", "c", 0).starts_with("loadcell_h"));
        let long = slot_name(&"s".repeat(40), &"Group-Name".repeat(10), 9_999);
        assert!(long.len() <= MAX_NAME, "{long}");
        assert!(long
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
        assert_ne!(slot_name("s", "g", 1), slot_name("s", "g_1", 0));
    }

    #[test]
    fn stream_names_must_make_plain_table_names() {
        assert!(check_stream_name("loadcell_stream").is_ok());
        for bad in ["Orders", "1st", "a-b", "", "x\'y", &"s".repeat(60)] {
            let e = check_stream_name(bad).unwrap_err();
            assert!(e.message.contains("lower-case"), "{bad}: {e}");
        }
    }
}
