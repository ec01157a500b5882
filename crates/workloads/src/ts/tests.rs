use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use loadcell_core::ts::{Series, StoredPoints, TimeRange, TsQuery, WriteOutcome};

use super::ingest::{IngestScript, Layout};
use super::*;

/// A time-series database in memory: each series' points of the first
/// field, by the series' line-protocol name; stores by measurement, with
/// their markers, where `has_stores`.
#[derive(Default)]
struct Points {
    has_stores: bool,
    stores: HashMap<String, String>,
    series: BTreeMap<String, Vec<(i64, f64)>>,
    /// The request being built: the current point's name and first field.
    pending: Vec<(String, i64, f64)>,
    point: (String, Option<f64>),
    requests: Vec<u64>,
}

impl TsConn for Points {
    const ACKNOWLEDGED: bool = true;

    fn point(&mut self, measurement: &str) {
        self.point = (measurement.to_string(), None);
    }
    fn tag(&mut self, key: &str, value: &str) {
        self.point.0 += &format!(",{key}={value}");
    }
    fn field(&mut self, _key: &str, value: f64) {
        self.point.1.get_or_insert(value);
    }
    fn end_point(&mut self, timestamp_ns: i64) {
        let (name, value) = std::mem::take(&mut self.point);
        self.pending.push((name, timestamp_ns, value.unwrap()));
    }
    async fn write(&mut self, _: &mut dyn FnMut(&str)) -> Result<WriteOutcome, DriverError> {
        let points = self.pending.len() as u64;
        for (name, at, value) in self.pending.drain(..) {
            self.series.entry(name).or_default().push((at, value));
        }
        self.requests.push(points);
        Ok(WriteOutcome { points, failed: 0 })
    }
    async fn query(&mut self, _: &TsQuery<'_>) -> Result<u64, DriverError> {
        Ok(1)
    }
    async fn stored_points(
        &mut self,
        series: Series<'_>,
        _field: &str,
        range: TimeRange,
    ) -> Result<Option<StoredPoints>, DriverError> {
        let mut name = series.measurement.to_string();
        for (k, v) in series.tags {
            name += &format!(",{k}={v}");
        }
        let points: Vec<_> = self.series.get(&name).into_iter().flatten().collect();
        let inside: Vec<_> = points
            .into_iter()
            .filter(|(at, _)| (range.start_ns..range.end_ns).contains(at))
            .collect();
        Ok(inside.last().map(|&&(at, value)| StoredPoints {
            count: inside.len() as u64,
            sum: inside.iter().map(|(_, v)| v).sum(),
            last_timestamp_ns: at,
            last_value: value,
        }))
    }
    async fn series_count(
        &mut self,
        measurement: &str,
        _: &str,
        range: Option<TimeRange>,
    ) -> Result<u64, DriverError> {
        if self.has_stores && !self.stores.contains_key(measurement) {
            return Err(DriverError::fatal("database not found"));
        }
        let prefix = format!("{measurement},");
        let inside = |at: &i64| range.is_none_or(|r| (r.start_ns..r.end_ns).contains(at));
        Ok(self
            .series
            .iter()
            .filter(|(k, points)| k.starts_with(&prefix) && points.iter().any(|(at, _)| inside(at)))
            .count() as u64)
    }
    async fn create_store(&mut self, measurement: &str, marker: &str) -> Result<bool, DriverError> {
        if self.has_stores {
            self.stores
                .insert(measurement.to_string(), marker.to_string());
        }
        Ok(self.has_stores)
    }
    async fn store_marker(&mut self, measurement: &str) -> Result<Option<String>, DriverError> {
        Ok(self.stores.get(measurement).cloned())
    }
    async fn holdings(&mut self, shape: Shape<'_>) -> Result<Holdings, DriverError> {
        let prefix = format!("{},", shape.measurement);
        let written = self.series.keys().any(|k| k.starts_with(&prefix));
        Ok(Holdings {
            names: written
                .then(|| shape.measurement.to_string())
                .into_iter()
                .collect(),
            foreign: Vec::new(),
        })
    }
    async fn drop_store(&mut self, shape: Shape<'_>, _: &[String]) -> Result<(), DriverError> {
        let prefix = format!("{},", shape.measurement);
        self.stores.remove(shape.measurement);
        self.series.retain(|k, _| !k.starts_with(&prefix));
        Ok(())
    }
    async fn drop_database_if_empty(&mut self) -> Result<DatabaseLeft, DriverError> {
        Ok(DatabaseLeft::NotOwn)
    }
}

