//! The receive buffer the network drivers parse replies from.
//!
//! One `Vec<u8>` per connection, reused for its lifetime: `buf[start..end]`
//! is received and not yet consumed. Before a read, [`ReadBuffer::spare`]
//! makes room: it moves the unread bytes to the front only when the room
//! left runs low, and grows the buffer (doubling, or straight to the size
//! a reply is known to need) only for a reply larger than the buffer. So
//! the hot path neither allocates nor copies more than it must.
//!
//! Parsers that work with offsets into the received bytes use
//! [`ReadBuffer::received`] and [`ReadBuffer::start`]; such offsets stay
//! valid until the next [`ReadBuffer::spare`].

use std::ops::Range;

use loadcell_core::kv::ReplyAt;

/// Room a read gets at least.
pub(crate) const MIN_ROOM: usize = 4 * 1024;

#[derive(Debug)]
pub(crate) struct ReadBuffer {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Reads so far (wrapping): replies parsed between two reads came in
    /// together, so callers can time them with one clock reading.
    reads: u32,
}

impl ReadBuffer {
    pub(crate) fn with_capacity(capacity: usize) -> ReadBuffer {
        ReadBuffer {
            buf: vec![0; capacity],
            start: 0,
            end: 0,
            reads: 0,
        }
    }

    /// Received bytes not yet consumed.
    #[inline]
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Everything received up to the last read, consumed or not: for
    /// parsers working with offsets, the unread part starting at
    /// [`ReadBuffer::start`].
    #[inline]
    pub(crate) fn received(&self) -> &[u8] {
        &self.buf[..self.end]
    }

    /// Offset in [`ReadBuffer::received`] of the first unread byte.
    #[inline]
    pub(crate) fn start(&self) -> usize {
        self.start
    }

