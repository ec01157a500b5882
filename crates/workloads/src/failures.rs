//! Failed items of a batch request (a bulk's documents, a write's points,
//! a produce's rows), kept by reason until the request's time is recorded.

use loadcell_engine::Ctx;

/// Failed items of one request (a bulk's documents, a write's points),
/// by reason, repeats in a row counted once: a request may fail thousands
/// of items, so a reason is compared with the last one only.
#[derive(Default)]
pub(crate) struct Failures(Vec<(String, u64)>);

impl Failures {
    pub(crate) fn note(&mut self, reason: &str) {
        match self.0.last_mut() {
            Some((last, n)) if last == reason => *n += 1,
            _ => self.0.push((reason.to_string(), 1)),
        }
    }

    /// Records each failed item as an error of operation `kind`, of the
    /// class `class` gives its reason.
    pub(crate) fn record(&mut self, ctx: &mut Ctx, kind: usize, class: impl Fn(&str) -> &str) {
        for (reason, n) in self.0.drain(..) {
            for _ in 0..n {
                ctx.failed(kind, class(&reason), &reason);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_in_a_row_are_counted_once() {
        let mut f = Failures::default();
        for reason in ["a: x", "a: x", "b: y", "a: x"] {
            f.note(reason);
        }
        let noted = [("a: x", 2), ("b: y", 1), ("a: x", 1)];
        assert_eq!(f.0, noted.map(|(r, n)| (r.to_string(), n)));
    }
}
