//! The subset of HBase's Thrift2 `THBaseService` the wide-column workloads
//! use: each call's arguments encoded into the connection's write buffer,
//! each reply's result read in place. Field ids are the IDL's
//! (`org/apache/hadoop/hbase/thrift2/hbase.thrift` in the hbase-thrift jar).

use loadcell_core::wide::{Cell, Durability, ScanStart};
use loadcell_core::DriverError;

use super::thrift::{self, ty, Malformed, Reader, Writer};

/// The table descriptor attribute that carries loadcell's marker.
pub(crate) const MARKER_KEY: &[u8] = b"loadcell.marker";

/// `TDurability.SKIP_WAL`.
const SKIP_WAL: i32 = 1;
/// `TColumnFamilyDescriptor.blockCacheEnabled`.
const BLOCK_CACHE_FIELD: i16 = 14;
/// `TThriftServerType.TWO`.
pub(crate) const THRIFT_SERVER_TWO: i32 = 2;

/// A `TTableName` in the default namespace, as argument `id`.
pub(crate) fn table_name_arg(w: &mut Writer, id: i16, table: &str) {
    w.field(ty::STRUCT, id);
    w.binary_field(2, table.as_bytes());
    w.stop();
}

/// A `TPut` (list element, so without a field header) of `cells` into
/// `row`'s `family`. The default durability is left to the table's
/// (the WAL).
pub(crate) fn tput(
    w: &mut Writer,
    row: &[u8],
    family: &str,
    cells: &[Cell<'_>],
    durability: Durability,
) {
    w.binary_field(1, row);
    w.field(ty::LIST, 2);
    w.list(ty::STRUCT, cells.len());
    for cell in cells {
        w.binary_field(1, family.as_bytes());
        w.binary_field(2, cell.qualifier);
        w.binary_field(3, cell.value);
        w.stop();
    }
    if durability == Durability::SkipWal {
        w.i32_field(6, SKIP_WAL);
    }
    w.stop();
}

/// `get(table, TGet{row, columns})`: the whole family when `qualifiers`
/// is empty.
pub(crate) fn get(
    w: &mut Writer,
    seq: i32,
    table: &str,
    row: &[u8],
    family: &str,
    qualifiers: &[&[u8]],
) {
    w.call("get", seq);
    w.binary_field(1, table.as_bytes());
    w.field(ty::STRUCT, 2);
    w.binary_field(1, row);
    w.field(ty::LIST, 2);
    w.list(ty::STRUCT, qualifiers.len().max(1));
    if qualifiers.is_empty() {
        w.binary_field(1, family.as_bytes());
        w.stop();
    }
    for q in qualifiers {
        w.binary_field(1, family.as_bytes());
        w.binary_field(2, q);
        w.stop();
    }
    w.stop();
    w.stop();
}

/// What a `TScan` asks beyond its table.
pub(crate) struct ScanArgs<'a> {
    /// The family to read; every family when `None`.
    pub family: Option<&'a str>,
    pub start: ScanStart<'a>,
    pub stop_row: Option<&'a [u8]>,
    pub limit: Option<u32>,
    pub caching: u32,
    /// A filter in HBase's filter language (row counting asks for the
    /// first key of each row only).
    pub filter: Option<&'a str>,
}

/// A `TScan` as argument `id`.
fn tscan(w: &mut Writer, id: i16, scan: &ScanArgs<'_>) {
    w.field(ty::STRUCT, id);
    match scan.start {
        ScanStart::First => {}
        ScanStart::At(row) => w.binary_field(1, row),
        // The smallest key after `row`: `row` and a zero byte.
        ScanStart::After(row) => {
            w.field(ty::STRING, 1);
            w.i32(row.len() as i32 + 1);
            w.0.extend_from_slice(row);
            w.0.push(0);
        }
    }
    if let Some(stop) = scan.stop_row {
        w.binary_field(2, stop);
    }
    if let Some(family) = scan.family {
        w.field(ty::LIST, 3);
        w.list(ty::STRUCT, 1);
        w.binary_field(1, family.as_bytes());
        w.stop();
    }
    w.i32_field(4, scan.caching.max(1) as i32);
    if let Some(filter) = scan.filter {
        w.binary_field(7, filter.as_bytes());
    }
    if let Some(limit) = scan.limit {
        w.i32_field(15, limit as i32);
    }
    w.stop();
}

