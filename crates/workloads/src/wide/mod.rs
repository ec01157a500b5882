//! The wide-column workloads: HBase PerformanceEvaluation's tests, with
//! its names, options and data, on any wide-column driver (HBase through
//! Thrift2, Cassandra over CQL).
//!
//! - `sequentialWrite`, `randomWrite`: rows of one cell (family `info0`,
//!   qualifier `0`) of `--value-size` bytes, PE's 26-digit zero-padded
//!   keys ([`row_key`]) and values of runs of 8 identical random letters
//!   ([`run_value`]). `--rows` per client; a client is a session
//!   (`--threads` × `--clients`), and the keys span `--rows` × clients,
//!   as PE's `totalRows`. A request is one put with `--auto-flush true`,
//!   `--multi-put N` puts with it, or a 2 MB write buffer's worth without
//!   it (PE's BufferedMutator); rows are the items.
//! - `randomRead`, `sequentialRead`: one get a request, every value
//!   checked for its length and pattern.
//! - `scan`: each client scans from its first row, a page of `--caching`
//!   rows a request (PE reads one row per `next()`; the round trips are
//!   the pages). `scanRange10/100/1000`: a scan of at most that many rows
//!   from a random row.
//!
//! `prepare` creates the table (`--presplit` regions), marked as
//! loadcell's; `cleanup` drops it only if it carries the mark. Writes are
//! verified by reading back the rows the run acknowledged for the run's
//! own values ([`run_value`]), reads by the rows they found.

mod pe;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::family::WideColumnFamily;
use loadcell_core::wide::{TableSpec, WideConn};
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use loadcell_record::result::Verification;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::prepare::marker::Tag;
use crate::prepare::{CheckError, NotPrepared, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading, Workload};
pub use pe::PeScript;

/// PE's row keys: the row's number in decimal, zero-padded to 26 digits.
pub const ROW_KEY_LEN: usize = 26;

/// PE's column family and qualifier.
pub const FAMILY: &str = "info0";
pub const QUALIFIER: &[u8] = b"0";

/// PE's write buffer (`--bufferSize`, BufferedMutator's default): what is
/// sent at once without `--auto-flush`.
pub const WRITE_BUFFER_BYTES: u64 = 2 * 1024 * 1024;

/// Writes PE's key of row `n` into `key`.
pub fn row_key(n: u64, key: &mut [u8; ROW_KEY_LEN]) {
    let mut d = n;
    for b in key.iter_mut().rev() {
        *b = b'0' + (d % 10) as u8;
        d /= 10;
    }
}

/// The row number a PE key names, `None` for another key.
pub fn parse_row_key(key: &[u8]) -> Option<u64> {
    if key.len() != ROW_KEY_LEN || !key.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(key.iter().fold(0u64, |n, b| {
        n.wrapping_mul(10).wrapping_add(u64::from(b - b'0'))
    }))
}

/// Fills `value` as PE's `generateData` does: runs of 8 identical letters
/// A–Z, each drawn by `letter` (a number below 26).
pub fn fill_value(value: &mut [u8], mut letter: impl FnMut() -> u8) {
    for run in value.chunks_mut(8) {
        run.fill(b'A' + letter());
    }
}

/// Fills `value` with what a run salted `salt` writes into row `row`:
/// PE's pattern, its letters drawn from the row and the salt. `verify`
/// draws it again to tell this run's value from an earlier run's or
/// another writer's, with nothing kept per row.
pub fn run_value(salt: u64, row: u64, value: &mut [u8]) {
    // An odd multiplier keeps the seeds of distinct rows distinct.
    let mut rng = SmallRng::seed_from_u64(salt ^ row.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    fill_value(value, || rng.random_range(0..26));
}

/// Whether `value` has PE's pattern and `len` bytes. Every read checks
/// its whole value: a run is compared as one word, not byte by byte,
/// which had cost 3% of randomRead's client CPU on CQL.
pub fn is_pe_value(value: &[u8], len: usize) -> bool {
    let is_run = |run: &[u8]| run[0].is_ascii_uppercase() && run.iter().all(|&b| b == run[0]);
    let mut runs = value.chunks_exact(8);
    value.len() == len
        && runs.by_ref().all(|run| {
            let word = u64::from_ne_bytes(run.try_into().expect("8 bytes"));
            run[0].is_ascii_uppercase() && word == u64::from(run[0]) * 0x0101_0101_0101_0101
        })
        && (runs.remainder().is_empty() || is_run(runs.remainder()))
}

/// PE's tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeTest {
    SequentialWrite,
    RandomWrite,
    RandomRead,
    SequentialRead,
    Scan,
    /// `scanRange10`, `scanRange100`, `scanRange1000`: rows per scan.
    ScanRange(u32),
}

