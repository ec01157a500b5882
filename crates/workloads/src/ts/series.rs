//! The series space `ts-ingest` writes and `ts-query` reads, and the
//! values written: everything is a function of the series' index (and
//! the seed, for values), so nothing is stored and `verify` can recompute
//! what any series was sent.
//!
//! A series is a measurement and its tags. Each tag's value is a string
//! of exactly `--tag-length` characters: a prefix of letters fixed by the
//! tag's key, then a number in base 36, zero-padded. The first tag's
//! number is the series index itself (so series are distinct); each other
//! tag's is the index modulo the tag's cardinality (TSBS's region, rack,
//! os: few values, for group-by queries). The names do not depend on the
//! seed, so `ts-query` finds what any `ts-ingest` wrote.

/// Base 36, lowercase: what a tag value's number is written in.
const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// A measurement, the tags it adds to its series' and its float fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measurement {
    pub name: String,
    pub tags: Vec<MeasurementTag>,
    pub fields: Vec<String>,
}

/// A tag a measurement adds to the series' (TSBS's devops: disk's `path`
/// and `fstype`, net's `interface`): each series takes one of `values`,
/// drawn by a hash of its index and the key, the same in every run. A
/// function of the series, so a measurement still has one series per
/// series of the space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasurementTag {
    pub key: String,
    values: Vec<String>,
    /// The key's hash, so that tags with as many values draw differently.
    salt: u64,
}

impl MeasurementTag {
    pub fn new(key: &str, values: Vec<String>) -> MeasurementTag {
        assert!(!values.is_empty(), "a tag takes at least one value");
        MeasurementTag {
            key: key.to_string(),
            values,
            salt: fnv1a(key),
        }
    }

    /// `series`' value.
    #[inline]
    pub fn value(&self, series: u64) -> &str {
        &self.values[(mix(series ^ self.salt) % self.values.len() as u64) as usize]
    }

    /// The longest value's length.
    pub fn longest(&self) -> usize {
        self.values.iter().map(String::len).max().unwrap_or(0)
    }
}

/// One tag: its key, and the fixed part of its values.
#[derive(Debug, Clone)]
struct Tag {
    key: String,
    /// Distinct values; `None`: one per series (the series index).
    cardinality: Option<u64>,
    /// Characters of the number; the rest of `--tag-length` is prefix.
    digits: usize,
}

/// The series of a run: `series` of them, each with a point per
/// measurement per round.
#[derive(Debug, Clone)]
pub struct SeriesSpace {
    pub measurements: Vec<Measurement>,
    tags: Vec<Tag>,
    pub tag_length: usize,
    pub series: u64,
}

/// Characters `n` takes in base 36.
fn base36_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 36 {
        n /= 36;
        len += 1;
    }
    len
}

/// A prefix of `len` letters fixed by `key` (FNV-1a of the key, then a
/// step of splitmix64 per letter): the same for every run.
fn prefix(key: &str, len: usize) -> impl Iterator<Item = u8> {
    let mut h = fnv1a(key);
    (0..len).map(move |_| {
        h = mix(h);
        b'a' + (h % 26) as u8
    })
}

/// FNV-1a of `key`.
fn fnv1a(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// splitmix64's finalizer: a cheap, well-spread hash of a 64-bit word.
#[inline]
fn mix(z: u64) -> u64 {
    let z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SeriesSpace {
    /// `tags` are keys and cardinalities, the first carrying the series
    /// index whatever its cardinality says. Refuses a space whose tag
    /// values cannot hold their numbers in `tag_length` characters.
    pub fn new(
        measurements: Vec<Measurement>,
        tags: &[(&str, Option<u64>)],
        tag_length: usize,
        series: u64,
    ) -> Result<SeriesSpace, String> {
        if series == 0 {
            return Err("--series must be at least 1".to_string());
        }
        if tags.is_empty() {
            return Err("--tags must be at least 1: the first tag tells series apart".to_string());
        }
        let tags = tags
            .iter()
            .enumerate()
            .map(|(i, &(key, cardinality))| {
                let cardinality = cardinality.filter(|_| i > 0);
                let largest = cardinality.map_or(series, |c| c.min(series)) - 1;
                Tag {
                    key: key.to_string(),
                    cardinality,
                    digits: base36_len(largest),
                }
            })
            .collect::<Vec<_>>();
        // Other tags have no more values than the first: it needs the most digits.
        let need = tags[0].digits;
        if need > tag_length {
            return Err(format!(
                "--series {series} is more than tag values of {tag_length} characters can tell apart \
                 (their numbers need {need} base-36 digits): raise --tag-length"
            ));
        }
        Ok(SeriesSpace {
            measurements,
            tags,
            tag_length,
            series,
        })
    }

    pub fn tag_count(&self) -> usize {
        self.tags.len()
    }

    pub fn tag_key(&self, tag: usize) -> &str {
        &self.tags[tag].key
    }

    /// The tag with the fewest values beyond the first (the one a
    /// group-by groups on), or the first if there is no other.
    pub fn group_tag(&self) -> usize {
        (1..self.tags.len())
            .min_by_key(|&t| self.tags[t].cardinality)
            .unwrap_or(0)
    }

    /// A buffer for one series' tag values, the prefixes written:
    /// [`SeriesSpace::write_tags`] fills in the numbers.
    pub fn tag_buffer(&self) -> Vec<u8> {
        let mut buffer = Vec::with_capacity(self.tags.len() * self.tag_length);
        for t in &self.tags {
            buffer.extend(prefix(&t.key, self.tag_length - t.digits));
            buffer.resize(buffer.len() + t.digits, b'0');
        }
        buffer
    }

    /// Writes `series`' numbers into `buffer` (from [`SeriesSpace::tag_buffer`]).
    #[inline]
    pub fn write_tags(&self, series: u64, buffer: &mut [u8]) {
        for (t, value) in self
            .tags
            .iter()
            .zip(buffer.chunks_exact_mut(self.tag_length))
        {
            let mut n = t.cardinality.map_or(series, |c| series % c);
            for digit in value.iter_mut().rev().take(t.digits) {
                *digit = DIGITS[(n % 36) as usize];
                n /= 36;
            }
        }
    }

    /// Tag `tag`'s value in `buffer`.
    #[inline]
    pub fn tag_value<'a>(&self, buffer: &'a [u8], tag: usize) -> &'a str {
        let value = &buffer[tag * self.tag_length..(tag + 1) * self.tag_length];
        std::str::from_utf8(value).expect("tag values are ASCII")
    }

    /// The keys and values of the series whose tags `buffer` holds.
    pub fn tags<'a>(&'a self, buffer: &'a [u8]) -> impl Iterator<Item = (&'a str, &'a str)> {
        (0..self.tags.len()).map(move |t| (self.tag_key(t), self.tag_value(buffer, t)))
    }

    /// Fields across all measurements before measurement `m`'s: a field's
    /// number in [`Values`].
    pub fn first_field(&self, m: usize) -> u64 {
        self.measurements[..m]
            .iter()
            .map(|m| m.fields.len() as u64)
            .sum()
    }
}

