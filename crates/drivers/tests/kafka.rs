//! The Kafka driver against a real Kafka 3.9 broker (KRaft), one shared by
//! every test here: each test uses topics and groups of its own.

mod local_runtime;

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use loadcell_core::stream::{
    ChannelPosition, Channels, PollOutcome, StartFrom, StreamConn, StreamMeta, StreamRow,
};
use loadcell_core::{Driver, ErrorClass, Target};
use loadcell_drivers::kafka::{KafkaConn, KafkaDriver};
use local_runtime::block_on;

const CHANNELS: u32 = 8;
const PAYLOAD: &[u8] = &[b'p'; 150];

fn kafka() -> &'static str {
    &loadcell_testkit::kafka()
        .unwrap_or_else(|e| panic!("cannot start Kafka: {e}"))
        .url
}

fn driver(url: &str) -> KafkaDriver {
    KafkaDriver::from_target(&Target::parse(url).expect("valid URL")).expect("valid target")
}

async fn connect(driver: &KafkaDriver) -> KafkaConn {
    driver
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

/// Row `seq` of `channel`, its first key naming both.
fn row(channel: u32, seq: u64, key: &[u8]) -> StreamRow<'_> {
    StreamRow {
        channel,
        seq,
        produced_ns: 1_790_000_000_000_000_000 + seq as i64,
        origin: 42,
        keys: [key, b"2026-11-24", b"", b"order"],
        payload: PAYLOAD,
    }
}

/// Produces `per_channel` rows into every channel, numbered from `first`,
/// and checks every one was acknowledged.
async fn produce(conn: &mut KafkaConn, stream: &str, first: u64, per_channel: u64) {
    for seq in first..first + per_channel {
        for channel in 0..CHANNELS {
            let key = format!("k{channel}-{seq}");
            conn.queue_row(stream, &row(channel, seq, key.as_bytes()));
        }
    }
    let mut failures = Vec::new();
    let outcome = conn
        .produce(&mut |reason| failures.push(reason.to_string()))
        .await
        .unwrap_or_else(|e| panic!("produce: {e}"));
    assert_eq!(
        outcome.rows,
        per_channel * u64::from(CHANNELS),
        "{failures:?}"
    );
    assert_eq!(outcome.failed, 0, "{failures:?}");
}

/// What a consumer read: each channel's sequence numbers in the order
/// they came, each row checked against what was produced.
#[derive(Default)]
struct Seen {
    by_channel: HashMap<u32, Vec<u64>>,
    rows: u64,
}

impl Seen {
    fn take(&mut self, got: StreamRow<'_>) {
        let key = format!("k{}-{}", got.channel, got.seq);
        assert_eq!(got, row(got.channel, got.seq, key.as_bytes()));
        self.by_channel
            .entry(got.channel)
            .or_default()
            .push(got.seq);
        self.rows += 1;
    }

    fn channels(&self) -> BTreeSet<u32> {
        self.by_channel.keys().copied().collect()
    }
}

async fn poll_into(conn: &mut KafkaConn, seen: &mut Seen) -> PollOutcome {
    let outcome = conn
        .poll(1000, Duration::from_millis(100), &mut |r| seen.take(r))
        .await
        .unwrap_or_else(|e| panic!("poll: {e}"));
    assert_eq!(outcome.undecodable, 0);
    outcome
}

