use std::path::Path;

use loadcell_core::sql::Dialect;

use super::*;

fn parse(text: &str) -> Result<ScriptFile, String> {
    ScriptFile::parse(text, Path::new(""), Path::new("w.toml"))
}

const SQL: &str = r#"
[params]
id = { type = "uniform", min = 1, max = 100 }
n = { type = "sequence" }
name = { type = "string", min_length = 3, max_length = 9 }

[[op]]
name = "point_select"
weight = 3
sql = "SELECT c FROM t WHERE id = ${id}"

[[op]]
name = "move"
transaction = ["UPDATE t SET k = k - 1 WHERE id = ?", "UPDATE t SET k = k + 1 WHERE id = ?"]
bind = ["id"]
think = "2ms"

[prepare]
tables = [{ name = "t", columns = "(id INT PRIMARY KEY, k INT, c VARCHAR(20))" }]
[[prepare.load]]
sql = "INSERT INTO t (id, k, c) VALUES (${n}, 0, ${name})"
rows = 100
"#;

#[test]
fn a_sql_file_gives_prepared_statements_with_their_binds() {
    let f = parse(SQL).unwrap();
    assert_eq!(f.family, Family::SQL);
    let [select, moving] = f.ops.as_slice() else {
        panic!("two ops")
    };
    assert_eq!((select.name, select.weight), ("point_select", 3));
    assert!(select.reads() && !moving.reads());
    assert_eq!(moving.think, Duration::from_millis(2));
    let OpBody::Sql {
        statements,
        transaction,
    } = &select.body
    else {
        panic!()
    };
    assert!(!transaction);
    // Parameters are kept in name order: id, n, name.
    assert_eq!(statements[0].binds, vec![0]);
    assert_eq!(
        statements[0].text(|n| Dialect::Postgres.placeholder(n)),
        "SELECT c FROM t WHERE id = $1"
    );
    let OpBody::Sql { statements, .. } = &moving.body else {
        panic!()
    };
    assert_eq!(statements[1].binds, vec![0]);
    assert_eq!(
        statements[1].text(|n| Dialect::MySql.placeholder(n)),
        "UPDATE t SET k = k + 1 WHERE id = ?"
    );
    let LoadBody::Sql(load) = &f.prepare.loads[0].body else {
        panic!()
    };
    assert_eq!(load.binds, vec![1, 2]);
    assert_eq!(f.prepare.loads[0].params, vec![1, 2]);
}

#[test]
fn ops_are_picked_by_weight_and_values_drawn_per_op() {
    let f = parse(SQL).unwrap();
    let ops = Ops::new(&f);
    let mut rng = SmallRng::seed_from_u64(5);
    let selects = (0..4000).filter(|_| ops.pick(&mut rng) == 0).count();
    assert!((2800..3200).contains(&selects), "weight 3 of 4: {selects}");
    let mut values = Values::for_session(&f, 1, 0, 1);
    values.draw(&[0, 1, 2]);
    assert!((1..=100).contains(&values.numbers[0].unwrap()));
    assert_eq!(values.numbers[1], Some(1));
    assert_eq!(values.texts[1], b"1");
    assert_eq!(values.numbers[2], None);
    assert!((3..=9).contains(&values.texts[2].len()));
}

#[test]
fn key_value_and_http_files() {
    let f = parse(
        "[params]\nu = { type = \"hotset\", min = 1, max = 1000, hot_keys = 0.1, hot_ops = 0.9 }\n\
         [[op]]\nname = \"get\"\ncommand = \"GET user:${u}\"\n\
         [[op]]\nname = \"push\"\ncommand = 'RPUSH list:${u} \"a b\"'\n",
    )
    .unwrap();
    assert_eq!(f.family, Family::KV);
    let OpBody::Kv(c) = &f.ops[1].body else {
        panic!()
    };
    assert_eq!((f.ops[0].reads(), f.ops[1].reads()), (true, false));
    assert_eq!(c.kind, CommandKind::Other);
    assert_eq!(c.words[2].source(), "a b");
    let f = parse("[[op]]\nname = \"home\"\npath = \"/\"\n").unwrap();
    assert_eq!(f.family, Family::HTTP);
}

#[test]
fn hot_sets_send_their_share_of_draws_to_the_hot_keys() {
    let f = parse(
        "[params]\nu = { type = \"hotset\", min = 1, max = 1000, hot_keys = 0.1, hot_ops = 0.9 }\n\
         [[op]]\nname = \"get\"\ncommand = \"GET user:${u}\"\n",
    )
    .unwrap();
    let mut values = Values::for_session(&f, 3, 0, 1);
    let hot = (0..10_000)
        .filter(|_| {
            values.draw(&[0]);
            values.numbers[0].unwrap() <= 100
        })
        .count();
    assert!((8800..9200).contains(&hot), "{hot}");
}

