//! One loadcell session's side of the shared CQL session: its prepared
//! statements, each prepared once at its first use, and the buffer its
//! queued puts are copied into.
//!
//! A multi-put is one UNLOGGED BATCH when it fits, N concurrent prepared
//! INSERTs (each routed to its row's replica, token-aware) otherwise.
//! It fits when its rows share one partition (Cassandra checks no size
//! then) or when its size is under the server's
//! `batch_size_fail_threshold` (read at connect, [`super::Shared`]),
//! beyond which Cassandra refuses the batch ("Batch too large"). Measured
//! on one local Cassandra 4.1 node (4 sessions, `--multi-put 100`,
//! 100-byte values, alternated twice): the unlogged batch did 20–33k
//! rows/s at 1.5 µs of client CPU a row, the concurrent INSERTs 11–14k
//! rows/s at 9–10 µs (one request against a hundred; with one node,
//! routing gains nothing). With S5's 1 KB values a batch of 100 is twice
//! the default 50 KiB, so those go as concurrent INSERTs.
//!
//! What loadcell allocates per operation is nothing once warm: values are
//! serialized straight from the connection's buffer ([`Blobs`],
//! [`Puts`] as a batch's values) and read back as slices of the response
//! frame (`ColumnIterator`); the batch's statements are kept while the
//! puts use the same ones. The `scylla` crate allocates inside each
//! request (its frame, its response), and concurrent INSERTs' join holds
//! their futures in one vector.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use loadcell_core::wide::{
    BlockCacheChange, Cell, CqlValue, Durability, MultiPut, Namespace, Scan, ScanOutcome,
    ScanStart, TableSpec, WideConn,
};
use loadcell_core::DriverError;
use scylla::client::session::Session;
use scylla::deserialize::row::ColumnIterator;
use scylla::errors::SerializationError;
use scylla::frame::response::result::{ColumnType, NativeType};
use scylla::response::query_result::{QueryResult, QueryRowsResult};
use scylla::response::{PagingState, PagingStateResponse};
use scylla::serialize::batch::{BatchValues, BatchValuesIterator};
use scylla::serialize::row::{RowSerializationContext, SerializeRow};
use scylla::serialize::writers::RowWriter;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Statement;

use super::{
    execution_error, ident, literal, one_line, prepare_error, Shared, KEYSPACE_MARKER_TABLE,
};

/// Why a CQL put cannot skip the write-ahead log.
pub const SKIP_WAL_REFUSED: &str = "Cassandra has no per-write WAL skip: every write goes to its commit log (durable_writes is a whole keyspace's setting)";

/// What Cassandra changes for `set_block_cache`.
const CACHING_SETTING: &str = "the table's caching (keys and rows_per_partition), the nearest thing Cassandra has to HBase's block cache; the OS page cache still holds the SSTables";

/// A walk over a table's keys: token ranges read at once, each a page of
/// `KEYS_PAGE_ROWS` rows a request, every request given
/// `KEYS_PAGE_TIMEOUT`.
const KEY_RANGES: u32 = 16;
const KEYS_PAGE_ROWS: i32 = 5000;
const KEYS_PAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// What a prepared statement does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// INSERT of the key and the columns.
    Put,
    /// SELECT of the columns (every column when none are named).
    Get,
    Scan(StartKind),
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartKind {
    First,
    At,
    After,
}

#[derive(Debug)]
struct Prepared {
    table: String,
    op: Op,
    columns: Vec<Vec<u8>>,
    statement: PreparedStatement,
}

/// A put waiting for `flush_puts`: its spans in `Puts::spans`, laid out
/// as its qualifiers, then the row key and the values in the INSERT's
/// order.
#[derive(Debug, Clone, Copy)]
struct QueuedPut {
    first_span: usize,
    cells: usize,
    statement: usize,
}

#[derive(Debug, Default)]
struct Puts {
    table: String,
    bytes: Vec<u8>,
    spans: Vec<Range<usize>>,
    queued: Vec<QueuedPut>,
    skip_wal: bool,
}

impl Puts {
    fn push(&mut self, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.spans.push(start..self.bytes.len());
    }

    fn qualifiers(&self, put: &QueuedPut) -> impl ExactSizeIterator<Item = &[u8]> + Clone {
        self.spans[put.first_span..put.first_span + put.cells]
            .iter()
            .map(|span| &self.bytes[span.clone()])
    }

