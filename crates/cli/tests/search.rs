//! search-bulk and search-query against a real OpenSearch 2.19, one
//! shared by every test here (a JVM takes seconds to start): each test
//! uses an index of its own, so they run in any order.

mod common;

use common::{loadcell, ok, read_json, run_json, s, stderr, stdout, u};
use loadcell_core::search::SearchConn;
use loadcell_core::{Driver, Target};
use loadcell_drivers::search::SearchDriver;
use serde_json::Value;

fn opensearch() -> &'static str {
    &loadcell_testkit::opensearch()
        .unwrap_or_else(|e| panic!("cannot start OpenSearch: {e}"))
        .url
}

/// Runs `f` on a new connection to the server, as the engine would.
fn with_conn<T>(f: impl AsyncFnOnce(&mut <SearchDriver as Driver>::Conn) -> T) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio::task::LocalSet::new().block_on(&rt, async {
        let driver = SearchDriver::from_target(&Target::parse(opensearch()).unwrap()).unwrap();
        let mut conn = driver.connect().await.expect("connect");
        f(&mut conn).await
    })
}

fn count(index: &str) -> Option<u64> {
    with_conn(async |c| {
        c.index_meta(index).await.unwrap()?;
        c.refresh(index).await.unwrap();
        Some(c.count(index).await.unwrap())
    })
}

/// `method path` with a JSON `body`, for what the search driver has no
/// call for (pipelines, settings), answered 200.
fn http_ok(method: &str, path: &str, body: &str) {
    let port = loadcell_testkit::opensearch().unwrap().port;
    let (status, answer) = loadcell_testkit::search_request(port, method, path, body);
    assert_eq!(status, 200, "{method} {path}: {answer}");
}

/// Indexes `n` documents of another writer (no loadcell field) into `index`.
fn index_foreign(index: &str, n: usize) {
    let body = "{\"index\":{}}\n{\"name\":\"not loadcell's\"}\n".repeat(n);
    with_conn(async |c| {
        let outcome = c.bulk(index, body.as_bytes(), &mut |r| panic!("{r}")).await;
        assert_eq!(outcome.unwrap().items, n as u64);
    });
}

fn prepare(dir: &std::path::Path, workload: &str, args: &[&str]) {
    let mut all = vec!["prepare", workload, "--target", opensearch()];
    all.extend_from_slice(args);
    ok(loadcell(dir, &all));
}

fn cleanup(dir: &std::path::Path, workload: &str, index: &str) {
    ok(loadcell(
        dir,
        &[
            "cleanup",
            workload,
            "--target",
            opensearch(),
            "--index",
            index,
        ],
    ));
    assert_eq!(count(index), None, "{index} is deleted");
}

