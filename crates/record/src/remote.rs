//! The server's own view from another host (`--server-metrics URL`):
//! Prometheus text exposition scraped from node_exporter and the database
//! exporters (mysqld_exporter, postgres_exporter, redis_exporter), turned
//! into one sample per scrape of the figures loadcell samples on its own
//! host, rates from the difference between two scrapes.
//!
//! The exposition is read by a small parser of its own: a scrape needs
//! names, labels and values, and nothing of the format's metadata.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// One scrape of a host, with rates against the scrape before it. CPU in
/// percent of one core (up to 100 × `cpus`), rates per second; a figure
/// the host's exporters do not give is absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteSample {
    /// `host:port` of the URL scraped.
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<usize>,
    /// Memory in use: total less available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_1m: Option<f64>,
    /// Share of time the busiest disk had I/O in flight, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_busy_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_read_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_write_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_rx_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_tx_bytes_per_s: Option<f64>,
    /// The database exporter's counters of [`COUNTERS`]: gauges as read,
    /// counters as rates named `*_per_s`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server: BTreeMap<String, f64>,
}

impl RemoteSample {
    /// Folds a later sample of the same host into this one, each figure
    /// by `mean` (a figure only one side has is kept), as coarsening
    /// averages neighbouring samples.
    pub fn absorb(
        &mut self,
        later: RemoteSample,
        mean: &dyn Fn(Option<f64>, Option<f64>) -> Option<f64>,
    ) {
        self.cpu_pct = mean(self.cpu_pct, later.cpu_pct);
        self.cpus = later.cpus.or(self.cpus);
        self.memory_used_bytes = mean(self.memory_used_bytes, later.memory_used_bytes);
        self.load_1m = mean(self.load_1m, later.load_1m);
        self.disk_busy_pct = mean(self.disk_busy_pct, later.disk_busy_pct);
        self.disk_read_bytes_per_s = mean(self.disk_read_bytes_per_s, later.disk_read_bytes_per_s);
        self.disk_write_bytes_per_s =
            mean(self.disk_write_bytes_per_s, later.disk_write_bytes_per_s);
        self.net_rx_bytes_per_s = mean(self.net_rx_bytes_per_s, later.net_rx_bytes_per_s);
        self.net_tx_bytes_per_s = mean(self.net_tx_bytes_per_s, later.net_tx_bytes_per_s);
        for (name, value) in later.server {
            let mine = self.server.get(&name).copied();
            if let Some(v) = mean(mine, Some(value)) {
                self.server.insert(name, v);
            }
        }
    }

    /// The host's CPU in percent of the whole machine.
    pub fn machine_cpu_pct(&self) -> Option<f64> {
        Some(self.cpu_pct? / self.cpus?.max(1) as f64)
    }
}

/// How a URL's scrapes went, as the result records it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScrapeSource {
    /// The URL, its password (if any) left out.
    pub url: String,
    pub host: String,
    pub scrapes: u64,
    pub failures: u64,
    /// The latest failure's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// How an exporter's series becomes a figure: summed over its label sets,
/// a gauge as read, a counter as a rate per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// The database exporters' series loadcell keeps, and the name each takes
/// in [`RemoteSample::server`] (a counter's with `_per_s` appended).
pub const COUNTERS: &[(&str, Kind, &str)] = &[
    // mysqld_exporter
    (
        "mysql_global_status_threads_connected",
        Kind::Gauge,
        "mysql_threads_connected",
    ),
    (
        "mysql_global_status_threads_running",
        Kind::Gauge,
        "mysql_threads_running",
    ),
    (
        "mysql_global_status_queries",
        Kind::Counter,
        "mysql_queries",
    ),
    (
        "mysql_global_status_slow_queries",
        Kind::Counter,
        "mysql_slow_queries",
    ),
    (
        "mysql_global_status_aborted_connects",
        Kind::Counter,
        "mysql_aborted_connects",
    ),
    (
        "mysql_global_status_innodb_row_lock_waits",
        Kind::Counter,
        "mysql_row_lock_waits",
    ),
    // postgres_exporter
    ("pg_stat_database_numbackends", Kind::Gauge, "pg_backends"),
    ("pg_stat_database_xact_commit", Kind::Counter, "pg_commits"),
    (
        "pg_stat_database_xact_rollback",
        Kind::Counter,
        "pg_rollbacks",
    ),
    (
        "pg_stat_database_blks_read",
        Kind::Counter,
        "pg_blocks_read",
    ),
    ("pg_stat_database_deadlocks", Kind::Counter, "pg_deadlocks"),
    // redis_exporter
    ("redis_connected_clients", Kind::Gauge, "redis_clients"),
    (
        "redis_memory_used_bytes",
        Kind::Gauge,
        "redis_memory_used_bytes",
    ),
    (
        "redis_commands_processed_total",
        Kind::Counter,
        "redis_commands",
    ),
    (
        "redis_keyspace_hits_total",
        Kind::Counter,
        "redis_keyspace_hits",
    ),
    (
        "redis_keyspace_misses_total",
        Kind::Counter,
        "redis_keyspace_misses",
    ),
    (
        "redis_rejected_connections_total",
        Kind::Counter,
        "redis_rejected_connections",
    ),
];