#[derive(Default)]
struct Messages(RefCell<Vec<String>>);

impl PrepareObserver for Messages {
    fn message(&self, text: &str) {
        self.0.borrow_mut().push(text.to_string());
    }
    fn add_total(&self, _: u64) {}
    fn loaded(&self, _: u64) {}
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(f)
}

const SECOND: i64 = 1_000_000_000;

/// 1000 series of cpu-only, 20 points each, 10 s apart.
fn backfill(series: u64) -> TsOptions {
    TsOptions {
        space: UseCase::CpuOnly.space(10, series).unwrap(),
        use_case: Some(UseCase::CpuOnly),
        points_per_request: 500,
        interval_ns: 10 * SECOND,
        timing: Timing::BackFill {
            start_ns: 1_700_000_000 * SECOND,
            end_ns: 1_700_000_200 * SECOND,
        },
        sessions: 1,
    }
}

/// Sends every request the script has, as sessions would, one at a time.
fn ingest(script: &IngestScript, conn: &mut Points) {
    block_on(async {
        let mut tags = script.space.tag_buffer();
        while let super::ingest::Claim::Lease(lease) = script.claim() {
            let points = script.build(conn, &lease, &mut tags);
            script.tally.sent.fetch_add(points, Ordering::Relaxed);
            let outcome = conn.write(&mut |_| {}).await.unwrap();
            script
                .tally
                .answered
                .fetch_add(outcome.points, Ordering::Relaxed);
        }
    })
}

#[test]
fn requests_carry_about_the_points_per_request_whatever_the_series() {
    let l = |series, measurements| Layout::new(series, measurements, 500, 1);
    let at = |groups, group_size, rounds_per_request| Layout {
        groups,
        group_size,
        rounds_per_request,
    };
    assert_eq!(l(1000, 1), at(2, 500, 1));
    assert_eq!(l(1001, 1), at(3, 500, 1));
    assert_eq!(l(100, 1), at(1, 100, 5));
    // devops: 9 measurements, a point of each per series and round.
    assert_eq!(l(10_000, 9), at(182, 55, 1));
    assert_eq!(l(1000, 1).requests(20), 40);
    assert_eq!(l(100, 1).requests(20), 4);
    assert_eq!(backfill(1000).requests(), Some(40));
}

#[test]
fn a_backfill_writes_every_series_its_points_in_time_order_and_verifies() {
    let opts = backfill(1000);
    let script = IngestScript::new(&opts, 42);
    let mut conn = Points::default();
    ingest(&script, &mut conn);
    assert_eq!(conn.requests, vec![500; 40]);
    assert_eq!(conn.series.len(), 1000);
    for points in conn.series.values() {
        assert_eq!(points.len(), 20);
        assert!(points.windows(2).all(|w| w[1].0 - w[0].0 == 10 * SECOND));
    }
    let v = block_on(script.verify(&mut conn, 20, Duration::ZERO)).unwrap();
    assert!(v.ok, "{v:?}");
    assert_eq!((v.expected, v.found), (1000, 1000));
    assert!(v.how.contains("20 random series read back"), "{}", v.how);
    // The same seed sends the same values.
    let again = IngestScript::new(&opts, 42);
    let mut other = Points::default();
    ingest(&again, &mut other);
    assert_eq!(conn.series, other.series);
}

