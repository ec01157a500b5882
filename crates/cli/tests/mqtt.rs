//! `mqtt-pubsub` and `mqtt-conns` against a real Mosquitto (one per test,
//! from loadcell-testkit): delivery proven message by message, a shared
//! group, a broker that drops messages caught, the listener's connection
//! limit found, and bad options refused before any load.

mod common;

use common::*;
use loadcell_testkit::{mosquitto, mosquitto_with, Mosquitto};
use serde_json::Value;

fn op<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["ops"]
        .get(name)
        .unwrap_or_else(|| panic!("no operation {name}: {:#}", r["ops"]))
}

#[test]
fn telemetry_reaches_every_subscriber_and_is_timed_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let server = mosquitto().expect("mosquitto starts");
    let r = run_json(
        dir.path(),
        "mqtt-pubsub",
        server.url(),
        &[
            "--topic",
            "vehicles/%i/telemetry",
            "--publishers",
            "4",
            "--subscribers",
            "2",
            "--rate",
            "800",
            "--time",
            "2s",
            "--warmup",
            "500ms",
            "--report-interval",
            "500ms",
        ],
    );
    let v = &r["verification"];
    assert!(v["ok"].as_bool().unwrap(), "{v:#}");
    let m = &v["mqtt"];
    let published = u(m, "/published");
    // 800/s for 2.5 s, give or take the schedule's first and last.
    assert!((1800..=2100).contains(&published), "{m:#}");
    assert_eq!(u(m, "/expected"), 2 * published, "{m:#}");
    assert_eq!(u(m, "/received"), 2 * published, "{m:#}");
    assert_eq!(
        u(m, "/missing") + u(m, "/duplicates") + u(m, "/reorders"),
        0
    );
    assert_eq!(s(m, "/subscribers/0/filter"), "vehicles/+/telemetry");
    assert_eq!(u(v, "/found"), u(v, "/expected"));
    // Measured after the warm-up: about 1,600 publishes, each delivered
    // twice and timed end to end.
    let publishes = u(op(&r, "publish"), "/count");
    assert!((1500..=1700).contains(&publishes), "{publishes}");
    let e2e = u(op(&r, "end_to_end"), "/count");
    assert!(e2e >= 2 * publishes - 100, "{e2e} of {publishes}");
    assert!(f(op(&r, "end_to_end"), "/latency_ms/p50") < 50.0);
    assert_eq!(s(&r, "/environment/server/product"), "mosquitto");
    assert_server_counter(&r, "mosquitto_publish_received");
}

#[test]
fn a_shared_group_over_mqtt_5_gets_each_message_once_at_qos_2() {
    let dir = tempfile::tempdir().unwrap();
    let server = mosquitto().expect("mosquitto starts");
    let url = format!("{}?version=5", server.url());
    let r = run_json(
        dir.path(),
        "mqtt-pubsub",
        &url,
        &[
            "--publishers",
            "3",
            "--subscribers",
            "3",
            "--shared",
            "backend",
            "--qos",
            "2",
            "--rate",
            "600",
            "--time",
            "1s",
            "--warmup",
            "0s",
        ],
    );
    let m = &r["verification"]["mqtt"];
    assert!(r["verification"]["ok"].as_bool().unwrap(), "{m:#}");
    let published = u(m, "/published");
    assert!(published >= 500, "{m:#}");
    // The group as a whole is owed each message once.
    assert_eq!(u(m, "/expected"), published);
    assert_eq!(u(m, "/received"), published);
    assert_eq!(u(m, "/duplicates"), 0);
    assert_eq!(s(m, "/shared_group"), "backend");
    assert_eq!(s(m, "/subscribers/0/filter"), "$share/backend/loadcell/+");
    assert_eq!(u(m, "/qos"), 2);
}

