//! PE's tests as a script: events claimed from one counter shared by the
//! sessions (so the run makes exactly [`PeWorkload::events`] requests
//! whatever the sessions' pace), keys and values written into each
//! session's buffers, and what `verify` needs tallied on the way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use loadcell_core::wide::{
    BlockCacheChange, Cell, Durability, MultiPut, Scan, ScanStart, WideConn,
};
use loadcell_core::{Driver, DriverError};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use loadcell_record::result::Verification;
use rand::rngs::SmallRng;
use rand::seq::IteratorRandom;
use rand::{Rng, SeedableRng};

use super::{
    is_pe_value, row_key, run_value, PeOptions, PeTest, PeWorkload, FAMILY, QUALIFIER, ROW_KEY_LEN,
};

const WRITE: [OpSpec; 1] = [OpSpec {
    name: "put",
    category: Category::Write,
}];
const READ: [OpSpec; 1] = [OpSpec {
    name: "get",
    category: Category::Read,
}];
const SCAN: [OpSpec; 1] = [OpSpec {
    name: "scan",
    category: Category::Read,
}];

#[derive(Debug)]
pub struct PeScript {
    test: PeTest,
    opts: PeOptions,
    events: u64,
    claimed: AtomicU64,
    /// Writes: a bit per row whose put was acknowledged.
    written: Vec<AtomicU64>,
    /// Writes: what the values are drawn from with the row ([`run_value`]),
    /// new to each run so that `verify` knows this run's values.
    salt: u64,
    /// Reads: rows read, and those found with a value of PE's pattern.
    reads: AtomicU64,
    good_reads: AtomicU64,
    /// Range scans: the most rows one returned.
    most_scanned: AtomicU64,
    /// Writes of several rows acknowledged, by how the driver sent them.
    sent_as_batch: AtomicU64,
    sent_concurrently: AtomicU64,
    block_cache: Mutex<Option<BlockCacheChange>>,
}

/// A session's buffers and generator.
#[derive(Debug)]
pub struct PeSession {
    rng: SmallRng,
    key: [u8; ROW_KEY_LEN],
    stop: [u8; ROW_KEY_LEN],
    value: Vec<u8>,
    /// Random writes: the rows of the request in flight.
    rows: Vec<u64>,
    /// `scan`: where the next page starts, and the last row of the page
    /// being read.
    next_page: Page,
    last_row: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Page {
    At(u64),
    After(Vec<u8>),
}

impl PeScript {
    pub(super) fn new(w: &PeWorkload, _seed: u64) -> PeScript {
        let bits = if w.test.writes() {
            w.opts.total_rows().div_ceil(64) as usize
        } else {
            0
        };
        PeScript {
            test: w.test,
            opts: w.opts.clone(),
            events: w.events(),
            claimed: AtomicU64::new(0),
            written: (0..bits).map(|_| AtomicU64::new(0)).collect(),
            salt: rand::random(),
            reads: AtomicU64::new(0),
            good_reads: AtomicU64::new(0),
            most_scanned: AtomicU64::new(0),
            sent_as_batch: AtomicU64::new(0),
            sent_concurrently: AtomicU64::new(0),
            block_cache: Mutex::new(None),
        }
    }

    /// The block cache was turned off before the run: `verify` restores it.
    pub(super) fn block_cache_changed(&self, change: BlockCacheChange) {
        *self.block_cache.lock().unwrap_or_else(|e| e.into_inner()) = Some(change);
    }

    /// The next event's index, `None` past the last (warm-up events claim
    /// too).
    fn claim(&self) -> Option<u64> {
        let i = self.claimed.fetch_add(1, Ordering::Relaxed);
        (i < self.events).then_some(i)
    }

    fn mark_written(&self, row: u64) {
        let bit = 1u64 << (row % 64);
        self.written[(row / 64) as usize].fetch_or(bit, Ordering::Relaxed);
    }

