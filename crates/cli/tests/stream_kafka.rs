//! The `stream` workload against a real Kafka 3.9 broker (KRaft, one per
//! test binary, shared by these tests: each uses topics of its own):
//! produce and consume on 8 partitions with order and completeness
//! checked, cleanup of loadcell's topics only, a backlog drained, two
//! processes sharing one group's partitions, and one of them killed.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::Value;

fn kafka() -> &'static str {
    &loadcell_testkit::kafka()
        .unwrap_or_else(|e| panic!("cannot start Kafka: {e}"))
        .url
}

fn brokers(url: &str) -> &str {
    url.trim_start_matches("kafka://")
}

/// The broker's topic names.
fn topics(url: &str) -> Vec<String> {
    let client: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers(url))
        .create()
        .unwrap();
    let metadata = client
        .fetch_metadata(None, Duration::from_secs(10))
        .unwrap();
    metadata
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}

/// A topic made by someone else: no loadcell marker.
fn create_foreign_topic(url: &str, name: &str) {
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers(url))
        .create()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let topic = NewTopic::new(name, 2, TopicReplication::Fixed(1));
    let made = runtime
        .block_on(admin.create_topics([&topic], &AdminOptions::new()))
        .unwrap();
    assert!(made[0].is_ok(), "{made:?}");
}

