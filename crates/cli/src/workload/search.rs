//! The search workloads' options (esrally's names where it has them):
//! parsed, validated into [`SearchOptions`] and [`Queries`], listed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use loadcell_core::Family;
use loadcell_engine::{SessionGroup, SessionGroups};
use loadcell_workloads::search::corpus::Corpus;
use loadcell_workloads::search::mixed::{SearchMixedWorkload, BULK_GROUP, QUERY_GROUP};
use loadcell_workloads::search::queries::{Queries, QueryKind};
use loadcell_workloads::search::source::{IdConflicts, OnConflict, Source};
use loadcell_workloads::search::{
    IndexOptions, SearchBulkWorkload, SearchOptions, SearchQueryWorkload,
};

use loadcell_core::Target;
use loadcell_drivers::OpenError;
use loadcell_workloads::workload::Workload;

use super::{CliFamily, Entry, FamilySpec, RunShape, WorkloadArgs};
use crate::launch::{Job, Launch};

/// The index, the documents and the queries of a search run.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Search workload options (search-bulk, search-query, search-mixed)")]
pub struct SearchArgs {
    /// The index written to or queried (default loadcell-GENERATOR, or loadcell-corpus).
    #[arg(long, value_name = "NAME")]
    pub index: Option<String>,
    /// Built-in documents: geonames (~311 B, esrally's geonames track) or logs (~1.4 KB access logs) (default geonames).
    #[arg(long, value_name = "NAME")]
    pub generator: Option<String>,
    /// Documents from a file, one JSON object per line (esrally's documents.json; plain, .gz or .bz2).
    #[arg(long, value_name = "FILE")]
    pub corpus: Option<PathBuf>,
    /// Documents per _bulk request (esrally's geonames track sends 5000).
    #[arg(long, value_name = "N", default_value_t = 5000)]
    pub bulk_size: u64,
    /// Documents to index: search-bulk ends when all are acknowledged (default: until --time, or the whole corpus); search-query's prepare loads them (default 100000).
    #[arg(long, value_name = "N")]
    pub documents: Option<u64>,
    /// Primary shards of the index prepare creates.
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub shards: u32,
    /// Replicas of each shard.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub replicas: u32,
    /// The index's refresh interval, e.g. 1s, 30s or -1 (default: the server's).
    #[arg(long, value_name = "TIME")]
    pub refresh_interval: Option<String>,
    /// The index's mapping, JSON: a mapping, or an index body holding "mappings" (default: the generator's).
    #[arg(long, value_name = "FILE")]
    pub mapping: Option<PathBuf>,
    /// search-bulk: documents with ids, some reusing an earlier one's: none, sequential or random (esrally's conflicts).
    #[arg(long, value_name = "KIND")]
    pub id_conflicts: Option<String>,
    /// With --id-conflicts: what a reused id does, index or update (default index).
    #[arg(long, value_name = "ACTION")]
    pub on_conflict: Option<String>,
    /// With --id-conflicts: the percentage of documents that reuse an id (default 25).
    #[arg(long, value_name = "PERCENT")]
    pub conflict_probability: Option<u64>,
    /// search-query: term, match_phrase, match or range (default term).
    #[arg(long, value_name = "KIND")]
    pub query: Option<String>,
    /// search-query: weighted query templates with parameters, TOML (see docs/families/search.md).
    #[arg(long, value_name = "FILE")]
    pub query_file: Option<PathBuf>,
    /// search-mixed: sessions sending queries, beside the --threads × --clients sending bulks (default 1, as esrally's query tasks).
    #[arg(long, value_name = "N", value_parser = crate::values::positive_u64)]
    pub query_clients: Option<u64>,
    /// search-mixed: the queries' target rate per second, open loop (esrally's target-throughput); --rate is the bulks'. Without it, queries run closed loop.
    #[arg(long, value_name = "PER_SEC", value_parser = crate::values::positive_f64)]
    pub query_rate: Option<f64>,
}

/// A search workload, resolved.
#[derive(Debug, Clone)]
pub enum SearchSpec {
    Bulk(SearchBulkWorkload),
    Query(SearchQueryWorkload),
    Mixed(SearchMixedWorkload),
}

impl CliFamily for SearchArgs {
    const WHAT: &'static str = "a search workload option";
    type Spec = SearchSpec;

    fn catalog() -> Vec<Entry> {
        vec![
            (
                "search-bulk",
                &[Family::SEARCH],
                "esrally-style bulk indexing: geonames-like or log documents, or a --corpus file, in _bulk requests of --bulk-size; docs/s, failed items by reason, and the index's _count checked against what was acknowledged",
            ),
            (
                "search-query",
                &[Family::SEARCH],
                "esrally-style queries: term, match_phrase, match or range, or --query-file templates, with values the indexed documents hold; queries that hit nothing counted (no_hits)",
            ),
            (
                "search-mixed",
                &[Family::SEARCH],
                "indexing while searching: --threads × --clients sessions send bulks (at --rate) while --query-clients send queries (at --query-rate), each group's throughput and latency reported apart; the index's _count checked after",
            ),
        ]
    }