    fn values(&self, put: &QueuedPut) -> Blobs<'_> {
        let start = put.first_span + put.cells;
        Blobs {
            bytes: &self.bytes,
            spans: &self.spans[start..start + 1 + put.cells],
        }
    }

    /// Whether every queued put writes the same row: one partition, whose
    /// batch Cassandra does not check for size.
    fn one_partition(&self) -> bool {
        let row = |put: &QueuedPut| &self.bytes[self.spans[put.first_span + put.cells].clone()];
        let first = row(&self.queued[0]);
        self.queued[1..].iter().all(|put| row(put) == first)
    }

    /// At least what Cassandra counts as the batch's size (its cells'
    /// values and timestamps): every queued byte, and a timestamp a cell.
    fn batch_size(&self) -> u64 {
        const TIMESTAMP: u64 = 8;
        let cells: usize = self.queued.iter().map(|put| put.cells).sum();
        self.bytes.len() as u64 + cells as u64 * TIMESTAMP
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
        self.queued.clear();
        self.skip_wal = false;
    }
}

/// Blob values serialized from slices of one buffer, in order.
struct Blobs<'a> {
    bytes: &'a [u8],
    spans: &'a [Range<usize>],
}

impl SerializeRow for Blobs<'_> {
    fn serialize(
        &self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter,
    ) -> Result<(), SerializationError> {
        debug_assert_eq!(ctx.columns().len(), self.spans.len());
        for span in self.spans {
            writer
                .make_cell_writer()
                .set_value(&self.bytes[span.clone()])
                .map_err(SerializationError::new)?;
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// The queued puts as a batch's values, one INSERT's each.
impl BatchValues for Puts {
    type BatchValuesIter<'r> = QueuedValues<'r>;

    fn batch_values_iter(&self) -> QueuedValues<'_> {
        QueuedValues {
            puts: self,
            next: 0,
        }
    }
}

struct QueuedValues<'a> {
    puts: &'a Puts,
    next: usize,
}

impl QueuedValues<'_> {
    fn advance(&mut self) -> Option<&QueuedPut> {
        let put = self.puts.queued.get(self.next)?;
        self.next += 1;
        Some(put)
    }
}

impl<'a> BatchValuesIterator<'a> for QueuedValues<'a> {
    fn serialize_next(
        &mut self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter,
    ) -> Option<Result<(), SerializationError>> {
        let put = *self.advance()?;
        Some(self.puts.values(&put).serialize(ctx, writer))
    }

    /// Never empty: an INSERT binds at least its key.
    fn is_empty_next(&mut self) -> Option<bool> {
        self.advance().map(|_| false)
    }

    fn skip_next(&mut self) -> Option<()> {
        self.advance().map(drop)
    }
}

pub struct CqlConnection {
    statements: Statements,
    puts: Puts,
    /// The UNLOGGED BATCH of the last multi-put sent as one, and the
    /// statements it holds (indices into `Statements::prepared`): kept
    /// for the next with the same statements.
    batch: Batch,
    batched: Vec<usize>,
    last_multi_put: MultiPut,
    /// The user's own statements (`prepare_cql`), by handle; the
    /// keyspace is made the session's own before the first.
    own: Vec<PreparedStatement>,
}

impl std::fmt::Debug for CqlConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqlConnection")
            .field("statements", &self.statements)
            .field("queued_puts", &self.puts.queued.len())
            .field("batched", &self.batched)
            .field("last_multi_put", &self.last_multi_put)
            .field("own_statements", &self.own.len())
            .finish_non_exhaustive()
    }
}

/// The shared session and what this connection prepared on it.
#[derive(Debug)]
struct Statements {
    shared: Arc<Shared>,
    prepared: Vec<Prepared>,
    /// Each table's partition key column, read from the schema once.
    key_columns: Vec<(String, String)>,
}

impl CqlConnection {
    pub(super) fn new(shared: Arc<Shared>) -> CqlConnection {
        CqlConnection {
            statements: Statements {
                shared,
                prepared: Vec::new(),
                key_columns: Vec::new(),
            },
            puts: Puts::default(),
            batch: Batch::new(BatchType::Unlogged),
            batched: Vec::new(),
            last_multi_put: MultiPut::Batch,
            own: Vec::new(),
        }
    }

    pub(super) fn session(&self) -> &scylla::client::session::Session {
        &self.statements.shared.session
    }