#[test]
fn devops_is_tsbs_nine_measurements_with_their_tags_and_fields_and_verifies() {
    let space = UseCase::Devops.space(10, 100).unwrap();
    let shape: Vec<(&str, Vec<&str>, usize)> = space
        .measurements
        .iter()
        .map(|m| {
            let tags = m.tags.iter().map(|t| t.key.as_str()).collect();
            (m.name.as_str(), tags, m.fields.len())
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("cpu", vec![], 10),
            ("diskio", vec!["serial"], 7),
            ("disk", vec!["path", "fstype"], 7),
            ("kernel", vec![], 6),
            ("mem", vec![], 9),
            ("net", vec!["interface"], 8),
            ("nginx", vec!["port", "server"], 7),
            ("postgresl", vec![], 16),
            ("redis", vec!["port", "server"], 31),
        ]
    );
    assert_eq!(space.tag_count(), 10, "TSBS's host tags");
    let opts = TsOptions {
        space,
        use_case: Some(UseCase::Devops),
        ..backfill(100)
    };
    let script = IngestScript::new(&opts, 9);
    let mut conn = Points::default();
    ingest(&script, &mut conn);
    // A measurement's own tags are the host's: one series per host each.
    for m in ["cpu", "disk", "net", "redis"] {
        let prefix = format!("{m},hostname=");
        let series = conn.series.keys().filter(|k| k.starts_with(&prefix));
        assert_eq!(series.count(), 100, "{m}");
    }
    let disks: Vec<&String> = conn
        .series
        .keys()
        .filter(|k| k.starts_with("disk,"))
        .collect();
    for disk in &disks {
        let fstype = disk.rsplit_once(",fstype=").map(|(_, f)| f);
        assert!(disk.contains(",path=/dev/sda"), "{disk}");
        assert!(matches!(fstype, Some("ext3" | "ext4" | "btrfs")), "{disk}");
    }
    let paths: std::collections::HashSet<_> = disks
        .iter()
        .map(|d| d.split(",path=").nth(1).unwrap().split(',').next().unwrap())
        .collect();
    assert_eq!(paths.len(), 10, "drawn over TSBS's ten paths");
    let v = block_on(script.verify(&mut conn, 20, Duration::ZERO)).unwrap();
    assert!(v.ok, "{v:?}");
    assert_eq!((v.expected, v.found), (100, 100));
    // Every last value is recomputed: one changed fails the check.
    let cpu = conn
        .series
        .keys()
        .find(|k| k.starts_with("cpu,"))
        .unwrap()
        .clone();
    conn.series.get_mut(&cpu).unwrap().last_mut().unwrap().1 += 0.5;
    let v = block_on(script.verify(&mut conn, 100, Duration::ZERO)).unwrap();
    let host = cpu.split(',').nth(1).unwrap().replace("hostname=", "");
    assert!(
        !v.ok
            && v.how.starts_with(&format!(
                "1 of 100 spot-checked series short: cpu{{hostname={host}}} 20 points summing"
            )),
        "{}",
        v.how
    );
}

/// An earlier run's points at the run's timestamps: as many points, but
/// values from another seed.
#[test]
fn points_another_run_left_at_the_same_timestamps_fail_the_check() {
    let opts = backfill(10);
    let mut earlier = Points::default();
    ingest(&IngestScript::new(&opts, 1), &mut earlier);
    // This run's points arrive for every series but the first point of
    // one, where the earlier run's point at that timestamp stays.
    let script = IngestScript::new(&opts, 2);
    let mut conn = Points::default();
    ingest(&script, &mut conn);
    let first = conn.series.keys().next().unwrap().clone();
    conn.series.get_mut(&first).unwrap()[0] = earlier.series[&first][0];
    let v = block_on(script.verify(&mut conn, 10, Duration::ZERO)).unwrap();
    assert!(!v.ok, "{}", v.how);
    assert!(
        v.how.starts_with("1 of 10 spot-checked series short: ") && v.how.contains(" summing "),
        "{}",
        v.how
    );
}

#[test]
fn a_series_missing_or_short_fails_the_check_naming_it() {
    let script = IngestScript::new(&backfill(50), 7);
    let mut conn = Points::default();
    ingest(&script, &mut conn);
    // Every series is spot-checked: one lost its last point, another is gone.
    let mut names = conn.series.keys().cloned();
    let (short, gone) = (names.next().unwrap(), names.next().unwrap());
    conn.series.get_mut(&short).unwrap().pop();
    conn.series.remove(&gone);
    let v = block_on(script.verify(&mut conn, 500, Duration::from_millis(600))).unwrap();
    assert!(!v.ok);
    assert_eq!((v.expected, v.found), (50, 49));
    // The cause first, then two named examples, each in a few words.
    let name = |series: &str| {
        let (m, tags) = series.split_once(',').unwrap();
        format!("{m}{{{}}}", tags.split(',').next().unwrap())
    };
    assert!(
        v.how.starts_with(
            "1 of the 50 series written missing from the run's time range; \
             2 of 50 spot-checked series short: "
        ),
        "{}",
        v.how
    );
    assert!(
        v.how.contains(&format!("{} 19 of 20 points", name(&short)))
            && v.how.contains(&format!("{} 0 of 20 points", name(&gone))),
        "{}",
        v.how
    );
}