    fn resolve(name: &str, all: &WorkloadArgs, given: &[String]) -> Result<SearchSpec, String> {
        resolve(name, &all.search, given)
    }
}

impl SearchSpec {
    fn opts(&self) -> &SearchOptions {
        match self {
            SearchSpec::Bulk(w) => &w.opts,
            SearchSpec::Query(w) => &w.opts,
            SearchSpec::Mixed(w) => &w.queries.opts,
        }
    }
}

impl FamilySpec for SearchSpec {
    fn workload(&self) -> &dyn Workload {
        match self {
            SearchSpec::Bulk(w) => w,
            SearchSpec::Query(w) => w,
            SearchSpec::Mixed(w) => w,
        }
    }

    fn prepare_hint(&self) -> String {
        prepare_hint(self.opts())
    }

    fn implied_events(&self, _all: &WorkloadArgs, _sessions: u64, _timed: bool) -> Option<u64> {
        match self {
            SearchSpec::Bulk(w) => implied_events(&w.opts),
            SearchSpec::Query(_) | SearchSpec::Mixed(_) => None,
        }
    }

    fn groups(&self, run: &RunShape) -> Option<SessionGroups> {
        match self {
            SearchSpec::Mixed(w) => Some(groups(w, run)),
            SearchSpec::Bulk(_) | SearchSpec::Query(_) => None,
        }
    }
}

impl Launch for SearchSpec {
    fn launch<J: Job>(&self, target: &Target, job: J) -> Result<J::Output, OpenError> {
        match self {
            SearchSpec::Bulk(w) => w.launch(target, job),
            SearchSpec::Query(w) => w.launch(target, job),
            SearchSpec::Mixed(w) => w.launch(target, job),
        }
    }

    #[cfg(test)]
    fn dispatched(&self) -> Vec<&'static str> {
        match self {
            SearchSpec::Bulk(w) => w.dispatched(),
            SearchSpec::Query(w) => w.dispatched(),
            SearchSpec::Mixed(w) => w.dispatched(),
        }
    }
}

crate::launch::runs_on!(SearchBulkWorkload: search);
crate::launch::runs_on!(SearchQueryWorkload: search);
crate::launch::runs_on!(SearchMixedWorkload: search);

/// Options only some of the workloads take.
const BULK_ONLY: &[&str] = &["--id-conflicts", "--on-conflict", "--conflict-probability"];
const QUERY_ONLY: &[&str] = &["--query", "--query-file"];
const MIXED_ONLY: &[&str] = &["--query-clients", "--query-rate"];

fn resolve(
    name: &str,
    a: &SearchArgs,
    given: &[String],
) -> Result<SearchSpec, String> {
    let others: &[&[&str]] = match name {
        "search-bulk" => &[QUERY_ONLY, MIXED_ONLY],
        "search-query" => &[BULK_ONLY, MIXED_ONLY],
        _ => &[],
    };
    let refused = |f: &&String| others.iter().any(|o| o.contains(&f.as_str()));
    if let Some(flag) = given.iter().find(refused) {
        return Err(format!("{flag} does not apply to {name}"));
    }
    let opts = options(a)?;
    if name == "search-bulk" {
        return Ok(SearchSpec::Bulk(SearchBulkWorkload { opts }));
    }
    let queries = match (&a.query, &a.query_file) {
        (Some(_), Some(_)) => return Err("give --query or --query-file, not both".to_string()),
        (_, Some(file)) => Queries::read(file, &opts.source)?,
        (kind, None) => {
            let kind = kind.as_deref().unwrap_or("term");
            let kind = QueryKind::parse(kind).ok_or_else(|| {
                format!(
                    "--query '{kind}' is not a query kind: use {}",
                    QueryKind::NAMES
                )
            })?;
            Queries::builtin(kind, &opts.source)?
        }
    };
    let queries = SearchQueryWorkload { opts, queries };
    if name == "search-mixed" {
        return Ok(SearchSpec::Mixed(SearchMixedWorkload {
            queries,
            query_sessions: a.query_clients.unwrap_or(1) as usize,
            query_rate: a.query_rate,
        }));
    }
    Ok(SearchSpec::Query(queries))
}

/// `search-mixed`'s session groups: the bulks' (`threads × clients`, at
/// `--rate`), then the queries'.
fn groups(w: &SearchMixedWorkload, run: &RunShape) -> SessionGroups {
    SessionGroups {
        first: BULK_GROUP,
        others: vec![SessionGroup {
            name: QUERY_GROUP,
            sessions: w.query_sessions,
            rate: w.query_rate.map(|per_sec| run.rate_at(per_sec)),
        }],
    }
}