impl PeTest {
    pub const ALL: [PeTest; 8] = [
        PeTest::SequentialWrite,
        PeTest::RandomWrite,
        PeTest::RandomRead,
        PeTest::SequentialRead,
        PeTest::Scan,
        PeTest::ScanRange(10),
        PeTest::ScanRange(100),
        PeTest::ScanRange(1000),
    ];

    pub fn parse(name: &str) -> Option<PeTest> {
        PeTest::ALL.into_iter().find(|t| t.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PeTest::SequentialWrite => "sequentialWrite",
            PeTest::RandomWrite => "randomWrite",
            PeTest::RandomRead => "randomRead",
            PeTest::SequentialRead => "sequentialRead",
            PeTest::Scan => "scan",
            PeTest::ScanRange(10) => "scanRange10",
            PeTest::ScanRange(100) => "scanRange100",
            PeTest::ScanRange(_) => "scanRange1000",
        }
    }

    pub fn writes(self) -> bool {
        matches!(self, PeTest::SequentialWrite | PeTest::RandomWrite)
    }
}

/// PE's options, as loadcell takes them.
#[derive(Debug, Clone)]
pub struct PeOptions {
    pub table: String,
    /// Rows per client.
    pub rows: u64,
    /// Clients (sessions): `--threads` × `--clients` of the run; the keys
    /// span `rows` × `clients`.
    pub clients: u64,
    pub value_size: usize,
    pub write_to_wal: bool,
    /// Puts per request with `auto_flush`; 0 for one.
    pub multi_put: u64,
    pub auto_flush: bool,
    /// Rows per scan round trip.
    pub caching: u32,
    /// Regions the table is created with.
    pub presplit: u32,
    pub block_cache: bool,
}

impl PeOptions {
    pub fn total_rows(&self) -> u64 {
        self.rows * self.clients
    }

    /// Rows a write request carries.
    pub fn rows_per_write(&self) -> u64 {
        if self.auto_flush {
            self.multi_put.max(1)
        } else {
            (WRITE_BUFFER_BYTES / (self.value_size + ROW_KEY_LEN) as u64).max(1)
        }
    }

    /// PE's split keys for `presplit` regions over the total rows.
    pub fn split_keys(&self) -> Vec<[u8; ROW_KEY_LEN]> {
        let regions = u64::from(self.presplit);
        if regions < 2 {
            return Vec::new();
        }
        let jump = self.total_rows() / regions;
        (1..regions)
            .map(|i| {
                let mut key = [0; ROW_KEY_LEN];
                row_key(jump * i, &mut key);
                key
            })
            .collect()
    }
}

/// One of PE's tests.
#[derive(Debug, Clone)]
pub struct PeWorkload {
    pub test: PeTest,
    pub opts: PeOptions,
}

impl PeWorkload {
    /// The events a run of the test makes: every client's rows once.
    pub fn events(&self) -> u64 {
        let total = self.opts.total_rows();
        match self.test {
            PeTest::SequentialWrite | PeTest::RandomWrite => {
                total.div_ceil(self.opts.rows_per_write())
            }
            PeTest::RandomRead | PeTest::SequentialRead => total,
            PeTest::Scan => {
                self.opts.clients * self.opts.rows.div_ceil(u64::from(self.opts.caching))
            }
            PeTest::ScanRange(range) => total.div_ceil(u64::from(range)),
        }
    }
}

