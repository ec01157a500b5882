//! The wire format: packets framed and read into a reused buffer, the
//! greeting checked, commands and executions encoded, OK/ERR packets and
//! result sets walked in place.

use std::io;
use std::ops::Range;

use loadcell_core::sql::SqlParam;
use loadcell_core::DriverError;
use mysql_common::constants::StatusFlags;

use crate::transport::peer::{self};
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::Stream;

use super::*;

/// Initial read buffer; it grows for larger responses.
pub(super) const READ_BUF: usize = 64 * 1024;
/// A payload this long continues in the next packet.
pub(super) const MAX_PAYLOAD: usize = 0xFF_FFFF;
/// The client's maximum packet size, as announced in the handshake.
pub(super) const MAX_PACKET: u32 = 1 << 30;
/// utf8mb4_general_ci.
pub(super) const UTF8MB4_GENERAL_CI: u8 = 45;

pub(super) const COM_QUERY: u8 = 0x03;
pub(super) const COM_STMT_PREPARE: u8 = 0x16;
pub(super) const COM_STMT_EXECUTE: u8 = 0x17;

pub(super) const MYSQL_TYPE_LONGLONG: u8 = 0x08;
pub(super) const MYSQL_TYPE_VAR_STRING: u8 = 0xFD;

/// Received bytes and the packet framing over them. A payload of exactly
/// 0xFFFFFF bytes continues in the next packet; such pieces are joined in
/// place so that every payload handed out is contiguous.
#[derive(Debug)]
pub(super) struct PacketBuf {
    pub(super) data: ReadBuffer,
    /// A payload being joined: its length so far (its pieces before the
    /// next header are already contiguous after the first unread byte + 4).
    pub(super) joined: Option<usize>,
    /// Bytes from the first unread one that the next packet needs at least.
    pub(super) need: usize,
    /// Sequence id of the last packet piece handed out.
    pub(super) seq: u8,
}

impl PacketBuf {
    pub(super) fn new(capacity: usize) -> PacketBuf {
        PacketBuf {
            data: ReadBuffer::with_capacity(capacity),
            joined: None,
            need: 0,
            seq: 0,
        }
    }

    /// The received bytes the ranges [`PacketBuf::next`] hands out index.
    #[inline]
    pub(super) fn bytes(&self) -> &[u8] {
        self.data.received()
    }

    /// The next complete payload, consumed (valid until the next
    /// [`PacketBuf::spare`]); `None` if more bytes must be read first.
    #[inline]
    pub(super) fn next(&mut self) -> Option<Range<usize>> {
        let s = self.data.start();
        let mut total = match self.joined {
            Some(total) => total,
            None => {
                let buf = self.data.received();
                if buf.len() - s < 4 {
                    self.need = 4;
                    return None;
                }
                let len = le24(&buf[s..]);
                if buf.len() - s < 4 + len {
                    self.need = 4 + len;
                    return None;
                }
                self.seq = buf[s + 3];
                if len < MAX_PAYLOAD {
                    self.data.consume_to(s + 4 + len);
                    self.need = 0;
                    return Some(s + 4..s + 4 + len);
                }
                len
            }
        };
        // A continued payload: fold each following piece's payload onto
        // the previous one, dropping its header.
        loop {
            let p = s + 4 + total;
            let buf = self.data.received();
            if buf.len() < p + 4 {
                self.joined = Some(total);
                self.need = p + 4 - s;
                return None;
            }
            let len = le24(&buf[p..]);
            if buf.len() < p + 4 + len {
                self.joined = Some(total);
                self.need = p + 4 + len - s;
                return None;
            }
            self.seq = buf[p + 3];
            self.data.remove(p..p + 4);
            total += len;
            if len < MAX_PAYLOAD {
                self.joined = None;
                self.need = 0;
                self.data.consume_to(s + 4 + total);
                return Some(s + 4..s + 4 + total);
            }
        }
    }

    /// Room to read into: compacts, and grows for a large packet.
    pub(super) fn spare(&mut self) -> &mut [u8] {
        self.data.spare(self.need)
    }

    /// `n` bytes were read into [`PacketBuf::spare`].
    pub(super) fn filled(&mut self, n: usize) {
        self.data.filled(n);
    }
}

#[inline]
pub(super) fn le24(b: &[u8]) -> usize {
    usize::from(b[0]) | usize::from(b[1]) << 8 | usize::from(b[2]) << 16
}