fn options(a: &SearchArgs) -> Result<SearchOptions, String> {
    let source = match (&a.generator, &a.corpus) {
        (Some(_), Some(_)) => return Err("give --generator or --corpus, not both".to_string()),
        (_, Some(path)) => Source::Corpus(Arc::new(Corpus::read(path)?)),
        (name, None) => {
            let name = name.as_deref().unwrap_or("geonames");
            Source::generator(name).ok_or_else(|| {
                format!("--generator '{name}' is not a generator: use geonames or logs")
            })?
        }
    };
    if a.bulk_size == 0 {
        return Err("--bulk-size must be at least 1".to_string());
    }
    if a.documents == Some(0) {
        return Err("--documents must be at least 1".to_string());
    }
    if a.shards == 0 {
        return Err("--shards must be at least 1".to_string());
    }
    let name = a
        .index
        .clone()
        .unwrap_or_else(|| format!("loadcell-{}", source.name()));
    check_index_name(&name)?;
    if let Some(r) = &a.refresh_interval {
        check_interval(r)?;
    }
    let mapping = a
        .mapping
        .as_ref()
        .map(|path| Ok::<_, String>((path.clone(), read_mapping(path)?)))
        .transpose()?;
    Ok(SearchOptions {
        index: IndexOptions {
            name,
            shards: a.shards,
            replicas: a.replicas,
            refresh_interval: a.refresh_interval.clone(),
            mapping,
        },
        source,
        bulk_size: a.bulk_size,
        documents: a.documents,
        conflicts: conflicts(a)?,
    })
}

/// esrally's `conflicts`, `on_conflict` and `conflict_probability`.
fn conflicts(a: &SearchArgs) -> Result<IdConflicts, String> {
    let on_conflict = match a.on_conflict.as_deref() {
        None | Some("index") => OnConflict::Index,
        Some("update") => OnConflict::Update,
        Some(other) => {
            return Err(format!(
                "--on-conflict '{other}' is not an action: use index or update"
            ))
        }
    };
    let percent = a.conflict_probability.unwrap_or(25);
    if percent > 99 {
        return Err(format!(
            "--conflict-probability {percent}: give 0 to 99 (a percentage, and some documents need ids of their own)"
        ));
    }
    match a.id_conflicts.as_deref() {
        None | Some("none") => {
            if a.on_conflict.is_some() || a.conflict_probability.is_some() {
                return Err(
                    "--on-conflict and --conflict-probability need --id-conflicts sequential or random"
                        .to_string(),
                );
            }
            Ok(IdConflicts::None)
        }
        Some("sequential") => Ok(IdConflicts::Sequential {
            percent,
            on_conflict,
        }),
        Some("random") => Ok(IdConflicts::Random {
            percent,
            on_conflict,
        }),
        Some(other) => Err(format!(
            "--id-conflicts '{other}' is not a kind: use none, sequential or random"
        )),
    }
}

/// An index name the server takes, and that goes unescaped into a URL
/// path and a JSON string.
fn check_index_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with(['-', '_', '+', '.'])
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "--index '{name}' is not an index name: use lowercase letters, digits, '-', '_' and '.', not first"
        ))
    }
}

/// `-1`, or a number and a unit (`500ms`, `1s`, `5m`).
fn check_interval(text: &str) -> Result<(), String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let valid = text == "-1"
        || (!digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && ["ms", "s", "m", "h", "d"].contains(&unit));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "--refresh-interval '{text}' is not an interval: use e.g. 1s, 30s, 500ms, or -1 (never)"
        ))
    }
}

