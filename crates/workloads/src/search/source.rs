//! Where documents come from (a generator or a corpus file), and how a
//! bulk request's body is written from them into a session's buffer:
//! each document an action line and its source line, with nothing
//! allocated per document once the buffer has grown to a bulk's size.

use std::sync::Arc;

use super::corpus::Corpus;
use super::geonames::{self, Geonames};
use super::logs::{self, Logs};
use super::mix::{write_int, Mix};
use super::PREPARE_SEED;

/// The documents a run indexes.
#[derive(Debug, Clone)]
pub enum Source {
    Geonames(Arc<Geonames>),
    Logs(Arc<Logs>),
    Corpus(Arc<Corpus>),
}

impl Source {
    /// `geonames` or `logs`; `None` for another name.
    pub fn generator(name: &str) -> Option<Source> {
        match name {
            "geonames" => Some(Source::Geonames(Arc::new(Geonames::new()))),
            "logs" => Some(Source::Logs(Arc::new(Logs::new()))),
            _ => None,
        }
    }

    /// `geonames`, `logs` or `corpus`: what the default index is named after.
    pub fn name(&self) -> &'static str {
        match self {
            Source::Geonames(_) => "geonames",
            Source::Logs(_) => "logs",
            Source::Corpus(_) => "corpus",
        }
    }

    /// The generator's mapping; a corpus has none of its own (the server
    /// maps it dynamically unless `--mapping` gives one).
    pub fn mapping(&self) -> Option<&'static str> {
        match self {
            Source::Geonames(_) => Some(Geonames::mapping()),
            Source::Logs(_) => Some(Logs::mapping()),
            Source::Corpus(_) => None,
        }
    }

    /// How many documents there are to index: a corpus's lines; a
    /// generator has no end.
    pub fn documents(&self) -> Option<u64> {
        match self {
            Source::Corpus(c) => Some(c.documents()),
            _ => None,
        }
    }

    /// Writes document `n`'s source line (no newline).
    #[inline]
    pub fn write(&self, seed: u64, n: u64, out: &mut Vec<u8>) {
        match self {
            Source::Geonames(g) => g.write(seed, n, out),
            Source::Logs(l) => l.write(seed, n, out),
            Source::Corpus(c) => out.extend_from_slice(c.line(n)),
        }
    }

    /// The fields whose values a query can be given, for messages.
    fn value_fields(&self) -> &'static [&'static str] {
        match self {
            Source::Geonames(_) => geonames::VALUE_FIELDS,
            Source::Logs(_) => logs::VALUE_FIELDS,
            Source::Corpus(_) => &[],
        }
    }

    /// Values of `field` the documents hold, to fill queries with, or
    /// why there are none.
    pub fn values(&self, field: &str) -> Result<FieldValues, String> {
        match self {
            Source::Corpus(c) => Ok(FieldValues::Sampled(Arc::new(c.values(field, 10_000)?))),
            generated if generated.value_fields().contains(&field) => Ok(FieldValues::Generated {
                source: generated.clone(),
                field: field.to_string(),
            }),
            generated => Err(format!(
                "the {} generator has no values of field '{field}'; it has {}",
                generated.name(),
                generated.value_fields().join(", ")
            )),
        }
    }
}

/// Values of one field that indexed documents hold.
#[derive(Debug, Clone)]
pub enum FieldValues {
    /// Those of documents the generator makes: `search-query`'s
    /// `prepare` loads documents `0..n` made with its seed.
    Generated { source: Source, field: String },
    /// Read from the corpus file.
    Sampled(Arc<Vec<Box<[u8]>>>),
}

impl FieldValues {
    /// Writes one value into `out` (cleared first): a generated one is
    /// the value a document among the first `documents` that `prepare`
    /// loads (seed [`PREPARE_SEED`]) holds, so that a query for it hits
    /// however rare it is; documents indexed otherwise (another seed)
    /// still hold values from the same distribution.
    #[inline]
    pub(crate) fn draw(&self, mix: &mut Mix, documents: u64, out: &mut Vec<u8>) {
        out.clear();
        match self {
            FieldValues::Generated { source, field } => {
                let document = (PREPARE_SEED, mix.below(documents.max(1)));
                let known = match source {
                    Source::Geonames(g) => g.value(field, document, mix, out),
                    Source::Logs(l) => l.value(field, document, mix, out),
                    Source::Corpus(_) => false,
                };
                debug_assert!(known, "checked by Source::values");
            }
            FieldValues::Sampled(values) => {
                out.extend_from_slice(&values[mix.below(values.len() as u64) as usize])
            }
        }
    }
}

/// What a document's action is when `--id-conflicts` makes it reuse the
/// id of an earlier one (esrally's `on_conflict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    Index,
    Update,
}

