//! Each rule at the edges of its thresholds, on facts written by hand; the
//! rules against real servers are in `crates/cli/tests/advise_*.rs`.

use super::*;

fn facts(server: Server, settings: &[(&str, &str)], status: &[(&str, &str)]) -> Facts {
    let map = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    Facts {
        server,
        settings: map(settings),
        status: map(status),
        server_cores: Some(2),
        run: None,
    }
}

fn with_run(mut f: Facts, run: RunFacts) -> Facts {
    f.run = Some(run);
    f
}

fn fires(v: Verdict) -> Finding {
    match v {
        Verdict::Fires(f) => f,
        other => panic!("expected a finding, got {other:?}"),
    }
}

#[test]
fn back_log_fires_only_with_failed_connects_and_a_shorter_queue() {
    let f = |back_log: &str, aborted: &str| {
        facts(
            Server::MariaDb,
            &[("back_log", back_log)],
            &[
                ("Aborted_connects", aborted),
                ("Max_used_connections", "16"),
            ],
        )
    };
    assert_eq!(back_log(&f("15", "0")), Verdict::Passes);
    assert_eq!(back_log(&f("16", "3")), Verdict::Passes);
    let finding = fires(back_log(&f("15", "3")));
    assert_eq!(finding.change, "raise back_log to at least 16");
    assert!(finding
        .evidence
        .contains(&"Aborted_connects = 3".to_string()));
    // The run's refused connects count too, and its sessions arrive together.
    let run = RunFacts {
        sessions: 40,
        errors: ErrorKinds {
            connect: 2,
            ..ErrorKinds::default()
        },
        ..RunFacts::default()
    };
    assert!(back_log(&with_run(f("20", "0"), run)) != Verdict::Passes);
}

#[test]
fn autoinc_lock_mode_needs_concurrent_inserts() {
    let f = |mode: &str| facts(Server::MySql, &[("innodb_autoinc_lock_mode", mode)], &[]);
    assert!(matches!(autoinc_lock_mode(&f("1")), Verdict::Unknown(_)));
    let run = |sessions, inserts| RunFacts {
        sessions,
        insert_ops: inserts,
        ..RunFacts::default()
    };
    assert_eq!(
        autoinc_lock_mode(&with_run(f("1"), run(1, 100))),
        Verdict::Passes
    );
    assert_eq!(
        autoinc_lock_mode(&with_run(f("1"), run(4, 0))),
        Verdict::Passes
    );
    assert_eq!(
        autoinc_lock_mode(&with_run(f("2"), run(4, 100))),
        Verdict::Passes
    );
    fires(autoinc_lock_mode(&with_run(f("1"), run(2, 1))));
}

#[test]
fn query_cache_fires_when_on_and_written_or_pruned() {
    let f = |kind: &str, size: &str, prunes: &str| {
        facts(
            Server::MariaDb,
            &[("query_cache_type", kind), ("query_cache_size", size)],
            &[("Qcache_lowmem_prunes", prunes)],
        )
    };
    assert_eq!(query_cache(&f("OFF", "1048576", "5")), Verdict::Passes);
    assert_eq!(query_cache(&f("ON", "0", "5")), Verdict::Passes);
    assert_eq!(query_cache(&f("ON", "1048576", "0")), Verdict::Passes);
    fires(query_cache(&f("ON", "1048576", "1")));
    fires(query_cache(&f("DEMAND", "1048576", "1")));
    let writes = RunFacts {
        write_ops: 1,
        ..RunFacts::default()
    };
    fires(query_cache(&with_run(f("ON", "1048576", "0"), writes)));
    // MySQL 8 has no query cache at all.
    assert_eq!(
        query_cache(&facts(Server::MySql, &[], &[])),
        Verdict::Passes
    );
}

