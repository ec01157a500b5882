//! MQTT brokers (Mosquitto, RabbitMQ's MQTT plugin, EMQX, HiveMQ): MQTT
//! 3.1.1 or 5.0, written directly on the drivers' stream layer
//! (`codec`, `connection`).
//!
//! Target: `mqtt://[user:password@]host[:port][,host[:port]…][?param…]`
//! or `mqtts://…` (TLS, port 8883). Several hosts are used round-robin,
//! one per connection. Parameters:
//!
//! - `version=5`: speak MQTT 5.0 (default `3.1.1`, which every broker
//!   speaks);
//! - `client_id=PREFIX`: client ids are PREFIX then a number, unique per
//!   process (default `loadcell-` and 8 hex digits of this run);
//! - `keepalive=SECONDS`: the keep-alive each connection announces
//!   (default 60); a connection sends a PINGREQ when it has been silent
//!   for half of it;
//! - `sslrootcert=PATH`, `insecure=true`: as for `https://`;
//! - `metrics=http://HOST:PORT/PATH`: the broker's Prometheus page
//!   (RabbitMQ's `rabbitmq_prometheus`, port 15692, `/metrics`), sampled
//!   every interval.
//!
//! The broker's own counters are its `$SYS/broker/…` topics (Mosquitto),
//! read on the monitoring connection every interval, and the `metrics`
//! page's (RabbitMQ: connections, messages received, routed, delivered
//! and dropped, messages in queues, memory).

mod codec;
mod connection;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::kv::KvCapabilities;
use loadcell_core::mqtt::{MqttConn, QoS, FAMILY};
use loadcell_core::{Driver, DriverError, ServerInfo, Target};
use rustls::ClientConfig;

pub use connection::MqttConnection;

use crate::http::status::{self, prometheus_text, StatusPage};
use crate::transport::target_url::{Query, UrlParts};
use crate::transport::tls::{self, SslMode};
use crate::transport::url_text;
use crate::DriverInfo;
use codec::Version;

pub const INFO: DriverInfo = DriverInfo {
    name: "mqtt",
    schemes: &["mqtt", "mqtts"],
    family: FAMILY,
    url_form: "mqtt(s)://[user:pass@]host[:port][,host2…][?version=5][&client_id=PREFIX][&keepalive=SECONDS][&sslrootcert=PATH|insecure=true][&metrics=http://HOST:PORT/metrics]",
    about: "MQTT 3.1.1 and 5.0 brokers (Mosquitto, RabbitMQ, EMQX, HiveMQ): QoS 0/1/2, TLS, round-robin hosts",
    kv: KvCapabilities::NONE,
    blocking: false,
};

const PARAMS: &[&str] = &[
    "version",
    "client_id",
    "keepalive",
    "sslrootcert",
    "insecure",
    "metrics",
];

/// RabbitMQ's Prometheus samples kept as server counters (3.10 counts MQTT
/// messages under the AMQP protocol label; each is summed over labels).
const RABBITMQ_COUNTERS: &[(&str, &str)] = &[
    ("rabbitmq_connections", "rabbitmq_connections"),
    (
        "rabbitmq_global_messages_received_total",
        "rabbitmq_messages_received_total",
    ),
    (
        "rabbitmq_global_messages_routed_total",
        "rabbitmq_messages_routed_total",
    ),
    (
        "rabbitmq_global_messages_delivered_total",
        "rabbitmq_messages_delivered_total",
    ),
    (
        "rabbitmq_global_messages_unroutable_dropped_total",
        "rabbitmq_messages_dropped_total",
    ),
    ("rabbitmq_queue_messages", "rabbitmq_queue_messages"),
    (
        "rabbitmq_process_resident_memory_bytes",
        "rabbitmq_resident_bytes",
    ),
];

/// How long `server_info` waits for the broker's retained version.
const VERSION_WAIT: Duration = Duration::from_secs(1);

/// What every connection to the target shares.
pub(crate) struct Shared {
    hosts: Vec<(String, u16)>,
    /// `host:port` of each host, for messages.
    endpoints: Vec<String>,
    tls: Option<Arc<ClientConfig>>,
    version: Version,
    keepalive: Duration,
    credentials: Option<(String, String)>,
}

pub struct MqttDriver {
    shared: Arc<Shared>,
    next_host: AtomicUsize,
    /// Client ids: the prefix, then a number per connection.
    client_prefix: String,
    next_client: AtomicU64,
    /// The broker's Prometheus page, when the target names one.
    metrics: Option<StatusPage>,
}

impl std::fmt::Debug for MqttDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqttDriver")
            .field("endpoints", &self.shared.endpoints)
            .field("version", &self.shared.version)
            .finish_non_exhaustive()
    }
}

