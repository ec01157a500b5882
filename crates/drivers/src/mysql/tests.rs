use std::io;

use loadcell_core::ErrorClass;
use mysql_common::constants::{CapabilityFlags, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthSwitchRequest, HandshakePacket, HandshakeResponse};
use mysql_common::proto::MySerialize;

use super::*;
use crate::transport::stream::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn settings(url: &str) -> Result<Settings, String> {
    parse_target(&Target::parse(url).unwrap())
}

fn ctx() -> Ctx {
    Ctx {
        endpoint: "127.0.0.1:3306".into(),
        user: "lc".into(),
        sslmode: SslMode::Disable,
    }
}

#[test]
fn parses_full_url() {
    let s = settings("mysql://lc:pa%40ss@db.example:3307/loadcell").unwrap();
    assert_eq!(s.host, "db.example");
    assert_eq!(s.port, 3307);
    assert_eq!(s.user, "lc");
    assert_eq!(s.password.as_deref(), Some("pa@ss"));
    assert_eq!(s.db.as_deref(), Some("loadcell"));
    assert_eq!(s.sslmode, SslMode::Disable);
    assert_eq!(s.sslrootcert, None);
    assert_eq!(s.endpoint(), "db.example:3307");
    assert!(!format!("{s:?}").contains("pa@ss"));
}

#[test]
fn defaults() {
    let s = settings("mariadb://localhost").unwrap();
    assert_eq!(s.host, "localhost");
    assert_eq!(s.port, 3306);
    assert_eq!(s.user, "root");
    assert_eq!(s.password, None);
    assert_eq!(s.db, None);
    let s = settings("mysql://127.0.0.1/").unwrap();
    assert_eq!(s.db, None);
    assert_eq!(s.endpoint(), "127.0.0.1:3306");
}

#[test]
fn ipv6_host() {
    let s = settings("mysql://u@[::1]:3310/d").unwrap();
    assert_eq!(s.host, "::1");
    assert_eq!(s.endpoint(), "[::1]:3310");
}

#[test]
fn sslmodes() {
    for (v, m) in [
        ("disable", SslMode::Disable),
        ("prefer", SslMode::Prefer),
        ("require", SslMode::Require),
        ("verify-ca", SslMode::VerifyCa),
        ("verify-full", SslMode::VerifyFull),
    ] {
        let s = settings(&format!("mysql://h/d?sslmode={v}")).unwrap();
        assert_eq!(s.sslmode, m);
    }
    let err = settings("mysql://h/d?sslmode=maybe").unwrap_err();
    assert!(err.contains("maybe"), "{err}");
}

#[test]
fn sslrootcert_is_checked_up_front() {
    let open = |u: &str| MysqlDriver::from_target(&Target::parse(u).unwrap());
    let err = open("mysql://h/d?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem").unwrap_err();
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    let exe = std::env::current_exe().unwrap();
    let err = open(&format!(
        "mysql://h/d?sslmode=verify-full&sslrootcert={}",
        exe.display()
    ))
    .unwrap_err();
    assert!(err.contains("PEM"), "{err}");
    let err = open("mysql://h/d?sslmode=disable&sslrootcert=/x.pem").unwrap_err();
    assert!(err.contains("sslmode=disable"), "{err}");
    let s = settings("mysql://h/d?sslmode=verify-full&sslrootcert=/x.pem").unwrap();
    assert_eq!(
        s.sslrootcert.as_deref(),
        Some(std::path::Path::new("/x.pem"))
    );
}

#[test]
fn rejects_unknown_parameters() {
    let err = settings("mysql://h/d?pool_max=3").unwrap_err();
    assert!(err.contains("'pool_max'"), "{err}");
    assert!(
        err.contains("sslmode") && err.contains("sslrootcert"),
        "{err}"
    );
    let t = Target::parse("mysql://u:secret@h/d?bogus=1").unwrap();
    let err = MysqlDriver::from_target(&t).unwrap_err();
    assert!(!err.contains("secret"), "{err}");
}

#[test]
fn rejects_nested_paths() {
    assert!(settings("mysql://h/a/b").is_err());
}

