//! `--export KIND=URL`: each interval's numbers pushed while the run goes,
//! as k6's outputs do, to a Prometheus remote-write receiver or to
//! InfluxDB, through the time-series family's own drivers (their
//! encoders, HTTP client and error reading). The collector hands each
//! interval to a bounded queue and never waits: a thread of the export's
//! own sends it, and what the queue had no room for is counted as dropped.
//!
//! Series (Prometheus names `measurement_field`; InfluxDB measurements and
//! fields), every one labelled with `run`, `workload`, `target` (its
//! password left out) and, for a shard, `shard`:
//! - `loadcell`: [`RUN_FIELDS`] per measured interval;
//! - `loadcell_op`, by `op`: [`OP_FIELDS`];
//! - `loadcell_resources`, by `host` (`loadcell` for this host, else the
//!   `--server-metrics` host): [`RESOURCE_FIELDS`];
//! - `loadcell_server`, by `host`: the server's own counters as sampled.

use loadcell_core::clock::wall_ns;
use std::time::Duration;

use anyhow::anyhow;
use loadcell_core::ts::TsConn;
use loadcell_core::{Driver, Target};
use loadcell_drivers::ts::influx::InfluxDriver;
use loadcell_drivers::ts::remote_write::RemoteWriteDriver;
use loadcell_engine::IntervalView;
use loadcell_record::remote::RemoteSample;
use loadcell_record::resources::ResourceSample;
use loadcell_record::result::Export;
use loadcell_record::LatencySummary;
use tokio::sync::mpsc;

/// Intervals the queue holds while a write is slow: a minute at 1 s.
const QUEUE: usize = 64;
/// A write taking longer counts as failed.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the end of a run waits for what is still queued.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

pub const RUN_FIELDS: [&str; 8] = [
    "events",
    "events_per_s",
    "errors",
    "failed_events",
    "dropped",
    "retries",
    "reconnects",
    "sessions",
];
pub const OP_FIELDS: [&str; 8] = [
    "count",
    "ops_per_s",
    "errors",
    "latency_mean_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_max_ms",
];
pub const RESOURCE_FIELDS: [&str; 11] = [
    "cpu_pct",
    "cpus",
    "load_1m",
    "memory_used_bytes",
    "net_rx_bytes_per_s",
    "net_tx_bytes_per_s",
    "disk_busy_pct",
    "disk_read_bytes_per_s",
    "disk_write_bytes_per_s",
    "client_cpu_pct",
    "client_rss_bytes",
];

/// Every metric name a Prometheus remote-write export holds, besides the
/// server's own counters (`loadcell_server_*`, named by each server).
pub fn prometheus_names() -> Vec<String> {
    let name = |m: &str, f: &str| format!("{m}_{f}");
    RUN_FIELDS
        .iter()
        .map(|f| name("loadcell", f))
        .chain(OP_FIELDS.iter().map(|f| name("loadcell_op", f)))
        .chain(
            RESOURCE_FIELDS
                .iter()
                .map(|f| name("loadcell_resources", f)),
        )
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    PrometheusRw,
    Influx,
}

/// One `--export`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    kind: Kind,
    /// The ts family's target: `prom-rw://…` or `influx://…`.
    target: String,
    /// As given, its password left out.
    shown: String,
}

/// `KIND=URL` with k6's output names.
pub fn parse_output(text: &str) -> Result<Output, String> {
    let usage = "prometheus-rw=http://HOST:9090/api/v1/write or influxdb=http://HOST:8086/DB";
    let (kind, url) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}': give KIND=URL, e.g. {usage}"))?;
    let kind = match kind {
        "prometheus-rw" | "experimental-prometheus-rw" => Kind::PrometheusRw,
        "influxdb" => Kind::Influx,
        other => return Err(format!("unknown export '{other}'; use {usage}")),
    };
    let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(format!(
            "'{url}': export over http:// or https://, e.g. {usage}"
        ));
    };
    let scheme = match kind {
        Kind::PrometheusRw => "prom-rw",
        Kind::Influx => "influx",
    };
    let sep = if rest.contains('?') { '&' } else { '?' };
    let target = match tls {
        true => format!("{scheme}://{rest}{sep}tls=true"),
        false => format!("{scheme}://{rest}"),
    };
    let shown = Target::parse(url)
        .map(|t| t.redacted())
        .map_err(|e| format!("'{url}': {e}"))?;
    Ok(Output {
        kind,
        target,
        shown: format!("{}={shown}", text.split_once('=').map_or("", |(k, _)| k)),
    })
}

