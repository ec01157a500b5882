//! Thrift's binary protocol (TBinaryProtocol, strict) as the HBase Thrift2
//! gateway serves it over a buffered transport: no frame length, so a
//! reply's end is found by walking its structure ([`message_len`]).
//!
//! [`Writer`] appends to the connection's reused write buffer; [`Reader`]
//! reads in place from the received bytes, so a binary field borrows them.

/// Thrift's wire types.
pub(crate) mod ty {
    pub const STOP: u8 = 0;
    pub const BOOL: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const DOUBLE: u8 = 4;
    pub const I16: u8 = 6;
    pub const I32: u8 = 8;
    pub const I64: u8 = 10;
    pub const STRING: u8 = 11;
    pub const STRUCT: u8 = 12;
    pub const MAP: u8 = 13;
    pub const SET: u8 = 14;
    pub const LIST: u8 = 15;
}

/// The strict binary protocol's version word, or'ed with the message type.
const VERSION_1: u32 = 0x8001_0000;
pub(crate) const CALL: u8 = 1;
pub(crate) const REPLY: u8 = 2;
pub(crate) const EXCEPTION: u8 = 3;

/// Structures nested deeper than this are not a gateway's reply.
const MAX_DEPTH: usize = 32;

/// Appends Thrift values to a buffer.
pub(crate) struct Writer<'a>(pub(crate) &'a mut Vec<u8>);

impl Writer<'_> {
    /// A call's message header: what is written next is its arguments
    /// struct.
    pub(crate) fn call(&mut self, method: &str, seq: i32) {
        self.i32((VERSION_1 | CALL as u32) as i32);
        self.binary(method.as_bytes());
        self.i32(seq);
    }

    #[inline]
    pub(crate) fn field(&mut self, ty: u8, id: i16) {
        self.0.push(ty);
        self.0.extend_from_slice(&id.to_be_bytes());
    }

    /// The end of a struct's fields.
    #[inline]
    pub(crate) fn stop(&mut self) {
        self.0.push(ty::STOP);
    }

    #[inline]
    pub(crate) fn list(&mut self, element: u8, len: usize) {
        self.0.push(element);
        self.i32(len as i32);
    }

    #[inline]
    pub(crate) fn map(&mut self, key: u8, value: u8, len: usize) {
        self.0.push(key);
        self.0.push(value);
        self.i32(len as i32);
    }

    #[inline]
    pub(crate) fn binary(&mut self, bytes: &[u8]) {
        self.i32(bytes.len() as i32);
        self.0.extend_from_slice(bytes);
    }

    #[inline]
    pub(crate) fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub(crate) fn bool(&mut self, v: bool) {
        self.0.push(v as u8);
    }

    /// A binary field.
    #[inline]
    pub(crate) fn binary_field(&mut self, id: i16, bytes: &[u8]) {
        self.field(ty::STRING, id);
        self.binary(bytes);
    }

    /// An i32 field (also an enum's).
    #[inline]
    pub(crate) fn i32_field(&mut self, id: i16, v: i32) {
        self.field(ty::I32, id);
        self.i32(v);
    }

    #[inline]
    pub(crate) fn bool_field(&mut self, id: i16, v: bool) {
        self.field(ty::BOOL, id);
        self.bool(v);
    }
}

/// Why bytes could not be read as Thrift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// More bytes are needed.
    Short,
    /// Not Thrift, or not what was expected; the reason.
    Bad(&'static str),
}

