//! One channel's replication connection: `START_REPLICATION` on its slot,
//! the CopyBoth stream walked in place in the read buffer, pgoutput's
//! Insert tuples decoded into [`StreamRow`]s, and standby status updates.
//!
//! Formats: PostgreSQL's "Streaming Replication Protocol" (XLogData `w`,
//! primary keepalive `k`, standby status update `r`, all inside CopyData)
//! and "Logical Replication Message Formats" (protocol version 1: Begin
//! `B`, Insert `I` with TupleData in text form, Commit `C`; Relation and
//! the others are skipped: a channel's slot replicates one table whose
//! column order loadcell made).

use std::future::poll_fn;
use std::task::Poll;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};
use loadcell_core::stream::{OnRow, PollOutcome, StreamRow};
use loadcell_core::DriverError;
use tokio::io::ReadBuf;

use super::super::*;

/// XLogData's header before the pgoutput message: `w`, the start and end
/// of the WAL it carries, the server's clock.
const XLOG_HEADER: usize = 1 + 8 + 8 + 8;
/// Seconds from the Unix epoch to PostgreSQL's (2000-01-01).
const PG_EPOCH_SECS: u64 = 946_684_800;
/// The columns of a channel table's tuple.
const TUPLE_COLUMNS: [u8; 2] = 9u16.to_be_bytes();

pub(super) struct Replica {
    pub(super) conn: PostgresConn,
    /// Bytes the next frame needs from the first unread one, when the
    /// buffer holds less (0: unknown).
    need: usize,
    /// Between a Begin and its Commit.
    in_transaction: bool,
    /// How far the transaction at the buffer's start was walked in search
    /// of its Commit, so that each read walks only the new frames.
    walked: Walked,
    /// The end of the last transaction handed over whole, or the server's
    /// position in a keepalive that came between transactions: what
    /// `commit` acknowledges.
    received: u64,
    /// What the last standby status update said was flushed.
    acknowledged: u64,
    /// A keepalive asked for a status update.
    reply_due: bool,
}

impl Replica {
    /// Opens a replication connection and starts streaming `slot` from its
    /// confirmed position.
    pub(super) async fn start(
        driver: &PostgresDriver,
        slot: &str,
        publication: &str,
    ) -> Result<Replica, DriverError> {
        let ctx = &driver.ctx;
        let mut conn = driver
            .open(&Progress::new(), true)
            .await
            .map_err(|f| describe(f, ctx, Phase::Connect))?;
        let command = format!(
            "START_REPLICATION SLOT {slot} LOGICAL 0/0 \
             (proto_version '1', publication_names '\"{publication}\"')"
        );
        conn.wbuf.clear();
        frontend::query(&command, &mut conn.wbuf).map_err(|e| DriverError::fatal(e.to_string()))?;
        let started = async {
            conn.stream
                .write_all(&conn.wbuf)
                .await
                .map_err(connect_io)?;
            loop {
                let (tag, body) = conn.next_message().await?;
                match tag {
                    b'W' => return Ok(()),
                    b'E' => return Err(db_failure(&conn.rbuf.received()[body])),
                    b'N' | b'S' => {}
                    other => return Err(unexpected(other)),
                }
            }
        }
        .await;
        if let Err(f) = started {
            let mut err = conn.error(f);
            err.message = format!("START_REPLICATION on slot {slot}: {}", err.message);
            return Err(err);
        }
        Ok(Replica {
            conn,
            need: 0,
            in_transaction: false,
            walked: Walked::default(),
            received: 0,
            acknowledged: 0,
            reply_due: false,
        })
    }

    /// Hands the rows of the transactions buffered whole (up to their
    /// Commit) to `on_row`, up to `max_rows` in `out` in all but always a
    /// poll's first transaction whole, and answers a keepalive that asked
    /// for a reply.
    pub(super) async fn take(
        &mut self,
        max_rows: usize,
        on_row: &mut OnRow<'_>,
        out: &mut PollOutcome,
    ) -> Result<(), Failure> {
        self.decode(max_rows, on_row, out)?;
        if std::mem::take(&mut self.reply_due) {
            self.send_status().await?;
        }
        Ok(())
    }

