//! `loadcell advise`: what to change in a server's configuration, and why,
//! from its settings and status and, when given, a run's result. Each rule
//! is a pure function over [`Facts`]; the CLI only gathers them.
//!
//! The MySQL rules and their wording of each problem come from the field
//! report's tuning list (`iov-cloud-perf-testing.txt`, "MySQL实例参数调优建议").

use std::collections::BTreeMap;

use serde::Serialize;

/// Which server the settings came from: rules and setting names differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Server {
    MySql,
    MariaDb,
    Postgres,
    Redis,
}

impl Server {
    /// The server of a product name as the drivers report it.
    pub fn of_product(product: &str) -> Option<Server> {
        match product {
            "MySQL" => Some(Server::MySql),
            "MariaDB" => Some(Server::MariaDb),
            "PostgreSQL" => Some(Server::Postgres),
            "Redis" | "Valkey" | "KeyDB" => Some(Server::Redis),
            _ => None,
        }
    }
}

/// What the advice reads.
#[derive(Debug, Clone)]
pub struct Facts {
    pub server: Server,
    /// Configuration under the server's own names (PostgreSQL's sizes in bytes).
    pub settings: BTreeMap<String, String>,
    /// Status counters since the server started (or since they were reset).
    pub status: BTreeMap<String, String>,
    /// Cores of the server's machine, when known.
    pub server_cores: Option<usize>,
    pub run: Option<RunFacts>,
}

/// What a run's result says that the rules weigh.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFacts {
    pub workload: String,
    pub sessions: usize,
    pub duration_s: f64,
    pub ops: u64,
    /// Operations of the `write` category.
    pub write_ops: u64,
    /// Operations whose kind is an insert.
    pub insert_ops: u64,
    pub errors: ErrorKinds,
    pub reconnects: u64,
    /// The slowest operation's latency, in ms.
    pub slowest_ms: f64,
    /// The highest value each of the server's gauges took in the run's
    /// samples (`threads_running`, `connected_clients`).
    pub server_peaks: BTreeMap<String, f64>,
    /// How much each of the server's counters grew during the run, from
    /// the rates its samples hold (`*_per_s`), under the name less that
    /// suffix (`created_tmp_disk_tables`).
    pub server_deltas: BTreeMap<String, f64>,
    /// The server process's highest CPU in the samples, percent of a core.
    pub server_cpu_peak_pct: Option<f64>,
    /// The run's wall-clock start and end, in Unix seconds.
    pub window: Option<(f64, f64)>,
}

/// A run's errors by what they say about the server's limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorKinds {
    /// Connections the server refused or never answered.
    pub connect: u64,
    /// Connections lost after they were made.
    pub lost: u64,
    /// Statements the server interrupted for running too long.
    pub statement_timeouts: u64,
}

impl ErrorKinds {
    /// Counts `count` errors of `class` with `message` (a result's error
    /// samples) under their kind.
    pub fn add(&mut self, class: &str, message: &str, count: u64) {
        let m = message.to_ascii_lowercase();
        if m.contains("max_statement_time") || m.contains("maximum statement execution time") {
            self.statement_timeouts += count;
        } else if m.contains("too many connections")
            || m.contains("too many clients")
            || m.contains("max number of clients")
            || m.contains("connecting to")
            || m.contains("refused")
        {
            self.connect += count;
        } else if class == "connection" {
            self.lost += count;
        }
    }
}

/// One rule that fired: what to change, why, and the numbers read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    /// Which servers the setting belongs to.
    pub applies_to: &'static str,
    pub change: String,
    pub why: &'static str,
    pub evidence: Vec<String>,
}

/// A rule's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Fires(Finding),
    Passes,
    /// The facts it needs are missing (no run, a setting the server lacks).
    Unknown(String),
}

/// Every rule's answer for one server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    pub server: Server,
    pub findings: Vec<Finding>,
    pub passed: Vec<&'static str>,
    /// Rules that could not be checked, and why.
    pub not_checked: Vec<NotChecked>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotChecked {
    pub rule: &'static str,
    pub why: String,
}

