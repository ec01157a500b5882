//! The SQLite store: every field back as recorded, idempotence, sweeps,
//! queries, a hand-made version 1 file migrated, writers in several
//! threads and processes at once, and a results directory imported.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Barrier};

use common::{run_at, time, write_run, write_sweep};
use loadcell_history::{schema, Error, History, Recorded, SeriesFilter, SeriesKey, FILE_NAME};
use loadcell_record::result::RunResult;
use loadcell_report::fixture;

fn store(dir: &Path) -> History {
    History::open_in(dir).unwrap()
}

#[test]
fn every_field_comes_back_as_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = store(dir.path());
    assert!(dir.path().join(FILE_NAME).exists());
    assert_eq!(h.schema_version().unwrap(), schema::latest());
    common::round_trip(&mut h, dir.path());
}

#[test]
fn the_same_file_twice_is_one_entry_and_sweeps_record_each_run() {
    let dir = tempfile::tempdir().unwrap();
    common::idempotence_and_sweeps(&mut store(dir.path()), dir.path());
}

#[test]
fn series_are_listed_by_workload_target_and_label() {
    let dir = tempfile::tempdir().unwrap();
    common::queries(&mut store(dir.path()), dir.path());
}

/// A change to a run's result.
type Change = fn(&mut RunResult);

