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
        "Options: `loadcell run --help` lists engine options and each workload family's options."
    );
    o
}
