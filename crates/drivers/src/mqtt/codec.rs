//! MQTT 3.1.1 and 5.0 packets, written into and read from the
//! connection's own buffers: the fixed header and its remaining-length
//! varint, CONNECT/CONNACK, PUBLISH and its four acknowledgements,
//! SUBSCRIBE/SUBACK, PINGREQ/PINGRESP and DISCONNECT. A PUBLISH is
//! encoded into a reused buffer and decoded in place, so the hot path
//! neither allocates nor copies a payload twice (rumqttc allocated a topic
//! `String` and a payload `Bytes` per message and cost 2.6× the CPU per
//! QoS 0 message: `docs/BENCHMARKS.md`). MQTT 5 properties are written
//! empty, except a persistent session's expiry, and skipped on reading,
//! except the CONNACK's shared-subscription flag.

use std::ops::Range;

use loadcell_core::mqtt::{ConnAck, QoS};

pub(crate) const CONNECT: u8 = 1;
pub(crate) const CONNACK: u8 = 2;
pub(crate) const PUBLISH: u8 = 3;
pub(crate) const PUBACK: u8 = 4;
pub(crate) const PUBREC: u8 = 5;
pub(crate) const PUBREL: u8 = 6;
pub(crate) const PUBCOMP: u8 = 7;
pub(crate) const SUBSCRIBE: u8 = 8;
pub(crate) const SUBACK: u8 = 9;
pub(crate) const PINGREQ: u8 = 12;
pub(crate) const PINGRESP: u8 = 13;
pub(crate) const DISCONNECT: u8 = 14;

/// The protocol level a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    V311,
    V5,
}

impl Version {
    fn level(self) -> u8 {
        match self {
            Version::V311 => 4,
            Version::V5 => 5,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Version::V311 => "3.1.1",
            Version::V5 => "5.0",
        }
    }
}

/// A packet that is not MQTT as expected; the connection cannot go on.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed(pub &'static str);

/// A whole packet found at the start of some bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The first byte: type (high nibble) and flags.
    pub first: u8,
    /// Where its body (after the fixed header) lies, from the bytes' start.
    pub body: Range<usize>,
}

impl Frame {
    pub(crate) fn kind(&self) -> u8 {
        self.first >> 4
    }

    pub(crate) fn len(&self) -> usize {
        self.body.end
    }
}

/// The packet at the start of `bytes`, if all of it is there.
pub(crate) fn frame(bytes: &[u8]) -> Result<Option<Frame>, Malformed> {
    let Some(&first) = bytes.first() else {
        return Ok(None);
    };
    let Some((remaining, used)) = varint(&bytes[1..])? else {
        return Ok(None);
    };
    let start = 1 + used;
    let end = start + remaining as usize;
    Ok((bytes.len() >= end).then_some(Frame {
        first,
        body: start..end,
    }))
}

/// A variable byte integer: its value and length, if all of it is there.
fn varint(bytes: &[u8]) -> Result<Option<(u32, usize)>, Malformed> {
    let mut value = 0u32;
    for (i, &b) in bytes.iter().enumerate().take(4) {
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(Some((value, i + 1)));
        }
    }
    if bytes.len() >= 4 {
        return Err(Malformed("a remaining length longer than 4 bytes"));
    }
    Ok(None)
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s);
}

/// Starts a packet of `first` with `body` bytes after the fixed header.
fn put_header(out: &mut Vec<u8>, first: u8, body: usize) {
    out.push(first);
    put_varint(out, body);
}

/// What a CONNECT says.
pub(crate) struct Connect<'a> {
    pub version: Version,
    pub client_id: &'a str,
    pub keepalive_s: u16,
    pub clean: bool,
    /// MQTT 5's session expiry (seconds), for a persistent session.
    pub session_expiry_s: Option<u32>,
    pub credentials: Option<(&'a str, &'a str)>,
}