impl Workload for PeWorkload {
    fn name(&self) -> &'static str {
        self.test.as_str()
    }

    fn families(&self) -> &'static [Family] {
        &[Family::WIDE_COLUMN]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        let o = &self.opts;
        BTreeMap::from([
            ("table".to_string(), json!(o.table)),
            ("family".to_string(), json!(FAMILY)),
            ("rows".to_string(), json!(o.rows)),
            ("clients".to_string(), json!(o.clients)),
            ("value_size".to_string(), json!(o.value_size)),
            ("write_to_wal".to_string(), json!(o.write_to_wal)),
            ("multi_put".to_string(), json!(o.multi_put)),
            ("auto_flush".to_string(), json!(o.auto_flush)),
            ("caching".to_string(), json!(o.caching)),
            ("presplit".to_string(), json!(o.presplit)),
            ("block_cache".to_string(), json!(o.block_cache)),
        ])
    }
}

/// Whose a table is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    Nobody,
    Loadcell,
    Other,
}

pub(crate) async fn owner<C: WideConn>(conn: &mut C, table: &str) -> Result<Owner, DriverError> {
    Ok(match conn.table_marker(table).await? {
        None => Owner::Nobody,
        Some(marker) if Tag::parse(&marker).is_some() => Owner::Loadcell,
        Some(_) => Owner::Other,
    })
}

/// Creates `spec`'s table marked as loadcell's (the marker given is
/// replaced by a fresh tag); leaves one loadcell made, refuses another's.
pub(crate) async fn create_table<C: WideConn>(
    conn: &mut C,
    spec: TableSpec<'_>,
    observer: &dyn PrepareObserver,
) -> Result<(), DriverError> {
    create_marked(conn, spec.table, observer, async |conn, tag| {
        conn.create_table(&TableSpec {
            marker: tag,
            ..spec
        })
        .await
    })
    .await
}

/// Creates `table` by `create`, given a fresh tag to mark it with, when
/// there is no such table; leaves one loadcell made, refuses another's.
pub(crate) async fn create_marked<C: WideConn>(
    conn: &mut C,
    table: &str,
    observer: &dyn PrepareObserver,
    create: impl AsyncFnOnce(&mut C, &str) -> Result<(), DriverError>,
) -> Result<(), DriverError> {
    match owner(conn, table).await? {
        Owner::Nobody => {
            create(conn, Tag::new().as_str()).await?;
            observer.message(&format!("Created table {table}"));
            Ok(())
        }
        Owner::Loadcell => {
            observer.message(&format!(
                "Table {table} was created by loadcell already: left as it is"
            ));
            Ok(())
        }
        Owner::Other => Err(DriverError::fatal(format!(
            "table {table} exists and is not loadcell's (it carries no loadcell marker): \
             choose another table, or drop it by hand"
        ))),
    }
}

/// How `cleanup` tells the rows a workload writes into its table from
/// another writer's: by their keys. A table's marker says loadcell
/// created it, not who wrote into it since.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OwnKeys {
    /// The keys the workload writes, in words.
    pub what: &'static str,
    pub is_own: fn(&[u8]) -> bool,
}

/// PE's rows: 26-digit keys.
const PE_KEYS: OwnKeys = OwnKeys {
    what: "PE's 26-digit keys",
    is_own: |key| parse_row_key(key).is_some(),
};

