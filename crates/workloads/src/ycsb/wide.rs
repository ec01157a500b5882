//! YCSB over wide-column stores, as YCSB's Cassandra binding lays it out:
//! table `usertable`, row key `y_id`, a column (qualifier) per field
//! `field0..`; on HBase the same qualifiers in family `info0`. A read gets
//! every field; an update puts one field (every field with
//! `--write-all-fields`); a scan reads up to its length of rows from the
//! chosen key on (on CQL in token order: `token(y_id) >= token(?)`, as
//! the binding does).

use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::wide::{Cell, Durability, Scan, ScanStart, TableSpec, WideConn};
use loadcell_core::{Driver, DriverError};
use loadcell_engine::{Ctx, OpSpec, Script, SessionInfo};

use crate::prepare::load::load_in_parallel;
use crate::prepare::{CheckError, PrepareObserver};
use crate::wide::{OwnKeys, FAMILY};
use crate::workload::Loading;

use super::*;

/// YCSB's table and key column.
pub const TABLE: &str = "usertable";
const KEY_COLUMN: &str = "y_id";

/// YCSB's keys, what `cleanup` takes as loadcell's rows: `user` and a
/// number.
pub(super) const OWN_KEYS: OwnKeys = OwnKeys {
    what: "YCSB's user<number> keys",
    is_own: |key| {
        key.strip_prefix(b"user")
            .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
    },
};

/// Records a load request carries.
const LOAD_BATCH: u64 = 100;

pub struct YcsbWide {
    core: Ycsb,
}

pub struct YcsbWideSession {
    d: Draw,
}

impl YcsbWide {
    pub fn new(opts: YcsbOptions) -> YcsbWide {
        YcsbWide {
            core: Ycsb::new(opts),
        }
    }

    fn new_session(&self, seed: u64) -> YcsbWideSession {
        YcsbWideSession {
            d: Draw::new(&self.core, seed),
        }
    }

    /// Before a run: most of a sample of the records must be there.
    pub async fn check<C: WideConn>(&self, conn: &mut C) -> Result<(), CheckError> {
        let sampled = self.core.sampled_records();
        let mut key = String::new();
        let mut present = 0;
        for &n in &sampled {
            push_key(&mut key, n);
            if conn
                .get(TABLE, key.as_bytes(), FAMILY, &[], &mut |_| {})
                .await?
            {
                present += 1;
            }
        }
        self.core.judge_sample(TABLE, present, sampled.len())
    }

    /// Queues a put of field `field` of the session's key (every field
    /// with `all`), values sliced from the pool.
    fn queue_write<C: WideConn>(
        &self,
        conn: &mut C,
        s: &mut YcsbWideSession,
        field: usize,
        all: bool,
    ) {
        let o = &self.core.opts;
        let Draw { rng, pool, key, .. } = &mut s.d;
        let pool: &str = pool;
        let fields = if all { self.core.field_names.len() } else { 1 };
        let mut stack = [Cell {
            qualifier: &[],
            value: &[],
        }; STACK_FIELDS];
        let mut heap = Vec::new();
        let cells = scratch(&mut stack, &mut heap, fields);
        for (i, cell) in cells.iter_mut().enumerate() {
            let f = if all { i } else { field };
            *cell = Cell {
                qualifier: self.core.field_names[f].as_bytes(),
                value: pick(pool, rng, o.field_length).as_bytes(),
            };
        }
        conn.queue_put(TABLE, key.as_bytes(), FAMILY, cells, Durability::Wal);
    }

    async fn read<C: WideConn>(&self, conn: &mut C, key: &str) -> Result<bool, DriverError> {
        conn.get(TABLE, key.as_bytes(), FAMILY, &[], &mut |_| {})
            .await
    }

    async fn scan<C: WideConn>(
        &self,
        conn: &mut C,
        key: &str,
        len: u64,
    ) -> Result<u64, DriverError> {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        let scan = Scan {
            table: TABLE,
            family: FAMILY,
            start: ScanStart::At(key.as_bytes()),
            stop_row: None,
            limit: Some(len),
            caching: len,
        };
        Ok(conn.scan(&scan, &mut |_| {}).await?.rows)
    }
}

/// Fields a put's cells fit on the stack for.
const STACK_FIELDS: usize = 32;

impl<C: WideConn> Script<C> for YcsbWide {
    type Session = YcsbWideSession;

    fn ops(&self) -> &[OpSpec] {
        &OPS
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, info: SessionInfo) -> Result<YcsbWideSession, DriverError> {
        Ok(self.new_session(info.seed))
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut YcsbWideSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let c = self.core.choose(&mut s.d);
        push_key(&mut s.d.key, c.key);
        let all = self.core.opts.write_all_fields;
        match c.op {
            READ => {
                let found = ctx.op(READ, self.read(conn, &s.d.key)).await?;
                count_read(ctx, READ, found);
            }
            UPDATE => {
                self.queue_write(conn, s, c.field, all);
                ctx.op(UPDATE, conn.flush_puts()).await?;
            }
            INSERT => {
                self.queue_write(conn, s, 0, true);
                ctx.op(INSERT, conn.flush_puts())
                    .await
                    .inspect_err(|_| self.core.finished(c))?;
            }
            SCAN => {
                let rows = ctx.op(SCAN, self.scan(conn, &s.d.key, c.len)).await?;
                if rows == 0 {
                    not_found(ctx, SCAN);
                }
            }
            _ => {
                let found = ctx
                    .op(RMW, async {
                        let found = self.read(conn, &s.d.key).await?;
                        self.queue_write(conn, s, c.field, all);
                        conn.flush_puts().await?;
                        Ok(found)
                    })
                    .await?;
                count_read(ctx, RMW, found);
            }
        }
        self.core.done(&mut s.d, c);
        Ok(())
    }
}

/// Creates `usertable` (marked as loadcell's) and loads records
/// `0..record_count`, 100 puts a request, over the loading connections.
pub(super) async fn prepare_wide<D>(
    driver: Arc<D>,
    opts: &YcsbOptions,
    loading: Loading,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: WideConn,
{
    let wide = Rc::new(YcsbWide::new(opts.clone()));
    let (mut conn, _) = loadcell_engine::connect_once(&*driver, loading.connect_timeout).await?;
    let qualifiers: Vec<&[u8]> = wide.core.field_names.iter().map(|f| f.as_bytes()).collect();
    let spec = TableSpec {
        table: TABLE,
        family: FAMILY,
        key_column: KEY_COLUMN,
        qualifiers: &qualifiers,
        split_keys: &[],
        marker: "",
    };
    crate::wide::create_table(&mut conn, spec, &*observer).await?;
    let records = opts.record_count;
    let connections = loading.connections.clamp(1, 64).min(records as usize);
    observer.add_total(records);
    load_in_parallel(
        driver,
        records,
        connections,
        loading.connect_timeout,
        observer,
        move |mut conn, c, _, keys, observer| {
            let wide = Rc::clone(&wide);
            async move {
                let mut s = wide.new_session(load_seed(c));
                let mut n = keys.start;
                while n < keys.end {
                    let end = (n + LOAD_BATCH).min(keys.end);
                    for k in n..end {
                        push_key(&mut s.d.key, k);
                        wide.queue_write(&mut conn, &mut s, 0, true);
                    }
                    conn.flush_puts().await?;
                    observer.loaded(end - n);
                    n = end;
                }
                Ok(())
            }
        },
    )
    .await
}
