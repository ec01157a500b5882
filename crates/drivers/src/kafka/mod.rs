//! Apache Kafka (and brokers that speak its protocol), for the
//! change-stream family ([`StreamConn`]): producing and administration
//! through librdkafka, consuming with loadcell's own group member and
//! fetcher ([`fetch`]) where it serves the target, librdkafka's otherwise.
//!
//! Target: `kafka://host:port[,host:port…][?property=value…]`. Every
//! parameter is a librdkafka property (`acks`, `linger.ms`,
//! `compression.type`, `client.id`, `session.timeout.ms`, …), checked by
//! librdkafka when the target is parsed, except two of loadcell's own:
//! `compression=none|gzip|snappy|lz4|zstd` (short for `compression.type`)
//! and `replication=N`, the replication factor of the topics
//! `create_stream` makes (default 1). Defaults: `acks=all`, port 9092.
//!
//! ## Why librdkafka, and why not for consuming
//!
//! The family needs consumer groups with rebalancing (two loadcell
//! processes in one group split the partitions; a dead consumer's
//! partitions go to the others) and offset commits. rskafka has no
//! consumer groups; `kafka-protocol` is a codec only. librdkafka has all
//! of it, is what most non-Java clients use, and builds from the `rdkafka`
//! crate's bundled source (configure and make, about a minute, C compiler
//! only). For producing it is cheap enough (rows are handed over a batch
//! at a time, below). Its consumer is not: its broker thread makes an op
//! and a message per record and copies each into a queue, which measured
//! 0.67-1.08× ConsumerPerformance's CPU per row doing nothing with the
//! rows (docs/BENCHMARKS.md, "Kafka consume: librdkafka's own floor").
//! So loadcell speaks the consumer's side of the protocol itself, with
//! `kafka-protocol`'s codecs: the classic group protocol ([`member`]:
//! JoinGroup/SyncGroup with the `range` assignor, heartbeats, offsets,
//! LeaveGroup) and Fetch, its record batches read in place ([`batches`]).
//! It serves plaintext targets that set only properties it honours
//! ([`Settings::native_consumer`]) on brokers that speak its API versions
//! (Kafka 2.7 or newer); TLS, SASL, another assignor or isolation level
//! keep librdkafka's consumer. `server_info` names the one in use.
//!
//! ## Producing
//!
//! One producer per driver, made when a session first produces (a run
//! that only consumes has none) and shared by every session (librdkafka's
//! producer is thread-safe): rows from all sessions are batched into one
//! request per partition leader, over one connection per broker, where a
//! producer per session would multiply threads and connections and send
//! smaller batches. `queue_row` encodes the row ([`RowCodec`]) into the
//! session's reused staging buffer, for partition `row.channel`; every
//! 64 KiB of rows, and at `produce`, the session hands what it staged to
//! `rd_kafka_produce_batch` (which copies each row), one call per
//! partition, through a topic handle the session keeps, so nothing is
//! allocated per row on loadcell's side (the `rdkafka` crate's `send`
//! makes a `CString` of the topic name per record) and librdkafka reads
//! its clocks and takes the topic's lock once a call rather than once a
//! row. Each record carries the address of the session's [`Acks`] as its
//! delivery opaque; librdkafka's delivery reports (served by the
//! producer's polling thread) count them down, and `produce` waits until
//! the session's count is zero.
//!
//! ## Consuming
//!
//! One consumer per session, a member of the group, that commits only
//! what it handed to the workload: `commit` commits the positions of the
//! rows handed over, and a member commits them before it gives partitions
//! up in a rebalance, so that their next owner does not read again what
//! it polled. Rebalances are eager (`range`): every member gives its
//! partitions up, committed, before any is assigned again;
//! `cooperative-sticky` (librdkafka's consumer, if the target sets
//! `partition.assignment.strategy`) lets members keep theirs, but two
//! processes of one group then read some rows twice (see
//! `consumer_config`). A member that dies without leaving is noticed
//! after `session.timeout.ms`, 10 s by default here.
//! [`Channels::Assigned`] reads those partitions, starting at the group's
//! committed offsets; [`Channels::Group`] joins, and the group's
//! rebalances set [`PollOutcome::reassigned`]. A poll waits for the first
//! record, then takes what is already fetched, up to the maximum.
//!
//! The native consumer runs its membership (joins, heartbeats, the commit
//! at a revoke) in a task of its own and one fetch task per partition
//! leader, each keeping a fetch in flight while the session reads the
//! last answer; rows are decoded in place from the answer's bytes. It
//! reads uncommitted records (`read_uncommitted`, Java's default; a
//! target that sets `isolation.level` gets librdkafka's consumer).
//! librdkafka's consumer (`consume.rs`) stores a row's offset when the
//! row is handed over (`enable.auto.offset.store=false`) and commits
//! asynchronously, a failure reported by the next `commit`.
//!
//! ## Streams, groups and the marker
//!
//! A stream is a topic with one partition per channel. Topic configs are
//! a fixed set, with no room for a note of who made the topic, so the
//! marker is the one record of a companion topic `<stream>.loadcell`
//! (one partition, `retention.ms=-1` so it outlives the stream's own
//! retention); a topic without it is not loadcell's. Kafka makes a group
//! when a member first joins, so `create_group` commits a starting offset
//! for every partition (the start or the end of each) under the group:
//! whoever joins later, in any process, starts there. `drop_stream`
//! deletes both topics; the broker drops the offsets of deleted topics.

