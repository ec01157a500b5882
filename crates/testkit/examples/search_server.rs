//! A search server for the benchmarks (bench/search.sh), started as the
//! tests start theirs: `search_server opensearch|elasticsearch` prints
//! `URL PID` once the cluster is green, and stops the server when its
//! standard input closes.

use std::io::Read;

fn main() {
    let product = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "opensearch".into());
    let server = match product.as_str() {
        "opensearch" => loadcell_testkit::opensearch(),
        "elasticsearch" => loadcell_testkit::elasticsearch(),
        other => Err(format!(
            "unknown search server '{other}': use opensearch or elasticsearch"
        )),
    };
    let server = server.unwrap_or_else(|e| {
        eprintln!("search_server: {e}");
        std::process::exit(1)
    });
    println!("{} {}", server.url, server.pid);
    // Until whoever started us closes our input; the server stops at exit.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
