//! The `mqtt-pubsub` run's sessions: publishers (the first session group,
//! at `--rate` in all) and subscribers (closed loop), and the count after
//! the run of what each subscriber was owed against what it received.

use crate::origin::Padded;
use loadcell_core::clock::wall_ns;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loadcell_core::mqtt::{Acked, MqttConn, Publish, QoS, Stamp};
use loadcell_core::DriverError;
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use loadcell_record::details::{MqttDelivery, SubscriberDelivery};
use loadcell_record::result::Verification;

use super::delivery::{matches, Arrival, Seen};
use super::MqttOptions;

/// The operation kinds, by index.
const PUBLISH: usize = 0;
const RECEIVE: usize = 1;
const END_TO_END: usize = 2;
const REJOIN: usize = 3;

/// How long a subscriber's poll waits for a message in the drain.
const DRAIN_POLL: Duration = Duration::from_millis(20);

/// What the sessions share while they run, and hand over as they end.
#[derive(Default)]
struct Board {
    /// The next message number of each publisher (it survives the
    /// publisher's reconnects).
    seqs: Box<[Padded]>,
    /// Messages the broker acknowledged (QoS 0: written), per publisher.
    published: Box<[Padded]>,
    /// Distinct messages received so far, per subscriber: when the drain
    /// may stop.
    received: Box<[Padded]>,
    /// With `--fanout`: messages acknowledged per subscriber they were
    /// addressed to.
    addressed: Box<[Padded]>,
    /// Publisher sessions that may still publish.
    live_publishers: AtomicUsize,
    refused: AtomicU64,
    downgraded: AtomicU64,
    retained: AtomicU64,
    foreign: AtomicU64,
    /// Messages of this run a subscriber received that were not for it:
    /// another vehicle's, or from a topic its filter does not match.
    misdelivered: AtomicU64,
    /// Subscriptions granted a lower QoS than asked.
    granted_lower: AtomicU64,
    /// Per subscriber: its outage has begun.
    went_offline: Box<[AtomicBool]>,
    /// What each subscriber session received, by subscriber, handed over
    /// when the session ends (also on a reconnect).
    seen: Mutex<Vec<(usize, Seen)>>,
}

pub struct PubSubScript {
    ops: [OpSpec; 4],
    opts: MqttOptions,
    origin: u64,
    /// When the subscribers' outage begins.
    outage_at: Option<Instant>,
    /// Each publisher's topic (with `--fanout`, each subscriber's).
    topics: Vec<String>,
    /// The publishers whose topics the subscribers' filter matches (with
    /// `--fanout`, all).
    matched: Vec<usize>,
    /// Per publisher: whether it is in `matched`.
    is_matched: Vec<bool>,
    board: Arc<Board>,
}

pub enum PubSubSession {
    Publisher(Publisher),
    Subscriber(Subscriber),
}

pub struct Publisher {
    index: usize,
    payload: Vec<u8>,
    downgrade_said: bool,
    board: Arc<Board>,
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.board.live_publishers.fetch_sub(1, Ordering::Relaxed);
    }
}

pub struct Subscriber {
    index: usize,
    /// Its client id, when its session is persistent (the same on every
    /// connection of the run).
    client_id: Option<String>,
    /// While it is offline: until when.
    offline_until: Option<Instant>,
    seen: Seen,
    /// This poll's end-to-end latencies, recorded after it.
    end_to_end_ns: Vec<u64>,
    board: Arc<Board>,
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        let mut all = self.board.seen.lock().unwrap_or_else(|e| e.into_inner());
        all.push((self.index, seen));
    }
}

