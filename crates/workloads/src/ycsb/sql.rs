//! YCSB over SQL: YCSB's JDBC `usertable`, its statements in each dialect,
//! the script, and prepare and cleanup.

use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::sql::{Dialect, SqlConn, SqlParam};
use loadcell_core::{Driver, DriverError, ErrorClass};
use loadcell_engine::{Ctx, OpSpec, Script, SessionInfo};

use crate::prepare::load::load_in_parallel;
use crate::prepare::marker::{self, Owner};
use crate::prepare::NotPrepared;
use crate::prepare::{CheckError, PrepareObserver};
use crate::workload::Loading;

use super::*;

/// Statement text with the dialect's placeholders.
pub(super) struct SqlText {
    dialect: Dialect,
    sql: String,
    params: usize,
}

impl SqlText {
    fn new(dialect: Dialect) -> SqlText {
        SqlText {
            dialect,
            sql: String::with_capacity(128),
            params: 0,
        }
    }

    fn push(mut self, s: &str) -> SqlText {
        self.sql.push_str(s);
        self
    }

    fn param(mut self) -> SqlText {
        self.params += 1;
        let p = self.dialect.placeholder(self.params);
        self.sql.push_str(&p);
        self
    }
}

pub(super) fn read_sql(d: Dialect) -> String {
    SqlText::new(d)
        .push(&format!("SELECT * FROM {TABLE} WHERE YCSB_KEY = "))
        .param()
        .sql
}

pub(super) fn scan_sql(d: Dialect) -> String {
    SqlText::new(d)
        .push(&format!("SELECT * FROM {TABLE} WHERE YCSB_KEY >= "))
        .param()
        .push(" ORDER BY YCSB_KEY LIMIT ")
        .param()
        .sql
}

pub(super) fn insert_sql(d: Dialect, fields: u32) -> String {
    let mut t = SqlText::new(d).push(&format!("INSERT INTO {TABLE} (YCSB_KEY"));
    for i in 0..fields {
        t = t.push(&format!(", FIELD{i}"));
    }
    t = t.push(") VALUES (").param();
    for _ in 0..fields {
        t = t.push(", ").param();
    }
    t.push(")").sql
}

/// `UPDATE usertable SET FIELDi = ?, … WHERE YCSB_KEY = ?`.
pub(super) fn update_sql(d: Dialect, fields: impl Iterator<Item = u32>) -> String {
    let mut t = SqlText::new(d).push(&format!("UPDATE {TABLE} SET "));
    for (n, i) in fields.enumerate() {
        if n > 0 {
            t = t.push(", ");
        }
        t = t.push(&format!("FIELD{i} = ")).param();
    }
    t.push(" WHERE YCSB_KEY = ").param().sql
}

/// What follows `CREATE TABLE usertable`: YCSB's JDBC binding's columns.
pub(super) fn table_definition(dialect: Dialect, fields: u32) -> String {
    let mut sql = "(YCSB_KEY VARCHAR(255) PRIMARY KEY".to_string();
    for i in 0..fields {
        let _ = write!(sql, ", FIELD{i} TEXT");
    }
    sql.push(')');
    if dialect == Dialect::MySql {
        sql.push_str(" /*! ENGINE = innodb */");
    }
    sql
}

/// Parameters that fit on the stack (a key and 32 fields).
pub(super) const STACK_PARAMS: usize = 33;

/// YCSB on a SQL database: `usertable` with prepared statements.
pub struct YcsbSql {
    core: Ycsb,
}

/// A session's prepared statements (`None` where the mix never uses them).
pub struct YcsbSqlSession<S> {
    d: Draw,
    read: Option<S>,
    scan: Option<S>,
    insert: Option<S>,
    /// One per field, or one writing every field; prepared on first use
    /// when there are many fields.
    update: Vec<Option<S>>,
}

/// Up to this many per-field UPDATE statements are prepared when a session
/// opens; beyond it, each on first use.
pub(super) const EAGER_UPDATES: u32 = 32;

impl YcsbSql {
    pub fn new(opts: YcsbOptions) -> YcsbSql {
        YcsbSql {
            core: Ycsb::new(opts),
        }
    }

    pub fn core(&self) -> &Ycsb {
        &self.core
    }