#[test]
fn a_group_is_written_by_one_session_at_a_time() {
    use super::ingest::Claim;
    let script = IngestScript::new(&backfill(1000), 1);
    let (Claim::Lease(a), Claim::Lease(b)) = (script.claim(), script.claim()) else {
        panic!("two groups, two leases");
    };
    assert!(matches!(script.claim(), Claim::Wait));
    drop(a);
    assert!(matches!(script.claim(), Claim::Lease(_)));
    drop(b);
}

#[test]
fn every_session_has_a_group_to_write_and_they_share_the_requests() {
    use super::ingest::Claim;
    // 10,000 series, 5000 points a request, 4 sessions: 4 groups of 2500
    // written 2 rounds a request, not 2 groups of 5000 and 2 sessions idle.
    let layout = Layout::new(10_000, 1, 5000, 4);
    assert_eq!(
        layout,
        Layout {
            groups: 4,
            group_size: 2500,
            rounds_per_request: 2
        }
    );
    assert_eq!(
        Layout::new(3, 1, 5000, 4).groups,
        3,
        "fewer series than sessions"
    );
    let opts = TsOptions {
        points_per_request: 5000,
        sessions: 4,
        ..backfill(10_000)
    };
    let script = IngestScript::new(&opts, 1);
    let mut conn = Points::default();
    let mut tags = script.space.tag_buffer();
    let mut requests = [0u64; 4];
    // Sessions finish their requests in turn, each claiming again at once.
    let mut leases: Vec<_> = (0..4)
        .map(|_| match script.claim() {
            Claim::Lease(lease) => Some(lease),
            _ => panic!("every session has a group"),
        })
        .collect();
    'run: loop {
        for (session, slot) in leases.iter_mut().enumerate() {
            let Some(lease) = slot.take() else {
                break 'run;
            };
            script.build(&mut conn, &lease, &mut tags);
            block_on(conn.write(&mut |_| {})).unwrap();
            requests[session] += 1;
            drop(lease);
            *slot = match script.claim() {
                Claim::Lease(lease) => Some(lease),
                Claim::Done => None,
                Claim::Wait => panic!("session {session} idles while series are left"),
            };
        }
    }
    assert_eq!(requests.iter().sum::<u64>(), opts.requests().unwrap());
    let (least, most) = (
        requests.iter().min().unwrap(),
        requests.iter().max().unwrap(),
    );
    assert!(most - least <= 1, "{requests:?}");
    // Each series' points in time order, all of them.
    assert_eq!(conn.series.len(), 10_000);
    for points in conn.series.values() {
        assert_eq!(points.len(), 20);
        assert!(points.windows(2).all(|w| w[1].0 > w[0].0));
    }
}

#[test]
fn failed_points_fail_the_check() {
    let script = IngestScript::new(&backfill(10), 1);
    let mut conn = Points::default();
    ingest(&script, &mut conn);
    script.tally.failed.store(3, Ordering::Relaxed);
    let v = block_on(script.verify(&mut conn, 5, Duration::ZERO)).unwrap();
    assert!(!v.ok && v.how.contains("3 points failed"), "{v:?}");
}

