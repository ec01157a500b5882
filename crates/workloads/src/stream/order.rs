//! The consumer's check of each channel's order. Producers number a
//! channel's rows from 0, one producer session per channel in a run, so
//! within a channel the rows of one origin (one run on one host) must come
//! as `last + 1`: the first seen sets the base, a lower one already seen
//! is a duplicate, one below the base a reorder, a higher one a gap.

/// What a row's sequence number says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The first row of its channel and origin seen (since a reset).
    First,
    /// `last + 1`.
    Next,
    /// At or below the last seen and not below the base: seen already.
    Duplicate,
    /// Below the first seen: a row that came after later ones.
    Reorder,
    /// Past `last + 1`: `missing` rows never came.
    Gap { missing: u64 },
    /// Past `last + 1` where other consumers share the channel: `rows`
    /// went to them.
    Skipped { rows: u64 },
    /// A channel beyond the stream's.
    NoSuchChannel,
}

#[derive(Debug, Clone, Copy)]
struct Track {
    origin: u64,
    base: u64,
    last: u64,
}

/// Per channel, per origin, the first and last sequence number seen.
#[derive(Debug)]
pub struct OrderChecker {
    channels: Vec<Vec<Track>>,
    /// This consumer gets every row of its channels: a jump is a gap (an
    /// error); else it is rows other consumers took.
    exclusive: bool,
}

impl OrderChecker {
    pub fn new(channels: u32, exclusive: bool) -> OrderChecker {
        OrderChecker {
            channels: vec![Vec::new(); channels as usize],
            exclusive,
        }
    }

    /// Forgets every channel: order is checked afresh from each channel's
    /// next row (its channels were reassigned).
    pub fn reset(&mut self) {
        self.channels.iter_mut().for_each(Vec::clear);
    }

    pub fn check(&mut self, channel: u32, origin: u64, seq: u64) -> Verdict {
        let Some(tracks) = self.channels.get_mut(channel as usize) else {
            return Verdict::NoSuchChannel;
        };
        let Some(track) = tracks.iter_mut().find(|t| t.origin == origin) else {
            tracks.push(Track {
                origin,
                base: seq,
                last: seq,
            });
            return Verdict::First;
        };
        let next = track.last + 1;
        if seq == next {
            track.last = seq;
            Verdict::Next
        } else if seq > next {
            track.last = seq;
            let rows = seq - next;
            if self.exclusive {
                Verdict::Gap { missing: rows }
            } else {
                Verdict::Skipped { rows }
            }
        } else if seq >= track.base {
            Verdict::Duplicate
        } else {
            Verdict::Reorder
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_channel_and_origin_goes_up_by_one() {
        let mut c = OrderChecker::new(2, true);
        assert_eq!(c.check(0, 1, 5), Verdict::First);
        assert_eq!(c.check(0, 1, 6), Verdict::Next);
        // Another channel, another origin: their own bases.
        assert_eq!(c.check(1, 1, 0), Verdict::First);
        assert_eq!(c.check(0, 2, 100), Verdict::First);
        assert_eq!(c.check(0, 1, 7), Verdict::Next);
        assert_eq!(c.check(0, 2, 101), Verdict::Next);
        assert_eq!(c.check(2, 1, 0), Verdict::NoSuchChannel);
    }

    #[test]
    fn gaps_duplicates_and_reorders_are_told_apart() {
        let mut c = OrderChecker::new(1, true);
        c.check(0, 1, 10);
        c.check(0, 1, 11);
        assert_eq!(c.check(0, 1, 11), Verdict::Duplicate);
        assert_eq!(c.check(0, 1, 10), Verdict::Duplicate);
        assert_eq!(c.check(0, 1, 9), Verdict::Reorder);
        assert_eq!(c.check(0, 1, 15), Verdict::Gap { missing: 3 });
        // The order goes on from the row after the gap.
        assert_eq!(c.check(0, 1, 16), Verdict::Next);
    }

    #[test]
    fn a_shared_channel_skips_and_a_reassignment_starts_afresh() {
        let mut shared = OrderChecker::new(1, false);
        shared.check(0, 1, 0);
        assert_eq!(shared.check(0, 1, 4), Verdict::Skipped { rows: 3 });
        let mut c = OrderChecker::new(1, true);
        c.check(0, 1, 50);
        c.reset();
        // Rows claimed from a consumer that died come from further back.
        assert_eq!(c.check(0, 1, 20), Verdict::First);
        assert_eq!(c.check(0, 1, 21), Verdict::Next);
    }
}