/// Reads until a whole payload is buffered; end of stream is an error.
pub(super) async fn read_packet(
    stream: &mut Stream,
    pb: &mut PacketBuf,
) -> io::Result<Range<usize>> {
    loop {
        if let Some(r) = pb.next() {
            return Ok(r);
        }
        let n = stream.read(pb.spare()).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        pb.filled(n);
    }
}

/// The largest greeting accepted: a handshake is about 100 bytes, an ERR
/// packet sent instead (too many connections, host blocked) a few hundred.
pub(super) const MAX_GREETING: usize = 16 * 1024;

/// Whether `b`, the first bytes a server sent, can begin a MySQL greeting:
/// a packet of sequence 0 and a sane length, holding protocol version 10
/// (a handshake) or an ERR packet. `None` while too few bytes have come
/// to tell; `Some(false)` as soon as one rules it out, so that another
/// protocol's server is found without waiting for a packet's length worth
/// of bytes it will never send.
pub(super) fn greeting_start_ok(b: &[u8]) -> Option<bool> {
    if b.len() >= 3 && !(1..=MAX_GREETING).contains(&le24(b)) {
        return Some(false);
    }
    if b.len() >= 4 && b[3] != 0 {
        return Some(false);
    }
    match b.get(4) {
        Some(10 | 0xFF) => Some(true),
        Some(_) => Some(false),
        None => None,
    }
}

/// The server's first packet, once its first bytes show it is a MySQL
/// greeting: a handshake or an ERR packet.
pub(super) async fn read_greeting(
    stream: &mut Stream,
    pb: &mut PacketBuf,
    ctx: &Ctx,
) -> Result<Range<usize>, DriverError> {
    let mut checked = false;
    loop {
        if !checked {
            let first = pb.data.pending();
            match greeting_start_ok(first) {
                Some(true) => checked = true,
                Some(false) => {
                    return Err(DriverError::fatal(peer::not_answering_as(
                        &ctx.endpoint,
                        "MySQL/MariaDB",
                        "a MySQL handshake",
                        first,
                    )))
                }
                None => {}
            }
        }
        if checked {
            if let Some(r) = pb.next() {
                return Ok(r);
            }
        }
        let n = stream
            .read(pb.spare())
            .await
            .map_err(|e| classify_io(&e, ctx, Phase::Connect))?;
        if n == 0 {
            let first = pb.data.pending();
            return Err(DriverError::connection(format!(
                "{} closed the connection {}: is a MySQL server listening there?",
                ctx.endpoint,
                if first.is_empty() {
                    "without sending a MySQL handshake".to_string()
                } else {
                    format!("after sending {}", peer::quoted(first))
                }
            ))
            .with_code(CR_CONN_HOST_ERROR));
        }
        pb.filled(n);
    }
}

/// A length-encoded integer at `*pos`, advancing it.
#[inline]
pub(super) fn lenenc(p: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *p.get(*pos)?;
    let (n, width) = match first {
        0..=0xFA => {
            *pos += 1;
            return Some(u64::from(first));
        }
        0xFC => (2, 3),
        0xFD => (3, 4),
        0xFE => (8, 9),
        _ => return None,
    };
    let bytes = p.get(*pos + 1..*pos + 1 + n)?;
    let mut v = 0u64;
    for (i, b) in bytes.iter().enumerate() {
        v |= u64::from(*b) << (8 * i);
    }
    *pos += width;
    Some(v)
}

#[inline]
pub(super) fn put_lenenc(buf: &mut Vec<u8>, n: u64) {
    if n < 0xFB {
        buf.push(n as u8);
    } else if n <= 0xFFFF {
        buf.push(0xFC);
        buf.extend_from_slice(&(n as u16).to_le_bytes());
    } else if n <= 0xFF_FFFF {
        buf.push(0xFD);
        buf.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
    } else {
        buf.push(0xFE);
        buf.extend_from_slice(&n.to_le_bytes());
    }
}

/// Fills in the packet header(s) of a command written after a 4-byte
/// placeholder: sequence id 0, split into 0xFFFFFF-byte pieces if long.
pub(super) fn frame_command(buf: &mut Vec<u8>) {
    let len = buf.len() - 4;
    if len < MAX_PAYLOAD {
        buf[..3].copy_from_slice(&(len as u32).to_le_bytes()[..3]);
        buf[3] = 0;
        return;
    }
    let payload = buf.split_off(4);
    buf.clear();
    let mut seq = 0u8;
    let mut chunks = payload.chunks(MAX_PAYLOAD);
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        buf.extend_from_slice(&(chunk.len() as u32).to_le_bytes()[..3]);
        buf.push(seq);
        buf.extend_from_slice(chunk);
        seq = seq.wrapping_add(1);
        if chunk.len() < MAX_PAYLOAD {
            break;
        }
    }
}

