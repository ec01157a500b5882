//! One MQTT connection on the drivers' stream layer: CONNECT and its
//! CONNACK, then publishes awaited one at a time, subscriptions, and
//! messages handed over in place and acknowledged in one write per poll.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadcell_core::mqtt::{Acked, ConnAck, Message, MqttConn, Publish, QoS};
use loadcell_core::DriverError;

use super::codec::{self, Frame, Malformed, Version};
use super::Shared;
use crate::transport::io_error::{connect_error, lost_error};
use crate::transport::peer;
use crate::transport::read_buffer::ReadBuffer;
use crate::transport::stream::{connect_tcp, Stream, TlsStartError};

const READ_BUF: usize = 16 * 1024;

/// How long an MQTT 5 broker keeps a persistent session after its client
/// left: longer than any outage a run makes.
const PERSISTENT_SESSION_EXPIRY_S: u32 = 3600;

pub struct MqttConnection {
    stream: Stream,
    rbuf: ReadBuffer,
    /// The packet being sent.
    wbuf: Vec<u8>,
    /// Acknowledgements (and a keep-alive PINGREQ) owed to the broker,
    /// written together after a poll.
    owed: Vec<u8>,
    shared: Arc<Shared>,
    host: usize,
    client_id: String,
    /// Whether the broker drops the client's session when it leaves.
    clean: bool,
    connack: ConnAck,
    next_pkid: u16,
    /// When the connection last sent anything: the broker drops a client
    /// silent for 1.5 keep-alives.
    last_sent: Instant,
    /// The broker's `$SYS` numbers, on the monitoring connection once
    /// subscribed to them.
    sys: Option<BTreeMap<&'static str, f64>>,
}

impl std::fmt::Debug for MqttConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqttConnection")
            .field("endpoint", &self.endpoint())
            .finish_non_exhaustive()
    }
}

impl MqttConnection {
    /// TCP (and TLS) to host `host` of the target, then CONNECT as
    /// `client_id`, until the broker's CONNACK.
    pub(crate) async fn open(
        shared: Arc<Shared>,
        host: usize,
        client_id: &str,
        clean: bool,
    ) -> Result<MqttConnection, DriverError> {
        let (name, port) = &shared.hosts[host];
        let endpoint = &shared.endpoints[host];
        let tcp = connect_tcp(name, *port)
            .await
            .map_err(|e| connect_error(&e, endpoint))?;
        let stream = match &shared.tls {
            None => Stream::plain(tcp),
            Some(config) => Stream::start_tls(tcp, name, config)
                .await
                .map_err(|e| match e {
                    TlsStartError::BadName(why) => DriverError::fatal(why),
                    TlsStartError::Handshake(e) => DriverError::connection(format!(
                        "TLS handshake with {endpoint} failed: {e}"
                    )),
                })?,
        };
        let mut conn = MqttConnection {
            stream,
            rbuf: ReadBuffer::with_capacity(READ_BUF),
            wbuf: Vec::with_capacity(512),
            owed: Vec::new(),
            shared,
            host,
            client_id: client_id.to_string(),
            clean,
            connack: ConnAck::default(),
            next_pkid: 0,
            last_sent: Instant::now(),
            sys: None,
        };
        conn.handshake().await?;
        Ok(conn)
    }