fn spawn_run(dir: &Path, url: &str, out: &str, args: &[&str]) -> Child {
    Command::new(bin())
        .args(["run", "stream", "--target", url, "--out", out])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finished(dir: &Path, child: Child, out: &str) -> Value {
    let o = output_within(child);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = read_json(&dir.join(out));
    assert_valid_result(&r);
    r
}

/// Rows consumed less those Kafka delivered again after a rebalance
/// (at-least-once): each produced row must come exactly once besides.
fn distinct_rows_consumed(r: &Value) -> u64 {
    u(r, "/verification/stream/consumed") - u(r, "/verification/stream/redelivered")
}

fn assert_in_order_and_once(r: &Value) {
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    for field in ["missing", "duplicated", "gaps", "reorders"] {
        assert_eq!(
            u(r, &format!("/verification/stream/{field}")),
            0,
            "{field}: {}",
            r["verification"]
        );
    }
}

#[test]
fn rows_on_8_partitions_are_consumed_in_order_and_cleanup_drops_only_loadcells_topics() {
    let url = kafka();
    let dir = tempfile::tempdir().unwrap();
    let shape = ["--stream", "eight", "--partitions", "8"];
    ok(loadcell(
        dir.path(),
        &[&["prepare", "stream", "--target", url][..], &shape].concat(),
    ));
    let r = run_json(
        dir.path(),
        "stream",
        url,
        &[
            &shape[..],
            &["--mode", "both", "--produce-rate", "20000", "--time", "3s"],
        ]
        .concat(),
    );
    assert_in_order_and_once(&r);
    assert_eq!(
        r["environment"]["server"]["consumer"], "loadcell's own (Kafka protocol)",
        "the result says which consumer ran"
    );
    let produced = u(&r, "/verification/stream/produced");
    assert!(produced > 5_000, "{produced}");
    assert_eq!(
        distinct_rows_consumed(&r),
        produced,
        "{}",
        r["verification"]
    );
    assert_eq!(u(&r, "/verification/expected"), produced);
    assert!(u(&r, "/ops/end_to_end/count") > 0);

    create_foreign_topic(url, "someone-elses");
    let o = loadcell(
        dir.path(),
        &[
            "cleanup",
            "stream",
            "--target",
            url,
            "--stream",
            "someone-elses",
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("was not created by loadcell"),
        "{}",
        stderr(&o)
    );
    ok(loadcell(
        dir.path(),
        &["cleanup", "stream", "--target", url, "--stream", shape[1]],
    ));
    let left = topics(url);
    assert!(
        !left.iter().any(|t| t.starts_with("eight")),
        "the stream's topic and its marker's are gone: {left:?}"
    );
    assert!(left.contains(&"someone-elses".to_string()), "{left:?}");
}

#[test]
fn a_consume_only_run_drains_the_backlog_prepare_loaded() {
    let url = kafka();
    let dir = tempfile::tempdir().unwrap();
    let shape = [
        "--stream",
        "backlog",
        "--partitions",
        "4",
        "--mode",
        "consume",
    ];
    ok(loadcell(
        dir.path(),
        &[
            &["prepare", "stream", "--target", url, "--backlog", "20000"][..],
            &shape,
        ]
        .concat(),
    ));
    // 20,000 rows take well under a second on a quiet machine; CI's
    // other test binaries share the cores, so the run has room.
    let r = run_json(
        dir.path(),
        "stream",
        url,
        &[&shape[..], &["--time", "8s"]].concat(),
    );
    assert_in_order_and_once(&r);
    assert_eq!(distinct_rows_consumed(&r), 20_000, "{}", r["verification"]);
    assert_eq!(u(&r, "/verification/stream/untimed"), 20_000);
    assert_eq!(
        u(&r, "/verification/stream/lag_at_end"),
        0,
        "caught up in the run"
    );
}

#[test]
fn two_processes_in_one_group_share_the_partitions_and_consume_every_row_once() {
    let url = kafka();
    let dir = tempfile::tempdir().unwrap();
    let shape = [
        "--stream",
        "shared",
        "--partitions",
        "8",
        "--group",
        "shared",
        "--consumers",
        "4",
    ];
    ok(loadcell(
        dir.path(),
        &[
            &["prepare", "stream", "--target", url, "--backlog", "20000"][..],
            &shape,
        ]
        .concat(),
    ));
    // Four members each: after the rebalance each member holds one
    // partition, so both processes hold some.
    let both = spawn_run(
        dir.path(),
        url,
        "both.json",
        &[&shape[..], &["--produce-rate", "10000", "--time", "5s"]].concat(),
    );
    let consumer = spawn_run(
        dir.path(),
        url,
        "consumer.json",
        &[&shape[..], &["--mode", "consume", "--time", "5s"]].concat(),
    );
    let (both, consumer) = (
        finished(dir.path(), both, "both.json"),
        finished(dir.path(), consumer, "consumer.json"),
    );
    let consumed = |r: &Value| u(r, "/verification/stream/consumed");
    assert!(
        consumed(&both) > 0 && consumed(&consumer) > 0,
        "both took a share: {} and {}",
        consumed(&both),
        consumed(&consumer)
    );
    assert_eq!(
        consumed(&both) + consumed(&consumer),
        u(&both, "/verification/stream/produced") + 20_000,
        "every row once"
    );
    for r in [&both, &consumer] {
        assert_in_order_and_once(r);
    }
}

#[test]
fn a_consumer_killed_mid_run_leaves_its_partitions_to_the_other_process() {
    // The broker's shortest session: the dead member's partitions move
    // 6 s after its last heartbeat.
    let url = format!("{}?session.timeout.ms=6000", kafka());
    let dir = tempfile::tempdir().unwrap();
    let shape = [
        "--stream",
        "doomed",
        "--partitions",
        "8",
        "--group",
        "doomed",
        "--consumers",
        "4",
    ];
    ok(loadcell(
        dir.path(),
        &[&["prepare", "stream", "--target", url.as_str()][..], &shape].concat(),
    ));
    let mut doomed = spawn_run(
        dir.path(),
        &url,
        "doomed.json",
        &[&shape[..], &["--mode", "consume", "--time", "60s"]].concat(),
    );
    let survivor = spawn_run(
        dir.path(),
        &url,
        "survivor.json",
        &[&shape[..], &["--produce-rate", "5000", "--time", "12s"]].concat(),
    );
    std::thread::sleep(Duration::from_secs(4));
    // SIGKILL: it neither commits what it polled nor leaves the group.
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let r = finished(dir.path(), survivor, "survivor.json");
    assert_eq!(r["verification"]["ok"], true, "{}", r["verification"]);
    for field in ["missing", "gaps", "reorders"] {
        assert_eq!(
            u(&r, &format!("/verification/stream/{field}")),
            0,
            "{field}"
        );
    }
    assert!(u(&r, "/verification/stream/produced") > 10_000);
    // Every row the stream holds was acknowledged by the group: the dead
    // member's partitions went to the survivor's members (or its drain).
    assert!(u(&r, "/verification/stream/consumed") > 0);
}

#[test]
fn cleanup_leaves_a_topic_holding_another_producers_records_unless_forced() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let url = kafka();
    let dir = tempfile::tempdir().unwrap();
    let shape = [
        "--stream",
        "mixed",
        "--partitions",
        "2",
        "--mode",
        "consume",
    ];
    ok(loadcell(
        dir.path(),
        &[
            &["prepare", "stream", "--target", url, "--backlog", "1000"][..],
            &shape,
        ]
        .concat(),
    ));
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers(url))
        .create()
        .unwrap();
    producer
        .send(BaseRecord::to("mixed").key("order").payload("{\"id\":42}"))
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
    let cleanup = ["cleanup", "stream", "--target", url, "--stream", "mixed"];
    let o = loadcell(dir.path(), &cleanup);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("holds 1 row not written by loadcell") && err.contains("--force"),
        "{err}"
    );
    assert!(
        topics(url).contains(&"mixed".to_string()),
        "nothing dropped"
    );
    ok(loadcell(dir.path(), &[&cleanup[..], &["--force"]].concat()));
    assert!(
        !topics(url).iter().any(|t| t.starts_with("mixed")),
        "--force dropped the stream"
    );
}

