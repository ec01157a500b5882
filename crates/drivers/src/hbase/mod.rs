//! HBase through its Thrift2 gateway (`hbase thrift2`, `THBaseService`):
//! no native HBase client exists outside the JVM, so every result says
//! "via Thrift2 gateway" — each operation takes a hop through it.
//!
//! Target: `hbase+thrift://host:port` (default port 9090), the binary
//! protocol over the gateway's default buffered transport (no frame
//! length, no compact protocol, no HTTP).
//!
//! The protocol is loadcell's own ([`thrift`]) on the async stream the
//! other network drivers use, not the `thrift` crate: that crate's client
//! does blocking std I/O, so on a worker thread one session waiting for
//! the gateway would stall every other session of that thread, and its
//! generated structs own their bytes (a `Vec` per row, qualifier and
//! value, per operation). Here a request is encoded into a reused buffer
//! and a reply read in place from the reused read buffer: cells handed to
//! the caller borrow it, and the hot path allocates nothing after the
//! first operations.
//!
//! Puts queued before a flush go out as one `put` (one row) or one
//! `putMultiple` (several), `SKIP_WAL` set per put when asked. A scan of
//! at most `caching` rows is one `getScannerResults` round trip; a longer
//! or unlimited one opens a scanner and fetches `caching` rows per
//! `getScannerRows`. The marker is a table descriptor attribute,
//! `loadcell.marker`; the block cache is the family's `BLOCKCACHE`,
//! changed with every other setting of the family kept.
//!
//! The gateway has no call that says HBase's version, nor counters: with
//! `?master_info=HOST:PORT` (the master's web UI) the server info has the
//! version from it and the server counters come from its `/jmx`
//! ([`master`]); without, the version is "unknown" and there are none.

mod calls;
mod master;
mod thrift;

use std::io;
use std::sync::Arc;

use loadcell_core::kv::KvCapabilities;
use loadcell_core::wide::{
    BlockCacheChange, Cell, Durability, MultiPut, Namespace, Scan, ScanOutcome, TableSpec, WideConn,
};
use loadcell_core::{Driver, DriverError, ServerInfo, Target};

use crate::transport::io_error::{connect_error, lost_error};
use crate::transport::peer::{self, Awaiting, Progress};
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::{connect_tcp, Stream};
use crate::transport::target_url::{Query, UrlParts};
use crate::transport::url_text;
use crate::{DriverInfo, Family};
use calls::ScanArgs;
use master::MasterInfo;
use thrift::{ty, Malformed, Reader, Writer};

pub const INFO: DriverInfo = DriverInfo {
    name: "hbase",
    schemes: &["hbase+thrift"],
    family: Family::WIDE_COLUMN,
    url_form: "hbase+thrift://host:port[?master_info=HOST:PORT]",
    about: "HBase via its Thrift2 gateway (binary protocol, buffered transport)",
    kv: KvCapabilities::NONE,
    blocking: false,
};

const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_PORT: u16 = 9090;
const SYSTEM: &str = "HBase Thrift2";

/// Initial sizes of a connection's buffers; they grow to the largest
/// request and reply seen (a batch of puts, a page of a scan) and stay.
const READ_BUF: usize = 64 * 1024;
const WRITE_BUF: usize = 16 * 1024;

/// Rows per round trip when walking a table's keys.
const KEYS_CACHING: u32 = 1000;
/// The filter that makes a walk over keys read one key per row, no value.
const KEYS_ONLY: &str = "FirstKeyOnlyFilter() AND KeyOnlyFilter()";

// ---------------------------------------------------------------------------
// Target

/// The gateway's host and port, and the master's web UI if named.
#[derive(Debug)]
struct Settings {
    host: String,
    port: u16,
    master_info: Option<MasterInfo>,
}

/// The settings; every error ends with the URL's form.
fn parse_target(target: &Target) -> Result<Settings, String> {
    let parse = || {
        let mut query = Query::parse(target.url(), &["master_info"])?;
        let master_info = query.take_parsed("master_info", MasterInfo::parse)?;
        let parts = UrlParts::parse(target, DEFAULT_PORT)?;
        parts.no_credentials("the Thrift2 gateway takes no user or password here")?;
        parts.no_path("the table is the workload's option, not the path")?;
        let (host, port) = parts.one_host(DEFAULT_HOST)?;
        Ok(Settings {
            host,
            port,
            master_info,
        })
    };
    parse().map_err(|e: String| format!("{e} (use {})", INFO.url_form))
}

// ---------------------------------------------------------------------------
// Driver

