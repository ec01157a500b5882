//! The PostgreSQL driver against a real PostgreSQL started by
//! loadcell-testkit. Each test function starts one server and checks
//! several things in turn (initdb takes a couple of seconds).

#![allow(async_fn_in_trait)]

use std::future::Future;
use std::time::Duration;

use loadcell_core::sql::{Dialect, SqlConn, SqlParam};
use loadcell_core::{Driver, DriverError, ErrorClass, Target};
use loadcell_drivers::postgres::{PostgresConn, PostgresDriver};
use loadcell_testkit::TestServer;

mod sql_catalog;

/// Driver futures are not `Send`: run them as the engine does, on a
/// current-thread runtime inside a `LocalSet`.
fn run<F: Future>(f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio::task::LocalSet::new().block_on(&runtime, f)
}

fn start() -> TestServer {
    loadcell_testkit::postgres().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"))
}

fn driver(url: &str) -> PostgresDriver {
    PostgresDriver::from_target(&Target::parse(url).expect("target")).expect("driver")
}

async fn connect(d: &PostgresDriver) -> PostgresConn {
    match tokio::time::timeout(Duration::from_secs(20), d.connect()).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => panic!("connect to {} failed: {e}", d.endpoint()),
        Err(_) => panic!("connect to {} timed out", d.endpoint()),
    }
}

async fn connect_err(d: &PostgresDriver) -> DriverError {
    match tokio::time::timeout(Duration::from_secs(20), d.connect()).await {
        Ok(Ok(_)) => panic!("connect to {} should have failed", d.endpoint()),
        Ok(Err(e)) => e,
        Err(_) => panic!("connect to {} timed out", d.endpoint()),
    }
}

fn assert_class(e: &DriverError, class: ErrorClass, code: Option<&str>) {
    assert_eq!(e.class, class, "{e}");
    if code.is_some() {
        assert_eq!(e.code.as_deref(), code, "{e}");
    }
}