#[test]
fn driver_endpoint_has_no_secret() {
    let t = Target::parse("mysql://lc:hunter2@10.1.2.3:3399/x").unwrap();
    let d = MysqlDriver::from_target(&t).unwrap();
    assert_eq!(d.endpoint(), "10.1.2.3:3399");
    assert!(!format!("{d:?}").contains("hunter2"));
    assert!(d.tls.is_none());
    for mode in ["prefer", "require", "verify-ca", "verify-full"] {
        let t = Target::parse(&format!("mysql://lc@h/x?sslmode={mode}")).unwrap();
        let d = MysqlDriver::from_target(&t).unwrap();
        assert!(d.tls.is_some(), "{mode}");
        assert_eq!(d.ctx.sslmode.as_str(), mode);
    }
}

#[test]
fn server_error_classes() {
    for code in [1213, 1205, 1020, 3572, 1412] {
        assert_eq!(server_error_class(code), ErrorClass::Retryable, "{code}");
    }
    for code in [2006, 2013, 2055, 1927, 1053, 1040] {
        assert_eq!(server_error_class(code), ErrorClass::Connection, "{code}");
    }
    for code in [1045, 1049, 1146, 1064, 1062, 1054] {
        assert_eq!(server_error_class(code), ErrorClass::Fatal, "{code}");
    }
}

#[test]
fn server_error_messages() {
    let c = ctx();
    let e = classify_server(1045, "Access denied for user 'lc'@'localhost'", &c);
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(e.code.as_deref(), Some("1045"));
    assert_eq!(
        e.message,
        "access denied for user 'lc' at 127.0.0.1:3306: check the user and password in --target"
    );
    let e = classify_server(1213, "Deadlock found", &c);
    assert_eq!(e.class, ErrorClass::Retryable);
    assert_eq!(e.to_string(), "Deadlock found (code 1213)");
    let e = classify_server(1146, "Table 'loadcell.x' doesn't exist", &c);
    assert_eq!(
        (e.class, e.code.as_deref()),
        (ErrorClass::Fatal, Some("1146"))
    );
    let e = classify_server(1049, "Unknown database 'nope'", &c);
    assert!(e.message.contains("'nope'") && e.message.contains("127.0.0.1:3306"));
    let e = classify_server(1927, "Connection was killed", &c);
    assert_eq!(e.class, ErrorClass::Connection);
    let e = classify_server(
        1461,
        "Can't create more than max_prepared_stmt_count statements (current value: 16382)",
        &c,
    );
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e
        .message
        .contains("(current value: 16382) at 127.0.0.1:3306: every session"));
    assert!(e.message.contains("SET GLOBAL max_prepared_stmt_count"));
}

#[test]
fn io_errors() {
    let c = ctx();
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    let e = classify_io(&refused, &c, Phase::Connect);
    assert_eq!(e.class, ErrorClass::Connection);
    assert_eq!(
        e.message,
        "cannot connect to 127.0.0.1:3306: connection refused (is the server running?)"
    );
    let reset = io::Error::from(io::ErrorKind::ConnectionReset);
    let e = classify_io(&reset, &c, Phase::Use);
    assert_eq!(e.class, ErrorClass::Connection);
    assert!(
        e.message.starts_with("lost connection to 127.0.0.1:3306"),
        "{e}"
    );
    let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
    assert_eq!(
        classify_io(&eof, &c, Phase::Use).class,
        ErrorClass::Connection
    );
    let timeout = io::Error::from(io::ErrorKind::TimedOut);
    let e = classify_io(&timeout, &c, Phase::Connect);
    assert_eq!(e.class, ErrorClass::Connection);
    assert!(e.message.contains("timed out"), "{e}");
    let dns = io::Error::other("failed to lookup address information: Name or service not known");
    assert_eq!(
        classify_io(&dns, &c, Phase::Connect).class,
        ErrorClass::Fatal
    );
    let tls = io::Error::new(
        io::ErrorKind::InvalidData,
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
    );
    let e = classify_io(&tls, &c, Phase::Connect);
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(
        e.message.contains("TLS handshake with 127.0.0.1:3306"),
        "{e}"
    );
    assert!(e.message.contains("sslrootcert"), "{e}");
}

