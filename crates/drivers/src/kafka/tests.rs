use super::*;

fn settings(url: &str) -> Result<Settings, String> {
    Settings::parse(&Target::parse(url).expect("valid URL"))
}

fn property<'a>(settings: &'a Settings, key: &str) -> Option<&'a str> {
    settings
        .properties
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[test]
fn defaults_are_every_broker_with_acks_from_all_replicas() {
    let s = settings("kafka://a:9093,b").unwrap();
    assert_eq!(s.brokers, "a:9093,b:9092");
    assert_eq!(property(&s, "bootstrap.servers"), Some("a:9093,b:9092"));
    assert_eq!(property(&s, "acks"), Some("all"));
    assert_eq!(property(&s, "allow.auto.create.topics"), Some("false"));
    assert_eq!(s.replication, 1);
}

#[test]
fn parameters_are_librdkafka_properties_over_the_defaults() {
    let s = settings("kafka://h:1?acks=1&linger.ms=5&compression=zstd&replication=3&client.id=me")
        .unwrap();
    assert_eq!(property(&s, "acks"), Some("1"));
    assert_eq!(property(&s, "linger.ms"), Some("5"));
    assert_eq!(property(&s, "compression.type"), Some("zstd"));
    assert_eq!(property(&s, "client.id"), Some("me"));
    assert_eq!(s.replication, 3);
    let consumer = s.consumer_config("g");
    assert_eq!(consumer.get("linger.ms"), Some("5"));
    assert_eq!(consumer.get("session.timeout.ms"), Some("10000"));
    let s = settings("kafka://h:1?session.timeout.ms=6000").unwrap();
    assert_eq!(
        s.consumer_config("g").get("session.timeout.ms"),
        Some("6000")
    );
    assert_eq!(consumer.get("group.id"), Some("g"));
    assert_eq!(consumer.get("enable.auto.commit"), Some("false"));
    assert_eq!(consumer.get("partition.assignment.strategy"), Some("range"));
    // A catching-up consumer refetches 10 ms after its queue was full, not
    // librdkafka's 1 s; a target may still set its own.
    assert_eq!(consumer.get("fetch.queue.backoff.ms"), Some("10"));
    let s = settings("kafka://h:1?fetch.queue.backoff.ms=500").unwrap();
    assert_eq!(
        s.consumer_config("g").get("fetch.queue.backoff.ms"),
        Some("500")
    );
}

#[test]
fn bad_parameters_are_refused_before_anything_connects() {
    let e = settings("kafka://h:1?lingerr.ms=5").unwrap_err();
    assert!(e.contains("lingerr.ms"), "{e}");
    let e = settings("kafka://h:1?acks=some").unwrap_err();
    assert!(e.contains("acks"), "{e}");
    let e = settings("kafka://h:1?compression=brotli").unwrap_err();
    assert!(e.contains("none, gzip, snappy, lz4, zstd"), "{e}");
    let e = settings("kafka://h:1?replication=0").unwrap_err();
    assert!(e.contains("replication"), "{e}");
    let e = settings("kafka://h:1/topic").unwrap_err();
    assert!(e.contains("no path"), "{e}");
}