/// One series of an exposition: name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series<'a> {
    pub name: &'a str,
    pub labels: Vec<(&'a str, String)>,
    pub value: f64,
}

impl Series<'_> {
    fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses Prometheus text exposition (0.0.4), comments skipped; an error
/// names the first line that is not a series, and a text without any
/// series is one: a page that is not an exporter's.
pub fn parse(text: &str) -> Result<Vec<Series<'_>>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let series = parse_line(line).ok_or_else(|| {
            let shown: String = line.chars().take(60).collect();
            format!("line {} is not Prometheus text: {shown}", n + 1)
        })?;
        out.push(series);
    }
    if out.is_empty() {
        return Err("no metrics in the answer".to_string());
    }
    Ok(out)
}

fn parse_line(line: &str) -> Option<Series<'_>> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = inner;
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let (label, after) = rest.split_once("=\"")?;
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next()? {
                    (i, '"') => break i,
                    (_, '\\') => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        c => value.push(c),
                    },
                    (_, c) => value.push(c),
                }
            };
            labels.push((label.trim(), value));
            rest = &after[end + 1..];
        }
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Series {
        name,
        labels,
        value,
    })
}

/// The totals one scrape gives, before they become rates.
#[derive(Debug, Clone, Default)]
struct Totals {
    cpu_busy_s: Option<f64>,
    cpus: Option<usize>,
    memory_used: Option<f64>,
    load_1m: Option<f64>,
    disk_io_s: BTreeMap<String, f64>,
    disk_read: Option<f64>,
    disk_written: Option<f64>,
    net_rx: Option<f64>,
    net_tx: Option<f64>,
    /// [`COUNTERS`]' sums by index.
    server: BTreeMap<usize, f64>,
}

fn add(slot: &mut Option<f64>, v: f64) {
    *slot = Some(slot.unwrap_or(0.0) + v);
}

