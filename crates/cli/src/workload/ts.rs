//! The time-series workloads' options (TSBS's and inch's names where they
//! fit): parsed, validated into [`TsOptions`], listed.

use std::time::{Duration, SystemTime};

use clap::Args;
use loadcell_core::Family;
use loadcell_workloads::distribution::RandType;
use loadcell_workloads::ts::query::{QueryKind, MAX_TAGS};
use loadcell_workloads::ts::series::SeriesSpace;
use loadcell_workloads::ts::{
    generic_space, Timing, TsIngestWorkload, TsOptions, TsQueryWorkload, UseCase, VerifyOptions,
};

use loadcell_core::Target;
use loadcell_drivers::OpenError;
use loadcell_workloads::workload::Workload;

use super::{CliFamily, Entry, FamilySpec, RunShape, WorkloadArgs};
use crate::launch::{Job, Launch};

/// The largest request loadcell builds: InfluxDB 1.x's default
/// `max-body-size` (VictoriaMetrics takes 32 MB, Prometheus more).
pub const MAX_REQUEST_BYTES: u64 = 25_000_000;

/// The series, points and questions of a time-series run.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Time-series workload options (ts-ingest, ts-query)")]
pub struct TsArgs {
    /// TSBS's use case: cpu-only (measurement cpu, 10 usage fields, 10 host tags) or devops (TSBS's 9 measurements, cpu to redis, with those tags and their own: disk's path and fstype, net's interface…); replaces --measurement, --tags and --fields.
    #[arg(long, value_name = "NAME")]
    pub use_case: Option<String>,
    /// The measurement written and queried (default cpu).
    #[arg(long, value_name = "NAME")]
    pub measurement: Option<String>,
    /// Tags of each series, tag0.. (tag0 tells series apart; tagK takes 10^K values) (default 10).
    #[arg(long, value_name = "N")]
    pub tags: Option<usize>,
    /// Characters of every tag value: a fixed prefix and the series' number in base 36.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub tag_length: usize,
    /// Float fields of each point, field0.. (default 10).
    #[arg(long, value_name = "N")]
    pub fields: Option<usize>,
    /// Series (cardinality): inch's -t product, TSBS's --scale.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub series: u64,
    /// Points per write request (TSBS's --batch-size, inch's -b).
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub points_per_request: u64,
    /// Time between a series' points when back-filling (TSBS's --log-interval).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::values::positive_duration)]
    pub interval: Duration,
    /// Back-fill from this time (down to a multiple of --interval): RFC 3339 (2024-01-01T00:00:00Z) or relative (-1h, now-30m). Without it, points are stamped in real time.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub start: Option<String>,
    /// Back-fill up to this time, excluded (default now); ts-ingest ends when every series has its points.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub end: Option<String>,
    /// ts-ingest: random series spot-checked after the run (point count, sum and last value).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub verify_sample: u64,
    /// ts-ingest: how long the check after the run waits for the database to show every point.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::values::duration)]
    pub verify_timeout: Duration,
    /// ts-query: last-point, range-mean or group-by, or several separated by commas, drawn evenly (default all three).
    #[arg(long, value_name = "KINDS")]
    pub queries: Option<String>,
    /// ts-query: how series are drawn, uniform or zipfian (default uniform).
    #[arg(long, value_name = "NAME")]
    pub series_distribution: Option<String>,
}

/// A time-series workload, resolved.
#[derive(Debug, Clone)]
pub enum TsSpec {
    Ingest(TsIngestWorkload),
    Query(TsQueryWorkload),
}

impl CliFamily for TsArgs {
    const WHAT: &'static str = "a time-series workload option";
    type Spec = TsSpec;

    fn catalog() -> Vec<Entry> {
        vec![
            (
                "ts-ingest",
                &[Family::TIME_SERIES],
                "TSBS/inch-style ingestion: --series series of fixed-length tag values, --points-per-request points a request, in real time or back-filling --start..--end; points/s, failed points by reason, then the database's count of series in the run's time range and random series' points checked against what was sent",
            ),
            (
                "ts-query",
                &[Family::TIME_SERIES],
                "TSBS-style queries: last point, hourly mean by minute, group-by over a tag, of series drawn uniformly or zipfian from ts-ingest's; rows returned counted",
            ),
        ]
    }

    fn resolve(name: &str, all: &WorkloadArgs, given: &[String]) -> Result<TsSpec, String> {
        resolve(name, &all.ts, given)
    }
}

impl FamilySpec for TsSpec {
    fn workload(&self) -> &dyn Workload {
        match self {
            TsSpec::Ingest(w) => w,
            TsSpec::Query(w) => w,
        }
    }

