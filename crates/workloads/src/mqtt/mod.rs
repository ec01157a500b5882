//! MQTT workloads, with emqtt-bench's names where they fit:
//!
//! - `mqtt-pubsub`: `--publishers` publish to `--topic` (`%i` is the
//!   publisher's number) at `--rate` messages per second in all, open
//!   loop; `--subscribers` subscribe to `--sub-topic` (by default the
//!   topic with `%i` as `+`), each on its own or as one shared group
//!   (`--shared GROUP`: `$share/GROUP/…`, each message to one member).
//!   Every payload carries a [`Stamp`] (run, publisher, number, time
//!   sent), so publish latency (to PUBACK or PUBCOMP), end-to-end latency
//!   (one machine's clock) and, after the run, delivery are measured:
//!   what each subscriber (or the group) was owed, message by message,
//!   against what it received (`pubsub`, `delivery`).
//! - `mqtt-conns`: the fleet at rest and the connection storm:
//!   `--connections` opened at `--ramp-rate` and held, each sending a
//!   PINGREQ every `--keepalive-interval` (the engine's held sessions, as
//!   `http-conns`); connects/s, connections held, and when and at what
//!   count the broker (or this client's limits) stopped them.

mod delivery;
mod pubsub;

use std::collections::BTreeMap;
use std::time::Duration;

use loadcell_core::mqtt::{MqttConn, MqttFamily, QoS, Stamp, FAMILY};
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use loadcell_record::result::Verification;
use serde_json::{json, Value};

use crate::workload::{Lifecycle, Workload};
pub use pubsub::PubSubScript;

/// The session groups of `mqtt-pubsub`.
pub const PUBLISHER_GROUP: &str = "publisher";
pub const SUBSCRIBER_GROUP: &str = "subscriber";

/// What `%i` in a topic stands for.
const PUBLISHER_NUMBER: &str = "%i";

#[derive(Debug, Clone)]
pub struct MqttOptions {
    /// The publishers' topic; `%i` is each one's number.
    pub topic: String,
    pub payload_size: usize,
    pub qos: QoS,
    pub retain: bool,
    pub publishers: usize,
    pub subscribers: usize,
    /// The subscribers' filter, when not the topic with `%i` as `+`.
    pub sub_topic: Option<String>,
    /// The shared subscription group the subscribers form.
    pub shared: Option<String>,
    pub poll_max: usize,
    pub poll_wait: Duration,
    /// How long subscribers keep receiving after the run for what they
    /// are owed.
    pub drain_timeout: Duration,
}

impl MqttOptions {
    /// Publisher `i`'s topic.
    pub fn topic_of(&self, i: usize) -> String {
        self.topic.replace(PUBLISHER_NUMBER, &i.to_string())
    }

    /// The subscribers' topic filter.
    pub fn filter(&self) -> String {
        self.sub_topic
            .clone()
            .unwrap_or_else(|| self.topic.replace(PUBLISHER_NUMBER, "+"))
    }

    /// What the subscribers subscribe to: the filter, in its group.
    pub fn subscription(&self) -> String {
        match &self.shared {
            Some(group) => format!("$share/{group}/{}", self.filter()),
            None => self.filter(),
        }
    }

    /// A payload of the size asked: room for the stamp, then filler.
    fn filler(&self) -> Vec<u8> {
        let mut payload = vec![b'x'; self.payload_size];
        payload[..Stamp::LEN].fill(0);
        payload
    }

    /// Whether the options make sense together; why not, in one line.
    pub fn check(&self) -> Result<(), String> {
        if self.payload_size < Stamp::LEN {
            return Err(format!(
                "--payload-size {} is too small: every message carries a {}-byte stamp \
                 (run, publisher, number, time sent); give at least {}",
                self.payload_size,
                Stamp::LEN,
                Stamp::LEN
            ));
        }
        for (what, text) in [("--topic", &self.topic), ("--sub-topic", &self.filter())] {
            if text.is_empty() {
                return Err(format!("{what} is empty"));
            }
        }
        if self.topic.contains(['+', '#']) {
            return Err(format!(
                "--topic '{}' has a wildcard: a topic to publish to names one topic (use %i \
                 for the publisher's number); wildcards go in --sub-topic",
                self.topic
            ));
        }
        if let Some(group) = &self.shared {
            if group.is_empty() || group.contains(['/', '+', '#']) {
                return Err(format!(
                    "--shared '{group}': a group name is one level, without / + or #"
                ));
            }
        }
        if let Some(f) = &self.sub_topic {
            let bad_hash = f
                .split('/')
                .enumerate()
                .any(|(i, l)| l.contains('#') && (l != "#" || i + 1 != f.split('/').count()));
            let bad_plus = f.split('/').any(|l| l.contains('+') && l != "+");
            if bad_hash || bad_plus || f.starts_with("$share/") {
                return Err(format!(
                    "--sub-topic '{f}' is not a topic filter: + stands for a whole level, # \
                     for the last (and $share/GROUP/ is --shared)"
                ));
            }
        }
        Ok(())
    }

