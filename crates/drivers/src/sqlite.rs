//! SQLite, embedded: `sqlite:PATH`. Needs nothing installed, which makes
//! it loadcell's default target. Calls block the worker thread; SQLite has
//! no network to wait on, so that costs nothing but concurrency within one
//! worker.

use std::path::PathBuf;
use std::time::Duration;

use loadcell_core::sql::{not_an_integer, Dialect, SqlConn, SqlParam};
use loadcell_core::{Driver, DriverError, ServerInfo, Target};
use rusqlite::types::ValueRef;
use rusqlite::{ErrorCode, OpenFlags};

use crate::transport::target_url::Query;
use crate::{catalog, DriverInfo, Family};
use loadcell_core::kv::KvCapabilities;

pub const INFO: DriverInfo = DriverInfo {
    name: "sqlite",
    schemes: &["sqlite"],
    family: Family::SQL,
    url_form: "sqlite:PATH[?journal_mode=wal|delete&synchronous=off|normal|full]",
    about: "SQLite, embedded (the default target: nothing to install)",
    kv: KvCapabilities::NONE,
    blocking: true,
};

/// How long a session waits on another's write lock before the statement
/// fails as retryable.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Enough for every statement of 64 tables.
const STATEMENT_CACHE: usize = 1024;

#[derive(Debug, Clone)]
pub struct SqliteDriver {
    path: PathBuf,
    journal_mode: String,
    synchronous: String,
}

impl SqliteDriver {
    pub fn from_target(target: &Target) -> Result<SqliteDriver, String> {
        let url = target.url();
        let mut query = Query::parse(url, &["journal_mode", "synchronous"])?;
        let path = match (url.host_str(), url.path()) {
            (Some(host), path) if !host.is_empty() => format!("{host}{path}"),
            (_, path) => path.to_string(),
        };
        // The URL keeps %-escapes (its own, for a space, and the user's,
        // for a '#', '?' or '%' in a file name).
        let path = crate::transport::url_text::percent_decode(&path, "path")?;
        if path.is_empty() {
            return Err("give a file path, as in sqlite:results/bench.db".into());
        }
        let journal_mode =
            query.take_choice("journal_mode", &["wal", "delete", "truncate", "memory"])?;
        let synchronous = query.take_choice("synchronous", &["off", "normal", "full"])?;
        Ok(SqliteDriver {
            path: PathBuf::from(path),
            journal_mode: journal_mode.unwrap_or("wal").into(),
            synchronous: synchronous.unwrap_or("normal").into(),
        })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

pub struct SqliteConn {
    conn: rusqlite::Connection,
}

fn classify(e: rusqlite::Error) -> DriverError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _) => {
            let code = f.extended_code.to_string();
            match f.code {
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                    DriverError::retryable(e.to_string()).with_code(code)
                }
                _ => DriverError::fatal(e.to_string()).with_code(code),
            }
        }
        _ => DriverError::fatal(e.to_string()),
    }
}

impl Driver for SqliteDriver {
    type Conn = SqliteConn;

    fn endpoint(&self) -> String {
        self.path.display().to_string()
    }

    async fn connect(&self) -> Result<SqliteConn, DriverError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = rusqlite::Connection::open_with_flags(&self.path, flags).map_err(|e| {
            DriverError::fatal(format!(
                "cannot open SQLite database {}: {e}",
                self.path.display()
            ))
        })?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(classify)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.pragma_update(None, "journal_mode", &self.journal_mode)
            .map_err(classify)?;
        conn.pragma_update(None, "synchronous", &self.synchronous)
            .map_err(classify)?;
        Ok(SqliteConn { conn })
    }

    async fn server_info(&self, _conn: &mut SqliteConn) -> Result<ServerInfo, DriverError> {
        Ok(ServerInfo::new("SQLite", rusqlite::version()))
    }
}

impl SqlConn for SqliteConn {
    /// Statements live in the connection's cache, keyed by their text.
    type Stmt = String;

    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn prepare(&mut self, sql: &str) -> Result<String, DriverError> {
        self.conn.prepare_cached(sql).map_err(classify)?;
        Ok(sql.to_string())
    }