/// Command fan-out: each of 50 vehicles subscribes to its own topic and is
/// owed exactly the messages addressed to it, dealt out evenly; nothing
/// reaches a vehicle it was not for.
#[test]
fn fanout_owes_each_vehicle_its_own_commands() {
    let dir = tempfile::tempdir().unwrap();
    let server = mosquitto().expect("mosquitto starts");
    let o = ok(loadcell(
        dir.path(),
        &[
            "run",
            "mqtt-pubsub",
            "--target",
            server.url(),
            "--out",
            "fanout.json",
            "--topic",
            "vehicles/%i/commands",
            "--fanout",
            "--publishers",
            "2",
            "--subscribers",
            "50",
            "--rate",
            "1000",
            "--time",
            "2s",
            "--warmup",
            "0s",
        ],
    ));
    let r = read_json(&dir.path().join("fanout.json"));
    assert_valid_result(&r);
    let v = &r["verification"];
    assert!(v["ok"].as_bool().unwrap(), "{v:#}");
    let m = &v["mqtt"];
    let published = u(m, "/published");
    assert!(published >= 1800, "{m:#}");
    assert_eq!(u(m, "/expected"), published, "each message owed once");
    assert_eq!(u(m, "/received"), published);
    assert_eq!(u(m, "/misdelivered") + u(m, "/duplicates"), 0);
    let vehicles = m["subscribers"].as_array().unwrap();
    assert_eq!(vehicles.len(), 50);
    for (i, vehicle) in vehicles.iter().enumerate() {
        assert_eq!(s(vehicle, "/filter"), format!("vehicles/{i}/commands"));
        assert_eq!(u(vehicle, "/received"), u(vehicle, "/expected"));
        // Each publisher deals to every other vehicle in turn; the two
        // publishers' counts differ by a few messages at most.
        let share = published as f64 / 50.0;
        let owed = u(vehicle, "/expected") as f64;
        assert!(
            (owed - share).abs() <= share * 0.1 + 2.0,
            "{vehicle} of {share}"
        );
    }
    assert_eq!(
        s(&r, "/config/workload_options/filter"),
        "vehicles/%i/commands"
    );
    // The summary and the HTML report list the vehicles, those missing
    // most first.
    let text = stdout(&o);
    assert!(text.contains("MQTT delivery (QoS 1): published"), "{text}");
    assert!(text.contains("vehicles/0/commands"), "{text}");
    assert!(
        text.contains("… 38 more subscribers, none missing a message"),
        "{text}"
    );
    ok(loadcell(
        dir.path(),
        &["report", "fanout.json", "--html", "fanout.html"],
    ));
    let html = std::fs::read_to_string(dir.path().join("fanout.html")).unwrap();
    assert!(html.contains("<th>subscriber</th><th>filter</th>"));
    assert!(html.contains("38 more subscribers, 0 messages missing among them"));
}

/// Subscribers that go offline mid-run: on persistent sessions the broker
/// queues what comes meanwhile and they get all of it when they come back;
/// on clean sessions what came meanwhile is missing, and the run says so.
#[test]
fn persistent_subscribers_get_what_was_queued_while_they_were_offline() {
    let dir = tempfile::tempdir().unwrap();
    let server = mosquitto().expect("mosquitto starts");
    let outage = [
        "--publishers",
        "2",
        "--subscribers",
        "2",
        "--rate",
        "400",
        "--time",
        "3s",
        "--warmup",
        "0s",
        "--subscriber-outage",
        "1s:1s",
        "--drain-timeout",
        "5s",
    ];
    let mut persistent = outage.to_vec();
    persistent.extend(["--session", "persistent"]);
    let r = run_json(dir.path(), "mqtt-pubsub", server.url(), &persistent);
    let m = &r["verification"]["mqtt"];
    assert!(r["verification"]["ok"].as_bool().unwrap(), "{m:#}");
    assert_eq!(u(m, "/missing"), 0, "{m:#}");
    assert_eq!(u(m, "/received"), 2 * u(m, "/published"), "{m:#}");
    assert_eq!(u(op(&r, "rejoin"), "/count"), 2);

    let out = dir.path().join("clean.json");
    let mut clean = vec!["run", "mqtt-pubsub", "--target", server.url()];
    clean.extend(outage);
    clean.extend(["--out", out.to_str().unwrap()]);
    let o = loadcell(dir.path(), &clean);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r = read_json(&out);
    let m = &r["verification"]["mqtt"];
    // About a second of 400/s lost to each of the two.
    assert!((400..=1200).contains(&u(m, "/missing")), "{m:#}");
}

/// A broker that queues two messages per subscriber drops the rest of
/// what closed-loop publishers send: the run says what went missing and
/// exits 3, and the hint names the broker's own count of what it dropped.
#[test]
fn a_broker_that_drops_messages_fails_the_verification() {
    let dir = tempfile::tempdir().unwrap();
    let server = mosquitto_with(&Mosquitto {
        max_queued: Some(2),
        ..Mosquitto::default()
    })
    .expect("mosquitto starts");
    let out = dir.path().join("dropped.json");
    let o = loadcell(
        dir.path(),
        &[
            "run",
            "mqtt-pubsub",
            "--target",
            server.url(),
            "--publishers",
            "8",
            "--subscribers",
            "2",
            "--time",
            "3s",
            "--report-interval",
            "500ms",
            "--warmup",
            "0s",
            "--drain-timeout",
            "2s",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stdout(&o).contains("VERIFICATION FAILED"), "{}", stdout(&o));
    let r = read_json(&out);
    assert_valid_result(&r);
    let m = &r["verification"]["mqtt"];
    assert!(u(m, "/missing") > 0, "{m:#}");
    assert_eq!(
        u(m, "/received") + u(m, "/missing"),
        u(m, "/expected"),
        "{m:#}"
    );
    // The broker's own count of what it dropped (its $SYS, every second)
    // is named in the hint.
    let hint = s(&r, "/resources/bottleneck");
    assert!(hint.contains("mosquitto_publish_dropped"), "{hint}");
}

#[test]
fn held_connections_stop_at_the_listeners_limit_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let server = mosquitto_with(&Mosquitto {
        max_connections: Some(40),
        ..Mosquitto::default()
    })
    .expect("mosquitto starts");
    let r = run_json(
        dir.path(),
        "mqtt-conns",
        server.url(),
        &[
            "--connections",
            "60",
            "--ramp-rate",
            "300",
            "--keepalive-interval",
            "300ms",
            "--connect-timeout",
            "1s",
            "--time",
            "2s",
        ],
    );
    let held = &r["connections"];
    assert_eq!(u(held, "/requested"), 60);
    // Mosquitto's count is off by the run's monitoring connection and its
    // own readiness probes: a few either side of 40.
    let max = u(held, "/held_max");
    assert!((36..=44).contains(&max), "{held:#}");
    let first = &held["first_failure"];
    assert!((36..=44).contains(&u(first, "/held")), "{first:#}");
    assert!(!first["client_limit"].as_bool().unwrap(), "{first:#}");
    assert!(u(op(&r, "ping"), "/count") > 100, "{:#}", r["ops"]);
}