/// A mapping from `--mapping FILE`: the object itself, or the `mappings`
/// of an index body (esrally's `index.json`, its templates filled in).
fn read_mapping(path: &Path) -> Result<serde_json::Value, String> {
    let at = |e: String| format!("--mapping {}: {e}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| at(format!("not JSON ({e})")))?;
    let mapping = match value.get("mappings") {
        Some(mappings) => mappings.clone(),
        None => value,
    };
    if !mapping.is_object() {
        return Err(at("a mapping is a JSON object".to_string()));
    }
    Ok(mapping)
}

/// `search-bulk` ends when its documents are all sent: one event a bulk.
fn implied_events(opts: &SearchOptions) -> Option<u64> {
    opts.total().map(|n| n.div_ceil(opts.bulk_size))
}

/// The options `prepare` needs again, for hints.
fn prepare_hint(opts: &SearchOptions) -> String {
    let mut hint = format!("--index {}", opts.index.name);
    match &opts.source {
        Source::Corpus(c) => hint += &format!(" --corpus {}", c.path.display()),
        generator => hint += &format!(" --generator {}", generator.name()),
    }
    hint
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(a: SearchArgs) -> String {
        options(&a).unwrap_err()
    }

    fn args() -> SearchArgs {
        SearchArgs {
            bulk_size: 5000,
            shards: 6,
            ..SearchArgs::default()
        }
    }

    #[test]
    fn mistakes_are_refused_in_one_line() {
        assert_eq!(
            err(SearchArgs {
                bulk_size: 0,
                ..args()
            }),
            "--bulk-size must be at least 1"
        );
        assert!(err(SearchArgs {
            generator: Some("nope".into()),
            ..args()
        })
        .starts_with("--generator 'nope' is not a generator"));
        assert_eq!(
            err(SearchArgs {
                generator: Some("logs".into()),
                corpus: Some("x.json".into()),
                ..args()
            }),
            "give --generator or --corpus, not both"
        );
        let e = err(SearchArgs {
            corpus: Some("/nonexistent/docs.json".into()),
            ..args()
        });
        assert!(e.starts_with("--corpus /nonexistent/docs.json: "), "{e}");
        assert!(err(SearchArgs {
            index: Some("My Index".into()),
            ..args()
        })
        .contains("not an index name"));
        assert!(err(SearchArgs {
            refresh_interval: Some("1 sec".into()),
            ..args()
        })
        .contains("not an interval"));
        assert!(err(SearchArgs {
            id_conflicts: Some("often".into()),
            ..args()
        })
        .contains("use none, sequential or random"));
        assert!(err(SearchArgs {
            on_conflict: Some("update".into()),
            ..args()
        })
        .contains("need --id-conflicts"));
        assert!(err(SearchArgs {
            id_conflicts: Some("random".into()),
            conflict_probability: Some(120),
            ..args()
        })
        .contains("give 0 to 99"));
        let e = err(SearchArgs {
            mapping: Some("/nonexistent/m.json".into()),
            ..args()
        });
        assert!(
            e.starts_with("--mapping /nonexistent/m.json:") && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn defaults_follow_esrallys_geonames() {
        let o = options(&args()).unwrap();
        assert_eq!(o.index.name, "loadcell-geonames");
        assert_eq!(
            (o.bulk_size, o.index.shards, o.index.replicas),
            (5000, 6, 0)
        );
        assert_eq!(o.conflicts, IdConflicts::None);
        assert_eq!(implied_events(&o), None, "a generator runs until --time");
        let o = options(&SearchArgs {
            documents: Some(12_001),
            ..args()
        })
        .unwrap();
        assert_eq!(implied_events(&o), Some(3));
        let o = options(&SearchArgs {
            id_conflicts: Some("sequential".into()),
            on_conflict: Some("update".into()),
            ..args()
        })
        .unwrap();
        assert_eq!(
            o.conflicts,
            IdConflicts::Sequential {
                percent: 25,
                on_conflict: OnConflict::Update
            }
        );
    }

    #[test]
    fn a_mapping_file_is_a_mapping_or_an_index_body() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.json");
        std::fs::write(
            &path,
            r#"{"settings":{},"mappings":{"properties":{"a":{"type":"long"}}}}"#,
        )
        .unwrap();
        assert_eq!(
            read_mapping(&path).unwrap()["properties"]["a"]["type"],
            "long"
        );
        std::fs::write(&path, r#"{"properties":{}}"#).unwrap();
        assert!(read_mapping(&path).unwrap()["properties"].is_object());
        std::fs::write(&path, "{{ jinja }}").unwrap();
        assert!(read_mapping(&path).unwrap_err().contains("not JSON"));
    }

    #[test]
    fn each_workload_refuses_the_others_options() {
        let given = |flags: &[&str]| flags.iter().map(|f| f.to_string()).collect::<Vec<_>>();
        let a = SearchArgs {
            query: Some("match".into()),
            ..args()
        };
        let e = resolve("search-bulk", &a, &given(&["--query"])).unwrap_err();
        assert_eq!(e, "--query does not apply to search-bulk");
        let a = SearchArgs {
            id_conflicts: Some("random".into()),
            ..args()
        };
        let e = resolve("search-query", &a, &given(&["--id-conflicts"])).unwrap_err();
        assert_eq!(e, "--id-conflicts does not apply to search-query");
        let a = SearchArgs {
            query: Some("fuzzy".into()),
            ..args()
        };
        let e = resolve("search-query", &a, &given(&["--query"])).unwrap_err();
        assert!(e.starts_with("--query 'fuzzy' is not a query kind"), "{e}");
        let a = SearchArgs {
            query: Some("term".into()),
            query_file: Some("q.toml".into()),
            ..args()
        };
        let e = resolve("search-query", &a, &given(&["--query", "--query-file"])).unwrap_err();
        assert_eq!(e, "give --query or --query-file, not both");
    }
}