#[test]
fn net_write_timeout_fires_below_the_default_with_lost_connections() {
    let f = |t: &str, lost| {
        with_run(
            facts(Server::MariaDb, &[("net_write_timeout", t)], &[]),
            RunFacts {
                errors: ErrorKinds {
                    lost,
                    ..ErrorKinds::default()
                },
                ..RunFacts::default()
            },
        )
    };
    assert_eq!(net_write_timeout(&f("60", 9)), Verdict::Passes);
    assert_eq!(net_write_timeout(&f("59", 0)), Verdict::Passes);
    fires(net_write_timeout(&f("59", 1)));
}

#[test]
fn tmp_tables_fire_past_a_quarter_on_disk_of_enough_tables() {
    let f = |tables: &str, disk: &str| {
        facts(
            Server::MariaDb,
            &[
                ("tmp_table_size", "16777216"),
                ("max_heap_table_size", "16384"),
            ],
            &[
                ("Created_tmp_tables", tables),
                ("Created_tmp_disk_tables", disk),
            ],
        )
    };
    assert_eq!(tmp_table_size(&f("19", "19")), Verdict::Passes);
    assert_eq!(tmp_table_size(&f("100", "25")), Verdict::Passes);
    let finding = fires(tmp_table_size(&f("100", "26")));
    assert!(finding.change.contains("above 16K"), "{}", finding.change);
    // A run that sampled the counters is judged on its own tables.
    let run = |tables: f64, disk: f64| RunFacts {
        server_deltas: [
            ("created_tmp_tables".to_string(), tables),
            ("created_tmp_disk_tables".to_string(), disk),
        ]
        .into(),
        ..RunFacts::default()
    };
    assert_eq!(
        tmp_table_size(&with_run(f("100", "90"), run(100.0, 10.0))),
        Verdict::Passes
    );
    let finding = fires(tmp_table_size(&with_run(f("0", "0"), run(100.0, 30.0))));
    assert!(finding
        .evidence
        .contains(&"counted during the run".to_string()));
}

#[test]
fn statement_time_fires_unset_with_long_statements_or_set_and_killing() {
    let run = |slowest_ms| RunFacts {
        slowest_ms,
        ..RunFacts::default()
    };
    let mariadb = |limit: &str, killed: &str, slowest| {
        with_run(
            facts(
                Server::MariaDb,
                &[("max_statement_time", limit)],
                &[("Max_statement_time_exceeded", killed)],
            ),
            run(slowest),
        )
    };
    assert_eq!(
        statement_time_limit(&mariadb("0.000000", "0", 999.0)),
        Verdict::Passes
    );
    let unset = fires(statement_time_limit(&mariadb("0.000000", "0", 1000.0)));
    assert!(unset.change.starts_with("set max_statement_time"));
    assert!(unset.applies_to.starts_with("MariaDB"));
    assert_eq!(
        statement_time_limit(&mariadb("5", "0", 3000.0)),
        Verdict::Passes
    );
    // With a run, its own interrupted statements count, not the server's
    // since it started.
    assert_eq!(
        statement_time_limit(&mariadb("0.5", "3", 600.0)),
        Verdict::Passes
    );
    let mut killing = mariadb("0.5", "0", 600.0);
    killing.run.as_mut().unwrap().errors.statement_timeouts = 3;
    let killing = fires(statement_time_limit(&killing));
    assert!(killing.change.starts_with("3 statements were killed"));
    // MySQL's is in milliseconds.
    let mysql = facts(
        Server::MySql,
        &[("max_execution_time", "2000")],
        &[("Max_execution_time_exceeded", "1")],
    );
    let f = fires(statement_time_limit(&mysql));
    assert!(
        f.change.contains("max_execution_time = 2 s"),
        "{}",
        f.change
    );
    assert!(f.applies_to.starts_with("MySQL"));
}