/// Whether the server says this session is encrypted.
async fn session_is_tls(conn: &mut PostgresConn) -> bool {
    let ssl = conn
        .query_strings("SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .await
        .unwrap();
    ssl == ["true"]
}

const C_VALUE: &str = "68487932199-96439406143-93774651418-41631865787-96406072701-20604855487-25459966574-28203206787-41238978918-19503783441";

#[test]
fn statements_types_and_errors() {
    let server = start();
    let d = driver(server.url());
    assert_eq!(d.endpoint(), format!("127.0.0.1:{}", server.port));

    run(async {
        let mut conn = connect(&d).await;
        assert_eq!(conn.dialect(), Dialect::Postgres);

        // server_info
        let info = d.server_info(&mut conn).await.unwrap();
        assert_eq!(info.product, "PostgreSQL");
        assert!(
            info.version.starts_with(|c: char| c.is_ascii_digit()),
            "{}",
            info.version
        );

        // DDL through simple(), with sysbench's column types.
        conn.simple(
            "CREATE TABLE t1 (id INTEGER NOT NULL, k INTEGER DEFAULT '0' NOT NULL, \
             c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id))",
        )
        .await
        .unwrap();
        conn.simple("CREATE INDEX k_1 ON t1(k)").await.unwrap();

        // Prepared BEGIN/COMMIT around prepared inserts with Int and Text
        // parameters bound to int4 and bpchar.
        let begin = conn.prepare("BEGIN").await.unwrap();
        let commit = conn.prepare("COMMIT").await.unwrap();
        let insert = conn
            .prepare("INSERT INTO t1 (id, k, c, pad) VALUES ($1, $2, $3, $4)")
            .await
            .unwrap();
        assert_eq!(conn.exec(&begin, &[]).await.unwrap(), 0);
        for id in 1..=20i64 {
            let params = [
                SqlParam::Int(id),
                SqlParam::Int(id * 10),
                SqlParam::Text(C_VALUE),
                SqlParam::Text("pad"),
            ];
            assert_eq!(conn.exec(&insert, &params).await.unwrap(), 1);
        }
        assert_eq!(conn.exec(&commit, &[]).await.unwrap(), 0);

        // Prepared selects return the number of rows read.
        let point = conn.prepare("SELECT c FROM t1 WHERE id=$1").await.unwrap();
        assert_eq!(conn.exec(&point, &[SqlParam::Int(5)]).await.unwrap(), 1);
        assert_eq!(conn.exec(&point, &[SqlParam::Int(500)]).await.unwrap(), 0);
        let range = conn
            .prepare("SELECT c FROM t1 WHERE id BETWEEN $1 AND $2 ORDER BY c")
            .await
            .unwrap();
        let n = conn
            .exec(&range, &[SqlParam::Int(3), SqlParam::Int(12)])
            .await
            .unwrap();
        assert_eq!(n, 10);
        let sum = conn
            .prepare("SELECT SUM(k) FROM t1 WHERE id BETWEEN $1 AND $2")
            .await
            .unwrap();
        assert_eq!(
            conn.exec(&sum, &[SqlParam::Int(1), SqlParam::Int(100)])
                .await
                .unwrap(),
            1
        );

        // Updates and deletes return rows affected; Text into a bpchar
        // parameter on the left of SET, Int into int4 in the WHERE.
        let update_c = conn
            .prepare("UPDATE t1 SET c=$1 WHERE id=$2")
            .await
            .unwrap();
        let n = conn
            .exec(&update_c, &[SqlParam::Text("changed"), SqlParam::Int(7)])
            .await
            .unwrap();
        assert_eq!(n, 1);
        let update_k = conn
            .prepare("UPDATE t1 SET k=k+1 WHERE id BETWEEN $1 AND $2")
            .await
            .unwrap();
        let n = conn
            .exec(&update_k, &[SqlParam::Int(1), SqlParam::Int(4)])
            .await
            .unwrap();
        assert_eq!(n, 4);
        let delete = conn.prepare("DELETE FROM t1 WHERE id=$1").await.unwrap();
        assert_eq!(conn.exec(&delete, &[SqlParam::Int(20)]).await.unwrap(), 1);
        assert_eq!(conn.exec(&delete, &[SqlParam::Int(20)]).await.unwrap(), 0);

        // Values for other parameter types go in text form.
        let typed = conn
            .prepare("SELECT $1::bigint + 1, $2::numeric, $3::smallint, $4::text")
            .await
            .unwrap();
        let params = [
            SqlParam::Int(1 << 40),
            SqlParam::Int(12),
            SqlParam::Int(3),
            SqlParam::Int(4),
        ];
        assert_eq!(conn.exec(&typed, &params).await.unwrap(), 1);

        // query_i64: int8 (COUNT), int4 (MAX), numeric (SUM of int8), NULL.
        let count = conn.query_i64("SELECT COUNT(*) FROM t1").await.unwrap();
        assert_eq!(count, Some(19));
        let max = conn.query_i64("SELECT MAX(id) FROM t1").await.unwrap();
        assert_eq!(max, Some(19));
        let sum = conn
            .query_i64("SELECT SUM(id::bigint) FROM t1")
            .await
            .unwrap();
        assert_eq!(sum, Some((1..=19).sum::<i64>()));
        let small = conn.query_i64("SELECT 7::smallint").await.unwrap();
        assert_eq!(small, Some(7));
        let none = conn
            .query_i64("SELECT MAX(id) FROM t1 WHERE id < 0")
            .await
            .unwrap();
        assert_eq!(none, None);
        let no_row = conn
            .query_i64("SELECT id FROM t1 WHERE id < 0")
            .await
            .unwrap();
        assert_eq!(no_row, None);
        let e = conn.query_i64("SELECT 'x'").await.unwrap_err();
        assert_class(&e, ErrorClass::Fatal, None);

        // The sequence trick the OLTP prepare uses (setval returns int8).
        conn.simple("CREATE TABLE s (id SERIAL PRIMARY KEY, v INTEGER)")
            .await
            .unwrap();
        let v = conn
            .query_i64("SELECT setval('s_id_seq', 41)")
            .await
            .unwrap();
        assert_eq!(v, Some(41));

        // query_strings: first column of every row, as text.
        let names = conn
            .query_strings(
                "SELECT table_name FROM information_schema.tables \
                 WHERE table_schema = current_schema() ORDER BY table_name",
            )
            .await
            .unwrap();
        assert_eq!(names, vec!["s".to_string(), "t1".to_string()]);
        let padded = conn
            .query_strings("SELECT c FROM t1 WHERE id = 7")
            .await
            .unwrap();
        assert_eq!(padded.len(), 1);
        assert_eq!(padded[0].trim_end(), "changed");
        assert_eq!(padded[0].len(), 120, "CHAR(120) keeps its padding");
        let ints = conn
            .query_strings("SELECT id FROM t1 WHERE id <= 3 ORDER BY id")
            .await
            .unwrap();
        assert_eq!(ints, vec!["1", "2", "3"]);

        // Duplicate key: retryable, as sysbench ignores it.
        let params = [
            SqlParam::Int(1),
            SqlParam::Int(1),
            SqlParam::Text("c"),
            SqlParam::Text("p"),
        ];
        let e = conn.exec(&insert, &params).await.unwrap_err();
        assert_class(&e, ErrorClass::Retryable, Some("23505"));

        // Out of range for the int4 parameter: caught before sending.
        let e = conn
            .exec(&point, &[SqlParam::Int(1 << 40)])
            .await
            .unwrap_err();
        assert_class(&e, ErrorClass::Fatal, None);
        assert_eq!(
            e.message,
            "cannot bind parameter $1: value 1099511627776 is out of range for type int4"
        );
        // A bad text value for an integer parameter: the server says so.
        let e = conn
            .exec(&point, &[SqlParam::Text("seven")])
            .await
            .unwrap_err();
        assert_class(&e, ErrorClass::Fatal, Some("22P02"));
        // Wrong parameter count.
        let e = conn.exec(&point, &[]).await.unwrap_err();
        assert_class(&e, ErrorClass::Fatal, None);

        // Missing table: fatal 42P01, at prepare, simple and query time.
        let e = conn
            .prepare("SELECT c FROM nope WHERE id=$1")
            .await
            .unwrap_err();
        assert_class(&e, ErrorClass::Fatal, Some("42P01"));
        assert!(e.message.contains("\"nope\" does not exist"), "{e}");
        assert!(
            e.message.ends_with("in `SELECT c FROM nope WHERE id=$1`"),
            "{e}"
        );
        let e = conn.simple("DROP TABLE nope").await.unwrap_err();
        assert_class(&e, ErrorClass::Fatal, Some("42P01"));
        let e = conn
            .query_i64("SELECT COUNT(*) FROM nope")
            .await
            .unwrap_err();
        assert_class(&e, ErrorClass::Fatal, Some("42P01"));

        // Syntax error.
        let e = conn.simple("SELEC 1").await.unwrap_err();
        assert_class(&e, ErrorClass::Fatal, Some("42601"));
        assert!(e.message.contains("syntax error"), "{e}");

        // The connection is still usable after all of that.
        assert_eq!(conn.exec(&point, &[SqlParam::Int(5)]).await.unwrap(), 1);

        // A ROLLBACK with no transaction is only a warning.
        conn.simple("ROLLBACK").await.unwrap();
    });
}

#[test]
fn catalog_questions() {
    let server = start();
    let d = driver(server.url());
    run(async {
        let mut conn = connect(&d).await;
        sql_catalog::catalog_questions_are_answered(&mut conn, "").await;
    });
}

#[test]
fn deadlock_and_lock_errors_are_retryable() {
    let server = start();
    let d = driver(server.url());
    run(async {
        let mut setup = connect(&d).await;
        setup
            .simple(
                "CREATE TABLE d (id INTEGER PRIMARY KEY, v INTEGER NOT NULL); \
                 INSERT INTO d VALUES (1, 0), (2, 0)",
            )
            .await
            .unwrap();
        let mut a = connect(&d).await;
        let mut b = connect(&d).await;
        let update_a = a.prepare("UPDATE d SET v=v+1 WHERE id=$1").await.unwrap();
        let update_b = b.prepare("UPDATE d SET v=v+1 WHERE id=$1").await.unwrap();
        let begin_a = a.prepare("BEGIN").await.unwrap();
        let begin_b = b.prepare("BEGIN").await.unwrap();

        a.exec(&begin_a, &[]).await.unwrap();
        b.exec(&begin_b, &[]).await.unwrap();
        assert_eq!(a.exec(&update_a, &[SqlParam::Int(1)]).await.unwrap(), 1);
        assert_eq!(b.exec(&update_b, &[SqlParam::Int(2)]).await.unwrap(), 1);
        // a waits for b's row 2; b then waits for a's row 1: a deadlock,
        // which the server breaks after deadlock_timeout (1 s) by failing
        // one of the two.
        let (ra, rb) = tokio::join!(a.exec(&update_a, &[SqlParam::Int(2)]), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            b.exec(&update_b, &[SqlParam::Int(1)]).await
        });
        let failed: Vec<&DriverError> = [&ra, &rb]
            .into_iter()
            .filter_map(|r| r.as_ref().err())
            .collect();
        assert_eq!(failed.len(), 1, "exactly one side fails: {ra:?} / {rb:?}");
        assert_class(failed[0], ErrorClass::Retryable, Some("40P01"));
        assert!(failed[0].message.contains("deadlock"), "{}", failed[0]);
        a.simple("ROLLBACK").await.unwrap();
        b.simple("ROLLBACK").await.unwrap();

        // Lock not available (NOWAIT): retryable 55P03.
        a.simple("BEGIN; SELECT * FROM d WHERE id = 1 FOR UPDATE")
            .await
            .unwrap();
        let e = b
            .simple("SELECT * FROM d WHERE id = 1 FOR UPDATE NOWAIT")
            .await
            .unwrap_err();
        assert_class(&e, ErrorClass::Retryable, Some("55P03"));
        a.simple("ROLLBACK").await.unwrap();

        // Serialization failure: retryable 40001.
        a.simple("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM d")
            .await
            .unwrap();
        b.simple("UPDATE d SET v = v + 1 WHERE id = 1")
            .await
            .unwrap();
        let e = a
            .simple("UPDATE d SET v = v + 1 WHERE id = 1")
            .await
            .unwrap_err();
        assert_class(&e, ErrorClass::Retryable, Some("40001"));
        a.simple("ROLLBACK").await.unwrap();
        assert_eq!(a.exec(&update_a, &[SqlParam::Int(1)]).await.unwrap(), 1);

        // A backend terminated by an administrator: connection class.
        let pid = b
            .query_i64("SELECT pg_backend_pid()")
            .await
            .unwrap()
            .unwrap();
        a.simple(&format!("SELECT pg_terminate_backend({pid})"))
            .await
            .unwrap();
        let e = b.exec(&update_b, &[SqlParam::Int(1)]).await.unwrap_err();
        assert_class(&e, ErrorClass::Connection, None);
        assert!(matches!(e.code.as_deref(), None | Some("57P01")), "{e}");
        assert!(e.message.contains(&d.endpoint()), "{e}");
        let e = b.simple("SELECT 1").await.unwrap_err();
        assert_class(&e, ErrorClass::Connection, None);
    });
}

