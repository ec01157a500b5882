//! The workload file (`loadcell run script --file W.toml`): weighted
//! operations of one family, their parameters, and what `prepare` creates.
//!
//! ```toml
//! [params]
//! id = { type = "uniform", min = 1, max = 10000 }   # any request file type
//!
//! [[op]]
//! name = "point_select"             # the result's operation kind
//! weight = 9                        # default 1
//! sql = "SELECT c FROM accounts WHERE id = ${id}"
//! think = "2ms"                     # optional pause after the op
//!
//! [[op]]
//! name = "transfer"
//! transaction = ["UPDATE accounts SET balance = balance - 1 WHERE id = ${id}",
//!                "UPDATE accounts SET balance = balance + 1 WHERE id = ?"]
//! bind = ["id"]                     # only with ?/$1 placeholders written out
//!
//! [prepare]
//! tables = [{ name = "accounts", columns = "(id INT PRIMARY KEY, balance INT)" }]
//! [[prepare.load]]
//! sql = "INSERT INTO accounts (id, balance) VALUES (${n}, 100)"
//! rows = 10000
//! ```
//!
//! An op is `sql` or `transaction` (SQL, run as prepared statements),
//! `command` (a key-value command's words, `SET user:${id} ${name}`),
//! `path` with `method`, `headers` and `body` (an HTTP request, as in a
//! request file), `cql` (a CQL statement, prepared, its `${name}`s bound
//! as markers), or `search` with `index` (a search request's JSON body,
//! its `${name}`s written in). Every op of a file is of one family.
//!
//! `[prepare]` creates `tables` (SQL and CQL, loaded by `INSERT`s into
//! them) or `indexes` (search, each `{ name, body }` with the body that
//! creates it, loaded by `document`s), each with loadcell's marker, and
//! `cleanup` drops only those.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use loadcell_core::Family;
use serde::Deserialize;
use serde_json::Value;

use crate::http::{params, request, toml_file, Param, RawParam, RawRequest, RequestSpec, Template};

/// The most operations a file may hold.
const MAX_OPS: usize = 64;
/// The most placeholders one SQL statement may bind: an op binds them
/// from a fixed array, without allocating.
pub const MAX_BINDS: usize = 32;
/// The most words a key-value command may have.
pub const MAX_WORDS: usize = 16;

/// A workload file, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptFile {
    pub path: PathBuf,
    pub params: Vec<Param>,
    pub ops: Vec<Op>,
    pub family: Family,
    pub prepare: Prepare,
}

/// One weighted operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Leaked once per run: operation kinds are `&'static str`.
    pub name: &'static str,
    pub weight: u32,
    pub think: Duration,
    pub body: OpBody,
    /// The parameters it draws, each once per op.
    pub params: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OpBody {
    /// Statements run in order; in BEGIN/COMMIT when `transaction`.
    Sql {
        statements: Vec<Statement>,
        transaction: bool,
    },
    Kv(Command),
    Http(RequestSpec),
    /// A CQL statement, prepared with `?` markers.
    Cql(Statement),
    /// A search request's body, sent to `index`'s `_search`.
    Search {
        index: String,
        body: Template,
    },
}

/// A SQL statement: its text with `${name}`s, which become the dialect's
/// placeholders, or as written with `bind` naming what its own `?`/`$1`
/// placeholders take.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub source: String,
    template: Template,
    /// Bound in order: a parameter index per placeholder.
    pub binds: Vec<usize>,
}

impl Statement {
    fn parse(
        text: &str,
        bind: &[usize],
        position: &dyn Fn(&str) -> Option<usize>,
    ) -> Result<Statement, String> {
        let template = Template::parse(text, position)?;
        let holes: Vec<usize> = template.params().collect();
        if !holes.is_empty() && !bind.is_empty() {
            return Err(format!(
                "'{text}': give parameters as ${{name}} or with bind, not both"
            ));
        }
        let binds = if holes.is_empty() {
            bind.to_vec()
        } else {
            holes
        };
        if binds.len() > MAX_BINDS {
            return Err(format!(
                "'{text}': at most {MAX_BINDS} parameters per statement"
            ));
        }
        Ok(Statement {
            source: text.to_string(),
            template,
            binds,
        })
    }

