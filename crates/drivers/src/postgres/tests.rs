use loadcell_core::sql::SqlParam;
use loadcell_core::ErrorClass;

use super::*;

fn settings(raw: &str) -> Result<Settings, String> {
    Settings::parse(&Target::parse(raw).unwrap())
}

fn ctx() -> ErrCtx {
    ErrCtx {
        endpoint: "127.0.0.1:5432".to_string(),
        user: Some("lc".to_string()),
        dbname: Some("loadcell".to_string()),
        password: Some("s3cret-pw".to_string()),
        sslmode: SslMode::Disable,
    }
}

fn db(code: &str, message: &str) -> Failure {
    Failure::Db {
        code: code.to_string(),
        message: message.to_string(),
        hint: None,
        position: None,
    }
}

#[test]
fn full_url() {
    let s = settings("postgres://lc:lcpass@db.example:6543/bench?sslmode=require").unwrap();
    assert_eq!(s.host, "db.example");
    assert_eq!(s.port, 6543);
    assert_eq!(s.user.as_deref(), Some("lc"));
    assert_eq!(s.password.as_deref(), Some("lcpass"));
    assert_eq!(s.dbname.as_deref(), Some("bench"));
    assert_eq!(s.sslmode, SslMode::Require);
    assert_eq!(s.sslrootcert, None);
    assert_eq!(s.endpoint(), "db.example:6543");
    let shown = format!("{s:?}");
    assert!(!shown.contains("lcpass"), "{shown}");
}

#[test]
fn defaults() {
    let s = settings("postgresql://u@127.0.0.1").unwrap();
    assert_eq!(s.port, 5432);
    assert_eq!(s.user.as_deref(), Some("u"));
    assert_eq!(s.password, None);
    assert_eq!(s.dbname, None);
    assert_eq!(s.sslmode, SslMode::Disable);
    assert_eq!(s.endpoint(), "127.0.0.1:5432");
    let s = settings("postgres://h/").unwrap();
    assert_eq!(s.user, None);
    assert_eq!(s.dbname, None);
}

#[test]
fn percent_escapes_and_ipv6() {
    let s = settings("postgres://us%40er:p%3Aw%2Fd@[::1]:5433/my%20db").unwrap();
    assert_eq!(s.user.as_deref(), Some("us@er"));
    assert_eq!(s.password.as_deref(), Some("p:w/d"));
    assert_eq!(s.dbname.as_deref(), Some("my db"));
    assert_eq!(s.host, "::1");
    assert_eq!(s.endpoint(), "[::1]:5433");
    assert_eq!(
        settings("postgres://u:a%2@h/db").unwrap_err(),
        "bad %-escape in the password: a '%' itself is written %25"
    );
}

#[test]
fn the_first_reply_is_told_from_its_first_bytes() {
    // An authentication request, an error (too many clients).
    assert_eq!(
        startup_reply_start_ok(b"R\x00\x00\x00\x08\x00\x00\x00\x00"),
        Some(true)
    );
    assert_eq!(
        startup_reply_start_ok(b"E\x00\x00\x00\x60SFATAL"),
        Some(true)
    );
    // Too few bytes to tell, or already enough to refuse.
    assert_eq!(startup_reply_start_ok(b""), None);
    assert_eq!(startup_reply_start_ok(b"R\x00\x00"), None);
    assert_eq!(startup_reply_start_ok(b"["), Some(false));
    assert_eq!(startup_reply_start_ok(b"-ERR"), Some(false));
    assert_eq!(startup_reply_start_ok(b"HTTP/1.1"), Some(false));
    // memcached's "ERROR": an 'E' with an impossible length.
    assert_eq!(startup_reply_start_ok(b"ERROR\r\n"), Some(false));
}

#[test]
fn ssl_parameters() {
    let s = settings("postgres://h/db?sslmode=verify-full&sslrootcert=/etc/ca.pem").unwrap();
    assert_eq!(s.sslmode, SslMode::VerifyFull);
    assert_eq!(s.sslrootcert, Some(PathBuf::from("/etc/ca.pem")));
    let err = settings("postgres://h/db?sslmode=sometimes").unwrap_err();
    assert!(err.contains("unknown sslmode 'sometimes'"), "{err}");
    let err = settings("postgres://h/db?sslrootcert=").unwrap_err();
    assert!(err.contains("sslrootcert"), "{err}");
}