/// A text command (COM_QUERY, COM_STMT_PREPARE) into `buf`.
pub(super) fn encode_command(buf: &mut Vec<u8>, command: u8, arg: &[u8]) {
    buf.clear();
    buf.reserve(5 + arg.len());
    buf.extend_from_slice(&[0, 0, 0, 0, command]);
    buf.extend_from_slice(arg);
    frame_command(buf);
}

/// COM_STMT_EXECUTE of statement `id` into `buf` (reused: no allocation
/// once it is large enough): no cursor, one iteration, no NULLs, types
/// sent every time (LONGLONG for Int, VAR_STRING for Text).
#[inline]
pub(super) fn encode_execute(
    buf: &mut Vec<u8>,
    id: u32,
    params: &[SqlParam<'_>],
    send_types: bool,
) {
    buf.clear();
    buf.extend_from_slice(&[0, 0, 0, 0, COM_STMT_EXECUTE]);
    buf.extend_from_slice(&id.to_le_bytes());
    // Flags (no cursor), iteration count 1.
    buf.extend_from_slice(&[0, 1, 0, 0, 0]);
    if !params.is_empty() {
        let bitmap = params.len().div_ceil(8);
        buf.resize(buf.len() + bitmap, 0);
        buf.push(u8::from(send_types)); // new params bound
        if send_types {
            for p in params {
                let t = match p {
                    SqlParam::Int(_) => MYSQL_TYPE_LONGLONG,
                    SqlParam::Text(_) => MYSQL_TYPE_VAR_STRING,
                };
                buf.extend_from_slice(&[t, 0]);
            }
        }
        for p in params {
            match *p {
                SqlParam::Int(i) => buf.extend_from_slice(&i.to_le_bytes()),
                SqlParam::Text(t) => {
                    put_lenenc(buf, t.len() as u64);
                    buf.extend_from_slice(t.as_bytes());
                }
            }
        }
    }
    frame_command(buf);
}

/// A server's ERR packet, borrowed from the read buffer.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ServerErr<'a> {
    pub(super) code: u16,
    pub(super) state: Option<&'a str>,
    pub(super) message: &'a str,
}

/// Parses an ERR packet (`0xFF`, code, optional `#` and SQLSTATE, message).
pub(super) fn parse_err(p: &[u8]) -> Option<ServerErr<'_>> {
    if p.len() < 3 || p[0] != 0xFF {
        return None;
    }
    let code = u16::from_le_bytes([p[1], p[2]]);
    let (state, rest) = if p.len() >= 9 && p[3] == b'#' {
        (std::str::from_utf8(&p[4..9]).ok(), &p[9..])
    } else {
        (None, &p[3..])
    };
    let message = match std::str::from_utf8(rest) {
        Ok(m) => m,
        Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
    };
    Some(ServerErr {
        code,
        state,
        message,
    })
}

/// An OK packet's counts and status (the `0x00` header of a response, or
/// the `0xFE` one ending a result set under CLIENT_DEPRECATE_EOF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OkInfo {
    pub(super) affected: u64,
    pub(super) status: u16,
}

pub(super) fn parse_ok(p: &[u8]) -> Option<OkInfo> {
    let mut pos = 1;
    let affected = lenenc(p, &mut pos)?;
    let _last_insert_id = lenenc(p, &mut pos)?;
    let status = p
        .get(pos..pos + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))?;
    Some(OkInfo { affected, status })
}

/// How the server frames result sets on this connection, as negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Framing {
    /// CLIENT_DEPRECATE_EOF: an OK (`0xFE`) ends a result set, and no EOF
    /// follows the column definitions.
    pub(super) deprecate_eof: bool,
    /// MariaDB's MARIADB_CLIENT_CACHE_METADATA: a byte after the column
    /// count says whether column definitions follow; a statement's
    /// executions after the first leave them out, as they do for
    /// Connector/C (and so for sysbench).
    pub(super) cache_metadata: bool,
}

/// Status flags of a result set's terminator.
pub(super) fn terminator_status(p: &[u8], deprecate_eof: bool) -> Option<u16> {
    if deprecate_eof {
        parse_ok(p).map(|ok| ok.status)
    } else {
        // EOF: 0xFE, warnings (2), status (2).
        p.get(3..5).map(|s| u16::from_le_bytes([s[0], s[1]]))
    }
}

