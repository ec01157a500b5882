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
    assert_eq!(f.family, Family::Sql);
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
    assert_eq!(f.family, Family::Kv);
    let OpBody::Kv(c) = &f.ops[1].body else {
        panic!()
    };
    assert_eq!((f.ops[0].reads(), f.ops[1].reads()), (true, false));
    assert_eq!(c.kind, CommandKind::Other);
    assert_eq!(c.words[2].source(), "a b");
    let f = parse("[[op]]\nname = \"home\"\npath = \"/\"\n").unwrap();
    assert_eq!(f.family, Family::Http);
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
        e.contains("give one of sql, transaction, command or path"),
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
