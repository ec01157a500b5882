//! `loadcell list`: workloads, drivers and where their options are.

use std::fmt::Write as _;

use crate::workload::{catalog, families_label};

pub fn render() -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Workloads:");
    for (name, families, about) in catalog() {
        let _ = writeln!(o, "  {name:<24} [{}] {about}", families_label(families));
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Drivers (--target URL):");
    for d in loadcell_drivers::REGISTRY {
        let _ = writeln!(o, "  {:<10} [{}] {}", d.name, d.family.as_str(), d.about);
        let _ = writeln!(o, "  {:<10} {}", "", d.url_form);
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Live export (--export KIND=URL, during run, sweep and findmax):"
    );
    let _ = writeln!(
        o,
        "  prometheus-rw=URL   Prometheus remote write (also experimental-prometheus-rw), \
         e.g. http://HOST:9090/api/v1/write"
    );
    let _ = writeln!(
        o,
        "  influxdb=URL/DB     Influx line protocol to an existing database, \
         e.g. http://HOST:8086/loadcell"
    );
    let _ = writeln!(
        o,
        "  series: {} (and loadcell_server_* per host); \
         deploy/grafana/loadcell.json shows them",
        crate::export::prometheus_names().join(" ")
    );
    let _ = writeln!(
        o,
        "Server's own view (--server-metrics URL): node_exporter, mysqld_exporter, \
         postgres_exporter, redis_exporter"
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Options: `loadcell run --help` lists engine options and each workload family's options."
    );
    o
}
