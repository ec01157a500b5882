use loadcell_core::kv::KvReply;

use super::*;

#[test]
fn integers_cover_the_whole_i64_range() {
    assert_eq!(
        parse_int(b"1000000000000000000"),
        Ok(1_000_000_000_000_000_000)
    );
    assert_eq!(parse_int(b"9223372036854775807"), Ok(i64::MAX));
    assert_eq!(parse_int(b"-9223372036854775808"), Ok(i64::MIN));
    assert!(parse_int(b"9223372036854775808").is_err());
    assert!(parse_int(b"-9223372036854775809").is_err());
    assert!(parse_int(b"12345678901234567890").is_err());
    assert!(parse_int(b"-").is_err() && parse_int(b"1a").is_err());
}

fn settings(url: &str) -> Result<Settings, String> {
    parse_target(&Target::parse(url).unwrap())
}

#[test]
fn crc16_and_slots() {
    // The XMODEM check value.
    assert_eq!(crc16(b"123456789"), 0x31C3);
    assert_eq!(hash_slot(b"foo"), 12182);
    assert_eq!(hash_slot(b"bar"), 5061);
    assert_eq!(hash_slot(b"hello"), 866);
    assert_eq!(
        hash_slot(b"{user1000}.following"),
        hash_slot(b"{user1000}.followers")
    );
    assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
    // Empty tag: the whole key; only the first tag counts.
    assert_eq!(hash_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
    assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
    assert_eq!(hash_slot(b"foo{bar}{zap}"), hash_slot(b"bar"));
    assert_eq!(hash_slot(b"{foo"), crc16(b"{foo") & 16383);
    assert_eq!(hash_slot(b""), 0);
}

#[test]
fn encodes_resp2() {
    let mut b = Vec::new();
    encode_get(&mut b, b"key:1");
    assert_eq!(b, b"*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n");
    b.clear();
    encode_set(&mut b, b"k", b"");
    assert_eq!(b, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    b.clear();
    encode_command(&mut b, &[b"HSET", b"h", b"f", &[0u8, 13, 10]]);
    assert_eq!(
        b,
        b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$3\r\n\x00\r\n\r\n"
    );
    let mut d = [0u8; 20];
    assert_eq!(format_usize(&mut d, 0), b"0");
    assert_eq!(format_usize(&mut d, 1234567890), b"1234567890");
    assert_eq!(
        format_usize(&mut d, usize::MAX),
        usize::MAX.to_string().as_bytes()
    );
    let big = vec![b'x'; 100_000];
    b.clear();
    encode_set(&mut b, b"k", &big);
    assert!(b.starts_with(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\nxxx"));
}

fn one(buf: &[u8]) -> ParseResult<Reply> {
    parse_reply(buf, 0)
}

#[test]
fn parses_replies() {
    let s = |a, b| Span { start: a, end: b };
    assert_eq!(one(b"+OK\r\n"), Ok(Parsed::Done(Reply::Simple(s(1, 3)), 5)));
    assert_eq!(
        one(b"-ERR x\r\n"),
        Ok(Parsed::Done(Reply::Error(s(1, 6)), 8))
    );
    assert_eq!(one(b":-42\r\n"), Ok(Parsed::Done(Reply::Int(-42), 6)));
    assert_eq!(
        one(b"$3\r\na\r\n\r\n"),
        Ok(Parsed::Done(Reply::Bulk(s(4, 7)), 9))
    );
    assert_eq!(
        one(b"$0\r\n\r\n"),
        Ok(Parsed::Done(Reply::Bulk(s(4, 4)), 6))
    );
    assert_eq!(one(b"$-1\r\n"), Ok(Parsed::Done(Reply::Nil, 5)));
    assert_eq!(one(b"*-1\r\n"), Ok(Parsed::Done(Reply::Nil, 5)));
    assert_eq!(
        one(b"*0\r\n"),
        Ok(Parsed::Done(Reply::Elements(0, s(4, 4)), 4))
    );
    let nested = b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n+x\r\n+next\r\n";
    let end = nested.len() - 7;
    assert_eq!(
        one(nested),
        Ok(Parsed::Done(Reply::Elements(3, s(4, end)), end))
    );
    // The elements, decoded one at a time: a bulk string's bytes, None
    // for anything else (a nested array stepped over whole).
    let KvReply::Array(a) = kv_reply(Reply::Elements(3, s(4, end)), nested) else {
        panic!()
    };
    assert_eq!(a.len(), 3);
    assert_eq!(a.strings().collect::<Vec<_>>(), [None, None, None]);
    let members = b"*3\r\n$3\r\nabc\r\n*1\r\n$1\r\nz\r\n$0\r\n\r\n";
    let Ok(Parsed::Done(reply, _)) = one(members) else {
        panic!()
    };
    let KvReply::Array(a) = kv_reply(reply, members) else {
        panic!()
    };
    let want: [Option<&[u8]>; 3] = [Some(b"abc"), None, Some(b"")];
    assert_eq!(a.strings().collect::<Vec<_>>(), want);
    // Two replies back to back.
    let two = b"$1\r\nv\r\n+OK\r\n";
    let Ok(Parsed::Done(_, next)) = parse_reply(two, 0) else {
        panic!()
    };
    assert_eq!(
        parse_reply(two, next),
        Ok(Parsed::Done(Reply::Simple(s(8, 10)), 12))
    );
}

#[test]
fn partial_buffers_are_incomplete_at_every_cut() {
    let full: &[u8] =
        b"$5\r\nhello\r\n*2\r\n$1\r\na\r\n*1\r\n:7\r\n-WRONGTYPE bad\r\n$-1\r\n+OK\r\n";
    // Every prefix parses as far as it is complete, never errs.
    for cut in 0..full.len() {
        let buf = &full[..cut];
        let mut pos = 0;
        loop {
            match parse_reply(buf, pos) {
                Ok(Parsed::Done(_, next)) => pos = next,
                Ok(Parsed::Incomplete(need)) => {
                    assert!(need > buf.len(), "cut {cut}: need {need}");
                    break;
                }
                Err(e) => panic!("cut {cut}: {e}"),
            }
        }
    }
    let mut pos = 0;
    let mut n = 0;
    while pos < full.len() {
        let Ok(Parsed::Done(_, next)) = parse_reply(full, pos) else {
            panic!()
        };
        pos = next;
        n += 1;
    }
    assert_eq!(n, 5);
    // A bulk header tells how much is needed in total.
    assert_eq!(one(b"$100\r\nab"), Ok(Parsed::Incomplete(6 + 102)));
}

#[test]
fn rejects_garbage() {
    assert!(one(b"HTTP/1.1 400 Bad Request\r\n").is_err());
    assert!(one(b"$abc\r\n").is_err());
    assert!(one(b"$3\r\nabcXY").is_err());
    assert!(one(b"+OK\n").is_err());
    assert!(one(b":99999999999999999999\r\n").is_err());
    let e = protocol_error("h:1", "unknown reply type");
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(
        e.message.contains("h:1") && e.message.contains("Redis"),
        "{e}"
    );
}

#[test]
fn owned_values() {
    let buf = b"*2\r\n*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n*3\r\n:5461\r\n:16383\r\n*2\r\n$0\r\n\r\n:7001\r\n";
    let Ok(Parsed::Done(v, used)) = parse_value(buf, 0, 0) else {
        panic!()
    };
    assert_eq!(used, buf.len());
    let ranges = parse_cluster_slots(&v, "seed").unwrap();
    assert_eq!(
        ranges,
        vec![
            (0, 5460, "127.0.0.1".to_string(), 7000),
            (5461, 16383, "seed".to_string(), 7001)
        ]
    );
    assert!(matches!(
        parse_value(&buf[..buf.len() - 3], 0, 0),
        Ok(Parsed::Incomplete(_))
    ));
    assert!(parse_cluster_slots(&Value::Int(1), "s").is_err());
    // A NULL host (cluster-preferred-endpoint-type unknown-endpoint).
    let buf = b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$-1\r\n:7002\r\n";
    let Ok(Parsed::Done(v, _)) = parse_value(buf, 0, 0) else {
        panic!()
    };
    assert_eq!(
        parse_cluster_slots(&v, "seed").unwrap(),
        vec![(0, 16383, "seed".to_string(), 7002)]
    );
}

#[test]
fn redirects() {
    assert_eq!(
        parse_redirect(b"MOVED 3999 127.0.0.1:6381", "h"),
        Some((false, 3999, "127.0.0.1".into(), 6381))
    );
    assert_eq!(
        parse_redirect(b"ASK 3999 10.0.0.2:7000", "h"),
        Some((true, 3999, "10.0.0.2".into(), 7000))
    );
    assert_eq!(
        parse_redirect(b"MOVED 1 :7000", "h"),
        Some((false, 1, "h".into(), 7000))
    );
    assert_eq!(
        parse_redirect(b"MOVED 1 [::1]:7000", "h"),
        Some((false, 1, "::1".into(), 7000))
    );
    assert_eq!(parse_redirect(b"MOVED 99999 h:1", "h"), None);
    assert_eq!(parse_redirect(b"ERR MOVED", "h"), None);
}

#[test]
fn parses_urls() {
    let s = settings("redis://127.0.0.1:6380").unwrap();
    assert_eq!(s.hosts, vec![("127.0.0.1".into(), 6380)]);
    assert!(!s.cluster);
    assert_eq!((s.user, s.password, s.db), (None, None, None));
    assert_eq!(s.sslmode, SslMode::Disable);

    let s = settings("redis://:p%40ss@db.example/3").unwrap();
    assert_eq!(s.hosts, vec![("db.example".into(), 6379)]);
    assert_eq!(s.password.as_deref(), Some("p@ss"));
    assert_eq!(s.user, None);
    assert_eq!(s.db, Some(3));
    assert!(!format!("{s:?}").contains("p@ss"));

    let s = settings("redis://app:pw@h:1/0").unwrap();
    assert_eq!(s.user.as_deref(), Some("app"));
    assert_eq!(s.db, None);

    let s = settings("rediss://h:6380?sslmode=require").unwrap();
    assert_eq!(s.sslmode, SslMode::Require);
    let s = settings("rediss://h").unwrap();
    assert_eq!(s.sslmode, SslMode::VerifyFull);
    let s = settings("rediss://h/?sslrootcert=/ca.pem").unwrap();
    assert_eq!(
        s.sslrootcert.as_deref(),
        Some(std::path::Path::new("/ca.pem"))
    );

    let s = settings("redis+cluster://a:7000,b:7001,[::1]:7002").unwrap();
    assert!(s.cluster);
    assert_eq!(
        s.hosts,
        vec![("a".into(), 7000), ("b".into(), 7001), ("::1".into(), 7002)]
    );
    let s = settings("redis+cluster://:pw@a:7000").unwrap();
    assert_eq!(s.hosts.len(), 1);
    assert_eq!(s.password.as_deref(), Some("pw"));
    let s = settings("redis+cluster://a:7000,b?sslmode=require").unwrap();
    assert_eq!(s.sslmode, SslMode::Require);
    assert_eq!(s.hosts[1], ("b".into(), 6379));
}

#[test]
fn rejects_bad_urls() {
    for (url, wants) in [
        ("redis://h/x", "database number"),
        ("redis://h/1/2", "database number"),
        ("redis://h?pool=3", "'pool'"),
        ("redis://h?sslmode=require", "rediss://"),
        ("rediss://h?sslmode=disable", "redis://"),
        ("rediss://h?sslmode=prefer", "prefer"),
        ("redis://user@h", "needs a password"),
        ("redis+cluster://a:1,b:2/3", "database 0"),
        ("redis://a:1,b:2", "redis+cluster"),
    ] {
        let err = settings(url).unwrap_err();
        assert!(err.contains(wants), "{url}: {err}");
    }
    let t = Target::parse("redis://u:hunter2@h/?bogus=1").unwrap();
    let err = RedisDriver::from_target(&t).unwrap_err();
    assert!(!err.contains("hunter2"), "{err}");
    let t = Target::parse("rediss://h/?sslrootcert=/nonexistent/ca.pem").unwrap();
    let err = RedisDriver::from_target(&t).unwrap_err();
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
}

#[test]
fn driver_endpoint_has_no_secret() {
    let t = Target::parse("redis://:hunter2@10.1.2.3:6390/1").unwrap();
    let d = RedisDriver::from_target(&t).unwrap();
    assert_eq!(d.endpoint(), "10.1.2.3:6390");
    assert!(!d.shared.settings.cluster);
    assert!(!format!("{d:?}").contains("hunter2"));
    let t = Target::parse("redis+cluster://:hunter2@a:1,b:2").unwrap();
    let d = RedisDriver::from_target(&t).unwrap();
    assert_eq!(d.endpoint(), "a:1,b:2");
    assert!(d.shared.settings.cluster);
    assert!(d.shared.tls.is_none());
    let t = Target::parse("rediss://h:1").unwrap();
    let d = RedisDriver::from_target(&t).unwrap();
    assert!(d.shared.tls.is_some());
    assert_eq!(d.endpoint(), "h:1");
}

#[test]
fn classifies_error_replies() {
    let ep = "127.0.0.1:6379";
    let e = reply_error(
        b"WRONGTYPE Operation against a key holding the wrong kind of value",
        ep,
    );
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(e.code.as_deref(), Some("WRONGTYPE"));
    assert_eq!(
        e.to_string(),
        "Operation against a key holding the wrong kind of value (code WRONGTYPE)"
    );
    let e = reply_error(b"ERR unknown command 'FOO', with args beginning with: ", ep);
    assert_eq!(
        (e.class, e.code.as_deref()),
        (ErrorClass::Fatal, Some("ERR"))
    );
    assert!(e.message.starts_with("unknown command 'FOO'"), "{e}");
    let e = reply_error(b"ERR max number of clients reached", ep);
    assert_eq!(e.class, ErrorClass::Connection, "{e}");
    assert!(!e.message.contains("authentication"), "{e}");
    for code in ["LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN"] {
        let e = reply_error(format!("{code} something").as_bytes(), ep);
        assert_eq!(e.class, ErrorClass::Retryable, "{code}");
        assert_eq!(e.code.as_deref(), Some(code));
    }
    let auth = "authentication failed at 127.0.0.1:6379: check the user and password in --target";
    for text in [
        &b"WRONGPASS invalid username-password pair or user is disabled."[..],
        b"ERR invalid password",
    ] {
        let e = reply_error(text, ep);
        assert_eq!(e.class, ErrorClass::Fatal);
        assert_eq!(e.message, auth);
    }
    let e = reply_error(b"NOAUTH Authentication required.", ep);
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e
        .message
        .starts_with("authentication failed at 127.0.0.1:6379"));
    let e = auth_error(
        "ERR AUTH <password> called without any password configured for the default user. \
         Are you sure your configuration is correct?",
        ep,
    );
    assert!(
        e.message.starts_with(auth) && e.message.contains("no password set"),
        "{e}"
    );
    let e = reply_error(b"MOVED 12182 127.0.0.1:7001", ep);
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e.message.contains("redis+cluster://"), "{e}");
    // No code word: all of it is the message.
    let e = reply_error(b"oops lower case", ep);
    assert_eq!(e.message, "oops lower case");
}

#[test]
fn classifies_io_errors() {
    let ep = "127.0.0.1:6379";
    let e = io_error(&io::ErrorKind::ConnectionRefused.into(), ep, Phase::Connect);
    assert_eq!(e.class, ErrorClass::Connection);
    assert_eq!(
        e.message,
        "cannot connect to 127.0.0.1:6379: connection refused (is the server running?)"
    );
    let e = io_error(&io::ErrorKind::ConnectionReset.into(), ep, Phase::Use);
    assert_eq!(e.class, ErrorClass::Connection);
    assert_eq!(
        e.message,
        "connection to 127.0.0.1:6379 lost: connection reset by the server"
    );
    let e = io_error(&io::ErrorKind::UnexpectedEof.into(), ep, Phase::Use);
    assert_eq!(
        e.message,
        "connection to 127.0.0.1:6379 lost: the server closed the connection"
    );
    let dns = io::Error::other("failed to lookup address information: Name or service not known");
    assert_eq!(io_error(&dns, ep, Phase::Connect).class, ErrorClass::Fatal);
    let tls = io::Error::new(
        io::ErrorKind::InvalidData,
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
    );
    let e = io_error(&tls, ep, Phase::Connect);
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(
        e.message.contains("TLS handshake with 127.0.0.1:6379"),
        "{e}"
    );
    assert!(e.message.contains("sslrootcert"), "{e}");
    assert_eq!(io_error(&tls, ep, Phase::Use).class, ErrorClass::Connection);
}

#[test]
fn server_products() {
    let i = server_info_of("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n");
    assert_eq!(
        (i.product.as_str(), i.version.as_str()),
        ("Redis", "7.0.15")
    );
    let i = server_info_of(
        "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n",
    );
    assert_eq!(
        (i.product.as_str(), i.version.as_str()),
        ("Valkey", "8.0.1")
    );
    let i = server_info_of("redis_version:6.3.4\r\nexecutable:/usr/bin/keydb-server\r\n");
    assert_eq!((i.product.as_str(), i.version.as_str()), ("KeyDB", "6.3.4"));
}

#[test]
fn claim_idle_is_a_duration_above_zero() {
    let default = settings("redis://h").unwrap();
    assert_eq!(default.claim_idle, DEFAULT_CLAIM_IDLE);
    let given = settings("redis://h?claim_idle=1500ms").unwrap();
    assert_eq!(given.claim_idle, std::time::Duration::from_millis(1500));
    for bad in ["0s", "soon"] {
        let e = settings(&format!("redis://h?claim_idle={bad}")).unwrap_err();
        assert!(e.starts_with(&format!("claim_idle '{bad}'")), "{e}");
    }
}
