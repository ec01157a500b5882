//! Redis Streams (the change-stream family on the Redis driver) against a
//! real Redis from loadcell-testkit.

mod local_runtime;

use std::time::Duration;

use loadcell_core::stream::{Channels, StartFrom, StreamConn, StreamRow};
use loadcell_core::{Driver, Target};
use loadcell_drivers::redis::{RedisConn, RedisDriver};
use local_runtime::block_on as run;

const STREAM: &str = "s";
const CHANNELS: u32 = 8;

async fn connect(url: &str) -> RedisConn {
    let target = Target::parse(url).expect("valid URL");
    let driver = RedisDriver::from_target(&target).expect("valid redis target");
    driver
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

/// Rows `0..per_channel` of every channel, produced in one request.
async fn produce(conn: &mut RedisConn, per_channel: u64) {
    for seq in 0..per_channel {
        for channel in 0..CHANNELS {
            let row = StreamRow {
                channel,
                seq,
                produced_ns: 1,
                origin: 42,
                keys: [b"k0", b"k1", b"k2", b"k3"],
                payload: b"payload",
            };
            conn.queue_row(STREAM, &row);
        }
    }
    let outcome = conn
        .produce(&mut |reason| panic!("row failed: {reason}"))
        .await
        .unwrap();
    assert_eq!(
        (outcome.rows, outcome.failed),
        (per_channel * u64::from(CHANNELS), 0)
    );
}

/// Polls until a poll brings nothing: every (channel, seq) seen, in order,
/// and whether a poll said its rows were reassigned.
async fn drain(conn: &mut RedisConn, commit: bool) -> (Vec<(u32, u64)>, bool) {
    let mut seen = Vec::new();
    let mut reassigned = false;
    loop {
        let outcome = conn
            .poll(100, Duration::from_millis(50), &mut |row| {
                seen.push((row.channel, row.seq))
            })
            .await
            .unwrap();
        assert_eq!(outcome.undecodable, 0);
        reassigned |= outcome.reassigned;
        if outcome.rows == 0 {
            return (seen, reassigned);
        }
        if commit {
            conn.commit().await.unwrap();
        }
    }
}

#[test]
fn rows_go_round_trip_in_order_on_8_channels_and_commits_move_the_group() {
    let server = loadcell_testkit::redis().expect("redis");
    let url = server.url.clone();
    run(async move {
        let mut conn = connect(&url).await;
        assert!(conn
            .create_stream(STREAM, CHANNELS, "loadcell:x")
            .await
            .unwrap());
        assert!(!conn
            .create_stream(STREAM, CHANNELS, "loadcell:y")
            .await
            .unwrap());
        let meta = conn.stream_meta(STREAM).await.unwrap().unwrap();
        assert_eq!((meta.marker.as_str(), meta.channels), ("loadcell:x", 8));
        assert!(conn
            .create_group(STREAM, "g", StartFrom::Beginning)
            .await
            .unwrap());
        assert!(!conn
            .create_group(STREAM, "g", StartFrom::Beginning)
            .await
            .unwrap());
        produce(&mut conn, 50).await;

        let mut consumer = connect(&url).await;
        consumer
            .subscribe(STREAM, "g", "c1", Channels::Group)
            .await
            .unwrap();
        let (seen, reassigned) = drain(&mut consumer, true).await;
        assert!(!reassigned);
        assert_eq!(seen.len(), 400);
        for channel in 0..CHANNELS {
            let seqs: Vec<u64> = seen
                .iter()
                .filter(|(c, _)| *c == channel)
                .map(|(_, s)| *s)
                .collect();
            assert_eq!(seqs, (0..50).collect::<Vec<_>>(), "channel {channel}");
        }
        let positions = conn.positions(STREAM, "g").await.unwrap();
        assert_eq!(positions.len(), 8);
        assert!(positions.iter().all(|p| p.end == 50 && p.committed == 50));

        // Polled but not committed: the group's position stays.
        produce(&mut conn, 5).await;
        let (seen, _) = drain(&mut consumer, false).await;
        assert_eq!(seen.len(), 40);
        let positions = conn.positions(STREAM, "g").await.unwrap();
        assert!(positions.iter().all(|p| p.end == 55 && p.committed == 50));
        consumer.commit().await.unwrap();
        let positions = conn.positions(STREAM, "g").await.unwrap();
        assert!(positions.iter().all(|p| p.committed == 55));

        conn.drop_group(STREAM, "g").await.unwrap();
        conn.drop_stream(STREAM).await.unwrap();
        assert_eq!(conn.stream_meta(STREAM).await.unwrap(), None);
    });
}

#[test]
fn a_consumer_that_stopped_leaves_its_rows_to_another() {
    let server = loadcell_testkit::redis().expect("redis");
    let url = format!("{}?claim_idle=200ms", server.url);
    run(async move {
        let mut conn = connect(&url).await;
        conn.create_stream(STREAM, CHANNELS, "loadcell:x")
            .await
            .unwrap();
        conn.create_group(STREAM, "g", StartFrom::Beginning)
            .await
            .unwrap();
        produce(&mut conn, 10).await;
        // The first consumer reads channels 0..4 and dies without acknowledging.
        let mut dead = connect(&url).await;
        dead.subscribe(STREAM, "g", "dead", Channels::Assigned(&[0, 1, 2, 3]))
            .await
            .unwrap();
        let (seen, _) = drain(&mut dead, false).await;
        assert_eq!(seen.len(), 40);
        drop(dead);

        let mut other = connect(&url).await;
        other
            .subscribe(STREAM, "g", "other", Channels::Group)
            .await
            .unwrap();
        let (fresh, reassigned) = drain(&mut other, true).await;
        assert_eq!(fresh.len(), 40, "channels 4..8, never delivered");
        assert!(!reassigned);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (claimed, reassigned) = drain(&mut other, true).await;
        assert!(reassigned);
        let mut claimed = claimed;
        claimed.sort();
        let expected: Vec<(u32, u64)> = (0..4).flat_map(|c| (0..10).map(move |s| (c, s))).collect();
        assert_eq!(claimed, expected);
        let positions = conn.positions(STREAM, "g").await.unwrap();
        assert!(
            positions.iter().all(|p| p.end == 10 && p.committed == 10),
            "{positions:?}"
        );
    });
}

#[test]
fn entries_deleted_before_the_group_read_them_are_owed_and_vanish_once_it_is_past() {
    let server = loadcell_testkit::redis().expect("redis");
    let url = server.url.clone();
    run(async move {
        let mut conn = connect(&url).await;
        conn.create_stream(STREAM, CHANNELS, "loadcell:x")
            .await
            .unwrap();
        conn.create_group(STREAM, "g", StartFrom::Beginning)
            .await
            .unwrap();
        produce(&mut conn, 50).await;
        // Entries 11..15 of channel 3, deleted before any was delivered:
        // Redis's own entries-read and lag for the group go empty.
        let deleted = loadcell_testkit::redis_cli(
            server.port,
            &[
                "EVAL",
                "local e = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 15) \
                 local n = 0 for i = 11, 15 do n = n + redis.call('XDEL', KEYS[1], e[i][1]) end \
                 return n",
                "1",
                "s:3",
            ],
        )
        .unwrap();
        assert_eq!(deleted.trim(), "5");
        let before = conn.positions(STREAM, "g").await.unwrap();
        assert!(
            before
                .iter()
                .all(|p| (p.end, p.committed, p.vanished) == (50, 0, 0)),
            "owed, and not yet known to be gone: {before:?}"
        );

        let mut consumer = connect(&url).await;
        consumer
            .subscribe(STREAM, "g", "c1", Channels::Group)
            .await
            .unwrap();
        let (seen, _) = drain(&mut consumer, true).await;
        assert_eq!(seen.len(), 395);
        let after = conn.positions(STREAM, "g").await.unwrap();
        for p in &after {
            let expected = if p.channel == 3 {
                (50, 45, 5)
            } else {
                (50, 50, 0)
            };
            assert_eq!((p.end, p.committed, p.vanished), expected, "{p:?}");
        }
    });
}