pub(crate) fn connect(out: &mut Vec<u8>, c: &Connect<'_>) {
    let mut flags = u8::from(c.clean) << 1;
    let mut properties = Vec::new();
    if let (Version::V5, Some(expiry)) = (c.version, c.session_expiry_s) {
        properties.push(0x11);
        properties.extend_from_slice(&expiry.to_be_bytes());
    }
    let mut body = Vec::with_capacity(64);
    put_str(&mut body, b"MQTT");
    body.push(c.version.level());
    if c.credentials.is_some() {
        // User name and password.
        flags |= 0xC0;
    }
    body.push(flags);
    body.extend_from_slice(&c.keepalive_s.to_be_bytes());
    if c.version == Version::V5 {
        put_varint(&mut body, properties.len());
        body.extend_from_slice(&properties);
    }
    put_str(&mut body, c.client_id.as_bytes());
    if let Some((user, password)) = c.credentials {
        put_str(&mut body, user.as_bytes());
        put_str(&mut body, password.as_bytes());
    }
    put_header(out, CONNECT << 4, body.len());
    out.extend_from_slice(&body);
}

/// A CONNACK's body: what it granted, or the code it refused with.
pub(crate) fn connack(body: &[u8], version: Version) -> Result<Result<ConnAck, u8>, Malformed> {
    let [flags, code, rest @ ..] = body else {
        return Err(Malformed("a CONNACK shorter than 2 bytes"));
    };
    if *code != 0 {
        return Ok(Err(*code));
    }
    let mut ack = ConnAck {
        session_present: flags & 1 == 1,
        shared_subscriptions: None,
    };
    if version == Version::V5 {
        for_each_property(rest, |id, value| {
            if id == 0x2A {
                ack.shared_subscriptions = value.first().map(|&b| b == 1);
            }
        })?;
    }
    Ok(Ok(ack))
}

/// Calls `on` with each MQTT 5 property of the block at the start of
/// `bytes` (its length varint first): its identifier and value bytes.
fn for_each_property(bytes: &[u8], mut on: impl FnMut(u8, &[u8])) -> Result<usize, Malformed> {
    let (len, used) = varint(bytes)?.ok_or(Malformed("a property length cut short"))?;
    let end = used + len as usize;
    let block = bytes
        .get(used..end)
        .ok_or(Malformed("a property block cut short"))?;
    let mut at = 0;
    while at < block.len() {
        let id = block[at];
        at += 1;
        let rest = &block[at..];
        let size = match id {
            0x01 | 0x17 | 0x19 | 0x24 | 0x25 | 0x28 | 0x29 | 0x2A => 1,
            0x13 | 0x21 | 0x22 | 0x23 => 2,
            0x02 | 0x11 | 0x18 | 0x27 => 4,
            0x0B => varint(rest)?.ok_or(Malformed("a property cut short"))?.1,
            0x03 | 0x08 | 0x09 | 0x12 | 0x15 | 0x16 | 0x1A | 0x1C | 0x1F => {
                2 + usize::from(u16_at(rest, 0).ok_or(Malformed("a property cut short"))?)
            }
            0x26 => {
                let key =
                    2 + usize::from(u16_at(rest, 0).ok_or(Malformed("a property cut short"))?);
                key + 2 + usize::from(u16_at(rest, key).ok_or(Malformed("a property cut short"))?)
            }
            _ => return Err(Malformed("an unknown MQTT 5 property")),
        };
        let value = rest.get(..size).ok_or(Malformed("a property cut short"))?;
        on(id, value);
        at += size;
    }
    Ok(end)
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

/// A PUBLISH of `payload` to `topic`; `pkid` is ignored at QoS 0.
pub(crate) fn publish(
    out: &mut Vec<u8>,
    version: Version,
    topic: &[u8],
    qos: QoS,
    retain: bool,
    pkid: u16,
    payload: &[u8],
) {
    let id = if qos == QoS::AtMostOnce { 0 } else { 2 };
    let properties = usize::from(version == Version::V5);
    let body = 2 + topic.len() + id + properties + payload.len();
    put_header(
        out,
        PUBLISH << 4 | qos.level() << 1 | u8::from(retain),
        body,
    );
    put_str(out, topic);
    if id > 0 {
        out.extend_from_slice(&pkid.to_be_bytes());
    }
    if properties > 0 {
        out.push(0);
    }
    out.extend_from_slice(payload);
}

/// A received PUBLISH, its parts as ranges of the packet's bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Incoming {
    pub qos: QoS,
    pub retain: bool,
    pub pkid: u16,
    pub topic: Range<usize>,
    pub payload: Range<usize>,
}