#[test]
fn the_key_holds_what_changes_the_numbers_and_nothing_else() {
    let mut r = fixture::run(4, 1000.0);
    r.labels = BTreeMap::from([
        ("commit".to_string(), "abc".to_string()),
        ("env".to_string(), "ci".to_string()),
    ]);
    let key = SeriesKey::of_run(&r);
    assert_eq!(
        key.text(),
        "workload=oltp_read_write target=mysql://127.0.0.1:3306/sbtest threads=4 clients=1 \
         workers=2 time_s=10 warmup_s=2 connection_policy=persistent \
         option.rand_type=special option.table_size=100000 option.tables=4 label.env=ci"
    );
    assert_eq!(key.id().len(), 12);
    assert!(key.id().chars().all(|c| c.is_ascii_hexdigit()));

    // Neither the seed, the report interval, the connect timeout, the
    // start time, the command line (--out, --json, --hdr-log, ...), the
    // server's pid nor the commit make another series.
    let mut same = r.clone();
    same.config.seed = 7;
    same.config.report_interval_s = 5.0;
    same.config.connect_timeout_s = 1.0;
    same.config.start_at = Some("2025-01-01T00:00:00Z".into());
    same.command
        .extend(["--out".into(), "x.json".into(), "--json".into()]);
    same.resources.server_pid = Some(1);
    same.labels.insert("commit".into(), "def".into());
    same.config
        .workload_options
        .insert("key_median".into(), serde_json::Value::Null);
    same.config.target = "mysql://other:***@127.0.0.1:3306/sbtest".into();
    assert_eq!(SeriesKey::of_run(&same).id(), key.id());

    // Each of these does.
    let changes: Vec<(&str, Change)> = vec![
        ("threads", |r| r.config.threads = 8),
        ("clients", |r| r.config.clients_per_thread = 2),
        ("workers", |r| r.config.worker_threads = Some(1)),
        ("time", |r| r.config.time_s = Some(60.0)),
        ("warmup", |r| r.config.warmup_s = 0.0),
        ("rate", |r| r.config.rate = Some(500.0)),
        ("policy", |r| {
            r.config.connection_policy = Some("per-event".into())
        }),
        ("option", |r| {
            r.config
                .workload_options
                .insert("tables".into(), serde_json::json!(8));
        }),
        ("label", |r| {
            r.labels.insert("env".into(), "prod".into());
        }),
        ("port", |r| {
            r.config.target = "mysql://root:***@127.0.0.1:3307/sbtest".into()
        }),
        ("database", |r| {
            r.config.target = "mysql://root:***@127.0.0.1:3306/other".into()
        }),
    ];
    for (what, change) in changes {
        let mut other = r.clone();
        change(&mut other);
        assert_ne!(SeriesKey::of_run(&other).id(), key.id(), "{what}");
    }

    // Open loop names its arrival; a value with a space is quoted.
    let mut open = r.clone();
    open.config.rate = Some(2500.5);
    open.config.arrival = Some("uniform".into());
    open.labels.insert("note".into(), "after fix".into());
    let text = SeriesKey::of_run(&open).text();
    assert!(
        text.contains(" rate=2500.5 arrival=uniform connection_policy=persistent "),
        "{text}"
    );
    assert!(
        text.ends_with(r#" label.env=ci label.note="after fix""#),
        "{text}"
    );
    // A secret-looking workload option is never in the key.
    let mut secret = r.clone();
    secret
        .config
        .workload_options
        .insert("password".into(), serde_json::json!("hunter2"));
    let text = SeriesKey::of_run(&secret).text();
    assert!(
        text.contains("option.password=***") && !text.contains("hunter2"),
        "{text}"
    );
}

/// Version 1 of the schema, written out by hand as a loadcell of that
/// version made it.
const V1: &str = "
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
INSERT INTO schema_version VALUES (1, '2025-01-01T00:00:00.000Z');
CREATE TABLE series (
    id TEXT PRIMARY KEY, key_text TEXT NOT NULL, key_json TEXT NOT NULL,
    workload TEXT NOT NULL, target TEXT NOT NULL);
CREATE INDEX series_by_workload ON series (workload);
CREATE TABLE entries (
    id INTEGER PRIMARY KEY,
    series_id TEXT NOT NULL REFERENCES series (id),
    started_at TEXT NOT NULL, started_at_us INTEGER NOT NULL,
    host TEXT NOT NULL, commit_id TEXT, file TEXT NOT NULL,
    partial INTEGER NOT NULL, verification_failed INTEGER NOT NULL,
    rate_not_reached INTEGER NOT NULL, client_saturated INTEGER NOT NULL,
    throughput REAL NOT NULL, throughput_unit TEXT NOT NULL,
    p50_ms REAL NOT NULL, p90_ms REAL NOT NULL, p99_ms REAL NOT NULL, p999_ms REAL NOT NULL,
    error_rate REAL NOT NULL, client_cpu_us_per_op REAL,
    histogram_encoding TEXT NOT NULL, histogram_unit TEXT NOT NULL, histogram TEXT NOT NULL,
    UNIQUE (series_id, started_at));
CREATE INDEX entries_by_time ON entries (series_id, started_at_us);
";

#[test]
fn a_version_1_file_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let mut old = run_at(0);
    old.labels.insert("env".into(), "ci".into());
    let key = SeriesKey::of_run(&old);
    {
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(V1).unwrap();
        db.execute(
            "INSERT INTO series VALUES (?1, ?2, ?3, ?4, ?5)",
            rusqlite::params![
                key.id(),
                key.text(),
                serde_json::to_string(&key).unwrap(),
                key.workload,
                key.target
            ],
        )
        .unwrap();
        db.execute(
            "INSERT INTO entries (series_id, started_at, started_at_us, host, commit_id, file,
                 partial, verification_failed, rate_not_reached, client_saturated, throughput,
                 throughput_unit, p50_ms, p90_ms, p99_ms, p999_ms, error_rate,
                 client_cpu_us_per_op, histogram_encoding, histogram_unit, histogram)
             VALUES (?1, ?2, 1735689600000000, 'old-host', 'c0', 'old.json', 0, 0, 0, 0,
                 900.0, 'txn_per_sec', 1.0, 2.0, 3.0, 4.0, 0.0, 12.5,
                 'hdr-v2-deflate-base64', 'us', ?3)",
            rusqlite::params![key.id(), old.started_at, old.histograms.response],
        )
        .unwrap();
    }

    let mut h = History::open(&path).unwrap();
    assert_eq!(h.schema_version().unwrap(), 2);
    // Version 2 indexed the labels of the series already there.
    let by_label = h
        .series(&SeriesFilter::default().label("env=ci").unwrap())
        .unwrap();
    assert_eq!(by_label.len(), 1);
    assert_eq!(by_label[0].id, key.id());
    let e = h.entries(&key.id()).unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(
        (
            e[0].host.as_str(),
            e[0].metrics.throughput,
            e[0].metrics.p999_ms
        ),
        ("old-host", 900.0, 4.0)
    );
    assert!(e[0].metrics.server.is_empty(), "version 1 kept no counters");
    // New runs are written with their counters.
    let mut new = old.clone();
    new.started_at = time(60);
    let p = write_run(dir.path(), "new.json", &new);
    h.record(&new, &p, None).unwrap();
    let e = h.entries(&key.id()).unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(e[1].metrics.server["threads_running"], 4.0);
    drop(h);

    // Each migration is recorded once; opening again applies nothing.
    let db = rusqlite::Connection::open(&path).unwrap();
    let versions: Vec<u32> = db
        .prepare("SELECT version FROM schema_version ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, [1, 2]);
    History::open(&path).unwrap();
    let count: u32 = db
        .query_row("SELECT COUNT(*) FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 2);

    // A store from a newer loadcell is refused, not written.
    db.execute("INSERT INTO schema_version VALUES (3, 'later')", [])
        .unwrap();
    match History::open(&path) {
        Err(Error::NewerSchema { found: 3, known: 2 }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a newer schema was opened"),
    }
}

const CHILD_DB: &str = "LOADCELL_HISTORY_CHILD_DB";
const CHILD_INDEX: &str = "LOADCELL_HISTORY_CHILD_INDEX";
const PER_WRITER: u64 = 15;

/// Records `PER_WRITER` runs of writer `index`, each in its own
/// transaction, opening the store itself.
fn write_runs(db: &Path, index: u64) {
    let mut h = History::open(db).unwrap();
    let dir = db.parent().unwrap().join(format!("w{index}"));
    for i in 0..PER_WRITER {
        let r = run_at(index * 1000 + i);
        let p = write_run(&dir, &format!("{i}.json"), &r);
        assert_eq!(h.record(&r, &p, None).unwrap().added, 1);
    }
}

/// Run as a child process by the test below; does nothing on its own.
#[test]
#[ignore]
fn child_writer() {
    if let (Ok(db), Ok(index)) = (std::env::var(CHILD_DB), std::env::var(CHILD_INDEX)) {
        write_runs(Path::new(&db), index.parse().unwrap());
    }
}

#[test]
fn writers_in_threads_and_processes_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(FILE_NAME);
    let exe = std::env::current_exe().unwrap();
    // Processes and threads all open the new file at once: the first to
    // create the schema, the others waiting on it.
    let children: Vec<std::process::Child> = (0..3u64)
        .map(|i| {
            std::process::Command::new(&exe)
                .args(["--exact", "child_writer", "--ignored", "--quiet"])
                .env(CHILD_DB, &db)
                .env(CHILD_INDEX, i.to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let barrier = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (3..7u64)
        .map(|i| {
            let db = db.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                write_runs(&db, i);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let mut h = History::open(&db).unwrap();
    let series = h.series(&SeriesFilter::default()).unwrap();
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].runs, 7 * PER_WRITER);
    let entries = h.entries(&series[0].id).unwrap();
    let mut times: Vec<String> = entries.iter().map(|e| e.started_at.clone()).collect();
    times.dedup();
    assert_eq!(times.len(), (7 * PER_WRITER) as usize);
    let mut want: Vec<String> = (0..7)
        .flat_map(|w| (0..PER_WRITER).map(move |i| time(w * 1000 + i)))
        .collect();
    want.sort();
    assert_eq!(times, want, "every run, oldest first");
}

#[test]
fn a_results_directory_is_imported_with_what_was_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    write_run(&results, "20250101T000000Z-oltp.json", &run_at(0));
    write_run(&results, "20250101T000100Z-oltp.json", &run_at(60));
    let mut sweep = fixture::sweep(&[1.0, 2.0, 4.0], 1);
    sweep.labels.clear();
    write_sweep(&results, "sweep-threads.json", &sweep);
    std::fs::write(results.join("notes.txt"), "not json, not counted").unwrap();
    std::fs::write(results.join("broken.json"), "{not json").unwrap();
    std::fs::write(
        results.join("plan.json"),
        r#"{"schema": "loadcell.plan/v1"}"#,
    )
    .unwrap();
    // A suite directory: suite.json is no result; its steps are.
    let suite = results.join("suite-nightly");
    std::fs::create_dir_all(suite.join("steps")).unwrap();
    std::fs::write(
        suite.join("suite.json"),
        r#"{"schema": "loadcell-suite/1", "steps": []}"#,
    )
    .unwrap();
    write_run(&suite, "steps/01-oltp.json", &run_at(120));
    let mut findmax = fixture::findmax(&[1000.0, 2000.0]);
    findmax.labels.clear();
    write_sweep(&suite, "steps/02-findmax.json", &findmax);

    // The store lives in the directory it imports.
    let mut h = History::open_in(&results).unwrap();
    let first = h.import(&results).unwrap();
    assert_eq!(first.files, 5);
    assert_eq!(
        first.runs,
        Recorded {
            added: 2 + 3 + 1 + 2,
            already: 0
        }
    );
    let mut skipped: Vec<String> = first
        .skipped
        .iter()
        .map(|s| s.path.strip_prefix(&results).unwrap().display().to_string())
        .collect();
    skipped.sort();
    assert_eq!(
        skipped,
        ["broken.json", "plan.json", "suite-nightly/suite.json"]
    );
    assert!(first.skipped.iter().all(|s| !s.reason.is_empty()));

    let again = h.import(&results).unwrap();
    assert_eq!(
        (again.files, again.runs, again.skipped.len()),
        (
            5,
            Recorded {
                added: 0,
                already: 8
            },
            3
        )
    );
    // The three plain runs are one series, in time order, each with its file.
    let key = SeriesKey::of_run(&run_at(0));
    let entries = h.entries(&key.id()).unwrap();
    let files: Vec<String> = entries
        .iter()
        .map(|e| {
            Path::new(&e.file)
                .strip_prefix(&results)
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    assert_eq!(
        files,
        [
            "20250101T000000Z-oltp.json",
            "20250101T000100Z-oltp.json",
            "suite-nightly/steps/01-oltp.json"
        ]
    );
    assert!(entries.iter().all(|e| e.commit.is_none()));
    // A single file can be imported too.
    let one = h.import(&results.join("broken.json")).unwrap();
    assert_eq!((one.files, one.skipped.len()), (0, 1));
}

#[test]
fn a_location_names_a_directory_a_file_or_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::connect(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(h.schema_version().unwrap(), schema::latest());
    assert!(dir.path().join(FILE_NAME).exists());
    let file = dir.path().join("elsewhere.db");
    History::connect(file.to_str().unwrap()).unwrap();
    assert!(file.exists());
    // A server that is not there: the message never shows the password.
    let port = loadcell_testkit::closed_port();
    let url = format!("postgres://lc:s3cret@127.0.0.1:{port}/history");
    let Err(e) = History::connect(&url) else {
        panic!("connected to a closed port");
    };
    let shown = e.to_string();
    assert!(
        shown.contains("lc:***@127.0.0.1") && !shown.contains("s3cret"),
        "{shown}"
    );
}
