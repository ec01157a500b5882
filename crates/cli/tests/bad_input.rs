//! Bad input gets one clear line naming the problem, a non-zero exit, and
//! no load: no result file is written.

mod common;

use common::*;

#[test]
fn unknown_workload_lists_the_valid_ones() {
    fails_with(
        &["run", "oltp_nope"],
        &[
            "unknown workload 'oltp_nope'",
            "oltp_read_write",
            "oltp_delete",
        ],
    );
}

#[test]
fn stages_that_cannot_run_are_refused_in_one_line() {
    let kv = |more: &[&'static str]| [&["run", "kv", "--target", "sim://"][..], more].concat();
    fails_with(&kv(&["--stages", "-1s:100"]), &["cannot be negative"]);
    fails_with(&kv(&["--stages", "10s:100,5s"]), &["not DURATION:TARGET"]);
    for (with, value) in [("--rate", "5"), ("--time", "5s")] {
        fails_with(
            &kv(&["--stages", "10s:100", with, value]),
            &["--stages", "cannot be used with", with],
        );
        fails_with(
            &kv(&["--session-stages", "10s:4", with, value]),
            &["--session-stages", "cannot be used with", with],
        );
    }
    fails_with(
        &kv(&["--session-stages", "10s:4", "--stages", "10s:100"]),
        &["cannot be used with"],
    );
    fails_with(
        &kv(&["--session-stages", "10s:4", "--clients", "8"]),
        &["--session-stages", "cannot be used with", "--clients"],
    );
    fails_with(&kv(&["--session-stages", "10s:2.5"]), &["whole number"]);
    fails_with(
        &kv(&["--stages", "10s:100", "--warmup", "auto"]),
        &["--warmup auto waits for a steady load"],
    );
    fails_with(&kv(&["--warmup", "soon"]), &["or auto"]);
    fails_with(
        &[
            "findmax",
            "kv",
            "--target",
            "sim://",
            "--sla",
            "p99<=10ms",
            "--stages",
            "10s:100",
        ],
        &["findmax probes one fixed rate at a time"],
    );
    fails_with(&kv(&["--session-stages", "10s:0"]), &["run no session"]);
    // Families without a rate, or without closed-loop sessions.
    let conns = |more: &[&'static str]| {
        [
            &["run", "http-conns", "--target", "http://127.0.0.1:9"][..],
            more,
        ]
        .concat()
    };
    fails_with(
        &conns(&["--stages", "10s:100"]),
        &["--stages shapes the rate", "does not apply to http-conns"],
    );
    fails_with(
        &conns(&["--session-stages", "10s:4"]),
        &["--session-stages does not apply to http-conns"],
    );
    fails_with(
        &["run", "disk-randread", "--stages", "10s:100"],
        &["--stages shapes the rate"],
    );
}

#[test]
fn unknown_option() {
    fails_with(
        &["run", "oltp_read_write", "--thraeds", "4"],
        &["--thraeds"],
    );
}

#[test]
fn a_rate_tick_needs_a_rate() {
    fails_with(
        &["run", "kv", "--target", "sim://", "--rate-tick", "1ms"],
        &["required arguments were not provided: --rate <PER_SEC>"],
    );
    fails_with(
        &[
            "run",
            "kv",
            "--target",
            "sim://",
            "--rate",
            "10",
            "--rate-tick",
            "0",
        ],
        &["--rate-tick", "must be greater than 0"],
    );
}

#[test]
fn malformed_and_unsupported_urls() {
    fails_with(
        &[
            "run",
            "oltp_read_write",
            "--target",
            "mysql://root:hunter2@[oops/db",
        ],
        &["malformed target URL"],
    );
    fails_with(
        &["run", "oltp_read_write", "--target", "localhost:3306"],
        &["unsupported target scheme 'localhost:'", "mysql:"],
    );
    fails_with(
        &["run", "oltp_read_write", "--target", "oracle://db:1521/x"],
        &["unsupported target scheme 'oracle:'", "postgres:"],
    );
}

#[test]
fn secrets_are_not_echoed_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let o = loadcell(
        dir.path(),
        &[
            "run",
            "oltp_read_write",
            "--target",
            "mysql://root:hunter2@[oops/db",
        ],
    );
    assert!(!stderr(&o).contains("hunter2"), "{}", stderr(&o));
}