    pub(super) async fn release_version(&mut self) -> Result<String, DriverError> {
        let result = self
            .statements
            .query("SELECT release_version FROM system.local", ())
            .await?;
        let version = first_row::<(String,)>(result)?;
        Ok(version.map(|(v,)| v).unwrap_or_default())
    }

    /// Creates the keyspace if missing, with a marker table of its own
    /// commented with `marker`: what says `cleanup` may drop it.
    async fn ensure_keyspace(&mut self, marker: &str) -> Result<(), DriverError> {
        if self.namespace().await?.is_some() {
            return Ok(());
        }
        let shared = &self.statements.shared;
        self.statements.query(
            format!(
                "CREATE KEYSPACE IF NOT EXISTS {} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {}}}",
                ident(&shared.keyspace),
                shared.replication_factor
            ),
            (),
        )
        .await?;
        self.statements
            .query(
                format!(
                    "CREATE TABLE IF NOT EXISTS {} (k int PRIMARY KEY) WITH comment = {}",
                    self.statements.qualified(KEYSPACE_MARKER_TABLE),
                    literal(marker)
                ),
                (),
            )
            .await?;
        Ok(())
    }

    async fn send_puts(&mut self) -> Result<u64, DriverError> {
        if self.puts.skip_wal {
            return Err(DriverError::fatal(SKIP_WAL_REFUSED));
        }
        let puts = &mut self.puts;
        for i in 0..puts.queued.len() {
            let put = puts.queued[i];
            let statement = self
                .statements
                .statement(&puts.table, Op::Put, puts.qualifiers(&put))
                .await?;
            puts.queued[i].statement = statement;
        }
        let shared = &self.statements.shared;
        let session = &shared.session;
        let prepared = &self.statements.prepared;
        let execute = |put: &QueuedPut| {
            session.execute_unpaged(&prepared[put.statement].statement, puts.values(put))
        };
        if let [put] = puts.queued.as_slice() {
            execute(put).await.map_err(execution_error)?;
        } else if puts.one_partition() || puts.batch_size() < shared.batch_limit_bytes {
            let same = self
                .batched
                .iter()
                .copied()
                .eq(puts.queued.iter().map(|put| put.statement));
            if !same {
                self.batch.statements.clear();
                self.batched.clear();
                for put in &puts.queued {
                    self.batch
                        .append_statement(prepared[put.statement].statement.clone());
                    self.batched.push(put.statement);
                }
            }
            self.last_multi_put = MultiPut::Batch;
            session
                .batch(&self.batch, &*puts)
                .await
                .map_err(execution_error)?;
        } else {
            self.last_multi_put = MultiPut::Concurrent;
            for result in join_all(puts.queued.iter().map(execute)).await {
                result.map_err(execution_error)?;
            }
        }
        Ok(puts.queued.len() as u64)
    }
}

impl Statements {
    fn qualified(&self, table: &str) -> String {
        format!("{}.{}", ident(&self.shared.keyspace), ident(table))
    }

    async fn query(
        &self,
        text: impl Into<Statement>,
        values: impl SerializeRow,
    ) -> Result<QueryResult, DriverError> {
        self.shared
            .session
            .query_unpaged(text, values)
            .await
            .map_err(execution_error)
    }

    /// The partition key column of `table`, read from the schema at its
    /// first use.
    async fn key_column(&mut self, table: &str) -> Result<&str, DriverError> {
        if let Some(i) = self.key_columns.iter().position(|(t, _)| t == table) {
            return Ok(&self.key_columns[i].1);
        }
        let result = self
            .query(
                "SELECT column_name, kind FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
                (self.shared.keyspace.as_str(), table),
            )
            .await?;
        let rows = result.into_rows_result().map_err(unreadable)?;
        let mut key = None;
        for row in rows.rows::<(String, String)>().map_err(unreadable)? {
            let (column, kind) = row.map_err(unreadable)?;
            if kind == "partition_key" {
                key = Some(column);
            }
        }
        let key = key.ok_or_else(|| {
            DriverError::fatal(format!(
                "table {} does not exist (run prepare first)",
                self.qualified(table)
            ))
        })?;
        self.key_columns.push((table.to_string(), key));
        Ok(&self.key_columns.last().expect("just pushed").1)
    }

