use std::sync::Arc;

use loadcell_engine::Script;
use rand::SeedableRng;

use super::*;
use crate::prepare::marker::random_id;
use crate::recorder::Recorder;

const RTB: &str = include_str!("../../../../examples/datasets/rtb.toml");

fn parse(text: &str) -> Result<DataSet, String> {
    DataSet::parse(text, "t.toml")
}

const SMALL: &str = r#"
name = "t"
keys = 1000
hot_set = 0.5
hot_access = 0.8

[[type]]
name = "h"
kind = "hash"
share = 2
key_length = 20
fields = 3
field_name_length = 4
value_size = "5-9"

[[type]]
name = "s"
kind = "string"
share = 7
key_length = 12
value_size = 32

[[type]]
name = "big"
kind = "string"
share = 1
key_length = 10
value_size = "100-200"
"#;

#[test]
fn rtb_example_parses_with_s2_shapes() {
    let set = DataSet::parse(RTB, "rtb.toml").unwrap();
    assert_eq!(set.name, "rtb");
    assert_eq!(set.keys, 200_000);
    assert_eq!(set.shares(), "2:7:1");
    assert_eq!(set.hot_set, 0.5);
    let shape: Vec<_> = set
        .types
        .iter()
        .map(|t| {
            (
                t.kind,
                t.count,
                t.key_length,
                t.fields.len(),
                t.value.clone(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (KeyKind::Hash, 40_000, 34, 10, DataSize::Range(20, 80)),
            (KeyKind::String, 140_000, 68, 0, DataSize::Fixed(32)),
            (KeyKind::String, 20_000, 19, 0, DataSize::Range(500, 2000)),
        ]
    );
    assert!(set.types[0].fields.iter().all(|f| f.len() == 10));
    assert_eq!(set.types[0].hot, 20_000);
}

#[test]
fn unknown_fields_are_named_with_their_line() {
    let bad = SMALL.replace("share = 7", "share = 7\nvalue_sise = 3");
    let e = parse(&bad).unwrap_err();
    assert!(e.contains("unknown field `value_sise`"), "{e}");
    assert!(e.contains("line 20"), "{e}");
    assert!(e.contains("t.toml"), "{e}");
    let top = format!("hot_sett = 0.5\n{SMALL}");
    let e = parse(&top).unwrap_err();
    assert!(
        e.contains("unknown field `hot_sett`") && e.contains("line 1"),
        "{e}"
    );
}

#[test]
fn bad_values_are_explained_with_their_line() {
    let cases = [
        (
            "value_size = \"5-9\"",
            "value_size = \"9-5\"",
            "MIN-MAX",
            "line 14",
        ),
        ("value_size = 32", "value_size = 0", "at least 1", "line 21"),
        (
            "key_length = 10",
            "key_length = 5",
            "key_length 5 must be 6 to 250",
            "line 27",
        ),
        (
            "fields = 3",
            "fields = 0",
            "fields = 0 must be 1 to 64",
            "line 12",
        ),
        (
            "field_name_length = 4",
            "field_name_length = 1",
            "too short",
            "line 13",
        ),
        (
            "kind = \"hash\"",
            "kind = \"list\"",
            "unknown variant `list`",
            "line 9",
        ),
        ("hot_set = 0.5", "hot_set = 1.5", "hot_set = 1.5", "line 4"),
    ];
    for (from, to, want, line) in cases {
        let e = parse(&SMALL.replace(from, to)).unwrap_err();
        assert!(e.contains(want) && e.contains(line), "{to}: {e}");
    }
    let e = parse(&SMALL.replace("share = 1", "share = 1\nfields = 2")).unwrap_err();
    assert!(
        e.contains("only for hashes") && e.contains("line 27"),
        "{e}"
    );
    let e = parse(&SMALL.replace("keys = 1000", "keys = 3")).unwrap_err();
    assert!(e.contains("gets no keys") && e.contains("line 10"), "{e}");
    let e = parse(&SMALL.replace("name = \"s\"", "name = \"h\"")).unwrap_err();
    assert!(
        e.contains("a second type named 'h'") && e.contains("line 17"),
        "{e}"
    );
}

#[test]
fn shares_split_the_keys_exactly() {
    let set = parse(SMALL).unwrap();
    let counts: Vec<u64> = set.types.iter().map(|t| t.count).collect();
    assert_eq!(counts, vec![200, 700, 100]);
    let hot: Vec<u64> = set.types.iter().map(|t| t.hot).collect();
    assert_eq!(hot, vec![100, 350, 50]);
    // Keys that do not divide evenly still add up.
    let odd = parse(&SMALL.replace("keys = 1000", "keys = 1003")).unwrap();
    assert_eq!(odd.types.iter().map(|t| t.count).sum::<u64>(), 1003);
}

#[test]
fn keys_have_their_exact_length_and_are_distinct() {
    let set = parse(SMALL).unwrap();
    let mut buf = Vec::new();
    for t in &set.types {
        let mut seen = std::collections::HashSet::new();
        for n in 0..t.count {
            t.key(&mut buf, n);
            assert_eq!(buf.len(), t.key_length);
            assert!(seen.insert(buf.clone()));
        }
    }
    set.types[0].key(&mut buf, 42);
    assert_eq!(buf, b"t:0:0000000000000042");
    set.types[2].key(&mut buf, 99);
    assert_eq!(buf, b"t:2:000099");
    assert_eq!(set.types[0].fields, vec!["f000", "f001", "f002"]);
}

#[test]
fn writes_have_the_declared_value_sizes() {
    let set = parse(SMALL).unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let data = value_block(&set, &mut rng, b"0123456789abcdef");
    let mut conn = Recorder::default();
    let mut key = Vec::new();
    for _ in 0..200 {
        for t in &set.types {
            t.key(&mut key, 1);
            queue_write(&mut conn, t, &key, &data, &mut rng, 0..t.fields.len()).unwrap();
        }
    }
    let (mut short, mut long) = (usize::MAX, 0);
    for q in conn.queued.chunks(3) {
        // A hash: HSET key and all three fields, values 5 to 9 bytes.
        assert_eq!(q[0].len(), 2 + 2 * 3);
        assert_eq!(q[0][2], b"f000");
        assert!(q[0][3..]
            .iter()
            .step_by(2)
            .all(|v| (5..=9).contains(&v.len())));
        assert_eq!(q[1][2].len(), 32);
        short = short.min(q[2][2].len());
        long = long.max(q[2][2].len());
    }
    assert!(
        (100..=110).contains(&short) && (190..=200).contains(&long),
        "{short}..{long}"
    );
}

#[test]
fn every_value_carries_the_id_and_markers_of_earlier_versions_have_none() {
    let set = parse(SMALL).unwrap();
    let id = random_id(ID_LEN);
    let data = value_block(&set, &mut SmallRng::seed_from_u64(1), id.as_bytes());
    assert_eq!(data.len(), 200);
    assert!(data.iter().all(u8::is_ascii_alphanumeric));
    // Values are prefixes of the block, down to a single byte.
    for len in [1, 5, ID_LEN, 200] {
        assert!(carries_id(&data[..len], id.as_bytes()), "{len}");
    }
    assert!(!carries_id(b"theirs", id.as_bytes()));
    assert!(!carries_id(b"", id.as_bytes()));
    let other = random_id(ID_LEN);
    assert!(!carries_id(&data, other.as_bytes()));
    // A block shorter than the id holds what fits of it.
    let tiny = SMALL
        .replace("\"100-200\"", "3")
        .replace("\"5-9\"", "2")
        .replace("value_size = 32", "value_size = 3");
    let data = value_block(
        &parse(&tiny).unwrap(),
        &mut SmallRng::seed_from_u64(1),
        id.as_bytes(),
    );
    assert_eq!(data, id.as_bytes()[..3]);

    let recorded = set.recorded(COMPLETE, Some(&id));
    let json = serde_json::to_string(&recorded).unwrap();
    assert!(json.contains(&format!("\"id\":\"{id}\"")), "{json}");
    let earlier = json.replace(&format!(",\"id\":\"{id}\""), "");
    let earlier: Recorded = serde_json::from_str(&earlier).unwrap();
    assert_eq!(earlier.id, None);
    assert_eq!(earlier.types, recorded.types);
}

#[test]
fn accesses_follow_shares_ratio_and_hot_set() {
    let set = Arc::new(parse(SMALL).unwrap());
    let kv = DataSetKv::new(
        Arc::clone(&set),
        KvOptions {
            ratio_set: 1,
            ratio_get: 9,
            ..KvOptions::default()
        },
    );
    let names: Vec<_> = Script::<Recorder>::ops(&kv)
        .iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(
        names,
        [
            "h_read",
            "h_write",
            "s_read",
            "s_write",
            "big_read",
            "big_write"
        ]
    );
    let mut rng = SmallRng::seed_from_u64(1);
    let (mut per_type, mut hot) = ([0u64; 3], 0u64);
    let draws = 100_000;
    for _ in 0..draws {
        let (i, n) = kv.pick(&mut rng);
        per_type[i] += 1;
        assert!(n < set.types[i].count);
        hot += (n < set.types[i].hot) as u64;
    }
    let share = |x: u64| x as f64 / draws as f64;
    assert!((share(per_type[0]) - 0.2).abs() < 0.01, "{per_type:?}");
    assert!((share(per_type[1]) - 0.7).abs() < 0.01, "{per_type:?}");
    assert!((share(hot) - 0.8).abs() < 0.01, "{hot}");
}
