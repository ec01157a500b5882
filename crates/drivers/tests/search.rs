//! The search driver against a real OpenSearch 2.19.6 and Elasticsearch
//! 7.10.2 OSS, one of each shared by every test here (a JVM takes seconds
//! to start): each test uses an index of its own, so they run in any
//! order. The same checks run on both through functions taking the
//! server's URL.

mod local_runtime;

use loadcell_core::search::{BulkOutcome, SearchConn};
use loadcell_core::{Driver, ErrorClass, Family, ServerInfo, Target};
use loadcell_drivers::search::{SearchConnection, SearchDriver};
use local_runtime::block_on;

fn opensearch() -> &'static str {
    &loadcell_testkit::opensearch()
        .unwrap_or_else(|e| panic!("cannot start OpenSearch: {e}"))
        .url
}

fn elasticsearch() -> &'static str {
    &loadcell_testkit::elasticsearch()
        .unwrap_or_else(|e| panic!("cannot start Elasticsearch: {e}"))
        .url
}

fn driver(url: &str) -> SearchDriver {
    SearchDriver::from_target(&Target::parse(url).expect("valid URL")).expect("valid target")
}

async fn connect(url: &str) -> SearchConnection {
    driver(url)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

const MAPPING: &str = r#"{"settings":{"number_of_shards":2,"number_of_replicas":0},
"mappings":{"_meta":{"created_by":"loadcell","run":7},
"properties":{"n":{"type":"long"},"country_code":{"type":"keyword"},"name":{"type":"text"}}}}"#;

