//! Reading fio's `--output-format=json+` output. With `--status-interval`
//! fio prints a cumulative report every interval and a final one; each is
//! a JSON object, and fio may print error text among them (axboe/fio#731),
//! so objects are read one after another from each `{` that starts one.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// One direction (reads or writes) of one cumulative report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Direction {
    pub ios: u64,
    pub bytes: u64,
    /// Completion latency (`clat_ns.bins`): nanoseconds → count.
    pub clat_ns: BTreeMap<u64, u64>,
}

/// A cumulative report, as fio printed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub version: String,
    pub timestamp_ms: u64,
    /// Milliseconds measured: the longer of the two directions' runtimes.
    pub runtime_ms: u64,
    pub read: Direction,
    pub write: Direction,
    /// The job's error number (an errno), 0 when none.
    pub error: i64,
    /// Devices under the file and how busy fio found them, in percent.
    pub disk_util: Vec<(String, f64)>,
}

impl Report {
    /// Whether the report holds measured I/O: during fio's `ramp_time`
    /// I/O is counted but no latency is recorded.
    pub fn measured(&self) -> bool {
        self.read
            .clat_ns
            .values()
            .chain(self.write.clat_ns.values())
            .any(|&n| n > 0)
    }
}

#[derive(Deserialize)]
struct RawReport {
    #[serde(rename = "fio version", default)]
    version: String,
    #[serde(default)]
    timestamp_ms: u64,
    jobs: Vec<RawJob>,
    #[serde(default)]
    disk_util: Vec<RawDiskUtil>,
}

#[derive(Deserialize)]
struct RawJob {
    #[serde(default)]
    error: i64,
    read: RawDirection,
    write: RawDirection,
}

#[derive(Deserialize)]
struct RawDirection {
    total_ios: u64,
    io_bytes: u64,
    runtime: u64,
    #[serde(default)]
    clat_ns: Option<RawClat>,
}

#[derive(Deserialize)]
struct RawClat {
    #[serde(default)]
    bins: BTreeMap<String, u64>,
}

#[derive(Deserialize)]
struct RawDiskUtil {
    name: String,
    util: f64,
}

impl RawDirection {
    fn direction(&self) -> Result<Direction, String> {
        let bins = self.clat_ns.as_ref().map(|c| &c.bins);
        let clat_ns = bins
            .into_iter()
            .flatten()
            .map(|(ns, &n)| match ns.parse() {
                Ok(ns) => Ok((ns, n)),
                Err(_) => Err(format!(
                    "fio's latency bin '{ns}' is not a number of nanoseconds"
                )),
            })
            .collect::<Result<_, String>>()?;
        Ok(Direction {
            ios: self.total_ios,
            bytes: self.io_bytes,
            clat_ns,
        })
    }
}

/// Every report in fio's standard output, in order. Text that is not a
/// report (error lines fio printed among them) is skipped; no report at
/// all is an error that quotes the start of what fio printed.
pub fn parse(stdout: &str) -> Result<Vec<Report>, String> {
    let mut reports = Vec::new();
    let mut rest = stdout;
    while let Some(start) = rest.find('{') {
        let mut stream = serde_json::Deserializer::from_str(&rest[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) => {
                let raw: RawReport = serde_json::from_value(value)
                    .map_err(|e| format!("fio's JSON output has an unexpected shape: {e}"))?;
                reports.push(report(raw)?);
                rest = &rest[start + stream.byte_offset()..];
            }
            _ => rest = &rest[start + 1..],
        }
    }
    if reports.is_empty() {
        let shown: String = stdout.trim().chars().take(300).collect();
        return Err(format!("fio printed no JSON report: {shown:?}"));
    }
    Ok(reports)
}

fn report(raw: RawReport) -> Result<Report, String> {
    // With `--group_reporting` every job is summed into the first.
    let job = raw.jobs.first().ok_or("fio's JSON report lists no job")?;
    Ok(Report {
        version: raw.version,
        timestamp_ms: raw.timestamp_ms,
        runtime_ms: job.read.runtime.max(job.write.runtime),
        read: job.read.direction()?,
        write: job.write.direction()?,
        error: job.error,
        disk_util: raw
            .disk_util
            .into_iter()
            .map(|d| (d.name, d.util))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_json(ios: u64, runtime: u64, bins: &str) -> String {
        format!(
            r#"{{"fio version":"fio-3.33","timestamp_ms":{runtime},"jobs":[{{"error":0,
            "read":{{"total_ios":{ios},"io_bytes":{},"runtime":{runtime},"clat_ns":{{"bins":{{{bins}}}}}}},
            "write":{{"total_ios":0,"io_bytes":0,"runtime":0}}}}],
            "disk_util":[{{"name":"vda","util":83.5}}]}}"#,
            ios * 4096
        )
    }

    #[test]
    fn reports_are_read_past_error_text_fio_prints_among_them() {
        let out = format!(
            "fio: pid=1, err=5/file:io_u.c:1889, func=io_u error, error=Input/output error\n{}\n{{ not json\n{}",
            report_json(100, 900, ""),
            report_json(2000, 1000, r#""60160":1500,"80384":500"#)
        );
        let reports = parse(&out).unwrap();
        assert_eq!(reports.len(), 2);
        assert!(!reports[0].measured());
        let last = &reports[1];
        assert!(last.measured());
        assert_eq!(last.version, "fio-3.33");
        assert_eq!((last.read.ios, last.runtime_ms), (2000, 1000));
        assert_eq!(
            last.read.clat_ns,
            BTreeMap::from([(60160, 1500), (80384, 500)])
        );
        assert_eq!(last.disk_util, vec![("vda".to_string(), 83.5)]);
        assert!(parse("fio: no such engine\n")
            .unwrap_err()
            .starts_with("fio printed no JSON report: \"fio: no such engine\""));
    }
}
