use loadcell_core::sql::Dialect;
use loadcell_engine::Shard;
use serde_json::json;

use super::*;
use crate::recorder::Recorder;

fn ycsb(preset: Preset, edit: impl FnOnce(&mut YcsbOptions)) -> Ycsb {
    let mut o = preset.options();
    edit(&mut o);
    o.validate().unwrap();
    Ycsb::new(o)
}

fn draw(y: &Ycsb, seed: u64) -> Draw {
    Draw::new(y, seed)
}

/// `n` operations as a session would run them (each succeeding).
fn run_ops(y: &Ycsb, d: &mut Draw, n: usize) -> Vec<Choice> {
    (0..n)
        .map(|_| {
            let c = y.choose(d);
            y.done(d, c);
            c
        })
        .collect()
}

fn counts(y: &Ycsb, seed: u64, n: usize) -> [usize; 5] {
    let mut d = draw(y, seed);
    let mut counts = [0; 5];
    for c in run_ops(y, &mut d, n) {
        counts[c.op] += 1;
    }
    counts
}

#[test]
fn keys_are_hashed_as_ycsb_names_them() {
    assert_eq!(fnv1a_64(0), 6_284_781_860_667_377_211);
    assert_eq!(fnv1a_64(1), 8_517_097_267_634_966_620);
    assert_eq!(fnv1a_64(2), 1_820_151_046_732_198_393);
    assert_eq!(fnv1a_64(4), 3_232_700_585_171_816_769);
    let mut k = String::new();
    push_key(&mut k, 0);
    assert_eq!(k, "user6284781860667377211");
    push_key(&mut k, 3);
    assert_eq!(k, "user4052466453699787802");
    // Hashing spreads neighbouring numbers and never collides here.
    let keys: std::collections::HashSet<i64> = (0..100_000).map(fnv1a_64).collect();
    assert_eq!(keys.len(), 100_000);
    assert!(keys.iter().all(|&h| h >= 0));
}

/// Values of `s.hashCode()` printed by Java 17.
#[test]
fn keys_are_scored_by_java_string_hash_code() {
    for (s, java) in [
        ("", 0),
        ("a", 97),
        ("user1234", -267_577_715),
        ("hello world", 1_794_106_052),
        ("user6284781860667377211", -594_971_599),
        ("user4052466453699787802", -1_414_300_200),
        // UTF-16 code units: a character beyond the BMP is two.
        ("é😀", 1_996_812),
    ] {
        assert_eq!(java_string_hash(s), java, "{s:?}");
    }
}

#[test]
fn a_check_samples_the_first_the_last_and_records_between() {
    let y = ycsb(Preset::C, |o| o.record_count = 1000);
    let sampled = y.sampled_records();
    assert_eq!(sampled.len(), 16);
    assert_eq!((sampled[0], sampled[15]), (0, 999));
    assert!(sampled.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        ycsb(Preset::C, |o| o.record_count = 3).sampled_records(),
        [0, 1, 2]
    );
    assert_eq!(
        ycsb(Preset::C, |o| o.record_count = 1).sampled_records(),
        [0]
    );
    assert!(y.judge_sample("t", 8, 16).is_ok(), "a cache may evict some");
    let e = y.judge_sample("table usertable", 7, 16).unwrap_err();
    assert_eq!(
        e.to_string(),
        "table usertable holds 7 of 16 records sampled from the 1000 of --record-count"
    );
}