    fn decode(
        &mut self,
        max_rows: usize,
        on_row: &mut OnRow<'_>,
        out: &mut PollOutcome,
    ) -> Result<(), Failure> {
        let buf = self.conn.rbuf.received();
        let first = self.conn.rbuf.start();
        let mut pos = first;
        self.need = 0;
        loop {
            let (tag, body, next) = match frame_at(buf, pos)? {
                Frame::Whole { tag, body, next } => (tag, &buf[body], next),
                Frame::Need(n) => {
                    self.need = n;
                    break;
                }
            };
            match (tag, body.first()) {
                (b'd', Some(b'w')) => {
                    let message = body
                        .get(XLOG_HEADER..)
                        .ok_or_else(|| protocol("short XLogData"))?;
                    match message.first() {
                        Some(b'I') => match decode_insert(message) {
                            Some(row) => {
                                on_row(row);
                                out.rows += 1;
                            }
                            None => out.undecodable += 1,
                        },
                        // A transaction is handed over whole or not at
                        // all, so that what `commit` acknowledges is
                        // every row polled: a run that stops after a poll
                        // leaves none of them to be delivered again.
                        Some(b'B') => {
                            match walk_transaction(buf, pos, &mut self.walked)? {
                                Walk::Whole { rows } => {
                                    self.walked = Walked::default();
                                    // Past `max_rows` only when it is the
                                    // poll's first transaction.
                                    let taken = out.rows + out.undecodable;
                                    if taken > 0 && (taken + rows) as usize > max_rows {
                                        break;
                                    }
                                    self.in_transaction = true;
                                }
                                Walk::Need(n) => {
                                    self.need = n;
                                    break;
                                }
                            }
                        }
                        Some(b'C') => {
                            self.received = commit_end(message)?;
                            self.in_transaction = false;
                        }
                        _ => {}
                    }
                }
                (b'd', Some(b'k')) => {
                    let (wal_end, reply) = keepalive(body)?;
                    if !self.in_transaction {
                        self.received = self.received.max(wal_end);
                    }
                    self.reply_due |= reply;
                }
                (b'd', _) => return Err(protocol("unknown replication message")),
                (b'E', _) => return Err(db_failure(body)),
                (b'c', _) => {
                    return Err(Failure::Other(
                        "the server ended the replication stream".to_string(),
                    ))
                }
                (b'N' | b'S', _) => {}
                (other, _) => return Err(unexpected(other)),
            }
            pos = next;
        }
        out.bytes += (pos - first) as u64;
        self.conn.rbuf.consume_to(pos);
        Ok(())
    }

    /// Acknowledges everything polled: the server may then release it.
    pub(super) async fn acknowledge(&mut self) -> Result<(), Failure> {
        if self.received == self.acknowledged {
            return Ok(());
        }
        self.acknowledged = self.received;
        self.send_status().await
    }

    /// Ends streaming as the protocol has it: a last status update, then
    /// CopyDone, then the server's CopyDone and CommandComplete read up
    /// to ReadyForQuery, the CopyData still in flight skipped, then
    /// Terminate. The server reads the status update before the
    /// CopyDone, so it has confirmed the slot when it answers. A
    /// connection merely closed with unread data is reset instead, and
    /// its walsender may die with the last update unread: the next reader
    /// then got 150 rows again (3 transactions of 50) in 100,000.
    pub(super) async fn end(&mut self) -> Result<(), Failure> {
        self.acknowledged = self.received;
        self.write_status();
        let conn = &mut self.conn;
        frontend::copy_done(&mut conn.wbuf);
        conn.stream
            .write_all(&conn.wbuf)
            .await
            .map_err(io_failure)?;
        loop {
            match conn.next_message().await? {
                (b'Z', _) => break,
                (b'E', body) => return Err(db_failure(&conn.rbuf.received()[body])),
                _ => {}
            }
        }
        conn.wbuf.clear();
        frontend::terminate(&mut conn.wbuf);
        conn.stream.write_all(&conn.wbuf).await.map_err(io_failure)
    }

    /// A standby status update: received as written, acknowledged as
    /// flushed and applied.
    async fn send_status(&mut self) -> Result<(), Failure> {
        self.write_status();
        let conn = &mut self.conn;
        conn.stream.write_all(&conn.wbuf).await.map_err(io_failure)
    }

    /// The write buffer holds a status update and nothing else.
    fn write_status(&mut self) {
        self.conn.wbuf.clear();
        status_update(
            &mut self.conn.wbuf,
            self.received,
            self.acknowledged,
            pg_clock_micros(),
        );
    }
}

fn io_failure(e: std::io::Error) -> Failure {
    Failure::Io {
        kind: e.kind(),
        text: e.to_string(),
    }
}

/// The frames of a transaction walked so far, from its Begin.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Walked {
    /// Bytes from the Begin's frame to the first frame not yet walked.
    bytes: usize,
    /// Inserts among them.
    rows: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// The buffer holds the transaction up to its Commit, with `rows`
    /// Inserts.
    Whole { rows: u64 },
    /// The buffer must hold this many bytes from the Begin's frame.
    Need(usize),
}