mod batches;
mod consume;
mod fetch;
mod member;
mod produce;
#[cfg(test)]
mod tests;
mod wire;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use loadcell_core::kv::KvCapabilities;
use loadcell_core::stream::{
    ChannelPosition, Channels, OnRow, PollOutcome, ProduceOutcome, RowCodec, StartFrom, StreamConn,
    StreamMeta, StreamRow,
};
use loadcell_core::{Driver, DriverError, ServerInfo, Target};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer as _};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::transport::target_url::{one_of, Query, UrlParts};
use crate::transport::url_text;
use crate::{DriverInfo, Family};
use consume::GroupConsumer;
use fetch::NativeConsumer;
use member::GroupTiming;
use produce::{LazyProducer, Session};

pub const INFO: DriverInfo = DriverInfo {
    name: "kafka",
    schemes: &["kafka"],
    family: Family::STREAM,
    url_form: "kafka://host:port[,host:port…][?acks=all|1|0&compression=none|gzip|snappy|lz4|zstd\
               &replication=N&client.id=ID&<librdkafka property>=VALUE…] \
               (e.g. linger.ms=5, session.timeout.ms=6000; default 10000)",
    about: "Apache Kafka: partitions as channels, consumer groups with rebalancing, offset \
            commits; produces through librdkafka, consumes in loadcell's own protocol code",
    kv: KvCapabilities::NONE,
    blocking: false,
};

const DEFAULT_PORT: u16 = 9092;
/// How long an admin request (topics, groups, offsets) may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The connect timeout when the engine gives none.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const COMPRESSIONS: &[&str] = &["none", "gzip", "snappy", "lz4", "zstd"];

/// Properties the native consumer honours, or that concern producing
/// only ([`Settings::native_consumer`]).
const NATIVE_CONSUMER_HONOURS: &[&str] = &[
    "bootstrap.servers",
    "client.id",
    "allow.auto.create.topics",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    // librdkafka's consumer's alone.
    "fetch.queue.backoff.ms",
    // Producing's.
    "acks",
    "compression.type",
    "compression.codec",
    "compression.level",
    "linger.ms",
    "queue.buffering.max.ms",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "batch.num.messages",
    "batch.size",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "request.timeout.ms",
    "message.send.max.retries",
    "retries",
    "retry.backoff.ms",
    "enable.idempotence",
    "sticky.partitioning.linger.ms",
];

/// The companion topic that holds `stream`'s marker.
fn marker_topic(stream: &str) -> String {
    format!("{stream}.loadcell")
}

/// What the target says, as librdkafka properties.
#[derive(Debug, Clone)]
struct Settings {
    /// `host:port,host:port`, for messages and `bootstrap.servers`.
    brokers: String,
    /// Every client's properties: the target's, over loadcell's defaults.
    properties: Vec<(String, String)>,
    replication: i32,
}

