use std::cell::RefCell;

use loadcell_core::search::{BulkOutcome, SearchOutcome};

use super::*;

/// An index server in memory: indices by name, each its `_meta` text
/// and document count.
#[derive(Default)]
struct Indices {
    indices: BTreeMap<String, (String, u64)>,
}

impl SearchConn for Indices {
    async fn bulk(
        &mut self,
        index: &str,
        body: &[u8],
        _on_failure: &mut dyn FnMut(&str),
    ) -> Result<BulkOutcome, DriverError> {
        let items = body.iter().filter(|&&b| b == b'\n').count() as u64 / 2;
        self.indices.get_mut(index).expect("created").1 += items;
        Ok(BulkOutcome {
            items,
            failed: 0,
            dropped: 0,
        })
    }

    async fn search(&mut self, _: &str, _: &[u8]) -> Result<SearchOutcome, DriverError> {
        Ok(SearchOutcome { hits: 1 })
    }

    async fn create_index(&mut self, index: &str, body: &[u8]) -> Result<(), DriverError> {
        let body: Value = serde_json::from_slice(body).unwrap();
        let meta = body["mappings"]["_meta"].to_string();
        self.indices.insert(index.to_string(), (meta, 0));
        Ok(())
    }

    async fn index_meta(&mut self, index: &str) -> Result<Option<String>, DriverError> {
        Ok(self.indices.get(index).map(|(meta, _)| meta.clone()))
    }

    async fn delete_index(&mut self, index: &str) -> Result<(), DriverError> {
        self.indices.remove(index);
        Ok(())
    }

    async fn refresh(&mut self, _: &str) -> Result<(), DriverError> {
        Ok(())
    }

    async fn count(&mut self, index: &str) -> Result<u64, DriverError> {
        Ok(self.indices.get(index).map_or(0, |(_, n)| *n))
    }

    /// Every document here is loadcell's: none is foreign.
    async fn count_matching(&mut self, index: &str, query: &[u8]) -> Result<u64, DriverError> {
        if query == FOREIGN_QUERY {
            return Ok(0);
        }
        self.count(index).await
    }
}

#[derive(Default)]
struct Messages(RefCell<Vec<String>>);

