//! RESP2: requests encoded straight into a reused buffer (lengths formatted
//! on the stack), replies found and classified in place in the read buffer.

use loadcell_core::kv::{KvArray, KvReply};

use super::*;

/// Decimal digits of `n` in `buf`, without allocating.
#[inline]
pub(super) fn format_usize(buf: &mut [u8; 20], mut n: usize) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[inline]
pub(super) fn put_len(buf: &mut Vec<u8>, prefix: u8, n: usize) {
    let mut digits = [0u8; 20];
    buf.push(prefix);
    buf.extend_from_slice(format_usize(&mut digits, n));
    buf.extend_from_slice(b"\r\n");
}

#[inline]
pub(super) fn put_bulk(buf: &mut Vec<u8>, data: &[u8]) {
    put_len(buf, b'$', data.len());
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
}

#[inline]
pub(super) fn encode_get(buf: &mut Vec<u8>, key: &[u8]) {
    buf.reserve(key.len() + 40);
    buf.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
    put_bulk(buf, key);
}

#[inline]
pub(super) fn encode_set(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    buf.reserve(key.len() + value.len() + 60);
    buf.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
    put_bulk(buf, key);
    put_bulk(buf, value);
}

pub(super) fn encode_command(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.reserve(args.iter().map(|a| a.len() + 24).sum::<usize>() + 24);
    put_len(buf, b'*', args.len());
    for a in args {
        put_bulk(buf, a);
    }
}

pub(super) const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

// ---------------------------------------------------------------------------
// RESP2 decoding

/// Byte offsets of a value in the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: usize,
}

/// One reply, as offsets into the read buffer: nothing is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    Simple(Span),
    Error(Span),
    Int(i64),
    Bulk(Span),
    /// Null bulk string or null array.
    Nil,
    /// An array header: this many elements follow.
    Array(usize),
    /// A whole array (from [`parse_reply`]): its element count and where
    /// its elements lie, undecoded.
    Elements(usize, Span),
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Parsed<T> {
    /// The value and the offset just past it.
    Done(T, usize),
    /// The buffer must hold at least this many bytes (from its start).
    Incomplete(usize),
}

pub(super) type ParseResult<T> = Result<Parsed<T>, &'static str>;

/// The line starting at `pos`: offset of its `\r`, or incomplete.
#[inline]
pub(super) fn line_end(buf: &[u8], pos: usize) -> Result<Option<usize>, &'static str> {
    match buf[pos..].iter().position(|&b| b == b'\n') {
        Some(i) if i > 0 && buf[pos + i - 1] == b'\r' => Ok(Some(pos + i - 1)),
        Some(_) => Err("line not ended by CRLF"),
        None if buf.len() - pos > MAX_LINE => Err("line too long"),
        None => Ok(None),
    }
}

#[inline]
pub(super) fn parse_int(digits: &[u8]) -> Result<i64, &'static str> {
    let (neg, digits) = match digits {
        [b'-', rest @ ..] => (true, rest),
        d => (false, d),
    };
    if digits.is_empty() || digits.len() > 19 {
        return Err("bad integer");
    }
    // Accumulated negatively so that i64::MIN, with no positive twin, fits.
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err("bad integer");
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_sub(i64::from(d - b'0')))
            .ok_or("integer out of range")?;
    }
    if neg {
        Ok(n)
    } else {
        n.checked_neg().ok_or("integer out of range")
    }
}

/// One value's header at `pos`; a bulk string includes its contents, an
/// array only its count.
#[inline]
pub(super) fn parse_header(buf: &[u8], pos: usize) -> ParseResult<Reply> {
    if pos >= buf.len() {
        return Ok(Parsed::Incomplete(pos + 4));
    }
    let Some(cr) = line_end(buf, pos + 1)? else {
        return Ok(Parsed::Incomplete(buf.len() + 1));
    };
    let line = Span {
        start: pos + 1,
        end: cr,
    };
    let next = cr + 2;
    let reply = match buf[pos] {
        b'$' => {
            let len = parse_int(&buf[line.start..line.end])?;
            if len < 0 {
                return Ok(Parsed::Done(Reply::Nil, next));
            }
            if len > MAX_BULK {
                return Err("bulk string too long");
            }
            let end = next + len as usize;
            if buf.len() < end + 2 {
                return Ok(Parsed::Incomplete(end + 2));
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err("bulk string not ended by CRLF");
            }
            return Ok(Parsed::Done(
                Reply::Bulk(Span { start: next, end }),
                end + 2,
            ));
        }
        b'+' => Reply::Simple(line),
        b'-' => Reply::Error(line),
        b':' => Reply::Int(parse_int(&buf[line.start..line.end])?),
        b'*' => {
            let n = parse_int(&buf[line.start..line.end])?;
            if n < 0 {
                Reply::Nil
            } else {
                Reply::Array(n as usize)
            }
        }
        _ => return Err("unknown reply type"),
    };
    Ok(Parsed::Done(reply, next))
}

