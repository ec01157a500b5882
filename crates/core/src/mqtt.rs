//! The MQTT family: publish to topics, subscribe to topic filters and
//! receive what matches, over one connection (MQTT 3.1.1 or 5.0) that the
//! session owns. A publish returns when the broker acknowledged it as its
//! quality of service asks (PUBACK for QoS 1, PUBREC → PUBREL → PUBCOMP for
//! QoS 2; QoS 0 when it is written). Messages received borrow the
//! connection's read buffer for the length of the callback.

use std::time::Duration;

use crate::{DriverError, Family};

/// MQTT brokers (Mosquitto, RabbitMQ's MQTT plugin, EMQX, HiveMQ).
pub const FAMILY: Family = Family::named("mqtt");

/// See [`crate::family::SqlFamily`].
pub enum MqttFamily {}

/// How often a message is delivered: at most, at least or exactly once.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default)]
pub enum QoS {
    AtMostOnce = 0,
    #[default]
    AtLeastOnce = 1,
    ExactlyOnce = 2,
}

impl QoS {
    pub fn from_level(level: u8) -> Option<QoS> {
        match level {
            0 => Some(QoS::AtMostOnce),
            1 => Some(QoS::AtLeastOnce),
            2 => Some(QoS::ExactlyOnce),
            _ => None,
        }
    }

    pub fn level(self) -> u8 {
        self as u8
    }
}

/// What the broker said to the connection's CONNECT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnAck {
    /// The broker kept a session for this client id (a persistent one).
    pub session_present: bool,
    /// MQTT 5's "Shared Subscription Available"; `None` when the broker
    /// did not say (every 3.1.1 broker).
    pub shared_subscriptions: Option<bool>,
}

/// One message to publish.
#[derive(Clone, Copy, Debug)]
pub struct Publish<'a> {
    pub topic: &'a str,
    pub qos: QoS,
    pub retain: bool,
    pub payload: &'a [u8],
}

/// How the broker acknowledged a publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acked {
    /// QoS 0: written to the connection, nothing comes back.
    Written,
    /// As the QoS asked: PUBACK for QoS 1, PUBCOMP for QoS 2.
    Acknowledged,
    /// A QoS 2 publish answered with PUBACK: the broker took it at QoS 1
    /// (RabbitMQ does so).
    Downgraded,
    /// An MQTT 5 reason code of 0x80 or more: the broker did not take it
    /// (0x87 not authorized, 0x97 quota exceeded, …).
    Refused { reason: u8 },
}

/// A message received on a subscription, borrowed from the read buffer.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    pub topic: &'a [u8],
    pub payload: &'a [u8],
    pub qos: QoS,
    /// Set only on a retained message sent when the subscription was
    /// made, not on a live delivery (MQTT 3.1.1 §3.3.1.3).
    pub retain: bool,
}

pub trait MqttConn {
    /// The CONNACK of the connection's CONNECT.
    fn connack(&self) -> ConnAck;

    /// Publishes one message and waits for the acknowledgement its QoS
    /// asks for.
    async fn publish(&mut self, message: &Publish<'_>) -> Result<Acked, DriverError>;

    /// Subscribes to `filters` and waits for the SUBACK: the QoS granted
    /// to each filter, in order; `None` where the broker refused it.
    async fn subscribe(&mut self, filters: &[(&str, QoS)])
        -> Result<Vec<Option<QoS>>, DriverError>;

    /// Hands `on` the messages received, up to `max`, acknowledging each
    /// as its QoS asks; waits up to `wait` for the first when none is
    /// there yet. The number handed over.
    async fn poll(
        &mut self,
        max: usize,
        wait: Duration,
        on: &mut dyn FnMut(Message<'_>),
    ) -> Result<u64, DriverError>;

    /// PINGREQ, and waits for its PINGRESP.
    async fn ping(&mut self) -> Result<(), DriverError>;

    /// Connects again under the same client id, until the CONNACK, and
    /// drops the old connection without a DISCONNECT: what a client does
    /// after a network outage its broker has not noticed yet (the broker
    /// closes the old connection as taken over).
    async fn reconnect(&mut self) -> Result<(), DriverError>;

    /// Connects again as `client_id`, with a clean session or resuming
    /// the one the broker kept (`ConnAck::session_present` says whether
    /// it had one), and drops the old connection.
    async fn rejoin(&mut self, client_id: &str, clean: bool) -> Result<ConnAck, DriverError>;

    /// DISCONNECT: the client leaves as it should (no will published, no
    /// lost client counted); the socket closes when the connection drops.
    async fn disconnect(&mut self);
}

/// The first bytes of every payload loadcell publishes: which run (its
/// origin), which publisher, the message's number from that publisher and
/// when it was sent (wall clock, ns since the Unix epoch). The rest of the
/// payload, up to its size, is filler. Little-endian, in place: stamping a
/// message allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub origin: u64,
    pub publisher: u32,
    pub seq: u64,
    pub sent_ns: i64,
}

impl Stamp {
    /// `'L'`, the format's version, then the four fields.
    pub const LEN: usize = 2 + 8 + 4 + 8 + 8;
    const MAGIC: [u8; 2] = [b'L', 1];

    /// Writes the stamp over the start of `out`, at least [`Stamp::LEN`]
    /// bytes long.
    pub fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..Self::LEN];
        out[..2].copy_from_slice(&Self::MAGIC);
        out[2..10].copy_from_slice(&self.origin.to_le_bytes());
        out[10..14].copy_from_slice(&self.publisher.to_le_bytes());
        out[14..22].copy_from_slice(&self.seq.to_le_bytes());
        out[22..30].copy_from_slice(&self.sent_ns.to_le_bytes());
    }

    /// The stamp at the start of `payload`, if it carries one.
    pub fn decode(payload: &[u8]) -> Option<Stamp> {
        let b = payload.get(..Self::LEN)?;
        if b[..2] != Self::MAGIC {
            return None;
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Some(Stamp {
            origin: u64_at(2),
            publisher: u32::from_le_bytes(b[10..14].try_into().expect("4 bytes")),
            seq: u64_at(14),
            sent_ns: u64_at(22) as i64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_and_anything_else_is_not_one() {
        let stamp = Stamp {
            origin: 0xdead_beef_0123_4567,
            publisher: 42,
            seq: 7_000_000_001,
            sent_ns: 1_800_000_000_123_456_789,
        };
        let mut payload = vec![b'x'; 256];
        stamp.encode(&mut payload);
        assert_eq!(Stamp::decode(&payload), Some(stamp));
        assert_eq!(payload[Stamp::LEN], b'x', "the filler after it is kept");
        assert_eq!(Stamp::decode(&payload[..Stamp::LEN - 1]), None);
        assert_eq!(
            Stamp::decode(b"{\"temperature\": 21.5, \"speed\": 80.0}"),
            None
        );
    }

    #[test]
    fn qos_levels_round_trip() {
        for level in 0..3 {
            assert_eq!(QoS::from_level(level).unwrap().level(), level);
        }
        assert_eq!(QoS::from_level(3), None);
    }
}