/// `getScannerResults(table, scan, numRows)`: a scan of at most `numRows`
/// rows in one round trip (the gateway opens, reads and closes it).
pub(crate) fn get_scanner_results(
    w: &mut Writer,
    seq: i32,
    table: &str,
    scan: &ScanArgs<'_>,
    rows: u32,
) {
    w.call("getScannerResults", seq);
    w.binary_field(1, table.as_bytes());
    tscan(w, 2, scan);
    w.i32_field(3, rows as i32);
    w.stop();
}

pub(crate) fn open_scanner(w: &mut Writer, seq: i32, table: &str, scan: &ScanArgs<'_>) {
    w.call("openScanner", seq);
    w.binary_field(1, table.as_bytes());
    tscan(w, 2, scan);
    w.stop();
}

pub(crate) fn get_scanner_rows(w: &mut Writer, seq: i32, scanner: i32, rows: u32) {
    w.call("getScannerRows", seq);
    w.i32_field(1, scanner);
    w.i32_field(2, rows as i32);
    w.stop();
}

pub(crate) fn close_scanner(w: &mut Writer, seq: i32, scanner: i32) {
    w.call("closeScanner", seq);
    w.i32_field(1, scanner);
    w.stop();
}

/// `deleteSingle(table, TDelete{row})`: every cell of the row.
pub(crate) fn delete_row(w: &mut Writer, seq: i32, table: &str, row: &[u8]) {
    w.call("deleteSingle", seq);
    w.binary_field(1, table.as_bytes());
    w.field(ty::STRUCT, 2);
    w.binary_field(1, row);
    w.stop();
    w.stop();
}

/// `createTable(TTableDescriptor, splitKeys)`: one family with the
/// defaults, the marker (if any) as a table attribute.
pub(crate) fn create_table(
    w: &mut Writer,
    seq: i32,
    table: &str,
    family: &str,
    marker: &str,
    split_keys: &[&[u8]],
) {
    w.call("createTable", seq);
    w.field(ty::STRUCT, 1);
    table_name_arg(w, 1, table);
    w.field(ty::LIST, 2);
    w.list(ty::STRUCT, 1);
    w.binary_field(1, family.as_bytes());
    w.stop();
    if !marker.is_empty() {
        w.field(ty::MAP, 3);
        w.map(ty::STRING, ty::STRING, 1);
        w.binary(MARKER_KEY);
        w.binary(marker.as_bytes());
    }
    w.stop();
    if !split_keys.is_empty() {
        w.field(ty::LIST, 2);
        w.list(ty::STRING, split_keys.len());
        for key in split_keys {
            w.binary(key);
        }
    }
    w.stop();
}

/// A call whose only argument is the table's `TTableName`:
/// `tableExists`, `getTableDescriptor`, `disableTable`, `deleteTable`.
pub(crate) fn on_table(w: &mut Writer, seq: i32, method: &str, table: &str) {
    w.call(method, seq);
    table_name_arg(w, 1, table);
    w.stop();
}

/// `modifyColumnFamily(table, descriptor)` with `descriptor` the family's
/// current one (its encoded fields, as `getTableDescriptor` returned them)
/// with the block cache set to `on`: every other setting is kept.
pub(crate) fn modify_block_cache(
    w: &mut Writer,
    seq: i32,
    table: &str,
    descriptor: &[u8],
    on: bool,
) -> Result<(), Malformed> {
    w.call("modifyColumnFamily", seq);
    table_name_arg(w, 1, table);
    w.field(ty::STRUCT, 2);
    let mut r = Reader::new(descriptor);
    loop {
        let from = r.position();
        let Some((field_ty, id)) = r.field()? else {
            break;
        };
        r.skip(field_ty)?;
        if id != BLOCK_CACHE_FIELD {
            w.0.extend_from_slice(&descriptor[from..r.position()]);
        }
    }
    w.bool_field(BLOCK_CACHE_FIELD, on);
    w.stop();
    w.stop();
    Ok(())
}