/// A fresh index `name` with [`MAPPING`].
async fn fresh_index(conn: &mut SearchConnection, name: &str) {
    let _ = conn.delete_index(name).await;
    conn.create_index(name, MAPPING.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
}

/// `n` index actions; document `i` has `n: i`, and `country_code` AT for
/// even `i`, DE for odd. `bad` documents are given a string for `n`.
fn bulk_body(n: usize, bad: &[usize]) -> Vec<u8> {
    let mut body = String::new();
    for i in 0..n {
        let value = if bad.contains(&i) {
            "\"not a number\"".to_string()
        } else {
            i.to_string()
        };
        let country = if i % 2 == 0 { "AT" } else { "DE" };
        body.push_str(&format!(
            "{{\"index\":{{\"_id\":\"{i}\"}}}}\n{{\"n\":{value},\"country_code\":\"{country}\",\"name\":\"Sankt Georgen {i}\"}}\n"
        ));
    }
    body.into_bytes()
}

/// Bulks `body` into `index` and returns the outcome with the reasons.
async fn bulk(conn: &mut SearchConnection, index: &str, body: &[u8]) -> (BulkOutcome, Vec<String>) {
    let mut reasons = Vec::new();
    let outcome = conn
        .bulk(index, body, &mut |r| reasons.push(r.to_string()))
        .await
        .unwrap_or_else(|e| panic!("bulk: {e}"));
    (outcome, reasons)
}

fn a_bulk_is_counted_and_searchable(url: &str) {
    block_on(async {
        let mut conn = connect(url).await;
        fresh_index(&mut conn, "bulk-counted").await;
        let (outcome, reasons) = bulk(&mut conn, "bulk-counted", &bulk_body(500, &[])).await;
        assert_eq!(
            outcome,
            BulkOutcome {
                items: 500,
                failed: 0,
                dropped: 0
            }
        );
        assert!(reasons.is_empty());
        conn.refresh("bulk-counted").await.unwrap();
        assert_eq!(conn.count("bulk-counted").await.unwrap(), 500);
        let term = br#"{"query":{"term":{"country_code":"AT"}}}"#;
        assert_eq!(conn.search("bulk-counted", term).await.unwrap().hits, 250);
        let phrase = br#"{"query":{"match_phrase":{"name":"Sankt Georgen 42"}}}"#;
        assert_eq!(conn.search("bulk-counted", phrase).await.unwrap().hits, 1);
        conn.delete_index("bulk-counted").await.unwrap();
    });
}

fn a_mapping_conflict_fails_only_its_items(url: &str) {
    block_on(async {
        let mut conn = connect(url).await;
        fresh_index(&mut conn, "bulk-conflict").await;
        let (outcome, reasons) =
            bulk(&mut conn, "bulk-conflict", &bulk_body(100, &[3, 50, 99])).await;
        assert_eq!(
            outcome,
            BulkOutcome {
                items: 100,
                failed: 3,
                dropped: 0
            }
        );
        assert_eq!(reasons.len(), 3);
        for r in &reasons {
            assert!(r.starts_with("mapper_parsing_exception: "), "{r}");
        }
        conn.refresh("bulk-conflict").await.unwrap();
        assert_eq!(conn.count("bulk-conflict").await.unwrap(), 97);
        conn.delete_index("bulk-conflict").await.unwrap();
    });
}

/// An ingest pipeline that drops the documents whose `n` is a multiple
/// of 3: each is answered `"result":"noop"`, status 200, in a bulk that
/// says `"errors":false` (read without parsing) as in one with a failed
/// item (parsed); neither is a failure.
#[test]
fn opensearch_documents_a_pipeline_drops_are_counted_apart() {
    let port = loadcell_testkit::opensearch().unwrap().port;
    let admin = |method: &str, path: &str, body: &str| {
        let (status, answer) = loadcell_testkit::search_request(port, method, path, body);
        assert_eq!(status, 200, "{method} {path}: {answer}");
    };
    let pipeline = r#"{"processors":[{"drop":{"if":"ctx.n % 3 == 0"}}]}"#;
    admin("PUT", "/_ingest/pipeline/drop-thirds", pipeline);
    block_on(async {
        let mut conn = connect(opensearch()).await;
        fresh_index(&mut conn, "bulk-dropped").await;
        admin(
            "PUT",
            "/bulk-dropped/_settings",
            r#"{"index.default_pipeline":"drop-thirds"}"#,
        );
        let (clean, _) = bulk(&mut conn, "bulk-dropped", &bulk_body(300, &[])).await;
        let expected = BulkOutcome {
            items: 300,
            failed: 0,
            dropped: 100,
        };
        assert_eq!(clean, expected);
        // Ids 0..100 again, one of them refused by the mapping.
        let (with_failure, reasons) = bulk(&mut conn, "bulk-dropped", &bulk_body(100, &[50])).await;
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        let expected = BulkOutcome {
            items: 100,
            failed: 1,
            dropped: 34,
        };
        assert_eq!(with_failure, expected);
        conn.refresh("bulk-dropped").await.unwrap();
        assert_eq!(conn.count("bulk-dropped").await.unwrap(), 200);
        let term = br#"{"query":{"term":{"country_code":"AT"}}}"#;
        assert_eq!(
            conn.count_matching("bulk-dropped", term).await.unwrap(),
            100
        );
        conn.delete_index("bulk-dropped").await.unwrap();
    });
    admin("DELETE", "/_ingest/pipeline/drop-thirds", "");
}

fn index_meta_reads_what_create_wrote(url: &str) {
    block_on(async {
        let mut conn = connect(url).await;
        fresh_index(&mut conn, "meta-written").await;
        let meta = conn.index_meta("meta-written").await.unwrap().unwrap();
        let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
        assert_eq!(
            meta,
            serde_json::json!({"created_by": "loadcell", "run": 7})
        );
        assert_eq!(conn.index_meta("meta-missing").await.unwrap(), None);
        conn.create_index("meta-bare", b"{}").await.unwrap();
        assert_eq!(
            conn.index_meta("meta-bare").await.unwrap().as_deref(),
            Some("{}")
        );
        let again = conn
            .create_index("meta-written", MAPPING.as_bytes())
            .await
            .unwrap_err();
        assert_eq!(again.class, ErrorClass::Fatal);
        assert!(
            again
                .message
                .starts_with("index 'meta-written' already exists"),
            "{again}"
        );
        conn.delete_index("meta-written").await.unwrap();
        conn.delete_index("meta-bare").await.unwrap();
    });
}

fn a_missing_index_is_a_one_line_error(url: &str) {
    block_on(async {
        let mut conn = connect(url).await;
        let e = conn.count("no-such-index").await.unwrap_err();
        assert_eq!(e.class, ErrorClass::Fatal);
        assert_eq!(e.code.as_deref(), Some("index_not_found_exception"));
        assert!(e.message.contains("no-such-index"), "{e}");
        assert!(!e.message.contains('\n'), "{e}");
    });
}

fn server_counters_have_heap_and_cpu(url: &str) {
    block_on(async {
        let d = driver(url);
        let mut conn = d.connect().await.unwrap();
        let counters = d.server_counters(&mut conn).await.unwrap();
        let get = |name: &str| {
            counters
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("no {name} in {counters:?}"))
                .1
        };
        assert!(get("search_heap_used_bytes") > 1e6, "{counters:?}");
        let heap_pct = get("search_heap_used_pct");
        assert!(heap_pct > 0.0 && heap_pct < 100.0, "{counters:?}");
        assert!(get("server_host_cpu_pct") >= 0.0);
        assert!(get("search_process_cpu_pct") >= 0.0);
        assert!(get("search_gc_time_ms_total") >= 0.0);
    });
}