impl MqttDriver {
    /// Parses the target and reads any TLS files; makes no connection.
    pub fn from_target(target: &Target) -> Result<MqttDriver, String> {
        let tls = target.scheme() == "mqtts";
        let mut query = Query::parse(target.url(), PARAMS)?;
        let version = match query.take("version").as_deref() {
            None | Some("4" | "3.1.1" | "311") => Version::V311,
            Some("5" | "5.0") => Version::V5,
            Some(other) => {
                return Err(format!(
                    "version={other}: use version=3.1.1 (the default) or version=5"
                ))
            }
        };
        let keepalive = query.take_parsed("keepalive", |v| {
            v.parse::<u16>()
                .map(|s| Duration::from_secs(s.into()))
                .map_err(|_| format!("keepalive={v}: give whole seconds, 0 to 65535 (e.g. 60)"))
        })?;
        let prefix = query.take_nonempty("client_id", "a client id prefix")?;
        let sslrootcert: Option<PathBuf> = tls::take_root_cert(&mut query)?;
        let insecure = query.take_flag("insecure")?.unwrap_or(false);
        let metrics = query.take_parsed("metrics", |v| {
            status::page_url("metrics", v, "http://127.0.0.1:15692/metrics")
        })?;
        if !tls && (sslrootcert.is_some() || insecure) {
            return Err("sslrootcert and insecure are for mqtts:// targets".to_string());
        }
        if sslrootcert.is_some() && insecure {
            return Err(
                "insecure=true accepts any certificate, so sslrootcert would be ignored: give one"
                    .to_string(),
            );
        }
        let parts = UrlParts::parse(target, if tls { 8883 } else { 1883 })?;
        let hosts = parts.hosts_or("127.0.0.1");
        parts.no_path("an MQTT target names no path; topics are workload options (--topic)")?;
        let credentials = match (parts.user, parts.password) {
            (None, None) => None,
            (user, password) => Some((user.unwrap_or_default(), password.unwrap_or_default())),
        };
        let tls = if tls {
            let mode = if insecure {
                SslMode::Require
            } else {
                SslMode::VerifyFull
            };
            tls::client_config(mode, sslrootcert.as_deref())?
        } else {
            None
        };
        let run = std::process::id() as u64 ^ loadcell_core::clock::wall_ns() as u64;
        Ok(MqttDriver {
            shared: Arc::new(Shared {
                endpoints: hosts
                    .iter()
                    .map(|(h, p)| url_text::endpoint(h, *p))
                    .collect(),
                hosts,
                tls,
                version,
                keepalive: keepalive.unwrap_or(Duration::from_secs(60)),
                credentials,
            }),
            next_host: AtomicUsize::new(0),
            client_prefix: prefix.unwrap_or_else(|| format!("loadcell-{:08x}-", run as u32)),
            next_client: AtomicU64::new(0),
            metrics: metrics.map(StatusPage::new),
        })
    }
}

impl Driver for MqttDriver {
    type Conn = MqttConnection;

    fn endpoint(&self) -> String {
        self.shared.endpoints.join(",")
    }

    async fn connect(&self) -> Result<MqttConnection, DriverError> {
        let host = self.next_host.fetch_add(1, Ordering::Relaxed) % self.shared.hosts.len();
        let n = self.next_client.fetch_add(1, Ordering::Relaxed);
        let mut id = itoa::Buffer::new();
        let client_id = [self.client_prefix.as_str(), id.format(n)].concat();
        MqttConnection::open(Arc::clone(&self.shared), host, &client_id, true).await
    }

    /// Without TLS a connection reads its answers from the socket itself,
    /// so each read can carry the kernel's receive time.
    fn times_reads_by_receipt(&self) -> bool {
        self.shared.tls.is_none()
    }

    /// The broker's retained `$SYS/broker/version` ("mosquitto version
    /// 2.0.11"), waited for up to a second; "MQTT broker" when it has none
    /// (RabbitMQ, or `$SYS` turned off).
    async fn server_info(&self, conn: &mut MqttConnection) -> Result<ServerInfo, DriverError> {
        let protocol = self.shared.version.as_str();
        conn.subscribe(&[("$SYS/broker/version", QoS::AtMostOnce)])
            .await?;
        let mut version = None;
        let deadline = tokio::time::Instant::now() + VERSION_WAIT;
        while version.is_none() && tokio::time::Instant::now() < deadline {
            conn.poll(16, VERSION_WAIT / 4, &mut |m| {
                if m.topic == b"$SYS/broker/version" {
                    version = Some(String::from_utf8_lossy(m.payload).into_owned());
                }
            })
            .await?;
        }
        let info = match version {
            Some(v) => match v.split_once(" version ") {
                Some((product, number)) => ServerInfo::new(product, number),
                None => ServerInfo::new(v, ""),
            },
            None => match &self.metrics {
                Some(page) => match rabbitmq_version(&page.fetch().await?) {
                    Some(v) => ServerInfo::new("RabbitMQ", v),
                    None => ServerInfo::new("MQTT broker", ""),
                },
                None => ServerInfo::new("MQTT broker", ""),
            },
        };
        Ok(info.with_extra("mqtt_protocol", protocol))
    }