pub(crate) fn get_thrift_server_type(w: &mut Writer, seq: i32) {
    w.call("getThriftServerType", seq);
    w.stop();
}

// ---------------------------------------------------------------------------
// Replies

/// A reply's outcome: the success value's type and a reader at it, `None`
/// for a void call, or the exception the call threw.
pub(crate) fn outcome<'a>(
    reply: &'a [u8],
    endpoint: &str,
) -> Result<Option<(u8, Reader<'a>)>, DriverError> {
    let bad = |m: Malformed| malformed(m, endpoint);
    let mut r = Reader::new(reply);
    let (kind, method, _) = r.message().map_err(bad)?;
    if kind == thrift::EXCEPTION {
        let message = string_field(&mut r, 1).map_err(bad)?;
        return Err(DriverError::fatal(format!(
            "the HBase Thrift2 gateway at {endpoint} refused `{}`: {message}",
            String::from_utf8_lossy(method)
        )));
    }
    if kind != thrift::REPLY {
        return Err(bad(Malformed::Bad("not a reply")));
    }
    while let Some((field_ty, id)) = r.field().map_err(bad)? {
        match id {
            0 => return Ok(Some((field_ty, r))),
            // TIOError {1: message, 2: canRetry}, TIllegalArgument {1: message}
            1 | 2 => return Err(thrown(&mut r, id == 1).map_err(bad)?),
            _ => r.skip(field_ty).map_err(bad)?,
        }
    }
    Ok(None)
}

/// The reply's success value, for calls that return one.
pub(crate) fn value<'a>(reply: &'a [u8], endpoint: &str) -> Result<(u8, Reader<'a>), DriverError> {
    outcome(reply, endpoint)?.ok_or_else(|| malformed(Malformed::Bad("no result"), endpoint))
}

/// A thrown `TIOError` (`io`) or `TIllegalArgument`: retryable when
/// the gateway says a retry may succeed.
fn thrown(r: &mut Reader, io: bool) -> Result<DriverError, Malformed> {
    let mut message = "";
    let mut can_retry = false;
    while let Some((field_ty, id)) = r.field()? {
        match (field_ty, id) {
            (ty::STRING, 1) => message = std::str::from_utf8(r.binary()?).unwrap_or("(not UTF-8)"),
            (ty::BOOL, 2) => can_retry = r.bool()?,
            _ => r.skip(field_ty)?,
        }
    }
    // The gateway's message is a Java exception's, often a stack's first
    // lines: one line is enough.
    let line = message.lines().next().unwrap_or("").trim();
    let text = if io {
        format!("HBase: {line}")
    } else {
        format!("HBase refused an argument: {line}")
    };
    Ok(if can_retry {
        DriverError::retryable(text)
    } else {
        DriverError::fatal(text)
    })
}

/// The string field `id` of the struct at `r`, empty when absent.
fn string_field<'a>(r: &mut Reader<'a>, id: i16) -> Result<String, Malformed> {
    let mut out = String::new();
    while let Some((field_ty, field)) = r.field()? {
        if field_ty == ty::STRING && field == id {
            out = String::from_utf8_lossy(r.binary()?).into_owned();
        } else {
            r.skip(field_ty)?;
        }
    }
    Ok(out)
}

pub(crate) fn malformed(m: Malformed, endpoint: &str) -> DriverError {
    let why = match m {
        Malformed::Short => "a reply ended early",
        Malformed::Bad(why) => why,
    };
    DriverError::connection(format!(
        "{endpoint} did not answer as an HBase Thrift2 gateway (binary protocol, buffered transport): {why}"
    ))
}

/// Expects a value of type `want` from a reply.
pub(crate) fn expect(got: u8, want: u8) -> Result<(), Malformed> {
    if got == want {
        Ok(())
    } else {
        Err(Malformed::Bad("a result of an unexpected type"))
    }
}