fn error_classes(r: &Value) -> Vec<String> {
    r["error_samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["class"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_acknowledged_document_is_counted_in_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let index = "t-bulk-count";
    prepare(
        dir.path(),
        "search-bulk",
        &["--index", index, "--shards", "2"],
    );
    let r = run_json(
        dir.path(),
        "search-bulk",
        opensearch(),
        &[
            "--index",
            index,
            "--documents",
            "20000",
            "--bulk-size",
            "1500",
            "--threads",
            "3",
        ],
    );
    assert_eq!(u(&r, "/ops/bulk/items"), 20_000, "docs are the run's items");
    assert_eq!(
        u(&r, "/ops/bulk/count"),
        14,
        "20000 documents in bulks of 1500"
    );
    assert_eq!(u(&r, "/verification/expected"), 20_000);
    assert_eq!(u(&r, "/verification/found"), 20_000);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(s(&r, "/config/workload_options/generator"), "geonames");
    assert_eq!(count(index), Some(20_000));
    cleanup(dir.path(), "search-bulk", index);
}

#[test]
fn failed_items_are_counted_each_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let index = "t-bulk-failed";
    // Geonames fills alternatenames with text in most documents.
    let mapping = dir.path().join("mapping.json");
    std::fs::write(
        &mapping,
        r#"{"properties":{"alternatenames":{"type":"long"}}}"#,
    )
    .unwrap();
    let mapping = mapping.to_str().unwrap();
    prepare(
        dir.path(),
        "search-bulk",
        &["--index", index, "--mapping", mapping],
    );
    let r = run_json(
        dir.path(),
        "search-bulk",
        opensearch(),
        &[
            "--index",
            index,
            "--documents",
            "3000",
            "--bulk-size",
            "1000",
            "--mapping",
            mapping,
        ],
    );
    let (items, errors) = (u(&r, "/ops/bulk/items"), u(&r, "/ops/bulk/errors"));
    assert_eq!(items, 3000);
    assert!((2000..2900).contains(&errors), "{errors} of 3000 failed");
    let classes = error_classes(&r);
    assert!(
        classes.iter().all(|c| c.ends_with("_exception")),
        "{classes:?}"
    );
    let samples = r["error_samples"].to_string();
    assert!(samples.contains("alternatenames"), "{samples}");
    // Those that failed are not expected in the index; the others are.
    assert_eq!(u(&r, "/verification/expected"), items - errors);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    cleanup(dir.path(), "search-bulk", index);
}

/// Prepares `index` with `documents` from `generator`, then runs each
/// query kind on it: few may hit nothing, none fail.
fn queries_hit(generator: &str, index: &str, documents: &str, most_missed: [f64; 4]) {
    let dir = tempfile::tempdir().unwrap();
    let gen = ["--generator", generator, "--index", index];
    let mut args = gen.to_vec();
    args.extend(["--documents", documents]);
    prepare(dir.path(), "search-query", &args);
    assert_eq!(count(index), Some(documents.parse().unwrap()));
    for (kind, most_missed) in ["term", "match", "match_phrase", "range"]
        .into_iter()
        .zip(most_missed)
    {
        let mut args = gen.to_vec();
        args.extend(["--query", kind, "--time", "2"]);
        let r = run_json(dir.path(), "search-query", opensearch(), &args);
        let queries = u(&r, &format!("/ops/{kind}/count"));
        assert!(queries > 20, "{generator} {kind}: {queries} queries");
        let missed = r
            .pointer("/summary/counters/no_hits")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        assert!(
            missed as f64 <= most_missed * queries as f64,
            "{generator} {kind}: {missed} of {queries} hit nothing"
        );
        assert_eq!(u(&r, &format!("/ops/{kind}/errors")), 0);
        assert!(
            r.get("verification").is_none(),
            "queries write nothing to verify"
        );
    }
    cleanup(dir.path(), "search-query", index);
}

#[test]
fn geonames_queries_find_what_was_indexed() {
    queries_hit("geonames", "t-query", "20000", [0.0; 4]);
}

#[test]
fn log_queries_find_what_was_indexed() {
    queries_hit("logs", "t-query-logs", "5000", [0.0; 4]);
}