#[test]
fn lists_and_csv_columns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("u.csv"), "id,name\n7,ann\n8,bob\n").unwrap();
    let f = ScriptFile::parse(
        "[params]\nname = { type = \"csv\", file = \"u.csv\", column = \"name\" }\n\
         id = { type = \"csv\", file = \"u.csv\", column = 1 }\n\
         c = { type = \"list\", values = [\"red\", 3] }\n\
         [[op]]\nname = \"a\"\nsql = \"SELECT ${name}, ${id}, ${c}\"\n",
        dir.path(),
        Path::new("w.toml"),
    )
    .unwrap();
    let mut values = Values::for_session(&f, 3, 0, 1);
    for _ in 0..50 {
        values.draw(&[0, 1, 2]);
        assert!(matches!(values.texts[2].as_slice(), b"ann" | b"bob"));
        // The header line of a column taken by number is skipped as text.
        assert!(matches!(values.numbers[1], Some(7 | 8) | None));
        assert!(matches!(values.texts[0].as_slice(), b"red" | b"3"));
        assert_eq!(values.numbers[0], None, "a list with text is text");
    }
}

#[test]
fn mistakes_are_one_line_naming_the_line_or_the_op() {
    let err = |text: &str| {
        let e = parse(text).unwrap_err();
        assert!(!e.contains('\n'), "{e}");
        e
    };
    let e = err("[[op]]\nname = \"a\"\nsql = \"SELECT 1\"\nwieght = 2\n");
    assert!(e.starts_with(":4: unknown field `wieght`"), "{e}");
    let e = err("[params]\nx = { type = \"zipf\", min = 1, max = 2 }\n[[op]]\nname = \"a\"\nsql = \"SELECT 1\"\n");
    assert!(e.starts_with(": [params] x: unknown type 'zipf'"), "{e}");
    let e = err("[[op]]\nname = \"a\"\nsql = \"SELECT ${nope}\"\n");
    assert!(
        e.contains("op 'a': 'SELECT ${nope}': no parameter 'nope'"),
        "{e}"
    );
    let e = err("[[op]]\nname = \"a\"\nweight = 0\nsql = \"SELECT 1\"\n");
    assert!(e.contains("every op has weight 0"), "{e}");
    let e = err(
        "[[op]]\nname = \"a\"\nsql = \"SELECT 1\"\n[[op]]\nname = \"b\"\ncommand = \"GET k\"\n",
    );
    assert!(e.contains("op 'a' is sql, op 'b' is kv"), "{e}");
    let e = err("[[op]]\nname = \"a\"\nsql = \"SELECT 1\"\ncommand = \"GET k\"\n");
    assert!(
        e.contains("give one of sql, transaction, command, path (an HTTP request), cql or search"),
        "{e}"
    );
    let e = err("[[op]]\nname = \"a\"\nsql = \"SELECT 1\"\n[prepare]\ntables = [{ name = \"t\", columns = \"(id INT)\" }]\nload = [{ sql = \"INSERT INTO users VALUES (1)\", rows = 1 }]\n");
    assert!(
        e.contains("a load is INSERT INTO one of the tables [prepare] creates"),
        "{e}"
    );
    let e = err("[[op]]\nname = \"a\"\ncommand = \"GET k\"\nthink = \"5 min\"\n");
    assert!(e.contains("think '5 min' is not a duration"), "{e}");
}

