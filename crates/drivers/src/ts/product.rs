//! Which database answers, and its own counters.
//!
//! Told apart by what each answers, asked once per connection on its
//! first question: `/api/v1/status/buildinfo` is Prometheus' (with a
//! `revision`) and VictoriaMetrics' (a made-up Prometheus version without
//! one: its own is `vm_app_version` in `/metrics`); QuestDB answers it
//! `404` from a `Server: questDB/…` (and `/ping` with an
//! `X-Influxdb-Version` of its own, so that header does not name
//! InfluxDB); InfluxDB answers `SHOW DIAGNOSTICS`.

use loadcell_core::http::{HttpConn, Request};
use loadcell_core::DriverError;
use serde_json::Value;

use crate::http::status::prometheus_text;
use crate::http::Http1Connection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Product {
    InfluxDb,
    Prometheus,
    VictoriaMetrics,
    QuestDb,
}

impl Product {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Product::InfluxDb => "InfluxDB",
            Product::Prometheus => "Prometheus",
            Product::VictoriaMetrics => "VictoriaMetrics",
            Product::QuestDb => "QuestDB",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub product: Product,
    pub version: String,
}

/// A `GET path` on `http`: status and body.
async fn get<'a>(
    http: &'a mut Http1Connection,
    path: &[u8],
) -> Result<(u16, &'a [u8]), DriverError> {
    let request = Request {
        method: "GET",
        path,
        headers: b"",
        body: b"",
    };
    let response = http.request(&request).await?;
    Ok((response.status, response.body))
}

/// The database behind `http`.
pub(crate) async fn detect(
    http: &mut Http1Connection,
    endpoint: &str,
) -> Result<Found, DriverError> {
    http.want_server_header();
    let (status, body) = get(http, b"/api/v1/status/buildinfo").await?;
    if matches!(status, 401 | 403) {
        return Err(super::failure(status, body, endpoint));
    }
    let build: Option<Value> = (status == 200)
        .then(|| serde_json::from_slice(body).ok())
        .flatten();
    let server = http.server_header().unwrap_or_default();
    if let Some(build) = build {
        if build.pointer("/data/revision").is_some() {
            let version = build.pointer("/data/version").and_then(Value::as_str);
            return Ok(Found {
                product: Product::Prometheus,
                version: version.unwrap_or_default().to_string(),
            });
        }
        let (_, metrics) = get(http, b"/metrics").await?;
        return Ok(Found {
            product: Product::VictoriaMetrics,
            version: vm_version(&String::from_utf8_lossy(metrics)),
        });
    }
    if server.starts_with("questDB") {
        let (_, body) = get(http, b"/exec?query=select%20build()").await?;
        return Ok(Found {
            product: Product::QuestDb,
            version: questdb_version(&String::from_utf8_lossy(body)),
        });
    }
    let (status, body) = get(http, b"/query?q=SHOW%20DIAGNOSTICS").await?;
    if status == 200 {
        if let Some(version) = influxdb_version(body) {
            return Ok(Found {
                product: Product::InfluxDb,
                version,
            });
        }
    }
    Err(DriverError::fatal(format!(
        "{endpoint} answers as none of InfluxDB, Prometheus, VictoriaMetrics or QuestDB \
         (for an OpenTSDB listener, give the database's HTTP port as query=http://host:port)"
    )))
}

/// `vm_app_version{version="victoria-metrics-…-v1.151.0", short_version="v1.151.0"} 1`.
fn vm_version(metrics: &str) -> String {
    let line = metrics.lines().find(|l| l.starts_with("vm_app_version{"));
    let short = line.and_then(|l| l.split("short_version=\"").nth(1));
    let version = short.and_then(|v| v.split('"').next()).unwrap_or_default();
    version.trim_start_matches('v').to_string()
}

/// `Build Information: QuestDB 9.3.4, JDK …`.
fn questdb_version(answer: &str) -> String {
    let after = answer.split("QuestDB ").nth(1).unwrap_or_default();
    after
        .split([',', ' ', '"'])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The `Version` column of the `build` series of `SHOW DIAGNOSTICS`.
fn influxdb_version(body: &[u8]) -> Option<String> {
    let answer: Value = serde_json::from_slice(body).ok()?;
    let series = answer.pointer("/results/0/series")?.as_array()?;
    let build = series.iter().find(|s| s["name"] == "build")?;
    let columns = build["columns"].as_array()?;
    let at = columns.iter().position(|c| c == "Version")?;
    Some(
        build
            .pointer(&format!("/values/0/{at}"))?
            .as_str()?
            .to_string(),
    )
}

/// Where the product keeps its counters.
pub(crate) fn counters_path(product: Product) -> Option<&'static [u8]> {
    match product {
        Product::InfluxDb => Some(b"/debug/vars"),
        Product::Prometheus | Product::VictoriaMetrics => Some(b"/metrics"),
        // Its metrics are on another port, and off by default.
        Product::QuestDb => None,
    }
}

