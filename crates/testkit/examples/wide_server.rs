//! A wide-column server for benchmarks, started as the tests start
//! theirs: `wide_server cassandra` prints `ADDRESS PID`;
//! `wide_server hbase` prints `THRIFT2_URL MASTER_PID THRIFT_PID CONF_DIR
//! MASTER_INFO_PORT` (a JVM client such as PE reads `CONF_DIR` for the
//! ZooKeeper quorum). Stops the server when its standard input closes.

use std::io::Read;

fn main() {
    let line = match std::env::args().nth(1).as_deref().unwrap_or("cassandra") {
        "cassandra" => loadcell_testkit::cassandra().map(|s| format!("{} {}", s.address, s.pid)),
        "hbase" => loadcell_testkit::hbase().map(|s| {
            format!(
                "{} {} {} {} {}",
                s.url,
                s.master_pid,
                s.thrift_pid,
                s.dir().join("conf").display(),
                s.master_info_port
            )
        }),
        other => Err(format!(
            "unknown wide-column server '{other}': use cassandra or hbase"
        )),
    };
    let line = line.unwrap_or_else(|e| {
        eprintln!("wide_server: {e}");
        std::process::exit(1)
    });
    println!("{line}");
    // Until whoever started us closes our input; the servers stop at exit.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