/// Drops `table` if loadcell created it and holds only rows under the
/// keys `own` says loadcell writes (with `own` `None`, it cannot tell
/// any row's writer: only an empty table) or `force`; then the namespace
/// it lives in (a CQL keyspace) if loadcell's `prepare` created that too
/// and it now holds nothing else.
pub(crate) async fn drop_table<D>(
    table: &str,
    own: Option<OwnKeys>,
    force: bool,
    driver: &D,
    connect_timeout: Duration,
    observer: &dyn PrepareObserver,
) -> Result<(), CleanupError>
where
    D: Driver,
    D::Conn: WideConn,
{
    let (mut conn, _) = loadcell_engine::connect_once(driver, connect_timeout).await?;
    match owner(&mut conn, table).await? {
        Owner::Nobody => {
            observer.message(&format!("Nothing to clean up: there is no table {table}"))
        }
        Owner::Loadcell => {
            let mut unproven = 0u64;
            let mut example = None;
            let is_own = own.map(|own| own.is_own);
            let rows = conn
                .each_key(table, &mut |key| {
                    if !is_own.is_some_and(|is_own| is_own(key)) {
                        unproven += 1;
                        example.get_or_insert_with(|| String::from_utf8_lossy(key).into_owned());
                    }
                })
                .await?;
            let said = match (own, unproven) {
                (_, 0) if rows == 0 => "it is empty".to_string(),
                (Some(own), 0) => format!(
                    "its {rows} rows all have {}, the keys loadcell writes \
                     (another writer's rows under such keys cannot be told from loadcell's)",
                    own.what
                ),
                (Some(_), _) => format!(
                    "{unproven} of its {rows} rows are under keys loadcell never writes \
                     (e.g. {:?}), another writer's",
                    example.unwrap_or_default()
                ),
                (None, _) => format!(
                    "it holds {rows} rows, and loadcell cannot tell which it wrote \
                     in a table of a workload file"
                ),
            };
            if unproven > 0 && !force {
                return Err(CleanupError::Refused(format!(
                    "table {table} was created by loadcell, but {said}: left as it is; \
                     cleanup --force drops it with them"
                )));
            }
            let forced = if unproven > 0 { " (--force)" } else { "" };
            observer.message(&format!("Dropping table {table}{forced}: {said}..."));
            conn.drop_table(table).await?;
        }
        Owner::Other => {
            return Err(CleanupError::Refused(format!(
                "table {table} was not created by loadcell (it carries no loadcell marker): \
                 left as it is"
            )))
        }
    }
    if let Some(namespace) = conn.namespace().await? {
        let name = &namespace.name;
        if Tag::parse(&namespace.marker).is_none() {
            observer.message(&format!(
                "Left {name} as it is: loadcell's prepare did not create it"
            ));
        } else if namespace.objects > 0 {
            observer.message(&format!(
                "Left {name} as it is: loadcell's prepare created it, but it holds {} other \
                 tables, views, types or functions",
                namespace.objects
            ));
        } else {
            observer.message(&format!(
                "Dropping {name}: loadcell's prepare created it, and it holds nothing else"
            ));
            conn.drop_namespace().await?;
        }
    }
    Ok(())
}

impl<C: WideConn> Lifecycle<C, WideColumnFamily> for PeWorkload {
    type Script = PeScript;

    fn script(&self, seed: u64, _driver: &DriverInfo) -> PeScript {
        PeScript::new(self, seed)
    }

    /// The table is there, a write without the WAL is one the system can
    /// make, a read test's rows are there; then the block cache is turned
    /// off if asked (restored by `verify`).
    async fn check(&self, script: &PeScript, conn: &mut C) -> Result<(), CheckError> {
        let o = &self.opts;
        if !o.write_to_wal {
            if let Some(why) = conn.refuses_skip_wal() {
                return Err(DriverError::fatal(format!("--write-to-wal false: {why}")).into());
            }
        }
        if conn.table_marker(&o.table).await?.is_none() {
            return Err(CheckError::NotPrepared(NotPrepared::missing(&format!(
                "table {}",
                o.table
            ))));
        }
        if !self.test.writes() {
            let last = o.total_rows() - 1;
            let mut key = [0; ROW_KEY_LEN];
            for row in [0, last] {
                row_key(row, &mut key);
                if !conn.get(&o.table, &key, FAMILY, &[], &mut |_| {}).await? {
                    return Err(CheckError::NotPrepared(NotPrepared(format!(
                        "table {} does not hold the {} rows {} reads (row {row} is missing): \
                         run sequentialWrite with the same --rows, --threads and --clients first",
                        o.table,
                        o.total_rows(),
                        self.test.as_str()
                    ))));
                }
            }
        }
        if !o.block_cache {
            let change = conn.set_block_cache(&o.table, FAMILY, false).await?;
            script.block_cache_changed(change);
        }
        Ok(())
    }

    async fn verify<D>(
        &self,
        script: &PeScript,
        driver: &D,
        connect_timeout: Duration,
    ) -> Result<Option<Verification>, DriverError>
    where
        D: Driver<Conn = C>,
    {
        script.verify(driver, connect_timeout).await
    }