/// One whole reply at `pos`; an array's elements are stepped over (without
/// recursion), not decoded.
#[inline]
pub(super) fn parse_reply(buf: &[u8], pos: usize) -> ParseResult<Reply> {
    let (mut reply, mut pos) = match parse_header(buf, pos)? {
        Parsed::Done(r, next) => (r, next),
        Parsed::Incomplete(n) => return Ok(Parsed::Incomplete(n)),
    };
    if let Reply::Array(n) = reply {
        let start = pos;
        let mut left = n;
        while left > 0 {
            match parse_header(buf, pos)? {
                Parsed::Done(inner, next) => {
                    left -= 1;
                    if let Reply::Array(m) = inner {
                        left = left.checked_add(m).ok_or("array too long")?;
                    }
                    pos = next;
                }
                Parsed::Incomplete(need) => return Ok(Parsed::Incomplete(need)),
            }
        }
        reply = Reply::Elements(n, Span { start, end: pos });
    }
    Ok(Parsed::Done(reply, pos))
}

/// Splits the first element off an array's elements (which
/// [`parse_reply`] has checked are whole): a bulk string's bytes, `None`
/// for any other value (a nested array is stepped over whole).
pub(super) fn split_element(elements: &[u8]) -> (Option<&[u8]>, &[u8]) {
    match parse_reply(elements, 0) {
        Ok(Parsed::Done(Reply::Bulk(s), next)) => {
            (Some(&elements[s.start..s.end]), &elements[next..])
        }
        Ok(Parsed::Done(_, next)) => (None, &elements[next..]),
        Ok(Parsed::Incomplete(_)) | Err(_) => (None, &[]),
    }
}

/// An owned reply, for the few commands off the hot path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Value>),
}

pub(super) fn parse_value(buf: &[u8], pos: usize, depth: usize) -> ParseResult<Value> {
    if depth > 16 {
        return Err("arrays nested too deep");
    }
    let (reply, mut pos) = match parse_header(buf, pos)? {
        Parsed::Done(r, next) => (r, next),
        Parsed::Incomplete(n) => return Ok(Parsed::Incomplete(n)),
    };
    let text = |s: Span| String::from_utf8_lossy(&buf[s.start..s.end]).into_owned();
    let value = match reply {
        Reply::Simple(s) => Value::Simple(text(s)),
        Reply::Error(s) => Value::Error(text(s)),
        Reply::Int(i) => Value::Int(i),
        Reply::Bulk(s) => Value::Bulk(buf[s.start..s.end].to_vec()),
        Reply::Nil => Value::Nil,
        Reply::Array(n) | Reply::Elements(n, _) => {
            let mut items = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                match parse_value(buf, pos, depth + 1)? {
                    Parsed::Done(v, next) => {
                        items.push(v);
                        pos = next;
                    }
                    Parsed::Incomplete(need) => return Ok(Parsed::Incomplete(need)),
                }
            }
            Value::Array(items)
        }
    };
    Ok(Parsed::Done(value, pos))
}

/// What a reply means to the caller. Error replies are handled apart.
#[inline]
pub(super) fn kv_reply<'a>(reply: Reply, buf: &'a [u8]) -> KvReply<'a> {
    match reply {
        Reply::Bulk(s) => KvReply::Hit(&buf[s.start..s.end]),
        Reply::Nil => KvReply::Miss,
        Reply::Elements(n, s) => {
            KvReply::Array(KvArray::new(n, &buf[s.start..s.end], split_element))
        }
        _ => KvReply::Done,
    }
}