#[test]
fn cleanup_deletes_only_an_index_loadcell_created() {
    let dir = tempfile::tempdir().unwrap();
    let index = "t-by-hand";
    with_conn(async |c| {
        let _ = c.delete_index(index).await;
        c.create_index(index, br#"{"mappings":{"_meta":{"owner":"someone"}}}"#)
            .await
            .unwrap();
    });
    let o = loadcell(
        dir.path(),
        &[
            "cleanup",
            "search-bulk",
            "--target",
            opensearch(),
            "--index",
            index,
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("index 't-by-hand' was not created by loadcell"),
        "{err}"
    );
    assert_eq!(count(index), Some(0), "the index is still there");
    // Nor does prepare take it over.
    let o = loadcell(
        dir.path(),
        &[
            "prepare",
            "search-bulk",
            "--target",
            opensearch(),
            "--index",
            index,
        ],
    );
    assert!(
        stderr(&o).contains("exists and is not loadcell's"),
        "{}",
        stderr(&o)
    );
    with_conn(async |c| c.delete_index(index).await.unwrap());
}

/// An ingest pipeline's `drop` answers `"result":"noop"`, status 200: the
/// documents are counted apart from the failed, and the check after the
/// run expects them absent.
#[test]
fn documents_a_pipeline_drops_are_counted_apart_and_expected_absent() {
    let dir = tempfile::tempdir().unwrap();
    let (index, pipeline) = ("t-dropped", "t-drop-every-fourth");
    prepare(dir.path(), "search-bulk", &["--index", index]);
    http_ok(
        "PUT",
        &format!("/_ingest/pipeline/{pipeline}"),
        r#"{"processors":[{"drop":{"if":"ctx.geonameid % 4 == 0"}}]}"#,
    );
    http_ok(
        "PUT",
        &format!("/{index}/_settings"),
        &format!(r#"{{"index.default_pipeline":"{pipeline}"}}"#),
    );
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "search-bulk",
            "--target",
            opensearch(),
            "--index",
            index,
            "--documents",
            "4000",
            "--bulk-size",
            "1000",
            "--out",
            "r.json",
        ],
    ));
    let r = read_json(&dir.path().join("r.json"));
    assert_eq!(u(&r, "/ops/bulk/items"), 4000);
    assert_eq!(u(&r, "/ops/bulk/errors"), 0, "a drop is not a failure");
    let dropped = u(&r, "/summary/counters/dropped_by_server");
    assert!((600..1400).contains(&dropped), "{dropped} of 4000 dropped");
    assert_eq!(u(&r, "/verification/expected"), 4000 - dropped);
    assert_eq!(u(&r, "/verification/found"), 4000 - dropped);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert!(
        s(&r, "/verification/how").contains(&format!("{dropped} dropped by the server")),
        "{}",
        r["verification"]
    );
    let text = stdout(&o);
    assert!(text.contains("dropped_by_server"), "{text}");
    assert_eq!(count(index), Some(4000 - dropped));
    cleanup(dir.path(), "search-bulk", index);
    http_ok("DELETE", &format!("/_ingest/pipeline/{pipeline}"), "");
}

/// Another writer's documents in loadcell's index: cleanup says so and
/// deletes nothing, unless --force.
#[test]
fn cleanup_keeps_another_writers_documents_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let index = "t-shared";
    prepare(dir.path(), "search-bulk", &["--index", index]);
    run_json(
        dir.path(),
        "search-bulk",
        opensearch(),
        &["--index", index, "--documents", "1000"],
    );
    index_foreign(index, 3);
    let args = [
        "cleanup",
        "search-bulk",
        "--target",
        opensearch(),
        "--index",
        index,
    ];
    let o = loadcell(dir.path(), &args);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("index 't-shared' holds 3 documents loadcell did not write")
            && err.contains("--force"),
        "{err}"
    );
    assert_eq!(count(index), Some(1003), "nothing deleted");
    let mut forced = args.to_vec();
    forced.push("--force");
    let o = ok(loadcell(dir.path(), &forced));
    assert!(
        stderr(&o).contains("with the 3 documents loadcell did not write"),
        "{}",
        stderr(&o)
    );
    assert_eq!(count(index), None);
}