    /// The index of the statement doing `op` on `table`'s `columns`,
    /// prepared at its first use.
    async fn statement<'c>(
        &mut self,
        table: &str,
        op: Op,
        columns: impl ExactSizeIterator<Item = &'c [u8]> + Clone,
    ) -> Result<usize, DriverError> {
        let found = self.prepared.iter().position(|p| {
            p.op == op
                && p.table == table
                && p.columns.len() == columns.len()
                && p.columns.iter().map(Vec::as_slice).eq(columns.clone())
        });
        if let Some(i) = found {
            return Ok(i);
        }
        let columns: Vec<Vec<u8>> = columns.map(<[u8]>::to_vec).collect();
        let text = self.statement_text(table, op, &columns).await?;
        let mut statement = self
            .shared
            .session
            .prepare(text)
            .await
            .map_err(prepare_error)?;
        // A read of named columns decodes its rows with the metadata the
        // PREPARE returned, so the server leaves it out of every reply:
        // Cassandra sends it (keyspace, table and column names) by
        // default, and the client parses it per read. The columns named
        // cannot change under it (Cassandra refuses to change a column's
        // type); `SELECT *` can, when a column is added, so it keeps
        // asking.
        statement.set_use_cached_result_metadata(op == Op::Get && !columns.is_empty());
        self.prepared.push(Prepared {
            table: table.to_string(),
            op,
            columns,
            statement,
        });
        Ok(self.prepared.len() - 1)
    }

    async fn statement_text(
        &mut self,
        table: &str,
        op: Op,
        columns: &[Vec<u8>],
    ) -> Result<String, DriverError> {
        let qualified = self.qualified(table);
        let key = ident(self.key_column(table).await?);
        let mut names = Vec::with_capacity(columns.len());
        for column in columns {
            let name = std::str::from_utf8(column).map_err(|_| {
                DriverError::fatal("a CQL column's name (the qualifier) must be UTF-8")
            })?;
            names.push(ident(name));
        }
        let selected = if names.is_empty() {
            "*".to_string()
        } else {
            names.join(", ")
        };
        Ok(match op {
            Op::Put => format!(
                "INSERT INTO {qualified} ({key}, {}) VALUES (?{})",
                names.join(", "),
                ", ?".repeat(names.len())
            ),
            Op::Get => format!("SELECT {selected} FROM {qualified} WHERE {key} = ?"),
            Op::Scan(start) => {
                let from = match start {
                    StartKind::First => String::new(),
                    StartKind::At => format!(" WHERE token({key}) >= token(?)"),
                    StartKind::After => format!(" WHERE token({key}) > token(?)"),
                };
                format!("SELECT * FROM {qualified}{from} LIMIT ?")
            }
            Op::Delete => format!("DELETE FROM {qualified} WHERE {key} = ?"),
        })
    }

    /// The table's comment and caching, `None` when it does not exist.
    async fn table_options(
        &mut self,
        table: &str,
    ) -> Result<Option<(String, std::collections::HashMap<String, String>)>, DriverError> {
        let result = self
            .query(
                "SELECT comment, caching FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?",
                (self.shared.keyspace.as_str(), table),
            )
            .await?;
        let row = first_row::<(
            Option<String>,
            Option<std::collections::HashMap<String, String>>,
        )>(result)?;
        Ok(
            row.map(|(comment, caching)| {
                (comment.unwrap_or_default(), caching.unwrap_or_default())
            }),
        )
    }
}

