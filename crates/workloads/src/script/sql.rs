//! A workload file's SQL ops: each statement prepared once per connection
//! and executed with its parameters bound, a transaction's between a
//! prepared BEGIN and COMMIT; `prepare` creates the file's tables with
//! loadcell's marker and loads them, `cleanup` drops those it created.

use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::family::SqlFamily;
use loadcell_core::sql::{SqlConn, SqlParam};
use loadcell_core::{Driver, DriverError, DriverInfo, ErrorClass};
use loadcell_engine::{Ctx, OpSpec, Script, SessionInfo};

use super::file::{LoadBody, OpBody, ScriptFile, Statement, MAX_BINDS};
use super::{creates_tables, think, Ops, ScriptWorkload, Values};
use crate::prepare::marker::{self, Owner};
use crate::prepare::{CheckError, NotPrepared, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading};

/// The `workload` column of the marker rows of a file's tables.
const MARKER_WORKLOAD: &str = "script";

/// Rows a load inserts per transaction.
const LOAD_TRANSACTION: u64 = 1000;

pub struct SqlScript {
    ops: Ops,
}

/// A session's statements, prepared on its connection, by op.
pub struct SqlSession<S> {
    values: Values,
    statements: Vec<Vec<S>>,
    /// Prepared when some op is a transaction.
    begin_commit: Option<(S, S)>,
}

/// Prepares `statement` in the connection's dialect.
async fn prepare_statement<C: SqlConn>(
    conn: &mut C,
    statement: &Statement,
) -> Result<C::Stmt, DriverError> {
    let dialect = conn.dialect();
    conn.prepare(&statement.text(|n| dialect.placeholder(n)))
        .await
}

/// Executes `stmt` with `statement`'s parameters bound from `values`:
/// numbers as integers, text as text, from a fixed array.
#[inline]
async fn execute<C: SqlConn>(
    conn: &mut C,
    stmt: &C::Stmt,
    statement: &Statement,
    values: &Values,
) -> Result<u64, DriverError> {
    let mut binds = [SqlParam::Int(0); MAX_BINDS];
    for (slot, &p) in binds.iter_mut().zip(&statement.binds) {
        *slot = match values.numbers[p] {
            Some(n) => SqlParam::Int(n),
            None => SqlParam::Text(
                std::str::from_utf8(&values.texts[p]).expect("parameters are drawn as UTF-8"),
            ),
        };
    }
    conn.exec(stmt, &binds[..statement.binds.len()]).await
}

impl<C: SqlConn> Script<C> for SqlScript {
    type Session = SqlSession<C::Stmt>;

    fn ops(&self) -> &[OpSpec] {
        &self.ops.specs
    }

    fn transactional(&self) -> bool {
        self.ops.file.ops.iter().any(|o| {
            matches!(
                o.body,
                OpBody::Sql {
                    transaction: true,
                    ..
                }
            )
        })
    }