    /// The text sent to prepare: each `${name}` replaced by the placeholder
    /// `placeholder` gives for its position (from 1).
    pub fn text(&self, placeholder: impl Fn(usize) -> String) -> String {
        self.template.with_placeholders(placeholder)
    }

    /// Whether it only reads.
    fn reads(&self) -> bool {
        let first = self.source.split_whitespace().next();
        first.is_some_and(|w| {
            ["select", "show", "with", "explain"].contains(&w.to_ascii_lowercase().as_str())
        })
    }
}

/// What a key-value command does, for the commands every key-value driver
/// has (memcached too); anything else is sent as its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandKind {
    Get,
    Set,
    Delete,
    Other,
}

/// A key-value command: its words, each a template.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub source: String,
    pub kind: CommandKind,
    pub words: Vec<Template>,
}

/// Commands that only read, for the read/write split of the summary.
const READ_COMMANDS: &[&str] = &[
    "get",
    "mget",
    "hget",
    "hmget",
    "hgetall",
    "exists",
    "lrange",
    "llen",
    "smembers",
    "sismember",
    "scard",
    "zrange",
    "zrangebyscore",
    "zscore",
    "zcard",
    "strlen",
    "ttl",
    "xrange",
];

impl Command {
    fn parse(text: &str, position: &dyn Fn(&str) -> Option<usize>) -> Result<Command, String> {
        let words = crate::kv::split_words(text)?;
        if words.is_empty() || words.len() > MAX_WORDS {
            return Err(format!(
                "'{text}': give a command of 1 to {MAX_WORDS} words"
            ));
        }
        let name = words[0].to_ascii_lowercase();
        if name.contains("${") {
            return Err(format!("'{text}': the first word must be the command name"));
        }
        let kind = match (name.as_str(), words.len()) {
            ("get", 2) => CommandKind::Get,
            ("set", 3) => CommandKind::Set,
            ("del" | "delete", 2) => CommandKind::Delete,
            _ => CommandKind::Other,
        };
        let words = words
            .iter()
            .map(|w| Template::parse(w, position))
            .collect::<Result<_, _>>()?;
        Ok(Command {
            source: text.to_string(),
            kind,
            words,
        })
    }

    fn reads(&self) -> bool {
        let name = self.source.split_whitespace().next().unwrap_or_default();
        READ_COMMANDS.contains(&name.to_ascii_lowercase().as_str())
    }
}

impl Op {
    /// Whether it only reads (the summary's read/write split).
    pub fn reads(&self) -> bool {
        match &self.body {
            OpBody::Sql { statements, .. } => statements.iter().all(Statement::reads),
            OpBody::Kv(c) => c.reads(),
            OpBody::Http(r) => matches!(r.method, "GET" | "HEAD" | "OPTIONS"),
            OpBody::Cql(s) => s.reads(),
            OpBody::Search { .. } => true,
        }
    }
}

/// What `prepare` creates: SQL or CQL tables, then rows loaded into them;
/// search indexes, then documents; or keys SET by a key-value command.
/// `cleanup` removes exactly these.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prepare {
    pub tables: Vec<Table>,
    pub indexes: Vec<Index>,
    pub loads: Vec<Load>,
}

/// A search index `prepare` creates.
#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    pub name: String,
    /// The body that creates it (settings, mappings), a JSON object.
    pub body: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub name: String,
    /// What follows `CREATE TABLE name`: the columns, then any options.
    pub columns: String,
}

