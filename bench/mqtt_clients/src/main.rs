//! Client CPU per published message: rumqttc's AsyncClient+EventLoop polled
//! inline, against a hand-written PUBLISH encoder on a tokio TcpStream.
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

async fn rumqttc_run(port: u16, n: u64, qos1: bool, payload: &[u8]) {
    use rumqttc::{AsyncClient, Event, MqttOptions, Outgoing, Packet, QoS};
    let mut o = MqttOptions::new("bench-r", "127.0.0.1", port);
    o.set_keep_alive(std::time::Duration::from_secs(30));
    o.set_max_packet_size(1 << 20, 1 << 20);
    let (client, mut ev) = AsyncClient::new(o, 10);
    loop {
        if let Event::Incoming(Packet::ConnAck(_)) = ev.poll().await.unwrap() {
            break;
        }
    }
    let qos = if qos1 { QoS::AtLeastOnce } else { QoS::AtMostOnce };
    for i in 0..n {
        client
            .try_publish(format!("vehicles/{}/telemetry", i % 100), qos, false, payload.to_vec())
            .unwrap();
        // Poll until this publish is on the wire (QoS 0) or acknowledged (QoS 1).
        loop {
            match ev.poll().await.unwrap() {
                Event::Outgoing(Outgoing::Publish(_)) if !qos1 => break,
                Event::Incoming(Packet::PubAck(_)) if qos1 => break,
                _ => {}
            }
        }
    }
}

fn encode_publish(buf: &mut Vec<u8>, topic: &[u8], pkid: Option<u16>, payload: &[u8]) {
    let remaining = 2 + topic.len() + pkid.map_or(0, |_| 2) + payload.len();
    buf.push(if pkid.is_some() { 0x32 } else { 0x30 });
    let mut x = remaining;
    loop {
        let mut b = (x % 128) as u8;
        x /= 128;
        if x > 0 {
            b |= 0x80;
        }
        buf.push(b);
        if x == 0 {
            break;
        }
    }
    buf.extend_from_slice(&(topic.len() as u16).to_be_bytes());
    buf.extend_from_slice(topic);
    if let Some(p) = pkid {
        buf.extend_from_slice(&p.to_be_bytes());
    }
    buf.extend_from_slice(payload);
}

async fn hand_run(port: u16, n: u64, qos1: bool, payload: &[u8]) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.set_nodelay(true).unwrap();
    // CONNECT, MQTT 3.1.1, clean session, keepalive 30, client id "bench-h".
    let id = b"bench-h";
    let mut c = vec![0x10, (10 + 2 + id.len()) as u8, 0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0, 30];
    c.extend_from_slice(&(id.len() as u16).to_be_bytes());
    c.extend_from_slice(id);
    s.write_all(&c).await.unwrap();
    let mut ack = [0u8; 4];
    s.read_exact(&mut ack).await.unwrap();
    assert_eq!(ack[0], 0x20);
    let mut buf = Vec::with_capacity(4096);
    let mut topic = Vec::with_capacity(64);
    let mut rd = [0u8; 4];
    for i in 0..n {
        buf.clear();
        topic.clear();
        use std::io::Write;
        write!(topic, "vehicles/{}/telemetry", i % 100).unwrap();
        let pkid = qos1.then(|| (i % 65535 + 1) as u16);
        encode_publish(&mut buf, &topic, pkid, payload);
        s.write_all(&buf).await.unwrap();
        if qos1 {
            s.read_exact(&mut rd).await.unwrap();
            assert_eq!(rd[0], 0x40);
        }
    }
    if !qos1 {
        // PINGREQ / PINGRESP: every PUBLISH before it has been read.
        s.write_all(&[0xC0, 0]).await.unwrap();
        let mut p = [0u8; 2];
        s.read_exact(&mut p).await.unwrap();
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (which, port, n, qos1) = (&a[1], a[2].parse().unwrap(), a[3].parse().unwrap(), a[4] == "1");
    let payload = vec![7u8; 256];
    let (t0, c0) = (Instant::now(), cpu());
    match which.as_str() {
        "rumqttc" => rumqttc_run(port, n, qos1, &payload).await,
        _ => hand_run(port, n, qos1, &payload).await,
    }
    let (t, c) = (t0.elapsed().as_secs_f64(), cpu() - c0);
    println!("{which} qos{} n={n}: {:.0} msg/s, {:.2} us CPU/msg", u8::from(qos1), n as f64 / t, c * 1e6 / n as f64);
}