#[test]
fn threads_running_fires_with_far_more_sessions_than_cores_all_running() {
    let run = |sessions, running: f64| RunFacts {
        sessions,
        server_peaks: [("threads_running".to_string(), running)].into(),
        ..RunFacts::default()
    };
    let f = |settings: &[(&str, &str)], r| with_run(facts(Server::MariaDb, settings, &[]), r);
    let none = &[("thread_handling", "one-thread-per-connection")];
    assert_eq!(
        threads_running_limit(&f(none, run(7, 8.0))),
        Verdict::Passes
    );
    assert_eq!(
        threads_running_limit(&f(none, run(8, 3.0))),
        Verdict::Passes
    );
    let finding = fires(threads_running_limit(&f(none, run(8, 4.0))));
    assert!(finding.change.contains("pool-of-threads"));
    let pool = &[("thread_handling", "pool-of-threads")];
    assert_eq!(
        threads_running_limit(&f(pool, run(80, 40.0))),
        Verdict::Passes
    );
    let capped = &[("innodb_thread_concurrency", "4")];
    assert_eq!(
        threads_running_limit(&f(capped, run(80, 40.0))),
        Verdict::Passes
    );
    let mut unknown = f(none, run(80, 40.0));
    unknown.server_cores = None;
    assert!(matches!(
        threads_running_limit(&unknown),
        Verdict::Unknown(_)
    ));
}

#[test]
fn shared_buffers_fire_below_99_percent_hits_when_the_data_is_larger() {
    let f = |hit: &str, read: &str, buffers: &str| {
        facts(
            Server::Postgres,
            &[("shared_buffers", buffers)],
            &[
                ("blks_hit", hit),
                ("blks_read", read),
                ("database_size_bytes", "1000000"),
            ],
        )
    };
    assert_eq!(shared_buffers(&f("9000", "999", "131072")), Verdict::Passes);
    assert_eq!(shared_buffers(&f("9900", "100", "131072")), Verdict::Passes);
    assert_eq!(
        shared_buffers(&f("9000", "1000", "1000000")),
        Verdict::Passes
    );
    fires(shared_buffers(&f("9899", "101", "131072")));
}

#[test]
fn max_connections_fire_past_the_usable_slots_or_on_refusals() {
    let f = |sessions, refused| {
        with_run(
            facts(
                Server::Postgres,
                &[
                    ("max_connections", "20"),
                    ("superuser_reserved_connections", "3"),
                ],
                &[],
            ),
            RunFacts {
                sessions,
                errors: ErrorKinds {
                    connect: refused,
                    ..ErrorKinds::default()
                },
                ..RunFacts::default()
            },
        )
    };
    assert_eq!(max_connections(&f(17, 0)), Verdict::Passes);
    fires(max_connections(&f(18, 0)));
    fires(max_connections(&f(4, 1)));
}

#[test]
fn max_wal_size_fires_when_requested_checkpoints_outnumber_timed() {
    let f = |timed: &str, req: &str| {
        facts(
            Server::Postgres,
            &[("max_wal_size", "33554432")],
            &[("checkpoints_timed", timed), ("checkpoints_req", req)],
        )
    };
    assert_eq!(max_wal_size(&f("0", "0")), Verdict::Passes);
    assert_eq!(max_wal_size(&f("3", "3")), Verdict::Passes);
    let finding = fires(max_wal_size(&f("3", "4")));
    assert!(finding.change.contains("above 32M"));
}

#[test]
fn maxclients_fires_on_rejections_or_more_connections() {
    let f = |rejected: &str, sessions| {
        with_run(
            facts(
                Server::Redis,
                &[("maxclients", "10")],
                &[("rejected_connections", rejected)],
            ),
            RunFacts {
                sessions,
                ..RunFacts::default()
            },
        )
    };
    assert_eq!(maxclients(&f("0", 10)), Verdict::Passes);
    fires(maxclients(&f("0", 11)));
    fires(maxclients(&f("1", 2)));
}