#[derive(Debug)]
pub struct HbaseDriver {
    host: String,
    port: u16,
    endpoint: Arc<str>,
    master_info: Option<MasterInfo>,
}

impl HbaseDriver {
    /// Parses the target; makes no connection.
    pub fn from_target(target: &Target) -> Result<HbaseDriver, String> {
        let s = parse_target(target)?;
        Ok(HbaseDriver {
            endpoint: url_text::endpoint(&s.host, s.port).into(),
            host: s.host,
            port: s.port,
            master_info: s.master_info,
        })
    }

    /// A connection whose gateway has said it is a Thrift2 one.
    async fn open(&self, progress: &Progress) -> Result<HbaseConn, DriverError> {
        let tcp = connect_tcp(&self.host, self.port)
            .await
            .map_err(|e| connect_error(&e, &self.endpoint))?;
        let mut conn = HbaseConn {
            link: Link {
                stream: Stream::plain(tcp),
                rbuf: ReadBuffer::with_capacity(READ_BUF),
                endpoint: self.endpoint.clone(),
                busy: false,
                replied: false,
            },
            next: NextRequest {
                buf: Vec::with_capacity(WRITE_BUF),
                seq: 0,
            },
            puts: PutQueue::default(),
        };
        progress.set(Awaiting::First("Thrift reply to getThriftServerType"));
        conn.check_thrift2().await?;
        Ok(conn)
    }
}

impl Driver for HbaseDriver {
    type Conn = HbaseConn;

    fn endpoint(&self) -> String {
        self.endpoint.to_string()
    }

    async fn connect(&self) -> Result<HbaseConn, DriverError> {
        self.open(&Progress::new()).await
    }

    async fn connect_within(&self, timeout: std::time::Duration) -> Result<HbaseConn, DriverError> {
        let progress = Progress::new();
        peer::within(
            timeout,
            &self.endpoint,
            SYSTEM,
            &progress,
            self.open(&progress),
        )
        .await
    }

    /// HBase's version from the master's web UI when the target names it:
    /// the gateway has no call that says it.
    async fn server_info(&self, _conn: &mut HbaseConn) -> Result<ServerInfo, DriverError> {
        let version = match &self.master_info {
            Some(master) => master.version().await?,
            None => "version unknown".to_string(),
        };
        Ok(ServerInfo::new(
            "HBase",
            format!("{version} via Thrift2 gateway"),
        ))
    }

    /// The master's `/jmx` counters (see [`master`]) when the target names
    /// its web UI; none otherwise.
    async fn server_counters(
        &self,
        _conn: &mut HbaseConn,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        match &self.master_info {
            Some(master) => master.counters().await,
            None => Ok(Vec::new()),
        }
    }
}

// ---------------------------------------------------------------------------
// Connection

/// The socket and what came back on it.
struct Link {
    stream: Stream,
    rbuf: ReadBuffer,
    endpoint: Arc<str>,
    /// Set while a call is under way: if its future is dropped half-way,
    /// its reply may still come and would answer the next call.
    busy: bool,
    /// Whether a reply has come: until then bytes may be waiting unread
    /// (a server that speaks first is not a gateway), so the socket's
    /// readiness must not be forgotten.
    replied: bool,
}