/// Walks the frames of the transaction whose Begin's frame is at `begin`,
/// from where `walked` left off, to its Commit.
fn walk_transaction(buf: &[u8], begin: usize, walked: &mut Walked) -> Result<Walk, Failure> {
    loop {
        let pos = begin + walked.bytes;
        let (tag, body, next) = match frame_at(buf, pos)? {
            Frame::Whole { tag, body, next } => (tag, &buf[body], next),
            Frame::Need(n) => return Ok(Walk::Need(walked.bytes + n)),
        };
        walked.bytes = next - begin;
        if let (b'd', Some(b'w')) = (tag, body.first()) {
            match body.get(XLOG_HEADER) {
                Some(b'I') => walked.rows += 1,
                Some(b'C') => return Ok(Walk::Whole { rows: walked.rows }),
                _ => {}
            }
        }
    }
}

/// Waits until one of `replicas` receives bytes, reading them into its
/// buffer; a failure names the replica's index.
pub(super) async fn read_any(replicas: &mut [Replica]) -> Result<(), (usize, Failure)> {
    poll_fn(|cx| {
        for (index, replica) in replicas.iter_mut().enumerate() {
            let PostgresConn { stream, rbuf, .. } = &mut replica.conn;
            let mut spare = ReadBuf::new(rbuf.spare(replica.need));
            match stream.poll_read(cx, &mut spare) {
                Poll::Pending => {}
                Poll::Ready(Ok(())) => {
                    let n = spare.filled().len();
                    if n == 0 {
                        return Poll::Ready(Err((index, Failure::Closed)));
                    }
                    rbuf.filled(n);
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(Err((
                        index,
                        Failure::Io {
                            kind: e.kind(),
                            text: e.to_string(),
                        },
                    )))
                }
            }
        }
        Poll::Pending
    })
    .await
}

fn be_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// A Commit's end LSN: `C`, flags, commit LSN, end LSN, timestamp.
fn commit_end(message: &[u8]) -> Result<u64, Failure> {
    be_u64(message, 10).ok_or_else(|| protocol("short Commit"))
}

/// A primary keepalive's WAL end and whether it asks for a reply.
fn keepalive(body: &[u8]) -> Result<(u64, bool), Failure> {
    match (be_u64(body, 1), body.get(17)) {
        (Some(wal_end), Some(&reply)) => Ok((wal_end, reply == 1)),
        _ => Err(protocol("short keepalive")),
    }
}

/// Appends a standby status update (in CopyData).
fn status_update(buf: &mut BytesMut, written: u64, flushed: u64, clock: i64) {
    buf.put_u8(b'd');
    buf.put_i32(4 + 1 + 8 * 4 + 1);
    buf.put_u8(b'r');
    buf.put_u64(written);
    buf.put_u64(flushed);
    buf.put_u64(flushed);
    buf.put_i64(clock);
    buf.put_u8(0);
}

/// Microseconds since PostgreSQL's epoch.
fn pg_clock_micros() -> i64 {
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (unix.as_micros() as i64) - (PG_EPOCH_SECS * 1_000_000) as i64
}

/// A channel table's row from an Insert message (`I`, relation id, `N`,
/// TupleData), borrowing its text; `None` for anything else (another
/// table's layout, a NULL, a value not in text form, a number that does
/// not parse).
pub(super) fn decode_insert(message: &[u8]) -> Option<StreamRow<'_>> {
    let (header, mut rest) = (message.get(..8)?, &message[8..]);
    if header[0] != b'I' || header[5] != b'N' || header[6..8] != TUPLE_COLUMNS {
        return None;
    }
    let mut column = || -> Option<&[u8]> {
        let [b't', l0, l1, l2, l3, tail @ ..] = rest else {
            return None;
        };
        let len = u32::from_be_bytes([*l0, *l1, *l2, *l3]) as usize;
        let value = tail.get(..len)?;
        rest = &tail[len..];
        Some(value)
    };
    let channel = u32::try_from(parse_i64(column()?)?).ok()?;
    let seq = u64::try_from(parse_i64(column()?)?).ok()?;
    let produced_ns = parse_i64(column()?)?;
    let origin = parse_i64(column()?)? as u64;
    let keys = [column()?, column()?, column()?, column()?];
    let payload = column()?;
    Some(StreamRow {
        channel,
        seq,
        produced_ns,
        origin,
        keys,
        payload,
    })
}

