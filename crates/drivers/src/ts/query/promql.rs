//! PromQL on Prometheus' and VictoriaMetrics' `/api/v1/query[_range]`:
//! a series per field under a metric name, no store to make, and
//! cleanup by the admin API's `delete_series`.

use std::fmt::Write as _;

use loadcell_core::http::{HttpConn, Request};
use loadcell_core::ts::{Holdings, Names, Series, Shape, StoredPoints, TimeRange, TsQuery};
use loadcell_core::DriverError;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::{
    encode_component, failure, find, number, quoted, Asker, Language, Layout, Product, QueryTarget,
    Rows, Sum,
};
use crate::http::Http1Connection;

/// How far back "the last point" and the series count look (PromQL needs
/// a range; the others look at everything).
const LOOKBACK: &str = "7d";

/// PromQL, over the metrics as `.0` names them.
#[derive(Debug, Clone, Copy)]
pub(super) struct PromQl(pub(super) Layout);

impl PromQl {
    fn victoria(self) -> bool {
        self.0.product == Product::VictoriaMetrics
    }
}

impl Language for PromQl {
    fn path_start(&self, _target: &QueryTarget, range: bool, path: &mut Vec<u8>) {
        if range {
            path.extend_from_slice(b"/api/v1/query_range?query=");
        } else {
            path.extend_from_slice(b"/api/v1/query?query=");
        }
    }

    fn path_end(&self) -> &'static [u8] {
        if self.victoria() {
            // Else it hides the last 30 s (-search.latencyOffset) from
            // queries at or near now: a spot check right after writing
            // would find nothing.
            b"&latency_offset=1ms"
        } else {
            b""
        }
    }

    fn write_query(&self, ask: &mut Asker, query: &TsQuery<'_>) {
        let layout = self.0;
        let (t, target) = (&mut ask.text, &*ask.target);
        match *query {
            TsQuery::LastPoint { series, field } => {
                let _ = write!(t, "last_over_time(");
                prom_selector(layout, target, series.measurement, field, series.tags, t);
                let _ = write!(t, "[{LOOKBACK}])");
            }
            TsQuery::RangeMean {
                series,
                field,
                range,
                step_ns,
            } => {
                t.push_str("avg_over_time(");
                prom_selector(layout, target, series.measurement, field, series.tags, t);
                let _ = write!(t, "[{}ms])", (step_ns / 1_000_000).max(1));
                promql_range(range, step_ns, &mut ask.params);
            }
            TsQuery::GroupBy {
                measurement,
                field,
                tag,
                range,
            } => {
                let _ = write!(t, "avg by ({tag}) (avg_over_time(");
                prom_selector(layout, target, measurement, field, &[], t);
                let _ = write!(t, "[{}ms]))", range_ms(range));
                promql_at(range.end_ns - 1_000_000, &mut ask.params);
            }
        }
    }

    fn rows(&self, body: &[u8]) -> serde_json::Result<u64> {
        serde_json::from_slice::<PromRows>(body).map(|a| a.data.result.0)
    }

    /// VictoriaMetrics flushes its in-memory rows on request.
    async fn settle(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        _measurement: &str,
    ) -> Result<(), DriverError> {
        if self.victoria() {
            let http = Asker::http(&mut ask.own, &ask.target, write).await?;
            super::answered(http, &ask.endpoint, "GET", b"/internal/force_flush", b"").await?;
        }
        Ok(())
    }

    fn write_stored_points(
        &self,
        ask: &mut Asker,
        series: Series<'_>,
        field: &str,
        range: TimeRange,
    ) {
        let t = &mut ask.text;
        prom_selector(
            self.0,
            &ask.target,
            series.measurement,
            field,
            series.tags,
            t,
        );
        let _ = write!(t, "[{}ms]", range_ms(range));
        promql_at(range.end_ns - 1_000_000, &mut ask.params);
    }

    fn stored_points(&self, answer: &Value) -> Result<Option<StoredPoints>, String> {
        prom_stored(answer)
    }

    async fn write_series_count(
        &self,
        ask: &mut Asker,
        _write: &mut Http1Connection,
        measurement: &str,
        field: &str,
        range: Option<TimeRange>,
    ) -> Result<(), DriverError> {
        let t = &mut ask.text;
        t.push_str("count(last_over_time(");
        prom_selector(self.0, &ask.target, measurement, field, &[], t);
        match range {
            Some(range) => {
                let _ = write!(t, "[{}ms]))", range_ms(range));
                promql_at(range.end_ns - 1_000_000, &mut ask.params);
            }
            None => {
                let _ = write!(t, "[{LOOKBACK}]))");
            }
        }
        Ok(())
    }

    fn series_counted<'v>(&self, answer: &'v Value, _in_range: bool) -> Option<&'v Value> {
        answer.pointer("/data/result/0/value/1")
    }

    /// The metric names of loadcell's for `shape` the database holds.
    async fn holdings(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        shape: Shape<'_>,
    ) -> Result<Holdings, DriverError> {
        let mut held = Holdings::default();
        ask.text.clear();
        own_metrics(self.0, &ask.target, shape, &mut ask.text);
        ask.path.clear();
        ask.path
            .extend_from_slice(b"/api/v1/label/__name__/values?start=0&match[]=");
        encode_component(ask.text.as_bytes(), &mut ask.path);
        let body = ask.send(write, "GET", b"").await?;
        let answer: Value = serde_json::from_slice(body).map_err(|e| ask.unexpected(e))?;
        let names = answer["data"].as_array().into_iter().flatten();
        held.names = names
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect();
        Ok(held)
    }

    async fn drop_store(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        _shape: Shape<'_>,
        names: &[String],
    ) -> Result<(), DriverError> {
        if names.is_empty() {
            return Ok(());
        }
        // Exactly these metric names: never a prefix another writer's
        // metrics could share.
        let t = &mut ask.text;
        t.clear();
        t.push_str("{__name__=~\"");
        regex_any(names.iter().map(String::as_str), t);
        t.push('"');
        db_label(self.0, &ask.target, t);
        t.push('}');
        ask.path.clear();
        ask.path
            .extend_from_slice(b"/api/v1/admin/tsdb/delete_series?match[]=");
        encode_component(ask.text.as_bytes(), &mut ask.path);
        let http = Asker::http(&mut ask.own, &ask.target, write).await?;
        let request = Request {
            method: "POST",
            path: &ask.path,
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
                ask.endpoint
            )));
        }
        Err(failure(response.status, response.body, &ask.endpoint))
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
    db_label(layout, target, t);
    t.push('}');
}

