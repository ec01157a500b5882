//! The Kafka driver's own cost, without the workload: produces ROWS rows
//! of 220 bytes (RowCodec's layout) into a fresh topic of PARTITIONS
//! partitions, BATCH rows per `produce` (each waiting for its acks), then
//! consumes them all back with one consumer assigned every partition.
//! Prints one JSON line per phase: rows, process CPU seconds (user + sys,
//! from getrusage: librdkafka's threads included) and wall seconds, for
//! the CPU per row that bench/stream.sh compares with Kafka's own
//! ProducerPerformance and ConsumerPerformance.
//!
//!   cargo run --release -p loadcell-drivers --example kafka_rows -- \
//!       kafka://127.0.0.1:PORT?acks=all ROWS PARTITIONS BATCH

use std::time::{Duration, Instant};

use loadcell_core::stream::{Channels, StartFrom, StreamConn, StreamRow};
use loadcell_core::{Driver, Target};
use loadcell_drivers::kafka::KafkaDriver;

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn report(phase: &str, rows: u64, cpu: f64, wall: Duration) {
    println!(
        "{{\"phase\":\"{phase}\",\"rows\":{rows},\"cpu_s\":{cpu:.3},\"wall_s\":{:.3},\
         \"rows_per_s\":{:.0},\"cpu_us_per_row\":{:.3}}}",
        wall.as_secs_f64(),
        rows as f64 / wall.as_secs_f64(),
        cpu * 1e6 / rows as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, rows, partitions, batch] = &args[..] else {
        eprintln!("usage: kafka_rows URL ROWS PARTITIONS BATCH");
        std::process::exit(2)
    };
    let (rows, partitions, batch): (u64, u32, u64) = (
        rows.parse().expect("ROWS"),
        partitions.parse().expect("PARTITIONS"),
        batch.parse().expect("BATCH"),
    );
    let driver = KafkaDriver::from_target(&Target::parse(url).expect("a URL")).expect("a target");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let mut conn = driver.connect().await.expect("connects");
        let stream = format!("kafka-rows-{}", std::process::id());
        conn.create_stream(&stream, partitions, "kafka_rows")
            .await
            .expect("a topic");
        conn.create_group(&stream, "kafka-rows", StartFrom::Beginning)
            .await
            .expect("a group");
        // 30 fixed + 10 length bytes + 26 of keys + 154 of payload = 220.
        let payload = [b'x'; 154];
        let (cpu, wall) = (cpu_seconds(), Instant::now());
        let mut seq = 0;
        while seq < rows {
            for _ in 0..batch.min(rows - seq) {
                let channel = (seq % u64::from(partitions)) as u32;
                let row = StreamRow {
                    channel,
                    seq,
                    produced_ns: 0,
                    origin: 1,
                    keys: [b"user00042", b"2026-11-24", b"", b"order-9"],
                    payload: &payload,
                };
                conn.queue_row(&stream, &row);
                seq += 1;
            }
            let outcome = conn
                .produce(&mut |reason| panic!("a row failed: {reason}"))
                .await
                .expect("produced");
            assert_eq!(outcome.failed, 0);
        }
        report("produce", rows, cpu_seconds() - cpu, wall.elapsed());

        let all: Vec<u32> = (0..partitions).collect();
        conn.subscribe(&stream, "kafka-rows", "c", Channels::Assigned(&all))
            .await
            .expect("subscribed");
        let (cpu, wall) = (cpu_seconds(), Instant::now());
        let mut consumed = 0;
        while consumed < rows {
            let outcome = conn
                .poll(10_000, Duration::from_secs(10), &mut |_| {})
                .await
                .expect("polled");
            assert!(outcome.rows > 0, "nothing came within 10 s");
            consumed += outcome.rows;
        }
        conn.commit().await.expect("committed");
        report("consume", consumed, cpu_seconds() - cpu, wall.elapsed());
        conn.drop_group(&stream, "kafka-rows").await.ok();
        conn.drop_stream(&stream).await.expect("dropped");
    });
}