/// esrally's `conflicts`: whether documents carry ids, and which earlier
/// id a conflicting one takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IdConflicts {
    /// No ids: the server makes one per document.
    None,
    /// Each conflict takes the id of the nearest earlier document that
    /// has its own.
    Sequential {
        percent: u64,
        on_conflict: OnConflict,
    },
    /// Each conflict takes the id of a random earlier document that has
    /// its own.
    Random {
        percent: u64,
        on_conflict: OnConflict,
    },
}

/// A seed's own stream for conflict draws, apart from the documents'.
const CONFLICT_STREAM: u64 = 0x636f_6e66_6c69_6374;

impl IdConflicts {
    /// The id document `n` is sent with, and whether it reuses an
    /// earlier document's. A document that has its own id (`n`) is never
    /// the target of no conflict before it: ids of conflicts always
    /// point back, to documents that have their own.
    #[inline]
    pub fn id(self, seed: u64, n: u64) -> (u64, bool) {
        let (percent, random) = match self {
            IdConflicts::None => return (n, false),
            IdConflicts::Sequential { percent, .. } => (percent, false),
            IdConflicts::Random { percent, .. } => (percent, true),
        };
        // Document k's stream, once it has said k is a conflict: its next
        // draw picks the random target.
        let conflict = |k: u64| {
            let mut mix = Mix::new(seed ^ CONFLICT_STREAM, k);
            (k > 0 && mix.chance(percent)).then_some(mix)
        };
        let mut target = n;
        while let Some(mut mix) = conflict(target) {
            target = if random {
                mix.below(target)
            } else {
                target - 1
            };
        }
        (target, target != n)
    }

    fn on_conflict(self) -> OnConflict {
        match self {
            IdConflicts::None => OnConflict::Index,
            IdConflicts::Sequential { on_conflict, .. }
            | IdConflicts::Random { on_conflict, .. } => on_conflict,
        }
    }
}

/// The field every document loadcell writes carries: the id of the run
/// (or `prepare`) that wrote it. What the check after a run counts (this
/// run's documents, not the index's), and what tells `cleanup` loadcell's
/// documents from another writer's.
pub const RUN_FIELD: &str = "loadcell_run";

/// Characters of a run's id: lowercase letters and digits, one token to
/// any analyzer, so that a `term` query finds it in a `keyword` field or
/// a dynamically mapped `text` one alike.
const RUN_ID_LEN: usize = 20;

/// A run's [`RUN_FIELD`], encoded once, written into each document.
#[derive(Debug, Clone)]
pub struct RunField {
    id: String,
    /// `"loadcell_run":"ID"}`, what replaces a document's closing brace
    /// (after a comma unless the object is empty).
    member: Vec<u8>,
}

impl RunField {
    /// A fresh run id, from the thread's generator (seeded by the OS).
    pub fn fresh() -> RunField {
        RunField::with_id(crate::prepare::marker::random_id(RUN_ID_LEN).to_ascii_lowercase())
    }