/// Reads Thrift values in place.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// Bytes read so far.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.pos.checked_add(n).ok_or(Malformed::Short)?;
        let taken = self.bytes.get(self.pos..end).ok_or(Malformed::Short)?;
        self.pos = end;
        Ok(taken)
    }

    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    pub(crate) fn i16(&mut self) -> Result<i16, Malformed> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }

    #[inline]
    pub(crate) fn i32(&mut self) -> Result<i32, Malformed> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }

    #[inline]
    pub(crate) fn bool(&mut self) -> Result<bool, Malformed> {
        Ok(self.u8()? != 0)
    }

    /// A length (of a binary, list or map), refusing a negative one.
    #[inline]
    fn len(&mut self) -> Result<usize, Malformed> {
        usize::try_from(self.i32()?).map_err(|_| Malformed::Bad("negative length"))
    }

    #[inline]
    pub(crate) fn binary(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.len()?;
        self.take(n)
    }

    /// The next field's type and id; `None` at the end of the struct.
    #[inline]
    pub(crate) fn field(&mut self) -> Result<Option<(u8, i16)>, Malformed> {
        let ty = self.u8()?;
        if ty == ty::STOP {
            return Ok(None);
        }
        Ok(Some((ty, self.i16()?)))
    }

    /// A list's element type and length.
    #[inline]
    pub(crate) fn list(&mut self) -> Result<(u8, usize), Malformed> {
        let element = self.u8()?;
        Ok((element, self.len()?))
    }

    /// A message header: its type, method name and sequence id.
    pub(crate) fn message(&mut self) -> Result<(u8, &'a [u8], i32), Malformed> {
        let word = self.i32()? as u32;
        if word & 0xffff_0000 != VERSION_1 {
            return Err(Malformed::Bad("not a Thrift binary-protocol message"));
        }
        let name = self.binary()?;
        let seq = self.i32()?;
        Ok(((word & 0xff) as u8, name, seq))
    }

    /// Passes over a value of type `ty`.
    pub(crate) fn skip(&mut self, ty: u8) -> Result<(), Malformed> {
        self.skip_nested(ty, 0)
    }

    fn skip_nested(&mut self, ty: u8, depth: usize) -> Result<(), Malformed> {
        if depth > MAX_DEPTH {
            return Err(Malformed::Bad("nested too deep"));
        }
        match ty {
            ty::BOOL | ty::BYTE => self.take(1).map(drop),
            ty::I16 => self.take(2).map(drop),
            ty::I32 => self.take(4).map(drop),
            ty::I64 | ty::DOUBLE => self.take(8).map(drop),
            ty::STRING => self.binary().map(drop),
            ty::STRUCT => {
                while let Some((field_ty, _)) = self.field()? {
                    self.skip_nested(field_ty, depth + 1)?;
                }
                Ok(())
            }
            ty::MAP => {
                let (key, value) = (self.u8()?, self.u8()?);
                for _ in 0..self.len()? {
                    self.skip_nested(key, depth + 1)?;
                    self.skip_nested(value, depth + 1)?;
                }
                Ok(())
            }
            ty::SET | ty::LIST => {
                let (element, n) = self.list()?;
                for _ in 0..n {
                    self.skip_nested(element, depth + 1)?;
                }
                Ok(())
            }
            _ => Err(Malformed::Bad("unknown Thrift type")),
        }
    }
}

/// The length of the whole message at the start of `bytes`, once it has
/// all arrived.
pub(crate) fn message_len(bytes: &[u8]) -> Result<usize, Malformed> {
    let mut r = Reader::new(bytes);
    r.message()?;
    r.skip(ty::STRUCT)?;
    Ok(r.position())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply whose result holds `value`, then a list and a map.
    fn reply_with_binary(value: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = Writer(&mut buf);
        w.i32((VERSION_1 | REPLY as u32) as i32);
        w.binary(b"get");
        w.i32(7);
        w.binary_field(0, value);
        w.field(ty::LIST, 1);
        w.list(ty::I32, 2);
        w.i32(1);
        w.i32(2);
        w.field(ty::MAP, 2);
        w.map(ty::STRING, ty::STRING, 1);
        w.binary(b"k");
        w.binary(b"v");
        w.stop();
        buf
    }

    #[test]
    fn a_message_is_whole_only_once_its_last_byte_has_arrived() {
        let reply = reply_with_binary(b"value");
        assert_eq!(message_len(&reply), Ok(reply.len()));
        for cut in 0..reply.len() {
            assert_eq!(message_len(&reply[..cut]), Err(Malformed::Short), "{cut}");
        }
        let mut two = reply.clone();
        two.extend_from_slice(&reply);
        assert_eq!(message_len(&two), Ok(reply.len()));
    }

    #[test]
    fn a_binary_is_read_in_place_and_the_header_checked() {
        let reply = reply_with_binary(b"value");
        let mut r = Reader::new(&reply);
        assert_eq!(r.message(), Ok((REPLY, &b"get"[..], 7)));
        assert_eq!(r.field(), Ok(Some((ty::STRING, 0))));
        let value = r.binary().unwrap();
        assert_eq!(value, b"value");
        assert!(std::ptr::eq(
            value.as_ptr(),
            reply[r.position() - 5..].as_ptr()
        ));
        assert_eq!(
            Reader::new(b"HTTP/1.1 400 Bad").message(),
            Err(Malformed::Bad("not a Thrift binary-protocol message"))
        );
    }

    #[test]
    fn negative_lengths_and_unknown_types_are_refused() {
        let mut buf = Vec::new();
        Writer(&mut buf).i32(-1);
        assert_eq!(
            Reader::new(&buf).binary(),
            Err(Malformed::Bad("negative length"))
        );
        assert_eq!(
            Reader::new(&[1]).skip(99),
            Err(Malformed::Bad("unknown Thrift type"))
        );
    }
}