#[test]
fn options_of_another_workload_are_refused_not_ignored() {
    for flag in ["--random-data", "--distinct-client-seed", "--randomize"] {
        fails_with(
            &["run", "oltp_read_write", flag],
            &[flag, "is a key-value (kv workload) option"],
        );
    }
    // Options of a family with defaults are refused too, even at their
    // default value: clap says whether the command line gave them.
    for (workload, flag) in [("kv", "--tables"), ("ycsb-a", "--table-size")] {
        fails_with(
            &["run", workload, "--target", "sim://", flag, "1"],
            &[flag, "is an OLTP (sysbench) option"],
        );
    }
    fails_with(
        &["run", "ycsb-a", "--key-median", "5"],
        &["--key-median", "is a key-value (kv workload) option"],
    );
    fails_with(
        &["run", "oltp_point_select", "--command-ratio", "2"],
        &["--command-ratio", "is a key-value (kv workload) option"],
    );
    let rtb = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/datasets/rtb.toml"
    );
    for (flag, value) in [("--key-zipf-exp", "0.9"), ("--key-stddev", "10")] {
        fails_with(
            &["run", "kv", "--dataset", rtb, flag, value],
            &[flag, "does not apply with --dataset"],
        );
    }
}

/// Every sweep step is configured and checked (workload options, target,
/// driver) before the first one sends load: a bad last value ends the
/// command before any step runs, not after the first steps ran.
#[test]
fn a_sweep_step_that_cannot_run_is_refused_before_the_first_step() {
    fails_with(
        &[
            "sweep",
            "kv",
            "--target",
            "sim://?latency=fixed:1ms",
            "--key-minimum",
            "5",
            "--key-maximum",
            "100,1",
            "--time",
            "1s",
        ],
        &["--key-minimum 5 is greater than --key-maximum 1"],
    );
}

#[test]
fn server_pid_that_does_not_exist() {
    // sweep and findmax refuse it before their first step starts.
    for command in [
        &["run", "kv"][..],
        &["sweep", "kv", "--clients", "1,2"],
        &["findmax", "kv", "--sla", "p99<=2ms"],
    ] {
        let mut args = command.to_vec();
        args.extend(["--target", "sim://", "--server-pid", "4000000000"]);
        fails_with(
            &args,
            &["--server-pid 4000000000: no such process on this host"],
        );
    }
}

#[test]
fn more_workers_than_sessions() {
    fails_with(
        &[
            "run",
            "kv",
            "--target",
            "sim://",
            "--threads",
            "2",
            "--clients",
            "2",
            "--workers",
            "5",
        ],
        &[
            "--workers 5",
            "--threads 2 x --clients 2 = 4",
            "--workers 4 at most",
        ],
    );
    // A sweep checks every step before its first: threads 4 is fine, 1 is not.
    fails_with(
        &[
            "sweep",
            "kv",
            "--target",
            "sim://",
            "--threads",
            "4,1",
            "--workers",
            "2",
        ],
        &["--workers 2", "--threads 1 x --clients 1 = 1"],
    );
    fails_with(
        &["run", "oltp_read_write", "--workers", "0"],
        &["--workers", "greater than 0"],
    );
    // Another session group's sessions count: 1 bulk and 2 query sessions.
    fails_with(
        &[
            "run",
            "search-mixed",
            "--target",
            "opensearch://127.0.0.1:1",
            "--query-clients",
            "2",
            "--workers",
            "4",
        ],
        &[
            "--workers 4",
            "--threads 1 x --clients 1 + 2 of other session groups = 3",
            "--workers 3 at most",
        ],
    );
}

#[test]
fn zero_or_negative_numbers() {
    fails_with(
        &["run", "oltp_read_write", "--threads", "0"],
        &["--threads", "greater than 0"],
    );
    fails_with(
        &["run", "oltp_read_write", "--threads", "-2"],
        &["--threads", "greater than 0"],
    );
    fails_with(
        &["run", "oltp_read_write", "--time", "0"],
        &["--time", "greater than 0"],
    );
    fails_with(
        &["run", "oltp_read_write", "--time", "-5s"],
        &["--time", "negative"],
    );
    fails_with(
        &["run", "oltp_read_write", "--rate", "0"],
        &["--rate", "greater than 0"],
    );
    fails_with(
        &["run", "oltp_read_write", "--rate", "-100"],
        &["--rate", "greater than 0"],
    );
}