impl Settings {
    fn parse(target: &Target) -> Result<Settings, String> {
        // Any name: librdkafka checks those it is handed.
        let mut query = Query::any(target.url());
        let replication = query.take_parsed("replication", |value| {
            value
                .parse::<i32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("replication must be 1 or more, got '{value}'"))
        })?;
        let parts = UrlParts::parse(target, DEFAULT_PORT)?;
        if parts.hosts.is_empty() {
            return Err("name at least one broker: kafka://host:port".to_string());
        }
        parts.no_path("a Kafka target has no path (kafka://host:port[,host:port])")?;
        let brokers = url_text::endpoints(&parts.hosts);
        let mut properties = vec![
            ("bootstrap.servers".to_string(), brokers.clone()),
            ("client.id".to_string(), "loadcell".to_string()),
            ("acks".to_string(), "all".to_string()),
            // Only `create_stream` makes topics: producing to a topic that
            // is not there is an error, not a new one-partition topic.
            ("allow.auto.create.topics".to_string(), "false".to_string()),
        ];
        for (key, value) in query.into_pairs() {
            let key = match &*key {
                "compression" => {
                    one_of("compression", &value, COMPRESSIONS)?;
                    "compression.type".to_string()
                }
                _ => key,
            };
            match properties.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => properties.push((key, value)),
            }
        }
        let settings = Settings {
            brokers,
            properties,
            replication: replication.unwrap_or(1),
        };
        // librdkafka checks every property's name and value.
        settings
            .config()
            .create_native_config()
            .map_err(|e| format!("{e}"))?;
        Ok(settings)
    }

    /// A client configuration with every property of the target.
    fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }

    /// Whether sessions consume with loadcell's own consumer
    /// ([`NativeConsumer`]): every property the target sets is one it
    /// honours or one of producing's. Any other (TLS, SASL, fetch tuning,
    /// another assignor or isolation level) keeps librdkafka's.
    fn native_consumer(&self) -> bool {
        self.properties.iter().all(|(key, value)| match &**key {
            "security.protocol" => value.eq_ignore_ascii_case("plaintext"),
            "partition.assignment.strategy" => value == "range",
            key => NATIVE_CONSUMER_HONOURS.contains(&key),
        })
    }

    /// The group's clocks, as the target sets them or librdkafka's
    /// defaults (10 s for the session: see `consumer_config`).
    fn group_timing(&self) -> GroupTiming {
        let millis = |key: &str, default: u64| {
            let value = self.properties.iter().find(|(k, _)| k == key);
            Duration::from_millis(value.and_then(|(_, v)| v.parse().ok()).unwrap_or(default))
        };
        GroupTiming {
            session: millis("session.timeout.ms", 10_000),
            heartbeat: millis("heartbeat.interval.ms", 3_000),
            rebalance: millis("max.poll.interval.ms", 300_000),
        }
    }

    /// The brokers to ask first, as `host:port` each.
    fn bootstrap(&self) -> Vec<String> {
        self.brokers.split(',').map(str::to_string).collect()
    }

    /// A consumer's configuration, in `group`.
    fn consumer_config(&self, group: &str) -> ClientConfig {
        let mut config = self.config();
        // Defaults the target may override. Eager rebalances (`range`,
        // every member gives up all its partitions and commits them before
        // any is assigned again): with `cooperative-sticky` two processes
        // of one group consumed 2,400-9,400 rows twice in 5 of 8 runs of
        // ~70,000, against none in 7 of 7 with `range`, though each member
        // commits synchronously at every revoke. A member that dies without
        // leaving (a killed process) hands its partitions on after 10 s,
        // not librdkafka's 45; heartbeats come from librdkafka's own
        // thread, so a busy session is no false alarm.
        for (key, default) in [
            ("partition.assignment.strategy", "range"),
            ("session.timeout.ms", "10000"),
            // Once a partition's prefetched rows pass librdkafka's queue
            // thresholds (64 MB by default) its next fetch waits this long,
            // 1 s by default: a consumer catching up drained the queue in
            // ~0.3 s and then sat idle, 280-350k rows/s at 8 partitions and
            // 130k at 32, against 1.1-1.35M with 10 ms (1 ms gave no more).
            ("fetch.queue.backoff.ms", "10"),
        ] {
            if config.get(key).is_none() {
                config.set(key, default);
            }
        }
        config
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false")
            .set("group.id", group);
        config
    }
}

pub struct KafkaDriver {
    settings: Arc<Settings>,
    /// Made by the first connect, shared by every session.
    clients: OnceLock<Result<SharedClients, String>>,
}

