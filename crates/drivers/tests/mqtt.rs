//! The MQTT driver against a real Mosquitto (one per test, from
//! loadcell-testkit; each stops when its test ends): 3.1.1 and 5.0 at
//! every QoS, shared subscriptions, a password, TLS, a listener's
//! connection limit, and the broker's facts and `$SYS` counters.

mod local_runtime;

use std::time::Duration;

use loadcell_core::mqtt::{Acked, MqttConn, Publish, QoS};
use loadcell_core::{Driver, ErrorClass, Target};
use loadcell_drivers::mqtt::{MqttConnection, MqttDriver};
use loadcell_testkit::{mosquitto, mosquitto_with, Mosquitto, TestServer};
use local_runtime::block_on;

fn start() -> TestServer {
    mosquitto().unwrap_or_else(|e| panic!("cannot start mosquitto: {e}"))
}

fn driver(url: &str) -> MqttDriver {
    MqttDriver::from_target(&Target::parse(url).expect("valid URL")).expect("valid MQTT target")
}

/// Every message `conn` receives within `wait` of the last: (topic,
/// payload, qos).
async fn receive(conn: &mut MqttConnection, wait: Duration) -> Vec<(String, Vec<u8>, QoS)> {
    let mut got = Vec::new();
    loop {
        let n = conn
            .poll(100, wait, &mut |m| {
                got.push((
                    String::from_utf8_lossy(m.topic).into_owned(),
                    m.payload.to_vec(),
                    m.qos,
                ))
            })
            .await
            .unwrap();
        if n == 0 {
            return got;
        }
    }
}

/// Publishes at each QoS to a subscriber of each QoS: every message
/// arrives once, at the lower of the two, acknowledged as it asks.
fn every_qos_arrives_once(url: &str) {
    let d = driver(url);
    block_on(async {
        let mut subscriber = d.connect().await.unwrap();
        let granted = subscriber
            .subscribe(&[("cars/+/telemetry", QoS::ExactlyOnce)])
            .await
            .unwrap();
        assert_eq!(granted, vec![Some(QoS::ExactlyOnce)]);
        let mut publisher = d.connect().await.unwrap();
        let mut sent = Vec::new();
        for (i, qos) in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce]
            .into_iter()
            .enumerate()
        {
            for n in 0..20 {
                let payload = vec![i as u8 * 100 + n; 64 + usize::from(n)];
                let acked = publisher
                    .publish(&Publish {
                        topic: &format!("cars/{i}/telemetry"),
                        qos,
                        retain: false,
                        payload: &payload,
                    })
                    .await
                    .unwrap();
                let want = if qos == QoS::AtMostOnce {
                    Acked::Written
                } else {
                    Acked::Acknowledged
                };
                assert_eq!(acked, want);
                sent.push((format!("cars/{i}/telemetry"), payload, qos));
            }
        }
        let got = receive(&mut subscriber, Duration::from_millis(500)).await;
        assert_eq!(got, sent, "each message once, in order, at its QoS");
        // The subscriber acknowledged every QoS 1 and 2 message: the
        // broker has none left in flight to it.
        subscriber.ping().await.unwrap();
        publisher.ping().await.unwrap();
        subscriber.disconnect().await;
    });
}

#[test]
fn mqtt_311_delivers_every_qos() {
    let server = start();
    every_qos_arrives_once(server.url());
}

#[test]
fn mqtt_5_delivers_every_qos_and_says_shared_subscriptions_are_available() {
    let server = start();
    let url = format!("{}?version=5", server.url());
    every_qos_arrives_once(&url);
    let d = driver(&url);
    block_on(async {
        let conn = d.connect().await.unwrap();
        // Mosquitto leaves the property out, which MQTT 5 reads as "yes".
        assert_ne!(conn.connack().shared_subscriptions, Some(false));
        assert!(!conn.connack().session_present);
    });
}

