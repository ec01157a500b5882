//! InfluxQL on InfluxDB 1.x's `/query`: the target names a database, a
//! store is a measurement (one per field for OpenTSDB's series), and its
//! marker a point of [`MARKER_TABLE`].

use std::fmt::Write as _;

use loadcell_core::ts::{DatabaseLeft, Holdings, Series, Shape, StoredPoints, TimeRange, TsQuery};
use loadcell_core::DriverError;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::{
    encode_component, find, number, quoted, sql_quoted, where_tags, Asker, Language, Layout,
    QueryTarget, Rows, Sum, MARKER_TABLE,
};
use crate::http::Http1Connection;

/// InfluxQL, over the series as `.0` names them.
#[derive(Debug, Clone, Copy)]
pub(super) struct InfluxQl(pub(super) Layout);

impl Language for InfluxQl {
    /// InfluxDB takes them by POST only.
    const ADMIN_METHOD: &'static str = "POST";

    fn path_start(&self, target: &QueryTarget, _range: bool, path: &mut Vec<u8>) {
        let db = target.db.as_deref().unwrap_or_default();
        path.extend_from_slice(b"/query?epoch=ns&db=");
        encode_component(db.as_bytes(), path);
        path.extend_from_slice(b"&q=");
    }

    /// A statement's error, which InfluxDB answers with 200.
    fn answer_error(&self, body: &[u8]) -> Option<String> {
        find(body, b"\"error\":\"")?;
        let answer: Value = serde_json::from_slice(body).unwrap_or_default();
        let statements = answer["results"].as_array();
        let error = statements
            .and_then(|all| all.iter().find_map(|s| s.get("error")))
            .or_else(|| answer.get("error"))
            .and_then(Value::as_str)
            .unwrap_or("an error");
        Some(error.to_string())
    }

    fn write_query(&self, ask: &mut Asker, query: &TsQuery<'_>) {
        let layout = self.0;
        let t = &mut ask.text;
        match *query {
            TsQuery::LastPoint { series, field } => {
                t.push_str("SELECT last(");
                influx_from(layout, series.measurement, field, t);
                influx_where(series.tags, None, t);
            }
            TsQuery::RangeMean {
                series,
                field,
                range,
                step_ns,
            } => {
                t.push_str("SELECT mean(");
                influx_from(layout, series.measurement, field, t);
                influx_where(series.tags, Some(range), t);
                let _ = write!(t, " GROUP BY time({step_ns}ns) fill(none)");
            }
            TsQuery::GroupBy {
                measurement,
                field,
                tag,
                range,
            } => {
                t.push_str("SELECT mean(");
                influx_from(layout, measurement, field, t);
                influx_where(&[], Some(range), t);
                t.push_str(" GROUP BY ");
                influx_ident(tag, t);
            }
        }
    }

    fn rows(&self, body: &[u8]) -> serde_json::Result<u64> {
        serde_json::from_slice::<InfluxRows>(body).map(|a| a.results.0)
    }

    fn write_stored_points(
        &self,
        ask: &mut Asker,
        series: Series<'_>,
        field: &str,
        range: TimeRange,
    ) {
        let layout = self.0;
        let t = &mut ask.text;
        t.push_str("SELECT count(");
        influx_ident(influx_field(layout, field), t);
        t.push_str("), sum(");
        influx_from(layout, series.measurement, field, t);
        influx_where(series.tags, Some(range), t);
        t.push_str(";SELECT last(");
        influx_from(layout, series.measurement, field, t);
        influx_where(series.tags, Some(range), t);
    }

    fn stored_points(&self, answer: &Value) -> Result<Option<StoredPoints>, String> {
        influx_stored(answer)
    }

    async fn write_series_count(
        &self,
        ask: &mut Asker,
        _write: &mut Http1Connection,
        measurement: &str,
        field: &str,
        range: Option<TimeRange>,
    ) -> Result<(), DriverError> {
        let layout = self.0;
        let t = &mut ask.text;
        if range.is_none() {
            t.push_str("SHOW SERIES EXACT CARDINALITY FROM ");
            influx_measurement(layout, measurement, field, t);
        } else {
            // The series with a point in range: one row each.
            t.push_str("SELECT count(\"last\") FROM (SELECT last(");
            influx_from(layout, measurement, field, t);
            influx_where(&[], range, t);
            t.push_str(" GROUP BY *)");
            influx_where(&[], range, t);
        }
        Ok(())
    }

