//! The SQL family: prepared statements with positional parameters.

use crate::DriverError;

/// SQL dialect, for the few places where statement text differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    MySql,
    Postgres,
}

impl Dialect {
    /// Placeholder for the 1-based parameter `n`.
    pub fn placeholder(self, n: usize) -> String {
        match self {
            Dialect::Postgres => format!("${n}"),
            Dialect::MySql | Dialect::Sqlite => "?".to_string(),
        }
    }
}

/// A statement parameter, borrowed so that binding does not allocate on
/// the caller's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlParam<'a> {
    Int(i64),
    Text(&'a str),
}

/// A session that runs SQL. Rows returned by queries are read in full and
/// discarded, as a benchmark client should.
pub trait SqlConn {
    /// A prepared statement handle, valid for this connection.
    type Stmt: 'static;

    fn dialect(&self) -> Dialect;

    async fn prepare(&mut self, sql: &str) -> Result<Self::Stmt, DriverError>;

    /// Executes a prepared statement; returns rows read or affected.
    async fn exec(
        &mut self,
        stmt: &Self::Stmt,
        params: &[SqlParam<'_>],
    ) -> Result<u64, DriverError>;

    /// Runs one statement without parameters (DDL, BEGIN, COMMIT).
    async fn simple(&mut self, sql: &str) -> Result<(), DriverError>;

    /// Runs a query whose first row's first column is an integer
    /// (COUNT, MAX); `None` for no row or NULL.
    async fn query_i64(&mut self, sql: &str) -> Result<Option<i64>, DriverError>;

    /// Runs a query and returns the first column of every row as text.
    async fn query_strings(&mut self, sql: &str) -> Result<Vec<String>, DriverError>;
}

/// What every SQL driver says when a statement is run with the wrong
/// number of parameters (a fatal error, found before anything is sent).
#[cold]
pub fn wrong_param_count(expected: usize, given: usize) -> String {
    format!(
        "the statement takes {expected} parameter{}, {given} given",
        if expected == 1 { "" } else { "s" }
    )
}
