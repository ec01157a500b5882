//! An OpenSearch killed in the middle of a bulk run: the result file is
//! still written, partial, with the documents sent before. A binary of its
//! own, since killing the test binary's shared server would take it from
//! every other test.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn a_search_server_killed_mid_run_still_leaves_a_partial_result() {
    let server = loadcell_testkit::opensearch().expect("OpenSearch starts");
    let target = server.url.replace("http://", "opensearch://");
    let dir = tempfile::tempdir().unwrap();
    let index = ["--target", target.as_str(), "--index", "killed"];
    ok(loadcell(
        dir.path(),
        &[&["prepare", "search-bulk"][..], &index[..]].concat(),
    ));
    let (o, r) = run_and_kill_server(
        dir.path(),
        &[
            &["search-bulk"][..],
            &index[..],
            &[
                "--documents",
                "100000000",
                "--bulk-size",
                "1000",
                "--threads",
                "2",
            ],
        ]
        .concat(),
        || server.kill(),
        Duration::from_secs(3),
    );
    assert!(
        u(&r, "/summary/items") > 0,
        "documents sent before the kill are kept"
    );
    assert!(
        stdout(&o).contains("partial run (server_unreachable)"),
        "{}",
        stdout(&o)
    );
}
