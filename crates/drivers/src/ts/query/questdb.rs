//! QuestDB's SQL on `/exec`: a store is a WAL table whose tags line
//! protocol made `SYMBOL` columns, and its marker a row of
//! [`MARKER_TABLE`]; what was written is visible once the WAL is applied.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use loadcell_core::ts::{Holdings, Series, Shape, StoredPoints, TimeRange, TsQuery};
use loadcell_core::DriverError;
use serde::Deserialize;
use serde_json::Value;

use super::{number, sql_quoted, where_tags, Asker, Language, QueryTarget, MARKER_TABLE};
use crate::http::Http1Connection;

/// How long verification waits for QuestDB to apply what was written.
const WAL_APPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// QuestDB's SQL: tables and columns under the model's own names.
#[derive(Debug, Clone, Copy)]
pub(super) struct QuestDb;

impl Language for QuestDb {
    fn path_start(&self, _target: &QueryTarget, _range: bool, path: &mut Vec<u8>) {
        path.extend_from_slice(b"/exec?query=");
    }

    fn write_query(&self, ask: &mut Asker, query: &TsQuery<'_>) {
        let t = &mut ask.text;
        match *query {
            TsQuery::LastPoint { series, field } => {
                t.push_str("SELECT ");
                sql_ident(field, t);
                t.push_str(", timestamp FROM ");
                sql_ident(series.measurement, t);
                sql_where(series.tags, None, t);
                t.push_str(" LIMIT -1");
            }
            TsQuery::RangeMean {
                series,
                field,
                range,
                step_ns,
            } => {
                t.push_str("SELECT timestamp, avg(");
                sql_ident(field, t);
                t.push_str(") FROM ");
                sql_ident(series.measurement, t);
                sql_where(series.tags, Some(range), t);
                let _ = write!(t, " SAMPLE BY {}U", (step_ns / 1000).max(1));
            }
            TsQuery::GroupBy {
                measurement,
                field,
                tag,
                range,
            } => {
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
        }
    }

    fn rows(&self, body: &[u8]) -> serde_json::Result<u64> {
        serde_json::from_slice::<SqlRows>(body).map(|a| a.count)
    }

    /// Waits until the table's write-ahead log, applied in the
    /// background, is.
    async fn settle(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        measurement: &str,
    ) -> Result<(), DriverError> {
        let text = sql_text(
            "SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = ",
            measurement,
        );
        let start = Instant::now();
        loop {
            let answer = ask.ask(*self, write, &text).await?;
            let row = answer.pointer("/dataset/0");
            let applied = row.is_none_or(|r| r[0].as_i64() >= r[1].as_i64());
            if applied {
                return Ok(());
            }
            if start.elapsed() > WAL_APPLY_TIMEOUT {
                return Err(DriverError::fatal(format!(
                    "{}: table '{measurement}' still has unapplied WAL transactions after {WAL_APPLY_TIMEOUT:?} ({})",
                    ask.endpoint,
                    row.map(Value::to_string).unwrap_or_default()
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn write_stored_points(
        &self,
        ask: &mut Asker,
        series: Series<'_>,
        field: &str,
        range: TimeRange,
    ) {
        let t = &mut ask.text;
        t.push_str("SELECT count(), sum(");
        sql_ident(field, t);
        t.push_str("), cast(max(timestamp) AS long), last(");
        sql_ident(field, t);
        t.push_str(") FROM ");
        sql_ident(series.measurement, t);
        sql_where(series.tags, Some(range), t);
    }

    fn stored_points(&self, answer: &Value) -> Result<Option<StoredPoints>, String> {
        sql_stored(answer)
    }

    async fn write_series_count(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        measurement: &str,
        _field: &str,
        range: Option<TimeRange>,
    ) -> Result<(), DriverError> {
        let tags = self.symbol_columns(ask, write, measurement).await?;
        let t = &mut ask.text;
        t.clear();
        if tags.is_empty() {
            // No tags (yet: `prepare` makes the table without them): its
            // rows, if any, are one series.
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
        Ok(())
    }

    fn series_counted<'v>(&self, answer: &'v Value, _in_range: bool) -> Option<&'v Value> {
        answer.pointer("/dataset/0/0")
    }

    async fn create_store(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        measurement: &str,
        marker: &str,
    ) -> Result<bool, DriverError> {
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
            ask.statement(*self, write, &statement).await?;
        }
        Ok(true)
    }

    async fn store_marker(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        measurement: &str,
    ) -> Result<Option<String>, DriverError> {
        let mut text = sql_text(
            "SELECT count() FROM tables() WHERE table_name = ",
            measurement,
        );
        let answer = ask.ask(*self, write, &text).await?;
        if answer.pointer("/dataset/0/0").and_then(Value::as_u64) != Some(1) {
            return Ok(None);
        }
        text.clear();
        let _ = write!(
            text,
            "SELECT marker FROM {MARKER_TABLE} WHERE measurement = "
        );
        sql_string(measurement, &mut text);
        text.push_str(" LIMIT -1");
        // No marker table: a table loadcell did not make.
        let marker = match ask.ask(*self, write, &text).await {
            Ok(answer) => answer
                .pointer("/dataset/0/0")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            Err(_) => String::new(),
        };
        Ok(Some(marker))
    }

    async fn holdings(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        shape: Shape<'_>,
    ) -> Result<Holdings, DriverError> {
        let measurement = shape.measurement;
        let mut held = Holdings::default();
        // Another writer's columns may still be in the table's WAL.
        self.settle(ask, write, measurement).await?;
        let mut text = sql_text(
            "SELECT \"column\", designated FROM table_columns(",
            measurement,
        );
        text.push(')');
        // No such table: QuestDB answers an error.
        let Ok(answer) = ask.ask(*self, write, &text).await else {
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
        Ok(held)
    }

    async fn drop_store(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        shape: Shape<'_>,
        _names: &[String],
    ) -> Result<(), DriverError> {
        let measurement = shape.measurement;
        let drop = format!("DROP TABLE {}", sql_quoted(measurement, sql_ident));
        ask.statement(*self, write, &drop).await?;
        // A table of that name made later is not loadcell's.
        let _ = ask
            .statement(*self, write, &marker_row(measurement, ""))
            .await;
        Ok(())
    }
}

impl QuestDb {
    /// The `SYMBOL` columns of `table`: the tags line protocol gave it
    /// (none before its first point).
    async fn symbol_columns(
        self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        table: &str,
    ) -> Result<Vec<String>, DriverError> {
        let mut text = sql_text("SELECT \"column\" FROM table_columns(", table);
        text.push_str(") WHERE type = 'SYMBOL'");
        let answer = ask.ask(self, write, &text).await?;
        let rows = answer["dataset"].as_array().cloned().unwrap_or_default();
        Ok(rows
            .iter()
            .filter_map(|r| r[0].as_str().map(str::to_string))
            .collect())
    }
}

/// An `INSERT` of `measurement`'s marker into the marker table.
fn marker_row(measurement: &str, marker: &str) -> String {
    format!(
        "INSERT INTO {MARKER_TABLE} VALUES ({}, {}, now())",
        sql_quoted(measurement, sql_string),
        sql_quoted(marker, sql_string)
    )
}

/// `start` followed by `name` as an SQL string.
fn sql_text(start: &str, name: &str) -> String {
    let mut text = String::from(start);
    sql_string(name, &mut text);
    text
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

/// `/exec`'s answer: `{"dataset":[…],"count":N}`.
#[derive(Deserialize)]
struct SqlRows {
    count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_quoted() {
        let mut t = String::new();
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
    }

    #[test]
    fn rows_are_counted_without_building_them() {
        let sql = br#"{"query":"x","columns":[],"dataset":[["a",1.5]],"count":1}"#;
        assert_eq!(serde_json::from_slice::<SqlRows>(sql).unwrap().count, 1);
    }

    #[test]
    fn stored_points_are_read_from_the_answer() {
        let sql: Value =
            serde_json::from_str(r#"{"dataset":[[2,2.5,1700000000000000,1.5]],"count":1}"#)
                .unwrap();
        assert_eq!(
            sql_stored(&sql).unwrap().unwrap().last_timestamp_ns,
            1_700_000_000_000_000_000
        );
    }
}