/// The PUBLISH in `packet[frame.body]`.
pub(crate) fn incoming(
    packet: &[u8],
    frame: &Frame,
    version: Version,
) -> Result<Incoming, Malformed> {
    let qos = QoS::from_level((frame.first >> 1) & 3).ok_or(Malformed("a PUBLISH of QoS 3"))?;
    let body = &packet[frame.body.clone()];
    let short = Malformed("a PUBLISH cut short");
    let topic_len = usize::from(u16_at(body, 0).ok_or(Malformed("a PUBLISH cut short"))?);
    let mut at = 2 + topic_len;
    let topic = at - topic_len..at;
    let mut pkid = 0;
    if qos != QoS::AtMostOnce {
        pkid = u16_at(body, at).ok_or(Malformed("a PUBLISH cut short"))?;
        at += 2;
    }
    if version == Version::V5 {
        at += for_each_property(
            body.get(at..).ok_or(Malformed("a PUBLISH cut short"))?,
            |_, _| {},
        )?;
    }
    if at > body.len() {
        return Err(short);
    }
    let base = frame.body.start;
    Ok(Incoming {
        qos,
        retain: frame.first & 1 == 1,
        pkid,
        topic: base + topic.start..base + topic.end,
        payload: base + at..frame.body.end,
    })
}

/// PUBACK, PUBREC, PUBREL or PUBCOMP of `pkid`, success (its reason code
/// left out, which MQTT 5 reads as success).
pub(crate) fn ack(out: &mut Vec<u8>, kind: u8, pkid: u16) {
    let flags = if kind == PUBREL { 0b0010 } else { 0 };
    out.push(kind << 4 | flags);
    out.push(2);
    out.extend_from_slice(&pkid.to_be_bytes());
}

/// An acknowledgement's packet id and MQTT 5 reason code (0 when absent).
pub(crate) fn acked(body: &[u8]) -> Result<(u16, u8), Malformed> {
    let pkid = u16_at(body, 0).ok_or(Malformed("an acknowledgement shorter than 2 bytes"))?;
    Ok((pkid, body.get(2).copied().unwrap_or(0)))
}

pub(crate) fn subscribe(out: &mut Vec<u8>, version: Version, pkid: u16, filters: &[(&str, QoS)]) {
    let properties = usize::from(version == Version::V5);
    let body = 2 + properties + filters.iter().map(|(f, _)| 3 + f.len()).sum::<usize>();
    put_header(out, SUBSCRIBE << 4 | 0b0010, body);
    out.extend_from_slice(&pkid.to_be_bytes());
    if properties > 0 {
        out.push(0);
    }
    for (filter, qos) in filters {
        put_str(out, filter.as_bytes());
        out.push(qos.level());
    }
}

/// A SUBACK's packet id and the QoS granted to each filter (`None`:
/// refused).
pub(crate) fn suback(body: &[u8], version: Version) -> Result<(u16, Vec<Option<QoS>>), Malformed> {
    let pkid = u16_at(body, 0).ok_or(Malformed("a SUBACK shorter than 2 bytes"))?;
    let mut at = 2;
    if version == Version::V5 {
        at += for_each_property(&body[2..], |_, _| {})?;
    }
    let codes = body.get(at..).ok_or(Malformed("a SUBACK cut short"))?;
    Ok((pkid, codes.iter().map(|&c| QoS::from_level(c)).collect()))
}

pub(crate) const PINGREQ_PACKET: [u8; 2] = [PINGREQ << 4, 0];
pub(crate) const DISCONNECT_PACKET: [u8; 2] = [DISCONNECT << 4, 0];