/// The check after a run counts the run's own documents, not the index:
/// a second run with --id-conflicts overwrites some of the first's ids,
/// which a count of the whole index against before + sent calls a
/// shortfall, and other documents in the index do not make up for any.
#[test]
fn verification_counts_the_runs_own_documents_not_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let index = "t-own";
    prepare(dir.path(), "search-bulk", &["--index", index]);
    let args = [
        "--index",
        index,
        "--documents",
        "3000",
        "--bulk-size",
        "1000",
        "--id-conflicts",
        "random",
        "--conflict-probability",
        "30",
    ];
    let first = run_json(dir.path(), "search-bulk", opensearch(), &args);
    index_foreign(index, 5);
    let second = run_json(dir.path(), "search-bulk", opensearch(), &args);
    for r in [&first, &second] {
        assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
        let found = u(r, "/verification/found");
        assert!(
            (2000..2500).contains(&found),
            "{found} distinct ids of 3000"
        );
        assert!(s(r, "/verification/how").contains("this run's"));
    }
    // Both runs' ids overlap: the index holds fewer than their sum.
    let held = count(index).unwrap();
    let (a, b) = (
        u(&first, "/verification/found"),
        u(&second, "/verification/found"),
    );
    assert!(held < a + b + 5, "{held} documents after {a} and {b}");
    let mut forced = vec!["cleanup", "search-bulk", "--target", opensearch()];
    forced.extend(["--index", index, "--force"]);
    ok(loadcell(dir.path(), &forced));
}

#[test]
fn a_missing_index_is_a_one_line_error_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    for workload in ["search-bulk", "search-query"] {
        let o = loadcell(
            dir.path(),
            &[
                "run",
                workload,
                "--target",
                opensearch(),
                "--index",
                "t-missing",
                "--time",
                "1",
            ],
        );
        assert!(!o.status.success());
        let err = stderr(&o);
        let line = err
            .lines()
            .find(|l| l.contains("t-missing"))
            .unwrap_or_default();
        assert!(line.contains("index 't-missing' does not exist"), "{err}");
        assert!(line.contains("run `loadcell prepare"), "{err}");
        assert!(!err.contains("Running"), "nothing was sent: {err}");
    }
    assert_eq!(count("t-missing"), None);
}

#[test]
fn a_gzipped_corpus_is_replayed_and_its_bad_documents_counted() {
    let dir = tempfile::tempdir().unwrap();
    let index = "t-corpus";
    let countries = ["AT", "DE", "CH", "US"];
    let mut docs = String::new();
    for i in 0..2500 {
        // Every 25th document's population is text, which the mapping refuses.
        let population = if i % 25 == 0 {
            "\"many\"".to_string()
        } else {
            (i * 10).to_string()
        };
        let cc = countries[i % countries.len()];
        docs += &format!(
            "{{\"name\":\"Place {i}\",\"country_code\":\"{cc}\",\"population\":{population}}}\n"
        );
    }
    let plain = dir.path().join("documents.json");
    std::fs::write(&plain, docs).unwrap();
    let gz = std::process::Command::new("gzip")
        .arg(&plain)
        .status()
        .unwrap();
    assert!(gz.success());
    let corpus = dir.path().join("documents.json.gz");
    let corpus = corpus.to_str().unwrap();
    let mapping = dir.path().join("mapping.json");
    std::fs::write(
        &mapping,
        r#"{"properties":{"name":{"type":"text"},"country_code":{"type":"keyword"},"population":{"type":"long"}}}"#,
    )
    .unwrap();
    let mapping = mapping.to_str().unwrap();
    let opts = [
        "--index",
        index,
        "--corpus",
        corpus,
        "--mapping",
        mapping,
        "--bulk-size",
        "500",
    ];
    prepare(dir.path(), "search-bulk", &opts);
    let r = run_json(dir.path(), "search-bulk", opensearch(), &opts);
    assert_eq!(u(&r, "/ops/bulk/count"), 5, "the whole corpus, once");
    assert_eq!(u(&r, "/ops/bulk/items"), 2500);
    assert_eq!(u(&r, "/ops/bulk/errors"), 100, "each bad document, counted");
    let classes = error_classes(&r);
    assert!(
        !classes.is_empty() && classes.iter().all(|c| c == "mapper_parsing_exception"),
        "{classes:?}"
    );
    assert_eq!(u(&r, "/verification/found"), 2400);
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(s(&r, "/config/workload_options/corpus"), corpus);
    // Queries take their values from the corpus, so they hit.
    let r = run_json(
        dir.path(),
        "search-query",
        opensearch(),
        &[
            "--index", index, "--corpus", corpus, "--query", "term", "--time", "1",
        ],
    );
    assert!(u(&r, "/ops/term/count") > 10);
    assert!(
        r.pointer("/summary/counters/no_hits").is_none(),
        "{}",
        r["summary"]
    );
    cleanup(dir.path(), "search-bulk", index);
}

