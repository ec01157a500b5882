//! Results built with `loadcell_report::fixture`, written as files, and
//! the scenarios every backend must pass.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use loadcell_history::{Entry, History, Recorded, SeriesFilter, SeriesKey, ThroughputUnit};
use loadcell_record::result::{LoopMode, RunResult, RunStatus, StopReason, Verification};
use loadcell_record::sweep::SweepResult;
use loadcell_report::fixture;

/// `2025-01-01T00:00:00Z` plus `seconds`, with milliseconds, as results
/// write it.
pub fn time(seconds: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(1_735_689_600 + seconds);
    humantime::format_rfc3339_millis(t).to_string()
}

/// The fixture's 4-thread run, started `seconds` after 2025-01-01.
pub fn run_at(seconds: u64) -> RunResult {
    let mut r = fixture::run(4, 1000.0);
    r.started_at = time(seconds);
    r
}

pub fn write_run(dir: &Path, name: &str, r: &RunResult) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, r.to_json_pretty() + "\n").unwrap();
    path
}

pub fn write_sweep(dir: &Path, name: &str, s: &SweepResult) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, s.to_json_pretty() + "\n").unwrap();
    path
}

/// One run with every field of an entry set to something particular: a
/// commit label, a failed verification, open loop short of its rate, the
/// client at its cores' limit, errors, and two server counters.
pub fn flagged_run(seconds: u64) -> RunResult {
    let mut r = run_at(seconds);
    r.labels = BTreeMap::from([
        ("commit".to_string(), "abc123".to_string()),
        ("env".to_string(), "ci".to_string()),
    ]);
    r.status = RunStatus::Partial;
    r.stop_reason = StopReason::Interrupted;
    r.verification = Some(Verification::new(1000, 990, false, "counted".into()));
    r.config.rate = Some(1200.0);
    r.config.arrival = Some("poisson".into());
    r.summary.schedule.mode = LoopMode::OpenLoop;
    r.summary.schedule.target_rate = Some(1200.0);
    r.summary.schedule.achieved_rate = 1000.0;
    // A sixth of what fell due was never sent.
    r.summary.schedule.dropped = r.summary.events / 5;
    r.summary.errors = 40;
    for s in &mut r.resources.samples {
        // Two worker threads, 4 host cores: 190% of 200%.
        s.client_cpu_pct = 190.0;
        s.server.insert("connected_clients".into(), 4.0);
    }
    r
}

