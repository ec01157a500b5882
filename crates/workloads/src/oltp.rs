//! sysbench's OLTP suite (1.0.20), reproduced: the same schema, data
//! format, statements, statement counts per transaction and option names.
//! Generic over [`SqlConn`], so it runs on every SQL driver.
//!
//! Known, deliberate differences from sysbench:
//! - read/write/other are counted by statement kind, not from each result
//!   (sysbench counts an UPDATE that matched no row as "other");
//! - every workload uses prepared statements, `oltp_insert` included;
//! - after a retryable error the transaction is rolled back explicitly on
//!   every database before the event runs again;
//! - a lost connection is re-established instead of ending the run.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use loadcell_core::family::SqlFamily;
use loadcell_core::sql::{Dialect, SqlConn, SqlParam};
use loadcell_core::{Driver, DriverError, DriverInfo, ErrorClass, Family};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo, Shard};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::distribution::{Distribution, RandParams, RandType};
use crate::prepare::load::load_in_parallel;
use crate::prepare::marker::{self, Owner};
use crate::prepare::{CheckError, NotPrepared, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading, Workload};

/// The eight sysbench OLTP workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OltpKind {
    ReadWrite,
    ReadOnly,
    WriteOnly,
    PointSelect,
    Insert,
    UpdateIndex,
    UpdateNonIndex,
    Delete,
}

impl OltpKind {
    pub const ALL: [(&'static str, OltpKind, &'static str); 8] = [
        ("oltp_read_write", OltpKind::ReadWrite, "sysbench read/write transactions: 10 point selects, 4 ranges, 2 updates, delete+insert (20 queries)"),
        ("oltp_read_only", OltpKind::ReadOnly, "sysbench read-only transactions: 10 point selects and 4 ranges (16 queries)"),
        ("oltp_write_only", OltpKind::WriteOnly, "sysbench write-only transactions: 2 updates, delete+insert (6 queries)"),
        ("oltp_point_select", OltpKind::PointSelect, "one primary-key SELECT per event"),
        ("oltp_insert", OltpKind::Insert, "one INSERT per event"),
        ("oltp_update_index", OltpKind::UpdateIndex, "UPDATE of the indexed column k"),
        ("oltp_update_non_index", OltpKind::UpdateNonIndex, "UPDATE of the non-indexed column c"),
        ("oltp_delete", OltpKind::Delete, "one DELETE by primary key per event"),
    ];

    pub fn parse(name: &str) -> Option<OltpKind> {
        Self::ALL
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, k, _)| *k)
    }

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, k, _)| *k == self)
            .expect("all kinds listed")
            .0
    }

    fn is_transaction(self) -> bool {
        matches!(
            self,
            OltpKind::ReadWrite | OltpKind::ReadOnly | OltpKind::WriteOnly
        )
    }
}

/// A shard's part of the ids `oltp_insert --auto-inc=off` inserts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InsertShare {
    pub shard: Shard,
    /// Seeds the id permutation, the same for every shard of a run (their
    /// --seed may differ): the run's (or the sweep's first) `--start-at`,
    /// so that runs started at other instants insert other ids.
    pub seed: u64,
    /// Where in the permutation this run's ids begin: 0, or step n of a
    /// sharded sweep's S at n/S of it, so that no step inserts an id an
    /// earlier step did into the same table.
    pub first: u32,
}

/// sysbench's OLTP options with sysbench's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct OltpOptions {
    pub tables: u32,
    pub table_size: u64,
    pub range_size: u64,
    pub point_selects: u32,
    pub simple_ranges: u32,
    pub sum_ranges: u32,
    pub order_ranges: u32,
    pub distinct_ranges: u32,
    pub index_updates: u32,
    pub non_index_updates: u32,
    pub delete_inserts: u32,
    pub range_selects: bool,
    pub skip_trx: bool,
    pub auto_inc: bool,
    pub create_secondary: bool,
    /// sysbench 1.0.20's default is `special`.
    pub rand_type: RandType,
    pub rand: RandParams,
    /// This process's shard of a run split over several (`--shard I/N`,
    /// else 0/1), and a sweep's step: `oltp_insert --auto-inc=off` takes
    /// ids I, I + N, I + 2N… of the step's part of one permutation, so
    /// neither shards nor steps insert the same id. Not an option of the
    /// workload: shards of one run record the same options.
    pub shard: Option<InsertShare>,
}

