//! The rows producers write: the report's shape, four key columns and a
//! payload, `--row-size` bytes in [`RowCodec`]'s layout, their keys drawn
//! from the run's seed and their channel from a hash of the keys.

use loadcell_core::stream::{RowCodec, StreamRow};

/// Lengths of the four key columns: a user id, a region, an order id, an
/// item, as hexadecimal digits.
pub const KEY_LENGTHS: [usize; 4] = [12, 8, 16, 8];

/// The smallest row: the fixed fields and the keys, no payload.
pub fn fixed_size() -> usize {
    const NO_KEY: &[u8] = &[0; 16];
    let keys = KEY_LENGTHS.map(|len| &NO_KEY[..len]);
    RowCodec::encoded_len(&StreamRow {
        channel: 0,
        seq: 0,
        produced_ns: 0,
        origin: 0,
        keys,
        payload: &[],
    })
}

/// SplitMix64: a well-mixed 64-bit hash of `x`.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Makes a session's rows: its keys rewritten in place for each row, its
/// payload made once.
#[derive(Debug)]
pub struct RowMaker {
    seed: u64,
    made: u64,
    keys: [u8; KEY_LENGTHS[0] + KEY_LENGTHS[1] + KEY_LENGTHS[2] + KEY_LENGTHS[3]],
    payload: Vec<u8>,
}

/// One made row's columns and its partition key's hash.
pub struct Made<'a> {
    pub hash: u64,
    pub keys: [&'a [u8]; 4],
    pub payload: &'a [u8],
}

impl RowMaker {
    /// Rows of `row_size` bytes (at least [`fixed_size`]), the same for the
    /// same `seed`.
    pub fn new(seed: u64, row_size: usize) -> RowMaker {
        let payload = (0..row_size.saturating_sub(fixed_size()) as u64)
            .map(|i| b'a' + (mix(seed ^ i) % 26) as u8)
            .collect();
        RowMaker {
            seed,
            made: 0,
            keys: [0; 44],
            payload,
        }
    }

    /// The next row's columns.
    pub fn next_row(&mut self) -> Made<'_> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let row = mix(self.seed ^ mix(self.made));
        self.made += 1;
        let mut at = 0;
        let mut hash = 0;
        for (k, len) in KEY_LENGTHS.into_iter().enumerate() {
            let mut value = mix(row.wrapping_add(k as u64));
            hash ^= value.rotate_left(k as u32 * 16);
            for byte in &mut self.keys[at..at + len] {
                *byte = HEX[(value & 15) as usize];
                value = value.rotate_right(4);
            }
            at += len;
        }
        let (user, rest) = self.keys.split_at(KEY_LENGTHS[0]);
        let (region, rest) = rest.split_at(KEY_LENGTHS[1]);
        let (order, item) = rest.split_at(KEY_LENGTHS[2]);
        Made {
            hash: mix(hash),
            keys: [user, region, order, item],
            payload: &self.payload,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(maker: &mut RowMaker) -> (u64, Vec<u8>) {
        let made = maker.next_row();
        let row = StreamRow {
            channel: 3,
            seq: 9,
            produced_ns: 1,
            origin: 2,
            keys: made.keys,
            payload: made.payload,
        };
        let mut bytes = Vec::new();
        RowCodec::encode(&row, &mut bytes);
        (made.hash, bytes)
    }

    #[test]
    fn rows_are_the_size_asked_and_the_same_for_a_seed() {
        assert_eq!(fixed_size(), 84);
        for size in [fixed_size(), 220, 1000] {
            let (_, bytes) = encoded(&mut RowMaker::new(7, size));
            assert_eq!(bytes.len(), size);
        }
        let (mut a, mut b, mut c) = (
            RowMaker::new(7, 220),
            RowMaker::new(7, 220),
            RowMaker::new(8, 220),
        );
        let first: Vec<_> = (0..50).map(|_| encoded(&mut a)).collect();
        let again: Vec<_> = (0..50).map(|_| encoded(&mut b)).collect();
        let other: Vec<_> = (0..50).map(|_| encoded(&mut c)).collect();
        assert_eq!(first, again);
        assert_ne!(first, other);
        // Rows differ from one another, and their hashes spread.
        assert_ne!(first[0].1, first[1].1);
        let channels: std::collections::HashSet<u64> =
            first.iter().map(|(hash, _)| hash % 8).collect();
        assert_eq!(channels.len(), 8);
    }
}