#[test]
fn id_conflicts_leave_one_document_per_distinct_id() {
    let dir = tempfile::tempdir().unwrap();
    for (index, kind, action) in [
        ("t-conflicts-seq", "sequential", "index"),
        ("t-conflicts-rnd", "random", "update"),
    ] {
        prepare(dir.path(), "search-bulk", &["--index", index]);
        let r = run_json(
            dir.path(),
            "search-bulk",
            opensearch(),
            &[
                "--index",
                index,
                "--documents",
                "6000",
                "--bulk-size",
                "1000",
                "--threads",
                "2",
                "--id-conflicts",
                kind,
                "--on-conflict",
                action,
                "--conflict-probability",
                "30",
            ],
        );
        assert_eq!(u(&r, "/ops/bulk/items"), 6000);
        let found = u(&r, "/verification/found");
        assert!(
            (3800..4600).contains(&found),
            "{kind}: {found} distinct ids of 6000 documents"
        );
        assert_eq!(
            r["verification"]["ok"], true,
            "{kind}: {}",
            r["verification"]
        );
        assert_eq!(s(&r, "/config/workload_options/id_conflicts"), kind);
        cleanup(dir.path(), "search-bulk", index);
    }
}

#[test]
fn indexing_while_searching_reports_each_group_apart() {
    let dir = tempfile::tempdir().unwrap();
    let index = "t-mixed";
    let base = ["--index", index, "--documents", "2000"];
    prepare(dir.path(), "search-mixed", &base);
    let mut args = base.to_vec();
    args.extend([
        "--bulk-size",
        "500",
        "--query-clients",
        "4",
        "--query-rate",
        "10",
        "--arrival",
        "uniform",
        "--time",
        "3",
    ]);
    let r = run_json(dir.path(), "search-mixed", opensearch(), &args);
    let groups = r["summary"]["groups"].as_array().expect("groups");
    let [bulk, query] = &groups[..] else {
        panic!("two groups: {groups:?}")
    };
    assert_eq!((s(bulk, "/name"), u(bulk, "/sessions")), ("bulk", 1));
    assert_eq!(bulk["schedule"]["mode"], "closed_loop");
    assert_eq!((s(query, "/name"), u(query, "/sessions")), ("query", 4));
    assert_eq!(query["schedule"]["target_rate"], 10.0);
    // The queries keep their rate whatever the bulks do beside them
    // (four sessions hold 10/s even at 300 ms a query).
    let rate = query["events_per_sec"].as_f64().unwrap();
    assert!((8.5..=10.5).contains(&rate), "{rate} queries/s");
    assert_eq!(u(&r, "/ops/term/count"), u(query, "/events"));
    assert_eq!(u(&r, "/ops/bulk/count"), u(bulk, "/events"));
    assert!(u(&r, "/ops/bulk/items") >= 500, "{}", r["ops"]);
    assert!(
        r.pointer("/summary/counters/no_hits").is_none(),
        "queries hit the prepared documents: {}",
        r["summary"]
    );
    // What the bulks acknowledged arrived, counted apart from what
    // prepare loaded.
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/expected"), u(&r, "/ops/bulk/items"));
    assert_eq!(
        count(index),
        Some(2000 + u(&r, "/ops/bulk/items")),
        "both in the index"
    );
    assert_eq!(u(&r, "/config/workload_options/query_clients"), 4);
    // Options of the other search workloads are refused by name.
    let out = loadcell(
        dir.path(),
        &[
            "run",
            "search-query",
            "--target",
            opensearch(),
            "--query-rate",
            "5",
        ],
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "loadcell: error: --query-rate does not apply to search-query"
    );
    cleanup(dir.path(), "search-mixed", index);
}

