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
//!   against what it received (`pubsub`, `delivery`). With `--fanout`
//!   the direction turns: `%i` is a subscriber's (a vehicle's) number,
//!   each subscriber subscribes to its own topic, and each message goes to
//!   one vehicle's topic, the vehicles in turn (command fan-out), so each
//!   is owed exactly the messages addressed to it.
//! - `mqtt-conns`: the fleet at rest and the connection storm:
//!   `--connections` opened at `--ramp-rate` and held, each sending a
//!   PINGREQ every `--keepalive-interval` (the engine's held sessions, as
//!   `http-conns`); connects/s, connections held, and when and at what
//!   count the broker (or this client's limits) stopped them.

mod delivery;
mod pubsub;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use loadcell_core::mqtt::{MqttConn, MqttFamily, QoS, Stamp, FAMILY};
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use loadcell_record::details::MqttStorm;
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
    /// Subscribers keep their sessions when they leave (clean session
    /// off), under client ids of their own for the run.
    pub persistent: bool,
    /// Each subscriber goes offline this long into the run, for this long.
    pub outage: Option<(Duration, Duration)>,
    /// Command fan-out: `%i` in the topic is a subscriber's number, and
    /// each message goes to one subscriber's topic.
    pub fanout: bool,
}

impl MqttOptions {
    /// Publisher `i`'s topic (with `fanout`, subscriber `i`'s).
    pub fn topic_of(&self, i: usize) -> String {
        self.topic.replace(PUBLISHER_NUMBER, &i.to_string())
    }

    /// The subscribers' topic filter.
    pub fn filter(&self) -> String {
        self.sub_topic
            .clone()
            .unwrap_or_else(|| self.topic.replace(PUBLISHER_NUMBER, "+"))
    }

    /// What subscriber `i` subscribes to: the filter, in its group; with
    /// `fanout`, its own topic.
    pub fn subscription(&self, i: usize) -> String {
        match &self.shared {
            _ if self.fanout => self.topic_of(i),
            Some(group) => format!("$share/{group}/{}", self.filter()),
            None => self.filter(),
        }
    }