#[test]
fn a_shared_group_gets_each_message_once_among_its_members() {
    let server = start();
    let d = driver(&format!("{}?version=5", server.url()));
    block_on(async {
        let mut members = Vec::new();
        for _ in 0..3 {
            let mut m = d.connect().await.unwrap();
            m.subscribe(&[("$share/backend/fleet/#", QoS::AtLeastOnce)])
                .await
                .unwrap();
            members.push(m);
        }
        let mut publisher = d.connect().await.unwrap();
        for n in 0..90u32 {
            publisher
                .publish(&Publish {
                    topic: &format!("fleet/{}", n % 7),
                    qos: QoS::AtLeastOnce,
                    retain: false,
                    payload: &n.to_le_bytes(),
                })
                .await
                .unwrap();
        }
        let mut all = Vec::new();
        for m in &mut members {
            let got = receive(m, Duration::from_millis(300)).await;
            assert!(!got.is_empty(), "round-robin gives every member some");
            all.extend(
                got.into_iter()
                    .map(|(_, p, _)| u32::from_le_bytes(p.try_into().unwrap())),
            );
        }
        all.sort_unstable();
        assert_eq!(
            all,
            (0..90).collect::<Vec<_>>(),
            "each message once in the group"
        );
    });
}

#[test]
fn a_wrong_password_is_fatal_and_the_right_one_connects() {
    let server = mosquitto_with(&Mosquitto {
        password: Some(("car".into(), "s3cret".into())),
        ..Mosquitto::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let port = server.port;
    block_on(async {
        let wrong = driver(&format!("mqtt://car:guess@127.0.0.1:{port}"));
        let err = wrong.connect().await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Fatal, "{err:?}");
        assert!(err.message.contains("not authorized"), "{}", err.message);
        assert!(!err.message.contains("guess"), "no secret in the message");
        let right = driver(server.url());
        let mut conn = right.connect().await.unwrap();
        conn.ping().await.unwrap();
    });
}

#[test]
fn tls_listeners_are_reached_with_mqtts() {
    let server = mosquitto_with(&Mosquitto {
        tls: true,
        ..Mosquitto::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(server.url().starts_with("mqtts://localhost:"));
    every_qos_arrives_once(server.url());
    // Plain MQTT to a TLS listener is no CONNACK.
    let plain = driver(&format!("mqtt://127.0.0.1:{}", server.port));
    block_on(async {
        let err = plain.connect().await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection, "{err:?}");
    });
}

/// Mosquitto 2.0.11 accepts a connection over its `max_connections`
/// and resets it at once; the driver says so. (Its count of clients is
/// off by the readiness probes' connections, so the refusal is looked for
/// from the third connection on.)
#[test]
fn a_full_listener_is_named_as_closing_before_connack() {
    let server = mosquitto_with(&Mosquitto {
        max_connections: Some(3),
        ..Mosquitto::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let d = driver(server.url());
    block_on(async {
        let mut held = Vec::new();
        let err = loop {
            match d.connect().await {
                Ok(conn) if held.len() < 10 => held.push(conn),
                Ok(_) => panic!("no limit met at 10 connections"),
                Err(e) => break e,
            }
        };
        assert!(held.len() >= 3, "refused at {}: {err:?}", held.len());
        assert_eq!(err.class, ErrorClass::Connection);
        assert!(
            err.message.contains("before its CONNACK"),
            "{}",
            err.message
        );
    });
}

#[test]
fn the_broker_names_itself_and_its_sys_counters_count_this_traffic() {
    let server = start();
    let d = driver(server.url());
    block_on(async {
        let mut monitor = d.connect().await.unwrap();
        let info = d.server_info(&mut monitor).await.unwrap();
        assert_eq!(info.product, "mosquitto");
        assert!(info.version.starts_with("2."), "{info:?}");
        assert_eq!(info.extras["mqtt_protocol"], "3.1.1");
        d.server_counters(&mut monitor).await.unwrap();
        let mut publisher = d.connect().await.unwrap();
        for _ in 0..500 {
            publisher
                .publish(&Publish {
                    topic: "counted",
                    qos: QoS::AtLeastOnce,
                    retain: false,
                    payload: b"x",
                })
                .await
                .unwrap();
        }
        // `$SYS` is published every second (sys_interval 1).
        let mut received = 0.0;
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let counters = d.server_counters(&mut monitor).await.unwrap();
            received = counters
                .iter()
                .find(|(k, _)| k == "mosquitto_publish_received_total")
                .map_or(0.0, |(_, v)| *v);
            if received >= 500.0 {
                break;
            }
        }
        assert!(received >= 500.0, "{received}");
    });
}

#[test]
fn a_server_that_is_not_a_broker_is_named() {
    let server = loadcell_testkit::redis().expect("Redis starts");
    let d = driver(&format!("mqtt://127.0.0.1:{}", server.port));
    block_on(async {
        // Redis waits for the end of a line that never comes.
        let err = d
            .connect_within(Duration::from_millis(500))
            .await
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Connection);
        assert!(err.message.contains("127.0.0.1"), "{}", err.message);
    });
}