/// Waits until the group's committed offsets reach the end of every
/// channel (commits are asynchronous).
async fn wait_committed(conn: &mut KafkaConn, stream: &str, group: &str) -> Vec<ChannelPosition> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let positions = conn.positions(stream, group).await.expect("positions");
        if positions.iter().all(|p| p.committed == p.end) || Instant::now() > deadline {
            return positions;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A target's property the native consumer does not honour: its sessions
/// consume with librdkafka's.
const LIBRDKAFKA: &str = "?isolation.level=read_committed";

/// The consumer the driver says its sessions use.
async fn consumer_named(driver: &KafkaDriver) -> String {
    let mut conn = connect(driver).await;
    let info = driver.server_info(&mut conn).await.expect("server info");
    info.extras["consumer"].clone()
}

#[test]
fn rows_across_eight_partitions_come_back_in_order_and_the_commit_leaves_no_lag() {
    let driver = driver(kafka());
    block_on(async {
        assert_eq!(
            consumer_named(&driver).await,
            "loadcell's own (Kafka protocol)"
        );
    });
    in_order_with_no_lag(&driver, "orders-assigned", "g-assigned");
}

#[test]
fn librdkafkas_consumer_serves_a_target_the_native_one_does_not() {
    let driver = driver(&format!("{}{LIBRDKAFKA}", kafka()));
    block_on(async {
        assert_eq!(consumer_named(&driver).await, "librdkafka's");
    });
    in_order_with_no_lag(&driver, "orders-assigned-rd", "g-assigned-rd");
    split_and_take_over(&driver, "orders-group-rd", "g-shared-rd");
}

fn in_order_with_no_lag(driver: &KafkaDriver, stream: &str, group: &str) {
    block_on(async {
        let mut conn = connect(driver).await;
        assert_eq!(conn.stream_meta(stream).await.unwrap(), None);
        assert!(conn.create_stream(stream, CHANNELS, "run-7").await.unwrap());
        assert!(!conn.create_stream(stream, CHANNELS, "run-8").await.unwrap());
        let meta = StreamMeta {
            marker: "run-7".to_string(),
            channels: CHANNELS,
        };
        assert_eq!(conn.stream_meta(stream).await.unwrap(), Some(meta));
        assert!(conn
            .create_group(stream, group, StartFrom::Beginning)
            .await
            .unwrap());
        assert!(!conn
            .create_group(stream, group, StartFrom::End)
            .await
            .unwrap());

        produce(&mut conn, stream, 0, 1250).await;
        let all: Vec<u32> = (0..CHANNELS).collect();
        conn.subscribe(stream, group, "c1", Channels::Assigned(&all))
            .await
            .unwrap();
        let mut seen = Seen::default();
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.rows < 10_000 && Instant::now() < deadline {
            poll_into(&mut conn, &mut seen).await;
        }
        assert_eq!(seen.rows, 10_000);
        for channel in 0..CHANNELS {
            assert_eq!(
                seen.by_channel[&channel],
                (0..1250).collect::<Vec<u64>>(),
                "channel {channel} out of order"
            );
        }
        conn.commit().await.unwrap();
        let positions = wait_committed(&mut conn, stream, group).await;
        assert_eq!(positions.len(), CHANNELS as usize);
        for (channel, p) in positions.iter().enumerate() {
            assert_eq!(
                *p,
                ChannelPosition {
                    channel: channel as u32,
                    end: 1250,
                    committed: 1250,
                    vanished: 0
                }
            );
        }
        drop(conn);

        let mut admin = connect(driver).await;
        admin.drop_group(stream, group).await.unwrap();
        // Gone: a new group of that name starts afresh, at the end.
        assert!(admin
            .create_group(stream, group, StartFrom::End)
            .await
            .unwrap());
        let positions = admin.positions(stream, group).await.unwrap();
        assert!(
            positions.iter().all(|p| p.committed == 1250),
            "{positions:?}"
        );
        admin.drop_group(stream, group).await.unwrap();
        admin.drop_stream(stream).await.unwrap();
        assert_eq!(admin.stream_meta(stream).await.unwrap(), None);
    });
}

#[test]
fn two_members_of_a_group_split_the_partitions_and_the_survivor_takes_over() {
    split_and_take_over(&driver(kafka()), "orders-group", "g-shared");
}

fn split_and_take_over(driver: &KafkaDriver, stream: &str, group: &str) {
    block_on(async {
        let mut admin = connect(driver).await;
        assert!(admin
            .create_stream(stream, CHANNELS, "run-9")
            .await
            .unwrap());
        assert!(admin
            .create_group(stream, group, StartFrom::Beginning)
            .await
            .unwrap());
        let (mut first, mut second) = (connect(driver).await, connect(driver).await);
        first
            .subscribe(stream, group, "c1", Channels::Group)
            .await
            .unwrap();
        second
            .subscribe(stream, group, "c2", Channels::Group)
            .await
            .unwrap();

        // Until the group has settled on a split of all eight.
        let (mut seen_first, mut seen_second) = (Seen::default(), Seen::default());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            poll_into(&mut first, &mut seen_first).await;
            poll_into(&mut second, &mut seen_second).await;
            let (a, b) = (first.assignment().unwrap(), second.assignment().unwrap());
            if !a.is_empty() && !b.is_empty() && a.len() + b.len() == CHANNELS as usize {
                break;
            }
            assert!(Instant::now() < deadline, "no split: {a:?} / {b:?}");
        }

        produce(&mut admin, stream, 0, 500).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen_first.rows + seen_second.rows < 4000 && Instant::now() < deadline {
            poll_into(&mut first, &mut seen_first).await;
            poll_into(&mut second, &mut seen_second).await;
        }
        assert_eq!(seen_first.rows + seen_second.rows, 4000);
        let (a, b) = (seen_first.channels(), seen_second.channels());
        assert!(!a.is_empty() && !b.is_empty(), "{a:?} / {b:?}");
        assert!(a.is_disjoint(&b), "{a:?} / {b:?}");
        assert_eq!(a.len() + b.len(), CHANNELS as usize);
        first.commit().await.unwrap();
        second.commit().await.unwrap();
        let positions = wait_committed(&mut admin, stream, group).await;
        assert!(
            positions.iter().all(|p| p.committed == 500),
            "{positions:?}"
        );

        // The first leaves: the second gets all eight and reads the rest.
        drop(first);
        produce(&mut admin, stream, 500, 500).await;
        let mut rest = Seen::default();
        let mut reassigned = false;
        let deadline = Instant::now() + Duration::from_secs(60);
        while rest.rows < 4000 && Instant::now() < deadline {
            reassigned |= poll_into(&mut second, &mut rest).await.reassigned;
        }
        assert!(reassigned);
        assert_eq!(rest.rows, 4000);
        assert_eq!(
            second.assignment().unwrap(),
            (0..CHANNELS).collect::<Vec<u32>>()
        );
        for channel in 0..CHANNELS {
            assert_eq!(rest.by_channel[&channel], (500..1000).collect::<Vec<u64>>());
        }
        drop(second);
        admin.drop_group(stream, group).await.unwrap();
        admin.drop_stream(stream).await.unwrap();
    });
}

