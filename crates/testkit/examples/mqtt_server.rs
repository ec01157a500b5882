//! A Mosquitto for the benchmarks (bench/mqtt.sh), started as the tests
//! start theirs: prints `URL PID` once it answers a CONNECT, and stops it
//! when its standard input closes.

use std::io::Read;

fn main() {
    let server = loadcell_testkit::mosquitto().unwrap_or_else(|e| {
        eprintln!("mqtt_server: {e}");
        std::process::exit(1)
    });
    println!("{} {}", server.url, server.pid);
    // Until whoever started us closes our input; the server stops at exit.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
