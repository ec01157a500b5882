//! The queries `search-query` sends: one of the built-in kinds
//! (`--query term|match_phrase|match|range`), or several weighted
//! templates from `--query-file` (TOML, the shape of the HTTP workload's
//! request file, whose template and parameter machinery it shares):
//!
//! ```toml
//! [params]
//! country = { type = "field", field = "country_code" }  # a value the documents hold
//! min = { type = "uniform", min = 0, max = 100000 }     # as --request-file's
//!
//! [[query]]
//! weight = 3                                            # default 1
//! body = '{"query":{"term":{"country_code":"${country}"}}}'
//!
//! [[query]]
//! body = '{"query":{"range":{"population":{"gte":${min}}}}}'
//! ```
//!
//! A `field` parameter's values are ones the indexed documents really
//! hold (the generator draws them as its documents do; a corpus is
//! sampled), so that queries hit. A string value is written escaped for
//! a JSON string: put it between quotes in the body.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::source::{FieldValues, Source};
use crate::http::{param, toml_file, Param, RawParam, Template};

/// A built-in query kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryKind {
    Term,
    MatchPhrase,
    Match,
    Range,
}

impl QueryKind {
    pub const NAMES: &'static str = "term, match_phrase, match or range";

    pub fn parse(s: &str) -> Option<QueryKind> {
        Some(match s {
            "term" => QueryKind::Term,
            "match_phrase" => QueryKind::MatchPhrase,
            "match" => QueryKind::Match,
            "range" => QueryKind::Range,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueryKind::Term => "term",
            QueryKind::MatchPhrase => "match_phrase",
            QueryKind::Match => "match",
            QueryKind::Range => "range",
        }
    }

    /// The query's body with `${value}` for its value, and the field the
    /// value is drawn from, for documents from `source`.
    fn template(self, source: &Source) -> (String, &'static str) {
        let logs = matches!(source, Source::Logs(_));
        let generated = !matches!(source, Source::Corpus(_));
        let (field, value_field) = match (self, logs) {
            (QueryKind::Term, false) => ("country_code", "country_code"),
            (QueryKind::Term, true) => ("http.response.status_code", "http.response.status_code"),
            (QueryKind::MatchPhrase, false) => ("name", "name"),
            (QueryKind::MatchPhrase, true) => ("message", "message.request"),
            // A word of a name: a generator knows its words; a corpus's
            // names are matched whole.
            (QueryKind::Match, false) if generated => ("name", "name.word"),
            (QueryKind::Match, false) => ("name", "name"),
            (QueryKind::Match, true) => ("message", "message.word"),
            (QueryKind::Range, false) => ("population", "population"),
            (QueryKind::Range, true) => ("http.response.body.bytes", "http.response.body.bytes"),
        };
        let body = match self {
            QueryKind::Range => {
                format!(r#"{{"query":{{"range":{{"{field}":{{"gte":${{value}}}}}}}}}}"#)
            }
            QueryKind::Term if logs => {
                format!(r#"{{"query":{{"term":{{"{field}":${{value}}}}}}}}"#)
            }
            kind => format!(
                r#"{{"query":{{"{}":{{"{field}":"${{value}}"}}}}}}"#,
                kind.as_str()
            ),
        };
        (body, value_field)
    }
}

/// One query of a set.
#[derive(Debug, Clone)]
pub struct QuerySpec {
    pub weight: u32,
    pub body: Template,
}

/// Where a parameter's values come from.
#[derive(Debug, Clone)]
pub enum QueryParam {
    /// Values of a field of the indexed documents.
    Field { name: String, values: FieldValues },
    /// Drawn as a request file's parameter is.
    Drawn(Param),
}

impl QueryParam {
    fn name(&self) -> &str {
        match self {
            QueryParam::Field { name, .. } => name,
            QueryParam::Drawn(p) => &p.name,
        }
    }
}

/// The queries of a run.
#[derive(Debug, Clone)]
pub struct Queries {
    pub queries: Vec<QuerySpec>,
    pub params: Vec<QueryParam>,
    /// The built-in kind, or the file the queries came from.
    pub origin: QueryOrigin,
}

#[derive(Debug, Clone)]
pub enum QueryOrigin {
    Kind(QueryKind),
    File(PathBuf),
}

impl Queries {
    /// The built-in query `kind` for documents from `source`.
    pub fn builtin(kind: QueryKind, source: &Source) -> Result<Queries, String> {
        let (body, field) = kind.template(source);
        let params = vec![QueryParam::Field {
            name: "value".to_string(),
            values: source.values(field).map_err(|e| {
                format!(
                    "--query {}: {e}; --query-file queries any field",
                    kind.as_str()
                )
            })?,
        }];
        let body = Template::parse(&body, |name| (name == "value").then_some(0))?;
        Ok(Queries {
            queries: vec![QuerySpec { weight: 1, body }],
            params,
            origin: QueryOrigin::Kind(kind),
        })
    }

    /// Reads and checks `--query-file path`, its field parameters drawn
    /// from `source`. Every error is one line naming the file.
    pub fn read(path: &Path, source: &Source) -> Result<Queries, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--query-file {}: {e}", path.display()))?;
        Queries::parse(&text, source, path.parent().unwrap_or(Path::new("")))
            .map(|(queries, params)| Queries {
                queries,
                params,
                origin: QueryOrigin::File(path.to_path_buf()),
            })
            .map_err(|e| format!("--query-file {}{e}", path.display()))
    }

    /// Parses a file's text; errors start with `:LINE: ` or `: `.
    fn parse(
        text: &str,
        source: &Source,
        dir: &Path,
    ) -> Result<(Vec<QuerySpec>, Vec<QueryParam>), String> {
        let raw: RawFile = toml_file(text)?;
        let params = raw
            .params
            .into_iter()
            .map(|(name, raw)| {
                query_param(name.clone(), raw, source, dir)
                    .map_err(|e| format!(": [params] {name}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if raw.query.is_empty() || raw.query.len() > MAX_QUERIES {
            return Err(format!(
                ": give 1 to {MAX_QUERIES} [[query]] tables, not {}",
                raw.query.len()
            ));
        }
        let position = |name: &str| params.iter().position(|p| p.name() == name);
        let queries = raw
            .query
            .into_iter()
            .enumerate()
            .map(|(i, q)| {
                let context = |e: String| format!(": query {}: {e}", i + 1);
                if q.weight == 0 {
                    return Err(context("weight must be at least 1".to_string()));
                }
                let body = Template::parse(&q.body, position).map_err(context)?;
                Ok(QuerySpec {
                    weight: q.weight,
                    body,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok((queries, params))
    }
}

/// The most queries a file may hold.
const MAX_QUERIES: usize = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    params: BTreeMap<String, toml::Table>,
    query: Vec<RawQuery>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuery {
    #[serde(default = "one")]
    weight: u32,
    body: String,
}

fn one() -> u32 {
    1
}

/// A `[params]` entry: `type = "field"` here, any other type as a
/// request file's.
fn query_param(
    name: String,
    mut raw: toml::Table,
    source: &Source,
    dir: &Path,
) -> Result<QueryParam, String> {
    if raw.get("type").and_then(toml::Value::as_str) != Some("field") {
        let raw: RawParam = raw
            .try_into()
            .map_err(|e: toml::de::Error| e.message().trim().replace('\n', " "))?;
        return Ok(QueryParam::Drawn(param(name, raw, dir)?));
    }
    raw.remove("type");
    let field = match raw.remove("field") {
        Some(toml::Value::String(field)) => field,
        _ => return Err("type 'field' needs field = \"NAME\"".to_string()),
    };
    if let Some(other) = raw.keys().next() {
        return Err(format!("'{other}' does not apply to type 'field'"));
    }
    Ok(QueryParam::Field {
        name,
        values: source.values(&field)?,
    })
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::super::mix::Mix;
    use super::*;
    use crate::http::Drawer;

    /// The bodies `queries` makes with values drawn as a session does.
    pub(crate) fn bodies(queries: &Queries, n: usize) -> Vec<serde_json::Value> {
        let mut mix = Mix::new(1, 0);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut values = vec![Vec::new(); queries.params.len()];
        let mut body = Vec::new();
        let mut drawers: Vec<Option<Drawer>> = queries
            .params
            .iter()
            .map(|p| match p {
                QueryParam::Drawn(p) => Some(Drawer::new(p, 0, 1)),
                QueryParam::Field { .. } => None,
            })
            .collect();
        (0..n)
            .map(|i| {
                for (p, param) in queries.params.iter().enumerate() {
                    match (param, &mut drawers[p]) {
                        (QueryParam::Field { values: v, .. }, _) => {
                            v.draw(&mut mix, 1000, &mut values[p])
                        }
                        (_, Some(d)) => d.draw(&mut rng, &mut values[p]),
                        _ => unreachable!(),
                    }
                }
                queries.queries[i % queries.queries.len()]
                    .body
                    .expand(&values, &mut body);
                serde_json::from_slice(&body).unwrap()
            })
            .collect()
    }

    #[test]
    fn built_in_queries_are_json_with_values_documents_hold() {
        for name in ["geonames", "logs"] {
            let source = Source::generator(name).unwrap();
            for kind in ["term", "match_phrase", "match", "range"] {
                let q = Queries::builtin(QueryKind::parse(kind).unwrap(), &source).unwrap();
                for body in bodies(&q, 50) {
                    assert!(body["query"][kind].is_object(), "{body}");
                }
            }
        }
        let geonames = Source::generator("geonames").unwrap();
        let q = Queries::builtin(QueryKind::Term, &geonames).unwrap();
        let countries: Vec<_> = bodies(&q, 200)
            .iter()
            .map(|b| {
                b["query"]["term"]["country_code"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let us = countries.iter().filter(|c| *c == "US").count();
        assert!((20..60).contains(&us), "{us} of 200 ask for the US");
    }

    #[test]
    fn a_corpus_without_the_kinds_field_is_refused_with_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docs.json");
        std::fs::write(&path, "{\"status\": 200}\n").unwrap();
        let corpus = super::super::corpus::Corpus::read(&path).unwrap();
        let source = Source::Corpus(std::sync::Arc::new(corpus));
        let e = Queries::builtin(QueryKind::Term, &source).unwrap_err();
        assert!(e.starts_with("--query term: --corpus "), "{e}");
        assert!(
            e.contains("field 'country_code'") && e.ends_with("--query-file queries any field")
        );
    }

    const FILE: &str = r#"
[params]
cc = { type = "field", field = "country_code" }
min = { type = "uniform", min = 10, max = 20 }

[[query]]
weight = 3
body = '{"query":{"term":{"country_code":"${cc}"}}}'

[[query]]
body = '{"query":{"range":{"population":{"gte":${min}}}}}'
"#;

    #[test]
    fn a_query_file_gives_weighted_templates_with_both_kinds_of_parameter() {
        let source = Source::generator("geonames").unwrap();
        let (queries, params) = Queries::parse(FILE, &source, Path::new("")).unwrap();
        assert_eq!((queries[0].weight, queries[1].weight), (3, 1));
        let q = Queries {
            queries,
            params,
            origin: QueryOrigin::Kind(QueryKind::Term),
        };
        let bodies = bodies(&q, 4);
        assert!(bodies[0]["query"]["term"]["country_code"].is_string());
        let min = bodies[1]["query"]["range"]["population"]["gte"]
            .as_u64()
            .unwrap();
        assert!((10..=20).contains(&min));
    }

    #[test]
    fn query_file_mistakes_are_one_line() {
        let source = Source::generator("geonames").unwrap();
        let err = |text: &str| Queries::parse(text, &source, Path::new("")).unwrap_err();
        let e = err("[[query]]\nbody = '{\"q\": \"${nope}\"}'\n");
        assert!(
            e.contains("query 1: '{\"q\": \"${nope}\"}': no parameter 'nope'"),
            "{e}"
        );
        let e =
            err("[params]\nx = { type = \"field\", field = \"color\" }\n[[query]]\nbody = '{}'\n");
        assert!(
            e.starts_with(": [params] x: the geonames generator has no values of field 'color'"),
            "{e}"
        );
        let e = err("[params]\nx = { type = \"field\" }\n[[query]]\nbody = '{}'\n");
        assert!(e.contains("needs field = "), "{e}");
        let e =
            err("[params]\nx = { type = \"zipf\", min = 1, max = 2 }\n[[query]]\nbody = '{}'\n");
        assert!(e.contains("[params] x: unknown type 'zipf'"), "{e}");
        let e = err("[[query]]\nbdy = '{}'\n");
        assert!(e.starts_with(":2: unknown field `bdy`"), "{e}");
        let e = err("[[query]]\nweight = 0\nbody = '{}'\n");
        assert!(e.contains("query 1: weight must be at least 1"), "{e}");
        assert!(!e.contains('\n'));
    }
}