    async fn write<C: WideConn>(
        &self,
        i: u64,
        conn: &mut C,
        s: &mut PeSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let o = &self.opts;
        let per_request = o.rows_per_write();
        let first = i * per_request;
        let count = per_request.min(o.total_rows() - first);
        let durability = if o.write_to_wal {
            Durability::Wal
        } else {
            Durability::SkipWal
        };
        s.rows.clear();
        for n in 0..count {
            let row = match self.test {
                PeTest::SequentialWrite => first + n,
                _ => s.rng.random_range(0..o.total_rows()),
            };
            s.rows.push(row);
            row_key(row, &mut s.key);
            run_value(self.salt, row, &mut s.value);
            let cell = Cell {
                qualifier: QUALIFIER,
                value: &s.value,
            };
            conn.queue_put(&o.table, &s.key, FAMILY, &[cell], durability);
        }
        let written = ctx.op(0, conn.flush_puts()).await?;
        ctx.items(0, written);
        if count > 1 {
            match conn.last_multi_put() {
                MultiPut::Batch => &self.sent_as_batch,
                MultiPut::Concurrent => &self.sent_concurrently,
            }
            .fetch_add(1, Ordering::Relaxed);
        }
        for &row in &s.rows {
            self.mark_written(row);
        }
        Ok(())
    }

    async fn read<C: WideConn>(
        &self,
        i: u64,
        conn: &mut C,
        s: &mut PeSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let o = &self.opts;
        let row = match self.test {
            PeTest::SequentialRead => i,
            _ => s.rng.random_range(0..o.total_rows()),
        };
        row_key(row, &mut s.key);
        let mut good = false;
        let size = o.value_size;
        let found = ctx
            .op(
                0,
                conn.get(&o.table, &s.key, FAMILY, &[QUALIFIER], &mut |cell| {
                    good = is_pe_value(cell.value, size)
                }),
            )
            .await?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        if !found {
            ctx.not_found(0, "row not found");
        } else if !good {
            ctx.failed(
                0,
                "bad_value",
                "the value is not PE's: wrong length or pattern",
            );
        } else {
            self.good_reads.fetch_add(1, Ordering::Relaxed);
            ctx.items(0, 1);
        }
        Ok(())
    }

    /// `scan`: the session's next page, from its first row on; past the
    /// table's last row, from the first again.
    async fn scan_page<C: WideConn>(
        &self,
        conn: &mut C,
        s: &mut PeSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let o = &self.opts;
        let start = match &s.next_page {
            Page::At(row) => {
                row_key(*row, &mut s.key);
                ScanStart::At(&s.key)
            }
            Page::After(last) => ScanStart::After(last),
        };
        let scan = Scan {
            table: &o.table,
            family: FAMILY,
            start,
            stop_row: None,
            limit: Some(o.caching),
            caching: o.caching,
        };
        let last_row = &mut s.last_row;
        let outcome = ctx
            .op(
                0,
                conn.scan(&scan, &mut |row| {
                    last_row.clear();
                    last_row.extend_from_slice(row);
                }),
            )
            .await?;
        ctx.items(0, outcome.rows);
        if outcome.rows == 0 {
            s.next_page = Page::At(0);
        } else {
            // Swapped, not copied: the page's last row becomes the start.
            match &mut s.next_page {
                Page::After(last) => std::mem::swap(last, &mut s.last_row),
                at => *at = Page::After(std::mem::take(&mut s.last_row)),
            }
        }
        Ok(())
    }

    async fn scan_range<C: WideConn>(
        &self,
        range: u32,
        conn: &mut C,
        s: &mut PeSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let o = &self.opts;
        let first = s.rng.random_range(0..o.total_rows());
        row_key(first, &mut s.key);
        row_key(first + u64::from(range), &mut s.stop);
        let scan = Scan {
            table: &o.table,
            family: FAMILY,
            start: ScanStart::At(&s.key),
            stop_row: Some(&s.stop),
            limit: Some(range),
            caching: o.caching,
        };
        let outcome = ctx.op(0, conn.scan(&scan, &mut |_| {})).await?;
        ctx.items(0, outcome.rows);
        self.most_scanned.fetch_max(outcome.rows, Ordering::Relaxed);
        Ok(())
    }

