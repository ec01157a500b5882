//! A time-series server for benchmarks, started as the tests start
//! theirs: `ts_server influxdb|prometheus|victoriametrics|questdb` prints
//! `URL PID OPENTSDB_PORT INFLUX_TCP_PORT OPENTSDB_TCP_PORT` once it
//! serves (`-` for a port the server has not), and stops the server when
//! its standard input closes.

use std::io::Read;

fn main() {
    let product = std::env::args().nth(1).unwrap_or_else(|| "influxdb".into());
    let server = match product.as_str() {
        "influxdb" => loadcell_testkit::influxdb(),
        "prometheus" => loadcell_testkit::prometheus(),
        "victoriametrics" => loadcell_testkit::victoriametrics(),
        "questdb" => loadcell_testkit::questdb(),
        other => Err(format!(
            "unknown time-series server '{other}': use influxdb, prometheus, victoriametrics or questdb"
        )),
    };
    let server = server.unwrap_or_else(|e| {
        eprintln!("ts_server: {e}");
        std::process::exit(1)
    });
    let port = |p: Option<u16>| p.map_or("-".to_string(), |p| p.to_string());
    println!(
        "{} {} {} {} {}",
        server.server.url,
        server.server.pid,
        port(server.opentsdb_port),
        port(server.influx_tcp_port),
        port(server.opentsdb_tcp_port)
    );
    // Until whoever started us closes our input; dropping the server stops it.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