#[test]
fn a_topic_loadcell_did_not_make_has_no_marker_and_is_left_alone() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let url = kafka();
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", url.trim_start_matches("kafka://"))
        .create()
        .unwrap();
    let driver = driver(url);
    block_on(async {
        let topic = NewTopic::new("someone-elses", 3, TopicReplication::Fixed(1));
        let made = admin
            .create_topics([&topic], &AdminOptions::new())
            .await
            .unwrap();
        assert!(made[0].is_ok(), "{made:?}");
        let mut conn = connect(&driver).await;
        let foreign = Some(StreamMeta {
            marker: String::new(),
            channels: 3,
        });
        assert_eq!(conn.stream_meta("someone-elses").await.unwrap(), foreign);
        assert!(!conn
            .create_stream("someone-elses", 8, "run-1")
            .await
            .unwrap());
        assert_eq!(conn.stream_meta("someone-elses").await.unwrap(), foreign);
    });
}

#[test]
fn rows_for_a_partition_the_topic_lacks_fail_with_the_reason() {
    let driver = driver(kafka());
    block_on(async {
        let mut conn = connect(&driver).await;
        assert!(conn.create_stream("short", 2, "run-2").await.unwrap());
        for seq in 0..3 {
            conn.queue_row("short", &row(1, seq, b"k"));
            conn.queue_row("short", &row(5, seq, b"k"));
        }
        let mut reasons = Vec::new();
        let outcome = conn
            .produce(&mut |reason| reasons.push(reason.to_string()))
            .await
            .unwrap();
        assert_eq!((outcome.rows, outcome.failed), (6, 3), "{reasons:?}");
        assert_eq!(reasons.len(), 3);
        assert!(reasons[0].contains("Unknown partition"), "{reasons:?}");
        // The next call counts only its own rows.
        conn.queue_row("short", &row(0, 0, b"k"));
        let outcome = conn.produce(&mut |r| panic!("{r}")).await.unwrap();
        assert_eq!((outcome.rows, outcome.failed), (1, 0));
        conn.drop_stream("short").await.unwrap();
    });
}

#[test]
fn refused_rows_leave_no_place_taken_in_the_producers_queue() {
    // A queue of 20 records: the 24 rows librdkafka refused, had it kept
    // hold of them (as it does for an unknown partition when one call
    // names several), would fill it, and the 8 good rows after them
    // would be refused too. Not 10: rows accepted before the topic's
    // metadata came and failed later keep their places until the whole
    // delivery report is destroyed, after every callback in it, so the
    // last 8 may still count for a moment after `produce` returns.
    let driver = driver(&format!("{}?queue.buffering.max.messages=20", kafka()));
    block_on(async {
        let mut conn = connect(&driver).await;
        assert!(conn.create_stream("refusals", 2, "run-3").await.unwrap());
        for _ in 0..3 {
            for seq in 0..8 {
                conn.queue_row("refusals", &row(5, seq, b"k"));
            }
            let outcome = conn.produce(&mut |_| {}).await.unwrap();
            assert_eq!((outcome.rows, outcome.failed), (8, 8));
        }
        for seq in 0..8 {
            conn.queue_row("refusals", &row((seq % 2) as u32, seq, b"k"));
        }
        let outcome = conn.produce(&mut |r| panic!("{r}")).await.unwrap();
        assert_eq!((outcome.rows, outcome.failed), (8, 0));
        conn.drop_stream("refusals").await.unwrap();
    });
}

#[test]
fn a_closed_port_is_a_one_line_connection_error_within_the_timeout() {
    let port = loadcell_testkit::closed_port();
    let url = format!("kafka://127.0.0.1:{port}");
    let started = Instant::now();
    let e = block_on(driver(&url).connect_within(Duration::from_secs(2)))
        .err()
        .expect("nothing listens there");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(e.class, ErrorClass::Connection);
    assert!(e.message.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(!e.message.contains('\n'), "{e}");
}