/// 2,000 vehicles connect on a ramp and hold, as the broker's own count
/// says; then every connection drops and comes back at once.
#[test]
fn a_fleet_of_two_thousand_is_held_and_comes_back_from_a_reconnect_storm() {
    let dir = tempfile::tempdir().unwrap();
    let server = mosquitto().expect("mosquitto starts");
    let r = run_json(
        dir.path(),
        "mqtt-conns",
        server.url(),
        &[
            "--connections",
            "2000",
            "--ramp-rate",
            "4000",
            "--keepalive-interval",
            "500ms",
            "--reconnect-storm",
            "2s",
            "--time",
            "4s",
            "--warmup",
            "0s",
        ],
    );
    let held = &r["connections"];
    assert_eq!(u(held, "/held_max"), 2000, "{held:#}");
    // Mosquitto's count: the 2,000 and the run's monitoring connection.
    let samples = r["resources"]["samples"].as_array().unwrap();
    let broker_max = samples
        .iter()
        .filter_map(|s| s["server"]["mosquitto_clients_connected"].as_f64())
        .fold(0.0, f64::max);
    assert!((2000.0..=2001.0).contains(&broker_max), "{broker_max}");
    let v = &r["verification"];
    assert!(v["ok"].as_bool().unwrap(), "{v:#}");
    let storm = &v["mqtt_storm"];
    assert_eq!(u(storm, "/reconnected"), 2000, "{storm:#}");
    assert!(f(storm, "/recovery_s") < 2.0, "{storm:#}");
    assert_eq!(u(op(&r, "reconnect"), "/count"), 2000);
}

#[test]
fn a_wrong_password_is_one_line_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    let server = mosquitto_with(&Mosquitto {
        password: Some(("car".into(), "s3cret".into())),
        ..Mosquitto::default()
    })
    .expect("mosquitto starts");
    let target = format!("mqtt://car:guess@127.0.0.1:{}", server.port);
    let o = loadcell(
        dir.path(),
        &["run", "mqtt-pubsub", "--target", &target, "--time", "1s"],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("not authorized"), "{err}");
    assert!(!err.contains("guess"), "no secret printed: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_killed_broker_still_leaves_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = mosquitto().expect("mosquitto starts");
    let url = server.url().to_string();
    let (_, r) = run_and_kill_server(
        dir.path(),
        &[
            "mqtt-pubsub",
            "--target",
            &url,
            "--publishers",
            "2",
            "--rate",
            "200",
        ],
        || server.kill(),
        std::time::Duration::from_millis(1500),
    );
    assert!(u(op(&r, "publish"), "/count") > 100, "{:#}", r["ops"]);
}

#[test]
fn mqtt_workloads_refuse_options_that_do_not_apply_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("mqtt://127.0.0.1:{}", loadcell_testkit::closed_port());
    each_refused_in_one_line(
        dir.path(),
        &target,
        &[
            (
                vec!["mqtt-pubsub", "--payload-size", "10"],
                "--payload-size 10 is too small",
            ),
            (vec!["mqtt-pubsub", "--qos", "3"], "MQTT has QoS 0, 1 and 2"),
            (
                vec!["mqtt-pubsub", "--topic", "cars/+"],
                "wildcards go in --sub-topic",
            ),
            (
                vec!["mqtt-pubsub", "--connections", "5"],
                "--connections is not an option of workload mqtt-pubsub (it is mqtt-conns's)",
            ),
            (
                vec!["mqtt-pubsub", "--partitions", "4"],
                "--partitions is not an option of workload mqtt-pubsub",
            ),
            (vec!["mqtt-pubsub", "--threads", "2"], "leave out --threads"),
            (
                vec!["mqtt-pubsub", "--fanout", "--topic", "commands"],
                "put %i (the subscriber's number) in --topic",
            ),
            (
                vec!["mqtt-pubsub", "--fanout", "--shared", "g"],
                "--fanout subscribes each subscriber to its own topic",
            ),
            (vec!["mqtt-conns", "--qos", "1"], "--qos is mqtt-pubsub's"),
            (
                vec!["mqtt-conns", "--rate", "10"],
                "--rate does not apply to mqtt-conns",
            ),
            (
                vec!["mqtt-pubsub", "--ratio", "1:1"],
                "workload mqtt-pubsub does not take it",
            ),
        ],
    );
}