#[test]
fn unknown_parameters_are_named() {
    let err = settings("postgres://h/db?foo=1&sslmode=disable&bar=2&foo=3").unwrap_err();
    assert_eq!(
        err,
        "unknown parameters 'foo', 'bar'; accepted: sslmode, sslrootcert"
    );
    let err = settings("postgres://h/db?connect_timeout=5").unwrap_err();
    assert_eq!(
        err,
        "unknown parameter 'connect_timeout'; accepted: sslmode, sslrootcert"
    );
}

#[test]
fn bad_paths() {
    let err = settings("postgres://h/a/b").unwrap_err();
    assert!(err.contains("/a/b"), "{err}");
}

#[test]
fn from_target_builds_and_redacts() {
    let t = Target::parse("postgres://lc:hunter22@10.1.2.3:5433/x?sslmode=prefer").unwrap();
    let d = PostgresDriver::from_target(&t).unwrap();
    assert_eq!(d.endpoint(), "10.1.2.3:5433");
    assert!(d.tls.is_some());
    assert!(!format!("{d:?}").contains("hunter22"));
    assert_eq!(d.settings.dbname.as_deref(), Some("x"));
    assert_eq!(d.settings.sslmode, SslMode::Prefer);

    let t = Target::parse("postgres://lc@h/x?sslmode=verify-ca").unwrap();
    let d = PostgresDriver::from_target(&t).unwrap();
    assert!(d.tls.is_some());
    assert_eq!(d.user(), "lc");
    let t = Target::parse("postgres://lc@h/x").unwrap();
    assert!(PostgresDriver::from_target(&t).unwrap().tls.is_none());

    let t =
        Target::parse("postgres://lc@h/x?sslmode=verify-full&sslrootcert=/no/such.pem").unwrap();
    let err = PostgresDriver::from_target(&t).unwrap_err();
    assert!(err.contains("/no/such.pem"), "{err}");
    let t = Target::parse("postgres://lc@h/x?sslrootcert=/no/such.pem").unwrap();
    let err = PostgresDriver::from_target(&t).unwrap_err();
    assert!(err.contains("sslmode=disable"), "{err}");
}

#[test]
fn sqlstate_classes() {
    for code in ["40P01", "40001", "23505", "55P03"] {
        assert_eq!(sqlstate_class(code), ErrorClass::Retryable, "{code}");
    }
    for code in [
        "57P01", "57P02", "57P03", "53300", "08006", "08001", "08P01",
    ] {
        assert_eq!(sqlstate_class(code), ErrorClass::Connection, "{code}");
    }
    for code in ["28P01", "28000", "3D000", "42P01", "42601", "22003"] {
        assert_eq!(sqlstate_class(code), ErrorClass::Fatal, "{code}");
    }
}

#[test]
fn auth_failure_message() {
    let e = describe(
        db("28P01", "password authentication failed for user \"lc\""),
        &ctx(),
        Phase::Connect,
    );
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(e.code.as_deref(), Some("28P01"));
    assert_eq!(
        e.message,
        "password authentication failed for user 'lc' at 127.0.0.1:5432: check the user and password in --target"
    );
}

#[test]
fn never_shows_the_password() {
    let e = describe(
        Failure::Other("weird s3cret-pw echo".to_string()),
        &ctx(),
        Phase::Session,
    );
    assert_eq!(e.message, "weird *** echo");
}

#[test]
fn connect_failures() {
    let refused = Failure::Connect {
        kind: io::ErrorKind::ConnectionRefused,
        text: "Connection refused (os error 111)".to_string(),
    };
    let e = describe(refused, &ctx(), Phase::Connect);
    assert_eq!(e.class, ErrorClass::Connection);
    assert_eq!(
        e.message,
        "cannot connect to 127.0.0.1:5432: connection refused (is the server running?)"
    );
    let e = describe(
        db("3D000", "database \"nope\" does not exist"),
        &ctx(),
        Phase::Connect,
    );
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e
        .message
        .contains("\"nope\" does not exist at 127.0.0.1:5432"));
    let e = describe(
        Failure::Tls {
            kind: None,
            text: "server does not support TLS".to_string(),
        },
        &ErrCtx {
            sslmode: SslMode::Require,
            ..ctx()
        },
        Phase::Connect,
    );
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e.message.contains("sslmode=require"), "{}", e.message);
    let e = describe(
        Failure::Tls {
            kind: Some(io::ErrorKind::InvalidData),
            text: "invalid peer certificate: UnknownIssuer".to_string(),
        },
        &ctx(),
        Phase::Connect,
    );
    assert_eq!(e.class, ErrorClass::Fatal);
    let e = describe(
        Failure::Tls {
            kind: Some(io::ErrorKind::ConnectionReset),
            text: "reset".to_string(),
        },
        &ctx(),
        Phase::Connect,
    );
    assert_eq!(e.class, ErrorClass::Connection);
}

