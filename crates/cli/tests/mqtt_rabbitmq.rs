//! `mqtt-pubsub` against RabbitMQ 3.10's MQTT plugin: one node for the
//! whole binary (it takes about ten seconds to start), each test on topics
//! of its own. RabbitMQ speaks MQTT 3.1.1 only, takes QoS 2 at QoS 1, and
//! counts its traffic on its Prometheus page rather than `$SYS`.

mod common;

use common::*;
use loadcell_testkit::rabbitmq;
use serde_json::Value;

fn broker() -> &'static str {
    &rabbitmq().expect("rabbitmq starts").url
}

fn pubsub(dir: &std::path::Path, topic: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--topic", topic, "--warmup", "0s"];
    args.extend(extra);
    run_json(dir, "mqtt-pubsub", broker(), &args)
}

#[test]
fn delivery_is_exact_and_the_brokers_counters_are_sampled() {
    let dir = tempfile::tempdir().unwrap();
    let r = pubsub(
        dir.path(),
        "exact/%i/telemetry",
        &[
            "--publishers",
            "4",
            "--subscribers",
            "2",
            "--rate",
            "400",
            "--time",
            "2s",
            "--report-interval",
            "500ms",
        ],
    );
    let v = &r["verification"];
    assert!(v["ok"].as_bool().unwrap(), "{v:#}");
    let m = &v["mqtt"];
    let published = u(m, "/published");
    assert!(published >= 700, "{m:#}");
    assert_eq!(u(m, "/expected"), 2 * published, "{m:#}");
    assert_eq!(u(m, "/received"), 2 * published, "{m:#}");
    assert_eq!(u(m, "/missing") + u(m, "/duplicates"), 0, "{m:#}");
    assert_eq!(s(&r, "/environment/server/product"), "RabbitMQ");
    assert!(
        s(&r, "/environment/server/version").starts_with("3."),
        "{:#}",
        r["environment"]["server"]
    );
    assert_server_counter(&r, "rabbitmq_messages_received");
    assert_server_counter(&r, "rabbitmq_messages_delivered");
}

/// RabbitMQ answers a QoS 2 PUBLISH with PUBACK and grants a QoS 2
/// subscription QoS 1: every message still arrives, and the result says
/// how each was taken.
#[test]
fn qos_2_is_taken_at_qos_1_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let r = pubsub(
        dir.path(),
        "downgraded/%i",
        &[
            "--qos",
            "2",
            "--publishers",
            "2",
            "--subscribers",
            "1",
            "--rate",
            "200",
            "--time",
            "1s",
        ],
    );
    let v = &r["verification"];
    let m = &v["mqtt"];
    assert!(v["ok"].as_bool().unwrap(), "{v:#}");
    let published = u(m, "/published");
    assert!(published >= 150, "{m:#}");
    assert_eq!(u(m, "/downgraded"), published, "{m:#}");
    assert_eq!(u(m, "/received"), published, "{m:#}");
    let how = s(v, "/how");
    assert!(how.contains("granted a lower QoS"), "{how}");
    let errors = r["error_samples"].to_string();
    assert!(errors.contains("qos downgraded"), "{errors}");
}

/// Subscribers away for a second come back to the sessions RabbitMQ kept
/// and get what was queued for them.
#[test]
fn persistent_subscribers_get_their_queue_back() {
    let dir = tempfile::tempdir().unwrap();
    let r = pubsub(
        dir.path(),
        "away/%i",
        &[
            "--publishers",
            "2",
            "--subscribers",
            "2",
            "--rate",
            "300",
            "--time",
            "3s",
            "--subscriber-outage",
            "1s:1s",
            "--session",
            "persistent",
            "--drain-timeout",
            "10s",
        ],
    );
    let m = &r["verification"]["mqtt"];
    assert!(r["verification"]["ok"].as_bool().unwrap(), "{m:#}");
    assert_eq!(u(m, "/missing"), 0, "{m:#}");
    assert_eq!(u(m, "/received"), 2 * u(m, "/published"), "{m:#}");
}

/// MQTT 5 (which 3.10 does not speak) and a wrong password each stop the
/// run before any load, in one line, with no secret in it.
#[test]
fn mqtt_5_and_a_wrong_password_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let url = broker();
    let v5 = match url.split_once('?') {
        Some((base, query)) => format!("{base}?version=5&{query}"),
        None => format!("{url}?version=5"),
    };
    refused_in_one_line(
        dir.path(),
        &["run", "mqtt-pubsub", "--target", &v5, "--time", "1s"],
        &["MQTT 5.0"],
    );
    let wrong = url.replacen(":lcpass@", ":guess@", 1);
    assert_ne!(wrong, url);
    refused_in_one_line(
        dir.path(),
        &["run", "mqtt-pubsub", "--target", &wrong, "--time", "1s"],
        &["bad user name or password"],
    );
    let o = loadcell(
        dir.path(),
        &["run", "mqtt-pubsub", "--target", &wrong, "--time", "1s"],
    );
    assert!(!stderr(&o).contains("guess"), "no secret printed");
}