impl Link {
    /// Sends `request` and reads until its whole reply has arrived; the
    /// reply's length at the start of the unread bytes, to be read with
    /// [`Link::reply`] and then [`Link::consume`]d.
    async fn call(&mut self, request: &[u8]) -> Result<usize, DriverError> {
        if self.busy {
            return Err(DriverError::connection(format!(
                "connection to {} lost: an earlier call was interrupted before its reply",
                self.endpoint
            )));
        }
        self.busy = true;
        if self.replied {
            self.stream.forget_readable();
        }
        self.stream.send(request).await.map_err(|e| self.lost(&e))?;
        loop {
            match thrift::message_len(self.rbuf.pending()) {
                Ok(len) => {
                    self.busy = false;
                    self.replied = true;
                    return Ok(len);
                }
                Err(Malformed::Short) => {}
                Err(Malformed::Bad(_)) => {
                    return Err(DriverError::fatal(peer::not_answering_as(
                        &self.endpoint,
                        SYSTEM,
                        "a Thrift binary-protocol reply",
                        self.rbuf.pending(),
                    )))
                }
            }
            match self.stream.read(self.rbuf.spare(0)).await {
                Ok(0) => return Err(self.lost(&io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => self.rbuf.filled(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(&e)),
            }
        }
    }

    /// Reads the reply of length `len` as a call's success value of type
    /// `want`, with `read` (given the reader at the value and the whole
    /// reply), and consumes it whatever its outcome.
    fn decode<T>(
        &mut self,
        len: usize,
        want: u8,
        read: impl for<'a> FnOnce(&mut Reader<'a>, &'a [u8]) -> Result<T, Malformed>,
    ) -> Result<T, DriverError> {
        let reply = &self.rbuf.pending()[..len];
        let ep = &self.endpoint;
        let result = calls::value(reply, ep).and_then(|(got, mut r)| {
            calls::expect(got, want)
                .and_then(|()| read(&mut r, reply))
                .map_err(|m| calls::malformed(m, ep))
        });
        self.rbuf.consume(len);
        result
    }

    /// Reads the reply of length `len` to a call that returns nothing,
    /// and consumes it.
    fn decode_void(&mut self, len: usize) -> Result<(), DriverError> {
        let result = calls::outcome(&self.rbuf.pending()[..len], &self.endpoint).map(drop);
        self.rbuf.consume(len);
        result
    }

    fn lost(&self, e: &io::Error) -> DriverError {
        lost_error(e, &self.endpoint)
    }
}

/// Puts queued for the next flush, encoded as `TPut`s after room left
/// for the call's header: the header is written last, right before the
/// first put, as `put` for one and `putMultiple` for several, so the
/// request goes out from this buffer as it is.
#[derive(Default)]
struct PutQueue {
    buf: Vec<u8>,
    /// Where the first put starts.
    room: usize,
    rows: u64,
    table: String,
}

impl PutQueue {
    fn push(
        &mut self,
        table: &str,
        row: &[u8],
        family: &str,
        cells: &[Cell<'_>],
        durability: Durability,
    ) {
        if self.rows == 0 {
            self.table.clear();
            self.table.push_str(table);
            self.buf.clear();
            put_header(&mut Writer(&mut self.buf), 0, table, 2);
            self.room = self.buf.len();
        }
        calls::tput(&mut Writer(&mut self.buf), row, family, cells, durability);
        self.rows += 1;
    }

    /// The request that sends the queued puts, and their number; `None`
    /// when none are queued. Empties the queue.
    fn request(&mut self, next: &mut NextRequest) -> Option<(&[u8], u64)> {
        let rows = std::mem::take(&mut self.rows);
        if rows == 0 {
            return None;
        }
        let (mut w, seq) = next.start();
        put_header(&mut w, seq, &self.table, rows);
        let start = self.room - next.buf.len();
        self.buf[start..self.room].copy_from_slice(&next.buf);
        self.buf.push(ty::STOP);
        Some((&self.buf[start..], rows))
    }
}

/// The header of `put` (one row) or `putMultiple` (`rows`) on `table`, up
/// to its `TPut` or list of them: the longer for any `rows` above 1.
fn put_header(w: &mut Writer, seq: i32, table: &str, rows: u64) {
    if rows == 1 {
        w.call("put", seq);
        w.binary_field(1, table.as_bytes());
        w.field(ty::STRUCT, 2);
    } else {
        w.call("putMultiple", seq);
        w.binary_field(1, table.as_bytes());
        w.field(ty::LIST, 2);
        w.list(ty::STRUCT, rows as usize);
    }
}

/// One session's connection to the gateway.
pub struct HbaseConn {
    link: Link,
    next: NextRequest,
    puts: PutQueue,
}

/// The next request, encoded in a buffer reused for every one.
struct NextRequest {
    buf: Vec<u8>,
    seq: i32,
}

impl NextRequest {
    /// A writer for the next request, with its sequence number.
    fn start(&mut self) -> (Writer<'_>, i32) {
        self.buf.clear();
        self.seq = self.seq.wrapping_add(1);
        (Writer(&mut self.buf), self.seq)
    }
}

impl std::fmt::Debug for HbaseConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HbaseConn")
            .field("endpoint", &self.link.endpoint)
            .field("queued_puts", &self.puts.rows)
            .finish_non_exhaustive()
    }
}

impl HbaseConn {
    /// A writer for the next request, with its sequence number.
    fn request(&mut self) -> (Writer<'_>, i32) {
        self.next.start()
    }

    /// Sends the encoded request; the reply's length (see [`Link::call`]).
    async fn send(&mut self) -> Result<usize, DriverError> {
        self.link.call(&self.next.buf).await
    }