#[test]
fn the_greeting_is_told_from_its_first_bytes() {
    // MariaDB's handshake; an ERR packet (host blocked).
    assert_eq!(greeting_start_ok(b"\x5b\x00\x00\x00\x0a11.8"), Some(true));
    assert_eq!(
        greeting_start_ok(b"\x45\x00\x00\x00\xff\x69\x04"),
        Some(true)
    );
    assert_eq!(greeting_start_ok(b""), None);
    assert_eq!(greeting_start_ok(b"\x5b\x00\x00\x00"), None);
    // Redis, memcached, HTTP: refused on the third byte, as a length
    // no greeting has.
    for other in [&b"-ERR unknown"[..], b"ERROR\r\n", b"HTTP/1.1 400"] {
        assert_eq!(greeting_start_ok(&other[..3]), Some(false));
    }
    // Not sequence 0, not protocol 10.
    assert_eq!(greeting_start_ok(b"\x5b\x00\x00\x01"), Some(false));
    assert_eq!(greeting_start_ok(b"\x5b\x00\x00\x00\x09"), Some(false));
}

#[test]
fn product_detection() {
    assert_eq!(product_of("10.11.6-MariaDB-0+deb12u1"), "MariaDB");
    assert_eq!(product_of("8.0.36"), "MySQL");
    assert_eq!(product_of("5.5.5-10.6.12-MariaDB-log"), "MariaDB");
}

// -- wire session: pure parts ---------------------------------------

/// `payload` framed as one packet with sequence id `seq`.
fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    put_packet(&mut v, seq, payload);
    v
}

/// Feeds `bytes` into `pb` in chunks of `chunk`, collecting payloads.
fn feed_all(pb: &mut PacketBuf, bytes: &[u8], chunk: usize) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    for piece in bytes.chunks(chunk) {
        let mut rest = piece;
        while !rest.is_empty() {
            let spare = pb.spare();
            let n = spare.len().min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            pb.filled(n);
            rest = &rest[n..];
            while let Some(r) = pb.next() {
                out.push((pb.seq, pb.bytes()[r].to_vec()));
            }
        }
    }
    out
}

#[test]
fn framing_whole_and_split_packets() {
    let mut bytes = packet(0, b"hello");
    bytes.extend(packet(1, b""));
    bytes.extend(packet(2, &[7; 300]));
    // All at once, then one byte per read: the same packets.
    for chunk in [bytes.len(), 1, 3, 6] {
        let mut pb = PacketBuf::new(64);
        let got = feed_all(&mut pb, &bytes, chunk);
        assert_eq!(
            got,
            vec![(0, b"hello".to_vec()), (1, Vec::new()), (2, vec![7; 300])],
            "chunk {chunk}"
        );
        assert!(pb.data.is_empty());
    }
    // A packet split across two reads is not handed out half-read.
    let mut pb = PacketBuf::new(64);
    let spare = pb.spare();
    spare[..6].copy_from_slice(&bytes[..6]);
    pb.filled(6);
    assert_eq!(pb.next(), None);
    assert_eq!(pb.need, 9);
    let spare = pb.spare();
    spare[..3].copy_from_slice(&bytes[6..9]);
    pb.filled(3);
    let r = pb.next().unwrap();
    assert_eq!(&pb.bytes()[r], b"hello");
    assert_eq!(pb.next(), None);
}

#[test]
fn framing_joins_continued_payloads() {
    let big: Vec<u8> = (0..MAX_PAYLOAD).map(|i| (i % 251) as u8).collect();
    let mut bytes = packet(3, &big);
    bytes.extend(packet(4, b"tail"));
    bytes.extend(packet(5, b"next"));
    // Exactly 0xFFFFFF bytes: ended by an empty packet.
    bytes.extend(packet(0, &big));
    bytes.extend(packet(1, b""));
    for chunk in [1 << 20, 65_536 + 5, bytes.len()] {
        let mut pb = PacketBuf::new(READ_BUF);
        let got = feed_all(&mut pb, &bytes, chunk);
        assert_eq!(got.len(), 3, "chunk {chunk}");
        let (seq, first) = &got[0];
        assert_eq!(*seq, 4, "the last piece's sequence id");
        assert_eq!(first.len(), MAX_PAYLOAD + 4);
        assert!(first[..MAX_PAYLOAD] == big[..], "chunk {chunk}");
        assert_eq!(&first[MAX_PAYLOAD..], b"tail");
        assert_eq!(got[1], (5, b"next".to_vec()));
        assert_eq!(got[2].0, 1);
        assert!(got[2].1 == big);
        assert_eq!(pb.joined, None);
    }
}

