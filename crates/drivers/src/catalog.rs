//! What the SQL drivers share in answering [`SqlConn`]'s catalog questions.

use loadcell_core::sql::SqlConn;
use loadcell_core::DriverError;

/// Whether the `SELECT COUNT(*)` query `sql` counts anything.
pub(crate) async fn counts_any<C: SqlConn>(conn: &mut C, sql: &str) -> Result<bool, DriverError> {
    Ok(conn.query_i64(sql).await?.unwrap_or(0) > 0)
}

/// Whether table `table` exists and its comment contains `comment`.
pub(crate) async fn comment_contains<C: SqlConn>(
    conn: &mut C,
    table: &str,
    comment: &str,
) -> Result<bool, DriverError> {
    Ok(conn
        .table_comment(table)
        .await?
        .is_some_and(|found| found.contains(comment)))
}

/// [`SqlConn::drop_table_if_commented`] for a server with transactional
/// DDL: the check and the drop run in one transaction, opened by `begin`
/// and with the table taken by `lock` where `begin` does not lock it
/// already, so nothing can replace the table in between.
pub(crate) async fn drop_in_transaction<C: SqlConn>(
    conn: &mut C,
    begin: &str,
    lock: Option<&str>,
    table: &str,
    comment: &str,
) -> Result<bool, DriverError> {
    conn.simple(begin).await?;
    let checked = async {
        if let Some(lock) = lock {
            conn.simple(lock).await?;
        }
        if !comment_contains(conn, table, comment).await? {
            return Ok(false);
        }
        conn.simple(&format!("DROP TABLE {table}")).await?;
        Ok(true)
    }
    .await;
    match checked {
        Ok(true) => conn.simple("COMMIT").await.map(|()| true),
        Ok(false) => conn.simple("ROLLBACK").await.map(|()| false),
        Err(e) => {
            let _ = conn.simple("ROLLBACK").await;
            Err(e)
        }
    }
}