#[test]
fn a_wrong_password_is_one_line_before_any_load() {
    // The integration zips have no security plugin: the credentials are
    // asked for by a proxy in front of the cluster, as often deployed.
    let cluster = loadcell_testkit::opensearch().expect("OpenSearch");
    let proxy = loadcell_testkit::nginx_basic_auth_proxy(cluster.port, "loadcell", "s3cret-pw")
        .unwrap_or_else(|e| panic!("{e}"));
    let through =
        |password: &str| format!("opensearch://loadcell:{password}@127.0.0.1:{}", proxy.port);
    let dir = tempfile::tempdir().unwrap();
    let index = ["--index", "t-auth", "--documents", "500"];
    let wrong = through("not-it");
    let mut args = vec!["run", "search-query", "--target", &wrong, "--time", "1"];
    args.extend(index);
    let out = loadcell(dir.path(), &args);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("refused the credentials (HTTP 401): wrong user or password?"),
        "{err}"
    );
    assert!(
        !err.contains("not-it"),
        "the password is never printed: {err}"
    );
    // The right one goes through to the cluster.
    let right = through("s3cret-pw");
    let mut args = vec!["prepare", "search-query", "--target", &right];
    args.extend(index);
    ok(loadcell(dir.path(), &args));
    let mut args = index.to_vec();
    args.extend(["--time", "1"]);
    let r = run_json(dir.path(), "search-query", &right, &args);
    assert!(u(&r, "/ops/term/count") > 0);
    ok(loadcell(
        dir.path(),
        &[
            "cleanup",
            "search-query",
            "--target",
            &right,
            "--index",
            "t-auth",
        ],
    ));
}

/// `examples/workloads/opensearch.toml`: prepare refuses an index of the
/// same name made by hand, then creates and fills its own; every op runs
/// and finds what was indexed; cleanup deletes the file's index.
#[test]
fn the_script_example_searches_what_its_prepare_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let file = format!(
        "{}/../../examples/workloads/opensearch.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let index = "lc-products";
    let script = |job: &str, more: &[&str]| {
        let mut all = vec![job, "script", "--file", &file, "--target", opensearch()];
        all.extend_from_slice(more);
        loadcell(dir.path(), &all)
    };
    with_conn(async |c| {
        let _ = c.delete_index(index).await;
        c.create_index(index, b"{}").await.unwrap();
    });
    let o = script("prepare", &[]);
    assert!(
        stderr(&o).contains("exists and is not loadcell's"),
        "{}",
        stderr(&o)
    );
    let o = script("cleanup", &[]);
    assert!(!o.status.success());
    assert_eq!(count(index), Some(0), "the index made by hand stays");
    with_conn(async |c| c.delete_index(index).await.unwrap());

    ok(script("prepare", &[]));
    assert_eq!(count(index), Some(2000));
    let r = run_json(
        dir.path(),
        "script",
        opensearch(),
        &["--file", &file, "--time", "2s", "--threads", "2"],
    );
    let ops = ["by_color", "cheaper_than", "by_name"];
    let counts: Vec<u64> = ops
        .iter()
        .map(|o| u(&r, &format!("/ops/{o}/count")))
        .collect();
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    assert_eq!(counts.iter().sum::<u64>(), u(&r, "/summary/events"));
    assert_eq!(u(&r, "/summary/errors"), 0);
    // A quarter of the documents have each colour, a fifth each word.
    for (op, n) in [("by_color", counts[0]), ("by_name", counts[2])] {
        let hits = u(&r, &format!("/ops/{op}/items"));
        assert!(hits >= 300 * n, "{op}: {hits} hits in {n} queries");
    }
    ok(script("cleanup", &[]));
    assert_eq!(count(index), None);
}