/// A statement or command run `rows` times, its parameters drawn as one
/// session of one would (sequences count from their start).
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    pub body: LoadBody,
    pub rows: u64,
    pub params: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LoadBody {
    Sql(Statement),
    /// A SET: `words[1]` is the key, `words[2]` the value.
    Kv(Command),
    Cql(Statement),
    /// A document indexed into `index`.
    Document {
        index: String,
        document: Template,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    params: BTreeMap<String, RawParam>,
    #[serde(default)]
    op: Vec<RawOp>,
    #[serde(default)]
    prepare: RawPrepare,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOp {
    name: String,
    #[serde(default = "one")]
    weight: u32,
    think: Option<String>,
    sql: Option<String>,
    transaction: Option<Vec<String>>,
    #[serde(default)]
    bind: Vec<String>,
    command: Option<String>,
    method: Option<String>,
    path: Option<String>,
    #[serde(default)]
    headers: Vec<String>,
    body: Option<String>,
    cql: Option<String>,
    search: Option<String>,
    index: Option<String>,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPrepare {
    #[serde(default)]
    tables: Vec<RawTable>,
    #[serde(default)]
    indexes: Vec<RawIndex>,
    #[serde(default)]
    load: Vec<RawLoad>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIndex {
    name: String,
    body: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    name: String,
    columns: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoad {
    sql: Option<String>,
    command: Option<String>,
    cql: Option<String>,
    document: Option<String>,
    index: Option<String>,
    rows: u64,
}

impl ScriptFile {
    /// Reads and checks `path`. Every error is one line naming the file,
    /// and the line when the TOML parser can point at one.
    pub fn read(path: &Path) -> Result<ScriptFile, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("--file {}: {e}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        Self::parse(&text, dir, path).map_err(|e| format!("--file {}{e}", path.display()))
    }

    /// Parses a file's text; errors start with `:LINE: ` or `: `.
    pub(super) fn parse(text: &str, dir: &Path, path: &Path) -> Result<ScriptFile, String> {
        let raw: RawFile = toml_file(text)?;
        let params = params(raw.params, dir)?;
        if raw.op.is_empty() || raw.op.len() > MAX_OPS {
            return Err(format!(
                ": give 1 to {MAX_OPS} [[op]] tables, not {}",
                raw.op.len()
            ));
        }
        let position = |name: &str| params.iter().position(|p| p.name == name);
        let mut ops = Vec::with_capacity(raw.op.len());
        for r in raw.op {
            let context = format!(": op '{}': ", r.name);
            let op = op(r, &params, &position).map_err(|e| format!("{context}{e}"))?;
            if ops.iter().any(|o: &Op| o.name == op.name) {
                return Err(format!("{context}two ops have this name"));
            }
            ops.push(op);
        }
        if ops.iter().all(|o| o.weight == 0) {
            return Err(": every op has weight 0: give one a weight of at least 1".to_string());
        }
        let family = ops[0].family();
        if let Some(other) = ops.iter().find(|o| o.family() != family) {
            return Err(format!(
                ": op '{}' is {}, op '{}' is {}: a file's ops are all of one family",
                ops[0].name,
                family.as_str(),
                other.name,
                other.family().as_str()
            ));
        }
        let prepare = prepare(raw.prepare, family, &position)?;
        Ok(ScriptFile {
            path: path.to_path_buf(),
            params,
            ops,
            family,
            prepare,
        })
    }
}

impl Op {
    fn family(&self) -> Family {
        match self.body {
            OpBody::Sql { .. } => Family::SQL,
            OpBody::Kv(_) => Family::KV,
            OpBody::Http(_) => Family::HTTP,
            OpBody::Cql(_) => Family::WIDE_COLUMN,
            OpBody::Search { .. } => Family::SEARCH,
        }
    }
}

/// The parameters `templates` use, each once, in index order.
fn used<'a>(templates: impl Iterator<Item = &'a Template>) -> Vec<usize> {
    let mut params: Vec<usize> = templates.flat_map(Template::params).collect();
    params.sort_unstable();
    params.dedup();
    params
}

fn op(r: RawOp, params: &[Param], position: &dyn Fn(&str) -> Option<usize>) -> Result<Op, String> {
    if r.name.is_empty()
        || !r
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err("a name is letters, digits and _".to_string());
    }
    let think = match &r.think {
        Some(t) => think(t)?,
        None => Duration::ZERO,
    };
    let bind = r
        .bind
        .iter()
        .map(|name| {
            position(name).ok_or_else(|| format!("bind: no parameter '{name}' in [params]"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let http = r.path.is_some() || r.method.is_some() || r.body.is_some() || !r.headers.is_empty();
    let given = [
        r.sql.is_some(),
        r.transaction.is_some(),
        r.command.is_some(),
        http,
        r.cql.is_some(),
        r.search.is_some(),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err(
            "give one of sql, transaction, command, path (an HTTP request), cql or search"
                .to_string(),
        );
    }
    if !bind.is_empty() && r.sql.is_none() && r.transaction.is_none() && r.cql.is_none() {
        return Err("bind applies to sql, transaction and cql only".to_string());
    }
    if r.index.is_some() != r.search.is_some() {
        return Err(
            "search and index go together: the query's body, and the index it asks".to_string(),
        );
    }
    let (body, params) = if let Some(sql) = r.sql {
        let statement = Statement::parse(&sql, &bind, position)?;
        let used = sorted(&statement.binds);
        (
            OpBody::Sql {
                statements: vec![statement],
                transaction: false,
            },
            used,
        )
    } else if let Some(texts) = r.transaction {
        if texts.is_empty() {
            return Err("transaction = [...] needs at least one statement".to_string());
        }
        let statements = texts
            .iter()
            .map(|t| Statement::parse(t, &bind, position))
            .collect::<Result<Vec<_>, _>>()?;
        let all: Vec<usize> = statements
            .iter()
            .flat_map(|s| s.binds.iter().copied())
            .collect();
        (
            OpBody::Sql {
                statements,
                transaction: true,
            },
            sorted(&all),
        )
    } else if let Some(cql) = r.cql {
        let statement = Statement::parse(&cql, &bind, position)?;
        let used = sorted(&statement.binds);
        (OpBody::Cql(statement), used)
    } else if let (Some(body), Some(index)) = (r.search, r.index) {
        let body = Template::parse(&body, position)?;
        let used = used(std::iter::once(&body));
        (OpBody::Search { index, body }, used)
    } else if let Some(text) = r.command {
        let command = Command::parse(&text, position)?;
        let used = used(command.words.iter());
        (OpBody::Kv(command), used)
    } else {
        let spec = request(
            RawRequest {
                weight: 1,
                method: r.method,
                path: r.path.unwrap_or_default(),
                headers: r.headers,
                body: r.body.unwrap_or_default(),
            },
            params,
        )?;
        let used = used([&spec.path, &spec.body].into_iter());
        (OpBody::Http(spec), used)
    };
    Ok(Op {
        name: Box::leak(r.name.into_boxed_str()),
        weight: r.weight,
        think,
        body,
        params,
    })
}

fn sorted(indexes: &[usize]) -> Vec<usize> {
    let mut v = indexes.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// `250us`, `5ms`, `1s`, `1.5s`.
fn think(text: &str) -> Result<Duration, String> {
    let bad = || format!("think '{text}' is not a duration: use e.g. 500us, 5ms or 1s");
    let (number, unit) = text
        .trim()
        .find(|c: char| c.is_ascii_alphabetic())
        .map(|i| text.trim().split_at(i))
        .ok_or_else(bad)?;
    let n: f64 = number.trim().parse().map_err(|_| bad())?;
    let seconds = match unit {
        "us" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        _ => return Err(bad()),
    };
    if !(0.0..=60.0).contains(&seconds) {
        return Err(format!("think '{text}' must be from 0 to 60s"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn prepare(
    raw: RawPrepare,
    family: Family,
    position: &dyn Fn(&str) -> Option<usize>,
) -> Result<Prepare, String> {
    let context = |e: String| format!(": [prepare] {e}");
    let tables: Vec<Table> = raw
        .tables
        .into_iter()
        .map(|t| {
            check_name("table", &t.name).map_err(context)?;
            if !matches!(family, Family::SQL | Family::WIDE_COLUMN) {
                return Err(context("tables are for SQL and CQL files".to_string()));
            }
            Ok(Table {
                name: t.name,
                columns: t.columns,
            })
        })
        .collect::<Result<_, _>>()?;
    let indexes: Vec<Index> = raw
        .indexes
        .into_iter()
        .map(|i| index(i, family).map_err(context))
        .collect::<Result<_, _>>()?;
    let loads = raw
        .load
        .into_iter()
        .map(|l| load(l, family, &tables, &indexes, position).map_err(context))
        .collect::<Result<_, _>>()?;
    Ok(Prepare {
        tables,
        indexes,
        loads,
    })
}

/// A table's or an index's name: letters, digits and _, as every system
/// takes it unquoted.
fn check_name(what: &str, name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if valid {
        Ok(())
    } else {
        Err(format!("{what} '{name}': a name is letters, digits and _"))
    }
}

fn index(raw: RawIndex, family: Family) -> Result<Index, String> {
    let valid = !raw.name.is_empty()
        && raw.name.len() <= 64
        && raw
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && !raw.name.starts_with(['_', '-']);
    if !valid {
        return Err(format!(
            "index '{}': a name is lower-case letters, digits, _ and -",
            raw.name
        ));
    }
    if family != Family::SEARCH {
        return Err("indexes are for search files".to_string());
    }
    let body = match raw.body {
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| format!("index '{}': body is not JSON: {e}", raw.name))?,
        None => serde_json::json!({}),
    };
    if !body.is_object() {
        return Err(format!(
            "index '{}': body is a JSON object (settings, mappings)",
            raw.name
        ));
    }
    Ok(Index {
        name: raw.name,
        body,
    })
}

/// An INSERT's statement, if it goes into one of `tables`: a load never
/// writes into anyone else's table.
fn insert_into_own(
    text: &str,
    tables: &[Table],
    position: &dyn Fn(&str) -> Option<usize>,
) -> Result<Statement, String> {
    let words: Vec<String> = text
        .split_whitespace()
        .take(3)
        .map(|w| w.split('(').next().unwrap_or_default().to_ascii_lowercase())
        .collect();
    let into_own = matches!(words.as_slice(), [insert, into, table]
        if insert == "insert" && into == "into"
            && tables.iter().any(|t| t.name.eq_ignore_ascii_case(table)));
    if !into_own {
        return Err(format!(
            "load '{text}': a load is INSERT INTO one of the tables [prepare] creates"
        ));
    }
    Statement::parse(text, &[], position)
}

fn load(
    l: RawLoad,
    family: Family,
    tables: &[Table],
    indexes: &[Index],
    position: &dyn Fn(&str) -> Option<usize>,
) -> Result<Load, String> {
    if l.index.is_some() && l.document.is_none() {
        return Err("a load's index goes with its document".to_string());
    }
    let (body, params) = match (l.sql, l.command, l.cql, l.document, family) {
        (Some(sql), None, None, None, Family::SQL) => {
            let statement = insert_into_own(&sql, tables, position)?;
            let params = sorted(&statement.binds);
            (LoadBody::Sql(statement), params)
        }
        (None, None, Some(cql), None, Family::WIDE_COLUMN) => {
            let statement = insert_into_own(&cql, tables, position)?;
            let params = sorted(&statement.binds);
            (LoadBody::Cql(statement), params)
        }
        (None, Some(text), None, None, Family::KV) => {
            let command = Command::parse(&text, position)?;
            if command.kind != CommandKind::Set {
                return Err(format!(
                    "load '{text}': a key-value load is SET KEY VALUE (cleanup deletes the keys whose values are still the ones it set)"
                ));
            }
            let params = used(command.words.iter());
            (LoadBody::Kv(command), params)
        }
        (None, None, None, Some(document), Family::SEARCH) => {
            let index = l.index.unwrap_or_default();
            if !indexes.iter().any(|i| i.name == index) {
                return Err(format!(
                    "load '{document}': a load's index = \"NAME\" is one of the indexes [prepare] creates"
                ));
            }
            // A bulk body holds a document a line.
            let document = Template::parse(&document.replace(['\r', '\n'], " "), position)?;
            let params = used(std::iter::once(&document));
            (LoadBody::Document { index, document }, params)
        }
        _ => {
            return Err(format!(
                "a load of a {} file is {}",
                family.as_str(),
                match family {
                    Family::SQL => "sql = \"INSERT INTO ...\"",
                    Family::KV => "command = \"SET ...\"",
                    Family::WIDE_COLUMN => "cql = \"INSERT INTO ...\"",
                    Family::SEARCH => "document = '{...}' with index = \"NAME\"",
                    _ => "not available: this family's files have no prepare",
                }
            ))
        }
    };
    if l.rows == 0 {
        return Err("a load needs rows of at least 1".to_string());
    }
    Ok(Load {
        body,
        rows: l.rows,
        params,
    })
}