#[test]
fn connect_failures_and_lost_server() {
    let mut server = start();
    let url = server.url().to_string();
    run(async {
        // Wrong password: fatal, and the message never shows it.
        let wrong = url.replace(":lcpass@", ":Wr0ngPassw0rd@");
        assert_ne!(wrong, url);
        let d = driver(&wrong);
        let e = connect_err(&d).await;
        assert_class(&e, ErrorClass::Fatal, Some("28P01"));
        assert!(
            e.message
                .contains("password authentication failed for user 'lc'"),
            "{e}"
        );
        assert!(e.message.contains(&d.endpoint()), "{e}");
        assert!(e.message.contains("--target"), "{e}");
        assert!(!e.to_string().contains("Wr0ngPassw0rd"), "{e}");

        // Unknown database: fatal 3D000.
        let (base, _) = url.rsplit_once('/').unwrap();
        let e = connect_err(&driver(&format!("{base}/no_such_db"))).await;
        assert_class(&e, ErrorClass::Fatal, Some("3D000"));
        assert!(e.message.contains("no_such_db"), "{e}");

        // Unknown user: fatal.
        let e = connect_err(&driver(&url.replace("//lc:", "//nobody:"))).await;
        assert_class(&e, ErrorClass::Fatal, Some("28P01"));

        // sslmode=require against a server without TLS: fatal, and says why.
        let e = connect_err(&driver(&format!("{url}?sslmode=require"))).await;
        assert_class(&e, ErrorClass::Fatal, None);
        assert!(e.message.contains("does not support TLS"), "{e}");
        // sslmode=prefer falls back to plain text.
        let mut plain = connect(&driver(&format!("{url}?sslmode=prefer"))).await;
        assert_eq!(plain.query_i64("SELECT 1").await.unwrap(), Some(1));
        drop(plain);

        // Nothing listening: connection class, naming host and port.
        let port = loadcell_testkit::closed_port();
        let d = driver(&format!("postgres://lc:lcpass@127.0.0.1:{port}/loadcell"));
        let e = connect_err(&d).await;
        assert_class(&e, ErrorClass::Connection, None);
        assert_eq!(
            e.message,
            format!(
                "cannot connect to 127.0.0.1:{port}: connection refused (is the server running?)"
            )
        );

        // Server killed under an open connection: the next call fails
        // with the connection class, and so does every later one.
        let d = driver(&url);
        let mut conn = connect(&d).await;
        let stmt = conn.prepare("SELECT 1").await.unwrap();
        assert_eq!(conn.exec(&stmt, &[]).await.unwrap(), 1);
        server.kill();
        let e = conn.exec(&stmt, &[]).await.unwrap_err();
        assert_class(&e, ErrorClass::Connection, None);
        // Either the socket just closed, or the backend saw the postmaster
        // die first and said so (57P01) before exiting.
        let ep = d.endpoint();
        assert!(
            e.message == format!("connection to {ep} lost: the server closed the connection")
                || e.message
                    .starts_with(&format!("server at {ep} closed the connection: ")),
            "{e}"
        );
        let e = conn.simple("SELECT 1").await.unwrap_err();
        assert_class(&e, ErrorClass::Connection, None);
        let e = conn.query_i64("SELECT 1").await.unwrap_err();
        assert_class(&e, ErrorClass::Connection, None);
        // And reconnecting fails as "connection refused".
        let e = connect_err(&d).await;
        assert_class(&e, ErrorClass::Connection, None);
        assert!(e.message.contains("connection refused"), "{e}");
    });
}