    /// Creates the table only: writing is sequentialWrite's, as in PE.
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
        let splits = self.opts.split_keys();
        let splits: Vec<&[u8]> = splits.iter().map(|k| &k[..]).collect();
        let spec = TableSpec {
            table: &self.opts.table,
            family: FAMILY,
            key_column: "key",
            qualifiers: &[QUALIFIER],
            split_keys: &splits,
            marker: "",
        };
        create_table(&mut conn, spec, &*observer).await
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
        let force = how.force;
        let (table, own) = (&self.opts.table, Some(PE_KEYS));
        drop_table(table, own, force, driver, how.connect_timeout, observer).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_keys_are_pes_26_zero_padded_digits() {
        let mut key = [0; ROW_KEY_LEN];
        row_key(42, &mut key);
        assert_eq!(&key, b"00000000000000000000000042");
        assert_eq!(parse_row_key(&key), Some(42));
        row_key(u64::from(u32::MAX), &mut key);
        assert_eq!(&key, b"00000000000000004294967295");
        assert_eq!(parse_row_key(b"42"), None);
        assert_eq!(parse_row_key(b"0000000000000000000000004x"), None);
    }

    #[test]
    fn values_are_runs_of_eight_identical_letters() {
        let mut letters = [3u8, 25, 0].into_iter().cycle();
        let mut value = [0u8; 20];
        fill_value(&mut value, || letters.next().unwrap());
        assert_eq!(&value, b"DDDDDDDDZZZZZZZZAAAA");
        assert!(is_pe_value(&value, 20));
        assert!(!is_pe_value(&value, 21));
        assert!(!is_pe_value(b"DDDDDDDZ", 8));
        assert!(!is_pe_value(b"dddddddd", 8));
        assert!(!is_pe_value(b"DDDDDDDDZZZZZZZZAAAB", 20), "a bad tail");
        assert!(
            !is_pe_value(b"DDDDDDDDZZZZZZZZ@@@@", 20),
            "a tail of no letter"
        );
        assert!(
            !is_pe_value(b"DDDDDDDDZZZZZZZ\0AAAA", 20),
            "a bad whole run"
        );
    }

    fn opts() -> PeOptions {
        PeOptions {
            table: "TestTable".to_string(),
            rows: 1000,
            clients: 4,
            value_size: 1000,
            write_to_wal: true,
            multi_put: 0,
            auto_flush: false,
            caching: 30,
            presplit: 0,
            block_cache: true,
        }
    }

    #[test]
    fn a_runs_values_are_pes_and_its_own() {
        let (mut value, mut again) = ([0u8; 100], [0u8; 100]);
        run_value(7, 42, &mut value);
        run_value(7, 42, &mut again);
        assert_eq!(value, again, "drawn again for verify");
        assert!(is_pe_value(&value, 100));
        run_value(8, 42, &mut again);
        assert_ne!(value, again, "another run's");
        run_value(7, 43, &mut again);
        assert_ne!(value, again, "another row's");
    }

    #[test]
    fn requests_carry_one_put_a_multi_put_or_a_write_buffer() {
        let mut o = opts();
        assert_eq!(o.rows_per_write(), 2 * 1024 * 1024 / 1026);
        o.auto_flush = true;
        assert_eq!(o.rows_per_write(), 1);
        o.multi_put = 100;
        assert_eq!(o.rows_per_write(), 100);
        let w = PeWorkload {
            test: PeTest::RandomWrite,
            opts: o,
        };
        assert_eq!(w.events(), 40);
    }

    #[test]
    fn presplit_keys_cut_the_total_rows_evenly() {
        let mut o = opts();
        o.presplit = 4;
        let keys: Vec<Option<u64>> = o.split_keys().iter().map(|k| parse_row_key(k)).collect();
        assert_eq!(keys, [Some(1000), Some(2000), Some(3000)]);
        o.presplit = 1;
        assert!(o.split_keys().is_empty());
    }

    #[test]
    fn test_names_are_pes() {
        for t in PeTest::ALL {
            assert_eq!(PeTest::parse(t.as_str()), Some(t));
        }
        assert_eq!(PeTest::parse("scanRange50"), None);
    }
}