/// Calls `on_cell` with each cell of the `TResult` at `r`; its row key
/// (`None` for a row not found) and its number of cells.
pub(crate) fn tresult<'a>(
    r: &mut Reader<'a>,
    on_cell: &mut dyn FnMut(Cell<'a>),
) -> Result<(Option<&'a [u8]>, u64), Malformed> {
    let mut row = None;
    let mut cells = 0;
    while let Some((field_ty, id)) = r.field()? {
        match (field_ty, id) {
            (ty::STRING, 1) => row = Some(r.binary()?),
            (ty::LIST, 2) => {
                let (element, n) = r.list()?;
                expect(element, ty::STRUCT)?;
                for _ in 0..n {
                    on_cell(column_value(r)?);
                }
                cells += n as u64;
            }
            _ => r.skip(field_ty)?,
        }
    }
    Ok((row, cells))
}

/// A `TColumnValue`'s qualifier and value.
fn column_value<'a>(r: &mut Reader<'a>) -> Result<Cell<'a>, Malformed> {
    let mut cell = Cell {
        qualifier: &[],
        value: &[],
    };
    while let Some((field_ty, id)) = r.field()? {
        match (field_ty, id) {
            (ty::STRING, 2) => cell.qualifier = r.binary()?,
            (ty::STRING, 3) => cell.value = r.binary()?,
            _ => r.skip(field_ty)?,
        }
    }
    Ok(cell)
}

/// The rows and cells of a `list<TResult>` at `r`, each row's key to
/// `on_row`.
pub(crate) fn tresults(
    r: &mut Reader,
    on_row: &mut dyn FnMut(&[u8]),
) -> Result<(u64, u64), Malformed> {
    let (element, n) = r.list()?;
    expect(element, ty::STRUCT)?;
    let mut cells = 0;
    for _ in 0..n {
        let (row, row_cells) = tresult(r, &mut |_| {})?;
        on_row(row.unwrap_or_default());
        cells += row_cells;
    }
    Ok((n as u64, cells))
}

/// From a `TTableDescriptor` at `r`: the marker attribute's value (empty
/// when there is none) and the encoded fields of `family`'s descriptor.
pub(crate) fn table_descriptor<'a>(
    r: &mut Reader<'a>,
    family: &[u8],
    reply: &'a [u8],
) -> Result<(&'a [u8], Option<&'a [u8]>), Malformed> {
    let mut marker: &[u8] = &[];
    let mut family_descriptor = None;
    while let Some((field_ty, id)) = r.field()? {
        match (field_ty, id) {
            (ty::LIST, 2) => {
                let (element, n) = r.list()?;
                expect(element, ty::STRUCT)?;
                for _ in 0..n {
                    let from = r.position();
                    let name = struct_binary_field(r, 1)?;
                    if name == Some(family) {
                        family_descriptor = Some(&reply[from..r.position()]);
                    }
                }
            }
            (ty::MAP, 3) => {
                let (key, value, n) = (r.u8()?, r.u8()?, r.i32()?);
                expect(key, ty::STRING)?;
                expect(value, ty::STRING)?;
                for _ in 0..n {
                    let (k, v) = (r.binary()?, r.binary()?);
                    if k == MARKER_KEY {
                        marker = v;
                    }
                }
            }
            _ => r.skip(field_ty)?,
        }
    }
    Ok((marker, family_descriptor))
}

/// The binary field `id` of the struct at `r`, read to its end.
fn struct_binary_field<'a>(r: &mut Reader<'a>, id: i16) -> Result<Option<&'a [u8]>, Malformed> {
    let mut found = None;
    while let Some((field_ty, field)) = r.field()? {
        if field_ty == ty::STRING && field == id {
            found = Some(r.binary()?);
        } else {
            r.skip(field_ty)?;
        }
    }
    Ok(found)
}

/// Whether the block cache is on in a family descriptor's encoded
/// fields; HBase's default, on, when the field is absent.
pub(crate) fn block_cache_on(descriptor: &[u8]) -> Result<bool, Malformed> {
    let mut r = Reader::new(descriptor);
    let mut on = true;
    while let Some((field_ty, id)) = r.field()? {
        if field_ty == ty::BOOL && id == BLOCK_CACHE_FIELD {
            on = r.bool()?;
        } else {
            r.skip(field_ty)?;
        }
    }
    Ok(on)
}