    fn with_id(id: String) -> RunField {
        let member = format!(r#""{RUN_FIELD}":"{id}"}}"#).into_bytes();
        RunField { id, member }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The `_count` query for this run's documents.
    pub fn query(&self) -> Vec<u8> {
        format!(r#"{{"query":{{"term":{{"{RUN_FIELD}":"{}"}}}}}}"#, self.id).into_bytes()
    }

    /// Adds the field to the JSON object written at `out[start..]` (a
    /// document's source): its closing brace becomes `,"loadcell_run":…}`.
    /// Anything that is not an object is left for the server to refuse.
    #[inline]
    pub fn append(&self, out: &mut Vec<u8>, start: usize) {
        let end = start + out[start..].trim_ascii_end().len();
        if end == start || out[end - 1] != b'}' {
            return;
        }
        out.truncate(end - 1);
        if !out[start..].trim_ascii_end().ends_with(b"{") {
            out.push(b',');
        }
        out.extend_from_slice(&self.member);
    }
}

/// The `_count` query for documents without a [`RUN_FIELD`]: those
/// loadcell did not write.
pub const FOREIGN_QUERY: &[u8] =
    br#"{"query":{"bool":{"must_not":{"exists":{"field":"loadcell_run"}}}}}"#;

/// How a run's bulk bodies are written: the index, the documents, and
/// the action lines, encoded once.
#[derive(Debug, Clone)]
pub struct BulkWriter {
    pub source: Source,
    pub conflicts: IdConflicts,
    pub run: RunField,
    /// `{"index":{"_index":"NAME"` and `{"update":{"_index":"NAME"`.
    index_action: Vec<u8>,
    update_action: Vec<u8>,
}

/// What one bulk body holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkContent {
    pub documents: u64,
    /// Documents with ids of their own (not reusing an earlier one's):
    /// each one more document in the index.
    pub own_ids: u64,
}

impl BulkWriter {
    pub fn new(index: &str, source: Source, conflicts: IdConflicts, run: RunField) -> BulkWriter {
        let action = |verb: &str| format!(r#"{{"{verb}":{{"_index":"{index}""#).into_bytes();
        BulkWriter {
            source,
            conflicts,
            run,
            index_action: action("index"),
            update_action: action("update"),
        }
    }

    /// Writes documents `range` into `out` (cleared first).
    #[inline]
    pub fn write(&self, seed: u64, range: std::ops::Range<u64>, out: &mut Vec<u8>) -> BulkContent {
        out.clear();
        let mut content = BulkContent::default();
        for n in range {
            content.documents += 1;
            if self.conflicts == IdConflicts::None {
                content.own_ids += 1;
                out.extend_from_slice(&self.index_action);
                out.extend_from_slice(b"}}\n");
                self.write_source(seed, n, out);
                out.push(b'\n');
                continue;
            }
            let (id, reused) = self.conflicts.id(seed, n);
            content.own_ids += u64::from(!reused);
            let update = reused && self.conflicts.on_conflict() == OnConflict::Update;
            out.extend_from_slice(if update {
                &self.update_action
            } else {
                &self.index_action
            });
            out.extend_from_slice(b",\"_id\":\"");
            write_int(out, id);
            out.extend_from_slice(b"\"}}\n");
            if update {
                out.extend_from_slice(b"{\"doc\":");
                self.write_source(seed, n, out);
                out.extend_from_slice(b"}\n");
            } else {
                self.write_source(seed, n, out);
                out.push(b'\n');
            }
        }
        content
    }

    /// Document `n`'s source, with the run's field.
    #[inline]
    fn write_source(&self, seed: u64, n: u64, out: &mut Vec<u8>) {
        let start = out.len();
        self.source.write(seed, n, out);
        self.run.append(out, start);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::Value;

    use super::*;

    fn lines(body: &[u8]) -> Vec<Value> {
        let text = std::str::from_utf8(body).unwrap();
        assert!(text.ends_with('\n'));
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Average source size over `n` documents, checking each is JSON.
    fn average_size(source: &Source, n: u64) -> f64 {
        let writer = BulkWriter::new("i", source.clone(), IdConflicts::None, RunField::fresh());
        let mut body = Vec::new();
        writer.write(7, 0..n, &mut body);
        let docs = lines(&body);
        assert_eq!(docs.len() as u64, 2 * n);
        let action_len = br#"{"index":{"_index":"i"}}"#.len() + 1;
        let run_field_len = writer.run.member.len();
        (body.len() as f64 / n as f64) - (action_len + run_field_len) as f64 - 1.0
    }

    #[test]
    fn every_document_carries_the_run_field() {
        let run = RunField::with_id("abc123".to_string());
        // A document written after the action line before it.
        let tagged = |doc: &str| {
            let mut out = b"{\"index\":{}}\n".to_vec();
            let start = out.len();
            out.extend_from_slice(doc.as_bytes());
            run.append(&mut out, start);
            String::from_utf8(out[start..].to_vec()).unwrap()
        };
        assert_eq!(tagged(r#"{"a":{}}"#), r#"{"a":{},"loadcell_run":"abc123"}"#);
        assert_eq!(tagged("{ }\r "), r#"{ "loadcell_run":"abc123"}"#);
        assert_eq!(tagged("[1]"), "[1]", "not an object: left as it is");
        assert_eq!(
            String::from_utf8(run.query()).unwrap(),
            r#"{"query":{"term":{"loadcell_run":"abc123"}}}"#
        );
        let fresh = RunField::fresh();
        assert!(fresh
            .id()
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        // In a bulk body, indexed and updated documents alike.
        let conflicts = IdConflicts::Sequential {
            percent: 50,
            on_conflict: OnConflict::Update,
        };
        let writer = BulkWriter::new("i", Source::generator("logs").unwrap(), conflicts, fresh);
        let mut body = Vec::new();
        writer.write(1, 0..200, &mut body);
        for pair in lines(&body).chunks(2) {
            let doc = pair[1].get("doc").unwrap_or(&pair[1]);
            assert_eq!(doc[RUN_FIELD], writer.run.id(), "{doc}");
        }
    }

    #[test]
    fn geonames_documents_have_the_tracks_fields_and_size() {
        let source = Source::generator("geonames").unwrap();
        let size = average_size(&source, 20_000);
        assert!(
            (280.0..345.0).contains(&size),
            "average {size} bytes, esrally's 311"
        );
        let mut out = Vec::new();
        source.write(1, 0, &mut out);
        let doc: Value = serde_json::from_slice(&out).unwrap();
        for field in [
            "geonameid",
            "name",
            "asciiname",
            "feature_class",
            "feature_code",
            "country_code",
            "admin1_code",
            "population",
            "dem",
            "timezone",
        ] {
            assert!(doc.get(field).is_some(), "{field} in {doc}");
        }
        assert_eq!(doc["location"].as_array().unwrap().len(), 2);
        // Every field a document holds is in the mapping, which is strict.
        let mapping: Value = serde_json::from_str(source.mapping().unwrap()).unwrap();
        let mut out = Vec::new();
        for n in 0..2000 {
            out.clear();
            source.write(3, n, &mut out);
            let doc: Value = serde_json::from_slice(&out).unwrap();
            for key in doc.as_object().unwrap().keys() {
                assert!(mapping["properties"].get(key).is_some(), "{key}");
            }
        }
    }

    #[test]
    fn a_few_countries_hold_most_places() {
        let source = Source::generator("geonames").unwrap();
        let mut out = Vec::new();
        let mut us = 0;
        for n in 0..10_000 {
            out.clear();
            source.write(5, n, &mut out);
            let doc: Value = serde_json::from_slice(&out).unwrap();
            us += usize::from(doc["country_code"] == "US");
        }
        assert!((1500..2300).contains(&us), "{us} of 10000 in the US");
    }

    #[test]
    fn log_documents_are_about_1_4_kb_of_json() {
        let source = Source::generator("logs").unwrap();
        let size = average_size(&source, 5000);
        assert!((1300.0..1500.0).contains(&size), "average {size} bytes");
        let mut out = Vec::new();
        source.write(1, 10, &mut out);
        let doc: Value = serde_json::from_slice(&out).unwrap();
        assert!(doc["@timestamp"]
            .as_str()
            .unwrap()
            .starts_with("2026-01-01T00:00:00."));
        let message = doc["message"].as_str().unwrap();
        assert!(
            message.contains(doc["url"]["path"].as_str().unwrap()),
            "{message}"
        );
        assert!(doc["http"]["response"]["status_code"].is_u64());
    }

    #[test]
    fn documents_follow_the_seed_and_their_number_alone() {
        for name in ["geonames", "logs"] {
            let source = Source::generator(name).unwrap();
            let writer = BulkWriter::new("i", source, IdConflicts::None, RunField::fresh());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            writer.write(1, 0..100, &mut a);
            // Two sessions' ranges make the same bulk, in any order.
            let mut second = Vec::new();
            writer.write(1, 50..100, &mut second);
            writer.write(1, 0..50, &mut b);
            b.extend_from_slice(&second);
            assert_eq!(a, b, "{name}");
            writer.write(2, 0..100, &mut b);
            assert_ne!(a, b, "{name}: another seed, other documents");
        }
    }

    #[test]
    fn conflicting_ids_point_back_to_documents_with_their_own() {
        for conflicts in [
            IdConflicts::Sequential {
                percent: 25,
                on_conflict: OnConflict::Update,
            },
            IdConflicts::Random {
                percent: 25,
                on_conflict: OnConflict::Index,
            },
        ] {
            let writer = BulkWriter::new(
                "i",
                Source::generator("geonames").unwrap(),
                conflicts,
                RunField::fresh(),
            );
            let mut body = Vec::new();
            let content = writer.write(9, 0..4000, &mut body);
            assert_eq!(content.documents, 4000);
            assert!((2800..3200).contains(&content.own_ids), "{content:?}");
            let docs = lines(&body);
            let mut own = std::collections::HashSet::new();
            for pair in docs.chunks(2) {
                let (verb, action) = pair[0].as_object().unwrap().iter().next().unwrap();
                let id: u64 = action["_id"].as_str().unwrap().parse().unwrap();
                match verb.as_str() {
                    "update" => assert!(pair[1].get("doc").is_some()),
                    _ => assert!(pair[1].get("geonameid").is_some()),
                }
                own.insert(id);
            }
            assert_eq!(own.len() as u64, content.own_ids, "distinct ids = own ids");
        }
    }

    #[test]
    fn generating_takes_well_under_a_microsecond_a_document() {
        for name in ["geonames", "logs"] {
            let writer = BulkWriter::new(
                "i",
                Source::generator(name).unwrap(),
                IdConflicts::None,
                RunField::fresh(),
            );
            let mut body = Vec::new();
            writer.write(1, 0..5000, &mut body);
            let capacity = body.capacity();
            let start = Instant::now();
            let rounds = 20u64;
            for r in 0..rounds {
                writer.write(1, r * 5000..(r + 1) * 5000, &mut body);
            }
            let ns = start.elapsed().as_nanos() as f64 / (rounds * 5000) as f64;
            println!("{name}: {ns:.0} ns a document (no timing assertion)");
            assert!(body.capacity() <= capacity * 2, "the buffer is reused");
        }
    }
}