/// Writes a selector of the series of loadcell's metric names for
/// `shape` (`m_field`, its fields only), in the target's `db` where line
/// protocol gave VictoriaMetrics one.
fn own_metrics(layout: Layout, target: &QueryTarget, shape: Shape<'_>, t: &mut String) {
    t.push_str("{__name__=~\"");
    regex_escape(shape.measurement, t);
    regex_escape(layout.per_field.unwrap_or("_"), t);
    match shape.fields {
        Names::Listed(fields) => {
            t.push_str("(?:");
            regex_any(fields.iter().copied(), t);
            t.push(')');
        }
        Names::Numbered(prefix) => {
            regex_escape(prefix, t);
            t.push_str("[0-9]+");
        }
    }
    t.push('"');
    db_label(layout, target, t);
    t.push('}');
}

/// `,db="…"` where line protocol gave VictoriaMetrics the target's
/// database as a label.
fn db_label(layout: Layout, target: &QueryTarget, t: &mut String) {
    if let (true, Some(db)) = (layout.db_label, &target.db) {
        t.push_str(",db=");
        prom_string(db, t);
    }
}

/// `a|b|…`: a regular expression matching any of `names` exactly.
fn regex_any<'a>(names: impl Iterator<Item = &'a str>, t: &mut String) {
    for (i, name) in names.enumerate() {
        if i > 0 {
            t.push('|');
        }
        regex_escape(name, t);
    }
}

fn prom_string(s: &str, t: &mut String) {
    quoted(&[s], '"', &['"', '\\'], t);
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

/// A vector's samples (one per series) or a matrix's values.
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
    use super::super::{layout, Kind};
    use super::*;

    #[test]
    fn names_and_values_are_quoted() {
        let mut t = String::new();
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
        t.clear();
        regex_any(["a.b", "c"].into_iter(), &mut t);
        assert_eq!(t, r"a\\.b|c");
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
    fn rows_are_counted_without_building_them() {
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
    }

    #[test]
    fn stored_points_are_read_from_the_answer() {
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