    fn prepare_hint(&self) -> String {
        let opts = match self {
            TsSpec::Ingest(w) => &w.opts,
            TsSpec::Query(w) => &w.opts,
        };
        match opts.use_case {
            Some(u) => format!("--use-case {}", u.as_str()),
            None => format!("--measurement {}", opts.space.measurements[0].name),
        }
    }

    /// A back-filling `ts-ingest` ends when every series has its points:
    /// one event a request.
    fn implied_events(&self, _all: &WorkloadArgs, _sessions: u64, _timed: bool) -> Option<u64> {
        match self {
            TsSpec::Ingest(w) => w.opts.requests(),
            TsSpec::Query(_) => None,
        }
    }

    /// The series are dealt over the run's sessions.
    fn fit_run(&mut self, run: &mut RunShape) -> Result<(), String> {
        if let TsSpec::Ingest(w) = self {
            w.opts.sessions = (run.threads * run.clients) as u64;
        }
        Ok(())
    }
}

impl Launch for TsSpec {
    fn launch<J: Job>(&self, target: &Target, job: J) -> Result<J::Output, OpenError> {
        match self {
            TsSpec::Ingest(w) => w.launch(target, job),
            TsSpec::Query(w) => w.launch(target, job),
        }
    }

    #[cfg(test)]
    fn dispatched(&self) -> Vec<&'static str> {
        match self {
            TsSpec::Ingest(w) => w.dispatched(),
            TsSpec::Query(w) => w.dispatched(),
        }
    }
}

crate::launch::runs_on!(TsIngestWorkload: ts);
crate::launch::runs_on!(TsQueryWorkload: ts);

const INGEST_ONLY: &[&str] = &["--verify-sample", "--verify-timeout"];
const QUERY_ONLY: &[&str] = &["--queries", "--series-distribution"];
/// What --use-case replaces.
const SHAPE: &[&str] = &["--measurement", "--tags", "--fields"];