#[test]
fn session_failures() {
    let e = describe(Failure::Closed, &ctx(), Phase::Session);
    assert_eq!(e.class, ErrorClass::Connection);
    assert_eq!(e.message, "connection to 127.0.0.1:5432 closed");

    let e = describe(
        Failure::Lost(Box::new(Failure::Closed)),
        &ctx(),
        Phase::Session,
    );
    assert_eq!(
        e.message,
        "connection to 127.0.0.1:5432 lost: the server closed the connection"
    );

    let lost = Failure::Lost(Box::new(Failure::Io {
        kind: io::ErrorKind::ConnectionReset,
        text: "Connection reset by peer (os error 104)".to_string(),
    }));
    let e = describe(lost, &ctx(), Phase::Session);
    assert_eq!(e.class, ErrorClass::Connection);
    assert_eq!(
        e.message,
        "connection to 127.0.0.1:5432 lost: Connection reset by peer (os error 104)"
    );

    let shutdown = Failure::Lost(Box::new(db(
        "57P01",
        "terminating connection due to administrator command",
    )));
    let e = describe(shutdown, &ctx(), Phase::Session);
    assert_eq!(e.class, ErrorClass::Connection);
    assert_eq!(e.code.as_deref(), Some("57P01"));
    assert!(e
        .message
        .starts_with("server at 127.0.0.1:5432 closed the connection"));

    let e = describe(db("40P01", "deadlock detected"), &ctx(), Phase::Session);
    assert_eq!(
        (e.class, e.message.as_str()),
        (ErrorClass::Retryable, "deadlock detected")
    );

    let syntax = Failure::Db {
        code: "42601".to_string(),
        message: "syntax error at or near \"SELEC\"".to_string(),
        hint: None,
        position: Some(1),
    };
    let e = describe(syntax, &ctx(), Phase::Session);
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(
        e.message,
        "syntax error at or near \"SELEC\" (at character 1)"
    );
    assert_eq!(
        e.to_string(),
        "syntax error at or near \"SELEC\" (at character 1) (code 42601)"
    );
}

#[test]
fn long_statements_are_shortened() {
    assert_eq!(shorten(" SELECT 1 "), "SELECT 1");
    let long = format!("INSERT INTO t VALUES {}", "(1, 'é'),".repeat(100));
    let short = shorten(&long);
    assert!(short.len() <= 163 && short.ends_with("..."), "{short}");
}

/// One backend message: type, length, body.
fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

fn data_row(columns: &[Option<&str>]) -> Vec<u8> {
    let mut body = (columns.len() as i16).to_be_bytes().to_vec();
    for c in columns {
        match c {
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(v) => {
                body.extend_from_slice(&(v.len() as i32).to_be_bytes());
                body.extend_from_slice(v.as_bytes());
            }
        }
    }
    msg(b'D', &body)
}