impl Default for OltpOptions {
    fn default() -> Self {
        OltpOptions {
            tables: 1,
            table_size: 10_000,
            range_size: 100,
            point_selects: 10,
            simple_ranges: 1,
            sum_ranges: 1,
            order_ranges: 1,
            distinct_ranges: 1,
            index_updates: 1,
            non_index_updates: 1,
            delete_inserts: 1,
            range_selects: true,
            skip_trx: false,
            auto_inc: true,
            create_secondary: true,
            rand_type: RandType::Special,
            rand: RandParams::default(),
            shard: None,
        }
    }
}

impl OltpOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.tables == 0 {
            return Err("--tables must be at least 1".into());
        }
        if self.table_size == 0 {
            return Err("--table-size must be at least 1".into());
        }
        if self.table_size > i32::MAX as u64 {
            return Err(format!(
                "--table-size must be at most {} (ids are INTEGER)",
                i32::MAX
            ));
        }
        if self.range_size == 0 {
            return Err("--range-size must be at least 1".into());
        }
        self.rand.validate()
    }

    /// Every option as resolved, for the result file.
    pub fn to_map(&self) -> BTreeMap<String, Value> {
        let v = json!({
            "tables": self.tables,
            "table_size": self.table_size,
            "range_size": self.range_size,
            "point_selects": self.point_selects,
            "simple_ranges": self.simple_ranges,
            "sum_ranges": self.sum_ranges,
            "order_ranges": self.order_ranges,
            "distinct_ranges": self.distinct_ranges,
            "index_updates": self.index_updates,
            "non_index_updates": self.non_index_updates,
            "delete_inserts": self.delete_inserts,
            "range_selects": self.range_selects,
            "skip_trx": self.skip_trx,
            "auto_inc": self.auto_inc,
            "create_secondary": self.create_secondary,
            "rand_type": self.rand_type.as_str(),
            "rand_spec_iter": self.rand.spec_iter,
            "rand_spec_pct": self.rand.spec_pct,
            "rand_spec_res": self.rand.spec_res,
            "rand_zipfian_exp": self.rand.zipfian_exp,
            "rand_pareto_h": self.rand.pareto_h,
        });
        serde_json::from_value(v).expect("an object")
    }
}

// Operation kinds, indexes into `OPS`.
const BEGIN: usize = 0;
const COMMIT: usize = 1;
const POINT_SELECT: usize = 2;
const SIMPLE_RANGE: usize = 3;
const SUM_RANGE: usize = 4;
const ORDER_RANGE: usize = 5;
const DISTINCT_RANGE: usize = 6;
const INDEX_UPDATE: usize = 7;
const NON_INDEX_UPDATE: usize = 8;
const DELETE: usize = 9;
const INSERT: usize = 10;

const fn op(name: &'static str, category: Category) -> OpSpec {
    OpSpec { name, category }
}

pub const OPS: [OpSpec; 11] = [
    op("begin", Category::Other),
    op("commit", Category::Other),
    op("point_select", Category::Read),
    op("simple_range", Category::Read),
    op("sum_range", Category::Read),
    op("order_range", Category::Read),
    op("distinct_range", Category::Read),
    op("index_update", Category::Write),
    op("non_index_update", Category::Write),
    op("delete", Category::Write),
    op("insert", Category::Write),
];

