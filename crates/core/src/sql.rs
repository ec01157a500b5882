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

    // The catalog, asked in the driver's own dialect so that workloads
    // need not know where each server keeps it. Names and comments are
    // loadcell's own (identifiers, alphanumeric text with `:`) and go into
    // the SQL as they are. Tables are looked for in the connection's
    // current database (MySQL), schema (PostgreSQL) or file (SQLite).

    /// Whether table `table` exists.
    async fn table_exists(&mut self, table: &str) -> Result<bool, DriverError>;

    /// Whether table `table` has a column `column`.
    async fn column_exists(&mut self, table: &str, column: &str) -> Result<bool, DriverError>;

    /// Whether table `table` has an index `index`.
    async fn index_exists(&mut self, table: &str, index: &str) -> Result<bool, DriverError>;

    /// Creates table `table` carrying `comment`: `definition` is what
    /// follows the name (the column list, then any table options). The
    /// comment survives ALTER TABLE, so [`SqlConn::table_comment`] finds it
    /// for as long as the table lives, and never on a table created again
    /// under the same name.
    async fn create_commented_table(
        &mut self,
        table: &str,
        definition: &str,
        comment: &str,
    ) -> Result<(), DriverError>;

    /// The comment on table `table`: `None` if there is no such table, an
    /// empty string if it has none.
    async fn table_comment(&mut self, table: &str) -> Result<Option<String>, DriverError>;

    /// Drops table `table` if its comment contains `comment`, checked right
    /// before the drop, so that a table created again under the same name
    /// is left alone; whether it was dropped. The table must exist: a
    /// server that locks it for the check fails on a missing one.
    async fn drop_table_if_commented(
        &mut self,
        table: &str,
        comment: &str,
    ) -> Result<bool, DriverError>;
}

/// An integer from the text a server sends for a number: an integer type,
/// or a DECIMAL/numeric whose fraction is all zeros (`SUM` and `AVG` of
/// integers come as DECIMAL, e.g. `5050.000`). Exact over the whole `i64`
/// range; anything else (a fraction, an exponent, text) is `None`.
pub fn integer_from_text(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(v) = text.parse() {
        return Some(v);
    }
    let (int, frac) = text.split_once('.')?;
    if frac.bytes().all(|b| b == b'0') {
        int.parse().ok()
    } else {
        None
    }
}

/// What every SQL driver says when `query_i64` gets something else.
#[cold]
pub fn not_an_integer(sql: &str, got: &str) -> String {
    format!("expected an integer from `{sql}`, got {got}")
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

#[cfg(test)]
mod tests {
    use super::integer_from_text;

    #[test]
    fn integers_come_exactly_from_integer_and_decimal_text() {
        assert_eq!(integer_from_text("42"), Some(42));
        assert_eq!(integer_from_text(" -3 "), Some(-3));
        assert_eq!(integer_from_text("-9223372036854775808"), Some(i64::MIN));
        // Above 2^53, where a trip through f64 would round.
        assert_eq!(
            integer_from_text("9007199254740993.000"),
            Some(9_007_199_254_740_993)
        );
        assert_eq!(integer_from_text("1500.000"), Some(1500));
        assert_eq!(integer_from_text("1500."), Some(1500));
        assert_eq!(integer_from_text("1.5"), None);
        assert_eq!(integer_from_text("3e0"), None);
        assert_eq!(integer_from_text("t"), None);
        assert_eq!(integer_from_text(".0"), None);
        assert_eq!(integer_from_text("99999999999999999999"), None);
    }
}