#[test]
fn presets_have_ycsb_and_s8_mixes() {
    let mix = |p: Preset| {
        let o = p.options();
        (o.proportions.weights(), o.request_distribution)
    };
    use RequestDistribution::*;
    assert_eq!(mix(Preset::A), ([50, 50, 0, 0, 0], Zipfian));
    assert_eq!(mix(Preset::B), ([95, 5, 0, 0, 0], Zipfian));
    assert_eq!(mix(Preset::C), ([100, 0, 0, 0, 0], Zipfian));
    assert_eq!(mix(Preset::D), ([95, 0, 5, 0, 0], Latest));
    assert_eq!(mix(Preset::E), ([0, 0, 5, 95, 0], Zipfian));
    assert_eq!(mix(Preset::F), ([50, 0, 0, 0, 50], Zipfian));
    assert_eq!(mix(Preset::MixWrite), ([0, 100, 0, 0, 0], Uniform));
    assert_eq!(mix(Preset::Mix80_20), ([80, 20, 0, 0, 0], Uniform));
    let a = Preset::A.options();
    assert_eq!(
        (
            a.record_count,
            a.operation_count,
            a.field_count,
            a.field_length
        ),
        (1000, 1000, 10, 100)
    );
    assert_eq!(a.max_scan_length, 1000);
    assert_eq!(Preset::E.options().max_scan_length, 100);
    assert!(!a.write_all_fields);
    let m = Preset::Mix95_5.options();
    assert_eq!(m.record_bytes(), 100);
    assert!(m.write_all_fields);
    for (name, p, _) in Preset::ALL {
        assert_eq!(Preset::parse(name), Some(p));
        assert_eq!(p.name(), name);
        assert!(p.options().validate().is_ok());
    }
    assert_eq!(Preset::parse("ycsb-g"), None);
}

#[test]
fn operation_mixes_are_exact() {
    for (name, p, _) in Preset::ALL {
        let y = ycsb(p, |_| {});
        let w = p.options().proportions.weights();
        for seed in [1, 2, 3] {
            let c = counts(&y, seed, 10_000);
            let expected = w.map(|x| x as usize * 100);
            assert_eq!(c, expected, "{name} seed {seed}");
        }
        // Exact within every window of 100 operations, too.
        let mut d = draw(&y, 9);
        for _ in 0..5 {
            let mut window = [0usize; 5];
            for c in run_ops(&y, &mut d, 100) {
                window[c.op] += 1;
            }
            assert_eq!(window, w.map(|x| x as usize), "{name}");
        }
    }
    // Evenly spread: 95/5 never runs two updates back to back.
    let y = ycsb(Preset::B, |_| {});
    let mut d = draw(&y, 4);
    let ops: Vec<usize> = run_ops(&y, &mut d, 1000).iter().map(|c| c.op).collect();
    assert!(ops.windows(2).all(|w| !(w[0] == UPDATE && w[1] == UPDATE)));
    // Sessions start at different points of the cycle.
    let starts: std::collections::HashSet<Vec<usize>> = (0..8)
        .map(|seed| {
            let mut d = draw(&y, seed);
            run_ops(&y, &mut d, 20).iter().map(|c| c.op).collect()
        })
        .collect();
    assert!(starts.len() > 1);
}

#[test]
fn a_failed_operation_is_repeated() {
    let y = ycsb(Preset::D, |_| {});
    let mut d = draw(&y, 5);
    // Run until an insert comes up, fail it twice, then succeed.
    let insert = loop {
        let c = y.choose(&mut d);
        if c.op == INSERT {
            break c;
        }
        y.done(&mut d, c);
    };
    assert_eq!(insert.key, 1000, "inserts continue after the records");
    assert_eq!(y.choose(&mut d), insert);
    assert_eq!(y.choose(&mut d), insert);
    assert_eq!(y.inserted(), 1000);
    y.done(&mut d, insert);
    assert_eq!(y.inserted(), 1001);
    let next = loop {
        let c = y.choose(&mut d);
        y.done(&mut d, c);
        if c.op == INSERT {
            break c;
        }
    };
    assert_eq!(next.key, 1001);
    y.start_inserts_at(5000);
    assert_eq!(y.inserted(), 5000);
    y.start_inserts_at(10);
    assert_eq!(y.inserted(), 1000, "never below the record count");
}

