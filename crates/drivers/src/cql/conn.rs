//! One loadcell session's side of the shared CQL session: its prepared
//! statements, each prepared once at its first use, and the buffer its
//! queued puts are copied into.
//!
//! A multi-put is sent as N concurrent prepared INSERTs, each routed to
//! its row's replica (token-aware), not as a batch: an unlogged batch of
//! rows in different partitions goes to one coordinator, which forwards
//! every row to its replica itself, and Cassandra refuses batches over
//! `batch_size_fail_threshold` (50 KiB by default: 100 rows of 1 KB is
//! twice that). docs/BENCHMARKS.md has the two measured side by side.
//!
//! What loadcell allocates per operation is nothing once warm: values are
//! serialized straight from the connection's buffer ([`Blobs`]) and read
//! back as slices of the response frame (`ColumnIterator`). The `scylla`
//! crate allocates inside each request (its frame, its response), and a
//! multi-put's join holds its N futures in one vector.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use loadcell_core::wide::{
    BlockCacheChange, Cell, Durability, Scan, ScanOutcome, ScanStart, TableSpec, WideConn,
};
use loadcell_core::DriverError;
use scylla::deserialize::row::ColumnIterator;
use scylla::errors::SerializationError;
use scylla::response::query_result::QueryResult;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::serialize::row::{RowSerializationContext, SerializeRow};
use scylla::serialize::writers::RowWriter;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Statement;

use super::{execution_error, ident, literal, prepare_error, Shared};

/// Why a CQL put cannot skip the write-ahead log.
pub const SKIP_WAL_REFUSED: &str = "Cassandra has no per-write WAL skip: every write goes to its commit log (durable_writes is a whole keyspace's setting)";

/// What Cassandra changes for `set_block_cache`.
const CACHING_SETTING: &str = "the table's caching (keys and rows_per_partition), the nearest thing Cassandra has to HBase's block cache; the OS page cache still holds the SSTables";

/// How long the server may take to count a table's rows.
const COUNT_TIMEOUT: Duration = Duration::from_secs(300);

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

#[derive(Debug)]
pub struct CqlConnection {
    statements: Statements,
    puts: Puts,
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
        }
    }

    pub(super) async fn release_version(&mut self) -> Result<String, DriverError> {
        let result = self
            .statements
            .query("SELECT release_version FROM system.local", ())
            .await?;
        let version = first_row::<(String,)>(result)?;
        Ok(version.map(|(v,)| v).unwrap_or_default())
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
        let session = &self.statements.shared.session;
        let prepared = &self.statements.prepared;
        let execute = |put: &QueuedPut| {
            session.execute_unpaged(&prepared[put.statement].statement, puts.values(put))
        };
        if let [put] = puts.queued.as_slice() {
            execute(put).await.map_err(execution_error)?;
        } else {
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
        let statement = self
            .shared
            .session
            .prepare(text)
            .await
            .map_err(prepare_error)?;
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
        let mut paging = PagingState::start();
        loop {
            let page = match start {
                Some(row) => {
                    session
                        .execute_single_page(statement, (row, limit), paging)
                        .await
                }
                None => {
                    session
                        .execute_single_page(statement, (limit,), paging)
                        .await
                }
            };
            let (result, next) = page.map_err(execution_error)?;
            let rows = result.into_rows_result().map_err(unreadable)?;
            for columns in rows.rows::<ColumnIterator>().map_err(unreadable)? {
                outcome.rows += 1;
                let mut cells = 0;
                let row = each_cell(columns.map_err(unreadable)?, &key, |_| cells += 1)?;
                outcome.cells += cells;
                on_row(row);
            }
            match next {
                PagingStateResponse::HasMorePages { state } => paging = state,
                PagingStateResponse::NoMorePages => return Ok(outcome),
            }
        }
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

    async fn create_table(&mut self, spec: &TableSpec<'_>) -> Result<(), DriverError> {
        self.statements.query(
            format!(
                "CREATE KEYSPACE IF NOT EXISTS {} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {}}}",
                ident(&self.statements.shared.keyspace),
                self.statements.shared.replication_factor
            ),
            (),
        )
        .await?;
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
        self.statements.prepared.retain(|p| p.table != table);
        self.statements.key_columns.retain(|(t, _)| t != table);
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

    async fn count_rows(&mut self, table: &str) -> Result<u64, DriverError> {
        let mut count = Statement::new(format!(
            "SELECT COUNT(*) FROM {}",
            self.statements.qualified(table)
        ));
        count.set_request_timeout(Some(COUNT_TIMEOUT));
        let result = self.statements.query(count, ()).await?;
        let count = first_row::<(i64,)>(result)?.map_or(0, |(n,)| n);
        Ok(count.max(0) as u64)
    }
}

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