#[test]
fn unreachable_host_is_named() {
    let port = loadcell_testkit::closed_port();
    let target = format!("mysql://root:pw@127.0.0.1:{port}/db");
    fails_with(
        &[
            "run",
            "oltp_read_write",
            "--target",
            &target,
            "--connect-timeout",
            "2s",
        ],
        &[&format!("127.0.0.1:{port}"), "refused"],
    );
    let target = format!("postgres://u:pw@127.0.0.1:{port}/db");
    fails_with(
        &["run", "oltp_point_select", "--target", &target],
        &[&format!("127.0.0.1:{port}")],
    );
}

#[test]
fn bad_distribution_name() {
    fails_with(
        &["run", "oltp_read_write", "--rand-type", "normal"],
        &["--rand-type", "uniform, gaussian"],
    );
}

#[test]
fn help_and_list_work() {
    let dir = tempfile::tempdir().unwrap();
    let o = ok(loadcell(dir.path(), &["--help"]));
    assert!(stdout(&o).contains("Examples:"));
    let o = ok(loadcell(dir.path(), &["list"]));
    let out = stdout(&o);
    for w in [
        "oltp_read_write",
        "oltp_update_non_index",
        "sqlite",
        "mysql",
        "postgres",
    ] {
        assert!(out.contains(w), "{w} in {out}");
    }
}

#[test]
fn numbers_too_large_to_run() {
    fails_with(
        &["run", "kv", "--target", "sim://", "--time", "1e19"],
        &["--time", "a year at most"],
    );
    fails_with(
        &["run", "kv", "--target", "sim://", "--warmup", "400d"],
        &["--warmup", "a year at most"],
    );
    fails_with(
        &[
            "run",
            "kv",
            "--target",
            "sim://",
            "--threads",
            "4294967296",
            "--clients",
            "4294967296",
        ],
        &[
            "--threads 4294967296 x --clients 4294967296",
            "more sessions",
        ],
    );
}

/// `report --html results/*.json`: the shell gives the first result to
/// --html; it must not be overwritten.
#[test]
fn a_result_file_is_never_overwritten_by_a_report() {
    let dir = tempfile::tempdir().unwrap();
    for out in ["a.json", "b.json"] {
        ok(loadcell(
            dir.path(),
            &[
                "run",
                "kv",
                "--target",
                "sim://",
                "--requests",
                "10",
                "--out",
                out,
            ],
        ));
    }
    let before = std::fs::read(dir.path().join("a.json")).unwrap();
    let o = loadcell(dir.path(), &["report", "--html", "a.json", "b.json"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("--html a.json is a loadcell result file"),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.path().join("a.json")).unwrap(), before);
}

/// An unwritable result path is found before the run, not after it.
#[test]
fn an_unwritable_result_path_fails_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blocker"), "a file, not a directory").unwrap();
    let o = loadcell(
        dir.path(),
        &[
            "run",
            "kv",
            "--target",
            "sim://?latency=fixed:1s",
            "--time",
            "30s",
            "--out",
            "blocker/r.json",
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("cannot write the result file blocker/r.json"),
        "{err}"
    );
    // Refused at once: the 30 s run never started.
    assert!(!err.contains("Running kv"), "{err}");
}

