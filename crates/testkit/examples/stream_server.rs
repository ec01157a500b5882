//! A stream server for the benchmarks (bench/stream.sh), started as the
//! tests start theirs: `stream_server kafka` prints `URL PID LIBDIR` (the
//! broker's jars, which also run Kafka's own perf tools) once the broker
//! answers, and stops it when its standard input closes.

use std::io::Read;

fn main() {
    let product = std::env::args().nth(1).unwrap_or_else(|| "kafka".into());
    let server = match product.as_str() {
        "kafka" => loadcell_testkit::kafka().and_then(|s| Ok((s, loadcell_testkit::kafka_lib()?))),
        other => Err(format!("unknown stream server '{other}': use kafka")),
    };
    let (server, lib) = server.unwrap_or_else(|e| {
        eprintln!("stream_server: {e}");
        std::process::exit(1)
    });
    println!("{} {} {}", server.url, server.pid, lib.display());
    // Until whoever started us closes our input; the server stops at exit.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