fn resolve(name: &str, a: &TsArgs, given: &[String]) -> Result<TsSpec, String> {
    let other = if name == "ts-ingest" {
        QUERY_ONLY
    } else {
        INGEST_ONLY
    };
    if let Some(flag) = given.iter().find(|f| other.contains(&f.as_str())) {
        return Err(format!("{flag} does not apply to {name}"));
    }
    if a.use_case.is_some() {
        if let Some(flag) = given.iter().find(|f| SHAPE.contains(&f.as_str())) {
            return Err(format!(
                "{flag} does not apply with --use-case, which names the measurements, tags and fields"
            ));
        }
    }
    if a.start.is_none() && given.iter().any(|f| f == "--interval") {
        return Err(
            "--interval needs --start: without it, points are stamped as they are sent".into(),
        );
    }
    let opts = options(a, SystemTime::now())?;
    if name == "ts-ingest" {
        return Ok(TsSpec::Ingest(TsIngestWorkload {
            opts,
            verify: VerifyOptions {
                sample: a.verify_sample,
                timeout: a.verify_timeout,
            },
        }));
    }
    let queries = match a.queries.as_deref() {
        None => vec![
            QueryKind::LastPoint,
            QueryKind::RangeMean,
            QueryKind::GroupBy,
        ],
        Some(list) => list
            .split(',')
            .map(|q| {
                QueryKind::parse(q.trim()).ok_or_else(|| {
                    format!(
                        "--queries: '{q}' is not a query kind: use {}",
                        QueryKind::NAMES
                    )
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let distribution = match a.series_distribution.as_deref() {
        None | Some("uniform") => RandType::Uniform,
        Some("zipfian") => RandType::Zipfian,
        Some(other) => {
            return Err(format!(
                "--series-distribution '{other}' is not a distribution: use uniform or zipfian"
            ))
        }
    };
    Ok(TsSpec::Query(TsQueryWorkload {
        opts,
        queries,
        distribution,
    }))
}

/// A name that goes unquoted into line protocol, InfluxQL, PromQL and SQL.
fn check_measurement(name: &str) -> Result<(), String> {
    let mut bytes = name.bytes();
    let valid = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "--measurement '{name}' is not a measurement name: use letters, digits and '_', not a digit first"
        ))
    }
}

fn space(a: &TsArgs) -> Result<(SeriesSpace, Option<UseCase>), String> {
    if a.tag_length == 0 {
        return Err("--tag-length must be at least 1".to_string());
    }
    if let Some(name) = &a.use_case {
        let use_case = UseCase::parse(name).ok_or_else(|| {
            format!(
                "--use-case '{name}' is not a use case: use {}",
                UseCase::NAMES
            )
        })?;
        return Ok((use_case.space(a.tag_length, a.series)?, Some(use_case)));
    }
    let measurement = a.measurement.as_deref().unwrap_or("cpu");
    check_measurement(measurement)?;
    let tags = a.tags.unwrap_or(10);
    if !(1..=MAX_TAGS).contains(&tags) {
        return Err(format!("--tags {tags}: give 1 to {MAX_TAGS}"));
    }
    let fields = a.fields.unwrap_or(10);
    if fields == 0 {
        return Err("--fields must be at least 1".to_string());
    }
    let space = generic_space(measurement, tags, fields, a.tag_length, a.series)?;
    Ok((space, None))
}

/// About how many bytes a point takes in line protocol, the largest of
/// the protocols: measurement, tags, fields with their values, timestamp.
fn point_bytes(space: &SeriesSpace) -> u64 {
    let tags: usize = (0..space.tag_count())
        .map(|t| space.tag_key(t).len() + space.tag_length + 2)
        .sum();
    let largest = space
        .measurements
        .iter()
        .map(|m| {
            let own_tags: usize = m.tags.iter().map(|t| t.key.len() + t.longest() + 2).sum();
            m.name.len() + own_tags + m.fields.iter().map(|f| f.len() + 7).sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    (largest + tags + 21) as u64
}

/// A time as `--start` and `--end` take it, in ns since the epoch:
/// RFC 3339, `now`, or `now` less a duration (`-1h`, `now-1h`).
fn parse_time(flag: &str, text: &str, now: SystemTime) -> Result<i64, String> {
    let ns = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .map_err(|_| format!("{flag} {text} is before 1970"))
    };
    let text = text.trim();
    let ago = text.strip_prefix("now").unwrap_or(text);
    if ago.is_empty() {
        return ns(now);
    }
    if let Some(ago) = ago.strip_prefix('-') {
        let d = humantime::parse_duration(ago.trim())
            .map_err(|_| format!("{flag} {text}: give a duration after '-', e.g. -1h"))?;
        return ns(now.checked_sub(d).unwrap_or(SystemTime::UNIX_EPOCH));
    }
    let at = humantime::parse_rfc3339_weak(text).map_err(|_| {
        format!("{flag} '{text}' is not a time: use RFC 3339 (2024-01-01T00:00:00Z), now, or -1h")
    })?;
    ns(at)
}

fn timing(a: &TsArgs, now: SystemTime) -> Result<Timing, String> {
    let Some(start) = &a.start else {
        if a.end.is_some() {
            return Err("--end needs --start: without it, points are stamped in real time".into());
        }
        return Ok(Timing::RealTime);
    };
    let start_ns = parse_time("--start", start, now)?;
    let end_ns = match &a.end {
        Some(end) => parse_time("--end", end, now)?,
        None => parse_time("--end", "now", now)?,
    };
    // On --interval's grid: runs with a relative --start (a sweep's
    // steps) write their series the same timestamps, not points between.
    let interval = a.interval.as_nanos() as i64;
    let start_ns = start_ns.div_euclid(interval) * interval;
    if end_ns <= start_ns {
        return Err(format!(
            "--end {} is not after --start {start}",
            a.end.as_deref().unwrap_or("now")
        ));
    }
    Ok(Timing::BackFill { start_ns, end_ns })
}

fn options(a: &TsArgs, now: SystemTime) -> Result<TsOptions, String> {
    let (space, use_case) = space(a)?;
    let measurements = space.measurements.len() as u64;
    if a.points_per_request < measurements {
        return Err(format!(
            "--points-per-request must be at least {measurements}: a point of each measurement of a series goes in one request"
        ));
    }
    let largest = MAX_REQUEST_BYTES / point_bytes(&space);
    if a.points_per_request > largest {
        return Err(format!(
            "--points-per-request {}: requests would be over {} MB, InfluxDB's default max-body-size; use at most {largest}",
            a.points_per_request,
            MAX_REQUEST_BYTES / 1_000_000
        ));
    }
    Ok(TsOptions {
        space,
        use_case,
        points_per_request: a.points_per_request,
        interval_ns: a.interval.as_nanos() as i64,
        timing: timing(a, now)?,
        sessions: 1,
    })
}

/// Series are leased to the run's sessions (see [`Layout::new`]).
///
/// [`Layout::new`]: loadcell_workloads::ts::ingest::Layout::new
#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> TsArgs {
        super::super::WorkloadArgs::defaults().ts
    }

    fn err(a: TsArgs) -> String {
        options(&a, SystemTime::now()).unwrap_err()
    }

    #[test]
    fn mistakes_are_refused_in_one_line() {
        assert_eq!(
            err(TsArgs {
                series: 0,
                ..args()
            }),
            "--series must be at least 1"
        );
        assert!(err(TsArgs {
            use_case: Some("iot".into()),
            ..args()
        })
        .starts_with("--use-case 'iot' is not a use case"));
        let e = err(TsArgs {
            points_per_request: 1_000_000,
            ..args()
        });
        assert!(
            e.starts_with("--points-per-request 1000000: requests would be over 25 MB"),
            "{e}"
        );
        let e = err(TsArgs {
            use_case: Some("devops".into()),
            points_per_request: 5,
            ..args()
        });
        assert!(
            e.starts_with("--points-per-request must be at least 9"),
            "{e}"
        );
        let e = err(TsArgs {
            start: Some("2024-01-02T00:00:00Z".into()),
            end: Some("2024-01-01T00:00:00Z".into()),
            ..args()
        });
        assert_eq!(
            e,
            "--end 2024-01-01T00:00:00Z is not after --start 2024-01-02T00:00:00Z"
        );
        assert!(err(TsArgs {
            start: Some("yesterday".into()),
            ..args()
        })
        .contains("is not a time"));
        assert!(err(TsArgs {
            measurement: Some("cpu load".into()),
            ..args()
        })
        .contains("not a measurement name"));
        assert!(err(TsArgs {
            tags: Some(40),
            ..args()
        })
        .contains("give 1 to 32"));
        let e = err(TsArgs {
            series: 1_000_000,
            tag_length: 3,
            ..args()
        });
        assert!(e.contains("raise --tag-length"), "{e}");
    }

    #[test]
    fn start_and_end_are_absolute_or_relative_to_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let s = 1_000_000_000i64;
        assert_eq!(
            parse_time("--start", "-1h", now),
            Ok((1_700_000_000 - 3600) * s)
        );
        assert_eq!(
            parse_time("--start", "now-30m", now),
            Ok((1_700_000_000 - 1800) * s)
        );
        assert_eq!(parse_time("--end", "now", now), Ok(1_700_000_000 * s));
        assert_eq!(
            parse_time("--start", "2023-11-14T22:13:20Z", now),
            Ok(1_700_000_000 * s)
        );
        let a = TsArgs {
            start: Some("-200s".into()),
            ..args()
        };
        // A second later, the same grid: the same points.
        let later = options(&a, now + Duration::from_secs(1)).unwrap();
        assert_eq!(later.points_per_series(), Some(21));
        let Timing::BackFill { start_ns, .. } = later.timing else {
            panic!("back-fill")
        };
        assert_eq!(start_ns, (1_700_000_000 - 200) * s);
        let o = options(&a, now).unwrap();
        assert_eq!(o.points_per_series(), Some(20), "10 s apart by default");
        assert_eq!(o.requests(), Some(40), "1000 series, 500 a request");
        assert_eq!(
            o.timing,
            Timing::BackFill {
                start_ns: (1_700_000_000 - 200) * s,
                end_ns: 1_700_000_000 * s
            }
        );
        let real = options(&args(), now).unwrap();
        assert_eq!((real.timing, real.requests()), (Timing::RealTime, None));
    }

    #[test]
    fn each_workload_refuses_the_others_options_and_use_cases_their_shape() {
        let given = |flags: &[&str]| flags.iter().map(|f| f.to_string()).collect::<Vec<_>>();
        let e = resolve("ts-ingest", &args(), &given(&["--queries"])).unwrap_err();
        assert_eq!(e, "--queries does not apply to ts-ingest");
        let e = resolve("ts-query", &args(), &given(&["--verify-sample"])).unwrap_err();
        assert_eq!(e, "--verify-sample does not apply to ts-query");
        let a = TsArgs {
            use_case: Some("cpu-only".into()),
            ..args()
        };
        let e = resolve("ts-ingest", &a, &given(&["--use-case", "--tags"])).unwrap_err();
        assert!(
            e.starts_with("--tags does not apply with --use-case"),
            "{e}"
        );
        let a = TsArgs {
            queries: Some("last-point,scan".into()),
            ..args()
        };
        let e = resolve("ts-query", &a, &given(&["--queries"])).unwrap_err();
        assert!(
            e.starts_with("--queries: 'scan' is not a query kind"),
            "{e}"
        );
        let e = resolve("ts-ingest", &args(), &given(&["--interval"])).unwrap_err();
        assert!(e.starts_with("--interval needs --start"), "{e}");
        let spec = resolve("ts-query", &args(), &[]).unwrap();
        let TsSpec::Query(w) = spec else {
            panic!("ts-query")
        };
        assert_eq!(w.queries.len(), 3);
    }
}