/// Records `r` written as a file and checks every field of what comes back.
pub fn round_trip(h: &mut History, dir: &Path) {
    let r = flagged_run(0);
    let path = write_run(dir, "flagged.json", &r);
    assert_eq!(
        h.record(&r, &path, Some("not-used")).unwrap(),
        Recorded {
            added: 1,
            already: 0
        }
    );
    let key = SeriesKey::of_run(&r);
    let entries = h.entries(&key.id()).unwrap();
    assert_eq!(entries.len(), 1);
    let e = &entries[0];
    // Everything derived from the result comes back as it was.
    assert_eq!(e, &Entry::of_run(&r, &path, Some("not-used")));
    // And each field is what the result says.
    assert_eq!(e.series, key);
    assert_eq!(e.started_at, "2025-01-01T00:00:00.000Z");
    assert_eq!(e.host, "bench-1");
    assert_eq!(e.commit.as_deref(), Some("abc123"), "the label wins");
    assert_eq!(e.file, path.display().to_string());
    assert!(e.flags.partial);
    assert!(e.flags.verification_failed);
    assert!(e.flags.rate_not_reached, "1000/s of 1200/s");
    assert!(e.flags.client_saturated, "190% of 2 workers' 200%");
    let m = &e.metrics;
    assert_eq!(m.throughput_unit, ThroughputUnit::TxnPerSec);
    assert_eq!(m.throughput, r.summary.txn_per_sec.unwrap());
    let l = &r.summary.latency_ms;
    assert_eq!(
        (m.p50_ms, m.p90_ms, m.p99_ms, m.p999_ms),
        (l.p50, l.p90, l.p99, l.p999)
    );
    assert!(m.p50_ms > 0.0 && m.p50_ms < m.p90_ms && m.p99_ms <= m.p999_ms);
    assert_eq!(m.error_rate, 40.0 / r.summary.ops as f64);
    // 2 s of CPU over the fixture's operations.
    let per_op = 2.0e6 / r.summary.ops as f64;
    assert!((m.client_cpu_us_per_op.unwrap() - per_op).abs() < 1e-9);
    // threads_running is 4 in every sample; connected_clients added above.
    assert_eq!(
        m.server,
        BTreeMap::from([
            ("connected_clients".to_string(), 4.0),
            ("threads_running".to_string(), 4.0),
        ])
    );
    assert_eq!(e.histogram.encoding, "hdr-v2-deflate-base64");
    assert_eq!(e.histogram.unit, "us");
    assert_eq!(e.histogram.response, r.histograms.response);
    let h2 = e.histogram.decode().unwrap();
    assert_eq!(h2.len(), 2000, "the fixture's 2000 latencies");

    // The commit passed in is used when the run has no label.
    let mut unlabelled = run_at(5);
    unlabelled.labels.clear();
    let path = write_run(dir, "plain.json", &unlabelled);
    h.record(&unlabelled, &path, Some("def456")).unwrap();
    let got = h.entries(&SeriesKey::of_run(&unlabelled).id()).unwrap();
    assert_eq!(got[0].commit.as_deref(), Some("def456"));
    assert_eq!(
        got[0].flags,
        loadcell_history::Flags::default(),
        "a clean run"
    );
    assert_eq!(got[0].metrics.error_rate, 0.0);
    assert_eq!(got[0].metrics.server.len(), 1);
}

/// The same file twice adds one entry; a sweep's runs are each recorded
/// once, under their points.
pub fn idempotence_and_sweeps(h: &mut History, dir: &Path) {
    let r = run_at(100);
    let path = write_run(dir, "r.json", &r);
    assert_eq!(h.record_file(&path, None).unwrap().added, 1);
    assert_eq!(
        h.record_file(&path, None).unwrap(),
        Recorded {
            added: 0,
            already: 1
        }
    );
    assert_eq!(h.entries(&SeriesKey::of_run(&r).id()).unwrap().len(), 1);

    // Three points, two repeats each: the fixture gives every run the
    // same start, so the repeats get their own.
    let mut sweep = fixture::sweep(&[1.0, 2.0, 4.0], 2);
    let mut n = 200;
    for p in &mut sweep.points {
        for run in &mut p.runs {
            run.started_at = time(n);
            n += 1;
        }
    }
    let path = write_sweep(dir, "sweep.json", &sweep);
    assert_eq!(
        h.record_file(&path, Some("c1")).unwrap(),
        Recorded {
            added: 6,
            already: 0
        }
    );
    assert_eq!(
        h.record_file(&path, Some("c1")).unwrap(),
        Recorded {
            added: 0,
            already: 6
        }
    );
    let filter = SeriesFilter {
        labels: vec![("system".into(), "mariadb".into())],
        ..SeriesFilter::default()
    };
    let series = h.series(&filter).unwrap();
    assert_eq!(series.len(), 3, "{series:#?}");
    for s in &series {
        assert_eq!(s.runs, 2);
        let (name, value) = s.key.point.clone().unwrap();
        assert_eq!(name, "sweep.threads");
        assert!(
            s.text.ends_with(&format!(" sweep.threads={value}")),
            "{}",
            s.text
        );
        assert_eq!(s.key.options["threads"], value);
        let entries = h.entries(&s.id).unwrap();
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().all(|e| e.commit.as_deref() == Some("c1")));
        assert!(entries[0].started_at < entries[1].started_at);
    }

    // A findmax file: a probe short of its rate is flagged, the others not.
    let mut findmax = fixture::findmax(&[1000.0, 4000.0, 5000.0]);
    for (i, p) in findmax.points.iter_mut().enumerate() {
        p.runs[0].started_at = time(300 + i as u64);
    }
    let path = write_sweep(dir, "findmax.json", &findmax);
    assert_eq!(h.record_file(&path, None).unwrap().added, 3);
    let expected = Entry::of_sweep(&findmax, &path, None);
    for (p, want) in findmax.points.iter().zip(&expected) {
        let key = &want.series;
        // The findmax file's labels are its runs' too.
        assert!(key
            .text()
            .ends_with(&format!(" label.system=mariadb findmax.rate={}", p.value)));
        assert_eq!(key.options["rate"], format!("{}", p.value));
        let e = h.entries(&key.id()).unwrap();
        assert_eq!(&e, std::slice::from_ref(want));
        assert_eq!(e.len(), 1);
        // The fixture's server tops out at 4500/s: 5000/s is not reached.
        assert_eq!(
            e[0].flags.rate_not_reached,
            p.value == 5000.0,
            "{}",
            p.value
        );
    }
}

