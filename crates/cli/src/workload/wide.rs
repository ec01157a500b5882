//! The wide-column workloads' options: HBase PerformanceEvaluation's
//! tests and options, by PE's names where a flag can carry them
//! (`--multi-put` for `--multiPut`), validated into [`PeOptions`], listed.

use clap::{ArgAction, Args};
use loadcell_core::Family;
use loadcell_workloads::wide::{PeOptions, PeTest, PeWorkload};

use loadcell_workloads::workload::Workload;

use super::{CliFamily, Entry, FamilySpec, RunShape, WorkloadArgs};

/// PE's defaults: `--rows` 1 Mi per client, `--valueSize` 1000,
/// `--caching` 30, table `TestTable`.
#[derive(Debug, Clone, Args)]
#[command(
    next_help_heading = "Wide-column workload options (HBase PE: sequentialWrite, randomWrite, randomRead, sequentialRead, scan, scanRange10/100/1000)"
)]
pub struct WideArgs {
    /// Rows per client (session: --threads x --clients); the keys span rows x clients, as PE's totalRows.
    #[arg(long, value_name = "N", default_value_t = 1_048_576)]
    pub rows: u64,
    /// Bytes of each row's value: runs of 8 identical random letters, as PE's.
    #[arg(long, value_name = "BYTES", default_value_t = 1000)]
    pub value_size: usize,
    /// Writes: false skips the write-ahead log (HBase's SKIP_WAL); Cassandra refuses it.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    pub write_to_wal: bool,
    /// Writes: each request sends N puts (HBase putMultiple); needs --auto-flush true, as in PE.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub multi_put: u64,
    /// Writes: true sends each put (or --multi-put batch) at once; false buffers 2 MB of puts a request (PE's BufferedMutator).
    #[arg(long, value_name = "BOOL", default_value_t = false, action = ArgAction::Set)]
    pub auto_flush: bool,
    /// Scans: rows fetched per round trip (scanner caching; CQL's page size).
    #[arg(long, value_name = "N")]
    pub caching: Option<u32>,
    /// prepare: regions the table is created with, split evenly over the rows (HBase; CQL partitions by token).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub presplit: u32,
    /// Reads and scans: off turns the family's block cache off for the run and restores it after (Cassandra: the table's key cache).
    #[arg(long, value_name = "on|off")]
    pub block_cache: Option<String>,
    /// The table written and read.
    #[arg(long, value_name = "NAME", default_value = "TestTable")]
    pub table: String,
}

impl CliFamily for WideArgs {
    const WHAT: &'static str = "a wide-column (HBase PE) workload option";
    type Spec = PeWorkload;

    fn catalog() -> Vec<Entry> {
        const WIDE: &[Family] = &[Family::WIDE_COLUMN];
        vec![
            ("sequentialWrite", WIDE, "HBase PE: every client's --rows rows in key order (26-digit keys, --value-size values), a put, --multi-put N puts or a 2 MB buffer a request; rows/s, then the server's row count"),
            ("randomWrite", WIDE, "HBase PE: as many puts to random rows of the key space; rows/s, then the server's row count against the distinct rows acknowledged"),
            ("randomRead", WIDE, "HBase PE: gets of random rows of a table sequentialWrite filled, each value checked; --block-cache off for cold reads"),
            ("sequentialRead", WIDE, "HBase PE: gets of every row in key order, each value checked"),
            ("scan", WIDE, "HBase PE: each client scans from its first row, --caching rows a round trip; rows/s"),
            ("scanRange10", WIDE, "HBase PE: scans of up to 10 rows from a random row"),
            ("scanRange100", WIDE, "HBase PE: scans of up to 100 rows from a random row"),
            ("scanRange1000", WIDE, "HBase PE: scans of up to 1000 rows from a random row"),
        ]
    }

    fn names(name: &str) -> bool {
        PeTest::parse(name).is_some()
    }

    fn resolve(name: &str, all: &WorkloadArgs, given: &[String]) -> Result<PeWorkload, String> {
        resolve(name, &all.wide, given)
    }
}

impl FamilySpec for PeWorkload {
    fn workload(&self) -> &dyn Workload {
        self
    }