    fn series_counted<'v>(&self, answer: &'v Value, in_range: bool) -> Option<&'v Value> {
        if in_range {
            answer.pointer("/results/0/series/0/values/0/1")
        } else {
            answer.pointer("/results/0/series/0/values/0/0")
        }
    }

    async fn create_store(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        measurement: &str,
        marker: &str,
    ) -> Result<bool, DriverError> {
        let db = db(&ask.target)?.to_string();
        let create = format!("CREATE DATABASE {}", sql_quoted(&db, influx_ident));
        ask.statement(*self, write, &create).await?;
        // The marker, a point of its own measurement.
        ask.path.clear();
        ask.path.extend_from_slice(b"/write?db=");
        encode_component(db.as_bytes(), &mut ask.path);
        let mut line = format!("{MARKER_TABLE},measurement=").into_bytes();
        crate::ts::influx::escape(measurement.as_bytes(), b",= ", &mut line);
        line.extend_from_slice(b" marker=\"");
        crate::ts::influx::escape(marker.as_bytes(), b"\"\\", &mut line);
        line.push(b'"');
        ask.send(write, "POST", &line).await?;
        Ok(true)
    }

    async fn store_marker(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        measurement: &str,
    ) -> Result<Option<String>, DriverError> {
        if !self.database_exists(ask, write).await? {
            return Ok(None);
        }
        let mut text =
            format!("SELECT last(\"marker\") FROM {MARKER_TABLE} WHERE \"measurement\" = ");
        influx_string(measurement, &mut text);
        let answer = ask.ask(*self, write, &text).await?;
        let marker = answer.pointer("/results/0/series/0/values/0/1");
        Ok(Some(
            marker
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        ))
    }

    async fn holdings(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        shape: Shape<'_>,
    ) -> Result<Holdings, DriverError> {
        let per_field = self.0.per_field;
        let measurement = shape.measurement;
        let mut held = Holdings::default();
        if !self.database_exists(ask, write).await? {
            return Ok(held);
        }
        let all = self.values(ask, write, "SHOW MEASUREMENTS", 0).await?;
        held.names = all
            .into_iter()
            .filter(|name| match per_field {
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
            for key in self.values(ask, write, &tags, 0).await? {
                if !shape.tags.contains(&key) {
                    held.foreign.push(format!("tag {key} in {name}"));
                }
            }
            let fields = format!("SHOW FIELD KEYS FROM {from}");
            for key in self.values(ask, write, &fields, 0).await? {
                let own = match per_field {
                    None => shape.fields.contains(&key),
                    Some(_) => key == "value",
                };
                if !own {
                    held.foreign.push(format!("field {key} in {name}"));
                }
            }
        }
        Ok(held)
    }

    async fn drop_store(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        shape: Shape<'_>,
        names: &[String],
    ) -> Result<(), DriverError> {
        for name in names {
            let drop = format!("DROP MEASUREMENT {}", sql_quoted(name, influx_ident));
            ask.statement(*self, write, &drop).await?;
        }
        let marker = format!(
            "DROP SERIES FROM {MARKER_TABLE} WHERE \"measurement\" = {}",
            sql_quoted(shape.measurement, influx_string)
        );
        ask.statement(*self, write, &marker).await
    }

    async fn drop_database_if_empty(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
    ) -> Result<DatabaseLeft, DriverError> {
        let db = db(&ask.target)?.to_string();
        if !self.database_exists(ask, write).await? {
            return Ok(DatabaseLeft::NotOwn);
        }
        let mut holding: Vec<String> = self
            .values(ask, write, "SHOW MEASUREMENTS", 0)
            .await?
            .into_iter()
            .filter(|m| m != MARKER_TABLE)
            .collect();
        let marked = format!("SHOW TAG VALUES FROM {MARKER_TABLE} WITH KEY = \"measurement\"");
        let stores = self.values(ask, write, &marked, 1).await?;
        holding.extend(stores.iter().map(|m| format!("loadcell's store of '{m}'")));
        if !holding.is_empty() {
            return Ok(DatabaseLeft::Holding(db, holding));
        }
        let drop = format!("DROP DATABASE {}", sql_quoted(&db, influx_ident));
        ask.statement(*self, write, &drop).await?;
        Ok(DatabaseLeft::Dropped(db))
    }
}

impl InfluxQl {
    /// Whether the target's database exists.
    async fn database_exists(
        self,
        ask: &mut Asker,
        write: &mut Http1Connection,
    ) -> Result<bool, DriverError> {
        let db = db(&ask.target)?.to_string();
        let names = self.values(ask, write, "SHOW DATABASES", 0).await?;
        Ok(names.contains(&db))
    }

    /// Runs `statement` (a `SHOW`): column `column` of every row of every
    /// series of its answer.
    async fn values(
        self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        statement: &str,
        column: usize,
    ) -> Result<Vec<String>, DriverError> {
        let answer = ask.ask(self, write, statement).await?;
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
}

/// The database name InfluxQL needs.
fn db(target: &QueryTarget) -> Result<&str, DriverError> {
    target.db.as_deref().ok_or_else(|| {
        DriverError::fatal(
            "InfluxDB needs a database: name it in the target's path or in query=http://host:port/DB",
        )
    })
}

/// `"measurement"` (`"m.f"` for OpenTSDB's series).
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

fn influx_where(tags: &[(&str, &str)], range: Option<TimeRange>, t: &mut String) {
    let and = where_tags(tags, (influx_ident, influx_string), t);
    if let Some(r) = range {
        let _ = write!(t, "{and}time >= {} AND time < {}", r.start_ns, r.end_ns);
    }
}

fn influx_ident(s: &str, t: &mut String) {
    quoted(&[s], '"', &['"', '\\'], t);
}

fn influx_string(s: &str, t: &mut String) {
    quoted(&[s], '\'', &['\'', '\\'], t);
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

/// `{"results":[{"series":[{"values":[[…],…]}]}]}`.
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

#[cfg(test)]
mod tests {
    use super::super::{layout, Kind, Product};
    use super::*;

    #[test]
    fn names_and_values_are_quoted() {
        let mut t = String::new();
        t.push_str("SELECT last(");
        let line = layout(Kind::Line, Product::InfluxDb).unwrap();
        influx_from(line, "cpu", "us\"age", &mut t);
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
    }

    #[test]
    fn rows_are_counted_without_building_them() {
        let influx = br#"{"results":[{"statement_id":0,"series":[{"name":"cpu","columns":["time","mean"],"values":[[0,3],[60,1.5]]},{"values":[[0,1]]}]},{"statement_id":1}]}"#;
        assert_eq!(
            serde_json::from_slice::<InfluxRows>(influx)
                .unwrap()
                .results
                .0,
            3
        );
    }

    #[test]
    fn stored_points_are_read_from_the_answer() {
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
    }
}