#[test]
fn execute_encoding_byte_for_byte() {
    let mut buf = Vec::new();
    let params = [SqlParam::Int(-2), SqlParam::Text("hé")];
    encode_execute(&mut buf, 0x0102_0304, &params, true);
    let mut want = vec![
        0x17, // COM_STMT_EXECUTE
        0x04, 0x03, 0x02, 0x01, // statement id
        0x00, // flags
        0x01, 0x00, 0x00, 0x00, // iteration count
        0x00, // NULL bitmap
        0x01, // new params bound
        0x08, 0x00, // LONGLONG
        0xFD, 0x00, // VAR_STRING
        0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, // -2
        0x03, b'h', 0xC3, 0xA9, // "hé"
    ];
    let mut framed = vec![want.len() as u8, 0, 0, 0];
    framed.extend_from_slice(&want);
    assert_eq!(buf, framed);

    // Types already bound: the flag is 0 and the types are left out.
    encode_execute(&mut buf, 0x0102_0304, &params, false);
    want[11] = 0x00;
    want.drain(12..16);
    let mut framed = vec![want.len() as u8, 0, 0, 0];
    framed.append(&mut want);
    assert_eq!(buf, framed);

    // No parameters: no bitmap, no types.
    encode_execute(&mut buf, 9, &[], true);
    assert_eq!(buf, [10, 0, 0, 0, 0x17, 9, 0, 0, 0, 0, 1, 0, 0, 0]);

    // Nine parameters: a two-byte NULL bitmap; a long text: 0xFC length.
    let long = "x".repeat(300);
    let mut params = vec![SqlParam::Int(1); 8];
    params.push(SqlParam::Text(&long));
    encode_execute(&mut buf, 1, &params, true);
    let body = &buf[4..];
    assert_eq!(le24(&buf), body.len());
    assert_eq!(&body[10..13], &[0, 0, 1], "bitmap, new params bound");
    let values = 13 + 18;
    assert_eq!(&body[values..values + 8], &1i64.to_le_bytes());
    let text = values + 64;
    assert_eq!(&body[text..text + 3], &[0xFC, 0x2C, 0x01]);
    assert_eq!(body.len(), text + 3 + 300);

    // The buffer is reused: no new allocation once large enough.
    let cap = buf.capacity();
    let ptr = buf.as_ptr();
    for i in 0..100 {
        encode_execute(
            &mut buf,
            1,
            &[SqlParam::Int(i), SqlParam::Text("abc")],
            true,
        );
    }
    assert_eq!((buf.capacity(), buf.as_ptr()), (cap, ptr));
}

#[test]
fn long_commands_are_split() {
    let sql = vec![b'a'; MAX_PAYLOAD + 10];
    let mut buf = Vec::new();
    encode_command(&mut buf, COM_QUERY, &sql);
    assert_eq!(le24(&buf), MAX_PAYLOAD);
    assert_eq!(buf[3], 0);
    assert_eq!(buf[4], COM_QUERY);
    let second = 4 + MAX_PAYLOAD;
    assert_eq!(le24(&buf[second..]), 11);
    assert_eq!(buf[second + 3], 1);
    assert_eq!(buf.len(), second + 4 + 11);
    // Exactly 0xFFFFFF bytes of payload: an empty packet follows.
    encode_command(&mut buf, COM_QUERY, &sql[..MAX_PAYLOAD - 1]);
    assert_eq!(buf.len(), 4 + MAX_PAYLOAD + 4);
    assert_eq!(&buf[4 + MAX_PAYLOAD..], &[0, 0, 0, 1]);
}

#[test]
fn lenenc_integers() {
    for n in [
        0u64,
        250,
        251,
        0xFFFF,
        0x1_0000,
        0xFF_FFFF,
        0x100_0000,
        u64::MAX,
    ] {
        let mut buf = Vec::new();
        put_lenenc(&mut buf, n);
        let mut pos = 0;
        assert_eq!(lenenc(&buf, &mut pos), Some(n));
        assert_eq!(pos, buf.len());
    }
    let mut pos = 0;
    assert_eq!(lenenc(&[0xFC, 1], &mut pos), None, "truncated");
    assert_eq!(lenenc(&[0xFF], &mut pos), None);
}

