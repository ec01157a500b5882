//! PostgreSQL: shared_buffers, max_connections and max_wal_size.

use super::{missing, needs_run, size, Facts, Finding, Verdict};

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