/// The clients every session of a driver shares.
#[derive(Clone)]
struct SharedClients {
    producer: Arc<LazyProducer>,
    admin: Arc<AdminClient<DefaultClientContext>>,
    /// Whether the brokers speak the native consumer's API versions:
    /// asked once, by the first session that needs to know.
    speaks_native: Arc<tokio::sync::OnceCell<bool>>,
}

impl KafkaDriver {
    pub fn from_target(target: &Target) -> Result<KafkaDriver, String> {
        Ok(KafkaDriver {
            settings: Arc::new(Settings::parse(target)?),
            clients: OnceLock::new(),
        })
    }

    fn clients(&self) -> Result<SharedClients, DriverError> {
        self.clients
            .get_or_init(|| {
                let admin = self
                    .settings
                    .config()
                    .create()
                    .map_err(|e| format!("could not make a Kafka admin client: {e}"))?;
                Ok(SharedClients {
                    producer: Arc::new(LazyProducer::new(self.settings.config())),
                    admin: Arc::new(admin),
                    speaks_native: Arc::default(),
                })
            })
            .clone()
            .map_err(DriverError::fatal)
    }
}

impl Driver for KafkaDriver {
    type Conn = KafkaConn;

    fn endpoint(&self) -> String {
        self.settings.brokers.clone()
    }

    async fn connect(&self) -> Result<KafkaConn, DriverError> {
        self.connect_within(CONNECT_TIMEOUT).await
    }

    /// librdkafka connects in the background and retries for ever: the
    /// connection is proven by a metadata request answered within
    /// `timeout`.
    async fn connect_within(&self, timeout: Duration) -> Result<KafkaConn, DriverError> {
        let clients = self.clients()?;
        let admin = clients.admin.clone();
        let brokers = self.settings.brokers.clone();
        blocking(move || {
            admin
                .inner()
                .fetch_metadata(None, timeout)
                .map(drop)
                .map_err(|e| {
                    DriverError::connection(format!(
                        "no answer from Kafka at {brokers} within {}: {}",
                        humantime::format_duration(timeout),
                        reason(&e)
                    ))
                })
        })
        .await?;
        Ok(KafkaConn {
            session: Session::new(clients.producer.clone()),
            consumer: None,
            group_client: None,
            settings: self.settings.clone(),
            clients,
        })
    }

    async fn server_info(&self, conn: &mut KafkaConn) -> Result<ServerInfo, DriverError> {
        let admin = conn.clients.admin.clone();
        let cluster = blocking(move || admin.inner().fetch_cluster_id(ADMIN_TIMEOUT)).await;
        // Kafka's protocol names API versions, never the release.
        let version = format!(
            "unreported (client librdkafka {})",
            rdkafka::util::get_rdkafka_version().1
        );
        // Which consumer a run's sessions use: a result says what ran.
        let consumer = if conn.native_consumer().await? {
            "loadcell's own (Kafka protocol)"
        } else {
            "librdkafka's"
        };
        let info = ServerInfo::new("Kafka", version).with_extra("consumer", consumer);
        Ok(match cluster {
            Some(cluster) => info.with_extra("cluster", cluster),
            None => info,
        })
    }
}

/// A session's consumer: loadcell's own where it serves the target,
/// librdkafka's otherwise ([`Settings::native_consumer`]).
enum Consumer {
    Native(Box<NativeConsumer>),
    Librdkafka(GroupConsumer),
}

/// One session: its share of the driver's producer, and its consumer once
/// it subscribed.
pub struct KafkaConn {
    session: Session,
    consumer: Option<Consumer>,
    /// A client of the group `positions` last asked about, kept for the
    /// next call (the workload asks every interval).
    group_client: Option<(String, Arc<BaseConsumer>)>,
    settings: Arc<Settings>,
    clients: SharedClients,
}

impl KafkaConn {
    /// The channels this session's consumer holds now (its share of a
    /// group's partitions), in order; empty before `subscribe`.
    pub fn assignment(&self) -> Result<Vec<u32>, DriverError> {
        match &self.consumer {
            None => Ok(Vec::new()),
            Some(Consumer::Native(native)) => Ok(native.assignment()),
            Some(Consumer::Librdkafka(consumer)) => consumer.assignment(),
        }
    }