#[test]
fn ok_and_err_packets() {
    // OK: 3 rows affected, last insert id 300, status autocommit|more results.
    let ok = [0x00, 3, 0xFC, 0x2C, 0x01, 0x0A, 0x00, 0x00, 0x00];
    assert_eq!(
        parse_ok(&ok),
        Some(OkInfo {
            affected: 3,
            status: 0x000A
        })
    );
    assert_eq!(parse_ok(&[0x00, 1]), None);

    let mut err = vec![0xFF, 0x7A, 0x04, b'#'];
    err.extend_from_slice(b"42S02Table 'loadcell.x' doesn't exist");
    assert_eq!(
        parse_err(&err),
        Some(ServerErr {
            code: 1146,
            state: Some("42S02"),
            message: "Table 'loadcell.x' doesn't exist"
        })
    );
    // Before the protocol is agreed (e.g. too many connections): no state.
    let mut err = vec![0xFF, 0x10, 0x04];
    err.extend_from_slice(b"Too many connections");
    let e = parse_err(&err).unwrap();
    assert_eq!(
        (e.code, e.state, e.message),
        (1040, None, "Too many connections")
    );
    assert_eq!(parse_err(&[0x00, 0, 0]), None);
}

/// Runs payloads through a walker; the steps, and the count at the end.
fn framing(deprecate_eof: bool) -> Framing {
    Framing {
        deprecate_eof,
        cache_metadata: false,
    }
}

fn walk(deprecate_eof: bool, packets: &[&[u8]]) -> (Vec<Step>, u64) {
    let mut w = Walker::new(framing(deprecate_eof));
    let steps = packets.iter().map(|p| w.feed(p).unwrap()).collect();
    (steps, w.count())
}

const COLDEF: &[u8] =
    b"\x03def\x08loadcell\x01t\x01t\x01c\x01c\x0c\x08\x00\x78\x00\x00\x00\xfe\x00\x00\x00\x00\x00";

#[test]
fn walks_responses_without_decoding_rows() {
    use Step::*;
    // OK with 5 rows affected.
    assert_eq!(walk(true, &[&[0x00, 5, 0, 2, 0, 0, 0]]), (vec![Done], 5));
    // ERR.
    assert_eq!(walk(true, &[b"\xff\x7a\x04#42S02x"]).0, vec![Error]);

    // Two columns, two binary rows, DEPRECATE_EOF: an OK (0xFE) ends it.
    let row: &[u8] = &[0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 1, b'a'];
    let end: &[u8] = &[0xFE, 0, 0, 0x02, 0, 0, 0];
    assert_eq!(
        walk(true, &[&[2], COLDEF, COLDEF, row, row, end]),
        (vec![More, More, More, Row, Row, Done], 2)
    );
    // The same without DEPRECATE_EOF: an EOF after the columns and at the end.
    let eof: &[u8] = &[0xFE, 0, 0, 0x02, 0];
    assert_eq!(
        walk(false, &[&[2], COLDEF, COLDEF, eof, row, row, row, eof]),
        (vec![More, More, More, More, Row, Row, Row, Done], 3)
    );
    // An empty result set counts 0 rows, not the OK's count.
    assert_eq!(
        walk(true, &[&[1], COLDEF, end]),
        (vec![More, More, Done], 0)
    );
    // Text rows may start with any length byte, including 0xFB (NULL).
    assert_eq!(
        walk(true, &[&[1], COLDEF, &[0xFB], &[0x01, b'x'], end]).1,
        2
    );
    // A stored procedure: a result set, then the OK of the CALL.
    let more: &[u8] = &[0xFE, 0, 0, 0x0A, 0, 0, 0];
    assert_eq!(
        walk(true, &[&[1], COLDEF, row, more, &[0x00, 0, 0, 2, 0, 0, 0]]),
        (vec![More, More, Row, More, Done], 1)
    );
    // An error in the middle of the rows (e.g. killed query).
    let (steps, _) = walk(true, &[&[1], COLDEF, row, b"\xff\x25\x05#70100x"]);
    assert_eq!(steps.last(), Some(&Error));
    // Multi-statement OKs.
    assert_eq!(
        walk(
            true,
            &[&[0x00, 1, 0, 0x0A, 0, 0, 0], &[0x00, 2, 0, 2, 0, 0, 0]]
        ),
        (vec![More, Done], 3)
    );

    let mut w = Walker::new(framing(false));
    w.feed(&[1]).unwrap();
    w.feed(COLDEF).unwrap();
    assert!(w.feed(&[0x00]).is_err(), "no EOF after the columns");
    assert!(Walker::new(framing(true)).feed(&[]).is_err());
}