fn fields(pairs: &[(u8, &str)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (k, v) in pairs {
        body.push(*k);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    body
}

/// The response to a point select with a notice and a parameter
/// change in the middle.
fn select_response() -> Vec<u8> {
    let mut r = msg(b'2', b"");
    r.extend(data_row(&[Some("abc"), Some("1")]));
    r.extend(msg(
        b'N',
        &fields(&[(b'S', "WARNING"), (b'C', "01000"), (b'M', "hm")]),
    ));
    r.extend(data_row(&[None, Some("2")]));
    r.extend(msg(b'S', b"TimeZone\0UTC\0"));
    r.extend(msg(b'C', b"SELECT 2\0"));
    r.extend(msg(b'Z', b"I"));
    r
}

#[test]
fn command_complete_tags() {
    assert_eq!(command_rows(b"SELECT 5\0"), 5);
    assert_eq!(command_rows(b"UPDATE 1\0"), 1);
    assert_eq!(command_rows(b"INSERT 0 1\0"), 1);
    assert_eq!(command_rows(b"INSERT 0 250\0"), 250);
    assert_eq!(command_rows(b"DELETE 0\0"), 0);
    assert_eq!(command_rows(b"BEGIN\0"), 0);
    assert_eq!(command_rows(b"COMMIT\0"), 0);
    assert_eq!(command_rows(b"CREATE TABLE\0"), 0);
    assert_eq!(command_rows(b"SELECT 18446744073709551615\0"), 0);
    assert_eq!(
        command_rows(b"SELECT 1844674407370955161\0"),
        1844674407370955161
    );
    assert_eq!(command_rows(b"COPY 3"), 3);
    assert_eq!(command_rows(b""), 0);
}

#[test]
fn frames_are_walked_to_ready_for_query() {
    let buf = select_response();
    let mut pos = 0;
    let mut out = Outcome::default();
    assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done));
    assert_eq!(pos, buf.len());
    assert_eq!(out.rows, 2);
    assert!(out.error.is_none());
    assert!(out.first_column.is_none());

    // Collecting the first column (query_strings).
    let mut pos = 0;
    let mut out = Outcome {
        first_column: Some(Vec::new()),
        ..Outcome::default()
    };
    assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done));
    assert_eq!(out.first_column, Some(vec![Some("abc".to_string()), None]));

    // Bytes after ReadyForQuery are left for the next response.
    let mut two = buf.clone();
    two.extend(msg(b'N', &fields(&[(b'M', "later")])));
    let mut pos = 0;
    let mut out = Outcome::default();
    assert_eq!(scan(&two, &mut pos, &mut out), Ok(Scan::Done));
    assert_eq!(pos, buf.len());
}

#[test]
fn frames_split_across_reads() {
    let buf = select_response();
    // Every split point: the first part, then the whole, as two reads
    // into one buffer would give.
    for cut in 0..buf.len() {
        let mut pos = 0;
        let mut out = Outcome::default();
        let first = scan(&buf[..cut], &mut pos, &mut out).unwrap();
        let Scan::Need(need) = first else {
            panic!("cut {cut}: {first:?}");
        };
        assert!(
            pos <= cut && pos + need > cut,
            "cut {cut}: pos {pos} need {need}"
        );
        assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done), "cut {cut}");
        assert_eq!(out.rows, 2, "cut {cut}");
        assert_eq!(pos, buf.len());
    }
}

#[test]
fn errors_are_kept_until_ready_for_query() {
    let mut buf = msg(
        b'E',
        &fields(&[
            (b'S', "ERROR"),
            (b'V', "ERROR"),
            (b'C', "42P01"),
            (b'M', "relation \"nope\" does not exist"),
            (b'P', "15"),
            (b'H', "create it first"),
            (b'F', "parse_relation.c"),
        ]),
    );
    buf.extend(msg(b'Z', b"I"));
    let mut pos = 0;
    let mut out = Outcome::default();
    let mid = buf.len() - 1;
    assert_eq!(scan(&buf[..mid], &mut pos, &mut out), Ok(Scan::Need(6)));
    assert!(out.error.is_some(), "the error is taken before the end");
    assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done));
    assert_eq!(
        out.error.map(|e| *e),
        Some(Failure::Db {
            code: "42P01".to_string(),
            message: "relation \"nope\" does not exist".to_string(),
            hint: Some("create it first".to_string()),
            position: Some(15),
        })
    );
    let e = describe(
        db_failure(&fields(&[
            (b'C', "40001"),
            (b'M', "could not serialize access"),
        ])),
        &ctx(),
        Phase::Session,
    );
    assert_eq!(e.class, ErrorClass::Retryable);
    assert_eq!(e.code.as_deref(), Some("40001"));
    assert_eq!(e.message, "could not serialize access");
    // Truncated fields do not panic.
    assert!(matches!(db_failure(b"Cabc"), Failure::Db { .. }));
}

#[test]
fn bad_frames_are_protocol_errors() {
    let mut pos = 0;
    let mut out = Outcome::default();
    let e = scan(&msg(b'?', b""), &mut pos, &mut out).unwrap_err();
    assert_eq!(
        e,
        Failure::Other("protocol error: unexpected message '?'".to_string())
    );
    let mut pos = 0;
    let e = scan(b"D\0\0\0\x02xx", &mut pos, &mut out).unwrap_err();
    assert!(
        matches!(e, Failure::Other(ref t) if t.contains("bad length")),
        "{e:?}"
    );
    let e = describe(Failure::Lost(Box::new(e)), &ctx(), Phase::Session);
    assert_eq!(e.class, ErrorClass::Connection);
    // A large frame asks for all of itself.
    let big = msg(b'D', &vec![0; 100_000]);
    let mut pos = 0;
    assert_eq!(
        scan(&big[..10], &mut pos, &mut out),
        Ok(Scan::Need(100_005))
    );
}