type Rule = (&'static str, fn(&Facts) -> Verdict);

const MYSQL_RULES: &[Rule] = &[
    ("back_log", back_log),
    ("innodb_autoinc_lock_mode", autoinc_lock_mode),
    ("query_cache", query_cache),
    ("net_write_timeout", net_write_timeout),
    ("tmp_table_size", tmp_table_size),
    ("statement_time_limit", statement_time_limit),
    ("threads_running_limit", threads_running_limit),
];

const POSTGRES_RULES: &[Rule] = &[
    ("shared_buffers", shared_buffers),
    ("max_connections", max_connections),
    ("max_wal_size", max_wal_size),
];

const REDIS_RULES: &[Rule] = &[
    ("maxclients", maxclients),
    ("io-threads", io_threads),
    ("persistence", persistence),
];

/// Runs every rule for the facts' server.
pub fn advise(facts: &Facts) -> Advice {
    let rules = match facts.server {
        Server::MySql | Server::MariaDb => MYSQL_RULES,
        Server::Postgres => POSTGRES_RULES,
        Server::Redis => REDIS_RULES,
    };
    let mut advice = Advice {
        server: facts.server,
        findings: Vec::new(),
        passed: Vec::new(),
        not_checked: Vec::new(),
    };
    for (name, rule) in rules {
        match rule(facts) {
            Verdict::Fires(f) => advice.findings.push(f),
            Verdict::Passes => advice.passed.push(name),
            Verdict::Unknown(why) => advice.not_checked.push(NotChecked { rule: name, why }),
        }
    }
    advice
}

impl Facts {
    fn setting(&self, name: &str) -> Option<&str> {
        self.settings.get(name).map(String::as_str)
    }

    fn setting_num(&self, name: &str) -> Option<f64> {
        self.setting(name)?.trim().parse().ok()
    }

    /// A status counter; 0 when the server does not report it.
    fn status_num(&self, name: &str) -> f64 {
        self.status
            .get(name)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Redis: the share of its main thread's CPU that running commands
    /// took (`INFO commandstats`' usec over `used_cpu_*_main_thread`), when
    /// the server reports both.
    fn redis_commands_share(&self) -> Option<f64> {
        let main_thread_s = self.status_num("used_cpu_user_main_thread")
            + self.status_num("used_cpu_sys_main_thread");
        let commands_usec: f64 = self
            .status
            .iter()
            .filter(|(name, _)| name.starts_with("cmdstat_"))
            .filter_map(|(_, stats)| {
                stats
                    .split(',')
                    .find_map(|field| field.strip_prefix("usec="))
                    .and_then(|usec| usec.parse::<f64>().ok())
            })
            .sum();
        (main_thread_s > 0.0 && commands_usec > 0.0)
            .then(|| (commands_usec / 1e6 / main_thread_s).min(1.0))
    }

    /// The highest a gauge was during the run, else its value now.
    fn peak(&self, run_gauge: &str, status: &str) -> f64 {
        self.run
            .as_ref()
            .and_then(|r| r.server_peaks.get(run_gauge).copied())
            .unwrap_or(0.0)
            .max(self.status_num(status))
    }
}

fn missing(what: &str) -> Verdict {
    Verdict::Unknown(format!("the server reports no {what}"))
}

fn needs_run(what: &str) -> Verdict {
    Verdict::Unknown(format!("needs a run's result (--result) for {what}"))
}

fn on(value: &str) -> bool {
    !matches!(
        value.trim().to_ascii_uppercase().as_str(),
        "OFF" | "0" | "NO" | "FALSE" | ""
    )
}

/// Sizes for evidence: `16M`, `256K`, or bytes.
fn size(bytes: f64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= MIB {
        format!("{:.0}M", bytes / MIB)
    } else if bytes >= 1024.0 {
        format!("{:.0}K", bytes / 1024.0)
    } else {
        format!("{bytes:.0}")
    }
}

// ---------------------------------------------------------------------------
// MySQL and MariaDB

/// Connection attempts that failed, server's count and the run's, against
/// a listen queue shorter than the connections that arrive together.
pub fn back_log(f: &Facts) -> Verdict {
    let Some(back_log) = f.setting_num("back_log") else {
        return missing("back_log");
    };
    let aborted = f.status_num("Aborted_connects");
    let run_failed = f.run.as_ref().map_or(0, |r| r.errors.connect);
    let max_used = f.status_num("Max_used_connections");
    let sessions = f.run.as_ref().map_or(0, |r| r.sessions) as f64;
    let arriving = max_used.max(sessions);
    if aborted + run_failed as f64 == 0.0 || back_log >= arriving {
        return Verdict::Passes;
    }
    Verdict::Fires(Finding {
        rule: "back_log",
        applies_to: "MySQL and MariaDB (a restart)",
        change: format!("raise back_log to at least {arriving:.0}"),
        why: "MySQL makes a thread per connection; while it does, new connection requests wait \
              in a queue of back_log entries, and past it they are refused: an application \
              opening many short connections sees `SQLSTATE[HY000] [2002] Connection timed out`",
        evidence: vec![
            format!("back_log = {back_log:.0}"),
            format!("Aborted_connects = {aborted:.0}"),
            format!("connections refused or timed out in the run: {run_failed}"),
            format!("connections arriving together: {arriving:.0} (Max_used_connections {max_used:.0}, the run's sessions {sessions:.0})"),
        ],
    })
}

/// The AUTO-INC table lock (modes 0 and 1) under concurrent inserts.
pub fn autoinc_lock_mode(f: &Facts) -> Verdict {
    let Some(mode) = f.setting_num("innodb_autoinc_lock_mode") else {
        return missing("innodb_autoinc_lock_mode");
    };
    let Some(run) = &f.run else {
        return needs_run("concurrent inserts");
    };
    if mode == 2.0 || run.insert_ops == 0 || run.sessions < 2 {
        return Verdict::Passes;
    }
    let binlog = f.setting("binlog_format").unwrap_or("unknown");
    Verdict::Fires(Finding {
        rule: "innodb_autoinc_lock_mode",
        applies_to: "MySQL and MariaDB (a restart)",
        change: "set innodb_autoinc_lock_mode = 2 (with binlog_format = ROW)".to_string(),
        why:
            "with modes 0 and 1 bulk inserts (LOAD DATA, INSERT … SELECT, REPLACE … SELECT) take a \
              table-level AUTO-INC lock, and concurrent loads deadlock on it (`TABLE LOCK … lock \
              mode AUTO-INC waiting`); mode 2 takes a light mutex for every insert, which avoids \
              the deadlock and speeds INSERT … SELECT up a lot",
        evidence: vec![
            format!("innodb_autoinc_lock_mode = {mode:.0}"),
            format!("binlog_format = {binlog}"),
            format!(
                "the run's inserts: {} over {} sessions",
                run.insert_ops, run.sessions
            ),
        ],
    })
}

/// The query cache on while the tables it caches are written.
pub fn query_cache(f: &Facts) -> Verdict {
    let (Some(kind), Some(bytes)) = (
        f.setting("query_cache_type"),
        f.setting_num("query_cache_size"),
    ) else {
        return Verdict::Passes; // MySQL 8 has no query cache
    };
    if !on(kind) || bytes == 0.0 {
        return Verdict::Passes;
    }
    let prunes = f.status_num("Qcache_lowmem_prunes");
    let writes = f.run.as_ref().map_or(0, |r| r.write_ops);
    if prunes == 0.0 && writes == 0 {
        return Verdict::Passes;
    }
    Verdict::Fires(Finding {
        rule: "query_cache",
        applies_to: "MySQL 5.7 and older, MariaDB",
        change: "turn the query cache off: query_cache_type = OFF, query_cache_size = 0"
            .to_string(),
        why: "every query locks the query cache first, and every INSERT, UPDATE and DELETE \
              invalidates the cached results of its table; with frequent writes reads and writes \
              wait for each other on that lock (sessions in `Waiting for query cache lock`, \
              `checking query cache for query`) and selects slow down",
        evidence: vec![
            format!(
                "query_cache_type = {kind}, query_cache_size = {}",
                size(bytes)
            ),
            format!("Qcache_lowmem_prunes = {prunes:.0}"),
            format!(
                "Qcache_hits = {:.0}, Qcache_inserts = {:.0}",
                f.status_num("Qcache_hits"),
                f.status_num("Qcache_inserts")
            ),
            format!("the run's writes: {writes}"),
        ],
    })
}

/// The server's default net_write_timeout; the report's advice is never
/// to go below it.
const NET_WRITE_TIMEOUT_DEFAULT_S: f64 = 60.0;

/// Connections the run lost while net_write_timeout is below its default.
/// (Not the server's `Aborted_clients`: it also counts every client that
/// closes its socket without saying goodbye, loadcell's sessions included.)
pub fn net_write_timeout(f: &Facts) -> Verdict {
    let Some(timeout) = f.setting_num("net_write_timeout") else {
        return missing("net_write_timeout");
    };
    let Some(run) = &f.run else {
        return needs_run("connections lost");
    };
    if timeout >= NET_WRITE_TIMEOUT_DEFAULT_S || run.errors.lost == 0 {
        return Verdict::Passes;
    }
    Verdict::Fires(Finding {
        rule: "net_write_timeout",
        applies_to: "MySQL and MariaDB",
        change: format!("raise net_write_timeout to at least {NET_WRITE_TIMEOUT_DEFAULT_S:.0}"),
        why: "it is how long the server waits to send a block to the client; on a slow network, \
              or with a client that takes long over each block of a large result, a short one \
              drops the connection (`The last packet successfully received from the server was \
              … milliseconds ago`)",
        evidence: vec![
            format!("net_write_timeout = {timeout:.0} s"),
            format!(
                "connections lost in the run: {} ({} reconnects)",
                run.errors.lost, run.reconnects
            ),
        ],
    })
}

/// Internal temporary tables that went to disk, above this share, ...
const TMP_DISK_SHARE: f64 = 0.25;
/// ... out of at least this many.
const TMP_TABLES_MIN: f64 = 20.0;

/// Internal temporary tables too large for memory.
pub fn tmp_table_size(f: &Facts) -> Verdict {
    let (Some(tmp), Some(heap)) = (
        f.setting_num("tmp_table_size"),
        f.setting_num("max_heap_table_size"),
    ) else {
        return missing("tmp_table_size or max_heap_table_size");
    };
    // The run's own tables when it sampled them, else the server's since
    // it started.
    let during_run = f.run.as_ref().and_then(|r| {
        Some((
            *r.server_deltas.get("created_tmp_tables")?,
            *r.server_deltas.get("created_tmp_disk_tables")?,
        ))
    });
    let ((tables, disk), counted) = match during_run {
        Some(counts) => (counts, "during the run".to_string()),
        None => (
            (
                f.status_num("Created_tmp_tables"),
                f.status_num("Created_tmp_disk_tables"),
            ),
            format!(
                "over {:.0} s since the server started or FLUSH STATUS",
                f.status_num("Uptime_since_flush_status")
            ),
        ),
    };
    if tables < TMP_TABLES_MIN || disk / tables <= TMP_DISK_SHARE {
        return Verdict::Passes;
    }
    Verdict::Fires(Finding {
        rule: "tmp_table_size",
        applies_to: "MySQL and MariaDB",
        change: format!(
            "raise tmp_table_size and max_heap_table_size together, above {} (the smaller of the \
             two is the limit), if the server has the memory; or make the GROUP BY and DISTINCT \
             queries use an index",
            size(tmp.min(heap))
        ),
        why: "GROUP BY, DISTINCT and the like that no index serves build an internal temporary \
              table; one larger than min(tmp_table_size, max_heap_table_size) — allocated per \
              session — is converted to a table on disk, and the statement takes longer",
        evidence: vec![
            format!(
                "tmp_table_size = {}, max_heap_table_size = {}",
                size(tmp),
                size(heap)
            ),
            format!(
                "Created_tmp_disk_tables = {disk:.0} of Created_tmp_tables = {tables:.0} ({:.0}%)",
                100.0 * disk / tables
            ),
            format!("counted {counted}"),
        ],
    })
}

/// A statement this slow is a long one.
const LONG_STATEMENT_MS: f64 = 1000.0;

/// No bound on statement time while statements run long, or a bound that
/// kills them.
pub fn statement_time_limit(f: &Facts) -> Verdict {
    // MariaDB's is in seconds and covers every statement; MySQL's in ms,
    // SELECTs only.
    let (name, limit_s, killed_counter, applies_to) =
        if let Some(s) = f.setting_num("max_statement_time") {
            (
                "max_statement_time",
                s,
                "Max_statement_time_exceeded",
                "MariaDB (max_statement_time, seconds)",
            )
        } else if let Some(ms) = f.setting_num("max_execution_time") {
            (
                "max_execution_time",
                ms / 1000.0,
                "Max_execution_time_exceeded",
                "MySQL 5.7.8 and later (max_execution_time, ms, SELECT only)",
            )
        } else {
            return missing("max_statement_time or max_execution_time");
        };
    // A run's own interrupted statements, when there is a run: the
    // server's counter holds every statement since it started.
    let killed = match &f.run {
        Some(r) => r.errors.statement_timeouts as f64,
        None => f.status_num(killed_counter),
    };
    let slowest = f.run.as_ref().map_or(0.0, |r| r.slowest_ms);
    let slow_queries = f.status_num("Slow_queries");
    let evidence = vec![
        format!("{name} = {limit_s} s"),
        format!("{killed_counter} = {:.0}", f.status_num(killed_counter)),
        format!(
            "statements the run saw interrupted: {}",
            f.run.as_ref().map_or(0, |r| r.errors.statement_timeouts)
        ),
        format!("the run's slowest operation: {slowest:.0} ms"),
        format!(
            "Slow_queries = {slow_queries:.0} (long_query_time = {} s)",
            f.setting("long_query_time").unwrap_or("?")
        ),
    ];
    let why = "it bounds how long a statement may run; past it the statement fails (`ERROR 3006 \
               (HY000): Query execution was interrupted, max_statement_time exceeded`). Unset \
               (0), a runaway query holds its thread and locks for as long as it runs";
    if limit_s > 0.0 && killed > 0.0 {
        return Verdict::Fires(Finding {
            rule: "statement_time_limit",
            applies_to,
            change: format!(
                "{killed:.0} statements were killed by {name} = {limit_s} s: raise it above the \
                 longest statement the application means to run, or make those statements faster"
            ),
            why,
            evidence,
        });
    }
    if limit_s == 0.0 && (slowest >= LONG_STATEMENT_MS || slow_queries > 0.0) {
        return Verdict::Fires(Finding {
            rule: "statement_time_limit",
            applies_to,
            change: format!(
                "set {name} to bound statements that run long (a few times the longest one the \
                 application means to run)"
            ),
            why,
            evidence,
        });
    }
    Verdict::Passes
}

/// Sessions this many times the cores count as far more than them ...
const SESSIONS_PER_CORE: f64 = 4.0;
/// ... and statements running at once this many times the cores as high.
const RUNNING_PER_CORE: f64 = 2.0;
/// RDS's default high watermark: no limit in practice.
const RDS_WATERMARK_DEFAULT: f64 = 50000.0;

/// Far more sessions than cores, many running at once, nothing capping
/// them.
pub fn threads_running_limit(f: &Facts) -> Verdict {
    let pool = f
        .setting("thread_handling")
        .is_some_and(|h| h.eq_ignore_ascii_case("pool-of-threads"));
    let concurrency = f.setting_num("innodb_thread_concurrency").unwrap_or(0.0);
    let watermark = f
        .setting_num("rds_threads_running_high_watermark")
        .unwrap_or(RDS_WATERMARK_DEFAULT);
    if pool || concurrency > 0.0 || watermark < RDS_WATERMARK_DEFAULT {
        return Verdict::Passes;
    }
    let Some(cores) = f.server_cores else {
        return Verdict::Unknown(
            "the server's cores are unknown (a server on another host: give --server-cores)"
                .to_string(),
        );
    };
    let Some(run) = &f.run else {
        return needs_run("the sessions against the cores");
    };
    let cores = cores as f64;
    let running = f.peak("threads_running", "Threads_running");
    if (run.sessions as f64) < SESSIONS_PER_CORE * cores || running < RUNNING_PER_CORE * cores {
        return Verdict::Passes;
    }
    let change = if f.server == Server::MariaDb {
        format!("cap the statements running at once: thread_handling = pool-of-threads (a restart) with thread_pool_size = {cores:.0}")
    } else {
        format!(
            "cap the statements running at once: innodb_thread_concurrency = {:.0} (or RDS's \
             rds_threads_running_high_watermark)",
            RUNNING_PER_CORE * cores
        )
    };
    Verdict::Fires(Finding {
        rule: "threads_running_limit",
        applies_to: "MySQL (innodb_thread_concurrency; RDS rds_threads_running_high_watermark), MariaDB (thread pool)",
        change,
        why: "with far more sessions than cores and no cap on the statements running at once, \
              they all run together and contend for CPU and locks; under spikes (flash sales, \
              high concurrency) a cap protects the database",
        evidence: vec![
            format!("the run's sessions: {} on {cores:.0} cores", run.sessions),
            format!("Threads_running peak: {running:.0}"),
            format!(
                "thread_handling = {}, innodb_thread_concurrency = {}",
                f.setting("thread_handling").unwrap_or("(none)"),
                f.setting("innodb_thread_concurrency").unwrap_or("(none)")
            ),
        ],
    })
}

// ---------------------------------------------------------------------------
// PostgreSQL

/// A buffer hit ratio below this, ...
const PG_HIT_RATIO: f64 = 0.99;
/// ... over at least this many block reads and hits.
const PG_BLOCKS_MIN: f64 = 10_000.0;

/// Reads missing shared_buffers while the data would fit in more of them.
pub fn shared_buffers(f: &Facts) -> Verdict {
    let Some(buffers) = f.setting_num("shared_buffers") else {
        return missing("shared_buffers");
    };
    let hit = f.status_num("blks_hit");
    let read = f.status_num("blks_read");
    let data = f.status_num("database_size_bytes");
    if hit + read < PG_BLOCKS_MIN || hit / (hit + read) >= PG_HIT_RATIO || buffers >= data {
        return Verdict::Passes;
    }
    Verdict::Fires(Finding {
        rule: "shared_buffers",
        applies_to: "PostgreSQL (a restart)",
        change: format!(
            "raise shared_buffers toward the data's size ({}), up to about a quarter of the \
             server's memory",
            size(data)
        ),
        why: "blocks not in shared_buffers are read from the operating system's cache or the \
              disk on every miss; a working set larger than the buffers keeps evicting itself",
        evidence: vec![
            format!("shared_buffers = {}", size(buffers)),
            format!("database size = {}", size(data)),
            format!(
                "buffer hit ratio {:.2}% (blks_hit {hit:.0}, blks_read {read:.0})",
                100.0 * hit / (hit + read)
            ),
        ],
    })
}

/// The run's sessions, or the connections refused, against max_connections.
pub fn max_connections(f: &Facts) -> Verdict {
    let Some(max) = f.setting_num("max_connections") else {
        return missing("max_connections");
    };
    let reserved = f
        .setting_num("superuser_reserved_connections")
        .unwrap_or(0.0);
    let Some(run) = &f.run else {
        return needs_run("the sessions against max_connections");
    };
    let usable = max - reserved;
    if run.errors.connect == 0 && (run.sessions as f64) <= usable {
        return Verdict::Passes;
    }
    Verdict::Fires(Finding {
        rule: "max_connections",
        applies_to: "PostgreSQL (a restart)",
        change: format!(
            "raise max_connections above {} (the run's sessions plus the reserved and other \
             clients), or put a pooler (PgBouncer) in front",
            run.sessions as f64 + reserved
        ),
        why: "past max_connections less the superuser-reserved slots the server refuses new \
              connections (`sorry, too many clients already`)",
        evidence: vec![
            format!("max_connections = {max:.0}, superuser_reserved_connections = {reserved:.0}"),
            format!("the run's sessions: {}", run.sessions),
            format!("connections refused in the run: {}", run.errors.connect),
        ],
    })
}

/// Checkpoints requested by WAL volume rather than by the timer.
pub fn max_wal_size(f: &Facts) -> Verdict {
    let Some(wal) = f.setting_num("max_wal_size") else {
        return missing("max_wal_size");
    };
    let timed = f.status_num("checkpoints_timed");
    let requested = f.status_num("checkpoints_req");
    if requested == 0.0 || requested <= timed {
        return Verdict::Passes;
    }
    Verdict::Fires(Finding {
        rule: "max_wal_size",
        applies_to: "PostgreSQL",
        change: format!(
            "raise max_wal_size above {} so that checkpoints come from checkpoint_timeout",
            size(wal)
        ),
        why: "when max_wal_size of WAL fills before checkpoint_timeout, a checkpoint is forced: \
              frequent checkpoints write every dirty buffer each time and make the next writes \
              log whole pages again",
        evidence: vec![
            format!("max_wal_size = {}", size(wal)),
            format!("checkpoints requested {requested:.0}, timed {timed:.0}"),
            format!(
                "checkpoint_timeout = {} s",
                f.setting("checkpoint_timeout").unwrap_or("?")
            ),
        ],
    })
}

// ---------------------------------------------------------------------------
// Redis

/// Connections rejected, or the run's connections above maxclients.
pub fn maxclients(f: &Facts) -> Verdict {
    let Some(max) = f.setting_num("maxclients") else {
        return missing("maxclients");
    };
    let rejected = f.status_num("rejected_connections");
    let sessions = f.run.as_ref().map_or(0, |r| r.sessions);
    let refused = f.run.as_ref().map_or(0, |r| r.errors.connect);
    if rejected == 0.0 && refused == 0 && sessions as f64 <= max {
        return Verdict::Passes;
    }
    Verdict::Fires(Finding {
        rule: "maxclients",
        applies_to: "Redis",
        change: format!(
            "raise maxclients above {} (the client connections at the peak), with the open-files \
             limit to match",
            (sessions as f64).max(f.peak("connected_clients", "connected_clients"))
        ),
        why: "past maxclients Redis closes new connections at once (`ERR max number of clients \
              reached`)",
        evidence: vec![
            format!("maxclients = {max:.0}"),
            format!("rejected_connections = {rejected:.0}"),
            format!("the run's connections: {sessions}, refused: {refused}"),
        ],
    })
}

/// The main thread this busy counts as CPU-bound, percent of a core ...
const REDIS_CPU_BOUND_PCT: f64 = 90.0;
/// ... with at least this many clients.
const REDIS_MANY_CLIENTS: usize = 64;

/// ... unless running the commands took at least this share of the main
/// thread's CPU.
const REDIS_COMMANDS_BOUND: f64 = 0.5;

/// One I/O thread while the server is CPU-bound under many clients, on
/// reading and writing sockets rather than on the commands themselves.
pub fn io_threads(f: &Facts) -> Verdict {
    let threads = f.setting_num("io-threads").unwrap_or(1.0);
    let Some(run) = &f.run else {
        return needs_run("the server's CPU under load");
    };
    let Some(cpu) = run.server_cpu_peak_pct else {
        return Verdict::Unknown(
            "the run measured no server CPU (a server on another host)".to_string(),
        );
    };
    if threads > 1.0 || run.sessions < REDIS_MANY_CLIENTS || cpu < REDIS_CPU_BOUND_PCT {
        return Verdict::Passes;
    }
    // I/O threads take over sockets, never commands: a main thread busy
    // running commands (Lua, big sorts) gains nothing from them.
    let commands = f.redis_commands_share();
    if commands.is_some_and(|share| share >= REDIS_COMMANDS_BOUND) {
        return Verdict::Passes;
    }
    let cores = f.server_cores.unwrap_or(2).max(2);
    Verdict::Fires(Finding {
        rule: "io-threads",
        applies_to: "Redis 6 and later (a restart)",
        change: format!(
            "set io-threads to {} (fewer than the cores) so that reading and writing sockets \
             leaves the main thread",
            (cores - 1).min(8)
        ),
        why: "with one thread Redis reads requests and writes replies for every client on the \
              thread that runs the commands; at high client counts that thread saturates",
        evidence: vec![
            format!("io-threads = {threads:.0}"),
            format!("server CPU peak {cpu:.0}% of a core"),
            format!("the run's connections: {}", run.sessions),
        ]
        .into_iter()
        .chain(commands.map(|share| {
            format!(
                "commands took {:.0}% of the main thread's CPU; the rest went to sockets",
                share * 100.0
            )
        }))
        .collect(),
    })
}

/// Persistence that works during a write test: fsync on every write, RDB
/// snapshots or AOF rewrites.
pub fn persistence(f: &Facts) -> Verdict {
    let Some(run) = &f.run else {
        return needs_run("a write test");
    };
    if run.write_ops == 0 {
        return Verdict::Passes;
    }
    let aof = f.setting("appendonly").is_some_and(|v| v == "yes");
    let fsync = f.setting("appendfsync").unwrap_or("");
    let save = f.setting("save").unwrap_or("");
    let last_save = f.status_num("rdb_last_save_time");
    let saved_during = run
        .window
        .is_some_and(|(start, end)| last_save >= start && last_save <= end);
    let busy = f.status_num("rdb_bgsave_in_progress") > 0.0
        || f.status_num("aof_rewrite_in_progress") > 0.0;
    let mut change = Vec::new();
    if aof && fsync == "always" {
        change.push("appendfsync everysec instead of always (at most a second of writes lost)");
    }
    if saved_during || busy {
        change.push(
            "no RDB save points (save \"\") or rarer ones during the test, or measure with \
             persistence as production runs it and say so",
        );
    }
    if change.is_empty() {
        return Verdict::Passes;
    }
    Verdict::Fires(Finding {
        rule: "persistence",
        applies_to: "Redis",
        change: change.join("; "),
        why: "`appendfsync always` waits for the disk on every write, and an RDB snapshot or AOF \
              rewrite forks the server and copies its pages while the test writes: either \
              measures the disk and the fork, not the commands",
        evidence: vec![
            format!("appendonly = {}, appendfsync = {fsync}", if aof { "yes" } else { "no" }),
            format!("save = \"{save}\""),
            format!(
                "snapshot during the run: {}; rdb_bgsave_in_progress = {:.0}, aof_rewrite_in_progress = {:.0}",
                if saved_during { "yes" } else { "no" },
                f.status_num("rdb_bgsave_in_progress"),
                f.status_num("aof_rewrite_in_progress")
            ),
            format!("the run's writes: {}", run.write_ops),
        ],
    })
}

#[cfg(test)]
mod tests;