#[test]
fn walks_result_sets_with_cached_metadata() {
    use Step::*;
    let cached = Framing {
        deprecate_eof: true,
        cache_metadata: true,
    };
    let walk = |packets: &[&[u8]]| {
        let mut w = Walker::new(cached);
        let steps: Vec<Step> = packets.iter().map(|p| w.feed(p).unwrap()).collect();
        (steps, w.count())
    };
    let row: &[u8] = &[0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0];
    let end: &[u8] = &[0xFE, 0, 0, 0x02, 0, 0, 0];
    // Metadata follows (a statement's first execution): as without caching.
    assert_eq!(
        walk(&[&[1, 1], COLDEF, row, end]),
        (vec![More, More, Row, Done], 1)
    );
    // Metadata left out: the rows come straight after the count.
    assert_eq!(
        walk(&[&[2, 0], row, row, end]),
        (vec![More, Row, Row, Done], 2)
    );
    // Without DEPRECATE_EOF the EOF that closes the definitions still
    // comes (MariaDB's protocol documentation, column count packet).
    let mut w = Walker::new(Framing {
        deprecate_eof: false,
        ..cached
    });
    let eof: &[u8] = &[0xFE, 0, 0, 0x02, 0];
    assert_eq!(w.feed(&[1, 0]), Ok(More));
    assert_eq!(w.feed(eof), Ok(More));
    assert_eq!(w.feed(row), Ok(Row));
    assert_eq!(w.feed(eof), Ok(Done));
    assert_eq!(w.count(), 1);
    // A count without the flag byte is a protocol error, not a guess.
    assert!(Walker::new(cached).feed(&[1]).is_err());
}

#[test]
fn param_types_are_a_bit_per_text_parameter() {
    assert_eq!(param_types(&[]), Some(0));
    assert_eq!(
        param_types(&[SqlParam::Int(1), SqlParam::Text("a"), SqlParam::Int(2)]),
        Some(0b010)
    );
    assert_eq!(param_types(&vec![SqlParam::Text("a"); 64]), Some(u64::MAX));
    assert_eq!(param_types(&vec![SqlParam::Int(1); 65]), None);
}

#[test]
fn text_rows() {
    assert_eq!(
        text_row(b"\x07sbtest1\xfb\x00"),
        Some(vec![Some(b"sbtest1".to_vec()), None, Some(Vec::new())])
    );
    assert_eq!(text_row(b"\x05abc"), None, "truncated");
}

// -- authentication against a scripted server ------------------------

/// A throwaway RSA key pair made with the `openssl` tool (`None`
/// without it): the directory holding `key.pem`, and the public PEM.
fn test_rsa_keys() -> Option<(tempfile::TempDir, String)> {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key.pem");
    let made = std::process::Command::new("openssl")
        .args(["genrsa", "-out"])
        .arg(&key)
        .arg("2048")
        .output()
        .ok()?;
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let public = std::process::Command::new("openssl")
        .args(["rsa", "-pubout", "-in"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(public.status.success());
    Some((dir, String::from_utf8(public.stdout).unwrap()))
}

const NONCE: &[u8; 20] = b"abcdefgh0123456789AB";

/// How the scripted server answers the handshake response.
#[derive(Clone, Copy, Debug)]
enum Script {
    Sha2Fast,
    Sha2FullRsa,
    SwitchToNative,
    SwitchToEd25519,
    AccessDenied,
}

/// The RSA key pair of the scripted server, when `openssl` made one.
static RSA_KEYS: std::sync::OnceLock<Option<(tempfile::TempDir, String)>> =
    std::sync::OnceLock::new();

async fn read_pkt(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).await.unwrap();
    let mut body = vec![0; le24(&h)];
    s.read_exact(&mut body).await.unwrap();
    (h[3], body)
}

async fn write_pkt(s: &mut TcpStream, seq: u8, body: &[u8]) {
    s.write_all(&packet(seq, body)).await.unwrap();
}

/// Decrypts what the client sent for caching_sha2_password's full
/// authentication: the password and a NUL, XORed with the nonce.
fn check_rsa_password(dir: &std::path::Path, encrypted: &[u8]) {
    let key = dir.join("key.pem");
    let blob = dir.join("blob");
    std::fs::write(&blob, encrypted).unwrap();
    let out = std::process::Command::new("openssl")
        .args([
            "pkeyutl",
            "-decrypt",
            "-pkeyopt",
            "rsa_padding_mode:oaep",
            "-inkey",
        ])
        .arg(&key)
        .arg("-in")
        .arg(&blob)
        .output();
    let out = out.expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plain: Vec<u8> = out
        .stdout
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ NONCE[i % NONCE.len()])
        .collect();
    assert_eq!(plain, b"s3cret\0");
}