impl PubSubScript {
    pub(super) fn new(opts: &MqttOptions, origin: u64) -> PubSubScript {
        let topics: Vec<String> = (0..if opts.fanout {
            opts.subscribers
        } else {
            opts.publishers
        })
            .map(|i| opts.topic_of(i))
            .collect();
        let filter = opts.filter();
        let is_matched: Vec<bool> = (0..opts.publishers)
            .map(|p| opts.fanout || matches(&filter, &topics[p]))
            .collect();
        let matched = (0..opts.publishers).filter(|&p| is_matched[p]).collect();
        let padded = |n: usize| (0..n).map(|_| Padded::default()).collect();
        PubSubScript {
            ops: [
                OpSpec {
                    name: "publish",
                    category: Category::Write,
                },
                OpSpec {
                    name: "receive",
                    category: Category::Read,
                },
                OpSpec {
                    name: "end_to_end",
                    category: Category::Read,
                },
                OpSpec {
                    name: "rejoin",
                    category: Category::Other,
                },
            ],
            opts: opts.clone(),
            origin,
            outage_at: opts.outage.map(|(at, _)| Instant::now() + at),
            topics,
            matched,
            is_matched,
            board: Arc::new(Board {
                seqs: padded(opts.publishers),
                published: padded(opts.publishers),
                received: padded(opts.subscribers),
                addressed: padded(if opts.fanout { opts.subscribers } else { 0 }),
                went_offline: (0..opts.subscribers)
                    .map(|_| AtomicBool::new(false))
                    .collect(),
                ..Board::default()
            }),
        }
    }

    async fn publish<C: MqttConn>(
        &self,
        conn: &mut C,
        p: &mut Publisher,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let b = &self.board;
        let seq = b.seqs[p.index].0.fetch_add(1, Ordering::Relaxed);
        Stamp {
            origin: self.origin,
            publisher: p.index as u32,
            seq,
            sent_ns: wall_ns(),
        }
        .encode(&mut p.payload);
        let addressee = self.opts.fanout.then(|| self.opts.addressee(p.index, seq));
        let message = Publish {
            topic: &self.topics[addressee.unwrap_or(p.index)],
            qos: self.opts.qos,
            retain: self.opts.retain,
            payload: &p.payload,
        };
        match ctx.op(PUBLISH, conn.publish(&message)).await? {
            Acked::Written | Acked::Acknowledged => {}
            Acked::Downgraded => {
                b.downgraded.fetch_add(1, Ordering::Relaxed);
                if !p.downgrade_said {
                    p.downgrade_said = true;
                    ctx.failed(
                        PUBLISH,
                        "qos downgraded",
                        "the broker answered a QoS 2 PUBLISH with PUBACK: it took it at QoS 1 \
                         (RabbitMQ does not do QoS 2)",
                    );
                }
            }
            Acked::Refused { reason } => {
                b.refused.fetch_add(1, Ordering::Relaxed);
                ctx.failed(
                    PUBLISH,
                    "publish refused",
                    &format!("the broker refused a PUBLISH: reason code {reason:#04x}"),
                );
                return Ok(());
            }
        }
        b.published[p.index].0.fetch_add(1, Ordering::Relaxed);
        if let Some(a) = addressee {
            b.addressed[a].0.fetch_add(1, Ordering::Relaxed);
        }
        ctx.items(PUBLISH, 1);
        Ok(())
    }