pub(super) const MORE_RESULTS: u16 = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();

/// Where a [`Walker`] is in a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WalkState {
    /// Expecting OK, ERR or a column count.
    Start,
    /// Column definitions left to skip.
    Columns(u64),
    /// The EOF after the column definitions (without DEPRECATE_EOF).
    ColumnsEof,
    Rows,
}

/// What a payload was to a [`Walker`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Metadata or an intermediate OK/terminator: read on.
    More,
    /// A row (its payload is the one just fed).
    Row,
    /// The response is complete.
    Done,
    /// An ERR packet (the payload just fed) ended the response.
    Error,
}

/// Walks a command's response (OK, ERR, or result sets, possibly several)
/// one payload at a time without decoding rows.
#[derive(Debug)]
pub(super) struct Walker {
    pub(super) state: WalkState,
    pub(super) framing: Framing,
    pub(super) result_sets: u32,
    pub(super) rows: u64,
    pub(super) affected: u64,
}

impl Walker {
    pub(super) fn new(framing: Framing) -> Walker {
        Walker {
            state: WalkState::Start,
            framing,
            result_sets: 0,
            rows: 0,
            affected: 0,
        }
    }

    /// Rows read if the response had a result set, else rows affected.
    pub(super) fn count(&self) -> u64 {
        if self.result_sets > 0 {
            self.rows
        } else {
            self.affected
        }
    }

    #[inline]
    pub(super) fn feed(&mut self, p: &[u8]) -> Result<Step, &'static str> {
        let first = *p.first().ok_or("empty packet")?;
        match self.state {
            WalkState::Rows => {
                if first == 0xFE && p.len() < MAX_PAYLOAD {
                    let status = terminator_status(p, self.framing.deprecate_eof)
                        .ok_or("bad end of result set")?;
                    return Ok(self.after(status));
                }
                if first == 0xFF {
                    return Ok(Step::Error);
                }
                self.rows += 1;
                Ok(Step::Row)
            }
            WalkState::Start => match first {
                0x00 => {
                    let ok = parse_ok(p).ok_or("bad OK packet")?;
                    self.affected += ok.affected;
                    Ok(self.after(ok.status))
                }
                0xFF => Ok(Step::Error),
                0xFB => Err("LOCAL INFILE request"),
                _ => {
                    let mut pos = 0;
                    let n = lenenc(p, &mut pos).ok_or("bad column count")?;
                    let metadata_follows = if self.framing.cache_metadata {
                        *p.get(pos)
                            .ok_or("no metadata flag after the column count")?
                            != 0
                    } else {
                        true
                    };
                    self.result_sets += 1;
                    // Without the definitions, their closing EOF still
                    // comes unless DEPRECATE_EOF was agreed.
                    self.state = match (n > 0 && metadata_follows, self.framing.deprecate_eof) {
                        (true, _) => WalkState::Columns(n),
                        (false, true) => WalkState::Rows,
                        (false, false) => WalkState::ColumnsEof,
                    };
                    Ok(Step::More)
                }
            },
            WalkState::Columns(n) => {
                self.state = match (n - 1, self.framing.deprecate_eof) {
                    (0, true) => WalkState::Rows,
                    (0, false) => WalkState::ColumnsEof,
                    (left, _) => WalkState::Columns(left),
                };
                Ok(Step::More)
            }
            WalkState::ColumnsEof => {
                if first != 0xFE {
                    return Err("no EOF after the column definitions");
                }
                self.state = WalkState::Rows;
                Ok(Step::More)
            }
        }
    }

    fn after(&mut self, status: u16) -> Step {
        if status & MORE_RESULTS != 0 {
            self.state = WalkState::Start;
            Step::More
        } else {
            Step::Done
        }
    }
}

/// The columns of a text-protocol row; `None` for NULL.
pub(super) fn text_row(p: &[u8]) -> Option<Vec<Option<Vec<u8>>>> {
    let mut cols = Vec::new();
    let mut pos = 0;
    while pos < p.len() {
        if p[pos] == 0xFB {
            cols.push(None);
            pos += 1;
            continue;
        }
        let len = usize::try_from(lenenc(p, &mut pos)?).ok()?;
        cols.push(Some(p.get(pos..pos.checked_add(len)?)?.to_vec()));
        pos += len;
    }
    Some(cols)
}

/// One packet (header and `body`) appended to `buf`.
pub(super) fn put_packet(buf: &mut Vec<u8>, seq: u8, body: &[u8]) {
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes()[..3]);
    buf.push(seq);
    buf.extend_from_slice(body);
}