/// The scripted server's handshake packet body, offering `extra`
/// capabilities beside the ones every session needs.
fn handshake_body(extra: CapabilityFlags) -> Vec<u8> {
    let caps = CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_LONG_PASSWORD
        | extra;
    let scramble_2 = [&NONCE[8..], &b"\0"[..]].concat();
    let hs = HandshakePacket::new(
        10,
        &b"8.0.36"[..],
        77,
        NONCE[..8].try_into().unwrap(),
        Some(&scramble_2[..]),
        caps,
        45,
        StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        Some(&b"caching_sha2_password"[..]),
    );
    let mut body = Vec::new();
    hs.serialize(&mut body);
    body
}

/// A one-connection server speaking `script`; returns what it checked.
async fn scripted_server(listener: tokio::net::TcpListener, script: Script) -> Vec<String> {
    let (mut s, _) = listener.accept().await.unwrap();
    let mut seen = Vec::new();
    write_pkt(&mut s, 0, &handshake_body(CapabilityFlags::empty())).await;
    let (seq, resp) = read_pkt(&mut s).await;
    assert_eq!(seq, 1);
    let parsed: HandshakeResponse<'_> = ParseBuf(&resp).parse(()).unwrap();
    assert_eq!(parsed.user(), b"lc");
    assert_eq!(parsed.db_name(), Some(&b"db"[..]));
    let sha = mysql_common::scramble::scramble_sha256(NONCE, b"s3cret").unwrap();
    assert_eq!(parsed.scramble_buf(), &sha[..], "caching_sha2 scramble");
    let ok = [0x00, 0, 0, 2, 0, 0, 0];
    match script {
        Script::Sha2Fast => {
            write_pkt(&mut s, 2, &[0x01, 0x03]).await;
            write_pkt(&mut s, 3, &ok).await;
        }
        Script::Sha2FullRsa => {
            write_pkt(&mut s, 2, &[0x01, 0x04]).await;
            assert_eq!(
                read_pkt(&mut s).await,
                (3, vec![0x02]),
                "public key request"
            );
            let (dir, public) = RSA_KEYS.get_or_init(test_rsa_keys).as_ref().unwrap();
            let key = [&[0x01][..], public.as_bytes()].concat();
            write_pkt(&mut s, 4, &key).await;
            let (seq, encrypted) = read_pkt(&mut s).await;
            assert_eq!((seq, encrypted.len()), (5, 256));
            check_rsa_password(dir.path(), &encrypted);
            seen.push("rsa".into());
            write_pkt(&mut s, 6, &ok).await;
        }
        Script::SwitchToNative => {
            let nonce2 = b"ZYXWVUTSRQponmlkjihg";
            let data = [&nonce2[..], &b"\0"[..]].concat();
            let sw = AuthSwitchRequest::new(&b"mysql_native_password"[..], &data[..]);
            let mut body = Vec::new();
            sw.serialize(&mut body);
            write_pkt(&mut s, 2, &body).await;
            let (seq, data) = read_pkt(&mut s).await;
            let want = mysql_common::scramble::scramble_native(nonce2, b"s3cret").unwrap();
            assert_eq!((seq, data), (3, want.to_vec()));
            seen.push("native".into());
            write_pkt(&mut s, 4, &ok).await;
        }
        Script::SwitchToEd25519 => {
            let sw = AuthSwitchRequest::new(&b"client_ed25519"[..], &NONCE[..]);
            let mut body = Vec::new();
            sw.serialize(&mut body);
            write_pkt(&mut s, 2, &body).await;
            return seen;
        }
        Script::AccessDenied => {
            let mut err = vec![0xFF, 0x15, 0x04, b'#'];
            err.extend_from_slice(b"28000Access denied for user 'lc'@'localhost'");
            write_pkt(&mut s, 2, &err).await;
            return seen;
        }
    }
    // One statement: a COM_QUERY answered with an OK.
    let (seq, q) = read_pkt(&mut s).await;
    assert_eq!((seq, q[0]), (0, COM_QUERY));
    write_pkt(&mut s, 1, &[0x00, 0, 0, 2, 0, 0, 0]).await;
    seen.push("query".into());
    seen
}