    /// Before a run: `usertable` must exist with enough fields and hold
    /// most of a sample of the records, and inserts continue after the
    /// records already there.
    pub async fn check<C: SqlConn>(&self, conn: &mut C) -> Result<(), CheckError> {
        if !conn.table_exists(TABLE).await? {
            return Err(CheckError::NotPrepared(NotPrepared::missing(&format!(
                "table {TABLE}"
            ))));
        }
        check_fields(conn, self.core.opts.field_count).await?;
        let sampled = self.core.sampled_records();
        let mut keys = String::new();
        let mut key = String::new();
        for (i, &n) in sampled.iter().enumerate() {
            push_key(&mut key, n);
            // Keys are `user` and digits: nothing to escape.
            let _ = write!(keys, "{}'{key}'", if i > 0 { ", " } else { "" });
        }
        let present = conn
            .query_i64(&format!(
                "SELECT COUNT(*) FROM {TABLE} WHERE YCSB_KEY IN ({keys})"
            ))
            .await?
            .unwrap_or(0)
            .max(0) as usize;
        if let Err(CheckError::NotPrepared(missing)) =
            self.core
                .judge_sample(&format!("table {TABLE}"), present, sampled.len())
        {
            // Only loadcell's own table is ever loaded by `prepare`: for
            // another tool's, saying "run prepare" would send the user in
            // a circle. (No marker table: loadcell created nothing here.)
            let ours = conn.table_exists(marker::MARKER_TABLE).await?
                && matches!(marker::owner(conn, TABLE).await?, Owner::Loadcell(_));
            if !ours {
                return Err(CheckError::Driver(DriverError::fatal(format!(
                    "{}, and loadcell did not create it, so `loadcell prepare` will not load \
                     it: load it with the tool that created it, or drop it so that prepare \
                     can create its own",
                    missing.0
                ))));
            }
            return Err(CheckError::NotPrepared(missing));
        }
        if self.core.opts.proportions.insert > 0 {
            let rows = conn
                .query_i64(&format!("SELECT COUNT(*) FROM {TABLE}"))
                .await?
                .unwrap_or(0)
                .max(0) as u64;
            self.core.start_inserts_at(rows);
        }
        Ok(())
    }

    /// The UPDATE statement for `field` (or for every field), prepared if
    /// it is not yet.
    async fn update_stmt<'s, C: SqlConn>(
        &self,
        conn: &mut C,
        stmts: &'s mut [Option<C::Stmt>],
        field: usize,
    ) -> Result<&'s C::Stmt, DriverError> {
        let o = &self.core.opts;
        let (slot, fields) = if o.write_all_fields {
            (0, 0..o.field_count)
        } else {
            (field, field as u32..field as u32 + 1)
        };
        if stmts[slot].is_none() {
            let sql = update_sql(conn.dialect(), fields);
            stmts[slot] = Some(conn.prepare(&sql).await?);
        }
        Ok(stmts[slot].as_ref().expect("just prepared"))
    }

    async fn update<C: SqlConn>(
        &self,
        conn: &mut C,
        stmt: &C::Stmt,
        d: &mut Draw,
    ) -> Result<u64, DriverError> {
        let len = self.core.opts.field_length;
        let Draw { rng, pool, key, .. } = d;
        let pool: &str = pool;
        if self.core.opts.write_all_fields {
            let n = self.core.opts.field_count as usize + 1;
            let mut stack = [SqlParam::Int(0); STACK_PARAMS];
            let mut heap = Vec::new();
            let params = scratch(&mut stack, &mut heap, n);
            for p in &mut params[..n - 1] {
                *p = SqlParam::Text(pick(pool, rng, len));
            }
            params[n - 1] = SqlParam::Text(key);
            conn.exec(stmt, params).await
        } else {
            let value = pick(pool, rng, len);
            conn.exec(stmt, &[SqlParam::Text(value), SqlParam::Text(key)])
                .await
        }
    }

    async fn insert<C: SqlConn>(
        &self,
        conn: &mut C,
        stmt: &C::Stmt,
        d: &mut Draw,
    ) -> Result<u64, DriverError> {
        let len = self.core.opts.field_length;
        let Draw { rng, pool, key, .. } = d;
        let pool: &str = pool;
        let n = self.core.opts.field_count as usize + 1;
        let mut stack = [SqlParam::Int(0); STACK_PARAMS];
        let mut heap = Vec::new();
        let params = scratch(&mut stack, &mut heap, n);
        params[0] = SqlParam::Text(key);
        for p in &mut params[1..] {
            *p = SqlParam::Text(pick(pool, rng, len));
        }
        conn.exec(stmt, params).await
    }
}

/// Fails unless `usertable` has a column for every field.
pub(super) async fn check_fields<C: SqlConn>(conn: &mut C, fields: u32) -> Result<(), DriverError> {
    let last = fields - 1;
    match conn
        .query_i64(&format!(
            "SELECT COUNT(*) FROM {TABLE} WHERE 1 = 0 AND FIELD{last} IS NULL"
        ))
        .await
    {
        Err(e) if e.class == ErrorClass::Fatal => Err(DriverError::fatal(format!(
            "table {TABLE} has no column FIELD{last}: it was prepared with fewer fields than \
             --field-count {fields}; give the --field-count it was prepared with, or run \
             `loadcell cleanup` and prepare it again ({e})"
        ))),
        other => other.map(|_| ()),
    }
}

