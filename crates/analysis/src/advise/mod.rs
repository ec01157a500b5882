//! `loadcell advise`: what to change in a server's configuration, and why,
//! from its settings and status and, when given, a run's result. Each rule
//! is a pure function over [`Facts`]; the CLI only gathers them.
//!
//! The MySQL rules and their wording of each problem come from the field
//! report's tuning list (`iov-cloud-perf-testing.txt`, "MySQL实例参数调优建议").

use std::collections::BTreeMap;

use serde::Serialize;

/// Which server the settings came from: rules and setting names differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Server {
    MySql,
    MariaDb,
    Postgres,
    Redis,
}

impl Server {
    /// The server of a product name as the drivers report it.
    pub fn of_product(product: &str) -> Option<Server> {
        match product {
            "MySQL" => Some(Server::MySql),
            "MariaDB" => Some(Server::MariaDb),
            "PostgreSQL" => Some(Server::Postgres),
            "Redis" | "Valkey" | "KeyDB" => Some(Server::Redis),
            _ => None,
        }
    }
}

/// What the advice reads.
#[derive(Debug, Clone)]
pub struct Facts {
    pub server: Server,
    /// Configuration under the server's own names (PostgreSQL's sizes in bytes).
    pub settings: BTreeMap<String, String>,
    /// Status counters since the server started (or since they were reset).
    pub status: BTreeMap<String, String>,
    /// Cores of the server's machine, when known.
    pub server_cores: Option<usize>,
    pub run: Option<RunFacts>,
}

/// What a run's result says that the rules weigh.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFacts {
    pub workload: String,
    pub sessions: usize,
    pub duration_s: f64,
    pub ops: u64,
    /// Operations of the `write` category.
    pub write_ops: u64,
    /// Operations whose kind is an insert.
    pub insert_ops: u64,
    pub errors: ErrorKinds,
    pub reconnects: u64,
    /// The slowest operation's latency, in ms.
    pub slowest_ms: f64,
    /// The highest value each of the server's gauges took in the run's
    /// samples (`threads_running`, `connected_clients`).
    pub server_peaks: BTreeMap<String, f64>,
    /// How much each of the server's counters grew during the run, from
    /// the rates its samples hold (`*_per_s`), under the name less that
    /// suffix (`created_tmp_disk_tables`).
    pub server_deltas: BTreeMap<String, f64>,
    /// The server process's highest CPU in the samples, percent of a core.
    pub server_cpu_peak_pct: Option<f64>,
    /// The run's wall-clock start and end, in Unix seconds.
    pub window: Option<(f64, f64)>,
}

/// A run's errors by what they say about the server's limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorKinds {
    /// Connections the server refused or never answered.
    pub connect: u64,
    /// Connections lost after they were made.
    pub lost: u64,
    /// Statements the server interrupted for running too long.
    pub statement_timeouts: u64,
}

impl ErrorKinds {
    /// Counts `count` errors of `class` with `message` (a result's error
    /// samples) under their kind.
    pub fn add(&mut self, class: &str, message: &str, count: u64) {
        let m = message.to_ascii_lowercase();
        if m.contains("max_statement_time") || m.contains("maximum statement execution time") {
            self.statement_timeouts += count;
        } else if m.contains("too many connections")
            || m.contains("too many clients")
            || m.contains("max number of clients")
            || m.contains("connecting to")
            || m.contains("refused")
        {
            self.connect += count;
        } else if class == "connection" {
            self.lost += count;
        }
    }
}

/// One rule that fired: what to change, why, and the numbers read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    /// Which servers the setting belongs to.
    pub applies_to: &'static str,
    pub change: String,
    pub why: &'static str,
    pub evidence: Vec<String>,
}

/// A rule's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Fires(Finding),
    Passes,
    /// The facts it needs are missing (no run, a setting the server lacks).
    Unknown(String),
}

/// Every rule's answer for one server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    pub server: Server,
    pub findings: Vec<Finding>,
    pub passed: Vec<&'static str>,
    /// Rules that could not be checked, and why.
    pub not_checked: Vec<NotChecked>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotChecked {
    pub rule: &'static str,
    pub why: String,
}

mod mysql;
mod postgres;
mod redis;

pub use mysql::*;
pub use postgres::*;
pub use redis::*;

type Rule = (&'static str, fn(&Facts) -> Verdict);

const MYSQL_RULES: &[Rule] = &[
    ("back_log", back_log),
    ("innodb_autoinc_lock_mode", autoinc_lock_mode),
    ("query_cache", query_cache),
    ("net_write_timeout", net_write_timeout),
    ("tmp_table_size", tmp_table_size),
    ("statement_time_limit", statement_time_limit),
    ("threads_running_limit", threads_running_limit),
];

const POSTGRES_RULES: &[Rule] = &[
    ("shared_buffers", shared_buffers),
    ("max_connections", max_connections),
    ("max_wal_size", max_wal_size),
];

const REDIS_RULES: &[Rule] = &[
    ("maxclients", maxclients),
    ("io-threads", io_threads),
    ("persistence", persistence),
];

/// Runs every rule for the facts' server.
pub fn advise(facts: &Facts) -> Advice {
    let rules = match facts.server {
        Server::MySql | Server::MariaDb => MYSQL_RULES,
        Server::Postgres => POSTGRES_RULES,
        Server::Redis => REDIS_RULES,
    };
    let mut advice = Advice {
        server: facts.server,
        findings: Vec::new(),
        passed: Vec::new(),
        not_checked: Vec::new(),
    };
    for (name, rule) in rules {
        match rule(facts) {
            Verdict::Fires(f) => advice.findings.push(f),
            Verdict::Passes => advice.passed.push(name),
            Verdict::Unknown(why) => advice.not_checked.push(NotChecked { rule: name, why }),
        }
    }
    advice
}

impl Facts {
    fn setting(&self, name: &str) -> Option<&str> {
        self.settings.get(name).map(String::as_str)
    }

    fn setting_num(&self, name: &str) -> Option<f64> {
        self.setting(name)?.trim().parse().ok()
    }

    /// A status counter; 0 when the server does not report it.
    fn status_num(&self, name: &str) -> f64 {
        self.status
            .get(name)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// The highest a gauge was during the run, else its value now.
    fn peak(&self, run_gauge: &str, status: &str) -> f64 {
        self.run
            .as_ref()
            .and_then(|r| r.server_peaks.get(run_gauge).copied())
            .unwrap_or(0.0)
            .max(self.status_num(status))
    }
}

fn missing(what: &str) -> Verdict {
    Verdict::Unknown(format!("the server reports no {what}"))
}

fn needs_run(what: &str) -> Verdict {
    Verdict::Unknown(format!("needs a run's result (--result) for {what}"))
}

fn on(value: &str) -> bool {
    !matches!(
        value.trim().to_ascii_uppercase().as_str(),
        "OFF" | "0" | "NO" | "FALSE" | ""
    )
}

/// Sizes for evidence: `16M`, `256K`, or bytes.
fn size(bytes: f64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= MIB {
        format!("{:.0}M", bytes / MIB)
    } else if bytes >= 1024.0 {
        format!("{:.0}K", bytes / 1024.0)
    } else {
        format!("{bytes:.0}")
    }
}

#[cfg(test)]
mod tests;