impl PrepareObserver for Messages {
    fn message(&self, text: &str) {
        self.0.borrow_mut().push(text.to_string());
    }
    fn add_total(&self, _: u64) {}
    fn loaded(&self, _: u64) {}
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn options(source: &str) -> SearchOptions {
    SearchOptions {
        index: IndexOptions {
            name: "loadcell-geonames".to_string(),
            shards: 6,
            replicas: 0,
            refresh_interval: Some("30s".to_string()),
            mapping: None,
        },
        source: Source::generator(source).unwrap(),
        bulk_size: 5000,
        documents: Some(12_000),
        conflicts: IdConflicts::None,
    }
}

#[test]
fn the_index_is_created_with_settings_mapping_and_loadcells_tag() {
    let opts = options("geonames");
    let body: Value = serde_json::from_slice(&opts.index_body(&Tag::new())).unwrap();
    assert_eq!(body["settings"]["index"]["number_of_shards"], 6);
    assert_eq!(body["settings"]["index"]["refresh_interval"], "30s");
    assert_eq!(
        body["mappings"]["properties"]["location"]["type"],
        "geo_point"
    );
    let tag = body["mappings"]["_meta"]["loadcell"].as_str().unwrap();
    assert!(Tag::parse(tag).is_some(), "{tag}");
    assert_eq!(body["mappings"]["properties"][RUN_FIELD]["type"], "keyword");
}

#[test]
fn only_an_index_loadcell_created_is_taken_as_its_own() {
    let opts = options("geonames");
    let messages = Messages::default();
    let mut conn = Indices::default();
    block_on(async {
        assert_eq!(
            owner(&mut conn, "loadcell-geonames").await.unwrap(),
            Owner::Nobody
        );
        assert!(create_index(&mut conn, &opts, &messages).await.unwrap());
        assert_eq!(
            owner(&mut conn, "loadcell-geonames").await.unwrap(),
            Owner::Loadcell
        );
        // Prepared again: left as it is.
        assert!(!create_index(&mut conn, &opts, &messages).await.unwrap());
        // Created by hand, with or without a _meta of its own.
        for meta in ["{}", r#"{"loadcell":"mine"}"#, "not json"] {
            conn.indices
                .insert("loadcell-geonames".into(), (meta.into(), 0));
            assert_eq!(
                owner(&mut conn, "loadcell-geonames").await.unwrap(),
                Owner::Other
            );
            let e = create_index(&mut conn, &opts, &messages).await.unwrap_err();
            assert!(e.message.contains("is not loadcell's"), "{e}");
        }
    });
}

#[test]
fn a_missing_or_empty_index_is_not_prepared() {
    let mut conn = Indices::default();
    block_on(async {
        let e = check_index(&mut conn, "x", false).await.unwrap_err();
        assert_eq!(e.to_string(), "index 'x' does not exist");
        conn.indices.insert("x".into(), ("{}".into(), 0));
        assert_eq!(check_index(&mut conn, "x", false).await.unwrap(), 0);
        let e = check_index(&mut conn, "x", true).await.unwrap_err();
        assert_eq!(e.to_string(), "index 'x' holds no documents");
    });
}

#[test]
fn bulks_split_the_documents_and_stop_at_the_last() {
    let script = BulkScript::new(&options("geonames"), options("geonames").total(), 1);
    assert_eq!(script.claim(), Some(0..5000));
    assert_eq!(script.claim(), Some(5000..10_000));
    assert_eq!(script.claim(), Some(10_000..12_000));
    assert_eq!(script.claim(), None);
}

#[test]
fn the_runs_documents_are_compared_with_what_it_acknowledged() {
    let script = BulkScript::new(&options("geonames"), options("geonames").total(), 1);
    let t = &script.tally;
    t.sent.store(12_000, Ordering::Relaxed);
    t.answered.store(12_000, Ordering::Relaxed);
    t.failed.store(3, Ordering::Relaxed);
    t.dropped.store(100, Ordering::Relaxed);
    let v = script.verification(11_897);
    assert_eq!((v.expected, v.found, v.ok), (11_897, 11_897, true));
    assert!(
        v.how.contains(
            "11897 the run had acknowledged (12000 answered, 3 failed, 100 dropped by the server)"
        ),
        "{}",
        v.how
    );
    assert!(v.how.contains(script.writer.run.id()), "{}", v.how);
    assert!(!script.verification(11_896).ok, "a shortfall");
    assert!(!script.verification(11_898).ok, "more than was sent");
    // A bulk whose answer never came may or may not have arrived.
    t.sent.store(17_000, Ordering::Relaxed);
    let v = script.verification(11_900);
    assert!(v.ok && v.how.contains("up to 5000 more"), "{v:?}");
}

#[test]
fn failed_items_are_classed_by_their_reasons_type() {
    assert_eq!(
        failure_class("mapper_parsing_exception: failed to parse field [population]"),
        "mapper_parsing_exception"
    );
    assert_eq!(failure_class("odd: Not A Type"), ITEM_FAILED);
    assert_eq!(failure_class("odd"), ITEM_FAILED);
}

#[test]
fn options_are_recorded_with_esrallys_names() {
    let mut opts = options("logs");
    opts.conflicts = IdConflicts::Random {
        percent: 25,
        on_conflict: OnConflict::Update,
    };
    let map = opts.to_map();
    assert_eq!(map["generator"], "logs");
    assert_eq!(map["bulk_size"], 5000);
    assert_eq!(map["id_conflicts"], "random");
    assert_eq!(map["conflict_probability"], 25);
    assert_eq!(map["on_conflict"], "update");
}
/// Every value a generated field gives is one that a document among the
/// first `documents` holds, so that a query for it hits, rare or not.
#[test]
fn generated_field_values_are_those_of_loaded_documents() {
    use super::mix::Mix;
    use super::source::Source;
    use super::PREPARE_SEED;
    let documents = 40;
    for name in ["geonames", "logs"] {
        let source = Source::generator(name).unwrap();
        let loaded: Vec<String> = (0..documents)
            .map(|n| {
                let mut doc = Vec::new();
                source.write(PREPARE_SEED, n, &mut doc);
                String::from_utf8(doc).unwrap()
            })
            .collect();
        let fields: &[&str] = match name {
            "geonames" => super::geonames::VALUE_FIELDS,
            _ => super::logs::VALUE_FIELDS,
        };
        for field in fields {
            let values = source.values(field).unwrap();
            let mut mix = Mix::new(9, 0);
            let mut value = Vec::new();
            for _ in 0..200 {
                values.draw(&mut mix, documents, &mut value);
                let value = std::str::from_utf8(&value).unwrap();
                // `message.request` is `GET /images`, held as
                // `GET /images/123/a.png` in the log line.
                let held = loaded.iter().any(|doc| doc.contains(value));
                assert!(
                    held,
                    "{name} {field}: '{value}' is in none of the {documents} documents"
                );
            }
        }
    }
}