impl Totals {
    fn of(series: &[Series<'_>]) -> Totals {
        let mut t = Totals::default();
        let mut cpus = std::collections::BTreeSet::new();
        let (mut mem_total, mut mem_available) = (None, None);
        for s in series {
            match s.name {
                "node_cpu_seconds_total" => {
                    cpus.insert(s.label("cpu").unwrap_or_default().to_string());
                    if !matches!(s.label("mode"), Some("idle" | "iowait")) {
                        add(&mut t.cpu_busy_s, s.value);
                    }
                }
                "node_memory_MemTotal_bytes" => mem_total = Some(s.value),
                "node_memory_MemAvailable_bytes" => mem_available = Some(s.value),
                "node_load1" => t.load_1m = Some(s.value),
                "node_disk_io_time_seconds_total" => {
                    let device = s.label("device").unwrap_or_default().to_string();
                    t.disk_io_s.insert(device, s.value);
                }
                "node_disk_read_bytes_total" => add(&mut t.disk_read, s.value),
                "node_disk_written_bytes_total" => add(&mut t.disk_written, s.value),
                "node_network_receive_bytes_total" => add(&mut t.net_rx, s.value),
                "node_network_transmit_bytes_total" => add(&mut t.net_tx, s.value),
                name => {
                    if let Some(i) = COUNTERS.iter().position(|(n, _, _)| *n == name) {
                        *t.server.entry(i).or_default() += s.value;
                    }
                }
            }
        }
        t.cpus = (!cpus.is_empty()).then_some(cpus.len());
        t.memory_used = mem_total
            .zip(mem_available)
            .map(|(total, available)| total - available);
        t
    }
}

/// One URL's scrapes: the last totals, to turn the next into rates.
#[derive(Debug)]
pub struct Scraped {
    host: String,
    previous: Option<(Instant, Totals)>,
}

impl Scraped {
    pub fn new(host: &str) -> Scraped {
        Scraped {
            host: host.to_string(),
            previous: None,
        }
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// The sample the exposition `text`, read at `at`, gives; rates are
    /// absent from the first.
    pub fn read(&mut self, text: &str, at: Instant) -> Result<RemoteSample, String> {
        let now = Totals::of(&parse(text)?);
        let mut sample = RemoteSample {
            host: self.host.clone(),
            cpus: now.cpus,
            memory_used_bytes: now.memory_used,
            load_1m: now.load_1m,
            ..RemoteSample::default()
        };
        for (i, v) in &now.server {
            let (_, kind, name) = COUNTERS[*i];
            if kind == Kind::Gauge {
                sample.server.insert(name.to_string(), *v);
            }
        }
        if let Some((then, before)) = &self.previous {
            let secs = at.duration_since(*then).as_secs_f64().max(1e-6);
            let rate = |a: Option<f64>, b: Option<f64>| Some(((a? - b?) / secs).max(0.0));
            sample.cpu_pct = rate(now.cpu_busy_s, before.cpu_busy_s).map(|r| 100.0 * r);
            sample.disk_read_bytes_per_s = rate(now.disk_read, before.disk_read);
            sample.disk_write_bytes_per_s = rate(now.disk_written, before.disk_written);
            sample.net_rx_bytes_per_s = rate(now.net_rx, before.net_rx);
            sample.net_tx_bytes_per_s = rate(now.net_tx, before.net_tx);
            sample.disk_busy_pct = now
                .disk_io_s
                .iter()
                .filter_map(|(device, s)| rate(Some(*s), before.disk_io_s.get(device).copied()))
                .map(|busy| (100.0 * busy).min(100.0))
                .reduce(f64::max);
            for (i, v) in &now.server {
                let (_, kind, name) = COUNTERS[*i];
                if let (Kind::Counter, Some(r)) =
                    (kind, rate(Some(*v), before.server.get(i).copied()))
                {
                    sample.server.insert(format!("{name}_per_s"), r);
                }
            }
        }
        self.previous = Some((at, now));
        Ok(sample)
    }
}

/// What the scrapes found, shared by the thread that scrapes and the
/// collector that samples: the samples taken since the collector last
/// looked, and each URL's tally.
#[derive(Debug, Clone)]
pub struct Readings(Arc<Mutex<Shared>>);

#[derive(Debug, Default)]
struct Shared {
    fresh: Vec<RemoteSample>,
    sources: Vec<ScrapeSource>,
}

/// The scraping side's handle: it stops being able to deliver (and the
/// scraper stops) once every [`Readings`] is dropped.
#[derive(Debug)]
pub struct ReadingsWriter(Weak<Mutex<Shared>>);

impl Readings {
    /// Readings of `sources` (URL, host), and the writer the scraper keeps.
    pub fn new(sources: &[(String, String)]) -> (Readings, ReadingsWriter) {
        let shared = Shared {
            fresh: Vec::new(),
            sources: sources
                .iter()
                .map(|(url, host)| ScrapeSource {
                    url: url.clone(),
                    host: host.clone(),
                    ..ScrapeSource::default()
                })
                .collect(),
        };
        let readings = Readings(Arc::new(Mutex::new(shared)));
        let writer = ReadingsWriter(Arc::downgrade(&readings.0));
        (readings, writer)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The samples scraped since the last call, one per URL at most (the
    /// newest): a URL whose scrapes failed meanwhile has none.
    pub fn take(&self) -> Vec<RemoteSample> {
        std::mem::take(&mut self.lock().fresh)
    }

    pub fn sources(&self) -> Vec<ScrapeSource> {
        self.lock().sources.clone()
    }
}

impl ReadingsWriter {
    /// Records source `i`'s scrape; `false` once nobody reads them.
    pub fn put(&self, i: usize, scrape: Result<RemoteSample, String>) -> bool {
        let Some(shared) = self.0.upgrade() else {
            return false;
        };
        let mut shared = shared.lock().unwrap_or_else(|e| e.into_inner());
        let source = &mut shared.sources[i];
        source.scrapes += 1;
        match scrape {
            Ok(sample) => {
                let host = source.host.clone();
                shared.fresh.retain(|s| s.host != host);
                shared.fresh.push(sample);
            }
            Err(e) => {
                source.failures += 1;
                source.last_error = Some(e);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const NODE_1: &str = r#"# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 100
node_cpu_seconds_total{cpu="0",mode="iowait"} 5
node_cpu_seconds_total{cpu="0",mode="user"} 10
node_cpu_seconds_total{cpu="1",mode="idle"} 100
node_cpu_seconds_total{cpu="1",mode="system"} 10
node_memory_MemTotal_bytes 8e+09
node_memory_MemAvailable_bytes 6e+09
node_load1 1.5
node_disk_io_time_seconds_total{device="vda"} 10
node_disk_read_bytes_total{device="vda"} 1000
node_disk_written_bytes_total{device="vda"} 2000
node_network_receive_bytes_total{device="lo"} 500
node_network_transmit_bytes_total{device="lo"} 500
redis_connected_clients 7
redis_commands_processed_total 1000
"#;

    #[test]
    fn exposition_lines_are_parsed_with_escaped_labels() {
        let s = parse("a_b{x=\"1\",y=\"q\\\"z\\\\\"} 2.5 1700000000\nc 3\n").unwrap();
        assert_eq!(s[0].name, "a_b");
        assert_eq!(
            s[0].labels,
            vec![("x", "1".to_string()), ("y", "q\"z\\".to_string())]
        );
        assert_eq!((s[0].value, s[1].value), (2.5, 3.0));
        let html = parse("<html><body>Node Exporter</body></html>").unwrap_err();
        assert_eq!(
            html,
            "line 1 is not Prometheus text: <html><body>Node Exporter</body></html>"
        );
        assert_eq!(
            parse("# only comments\n").unwrap_err(),
            "no metrics in the answer"
        );
    }

    #[test]
    fn two_scrapes_give_the_hosts_cpu_disk_network_and_the_servers_rates() {
        let mut host = Scraped::new("db1:9100");
        let t0 = Instant::now();
        let first = host.read(NODE_1, t0).unwrap();
        assert_eq!(first.cpus, Some(2));
        assert_eq!(first.memory_used_bytes, Some(2e9));
        assert_eq!(first.load_1m, Some(1.5));
        assert_eq!(first.cpu_pct, None, "no rate without a previous scrape");
        assert_eq!(first.server.get("redis_clients"), Some(&7.0));
        // Two seconds later: 3 busy CPU-seconds (1.5 cores), the disk busy
        // one second of two, 4000 bytes written, 1000 commands.
        let node_2 = NODE_1
            .replace("mode=\"user\"} 10", "mode=\"user\"} 12")
            .replace("mode=\"system\"} 10", "mode=\"system\"} 11")
            .replace(
                "node_disk_io_time_seconds_total{device=\"vda\"} 10",
                "node_disk_io_time_seconds_total{device=\"vda\"} 11",
            )
            .replace("{device=\"vda\"} 2000", "{device=\"vda\"} 6000")
            .replace(
                "redis_commands_processed_total 1000",
                "redis_commands_processed_total 2000",
            );
        let second = host.read(&node_2, t0 + Duration::from_secs(2)).unwrap();
        assert_eq!(second.cpu_pct, Some(150.0));
        assert_eq!(second.machine_cpu_pct(), Some(75.0));
        assert_eq!(second.disk_busy_pct, Some(50.0));
        assert_eq!(second.disk_write_bytes_per_s, Some(2000.0));
        assert_eq!(second.disk_read_bytes_per_s, Some(0.0));
        assert_eq!(second.net_rx_bytes_per_s, Some(0.0));
        assert_eq!(second.server.get("redis_commands_per_s"), Some(&500.0));
        assert_eq!(second.host, "db1:9100");
    }

    #[test]
    fn a_later_sample_is_folded_in_by_the_mean_given() {
        let mut a = RemoteSample {
            host: "h:9100".into(),
            cpu_pct: Some(100.0),
            load_1m: None,
            server: BTreeMap::from([("redis_clients".to_string(), 2.0)]),
            ..RemoteSample::default()
        };
        let b = RemoteSample {
            cpu_pct: Some(50.0),
            load_1m: Some(3.0),
            server: BTreeMap::from([("redis_clients".to_string(), 4.0)]),
            ..a.clone()
        };
        a.absorb(b, &|x, y| match (x, y) {
            (Some(x), Some(y)) => Some((x + y) / 2.0),
            (x, y) => x.or(y),
        });
        assert_eq!((a.cpu_pct, a.load_1m), (Some(75.0), Some(3.0)));
        assert_eq!(a.server["redis_clients"], 3.0);
    }

    #[test]
    fn readings_keep_the_newest_sample_per_host_and_count_failures() {
        let (readings, writer) =
            Readings::new(&[("http://a:9100/metrics".into(), "a:9100".into())]);
        let sample = |load| RemoteSample {
            host: "a:9100".into(),
            load_1m: Some(load),
            ..RemoteSample::default()
        };
        assert!(writer.put(0, Ok(sample(1.0))));
        assert!(writer.put(0, Ok(sample(2.0))));
        assert!(writer.put(0, Err("connection refused".into())));
        assert_eq!(readings.take(), vec![sample(2.0)]);
        assert!(readings.take().is_empty());
        let source = &readings.sources()[0];
        assert_eq!((source.scrapes, source.failures), (3, 1));
        assert_eq!(source.last_error.as_deref(), Some("connection refused"));
        drop(readings);
        assert!(!writer.put(0, Ok(sample(3.0))), "nobody reads any more");
    }
}
