//! Cassandra's own figures, read over CQL from its virtual tables
//! (`system_views`, Cassandra 4.0 on) once an interval: every stage's
//! tasks summed, and the request stages' completed tasks on their own
//! (`MutationStage` is the writes, `ReadStage` the reads,
//! `Native-Transport-Requests` every CQL request); the clients
//! connected; the key and row caches' hits and requests. Monotonic ones
//! end in `_total`, as the report expects of counters it turns into
//! rates. A server without `system_views` (3.x, ScyllaDB's differ) has
//! none of these: an empty sample, not an error.

use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::value::{CqlValue, Row};

use loadcell_core::DriverError;

use super::execution_error;

/// Stages whose completed tasks are reported on their own.
const STAGES: &[(&str, &str)] = &[
    ("MutationStage", "mutation_stage"),
    ("ReadStage", "read_stage"),
    ("Native-Transport-Requests", "native_transport_requests"),
];

/// Caches whose hits and requests are reported.
const CACHES: &[(&str, &str)] = &[("keys", "key_cache"), ("rows", "row_cache")];

pub(super) async fn sample(session: &Session) -> Result<Vec<(String, f64)>, DriverError> {
    let mut out = Vec::new();
    let Some(pools) = rows(session, "thread_pools").await? else {
        return Ok(out);
    };
    let (mut pending, mut blocked, mut active) = (0.0, 0.0, 0.0);
    for (name, row) in &pools {
        pending += number(row, "pending_tasks");
        blocked += number(row, "blocked_tasks");
        active += number(row, "active_tasks");
        if let Some((_, short)) = STAGES.iter().find(|(stage, _)| *stage == name.as_str()) {
            out.push((
                format!("{short}_completed_total"),
                number(row, "completed_tasks"),
            ));
        }
    }
    out.push(("thread_pools_pending_tasks".to_string(), pending));
    out.push(("thread_pools_blocked_tasks".to_string(), blocked));
    out.push(("thread_pools_active_tasks".to_string(), active));
    if let Some(clients) = rows(session, "clients").await? {
        out.push(("connected_clients".to_string(), clients.len() as f64));
    }
    for (name, row) in rows(session, "caches").await?.unwrap_or_default() {
        if let Some((_, short)) = CACHES.iter().find(|(cache, _)| *cache == name) {
            out.push((format!("{short}_hits_total"), number(&row, "hit_count")));
            out.push((
                format!("{short}_requests_total"),
                number(&row, "request_count"),
            ));
            out.push((format!("{short}_entries"), number(&row, "entry_count")));
        }
    }
    Ok(out)
}

/// A virtual table's rows, each by its first column (its name) with
/// its numeric columns by name; `None` when the table is not there.
async fn rows(
    session: &Session,
    table: &str,
) -> Result<Option<Vec<(String, Vec<(String, f64)>)>>, DriverError> {
    let result = match session
        .query_unpaged(format!("SELECT * FROM system_views.{table}"), ())
        .await
    {
        Ok(result) => result,
        // No such virtual table (or no system_views) on this server.
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Invalid,
            _,
        ))) => return Ok(None),
        Err(e) => return Err(execution_error(e)),
    };
    let rows = result
        .into_rows_result()
        .map_err(|e| DriverError::fatal(format!("unreadable system_views.{table}: {e}")))?;
    let names: Vec<String> = rows
        .column_specs()
        .iter()
        .map(|spec| spec.name().to_string())
        .collect();
    let mut out = Vec::new();
    for row in rows
        .rows::<Row>()
        .map_err(|e| DriverError::fatal(format!("unreadable system_views.{table}: {e}")))?
    {
        let Ok(row) = row else { continue };
        let mut name = String::new();
        let mut numbers = Vec::new();
        for (i, value) in row.columns.into_iter().enumerate() {
            match value {
                Some(CqlValue::Text(text) | CqlValue::Ascii(text)) if i == 0 => name = text,
                Some(value) => {
                    if let Some(n) = as_number(&value) {
                        numbers.push((names[i].clone(), n));
                    }
                }
                None => {}
            }
        }
        out.push((name, numbers));
    }
    Ok(Some(out))
}

fn as_number(value: &CqlValue) -> Option<f64> {
    Some(match *value {
        CqlValue::Int(n) => f64::from(n),
        CqlValue::BigInt(n) => n as f64,
        CqlValue::SmallInt(n) => f64::from(n),
        CqlValue::Double(n) => n,
        CqlValue::Float(n) => f64::from(n),
        _ => return None,
    })
}

fn number(row: &[(String, f64)], column: &str) -> f64 {
    row.iter()
        .find(|(name, _)| name == column)
        .map_or(0.0, |(_, n)| *n)
}