    /// The newest `$SYS/broker/…` numbers the broker published (Mosquitto
    /// publishes each every `sys_interval`, when it changed): subscribed
    /// on the first call, then read without waiting.
    async fn server_counters(
        &self,
        conn: &mut MqttConnection,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        let sys = conn.sys_counters();
        if sys.is_none() {
            conn.subscribe(&[("$SYS/broker/#", QoS::AtMostOnce)])
                .await?;
            *conn.sys_counters() = Some(BTreeMap::new());
        }
        let mut seen = Vec::new();
        loop {
            let n = conn
                .poll(1024, Duration::ZERO, &mut |m| {
                    if let Some(name) = sys_counter(m.topic) {
                        if let Some(v) = std::str::from_utf8(m.payload)
                            .ok()
                            .and_then(|s| s.trim().parse::<f64>().ok())
                        {
                            seen.push((name, v));
                        }
                    }
                })
                .await?;
            if n == 0 {
                break;
            }
        }
        let sys = conn.sys_counters().get_or_insert_with(BTreeMap::new);
        sys.extend(seen);
        let mut counters: Vec<(String, f64)> =
            sys.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        if let Some(page) = &self.metrics {
            counters.extend(prometheus_text(&page.fetch().await?, RABBITMQ_COUNTERS));
        }
        Ok(counters)
    }
}

/// The version in RabbitMQ's `rabbitmq_build_info{…rabbitmq_version="3.10.8"…} 1`.
fn rabbitmq_version(page: &str) -> Option<&str> {
    let line = page
        .lines()
        .find(|l| l.starts_with("rabbitmq_build_info{"))?;
    let (_, rest) = line.split_once("rabbitmq_version=\"")?;
    rest.split('"').next()
}

/// A `$SYS` topic's counter name (`_total` where it only grows).
fn sys_counter(topic: &[u8]) -> Option<&'static str> {
    Some(match topic.strip_prefix(b"$SYS/broker/")? {
        b"clients/connected" => "mosquitto_clients_connected",
        b"publish/messages/received" => "mosquitto_publish_received_total",
        b"publish/messages/sent" => "mosquitto_publish_sent_total",
        b"publish/messages/dropped" => "mosquitto_publish_dropped_total",
        b"messages/inflight" => "mosquitto_messages_inflight",
        b"store/messages/count" => "mosquitto_messages_stored",
        b"bytes/received" => "mosquitto_bytes_received_total",
        b"bytes/sent" => "mosquitto_bytes_sent_total",
        b"subscriptions/count" => "mosquitto_subscriptions",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(url: &str) -> Result<MqttDriver, String> {
        MqttDriver::from_target(&Target::parse(url).unwrap())
    }

    #[test]
    fn targets_give_hosts_version_and_credentials() {
        let d = driver("mqtt://u:p%40ss@a:1884,b?version=5&keepalive=30&client_id=car-").unwrap();
        let s = &d.shared;
        assert_eq!(
            s.hosts,
            vec![("a".to_string(), 1884), ("b".to_string(), 1883)]
        );
        assert_eq!(s.version, Version::V5);
        assert_eq!(s.keepalive, Duration::from_secs(30));
        assert_eq!(s.credentials, Some(("u".into(), "p@ss".into())));
        assert_eq!(d.client_prefix, "car-");
        assert!(!format!("{d:?}").contains("p@ss"), "no secret in Debug");
        let d = driver("mqtts://h?insecure=true").unwrap();
        assert_eq!(d.shared.hosts[0].1, 8883);
        assert!(d.shared.tls.is_some());
        assert!(driver("mqtt://h")
            .unwrap()
            .client_prefix
            .starts_with("loadcell-"));
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        let err = |u: &str| driver(u).unwrap_err();
        assert!(err("mqtt://h?version=3").contains("version=5"));
        assert!(err("mqtt://h?keepalive=1m").contains("whole seconds"));
        assert!(err("mqtt://h?insecure=true").contains("for mqtts://"));
        assert!(err("mqtt://h/topic").contains("no path"));
        assert!(err("mqtt://h?qos=1").starts_with("unknown parameter 'qos'"));
        assert!(err("mqtt://h?metrics=https://h:15692/metrics").contains("plain http://"));
        assert!(driver("mqtt://h?metrics=http://127.0.0.1:15692/metrics")
            .unwrap()
            .metrics
            .is_some());
    }

    #[test]
    fn rabbitmq_says_its_version_in_its_build_info() {
        let page = "# TYPE rabbitmq_build_info untyped\nrabbitmq_build_info{rabbitmq_version=\"3.10.8\",prometheus_plugin_version=\"3.10.8\",erlang_version=\"25.2.3\"} 1\n";
        assert_eq!(rabbitmq_version(page), Some("3.10.8"));
        assert_eq!(rabbitmq_version("rabbitmq_connections 3\n"), None);
    }

    #[test]
    fn sys_topics_name_counters() {
        assert_eq!(
            sys_counter(b"$SYS/broker/publish/messages/dropped"),
            Some("mosquitto_publish_dropped_total")
        );
        assert_eq!(sys_counter(b"$SYS/broker/uptime"), None);
        assert_eq!(sys_counter(b"vehicles/1"), None);
    }
}