    /// Polls once, noting each message; with `ctx`, times this run's own
    /// end to end and records what the poll found.
    async fn receive<C: MqttConn>(
        &self,
        conn: &mut C,
        s: &mut Subscriber,
        wait: Duration,
    ) -> Result<u64, DriverError> {
        let b = &self.board;
        let Subscriber {
            seen,
            end_to_end_ns,
            ..
        } = s;
        let before = seen.distinct;
        let mut received_ns = 0;
        let (publishers, index) = (self.opts.publishers, s.index);
        let polled = conn
            .poll(self.opts.poll_max, wait, &mut |m| {
                if m.retain {
                    b.retained.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                let stamp = Stamp::decode(m.payload)
                    .filter(|s| s.origin == self.origin && (s.publisher as usize) < publishers);
                let Some(stamp) = stamp else {
                    b.foreign.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                if !self.owes(index, &stamp) {
                    b.misdelivered.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                // One clock reading per poll: its messages came together.
                if received_ns == 0 {
                    received_ns = wall_ns();
                }
                if seen.mark(stamp.publisher as usize, stamp.seq) != Arrival::Duplicate {
                    end_to_end_ns.push(received_ns.saturating_sub(stamp.sent_ns).max(0) as u64);
                }
            })
            .await;
        b.received[s.index]
            .0
            .fetch_add(s.seen.distinct - before, Ordering::Relaxed);
        polled
    }

    /// Whether subscriber `index` should have the message `stamp` stamps.
    fn owes(&self, index: usize, stamp: &Stamp) -> bool {
        let publisher = stamp.publisher as usize;
        if self.opts.fanout {
            self.opts.addressee(publisher, stamp.seq) == index
        } else {
            self.is_matched[publisher]
        }
    }

    async fn subscribe<C: MqttConn>(&self, conn: &mut C, index: usize) -> Result<(), DriverError> {
        let o = &self.opts;
        if o.shared.is_some() && conn.connack().shared_subscriptions == Some(false) {
            return Err(DriverError::fatal(
                "the broker says it has no shared subscriptions (CONNACK): leave out --shared",
            ));
        }
        let filter = o.subscription(index);
        let granted = conn.subscribe(&[(&filter, o.qos)]).await?;
        match granted.first().copied().flatten() {
            None => Err(DriverError::fatal(format!(
                "the broker refused the subscription to '{filter}'"
            ))),
            Some(qos) => {
                if qos < o.qos {
                    self.board.granted_lower.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
        }
    }

    /// Deliveries subscriber `index` (or its group) is owed now: what was
    /// published to the topics its filter matches, or with `--fanout`,
    /// addressed to it.
    fn owed(&self, index: usize) -> u64 {
        let b = &self.board;
        if self.opts.fanout {
            return b.addressed[index].0.load(Ordering::Relaxed);
        }
        self.matched
            .iter()
            .map(|&p| b.published[p].0.load(Ordering::Relaxed))
            .sum()
    }

    /// Whether subscriber `index` (or its group) has all it is owed, once
    /// no publisher can publish any more.
    fn drained(&self, index: usize) -> bool {
        let b = &self.board;
        if b.live_publishers.load(Ordering::Relaxed) > 0 {
            return false;
        }
        let have = if self.opts.shared.is_some() {
            b.received.iter().map(|r| r.0.load(Ordering::Relaxed)).sum()
        } else {
            b.received[index].0.load(Ordering::Relaxed)
        };
        have >= self.owed(index)
    }

    /// The subscriber's outage: it leaves (DISCONNECT) at the outage's
    /// time, stays away, polling nothing, for its length, then comes back
    /// on a new connection, to the session the broker kept for it when it
    /// is persistent (a clean one subscribes again, and what came meanwhile
    /// is missing). Whether this event was spent offline.
    async fn offline<C: MqttConn>(
        &self,
        conn: &mut C,
        s: &mut Subscriber,
        ctx: &mut Ctx,
    ) -> Result<bool, DriverError> {
        let (Some(at), Some((_, length))) = (self.outage_at, self.opts.outage) else {
            return Ok(false);
        };
        let now = Instant::now();
        match s.offline_until {
            None if now >= at
                && !self.board.went_offline[s.index].swap(true, Ordering::Relaxed) =>
            {
                conn.disconnect().await;
                s.offline_until = Some(now + length);
                Ok(true)
            }
            None => Ok(false),
            Some(until) if now < until => {
                let wake = until.min(now + self.opts.poll_wait);
                tokio::time::sleep_until(wake.into()).await;
                Ok(true)
            }
            Some(_) => {
                s.offline_until = None;
                ctx.op(REJOIN, self.come_back(conn, s)).await?;
                Ok(false)
            }
        }
    }

    /// A subscriber back from its outage on a new connection: to the
    /// session the broker kept, or to a clean one, subscribed again.
    async fn come_back<C: MqttConn>(
        &self,
        conn: &mut C,
        s: &Subscriber,
    ) -> Result<(), DriverError> {
        match &s.client_id {
            Some(id) => {
                if !conn.rejoin(id, false).await?.session_present {
                    return Err(DriverError::fatal(format!(
                        "the broker kept no session for {id} while it was offline: \
                         persistent sessions need a broker that keeps them"
                    )));
                }
                Ok(())
            }
            None => {
                conn.reconnect().await?;
                self.subscribe(conn, s.index).await
            }
        }
    }

    /// After the run: each subscriber (or the group) against what it was
    /// owed.
    pub(super) fn verify(&self) -> Option<Verification> {
        let o = &self.opts;
        if o.subscribers == 0 {
            return None;
        }
        let b = &self.board;
        let published: Vec<u64> = b
            .published
            .iter()
            .map(|p| p.0.load(Ordering::Relaxed))
            .collect();
        let mut by_subscriber = vec![Seen::new(o.publishers); o.subscribers];
        for (index, seen) in b.seen.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            by_subscriber[*index].merge(seen);
        }
        let addressed = |i: usize| b.addressed[i].0.load(Ordering::Relaxed);
        // What subscriber `index` (any member, for a group) was owed and got.
        let account = |name: String, index: usize, seen: &Seen| {
            let (mut expected, mut received, mut missing) = (0, 0, 0);
            if o.fanout {
                // Counted per vehicle, not per publisher as well: a fleet
                // of vehicles × publishers counters would cost more than
                // the exactness of a lost acknowledgement is worth.
                (expected, received) = (addressed(index), seen.distinct);
                missing = expected.saturating_sub(received);
            } else {
                for &p in &self.matched {
                    let got = seen.of(p);
                    expected += published[p];
                    received += got;
                    missing += published[p].saturating_sub(got);
                }
            }
            SubscriberDelivery {
                name,
                filter: o.subscription(index),
                expected,
                received,
                missing,
            }
        };
        let (subscribers, duplicates, reorders) = match &o.shared {
            Some(group) => {
                let mut all = Seen::new(o.publishers);
                for seen in &by_subscriber {
                    all.merge(seen);
                }
                (
                    vec![account(group.clone(), 0, &all)],
                    all.duplicates,
                    all.reorders,
                )
            }
            None => (
                by_subscriber
                    .iter()
                    .enumerate()
                    .map(|(i, seen)| account(i.to_string(), i, seen))
                    .collect(),
                by_subscriber.iter().map(|s| s.duplicates).sum(),
                by_subscriber.iter().map(|s| s.reorders).sum(),
            ),
        };
        let sum = |f: fn(&SubscriberDelivery) -> u64| subscribers.iter().map(f).sum::<u64>();
        let (expected, received, missing) =
            (sum(|s| s.expected), sum(|s| s.received), sum(|s| s.missing));
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let delivery = MqttDelivery {
            qos: o.qos.level(),
            published: published.iter().sum(),
            refused: load(&b.refused),
            downgraded: load(&b.downgraded),
            expected,
            received,
            missing,
            duplicates,
            reorders,
            retained_replayed: load(&b.retained),
            foreign: load(&b.foreign),
            misdelivered: load(&b.misdelivered),
            shared_group: o.shared.clone(),
            subscribers,
            loss_pct: if expected > 0 {
                100.0 * missing as f64 / expected as f64
            } else {
                0.0
            },
        };
        let owed = if o.fanout {
            format!(
                "addressed to its own topic ('{}' with its number), the vehicles in turn",
                o.topic
            )
        } else {
            format!("published to topics '{}' matches", o.subscription(0))
        };
        let mut how = format!(
            "messages each {} was owed ({owed}, as the broker acknowledged them) against the \
             distinct messages of this run it received, after draining for up to {:.1}s",
            if o.shared.is_some() {
                "shared group"
            } else {
                "subscriber"
            },
            o.drain_timeout.as_secs_f64()
        );
        if o.qos == QoS::AtMostOnce {
            how += &format!(
                "; at QoS 0 the broker may drop messages, so loss ({:.3}%) is reported, not failed",
                delivery.loss_pct
            );
        }
        if let Some((at, length)) = o.outage {
            how += &format!(
                "; each subscriber went offline {:.1}s into the run for {:.1}s, {}",
                at.as_secs_f64(),
                length.as_secs_f64(),
                if o.persistent {
                    "its persistent session queued on the broker meanwhile"
                } else {
                    "on a clean session, so what came meanwhile was lost to it"
                }
            );
        }
        let lower = load(&b.granted_lower);
        if lower > 0 {
            how += &format!("; {lower} subscription(s) were granted a lower QoS than asked");
        }
        if delivery.reorders > 0 {
            how += &format!("; {} message(s) came out of order", delivery.reorders);
        }
        if delivery.misdelivered > 0 {
            how += &format!(
                "; {} message(s) reached a subscriber they were not for",
                delivery.misdelivered
            );
        }
        let ok = (o.qos == QoS::AtMostOnce || missing == 0)
            && delivery.reorders == 0
            && delivery.misdelivered == 0;
        let mut verification = Verification::new(expected, received, ok, how);
        verification.details.insert(&delivery);
        Some(verification)
    }
}

impl<C: MqttConn> Script<C> for PubSubScript {
    type Session = PubSubSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, conn: &mut C, info: SessionInfo) -> Result<PubSubSession, DriverError> {
        let b = Arc::clone(&self.board);
        if info.group == 0 {
            b.live_publishers.fetch_add(1, Ordering::Relaxed);
            return Ok(PubSubSession::Publisher(Publisher {
                index: info.index,
                payload: self.opts.filler(),
                downgrade_said: false,
                board: b,
            }));
        }
        let client_id = self
            .opts
            .persistent
            .then(|| format!("loadcell-{:016x}-sub-{}", self.origin, info.index));
        if let Some(id) = &client_id {
            // The same session on every connection of the run: what was
            // queued while it was away comes now.
            conn.rejoin(id, false).await?;
        }
        self.subscribe(conn, info.index).await?;
        Ok(PubSubSession::Subscriber(Subscriber {
            index: info.index,
            client_id,
            offline_until: None,
            seen: Seen::new(self.opts.publishers),
            end_to_end_ns: Vec::with_capacity(self.opts.poll_max),
            board: b,
        }))
    }

    async fn event(
        &self,
        conn: &mut C,
        session: &mut PubSubSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        match session {
            PubSubSession::Publisher(p) => self.publish(conn, p, ctx).await,
            PubSubSession::Subscriber(s) => {
                if self.offline(conn, s, ctx).await? {
                    return Ok(());
                }
                let wait = self.opts.poll_wait;
                let n = ctx.op(RECEIVE, self.receive(conn, s, wait)).await?;
                ctx.items(RECEIVE, n);
                for ns in s.end_to_end_ns.drain(..) {
                    ctx.record(END_TO_END, Duration::from_nanos(ns), true);
                }
                Ok(())
            }
        }
    }

    /// A subscriber keeps receiving until it has every message it is owed
    /// (all publishers done) or `--drain-timeout` passes: a clean session
    /// loses what is queued for it once it disconnects.
    async fn close(&self, conn: &mut C, session: &mut PubSubSession) {
        if let PubSubSession::Subscriber(s) = session {
            // Still away when the run ended: back for the drain.
            if s.offline_until.take().is_some() && self.come_back(conn, s).await.is_err() {
                return;
            }
            let deadline = Instant::now() + self.opts.drain_timeout;
            while !self.drained(s.index) && Instant::now() < deadline {
                if self.receive(conn, s, DRAIN_POLL).await.is_err() {
                    return;
                }
                s.end_to_end_ns.clear();
            }
            // A clean session in place of the persistent one: nothing of
            // this run is left queued on the broker.
            if let Some(id) = &s.client_id {
                if conn.rejoin(id, true).await.is_err() {
                    return;
                }
            }
        }
        conn.disconnect().await;
    }
}
