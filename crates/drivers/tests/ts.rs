//! The time-series drivers against real servers, one per test (each
//! starts in well under a second, QuestDB in a few): every protocol ×
//! database pair that works writes points, counts its series, reads a
//! series back, asks each query, and goes through its store's life.

mod local_runtime;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loadcell_core::ts::{DatabaseLeft, Names, Series, Shape, TimeRange, TsConn, TsQuery};
use loadcell_core::{Driver, ErrorClass, Target};
use loadcell_drivers::ts::influx_tcp::InfluxTcpDriver;
use loadcell_drivers::ts::opentsdb_tcp::OpenTsdbTcpDriver;
use loadcell_drivers::ts::{influx, opentsdb, remote_write, Protocol, TsDriver};
use loadcell_testkit::TsServer;
use local_runtime::block_on;

/// The system allocator, counting each thread's allocations, for the
/// check that writing and querying allocate nothing once warm.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Points written, over `SERIES` series, [`Expect::spacing`] apart (so
/// that each series' timestamps grow, as Prometheus wants).
const POINTS: usize = 300;
const SERIES: usize = 10;
const FIELDS: [&str; 2] = ["usage", "idle"];

fn start(server: Result<TsServer, String>, what: &str) -> TsServer {
    server.unwrap_or_else(|e| panic!("cannot start {what}: {e}"))
}

fn driver<P: Protocol>(url: &str) -> TsDriver<P> {
    TsDriver::from_target(&Target::parse(url).expect("valid URL")).expect("valid target")
}

/// A driver over TCP: `scheme` to `port`, queries to the HTTP `query`.
fn tcp_driver<D>(
    from_target: fn(&Target) -> Result<D, String>,
    scheme: &str,
    port: Option<u16>,
    query: &str,
) -> D {
    let url = format!("{scheme}://127.0.0.1:{}?query={query}", port.unwrap());
    from_target(&Target::parse(&url).expect("valid URL")).expect("valid target")
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

fn host(i: usize) -> String {
    format!("h{}", i % SERIES)
}

fn dc(i: usize) -> &'static str {
    ["east", "west"][i % SERIES % 2]
}

fn usage(i: usize) -> f64 {
    i as f64 + 0.5
}

/// What each pair expects of its database.
struct Expect {
    product: &'static str,
    /// Whether the database has stores to create (InfluxDB, QuestDB).
    stores: bool,
    /// How long written points may take to be counted (InfluxDB's
    /// OpenTSDB listener batches them for a second).
    delay: Duration,
    /// Between points: a millisecond, or a second where the database keeps
    /// no finer (InfluxDB 1.6's OpenTSDB listener reads a millisecond
    /// timestamp's milliseconds as microseconds).
    spacing: Duration,
}

