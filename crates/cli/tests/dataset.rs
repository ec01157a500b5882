//! Mixed data sets (`kv --dataset FILE`) through the binary against real
//! Redis and memcached servers: prepare loads every key type with its key
//! lengths, field counts and value sizes; runs record ops per key type in
//! their shares with the hot set taking its fraction; memcached refuses
//! hashes before connecting; cleanup deletes exactly what prepare loaded.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// 1000 keys, 2:7:1: 200 hashes, 700 strings, 100 big strings; the first
/// half of each type is hot and takes 80% of the accesses.
const SET: &str = r#"
name = "t"
keys = 1000
hot_set = 0.5
hot_access = 0.8

[[type]]
name = "profile"
kind = "hash"
share = 2
key_length = 34
fields = 10
field_name_length = 10
value_size = "20-80"

[[type]]
name = "small"
kind = "string"
share = 7
key_length = 68
value_size = 32

[[type]]
name = "big"
kind = "string"
share = 1
key_length = 19
value_size = "500-2000"
"#;

/// (op name prefix, key prefix, count, hot count).
const TYPES: [(&str, &str, u64, u64); 3] = [
    ("profile", "t:0:", 200, 100),
    ("small", "t:1:", 700, 350),
    ("big", "t:2:", 100, 50),
];

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Key `n` of a type: its prefix and the number zero-padded to `len`.
fn key(prefix: &str, len: usize, n: u64) -> String {
    format!("{prefix}{n:0>width$}", width = len - prefix.len())
}

fn run(dir: &Path, args: &[&str]) -> Value {
    let out = dir.join(format!("r-{}.json", std::process::id() ^ rand_suffix()));
    let out_s = out.display().to_string();
    let mut all = vec!["run", "kv", "--out", out_s.as_str()];
    all.extend(args);
    ok(loadcell(dir, &all));
    let r = read_json(&out);
    assert_valid_result(&r);
    assert_eq!(s(&r, "/status"), "complete");
    assert_eq!(u(&r, "/summary/errors"), 0);
    r
}

fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(1 << 20);
    N.fetch_add(1, Ordering::Relaxed)
}