/// The values written: a point's fields from the seed, the series, the
/// field's number across measurements and the point's number in its
/// series. Each is a uniform value in 0..100 with two decimals (TSBS's
/// cpu-only usage percentages span the same), computed in O(1), so that
/// `verify` recomputes a series' last value without any state.
#[derive(Debug, Clone, Copy)]
pub struct Values {
    seed: u64,
}

impl Values {
    pub fn new(seed: u64) -> Values {
        Values { seed }
    }

    /// What point `point` of `series` holds: call [`PointValues::field`] per field.
    #[inline]
    pub fn point(&self, series: u64, point: u64) -> PointValues {
        PointValues(mix(
            mix(self.seed ^ series.wrapping_mul(0x9e37_79b9)) ^ point
        ))
    }
}

/// One point's values (see [`Values`]).
#[derive(Debug, Clone, Copy)]
pub struct PointValues(u64);

impl PointValues {
    #[inline]
    pub fn field(self, field: u64) -> f64 {
        (mix(self.0 ^ field) % 10_000) as f64 / 100.0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn space(series: u64, tag_length: usize) -> Result<SeriesSpace, String> {
        let cpu = Measurement {
            name: "cpu".to_string(),
            tags: Vec::new(),
            fields: vec!["usage_user".to_string()],
        };
        SeriesSpace::new(
            vec![cpu],
            &[("hostname", None), ("region", Some(9)), ("rack", Some(100))],
            tag_length,
            series,
        )
    }

    fn tags_of(space: &SeriesSpace, series: u64) -> Vec<String> {
        let mut buffer = space.tag_buffer();
        space.write_tags(series, &mut buffer);
        space
            .tags(&buffer)
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    #[test]
    fn tag_values_have_the_fixed_length_and_tell_series_apart() {
        let s = space(5000, 10).unwrap();
        let mut seen = HashSet::new();
        let mut buffer = s.tag_buffer();
        for series in 0..5000 {
            s.write_tags(series, &mut buffer);
            for t in 0..s.tag_count() {
                assert_eq!(s.tag_value(&buffer, t).len(), 10);
            }
            assert!(seen.insert(s.tag_value(&buffer, 0).to_string()));
        }
        // Other tags take the index modulo their cardinality.
        let regions: HashSet<_> = (0..5000).map(|i| tags_of(&s, i)[1].clone()).collect();
        assert_eq!(regions.len(), 9);
        // The same names in any run: they do not depend on the seed.
        assert_eq!(tags_of(&s, 4999), tags_of(&space(5000, 10).unwrap(), 4999));
        let last = &tags_of(&s, 4999)[0];
        assert!(
            last.starts_with("hostname=") && last.ends_with("3uv"),
            "{last}"
        );
    }

    #[test]
    fn a_series_count_the_tag_length_cannot_express_is_refused() {
        assert!(space(36 * 36, 2).is_ok());
        let e = space(36 * 36 + 1, 2).unwrap_err();
        assert!(
            e.starts_with("--series 1297 is more than tag values of 2 characters"),
            "{e}"
        );
        let e = space(1000, 1).unwrap_err();
        assert!(e.starts_with("--series 1000"), "{e}");
        assert_eq!(space(0, 10).unwrap_err(), "--series must be at least 1");
        // rack's 100 values need 2 characters; with 36 series, only 1.
        assert!(space(36, 1).is_ok());
    }

    #[test]
    fn values_are_recomputed_from_the_seed_series_field_and_point() {
        let (a, b) = (Values::new(7), Values::new(8));
        let v = a.point(12, 3).field(1);
        assert_eq!(v, Values::new(7).point(12, 3).field(1));
        assert!((0.0..100.0).contains(&v));
        assert_eq!((v * 100.0).round() / 100.0, v);
        let all: HashSet<u64> = (0..100)
            .flat_map(|p| (0..4).map(move |f| a.point(12, p).field(f).to_bits()))
            .collect();
        assert!(all.len() > 300, "values vary by point and field");
        let seeds_differ = (0..20).any(|p| a.point(1, p).field(0) != b.point(1, p).field(0));
        assert!(seeds_differ);
    }
}