    async fn open(&self, conn: &mut C, session: SessionInfo) -> Result<Self::Session, DriverError> {
        let mut statements = Vec::with_capacity(self.ops.file.ops.len());
        for op in &self.ops.file.ops {
            let OpBody::Sql { statements: ss, .. } = &op.body else {
                unreachable!("a SQL file's ops are SQL")
            };
            let mut prepared = Vec::with_capacity(ss.len());
            for s in ss {
                prepared.push(prepare_statement(conn, s).await?);
            }
            statements.push(prepared);
        }
        let begin_commit = if Script::<C>::transactional(self) {
            Some((conn.prepare("BEGIN").await?, conn.prepare("COMMIT").await?))
        } else {
            None
        };
        Ok(SqlSession {
            values: Values::new(&self.ops.file, &session),
            statements,
            begin_commit,
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut Self::Session,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let i = self.ops.pick(&mut s.values.rng);
        let op = &self.ops.file.ops[i];
        let OpBody::Sql {
            statements,
            transaction,
        } = &op.body
        else {
            unreachable!("a SQL file's ops are SQL")
        };
        s.values.draw_numbers(&op.params);
        let (values, prepared) = (&s.values, &s.statements[i]);
        let begin_commit = s.begin_commit.as_ref().filter(|_| *transaction);
        ctx.op(i, async {
            if let Some((begin, _)) = begin_commit {
                conn.exec(begin, &[]).await?;
            }
            for (statement, stmt) in statements.iter().zip(prepared) {
                execute(conn, stmt, statement, values).await?;
            }
            if let Some((_, commit)) = begin_commit {
                conn.exec(commit, &[]).await?;
            }
            Ok(())
        })
        .await?;
        think(op.think).await;
        Ok(())
    }

    async fn recover(&self, conn: &mut C, _s: &mut Self::Session) -> Result<(), DriverError> {
        match conn.simple("ROLLBACK").await {
            // "No transaction is active" and the like are fine here.
            Err(e) if e.class != ErrorClass::Connection => Ok(()),
            other => other,
        }
    }
}

impl<C: SqlConn> Lifecycle<C, SqlFamily> for ScriptWorkload {
    type Script = SqlScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> SqlScript {
        SqlScript {
            ops: Ops::new(&self.file),
        }
    }

    /// The tables the file's `[prepare]` creates are there.
    async fn check(&self, _script: &SqlScript, conn: &mut C) -> Result<(), CheckError> {
        for table in &self.file.prepare.tables {
            if !conn.table_exists(&table.name).await? {
                return Err(CheckError::NotPrepared(NotPrepared::missing(&format!(
                    "table {}",
                    table.name
                ))));
            }
        }
        Ok(())
    }

    async fn prepare<D>(
        &self,
        driver: Arc<D>,
        _info: &DriverInfo,
        loading: Loading,
        observer: Rc<dyn PrepareObserver>,
    ) -> Result<(), DriverError>
    where
        D: Driver<Conn = C>,
    {
        let (mut conn, _) =
            loadcell_engine::connect_once(&*driver, loading.connect_timeout).await?;
        prepare(&mut conn, &self.file, &*observer).await
    }

    /// Drops the file's tables that loadcell's `prepare` created, and no
    /// other.
    async fn cleanup<D>(
        &self,
        driver: &D,
        how: &Cleanup,
        observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        let tables = &self.file.prepare.tables;
        let (mut conn, _) = loadcell_engine::connect_once(driver, how.connect_timeout).await?;
        if tables.is_empty() || !conn.table_exists(marker::MARKER_TABLE).await? {
            observer
                .message("Nothing to clean up: loadcell created none of this file's tables here");
            return Ok(());
        }
        marker::ensure(&mut conn).await?;
        for table in tables {
            marker::drop_own(&mut conn, &table.name, observer).await?;
        }
        marker::drop_marker_if_empty(&mut conn).await?;
        Ok(())
    }
}

/// Creates the file's tables, each recorded and tagged before it is
/// created, then runs its loads; refuses, before creating anything, a
/// table of the same name that loadcell did not create. A file whose
/// tables are all loadcell's already is left as it is.
async fn prepare<C: SqlConn>(
    conn: &mut C,
    file: &ScriptFile,
    observer: &dyn PrepareObserver,
) -> Result<(), DriverError> {
    let tables = &file.prepare.tables;
    if tables.is_empty() {
        observer.message("Nothing to prepare: the file's [prepare] creates no tables");
        return Ok(());
    }
    marker::ensure(conn).await?;
    let mut ours = 0;
    for table in tables {
        match marker::owner(conn, &table.name).await? {
            Owner::Nobody => {}
            Owner::Loadcell(_) => ours += 1,
            Owner::Other => {
                return Err(DriverError::fatal(format!(
                    "table '{}' already exists and was not created by loadcell: nothing prepared",
                    table.name
                )))
            }
            Owner::Earlier => {
                return Err(DriverError::fatal(marker::earlier_prepare_message(
                    &table.name,
                )))
            }
        }
    }
    if !creates_tables(ours, tables.len(), observer)? {
        return Ok(());
    }
    for table in tables {
        observer.message(&format!("Creating table '{}'...", table.name));
        let tag = marker::Tag::new();
        marker::record(conn, &table.name, MARKER_WORKLOAD, &tag).await?;
        marker::create(conn, &table.name, &table.columns, &tag).await?;
    }
    let mut values = Values::for_session(file, 0, 0, 1);
    for load in &file.prepare.loads {
        let LoadBody::Sql(statement) = &load.body else {
            unreachable!("a SQL file's loads are SQL")
        };
        observer.add_total(load.rows);
        let stmt = prepare_statement(conn, statement).await?;
        let mut row = 0;
        while row < load.rows {
            let batch = LOAD_TRANSACTION.min(load.rows - row);
            conn.simple("BEGIN").await?;
            for _ in 0..batch {
                values.draw_numbers(&load.params);
                execute(conn, &stmt, statement, &values).await?;
            }
            conn.simple("COMMIT").await?;
            observer.loaded(batch);
            row += batch;
        }
    }
    Ok(())
}
