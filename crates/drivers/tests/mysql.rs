//! The MySQL/MariaDB driver against real MariaDB servers (one per test, from
//! loadcell-testkit; each stops when its test ends).

use std::time::Duration;

use loadcell_core::sql::{Dialect, SqlConn, SqlParam};
use loadcell_core::{Driver, DriverError, ErrorClass, Target};
use loadcell_drivers::mysql::{MysqlConn, MysqlDriver};
use loadcell_testkit::TestServer;

mod sql_catalog;

fn start() -> TestServer {
    loadcell_testkit::mariadb().unwrap_or_else(|e| panic!("cannot start MariaDB: {e}"))
}

fn driver(url: &str) -> MysqlDriver {
    let target = Target::parse(url).expect("valid URL");
    MysqlDriver::from_target(&target).expect("valid mysql target")
}

async fn connect(url: &str) -> MysqlConn {
    driver(url)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

#[track_caller]
fn assert_error(err: &DriverError, class: ErrorClass, code: Option<&str>) {
    assert_eq!(err.class, class, "{err}");
    if let Some(code) = code {
        assert_eq!(err.code.as_deref(), Some(code), "{err}");
    }
}

/// Statements, parameters, results, helper queries and the errors a user
/// can cause (bad SQL, wrong credentials, TLS asked of a plaintext server).
#[tokio::test(flavor = "current_thread")]
async fn statements_results_and_user_errors() {
    let server = start();
    let url = server.url().to_string();
    let d = driver(&url);
    assert_eq!(d.endpoint(), format!("127.0.0.1:{}", server.port));

    let mut conn = d.connect().await.unwrap();
    assert_eq!(conn.dialect(), Dialect::MySql);
    let info = d.server_info(&mut conn).await.unwrap();
    assert_eq!(info.product, "MariaDB");
    assert!(info.version.contains("MariaDB"), "{info:?}");

    conn.simple(
        "CREATE TABLE t (id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY, \
         k INTEGER NOT NULL DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '', \
         KEY k_t (k)) ENGINE=InnoDB",
    )
    .await
    .unwrap();

    let begin = conn.prepare("BEGIN").await.unwrap();
    let commit = conn.prepare("COMMIT").await.unwrap();
    let insert = conn
        .prepare("INSERT INTO t (k, c) VALUES (?, ?)")
        .await
        .unwrap();
    let range = conn
        .prepare("SELECT c FROM t WHERE id BETWEEN ? AND ?")
        .await
        .unwrap();
    let sum = conn
        .prepare("SELECT SUM(k) FROM t WHERE id BETWEEN ? AND ?")
        .await
        .unwrap();
    let update = conn
        .prepare("UPDATE t SET k=k+1 WHERE id<=?")
        .await
        .unwrap();

    assert_eq!(conn.exec(&begin, &[]).await.unwrap(), 0);
    let texts: Vec<String> = (1..=10)
        .map(|i| format!("row {i}: héllo 'quoted' \\ \"x\""))
        .collect();
    for (i, text) in texts.iter().enumerate() {
        let n = conn
            .exec(
                &insert,
                &[SqlParam::Int(i as i64 * 100), SqlParam::Text(text)],
            )
            .await
            .unwrap();
        assert_eq!(n, 1, "one row inserted");
    }
    assert_eq!(conn.exec(&commit, &[]).await.unwrap(), 0);

    // Rows read for queries, rows affected for writes.
    let two = |a, b| [SqlParam::Int(a), SqlParam::Int(b)];
    assert_eq!(conn.exec(&range, &two(1, 5)).await.unwrap(), 5);
    assert_eq!(conn.exec(&range, &two(1, 100)).await.unwrap(), 10);
    assert_eq!(conn.exec(&range, &two(100, 200)).await.unwrap(), 0);
    assert_eq!(conn.exec(&sum, &two(1, 3)).await.unwrap(), 1);
    assert_eq!(conn.exec(&update, &[SqlParam::Int(3)]).await.unwrap(), 3);
    // An UPDATE writing a row's current values still counts the row it
    // found (YCSB takes an UPDATE of 0 rows for a missing record).
    let same = conn
        .prepare("UPDATE t SET c = c WHERE id = ?")
        .await
        .unwrap();
    assert_eq!(conn.exec(&same, &[SqlParam::Int(1)]).await.unwrap(), 1);
    assert_eq!(conn.exec(&same, &[SqlParam::Int(1000)]).await.unwrap(), 0);
    // MariaDB 10.11 caches column definitions: they come with the first
    // execution only, and the later ones above and below still count right.
    assert!(conn.caches_metadata());
    // The same parameter as text: the types are sent again, then left out.
    for _ in 0..2 {
        let text = [SqlParam::Text("4"), SqlParam::Text("6")];
        assert_eq!(conn.exec(&range, &text).await.unwrap(), 3);
    }
    // The same statement many times (the hot path).
    for i in 0..200 {
        assert_eq!(
            conn.exec(&range, &two(i % 10 + 1, i % 10 + 1))
                .await
                .unwrap(),
            1
        );
    }

    assert_eq!(
        conn.query_i64("SELECT COUNT(*) FROM t").await.unwrap(),
        Some(10)
    );
    assert_eq!(
        conn.query_i64("SELECT MAX(id) FROM t").await.unwrap(),
        Some(10)
    );
    // SUM of integers is a DECIMAL, sent as text.
    assert_eq!(
        conn.query_i64("SELECT SUM(k) FROM t").await.unwrap(),
        Some(4500 + 3)
    );
    assert_eq!(
        conn.query_i64("SELECT MAX(id) FROM t WHERE id < 0")
            .await
            .unwrap(),
        None
    );
    // Exact above 2^53, where a trip through f64 would round to ...992.
    assert_eq!(
        conn.query_i64("SELECT CAST(9007199254740993 AS DECIMAL(20,3))")
            .await
            .unwrap(),
        Some(9_007_199_254_740_993)
    );
    assert_eq!(conn.query_i64("SELECT NULL").await.unwrap(), None);
    assert_eq!(
        conn.query_i64("SELECT id FROM t WHERE id < 0")
            .await
            .unwrap(),
        None,
        "no row"
    );
    let err = conn.query_i64("SELECT 'abc'").await.unwrap_err();
    assert_error(&err, ErrorClass::Fatal, None);
    assert_eq!(
        err.to_string(),
        "expected an integer from `SELECT 'abc'`, got 'abc'"
    );
    let err = conn.query_i64("SELECT 1.5").await.unwrap_err();
    assert_error(&err, ErrorClass::Fatal, None);

    assert_eq!(conn.query_strings("SHOW TABLES").await.unwrap(), vec!["t"]);
    assert_eq!(
        conn.query_strings("SELECT c FROM t ORDER BY id")
            .await
            .unwrap(),
        texts,
        "text parameters round-trip unchanged"
    );
    assert_eq!(
        conn.query_strings("SELECT k FROM t WHERE id <= 2 ORDER BY id")
            .await
            .unwrap(),
        vec!["1", "101"]
    );

    // Bulk text INSERT and DDL through simple().
    conn.simple("INSERT INTO t (k, c) VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        .await
        .unwrap();
    assert_eq!(
        conn.query_i64("SELECT COUNT(*) FROM t").await.unwrap(),
        Some(13)
    );

    // A rolled-back transaction through prepared statements.
    let rollback = conn.prepare("ROLLBACK").await.unwrap();
    conn.exec(&begin, &[]).await.unwrap();
    conn.exec(&insert, &[SqlParam::Int(7), SqlParam::Text("gone")])
        .await
        .unwrap();
    conn.exec(&rollback, &[]).await.unwrap();
    assert_eq!(
        conn.query_i64("SELECT COUNT(*) FROM t").await.unwrap(),
        Some(13)
    );

    // Missing table: at prepare time and as simple text.
    let err = conn
        .prepare("SELECT c FROM nosuch WHERE id=?")
        .await
        .unwrap_err();
    assert_error(&err, ErrorClass::Fatal, Some("1146"));
    assert!(err.message.contains("nosuch"), "{err}");
    let err = conn.simple("SELECT * FROM nosuch").await.unwrap_err();
    assert_error(&err, ErrorClass::Fatal, Some("1146"));
    let err = conn
        .query_strings("SELECT * FROM nosuch")
        .await
        .unwrap_err();
    assert_error(&err, ErrorClass::Fatal, Some("1146"));
    // Syntax error.
    let err = conn.simple("SELEC 1").await.unwrap_err();
    assert_error(&err, ErrorClass::Fatal, Some("1064"));
    let err = conn.prepare("SELEC ?").await.unwrap_err();
    assert_error(&err, ErrorClass::Fatal, Some("1064"));
    // Wrong parameter count: caught before anything is sent.
    let err = conn.exec(&insert, &[SqlParam::Int(1)]).await.unwrap_err();
    assert_error(&err, ErrorClass::Fatal, None);
    // Duplicate key: fatal with the server's code.
    let err = conn
        .simple("INSERT INTO t (id, k, c) VALUES (1, 0, '')")
        .await
        .unwrap_err();
    assert_error(&err, ErrorClass::Fatal, Some("1062"));
    // The connection is still good after all that.
    assert_eq!(conn.exec(&range, &two(1, 2)).await.unwrap(), 2);

    // Wrong password: fatal, says what to check, does not echo the secret.
    let port = server.port;
    let bad = driver(&format!(
        "mysql://lc:Wr0ngSecretPw@127.0.0.1:{port}/loadcell"
    ));
    let err = bad.connect().await.unwrap_err();
    assert_error(&err, ErrorClass::Fatal, Some("1045"));
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("Wr0ngSecretPw"), "{shown}");
    assert!(shown.contains("access denied for user 'lc'"), "{shown}");
    assert!(shown.contains(&format!("127.0.0.1:{port}")), "{shown}");
    assert!(shown.contains("password"), "{shown}");

    // Unknown database.
    let err = driver(&format!("mysql://lc:lcpass@127.0.0.1:{port}/nosuchdb"))
        .connect()
        .await
        .unwrap_err();
    assert!(
        err.code.as_deref() == Some("1049") || err.code.as_deref() == Some("1044"),
        "{err}"
    );
    assert_eq!(err.class, ErrorClass::Fatal, "{err}");
    assert!(err.message.contains("nosuchdb"), "{err}");

    // No database in the URL is fine; names can be qualified.
    let mut nodb = connect(&format!("mysql://lc:lcpass@127.0.0.1:{port}")).await;
    assert_eq!(
        nodb.query_i64("SELECT COUNT(*) FROM loadcell.t")
            .await
            .unwrap(),
        Some(13)
    );

    // TLS: the test server has none. prefer falls back to plaintext (and
    // remembers it); require refuses.
    let prefer = driver(&format!("{url}?sslmode=prefer"));
    for _ in 0..2 {
        let mut c = prefer.connect().await.unwrap();
        assert_eq!(c.query_i64("SELECT 1").await.unwrap(), Some(1));
    }
    let err = driver(&format!("{url}?sslmode=require"))
        .connect()
        .await
        .unwrap_err();
    assert_error(&err, ErrorClass::Fatal, None);
    assert!(err.message.contains("does not support TLS"), "{err}");

    // mariadb:// is an alias.
    let alias = url.replacen("mysql://", "mariadb://", 1);
    let mut c = connect(&alias).await;
    assert_eq!(c.query_i64("SELECT 2").await.unwrap(), Some(2));
}

#[tokio::test(flavor = "current_thread")]
async fn catalog_questions() {
    let server = start();
    let mut conn = connect(server.url()).await;
    sql_catalog::catalog_questions_are_answered(&mut conn, " /*! ENGINE = innodb */").await;
}

/// Deadlocks and lock wait timeouts are retryable; a killed session is a
/// connection error.
#[tokio::test(flavor = "current_thread")]
async fn lock_conflicts_are_retryable() {
    let server = start();
    let url = server.url().to_string();
    let mut a = connect(&url).await;
    let mut b = connect(&url).await;
    a.simple("CREATE TABLE d (id INTEGER PRIMARY KEY, v INTEGER NOT NULL) ENGINE=InnoDB")
        .await
        .unwrap();
    a.simple("INSERT INTO d VALUES (1, 0), (2, 0)")
        .await
        .unwrap();

    let begin_a = a.prepare("BEGIN").await.unwrap();
    let begin_b = b.prepare("BEGIN").await.unwrap();
    let upd_a = a.prepare("UPDATE d SET v=v+1 WHERE id=?").await.unwrap();
    let upd_b = b.prepare("UPDATE d SET v=v+1 WHERE id=?").await.unwrap();
    let rollback_a = a.prepare("ROLLBACK").await.unwrap();
    let rollback_b = b.prepare("ROLLBACK").await.unwrap();

    // Deadlock: a locks 1, b locks 2, a waits for 2, b asks for 1.
    a.exec(&begin_a, &[]).await.unwrap();
    b.exec(&begin_b, &[]).await.unwrap();
    assert_eq!(a.exec(&upd_a, &[SqlParam::Int(1)]).await.unwrap(), 1);
    assert_eq!(b.exec(&upd_b, &[SqlParam::Int(2)]).await.unwrap(), 1);
    let (ra, rb) = tokio::join!(a.exec(&upd_a, &[SqlParam::Int(2)]), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.exec(&upd_b, &[SqlParam::Int(1)]).await
    });
    let err = match (ra, rb) {
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => e,
        other => panic!("expected exactly one deadlock victim, got {other:?}"),
    };
    assert_error(&err, ErrorClass::Retryable, Some("1213"));
    a.exec(&rollback_a, &[]).await.unwrap();
    b.exec(&rollback_b, &[]).await.unwrap();

    // Lock wait timeout.
    b.simple("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .unwrap();
    a.exec(&begin_a, &[]).await.unwrap();
    a.exec(&upd_a, &[SqlParam::Int(1)]).await.unwrap();
    b.exec(&begin_b, &[]).await.unwrap();
    let err = b.exec(&upd_b, &[SqlParam::Int(1)]).await.unwrap_err();
    assert_error(&err, ErrorClass::Retryable, Some("1205"));
    b.exec(&rollback_b, &[]).await.unwrap();
    a.exec(&rollback_a, &[]).await.unwrap();
    assert_eq!(b.exec(&upd_b, &[SqlParam::Int(1)]).await.unwrap(), 1);

    // A session killed by an administrator.
    let victim = b
        .query_i64("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    a.simple(&format!("KILL CONNECTION {victim}"))
        .await
        .unwrap_or_else(|e| {
            // lc may lack the PROCESS/CONNECTION ADMIN privilege for other
            // users' sessions, but b is lc's own.
            panic!("KILL: {e}")
        });
    let err = b.exec(&upd_b, &[SqlParam::Int(1)]).await.unwrap_err();
    assert_error(&err, ErrorClass::Connection, None);
    assert!(
        err.message.contains(&format!("127.0.0.1:{}", server.port)),
        "{err}"
    );
    // The other session is unaffected.
    assert_eq!(a.exec(&upd_a, &[SqlParam::Int(1)]).await.unwrap(), 1);
}

/// A server that dies mid-run: established sessions get connection errors,
/// and reconnecting is refused with a message that names the endpoint.
#[tokio::test(flavor = "current_thread")]
async fn server_killed_mid_use_is_a_connection_error() {
    let mut server = start();
    let url = server.url().to_string();
    let d = driver(&url);
    let mut conn = d.connect().await.unwrap();
    let stmt = conn
        .prepare("SELECT 1 FROM DUAL WHERE ? = ?")
        .await
        .unwrap();
    let one = [SqlParam::Int(1), SqlParam::Int(1)];
    assert_eq!(conn.exec(&stmt, &one).await.unwrap(), 1);

    server.kill();

    let err = conn.exec(&stmt, &one).await.unwrap_err();
    assert_error(&err, ErrorClass::Connection, None);
    let endpoint = format!("127.0.0.1:{}", server.port);
    assert!(err.message.contains(&endpoint), "{err}");
    // Still an error (not a panic or a hang) on the broken connection.
    let err = conn.exec(&stmt, &one).await.unwrap_err();
    assert_error(&err, ErrorClass::Connection, None);
    let err = conn.simple("SELECT 1").await.unwrap_err();
    assert_error(&err, ErrorClass::Connection, None);

    let err = d.connect().await.unwrap_err();
    assert_error(&err, ErrorClass::Connection, None);
    assert_eq!(
        err.message,
        format!("cannot connect to {endpoint}: connection refused (is the server running?)")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn closed_port_is_a_connection_error() {
    let port = loadcell_testkit::closed_port();
    let d = driver(&format!("mysql://lc:pw@127.0.0.1:{port}/loadcell"));
    assert_eq!(d.endpoint(), format!("127.0.0.1:{port}"));
    let err = d.connect().await.unwrap_err();
    assert_error(&err, ErrorClass::Connection, None);
    assert_eq!(
        err.message,
        format!("cannot connect to 127.0.0.1:{port}: connection refused (is the server running?)")
    );
    assert!(!err.to_string().contains("pw@"), "{err}");
}

// ---------------------------------------------------------------------------
// TLS

/// A real TLS session: sslmode=require (no checks) and verify-full against
/// the test CA, with prepared statements over it; a wrong CA fails clearly.
#[tokio::test(flavor = "current_thread")]
async fn tls_sessions() {
    let server = loadcell_testkit::mariadb_tls()
        .unwrap_or_else(|e| panic!("cannot start MariaDB with TLS: {e}"));
    let url = server.url().to_string();
    let ca = server.tls_ca();

    let cipher_of = "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
                     WHERE VARIABLE_NAME = 'SSL_CIPHER'";
    for query in [
        "sslmode=require".to_string(),
        "sslmode=prefer".to_string(),
        format!("sslmode=verify-full&sslrootcert={}", ca.display()),
    ] {
        let mut conn = connect(&format!("{url}?{query}")).await;
        assert!(conn.caches_metadata(), "{query}: negotiated over TLS too");
        let cipher = conn.query_strings(cipher_of).await.unwrap();
        assert!(
            cipher.len() == 1 && !cipher[0].is_empty(),
            "{query}: {cipher:?}"
        );
        conn.simple("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, c VARCHAR(200))")
            .await
            .unwrap();
        conn.simple("DELETE FROM t").await.unwrap();
        let insert = conn.prepare("INSERT INTO t VALUES (?, ?)").await.unwrap();
        let select = conn.prepare("SELECT c FROM t WHERE id <= ?").await.unwrap();
        for i in 0..50 {
            let n = conn
                .exec(&insert, &[SqlParam::Int(i), SqlParam::Text("over TLS")])
                .await
                .unwrap();
            assert_eq!(n, 1);
        }
        assert_eq!(conn.exec(&select, &[SqlParam::Int(9)]).await.unwrap(), 10);
    }
    // Plaintext still works against the same server.
    let mut plain = connect(&url).await;
    assert_eq!(
        plain.query_strings(cipher_of).await.unwrap(),
        vec![String::new()]
    );

    // verify-full against a CA that did not sign the certificate.
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("other");
    loadcell_testkit::make_certificates(&other).unwrap();
    let err = driver(&format!(
        "{url}?sslmode=verify-full&sslrootcert={}",
        other.join("ca.pem").display()
    ))
    .connect()
    .await
    .unwrap_err();
    assert_error(&err, ErrorClass::Fatal, None);
    assert!(err.message.contains("TLS handshake"), "{err}");
}

/// A password with every character a URL reserves: '@' may stay as it is
/// (the host starts after the last '@'), '/', '?', '#' and '%' are
/// percent-encoded; unencoded, they are refused with a message that names
/// the password, not its characters.
#[tokio::test(flavor = "current_thread")]
async fn passwords_with_reserved_characters() {
    let server = start();
    let port = server.port;
    let mut conn = connect(server.url()).await;
    // Any user may change its own password.
    conn.simple("SET PASSWORD = PASSWORD('p@ss#w/rd?%x')")
        .await
        .unwrap();
    drop(conn);
    for url in [
        format!("mysql://lc:p@ss%23w%2Frd%3F%25x@127.0.0.1:{port}/loadcell"),
        format!("mysql://lc:p%40ss%23w%2Frd%3F%25x@127.0.0.1:{port}/loadcell"),
    ] {
        let mut conn = connect(&url).await;
        assert_eq!(conn.query_i64("SELECT 1").await.unwrap(), Some(1));
    }
    for raw in [
        format!("mysql://lc:p@ss#w%2Frd%3F%25x@127.0.0.1:{port}/loadcell"),
        format!("mysql://lc:p@ss%23w/rd%3F%25x@127.0.0.1:{port}/loadcell"),
    ] {
        let e = Target::parse(&raw).unwrap_err().to_string();
        assert!(
            e.contains("the password has a character") && e.contains("%23"),
            "{e}"
        );
        assert!(!e.contains("ss#w") && !e.contains("w/rd"), "{e}");
    }
}