/// Deletes `partition`'s records below offset `before` (Kafka's
/// DeleteRecords, what `kafka-delete-records.sh` and retention do).
fn delete_records(url: &str, topic: &str, partition: i32, before: i64) {
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers(url))
        .create()
        .unwrap();
    let mut offsets = rdkafka::TopicPartitionList::new();
    offsets
        .add_partition_offset(topic, partition, rdkafka::Offset::Offset(before))
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let done = runtime
        .block_on(admin.delete_records(&offsets, &AdminOptions::new()))
        .unwrap();
    let e = &done.elements()[0];
    assert_eq!(e.error(), Ok(()), "{done:?}");
    assert_eq!(e.offset(), rdkafka::Offset::Offset(before), "the new start");
}

#[test]
fn records_deleted_before_the_group_read_them_are_missing() {
    let url = kafka();
    let dir = tempfile::tempdir().unwrap();
    // Alone, a jump would be a gap, but the group's first row of the
    // partition comes after the deleted ones and sets where it starts;
    // with --group, other processes may share the group. Either way the
    // rows are neither read nor may pass unnoticed.
    for (stream, group) in [
        ("deleted", &[][..]),
        ("deleted-shared", &["--group", "catchup"][..]),
    ] {
        let shape = [
            &["--stream", stream, "--partitions", "4", "--mode", "consume"][..],
            group,
        ]
        .concat();
        ok(loadcell(
            dir.path(),
            &[
                &["prepare", "stream", "--target", url, "--backlog", "20000"][..],
                &shape,
            ]
            .concat(),
        ));
        // About 5,000 rows a partition: the 1,000 oldest of partition 3
        // go, ahead of the group's committed offset 0.
        delete_records(url, stream, 3, 1000);
        let o = loadcell(
            dir.path(),
            &[
                &["run", "stream", "--target", url, "--out", "r.json"][..],
                &shape,
                &["--time", "3s", "--drain-timeout", "20s"],
            ]
            .concat(),
        );
        assert_eq!(o.status.code(), Some(3), "{stream}: {}", stderr(&o));
        assert!(stdout(&o).contains("VERIFICATION FAILED"), "{}", stdout(&o));
        let r = read_json(&dir.path().join("r.json"));
        assert_valid_result(&r);
        let v = &r["verification"];
        assert_eq!(u(&r, "/verification/stream/missing"), 1000, "{v}");
        assert_eq!(u(&r, "/verification/expected"), 20_000, "{v}");
        assert_eq!(u(&r, "/verification/found"), 19_000, "{v}");
        assert_eq!(distinct_rows_consumed(&r), 19_000, "{v}");
        assert!(
            s(&r, "/verification/how").contains(
                "1000 of the missing rows were deleted from the stream before the group read them"
            ),
            "{v}"
        );
        assert!(
            stdout(&o).contains("found 19000 where 20000 were expected"),
            "{}",
            stdout(&o)
        );
    }
}

#[test]
fn records_deleted_ahead_of_a_group_two_processes_share_are_missing_once() {
    let url = kafka();
    let dir = tempfile::tempdir().unwrap();
    let shape = [
        "--stream",
        "deleted-two",
        "--partitions",
        "4",
        "--mode",
        "consume",
        "--group",
        "two",
        "--consumers",
        "2",
    ];
    ok(loadcell(
        dir.path(),
        &[
            &["prepare", "stream", "--target", url, "--backlog", "20000"][..],
            &shape,
        ]
        .concat(),
    ));
    delete_records(url, "deleted-two", 3, 1000);
    let run = |out: &str| {
        Command::new(bin())
            .args(["run", "stream", "--target", url, "--out", out])
            .args(shape)
            .args(["--time", "4s", "--drain-timeout", "20s"])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (run("a.json"), run("b.json"));
    let mut missing = 0;
    let mut consumed = 0;
    for (child, out) in [(a, "a.json"), (b, "b.json")] {
        let o = output_within(child);
        let r = read_json(&dir.path().join(out));
        assert_valid_result(&r);
        let v = &r["verification"];
        let m = u(&r, "/verification/stream/missing");
        // The process whose member went past the deleted rows counts
        // them; the other saw its group's offset past them already.
        if m > 0 {
            assert_eq!(m, 1000, "{v}");
            assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
            assert!(
                s(&r, "/verification/how").contains("1000 of the missing rows were deleted"),
                "{v}"
            );
        } else {
            assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        }
        missing += m;
        consumed += distinct_rows_consumed(&r);
    }
    assert_eq!(missing, 1000, "counted once between the two processes");
    assert_eq!(consumed, 19_000, "every row left read once");
}