#[tokio::test(flavor = "current_thread")]
async fn authentication_plugins() {
    for script in [
        Script::Sha2Fast,
        Script::Sha2FullRsa,
        Script::SwitchToNative,
        Script::SwitchToEd25519,
        Script::AccessDenied,
    ] {
        if matches!(script, Script::Sha2FullRsa) && RSA_KEYS.get_or_init(test_rsa_keys).is_none() {
            eprintln!("no openssl tool: caching_sha2_password over RSA is not tested");
            continue;
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(scripted_server(listener, script));
        let d = MysqlDriver::from_target(
            &Target::parse(&format!("mysql://lc:s3cret@127.0.0.1:{port}/db")).unwrap(),
        )
        .unwrap();
        let result = d.connect().await;
        match script {
            Script::SwitchToEd25519 => {
                let err = result.unwrap_err();
                assert_eq!(err.class, ErrorClass::Fatal);
                assert!(err.message.contains("'client_ed25519'"), "{err}");
                assert!(!err.message.contains("s3cret"), "{err}");
                server.await.unwrap();
            }
            Script::AccessDenied => {
                let err = result.unwrap_err();
                assert_eq!(
                    (err.class, err.code.as_deref()),
                    (ErrorClass::Fatal, Some("1045"))
                );
                assert!(!format!("{err:?}").contains("s3cret"));
                server.await.unwrap();
            }
            _ => {
                let mut conn = result.unwrap_or_else(|e| panic!("{script:?}: {e}"));
                assert_eq!(conn.session.id, 77);
                conn.simple("SET @x = 1").await.unwrap();
                let seen = server.await.unwrap();
                assert_eq!(seen.last().map(String::as_str), Some("query"), "{script:?}");
            }
        }
    }
}

/// Bytes sent in the clear after the handshake must not be read as if
/// they had come through TLS: someone on the path could forge replies.
#[tokio::test(flavor = "current_thread")]
async fn bytes_before_tls_refuse_the_connection() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        // The handshake and a forged OK in one write.
        let mut out = packet(0, &handshake_body(CapabilityFlags::CLIENT_SSL));
        out.extend(packet(2, &[0x00, 0, 0, 2, 0, 0, 0]));
        s.write_all(&out).await.unwrap();
        let _ = read_pkt(&mut s).await;
    });
    let d = MysqlDriver::from_target(
        &Target::parse(&format!(
            "mysql://lc:s3cret@127.0.0.1:{port}/db?sslmode=require"
        ))
        .unwrap(),
    )
    .unwrap();
    let err = d.connect().await.unwrap_err();
    assert_eq!(err.class, ErrorClass::Fatal);
    assert!(
        err.message.contains("sent data before TLS started"),
        "{err}"
    );
    server.await.unwrap();
}

/// A call dropped mid-response (its future cancelled, e.g. by a
/// timeout) leaves the stream out of step: the session refuses further
/// calls with a connection error instead of misreading the rest.
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_call_breaks_the_session() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        drop(s);
    });
    let ctx = Arc::new(ctx());
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut conn = MysqlConn {
        session: Session {
            stream: Stream::plain(tcp),
            pb: PacketBuf::new(READ_BUF),
            wbuf: Vec::new(),
            framing: Framing {
                deprecate_eof: true,
                cache_metadata: false,
            },
            id: 1,
            state: State::Ready,
            ctx,
        },
    };
    let stmt = MysqlStmt {
        id: 1,
        params: 1,
        bound: Cell::new(None),
    };
    let late = tokio::time::timeout(
        std::time::Duration::from_millis(50),
        conn.exec(&stmt, &[SqlParam::Int(1)]),
    )
    .await;
    assert!(late.is_err(), "no answer: timed out");
    let err = conn.exec(&stmt, &[SqlParam::Int(1)]).await.unwrap_err();
    assert_eq!(err.class, ErrorClass::Connection);
    assert_eq!(err.code.as_deref(), Some("2013"));
    assert!(err.message.contains("127.0.0.1:3306"), "{err}");
    let err = conn.simple("SELECT 1").await.unwrap_err();
    assert_eq!(err.class, ErrorClass::Connection);
    server.abort();
}