    /// The `$SYS` numbers kept for the monitoring connection.
    pub(crate) fn sys_counters(&mut self) -> &mut Option<BTreeMap<&'static str, f64>> {
        &mut self.sys
    }

    fn endpoint(&self) -> &str {
        &self.shared.endpoints[self.host]
    }

    fn version(&self) -> Version {
        self.shared.version
    }

    async fn handshake(&mut self) -> Result<(), DriverError> {
        let s = &self.shared;
        codec::connect(
            &mut self.wbuf,
            &codec::Connect {
                version: s.version,
                client_id: &self.client_id,
                keepalive_s: s.keepalive.as_secs() as u16,
                clean: self.clean,
                // MQTT 5 ends a session when its connection does unless
                // it is given an expiry.
                session_expiry_s: (!self.clean).then_some(PERSISTENT_SESSION_EXPIRY_S),
                credentials: s
                    .credentials
                    .as_ref()
                    .map(|(u, p)| (u.as_str(), p.as_str())),
            },
        );
        if let Err(e) = self.write_raw().await {
            return Err(self.lost_before_connack(&e));
        }
        let frame = self.next_frame_or(Self::lost_before_connack).await?;
        let packet = &self.rbuf.pending()[..frame.len()];
        if frame.kind() != codec::CONNACK {
            let first = packet.to_vec();
            return Err(DriverError::fatal(peer::not_answering_as(
                self.endpoint(),
                "MQTT",
                "a CONNACK",
                &first,
            )));
        }
        let answer = codec::connack(&packet[frame.body.clone()], self.version())
            .map_err(|m| self.malformed(m))?;
        self.rbuf.consume(frame.len());
        match answer {
            Ok(ack) => {
                self.connack = ack;
                Ok(())
            }
            Err(code) => {
                let (why, retry) = codec::refusal(code, self.version());
                let message = format!(
                    "{} refused the MQTT {} connection: {why} (CONNACK code {code:#04x})",
                    self.endpoint(),
                    self.version().as_str()
                );
                let error = if retry {
                    DriverError::connection(message)
                } else {
                    DriverError::fatal(message)
                };
                Err(error.with_code(format!("{code:#04x}")))
            }
        }
    }

    /// A packet id for the next publish or subscribe: 1…65535 in turn (one
    /// is in flight at a time).
    fn pkid(&mut self) -> u16 {
        self.next_pkid = self.next_pkid.checked_add(1).unwrap_or(1);
        self.next_pkid
    }

    /// Sends the packet in `wbuf` (clearing it).
    async fn write(&mut self) -> Result<(), DriverError> {
        self.write_raw().await.map_err(|e| self.lost(&e))
    }

    async fn write_raw(&mut self) -> io::Result<()> {
        let result = self.stream.write_all(&self.wbuf).await;
        self.wbuf.clear();
        self.last_sent = Instant::now();
        result
    }

    /// Sends the packet in `wbuf` whose answer is read next: on a worker
    /// thread, with the thread's send batch.
    async fn send_for_answer(&mut self) -> Result<(), DriverError> {
        if self.rbuf.is_empty() {
            self.stream.forget_readable();
        }
        let result = self.stream.send(&self.wbuf).await;
        self.wbuf.clear();
        self.last_sent = Instant::now();
        result.map_err(|e| self.lost(&e))
    }

    /// Writes the acknowledgements owed.
    async fn pay(&mut self) -> Result<(), DriverError> {
        if self.owed.is_empty() {
            return Ok(());
        }
        std::mem::swap(&mut self.owed, &mut self.wbuf);
        self.write().await
    }

    /// The next whole packet at the start of the unread bytes, reading
    /// until it is there.
    async fn next_frame(&mut self) -> Result<Frame, DriverError> {
        self.next_frame_or(Self::lost).await
    }

    /// [`Self::next_frame`], with `lost` telling what a failed read means.
    async fn next_frame_or(
        &mut self,
        lost: fn(&Self, &io::Error) -> DriverError,
    ) -> Result<Frame, DriverError> {
        loop {
            if let Some(frame) = self.parsed_frame()? {
                return Ok(frame);
            }
            if let Err(e) = self.read_raw().await {
                return Err(lost(self, &e));
            }
        }
    }

    fn parsed_frame(&self) -> Result<Option<Frame>, DriverError> {
        codec::frame(self.rbuf.pending()).map_err(|m| self.malformed(m))
    }

    async fn read_more(&mut self) -> Result<(), DriverError> {
        self.read_raw().await.map_err(|e| self.lost(&e))
    }

    /// Reads what has arrived; the end of the stream is `UnexpectedEof`.
    async fn read_raw(&mut self) -> io::Result<()> {
        loop {
            match self.stream.read(self.rbuf.spare(0)).await {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    self.rbuf.filled(n);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Handles a packet that is not the answer awaited: a message (its
    /// acknowledgement owed; `on` given it when there is one), a PUBREL
    /// of a QoS 2 message received, a PINGRESP, or the broker's
    /// DISCONNECT. Consumes it. Whether it was a message.
    fn unawaited(
        &mut self,
        frame: &Frame,
        on: Option<&mut dyn FnMut(Message<'_>)>,
    ) -> Result<bool, DriverError> {
        let version = self.version();
        let packet = &self.rbuf.pending()[..frame.len()];
        let mut message = false;
        match frame.kind() {
            codec::PUBLISH => {
                let m = codec::incoming(packet, frame, version).map_err(|m| self.malformed(m))?;
                match m.qos {
                    QoS::AtMostOnce => {}
                    QoS::AtLeastOnce => codec::ack(&mut self.owed, codec::PUBACK, m.pkid),
                    QoS::ExactlyOnce => codec::ack(&mut self.owed, codec::PUBREC, m.pkid),
                }
                if let Some(on) = on {
                    on(Message {
                        topic: &packet[m.topic],
                        payload: &packet[m.payload],
                        qos: m.qos,
                        retain: m.retain,
                    });
                }
                message = true;
            }
            codec::PUBREL => {
                let (pkid, _) =
                    codec::acked(&packet[frame.body.clone()]).map_err(|m| self.malformed(m))?;
                codec::ack(&mut self.owed, codec::PUBCOMP, pkid);
            }
            codec::PINGRESP => {}
            codec::DISCONNECT => {
                let reason = packet[frame.body.clone()].first().copied().unwrap_or(0);
                return Err(DriverError::connection(format!(
                    "{} disconnected this client (reason code {reason:#04x})",
                    self.endpoint()
                )));
            }
            kind => {
                return Err(self.malformed(Malformed(match kind {
                    codec::SUBACK => "a SUBACK nobody asked for",
                    codec::PUBACK | codec::PUBREC | codec::PUBCOMP => {
                        "an acknowledgement of nothing in flight"
                    }
                    _ => "a packet a broker does not send",
                })))
            }
        }
        self.rbuf.consume(frame.len());
        Ok(message)
    }

    /// Waits for the acknowledgement `kind` of `pkid`, handling what else
    /// comes first; its MQTT 5 reason code. A PUBACK where a PUBREC was
    /// awaited is `Err(())`: the broker took a QoS 2 message at QoS 1.
    async fn await_ack(&mut self, kind: u8, pkid: u16) -> Result<Result<u8, ()>, DriverError> {
        loop {
            let frame = self.next_frame().await?;
            let k = frame.kind();
            let is_answer = k == kind || (kind == codec::PUBREC && k == codec::PUBACK);
            if !is_answer {
                self.unawaited(&frame, None)?;
                continue;
            }
            let (got, reason) = codec::acked(&self.rbuf.pending()[frame.body.clone()])
                .map_err(|m| self.malformed(m))?;
            self.rbuf.consume(frame.len());
            if got != pkid {
                return Err(self.malformed(Malformed(
                    "an acknowledgement of another packet than the one in flight",
                )));
            }
            return Ok(if k == kind { Ok(reason) } else { Err(()) });
        }
    }

    fn lost(&self, e: &io::Error) -> DriverError {
        lost_error(e, self.endpoint())
    }

    /// The broker ending the connection before a byte of its CONNACK: an
    /// EOF, or a reset (Mosquitto's max_connections) or broken pipe, which
    /// can come as early as the write.
    fn lost_before_connack(&self, e: &io::Error) -> DriverError {
        let ended = matches!(
            e.kind(),
            io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
        );
        if !ended || !self.rbuf.is_empty() {
            return self.lost(e);
        }
        DriverError::connection(format!(
            "{} closed the connection before its CONNACK (a listener's max_connections, \
             or a broker that does not speak MQTT {}?)",
            self.endpoint(),
            self.version().as_str()
        ))
    }

    fn malformed(&self, m: Malformed) -> DriverError {
        DriverError::connection(format!(
            "unexpected answer from {}: {}",
            self.endpoint(),
            m.0
        ))
    }
}

/// What an acknowledgement's reason code says: codes from 0x80 on refuse.
fn acked(reason: u8) -> Acked {
    if reason >= 0x80 {
        Acked::Refused { reason }
    } else {
        Acked::Acknowledged
    }
}

impl MqttConn for MqttConnection {
    fn connack(&self) -> ConnAck {
        self.connack
    }

    async fn publish(&mut self, m: &Publish<'_>) -> Result<Acked, DriverError> {
        let pkid = if m.qos == QoS::AtMostOnce {
            0
        } else {
            self.pkid()
        };
        let version = self.version();
        codec::publish(
            &mut self.wbuf,
            version,
            m.topic.as_bytes(),
            m.qos,
            m.retain,
            pkid,
            m.payload,
        );
        match m.qos {
            QoS::AtMostOnce => {
                self.write().await?;
                Ok(Acked::Written)
            }
            QoS::AtLeastOnce => {
                self.send_for_answer().await?;
                let reason = self.await_ack(codec::PUBACK, pkid).await?;
                Ok(reason.map_or(Acked::Acknowledged, acked))
            }
            QoS::ExactlyOnce => {
                self.send_for_answer().await?;
                match self.await_ack(codec::PUBREC, pkid).await? {
                    Err(()) => return Ok(Acked::Downgraded),
                    Ok(r) => match acked(r) {
                        Acked::Acknowledged => {}
                        refused => return Ok(refused),
                    },
                }
                codec::ack(&mut self.wbuf, codec::PUBREL, pkid);
                self.send_for_answer().await?;
                let reason = self.await_ack(codec::PUBCOMP, pkid).await?;
                Ok(reason.map_or(Acked::Acknowledged, acked))
            }
        }
    }

    async fn subscribe(
        &mut self,
        filters: &[(&str, QoS)],
    ) -> Result<Vec<Option<QoS>>, DriverError> {
        let pkid = self.pkid();
        let version = self.version();
        codec::subscribe(&mut self.wbuf, version, pkid, filters);
        self.write().await?;
        loop {
            let frame = self.next_frame().await?;
            if frame.kind() != codec::SUBACK {
                self.unawaited(&frame, None)?;
                continue;
            }
            let (got, granted) =
                codec::suback(&self.rbuf.pending()[frame.body.clone()], self.version())
                    .map_err(|m| self.malformed(m))?;
            self.rbuf.consume(frame.len());
            if got != pkid || granted.len() != filters.len() {
                return Err(self.malformed(Malformed("a SUBACK that does not match the SUBSCRIBE")));
            }
            self.pay().await?;
            return Ok(granted);
        }
    }

    async fn poll(
        &mut self,
        max: usize,
        wait: Duration,
        on: &mut dyn FnMut(Message<'_>),
    ) -> Result<u64, DriverError> {
        let mut handed = 0;
        // A packet cut short by the last read is completed by the next.
        if self.parsed_frame()?.is_none() {
            // Nothing came within the wait: an empty poll, not an error.
            if let Ok(read) = tokio::time::timeout(wait, self.read_more()).await {
                read?;
            }
        }
        while (handed as usize) < max {
            let Some(frame) = self.parsed_frame()? else {
                break;
            };
            handed += u64::from(self.unawaited(&frame, Some(&mut *on))?);
        }
        let keepalive = self.shared.keepalive;
        if !keepalive.is_zero() && self.last_sent.elapsed() >= keepalive / 2 {
            self.owed.extend_from_slice(&codec::PINGREQ_PACKET);
        }
        self.pay().await?;
        Ok(handed)
    }

    async fn reconnect(&mut self) -> Result<(), DriverError> {
        let shared = Arc::clone(&self.shared);
        *self = MqttConnection::open(shared, self.host, &self.client_id, self.clean).await?;
        Ok(())
    }

    async fn rejoin(&mut self, client_id: &str, clean: bool) -> Result<ConnAck, DriverError> {
        let shared = Arc::clone(&self.shared);
        *self = MqttConnection::open(shared, self.host, client_id, clean).await?;
        Ok(self.connack)
    }

    async fn disconnect(&mut self) {
        self.wbuf.extend_from_slice(&codec::DISCONNECT_PACKET);
        let _ = self.write().await;
    }

    async fn ping(&mut self) -> Result<(), DriverError> {
        self.wbuf.extend_from_slice(&codec::PINGREQ_PACKET);
        self.send_for_answer().await?;
        loop {
            let frame = self.next_frame().await?;
            let pong = frame.kind() == codec::PINGRESP;
            self.unawaited(&frame, None)?;
            if pong {
                return self.pay().await;
            }
        }
    }
}