    async fn exec(&mut self, sql: &String, params: &[SqlParam<'_>]) -> Result<u64, DriverError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(classify)?;
        for (i, p) in params.iter().enumerate() {
            match *p {
                SqlParam::Int(v) => stmt.raw_bind_parameter(i + 1, v),
                SqlParam::Text(v) => stmt.raw_bind_parameter(i + 1, v),
            }
            .map_err(classify)?;
        }
        if stmt.column_count() == 0 {
            return stmt.raw_execute().map(|n| n as u64).map_err(classify);
        }
        let mut rows = stmt.raw_query();
        let mut n = 0u64;
        while rows.next().map_err(classify)?.is_some() {
            n += 1;
        }
        Ok(n)
    }

    async fn simple(&mut self, sql: &str) -> Result<(), DriverError> {
        self.conn.execute_batch(sql).map_err(classify)
    }

    async fn query_i64(&mut self, sql: &str) -> Result<Option<i64>, DriverError> {
        let mut stmt = self.conn.prepare(sql).map_err(classify)?;
        let mut rows = stmt.query([]).map_err(classify)?;
        match rows.next().map_err(classify)? {
            None => Ok(None),
            Some(row) => match row.get_ref(0).map_err(classify)? {
                ValueRef::Null => Ok(None),
                ValueRef::Integer(v) => Ok(Some(v)),
                // SQLite's AVG and SUM of REALs; exact ones only.
                ValueRef::Real(v) if v.fract() == 0.0 && v.abs() < 2f64.powi(63) => {
                    Ok(Some(v as i64))
                }
                other => Err(DriverError::fatal(not_an_integer(
                    sql,
                    &format!("{other:?}"),
                ))),
            },
        }
    }

    async fn query_strings(&mut self, sql: &str) -> Result<Vec<String>, DriverError> {
        let mut stmt = self.conn.prepare(sql).map_err(classify)?;
        let rows = stmt
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(classify)?;
        rows.map(|r| r.map_err(classify)).collect()
    }

    async fn table_exists(&mut self, table: &str) -> Result<bool, DriverError> {
        let sql =
            format!("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{table}'");
        catalog::counts_any(self, &sql).await
    }

    async fn column_exists(&mut self, table: &str, column: &str) -> Result<bool, DriverError> {
        let sql =
            format!("SELECT COUNT(*) FROM pragma_table_info('{table}') WHERE name = '{column}'");
        catalog::counts_any(self, &sql).await
    }

    /// An index's name is unique in the whole file, whatever its table.
    async fn index_exists(&mut self, _table: &str, index: &str) -> Result<bool, DriverError> {
        let sql =
            format!("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = '{index}'");
        catalog::counts_any(self, &sql).await
    }

    /// SQLite has no table comments: an SQL comment between the name and
    /// the column list stands in (see [`name_comment`]).
    async fn create_commented_table(
        &mut self,
        table: &str,
        definition: &str,
        comment: &str,
    ) -> Result<(), DriverError> {
        self.simple(&format!(
            "CREATE TABLE {table} /* {comment} */ {definition}"
        ))
        .await
    }

    async fn table_comment(&mut self, table: &str) -> Result<Option<String>, DriverError> {
        let sql = format!(
            "SELECT COALESCE(sql, '') FROM sqlite_master WHERE type = 'table' AND name = '{table}'"
        );
        let found = self.query_strings(&sql).await?.into_iter().next();
        Ok(found.map(|create| name_comment(&create).to_string()))
    }

    /// BEGIN IMMEDIATE takes the write lock: nothing can replace the table
    /// between the check and the drop.
    async fn drop_table_if_commented(
        &mut self,
        table: &str,
        comment: &str,
    ) -> Result<bool, DriverError> {
        catalog::drop_in_transaction(self, "BEGIN IMMEDIATE", None, table, comment).await
    }
}

/// The comment between a table's name and its column list in its CREATE
/// TABLE text, which `sqlite_master.sql` keeps verbatim (one after the
/// closing parenthesis is dropped), and ALTER TABLE leaves in place;
/// empty if there is none.
fn name_comment(create: &str) -> &str {
    let head = create.split('(').next().unwrap_or_default();
    head.split_once("/*")
        .and_then(|(_, rest)| rest.split_once("*/"))
        .map_or("", |(comment, _)| comment.trim())
}

#[cfg(test)]
#[path = "../tests/sql_catalog/mod.rs"]
mod sql_catalog;

#[cfg(test)]
mod tests {
    use super::*;
    use loadcell_core::ErrorClass;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn urls_parse_and_bad_parameters_are_named() {
        let t = Target::parse("sqlite:results/x.db?synchronous=off").unwrap();
        let d = SqliteDriver::from_target(&t).unwrap();
        assert_eq!(d.path(), std::path::Path::new("results/x.db"));
        assert_eq!(d.synchronous, "off");
        let t = Target::parse("sqlite:x.db?cache=huge").unwrap();
        let err = SqliteDriver::from_target(&t).unwrap_err();
        assert_eq!(
            err,
            "unknown parameter 'cache'; accepted: journal_mode, synchronous"
        );
        let t = Target::parse("sqlite:x.db?journal_mode=off").unwrap();
        let err = SqliteDriver::from_target(&t).unwrap_err();
        assert_eq!(
            err,
            "journal_mode takes one of wal, delete, truncate, memory, got 'off'"
        );
        // %-escapes are file name characters; a space need not be escaped.
        for (raw, path) in [
            ("sqlite:my runs/a%23b%3Fc%25.db", "my runs/a#b?c%.db"),
            ("sqlite:/tmp/x%20y.db", "/tmp/x y.db"),
        ] {
            let d = SqliteDriver::from_target(&Target::parse(raw).unwrap()).unwrap();
            assert_eq!(d.path(), std::path::Path::new(path), "{raw}");
        }
    }