/// The labels every series carries.
#[derive(Debug, Clone)]
pub struct Labels {
    pub run: String,
    pub workload: String,
    pub target: String,
    pub shard: Option<String>,
}

/// What the collector hands over: owned, so the queue holds it.
enum Message {
    Interval {
        at_ns: i64,
        values: [f64; RUN_FIELDS.len()],
        ops: Vec<(&'static str, [f64; OP_FIELDS.len()])>,
    },
    Resources {
        at_ns: i64,
        sample: Box<ResourceSample>,
    },
}

/// A running export: its queue, and the thread that empties it.
pub struct Exporter {
    output: Output,
    run: String,
    queue: mpsc::Sender<Message>,
    dropped: u64,
    done: std::sync::mpsc::Receiver<Tally>,
}

/// What the sending thread did.
#[derive(Debug, Default, Clone)]
struct Tally {
    intervals: u64,
    points: u64,
    failed_writes: u64,
    last_error: Option<String>,
}

impl Exporter {
    /// Connects and writes the run's first point (`loadcell_sessions`,
    /// at the start): a target that refuses it is an error before any load.
    pub fn start(output: &Output, labels: Labels, sessions: usize) -> anyhow::Result<Exporter> {
        let target =
            Target::parse(&output.target).map_err(|e| anyhow!("--export {}: {e}", output.shown))?;
        let (queue, rx) = mpsc::channel(QUEUE);
        let (started_tx, started) = std::sync::mpsc::channel();
        let (done_tx, done) = std::sync::mpsc::channel();
        let shown = output.shown.clone();
        let kind = output.kind;
        let run = labels.run.clone();
        std::thread::Builder::new()
            .name("loadcell-export".into())
            .spawn(move || {
                let built = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let runtime = match built {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = started_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let tally = runtime.block_on(async {
                    match kind {
                        Kind::PrometheusRw => {
                            let d = RemoteWriteDriver::from_target(&target);
                            send(d, labels, sessions, rx, started_tx).await
                        }
                        Kind::Influx => {
                            let d = InfluxDriver::from_target(&target);
                            send(d, labels, sessions, rx, started_tx).await
                        }
                    }
                });
                let _ = done_tx.send(tally);
            })?;
        match started.recv() {
            Ok(Ok(())) => Ok(Exporter {
                output: output.clone(),
                run,
                queue,
                dropped: 0,
                done,
            }),
            Ok(Err(e)) => Err(anyhow!("--export {shown}: {e}")),
            Err(_) => Err(anyhow!(
                "--export {shown}: the export stopped before it began"
            )),
        }
    }

    fn offer(&mut self, message: Message) {
        if self.queue.try_send(message).is_err() {
            self.dropped += 1;
        }
    }

    /// Queues a measured interval.
    pub fn interval(&mut self, view: &IntervalView<'_>, ops: &[&'static str], sessions: usize) {
        let s = view.stats;
        let secs = view.duration.as_secs_f64().max(1e-9);
        let errors: u64 = s.ops.iter().map(|o| o.errors).sum();
        let values = [
            s.events as f64,
            s.events as f64 / secs,
            errors as f64,
            s.failed_events as f64,
            s.dropped as f64,
            s.retries as f64,
            s.reconnects as f64,
            sessions as f64,
        ];
        let ops = ops
            .iter()
            .zip(&s.ops)
            .map(|(name, o)| {
                let l = LatencySummary::of(&o.latency);
                let values = [
                    o.count as f64,
                    o.count as f64 / secs,
                    o.errors as f64,
                    l.mean,
                    l.p50,
                    l.p95,
                    l.p99,
                    l.max,
                ];
                (*name, values)
            })
            .collect();
        self.offer(Message::Interval {
            at_ns: wall_ns(),
            values,
            ops,
        });
    }