fn count(r: &Value, op: &str) -> u64 {
    r.pointer(&format!("/ops/{op}/count"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// Lua over every key given: min and max of HLEN, and of each field's
/// length (hashes), or of STRLEN (strings).
const SIZES: &str = "local a, b, c, d = 1e9, 0, 1e9, 0 \
    for _, k in ipairs(KEYS) do \
      if redis.call('TYPE', k).ok == 'hash' then \
        local n = redis.call('HLEN', k) a = math.min(a, n) b = math.max(b, n) \
        for _, f in ipairs(redis.call('HKEYS', k)) do \
          if #f ~= 10 then return redis.error_reply('field name ' .. f) end \
          local l = redis.call('HSTRLEN', k, f) c = math.min(c, l) d = math.max(d, l) end \
      else local l = redis.call('STRLEN', k) c = math.min(c, l) d = math.max(d, l) end \
    end return {a, b, c, d}";

#[test]
fn redis_prepare_run_cleanup() {
    let server = loadcell_testkit::redis().expect("Redis starts");
    let dir = tempfile::tempdir().unwrap();
    let cli = |args: &[&str]| {
        loadcell_testkit::redis_cli(server.port, args)
            .unwrap()
            .trim()
            .to_string()
    };
    let file = write(dir.path(), "t.toml", SET);
    let file = file.to_str().unwrap();
    let url = server.url().to_string();
    let t = ["--dataset", file, "--target", url.as_str()];
    // A key of someone else's, which cleanup must leave alone.
    cli(&["SET", "theirs", "1"]);

    // Not loaded yet: the run is refused before any load, not a run of
    // misses reported as a success.
    let mut args = vec!["run", "kv", "--time", "2s"];
    args.extend(t);
    let o = loadcell(dir.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "data set 't' is not loaded (no key 'loadcell:dataset:t') at {url}: run `loadcell prepare kv --target '{url}' --dataset {file}` first"
        )),
        "{}",
        stderr(&o)
    );

    let mut args = vec!["prepare", "kv", "--threads", "3"];
    args.extend(t);
    let o = stderr(&ok(loadcell(dir.path(), &args)));
    assert!(
        o.contains("Loading data set 't' (1000 keys: 200 profile (hashes of 10 fields), 700 small, 100 big; shares 2:7:1)"),
        "{o}"
    );
    assert_eq!(cli(&["DBSIZE"]), "1002", "1000 keys, the marker and theirs");
    let lens = [34, 68, 19];
    for ((_, prefix, n, _), len) in TYPES.iter().zip(lens) {
        let keys: Vec<String> = cli(&["--scan", "--pattern", &format!("{prefix}*")])
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(keys.len() as u64, *n, "{prefix}");
        assert!(keys.iter().all(|k| k.len() == len), "{prefix}: {keys:?}");
        assert!(keys.contains(&key(prefix, len, n - 1)), "{prefix}");
        let mut eval = vec!["EVAL", SIZES];
        let n_keys = keys.len().to_string();
        eval.push(&n_keys);
        eval.extend(keys.iter().map(String::as_str));
        let got: Vec<u64> = cli(&eval).lines().map(|l| l.parse().unwrap()).collect();
        let (lo, hi) = (got[2], got[3]);
        match *prefix {
            "t:0:" => {
                assert_eq!(&got[..2], [10, 10], "every hash has 10 fields");
                assert!(lo >= 20 && hi <= 80 && hi - lo > 40, "{got:?}");
            }
            "t:1:" => assert_eq!((lo, hi), (32, 32)),
            _ => assert!(lo >= 500 && hi <= 2000 && hi - lo > 1000, "{got:?}"),
        }
    }

    // Idempotent.
    let o = stderr(&ok(loadcell(dir.path(), &args)));
    assert!(
        o.contains("Data set 't' is already loaded") && o.contains("nothing to do"),
        "{o}"
    );

    // Reads only: every type in its share, every read a hit.
    let mut args = vec![
        "--ratio",
        "0:1",
        "--pipeline",
        "8",
        "--events",
        "500",
        "--seed",
        "5",
    ];
    args.extend(t);
    let r = run(dir.path(), &args);
    assert_eq!(s(&r, "/config/workload"), "kv");
    assert_eq!(r["config"]["workload_options"]["shares"], "2:7:1");
    let reads: Vec<u64> = TYPES
        .iter()
        .map(|(op, ..)| count(&r, &format!("{op}_read")))
        .collect();
    assert_eq!(reads.iter().sum::<u64>(), 4000, "{reads:?}");
    for (got, share) in reads.iter().zip([0.2, 0.7, 0.1]) {
        assert!((*got as f64 / 4000.0 - share).abs() < 0.03, "{reads:?}");
    }
    assert_eq!(s(&r, "/ops/profile_read/category"), "read");
    assert_eq!(u(&r, "/summary/hits"), 4000);
    assert_eq!(u(&r, "/summary/misses"), 0);

    // With the cold keys gone, hits are the hot set's share of accesses.
    for (_, prefix, n, hot) in TYPES {
        let len = lens[TYPES.iter().position(|t| t.1 == prefix).unwrap()];
        let cold: Vec<String> = (hot..n).map(|k| key(prefix, len, k)).collect();
        let mut del = vec!["DEL"];
        del.extend(cold.iter().map(String::as_str));
        assert_eq!(cli(&del), (n - hot).to_string());
    }
    let r = run(dir.path(), &args);
    let (hits, misses) = (u(&r, "/summary/hits"), u(&r, "/summary/misses"));
    assert_eq!(hits + misses, 4000);
    let hot = hits as f64 / 4000.0;
    assert!((hot - 0.8).abs() < 0.03, "hot share {hot}");

    // Writes by ratio, of every type, with a deeper pipeline over 4 sessions.
    let mut args = vec![
        "--ratio",
        "1:1",
        "--pipeline",
        "16",
        "--events",
        "200",
        "--threads",
        "2",
        "--clients",
        "2",
    ];
    args.extend(t);
    let r = run(dir.path(), &args);
    for (op, ..) in TYPES {
        let (rd, wr) = (
            count(&r, &format!("{op}_read")),
            count(&r, &format!("{op}_write")),
        );
        assert!(rd > 0 && wr > 0, "{op}: {rd} reads, {wr} writes");
    }
    let writes: u64 = TYPES
        .iter()
        .map(|(op, ..)| count(&r, &format!("{op}_write")))
        .sum();
    assert_eq!(writes, 1600, "half of 3200 requests");
    // A write of one field keeps each hash at 10 fields.
    assert_eq!(cli(&["HLEN", &key("t:0:", 34, 0)]), "10");

    // Keys that loadcell did not load are never overwritten.
    let other = write(
        dir.path(),
        "u.toml",
        &SET.replace("name = \"t\"", "name = \"u\"\nkey_prefix = \"t:\""),
    );
    let o = loadcell(
        dir.path(),
        &[
            "prepare",
            "kv",
            "--dataset",
            other.to_str().unwrap(),
            "--target",
            &url,
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("key 't:0:") && err.contains("not loaded by loadcell"),
        "{err}"
    );

    // Options the file decides are refused.
    let o = loadcell(
        dir.path(),
        &[
            "run",
            "kv",
            "--dataset",
            file,
            "--target",
            &url,
            "--key-prefix",
            "x",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--key-prefix does not apply with --dataset"),
        "{}",
        stderr(&o)
    );

    let o = stderr(&ok(loadcell(
        dir.path(),
        &["cleanup", "kv", "--dataset", file, "--target", &url],
    )));
    // Of the cold keys deleted above, the writes put some back (a hash
    // with the one field written): those are loadcell's too.
    assert!(
        o.contains("keys of data set 't' (") && o.contains("loadcell loaded were gone already)"),
        "{o}"
    );
    assert!(!o.contains("not loadcell's"), "{o}");
    assert_eq!(cli(&["DBSIZE"]), "1", "only theirs is left");
    assert_eq!(cli(&["GET", "theirs"]), "1");
    let o = stderr(&ok(loadcell(
        dir.path(),
        &["cleanup", "kv", "--dataset", file, "--target", &url],
    )));
    assert!(o.contains("Nothing to clean up"), "{o}");
}

#[test]
fn memcached_takes_strings_and_refuses_hashes_before_connecting() {
    let server = loadcell_testkit::memcached().expect("memcached starts");
    let port = server.port;
    let dir = tempfile::tempdir().unwrap();
    let hashes = write(dir.path(), "t.toml", SET);
    let closed = format!("memcached://127.0.0.1:{}", loadcell_testkit::closed_port());
    let url = server.url().to_string();
    for target in [url.as_str(), closed.as_str()] {
        for cmd in ["prepare", "run", "cleanup"] {
            let o = loadcell(
                dir.path(),
                &[
                    cmd,
                    "kv",
                    "--dataset",
                    hashes.to_str().unwrap(),
                    "--target",
                    target,
                ],
            );
            assert_eq!(o.status.code(), Some(1));
            let err = stderr(&o);
            assert!(
                err.contains("data set 't'")
                    && err.contains("has hash keys (type 'profile')")
                    && err.contains("memcached only gets and sets strings")
                    && err.contains("redis"),
                "{err}"
            );
            assert!(!err.contains("connect"), "{err}");
        }
    }

    // Strings only: loaded and read back.
    let hash_table = SET.find("[[type]]\nname = \"profile\"").unwrap();
    let small_table = SET.find("[[type]]\nname = \"small\"").unwrap();
    let strings = SET[..hash_table].to_string() + &SET[small_table..];
    let strings = write(dir.path(), "s.toml", &strings);
    let t = [
        "--dataset",
        strings.to_str().unwrap(),
        "--target",
        url.as_str(),
    ];
    // A key of someone else's, which cleanup must leave alone.
    assert_eq!(
        memcached_says(port, "set theirs 0 0 1\r\n1\r\n"),
        "STORED\r\n"
    );
    let mut args = vec!["prepare", "kv"];
    args.extend(t);
    let o = stderr(&ok(loadcell(dir.path(), &args)));
    assert!(
        o.contains("1000 keys: 875 small, 125 big; shares 7:1"),
        "{o}"
    );
    let o = stderr(&ok(loadcell(dir.path(), &args)));
    assert!(o.contains("nothing to do"), "{o}");
    let mut args = vec!["--ratio", "1:3", "--pipeline", "4", "--events", "250"];
    args.extend(t);
    let r = run(dir.path(), &args);
    assert_eq!(count(&r, "small_read") + count(&r, "big_read"), 750);
    assert_eq!(u(&r, "/summary/hits"), 750);
    assert_eq!(curr_items(port), 1002, "1000 keys, the marker and theirs");

    let mut args = vec!["cleanup", "kv"];
    args.extend(t);
    let o = stderr(&ok(loadcell(dir.path(), &args)));
    assert!(o.contains("Deleted the 1000 keys of data set 't'"), "{o}");
    assert_eq!(curr_items(port), 1, "only theirs is left");
    assert_eq!(
        memcached_says(port, "get theirs\r\n"),
        "VALUE theirs 0 1\r\n1\r\nEND\r\n"
    );
    let o = stderr(&ok(loadcell(dir.path(), &args)));
    assert!(o.contains("Nothing to clean up"), "{o}");
}

/// Key 0 of each type of [`SET`]: (hash, small string, big string).
fn first_keys() -> (String, String, String) {
    (key("t:0:", 34, 0), key("t:1:", 68, 0), key("t:2:", 19, 0))
}

/// Another writer puts its own values under two of the names loadcell
/// loaded, and deletes and writes again the data set's marker with the
/// same bytes (as a copy of the keys would), right after loadcell's
/// prepare. Cleanup deletes what loadcell wrote, leaves what the other
/// writer wrote and says so. A marker of an earlier loadcell, whose values
/// carry no id, has cleanup delete nothing and name the keys.
#[test]
fn redis_cleanup_leaves_keys_another_writer_wrote_again() {
    let server = loadcell_testkit::redis().expect("Redis starts");
    let dir = tempfile::tempdir().unwrap();
    let cli = |args: &[&str]| {
        loadcell_testkit::redis_cli(server.port, args)
            .unwrap()
            .trim_end_matches('\n')
            .to_string()
    };
    let file = write(dir.path(), "t.toml", SET);
    let file = file.to_str().unwrap();
    let url = server.url().to_string();
    let marker = "loadcell:dataset:t";
    let (hash0, small0, _) = first_keys();
    let loadcell_kv = |cmd: &str| {
        loadcell(
            dir.path(),
            &[cmd, "kv", "--dataset", file, "--target", &url],
        )
    };

    ok(loadcell_kv("prepare"));
    let recorded = cli(&["GET", marker]);
    cli(&["SET", &small0, "theirs"]);
    cli(&["DEL", &hash0]);
    cli(&["HSET", &hash0, "f000000000", "theirs"]);
    cli(&["DEL", marker]);
    cli(&["SET", marker, &recorded]);
    let o = stderr(&ok(loadcell_kv("cleanup")));
    assert!(o.contains("Deleted the 998 keys of data set 't'"), "{o}");
    assert!(
        o.contains("Left 2 keys of data set 't' in place: not loadcell's"),
        "{o}"
    );
    assert_eq!(
        cli(&["DBSIZE"]),
        "2",
        "only the other writer's keys are left"
    );
    assert_eq!(cli(&["GET", &small0]), "theirs");
    assert_eq!(cli(&["HGETALL", &hash0]), "f000000000\ntheirs");

    // An earlier loadcell's marker, without the id.
    cli(&["DEL", &small0, &hash0]);
    ok(loadcell_kv("prepare"));
    let mut earlier: Value = serde_json::from_str(&cli(&["GET", marker])).unwrap();
    assert!(earlier.as_object_mut().unwrap().remove("id").is_some());
    cli(&["SET", marker, &earlier.to_string()]);
    let o = loadcell_kv("cleanup");
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("loaded by an earlier loadcell")
            && err.contains("nothing was deleted")
            && err.contains("700 keys named 't:1:' and a number")
            && err.contains(marker),
        "{err}"
    );
    assert_eq!(cli(&["DBSIZE"]), "1001");
}

/// As on Redis: a key written again by another writer (memcached has no
/// hashes, so the data set is strings only) and the marker written again
/// with the same bytes; cleanup deletes only loadcell's values.
#[test]
fn memcached_cleanup_leaves_keys_another_writer_wrote_again() {
    let server = loadcell_testkit::memcached().expect("memcached starts");
    let port = server.port;
    let dir = tempfile::tempdir().unwrap();
    let hash_table = SET.find("[[type]]\nname = \"profile\"").unwrap();
    let small_table = SET.find("[[type]]\nname = \"small\"").unwrap();
    let strings = SET[..hash_table].to_string() + &SET[small_table..];
    let file = write(dir.path(), "s.toml", &strings);
    let file = file.to_str().unwrap();
    let url = server.url().to_string();
    let marker = "loadcell:dataset:t";
    let small0 = key("t:0:", 68, 0);
    let loadcell_kv = |cmd: &str| {
        loadcell(
            dir.path(),
            &[cmd, "kv", "--dataset", file, "--target", &url],
        )
    };

    ok(loadcell_kv("prepare"));
    let got = memcached_says(port, &format!("get {marker}\r\n"));
    let recorded = got.lines().nth(1).expect("the marker's value").to_string();
    assert_eq!(
        memcached_says(port, &format!("set {small0} 0 0 6\r\ntheirs\r\n")),
        "STORED\r\n"
    );
    assert_eq!(
        memcached_says(port, &format!("delete {marker}\r\n")),
        "DELETED\r\n"
    );
    assert_eq!(
        memcached_says(
            port,
            &format!("set {marker} 0 0 {}\r\n{recorded}\r\n", recorded.len())
        ),
        "STORED\r\n"
    );
    let o = stderr(&ok(loadcell_kv("cleanup")));
    assert!(o.contains("Deleted the 999 keys of data set 't'"), "{o}");
    assert!(
        o.contains("Left 1 key of data set 't' in place: not loadcell's"),
        "{o}"
    );
    assert_eq!(curr_items(port), 1, "only the other writer's key is left");
    assert_eq!(
        memcached_says(port, &format!("get {small0}\r\n")),
        format!("VALUE {small0} 0 6\r\ntheirs\r\nEND\r\n")
    );
}

/// Sends one request to memcached and returns its whole reply.
fn memcached_says(port: u16, request: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
}

fn curr_items(port: u16) -> u64 {
    let stats = memcached_says(port, "stats\r\n");
    let line = stats
        .lines()
        .find_map(|l| l.strip_prefix("STAT curr_items "))
        .unwrap_or_else(|| panic!("no curr_items in {stats}"));
    line.trim().parse().unwrap()
}

#[test]
fn a_bad_data_set_file_names_the_field_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.toml",
        &SET.replace("share = 7", "share = 7\nvalue_sise = 3"),
    );
    let o = loadcell(
        dir.path(),
        &[
            "prepare",
            "kv",
            "--dataset",
            bad.to_str().unwrap(),
            "--target",
            "redis://127.0.0.1:1",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("bad.toml")
            && err.contains("line 20")
            && err.contains("unknown field `value_sise`"),
        "{err}"
    );
    let o = loadcell(dir.path(), &["run", "kv", "--dataset", "missing.toml"]);
    assert!(
        stderr(&o).contains("cannot read the data set file missing.toml"),
        "{}",
        stderr(&o)
    );
    let o = loadcell(
        dir.path(),
        &["run", "ycsb-a", "--dataset", bad.to_str().unwrap()],
    );
    assert!(
        stderr(&o).contains("--dataset is a key-value"),
        "{}",
        stderr(&o)
    );
}
