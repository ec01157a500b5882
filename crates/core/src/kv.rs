//! The key-value family. Requests are queued (encoded into the
//! connection's write buffer) and sent together by [`KvConn::flush`];
//! replies come back in order. A batch of one is plain request/response;
//! a batch of N is a pipeline of depth N. Nothing is allocated per request.

use crate::DriverError;

/// One reply. `Hit` borrows the value from the connection's read buffer,
/// valid for the duration of the callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvReply<'a> {
    /// A GET found its key; the value's bytes.
    Hit(&'a [u8]),
    /// A GET found nothing.
    Miss,
    /// A write or a command succeeded.
    Done,
    /// A command answered with an array (HGETALL's fields and values,
    /// ZRANGEBYSCORE's members): empty for a key that is not there.
    Array(KvArray<'a>),
}

/// An array reply's elements, still in the driver's encoding in its read
/// buffer: counting them costs nothing, and only a caller that reads them
/// (a scan's keys) decodes them, one at a time.
#[derive(Clone, Copy)]
pub struct KvArray<'a> {
    len: usize,
    encoded: &'a [u8],
    split: SplitElement,
}

/// Splits the first element off encoded array elements: its bytes if it is
/// a string (`None` for a number, a nil or a nested array), and the rest.
pub type SplitElement = fn(&[u8]) -> (Option<&[u8]>, &[u8]);

impl<'a> KvArray<'a> {
    /// `len` elements encoded in `encoded`, taken apart by `split`.
    pub fn new(len: usize, encoded: &'a [u8], split: SplitElement) -> Self {
        KvArray {
            len,
            encoded,
            split,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements in order: a string's bytes, `None` for anything else.
    pub fn strings(&self) -> impl Iterator<Item = Option<&'a [u8]>> + 'a {
        let split = self.split;
        let mut rest = self.encoded;
        (0..self.len).map(move |_| {
            let (element, after) = split(rest);
            rest = after;
            element
        })
    }
}

impl std::fmt::Debug for KvArray<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.strings()).finish()
    }
}

impl PartialEq for KvArray<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.strings().eq(other.strings())
    }
}

impl Eq for KvArray<'_> {}

/// Which request a reply answers, and which socket read brought it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyAt {
    /// The request's position in the batch, in the order it was queued.
    pub index: usize,
    /// The flush's reads, counted from 0. Replies with the same `read`
    /// arrived together, so one clock reading times them all.
    pub read: u32,
}

/// Called with each reply of a flush, in request order.
pub type OnReply<'f> = dyn FnMut(ReplyAt, Result<KvReply<'_>, DriverError>) + 'f;

/// What a key-value connection can do beyond GET and SET, so workloads
/// that need more are refused before any connection is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KvCapabilities {
    /// Arbitrary commands (`--command 'hset __key__ f1 __data__'`).
    pub commands: bool,
}

impl KvCapabilities {
    /// For drivers outside the key-value family.
    pub const NONE: KvCapabilities = KvCapabilities { commands: false };
}

pub trait KvConn {
    fn queue_get(&mut self, key: &[u8]);

    fn queue_set(&mut self, key: &[u8], value: &[u8]);

    /// Queues the deletion of a key. The reply is [`KvReply::Done`] whether
    /// or not the key existed (Redis's DEL, memcached's `delete`).
    fn queue_delete(&mut self, key: &[u8]);

    /// Queues an arbitrary command given as its arguments. Drivers without
    /// [`KvCapabilities::commands`] return a fatal error.
    fn queue_command(&mut self, args: &[&[u8]]) -> Result<(), DriverError>;

    /// Sends everything queued and reads one reply per request, in order.
    /// `on_reply(at, reply)` is called as soon as each reply has been
    /// read, so the caller can time every request. A server-side error for
    /// one request (e.g. a wrong type) is passed to `on_reply`; an error
    /// that breaks the connection is returned, and the queue is cleared.
    async fn flush(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError>;
}