/// Listing series by workload, target and labels; entries oldest first.
pub fn queries(h: &mut History, dir: &Path) {
    let mut a = run_at(1000);
    a.labels.insert("env".into(), "prod".into());
    let mut b = run_at(1001);
    b.config.workload = "oltp_point_select".into();
    b.labels.insert("env".into(), "prod".into());
    let mut c = run_at(1002);
    c.config.target = "postgres://u:***@pg.example:5432/bench".into();
    c.labels.insert("env".into(), "staging".into());
    // Recorded newest first: entries still come back oldest first.
    let mut later = a.clone();
    later.started_at = time(2000);
    let mut earliest = a.clone();
    earliest.started_at = time(999);
    for (i, r) in [&later, &a, &b, &c, &earliest].into_iter().enumerate() {
        let p = write_run(dir, &format!("q{i}.json"), r);
        h.record(r, &p, None).unwrap();
    }
    let ids = |h: &mut History, f: &SeriesFilter| -> Vec<String> {
        h.series(f).unwrap().into_iter().map(|s| s.id).collect()
    };
    let prod = SeriesFilter::default().label("env=prod").unwrap();
    let mut want = vec![SeriesKey::of_run(&a).id(), SeriesKey::of_run(&b).id()];
    want.sort();
    let mut got = ids(h, &prod);
    got.sort();
    assert_eq!(got, want);
    let point_select = SeriesFilter {
        workload: Some("oltp_point_select".into()),
        ..prod.clone()
    };
    assert_eq!(ids(h, &point_select), [SeriesKey::of_run(&b).id()]);
    let on_pg = SeriesFilter {
        target_contains: Some("pg.example".into()),
        ..SeriesFilter::default()
    };
    let found = h.series(&on_pg).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key.target, "postgres://pg.example:5432/bench");
    assert!(!found[0].text.contains("***") && !found[0].text.contains("u:"));
    let none = SeriesFilter::default()
        .label("env=prod")
        .unwrap()
        .label("region=eu")
        .unwrap();
    assert!(h.series(&none).unwrap().is_empty());

    let info = h
        .series(&prod)
        .unwrap()
        .into_iter()
        .find(|s| s.id == SeriesKey::of_run(&a).id())
        .unwrap();
    assert_eq!(info.runs, 3);
    assert_eq!(info.first_started_at, time(999));
    assert_eq!(info.last_started_at, time(2000));
    let times: Vec<String> = h
        .entries(&info.id)
        .unwrap()
        .into_iter()
        .map(|e| e.started_at)
        .collect();
    assert_eq!(times, [time(999), time(1000), time(2000)]);
    assert!(h.entries("000000000000").unwrap().is_empty());
}