fn example(name: &str) -> ScriptFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/workloads")
        .join(name);
    ScriptFile::read(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_cql_file_gives_statements_with_markers_bound_in_order() {
    let f = example("cassandra.toml");
    assert_eq!(f.family, Family::WIDE_COLUMN);
    let [read, update] = f.ops.as_slice() else {
        panic!("two ops")
    };
    assert!(read.reads() && !update.reads());
    let OpBody::Cql(s) = &update.body else {
        panic!()
    };
    assert_eq!(
        s.text(|_| "?".to_string()),
        "UPDATE lc_users SET visits = ? WHERE id = ?"
    );
    // Parameters in name order: load_user, name, user, visits.
    assert_eq!(s.binds, vec![3, 2]);
    assert_eq!(update.params, vec![2, 3]);
    assert_eq!(f.prepare.tables[0].name, "lc_users");
    let LoadBody::Cql(load) = &f.prepare.loads[0].body else {
        panic!()
    };
    assert_eq!(load.binds, vec![0, 1]);

    let e = parse("[[op]]\nname = \"a\"\ncql = \"SELECT 1\"\n[prepare]\ntables = [{ name = \"t\", columns = \"(k int PRIMARY KEY)\" }]\nload = [{ cql = \"INSERT INTO users (k) VALUES (1)\", rows = 1 }]\n").unwrap_err();
    assert!(
        e.contains("a load is INSERT INTO one of the tables [prepare] creates"),
        "{e}"
    );
    let e = parse("[[op]]\nname = \"a\"\ncql = \"SELECT 1\"\n[prepare]\nload = [{ sql = \"INSERT INTO t VALUES (1)\", rows = 1 }]\n").unwrap_err();
    assert!(
        e.contains("a load of a wide-column file is cql = \"INSERT INTO ...\""),
        "{e}"
    );
}

#[test]
fn a_search_file_gives_bodies_that_are_json_once_drawn() {
    let f = example("opensearch.toml");
    assert_eq!(f.family, Family::SEARCH);
    assert!(f.ops.iter().all(Op::reads));
    let index = &f.prepare.indexes[0];
    assert_eq!(index.name, "lc-products");
    assert_eq!(
        index.body["mappings"]["properties"]["price"]["type"],
        "integer"
    );
    let mut values = Values::for_session(&f, 7, 0, 1);
    let mut body = Vec::new();
    for op in &f.ops {
        let OpBody::Search {
            index,
            body: template,
        } = &op.body
        else {
            panic!()
        };
        assert_eq!(index, "lc-products");
        values.draw(&op.params);
        template.expand(&values.texts, &mut body);
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(json["query"].is_object(), "{json}");
    }
    let load = &f.prepare.loads[0];
    let LoadBody::Document { index, document } = &load.body else {
        panic!()
    };
    assert_eq!((index.as_str(), load.rows), ("lc-products", 2000));
    values.draw(&load.params);
    document.expand(&values.texts, &mut body);
    let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["id"], 1, "the first document of the sequence");

    let err = |text: &str| parse(text).unwrap_err();
    let e = err("[[op]]\nname = \"a\"\nsearch = '{}'\n");
    assert!(e.contains("search and index go together"), "{e}");
    let e = err("[[op]]\nname = \"a\"\nindex = \"i\"\nsearch = '{}'\n[[prepare.indexes]]\nname = \"i\"\n[[prepare.load]]\nindex = \"j\"\ndocument = '{}'\nrows = 1\n");
    assert!(e.contains("one of the indexes [prepare] creates"), "{e}");
    let e = err("[[op]]\nname = \"a\"\nindex = \"i\"\nsearch = '{}'\n[[prepare.indexes]]\nname = \"i\"\nbody = '{\"settings\": '\n");
    assert!(e.contains("index 'i': body is not JSON"), "{e}");
    let e = err(
        "[[op]]\nname = \"a\"\nindex = \"i\"\nsearch = '{}'\n[[prepare.indexes]]\nname = \"Big\"\n",
    );
    assert!(e.contains("lower-case letters"), "{e}");
    let e = err("[[op]]\nname = \"a\"\nsql = \"SELECT 1\"\n[[prepare.indexes]]\nname = \"i\"\n");
    assert!(e.contains("indexes are for search files"), "{e}");
}

#[test]
fn every_example_file_reads() {
    for name in [
        "mysql.toml",
        "postgres.toml",
        "redis.toml",
        "http.toml",
        "cassandra.toml",
        "opensearch.toml",
    ] {
        example(name);
    }
}

#[test]
fn sql_draws_numbers_without_their_text_and_one_op_needs_no_pick() {
    let f = parse(SQL).unwrap();
    let mut values = Values::for_session(&f, 1, 0, 1);
    values.draw_numbers(&[0, 1, 2]);
    assert!((1..=100).contains(&values.numbers[0].unwrap()));
    assert!(values.texts[0].is_empty() && values.texts[1].is_empty());
    assert!((3..=9).contains(&values.texts[2].len()), "text is written");
    let one = parse("[[op]]\nname = \"a\"\nweight = 5\nsql = \"SELECT 1\"\n").unwrap();
    let ops = Ops::new(&one);
    let mut rng = SmallRng::seed_from_u64(2);
    let before = rng.clone().random::<u64>();
    assert_eq!(ops.pick(&mut rng), 0);
    assert_eq!(rng.random::<u64>(), before, "no draw spent on the pick");
}
