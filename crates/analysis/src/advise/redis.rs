//! Redis: maxclients, io-threads and persistence.

use super::{missing, needs_run, Facts, Finding, Verdict};

impl Facts {
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
}

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