    pub fn resources(&mut self, sample: &ResourceSample) {
        self.offer(Message::Resources {
            at_ns: wall_ns(),
            sample: Box::new(sample.clone()),
        });
    }

    /// Lets the thread send what is queued (for [`DRAIN_TIMEOUT`] at most)
    /// and says how it went.
    pub fn finish(self) -> Export {
        let Exporter {
            output,
            run,
            queue,
            dropped,
            done,
        } = self;
        drop(queue);
        let (tally, unfinished) = match done.recv_timeout(DRAIN_TIMEOUT) {
            Ok(t) => (t, false),
            Err(_) => (Tally::default(), true),
        };
        Export {
            output: output.shown,
            run,
            intervals: tally.intervals,
            points: tally.points,
            failed_writes: tally.failed_writes,
            dropped_intervals: dropped,
            unfinished,
            last_error: tally.last_error,
        }
    }
}

/// The sending thread: the first point, then each message as it comes.
async fn send<D>(
    driver: Result<D, String>,
    labels: Labels,
    sessions: usize,
    mut rx: mpsc::Receiver<Message>,
    started: std::sync::mpsc::Sender<Result<(), String>>,
) -> Tally
where
    D: Driver,
    D::Conn: TsConn,
{
    let mut tally = Tally::default();
    let driver = match driver {
        Ok(d) => d,
        Err(e) => {
            let _ = started.send(Err(e));
            return tally;
        }
    };
    let mut conn = None;
    let first = write(&driver, &mut conn, &mut tally, |c| {
        begin(c, "loadcell", &labels, None);
        c.field("sessions", sessions as f64);
        c.end_point(wall_ns());
    })
    .await;
    let _ = started.send(first);
    while let Some(message) = rx.recv().await {
        let written = write(&driver, &mut conn, &mut tally, |c| {
            encode(c, &labels, &message)
        })
        .await;
        match written {
            Ok(()) => tally.intervals += u64::from(matches!(message, Message::Interval { .. })),
            Err(e) => {
                tally.failed_writes += 1;
                tally.last_error = Some(e);
            }
        }
    }
    tally
}

/// Encodes points with `build` and sends them as one request, on the
/// connection kept from the last write (a new one after a failure).
async fn write<D>(
    driver: &D,
    conn: &mut Option<D::Conn>,
    tally: &mut Tally,
    build: impl FnOnce(&mut D::Conn),
) -> Result<(), String>
where
    D: Driver,
    D::Conn: TsConn,
{
    let attempt = async {
        let c = match conn {
            Some(c) => c,
            None => conn.insert(driver.connect().await.map_err(|e| e.to_string())?),
        };
        build(c);
        let mut refused = None;
        let outcome = c
            .write(&mut |why| {
                refused.get_or_insert_with(|| why.to_string());
            })
            .await
            .map_err(|e| e.to_string())?;
        match refused {
            Some(why) => Err(format!(
                "{} of {} points refused: {why}",
                outcome.failed, outcome.points
            )),
            None => Ok(outcome.points),
        }
    };
    let result = match tokio::time::timeout(WRITE_TIMEOUT, attempt).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {}s", WRITE_TIMEOUT.as_secs())),
    };
    match result {
        Ok(points) => {
            tally.points += points;
            Ok(())
        }
        Err(e) => {
            *conn = None;
            Err(e)
        }
    }
}

fn begin(c: &mut impl TsConn, measurement: &str, labels: &Labels, by: Option<(&str, &str)>) {
    c.point(measurement);
    c.tag("run", &labels.run);
    c.tag("workload", &labels.workload);
    c.tag("target", &labels.target);
    if let Some(shard) = &labels.shard {
        c.tag("shard", shard);
    }
    if let Some((key, value)) = by {
        c.tag(key, value);
    }
}

fn fields(c: &mut impl TsConn, names: &[&str], values: &[Option<f64>]) {
    for (name, value) in names.iter().zip(values) {
        if let Some(v) = value {
            c.field(name, *v);
        }
    }
}