    /// How the requests of several rows went out, for the result.
    fn multi_puts_sent_as(&self) -> String {
        let batched = self.sent_as_batch.load(Ordering::Relaxed);
        let concurrent = self.sent_concurrently.load(Ordering::Relaxed);
        let mut said = String::new();
        if batched > 0 {
            said.push_str(&format!(
                "; {batched} requests of several rows sent as one batch each (HBase putMultiple, CQL UNLOGGED BATCH)"
            ));
        }
        if concurrent > 0 {
            said.push_str(&format!(
                "; {concurrent} requests of several rows sent as concurrent single-row writes (a batch over the server's batch_size_fail_threshold, in several partitions)"
            ));
        }
        said
    }

    /// The rows whose puts were acknowledged, all of them up to
    /// [`READ_BACK_ROWS`], else that many drawn at random; and how many
    /// were acknowledged.
    fn rows_to_read_back(&self) -> (Vec<u64>, u64) {
        let acknowledged = self.written.iter().enumerate().flat_map(|(word, bits)| {
            let mut bits = bits.load(Ordering::Relaxed);
            std::iter::from_fn(move || {
                let bit = bits.trailing_zeros();
                (bits != 0).then(|| {
                    bits &= bits - 1;
                    word as u64 * 64 + u64::from(bit)
                })
            })
        });
        let total: u64 = self
            .written
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum();
        let rows = if total <= READ_BACK_ROWS as u64 {
            acknowledged.collect()
        } else {
            let mut rng = SmallRng::seed_from_u64(self.salt);
            acknowledged.choose_multiple(&mut rng, READ_BACK_ROWS)
        };
        (rows, total)
    }

    /// Reads `rows` back on `conn`, each expected to hold this run's value.
    async fn read_back<C: WideConn>(
        &self,
        conn: &mut C,
        rows: &[u64],
    ) -> Result<ReadBack, DriverError> {
        let o = &self.opts;
        let mut key = [0; ROW_KEY_LEN];
        let mut ours = vec![0; o.value_size];
        let mut back = ReadBack::default();
        for &row in rows {
            row_key(row, &mut key);
            run_value(self.salt, row, &mut ours);
            let mut holds_ours = false;
            let found = conn
                .get(&o.table, &key, FAMILY, &[QUALIFIER], &mut |cell| {
                    holds_ours = cell.value == ours
                })
                .await?;
            back.count(row, found, holds_ours);
        }
        Ok(back)
    }