/// Writes, verifies, queries and drops `measurement` through `d`.
async fn round_trip<D>(d: D, measurement: &str, expect: Expect)
where
    D: Driver,
    D::Conn: TsConn,
{
    let url = d.endpoint();
    let mut conn = d
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"));
    let info = d.server_info(&mut conn).await.unwrap();
    assert_eq!(info.product, expect.product, "{url}");
    assert!(
        info.version
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit()),
        "{url}: version {:?}",
        info.version
    );

    assert_eq!(conn.store_marker(measurement).await.unwrap(), None, "{url}");
    let marker = r#"{"created_by":"loadcell","run":"it's \"7\""}"#;
    assert_eq!(
        conn.create_store(measurement, marker).await.unwrap(),
        expect.stores,
        "{url}"
    );
    let stored_marker = conn.store_marker(measurement).await.unwrap();
    assert_eq!(
        stored_marker.as_deref(),
        expect.stores.then_some(marker),
        "{url}"
    );

    let spacing = expect.spacing.as_nanos() as i64;
    let base =
        (now_ns() - POINTS as i64 * spacing) / 1_000_000_000 * 1_000_000_000 - 10_000_000_000;
    let ts = |i: usize| base + i as i64 * spacing;
    for batch in (0..POINTS).collect::<Vec<_>>().chunks(100) {
        for &i in batch {
            conn.point(measurement);
            conn.tag("host", &host(i));
            conn.tag("dc", dc(i));
            conn.field(FIELDS[0], usage(i));
            conn.field(FIELDS[1], i as f64 * 2.0);
            conn.end_point(ts(i));
        }
        let mut reasons = Vec::new();
        let outcome = conn
            .write(&mut |r| reasons.push(r.to_string()))
            .await
            .unwrap_or_else(|e| panic!("{url}: write: {e}"));
        assert_eq!(
            (outcome.points, outcome.failed),
            (batch.len() as u64, 0),
            "{url}: {reasons:?}"
        );
    }

    let waited = std::time::Instant::now();
    let count = loop {
        // Until the delay, an error is points not there yet: QuestDB makes
        // a table's columns when it commits lines that came over TCP.
        let count = conn.series_count(measurement, FIELDS[0], None).await;
        if count.as_ref().is_ok_and(|&n| n == SERIES as u64) || waited.elapsed() > expect.delay {
            break count.unwrap_or_else(|e| panic!("{url}: series count: {e}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(count, SERIES as u64, "{url}");

    let range = TimeRange {
        start_ns: base,
        end_ns: ts(POINTS),
    };
    // Counted in a time range, only the series with a point in it.
    let count_in = |start_ns, end_ns| Some(TimeRange { start_ns, end_ns });
    assert_eq!(
        conn.series_count(measurement, FIELDS[0], count_in(base, ts(POINTS)))
            .await
            .unwrap(),
        SERIES as u64,
        "{url}"
    );
    assert_eq!(
        conn.series_count(
            measurement,
            FIELDS[0],
            count_in(base - 3_600_000_000_000, base)
        )
        .await
        .unwrap(),
        0,
        "{url}: no point before the first"
    );
    let h0 = host(0);
    let tags = [("host", h0.as_str()), ("dc", dc(0))];
    let series = Series {
        measurement,
        tags: &tags,
    };
    let stored = conn
        .stored_points(series, FIELDS[0], range)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{url}: no points of {h0}"));
    let last = POINTS - SERIES;
    assert_eq!(stored.count, (POINTS / SERIES) as u64, "{url}");
    assert_eq!(stored.last_value, usage(last), "{url}");
    // Milliseconds (OpenTSDB, Prometheus, VictoriaMetrics) or finer.
    assert_eq!(
        stored.last_timestamp_ns / 1_000_000,
        ts(last) / 1_000_000,
        "{url}"
    );
    let missing = Series {
        measurement,
        tags: &[("host", "nowhere"), ("dc", "east")],
    };
    assert_eq!(
        conn.stored_points(missing, FIELDS[0], range).await.unwrap(),
        None,
        "{url}"
    );

    let queries = [
        TsQuery::LastPoint {
            series,
            field: FIELDS[0],
        },
        TsQuery::RangeMean {
            series,
            field: FIELDS[0],
            range,
            step_ns: 20 * spacing,
        },
        TsQuery::GroupBy {
            measurement,
            field: FIELDS[1],
            tag: "dc",
            range,
        },
    ];
    for q in &queries {
        let rows = conn
            .query(q)
            .await
            .unwrap_or_else(|e| panic!("{url}: {q:?}: {e}"));
        assert!(rows > 0, "{url}: {q:?} answered no rows");
    }
    let group_by = conn.query(&queries[2]).await.unwrap();
    assert_eq!(group_by, 2, "{url}: one mean per dc");

    let counters = d.server_counters(&mut conn).await.unwrap();
    if expect.product != "QuestDB" {
        assert!(
            counters
                .iter()
                .any(|(name, v)| name.starts_with("ts_") && *v > 0.0),
            "{url}: {counters:?}"
        );
    }

    let shape = Shape {
        measurement,
        tags: Names::Listed(&["host", "dc"]),
        fields: Names::Listed(&FIELDS),
    };
    let held = conn.holdings(shape).await.unwrap();
    assert!(
        !held.names.is_empty() && held.foreign.is_empty(),
        "{url}: {held:?}"
    );
    conn.drop_store(shape, &held.names).await.unwrap();
    let left = conn.drop_database_if_empty().await.unwrap();
    assert_eq!(
        matches!(left, DatabaseLeft::Dropped(_)),
        expect.product == "InfluxDB",
        "{url}: {left:?}"
    );
    assert_eq!(conn.store_marker(measurement).await.unwrap(), None, "{url}");
    if !expect.stores {
        assert_eq!(
            conn.series_count(measurement, FIELDS[0], None)
                .await
                .unwrap(),
            0,
            "{url}"
        );
    }
}

/// Writes one good point and `bad`'s, and returns the outcome with the
/// reasons given.
async fn write_with_bad_point<P: Protocol>(
    url: &str,
    bad: impl Fn(&mut TsDriverConn<P>),
) -> (u64, u64, Vec<String>) {
    let d: TsDriver<P> = driver(url);
    let mut conn = d.connect().await.unwrap();
    conn.point("good");
    conn.tag("host", "a");
    conn.field("v", 1.0);
    conn.end_point(now_ns());
    bad(&mut conn);
    let mut reasons = Vec::new();
    let outcome = conn
        .write(&mut |r| reasons.push(r.to_string()))
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    (outcome.points, outcome.failed, reasons)
}

type TsDriverConn<P> = <TsDriver<P> as Driver>::Conn;

#[test]
fn influxdb_takes_line_protocol_and_opentsdb_on_its_listener() {
    let s = start(loadcell_testkit::influxdb(), "InfluxDB");
    let expect = || Expect {
        product: "InfluxDB",
        stores: true,
        delay: Duration::ZERO,
        spacing: Duration::from_millis(1),
    };
    let port = s.server.port;
    block_on(round_trip(
        driver::<influx::Line>(&format!("influx://127.0.0.1:{port}/metrics")),
        "cpu",
        expect(),
    ));
    // The listener writes into the database its config names.
    let listener = format!(
        "opentsdb://127.0.0.1:{}?query=http://127.0.0.1:{port}/opentsdb",
        s.opentsdb_port.unwrap()
    );
    let listener_expect = Expect {
        delay: Duration::from_secs(5),
        spacing: Duration::from_secs(1),
        ..expect()
    };
    block_on(round_trip(
        driver::<opentsdb::Put>(&listener),
        "mem",
        listener_expect,
    ));
    // Its telnet `put`, on the same port.
    let telnet = tcp_driver(
        OpenTsdbTcpDriver::from_target,
        "opentsdb+tcp",
        s.opentsdb_port,
        &format!("http://127.0.0.1:{port}/opentsdb"),
    );
    block_on(round_trip(
        telnet,
        "swap",
        Expect {
            delay: Duration::from_secs(5),
            spacing: Duration::from_secs(1),
            ..expect()
        },
    ));

    // A field without a name cannot be parsed: that point alone fails.
    let url = format!("influx://127.0.0.1:{port}/bad");
    block_on(async {
        let d: TsDriver<influx::Line> = driver(&url);
        let mut conn = d.connect().await.unwrap();
        conn.create_store("good", "m").await.unwrap();
    });
    let (points, failed, reasons) = block_on(write_with_bad_point::<influx::Line>(&url, |c| {
        c.point("bad");
        c.field("", 1.0);
        c.end_point(now_ns());
    }));
    assert_eq!((points, failed), (2, 1), "{reasons:?}");
    assert!(
        reasons[0].starts_with("partial write: unable to parse"),
        "{reasons:?}"
    );

    // A statement's error inside a 200 answer is the query's error.
    let d: TsDriver<influx::Line> = driver(&format!("influx://127.0.0.1:{port}/nowhere"));
    let e = block_on(async {
        let mut conn = d.connect().await.unwrap();
        let series = Series {
            measurement: "cpu",
            tags: &[],
        };
        let last = TsQuery::LastPoint { series, field: "v" };
        conn.query(&last).await.unwrap_err()
    });
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e.message.contains("database not found"), "{e}");
}

#[test]
fn questdb_takes_line_protocol_into_tables() {
    let s = start(loadcell_testkit::questdb(), "QuestDB");
    let url = format!("influx://127.0.0.1:{}/ignored", s.server.port);
    block_on(round_trip(
        driver::<influx::Line>(&url),
        "cpu",
        Expect {
            product: "QuestDB",
            stores: true,
            delay: Duration::ZERO,
            spacing: Duration::from_millis(1),
        },
    ));
    // Its ILP port: a store made over HTTP, the lines over TCP.
    let ilp = tcp_driver(
        InfluxTcpDriver::from_target,
        "influx+tcp",
        s.influx_tcp_port,
        &format!("http://127.0.0.1:{}", s.server.port),
    );
    block_on(round_trip(
        ilp,
        "disk",
        Expect {
            product: "QuestDB",
            stores: true,
            delay: Duration::from_secs(10),
            spacing: Duration::from_millis(1),
        },
    ));
    // QuestDB refuses the whole request.
    let (points, failed, reasons) = block_on(write_with_bad_point::<influx::Line>(&url, |c| {
        c.point("good");
        c.tag("host", "b");
        c.field("", 2.0);
        c.end_point(now_ns());
    }));
    assert_eq!((points, failed), (2, 2), "{reasons:?}");
    assert!(reasons[0].contains("line protocol"), "{reasons:?}");
}

#[test]
fn prometheus_takes_remote_write() {
    let s = start(loadcell_testkit::prometheus(), "Prometheus");
    let url = format!("prom-rw://127.0.0.1:{}", s.server.port);
    block_on(round_trip(
        driver::<remote_write::RemoteWrite>(&url),
        "cpu",
        Expect {
            product: "Prometheus",
            stores: false,
            delay: Duration::ZERO,
            spacing: Duration::from_millis(1),
        },
    ));
    // A sample from 1970 is out of the head's bounds: the request fails.
    let (points, failed, reasons) = block_on(write_with_bad_point::<remote_write::RemoteWrite>(
        &url,
        |c| {
            c.point("old");
            c.field("v", 1.0);
            c.end_point(1_000_000);
        },
    ));
    assert_eq!((points, failed), (2, 2), "{reasons:?}");
    assert!(reasons[0].contains("out of bounds"), "{reasons:?}");
}

#[test]
fn victoriametrics_takes_all_three_protocols_and_both_over_tcp() {
    let s = start(loadcell_testkit::victoriametrics(), "VictoriaMetrics");
    let port = s.server.port;
    let expect = || Expect {
        product: "VictoriaMetrics",
        stores: false,
        delay: Duration::ZERO,
        spacing: Duration::from_millis(1),
    };
    block_on(round_trip(
        driver::<influx::Line>(&format!("influx://127.0.0.1:{port}/metrics")),
        "cpu",
        expect(),
    ));
    let opentsdb = format!(
        "opentsdb://127.0.0.1:{}?query=http://127.0.0.1:{port}",
        s.opentsdb_port.unwrap()
    );
    block_on(round_trip(
        driver::<opentsdb::Put>(&opentsdb),
        "mem",
        expect(),
    ));
    let query = format!("http://127.0.0.1:{port}");
    block_on(round_trip(
        tcp_driver(
            InfluxTcpDriver::from_target,
            "influx+tcp",
            s.influx_tcp_port,
            &query,
        ),
        "net",
        Expect {
            delay: Duration::from_secs(5),
            ..expect()
        },
    ));
    block_on(round_trip(
        tcp_driver(
            OpenTsdbTcpDriver::from_target,
            "opentsdb+tcp",
            s.opentsdb_tcp_port,
            &query,
        ),
        "kernel",
        Expect {
            delay: Duration::from_secs(5),
            spacing: Duration::from_secs(1),
            ..expect()
        },
    ));
    block_on(round_trip(
        driver::<remote_write::RemoteWrite>(&format!("prom-rw://127.0.0.1:{port}/api/v1/write")),
        "disk",
        expect(),
    ));
}

/// Allocations made by writing three batches and asking one query
/// through `d`, after two rounds of the same to warm up. The batches are
/// the same each time: a snappy body a little longer than the longest yet
/// would grow the HTTP client's buffers once more.
async fn allocations_once_warm<D>(d: D) -> (u64, u64)
where
    D: Driver,
    D::Conn: TsConn,
{
    let url = d.endpoint();
    let mut conn = d.connect().await.unwrap();
    let hosts: Vec<String> = (0..SERIES).map(host).collect();
    let base = now_ns() - 60_000_000_000;
    let tags = [("host", hosts[0].as_str()), ("dc", dc(0))];
    let last = TsQuery::LastPoint {
        series: Series {
            measurement: "hot",
            tags: &tags,
        },
        field: "v",
    };
    let (mut writing, mut querying) = (0, 0);
    for round in 0..5 {
        let before = allocations();
        for i in 0..100 {
            conn.point("hot");
            conn.tag("host", &hosts[i % SERIES]);
            conn.tag("dc", dc(i));
            conn.field("v", i as f64);
            conn.end_point(base + i as i64 * 1_000_000);
        }
        let outcome = conn.write(&mut |_| {}).await.unwrap();
        assert_eq!(outcome.failed, 0, "{url}");
        let between = allocations();
        conn.query(&last).await.unwrap();
        if round >= 2 {
            writing += between - before;
            querying += allocations() - between;
        }
    }
    (writing, querying)
}

#[test]
fn writing_and_querying_allocate_nothing_once_warm() {
    let s = start(loadcell_testkit::victoriametrics(), "VictoriaMetrics");
    let port = s.server.port;
    let opentsdb = format!(
        "opentsdb://127.0.0.1:{}?query=http://127.0.0.1:{port}",
        s.opentsdb_port.unwrap()
    );
    let tcp = |scheme: &str, at: Option<u16>| {
        let url = format!(
            "{scheme}://127.0.0.1:{}?query=http://127.0.0.1:{port}",
            at.unwrap()
        );
        Target::parse(&url).expect("valid URL")
    };
    let counts = block_on(async {
        [
            allocations_once_warm(driver::<influx::Line>(&format!(
                "influx://127.0.0.1:{port}/db"
            )))
            .await,
            allocations_once_warm(driver::<opentsdb::Put>(&opentsdb)).await,
            allocations_once_warm(driver::<remote_write::RemoteWrite>(&format!(
                "prom-rw://127.0.0.1:{port}"
            )))
            .await,
            allocations_once_warm(
                InfluxTcpDriver::from_target(&tcp("influx+tcp", s.influx_tcp_port)).unwrap(),
            )
            .await,
            allocations_once_warm(
                OpenTsdbTcpDriver::from_target(&tcp("opentsdb+tcp", s.opentsdb_tcp_port)).unwrap(),
            )
            .await,
        ]
    });
    assert_eq!(counts, [(0, 0); 5], "(writing, querying) per protocol");
}

/// A stand-in for a Prometheus started without `--web.enable-admin-api`:
/// its build info as 2.42 answers it, and the admin API's refusal as 2.42
/// words it, for every other path. Its port.
fn prometheus_without_admin_api() -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 {
                    let build = line.contains(" /api/v1/status/buildinfo ");
                    // The headers, up to the empty line; no request has a body.
                    while reader.read_line(&mut line).unwrap_or(0) > 0
                        && !line.ends_with("\r\n\r\n")
                    {}
                    let (status, body) = if build {
                        (
                            "200 OK",
                            r#"{"status":"success","data":{"version":"2.42.0","revision":"x"}}"#,
                        )
                    } else {
                        (
                            "500 Internal Server Error",
                            r#"{"status":"error","errorType":"unavailable","error":"admin APIs disabled"}"#,
                        )
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    port
}

#[test]
fn deleting_series_without_the_admin_api_names_the_flag() {
    let port = prometheus_without_admin_api();
    let d: TsDriver<remote_write::RemoteWrite> = driver(&format!("prom-rw://127.0.0.1:{port}"));
    let e = block_on(async {
        let mut conn = d.connect().await.unwrap();
        let shape = Shape {
            measurement: "cpu",
            tags: Names::Numbered("tag"),
            fields: Names::Numbered("field"),
        };
        conn.drop_store(shape, &["cpu_field0".to_string()])
            .await
            .unwrap_err()
    });
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e.message.contains("--web.enable-admin-api"), "{e}");
}

#[test]
fn a_closed_port_is_a_one_line_connection_error() {
    let port = loadcell_testkit::closed_port();
    let d: TsDriver<influx::Line> = driver(&format!("influx://127.0.0.1:{port}/db"));
    let e = block_on(d.connect()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Connection);
    assert!(e.message.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(!e.message.contains('\n'), "{e}");
}