#[test]
fn disk_workloads_refuse_devices_files_and_unknown_modes_before_any_io() {
    let existing = tempfile::NamedTempFile::new().unwrap();
    let file = existing.path().to_str().unwrap();
    fails_with(
        &["run", "disk-randread", "--directory", "/dev/null"],
        &[
            "--directory /dev/null is a device",
            "never writes to a device",
        ],
    );
    fails_with(
        &["run", "disk-randread", "--directory", file],
        &[
            "is an existing file",
            "never writes to a file it did not create",
        ],
    );
    fails_with(
        &["run", "disk-randread", "--directory", "/no/such/dir"],
        &["--directory /no/such/dir does not exist"],
    );
    fails_with(
        &["run", "disk-randwrite", "--target", "file:///dev/sda"],
        &[
            "disk-randwrite takes --directory DIR",
            "not --target file:///dev/sda",
        ],
    );
    fails_with(
        &["run", "disk", "--rw", "randtrim"],
        &["unknown --rw 'randtrim'", "randrw"],
    );
    fails_with(
        &["run", "disk-randread", "--rw", "write"],
        &["disk-randread runs --rw randread", "`disk --rw write`"],
    );
    fails_with(
        &[
            "run",
            "disk-randread",
            "--expect-iops",
            "min(1200+30*TiB,20000)",
        ],
        &["expected a number, GiB, min or max at character 13 ('T')"],
    );
    fails_with(
        &["run", "disk-randread", "--rate", "100"],
        &["--rate does not apply to disk-randread", "--iodepth"],
    );
    fails_with(
        &["run", "cpu", "--iodepth", "4"],
        &["--iodepth is not an option of workload cpu"],
    );
    // Nothing was written next to the file either.
    assert_eq!(
        std::fs::read_dir(existing.path().parent().unwrap())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("loadcell-fio-"))
            .count(),
        0
    );
}

#[test]
fn workloads_without_data_say_there_is_nothing_to_prepare_or_clean_up() {
    // Refused before any connection: nothing listens on port 9.
    fails_with(
        &["prepare", "http", "--target", "http://127.0.0.1:9"],
        &["the http workload loads nothing"],
    );
    fails_with(
        &["cleanup", "http-cps", "--target", "http://127.0.0.1:9"],
        &["the http-cps workload creates nothing"],
    );
    fails_with(&["prepare", "cpu"], &["the cpu workload loads nothing"]);
}

#[test]
fn search_options_are_checked_before_any_connection() {
    // Nothing listens on port 9: each is refused before connecting.
    let dir = tempfile::tempdir().unwrap();
    let bad_doc = dir.path().join("docs.json");
    std::fs::write(&bad_doc, "{\"a\": 1}\n{\"a\": \n").unwrap();
    let bad_doc = bad_doc.to_str().unwrap();
    let queries = dir.path().join("q.toml");
    std::fs::write(
        &queries,
        "[[query]]\nbody = '{\"query\":{\"term\":{\"x\":\"${nope}\"}}}'\n",
    )
    .unwrap();
    let queries = queries.to_str().unwrap();
    let target = "opensearch://127.0.0.1:9";
    let run = |workload: &'static str, args: &[&'static str]| {
        let mut all = vec!["run", workload, "--target", target];
        all.extend_from_slice(args);
        all
    };
    fails_with(
        &run("search-bulk", &["--bulk-size", "0"]),
        &["--bulk-size must be at least 1"],
    );
    fails_with(
        &run("search-bulk", &["--generator", "tweets"]),
        &["--generator 'tweets' is not a generator: use geonames or logs"],
    );
    fails_with(
        &run(
            "search-bulk",
            &["--generator", "logs", "--corpus", "/nonexistent.json"],
        ),
        &["give --generator or --corpus, not both"],
    );
    fails_with(
        &run("search-bulk", &["--corpus", "/nonexistent/docs.json.gz"]),
        &["--corpus /nonexistent/docs.json.gz: No such file"],
    );
    let mut args = run("search-bulk", &["--corpus"]);
    args.push(bad_doc);
    fails_with(&args, &[&format!("--corpus {bad_doc}:2: not JSON")]);
    let mut args = run("search-query", &["--query-file"]);
    args.push(queries);
    fails_with(&args, &["query 1:", "no parameter 'nope'"]);
    fails_with(
        &run("search-query", &["--query", "fuzzy"]),
        &["--query 'fuzzy' is not a query kind"],
    );
    fails_with(
        &run("search-bulk", &["--query", "term"]),
        &["--query does not apply to search-bulk"],
    );
    fails_with(
        &run("search-bulk", &["--method", "POST"]),
        &["--method is an HTTP workload option; workload search-bulk does not take it"],
    );
}
