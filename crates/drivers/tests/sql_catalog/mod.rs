//! One check of [`SqlConn`]'s catalog questions, run on every SQL driver
//! (the MySQL and PostgreSQL integration tests, SQLite's unit tests).

use loadcell_core::sql::SqlConn;

const TAG: &str = "loadcell:Catalog0Check1Tag";

/// Asks about tables that exist and do not, tagged and untagged, their
/// columns and indexes, and drops only the tagged one with its own tag.
/// `table_options` follows the column list (MySQL's engine, as workloads
/// give it), to show the comment goes after it.
pub async fn catalog_questions_are_answered<C: SqlConn>(conn: &mut C, table_options: &str) {
    assert!(!conn.table_exists("cat_tagged").await.unwrap());
    assert_eq!(conn.table_comment("cat_tagged").await.unwrap(), None);
    assert!(!conn.column_exists("cat_tagged", "k").await.unwrap());
    assert!(!conn.index_exists("cat_tagged", "cat_k").await.unwrap());

    let definition = format!("(id INTEGER NOT NULL, k INTEGER, PRIMARY KEY (id)){table_options}");
    conn.create_commented_table("cat_tagged", &definition, TAG)
        .await
        .unwrap();
    assert!(conn.table_exists("cat_tagged").await.unwrap());
    assert_eq!(
        conn.table_comment("cat_tagged").await.unwrap().as_deref(),
        Some(TAG)
    );
    assert!(conn.column_exists("cat_tagged", "k").await.unwrap());
    assert!(!conn.column_exists("cat_tagged", "extra").await.unwrap());
    // The comment outlives a change of the table.
    conn.simple("ALTER TABLE cat_tagged ADD COLUMN extra INTEGER")
        .await
        .unwrap();
    assert!(conn.column_exists("cat_tagged", "extra").await.unwrap());
    assert_eq!(
        conn.table_comment("cat_tagged").await.unwrap().as_deref(),
        Some(TAG)
    );
    conn.simple("CREATE INDEX cat_k ON cat_tagged(k)")
        .await
        .unwrap();
    assert!(conn.index_exists("cat_tagged", "cat_k").await.unwrap());
    assert!(!conn.index_exists("cat_tagged", "cat_other").await.unwrap());

    conn.simple("CREATE TABLE cat_plain (id INTEGER)")
        .await
        .unwrap();
    assert!(conn.table_exists("cat_plain").await.unwrap());
    assert_eq!(
        conn.table_comment("cat_plain").await.unwrap().as_deref(),
        Some("")
    );

    // Untagged, or tagged by another prepare: left alone.
    assert!(!conn
        .drop_table_if_commented("cat_plain", TAG)
        .await
        .unwrap());
    assert!(conn.table_exists("cat_plain").await.unwrap());
    let other = "loadcell:Another0Prepare1Tag";
    assert!(!conn
        .drop_table_if_commented("cat_tagged", other)
        .await
        .unwrap());
    assert!(conn.table_exists("cat_tagged").await.unwrap());
    // Its own tag: dropped, and the connection is out of any transaction.
    assert!(conn
        .drop_table_if_commented("cat_tagged", TAG)
        .await
        .unwrap());
    assert!(!conn.table_exists("cat_tagged").await.unwrap());
    conn.simple("BEGIN").await.unwrap();
    conn.simple("ROLLBACK").await.unwrap();
}