    /// The subscriber message `seq` of `publisher` is addressed to under
    /// `fanout`: each publisher's messages go to the vehicles in turn,
    /// the publishers interleaved, so all are addressed evenly.
    pub fn addressee(&self, publisher: usize, seq: u64) -> usize {
        ((publisher as u64 + seq * self.publishers as u64) % self.subscribers as u64) as usize
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
        if self.fanout {
            if !self.topic.contains(PUBLISHER_NUMBER) {
                return Err(format!(
                    "--fanout sends each message to one subscriber's topic: put %i (the \
                     subscriber's number) in --topic '{}', e.g. vehicles/%i/commands",
                    self.topic
                ));
            }
            if self.sub_topic.is_some() || self.shared.is_some() {
                return Err(
                    "--fanout subscribes each subscriber to its own topic (--topic with its \
                     number): leave out --sub-topic and --shared"
                        .to_string(),
                );
            }
            if self.subscribers == 0 {
                return Err("--fanout sends to subscribers: give --subscribers".to_string());
            }
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
            (
                "filter".to_string(),
                json!(if self.fanout {
                    self.topic.clone()
                } else {
                    self.filter()
                }),
            ),
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
        map.insert(
            "session".to_string(),
            json!(if self.persistent {
                "persistent"
            } else {
                "clean"
            }),
        );
        if self.fanout {
            map.insert("fanout".to_string(), json!(true));
        }
        if let Some((at, length)) = self.outage {
            map.insert(
                "subscriber_outage_s".to_string(),
                json!([at.as_secs_f64(), length.as_secs_f64()]),
            );
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
        PubSubScript::new(&self.opts, crate::origin::origin(seed))
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

/// `mqtt-conns`: held connections, each pinging every `keepalive`; with
/// `storm_at`, each drops and reconnects at its first ping past that
/// time into the run (a reconnect storm, spread over one `keepalive`).
#[derive(Debug, Clone)]
pub struct MqttConns {
    pub connections: usize,
    pub ramp_rate: f64,
    pub keepalive: Duration,
    pub storm_at: Option<Duration>,
}

impl Workload for MqttConns {
    fn name(&self) -> &'static str {
        "mqtt-conns"
    }

    fn families(&self) -> &'static [Family] {
        &[FAMILY]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        let mut map = BTreeMap::from([
            ("connections".to_string(), json!(self.connections)),
            ("ramp_rate".to_string(), json!(self.ramp_rate)),
            (
                "keepalive_interval_s".to_string(),
                json!(self.keepalive.as_secs_f64()),
            ),
        ]);
        if let Some(at) = self.storm_at {
            map.insert("reconnect_storm_s".to_string(), json!(at.as_secs_f64()));
        }
        map
    }
}

/// The operation kinds of a held connection, by index.
const PING: usize = 0;
const RECONNECT: usize = 1;

/// A held connection's event: PINGREQ, timed to its PINGRESP; or, once
/// past the storm's time, a reconnect.
pub struct PingScript {
    ops: [OpSpec; 2],
    storm: Option<Storm>,
}

/// The reconnect storm: when, and how the fleet came back.
struct Storm {
    at: Instant,
    after: Duration,
    /// Per session: it has reconnected (or tried).
    stormed: Box<[AtomicBool]>,
    reconnected: AtomicU64,
    failed: AtomicU64,
    /// The last reconnect's end, in ns after `at`.
    last_back_ns: AtomicU64,
}

impl<C: MqttConn> Script<C> for PingScript {
    /// The session's number.
    type Session = usize;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, session: SessionInfo) -> Result<usize, DriverError> {
        Ok(session.index)
    }

    async fn event(
        &self,
        conn: &mut C,
        index: &mut usize,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        if let Some(storm) = &self.storm {
            let now = Instant::now();
            if now >= storm.at && !storm.stormed[*index].swap(true, Ordering::Relaxed) {
                let result = ctx.op(RECONNECT, conn.reconnect()).await;
                let counter = match result {
                    Ok(()) => &storm.reconnected,
                    Err(_) => &storm.failed,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                if result.is_ok() {
                    let back = storm.at.elapsed().as_nanos() as u64;
                    storm.last_back_ns.fetch_max(back, Ordering::Relaxed);
                }
                return result;
            }
        }
        ctx.op(PING, conn.ping()).await
    }

    async fn close(&self, conn: &mut C, _: &mut usize) {
        conn.disconnect().await;
    }
}

impl PingScript {
    /// Whether the whole fleet came back after the storm, and how fast.
    fn verify(&self, connections: usize) -> Option<Verification> {
        let storm = self.storm.as_ref()?;
        let reconnected = storm.reconnected.load(Ordering::Relaxed);
        let failed = storm.failed.load(Ordering::Relaxed);
        let untouched = connections as u64 - reconnected - failed;
        let back_s = storm.last_back_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let how = format!(
            "connections that dropped and connected again under their client ids at the \
             reconnect storm ({:.1}s into the run) against those held: {reconnected} came \
             back, the last {back_s:.3}s after the storm began; {failed} failed to \
             reconnect; {untouched} were not held when it came",
            storm.after.as_secs_f64()
        );
        let detail = MqttStorm {
            at_s: storm.after.as_secs_f64(),
            reconnected,
            failed,
            not_held: untouched,
            recovery_s: back_s,
        };
        let mut v = Verification::new(
            connections as u64,
            reconnected,
            reconnected == connections as u64,
            how,
        );
        v.details.insert(&detail);
        Some(v)
    }
}

impl<C: MqttConn> Lifecycle<C, MqttFamily> for MqttConns {
    type Script = PingScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> PingScript {
        PingScript {
            ops: [
                OpSpec {
                    name: "ping",
                    category: Category::Other,
                },
                OpSpec {
                    name: "reconnect",
                    category: Category::Other,
                },
            ],
            storm: self.storm_at.map(|after| Storm {
                at: Instant::now() + after,
                after,
                stormed: (0..self.connections)
                    .map(|_| AtomicBool::new(false))
                    .collect(),
                reconnected: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                last_back_ns: AtomicU64::new(0),
            }),
        }
    }

    /// After a reconnect storm: whether every connection came back.
    async fn verify<D>(
        &self,
        script: &PingScript,
        _driver: &D,
        _connect_timeout: Duration,
    ) -> Result<Option<Verification>, DriverError>
    where
        D: Driver<Conn = C>,
    {
        Ok(script.verify(self.connections))
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
            persistent: false,
            outage: None,
            fanout: false,
        }
    }

    #[test]
    fn topics_and_filters_follow_the_publishers_number() {
        let mut o = opts();
        assert_eq!(o.topic_of(7), "vehicles/7/telemetry");
        assert_eq!(o.subscription(0), "vehicles/+/telemetry");
        o.shared = Some("backend".into());
        assert_eq!(o.subscription(0), "$share/backend/vehicles/+/telemetry");
        o.sub_topic = Some("vehicles/#".into());
        assert_eq!(o.subscription(0), "$share/backend/vehicles/#");
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
        let fanout = |change: fn(&mut MqttOptions)| {
            let mut o = MqttOptions {
                fanout: true,
                ..opts()
            };
            change(&mut o);
            o.check().unwrap_err()
        };
        assert!(fanout(|o| o.topic = "commands".into()).contains("put %i"));
        assert!(fanout(|o| o.shared = Some("g".into())).contains("leave out --sub-topic"));
        assert!(fanout(|o| o.subscribers = 0).contains("give --subscribers"));
    }

    /// Each vehicle its own topic, and the publishers' messages dealt out
    /// evenly among the vehicles, whatever the two counts share.
    #[test]
    fn fanout_addresses_every_vehicle_evenly() {
        let o = MqttOptions {
            topic: "vehicles/%i/commands".into(),
            fanout: true,
            publishers: 4,
            subscribers: 6,
            ..opts()
        };
        assert_eq!(o.subscription(5), "vehicles/5/commands");
        assert!(o.check().is_ok());
        let mut each = [0; 6];
        for p in 0..4 {
            for seq in 0..30 {
                each[o.addressee(p, seq)] += 1;
            }
        }
        assert_eq!(each, [20; 6]);
    }

    #[test]
    fn a_payload_has_room_for_its_stamp() {
        let p = opts().filler();
        assert_eq!(p.len(), 256);
        assert_eq!(p[Stamp::LEN], b'x');
    }
}