    /// Sends the encoded request to a call that returns nothing.
    async fn void_call(&mut self) -> Result<(), DriverError> {
        let len = self.send().await?;
        self.link.decode_void(len)
    }

    /// Sends the encoded request to a call that returns a `bool`.
    async fn bool_call(&mut self) -> Result<bool, DriverError> {
        let len = self.send().await?;
        self.link.decode(len, ty::BOOL, |r, _| r.bool())
    }

    /// Sends the encoded request to a call that returns an `i32`.
    async fn i32_call(&mut self) -> Result<i32, DriverError> {
        let len = self.send().await?;
        self.link.decode(len, ty::I32, |r, _| r.i32())
    }

    /// Sends the encoded request to a call that returns `list<TResult>`;
    /// its rows and cells.
    async fn results_call(
        &mut self,
        on_row: &mut dyn FnMut(&[u8]),
    ) -> Result<(u64, u64), DriverError> {
        let len = self.send().await?;
        self.link
            .decode(len, ty::LIST, |r, _| calls::tresults(r, on_row))
    }

    /// Asks the gateway which Thrift server it is: a Thrift1 gateway
    /// (`hbase thrift`) has no `THBaseService`.
    async fn check_thrift2(&mut self) -> Result<(), DriverError> {
        let (mut w, seq) = self.request();
        calls::get_thrift_server_type(&mut w, seq);
        match self.i32_call().await {
            Ok(calls::THRIFT_SERVER_TWO) => Ok(()),
            Ok(other) => Err(DriverError::fatal(format!(
                "{} is a Thrift{other} gateway, not Thrift2: start `hbase thrift2`",
                self.link.endpoint
            ))),
            Err(e) => Err(e),
        }
    }

    /// Asks for the table's descriptor; the reply's length.
    async fn table_descriptor(&mut self, table: &str) -> Result<usize, DriverError> {
        let (mut w, seq) = self.request();
        calls::on_table(&mut w, seq, "getTableDescriptor", table);
        self.send().await
    }

    /// A scanner over `args`, `caching` rows per round trip, until the
    /// table's end or `limit` rows.
    async fn scan_with_scanner(
        &mut self,
        table: &str,
        args: &ScanArgs<'_>,
        on_row: &mut dyn FnMut(&[u8]),
    ) -> Result<ScanOutcome, DriverError> {
        let (mut w, seq) = self.request();
        calls::open_scanner(&mut w, seq, table, args);
        let scanner = self.i32_call().await?;
        let read = self.read_scanner(scanner, args, on_row).await;
        let (mut w, seq) = self.request();
        calls::close_scanner(&mut w, seq, scanner);
        let closed = self.void_call().await;
        let outcome = read?;
        closed.map(|()| outcome)
    }

    async fn read_scanner(
        &mut self,
        scanner: i32,
        args: &ScanArgs<'_>,
        on_row: &mut dyn FnMut(&[u8]),
    ) -> Result<ScanOutcome, DriverError> {
        let mut outcome = ScanOutcome::default();
        loop {
            let left = args.limit.map_or(u64::MAX, |l| u64::from(l) - outcome.rows);
            if left == 0 {
                return Ok(outcome);
            }
            let ask = u64::from(args.caching.max(1)).min(left) as u32;
            let (mut w, seq) = self.request();
            calls::get_scanner_rows(&mut w, seq, scanner, ask);
            let (rows, cells) = self.results_call(on_row).await?;
            outcome.rows += rows;
            outcome.cells += cells;
            if rows == 0 {
                return Ok(outcome);
            }
        }
    }
}

impl WideConn for HbaseConn {
    fn refuses_skip_wal(&self) -> Option<&'static str> {
        None
    }