    fn prepare_hint(&self) -> String {
        format!("--table {}", self.opts.table)
    }

    /// Every row a PE test writes or reads is one event.
    fn implied_events(&self, _all: &WorkloadArgs, _sessions: u64, _timed: bool) -> Option<u64> {
        Some(self.events())
    }

    /// A client is a session: the key space is `--rows` for each.
    fn fit_run(&mut self, run: &mut RunShape) -> Result<(), String> {
        self.opts.clients = (run.threads * run.clients) as u64;
        Ok(())
    }
}

crate::launch::runs_on!(PeWorkload: wide);

const WRITE_ONLY: &[&str] = &["--write-to-wal", "--multi-put", "--auto-flush"];
const READ_ONLY: &[&str] = &["--caching", "--block-cache"];

fn resolve(name: &str, a: &WideArgs, given: &[String]) -> Result<PeWorkload, String> {
    let test = PeTest::parse(name).expect("names() said it is a PE test");
    let other = if test.writes() { READ_ONLY } else { WRITE_ONLY };
    if let Some(flag) = given.iter().find(|f| other.contains(&f.as_str())) {
        return Err(format!("{flag} does not apply to {name}"));
    }
    if a.rows == 0 || a.value_size == 0 {
        return Err("--rows and --value-size must be at least 1".to_string());
    }
    if a.multi_put > 0 && !a.auto_flush {
        return Err(
            "--multi-put sends N puts a request only with --auto-flush true (PE ignores it otherwise)"
                .to_string(),
        );
    }
    let caching = a.caching.unwrap_or(30);
    if caching == 0 {
        return Err("--caching must be at least 1".to_string());
    }
    let block_cache = match a.block_cache.as_deref() {
        None | Some("on") => true,
        Some("off") => false,
        Some(other) => return Err(format!("--block-cache takes on or off, got '{other}'")),
    };
    if a.table.is_empty() {
        return Err("--table names the table".to_string());
    }
    Ok(PeWorkload {
        test,
        opts: PeOptions {
            table: a.table.clone(),
            rows: a.rows,
            clients: 1,
            value_size: a.value_size,
            write_to_wal: a.write_to_wal,
            multi_put: a.multi_put,
            auto_flush: a.auto_flush,
            caching,
            presplit: a.presplit,
            block_cache,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve_with(name: &str, a: &WideArgs, given: &[&str]) -> Result<PeWorkload, String> {
        let given: Vec<String> = given.iter().map(|s| s.to_string()).collect();
        resolve(name, a, &given)
    }

    fn args() -> WideArgs {
        super::super::WorkloadArgs::defaults().wide
    }

    #[test]
    fn defaults_are_pes() {
        let w = resolve_with("randomRead", &args(), &[]).unwrap();
        let o = &w.opts;
        assert_eq!(
            (o.rows, o.value_size, o.caching, o.table.as_str()),
            (1_048_576, 1000, 30, "TestTable")
        );
        assert!(o.write_to_wal && !o.auto_flush && o.block_cache);
    }

    #[test]
    fn bad_options_are_one_line_errors() {
        let mut a = args();
        a.multi_put = 100;
        let e = resolve_with("randomWrite", &a, &["--multi-put"]).unwrap_err();
        assert!(e.contains("--auto-flush true"), "{e}");
        a.auto_flush = true;
        assert_eq!(
            resolve_with("randomWrite", &a, &["--multi-put", "--auto-flush"])
                .unwrap()
                .opts
                .rows_per_write(),
            100
        );
        let e = resolve_with("randomRead", &a, &["--multi-put"]).unwrap_err();
        assert_eq!(e, "--multi-put does not apply to randomRead");
        let e = resolve_with("sequentialWrite", &args(), &["--caching"]).unwrap_err();
        assert_eq!(e, "--caching does not apply to sequentialWrite");
        let mut a = args();
        a.block_cache = Some("cold".to_string());
        let e = resolve_with("randomRead", &a, &["--block-cache"]).unwrap_err();
        assert!(e.contains("on or off") && !e.contains('\n'), "{e}");
    }
}