#[test]
fn parameter_descriptions() {
    let mut body = 3u16.to_be_bytes().to_vec();
    for oid in [23u32, 1042, 20] {
        body.extend_from_slice(&oid.to_be_bytes());
    }
    let mut buf = msg(b'1', b"");
    buf.extend(msg(b't', &body));
    buf.extend(msg(b'n', b""));
    buf.extend(msg(b'Z', b"I"));
    let mut pos = 0;
    let mut out = Outcome {
        param_types: Some(Vec::new()),
        ..Outcome::default()
    };
    assert_eq!(scan(&buf, &mut pos, &mut out), Ok(Scan::Done));
    assert_eq!(out.param_types, Some(vec![23, 1042, 20]));
    assert!(parameter_types(&[0, 2, 0, 0]).is_err());
}

#[test]
fn exec_encoding() {
    let mut buf = BytesMut::new();
    encode_exec(
        &mut buf,
        "s3",
        &[
            SqlParam::Int(-42),
            SqlParam::Text("héllo"),
            SqlParam::Int(i64::MIN),
        ],
    );
    let mut want = Vec::new();
    // Bind: portal "", statement "s3", no format codes (all text),
    // three values, no result format codes (all text).
    let mut bind = b"\0s3\0".to_vec();
    bind.extend_from_slice(&0i16.to_be_bytes());
    bind.extend_from_slice(&3i16.to_be_bytes());
    for v in ["-42", "héllo", "-9223372036854775808"] {
        bind.extend_from_slice(&(v.len() as i32).to_be_bytes());
        bind.extend_from_slice(v.as_bytes());
    }
    bind.extend_from_slice(&0i16.to_be_bytes());
    want.extend(msg(b'B', &bind));
    want.extend(msg(b'E', b"\0\0\0\0\0"));
    want.extend(msg(b'S', b""));
    assert_eq!(&buf[..], &want[..]);

    // The buffer is reused: no new allocation once it is large enough.
    let cap = buf.capacity();
    for _ in 0..100 {
        buf.clear();
        encode_exec(&mut buf, "s3", &[SqlParam::Int(i64::MAX), SqlParam::Int(0)]);
    }
    assert_eq!(buf.capacity(), cap);
    let text = String::from_utf8_lossy(&buf);
    assert!(text.contains("9223372036854775807"), "{text}");
}

#[test]
fn params_are_checked_against_the_inferred_types() {
    assert_eq!(
        check_params(&[23, 1042], &[SqlParam::Int(7), SqlParam::Text("x")]),
        Ok(())
    );
    assert_eq!(check_params(&[20], &[SqlParam::Int(1 << 40)]), Ok(()));
    assert_eq!(check_params(&[1700], &[SqlParam::Int(1 << 40)]), Ok(()));
    // Text into an integer: the server parses it and says if it is bad.
    assert_eq!(check_params(&[23], &[SqlParam::Text("seven")]), Ok(()));
    assert_eq!(
        check_params(&[23], &[SqlParam::Int(1 << 40)]),
        Err(Failure::Other(
            "cannot bind parameter $1: value 1099511627776 is out of range for type int4"
                .to_string()
        ))
    );
    assert_eq!(
        check_params(&[23, 21], &[SqlParam::Int(1), SqlParam::Int(40000)]),
        Err(Failure::Other(
            "cannot bind parameter $2: value 40000 is out of range for type int2".to_string()
        ))
    );
    let e = describe(
        check_params(&[23], &[]).unwrap_err(),
        &ctx(),
        Phase::Session,
    );
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(e.code, None);
    assert_eq!(e.message, "the statement takes 1 parameter, 0 given");
}

#[test]
fn authentication_messages() {
    let mut body = 10i32.to_be_bytes().to_vec();
    body.extend_from_slice(b"SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0");
    let (code, data) = auth_request(&body).unwrap();
    assert_eq!(code, 10);
    assert_eq!(cstrings(data), vec!["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"]);
    assert!(auth_request(b"\0\0").is_err());
    let e = describe(no_password(), &ctx(), Phase::Connect);
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(
        e.message,
        "authentication at 127.0.0.1:5432 failed: the server asked for a password and --target has none"
    );
}