/// The counters in the product's answer at [`counters_path`], named
/// `ts_…`, monotonic ones ending in `_total`.
pub(crate) fn counters(product: Product, body: &[u8]) -> Result<Vec<(String, f64)>, String> {
    match product {
        Product::InfluxDb => influxdb_counters(body),
        Product::Prometheus => Ok(prometheus_text(
            &String::from_utf8_lossy(body),
            &[
                ("process_cpu_seconds_total", "ts_cpu_seconds_total"),
                ("process_resident_memory_bytes", "ts_resident_bytes"),
                (
                    "prometheus_tsdb_head_samples_appended_total",
                    "ts_samples_ingested_total",
                ),
                ("prometheus_tsdb_head_series", "ts_head_series"),
            ],
        )),
        Product::VictoriaMetrics => Ok(prometheus_text(
            &String::from_utf8_lossy(body),
            &[
                ("process_cpu_seconds_total", "ts_cpu_seconds_total"),
                ("process_resident_memory_bytes", "ts_resident_bytes"),
                (
                    "vm_rows_added_to_storage_total",
                    "ts_samples_ingested_total",
                ),
                ("vm_new_timeseries_created_total", "ts_series_created_total"),
            ],
        )),
        Product::QuestDb => Ok(Vec::new()),
    }
}

/// `/debug/vars`: the write service's points and requests, queries run,
/// heap in use.
fn influxdb_counters(body: &[u8]) -> Result<Vec<(String, f64)>, String> {
    let vars: Value =
        serde_json::from_slice(body).map_err(|e| format!("unexpected /debug/vars answer ({e})"))?;
    let num = |path: &str| vars.pointer(path).and_then(Value::as_f64).unwrap_or(0.0);
    Ok(vec![
        (
            "ts_points_written_total".into(),
            num("/write/values/pointReq"),
        ),
        (
            "ts_points_dropped_total".into(),
            num("/write/values/writeDrop"),
        ),
        ("ts_write_requests_total".into(), num("/write/values/req")),
        (
            "ts_queries_total".into(),
            num("/queryExecutor/values/queriesExecuted"),
        ),
        ("ts_heap_inuse_bytes".into(), num("/memstats/HeapInuse")),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_each_products_answer() {
        let vm = "vm_app_start_timestamp 1\nvm_app_version{version=\"victoria-metrics-v1.151.0\", short_version=\"v1.151.0\"} 1\n";
        assert_eq!(vm_version(vm), "1.151.0");
        assert_eq!(
            vm_version("vm_app_version{version=\"\", short_version=\"\"} 1"),
            ""
        );
        let q = r#"{"dataset":[["Build Information: QuestDB 9.3.4, JDK 24.0.2, Commit Hash 9ea3"]],"count":1}"#;
        assert_eq!(questdb_version(q), "9.3.4");
        let influx = br#"{"results":[{"statement_id":0,"series":[{"name":"build","columns":["Branch","Build Time","Commit","Version"],"values":[["unknown","","unknown","1.6.7~rc0"]]}]}]}"#;
        assert_eq!(influxdb_version(influx).as_deref(), Some("1.6.7~rc0"));
    }

    #[test]
    fn counters_are_summed_over_labels_and_named_ts() {
        let text = b"# HELP x\nprocess_cpu_seconds_total 1.5\nprometheus_tsdb_head_samples_appended_total{type=\"float\"} 10\n\
prometheus_tsdb_head_samples_appended_total{type=\"histogram\"} 2\nprometheus_tsdb_head_series_created_total 9\n";
        let c: std::collections::HashMap<_, _> = counters(Product::Prometheus, text)
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(c["ts_cpu_seconds_total"], 1.5);
        assert_eq!(c["ts_samples_ingested_total"], 12.0);
        assert_eq!(c["ts_head_series"], 0.0);
        let vars = br#"{"write":{"values":{"pointReq":15,"req":6,"writeDrop":4}},"memstats":{"HeapInuse":1024},"queryExecutor":{"values":{"queriesExecuted":3}}}"#;
        let c: std::collections::HashMap<_, _> = counters(Product::InfluxDb, vars)
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(c["ts_points_written_total"], 15.0);
        assert_eq!(c["ts_points_dropped_total"], 4.0);
        assert_eq!(c["ts_queries_total"], 3.0);
        assert_eq!(c["ts_heap_inuse_bytes"], 1024.0);
    }
}
