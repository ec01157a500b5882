//! The query side of a connection: the model's questions asked in the
//! language of the database found behind the target (InfluxQL on
//! `/query`, PromQL on `/api/v1/query[_range]`, SQL on QuestDB's `/exec`),
//! under the names the write protocol gave the series:
//!
//! | protocol → database          | series of (`m`, `f`)                  |
//! |------------------------------|---------------------------------------|
//! | line → InfluxDB              | measurement `m`, field `f`            |
//! | line → QuestDB               | table `m`, column `f`, tags `SYMBOL`s |
//! | line → VictoriaMetrics       | metric `m_f`, plus label `db`         |
//! | OpenTSDB → InfluxDB listener | measurement `m.f`, field `value`      |
//! | OpenTSDB → VictoriaMetrics   | metric `m.f`                          |
//! | remote write → Prometheus/VM | metric `m_f`                          |
//!
//! A query's text and path are written into reused buffers and its answer
//! counted where it lies, without building values; verification and store
//! administration parse their (small) answers with serde_json.

use std::fmt::Write as _;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadcell_core::http::{HttpConn, Request};
use loadcell_core::ts::{
    DatabaseLeft, Holdings, Names, Series, Shape, StoredPoints, TimeRange, TsQuery,
};
use loadcell_core::DriverError;
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::product::{self, Found, Product};
use super::{failure, Kind, QueryTarget};
use crate::http::Http1Connection;

/// How far back "the last point" and the series count look (PromQL needs
/// a range; the others look at everything).
const LOOKBACK: &str = "7d";
/// How long verification waits for QuestDB to apply what was written.
const WAL_APPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// The measurement whose points record stores' markers (InfluxDB), or
/// the table whose rows do (QuestDB).
const MARKER_TABLE: &str = "loadcell_marker";

/// How the database found names the model's series.
#[derive(Debug, Clone, Copy)]
struct Layout {
    product: Product,
    /// The separator of `measurement` and `field` in one series per field's
    /// name; `None` where a point's fields share a series.
    per_field: Option<&'static str>,
    /// Whether series carry the target's database as a `db` label.
    db_label: bool,
}

fn layout(kind: Kind, product: Product) -> Result<Layout, String> {
    let (per_field, db_label) = match (kind, product) {
        (Kind::Line, Product::InfluxDb | Product::QuestDb) => (None, false),
        (Kind::Line, Product::VictoriaMetrics) => (Some("_"), true),
        (Kind::OpenTsdb, Product::InfluxDb | Product::VictoriaMetrics) => (Some("."), false),
        (Kind::RemoteWrite, Product::Prometheus | Product::VictoriaMetrics) => (Some("_"), false),
        _ => {
            let protocol = match kind {
                Kind::Line => "Influx line protocol",
                Kind::OpenTsdb => "OpenTSDB's /api/put",
                Kind::RemoteWrite => "Prometheus remote write",
            };
            return Err(format!("{} does not take {protocol}", product.name()));
        }
    };
    Ok(Layout {
        product,
        per_field,
        db_label,
    })
}

/// A connection's query side.
#[derive(Debug)]
pub(super) struct Reader {
    kind: Kind,
    target: Arc<QueryTarget>,
    /// The `query=` endpoint's connection, opened at its first use.
    own: Option<Http1Connection>,
    /// Where queries go, for messages.
    endpoint: String,
    found: Option<Found>,
    text: String,
    /// PromQL's time parameters, appended to the path.
    params: String,
    path: Vec<u8>,
}

/// Sends `method path` with `body` on `http`: a 2xx answer's body, or the
/// server's error.
async fn answered<'a>(
    http: &'a mut Http1Connection,
    endpoint: &str,
    method: &'static str,
    path: &[u8],
    body: &[u8],
) -> Result<&'a [u8], DriverError> {
    let request = Request {
        method,
        path,
        headers: b"",
        body,
    };
    let response = http.request(&request).await?;
    if !(200..300).contains(&response.status) {
        return Err(failure(response.status, response.body, endpoint));
    }
    Ok(response.body)
}

impl Reader {
    pub(super) fn new(kind: Kind, target: Arc<QueryTarget>, write_endpoint: &str) -> Reader {
        let endpoint = match &target.shared {
            Some(shared) => shared.origins[0].endpoint.clone(),
            None => write_endpoint.to_string(),
        };
        Reader {
            kind,
            target,
            own: None,
            endpoint,
            found: None,
            text: String::with_capacity(256),
            params: String::with_capacity(64),
            path: Vec::with_capacity(512),
        }
    }

