//! The MQTT family's section, inside `verification`: what each
//! subscriber (or shared group) was owed by the run's publishers, and what
//! it received.

use serde::{Deserialize, Serialize};

use super::Detail;

/// Where an `mqtt-pubsub` run's messages went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MqttDelivery {
    /// The QoS messages were published and subscribed at (0, 1 or 2).
    pub qos: u8,
    /// Messages the broker acknowledged (QoS 0: written), all publishers.
    pub published: u64,
    /// Messages refused by the broker (an MQTT 5 reason code ≥ 0x80).
    pub refused: u64,
    /// QoS 2 messages the broker answered with PUBACK (taken at QoS 1).
    pub downgraded: u64,
    /// Deliveries owed: for each subscriber (or shared group), the
    /// messages published to topics its filter matches.
    pub expected: u64,
    /// Distinct messages of this run received, per subscriber (or group)
    /// and publisher, summed.
    pub received: u64,
    /// Deliveries owed and never received, after the drain.
    pub missing: u64,
    /// Messages received again by the same subscriber (or group).
    pub duplicates: u64,
    /// Messages that came after a later one of the same publisher.
    pub reorders: u64,
    /// Retained messages sent on subscribing: not live deliveries, left
    /// out of the counts.
    pub retained_replayed: u64,
    /// Messages of other runs or other publishers, not counted or timed.
    pub foreign: u64,
    /// Messages of this run that reached a subscriber they were not for
    /// (another vehicle's under `--fanout`, or a topic its filter does
    /// not match): a broker's routing error, failing the verification.
    #[serde(default)]
    pub misdelivered: u64,
    /// Shared subscription group, when the subscribers were one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_group: Option<String>,
    /// Each subscriber's (or the group's) owed and received counts.
    pub subscribers: Vec<SubscriberDelivery>,
    /// `missing ÷ expected`, percent: what QoS 0 lost.
    pub loss_pct: f64,
}

/// One subscriber's (or one shared group's) delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriberDelivery {
    /// The subscriber's number, or the group's name.
    pub name: String,
    pub filter: String,
    pub expected: u64,
    pub received: u64,
    pub missing: u64,
}

impl Detail for MqttDelivery {
    const KEY: &'static str = "mqtt";
}

/// How an `mqtt-conns` fleet came back from its reconnect storm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MqttStorm {
    /// When the storm began, seconds into the run.
    pub at_s: f64,
    /// Connections that connected again under their client ids.
    pub reconnected: u64,
    /// Connections whose reconnect failed.
    pub failed: u64,
    /// Connections not held when the storm came.
    pub not_held: u64,
    /// From the storm's start to the last connection back, seconds.
    pub recovery_s: f64,
}

impl Detail for MqttStorm {
    const KEY: &'static str = "mqtt_storm";
}