fn server_info_of(url: &str) -> ServerInfo {
    block_on(async {
        let d = driver(url);
        let mut conn = d.connect().await.unwrap();
        d.server_info(&mut conn).await.unwrap()
    })
}

#[test]
fn opensearch_bulk_is_counted_and_searchable() {
    a_bulk_is_counted_and_searchable(opensearch());
}

#[test]
fn opensearch_mapping_conflict_fails_only_its_items() {
    a_mapping_conflict_fails_only_its_items(opensearch());
}

#[test]
fn opensearch_index_meta_reads_what_create_wrote() {
    index_meta_reads_what_create_wrote(opensearch());
}

#[test]
fn opensearch_missing_index_is_a_one_line_error() {
    a_missing_index_is_a_one_line_error(opensearch());
}

#[test]
fn opensearch_server_counters_have_heap_and_cpu() {
    server_counters_have_heap_and_cpu(opensearch());
}

#[test]
fn opensearch_is_named_with_its_version() {
    let info = server_info_of(opensearch());
    assert_eq!(
        (info.product.as_str(), info.version.as_str()),
        ("OpenSearch", "2.19.6")
    );
    assert_eq!(info.extras["cluster"], "opensearch");
    // Its own scheme means plain HTTP on the port given.
    let own = opensearch().replace("http://", "opensearch://");
    assert_eq!(server_info_of(&own).product, "OpenSearch");
}

#[test]
fn elasticsearch_bulk_is_counted_and_searchable() {
    a_bulk_is_counted_and_searchable(elasticsearch());
}

#[test]
fn elasticsearch_mapping_conflict_fails_only_its_items() {
    a_mapping_conflict_fails_only_its_items(elasticsearch());
}

#[test]
fn elasticsearch_index_meta_reads_what_create_wrote() {
    index_meta_reads_what_create_wrote(elasticsearch());
}

#[test]
fn elasticsearch_missing_index_is_a_one_line_error() {
    a_missing_index_is_a_one_line_error(elasticsearch());
}

#[test]
fn elasticsearch_server_counters_have_heap_and_cpu() {
    server_counters_have_heap_and_cpu(elasticsearch());
}

#[test]
fn elasticsearch_is_named_with_its_version() {
    let info = server_info_of(elasticsearch());
    assert_eq!(
        (info.product.as_str(), info.version.as_str()),
        ("Elasticsearch", "7.10.2")
    );
    assert_eq!(info.extras["cluster"], "elasticsearch");
}

#[test]
fn a_closed_port_is_a_one_line_connection_error() {
    let port = loadcell_testkit::closed_port();
    let e = block_on(driver(&format!("opensearch://127.0.0.1:{port}")).connect()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Connection);
    assert!(e.message.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(!e.message.contains('\n'), "{e}");
}

#[test]
fn http_targets_go_to_the_driver_of_the_workloads_family() {
    struct Name;
    impl loadcell_drivers::Visitor for Name {
        type Output = &'static str;
        fn kv<D: Driver>(self, info: &'static loadcell_core::DriverInfo, _: D) -> &'static str {
            info.name
        }
        fn http<D: Driver>(self, info: &'static loadcell_core::DriverInfo, _: D) -> &'static str {
            info.name
        }
        fn search<D: Driver>(self, info: &'static loadcell_core::DriverInfo, _: D) -> &'static str {
            info.name
        }
        fn stream<D: Driver>(self, info: &'static loadcell_core::DriverInfo, _: D) -> &'static str {
            info.name
        }
    }
    let open = |url: &str, family: Family| {
        loadcell_drivers::open(&Target::parse(url).unwrap(), &[family], Name).unwrap()
    };
    assert_eq!(open("http://h:9200", Family::SEARCH), "search");
    assert_eq!(open("https://h:9200", Family::SEARCH), "search");
    assert_eq!(open("http://h:9200", Family::HTTP), "http");
    assert_eq!(open("opensearch://h", Family::SEARCH), "search");
    // One scheme, two families: Redis as a key-value store and as streams.
    assert_eq!(open("redis://h", Family::KV), "redis");
    assert_eq!(open("redis://h", Family::STREAM), "redis-streams");
    let cluster = loadcell_drivers::find("redis+cluster", &[Family::STREAM]).unwrap_err();
    assert_eq!(cluster.to_string(), "redis+cluster: is a kv driver");
    let other = loadcell_drivers::find("elasticsearch", &[Family::HTTP]).unwrap_err();
    assert_eq!(other.to_string(), "elasticsearch: is a search driver");
    let unknown = loadcell_drivers::find("solr", &[Family::SEARCH]).unwrap_err();
    assert_eq!(
        unknown.to_string().matches(" http:").count(),
        1,
        "each scheme once: {unknown}"
    );
}