    /// The connection queries go on: the write connection, or the
    /// `query=` endpoint's.
    async fn http<'a>(
        own: &'a mut Option<Http1Connection>,
        target: &QueryTarget,
        write: &'a mut Http1Connection,
    ) -> Result<&'a mut Http1Connection, DriverError> {
        let Some(shared) = &target.shared else {
            return Ok(write);
        };
        if own.is_none() {
            *own = Some(Http1Connection::open(Arc::clone(shared), 0).await?);
        }
        Ok(own.as_mut().expect("opened above"))
    }

    /// The database behind the query endpoint, found at the first call.
    pub(super) async fn product(
        &mut self,
        write: &mut Http1Connection,
    ) -> Result<&Found, DriverError> {
        if self.found.is_none() {
            let http = Self::http(&mut self.own, &self.target, write).await?;
            let found = product::detect(http, &self.endpoint).await?;
            layout(self.kind, found.product)
                .map_err(|e| DriverError::fatal(format!("{} is {e}", self.endpoint)))?;
            self.found = Some(found);
        }
        Ok(self.found.as_ref().expect("found above"))
    }

    async fn layout(&mut self, write: &mut Http1Connection) -> Result<Layout, DriverError> {
        let product = self.product(write).await?.product;
        Ok(layout(self.kind, product).expect("checked when found"))
    }

    pub(super) async fn counters(
        &mut self,
        write: &mut Http1Connection,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        let product = self.product(write).await?.product;
        let Some(path) = product::counters_path(product) else {
            return Ok(Vec::new());
        };
        let http = Self::http(&mut self.own, &self.target, write).await?;
        let body = answered(http, &self.endpoint, "GET", path, b"").await?;
        product::counters(product, body)
            .map_err(|e| DriverError::fatal(format!("{}: {e}", self.endpoint)))
    }

    /// The database name InfluxQL needs.
    fn db(&self) -> Result<&str, DriverError> {
        self.target.db.as_deref().ok_or_else(|| {
            DriverError::fatal(
                "InfluxDB needs a database: name it in the target's path or in query=http://host:port/DB",
            )
        })
    }

    /// Writes the request path for `self.text` in the product's language,
    /// `self.params` (PromQL's times) appended and consumed.
    fn set_path(&mut self, layout: Layout, range_query: bool) {
        self.path.clear();
        match layout.product {
            Product::InfluxDb => {
                let db = self.target.db.as_deref().unwrap_or_default();
                self.path.extend_from_slice(b"/query?epoch=ns&db=");
                encode_component(db.as_bytes(), &mut self.path);
                self.path.extend_from_slice(b"&q=");
            }
            Product::Prometheus | Product::VictoriaMetrics if range_query => {
                self.path.extend_from_slice(b"/api/v1/query_range?query=");
            }
            Product::Prometheus | Product::VictoriaMetrics => {
                self.path.extend_from_slice(b"/api/v1/query?query=");
            }
            Product::QuestDb => self.path.extend_from_slice(b"/exec?query="),
        }
        encode_component(self.text.as_bytes(), &mut self.path);
        self.path.extend_from_slice(self.params.as_bytes());
        self.params.clear();
        if layout.product == Product::VictoriaMetrics {
            // Else it hides the last 30 s (-search.latencyOffset) from
            // queries at or near now: a spot check right after writing
            // would find nothing.
            self.path.extend_from_slice(b"&latency_offset=1ms");
        }
    }

    /// Runs the query in `self.text` (path set): the answer's body, checked
    /// for an InfluxQL statement's error.
    async fn run<'a>(
        &'a mut self,
        write: &'a mut Http1Connection,
        method: &'static str,
    ) -> Result<&'a [u8], DriverError> {
        let http = Self::http(&mut self.own, &self.target, write).await?;
        let body = answered(http, &self.endpoint, method, &self.path, b"").await?;
        if self
            .found
            .as_ref()
            .is_some_and(|f| f.product == Product::InfluxDb)
            && find(body, b"\"error\":\"").is_some()
        {
            let answer: Value = serde_json::from_slice(body).unwrap_or_default();
            let statements = answer["results"].as_array();
            let error = statements
                .and_then(|all| all.iter().find_map(|s| s.get("error")))
                .or_else(|| answer.get("error"))
                .and_then(Value::as_str)
                .unwrap_or("an error");
            return Err(DriverError::fatal(format!(
                "{} answered {:?}: {error}",
                self.endpoint, self.text
            )));
        }
        Ok(body)
    }

    /// Runs `self.text` and parses the answer.
    async fn run_parsed(
        &mut self,
        write: &mut Http1Connection,
        method: &'static str,
    ) -> Result<Value, DriverError> {
        let body = self.run(write, method).await?;
        let value = serde_json::from_slice(body);
        value.map_err(|e| {
            DriverError::fatal(format!("unexpected answer from {} ({e})", self.endpoint))
        })
    }

    pub(super) async fn query(
        &mut self,
        write: &mut Http1Connection,
        query: &TsQuery<'_>,
    ) -> Result<u64, DriverError> {
        let layout = self.layout(write).await?;
        let range_query = matches!(query, TsQuery::RangeMean { .. })
            && matches!(
                layout.product,
                Product::Prometheus | Product::VictoriaMetrics
            );
        self.text.clear();
        let t = &mut self.text;
        match (*query, layout.product) {
            (TsQuery::LastPoint { series, field }, Product::InfluxDb) => {
                t.push_str("SELECT last(");
                influx_from(layout, series.measurement, field, t);
                influx_where(series.tags, None, t);
            }
            (TsQuery::LastPoint { series, field }, Product::QuestDb) => {
                t.push_str("SELECT ");
                sql_ident(field, t);
                t.push_str(", timestamp FROM ");
                sql_ident(series.measurement, t);
                sql_where(series.tags, None, t);
                t.push_str(" LIMIT -1");
            }
            (TsQuery::LastPoint { series, field }, _) => {
                let _ = write!(t, "last_over_time(");
                prom_selector(
                    layout,
                    &self.target,
                    series.measurement,
                    field,
                    series.tags,
                    t,
                );
                let _ = write!(t, "[{LOOKBACK}])");
            }
            (
                TsQuery::RangeMean {
                    series,
                    field,
                    range,
                    step_ns,
                },
                product,
            ) => match product {
                Product::InfluxDb => {
                    t.push_str("SELECT mean(");
                    influx_from(layout, series.measurement, field, t);
                    influx_where(series.tags, Some(range), t);
                    let _ = write!(t, " GROUP BY time({step_ns}ns) fill(none)");
                }
                Product::QuestDb => {
                    t.push_str("SELECT timestamp, avg(");
                    sql_ident(field, t);
                    t.push_str(") FROM ");
                    sql_ident(series.measurement, t);
                    sql_where(series.tags, Some(range), t);
                    let _ = write!(t, " SAMPLE BY {}U", (step_ns / 1000).max(1));
                }
                _ => {
                    t.push_str("avg_over_time(");
                    prom_selector(
                        layout,
                        &self.target,
                        series.measurement,
                        field,
                        series.tags,
                        t,
                    );
                    let _ = write!(t, "[{}ms])", (step_ns / 1_000_000).max(1));
                    promql_range(range, step_ns, &mut self.params);
                }
            },
            (
                TsQuery::GroupBy {
                    measurement,
                    field,
                    tag,
                    range,
                },
                product,
            ) => match product {
                Product::InfluxDb => {
                    t.push_str("SELECT mean(");
                    influx_from(layout, measurement, field, t);
                    influx_where(&[], Some(range), t);
                    t.push_str(" GROUP BY ");
                    influx_ident(tag, t);
                }
                Product::QuestDb => {
                    t.push_str("SELECT ");
                    sql_ident(tag, t);
                    t.push_str(", avg(");
                    sql_ident(field, t);
                    t.push_str(") FROM ");
                    sql_ident(measurement, t);
                    sql_where(&[], Some(range), t);
                    t.push_str(" GROUP BY ");
                    sql_ident(tag, t);
                }
                _ => {
                    let _ = write!(t, "avg by ({tag}) (avg_over_time(");
                    prom_selector(layout, &self.target, measurement, field, &[], t);
                    let _ = write!(t, "[{}ms]))", range_ms(range));
                    promql_at(range.end_ns - 1_000_000, &mut self.params);
                }
            },
        }
        self.set_path(layout, range_query);
        let body = self.run(write, "GET").await?;
        let rows = match layout.product {
            Product::InfluxDb => serde_json::from_slice::<InfluxRows>(body).map(|a| a.results.0),
            Product::QuestDb => serde_json::from_slice::<SqlRows>(body).map(|a| a.count),
            _ => serde_json::from_slice::<PromRows>(body).map(|a| a.data.result.0),
        };
        rows.map_err(|e| {
            DriverError::fatal(format!("unexpected answer from {} ({e})", self.endpoint))
        })
    }

    /// Waits, where the database needs it, until what was written is
    /// visible to queries: VictoriaMetrics flushes its in-memory rows on
    /// request; QuestDB applies its write-ahead log in the background.
    async fn settle(
        &mut self,
        write: &mut Http1Connection,
        layout: Layout,
        measurement: &str,
    ) -> Result<(), DriverError> {
        match layout.product {
            Product::VictoriaMetrics => {
                let http = Self::http(&mut self.own, &self.target, write).await?;
                answered(http, &self.endpoint, "GET", b"/internal/force_flush", b"").await?;
            }
            Product::QuestDb => {
                let start = Instant::now();
                loop {
                    self.text.clear();
                    self.text
                        .push_str("SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = ");
                    sql_string(measurement, &mut self.text);
                    self.set_path(layout, false);
                    let answer = self.run_parsed(write, "GET").await?;
                    let row = answer.pointer("/dataset/0");
                    let applied = row.is_none_or(|r| r[0].as_i64() >= r[1].as_i64());
                    if applied {
                        return Ok(());
                    }
                    if start.elapsed() > WAL_APPLY_TIMEOUT {
                        return Err(DriverError::fatal(format!(
                            "{}: table '{measurement}' still has unapplied WAL transactions after {WAL_APPLY_TIMEOUT:?} ({})",
                            self.endpoint,
                            row.map(Value::to_string).unwrap_or_default()
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Product::InfluxDb | Product::Prometheus => {}
        }
        Ok(())
    }

    pub(super) async fn stored_points(
        &mut self,
        write: &mut Http1Connection,
        series: Series<'_>,
        field: &str,
        range: TimeRange,
    ) -> Result<Option<StoredPoints>, DriverError> {
        let layout = self.layout(write).await?;
        self.settle(write, layout, series.measurement).await?;
        self.text.clear();
        let t = &mut self.text;
        match layout.product {
            Product::InfluxDb => {
                t.push_str("SELECT count(");
                influx_ident(influx_field(layout, field), t);
                t.push_str("), sum(");
                influx_from(layout, series.measurement, field, t);
                influx_where(series.tags, Some(range), t);
                t.push_str(";SELECT last(");
                influx_from(layout, series.measurement, field, t);
                influx_where(series.tags, Some(range), t);
            }
            Product::QuestDb => {
                t.push_str("SELECT count(), sum(");
                sql_ident(field, t);
                t.push_str("), cast(max(timestamp) AS long), last(");
                sql_ident(field, t);
                t.push_str(") FROM ");
                sql_ident(series.measurement, t);
                sql_where(series.tags, Some(range), t);
            }
            Product::Prometheus | Product::VictoriaMetrics => {
                prom_selector(
                    layout,
                    &self.target,
                    series.measurement,
                    field,
                    series.tags,
                    t,
                );
                let _ = write!(t, "[{}ms]", range_ms(range));
                promql_at(range.end_ns - 1_000_000, &mut self.params);
            }
        }
        self.set_path(layout, false);
        let answer = self.run_parsed(write, "GET").await?;
        let stored = match layout.product {
            Product::InfluxDb => influx_stored(&answer),
            Product::QuestDb => sql_stored(&answer),
            Product::Prometheus | Product::VictoriaMetrics => prom_stored(&answer),
        };
        stored.map_err(|e| {
            DriverError::fatal(format!("unexpected answer from {}: {e}", self.endpoint))
        })
    }

    pub(super) async fn series_count(
        &mut self,
        write: &mut Http1Connection,
        measurement: &str,
        field: &str,
        range: Option<TimeRange>,
    ) -> Result<u64, DriverError> {
        let layout = self.layout(write).await?;
        self.settle(write, layout, measurement).await?;
        self.text.clear();
        let t = &mut self.text;
        match (layout.product, range) {
            (Product::InfluxDb, None) => {
                t.push_str("SHOW SERIES EXACT CARDINALITY FROM ");
                influx_measurement(layout, measurement, field, t);
            }
            (Product::InfluxDb, Some(_)) => {
                // The series with a point in range: one row each.
                t.push_str("SELECT count(\"last\") FROM (SELECT last(");
                influx_from(layout, measurement, field, t);
                influx_where(&[], range, t);
                t.push_str(" GROUP BY *)");
                influx_where(&[], range, t);
            }
            (Product::QuestDb, _) => {
                let tags = self.symbol_columns(write, layout, measurement).await?;
                let t = &mut self.text;
                t.clear();
                if tags.is_empty() {
                    // No tags (yet: `prepare` makes the table without
                    // them): its rows, if any, are one series.
                    t.push_str("SELECT count() FROM (SELECT * FROM ");
                    sql_ident(measurement, t);
                    sql_where(&[], range, t);
                    t.push_str(" LIMIT 1)");
                } else {
                    t.push_str("SELECT count() FROM (SELECT DISTINCT ");
                    for (i, tag) in tags.iter().enumerate() {
                        if i > 0 {
                            t.push_str(", ");
                        }
                        sql_ident(tag, t);
                    }
                    t.push_str(" FROM ");
                    sql_ident(measurement, t);
                    sql_where(&[], range, t);
                    t.push(')');
                }
            }
            (Product::Prometheus | Product::VictoriaMetrics, _) => {
                t.push_str("count(last_over_time(");
                prom_selector(layout, &self.target, measurement, field, &[], t);
                match range {
                    Some(range) => {
                        let _ = write!(t, "[{}ms]))", range_ms(range));
                        promql_at(range.end_ns - 1_000_000, &mut self.params);
                    }
                    None => {
                        let _ = write!(t, "[{LOOKBACK}]))");
                    }
                }
            }
        }
        self.set_path(layout, false);
        let answer = self.run_parsed(write, "GET").await?;
        let count = match layout.product {
            Product::InfluxDb if range.is_some() => {
                answer.pointer("/results/0/series/0/values/0/1")
            }
            Product::InfluxDb => answer.pointer("/results/0/series/0/values/0/0"),
            Product::QuestDb => answer.pointer("/dataset/0/0"),
            _ => answer.pointer("/data/result/0/value/1"),
        };
        Ok(count.map(number).unwrap_or(0.0) as u64)
    }

    /// The `SYMBOL` columns of QuestDB's table: the tags line protocol
    /// gave it (none before its first point).
    async fn symbol_columns(
        &mut self,
        write: &mut Http1Connection,
        layout: Layout,
        table: &str,
    ) -> Result<Vec<String>, DriverError> {
        self.text.clear();
        self.text.push_str("SELECT \"column\" FROM table_columns(");
        sql_string(table, &mut self.text);
        self.text.push_str(") WHERE type = 'SYMBOL'");
        self.set_path(layout, false);
        let answer = self.run_parsed(write, "GET").await?;
        let rows = answer["dataset"].as_array().cloned().unwrap_or_default();
        Ok(rows
            .iter()
            .filter_map(|r| r[0].as_str().map(str::to_string))
            .collect())
    }

    pub(super) async fn create_store(
        &mut self,
        write: &mut Http1Connection,
        measurement: &str,
        marker: &str,
    ) -> Result<bool, DriverError> {
        let layout = self.layout(write).await?;
        match layout.product {
            Product::InfluxDb => {
                let db = self.db()?.to_string();
                let create = format!("CREATE DATABASE {}", sql_quoted(&db, influx_ident));
                self.statement(write, layout, &create).await?;
                // The marker, a point of its own measurement.
                self.path.clear();
                self.path.extend_from_slice(b"/write?db=");
                encode_component(db.as_bytes(), &mut self.path);
                let mut line = format!("{MARKER_TABLE},measurement=").into_bytes();
                super::influx::escape(measurement.as_bytes(), b",= ", &mut line);
                line.extend_from_slice(b" marker=\"");
                super::influx::escape(marker.as_bytes(), b"\"\\", &mut line);
                line.push(b'"');
                let http = Self::http(&mut self.own, &self.target, write).await?;
                answered(http, &self.endpoint, "POST", &self.path, &line).await?;
                Ok(true)
            }
            Product::QuestDb => {
                let statements = [
                    format!(
                        "CREATE TABLE {} (timestamp TIMESTAMP) TIMESTAMP(timestamp) PARTITION BY DAY WAL",
                        sql_quoted(measurement, sql_ident)
                    ),
                    format!(
                        "CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (measurement SYMBOL, marker VARCHAR, timestamp TIMESTAMP) TIMESTAMP(timestamp)"
                    ),
                    marker_row(measurement, marker),
                ];
                for statement in statements {
                    self.statement(write, layout, &statement).await?;
                }
                Ok(true)
            }
            Product::Prometheus | Product::VictoriaMetrics => Ok(false),
        }
    }

    pub(super) async fn store_marker(
        &mut self,
        write: &mut Http1Connection,
        measurement: &str,
    ) -> Result<Option<String>, DriverError> {
        let layout = self.layout(write).await?;
        match layout.product {
            Product::InfluxDb => {
                if !self.influx_database_exists(write, layout).await? {
                    return Ok(None);
                }
                self.text.clear();
                self.text.push_str(&format!(
                    "SELECT last(\"marker\") FROM {MARKER_TABLE} WHERE \"measurement\" = "
                ));
                influx_string(measurement, &mut self.text);
                self.set_path(layout, false);
                let answer = self.run_parsed(write, "GET").await?;
                let marker = answer.pointer("/results/0/series/0/values/0/1");
                Ok(Some(
                    marker
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                ))
            }
            Product::QuestDb => {
                self.text.clear();
                self.text
                    .push_str("SELECT count() FROM tables() WHERE table_name = ");
                sql_string(measurement, &mut self.text);
                self.set_path(layout, false);
                let answer = self.run_parsed(write, "GET").await?;
                if answer.pointer("/dataset/0/0").and_then(Value::as_u64) != Some(1) {
                    return Ok(None);
                }
                self.text.clear();
                let _ = write!(
                    self.text,
                    "SELECT marker FROM {MARKER_TABLE} WHERE measurement = "
                );
                sql_string(measurement, &mut self.text);
                self.text.push_str(" LIMIT -1");
                self.set_path(layout, false);
                // No marker table: a table loadcell did not make.
                let marker = match self.run_parsed(write, "GET").await {
                    Ok(answer) => answer
                        .pointer("/dataset/0/0")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    Err(_) => String::new(),
                };
                Ok(Some(marker))
            }
            Product::Prometheus | Product::VictoriaMetrics => Ok(None),
        }
    }

    /// Whether the target's InfluxDB database exists.
    async fn influx_database_exists(
        &mut self,
        write: &mut Http1Connection,
        layout: Layout,
    ) -> Result<bool, DriverError> {
        let db = self.db()?.to_string();
        let names = self
            .influx_values(write, layout, "SHOW DATABASES", 0)
            .await?;
        Ok(names.contains(&db))
    }

    /// Runs InfluxQL `statement` (a `SHOW`): column `column` of every row
    /// of every series of its answer.
    async fn influx_values(
        &mut self,
        write: &mut Http1Connection,
        layout: Layout,
        statement: &str,
        column: usize,
    ) -> Result<Vec<String>, DriverError> {
        self.text.clear();
        self.text.push_str(statement);
        self.set_path(layout, false);
        let answer = self.run_parsed(write, "GET").await?;
        let series = answer
            .pointer("/results/0/series")
            .and_then(Value::as_array);
        Ok(series
            .into_iter()
            .flatten()
            .filter_map(|s| s["values"].as_array())
            .flatten()
            .filter_map(|row| row[column].as_str().map(str::to_string))
            .collect())
    }

    /// Sends an InfluxQL or SQL administration statement, its answer
    /// unread (InfluxDB takes them by POST only).
    async fn statement(
        &mut self,
        write: &mut Http1Connection,
        layout: Layout,
        statement: &str,
    ) -> Result<(), DriverError> {
        let method = if layout.product == Product::InfluxDb {
            "POST"
        } else {
            "GET"
        };
        self.text.clear();
        self.text.push_str(statement);
        self.set_path(layout, false);
        self.run(write, method).await.map(drop)
    }

    pub(super) async fn holdings(
        &mut self,
        write: &mut Http1Connection,
        shape: Shape<'_>,
    ) -> Result<Holdings, DriverError> {
        let layout = self.layout(write).await?;
        let measurement = shape.measurement;
        let mut held = Holdings::default();
        match layout.product {
            Product::InfluxDb => {
                if !self.influx_database_exists(write, layout).await? {
                    return Ok(held);
                }
                let all = self
                    .influx_values(write, layout, "SHOW MEASUREMENTS", 0)
                    .await?;
                held.names = all
                    .into_iter()
                    .filter(|name| match layout.per_field {
                        None => name == measurement,
                        Some(sep) => name
                            .strip_prefix(measurement)
                            .and_then(|rest| rest.strip_prefix(sep))
                            .is_some_and(|field| shape.fields.contains(field)),
                    })
                    .collect();
                for name in &held.names {
                    let from = sql_quoted(name, influx_ident);
                    let tags = format!("SHOW TAG KEYS FROM {from}");
                    for key in self.influx_values(write, layout, &tags, 0).await? {
                        if !shape.tags.contains(&key) {
                            held.foreign.push(format!("tag {key} in {name}"));
                        }
                    }
                    let fields = format!("SHOW FIELD KEYS FROM {from}");
                    for key in self.influx_values(write, layout, &fields, 0).await? {
                        let own = match layout.per_field {
                            None => shape.fields.contains(&key),
                            Some(_) => key == "value",
                        };
                        if !own {
                            held.foreign.push(format!("field {key} in {name}"));
                        }
                    }
                }
            }
            Product::QuestDb => {
                // Another writer's columns may still be in the table's WAL.
                self.settle(write, layout, measurement).await?;
                self.text.clear();
                self.text
                    .push_str("SELECT \"column\", designated FROM table_columns(");
                sql_string(measurement, &mut self.text);
                self.text.push(')');
                self.set_path(layout, false);
                // No such table: QuestDB answers an error.
                let Ok(answer) = self.run_parsed(write, "GET").await else {
                    return Ok(held);
                };
                held.names.push(measurement.to_string());
                let rows = answer["dataset"].as_array().cloned().unwrap_or_default();
                for row in rows {
                    let (Some(column), designated) = (row[0].as_str(), row[1] == true) else {
                        continue;
                    };
                    if !designated && !shape.owns(column) {
                        held.foreign.push(format!("column {column}"));
                    }
                }
            }
            Product::Prometheus | Product::VictoriaMetrics => {
                self.text.clear();
                self.own_metrics(layout, shape);
                self.path.clear();
                self.path
                    .extend_from_slice(b"/api/v1/label/__name__/values?start=0&match[]=");
                encode_component(self.text.as_bytes(), &mut self.path);
                let http = Self::http(&mut self.own, &self.target, write).await?;
                let body = answered(http, &self.endpoint, "GET", &self.path, b"").await?;
                let answer: Value = serde_json::from_slice(body).map_err(|e| {
                    DriverError::fatal(format!("unexpected answer from {} ({e})", self.endpoint))
                })?;
                let names = answer["data"].as_array().into_iter().flatten();
                held.names = names
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect();
            }
        }
        Ok(held)
    }

    /// Writes into `self.text` a PromQL selector of the series of loadcell's
    /// metric names for `shape` (`m_field`, its fields only), in the
    /// target's `db` where line protocol gave VictoriaMetrics one.
    fn own_metrics(&mut self, layout: Layout, shape: Shape<'_>) {
        let t = &mut self.text;
        t.push_str("{__name__=~\"");
        regex_escape(shape.measurement, t);
        regex_escape(layout.per_field.unwrap_or("_"), t);
        match shape.fields {
            Names::Listed(fields) => {
                t.push_str("(?:");
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        t.push('|');
                    }
                    regex_escape(field, t);
                }
                t.push(')');
            }
            Names::Numbered(prefix) => {
                regex_escape(prefix, t);
                t.push_str("[0-9]+");
            }
        }
        t.push('"');
        self.db_label(layout);
        self.text.push('}');
    }

    /// `,db="…"` where line protocol gave VictoriaMetrics the target's
    /// database as a label.
    fn db_label(&mut self, layout: Layout) {
        if let (true, Some(db)) = (layout.db_label, &self.target.db) {
            self.text.push_str(",db=");
            prom_string(db, &mut self.text);
        }
    }

    pub(super) async fn drop_store(
        &mut self,
        write: &mut Http1Connection,
        shape: Shape<'_>,
        names: &[String],
    ) -> Result<(), DriverError> {
        let layout = self.layout(write).await?;
        let measurement = shape.measurement;
        match layout.product {
            Product::InfluxDb => {
                for name in names {
                    let drop = format!("DROP MEASUREMENT {}", sql_quoted(name, influx_ident));
                    self.statement(write, layout, &drop).await?;
                }
                let marker = format!(
                    "DROP SERIES FROM {MARKER_TABLE} WHERE \"measurement\" = {}",
                    sql_quoted(measurement, influx_string)
                );
                self.statement(write, layout, &marker).await
            }
            Product::QuestDb => {
                let drop = format!("DROP TABLE {}", sql_quoted(measurement, sql_ident));
                self.statement(write, layout, &drop).await?;
                // A table of that name made later is not loadcell's.
                let _ = self
                    .statement(write, layout, &marker_row(measurement, ""))
                    .await;
                Ok(())
            }
            Product::Prometheus | Product::VictoriaMetrics => {
                if names.is_empty() {
                    return Ok(());
                }
                // Exactly these metric names: never a prefix another
                // writer's metrics could share.
                let t = &mut self.text;
                t.clear();
                t.push_str("{__name__=~\"");
                for (i, name) in names.iter().enumerate() {
                    if i > 0 {
                        t.push('|');
                    }
                    regex_escape(name, t);
                }
                t.push('"');
                self.db_label(layout);
                self.text.push('}');
                self.path.clear();
                self.path
                    .extend_from_slice(b"/api/v1/admin/tsdb/delete_series?match[]=");
                encode_component(self.text.as_bytes(), &mut self.path);
                let http = Self::http(&mut self.own, &self.target, write).await?;
                let request = Request {
                    method: "POST",
                    path: &self.path,
                    headers: b"",
                    body: b"",
                };
                let response = http.request(&request).await?;
                if (200..300).contains(&response.status) {
                    return Ok(());
                }
                if find(response.body, b"admin APIs disabled").is_some() {
                    return Err(DriverError::fatal(format!(
                        "{} refused to delete series: start Prometheus with --web.enable-admin-api",
                        self.endpoint
                    )));
                }
                Err(failure(response.status, response.body, &self.endpoint))
            }
        }
    }

    pub(super) async fn drop_database_if_empty(
        &mut self,
        write: &mut Http1Connection,
    ) -> Result<DatabaseLeft, DriverError> {
        let layout = self.layout(write).await?;
        if layout.product != Product::InfluxDb {
            return Ok(DatabaseLeft::NotOwn);
        }
        let db = self.db()?.to_string();
        if !self.influx_database_exists(write, layout).await? {
            return Ok(DatabaseLeft::NotOwn);
        }
        let mut holding: Vec<String> = self
            .influx_values(write, layout, "SHOW MEASUREMENTS", 0)
            .await?
            .into_iter()
            .filter(|m| m != MARKER_TABLE)
            .collect();
        let marked = format!("SHOW TAG VALUES FROM {MARKER_TABLE} WITH KEY = \"measurement\"");
        let stores = self.influx_values(write, layout, &marked, 1).await?;
        holding.extend(stores.iter().map(|m| format!("loadcell's store of '{m}'")));
        if !holding.is_empty() {
            return Ok(DatabaseLeft::Holding(db, holding));
        }
        let drop = format!("DROP DATABASE {}", sql_quoted(&db, influx_ident));
        self.statement(write, layout, &drop).await?;
        Ok(DatabaseLeft::Dropped(db))
    }
}

/// An `INSERT` of `measurement`'s marker into QuestDB's marker table.
fn marker_row(measurement: &str, marker: &str) -> String {
    format!(
        "INSERT INTO {MARKER_TABLE} VALUES ({}, {}, now())",
        sql_quoted(measurement, sql_string),
        sql_quoted(marker, sql_string)
    )
}

fn sql_quoted(s: &str, quote: fn(&str, &mut String)) -> String {
    let mut out = String::new();
    quote(s, &mut out);
    out
}

/// PromQL's `&time=` for an instant query at `ns`.
fn promql_at(ns: i64, out: &mut String) {
    out.push_str("&time=");
    seconds(ns, out);
}

/// PromQL's `&start=…&end=…&step=…` for a range query over `range`.
fn promql_range(range: TimeRange, step_ns: i64, out: &mut String) {
    out.push_str("&start=");
    seconds(range.start_ns, out);
    out.push_str("&end=");
    seconds(range.end_ns - 1_000_000, out);
    out.push_str("&step=");
    seconds(step_ns.max(1_000_000), out);
}

/// Nanoseconds as seconds with milliseconds, PromQL's API's time.
fn seconds(ns: i64, out: &mut String) {
    let ms = ns.div_euclid(1_000_000);
    let _ = write!(out, "{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
}

/// A range's length in whole milliseconds, at least one.
fn range_ms(range: TimeRange) -> i64 {
    ((range.end_ns - range.start_ns + 999_999) / 1_000_000).max(1)
}

/// `"measurement"` (`"m.f"` for OpenTSDB's series) for InfluxQL.
fn influx_measurement(layout: Layout, measurement: &str, field: &str, t: &mut String) {
    match layout.per_field {
        Some(sep) => quoted(&[measurement, sep, field], '"', &['"', '\\'], t),
        None => influx_ident(measurement, t),
    }
}

/// The InfluxDB field the model's `field` is kept in.
fn influx_field(layout: Layout, field: &str) -> &str {
    if layout.per_field.is_some() {
        "value"
    } else {
        field
    }
}

/// `"field") FROM "measurement"`, after a selector's `(`.
fn influx_from(layout: Layout, measurement: &str, field: &str, t: &mut String) {
    influx_ident(influx_field(layout, field), t);
    t.push_str(") FROM ");
    influx_measurement(layout, measurement, field, t);
}

/// Writes a name or a value quoted as a query language wants it.
type Quote = fn(&str, &mut String);

/// ` WHERE key = 'value' AND …` for `tags`, quoted by the language's
/// `ident` and `string`; returns what joins a further condition.
fn where_tags(
    tags: &[(&str, &str)],
    (ident, string): (Quote, Quote),
    t: &mut String,
) -> &'static str {
    let mut and = " WHERE ";
    for (key, value) in tags {
        t.push_str(and);
        ident(key, t);
        t.push_str(" = ");
        string(value, t);
        and = " AND ";
    }
    and
}

fn influx_where(tags: &[(&str, &str)], range: Option<TimeRange>, t: &mut String) {
    let and = where_tags(tags, (influx_ident, influx_string), t);
    if let Some(r) = range {
        let _ = write!(t, "{and}time >= {} AND time < {}", r.start_ns, r.end_ns);
    }
}

fn sql_where(tags: &[(&str, &str)], range: Option<TimeRange>, t: &mut String) {
    let and = where_tags(tags, (sql_ident, sql_string), t);
    if let Some(r) = range {
        // QuestDB's timestamps are microseconds.
        let start = r.start_ns.div_euclid(1000);
        let end = (r.end_ns + 999).div_euclid(1000);
        let _ = write!(t, "{and}timestamp >= {start} AND timestamp < {end}");
    }
}

/// `{__name__="m_f",tag="v",…}`, with the target's `db` where line
/// protocol gave VictoriaMetrics one.
fn prom_selector(
    layout: Layout,
    target: &QueryTarget,
    measurement: &str,
    field: &str,
    tags: &[(&str, &str)],
    t: &mut String,
) {
    let sep = layout.per_field.unwrap_or("_");
    t.push_str("{__name__=");
    quoted(&[measurement, sep, field], '"', &['"', '\\'], t);
    for (key, value) in tags {
        let _ = write!(t, ",{key}=");
        prom_string(value, t);
    }
    if let (true, Some(db)) = (layout.db_label, &target.db) {
        t.push_str(",db=");
        prom_string(db, t);
    }
    t.push('}');
}

/// `parts` written as one quoted string, `escaped` characters after a
/// backslash.
fn quoted(parts: &[&str], quote: char, escaped: &[char], t: &mut String) {
    t.push(quote);
    for c in parts.iter().flat_map(|p| p.chars()) {
        if escaped.contains(&c) {
            t.push('\\');
        }
        t.push(c);
    }
    t.push(quote);
}

fn influx_ident(s: &str, t: &mut String) {
    quoted(&[s], '"', &['"', '\\'], t);
}

fn influx_string(s: &str, t: &mut String) {
    quoted(&[s], '\'', &['\'', '\\'], t);
}

fn prom_string(s: &str, t: &mut String) {
    quoted(&[s], '"', &['"', '\\'], t);
}

fn sql_doubled(s: &str, quote: char, t: &mut String) {
    t.push(quote);
    for c in s.chars() {
        if c == quote {
            t.push(c);
        }
        t.push(c);
    }
    t.push(quote);
}

fn sql_ident(s: &str, t: &mut String) {
    sql_doubled(s, '"', t);
}

fn sql_string(s: &str, t: &mut String) {
    sql_doubled(s, '\'', t);
}

/// `s` as a regular expression matching itself, inside a PromQL string.
fn regex_escape(s: &str, t: &mut String) {
    for c in s.chars() {
        t.push_str(regex_escape_char(c));
        if regex_escape_char(c).is_empty() {
            t.push(c);
        }
    }
}

/// The escape (`\\.` in a PromQL string) of a regex metacharacter, else "".
fn regex_escape_char(c: char) -> &'static str {
    match c {
        '.' => "\\\\.",
        '+' => "\\\\+",
        '*' => "\\\\*",
        '?' => "\\\\?",
        '(' => "\\\\(",
        ')' => "\\\\)",
        '[' => "\\\\[",
        ']' => "\\\\]",
        '{' => "\\\\{",
        '}' => "\\\\}",
        '|' => "\\\\|",
        '^' => "\\\\^",
        '$' => "\\\\$",
        '\\' => "\\\\\\\\",
        '"' => "\\\"",
        _ => "",
    }
}

/// Appends `bytes` %-encoded for a URL's query string: all but the
/// unreserved characters (RFC 3986), spaces as `%20`.
pub(super) fn encode_component(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A JSON number, or a number in a string (PromQL's sample values).
fn number(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// `count(…), sum(…);last(…)`: `[time, count, sum]` and `[time, value]`.
fn influx_stored(answer: &Value) -> Result<Option<StoredPoints>, String> {
    let Some(counted) = answer.pointer("/results/0/series/0/values/0") else {
        return Ok(None);
    };
    let last = answer
        .pointer("/results/1/series/0/values/0")
        .ok_or("a count without a last point")?;
    Ok(Some(StoredPoints {
        count: number(&counted[1]) as u64,
        sum: number(&counted[2]),
        last_timestamp_ns: last[0].as_i64().ok_or("a time that is not epoch=ns")?,
        last_value: number(&last[1]),
    }))
}

/// `count(), sum(f), max(timestamp) in µs, last(f)`.
fn sql_stored(answer: &Value) -> Result<Option<StoredPoints>, String> {
    let row = answer.pointer("/dataset/0").ok_or("no row")?;
    let count = row[0].as_u64().ok_or("no count")?;
    if count == 0 {
        return Ok(None);
    }
    Ok(Some(StoredPoints {
        count,
        sum: number(&row[1]),
        last_timestamp_ns: row[2].as_i64().ok_or("no timestamp")? * 1000,
        last_value: number(&row[3]),
    }))
}

/// A range selector's raw samples: `[[seconds, "value"], …]`.
fn prom_stored(answer: &Value) -> Result<Option<StoredPoints>, String> {
    let Some(values) = answer.pointer("/data/result/0/values") else {
        return Ok(None);
    };
    let values = values.as_array().ok_or("values that are not an array")?;
    let Some(last) = values.last() else {
        return Ok(None);
    };
    Ok(Some(StoredPoints {
        count: values.len() as u64,
        sum: values.iter().map(|v| number(&v[1])).sum(),
        last_timestamp_ns: (number(&last[0]) * 1000.0).round() as i64 * 1_000_000,
        last_value: number(&last[1]),
    }))
}

/// What an answer part adds to the rows counted.
trait Rows {
    fn rows(&self) -> u64;
}

impl Rows for IgnoredAny {
    fn rows(&self) -> u64 {
        1
    }
}

/// A JSON array's rows, summed over its elements as they are read.
struct Sum<T>(u64, PhantomData<T>);

impl<T> Default for Sum<T> {
    fn default() -> Self {
        Sum(0, PhantomData)
    }
}

impl<'de, T: Deserialize<'de> + Rows> Deserialize<'de> for Sum<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Each<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Rows> Visitor<'de> for Each<T> {
            type Value = Sum<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Sum<T>, A::Error> {
                let mut n = 0;
                while let Some(e) = seq.next_element::<T>()? {
                    n += e.rows();
                }
                Ok(Sum(n, PhantomData))
            }
        }
        d.deserialize_seq(Each(PhantomData))
    }
}

/// InfluxQL: `{"results":[{"series":[{"values":[[…],…]}]}]}`.
#[derive(Deserialize)]
struct InfluxRows {
    results: Sum<InfluxStatement>,
}

#[derive(Deserialize)]
struct InfluxStatement {
    #[serde(default)]
    series: Sum<InfluxSeries>,
}

impl Rows for InfluxStatement {
    fn rows(&self) -> u64 {
        self.series.0
    }
}

#[derive(Deserialize)]
struct InfluxSeries {
    values: Sum<IgnoredAny>,
}

impl Rows for InfluxSeries {
    fn rows(&self) -> u64 {
        self.values.0
    }
}

/// QuestDB's `/exec`: `{"dataset":[…],"count":N}`.
#[derive(Deserialize)]
struct SqlRows {
    count: u64,
}

/// PromQL: a vector's samples (one per series) or a matrix's values.
#[derive(Deserialize)]
struct PromRows {
    data: PromData,
}

#[derive(Deserialize)]
struct PromData {
    result: Sum<PromSeries>,
}

#[derive(Deserialize)]
struct PromSeries {
    #[serde(default)]
    values: Option<Sum<IgnoredAny>>,
}

impl Rows for PromSeries {
    fn rows(&self) -> u64 {
        self.values.as_ref().map_or(1, |v| v.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn influx() -> Layout {
        layout(Kind::Line, Product::InfluxDb).unwrap()
    }

    #[test]
    fn protocols_and_databases_pair_as_each_takes_them() {
        assert!(layout(Kind::Line, Product::Prometheus).is_err());
        assert_eq!(
            layout(Kind::RemoteWrite, Product::QuestDb).unwrap_err(),
            "QuestDB does not take Prometheus remote write"
        );
        assert_eq!(
            layout(Kind::OpenTsdb, Product::InfluxDb).unwrap().per_field,
            Some(".")
        );
        assert!(
            layout(Kind::Line, Product::VictoriaMetrics)
                .unwrap()
                .db_label
        );
    }

    #[test]
    fn names_and_values_are_quoted_in_each_language() {
        let mut t = String::new();
        t.push_str("SELECT last(");
        influx_from(influx(), "cpu", "us\"age", &mut t);
        influx_where(
            &[("host", "a'b")],
            Some(TimeRange {
                start_ns: 1,
                end_ns: 2,
            }),
            &mut t,
        );
        assert_eq!(
            t,
            r#"SELECT last("us\"age") FROM "cpu" WHERE "host" = 'a\'b' AND time >= 1 AND time < 2"#
        );
        t.clear();
        let opentsdb = layout(Kind::OpenTsdb, Product::InfluxDb).unwrap();
        influx_from(opentsdb, "cpu", "usage", &mut t);
        assert_eq!(t, r#""value") FROM "cpu.usage""#);
        t.clear();
        sql_where(
            &[("ho\"st", "it's")],
            Some(TimeRange {
                start_ns: 1500,
                end_ns: 2001,
            }),
            &mut t,
        );
        assert_eq!(
            t,
            r#" WHERE "ho""st" = 'it''s' AND timestamp >= 1 AND timestamp < 3"#
        );
        t.clear();
        let vm = layout(Kind::Line, Product::VictoriaMetrics).unwrap();
        let target = QueryTarget {
            shared: None,
            db: Some("d".into()),
        };
        prom_selector(vm, &target, "cpu", "usage", &[("host", "a\"")], &mut t);
        assert_eq!(t, r#"{__name__="cpu_usage",host="a\"",db="d"}"#);
        t.clear();
        regex_escape("a.b", &mut t);
        assert_eq!(t, r"a\\.b");
    }

    #[test]
    fn promql_times_are_seconds_with_milliseconds() {
        let mut p = String::new();
        let range = TimeRange {
            start_ns: 1_700_000_000_000_000_000,
            end_ns: 1_700_000_060_000_000_000,
        };
        promql_range(range, 10_000_000_000, &mut p);
        assert_eq!(p, "&start=1700000000.000&end=1700000059.999&step=10.000");
        p.clear();
        promql_at(-1_500_000_000, &mut p);
        assert_eq!(p, "&time=-2.500");
        assert_eq!(
            range_ms(TimeRange {
                start_ns: 0,
                end_ns: 1
            }),
            1
        );
    }

    #[test]
    fn query_components_are_percent_encoded() {
        let mut out = Vec::new();
        encode_component("SELECT \"a\" = 'b'&c/d~".as_bytes(), &mut out);
        assert_eq!(out, b"SELECT%20%22a%22%20%3D%20%27b%27%26c%2Fd~");
    }

    #[test]
    fn rows_are_counted_in_each_answer_without_building_them() {
        let influx = br#"{"results":[{"statement_id":0,"series":[{"name":"cpu","columns":["time","mean"],"values":[[0,3],[60,1.5]]},{"values":[[0,1]]}]},{"statement_id":1}]}"#;
        assert_eq!(
            serde_json::from_slice::<InfluxRows>(influx)
                .unwrap()
                .results
                .0,
            3
        );
        let vector = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"},"value":[1,"2"]},{"metric":{},"value":[1,"3"]}]}}"#;
        assert_eq!(
            serde_json::from_slice::<PromRows>(vector)
                .unwrap()
                .data
                .result
                .0,
            2
        );
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2"],[2,"3"],[3,"4"]]}]}}"#;
        assert_eq!(
            serde_json::from_slice::<PromRows>(matrix)
                .unwrap()
                .data
                .result
                .0,
            3
        );
        let sql = br#"{"query":"x","columns":[],"dataset":[["a",1.5]],"count":1}"#;
        assert_eq!(serde_json::from_slice::<SqlRows>(sql).unwrap().count, 1);
    }

    #[test]
    fn stored_points_are_read_from_each_answer() {
        let influx: Value = serde_json::from_str(r#"{"results":[{"series":[{"values":[[0,2,2.5]]}]},{"series":[{"values":[[1700000000000000001,1.5]]}]}]}"#).unwrap();
        let expected = StoredPoints {
            count: 2,
            sum: 2.5,
            last_timestamp_ns: 1_700_000_000_000_000_001,
            last_value: 1.5,
        };
        assert_eq!(influx_stored(&influx).unwrap(), Some(expected));
        let none: Value =
            serde_json::from_str(r#"{"results":[{"statement_id":0},{"statement_id":1}]}"#).unwrap();
        assert_eq!(influx_stored(&none).unwrap(), None);
        let sql: Value =
            serde_json::from_str(r#"{"dataset":[[2,2.5,1700000000000000,1.5]],"count":1}"#)
                .unwrap();
        assert_eq!(
            sql_stored(&sql).unwrap().unwrap().last_timestamp_ns,
            1_700_000_000_000_000_000
        );
        let prom: Value = serde_json::from_str(
            r#"{"data":{"result":[{"values":[[1700000000,"1"],[1700000000.123,"1.5"]]}]}}"#,
        )
        .unwrap();
        let p = prom_stored(&prom).unwrap().unwrap();
        assert_eq!(
            (p.count, p.sum, p.last_timestamp_ns, p.last_value),
            (2, 2.5, 1_700_000_000_123_000_000, 1.5)
        );
    }
}