    /// Whether this session's consumer is loadcell's own: the target sets
    /// nothing it does not honour, and the broker speaks its versions.
    async fn native_consumer(&self) -> Result<bool, DriverError> {
        if !self.settings.native_consumer() {
            return Ok(false);
        }
        let bootstrap = self.settings.bootstrap();
        self.clients
            .speaks_native
            .get_or_try_init(|| NativeConsumer::speaks_to(&bootstrap))
            .await
            .copied()
    }

    /// A consumer outside any subscription, in `group`: for metadata,
    /// offsets and markers.
    fn admin_consumer(&self, group: &str) -> Result<Arc<BaseConsumer>, DriverError> {
        self.settings
            .consumer_config(group)
            .create()
            .map(Arc::new)
            .map_err(|e| fatal("make a Kafka consumer", &e))
    }

    /// A client in `group` that never joins it: for its offsets.
    fn group_client(&mut self, group: &str) -> Result<Arc<BaseConsumer>, DriverError> {
        match &self.group_client {
            Some((kept, client)) if kept == group => Ok(client.clone()),
            _ => {
                let client = self.admin_consumer(group)?;
                self.group_client = Some((group.to_string(), client.clone()));
                Ok(client)
            }
        }
    }

    /// `stream`'s partition count, `None` when the topic does not exist.
    async fn partitions(
        consumer: &Arc<BaseConsumer>,
        stream: &str,
    ) -> Result<Option<u32>, DriverError> {
        let (consumer, topic) = (consumer.clone(), stream.to_string());
        blocking(move || {
            let metadata = consumer
                .fetch_metadata(Some(&topic), ADMIN_TIMEOUT)
                .map_err(|e| kafka_error("read topic metadata", &e))?;
            let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
                return Ok(None);
            };
            match found.error().map(RDKafkaErrorCode::from) {
                None => Ok(Some(found.partitions().len() as u32)),
                Some(RDKafkaErrorCode::UnknownTopicOrPartition) => Ok(None),
                Some(code) => Err(DriverError::fatal(format!("topic {topic}: {code}"))),
            }
        })
        .await
    }

    /// Each partition's (low, high) watermarks.
    async fn watermarks(
        consumer: &Arc<BaseConsumer>,
        stream: &str,
        partitions: u32,
    ) -> Result<Vec<(i64, i64)>, DriverError> {
        let (consumer, topic) = (consumer.clone(), stream.to_string());
        blocking(move || {
            (0..partitions as i32)
                .map(|p| {
                    consumer
                        .fetch_watermarks(&topic, p, ADMIN_TIMEOUT)
                        .map_err(|e| kafka_error("read partition offsets", &e))
                })
                .collect()
        })
        .await
    }

    /// The offsets `consumer`'s group committed for `stream`'s partitions.
    async fn committed(
        consumer: &Arc<BaseConsumer>,
        stream: &str,
        partitions: u32,
    ) -> Result<Vec<Option<i64>>, DriverError> {
        let mut list = TopicPartitionList::new();
        list.add_partition_range(stream, 0, partitions as i32 - 1);
        let consumer = consumer.clone();
        blocking(move || {
            let committed =
                until_coordinated(|| consumer.committed_offsets(list.clone(), ADMIN_TIMEOUT))
                    .map_err(|e| kafka_error("read the group's offsets", &e))?;
            Ok(committed
                .elements()
                .iter()
                .map(|e| match e.offset() {
                    Offset::Offset(at) => Some(at),
                    _ => None,
                })
                .collect())
        })
        .await
    }

    /// The marker record of `stream`'s companion topic, read from its
    /// start; empty when the topic holds none.
    async fn read_marker(consumer: Arc<BaseConsumer>, stream: &str) -> Result<String, DriverError> {
        let topic = marker_topic(stream);
        blocking(move || {
            let mut list = TopicPartitionList::new();
            list.add_partition_offset(&topic, 0, Offset::Beginning)
                .map_err(|e| fatal("read the marker", &e))?;
            consumer
                .assign(&list)
                .map_err(|e| fatal("read the marker", &e))?;
            match consumer.poll(ADMIN_TIMEOUT) {
                Some(Ok(message)) => {
                    Ok(String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned())
                }
                Some(Err(e)) => Err(kafka_error("read the marker", &e)),
                None => Ok(String::new()),
            }
        })
        .await
    }

    async fn create_topic(
        &self,
        topic: &str,
        partitions: u32,
        config: &[(&str, &str)],
    ) -> Result<bool, DriverError> {
        let mut new = NewTopic::new(
            topic,
            partitions as i32,
            TopicReplication::Fixed(self.settings.replication),
        );
        for (key, value) in config {
            new = new.set(key, value);
        }
        let results = self
            .clients
            .admin
            .create_topics([&new], &admin_options())
            .await
            .map_err(|e| kafka_error("create a topic", &e))?;
        match results.into_iter().next() {
            Some(Ok(_)) => Ok(true),
            Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(false),
            Some(Err((name, code))) => Err(DriverError::fatal(format!(
                "could not create topic {name}: {code}"
            ))),
            None => Err(DriverError::fatal("no answer about the topic created")),
        }
    }
}

