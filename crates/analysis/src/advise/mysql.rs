//! MySQL and MariaDB: the field report's tuning list (back_log,
//! innodb_autoinc_lock_mode, query cache, net_write_timeout, tmp_table_size,
//! statement time limit, threads_running watermark).

use super::{missing, needs_run, on, size, Facts, Finding, Server, Verdict};

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
