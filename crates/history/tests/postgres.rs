//! The PostgreSQL store against a real server (`loadcell_testkit`): the
//! scenarios the SQLite store passes, a hand-made version 1 schema
//! migrated, writers on several connections at once, and the server
//! killed under a writer. Each part has a
//! schema of its own in the server's database (`search_path` through the
//! URL's `options`).

mod common;

use std::sync::{Arc, Barrier};

use common::{run_at, time, write_run};
use loadcell_history::{schema, History, SeriesFilter, SeriesKey};
use loadcell_testkit::TestServer;

fn server() -> TestServer {
    loadcell_testkit::postgres().unwrap_or_else(|e| panic!("PostgreSQL starts: {e}"))
}

/// A URL whose connections use a new schema `name`.
fn in_schema(server: &TestServer, name: &str) -> String {
    let mut admin = postgres::Client::connect(server.url(), postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("CREATE SCHEMA {name}"))
        .unwrap();
    format!("{}?options=-c%20search_path%3D{name}", server.url())
}

#[test]
fn postgres_keeps_every_field_and_migrates_version_1() {
    let pg = server();
    let dir = tempfile::tempdir().unwrap();

    let mut h = History::connect(&in_schema(&pg, "round_trip")).unwrap();
    assert_eq!(h.schema_version().unwrap(), schema::latest());
    common::round_trip(&mut h, dir.path());
    let mut h = History::connect(&in_schema(&pg, "sweeps")).unwrap();
    common::idempotence_and_sweeps(&mut h, dir.path());
    let mut h = History::connect(&in_schema(&pg, "queries")).unwrap();
    common::queries(&mut h, dir.path());
    // Each in its own schema, as the URL said.
    let mut admin = postgres::Client::connect(pg.url(), postgres::NoTls).unwrap();
    let schemas: Vec<String> = admin
        .query(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'entries'
             ORDER BY table_schema",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(schemas, ["queries", "round_trip", "sweeps"]);

    // Version 1, as a loadcell of that version made it.
    let url = in_schema(&pg, "v1");
    let mut old = run_at(0);
    old.labels.insert("env".into(), "ci".into());
    let key = SeriesKey::of_run(&old);
    {
        let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        db.batch_execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
             INSERT INTO schema_version VALUES (1, '2025-01-01T00:00:00.000Z');
             CREATE TABLE series (id TEXT PRIMARY KEY, key_text TEXT NOT NULL,
                 key_json TEXT NOT NULL, workload TEXT NOT NULL, target TEXT NOT NULL);
             CREATE INDEX series_by_workload ON series (workload);
             CREATE TABLE entries (
                 id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                 series_id TEXT NOT NULL REFERENCES series (id),
                 started_at TEXT NOT NULL, started_at_us BIGINT NOT NULL,
                 host TEXT NOT NULL, commit_id TEXT, file TEXT NOT NULL,
                 partial BOOLEAN NOT NULL, verification_failed BOOLEAN NOT NULL,
                 rate_not_reached BOOLEAN NOT NULL, client_saturated BOOLEAN NOT NULL,
                 throughput DOUBLE PRECISION NOT NULL, throughput_unit TEXT NOT NULL,
                 p50_ms DOUBLE PRECISION NOT NULL, p90_ms DOUBLE PRECISION NOT NULL,
                 p99_ms DOUBLE PRECISION NOT NULL, p999_ms DOUBLE PRECISION NOT NULL,
                 error_rate DOUBLE PRECISION NOT NULL, client_cpu_us_per_op DOUBLE PRECISION,
                 histogram_encoding TEXT NOT NULL, histogram_unit TEXT NOT NULL,
                 histogram TEXT NOT NULL,
                 UNIQUE (series_id, started_at));
             CREATE INDEX entries_by_time ON entries (series_id, started_at_us);",
        )
        .unwrap();
        db.execute(
            "INSERT INTO series VALUES ($1, $2, $3, $4, $5)",
            &[
                &key.id(),
                &key.text(),
                &serde_json::to_string(&key).unwrap(),
                &key.workload,
                &key.target,
            ],
        )
        .unwrap();
        db.execute(
            "INSERT INTO entries (series_id, started_at, started_at_us, host, commit_id, file,
                 partial, verification_failed, rate_not_reached, client_saturated, throughput,
                 throughput_unit, p50_ms, p90_ms, p99_ms, p999_ms, error_rate,
                 client_cpu_us_per_op, histogram_encoding, histogram_unit, histogram)
             VALUES ($1, $2, 1735689600000000, 'old-host', 'c0', 'old.json', false, true,
                 false, false, 900.0, 'txn_per_sec', 1.0, 2.0, 3.0, 4.0, 0.0, NULL,
                 'hdr-v2-deflate-base64', 'us', $3)",
            &[&key.id(), &old.started_at, &old.histograms.response],
        )
        .unwrap();
    }
    let mut h = History::connect(&url).unwrap();
    assert_eq!(h.schema_version().unwrap(), 2);
    let found = h
        .series(&SeriesFilter::default().label("env=ci").unwrap())
        .unwrap();
    assert_eq!(found.len(), 1, "version 2 indexed the labels already there");
    let e = h.entries(&key.id()).unwrap();
    assert_eq!(e.len(), 1);
    assert!(e[0].flags.verification_failed && e[0].metrics.client_cpu_us_per_op.is_none());
    assert_eq!(
        (e[0].host.as_str(), e[0].metrics.p999_ms),
        ("old-host", 4.0)
    );
    let mut new = old.clone();
    new.started_at = time(60);
    let p = write_run(dir.path(), "new.json", &new);
    h.record(&new, &p, None).unwrap();
    assert_eq!(
        h.entries(&key.id()).unwrap()[1].metrics.server["threads_running"],
        4.0
    );
    drop(h);
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let versions: Vec<i32> = db
        .query("SELECT version FROM schema_version ORDER BY version", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [1, 2]);
    db.execute("INSERT INTO schema_version VALUES (3, 'later')", &[])
        .unwrap();
    match History::connect(&url) {
        Err(loadcell_history::Error::NewerSchema { found: 3, known: 2 }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a newer schema was opened"),
    }
    // The server's own words come through, without the password.
    let wrong = pg.url().replace("lcpass", "wrong-password");
    let shown = History::connect(&wrong).err().unwrap().to_string();
    assert!(shown.contains("password authentication failed"), "{shown}");
    assert!(!shown.contains("wrong-password"), "{shown}");
}