    fn to_map(&self) -> BTreeMap<String, Value> {
        let mut map = BTreeMap::from([
            ("topic".to_string(), json!(self.topic)),
            ("filter".to_string(), json!(self.filter())),
            ("payload_size".to_string(), json!(self.payload_size)),
            ("qos".to_string(), json!(self.qos.level())),
            ("retain".to_string(), json!(self.retain)),
            ("publishers".to_string(), json!(self.publishers)),
            ("subscribers".to_string(), json!(self.subscribers)),
            ("poll_max".to_string(), json!(self.poll_max)),
            (
                "drain_timeout_s".to_string(),
                json!(self.drain_timeout.as_secs_f64()),
            ),
        ]);
        if let Some(group) = &self.shared {
            map.insert("shared".to_string(), json!(group));
        }
        map
    }
}

/// `mqtt-pubsub`.
#[derive(Debug, Clone)]
pub struct MqttPubSub {
    pub opts: MqttOptions,
}

impl Workload for MqttPubSub {
    fn name(&self) -> &'static str {
        "mqtt-pubsub"
    }

    fn families(&self) -> &'static [Family] {
        &[FAMILY]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        self.opts.to_map()
    }
}

impl<C: MqttConn> Lifecycle<C, MqttFamily> for MqttPubSub {
    type Script = PubSubScript;

    fn script(&self, seed: u64, _driver: &DriverInfo) -> PubSubScript {
        PubSubScript::new(&self.opts, origin(seed))
    }

    /// What each subscriber was owed against what it received; counted
    /// as the sessions ended, with no connection needed.
    async fn verify<D>(
        &self,
        script: &PubSubScript,
        _driver: &D,
        _connect_timeout: Duration,
    ) -> Result<Option<Verification>, DriverError>
    where
        D: Driver<Conn = C>,
    {
        Ok(script.verify())
    }
}

/// Which run on which machine: this process, the wall clock and `seed`;
/// messages of any other origin are not this run's.
fn origin(seed: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = seed ^ now.rotate_left(17) ^ u64::from(std::process::id()) << 40;
    // splitmix64's finaliser: every input bit moves every output bit.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `mqtt-conns`: held connections, each pinging every `keepalive`.
#[derive(Debug, Clone)]
pub struct MqttConns {
    pub connections: usize,
    pub ramp_rate: f64,
    pub keepalive: Duration,
}

impl Workload for MqttConns {
    fn name(&self) -> &'static str {
        "mqtt-conns"
    }

    fn families(&self) -> &'static [Family] {
        &[FAMILY]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("connections".to_string(), json!(self.connections)),
            ("ramp_rate".to_string(), json!(self.ramp_rate)),
            (
                "keepalive_interval_s".to_string(),
                json!(self.keepalive.as_secs_f64()),
            ),
        ])
    }
}

/// A held connection's event: PINGREQ, timed to its PINGRESP.
pub struct PingScript {
    ops: [OpSpec; 1],
}

impl<C: MqttConn> Script<C> for PingScript {
    type Session = ();

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, _session: SessionInfo) -> Result<(), DriverError> {
        Ok(())
    }

    async fn event(&self, conn: &mut C, _: &mut (), ctx: &mut Ctx) -> Result<(), DriverError> {
        ctx.op(0, conn.ping()).await
    }

    async fn close(&self, conn: &mut C, _: &mut ()) {
        conn.disconnect().await;
    }
}

impl<C: MqttConn> Lifecycle<C, MqttFamily> for MqttConns {
    type Script = PingScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> PingScript {
        PingScript {
            ops: [OpSpec {
                name: "ping",
                category: Category::Other,
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> MqttOptions {
        MqttOptions {
            topic: "vehicles/%i/telemetry".into(),
            payload_size: 256,
            qos: QoS::AtLeastOnce,
            retain: false,
            publishers: 4,
            subscribers: 2,
            sub_topic: None,
            shared: None,
            poll_max: 100,
            poll_wait: Duration::from_millis(100),
            drain_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn topics_and_filters_follow_the_publishers_number() {
        let mut o = opts();
        assert_eq!(o.topic_of(7), "vehicles/7/telemetry");
        assert_eq!(o.subscription(), "vehicles/+/telemetry");
        o.shared = Some("backend".into());
        assert_eq!(o.subscription(), "$share/backend/vehicles/+/telemetry");
        o.sub_topic = Some("vehicles/#".into());
        assert_eq!(o.subscription(), "$share/backend/vehicles/#");
        assert!(o.check().is_ok());
    }

    #[test]
    fn options_that_cannot_work_are_named() {
        let err = |change: fn(&mut MqttOptions)| {
            let mut o = opts();
            change(&mut o);
            o.check().unwrap_err()
        };
        assert!(err(|o| o.payload_size = 10).contains("at least 30"));
        assert!(err(|o| o.topic = "a/+".into()).contains("wildcard"));
        assert!(err(|o| o.sub_topic = Some("a/#/b".into())).contains("not a topic filter"));
        assert!(err(|o| o.sub_topic = Some("a/b+".into())).contains("not a topic filter"));
        assert!(err(|o| o.shared = Some("a/b".into())).contains("one level"));
    }

    #[test]
    fn a_payload_has_room_for_its_stamp() {
        let p = opts().filler();
        assert_eq!(p.len(), 256);
        assert_eq!(p[Stamp::LEN], b'x');
    }
}