/// A bigint's text form: an optional `-` and up to 19 digits.
fn parse_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', digits @ ..] => (true, digits),
        digits => (false, digits),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        let d = d.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n * 10 + u64::from(d);
    }
    if negative {
        0i64.checked_sub_unsigned(n)
    } else {
        i64::try_from(n).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_column(out: &mut Vec<u8>, value: &[u8]) {
        out.push(b't');
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value);
    }

    fn insert(values: &[&[u8]]) -> Vec<u8> {
        let mut m = vec![b'I', 0, 0, 0x40, 0x01, b'N'];
        m.extend_from_slice(&(values.len() as u16).to_be_bytes());
        for v in values {
            text_column(&mut m, v);
        }
        m
    }

    #[test]
    fn an_insert_tuple_decodes_into_the_row_it_carries() {
        let message = insert(&[
            b"3",
            b"41",
            b"1790000000123456789",
            b"-2401053089206453570",
            b"user1",
            b"2026-11-24",
            b"",
            b"order-9",
            b"xxxx",
        ]);
        let row = decode_insert(&message).unwrap();
        assert_eq!(row.channel, 3);
        assert_eq!(row.seq, 41);
        assert_eq!(row.produced_ns, 1_790_000_000_123_456_789);
        assert_eq!(row.origin, 0xdead_beef_cafe_babe);
        assert_eq!(row.keys, [&b"user1"[..], b"2026-11-24", b"", b"order-9"]);
        assert_eq!(row.payload, b"xxxx");
    }

    #[test]
    fn tuples_of_another_layout_do_not_decode() {
        let nine: [&[u8]; 9] = [b"1", b"2", b"3", b"4", b"a", b"b", b"c", b"d", b"e"];
        assert!(decode_insert(&insert(&nine)).is_some());
        assert!(decode_insert(&insert(&nine[..8])).is_none(), "8 columns");
        let mut bad = nine;
        bad[1] = b"x1";
        assert!(decode_insert(&insert(&bad)).is_none(), "seq not a number");
        bad[1] = b"-1";
        assert!(decode_insert(&insert(&bad)).is_none(), "negative seq");
        let mut null = insert(&nine);
        let at = null.len() - (1 + 4 + 1);
        null.truncate(at);
        null.push(b'n');
        assert!(decode_insert(&null).is_none(), "a NULL payload");
        let whole = insert(&nine);
        assert!(
            decode_insert(&whole[..whole.len() - 1]).is_none(),
            "cut short"
        );
    }

    #[test]
    fn integers_parse_to_the_edges_and_no_further() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b"9223372036854775808"[..],
            b"",
            b"-",
            b"1.5",
            b"12345678901234567890",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// A CopyData frame of XLogData carrying `message`.
    fn xlog(message: &[u8]) -> Vec<u8> {
        let mut frame = vec![b'd'];
        frame.extend_from_slice(&((4 + XLOG_HEADER + message.len()) as u32).to_be_bytes());
        frame.push(b'w');
        frame.extend_from_slice(&[0; XLOG_HEADER - 1]);
        frame.extend_from_slice(message);
        frame
    }

    #[test]
    fn a_transaction_is_whole_only_with_its_commit_and_is_walked_once() {
        let nine: [&[u8]; 9] = [b"1", b"2", b"3", b"4", b"a", b"b", b"c", b"d", b"e"];
        let keepalive = [b'd', 0, 0, 0, 22, b'k'].into_iter().chain([0; 17]);
        let mut buf = vec![b'S', 0, 0, 0, 4];
        let begin = buf.len();
        buf.extend(xlog(b"B"));
        buf.extend(xlog(&insert(&nine)));
        buf.extend(keepalive);
        buf.extend(xlog(&insert(&nine)));
        buf.extend(xlog(b"C"));
        let end = buf.len();
        buf.extend(xlog(b"B"));
        for cut in begin + 1..end {
            let mut walked = Walked::default();
            let Ok(Walk::Need(n)) = walk_transaction(&buf[..cut], begin, &mut walked) else {
                panic!("cut at {cut}: not whole")
            };
            assert!(
                begin + n > cut && begin + n <= end,
                "cut at {cut}: need {n}"
            );
            // Resumed where it stopped, it finds the Commit.
            assert_eq!(
                walk_transaction(&buf, begin, &mut walked).ok(),
                Some(Walk::Whole { rows: 2 }),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_status_update_is_a_copydata_of_the_documented_layout() {
        let mut buf = BytesMut::new();
        status_update(&mut buf, 0x10, 0x20, 7);
        assert_eq!(buf.len(), 1 + 4 + 34);
        assert_eq!(&buf[..6], &[b'd', 0, 0, 0, 38, b'r']);
        assert_eq!(be_u64(&buf, 6), Some(0x10));
        assert_eq!(be_u64(&buf, 14), Some(0x20));
        assert_eq!(be_u64(&buf, 22), Some(0x20));
        assert_eq!(be_u64(&buf, 30), Some(7));
        assert_eq!(buf[38], 0);
    }
}
