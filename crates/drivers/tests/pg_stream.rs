//! PostgreSQL logical replication as a change stream, against a real
//! PostgreSQL started by loadcell-testkit (`wal_level=logical`, a user
//! with REPLICATION, SCRAM-SHA-256 on TCP: every replication connection
//! here authenticates with SCRAM).

#![allow(async_fn_in_trait)]

use std::future::Future;
use std::time::{Duration, Instant};

use loadcell_core::sql::SqlConn;
use loadcell_core::stream::{Channels, StartFrom, StreamConn, StreamRow};
use loadcell_core::{Driver, DriverError, Target};
use loadcell_drivers::postgres::stream::{PgStreamConn, PgStreamDriver};
use loadcell_drivers::postgres::{PostgresConn, PostgresDriver};
use loadcell_testkit::TestServer;

const CHANNELS: u32 = 8;
const ROWS: u64 = 5_000;
const PER_REQUEST: u64 = 100;

/// Driver futures are not `Send`: run them as the engine does, on a
/// current-thread runtime inside a `LocalSet`.
fn run<F: Future>(f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio::task::LocalSet::new().block_on(&runtime, f)
}

fn start(settings: &[(&str, &str)]) -> TestServer {
    loadcell_testkit::postgres_logical(settings)
        .unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"))
}

fn target(url: &str) -> Target {
    Target::parse(url).expect("target")
}

async fn stream_conn(driver: &PgStreamDriver) -> PgStreamConn {
    driver.connect().await.expect("connect")
}

/// A plain SQL session, to look at the server's own catalog.
async fn sql_conn(url: &str) -> PostgresConn {
    let driver = PostgresDriver::from_target(&target(url)).expect("driver");
    driver.connect().await.expect("connect")
}

/// The row produced as `seq` of `channel`: its keys and payload written
/// into `text` (key lengths vary, the payload makes ~220 bytes in all).
fn row_text(channel: u32, seq: u64) -> String {
    let key = format!("user{:05}", (seq * 7 + u64::from(channel)) % 10_000);
    let payload = "p".repeat(150 + (seq % 40) as usize);
    format!("{key}|2026-11-24|{}|order-{seq}|{payload}", channel % 3)
}

fn row_of(channel: u32, seq: u64, text: &str) -> StreamRow<'_> {
    let mut parts = text.split('|').map(str::as_bytes);
    let mut next = || parts.next().unwrap();
    StreamRow {
        channel,
        seq,
        produced_ns: 1_790_000_000_000_000_000 + (seq as i64) * 1_000,
        origin: 0xdead_beef_0000_0000 | u64::from(channel),
        keys: [next(), next(), next(), next()],
        payload: next(),
    }
}

async fn produce(conn: &mut PgStreamConn, stream: &str, rows: impl Iterator<Item = (u32, u64)>) {
    let mut rows = rows.peekable();
    while rows.peek().is_some() {
        let mut queued = 0;
        for (channel, seq) in rows.by_ref().take(PER_REQUEST as usize) {
            let text = row_text(channel, seq);
            conn.queue_row(stream, &row_of(channel, seq, &text));
            queued += 1;
        }
        let out = conn
            .produce(&mut |e| panic!("produce failed: {e}"))
            .await
            .unwrap();
        assert_eq!((out.rows, out.failed), (queued, 0));
    }
}

/// Polls `conn` until `want` rows came, checking each is the next of its
/// channel and equal to what was produced; `next` is where each channel
/// is at.
async fn consume(conn: &mut PgStreamConn, want: u64, next: &mut [u64]) -> u64 {
    let give_up = Instant::now() + Duration::from_secs(60);
    let mut got = 0;
    let mut bytes = 0;
    while got < want {
        assert!(Instant::now() < give_up, "only {got} of {want} rows came");
        let out = conn
            .poll(256, Duration::from_millis(500), &mut |row| {
                let channel = row.channel as usize;
                assert_eq!(row.seq, next[channel], "channel {channel} out of order");
                let text = row_text(row.channel, row.seq);
                assert_eq!(row, row_of(row.channel, row.seq, &text));
                next[channel] += 1;
            })
            .await
            .unwrap();
        assert_eq!(out.undecodable, 0);
        got += out.rows;
        bytes += out.bytes;
    }
    assert_eq!(got, want, "more rows than produced");
    bytes
}