impl StreamConn for KafkaConn {
    // The group coordinator assigns partitions and rebalances them.
    const COORDINATED: bool = true;

    fn queue_row(&mut self, stream: &str, row: &StreamRow<'_>) {
        self.session.queue_row(stream, row);
    }

    async fn produce(
        &mut self,
        on_failure: &mut dyn FnMut(&str),
    ) -> Result<ProduceOutcome, DriverError> {
        self.session
            .produce(on_failure)
            .await
            .map_err(DriverError::fatal)
    }

    async fn subscribe(
        &mut self,
        stream: &str,
        group: &str,
        consumer: &str,
        channels: Channels<'_>,
    ) -> Result<(), DriverError> {
        // Dropped first: a session subscribing again leaves before it joins.
        self.consumer = None;
        let settings = &self.settings;
        if self.native_consumer().await? {
            let native = NativeConsumer::subscribe(
                settings.bootstrap(),
                consumer,
                group,
                stream,
                settings.group_timing(),
                channels,
            )
            .await?;
            self.consumer = Some(Consumer::Native(Box::new(native)));
            return Ok(());
        }
        let mut config = settings.consumer_config(group);
        // Not `earliest`: a member would jump over rows deleted ahead of
        // the group's offset without a word, and the rows would be neither
        // read nor missing. The error names no partition; the member finds
        // which and counts the rows (`GroupConsumer::pass_deleted`).
        config
            .set("client.id", consumer)
            .set("auto.offset.reset", "error");
        let librdkafka = GroupConsumer::subscribe(&config, stream, channels)?;
        self.consumer = Some(Consumer::Librdkafka(librdkafka));
        Ok(())
    }

    async fn poll(
        &mut self,
        max_rows: usize,
        wait: Duration,
        on_row: &mut OnRow<'_>,
    ) -> Result<PollOutcome, DriverError> {
        match self.consumer.as_mut().ok_or_else(not_subscribed)? {
            Consumer::Native(native) => native.poll(max_rows, wait, on_row).await,
            Consumer::Librdkafka(consumer) => consumer.poll(max_rows, wait, on_row).await,
        }
    }

    async fn commit(&mut self) -> Result<(), DriverError> {
        match self.consumer.as_mut().ok_or_else(not_subscribed)? {
            Consumer::Native(native) => native.commit().await,
            Consumer::Librdkafka(consumer) => consumer.commit(),
        }
    }

    /// The native consumer commits and leaves here; librdkafka's does as
    /// it is dropped.
    async fn leave(&mut self) -> Result<(), DriverError> {
        if let Some(Consumer::Native(native)) = &mut self.consumer {
            native.leave().await?;
        }
        Ok(())
    }

    async fn create_stream(
        &mut self,
        stream: &str,
        channels: u32,
        marker: &str,
    ) -> Result<bool, DriverError> {
        // The stream first: a marker made before would claim a topic that
        // turns out to be someone else's.
        if !self.create_topic(stream, channels, &[]).await? {
            return Ok(false);
        }
        let marker_topic = marker_topic(stream);
        self.create_topic(&marker_topic, 1, &[("retention.ms", "-1")])
            .await?;
        let mut failure = None;
        self.session.queue_raw(&marker_topic, 0, marker.as_bytes());
        let outcome = self
            .session
            .produce(&mut |reason| failure = Some(reason.to_string()))
            .await
            .map_err(DriverError::fatal)?;
        match failure {
            Some(reason) if outcome.failed > 0 => Err(DriverError::fatal(format!(
                "could not write the marker of {stream}: {reason}"
            ))),
            _ => Ok(true),
        }
    }