    /// Nothing received is left unread.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The next `n` unread bytes were used.
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start += n;
    }

    /// Everything before offset `pos` of [`ReadBuffer::received`] was used.
    #[inline]
    pub(crate) fn consume_to(&mut self, pos: usize) {
        debug_assert!(self.start <= pos && pos <= self.end);
        self.start = pos;
    }

    /// Drops the unread bytes in `range` (offsets in
    /// [`ReadBuffer::received`]), moving the ones after it down.
    pub(crate) fn remove(&mut self, range: Range<usize>) {
        debug_assert!(self.start <= range.start && range.start <= range.end);
        debug_assert!(range.end <= self.end);
        self.buf.copy_within(range.end..self.end, range.start);
        self.end -= range.len();
    }

    /// Room to read into, after the unread bytes: such that `need` bytes
    /// from the first unread one fit in all (0 when not known), and never
    /// less than [`MIN_ROOM`]. Compacts when the room left runs low; grows
    /// by doubling, or to `need` when that is more.
    #[inline]
    pub(crate) fn spare(&mut self, need: usize) -> &mut [u8] {
        if self.is_empty() {
            self.start = 0;
            self.end = 0;
        }
        let pending = self.end - self.start;
        let want = need.max(pending + MIN_ROOM);
        if self.buf.len() - self.start < want || self.buf.len() - self.end < MIN_ROOM {
            self.make_room(pending, want);
        }
        &mut self.buf[self.end..]
    }

    #[cold]
    fn make_room(&mut self, pending: usize, want: usize) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = pending;
        }
        if self.buf.len() < want {
            let len = want.max(self.buf.len() * 2);
            self.buf.resize(len, 0);
        }
    }

    /// `n` bytes were read into [`ReadBuffer::spare`].
    #[inline]
    pub(crate) fn filled(&mut self, n: usize) {
        debug_assert!(n <= self.buf.len() - self.end);
        self.end += n;
        self.reads = self.reads.wrapping_add(1);
    }

    /// Where request `index`'s reply, just parsed from this buffer, stands:
    /// replies parsed between the same two reads share `read`.
    #[inline]
    pub(crate) fn reply_at(&self, index: usize) -> ReplyAt {
        ReplyAt {
            index,
            read: self.reads,
        }
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `bytes` into `rb` as one read, with `need` as the hint.
    fn put(rb: &mut ReadBuffer, need: usize, bytes: &[u8]) {
        let spare = rb.spare(need);
        assert!(spare.len() >= bytes.len(), "room for {}", bytes.len());
        spare[..bytes.len()].copy_from_slice(bytes);
        rb.filled(bytes.len());
    }

    /// A buffer of `capacity` bytes that received `bytes` in one read and
    /// consumed `consumed` of them.
    fn buffer(capacity: usize, bytes: &[u8], consumed: usize) -> ReadBuffer {
        let mut rb = ReadBuffer::with_capacity(capacity);
        put(&mut rb, 0, bytes);
        rb.consume(consumed);
        rb
    }

    #[test]
    fn fill_and_consume() {
        let mut rb = ReadBuffer::with_capacity(64 * 1024);
        assert!(rb.is_empty());
        assert_eq!(rb.pending(), b"");
        put(&mut rb, 0, b"hello world");
        assert!(!rb.is_empty());
        assert_eq!(rb.pending(), b"hello world");
        rb.consume(6);
        assert_eq!(rb.pending(), b"world");
        assert_eq!(rb.start(), 6);
        assert_eq!(rb.received(), b"hello world");
        rb.consume_to(11);
        assert!(rb.is_empty());
        assert_eq!(rb.received(), b"hello world");
    }

    #[test]
    fn empty_buffer_rewinds_without_copying() {
        let mut rb = buffer(64 * 1024, &[7; 100], 100);
        let spare = rb.spare(0).len();
        assert_eq!(spare, 64 * 1024, "all of it is room again");
        assert_eq!(rb.start(), 0);
        assert_eq!(rb.received(), b"");
    }

    #[test]
    fn no_compaction_while_room_is_left() {
        let mut rb = buffer(64 * 1024, &[1; 1000], 500);
        // Plenty of room after `end`: the unread bytes stay where they are.
        let room = rb.spare(0).len();
        assert_eq!(room, 64 * 1024 - 1000);
        assert_eq!(rb.start(), 500);
        assert_eq!(rb.pending().len(), 500);
        assert_eq!(rb.capacity(), 64 * 1024);
    }

    #[test]
    fn compacts_when_room_runs_low() {
        let cap = 16 * 1024;
        let data: Vec<u8> = (0..cap - 100).map(|i| i as u8).collect();
        let mut rb = buffer(cap, &data, cap - 300);
        // 100 bytes of room < MIN_ROOM: the 200 unread bytes move down.
        let room = rb.spare(0).len();
        assert_eq!(rb.start(), 0);
        assert_eq!(rb.pending(), &data[cap - 300..]);
        assert_eq!(room, cap - 200);
        assert_eq!(rb.capacity(), cap, "compaction was enough");
    }

    #[test]
    fn grows_by_doubling_when_full_of_unread_bytes() {
        let cap = 8 * 1024;
        let mut rb = buffer(cap, &[9; 8 * 1024 - 10], 0);
        let room = rb.spare(0).len();
        assert_eq!(rb.capacity(), 2 * cap);
        assert_eq!(room, 2 * cap - (cap - 10));
        assert_eq!(rb.pending(), &[9; 8 * 1024 - 10][..]);
    }

    #[test]
    fn a_large_need_grows_to_it_at_once() {
        // A reply header at the very end says 100 000 bytes are coming.
        let cap = 32 * 1024;
        let mut bytes = vec![0; cap - 10];
        bytes.extend_from_slice(b"$100000\r");
        let mut rb = buffer(cap, &bytes, cap - 10);
        let need = 100_000 + 12;
        let room = rb.spare(need).len();
        assert_eq!(rb.start(), 0);
        assert_eq!(rb.pending(), b"$100000\r");
        assert_eq!(rb.capacity(), need, "more than double: exactly the need");
        assert_eq!(room, need - 8);
    }

    #[test]
    fn a_need_below_double_doubles() {
        let cap = 32 * 1024;
        let mut rb = buffer(cap, &vec![1; cap - 2], cap - 10);
        let room = rb.spare(cap + 1).len();
        assert_eq!(rb.start(), 0);
        assert_eq!(rb.pending(), &[1; 8]);
        assert_eq!(rb.capacity(), 2 * cap);
        assert_eq!(room, 2 * cap - 8);
    }

    #[test]
    fn a_need_that_fits_does_not_move_anything() {
        let mut rb = buffer(64 * 1024, &[5; 100], 40);
        rb.spare(10_000);
        assert_eq!(rb.start(), 40);
        assert_eq!(rb.capacity(), 64 * 1024);
    }

    #[test]
    fn a_need_past_the_end_compacts_first() {
        let cap = 64 * 1024;
        let mut rb = buffer(cap, &vec![3; 50_000], 49_000);
        // 1 000 unread, 40 000 needed: fits after compaction, no growth.
        let room = rb.spare(40_000).len();
        assert_eq!(rb.start(), 0);
        assert_eq!(rb.capacity(), cap);
        assert_eq!(room, cap - 1000);
    }

    #[test]
    fn never_less_than_min_room() {
        let mut rb = ReadBuffer::with_capacity(0);
        assert!(rb.spare(0).len() >= MIN_ROOM);
        let mut rb = ReadBuffer::with_capacity(64);
        assert!(rb.spare(1).len() >= MIN_ROOM);
    }

    #[test]
    fn remove_drops_a_range_in_place() {
        let mut rb = buffer(1024, b"..abcdHDRxyz", 2);
        rb.remove(6..9);
        assert_eq!(rb.pending(), b"abcdxyz");
        assert_eq!(rb.received(), b"..abcdxyz");
        rb.remove(9..9);
        assert_eq!(rb.pending(), b"abcdxyz");
    }

    #[test]
    fn interleaved_reads_and_consumes_keep_the_stream() {
        // A stream of numbered records of varying length, read in odd-sized
        // pieces and consumed a record at a time: what comes out is what
        // went in, whatever compaction and growth happened on the way.
        let mut stream = Vec::new();
        let mut records = Vec::new();
        for i in 0..2000u32 {
            let len = (i as usize * 7919) % 3000 + 1;
            let mut rec = (len as u32).to_le_bytes().to_vec();
            rec.extend((0..len).map(|j| (i as usize + j) as u8));
            records.push(rec[4..].to_vec());
            stream.extend_from_slice(&rec);
        }
        let mut rb = ReadBuffer::with_capacity(8 * 1024);
        let mut sent = 0;
        let mut got = Vec::new();
        let mut need = 0;
        let mut chunk = 1;
        while got.len() < records.len() {
            let p = rb.pending();
            if p.len() >= 4 {
                let len = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize;
                if p.len() >= 4 + len {
                    got.push(p[4..4 + len].to_vec());
                    rb.consume(4 + len);
                    need = 0;
                    continue;
                }
                need = 4 + len;
            }
            let spare = rb.spare(need);
            assert!(spare.len() >= MIN_ROOM);
            let n = chunk.min(spare.len()).min(stream.len() - sent);
            spare[..n].copy_from_slice(&stream[sent..sent + n]);
            rb.filled(n);
            sent += n;
            chunk = chunk * 3 % 9001 + 1;
        }
        assert_eq!(got, records);
        assert!(rb.is_empty());
        assert_eq!(rb.capacity(), 8 * 1024, "records < 4 KiB never grow it");
    }
}
