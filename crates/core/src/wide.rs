//! The wide-column family (HBase, Cassandra): rows of cells addressed by a
//! row key, a column family and a qualifier.
//!
//! One data model for both systems: HBase's, where a row's cells live in
//! families and a qualifier names a cell within one. On CQL a table has one
//! set of columns: a qualifier is a column's name, the row key its partition
//! key, and the family names nothing (the driver takes it and ignores it).
//! Rows, qualifiers and values are bytes, borrowed from the caller on the
//! way in and from the connection's buffers on the way out, so the hot
//! path copies them at most once into what the driver sends.
//!
//! Puts are queued ([`WideConn::queue_put`]) and sent together by
//! [`WideConn::flush_puts`]: one put is a plain request, N queued puts are
//! one batch (HBase's `putMultiple`; on CQL an UNLOGGED BATCH when the
//! server takes it, else N concurrent INSERTs: [`MultiPut`]).

use crate::DriverError;

/// One cell: a qualifier and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell<'a> {
    pub qualifier: &'a [u8],
    pub value: &'a [u8],
}

/// How a put is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Written to the write-ahead log (commit log) before it is
    /// acknowledged: the system's default.
    Wal,
    /// Not written to the log (HBase's `SKIP_WAL`): lost if the server
    /// dies before the memstore is flushed. Drivers that cannot skip it
    /// say so by [`WideConn::refuses_skip_wal`].
    SkipWal,
}

/// How the last flush of several puts went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiPut {
    /// As one request (HBase's `putMultiple`, a CQL UNLOGGED BATCH).
    Batch,
    /// As a request a row, sent together (CQL, for a batch the server
    /// would refuse as too large).
    Concurrent,
}

/// The namespace a driver's tables live in when `prepare` creates it if
/// missing (CQL's keyspace), as `cleanup` weighs dropping it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub name: String,
    /// The marker `create_table` recorded when it created the namespace
    /// (the `TableSpec`'s), empty when something else created it.
    pub marker: String,
    /// What else it holds: tables besides the marker's own, views, types,
    /// functions and aggregates.
    pub objects: u64,
}

/// A table as `prepare` creates it.
#[derive(Debug, Clone, Copy)]
pub struct TableSpec<'a> {
    pub table: &'a str,
    /// The column family (HBase); CQL has none.
    pub family: &'a str,
    /// The name of the row key's column where the system names it (CQL's
    /// partition key: YCSB's `y_id`); HBase's row key has no name.
    pub key_column: &'a str,
    /// The qualifiers the table's rows hold: CQL's columns (blobs). HBase
    /// takes any qualifier in a family and ignores these.
    pub qualifiers: &'a [&'a [u8]],
    /// Row keys at which the table is pre-split into regions (HBase);
    /// empty for one region. CQL partitions by token and ignores these.
    pub split_keys: &'a [&'a [u8]],
    /// Recorded with the table (HBase: table descriptor metadata;
    /// Cassandra: the table's comment) so that `cleanup` drops only a
    /// table loadcell created; on CQL also with a keyspace created for it.
    pub marker: &'a str,
}

/// Where a scan starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanStart<'a> {
    /// At the table's first row.
    First,
    /// At this row (or the first after it).
    At(&'a [u8]),
    /// At the first row after this one: a scan continued page by page
    /// from the last row it saw.
    After(&'a [u8]),
}

/// A scan of one table.
#[derive(Debug, Clone, Copy)]
pub struct Scan<'a> {
    pub table: &'a str,
    pub family: &'a str,
    pub start: ScanStart<'a>,
    /// The row the scan stops before. Only systems that keep rows in key
    /// order can honour it (HBase); CQL keeps rows in token order, where a
    /// key range means nothing, and its driver stops at `limit` alone.
    pub stop_row: Option<&'a [u8]>,
    /// At most this many rows.
    pub limit: Option<u32>,
    /// Rows fetched per round trip: HBase's scanner caching, CQL's page
    /// size.
    pub caching: u32,
}

/// What a scan returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    pub rows: u64,
    pub cells: u64,
}

/// What [`WideConn::set_block_cache`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCacheChange {
    /// Whether the cache was on before: what to restore.
    pub was_on: bool,
    /// What the setting is on this system, for the result's notes (HBase:
    /// the family's `BLOCKCACHE`; Cassandra: the table's `caching`, the
    /// nearest thing it has).
    pub setting: &'static str,
}

/// A value bound to a marker of a CQL statement of the user's own (the
/// script workload), written as the marker's column type wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqlValue<'a> {
    /// As text: what text and blob columns take, and number columns parse.
    pub text: &'a [u8],
    /// As a number, when it is one: written straight into number columns.
    pub number: Option<i64>,
}

