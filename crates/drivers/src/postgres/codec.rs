//! Messages: encoding requests with `postgres-protocol`, walking replies in
//! place in the read buffer; statement parameters; text helpers.

use bytes::BytesMut;
use loadcell_core::sql::{wrong_param_count, SqlParam};
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;

use super::*;

/// What a request's response said, gathered while its frames are walked.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// From the last CommandComplete tag.
    pub(super) rows: u64,
    /// The first ErrorResponse.
    pub(super) error: Option<Box<Failure>>,
    /// `Some`: collect the first column of every DataRow.
    pub(super) first_column: Option<Vec<Option<String>>>,
    /// A DataRow had no column at all.
    pub(super) no_columns: bool,
    /// `Some`: collect the ParameterDescription.
    pub(super) param_types: Option<Vec<u32>>,
}

/// Where a walk over the received bytes stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scan {
    /// ReadyForQuery was consumed: the response is complete.
    Done,
    /// The next frame needs this many bytes from the position (more than
    /// are there).
    Need(usize),
    /// CopyInResponse: the server waits for COPY data.
    CopyIn,
}

/// One frame at `pos`, or how many bytes from `pos` it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Frame {
    Whole {
        tag: u8,
        body: std::ops::Range<usize>,
        next: usize,
    },
    Need(usize),
}

#[inline]
pub(super) fn frame_at(buf: &[u8], pos: usize) -> Result<Frame, Failure> {
    let rest = &buf[pos..];
    if rest.len() < 5 {
        return Ok(Frame::Need(5));
    }
    let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
    if !(4..=MAX_MESSAGE).contains(&len) {
        return Err(bad_length(rest[0], len));
    }
    if rest.len() < len + 1 {
        return Ok(Frame::Need(len + 1));
    }
    Ok(Frame::Whole {
        tag: rest[0],
        body: pos + 5..pos + 1 + len,
        next: pos + 1 + len,
    })
}

/// Whether `b`, the first bytes of the reply to the startup message, can
/// begin one: an authentication request, an error, a notice or a protocol
/// version negotiation, of a length PostgreSQL sends there (the bounds
/// libpq checks). `None` while too few bytes have come to tell.
pub(super) fn startup_reply_start_ok(b: &[u8]) -> Option<bool> {
    let longest = match b.first()? {
        b'R' | b'v' => 2_000,
        b'E' | b'N' => 30_000,
        _ => return Some(false),
    };
    let len = b.get(1..5)?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]);
    Some((4..=longest).contains(&len))
}

#[cold]
pub(super) fn bad_length(tag: u8, len: usize) -> Failure {
    protocol(&format!(
        "message {:?} with a bad length ({len})",
        tag as char
    ))
}

/// Walks the whole frames in `buf` from `*pos`, consuming them, until
/// ReadyForQuery or an incomplete frame. Rows are skipped unless the first
/// column is collected; notices, parameter changes and notifications are
/// skipped wherever they come.
#[inline]
pub(super) fn scan(buf: &[u8], pos: &mut usize, out: &mut Outcome) -> Result<Scan, Failure> {
    loop {
        let (tag, body) = match frame_at(buf, *pos)? {
            Frame::Whole { tag, body, next } => {
                *pos = next;
                (tag, body)
            }
            Frame::Need(n) => return Ok(Scan::Need(n)),
        };
        match tag {
            b'D' => {
                if out.first_column.is_some() {
                    collect_first_column(&buf[body], out)?;
                }
            }
            b'C' => out.rows = command_rows(&buf[body]),
            b'Z' => return Ok(Scan::Done),
            // BindComplete, ParseComplete, CloseComplete, NoData,
            // RowDescription, EmptyQueryResponse, PortalSuspended, Notice,
            // ParameterStatus, Notification, CopyOut/CopyBoth, CopyData,
            // CopyDone.
            b'2' | b'1' | b'3' | b'n' | b'T' | b'I' | b's' | b'N' | b'S' | b'A' | b'H' | b'W'
            | b'd' | b'c' => {}
            b'E' => {
                if out.error.is_none() {
                    out.error = Some(Box::new(db_failure(&buf[body])));
                }
            }
            b't' => {
                if let Some(types) = out.param_types.as_mut() {
                    *types = parameter_types(&buf[body])?;
                }
            }
            b'G' => return Ok(Scan::CopyIn),
            other => return Err(unexpected(other)),
        }
    }
}

#[cold]
pub(super) fn unexpected(tag: u8) -> Failure {
    protocol(&format!("unexpected message {:?}", tag as char))
}

#[cold]
pub(super) fn protocol(what: &str) -> Failure {
    Failure::Other(format!("protocol error: {what}"))
}

/// Rows read or affected, from a CommandComplete body (a tag such as
/// `SELECT 5`, `INSERT 0 1`, `UPDATE 2`; `BEGIN` has none).
#[inline]
pub(super) fn command_rows(body: &[u8]) -> u64 {
    let tag = match body.split_last() {
        Some((0, tag)) => tag,
        _ => body,
    };
    let digits = match tag.iter().rposition(|&b| b == b' ') {
        Some(space) => &tag[space + 1..],
        None => return 0,
    };
    if digits.is_empty() || digits.len() > 19 {
        return 0;
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return 0;
        }
        n = n * 10 + u64::from(d - b'0');
    }
    n
}