/// Statement text for operation `op` on table `t`, with `?` placeholders.
fn statement(op: usize, t: u32, auto_inc_insert: bool) -> String {
    match op {
        BEGIN => "BEGIN".into(),
        COMMIT => "COMMIT".into(),
        POINT_SELECT => format!("SELECT c FROM sbtest{t} WHERE id=?"),
        SIMPLE_RANGE => format!("SELECT c FROM sbtest{t} WHERE id BETWEEN ? AND ?"),
        SUM_RANGE => format!("SELECT SUM(k) FROM sbtest{t} WHERE id BETWEEN ? AND ?"),
        ORDER_RANGE => format!("SELECT c FROM sbtest{t} WHERE id BETWEEN ? AND ? ORDER BY c"),
        DISTINCT_RANGE => {
            format!("SELECT DISTINCT c FROM sbtest{t} WHERE id BETWEEN ? AND ? ORDER BY c")
        }
        INDEX_UPDATE => format!("UPDATE sbtest{t} SET k=k+1 WHERE id=?"),
        NON_INDEX_UPDATE => format!("UPDATE sbtest{t} SET c=? WHERE id=?"),
        DELETE => format!("DELETE FROM sbtest{t} WHERE id=?"),
        INSERT if auto_inc_insert => format!("INSERT INTO sbtest{t} (k, c, pad) VALUES (?, ?, ?)"),
        INSERT => format!("INSERT INTO sbtest{t} (id, k, c, pad) VALUES (?, ?, ?, ?)"),
        _ => unreachable!("operation kinds are the constants above"),
    }
}