    fn queue_put(
        &mut self,
        table: &str,
        row: &[u8],
        family: &str,
        cells: &[Cell<'_>],
        durability: Durability,
    ) {
        self.puts.push(table, row, family, cells, durability);
    }

    async fn flush_puts(&mut self) -> Result<u64, DriverError> {
        let Some((request, rows)) = self.puts.request(&mut self.next) else {
            return Ok(0);
        };
        let len = self.link.call(request).await?;
        self.link.decode_void(len).map(|()| rows)
    }

    /// Always one `putMultiple`.
    fn last_multi_put(&self) -> MultiPut {
        MultiPut::Batch
    }

    async fn get(
        &mut self,
        table: &str,
        row: &[u8],
        family: &str,
        qualifiers: &[&[u8]],
        on_cell: &mut dyn FnMut(Cell<'_>),
    ) -> Result<bool, DriverError> {
        let (mut w, seq) = self.request();
        calls::get(&mut w, seq, table, row, family, qualifiers);
        let len = self.send().await?;
        self.link.decode(len, ty::STRUCT, |r, _| {
            calls::tresult(r, on_cell).map(|(_, cells)| cells > 0)
        })
    }

    async fn scan(
        &mut self,
        scan: &Scan<'_>,
        on_row: &mut dyn FnMut(&[u8]),
    ) -> Result<ScanOutcome, DriverError> {
        let args = ScanArgs {
            family: Some(scan.family),
            start: scan.start,
            stop_row: scan.stop_row,
            limit: scan.limit,
            caching: scan.caching,
            filter: None,
        };
        match scan.limit {
            Some(limit) if limit <= scan.caching => {
                let (mut w, seq) = self.request();
                calls::get_scanner_results(&mut w, seq, scan.table, &args, limit);
                let (rows, cells) = self.results_call(on_row).await?;
                Ok(ScanOutcome { rows, cells })
            }
            _ => self.scan_with_scanner(scan.table, &args, on_row).await,
        }
    }

    async fn delete(&mut self, table: &str, row: &[u8]) -> Result<(), DriverError> {
        let (mut w, seq) = self.request();
        calls::delete_row(&mut w, seq, table, row);
        self.void_call().await
    }

    async fn create_table(&mut self, spec: &TableSpec<'_>) -> Result<(), DriverError> {
        let (mut w, seq) = self.request();
        calls::create_table(
            &mut w,
            seq,
            spec.table,
            spec.family,
            spec.marker,
            spec.split_keys,
        );
        self.void_call().await
    }

    /// Tables go to HBase's default namespace, which loadcell never
    /// creates.
    async fn namespace(&mut self) -> Result<Option<Namespace>, DriverError> {
        Ok(None)
    }

    async fn drop_namespace(&mut self) -> Result<(), DriverError> {
        Err(DriverError::fatal(
            "loadcell creates no HBase namespace, and drops none",
        ))
    }

    async fn table_marker(&mut self, table: &str) -> Result<Option<String>, DriverError> {
        let (mut w, seq) = self.request();
        calls::on_table(&mut w, seq, "tableExists", table);
        if !self.bool_call().await? {
            return Ok(None);
        }
        let len = self.table_descriptor(table).await?;
        self.link.decode(len, ty::STRUCT, |r, reply| {
            calls::table_descriptor(r, b"", reply)
                .map(|(marker, _)| Some(String::from_utf8_lossy(marker).into_owned()))
        })
    }

    async fn drop_table(&mut self, table: &str) -> Result<(), DriverError> {
        let (mut w, seq) = self.request();
        calls::on_table(&mut w, seq, "disableTable", table);
        match self.void_call().await {
            Err(e) if !e.message.contains("TableNotEnabledException") => return Err(e),
            _ => {}
        }
        let (mut w, seq) = self.request();
        calls::on_table(&mut w, seq, "deleteTable", table);
        self.void_call().await
    }

    async fn set_block_cache(
        &mut self,
        table: &str,
        family: &str,
        on: bool,
    ) -> Result<BlockCacheChange, DriverError> {
        let len = self.table_descriptor(table).await?;
        let (mut w, seq) = self.next.start();
        // The family's descriptor as it is, its block cache changed.
        let was_on = self.link.decode(len, ty::STRUCT, |r, reply| {
            let Some(descriptor) = calls::table_descriptor(r, family.as_bytes(), reply)?.1 else {
                return Ok(None);
            };
            let was_on = calls::block_cache_on(descriptor)?;
            calls::modify_block_cache(&mut w, seq, table, descriptor, on)?;
            Ok(Some(was_on))
        })?;
        let Some(was_on) = was_on else {
            return Err(DriverError::fatal(format!(
                "table {table} has no column family {family}"
            )));
        };
        self.void_call().await?;
        Ok(BlockCacheChange {
            was_on,
            setting: "the column family's BLOCKCACHE",
        })
    }

    async fn each_key(
        &mut self,
        table: &str,
        on_key: &mut dyn FnMut(&[u8]),
    ) -> Result<u64, DriverError> {
        let args = ScanArgs {
            family: None,
            start: loadcell_core::wide::ScanStart::First,
            stop_row: None,
            limit: None,
            caching: KEYS_CACHING,
            filter: Some(KEYS_ONLY),
        };
        let outcome = self.scan_with_scanner(table, &args, on_key).await?;
        Ok(outcome.rows)
    }
}

#[cfg(test)]
mod tests;