#[test]
fn stores_are_made_marked_and_dropped_only_if_loadcells() {
    let space = backfill(10).space;
    let messages = Messages::default();
    let mut conn = Points {
        has_stores: true,
        ..Points::default()
    };
    block_on(async {
        let e = check_store(&mut conn, &space, false).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "the store of 'cpu' does not exist (database not found)"
        );
        create_stores(&mut conn, &space, &messages).await.unwrap();
        assert!(Tag::parse(&conn.stores["cpu"]).is_some());
        check_store(&mut conn, &space, false).await.unwrap();
        let e = check_store(&mut conn, &space, true).await.unwrap_err();
        assert!(e.to_string().contains("holds no series of 'cpu'"), "{e}");
        // Someone else's store is neither taken nor dropped.
        conn.stores.insert("cpu".to_string(), String::new());
        let e = create_stores(&mut conn, &space, &messages)
            .await
            .unwrap_err();
        assert!(e.message.contains("is not loadcell's"), "{e}");
        assert_eq!(owner(&mut conn, "cpu").await.unwrap(), Owner::Other);
    });
    // A database without stores needs nothing prepared.
    let mut conn = Points::default();
    block_on(async {
        create_stores(&mut conn, &space, &messages).await.unwrap();
        check_store(&mut conn, &space, false).await.unwrap();
    });
    assert!(messages
        .0
        .borrow()
        .iter()
        .any(|m| m.contains("keeps no stores")));
}

/// 100 series in real time, `requests` requests of 5 rounds sent one
/// after another as fast as they go.
fn real_time_requests(requests: usize) -> (IngestScript, Points) {
    let opts = TsOptions {
        timing: Timing::RealTime,
        ..backfill(100)
    };
    let script = IngestScript::new(&opts, 3);
    let mut conn = Points::default();
    block_on(async {
        let mut tags = script.space.tag_buffer();
        for _ in 0..requests {
            let super::ingest::Claim::Lease(lease) = script.claim() else {
                panic!("real time never ends");
            };
            script.build(&mut conn, &lease, &mut tags);
            conn.write(&mut |_| {}).await.unwrap();
        }
    });
    (script, conn)
}

#[test]
fn real_time_points_are_now_and_a_millisecond_apart_at_least() {
    let (script, mut conn) = real_time_requests(3);
    // 100 series, 5 rounds a request: 15 points each.
    for points in conn.series.values() {
        assert_eq!(points.len(), 15);
        assert!(points.windows(2).all(|w| w[1].0 - w[0].0 >= 1_000_000));
    }
    let v = block_on(script.verify(&mut conn, 10, Duration::ZERO)).unwrap();
    assert!(v.ok, "{v:?}");
    assert_eq!(v.expected, 100);
}

/// 100 requests of 5 rounds each to one group in well under a second run
/// the timestamps ~0.5 s ahead of the clock: the check waits for the clock
/// to pass them (a later run's time range then holds none) and says so.
#[test]
fn a_real_time_run_ahead_of_the_clock_waits_for_it_before_its_check() {
    let (script, mut conn) = real_time_requests(100);
    let newest = conn
        .series
        .values()
        .flat_map(|points| points.iter().map(|p| p.0))
        .max()
        .unwrap();
    assert!(
        newest > loadcell_core::clock::wall_ns() + 300_000_000,
        "ran ahead"
    );
    let v = block_on(script.verify(&mut conn, 10, Duration::ZERO)).unwrap();
    assert!(v.ok, "{v:?}");
    assert!(
        loadcell_core::clock::wall_ns() > newest,
        "the clock passed them"
    );
    assert!(
        v.how
            .contains("s ahead of the clock (over one point a millisecond per series): it waited"),
        "{}",
        v.how
    );
}

#[test]
fn query_ranges_are_an_hour_within_the_data_or_all_of_it() {
    use rand::SeedableRng;

    use super::query::QueryScript;
    let hour = 3600 * SECOND;
    let mut opts = backfill(100);
    let kinds = [QueryKind::RangeMean];
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let short = QueryScript::new(&opts, &kinds, RandType::Uniform);
    let Timing::BackFill { start_ns, end_ns } = opts.timing else {
        panic!("back-fill")
    };
    assert_eq!(short.window(&mut rng), TimeRange { start_ns, end_ns });
    opts.timing = Timing::BackFill {
        start_ns,
        end_ns: start_ns + 3 * hour,
    };
    let long = QueryScript::new(&opts, &kinds, RandType::Uniform);
    let starts: std::collections::HashSet<i64> = (0..50)
        .map(|_| {
            let w = long.window(&mut rng);
            assert_eq!(w.end_ns - w.start_ns, hour);
            assert!(w.start_ns >= start_ns && w.end_ns <= start_ns + 3 * hour);
            w.start_ns
        })
        .collect();
    assert!(starts.len() > 40, "windows move about the data");
}