#[test]
fn unknown_parameters_are_rejected() {
    let err = PostgresDriver::from_target(
        &Target::parse("postgres://lc:pw@127.0.0.1:5432/db?sslmode=disable&pool=3").unwrap(),
    )
    .unwrap_err();
    assert!(err.contains("'pool'"), "{err}");
    assert!(err.contains("sslmode, sslrootcert"), "{err}");
    assert!(!err.contains("pw"), "{err}");
}

#[test]
fn tls_sessions() {
    let server = loadcell_testkit::postgres_tls()
        .unwrap_or_else(|e| panic!("cannot start PostgreSQL with TLS: {e}"));
    let url = server.url().to_string();
    let ca = server.tls_ca();
    run(async {
        // sslmode=require: encrypted, the certificate not checked.
        let d = driver(&format!("{url}?sslmode=require"));
        let mut conn = connect(&d).await;
        assert!(session_is_tls(&mut conn).await);
        let info = d.server_info(&mut conn).await.unwrap();
        assert!(!info.version.is_empty());
        let ssl = conn
            .query_strings("SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .await
            .unwrap();
        assert_eq!(ssl, vec!["true"]);
        conn.simple("CREATE TABLE t (id INTEGER PRIMARY KEY, c TEXT NOT NULL)")
            .await
            .unwrap();
        let insert = conn
            .prepare("INSERT INTO t (id, c) VALUES ($1, $2)")
            .await
            .unwrap();
        for id in 1..=3i64 {
            let params = [SqlParam::Int(id), SqlParam::Text(C_VALUE)];
            assert_eq!(conn.exec(&insert, &params).await.unwrap(), 1);
        }
        let select = conn
            .prepare("SELECT c FROM t WHERE id BETWEEN $1 AND $2")
            .await
            .unwrap();
        // A response larger than one TLS record.
        conn.simple("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(4, 2000) g")
            .await
            .unwrap();
        let n = conn
            .exec(&select, &[SqlParam::Int(1), SqlParam::Int(2000)])
            .await
            .unwrap();
        assert_eq!(n, 2000);
        let e = conn
            .exec(&insert, &[SqlParam::Int(1), SqlParam::Text("dup")])
            .await
            .unwrap_err();
        assert_class(&e, ErrorClass::Retryable, Some("23505"));
        assert_eq!(
            conn.exec(&select, &[SqlParam::Int(1), SqlParam::Int(3)])
                .await
                .unwrap(),
            3
        );

        // prefer: TLS when the server has it.
        let mut conn = connect(&driver(&format!("{url}?sslmode=prefer"))).await;
        assert!(session_is_tls(&mut conn).await);
        assert_eq!(conn.query_i64("SELECT 1").await.unwrap(), Some(1));

        // verify-full against the test CA (the certificate is for
        // 127.0.0.1): passes; against the webpki roots: fatal.
        let d = driver(&format!(
            "{url}?sslmode=verify-full&sslrootcert={}",
            ca.display()
        ));
        let mut conn = connect(&d).await;
        assert!(session_is_tls(&mut conn).await);
        assert_eq!(conn.query_i64("SELECT 2").await.unwrap(), Some(2));
        let e = connect_err(&driver(&format!("{url}?sslmode=verify-ca"))).await;
        assert_class(&e, ErrorClass::Fatal, None);
        assert!(e.message.contains("TLS handshake"), "{e}");

        // Without TLS the same server still answers.
        let mut conn = connect(&driver(&url)).await;
        assert!(!session_is_tls(&mut conn).await);
        assert_eq!(
            conn.query_i64("SELECT COUNT(*) FROM t").await.unwrap(),
            Some(2000)
        );
    });
}

/// A password with every character a URL reserves: '@' may stay as it is,
/// '/', '?', '#' and '%' are percent-encoded.
#[test]
fn passwords_with_reserved_characters() {
    let server = start();
    let port = server.port;
    run(async {
        let mut conn = connect(&driver(server.url())).await;
        // A role may change its own password.
        conn.simple("ALTER ROLE lc PASSWORD 'p@ss#w/rd?%x'")
            .await
            .unwrap();
        drop(conn);
        for url in [
            format!("postgres://lc:p@ss%23w%2Frd%3F%25x@127.0.0.1:{port}/loadcell"),
            format!("postgres://lc:p%40ss%23w%2Frd%3F%25x@127.0.0.1:{port}/loadcell"),
        ] {
            let mut conn = connect(&driver(&url)).await;
            assert_eq!(conn.query_i64("SELECT 1").await.unwrap(), Some(1));
        }
    });
}