/// The slots loadcell named, with their confirmed position (bytes).
async fn loadcell_slots(sql: &mut PostgresConn) -> Vec<(String, i64)> {
    sql.query_strings(
        "SELECT slot_name || '=' || (confirmed_flush_lsn - '0/0')::bigint \
         FROM pg_replication_slots WHERE slot_name LIKE 'loadcell%' ORDER BY slot_name",
    )
    .await
    .unwrap()
    .into_iter()
    .map(|s| {
        let (name, lsn) = s.split_once('=').unwrap();
        (name.to_string(), lsn.parse().unwrap())
    })
    .collect()
}

fn one_line(e: &DriverError, needles: &[&str]) {
    assert!(!e.message.contains('\n'), "{e}");
    for needle in needles {
        assert!(e.message.contains(needle), "no {needle:?} in: {e}");
    }
}

#[test]
fn rows_round_trip_in_order_wal_is_released_and_no_slot_is_left() {
    // A consumer idle for longer than this must answer the keepalives.
    let server = start(&[("wal_sender_timeout", "2s")]);
    run(async {
        let driver = PgStreamDriver::from_target(&target(server.url())).unwrap();
        let mut admin = stream_conn(&driver).await;
        let mut sql = sql_conn(server.url()).await;
        let stream = "lc_orders";
        // TCP logins there are SCRAM's (pg_hba.conf's host lines), the
        // replication connections below included.
        assert_eq!(
            sql.query_strings("SHOW password_encryption").await.unwrap(),
            ["scram-sha-256"]
        );

        assert!(admin
            .create_stream(stream, CHANNELS, "loadcell:t1")
            .await
            .unwrap());
        assert!(!admin
            .create_stream(stream, CHANNELS, "loadcell:t1")
            .await
            .unwrap());
        let meta = admin.stream_meta(stream).await.unwrap().unwrap();
        assert_eq!(
            (meta.marker.as_str(), meta.channels),
            ("loadcell:t1", CHANNELS)
        );
        assert!(admin.stream_meta("lc_other").await.unwrap().is_none());

        assert!(admin
            .create_group(stream, "g1", StartFrom::Beginning)
            .await
            .unwrap());
        assert!(!admin
            .create_group(stream, "g1", StartFrom::Beginning)
            .await
            .unwrap());
        let before = loadcell_slots(&mut sql).await;
        assert_eq!(before.len(), CHANNELS as usize, "{before:?}");

        let mut producer = stream_conn(&driver).await;
        let started = Instant::now();
        produce(
            &mut producer,
            stream,
            (0..ROWS).map(|i| ((i % u64::from(CHANNELS)) as u32, i / u64::from(CHANNELS))),
        )
        .await;
        let produce_secs = started.elapsed().as_secs_f64();
        let per_channel = ROWS / u64::from(CHANNELS);
        for p in admin.positions(stream, "g1").await.unwrap() {
            assert_eq!((p.end, p.committed), (per_channel, 0), "{p:?}");
        }

        // A consumer per channel, all at once.
        let mut consumers = Vec::new();
        for channel in 0..CHANNELS {
            let mut conn = stream_conn(&driver).await;
            conn.subscribe(
                stream,
                "g1",
                &format!("c{channel}"),
                Channels::Assigned(&[channel]),
            )
            .await
            .unwrap();
            consumers.push(conn);
        }
        let started = Instant::now();
        let tasks: Vec<_> = consumers
            .into_iter()
            .map(|mut conn| {
                tokio::task::spawn_local(async move {
                    let mut next = vec![0; CHANNELS as usize];
                    let bytes = consume(&mut conn, per_channel, &mut next).await;
                    // A commit acknowledges whole transactions: the last
                    // one's Commit message may come after its rows were
                    // all read, so poll for it before acknowledging.
                    let trailing = conn
                        .poll(256, Duration::from_millis(200), &mut |row| {
                            panic!("more rows than produced: {row:?}")
                        })
                        .await
                        .unwrap();
                    assert_eq!(trailing.rows, 0);
                    conn.commit().await.unwrap();
                    (conn, bytes)
                })
            })
            .collect();
        let mut consumers = Vec::new();
        let mut bytes = 0;
        for task in tasks {
            let (conn, b) = task.await.unwrap();
            consumers.push(conn);
            bytes += b;
        }
        let consume_secs = started.elapsed().as_secs_f64();
        eprintln!(
            "{ROWS} rows over {CHANNELS} channels: produced at {:.0} rows/s ({PER_REQUEST} per request, one connection), consumed at {:.0} rows/s ({:.0} bytes/row read)",
            ROWS as f64 / produce_secs,
            ROWS as f64 / consume_secs,
            bytes as f64 / ROWS as f64
        );

        // Idle past wal_sender_timeout, polling: the keepalives are
        // answered and the connection lives on.
        let idle = Instant::now();
        while idle.elapsed() < Duration::from_secs(5) {
            let out = consumers[0]
                .poll(256, Duration::from_secs(1), &mut |row| {
                    panic!("no row was produced: {row:?}")
                })
                .await
                .expect("still connected after idling past wal_sender_timeout");
            assert_eq!(out.rows, 0);
        }
        produce(&mut producer, stream, std::iter::once((0, per_channel))).await;
        let mut next = vec![per_channel; CHANNELS as usize];
        consume(&mut consumers[0], 1, &mut next).await;
        consumers[0].commit().await.unwrap();

        // The acknowledgements move every slot's confirmed position, so
        // the server can release the WAL before it.
        let give_up = Instant::now() + Duration::from_secs(10);
        let after = loop {
            let after = loadcell_slots(&mut sql).await;
            let advanced = after.iter().zip(&before).all(|(a, b)| a.1 > b.1);
            if advanced || Instant::now() > give_up {
                break after;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        for (a, b) in after.iter().zip(&before) {
            assert!(
                a.1 > b.1,
                "{} confirmed_flush_lsn did not advance: {b:?} -> {a:?}",
                a.0
            );
        }
        eprintln!("confirmed_flush_lsn before {before:?}, after {after:?}");
        // The server applies a status update when its walsender reads it
        // (no answer comes): the last one may take a moment.
        let want: Vec<_> = (0..CHANNELS)
            .map(|c| {
                (
                    per_channel + u64::from(c == 0),
                    per_channel + u64::from(c == 0),
                )
            })
            .collect();
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            let positions = admin.positions(stream, "g1").await.unwrap();
            let got: Vec<_> = positions.iter().map(|p| (p.end, p.committed)).collect();
            if got == want {
                break;
            }
            assert!(Instant::now() < give_up, "positions {positions:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // Dropped while its consumers still hold the slots.
        admin.drop_group(stream, "g1").await.unwrap();
        assert_eq!(loadcell_slots(&mut sql).await, vec![]);
        admin.drop_group(stream, "g1").await.unwrap();
        drop(consumers);
        admin.drop_stream(stream).await.unwrap();
        assert!(admin.stream_meta(stream).await.unwrap().is_none());
        let publications = sql
            .query_i64("SELECT count(*) FROM pg_publication")
            .await
            .unwrap();
        assert_eq!(publications, Some(0));
    });
}

#[test]
fn a_failed_run_leaves_a_slot_that_cleanup_drops_and_bad_input_is_refused() {
    let server = start(&[]);
    run(async {
        let driver = PgStreamDriver::from_target(&target(server.url())).unwrap();
        let mut admin = stream_conn(&driver).await;
        let mut sql = sql_conn(server.url()).await;
        let stream = "lc_events";
        admin.create_stream(stream, 2, "loadcell:t2").await.unwrap();
        admin
            .create_stream("lc_events2", 1, "loadcell:t3")
            .await
            .unwrap();
        let names = |slots: Vec<(String, i64)>| slots.into_iter().map(|s| s.0).collect::<Vec<_>>();
        admin
            .create_group(stream, "g", StartFrom::End)
            .await
            .unwrap();
        let group_slots = names(loadcell_slots(&mut sql).await);
        assert_eq!(group_slots.len(), 2, "{group_slots:?}");
        admin
            .create_group("lc_events2", "g", StartFrom::End)
            .await
            .unwrap();
        let other_stream_slots: Vec<String> = names(loadcell_slots(&mut sql).await)
            .into_iter()
            .filter(|s| !group_slots.contains(s))
            .collect();
        admin
            .create_group(stream, "other", StartFrom::End)
            .await
            .unwrap();

        // A run that dies mid-way: its consumer's connections just go.
        let mut consumer = stream_conn(&driver).await;
        consumer
            .subscribe(stream, "g", "c", Channels::Assigned(&[0, 1]))
            .await
            .unwrap();
        let mut producer = stream_conn(&driver).await;
        produce(&mut producer, stream, [(0, 0), (1, 0), (1, 1)].into_iter()).await;
        let mut next = vec![0; 2];
        consume(&mut consumer, 3, &mut next).await;
        drop(consumer);
        assert_eq!(loadcell_slots(&mut sql).await.len(), 5);

        // Cleanup: the group's slots go, then the stream's, and another
        // stream's stay.
        admin.drop_group(stream, "g").await.unwrap();
        let left = names(loadcell_slots(&mut sql).await);
        assert_eq!(left.len(), 3, "{left:?}");
        assert!(left.iter().all(|s| !group_slots.contains(s)), "{left:?}");
        admin.drop_stream(stream).await.unwrap();
        assert_eq!(names(loadcell_slots(&mut sql).await), other_stream_slots);
        admin.drop_stream("lc_events2").await.unwrap();
        assert_eq!(loadcell_slots(&mut sql).await, vec![]);

        // Bad input, each one line before any load.
        admin.create_stream(stream, 2, "loadcell:t4").await.unwrap();
        // A request with a row for a channel the stream lacks stores none
        // of its rows; the next request (its statements prepared afresh)
        // stores all.
        for (channel, seq) in [(0, 0), (5, 0)] {
            let text = row_text(channel, seq);
            producer.queue_row(stream, &row_of(channel, seq, &text));
        }
        let mut reasons = Vec::new();
        let out = producer
            .produce(&mut |e| reasons.push(e.to_string()))
            .await
            .unwrap();
        assert_eq!((out.rows, out.failed), (2, 2));
        assert!(reasons[0].contains("lc_events_5"), "{reasons:?}");
        produce(&mut producer, stream, [(0, 0), (1, 0)].into_iter()).await;
        let tables = admin.positions(stream, "none").await.unwrap();
        assert_eq!(tables.iter().map(|p| p.end).collect::<Vec<_>>(), [1, 1]);
        let e = admin
            .create_group(stream, "late", StartFrom::Beginning)
            .await
            .unwrap_err();
        one_line(
            &e,
            &[
                "already hold rows",
                "create the group before loading the backlog",
            ],
        );
        sql.simple(&format!("DROP PUBLICATION {stream}_1_pub"))
            .await
            .unwrap();
        let e = admin
            .create_group(stream, "g", StartFrom::End)
            .await
            .unwrap_err();
        one_line(&e, &["publication lc_events_1_pub does not exist"]);
        let e = stream_conn(&driver)
            .await
            .subscribe(stream, "g", "c", Channels::Assigned(&[1]))
            .await
            .unwrap_err();
        one_line(&e, &["publication lc_events_1_pub does not exist"]);
        let e = stream_conn(&driver)
            .await
            .subscribe(stream, "nogroup", "c", Channels::Assigned(&[0]))
            .await
            .unwrap_err();
        one_line(&e, &["has no replication slot", "create the group first"]);
        for (channels, needle) in [
            (Channels::Assigned(&[]), "at least one channel"),
            (Channels::Group, "no coordinator"),
        ] {
            let e = stream_conn(&driver)
                .await
                .subscribe(stream, "g", "c", channels)
                .await
                .unwrap_err();
            one_line(&e, &[needle]);
        }
        let e = admin.create_stream("Bad-Name", 1, "m").await.unwrap_err();
        one_line(&e, &["lower-case"]);
        admin.drop_stream(stream).await.unwrap();
    });
}

#[test]
fn a_server_without_logical_wal_or_slots_enough_is_refused_in_one_line() {
    let replica = start(&[("wal_level", "replica")]);
    let few_slots = start(&[("max_replication_slots", "4")]);
    run(async {
        let driver = PgStreamDriver::from_target(&target(replica.url())).unwrap();
        let e = stream_conn(&driver)
            .await
            .create_stream("lc_s", 2, "m")
            .await
            .unwrap_err();
        one_line(
            &e,
            &[
                "wal_level = replica",
                "ALTER SYSTEM SET wal_level = logical",
                "restart",
            ],
        );

        let driver = PgStreamDriver::from_target(&target(few_slots.url())).unwrap();
        let mut admin = stream_conn(&driver).await;
        admin.create_stream("lc_s", 8, "m").await.unwrap();
        let e = admin
            .create_group("lc_s", "g", StartFrom::End)
            .await
            .unwrap_err();
        one_line(
            &e,
            &["8 more replication slots", "max_replication_slots = 4"],
        );
        let mut sql = sql_conn(few_slots.url()).await;
        assert_eq!(loadcell_slots(&mut sql).await, vec![]);
    });
}

#[test]
fn postgres_urls_go_to_the_driver_of_the_workloads_family() {
    use loadcell_core::Family;
    let stream = loadcell_drivers::find("postgres", &[Family::STREAM]).unwrap();
    assert_eq!(
        (stream.name, stream.family),
        ("postgres-stream", Family::STREAM)
    );
    let sql = loadcell_drivers::find("postgresql", &[Family::SQL]).unwrap();
    assert_eq!((sql.name, sql.family), ("postgres", Family::SQL));
}
