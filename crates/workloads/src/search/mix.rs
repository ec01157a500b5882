//! The random numbers of one generated document: a SplitMix64 stream
//! started from the run's seed and the document's number, so that any
//! session can make document `n` alone, the same every time, without a
//! generator shared with the others.

/// A SplitMix64 stream (Steele, Lea and Flood's, as Java's
/// `SplittableRandom`): a few arithmetic instructions per number.
pub(crate) struct Mix(u64);

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl Mix {
    /// The stream of document `n` under `seed`.
    #[inline]
    pub(crate) fn new(seed: u64, n: u64) -> Mix {
        let mut mix = Mix(seed ^ n.wrapping_mul(GOLDEN).rotate_left(17));
        mix.next();
        mix
    }

    #[inline]
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0), by Lemire's multiply-shift.
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }

    /// In `0..n`, skewed toward 0: the square of a uniform fraction, so
    /// the first tenth of the range takes about a third of the draws, as
    /// a few names and places take much of a real corpus.
    #[inline]
    pub(crate) fn skewed(&mut self, n: u64) -> u64 {
        let u = self.next() >> 32;
        (((u * u) >> 32) * n) >> 32
    }

    /// True with probability `percent` / 100.
    #[inline]
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items`, by the running sums of their weights (`cumulative`,
    /// ascending, the last the total).
    #[inline]
    pub(crate) fn weighted(&mut self, cumulative: &[u32]) -> usize {
        let x = self.below(u64::from(cumulative[cumulative.len() - 1])) as u32;
        cumulative.partition_point(|&s| s <= x)
    }
}

/// The running sums of `weights`, for [`Mix::weighted`].
pub(crate) fn cumulative(weights: impl Iterator<Item = u32>) -> Vec<u32> {
    weights
        .scan(0, |sum, w| {
            *sum += w;
            Some(*sum)
        })
        .collect()
}

/// Writes `value / 10^decimals` with exactly `decimals` digits after the
/// point (`-118.24368`), without going through a float's formatting.
#[inline]
pub(crate) fn write_fixed(out: &mut Vec<u8>, value: i64, decimals: u32) {
    if value < 0 {
        out.push(b'-');
    }
    let scale = 10u64.pow(decimals);
    let abs = value.unsigned_abs();
    out.extend_from_slice(itoa::Buffer::new().format(abs / scale).as_bytes());
    out.push(b'.');
    let mut frac = itoa::Buffer::new();
    let digits = frac.format(abs % scale + scale).as_bytes();
    out.extend_from_slice(&digits[1..]);
}

/// Writes `n` in decimal.
#[inline]
pub(crate) fn write_int(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Writes `n` with at least `width` digits, zero-padded.
#[inline]
pub(crate) fn write_padded(out: &mut Vec<u8>, n: u64, width: usize) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(n);
    out.extend(std::iter::repeat_n(
        b'0',
        width.saturating_sub(digits.len()),
    ));
    out.extend_from_slice(digits.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_follow_seed_and_number() {
        let draws = |seed, n| {
            let mut m = Mix::new(seed, n);
            [m.next(), m.next()]
        };
        assert_eq!(draws(1, 5), draws(1, 5));
        assert_ne!(draws(1, 5), draws(1, 6));
        assert_ne!(draws(1, 5), draws(2, 5));
        let mut m = Mix::new(3, 0);
        let low = (0..10_000).filter(|_| m.skewed(100) < 10).count();
        assert!(
            (2500..4000).contains(&low),
            "{low} of 10000 in the first tenth"
        );
        let sums = cumulative([1u32, 0, 9].into_iter());
        let picks: Vec<usize> = (0..1000).map(|_| m.weighted(&sums)).collect();
        assert!(!picks.contains(&1), "a weight of 0 is never picked");
        let first = picks.iter().filter(|&&p| p == 0).count();
        assert!((50..160).contains(&first), "{first}");
    }

    #[test]
    fn numbers_are_written_exactly() {
        let mut out = Vec::new();
        write_fixed(&mut out, -118_243_680, 6);
        out.push(b' ');
        write_fixed(&mut out, 5_007, 5);
        out.push(b' ');
        write_padded(&mut out, 37, 3);
        assert_eq!(out, b"-118.243680 0.05007 037");
    }
}