impl WideConn for CqlConnection {
    fn refuses_skip_wal(&self) -> Option<&'static str> {
        Some(SKIP_WAL_REFUSED)
    }

    fn last_multi_put(&self) -> MultiPut {
        self.last_multi_put
    }

    fn queue_put(
        &mut self,
        table: &str,
        row: &[u8],
        _family: &str,
        cells: &[Cell<'_>],
        durability: Durability,
    ) {
        if self.puts.queued.is_empty() && self.puts.table != table {
            self.puts.table.clear();
            self.puts.table.push_str(table);
        }
        debug_assert_eq!(self.puts.table, table, "one table per flush");
        let first_span = self.puts.spans.len();
        for cell in cells {
            self.puts.push(cell.qualifier);
        }
        self.puts.push(row);
        for cell in cells {
            self.puts.push(cell.value);
        }
        self.puts.skip_wal |= durability == Durability::SkipWal;
        self.puts.queued.push(QueuedPut {
            first_span,
            cells: cells.len(),
            statement: 0,
        });
    }

    async fn flush_puts(&mut self) -> Result<u64, DriverError> {
        let result = self.send_puts().await;
        self.puts.clear();
        result
    }

    async fn get(
        &mut self,
        table: &str,
        row: &[u8],
        _family: &str,
        qualifiers: &[&[u8]],
        on_cell: &mut dyn FnMut(Cell<'_>),
    ) -> Result<bool, DriverError> {
        let i = self
            .statements
            .statement(table, Op::Get, qualifiers.iter().copied())
            .await?;
        let result = self
            .statements
            .shared
            .session
            .execute_unpaged(&self.statements.prepared[i].statement, (row,))
            .await
            .map_err(execution_error)?;
        let key = self.statements.key_column(table).await?;
        let rows = result.into_rows_result().map_err(unreadable)?;
        let mut found = false;
        for columns in rows.rows::<ColumnIterator>().map_err(unreadable)? {
            found = true;
            each_cell(columns.map_err(unreadable)?, key, &mut *on_cell)?;
        }
        Ok(found)
    }

    async fn scan(
        &mut self,
        scan: &Scan<'_>,
        on_row: &mut dyn FnMut(&[u8]),
    ) -> Result<ScanOutcome, DriverError> {
        let (kind, start) = match scan.start {
            ScanStart::First => (StartKind::First, None),
            ScanStart::At(row) => (StartKind::At, Some(row)),
            ScanStart::After(row) => (StartKind::After, Some(row)),
        };
        let i = self
            .statements
            .statement(scan.table, Op::Scan(kind), std::iter::empty())
            .await?;
        let key = self.statements.key_column(scan.table).await?.to_string();
        let statement = &mut self.statements.prepared[i].statement;
        statement.set_page_size(scan.caching.clamp(1, i32::MAX as u32) as i32);
        let limit = scan
            .limit
            .map_or(i32::MAX, |l| l.min(i32::MAX as u32) as i32);
        let statement = &self.statements.prepared[i].statement;
        let session = &self.statements.shared.session;
        let mut outcome = ScanOutcome::default();
        let mut take = |rows: QueryRowsResult| {
            for columns in rows.rows::<ColumnIterator>().map_err(unreadable)? {
                outcome.rows += 1;
                let mut cells = 0;
                let row = each_cell(columns.map_err(unreadable)?, &key, |_| cells += 1)?;
                outcome.cells += cells;
                on_row(row);
            }
            Ok(())
        };
        match start {
            Some(row) => each_page(session, statement, (row, limit), &mut take).await?,
            None => each_page(session, statement, (limit,), &mut take).await?,
        }
        Ok(outcome)
    }

    async fn delete(&mut self, table: &str, row: &[u8]) -> Result<(), DriverError> {
        let i = self
            .statements
            .statement(table, Op::Delete, std::iter::empty())
            .await?;
        self.statements
            .shared
            .session
            .execute_unpaged(&self.statements.prepared[i].statement, (row,))
            .await
            .map_err(execution_error)?;
        Ok(())
    }

    /// The keyspace first, if missing, marked with `spec.marker`.
    async fn create_table(&mut self, spec: &TableSpec<'_>) -> Result<(), DriverError> {
        self.ensure_keyspace(spec.marker).await?;
        let mut columns = format!("{} blob PRIMARY KEY", ident(spec.key_column));
        for qualifier in spec.qualifiers {
            let name = std::str::from_utf8(qualifier).map_err(|_| {
                DriverError::fatal("a CQL column's name (the qualifier) must be UTF-8")
            })?;
            columns.push_str(&format!(", {} blob", ident(name)));
        }
        self.statements
            .query(
                format!(
                    "CREATE TABLE {} ({columns}) WITH comment = {}",
                    self.statements.qualified(spec.table),
                    literal(spec.marker)
                ),
                (),
            )
            .await?;
        Ok(())
    }

    async fn namespace(&mut self) -> Result<Option<Namespace>, DriverError> {
        let shared = &self.statements.shared;
        let result = self
            .statements
            .query(
                "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?",
                (shared.keyspace.as_str(),),
            )
            .await?;
        if first_row::<(String,)>(result)?.is_none() {
            return Ok(None);
        }
        let result = self
            .statements
            .query(
                "SELECT table_name, comment FROM system_schema.tables WHERE keyspace_name = ?",
                (shared.keyspace.as_str(),),
            )
            .await?;
        let rows = result.into_rows_result().map_err(unreadable)?;
        let mut namespace = Namespace {
            name: shared.keyspace.clone(),
            marker: String::new(),
            objects: 0,
        };
        for row in rows
            .rows::<(String, Option<String>)>()
            .map_err(unreadable)?
        {
            let (table, comment) = row.map_err(unreadable)?;
            if table == KEYSPACE_MARKER_TABLE {
                namespace.marker = comment.unwrap_or_default();
            } else {
                namespace.objects += 1;
            }
        }
        // DROP KEYSPACE takes these with it too.
        for kind in ["views", "types", "functions", "aggregates"] {
            let result = self
                .statements
                .query(
                    format!(
                        "SELECT keyspace_name FROM system_schema.{kind} WHERE keyspace_name = ?"
                    ),
                    (shared.keyspace.as_str(),),
                )
                .await?;
            namespace.objects += result.into_rows_result().map_err(unreadable)?.rows_num() as u64;
        }
        Ok(Some(namespace))
    }

    async fn drop_namespace(&mut self) -> Result<(), DriverError> {
        self.statements
            .query(
                format!("DROP KEYSPACE {}", ident(&self.statements.shared.keyspace)),
                (),
            )
            .await?;
        self.statements.prepared.clear();
        self.statements.key_columns.clear();
        self.batch.statements.clear();
        self.batched.clear();
        Ok(())
    }

    async fn table_marker(&mut self, table: &str) -> Result<Option<String>, DriverError> {
        Ok(self
            .statements
            .table_options(table)
            .await?
            .map(|(comment, _)| comment))
    }

    async fn drop_table(&mut self, table: &str) -> Result<(), DriverError> {
        self.statements
            .query(
                format!("DROP TABLE {}", self.statements.qualified(table)),
                (),
            )
            .await?;
        // Indices into the prepared statements shift: the batch's go.
        self.statements.prepared.retain(|p| p.table != table);
        self.statements.key_columns.retain(|(t, _)| t != table);
        self.batch.statements.clear();
        self.batched.clear();
        Ok(())
    }

    async fn set_block_cache(
        &mut self,
        table: &str,
        _family: &str,
        on: bool,
    ) -> Result<BlockCacheChange, DriverError> {
        let (_, caching) = self.statements.table_options(table).await?.ok_or_else(|| {
            DriverError::fatal(format!(
                "table {} does not exist",
                self.statements.qualified(table)
            ))
        })?;
        let was_on = caching.get("keys").is_none_or(|keys| keys != "NONE");
        self.statements
            .query(
                format!(
                    "ALTER TABLE {} WITH caching = {{'keys': '{}', 'rows_per_partition': 'NONE'}}",
                    self.statements.qualified(table),
                    if on { "ALL" } else { "NONE" }
                ),
                (),
            )
            .await?;
        Ok(BlockCacheChange {
            was_on,
            setting: CACHING_SETTING,
        })
    }

    /// Read over token ranges at once, a page at a time: one `COUNT(*)`
    /// or unbounded `SELECT` makes a single node scan the whole table
    /// within one request, and Cassandra 4.1 failed it at 320,000 rows
    /// ("received 0 responses and 1 failures"). A key comes as the
    /// column's bytes, whatever its type.
    async fn each_key(
        &mut self,
        table: &str,
        on_key: &mut dyn FnMut(&[u8]),
    ) -> Result<u64, DriverError> {
        let key_column = self.statements.key_column(table).await?.to_string();
        let key = ident(&key_column);
        let mut statement = self
            .statements
            .shared
            .session
            .prepare(format!(
                "SELECT {key} FROM {} WHERE token({key}) >= ? AND token({key}) <= ?",
                self.statements.qualified(table)
            ))
            .await
            .map_err(prepare_error)?;
        statement.set_page_size(KEYS_PAGE_ROWS);
        statement.set_request_timeout(Some(KEYS_PAGE_TIMEOUT));
        let session = &self.statements.shared.session;
        let statement = &statement;
        // Pages of every range come in turn to one `on_key`; none holds
        // it across an await.
        let on_key = std::cell::RefCell::new(on_key);
        let (on_key, key_column) = (&on_key, key_column.as_str());
        let counts = join_all(token_ranges(KEY_RANGES).map(|(first, last)| async move {
            let mut rows = 0u64;
            each_page(session, statement, (first, last), |page| {
                let mut on_key = on_key.borrow_mut();
                for columns in page.rows::<ColumnIterator>().map_err(unreadable)? {
                    let key = each_cell(columns.map_err(unreadable)?, key_column, |_| {})?;
                    rows += 1;
                    on_key(key);
                }
                Ok(())
            })
            .await?;
            Ok::<_, DriverError>(rows)
        }))
        .await;
        counts.into_iter().sum()
    }

    async fn create_cql_table(
        &mut self,
        table: &str,
        columns: &str,
        marker: &str,
    ) -> Result<(), DriverError> {
        self.ensure_keyspace(marker).await?;
        self.statements
            .query(
                format!(
                    "CREATE TABLE {} {columns} WITH comment = {}",
                    self.statements.qualified(table),
                    literal(marker)
                ),
                (),
            )
            .await?;
        Ok(())
    }

    async fn prepare_cql(&mut self, text: &str) -> Result<usize, DriverError> {
        let shared = &self.statements.shared;
        if self.own.is_empty() {
            shared
                .session
                .use_keyspace(shared.keyspace.as_str(), true)
                .await
                .map_err(|e| {
                    DriverError::fatal(one_line(format!(
                        "keyspace {}: {e} (run prepare first)",
                        shared.keyspace
                    )))
                })?;
        }
        let statement = shared.session.prepare(text).await.map_err(prepare_error)?;
        self.own.push(statement);
        Ok(self.own.len() - 1)
    }

    async fn execute_cql(
        &mut self,
        statement: usize,
        values: &[CqlValue<'_>],
    ) -> Result<u64, DriverError> {
        let result = self
            .statements
            .shared
            .session
            .execute_unpaged(&self.own[statement], Bound(values))
            .await
            .map_err(execution_error)?;
        if !result.is_rows() {
            return Ok(0);
        }
        let rows = result.into_rows_result().map_err(unreadable)?;
        Ok(rows.rows_num() as u64)
    }
}

/// The user's values, each written as its marker's column type wants.
struct Bound<'a>(&'a [CqlValue<'a>]);

impl SerializeRow for Bound<'_> {
    fn serialize(
        &self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter,
    ) -> Result<(), SerializationError> {
        let columns = ctx.columns();
        if columns.len() != self.0.len() {
            return Err(SerializationError::new(BindError(format!(
                "the statement has {} markers, the op binds {} values",
                columns.len(),
                self.0.len()
            ))));
        }
        for (value, column) in self.0.iter().zip(columns) {
            let mut number = [0; 8];
            let bytes = cell_bytes(column.typ(), value, &mut number).map_err(|e| {
                SerializationError::new(BindError(format!("column {}: {e}", column.name())))
            })?;
            writer
                .make_cell_writer()
                .set_value(bytes)
                .map_err(SerializationError::new)?;
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `value` serialized for a column of type `typ`: text and blobs as
/// their bytes, numbers big-endian in `number`.
fn cell_bytes<'v>(
    typ: &ColumnType<'_>,
    value: &CqlValue<'v>,
    number: &'v mut [u8; 8],
) -> Result<&'v [u8], String> {
    let ColumnType::Native(native) = typ else {
        return Err(format!("a script binds no {typ:?}"));
    };
    let integer = || -> Result<i64, String> {
        match value.number {
            Some(n) => Ok(n),
            None => std::str::from_utf8(value.text)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .ok_or_else(|| {
                    format!("'{}' is not a number", String::from_utf8_lossy(value.text))
                }),
        }
    };
    let real = || -> Result<f64, String> {
        std::str::from_utf8(value.text)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| format!("'{}' is not a number", String::from_utf8_lossy(value.text)))
    };
    let narrow = |n: i64, bytes: usize| -> Result<usize, String> {
        let bits = bytes as u32 * 8;
        let (min, max) = (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1);
        if !(min..=max).contains(&n) {
            return Err(format!("{n} does not fit in {bytes} bytes"));
        }
        Ok(bytes)
    };
    let width = match native {
        NativeType::Text | NativeType::Ascii | NativeType::Blob => return Ok(value.text),
        NativeType::BigInt | NativeType::Counter | NativeType::Timestamp => {
            number.copy_from_slice(&integer()?.to_be_bytes());
            8
        }
        NativeType::Int | NativeType::SmallInt | NativeType::TinyInt => {
            let n = integer()?;
            let bytes = match native {
                NativeType::Int => 4,
                NativeType::SmallInt => 2,
                _ => 1,
            };
            let bytes = narrow(n, bytes)?;
            number[..bytes].copy_from_slice(&n.to_be_bytes()[8 - bytes..]);
            bytes
        }
        NativeType::Boolean => {
            let on = match value.number {
                Some(n) => n != 0,
                None => value.text.eq_ignore_ascii_case(b"true"),
            };
            number[0] = u8::from(on);
            1
        }
        NativeType::Double => {
            number.copy_from_slice(&real()?.to_be_bytes());
            8
        }
        NativeType::Float => {
            number[..4].copy_from_slice(&(real()? as f32).to_be_bytes());
            4
        }
        other => {
            return Err(format!(
                "a script binds text, ascii, blob, bigint, int, smallint, tinyint, counter, timestamp, boolean, double and float, not {other:?}"
            ))
        }
    };
    let number: &'v [u8; 8] = number;
    Ok(&number[..width])
}

/// Why a value could not be bound.
#[derive(Debug)]
struct BindError(String);

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BindError {}

/// Gives each non-null column of a row but its `key` column to `on_cell`;
/// returns the key's bytes.
fn each_cell<'f>(
    columns: ColumnIterator<'f, 'f>,
    key: &str,
    mut on_cell: impl FnMut(Cell<'f>),
) -> Result<&'f [u8], DriverError> {
    let mut row: &[u8] = &[];
    for column in columns {
        let column = column.map_err(unreadable)?;
        let Some(value) = column.slice else { continue };
        let name = column.spec.name();
        if name == key {
            row = value.as_slice();
        } else {
            on_cell(Cell {
                qualifier: name.as_bytes(),
                value: value.as_slice(),
            });
        }
    }
    Ok(row)
}

/// Runs `statement` with `values` a page at a time (of its page size),
/// handing each page's rows to `on_page`.
async fn each_page(
    session: &Session,
    statement: &PreparedStatement,
    values: impl SerializeRow,
    mut on_page: impl FnMut(QueryRowsResult) -> Result<(), DriverError>,
) -> Result<(), DriverError> {
    let mut paging = PagingState::start();
    loop {
        let (result, next) = session
            .execute_single_page(statement, &values, paging)
            .await
            .map_err(execution_error)?;
        on_page(result.into_rows_result().map_err(unreadable)?)?;
        match next {
            PagingStateResponse::HasMorePages { state } => paging = state,
            PagingStateResponse::NoMorePages => return Ok(()),
        }
    }
}

fn first_row<R>(result: QueryResult) -> Result<Option<R>, DriverError>
where
    R: for<'f> scylla::deserialize::row::DeserializeRow<'f, 'f> + 'static,
{
    let rows = result.into_rows_result().map_err(unreadable)?;
    rows.maybe_first_row::<R>().map_err(unreadable)
}

fn unreadable(e: impl std::fmt::Display) -> DriverError {
    DriverError::fatal(format!("unreadable CQL response: {e}"))
}

/// The Murmur3 ring, `[i64::MIN, i64::MAX]`, cut into `parts` inclusive
/// ranges that cover it.
fn token_ranges(parts: u32) -> impl Iterator<Item = (i64, i64)> {
    let span = (i64::MAX as i128 - i64::MIN as i128 + 1) / parts as i128;
    (0..parts as i128).map(move |k| {
        let first = i64::MIN as i128 + k * span;
        let last = if k + 1 == parts as i128 {
            i64::MAX as i128
        } else {
            first + span - 1
        };
        (first as i64, last as i64)
    })
}

#[cfg(test)]
mod tests {
    use super::token_ranges;

    #[test]
    fn token_ranges_cover_the_ring_once() {
        for parts in [1, 3, 16] {
            let ranges: Vec<_> = token_ranges(parts).collect();
            assert_eq!(ranges.len(), parts as usize);
            assert_eq!(ranges[0].0, i64::MIN);
            assert_eq!(ranges.last().unwrap().1, i64::MAX);
            for pair in ranges.windows(2) {
                assert!(pair[0].0 <= pair[0].1);
                assert_eq!(pair[0].1 + 1, pair[1].0, "{ranges:?}");
            }
        }
    }
}