/// Rewrites `?` placeholders for the dialect (`$1`, `$2`, ... for PostgreSQL).
fn for_dialect(sql: &str, dialect: Dialect) -> String {
    if dialect != Dialect::Postgres {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for ch in sql.chars() {
        if ch == '?' {
            n += 1;
            out.push_str(&dialect.placeholder(n));
        } else {
            out.push(ch);
        }
    }
    out
}

/// `c` is 10 groups of 11 digits joined by `-` (119 characters).
const C_TEMPLATE: &str = "###########-###########-###########-###########-###########-###########-###########-###########-###########-###########";
/// `pad` is 5 such groups (59 characters).
const PAD_TEMPLATE: &str = "###########-###########-###########-###########-###########";

/// Rewrites `buf` (a copy of `template`) with fresh random digits in place.
#[inline]
fn refill(buf: &mut String, template: &str, rng: &mut SmallRng) {
    if buf.len() != template.len() {
        buf.clear();
        buf.push_str(template);
    }
    // SAFETY: only ASCII digits replace ASCII '#', so the string stays UTF-8.
    let bytes = unsafe { buf.as_bytes_mut() };
    for (b, t) in bytes.iter_mut().zip(template.bytes()) {
        if t == b'#' {
            *b = b'0' + rng.random_range(0..10u8);
        }
    }
}

/// One OLTP workload, shared by all sessions.
pub struct Oltp {
    kind: OltpKind,
    opts: OltpOptions,
    ids: Distribution,
    /// `oltp_insert --auto-inc=off`: ids from a seeded permutation of the
    /// 32-bit integers, so sessions never collide (as sysbench does).
    unique_next: AtomicU32,
    unique_offset: u32,
    /// The statement groups an event runs, in sysbench's order, with how
    /// many statements each: only those with any, so that a point select
    /// does not step through nine empty groups per event.
    groups: Vec<(usize, u32)>,
}

/// Per-table prepared statements, `None` where the workload never uses them.
pub struct OltpSession<S> {
    rng: SmallRng,
    begin: Option<S>,
    commit: Option<S>,
    tables: Vec<[Option<S>; 11]>,
    c: String,
    pad: String,
}

impl Oltp {
    pub fn new(kind: OltpKind, opts: OltpOptions, seed: u64) -> Oltp {
        let ids = Distribution::new(opts.rand_type, opts.rand, 1, opts.table_size);
        // Shards need one permutation, and their seeds may differ.
        let permutation_seed = opts.shard.map_or(seed, |s| s.seed);
        let mut oltp = Oltp {
            kind,
            opts,
            ids,
            unique_next: AtomicU32::new(0),
            unique_offset: permute(permute(permutation_seed as u32).wrapping_add(0x4679_0905)),
            groups: Vec::new(),
        };
        // DELETE's group also re-inserts (sysbench's delete_inserts), so
        // INSERT is a group of its own only in oltp_insert.
        let insert = (kind == OltpKind::Insert).then_some(INSERT);
        oltp.groups = [
            POINT_SELECT,
            SIMPLE_RANGE,
            SUM_RANGE,
            ORDER_RANGE,
            DISTINCT_RANGE,
            INDEX_UPDATE,
            NON_INDEX_UPDATE,
            DELETE,
        ]
        .into_iter()
        .chain(insert)
        .map(|op| (op, oltp.count(op)))
        .filter(|&(_, n)| n > 0)
        .collect();
        oltp
    }

    pub fn kind(&self) -> OltpKind {
        self.kind
    }

    fn count(&self, op: usize) -> u32 {
        let o = &self.opts;
        let ranges = |n: u32| if o.range_selects { n } else { 0 };
        match (self.kind, op) {
            (OltpKind::ReadWrite | OltpKind::ReadOnly, POINT_SELECT) => o.point_selects,
            (OltpKind::ReadWrite | OltpKind::ReadOnly, SIMPLE_RANGE) => ranges(o.simple_ranges),
            (OltpKind::ReadWrite | OltpKind::ReadOnly, SUM_RANGE) => ranges(o.sum_ranges),
            (OltpKind::ReadWrite | OltpKind::ReadOnly, ORDER_RANGE) => ranges(o.order_ranges),
            (OltpKind::ReadWrite | OltpKind::ReadOnly, DISTINCT_RANGE) => ranges(o.distinct_ranges),
            (OltpKind::ReadWrite | OltpKind::WriteOnly | OltpKind::UpdateIndex, INDEX_UPDATE) => {
                o.index_updates
            }
            (
                OltpKind::ReadWrite | OltpKind::WriteOnly | OltpKind::UpdateNonIndex,
                NON_INDEX_UPDATE,
            ) => o.non_index_updates,
            (OltpKind::ReadWrite | OltpKind::WriteOnly, DELETE | INSERT) => o.delete_inserts,
            (OltpKind::PointSelect, POINT_SELECT) => 1,
            (OltpKind::Delete, DELETE) | (OltpKind::Insert, INSERT) => 1,
            (k, BEGIN | COMMIT) if k.is_transaction() && !o.skip_trx => 1,
            _ => 0,
        }
    }

    fn insert_uses_auto_inc(&self) -> bool {
        self.kind == OltpKind::Insert && self.opts.auto_inc
    }

    #[inline]
    fn id(&self, rng: &mut SmallRng) -> i64 {
        self.ids.sample(rng) as i64
    }

    #[inline]
    fn table(&self, rng: &mut SmallRng) -> usize {
        rng.random_range(0..self.opts.tables as usize)
    }

    fn unique_id(&self) -> i64 {
        let (stride, offset) = self.opts.shard.map_or((1, 0), |s| {
            (
                s.shard.count as u32,
                s.first.wrapping_add(s.shard.index as u32),
            )
        });
        let i = self
            .unique_next
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(stride)
            .wrapping_add(offset);
        let u = permute((permute(i).wrapping_add(self.unique_offset)) ^ 0x5bf0_3635);
        u as i64 - 2_147_483_648
    }

    /// Runs `n` statements of kind `op` on one random table.
    async fn group<C: SqlConn>(
        &self,
        (op, n): (usize, u32),
        conn: &mut C,
        s: &mut OltpSession<C::Stmt>,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let t = self.table(&mut s.rng);
        for _ in 0..n {
            let stmt = s.tables[t][op].as_ref().expect("prepared in open()");
            match op {
                POINT_SELECT | INDEX_UPDATE => {
                    let id = self.id(&mut s.rng);
                    ctx.op(op, conn.exec(stmt, &[SqlParam::Int(id)])).await?;
                }
                SIMPLE_RANGE | SUM_RANGE | ORDER_RANGE | DISTINCT_RANGE => {
                    let id = self.id(&mut s.rng);
                    let end = id + self.opts.range_size as i64 - 1;
                    ctx.op(
                        op,
                        conn.exec(stmt, &[SqlParam::Int(id), SqlParam::Int(end)]),
                    )
                    .await?;
                }
                NON_INDEX_UPDATE => {
                    refill(&mut s.c, C_TEMPLATE, &mut s.rng);
                    let id = self.id(&mut s.rng);
                    let params = [SqlParam::Text(&s.c), SqlParam::Int(id)];
                    ctx.op(op, conn.exec(stmt, &params)).await?;
                }
                DELETE if self.kind == OltpKind::Delete => {
                    let id = self.id(&mut s.rng);
                    ctx.op(op, conn.exec(stmt, &[SqlParam::Int(id)])).await?;
                }
                DELETE => {
                    // sysbench's delete_inserts: delete a row, insert it again.
                    let id = self.id(&mut s.rng);
                    let k = self.id(&mut s.rng);
                    refill(&mut s.c, C_TEMPLATE, &mut s.rng);
                    refill(&mut s.pad, PAD_TEMPLATE, &mut s.rng);
                    ctx.op(DELETE, conn.exec(stmt, &[SqlParam::Int(id)]))
                        .await?;
                    let insert = s.tables[t][INSERT].as_ref().expect("prepared with delete");
                    let params = [
                        SqlParam::Int(id),
                        SqlParam::Int(k),
                        SqlParam::Text(&s.c),
                        SqlParam::Text(&s.pad),
                    ];
                    ctx.op(INSERT, conn.exec(insert, &params)).await?;
                }
                INSERT => {
                    let k = self.id(&mut s.rng);
                    refill(&mut s.c, C_TEMPLATE, &mut s.rng);
                    refill(&mut s.pad, PAD_TEMPLATE, &mut s.rng);
                    if self.insert_uses_auto_inc() {
                        let params = [
                            SqlParam::Int(k),
                            SqlParam::Text(&s.c),
                            SqlParam::Text(&s.pad),
                        ];
                        ctx.op(op, conn.exec(stmt, &params)).await?;
                    } else {
                        let params = [
                            SqlParam::Int(self.unique_id()),
                            SqlParam::Int(k),
                            SqlParam::Text(&s.c),
                            SqlParam::Text(&s.pad),
                        ];
                        ctx.op(op, conn.exec(stmt, &params)).await?;
                    }
                }
                _ => unreachable!("groups are the statement kinds"),
            }
        }
        Ok(())
    }

    /// Fails with [`NotPrepared`] (wrapped as fatal) if a table is missing.
    pub async fn check<C: SqlConn>(&self, conn: &mut C) -> Result<(), CheckError> {
        for t in 1..=self.opts.tables {
            if !conn.table_exists(&format!("sbtest{t}")).await? {
                return Err(CheckError::NotPrepared(NotPrepared::missing(&format!(
                    "table sbtest{t}"
                ))));
            }
        }
        Ok(())
    }
}

/// Preshing's permutation of the 32-bit integers (sysbench's `rand.unique`).
fn permute(x: u32) -> u32 {
    const P: u32 = 4_294_967_291;
    if x >= P {
        return x;
    }
    let r = ((x as u64 * x as u64) % P as u64) as u32;
    if x <= P / 2 {
        r
    } else {
        P - r
    }
}

impl<C: SqlConn> Script<C> for Oltp {
    type Session = OltpSession<C::Stmt>;

    fn ops(&self) -> &[OpSpec] {
        &OPS
    }

    fn transactional(&self) -> bool {
        self.kind.is_transaction() && !self.opts.skip_trx
    }

    async fn open(&self, conn: &mut C, info: SessionInfo) -> Result<Self::Session, DriverError> {
        let dialect = conn.dialect();
        let mut prepare = async |sql: String| conn.prepare(&for_dialect(&sql, dialect)).await;
        let begin = match self.count(BEGIN) {
            0 => None,
            _ => Some(prepare(statement(BEGIN, 0, false)).await?),
        };
        let commit = match self.count(COMMIT) {
            0 => None,
            _ => Some(prepare(statement(COMMIT, 0, false)).await?),
        };
        let mut tables = Vec::with_capacity(self.opts.tables as usize);
        for t in 1..=self.opts.tables {
            let mut stmts: [Option<C::Stmt>; 11] = Default::default();
            for (op, slot) in stmts.iter_mut().enumerate().skip(POINT_SELECT) {
                // An insert is needed by delete_inserts too.
                let needed = self.count(op) > 0
                    || (op == INSERT && self.count(DELETE) > 0 && self.kind != OltpKind::Delete);
                if needed {
                    *slot = Some(prepare(statement(op, t, self.insert_uses_auto_inc())).await?);
                }
            }
            tables.push(stmts);
        }
        Ok(OltpSession {
            rng: SmallRng::seed_from_u64(info.seed),
            begin,
            commit,
            tables,
            c: C_TEMPLATE.to_string(),
            pad: PAD_TEMPLATE.to_string(),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut Self::Session,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        if let Some(begin) = &s.begin {
            ctx.op(BEGIN, conn.exec(begin, &[])).await?;
        }
        for &group in &self.groups {
            self.group(group, conn, s, ctx).await?;
        }
        if let Some(commit) = &s.commit {
            ctx.op(COMMIT, conn.exec(commit, &[])).await?;
        }
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

/// The `workload` column of this family's marker rows.
const MARKER_WORKLOAD: &str = "oltp";

/// What follows `CREATE TABLE sbtestN`: sysbench's columns and engine.
fn table_definition(dialect: Dialect, auto_inc: bool) -> String {
    let (id_def, engine) = match (dialect, auto_inc) {
        (Dialect::MySql, true) => ("INTEGER NOT NULL AUTO_INCREMENT", " /*! ENGINE = innodb */"),
        (Dialect::MySql, false) => ("INTEGER NOT NULL", " /*! ENGINE = innodb */"),
        (Dialect::Postgres, true) => ("SERIAL", ""),
        (Dialect::Postgres, false) | (Dialect::Sqlite, _) => ("INTEGER NOT NULL", ""),
    };
    format!(
        "(id {id_def}, k INTEGER DEFAULT '0' NOT NULL, \
         c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id)){engine}"
    )
}

/// sysbench flushes a bulk INSERT before it would pass 512 KiB.
const BULK_INSERT_BYTES: usize = 512 * 1024;

/// An OLTP workload: one of sysbench's scripts, with its options.
#[derive(Debug, Clone)]
pub struct OltpWorkload {
    pub kind: OltpKind,
    pub opts: OltpOptions,
}

impl Workload for OltpWorkload {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn families(&self) -> &'static [Family] {
        &[Family::SQL]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        self.opts.to_map()
    }
}

impl<C: SqlConn> Lifecycle<C, SqlFamily> for OltpWorkload {
    type Script = Oltp;

    fn script(&self, seed: u64, _driver: &DriverInfo) -> Oltp {
        Oltp::new(self.kind, self.opts.clone(), seed)
    }

    async fn check(&self, script: &Oltp, conn: &mut C) -> Result<(), CheckError> {
        script.check(conn).await
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
        prepare(driver, self.kind, &self.opts, loading, observer).await
    }

    async fn cleanup<D>(
        &self,
        driver: &D,
        how: &Cleanup,
        observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        let (mut conn, _) = loadcell_engine::connect_once(driver, how.connect_timeout).await?;
        marker::cleanup(&mut conn, MARKER_WORKLOAD, observer).await?;
        Ok(())
    }
}

/// Creates and loads `sbtest1..N`, spreading tables over the loading
/// connections (a run of consecutive tables each). Idempotent: tables
/// loadcell created and fully loaded are left alone, partly loaded ones are
/// completed, and tables it did not create are never touched.
async fn prepare<D>(
    driver: Arc<D>,
    kind: OltpKind,
    opts: &OltpOptions,
    loading: Loading,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: SqlConn,
{
    let connect_timeout = loading.connect_timeout;
    let (mut first, _) = loadcell_engine::connect_once(&*driver, connect_timeout).await?;
    marker::ensure(&mut first).await?;
    drop(first);
    // oltp_insert without auto-increment starts from empty tables.
    let rows = if kind == OltpKind::Insert && !opts.auto_inc {
        0
    } else {
        opts.table_size
    };
    let opts = opts.clone();
    let connections = loading.connections.clamp(1, opts.tables as usize);
    load_in_parallel(
        driver,
        u64::from(opts.tables),
        connections,
        connect_timeout,
        observer,
        move |mut conn, i, _, tables, observer| {
            let opts = opts.clone();
            async move {
                let mut rng = SmallRng::seed_from_u64(i as u64);
                for t in tables {
                    prepare_table(&mut conn, t as u32 + 1, rows, &opts, &mut rng, &*observer)
                        .await?;
                }
                Ok(())
            }
        },
    )
    .await
}

async fn prepare_table<C: SqlConn>(
    conn: &mut C,
    t: u32,
    rows: u64,
    opts: &OltpOptions,
    rng: &mut SmallRng,
    observer: &dyn PrepareObserver,
) -> Result<(), DriverError> {
    let dialect = conn.dialect();
    let name = format!("sbtest{t}");
    let owner = marker::owner(conn, &name).await?;
    let mut have = 0u64;
    match owner {
        Owner::Other => {
            observer.message(&format!(
                "Table '{name}' already exists and was not created by loadcell: left as it is"
            ));
            return Ok(());
        }
        Owner::Earlier => {
            observer.message(&marker::earlier_prepare_message(&name));
            return Ok(());
        }
        Owner::Loadcell(_) | Owner::Nobody => {}
    }
    if matches!(owner, Owner::Loadcell(_)) {
        have = conn
            .query_i64(&format!("SELECT COALESCE(MAX(id), 0) FROM {name}"))
            .await?
            .unwrap_or(0)
            .max(0) as u64;
        if have >= rows {
            observer.message(&format!(
                "Table '{name}' already exists with rows up to id {have}: nothing to do"
            ));
            return Ok(());
        }
        observer.message(&format!(
            "Table '{name}' exists with rows up to id {have}: loading ids {}..{rows}",
            have + 1
        ));
    } else {
        observer.message(&format!("Creating table '{name}'..."));
        // Record first, so an interrupted prepare can still be cleaned up;
        // the table carries the same tag from its creation on.
        let tag = marker::Tag::new();
        marker::record(conn, &name, MARKER_WORKLOAD, &tag).await?;
        marker::create(conn, &name, &table_definition(dialect, opts.auto_inc), &tag).await?;
        if rows > 0 {
            observer.message(&format!(
                "Inserting {} into '{name}'",
                loadcell_core::words::counted(rows, "record")
            ));
        }
    }
    observer.add_total(rows - have);
    let ids = Distribution::new(opts.rand_type, opts.rand, 1, opts.table_size);
    let header = format!("INSERT INTO {name}(id, k, c, pad) VALUES ");
    let mut sql = String::with_capacity(BULK_INSERT_BYTES);
    let mut c = C_TEMPLATE.to_string();
    let mut pad = PAD_TEMPLATE.to_string();
    let mut in_batch = 0u64;
    for id in have + 1..=rows {
        refill(&mut c, C_TEMPLATE, rng);
        refill(&mut pad, PAD_TEMPLATE, rng);
        let k = ids.sample(rng);
        let row = format!("({id},{k},'{c}','{pad}')");
        if in_batch > 0 && sql.len() + row.len() + 1 > BULK_INSERT_BYTES {
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
        sql.push_str(&row);
        in_batch += 1;
    }
    if in_batch > 0 {
        conn.simple(&sql).await?;
        observer.loaded(in_batch);
    }
    if dialect == Dialect::Postgres && opts.auto_inc && rows > 0 {
        // Rows were loaded with explicit ids: move the sequence past them.
        conn.query_i64(&format!(
            "SELECT setval(pg_get_serial_sequence('{name}', 'id'), (SELECT MAX(id) FROM {name}))"
        ))
        .await?;
    }
    let index = format!("k_{t}");
    if opts.create_secondary && !conn.index_exists(&name, &index).await? {
        observer.message(&format!("Creating a secondary index on '{name}'..."));
        conn.simple(&format!("CREATE INDEX {index} ON {name}(k)"))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn oltp(kind: OltpKind, opts: OltpOptions) -> Oltp {
        Oltp::new(kind, opts, 1)
    }

    impl Oltp {
        /// Statements per event, BEGIN and COMMIT included.
        fn queries_per_event(&self) -> u32 {
            (0..OPS.len()).map(|op| self.count(op)).sum()
        }
    }

    #[test]
    fn queries_per_transaction_match_sysbench() {
        let d = OltpOptions::default();
        assert_eq!(oltp(OltpKind::ReadWrite, d.clone()).queries_per_event(), 20);
        assert_eq!(oltp(OltpKind::WriteOnly, d.clone()).queries_per_event(), 6);
        assert_eq!(oltp(OltpKind::ReadOnly, d.clone()).queries_per_event(), 16);
        assert_eq!(
            oltp(OltpKind::PointSelect, d.clone()).queries_per_event(),
            1
        );
        let skip = OltpOptions {
            skip_trx: true,
            ..d
        };
        assert_eq!(oltp(OltpKind::ReadWrite, skip).queries_per_event(), 18);
    }

    #[test]
    fn templates_have_sysbench_lengths() {
        assert_eq!(C_TEMPLATE.len(), 119);
        assert_eq!(PAD_TEMPLATE.len(), 59);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut c = String::new();
        refill(&mut c, C_TEMPLATE, &mut rng);
        assert_eq!(c.len(), 119);
        assert_eq!(c.split('-').count(), 10);
        assert!(c
            .split('-')
            .all(|g| g.len() == 11 && g.bytes().all(|b| b.is_ascii_digit())));
    }

    #[test]
    fn postgres_placeholders_are_numbered() {
        let sql = statement(NON_INDEX_UPDATE, 3, false);
        assert_eq!(sql, "UPDATE sbtest3 SET c=? WHERE id=?");
        assert_eq!(
            for_dialect(&sql, Dialect::Postgres),
            "UPDATE sbtest3 SET c=$1 WHERE id=$2"
        );
        assert_eq!(for_dialect(&sql, Dialect::MySql), sql);
    }

    #[test]
    fn shards_draw_the_ids_of_one_permutation_without_sharing_one() {
        let mut union = HashSet::new();
        for index in 0..2 {
            // Different seeds: shards need not share one.
            let shard = Oltp::new(
                OltpKind::Insert,
                OltpOptions {
                    shard: Some(InsertShare {
                        shard: Shard::new(index, 2).unwrap(),
                        seed: 5,
                        first: 0,
                    }),
                    ..OltpOptions::default()
                },
                7 + index as u64,
            );
            for _ in 0..500 {
                assert!(union.insert(shard.unique_id()), "an id drawn twice");
            }
        }
        // What one shard of one draws: the same permutation's first 1000.
        let whole = Oltp::new(
            OltpKind::Insert,
            OltpOptions {
                shard: Some(InsertShare {
                    shard: Shard::new(0, 1).unwrap(),
                    seed: 5,
                    first: 0,
                }),
                ..OltpOptions::default()
            },
            2,
        );
        let expected: HashSet<i64> = (0..1000).map(|_| whole.unique_id()).collect();
        assert_eq!(union, expected);
    }

    #[test]
    fn a_sharded_sweeps_steps_insert_ids_no_earlier_step_inserted() {
        // Two steps of a sweep of two, each run by two shards: the
        // second step starts half way through the one permutation.
        let mut union = HashSet::new();
        for first in [0, 1 << 31] {
            for index in 0..2 {
                let step = Oltp::new(
                    OltpKind::Insert,
                    OltpOptions {
                        shard: Some(InsertShare {
                            shard: Shard::new(index, 2).unwrap(),
                            seed: 5,
                            first,
                        }),
                        ..OltpOptions::default()
                    },
                    3,
                );
                for _ in 0..50_000 {
                    assert!(union.insert(step.unique_id()), "an id drawn twice");
                }
            }
        }
    }

    #[test]
    fn unique_ids_do_not_repeat() {
        let o = oltp(OltpKind::Insert, OltpOptions::default());
        let ids: std::collections::HashSet<i64> = (0..100_000).map(|_| o.unique_id()).collect();
        assert_eq!(ids.len(), 100_000);
        assert!(ids
            .iter()
            .all(|&id| (i32::MIN as i64..=i32::MAX as i64).contains(&id)));
    }

    #[test]
    fn options_are_validated() {
        let bad = OltpOptions {
            tables: 0,
            ..OltpOptions::default()
        };
        assert!(bad.validate().unwrap_err().contains("--tables"));
        assert!(OltpOptions::default().validate().is_ok());
        assert_eq!(
            OltpKind::parse("oltp_read_write"),
            Some(OltpKind::ReadWrite)
        );
        assert_eq!(OltpKind::parse("oltp_nope"), None);
    }
}