#[test]
fn postgres_writers_on_many_connections_lose_nothing() {
    let pg = server();
    let url = in_schema(&pg, "busy");
    let dir = tempfile::tempdir().unwrap();
    const WRITERS: u64 = 6;
    const EACH: u64 = 15;
    let barrier = Arc::new(Barrier::new(WRITERS as usize));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (url, barrier) = (url.clone(), barrier.clone());
            let dir = dir.path().join(format!("w{w}"));
            std::thread::spawn(move || {
                // All connect at once to a store with no schema yet.
                barrier.wait();
                let mut h = History::connect(&url).unwrap();
                for i in 0..EACH {
                    let r = run_at(w * 1000 + i);
                    let p = write_run(&dir, &format!("{i}.json"), &r);
                    assert_eq!(h.record(&r, &p, None).unwrap().added, 1);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut h = History::connect(&url).unwrap();
    let series = h.series(&SeriesFilter::default()).unwrap();
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].runs, WRITERS * EACH);
    let times: Vec<String> = h
        .entries(&series[0].id)
        .unwrap()
        .into_iter()
        .map(|e| e.started_at)
        .collect();
    let mut want: Vec<String> = (0..WRITERS)
        .flat_map(|w| (0..EACH).map(move |i| time(w * 1000 + i)))
        .collect();
    want.sort();
    assert_eq!(times, want);
    assert_eq!(h.schema_version().unwrap(), schema::latest());
}

/// The server killed while a writer records: the writer gets an error
/// (no hang, no panic) that shows no password, after every run it was
/// told was recorded; the store then refuses to open, clearly.
#[test]
fn postgres_killed_mid_write_is_an_error_not_a_hang() {
    let mut pg = server();
    let url = in_schema(&pg, "dying");
    let dir = tempfile::tempdir().unwrap();
    let recorded = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (url, recorded) = (url.clone(), recorded.clone());
        let dir = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let mut h = History::connect(&url).unwrap();
            // Bounded: the server dies long before this many runs.
            for i in 0..200_000 {
                let r = run_at(i);
                let p = write_run(&dir, "run.json", &r);
                match h.record(&r, &p, None) {
                    Ok(_) => recorded.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
                    Err(e) => return e.to_string(),
                };
            }
            panic!("200,000 runs recorded into a killed server");
        })
    };
    while recorded.load(std::sync::atomic::Ordering::SeqCst) < 5 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    pg.kill();
    let error = writer.join().unwrap();
    assert!(!error.is_empty());
    eprintln!("the writer was told: {error}");
    assert!(!error.contains(loadcell_testkit::DB_PASSWORD), "{error}");
    let reopened = History::connect(&url).err().expect("no server to open");
    assert!(
        reopened
            .to_string()
            .contains("cannot connect to the history store"),
        "{reopened}"
    );
    assert!(!reopened.to_string().contains(loadcell_testkit::DB_PASSWORD));
}