    #[test]
    fn statements_run_and_errors_are_classified() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let t = Target::parse(&format!("sqlite:{}", path.display())).unwrap();
        let d = SqliteDriver::from_target(&t).unwrap();
        block_on(async {
            let mut c = d.connect().await.unwrap();
            assert_eq!(d.server_info(&mut c).await.unwrap().product, "SQLite");
            c.simple("CREATE TABLE t(id INTEGER PRIMARY KEY, c CHAR(10))")
                .await
                .unwrap();
            let ins = c
                .prepare("INSERT INTO t(id, c) VALUES (?, ?)")
                .await
                .unwrap();
            for i in 1..=5 {
                let n = c
                    .exec(&ins, &[SqlParam::Int(i), SqlParam::Text("abc")])
                    .await
                    .unwrap();
                assert_eq!(n, 1);
            }
            let sel = c
                .prepare("SELECT c FROM t WHERE id BETWEEN ? AND ?")
                .await
                .unwrap();
            assert_eq!(
                c.exec(&sel, &[SqlParam::Int(2), SqlParam::Int(4)])
                    .await
                    .unwrap(),
                3
            );
            assert_eq!(c.query_i64("SELECT MAX(id) FROM t").await.unwrap(), Some(5));
            assert_eq!(c.query_i64("SELECT 3.0").await.unwrap(), Some(3));
            let err = c.query_i64("SELECT 1.5").await.unwrap_err();
            assert_eq!(
                err.to_string(),
                "expected an integer from `SELECT 1.5`, got Real(1.5)"
            );
            assert_eq!(
                c.query_i64("SELECT MAX(id) FROM t WHERE id > 9")
                    .await
                    .unwrap(),
                None
            );
            assert_eq!(
                c.query_strings("SELECT c FROM t WHERE id < 3")
                    .await
                    .unwrap(),
                vec!["abc", "abc"]
            );
            let err = c.prepare("SELECT * FROM missing").await.unwrap_err();
            assert_eq!(err.class, ErrorClass::Fatal);
            assert!(err.message.contains("no such table"), "{err}");

            // A second connection holding the write lock makes us busy.
            let mut other = d.connect().await.unwrap();
            other.conn.busy_timeout(Duration::ZERO).unwrap();
            c.simple("BEGIN IMMEDIATE").await.unwrap();
            let err = other.simple("BEGIN IMMEDIATE").await.unwrap_err();
            assert_eq!(err.class, ErrorClass::Retryable, "{err}");
            c.simple("COMMIT").await.unwrap();
        });
    }

    #[test]
    fn catalog_questions() {
        let dir = tempfile::tempdir().unwrap();
        let t = Target::parse(&format!("sqlite:{}", dir.path().join("c.db").display())).unwrap();
        let d = SqliteDriver::from_target(&t).unwrap();
        block_on(async {
            let mut c = d.connect().await.unwrap();
            super::sql_catalog::catalog_questions_are_answered(&mut c, "").await;
        });
    }

    #[test]
    fn the_comment_is_the_one_between_name_and_columns() {
        assert_eq!(
            name_comment("CREATE TABLE t /* loadcell:x */ (id INTEGER)"),
            "loadcell:x"
        );
        assert_eq!(
            name_comment("CREATE TABLE t(id INTEGER /* not this */)"),
            ""
        );
        assert_eq!(name_comment("CREATE TABLE t (id INTEGER)"), "");
    }

    #[test]
    fn unopenable_path_is_fatal_and_named() {
        let t = Target::parse("sqlite:/nonexistent-dir/x/y.db").unwrap();
        let d = SqliteDriver::from_target(&t).unwrap();
        let err = block_on(d.connect()).err().unwrap();
        assert_eq!(err.class, ErrorClass::Fatal);
        assert!(err.message.contains("/nonexistent-dir/x/y.db"), "{err}");
    }
}
