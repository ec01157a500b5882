//! A workload file's CQL ops: each statement prepared once per session on
//! the wide-column driver's CQL connection, its `${name}`s bound as `?`
//! markers from a fixed array; `prepare` creates the file's tables in the
//! target's keyspace with loadcell's marker (and the keyspace, marked, if
//! missing) and loads them, `cleanup` drops those it created, and the
//! keyspace with its last one if `prepare` made it.

use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::family::WideColumnFamily;
use loadcell_core::wide::{CqlValue, WideConn};
use loadcell_core::{Driver, DriverError, DriverInfo};
use loadcell_engine::{Ctx, OpSpec, Script, SessionInfo};

use super::file::{LoadBody, OpBody, ScriptFile, Statement, MAX_BINDS};
use super::{creates_tables, think, Ops, ScriptWorkload, Values};
use crate::prepare::{CheckError, NotPrepared, PrepareObserver};
use crate::wide::{create_marked, drop_table, owner, Owner};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading};

pub struct CqlScript {
    ops: Ops,
}

pub struct CqlSession {
    values: Values,
    /// Each op's statement, prepared on the session's connection.
    statements: Vec<usize>,
}

/// Prepares `statement` with `?` markers for its `${name}`s.
async fn prepare_statement<C: WideConn>(
    conn: &mut C,
    statement: &Statement,
) -> Result<usize, DriverError> {
    conn.prepare_cql(&statement.text(|_| "?".to_string())).await
}

/// Executes `prepared` with `statement`'s parameters bound from `values`,
/// from a fixed array; returns the rows it answered.
#[inline]
async fn execute<C: WideConn>(
    conn: &mut C,
    prepared: usize,
    statement: &Statement,
    values: &Values,
) -> Result<u64, DriverError> {
    let mut binds = [CqlValue {
        text: &[],
        number: None,
    }; MAX_BINDS];
    for (slot, &p) in binds.iter_mut().zip(&statement.binds) {
        *slot = CqlValue {
            text: &values.texts[p],
            number: values.numbers[p],
        };
    }
    conn.execute_cql(prepared, &binds[..statement.binds.len()])
        .await
}

fn statement(body: &OpBody) -> &Statement {
    match body {
        OpBody::Cql(statement) => statement,
        _ => unreachable!("a CQL file's ops are CQL"),
    }
}

impl<C: WideConn> Script<C> for CqlScript {
    type Session = CqlSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops.specs
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, conn: &mut C, session: SessionInfo) -> Result<CqlSession, DriverError> {
        let mut statements = Vec::with_capacity(self.ops.file.ops.len());
        for op in &self.ops.file.ops {
            statements.push(prepare_statement(conn, statement(&op.body)).await?);
        }
        Ok(CqlSession {
            values: Values::new(&self.ops.file, &session),
            statements,
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut CqlSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let i = self.ops.pick(&mut s.values.rng);
        let op = &self.ops.file.ops[i];
        s.values.draw(&op.params);
        let rows = ctx
            .op(
                i,
                execute(conn, s.statements[i], statement(&op.body), &s.values),
            )
            .await?;
        ctx.items(i, rows);
        think(op.think).await;
        Ok(())
    }
}

impl<C: WideConn> Lifecycle<C, WideColumnFamily> for ScriptWorkload {
    type Script = CqlScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> CqlScript {
        CqlScript {
            ops: Ops::new(&self.file),
        }
    }

    /// The tables the file's `[prepare]` creates are there.
    async fn check(&self, _script: &CqlScript, conn: &mut C) -> Result<(), CheckError> {
        for table in &self.file.prepare.tables {
            if conn.table_marker(&table.name).await?.is_none() {
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
    /// other, each only empty or with `--force` (whose rows they hold it
    /// cannot tell); then the keyspace, if `prepare` made it and it is
    /// empty.
    async fn cleanup<D>(
        &self,
        driver: &D,
        how: &Cleanup,
        observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        if self.file.prepare.tables.is_empty() {
            observer.message("Nothing to clean up: the file's [prepare] creates no tables");
        }
        for table in &self.file.prepare.tables {
            let force = how.force;
            drop_table(
                &table.name,
                None,
                force,
                driver,
                how.connect_timeout,
                observer,
            )
            .await?;
        }
        Ok(())
    }
}

/// Creates the file's tables, each marked, then runs its loads; refuses,
/// before creating anything, a table of the same name that loadcell did
/// not create. A file whose tables are all loadcell's already is left as
/// it is.
async fn prepare<C: WideConn>(
    conn: &mut C,
    file: &ScriptFile,
    observer: &dyn PrepareObserver,
) -> Result<(), DriverError> {
    let tables = &file.prepare.tables;
    if tables.is_empty() {
        observer.message("Nothing to prepare: the file's [prepare] creates no tables");
        return Ok(());
    }
    let mut ours = 0;
    for table in tables {
        match owner(conn, &table.name).await? {
            Owner::Nobody => {}
            Owner::Loadcell => ours += 1,
            Owner::Other => {
                return Err(DriverError::fatal(format!(
                    "table {} already exists and was not created by loadcell: nothing prepared",
                    table.name
                )))
            }
        }
    }
    if !creates_tables(ours, tables.len(), observer)? {
        return Ok(());
    }
    for table in tables {
        create_marked(conn, &table.name, observer, async |conn, tag| {
            conn.create_cql_table(&table.name, &table.columns, tag)
                .await
        })
        .await?;
    }
    let mut values = Values::for_session(file, 0, 0, 1);
    for load in &file.prepare.loads {
        let LoadBody::Cql(statement) = &load.body else {
            unreachable!("a CQL file's loads are CQL")
        };
        observer.add_total(load.rows);
        let prepared = prepare_statement(conn, statement).await?;
        for _ in 0..load.rows {
            values.draw(&load.params);
            execute(conn, prepared, statement, &values).await?;
            observer.loaded(1);
        }
    }
    Ok(())
}