    /// The rows a write test acknowledged read back, over
    /// [`READ_BACK_CONNECTIONS`] connections at once.
    async fn verify_writes<D>(
        &self,
        driver: &D,
        connect_timeout: Duration,
    ) -> Result<Verification, DriverError>
    where
        D: Driver,
        D::Conn: WideConn,
    {
        let (rows, acknowledged) = self.rows_to_read_back();
        let share = rows.len().div_ceil(READ_BACK_CONNECTIONS).max(1);
        let mut conns = Vec::new();
        for _ in rows.chunks(share) {
            conns.push(
                loadcell_engine::connect_once(driver, connect_timeout)
                    .await?
                    .0,
            );
        }
        let mut back = ReadBack::default();
        let reads = conns
            .iter_mut()
            .zip(rows.chunks(share))
            .map(|(conn, rows)| self.read_back(conn, rows));
        for part in futures::future::join_all(reads).await {
            back.add(part?);
        }
        let table = &self.opts.table;
        let read = back.read;
        let found = read - back.missing - back.not_ours;
        let mut how = String::new();
        if back.missing > 0 {
            how += &format!(
                "{} of the {read} rows read back missing (e.g. {}); ",
                back.missing,
                keys(&back.missing_examples)
            );
        }
        if back.not_ours > 0 {
            how += &format!(
                "{} of the {read} rows read back holding a value this run did not write, an earlier run's or another writer's (e.g. {}); ",
                back.not_ours,
                keys(&back.not_ours_examples)
            );
        }
        if read == acknowledged {
            how += &format!(
                "read back every row of {table} whose put this run acknowledged, each to hold this run's value"
            );
        } else {
            // Drawn without replacement, a sample misses a rate `p` of
            // absent rows with probability at most (1 - p)^read.
            let rate = 1.0 - 0.01f64.powf(1.0 / read as f64);
            how += &format!(
                "read back {read} of the {acknowledged} rows of {table} whose puts this run acknowledged, drawn at random, each to hold this run's value: \
                 a miss rate above {:.3}% would have shown with 99% probability",
                rate * 100.0
            );
        }
        let letters = self.opts.value_size.div_ceil(8) as u32;
        if letters < 5 {
            how += &format!(
                "; a value of {} bytes is another's by chance once in {}",
                self.opts.value_size,
                26u64.pow(letters)
            );
        }
        how += &self.multi_puts_sent_as();
        Ok(Verification::new(read, found, found == read, how))
    }

    /// After the run: the block cache restored, and what the test's
    /// requests should have left or found, compared with the server's.
    pub(super) async fn verify<D>(
        &self,
        driver: &D,
        connect_timeout: Duration,
    ) -> Result<Option<Verification>, DriverError>
    where
        D: Driver,
        D::Conn: WideConn,
    {
        let (mut conn, _) = loadcell_engine::connect_once(driver, connect_timeout).await?;
        let conn = &mut conn;
        let o = &self.opts;
        let restored = self
            .block_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let note = match restored {
            Some(change) => {
                conn.set_block_cache(&o.table, FAMILY, change.was_on)
                    .await?;
                format!(
                    "; block cache off during the run ({}), then restored",
                    change.setting
                )
            }
            None => String::new(),
        };
        let verification = match self.test {
            PeTest::SequentialWrite | PeTest::RandomWrite => {
                let mut verification = self.verify_writes(driver, connect_timeout).await?;
                verification.how += &note;
                verification
            }
            PeTest::RandomRead | PeTest::SequentialRead => {
                let expected = self.reads.load(Ordering::Relaxed);
                let found = self.good_reads.load(Ordering::Relaxed);
                Verification::new(
                    expected,
                    found,
                    found == expected,
                    format!(
                        "rows read that were there with a value of --value-size bytes in PE's pattern{note}"
                    ),
                )
            }
            PeTest::ScanRange(range) => {
                let found = self.most_scanned.load(Ordering::Relaxed);
                Verification::new(
                    u64::from(range),
                    found,
                    found <= u64::from(range),
                    format!("the most rows one scan returned, at most its range{note}"),
                )
            }
            PeTest::Scan => return Ok(None),
        };
        Ok(Some(verification))
    }
}

/// Rows a write test's `verify` reads back: every row whose put was
/// acknowledged up to this many, else this many drawn at random (a miss
/// rate above 0.014% shows with 99% probability).
const READ_BACK_ROWS: usize = 32_768;

/// Connections the read-back is spread over.
const READ_BACK_CONNECTIONS: usize = 16;

/// Rows a failed read-back names, of each kind.
const EXAMPLES: usize = 3;

/// What reading rows back found.
#[derive(Debug, Default)]
struct ReadBack {
    read: u64,
    missing: u64,
    /// Rows there with a value this run did not write.
    not_ours: u64,
    missing_examples: Vec<u64>,
    not_ours_examples: Vec<u64>,
}

impl ReadBack {
    fn count(&mut self, row: u64, found: bool, holds_ours: bool) {
        self.read += 1;
        let (count, examples) = match (found, holds_ours) {
            (true, true) => return,
            (false, _) => (&mut self.missing, &mut self.missing_examples),
            (true, false) => (&mut self.not_ours, &mut self.not_ours_examples),
        };
        *count += 1;
        if examples.len() < EXAMPLES {
            examples.push(row);
        }
    }

