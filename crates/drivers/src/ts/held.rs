//! A point held between [`TsConn::point`](loadcell_core::ts::TsConn::point)
//! and `end_point` for the protocols that write one series per field
//! (OpenTSDB, remote write): its text back to back in one reused buffer,
//! its tags and fields as offsets into it.

use std::ops::Range;

#[derive(Debug, Default)]
pub(super) struct HeldPoint {
    /// The measurement, then each tag's key and value and each field's
    /// key, as given.
    text: Vec<u8>,
    measurement_end: usize,
    /// Each tag's key and value in `text`.
    tags: Vec<(Range<usize>, Range<usize>)>,
    /// Each field's key in `text`, and its value.
    fields: Vec<(Range<usize>, f64)>,
}

impl HeldPoint {
    pub(super) fn start(&mut self, measurement: &str) {
        self.text.clear();
        self.tags.clear();
        self.fields.clear();
        self.text.extend_from_slice(measurement.as_bytes());
        self.measurement_end = self.text.len();
    }

    pub(super) fn tag(&mut self, key: &str, value: &str) {
        let key = self.append(key);
        let value = self.append(value);
        self.tags.push((key, value));
    }

    pub(super) fn field(&mut self, key: &str, value: f64) {
        let key = self.append(key);
        self.fields.push((key, value));
    }

    fn append(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.extend_from_slice(s.as_bytes());
        start..self.text.len()
    }

    pub(super) fn measurement(&self) -> &[u8] {
        &self.text[..self.measurement_end]
    }

    /// Orders the tags by key, bytewise (as Prometheus wants its labels).
    pub(super) fn sort_tags(&mut self) {
        let text = &self.text;
        self.tags
            .sort_unstable_by(|a, b| text[a.0.clone()].cmp(&text[b.0.clone()]));
    }

    pub(super) fn tags(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.tags
            .iter()
            .map(|(k, v)| (&self.text[k.clone()], &self.text[v.clone()]))
    }

    pub(super) fn fields(&self) -> impl Iterator<Item = (&[u8], f64)> {
        self.fields.iter().map(|(k, v)| (&self.text[k.clone()], *v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_held_in_reused_buffers_with_its_tags_sortable() {
        let mut p = HeldPoint::default();
        for _ in 0..2 {
            p.start("cpu");
            p.tag("host", "a");
            p.tag("dc", "x");
            p.field("usage", 1.5);
            p.sort_tags();
        }
        assert_eq!(p.measurement(), b"cpu");
        let tags: Vec<_> = p.tags().collect();
        assert_eq!(tags, [(&b"dc"[..], &b"x"[..]), (&b"host"[..], &b"a"[..])]);
        assert_eq!(p.fields().collect::<Vec<_>>(), [(&b"usage"[..], 1.5)]);
        let capacity = p.text.capacity();
        p.start("mem");
        p.tag("host", "b");
        assert_eq!(p.text.capacity(), capacity, "no new allocation");
    }
}