impl<C: SqlConn> Script<C> for YcsbSql {
    type Session = YcsbSqlSession<C::Stmt>;

    fn ops(&self) -> &[OpSpec] {
        &OPS
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, conn: &mut C, info: SessionInfo) -> Result<Self::Session, DriverError> {
        let dialect = conn.dialect();
        let o = &self.core.opts;
        let w = &self.core.weights;
        let read = match w[READ] + w[RMW] {
            0 => None,
            _ => Some(conn.prepare(&read_sql(dialect)).await?),
        };
        let scan = match w[SCAN] {
            0 => None,
            _ => Some(conn.prepare(&scan_sql(dialect)).await?),
        };
        let insert = match w[INSERT] {
            0 => None,
            _ => Some(conn.prepare(&insert_sql(dialect, o.field_count)).await?),
        };
        let mut update = Vec::new();
        if w[UPDATE] + w[RMW] > 0 {
            let slots = if o.write_all_fields { 1 } else { o.field_count };
            update.extend((0..slots).map(|_| None));
            if slots <= EAGER_UPDATES {
                for field in 0..slots as usize {
                    self.update_stmt(conn, &mut update, field).await?;
                }
            }
        }
        Ok(YcsbSqlSession {
            d: Draw::new(&self.core, info.seed),
            read,
            scan,
            insert,
            update,
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut Self::Session,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let c = self.core.choose(&mut s.d);
        push_key(&mut s.d.key, c.key);
        const PREPARED: &str = "prepared in open()";
        match c.op {
            READ => {
                let stmt = s.read.as_ref().expect(PREPARED);
                let rows = ctx
                    .op(READ, conn.exec(stmt, &[SqlParam::Text(&s.d.key)]))
                    .await?;
                count_read(ctx, READ, rows > 0);
            }
            UPDATE => {
                let stmt = self.update_stmt(conn, &mut s.update, c.field).await?;
                let rows = ctx.op(UPDATE, self.update(conn, stmt, &mut s.d)).await?;
                if rows == 0 {
                    not_found(ctx, UPDATE);
                }
            }
            INSERT => {
                let stmt = s.insert.as_ref().expect(PREPARED);
                ctx.op(INSERT, self.insert(conn, stmt, &mut s.d))
                    .await
                    .inspect_err(|_| self.core.finished(c))?;
            }
            SCAN => {
                let stmt = s.scan.as_ref().expect(PREPARED);
                let params = [SqlParam::Text(&s.d.key), SqlParam::Int(c.len as i64)];
                if ctx.op(SCAN, conn.exec(stmt, &params)).await? == 0 {
                    not_found(ctx, SCAN);
                }
            }
            _ => {
                let read = s.read.as_ref().expect(PREPARED);
                let update = self.update_stmt(conn, &mut s.update, c.field).await?;
                let d = &mut s.d;
                let (read_rows, updated_rows) = ctx
                    .op(RMW, async {
                        let read_rows = conn.exec(read, &[SqlParam::Text(&d.key)]).await?;
                        let updated_rows = self.update(conn, update, d).await?;
                        Ok((read_rows, updated_rows))
                    })
                    .await?;
                ctx.count_read(read_rows > 0);
                if read_rows == 0 || updated_rows == 0 {
                    not_found(ctx, RMW);
                }
            }
        }
        self.core.done(&mut s.d, c);
        Ok(())
    }
}

/// A bulk INSERT is sent before it would pass this size.
pub(super) const BULK_INSERT_BYTES: usize = 512 * 1024;

/// Creates and loads `usertable` with records `0..record_count`, spread
/// over the loading connections (one for SQLite). Idempotent: a table
/// loadcell created and fully loaded is left alone, a partly loaded one is
/// completed, and a table it did not create is never touched.
pub(super) async fn prepare_sql<D>(
    driver: Arc<D>,
    opts: &YcsbOptions,
    loading: Loading,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: SqlConn,
{
    let Loading {
        connections,
        connect_timeout,
    } = loading;
    let (mut first, _) = loadcell_engine::connect_once(&*driver, connect_timeout).await?;
    let dialect = first.dialect();
    marker::ensure(&mut first).await?;
    let owner = marker::owner(&mut first, TABLE).await?;
    let records = opts.record_count;
    match owner {
        Owner::Other => {
            observer.message(&format!(
                "Table '{TABLE}' already exists and was not created by loadcell: left as it is"
            ));
            return Ok(());
        }
        Owner::Earlier => {
            observer.message(&marker::earlier_prepare_message(TABLE));
            return Ok(());
        }
        Owner::Loadcell(_) | Owner::Nobody => {}
    }
    let complete = if matches!(owner, Owner::Loadcell(_)) {
        check_fields(&mut first, opts.field_count).await?;
        let have = first
            .query_i64(&format!("SELECT COUNT(*) FROM {TABLE}"))
            .await?
            .unwrap_or(0)
            .max(0) as u64;
        if have >= records {
            observer.message(&format!(
                "Table '{TABLE}' already exists with {}: nothing to do",
                loadcell_core::words::counted(have, "record")
            ));
            return Ok(());
        }
        observer.message(&format!(
            "Table '{TABLE}' exists with {have} of {}: loading the missing ones",
            loadcell_core::words::counted(records, "record")
        ));
        true
    } else {
        observer.message(&format!("Creating table '{TABLE}'..."));
        // Record first, so an interrupted prepare can still be cleaned up;
        // the table carries the same tag from its creation on.
        let tag = marker::Tag::new();
        marker::record(&mut first, TABLE, MARKER_WORKLOAD, &tag).await?;
        let definition = table_definition(dialect, opts.field_count);
        marker::create(&mut first, TABLE, &definition, &tag).await?;
        observer.message(&format!(
            "Inserting {} into '{TABLE}'",
            loadcell_core::words::counted(records, "record")
        ));
        false
    };
    observer.add_total(records);
    // SQLite has one writer at a time: more connections only wait.
    let connections = if dialect == Dialect::Sqlite {
        1
    } else {
        connections.clamp(1, 64).min(records as usize)
    };
    drop(first);
    let ycsb = Rc::new(Ycsb::new(opts.clone()));
    load_in_parallel(
        driver,
        records,
        connections,
        connect_timeout,
        observer,
        move |mut conn, i, _, keys, observer| {
            let ycsb = Rc::clone(&ycsb);
            async move {
                let mut d = Draw::new(&ycsb, load_seed(i));
                load_sql(&mut conn, &ycsb, &mut d, keys, complete, &*observer).await
            }
        },
    )
    .await
}

/// A loading connection's seed, apart from every other connection's.
pub(super) fn load_seed(connection: usize) -> u64 {
    (connection as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Inserts records `keys` with multi-row INSERTs; `skip_existing` makes the
/// INSERT ignore records already there.
pub(super) async fn load_sql<C: SqlConn>(
    conn: &mut C,
    y: &Ycsb,
    d: &mut Draw,
    keys: std::ops::Range<u64>,
    skip_existing: bool,
    observer: &dyn PrepareObserver,
) -> Result<(), DriverError> {
    let dialect = conn.dialect();
    let o = &y.opts;
    let verb = match (skip_existing, dialect) {
        (true, Dialect::MySql) => "INSERT IGNORE INTO",
        (true, Dialect::Sqlite) => "INSERT OR IGNORE INTO",
        _ => "INSERT INTO",
    };
    let suffix = match (skip_existing, dialect) {
        (true, Dialect::Postgres) => " ON CONFLICT DO NOTHING",
        _ => "",
    };
    let mut header = format!("{verb} {TABLE} (YCSB_KEY");
    for i in 0..o.field_count {
        let _ = write!(header, ", FIELD{i}");
    }
    header.push_str(") VALUES ");
    let row_bytes = 30 + o.field_count as usize * (o.field_length + 3);
    let mut sql = String::with_capacity(BULK_INSERT_BYTES.max(row_bytes) + header.len() + 64);
    let mut in_batch = 0u64;
    for k in keys {
        if in_batch > 0 && sql.len() + row_bytes > BULK_INSERT_BYTES {
            sql.push_str(suffix);
            conn.simple(&sql).await?;
            observer.loaded(in_batch);
            in_batch = 0;
        }
        if in_batch == 0 {
            sql.clear();
            sql.push_str(&header);
        } else {
            sql.push(',');
        }
        push_key(&mut d.key, k);
        // Keys and values are alphanumeric: nothing to escape.
        let _ = write!(sql, "('{}'", d.key);
        for _ in 0..o.field_count {
            sql.push_str(",'");
            sql.push_str(pick(&d.pool, &mut d.rng, o.field_length));
            sql.push('\'');
        }
        sql.push(')');
        in_batch += 1;
    }
    if in_batch > 0 {
        sql.push_str(suffix);
        conn.simple(&sql).await?;
        observer.loaded(in_batch);
    }
    Ok(())
}