/// The first column of a DataRow, in text form.
pub(super) fn collect_first_column(body: &[u8], out: &mut Outcome) -> Result<(), Failure> {
    let short = || protocol("short DataRow");
    let count = i16::from_be_bytes(body.get(..2).ok_or_else(short)?.try_into().unwrap());
    if count < 1 {
        out.no_columns = true;
        return Ok(());
    }
    let len = i32::from_be_bytes(body.get(2..6).ok_or_else(short)?.try_into().unwrap());
    let value = if len < 0 {
        None
    } else {
        let bytes = body.get(6..6 + len as usize).ok_or_else(short)?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    };
    if let Some(column) = out.first_column.as_mut() {
        column.push(value);
    }
    Ok(())
}

/// The OIDs of a ParameterDescription.
pub(super) fn parameter_types(body: &[u8]) -> Result<Vec<u32>, Failure> {
    let short = || protocol("short ParameterDescription");
    let count = u16::from_be_bytes(body.get(..2).ok_or_else(short)?.try_into().unwrap()) as usize;
    let oids = body.get(2..2 + 4 * count).ok_or_else(short)?;
    Ok(oids
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The NUL-terminated strings of a body, up to an empty one.
pub(super) fn cstrings(body: &[u8]) -> Vec<String> {
    body.split(|&b| b == 0)
        .take_while(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// An Authentication request: its code and the data after it.
pub(super) fn auth_request(body: &[u8]) -> Result<(i32, &[u8]), Failure> {
    let code = body
        .get(..4)
        .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .ok_or_else(|| protocol("short Authentication message"))?;
    Ok((code, &body[4..]))
}

pub(super) fn auth_method_name(code: i32) -> String {
    match code {
        2 => "Kerberos V5".to_string(),
        6 => "SCM credentials".to_string(),
        7 | 8 => "GSSAPI".to_string(),
        9 => "SSPI".to_string(),
        other => format!("code {other}"),
    }
}

pub(super) fn no_password() -> Failure {
    Failure::Auth("the server asked for a password and --target has none".to_string())
}

/// The fields of an ErrorResponse (or NoticeResponse) body: the SQLSTATE,
/// message, hint and cursor position.
#[cold]
pub(super) fn db_failure(body: &[u8]) -> Failure {
    let mut code = String::new();
    let mut message = String::new();
    let mut hint = None;
    let mut position = None;
    let mut rest = body;
    while let Some((&kind, tail)) = rest.split_first() {
        if kind == 0 {
            break;
        }
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        let value = String::from_utf8_lossy(&tail[..end]);
        match kind {
            b'C' => code = value.into_owned(),
            b'M' => message = value.into_owned(),
            b'H' => hint = Some(value.into_owned()),
            b'P' => position = value.parse().ok(),
            _ => {}
        }
        rest = tail.get(end + 1..).unwrap_or(&[]);
    }
    if code.is_empty() {
        // Should not happen: every server error has a SQLSTATE.
        code = "XX000".to_string();
    }
    Failure::Db {
        code,
        message,
        hint,
        position,
    }
}

// ---------------------------------------------------------------------------
// Parameters

/// Checks what a typed client would before sending: the parameter count,
/// and integers bound to `int2`/`int4` in range.
#[inline]
pub(super) fn check_params(types: &[u32], params: &[SqlParam<'_>]) -> Result<(), Failure> {
    if types.len() != params.len() {
        return Err(wrong_count(types.len(), params.len()));
    }
    for (i, (ty, p)) in types.iter().zip(params).enumerate() {
        if let SqlParam::Int(v) = *p {
            let fits = match *ty {
                INT4_OID => i32::try_from(v).is_ok(),
                INT2_OID => i16::try_from(v).is_ok(),
                _ => true,
            };
            if !fits {
                return Err(out_of_range(i, v, *ty));
            }
        }
    }
    Ok(())
}

#[cold]
pub(super) fn wrong_count(expected: usize, got: usize) -> Failure {
    Failure::Other(wrong_param_count(expected, got))
}

#[cold]
pub(super) fn out_of_range(index: usize, v: i64, ty: u32) -> Failure {
    let name = if ty == INT2_OID { "int2" } else { "int4" };
    Failure::Other(format!(
        "cannot bind parameter ${}: value {v} is out of range for type {name}",
        index + 1
    ))
}

/// Bind (all parameters and results in text form) + Execute + Sync for
/// the unnamed portal of statement `name`, appended to `buf`.
#[inline]
pub(super) fn encode_exec(buf: &mut BytesMut, name: &str, params: &[SqlParam<'_>]) {
    // Only fails for a NUL in the name or more than 32767 values, which
    // the prepared statement already rules out.
    let bound = frontend::bind(
        "",
        name,
        std::iter::empty(),
        params,
        |p, buf| {
            match *p {
                SqlParam::Int(v) => buf.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
                SqlParam::Text(s) => buf.extend_from_slice(s.as_bytes()),
            }
            Ok(IsNull::No)
        },
        std::iter::empty(),
        buf,
    );
    debug_assert!(bound.is_ok());
    let _ = frontend::execute("", 0, buf);
    frontend::sync(buf);
}

// ---------------------------------------------------------------------------
// Text helpers

/// `sql` cut to a length fit for a message (bulk INSERTs are long).
pub(super) fn shorten(sql: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 160;
    let sql = sql.trim();
    if sql.len() <= MAX {
        return sql.into();
    }
    let mut end = MAX;
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &sql[..end]).into()
}