/// Why a system without CQL refuses the user's own CQL statements.
pub const NO_CQL: &str = "CQL statements run on Cassandra and ScyllaDB (cql://) only";

pub trait WideConn {
    /// Why this system cannot skip the write-ahead log, `None` when it
    /// can: checked before any load is sent.
    fn refuses_skip_wal(&self) -> Option<&'static str>;

    /// Queues a put of `cells` into `row` of `table`'s `family`, to be sent
    /// by [`WideConn::flush_puts`]. Every put queued before a flush goes to
    /// the same table.
    fn queue_put(
        &mut self,
        table: &str,
        row: &[u8],
        family: &str,
        cells: &[Cell<'_>],
        durability: Durability,
    );

    /// Sends the queued puts as one request (one batch for several) and
    /// empties the queue, whatever the answer; returns the rows written.
    async fn flush_puts(&mut self) -> Result<u64, DriverError>;

    /// How the last flush of several puts was sent.
    fn last_multi_put(&self) -> MultiPut;

    /// Reads `row` of `table`: every cell of `family` when `qualifiers` is
    /// empty, else those named. Each cell goes to `on_cell`, borrowed from
    /// the connection's buffers for the call. `Ok(false)` when the row is
    /// not there.
    async fn get(
        &mut self,
        table: &str,
        row: &[u8],
        family: &str,
        qualifiers: &[&[u8]],
        on_cell: &mut dyn FnMut(Cell<'_>),
    ) -> Result<bool, DriverError>;

    /// Runs `scan`; each row's key goes to `on_row`, borrowed for the call.
    async fn scan(
        &mut self,
        scan: &Scan<'_>,
        on_row: &mut dyn FnMut(&[u8]),
    ) -> Result<ScanOutcome, DriverError>;

    /// Deletes `row` of `table`, whether or not it is there.
    async fn delete(&mut self, table: &str, row: &[u8]) -> Result<(), DriverError>;

    /// Creates `spec`'s table (and on CQL the keyspace it lives in, if
    /// missing, marked with the same marker), with its marker.
    async fn create_table(&mut self, spec: &TableSpec<'_>) -> Result<(), DriverError>;

    /// The namespace the tables live in, `None` when it does not exist
    /// or the system has none `prepare` creates (HBase: tables go to its
    /// default namespace).
    async fn namespace(&mut self) -> Result<Option<Namespace>, DriverError>;

    /// Drops the namespace and whatever it holds: only for one whose
    /// marker is loadcell's and that holds no table.
    async fn drop_namespace(&mut self) -> Result<(), DriverError>;

    /// The marker recorded by `create_table`: `Some("")` when the table
    /// exists without one, `None` when it does not exist.
    async fn table_marker(&mut self, table: &str) -> Result<Option<String>, DriverError>;

    async fn drop_table(&mut self, table: &str) -> Result<(), DriverError>;

    /// Turns the block cache of `table`'s `family` on or off, and says
    /// what it was, so that it can be restored.
    async fn set_block_cache(
        &mut self,
        table: &str,
        family: &str,
        on: bool,
    ) -> Result<BlockCacheChange, DriverError>;

    /// Hands every row key of `table` to `on_key` (borrowed for the
    /// call), read back a page at a time: no one request scans the whole
    /// table. Returns the rows. What `cleanup` tells loadcell's rows from
    /// another writer's by before it drops a table.
    async fn each_key(
        &mut self,
        table: &str,
        on_key: &mut dyn FnMut(&[u8]),
    ) -> Result<u64, DriverError>;

    /// Creates `table` in the target's keyspace from its CQL column list
    /// as the user wrote it (`(k bigint PRIMARY KEY, v text)`), commented
    /// with `marker`; the keyspace first, if missing, as `create_table`
    /// makes it.
    async fn create_cql_table(
        &mut self,
        _table: &str,
        _columns: &str,
        _marker: &str,
    ) -> Result<(), DriverError> {
        Err(DriverError::fatal(NO_CQL))
    }

    /// Prepares the CQL statement `text` (`?` markers, tables of the
    /// target's keyspace) on this connection; the handle `execute_cql`
    /// takes.
    async fn prepare_cql(&mut self, _text: &str) -> Result<usize, DriverError> {
        Err(DriverError::fatal(NO_CQL))
    }

    /// Executes the statement `prepare_cql` returned `statement` for, its
    /// markers bound to `values` in order; returns the rows it answered.
    async fn execute_cql(
        &mut self,
        _statement: usize,
        _values: &[CqlValue<'_>],
    ) -> Result<u64, DriverError> {
        Err(DriverError::fatal(NO_CQL))
    }
}