    async fn stream_meta(&mut self, stream: &str) -> Result<Option<StreamMeta>, DriverError> {
        // librdkafka assigns partitions only to a consumer with a group,
        // which it neither joins nor commits to.
        let consumer = self.admin_consumer("loadcell-marker-reader")?;
        let Some(channels) = Self::partitions(&consumer, stream).await? else {
            return Ok(None);
        };
        let marker = match Self::partitions(&consumer, &marker_topic(stream)).await? {
            Some(_) => Self::read_marker(consumer, stream).await?,
            None => String::new(),
        };
        Ok(Some(StreamMeta { marker, channels }))
    }

    async fn drop_stream(&mut self, stream: &str) -> Result<(), DriverError> {
        let results = self
            .clients
            .admin
            .delete_topics(&[stream, &marker_topic(stream)], &admin_options())
            .await
            .map_err(|e| kafka_error("delete the topics", &e))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                Err((name, code)) => {
                    return Err(DriverError::fatal(format!(
                        "could not delete topic {name}: {code}"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Every record below each partition's end offset, read from the
    /// start: one is loadcell's when its value decodes as a row.
    async fn foreign_rows(&mut self, stream: &str) -> Result<u64, DriverError> {
        let consumer = self.admin_consumer("loadcell-cleanup-reader")?;
        let Some(partitions) = Self::partitions(&consumer, stream).await? else {
            return Ok(0);
        };
        let watermarks = Self::watermarks(&consumer, stream, partitions).await?;
        let topic = stream.to_string();
        blocking(move || {
            let mut list = TopicPartitionList::new();
            // What is left to read of each partition: up to its end offset.
            let mut ends: Vec<i64> = Vec::new();
            for (partition, (low, high)) in watermarks.into_iter().enumerate() {
                ends.push(high);
                list.add_partition_offset(&topic, partition as i32, Offset::Offset(low))
                    .map_err(|e| fatal("read the stream", &e))?;
            }
            consumer
                .assign(&list)
                .map_err(|e| fatal("read the stream", &e))?;
            let mut next: Vec<i64> = list
                .elements()
                .iter()
                .map(|e| match e.offset() {
                    Offset::Offset(at) => at,
                    _ => 0,
                })
                .collect();
            let mut foreign = 0;
            let mut stalled_at = std::time::Instant::now() + ADMIN_TIMEOUT;
            while next.iter().zip(&ends).any(|(at, end)| at < end) {
                let message = match consumer.poll(Duration::from_millis(500)) {
                    Some(Ok(message)) => message,
                    Some(Err(e)) => return Err(kafka_error("read the stream", &e)),
                    // No record: the fetch position may have passed records
                    // that are not handed over (a transaction's markers).
                    None => {
                        let position = consumer
                            .position()
                            .map_err(|e| kafka_error("read the stream", &e))?;
                        for e in position.elements_for_topic(&topic) {
                            let p = e.partition() as usize;
                            if let Offset::Offset(at) = e.offset() {
                                if at > next[p] {
                                    next[p] = at;
                                    stalled_at = std::time::Instant::now() + ADMIN_TIMEOUT;
                                }
                            }
                        }
                        if std::time::Instant::now() >= stalled_at {
                            return Err(DriverError::connection(format!(
                                "reading the stream {topic} stalled: no record within {}",
                                humantime::format_duration(ADMIN_TIMEOUT)
                            )));
                        }
                        continue;
                    }
                };
                stalled_at = std::time::Instant::now() + ADMIN_TIMEOUT;
                let partition = message.partition() as usize;
                if message.offset() >= ends[partition] {
                    continue; // produced after the read began
                }
                next[partition] = message.offset() + 1;
                let row = message.payload().map(RowCodec::decode);
                foreign += u64::from(!matches!(row, Some(Ok(_))));
            }
            Ok(foreign)
        })
        .await
    }

    async fn create_group(
        &mut self,
        stream: &str,
        group: &str,
        from: StartFrom,
    ) -> Result<bool, DriverError> {
        let consumer = self.group_client(group)?;
        let partitions = Self::partitions(&consumer, stream)
            .await?
            .ok_or_else(|| DriverError::fatal(format!("no topic {stream} to make a group on")))?;
        let committed = Self::committed(&consumer, stream, partitions).await?;
        if committed.iter().any(Option::is_some) {
            return Ok(false);
        }
        let watermarks = Self::watermarks(&consumer, stream, partitions).await?;
        let mut start = TopicPartitionList::new();
        for (partition, (low, high)) in watermarks.into_iter().enumerate() {
            let at = match from {
                StartFrom::Beginning => low,
                StartFrom::End => high,
            };
            start
                .add_partition_offset(stream, partition as i32, Offset::Offset(at))
                .map_err(|e| fatal("set a starting offset", &e))?;
        }
        blocking(move || {
            until_coordinated(|| consumer.commit(&start, CommitMode::Sync))
                .map_err(|e| kafka_error("commit the group's starting offsets", &e))
        })
        .await?;
        Ok(true)
    }

    async fn drop_group(&mut self, _stream: &str, group: &str) -> Result<(), DriverError> {
        let results = self
            .clients
            .admin
            .delete_groups(&[group], &admin_options())
            .await
            .map_err(|e| kafka_error("delete the group", &e))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::GroupIdNotFound)) => {}
                Err((name, code)) => {
                    return Err(DriverError::fatal(format!(
                        "could not delete group {name}: {code}"
                    )))
                }
            }
        }
        Ok(())
    }

    async fn positions(
        &mut self,
        stream: &str,
        group: &str,
    ) -> Result<Vec<ChannelPosition>, DriverError> {
        let consumer = self.group_client(group)?;
        let partitions = Self::partitions(&consumer, stream)
            .await?
            .ok_or_else(|| DriverError::fatal(format!("no topic {stream}")))?;
        let watermarks = Self::watermarks(&consumer, stream, partitions).await?;
        let committed = Self::committed(&consumer, stream, partitions).await?;
        Ok(watermarks
            .into_iter()
            .zip(committed)
            .enumerate()
            .map(|(channel, ((low, high), committed))| {
                // A committed offset below the start offset: the rows
                // between were deleted (DeleteRecords, retention) before
                // the group read them. They are owed all the same, where
                // counting from the start offset would drop them from
                // what is owed and call the shortfall a pass.
                let committed = committed.map_or(low, |at| at.min(high));
                let origin = committed.min(low);
                ChannelPosition {
                    channel: channel as u32,
                    end: (high - origin).max(0) as u64,
                    committed: (committed - origin) as u64,
                    vanished: (low - origin) as u64,
                }
            })
            .collect())
    }
}

/// The group's coordinator is found (or loads its offsets) on the first
/// request for a group: `call` is repeated while the broker says so.
fn until_coordinated<T>(mut call: impl FnMut() -> KafkaResult<T>) -> KafkaResult<T> {
    let deadline = std::time::Instant::now() + ADMIN_TIMEOUT;
    loop {
        match call() {
            Err(e) if is_coordinator_moving(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            result => return result,
        }
    }
}

fn is_coordinator_moving(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::CoordinatorLoadInProgress
                | RDKafkaErrorCode::CoordinatorNotAvailable
        )
    )
}