fn encode(c: &mut impl TsConn, labels: &Labels, message: &Message) {
    match message {
        Message::Interval { at_ns, values, ops } => {
            begin(c, "loadcell", labels, None);
            fields(c, &RUN_FIELDS, &values.map(Some));
            c.end_point(*at_ns);
            for (op, values) in ops {
                begin(c, "loadcell_op", labels, Some(("op", op)));
                fields(c, &OP_FIELDS, &values.map(Some));
                c.end_point(*at_ns);
            }
        }
        Message::Resources { at_ns, sample } => {
            let s = sample.as_ref();
            begin(c, "loadcell_resources", labels, Some(("host", "loadcell")));
            let here = [
                Some(s.host_cpu_pct),
                Some(s.host_cpus as f64),
                Some(s.load_1m),
                None,
                Some(s.net_rx_bytes_per_s),
                Some(s.net_tx_bytes_per_s),
                Some(s.disk_busy_pct),
                Some(s.disk_read_bytes_per_s),
                Some(s.disk_write_bytes_per_s),
                Some(s.client_cpu_pct),
                Some(s.client_rss_bytes as f64),
            ];
            fields(c, &RESOURCE_FIELDS, &here);
            c.end_point(*at_ns);
            server_counters(c, labels, "loadcell", &s.server, *at_ns);
            for r in &s.remote {
                remote(c, labels, r, *at_ns);
            }
        }
    }
}

fn remote(c: &mut impl TsConn, labels: &Labels, r: &RemoteSample, at_ns: i64) {
    let values = [
        r.cpu_pct,
        r.cpus.map(|n| n as f64),
        r.load_1m,
        r.memory_used_bytes,
        r.net_rx_bytes_per_s,
        r.net_tx_bytes_per_s,
        r.disk_busy_pct,
        r.disk_read_bytes_per_s,
        r.disk_write_bytes_per_s,
        None,
        None,
    ];
    if values.iter().any(Option::is_some) {
        begin(c, "loadcell_resources", labels, Some(("host", &r.host)));
        fields(c, &RESOURCE_FIELDS, &values);
        c.end_point(at_ns);
    }
    server_counters(c, labels, &r.host, &r.server, at_ns);
}

fn server_counters(
    c: &mut impl TsConn,
    labels: &Labels,
    host: &str,
    counters: &std::collections::BTreeMap<String, f64>,
    at_ns: i64,
) {
    if counters.is_empty() {
        return;
    }
    begin(c, "loadcell_server", labels, Some(("host", host)));
    for (name, value) in counters {
        c.field(name, *value);
    }
    c.end_point(at_ns);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_take_k6s_names_and_become_ts_targets() {
        let rw = parse_output("experimental-prometheus-rw=http://p:9090/api/v1/write").unwrap();
        assert_eq!(rw.kind, Kind::PrometheusRw);
        assert_eq!(rw.target, "prom-rw://p:9090/api/v1/write");
        let influx = parse_output("influxdb=https://u:secret@i:8086/k6").unwrap();
        assert_eq!(influx.target, "influx://u:secret@i:8086/k6?tls=true");
        assert!(!influx.shown.contains("secret"), "{}", influx.shown);
        assert!(parse_output("statsd=http://x")
            .unwrap_err()
            .starts_with("unknown export 'statsd'; use prometheus-rw="));
        assert!(parse_output("influxdb=udp://x:8089")
            .unwrap_err()
            .contains("http://"));
        assert!(parse_output("http://x")
            .unwrap_err()
            .contains("give KIND=URL"));
    }

    /// The dashboard shows only series loadcell exports.
    #[test]
    fn the_grafana_dashboard_queries_only_exported_metrics() {
        let text = include_str!("../../../deploy/grafana/loadcell.json");
        let dashboard: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
        let names = prometheus_names();
        let mut exprs = Vec::new();
        collect_exprs(&dashboard, &mut exprs);
        assert!(exprs.len() >= 6, "{exprs:?}");
        for expr in exprs {
            let mut rest = expr.as_str();
            while let Some(at) = rest.find("loadcell_") {
                let metric: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    names.contains(&metric),
                    "{metric} in {expr} is not exported"
                );
                rest = &rest[at + metric.len()..];
            }
        }
    }

    fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("expr" | "query", serde_json::Value::String(s)) => out.push(s.clone()),
                        _ => collect_exprs(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| collect_exprs(v, out)),
            _ => {}
        }
    }
}