#[test]
fn io_threads_fire_with_one_thread_busy_under_many_clients() {
    let f = |threads: &str, sessions, cpu| {
        with_run(
            facts(Server::Redis, &[("io-threads", threads)], &[]),
            RunFacts {
                sessions,
                server_cpu_peak_pct: Some(cpu),
                ..RunFacts::default()
            },
        )
    };
    assert_eq!(io_threads(&f("1", 63, 99.0)), Verdict::Passes);
    assert_eq!(io_threads(&f("1", 64, 89.0)), Verdict::Passes);
    assert_eq!(io_threads(&f("2", 64, 99.0)), Verdict::Passes);
    fires(io_threads(&f("1", 64, 90.0)));
}

#[test]
fn io_threads_pass_when_commands_not_sockets_take_the_main_thread() {
    let f = |get_usec: &str| {
        let get = format!("calls=1000,usec={get_usec},usec_per_call=1.00");
        with_run(
            facts(
                Server::Redis,
                &[("io-threads", "1")],
                &[
                    ("used_cpu_user_main_thread", "1.5"),
                    ("used_cpu_sys_main_thread", "0.5"),
                    ("cmdstat_get", get.as_str()),
                ],
            ),
            RunFacts {
                sessions: 64,
                server_cpu_peak_pct: Some(99.0),
                ..RunFacts::default()
            },
        )
    };
    // 0.2 s of 2 s: sockets took the thread.
    let evidence = fires(io_threads(&f("200000"))).evidence;
    assert!(
        evidence.iter().any(|e| e.contains("commands took 10%")),
        "{evidence:?}"
    );
    // 1.2 s of 2 s: the commands did.
    assert_eq!(io_threads(&f("1200000")), Verdict::Passes);
}

#[test]
fn persistence_fires_on_fsync_always_or_a_snapshot_during_the_writes() {
    let f = |settings: &[(&str, &str)], last_save: &str, writes| {
        with_run(
            facts(
                Server::Redis,
                settings,
                &[("rdb_last_save_time", last_save)],
            ),
            RunFacts {
                write_ops: writes,
                window: Some((1000.0, 1010.0)),
                ..RunFacts::default()
            },
        )
    };
    let quiet = &[
        ("appendonly", "no"),
        ("appendfsync", "always"),
        ("save", ""),
    ];
    assert_eq!(persistence(&f(quiet, "999", 100)), Verdict::Passes);
    fires(persistence(&f(quiet, "1000", 100)));
    assert_eq!(persistence(&f(quiet, "1000", 0)), Verdict::Passes);
    let always = &[("appendonly", "yes"), ("appendfsync", "always")];
    let finding = fires(persistence(&f(always, "0", 1)));
    assert!(finding.change.starts_with("appendfsync everysec"));
    let everysec = &[("appendonly", "yes"), ("appendfsync", "everysec")];
    assert_eq!(persistence(&f(everysec, "0", 1)), Verdict::Passes);
}

#[test]
fn error_messages_sort_into_kinds() {
    let mut k = ErrorKinds::default();
    k.add(
        "connection",
        "timed out after 5s connecting to 127.0.0.1:3306",
        2,
    );
    k.add("fatal", "Too many connections (code 1040)", 1);
    k.add(
        "connection",
        "lost connection to 127.0.0.1:3306: the server closed it",
        3,
    );
    k.add(
        "retryable",
        "Query execution was interrupted (max_statement_time exceeded) (code 1969)",
        4,
    );
    k.add("retryable", "Deadlock found", 5);
    assert_eq!(
        k,
        ErrorKinds {
            connect: 3,
            lost: 3,
            statement_timeouts: 4
        }
    );
}

#[test]
fn advise_runs_the_servers_rules_and_sorts_their_answers() {
    let a = advise(&facts(
        Server::Redis,
        &[("maxclients", "10")],
        &[("rejected_connections", "1")],
    ));
    assert_eq!(a.findings.len(), 1);
    assert_eq!(a.findings[0].rule, "maxclients");
    let not_checked: Vec<&str> = a.not_checked.iter().map(|n| n.rule).collect();
    assert_eq!(not_checked, ["io-threads", "persistence"]);
    assert!(a.passed.is_empty());
}