fn admin_options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT))
}

fn not_subscribed() -> DriverError {
    DriverError::fatal("poll or commit before subscribe")
}

/// Runs a call that blocks (librdkafka's synchronous requests) off the
/// worker thread.
async fn blocking<T: Send + 'static>(call: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(call)
        .await
        .expect("a blocking Kafka call panicked")
}

/// librdkafka's reason, without the crate's wrapping ("Meta data fetch
/// error: …").
fn reason(e: &KafkaError) -> String {
    match e.rdkafka_error_code() {
        Some(code) => code.to_string(),
        None => e.to_string(),
    }
}

/// An error of a request to the cluster: the connection's when the
/// brokers did not answer, fatal otherwise.
fn kafka_error(what: &str, e: &KafkaError) -> DriverError {
    let message = format!("could not {what}: {}", reason(e));
    match e.rdkafka_error_code() {
        Some(
            RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::AllBrokersDown
            | RDKafkaErrorCode::OperationTimedOut
            | RDKafkaErrorCode::RequestTimedOut
            | RDKafkaErrorCode::NetworkException
            | RDKafkaErrorCode::Resolve,
        ) => DriverError::connection(message),
        _ => DriverError::fatal(message),
    }
}

/// An error of librdkafka's own, before any request.
fn fatal(what: &str, e: &KafkaError) -> DriverError {
    DriverError::fatal(format!("could not {what}: {e}"))
}