    fn add(&mut self, other: ReadBack) {
        self.read += other.read;
        self.missing += other.missing;
        self.not_ours += other.not_ours;
        for (mine, theirs) in [
            (&mut self.missing_examples, other.missing_examples),
            (&mut self.not_ours_examples, other.not_ours_examples),
        ] {
            let room = EXAMPLES - mine.len();
            mine.extend(theirs.into_iter().take(room));
        }
    }
}

/// Rows by their keys, for a message.
fn keys(rows: &[u64]) -> String {
    let mut key = [0; ROW_KEY_LEN];
    let named: Vec<String> = rows
        .iter()
        .map(|&row| {
            row_key(row, &mut key);
            String::from_utf8_lossy(&key).into_owned()
        })
        .collect();
    named.join(", ")
}

impl<C: WideConn> Script<C> for PeScript {
    type Session = PeSession;

    fn ops(&self) -> &[OpSpec] {
        match self.test {
            PeTest::SequentialWrite | PeTest::RandomWrite => &WRITE,
            PeTest::RandomRead | PeTest::SequentialRead => &READ,
            PeTest::Scan | PeTest::ScanRange(_) => &SCAN,
        }
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, session: SessionInfo) -> Result<PeSession, DriverError> {
        let per_request = if self.test.writes() {
            self.opts.rows_per_write() as usize
        } else {
            0
        };
        Ok(PeSession {
            rng: SmallRng::seed_from_u64(session.seed),
            key: [0; ROW_KEY_LEN],
            stop: [0; ROW_KEY_LEN],
            value: vec![0; self.opts.value_size],
            rows: Vec::with_capacity(per_request),
            next_page: Page::At(session.index as u64 * self.opts.rows),
            last_row: Vec::with_capacity(ROW_KEY_LEN),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        session: &mut PeSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let Some(i) = self.claim() else {
            return Ok(());
        };
        match self.test {
            PeTest::SequentialWrite | PeTest::RandomWrite => {
                self.write(i, conn, session, ctx).await
            }
            PeTest::RandomRead | PeTest::SequentialRead => self.read(i, conn, session, ctx).await,
            PeTest::Scan => self.scan_page(conn, session, ctx).await,
            PeTest::ScanRange(range) => self.scan_range(range, conn, session, ctx).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(rows: u64) -> PeScript {
        let w = PeWorkload {
            test: PeTest::RandomWrite,
            opts: PeOptions {
                table: "TestTable".to_string(),
                rows,
                clients: 1,
                value_size: 100,
                write_to_wal: true,
                multi_put: 0,
                auto_flush: true,
                caching: 30,
                presplit: 0,
                block_cache: true,
            },
        };
        PeScript::new(&w, 0)
    }

    #[test]
    fn verify_reads_back_every_acknowledged_row_or_a_sample_of_them() {
        let few = script(1000);
        for row in [3, 64, 999] {
            few.mark_written(row);
        }
        assert_eq!(few.rows_to_read_back(), (vec![3, 64, 999], 3));

        let many = script(100_000);
        for row in (0..100_000).step_by(2) {
            many.mark_written(row);
        }
        let (mut rows, acknowledged) = many.rows_to_read_back();
        assert_eq!(acknowledged, 50_000);
        assert_eq!(rows.len(), READ_BACK_ROWS);
        rows.sort_unstable();
        rows.dedup();
        assert_eq!(rows.len(), READ_BACK_ROWS, "distinct rows");
        assert!(
            rows.iter().all(|row| row % 2 == 0),
            "acknowledged rows only"
        );
        assert!(
            rows[0] < 1000 && rows[READ_BACK_ROWS - 1] > 99_000,
            "from the whole span"
        );
    }
}