#[test]
fn reads_pass_an_insert_only_once_every_insert_below_it_is_over() {
    let y = ycsb(Preset::D, |_| {});
    let key = |k| Choice {
        op: INSERT,
        key: k,
        len: 0,
        field: 0,
    };
    // Three inserts in flight: 1000, 1001, 1002.
    y.acknowledge(1002);
    assert_eq!(y.inserted(), 1000, "1000 and 1001 may still be in flight");
    y.finished(key(1000));
    assert_eq!(y.inserted(), 1001, "a failed insert is over too");
    y.acknowledge(1001);
    assert_eq!(y.inserted(), 1003);
    // Acknowledging again (a retry of 1001) changes nothing.
    y.acknowledge(1001);
    assert_eq!(y.inserted(), 1003);
}

fn key_draws(y: &Ycsb, n: usize) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(77);
    (0..n).map(|_| y.next_key(&mut rng)).collect()
}

fn frequencies(keys: &[u64]) -> Vec<(u64, usize)> {
    let mut m = std::collections::HashMap::new();
    for &k in keys {
        *m.entry(k).or_insert(0usize) += 1;
    }
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

#[test]
fn uniform_covers_the_records_evenly() {
    let y = ycsb(Preset::MixRead, |_| {});
    let keys = key_draws(&y, 200_000);
    assert!(keys.iter().all(|&k| k < 1000));
    let f = frequencies(&keys);
    assert_eq!(f.len(), 1000);
    // 200 expected per key: none far off.
    assert!(f[0].1 < 300 && f[999].1 > 120, "{:?} {:?}", f[0], f[999]);
}

#[test]
fn zipfian_is_skewed_and_scrambled() {
    let y = ycsb(Preset::A, |_| {});
    let n = 200_000;
    let keys = key_draws(&y, n);
    assert!(keys.iter().all(|&k| k < 1000));
    let f = frequencies(&keys);
    // YCSB's scrambled zipfian: rank 0 of its 10^10 gets 1/26.47 of
    // the draws (plus its share of the hashed tail), rank 1 half that,
    // whatever the record count; the top 10% of keys get about a third.
    let top = f[0].1 as f64 / n as f64;
    assert!((0.033..0.045).contains(&top), "{top}");
    let second = f[1].1 as f64 / n as f64;
    assert!((0.016..0.025).contains(&second), "{second}");
    let top100: usize = f.iter().take(100).map(|x| x.1).sum();
    let share = top100 as f64 / n as f64;
    assert!((0.2..0.4).contains(&share), "{share}");
    // Rank 0 is scrambled onto fnv(0) % 1001 (YCSB's item count is
    // records + expected inserts + 1), not onto record 0.
    assert_eq!(f[0].0, 6_284_781_860_667_377_211 % 1001);
    assert_eq!(f[1].0, 8_517_097_267_634_966_620 % 1001);
    // The hot records are spread over the key space.
    let hot_low = f.iter().take(20).filter(|x| x.0 < 500).count();
    assert!((4..=16).contains(&hot_low), "{hot_low}");
}

#[test]
fn zipfian_counts_expected_inserts_but_reads_only_inserted_records() {
    // ycsb-e expects 2 * 1000 * 5% = 100 new records.
    let y = ycsb(Preset::E, |_| {});
    assert_eq!(y.item_count, 1101);
    let keys = key_draws(&y, 50_000);
    assert!(keys.iter().all(|&k| k < 1000));
    y.start_inserts_at(1100);
    let keys = key_draws(&y, 50_000);
    assert!(keys.iter().any(|&k| k >= 1000));
    assert!(keys.iter().all(|&k| k < 1100));
}

#[test]
fn latest_favours_recent_inserts() {
    let y = ycsb(Preset::D, |_| {});
    let n = 100_000;
    let keys = key_draws(&y, n);
    assert!(keys.iter().all(|&k| k < 1000));
    let f = frequencies(&keys);
    assert_eq!(f[0].0, 999, "the newest record is the most popular");
    assert_eq!(f[1].0, 998);
    let recent = keys.iter().filter(|&&k| k >= 900).count() as f64 / n as f64;
    assert!(recent > 0.6, "{recent}");
    // Inserts move the hot spot along.
    let mut d = draw(&y, 3);
    let inserted = run_ops(&y, &mut d, 2000)
        .iter()
        .filter(|c| c.op == INSERT)
        .count() as u64;
    assert_eq!(inserted, 100);
    assert_eq!(y.inserted(), 1100);
    let keys = key_draws(&y, n);
    let f = frequencies(&keys);
    assert_eq!(f[0].0, 1099);
    let newest = keys.iter().filter(|&&k| k >= 1000).count() as f64 / n as f64;
    assert!(newest > 0.6, "{newest}");
}

#[test]
fn hotspot_sends_most_operations_to_few_records() {
    let y = ycsb(Preset::A, |o| {
        o.request_distribution = RequestDistribution::Hotspot
    });
    let n = 200_000;
    let keys = key_draws(&y, n);
    assert!(keys.iter().all(|&k| k < 1000));
    let hot = keys.iter().filter(|&&k| k < 200).count() as f64 / n as f64;
    assert!((hot - 0.8).abs() < 0.01, "{hot}");
    let f = frequencies(&keys);
    assert_eq!(f.len(), 1000, "cold records are read too");

    let y = ycsb(Preset::A, |o| {
        o.request_distribution = RequestDistribution::Hotspot;
        o.hotspot_data_fraction = 0.1;
        o.hotspot_opn_fraction = 0.95;
    });
    let keys = key_draws(&y, n);
    let hot = keys.iter().filter(|&&k| k < 100).count() as f64 / n as f64;
    assert!((hot - 0.95).abs() < 0.01, "{hot}");
    // Degenerate fractions stay in range.
    for (data, opn) in [(0.0, 0.8), (1.0, 0.8), (0.2, 0.0), (0.2, 1.0)] {
        let y = ycsb(Preset::A, |o| {
            o.request_distribution = RequestDistribution::Hotspot;
            o.hotspot_data_fraction = data;
            o.hotspot_opn_fraction = opn;
        });
        assert!(key_draws(&y, 1000).iter().all(|&k| k < 1000));
    }
}

#[test]
fn scans_and_updates_draw_within_bounds() {
    let y = ycsb(Preset::E, |o| o.max_scan_length = 10);
    let mut d = draw(&y, 8);
    let scans: Vec<Choice> = run_ops(&y, &mut d, 5000)
        .into_iter()
        .filter(|c| c.op == SCAN)
        .collect();
    assert_eq!(scans.len(), 4750);
    assert!(scans.iter().all(|c| (1..=10).contains(&c.len)));
    assert!(scans.iter().any(|c| c.len == 1) && scans.iter().any(|c| c.len == 10));
    assert!(scans.iter().all(|c| c.field < 10));
    let v = pick(&d.pool, &mut d.rng, 100);
    assert_eq!(v.len(), 100);
    assert!(v.bytes().all(|b| b.is_ascii_alphanumeric()));
}

/// A 16 KB page of 100-byte values: with a pool of a few kilobytes most
/// pairs overlapped (repeated text a block compressor shrinks); now
/// about two pairs of the 12,720 may.
#[test]
fn values_in_one_block_rarely_share_text() {
    let y = ycsb(Preset::A, |_| {});
    let (mut a, mut b) = (draw(&y, 1), draw(&y, 2));
    assert!(Arc::ptr_eq(&a.pool, &b.pool), "one pool for every session");
    let base = y.pool.as_ptr() as usize;
    let offsets: Vec<usize> = (0..160)
        .map(|i| {
            let d = if i % 2 == 0 { &mut a } else { &mut b };
            pick(&d.pool, &mut d.rng, 100).as_ptr() as usize - base
        })
        .collect();
    let overlapping = (0..offsets.len())
        .flat_map(|i| (0..i).map(move |j| (i, j)))
        .filter(|&(i, j)| offsets[i].abs_diff(offsets[j]) < 100)
        .count();
    assert!(overlapping <= 10, "{overlapping} overlapping pairs");
}

#[test]
fn options_are_validated() {
    let bad = |edit: fn(&mut YcsbOptions)| {
        let mut o = Preset::A.options();
        edit(&mut o);
        o.validate().unwrap_err()
    };
    assert!(bad(|o| o.record_count = 0).contains("--record-count"));
    assert!(bad(|o| o.field_count = 0).contains("--field-count"));
    assert!(bad(|o| o.field_count = 5000).contains("--field-count"));
    assert!(bad(|o| o.field_length = 0).contains("--field-length"));
    assert!(bad(|o| o.max_scan_length = 0).contains("--max-scan-length"));
    assert!(bad(|o| {
        o.field_count = 1000;
        o.field_length = 1 << 20
    })
    .contains("at most 16777216"));
    assert!(bad(|o| o.hotspot_opn_fraction = 1.5).contains("--hotspot-opn-fraction"));
    assert!(bad(|o| o.proportions = Proportions::default()).contains("empty"));
    assert_eq!(
        RequestDistribution::parse("latest"),
        Ok(RequestDistribution::Latest)
    );
    assert!(RequestDistribution::parse("normal")
        .unwrap_err()
        .contains("uniform, zipfian, latest, hotspot"));
    assert!(bad(|o| o.record_count = MAX_RECORDS + 1).contains("--record-count"));
    // Huge operation counts do not overflow the key space.
    let y = ycsb(Preset::D, |o| o.operation_count = u64::MAX);
    assert!(key_draws(&y, 100).iter().all(|&k| k < 1000));
    let m = Preset::E.options().to_map();
    assert_eq!(m["scan_proportion"], json!(0.95));
    assert_eq!(m["request_distribution"], json!("zipfian"));
}

#[test]
fn statements_per_dialect() {
    assert_eq!(
        read_sql(Dialect::Postgres),
        "SELECT * FROM usertable WHERE YCSB_KEY = $1"
    );
    assert_eq!(
        scan_sql(Dialect::MySql),
        "SELECT * FROM usertable WHERE YCSB_KEY >= ? ORDER BY YCSB_KEY LIMIT ?"
    );
    assert_eq!(
        scan_sql(Dialect::Postgres),
        "SELECT * FROM usertable WHERE YCSB_KEY >= $1 ORDER BY YCSB_KEY LIMIT $2"
    );
    assert_eq!(
        insert_sql(Dialect::Postgres, 2),
        "INSERT INTO usertable (YCSB_KEY, FIELD0, FIELD1) VALUES ($1, $2, $3)"
    );
    assert_eq!(
        update_sql(Dialect::Sqlite, 3..4),
        "UPDATE usertable SET FIELD3 = ? WHERE YCSB_KEY = ?"
    );
    assert_eq!(
        update_sql(Dialect::Postgres, 0..2),
        "UPDATE usertable SET FIELD0 = $1, FIELD1 = $2 WHERE YCSB_KEY = $3"
    );
    assert_eq!(
        table_definition(Dialect::Sqlite, 2),
        "(YCSB_KEY VARCHAR(255) PRIMARY KEY, FIELD0 TEXT, FIELD1 TEXT)"
    );
}

#[test]
fn hashes_with_a_sorted_set_index() {
    let kv = YcsbKv::new(Preset::E.options(), true);
    let mut s = kv.new_session(1);
    let mut conn = Recorder::default();
    push_key(&mut s.d.key, 7);
    kv.queue_insert(&mut conn, &mut s).unwrap();
    let sent = conn.sent();
    let hset = &sent[0];
    assert_eq!(hset[0], "HSET");
    assert_eq!(hset[1], format!("user{}", fnv1a_64(7)));
    assert_eq!(hset.len(), 2 + 2 * 10);
    assert_eq!(hset[2], "field0");
    assert_eq!(hset[21].len(), 100);
    // Scored by Java's "user4052466453699787802".hashCode(), as YCSB's
    // Redis binding scores it, not by the record number.
    let mut k = String::new();
    push_key(&mut k, 3);
    assert_eq!(k, "user4052466453699787802");
    push_key(&mut s.d.key, 3);
    conn.queued.clear();
    kv.queue_insert(&mut conn, &mut s).unwrap();
    assert_eq!(conn.sent()[1], ["ZADD", "_indices", "-1414300200", &k]);
    conn.queued.clear();
    kv.queue_range(&mut conn, &mut s, 10).unwrap();
    assert_eq!(
        conn.sent(),
        [[
            "ZRANGEBYSCORE",
            "_indices",
            "-1414300200",
            "+inf",
            "LIMIT",
            "0",
            "10"
        ]]
    );
    conn.queued.clear();
    push_key(&mut s.d.key, 3);
    kv.queue_write(&mut conn, &mut s.d, 4, false).unwrap();
    assert_eq!(conn.sent()[0].len(), 4);
    assert_eq!(conn.sent()[0][2], "field4");
}

#[test]
fn serialized_records_without_commands() {
    let kv = YcsbKv::new(Preset::Mix50_50.options(), false);
    let mut s = kv.new_session(1);
    let mut conn = Recorder::default();
    push_key(&mut s.d.key, 1);
    kv.queue_insert(&mut conn, &mut s).unwrap();
    kv.queue_write(&mut conn, &mut s.d, 3, false).unwrap();
    kv.queue_read(&mut conn, &s.d.key).unwrap();
    assert_eq!(
        conn.sent(),
        vec![
            vec!["SET", "user8517097267634966620", "100 bytes"],
            vec!["SET", "user8517097267634966620", "100 bytes"],
            vec!["GET", "user8517097267634966620"],
        ]
    );
    assert!(kv.queue_range(&mut conn, &mut s, 5).is_err());
}

#[test]
fn shards_insert_the_keys_one_process_would_and_never_the_same() {
    let inserts = |y: &Ycsb, n: usize| -> Vec<u64> {
        let mut d = draw(y, 3);
        run_ops(y, &mut d, n)
            .into_iter()
            .filter(|c| c.op == INSERT)
            .map(|c| c.key)
            .collect()
    };
    let one = inserts(&ycsb(Preset::D, |_| {}), 2000);
    let mut union = Vec::new();
    for index in 0..2 {
        let y = ycsb(Preset::D, |o| o.shard = Some(Shard::new(index, 2).unwrap()));
        let keys = inserts(&y, 1000);
        assert!(keys.iter().all(|k| k % 2 == index as u64), "{keys:?}");
        assert_eq!(y.inserted(), 1000 + 2 * keys.len() as u64);
        union.extend(keys);
    }
    union.sort_unstable();
    assert_eq!(union, one);
    assert_eq!(one, (1000..1100).collect::<Vec<_>>());
}

#[test]
fn a_shard_reads_only_the_inserts_it_made_itself() {
    let y = ycsb(Preset::D, |o| o.shard = Some(Shard::new(1, 3).unwrap()));
    let mut d = draw(&y, 9);
    let ops = run_ops(&y, &mut d, 4000);
    let own: std::collections::HashSet<u64> = ops
        .iter()
        .filter(|c| c.op == INSERT)
        .map(|c| c.key)
        .collect();
    assert_eq!(own.len(), 200);
    let newer_reads: Vec<u64> = ops
        .iter()
        .filter(|c| c.op == READ && c.key >= 1000)
        .map(|c| c.key)
        .collect();
    assert!(newer_reads.len() > 100, "latest favours the new records");
    assert!(
        newer_reads.iter().all(|k| own.contains(k)),
        "{newer_reads:?}"
    );
}