/// A CONNACK refusal's code in words, and whether trying again can help.
pub(crate) fn refusal(code: u8, version: Version) -> (&'static str, bool) {
    match (version, code) {
        (Version::V311, 1) | (Version::V5, 0x84) => ("unacceptable protocol version", false),
        (Version::V311, 2) | (Version::V5, 0x85) => ("client identifier rejected", false),
        (Version::V311, 3) | (Version::V5, 0x88) => ("server unavailable", true),
        (Version::V311, 4) | (Version::V5, 0x86) => ("bad user name or password", false),
        (Version::V311, 5) | (Version::V5, 0x87) => ("not authorized", false),
        (Version::V5, 0x89) => ("server busy", true),
        (Version::V5, 0x8A) => ("banned", false),
        (Version::V5, 0x8C) => ("bad authentication method", false),
        (Version::V5, 0x97) => ("quota exceeded", true),
        (Version::V5, 0x9F) => ("connection rate exceeded", true),
        _ => ("refused", true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remaining_length_is_a_varint_of_up_to_four_bytes() {
        for n in [0usize, 127, 128, 16_383, 16_384, 2_097_151, 268_435_455] {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            assert_eq!(varint(&out), Ok(Some((n as u32, out.len()))), "{n}");
            assert_eq!(varint(&out[..out.len() - 1]), Ok(None));
        }
        assert!(varint(&[0xff, 0xff, 0xff, 0xff, 0x01]).is_err());
    }

    #[test]
    fn a_311_connect_is_the_bytes_the_standard_gives() {
        let mut out = Vec::new();
        connect(
            &mut out,
            &Connect {
                version: Version::V311,
                client_id: "",
                keepalive_s: 60,
                clean: true,
                session_expiry_s: None,
                credentials: None,
            },
        );
        assert_eq!(out, b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00");
        out.clear();
        connect(
            &mut out,
            &Connect {
                version: Version::V5,
                client_id: "c",
                keepalive_s: 30,
                clean: false,
                session_expiry_s: Some(300),
                credentials: Some(("u", "p")),
            },
        );
        let frame = frame(&out).unwrap().unwrap();
        assert_eq!(frame.len(), out.len());
        assert_eq!(&out[frame.body.start + 6..][..2], &[5, 0xc0]);
        assert_eq!(&out[frame.body.start + 10..][..6], &[5, 0x11, 0, 0, 1, 44]);
    }

    #[test]
    fn a_publish_reads_back_as_it_was_written_in_both_versions() {
        for version in [Version::V311, Version::V5] {
            for qos in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce] {
                let payload = vec![7u8; 300];
                let mut out = vec![0xAA];
                publish(
                    &mut out,
                    version,
                    b"vehicles/42/telemetry",
                    qos,
                    true,
                    513,
                    &payload,
                );
                let f = frame(&out[1..]).unwrap().unwrap();
                assert_eq!(f.kind(), PUBLISH);
                let packet = &out[1..];
                let got = incoming(packet, &f, version).unwrap();
                assert_eq!(&packet[got.topic.clone()], b"vehicles/42/telemetry");
                assert_eq!(&packet[got.payload.clone()], &payload[..]);
                assert_eq!((got.qos, got.retain), (qos, true));
                assert_eq!(got.pkid, if qos == QoS::AtMostOnce { 0 } else { 513 });
                assert_eq!(frame(&packet[..packet.len() - 1]), Ok(None));
            }
        }
    }

    #[test]
    fn a_v5_connack_says_whether_shared_subscriptions_are_available() {
        // Session present; properties: receive maximum 20, a reason
        // string, shared subscriptions not available.
        let body = [1, 0, 10, 0x21, 0, 20, 0x1F, 0, 2, b'o', b'k', 0x2A, 0];
        let ack = connack(&body, Version::V5).unwrap().unwrap();
        assert!(ack.session_present);
        assert_eq!(ack.shared_subscriptions, Some(false));
        assert_eq!(connack(&[0, 5], Version::V311), Ok(Err(5)));
        assert_eq!(refusal(5, Version::V311), ("not authorized", false));
        assert!(connack(&[0], Version::V311).is_err());
    }

    #[test]
    fn acks_and_subacks_carry_their_packet_ids() {
        let mut out = Vec::new();
        ack(&mut out, PUBREL, 258);
        assert_eq!(out, [0x62, 2, 1, 2]);
        assert_eq!(acked(&[1, 2]), Ok((258, 0)));
        assert_eq!(acked(&[1, 2, 0x97, 0]), Ok((258, 0x97)));
        out.clear();
        subscribe(
            &mut out,
            Version::V5,
            9,
            &[("a/+", QoS::AtLeastOnce), ("b", QoS::ExactlyOnce)],
        );
        assert_eq!(
            out,
            [0x82, 13, 0, 9, 0, 0, 3, b'a', b'/', b'+', 1, 0, 1, b'b', 2]
        );
        let (pkid, granted) = suback(&[0, 9, 0, 1, 0x80], Version::V5).unwrap();
        assert_eq!((pkid, granted), (9, vec![Some(QoS::AtLeastOnce), None]));
        let (_, granted) = suback(&[0, 9, 2], Version::V311).unwrap();
        assert_eq!(granted, vec![Some(QoS::ExactlyOnce)]);
    }
}
