//! The search workloads (esrally's model), on OpenSearch and
//! Elasticsearch:
//!
//! - `search-bulk`: one `_bulk` request of `--bulk-size` documents per
//!   event, from a generator (`geonames`, `logs`) or a `--corpus` file,
//!   until `--documents` are acknowledged or the time is up. Documents
//!   are counted as the run's items (docs/s), failed ones as errors by
//!   their reason's type, documents the server answered `noop` (an ingest
//!   pipeline's `drop`) as `dropped_by_server`. `prepare` only creates
//!   the index (loading is the run); after the run, the `_count` of the
//!   run's own documents is compared with what the run had acknowledged
//!   ([`Lifecycle::verify`]).
//! - `search-query`: one `_search` per event, of a built-in kind or from
//!   `--query-file` templates, with values the indexed documents hold;
//!   a query that hits nothing is counted (`no_hits`). Its `prepare`
//!   creates the index and loads `--documents`.
//!
//! The index loadcell creates carries a random `loadcell:` tag in its
//! mapping's `_meta` ([`marker::Tag`]), and every document loadcell
//! writes the id of the run that wrote it ([`source::RUN_FIELD`]):
//! `cleanup` deletes an index only if it carries the tag and holds no
//! document without that field, unless `--force`.

pub mod corpus;
pub mod geonames;
pub mod logs;
mod mix;
pub mod mixed;
pub mod queries;
pub mod source;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::family::SearchFamily;
use loadcell_core::search::SearchConn;
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use loadcell_record::result::Verification;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::failures::Failures;
use crate::http::{Drawer, Template};
use crate::prepare::load::load_in_parallel;
use crate::prepare::marker::Tag;
use crate::prepare::{CheckError, NotPrepared, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading, Workload};
use mix::Mix;
use queries::{Queries, QueryOrigin, QueryParam};
use source::{BulkWriter, IdConflicts, OnConflict, RunField, Source, FOREIGN_QUERY, RUN_FIELD};

/// The key of loadcell's tag in an index's mapping `_meta`.
const META_KEY: &str = "loadcell";

/// The seed of the documents `search-query`'s `prepare` loads.
const PREPARE_SEED: u64 = 1;

/// The index a run writes to or reads from, and how it is created.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    pub name: String,
    pub shards: u32,
    pub replicas: u32,
    /// `index.refresh_interval` (`1s`, `-1`); the server's default if unset.
    pub refresh_interval: Option<String>,
    /// `--mapping FILE` and the mapping it holds; else the generator's.
    pub mapping: Option<(PathBuf, Value)>,
}

/// What both search workloads are given.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    pub index: IndexOptions,
    pub source: Source,
    pub bulk_size: u64,
    /// Documents to index (`search-bulk`: the run's; `search-query`: what
    /// `prepare` loads). `None`: until the time is up, or a corpus's lines.
    pub documents: Option<u64>,
    pub conflicts: IdConflicts,
}

impl SearchOptions {
    /// How many documents there are to index, if there is an end.
    pub fn total(&self) -> Option<u64> {
        self.documents.or(self.source.documents())
    }

    fn to_map(&self) -> BTreeMap<String, Value> {
        let i = &self.index;
        let mut map = BTreeMap::from([
            ("index".to_string(), json!(i.name)),
            ("shards".to_string(), json!(i.shards)),
            ("replicas".to_string(), json!(i.replicas)),
            ("bulk_size".to_string(), json!(self.bulk_size)),
        ]);
        match &self.source {
            Source::Corpus(c) => {
                map.insert("corpus".to_string(), json!(c.path.display().to_string()))
            }
            generator => map.insert("generator".to_string(), json!(generator.name())),
        };
        if let Some(n) = self.documents {
            map.insert("documents".to_string(), json!(n));
        }
        if let Some(r) = &i.refresh_interval {
            map.insert("refresh_interval".to_string(), json!(r));
        }
        if let Some((path, _)) = &i.mapping {
            map.insert("mapping".to_string(), json!(path.display().to_string()));
        }
        let (conflicts, percent, on_conflict) = match self.conflicts {
            IdConflicts::None => ("none", None, None),
            IdConflicts::Sequential {
                percent,
                on_conflict,
            } => ("sequential", Some(percent), Some(on_conflict)),
            IdConflicts::Random {
                percent,
                on_conflict,
            } => ("random", Some(percent), Some(on_conflict)),
        };
        map.insert("id_conflicts".to_string(), json!(conflicts));
        if let (Some(percent), Some(on_conflict)) = (percent, on_conflict) {
            map.insert("conflict_probability".to_string(), json!(percent));
            let action = match on_conflict {
                OnConflict::Index => "index",
                OnConflict::Update => "update",
            };
            map.insert("on_conflict".to_string(), json!(action));
        }
        map
    }

    /// The body that creates the index: its settings, and the mapping
    /// with loadcell's `tag` in its `_meta`.
    fn index_body(&self, tag: &Tag) -> Vec<u8> {
        let i = &self.index;
        let mut mapping = match (&i.mapping, self.source.mapping()) {
            (Some((_, mapping)), _) => mapping.clone(),
            (None, Some(text)) => {
                serde_json::from_str(text).expect("the generators' mappings are JSON")
            }
            (None, None) => json!({}),
        };
        tag_mapping(&mut mapping, tag);
        let mut settings = json!({
            "number_of_shards": i.shards,
            "number_of_replicas": i.replicas,
        });
        if let Some(r) = &i.refresh_interval {
            settings["refresh_interval"] = json!(r);
        }
        serde_json::to_vec(&json!({ "settings": { "index": settings }, "mappings": mapping }))
            .expect("JSON serializes")
    }
}

/// Puts loadcell's `tag` into an index mapping's `_meta`, and maps the
/// field each of loadcell's documents carries ([`RUN_FIELD`]).
pub(crate) fn tag_mapping(mapping: &mut Value, tag: &Tag) {
    mapping["_meta"][META_KEY] = json!(tag.as_str());
    mapping["properties"][RUN_FIELD] = json!({ "type": "keyword" });
}

/// Whose index a name is.
#[derive(Debug, PartialEq, Eq)]
enum Owner {
    Nobody,
    /// Created by loadcell: its mapping's `_meta` carries a tag.
    Loadcell,
    Other,
}

async fn owner<C: SearchConn>(conn: &mut C, index: &str) -> Result<Owner, DriverError> {
    let Some(meta) = conn.index_meta(index).await? else {
        return Ok(Owner::Nobody);
    };
    let meta: Value = serde_json::from_str(&meta).unwrap_or_default();
    let tagged = meta
        .get(META_KEY)
        .and_then(Value::as_str)
        .and_then(Tag::parse)
        .is_some();
    Ok(if tagged {
        Owner::Loadcell
    } else {
        Owner::Other
    })
}

/// Creates the index, tagged as loadcell's; leaves one loadcell created
/// as it is, and refuses one it did not. Returns whether it created it.
async fn create_index<C: SearchConn>(
    conn: &mut C,
    opts: &SearchOptions,
    observer: &dyn PrepareObserver,
) -> Result<bool, DriverError> {
    create_tagged_index(conn, &opts.index.name, |tag| opts.index_body(tag), observer).await
}

/// Creates index `name` from the body `body` gives for a fresh tag, when
/// there is no such index; leaves one loadcell created as it is, and
/// refuses one it did not. Returns whether it created it.
pub(crate) async fn create_tagged_index<C: SearchConn>(
    conn: &mut C,
    name: &str,
    body: impl FnOnce(&Tag) -> Vec<u8>,
    observer: &dyn PrepareObserver,
) -> Result<bool, DriverError> {
    match owner(conn, name).await? {
        Owner::Nobody => {
            observer.message(&format!("Creating index '{name}'..."));
            conn.create_index(name, &body(&Tag::new())).await?;
            Ok(true)
        }
        Owner::Loadcell => {
            observer.message(&format!("Index '{name}' was created by loadcell already: left as it is"));
            Ok(false)
        }
        Owner::Other => Err(DriverError::fatal(format!(
            "index '{name}' exists and is not loadcell's (its mapping's _meta has no loadcell tag): \
             choose another index, or delete it by hand"
        ))),
    }
}

/// Deletes index `name` if loadcell created it and holds only documents
/// loadcell wrote, or with `--force` whatever it holds; refuses otherwise.
pub(crate) async fn cleanup<D>(
    name: &str,
    driver: &D,
    how: &Cleanup,
    observer: &dyn PrepareObserver,
) -> Result<(), CleanupError>
where
    D: Driver,
    D::Conn: SearchConn,
{
    let (mut conn, _) = loadcell_engine::connect_once(driver, how.connect_timeout).await?;
    match owner(&mut conn, name).await? {
        Owner::Nobody => {
            observer.message(&format!("Nothing to clean up: there is no index '{name}'"));
            Ok(())
        }
        Owner::Loadcell => {
            conn.refresh(name).await?;
            let foreign = conn.count_matching(name, FOREIGN_QUERY).await?;
            if foreign > 0 && !how.force {
                return Err(CleanupError::Refused(format!(
                    "index '{name}' holds {foreign} documents loadcell did not write (no {RUN_FIELD} field): \
                     left as it is; delete it by hand, or run cleanup with --force to delete them with it"
                )));
            }
            observer.message(&if foreign > 0 {
                format!("Deleting index '{name}' with the {foreign} documents loadcell did not write in it (--force)...")
            } else {
                format!("Deleting index '{name}'...")
            });
            Ok(conn.delete_index(name).await?)
        }
        Owner::Other => Err(CleanupError::Refused(format!(
            "index '{name}' was not created by loadcell (its mapping's _meta has no loadcell tag): left as it is"
        ))),
    }
}

/// The check before a run: the index is there, and (for queries) holds
/// documents. Returns how many it holds.
pub(crate) async fn check_index<C: SearchConn>(
    conn: &mut C,
    index: &str,
    need_documents: bool,
) -> Result<u64, CheckError> {
    if conn.index_meta(index).await?.is_none() {
        return Err(CheckError::NotPrepared(NotPrepared::missing(&format!(
            "index '{index}'"
        ))));
    }
    let count = conn.count(index).await?;
    if need_documents && count == 0 {
        return Err(CheckError::NotPrepared(NotPrepared(format!(
            "index '{index}' holds no documents"
        ))));
    }
    Ok(count)
}

/// The counter of documents the server accepted and did not store (an
/// ingest pipeline's `drop`), apart from the items indexed.
pub const DROPPED_BY_SERVER: &str = "dropped_by_server";

/// The error class of a failed item whose reason does not start with an
/// error type.
pub const ITEM_FAILED: &str = "bulk item failed";

/// The error class of a failed item: the type its reason starts with
/// (`mapper_parsing_exception: failed to parse…`).
fn failure_class(reason: &str) -> &str {
    let class = reason.split_once(':').map_or("", |(class, _)| class.trim());
    let is_type =
        class.ends_with("_exception") && class.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if is_type {
        class
    } else {
        ITEM_FAILED
    }
}

/// `search-bulk`.
#[derive(Debug, Clone)]
pub struct SearchBulkWorkload {
    pub opts: SearchOptions,
}

impl Workload for SearchBulkWorkload {
    fn name(&self) -> &'static str {
        "search-bulk"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::SEARCH]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        self.opts.to_map()
    }
}

/// What a bulk run's documents became, across its sessions: one atomic
/// add per bulk, for the check after the run.
#[derive(Debug, Default)]
struct Tally {
    /// Documents in bulks sent, and in bulks answered.
    sent: AtomicU64,
    answered: AtomicU64,
    /// Items answered as failed.
    failed: AtomicU64,
    /// Items answered `noop`: accepted, and dropped by the server.
    dropped: AtomicU64,
    /// Documents answered that had ids of their own.
    own_ids: AtomicU64,
}

/// The bulk run's script.
pub struct BulkScript {
    ops: [OpSpec; 1],
    index: String,
    writer: BulkWriter,
    bulk_size: u64,
    total: Option<u64>,
    seed: u64,
    /// The next bulk to send, shared by the sessions: bulk `b` holds
    /// documents `b * bulk_size..`, each made from the seed and its number.
    next_bulk: AtomicU64,
    tally: Tally,
}

/// A session's reused body buffer.
pub struct BulkSession {
    body: Vec<u8>,
    failures: Failures,
}

impl BulkScript {
    /// Bulks of `opts`' documents, `total` of them in all (`None`: until
    /// the run ends).
    fn new(opts: &SearchOptions, total: Option<u64>, seed: u64) -> BulkScript {
        BulkScript {
            ops: [OpSpec {
                name: "bulk",
                category: Category::Write,
            }],
            index: opts.index.name.clone(),
            writer: BulkWriter::new(
                &opts.index.name,
                opts.source.clone(),
                opts.conflicts,
                RunField::fresh(),
            ),
            bulk_size: opts.bulk_size,
            total,
            seed,
            next_bulk: AtomicU64::new(0),
            tally: Tally::default(),
        }
    }

    /// The documents of the next bulk; `None` once all are sent.
    #[inline]
    fn claim(&self) -> Option<std::ops::Range<u64>> {
        let start = self.next_bulk.fetch_add(1, Ordering::Relaxed) * self.bulk_size;
        let end = start + self.bulk_size;
        match self.total {
            Some(total) if start >= total => None,
            Some(total) => Some(start..end.min(total)),
            None => Some(start..end),
        }
    }

    /// Refreshes the index and counts the run's documents in it, against
    /// what the run sent.
    async fn verify<D: Driver>(
        &self,
        driver: &D,
        connect_timeout: Duration,
    ) -> Result<Verification, DriverError>
    where
        D::Conn: SearchConn,
    {
        let (mut conn, _) = loadcell_engine::connect_once(driver, connect_timeout).await?;
        conn.refresh(&self.index).await?;
        let found = conn
            .count_matching(&self.index, &self.writer.run.query())
            .await?;
        Ok(self.verification(found))
    }

    /// The check after the run: the documents of the index that this run
    /// wrote (those carrying its id), against what it had acknowledged,
    /// whatever else the index holds.
    fn verification(&self, found: u64) -> Verification {
        let t = &self.tally;
        let answered = t.answered.load(Ordering::Relaxed);
        let failed = t.failed.load(Ordering::Relaxed);
        let dropped = t.dropped.load(Ordering::Relaxed);
        let in_doubt = t.sent.load(Ordering::Relaxed) - answered;
        let mut how = format!(
            "refresh, then _count of the documents of index '{}' whose {RUN_FIELD} is this run's ({}), against",
            self.index,
            self.writer.run.id()
        );
        let (expected, mut margin) = if self.writer.conflicts == IdConflicts::None {
            how += &format!(
                " the {} the run had acknowledged ({answered} answered, {failed} failed, {dropped} dropped by the server)",
                answered - failed - dropped
            );
            (answered - failed - dropped, 0)
        } else {
            let own = t.own_ids.load(Ordering::Relaxed);
            how += &format!(
                " the {own} distinct ids the run sent (--id-conflicts), less the {failed} failed and \
                 {dropped} dropped by the server, any of which may have been a conflict"
            );
            let lost = failed + dropped;
            (own.saturating_sub(lost), lost.min(own))
        };
        if in_doubt > 0 {
            how += &format!("; up to {in_doubt} more from bulks whose answer never came");
            margin += in_doubt;
        }
        Verification::new(
            expected,
            found,
            (expected..=expected + margin).contains(&found),
            how,
        )
    }
}

impl<C: SearchConn> Script<C> for BulkScript {
    type Session = BulkSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, _session: SessionInfo) -> Result<BulkSession, DriverError> {
        Ok(BulkSession {
            body: Vec::new(),
            failures: Failures::default(),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        session: &mut BulkSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        // Past the last document (warm-up events take bulks too): nothing to send.
        let Some(range) = self.claim() else {
            return Ok(());
        };
        let BulkSession { body, failures } = session;
        let content = self.writer.write(self.seed, range, body);
        self.tally
            .sent
            .fetch_add(content.documents, Ordering::Relaxed);
        let outcome = ctx
            .op(
                0,
                conn.bulk(&self.index, body, &mut |reason| failures.note(reason)),
            )
            .await?;
        let t = &self.tally;
        t.answered.fetch_add(content.documents, Ordering::Relaxed);
        t.failed.fetch_add(outcome.failed, Ordering::Relaxed);
        t.own_ids.fetch_add(content.own_ids, Ordering::Relaxed);
        ctx.items(0, outcome.items);
        if outcome.dropped > 0 {
            t.dropped.fetch_add(outcome.dropped, Ordering::Relaxed);
            ctx.count(DROPPED_BY_SERVER, outcome.dropped);
        }
        failures.record(ctx, 0, failure_class);
        Ok(())
    }
}

impl<C: SearchConn> Lifecycle<C, SearchFamily> for SearchBulkWorkload {
    type Script = BulkScript;

    fn script(&self, seed: u64, _driver: &DriverInfo) -> BulkScript {
        BulkScript::new(&self.opts, self.opts.total(), seed)
    }

    async fn check(&self, _script: &BulkScript, conn: &mut C) -> Result<(), CheckError> {
        check_index(conn, &self.opts.index.name, false)
            .await
            .map(drop)
    }

    /// Refreshes the index and counts the run's documents in it, against
    /// what the run sent.
    async fn verify<D>(
        &self,
        script: &BulkScript,
        driver: &D,
        connect_timeout: Duration,
    ) -> Result<Option<Verification>, DriverError>
    where
        D: Driver<Conn = C>,
    {
        script.verify(driver, connect_timeout).await.map(Some)
    }

    /// Creates the index only: indexing is the run.
    async fn prepare<D>(
        &self,
        driver: Arc<D>,
        _info: &DriverInfo,
        loading: Loading,
        observer: Rc<dyn PrepareObserver>,
    ) -> Result<(), DriverError>
    where
        D: Driver<Conn = C>,
    {
        let (mut conn, _) =
            loadcell_engine::connect_once(&*driver, loading.connect_timeout).await?;
        create_index(&mut conn, &self.opts, &*observer)
            .await
            .map(drop)
    }

    async fn cleanup<D>(
        &self,
        driver: &D,
        how: &Cleanup,
        observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        let index = &self.opts.index;
        cleanup(&index.name, driver, how, observer).await
    }
}

/// `search-query`.
#[derive(Debug, Clone)]
pub struct SearchQueryWorkload {
    pub opts: SearchOptions,
    pub queries: Queries,
}

/// Documents `search-query`'s `prepare` loads when `--documents` is not
/// given and there is no corpus.
const QUERY_DOCUMENTS: u64 = 100_000;

impl Workload for SearchQueryWorkload {
    fn name(&self) -> &'static str {
        "search-query"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::SEARCH]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        let mut map = self.opts.to_map();
        match &self.queries.origin {
            QueryOrigin::Kind(kind) => map.insert("query".to_string(), json!(kind.as_str())),
            QueryOrigin::File(path) => {
                map.insert("query_file".to_string(), json!(path.display().to_string()))
            }
        };
        map
    }
}

/// `search-query`'s `prepare`: creates the index, and loads it unless it
/// holds documents already.
async fn load<D>(
    driver: Arc<D>,
    opts: &SearchOptions,
    loading: Loading,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: SearchConn,
{
    let index = opts.index.name.clone();
    let (mut conn, _) = loadcell_engine::connect_once(&*driver, loading.connect_timeout).await?;
    create_index(&mut conn, opts, &*observer).await?;
    let held = conn.count(&index).await?;
    if held > 0 {
        observer.message(&format!(
            "Index '{index}' holds {held} documents: nothing loaded"
        ));
        return Ok(());
    }
    let total = opts.total().unwrap_or(QUERY_DOCUMENTS);
    let bulk_size = opts.bulk_size;
    observer.add_total(total);
    let writer = Arc::new(BulkWriter::new(
        &index,
        opts.source.clone(),
        IdConflicts::None,
        RunField::fresh(),
    ));
    let target = index.clone();
    load_in_parallel(
            driver,
            total.div_ceil(bulk_size),
            loading.connections.max(1),
            loading.connect_timeout,
            observer,
            move |mut conn, _, _, bulks, observer| {
                let (writer, index) = (Arc::clone(&writer), target.clone());
                async move {
                    let mut body = Vec::new();
                    for b in bulks {
                        let range = b * bulk_size..((b + 1) * bulk_size).min(total);
                        let content = writer.write(PREPARE_SEED, range, &mut body);
                        let mut first = None;
                        let outcome = conn
                            .bulk(&index, &body, &mut |reason| {
                                first.get_or_insert_with(|| reason.to_string());
                            })
                            .await?;
                        if let Some(reason) = first {
                            return Err(DriverError::fatal(format!(
                                "{} of {} documents failed to index into '{index}', the first: {reason}",
                                outcome.failed, content.documents
                            )));
                        }
                        observer.loaded(content.documents);
                    }
                    Ok(())
                }
            },
        )
        .await?;
    conn.refresh(&index).await
}

/// One query of the script, and the parameters its body uses.
struct ScriptQuery {
    body: Template,
    params: Vec<usize>,
}

/// The query run's script.
pub struct QueryScript {
    ops: [OpSpec; 1],
    index: String,
    queries: Vec<ScriptQuery>,
    /// Running sums of the queries' weights.
    cumulative: Vec<u32>,
    params: Vec<QueryParam>,
    /// The documents the index held at the check before the run: field
    /// values are drawn from among them.
    documents: AtomicU64,
    /// The operation kind its queries are recorded as: 0, or after the
    /// bulk's in `search-mixed`.
    op: usize,
}

/// A session's generators, parameter values and body buffer.
pub struct QuerySession {
    rng: SmallRng,
    mix: Mix,
    /// A drawer for each drawn parameter (`None` for field values).
    drawers: Vec<Option<Drawer>>,
    values: Vec<Vec<u8>>,
    body: Vec<u8>,
}

impl QueryScript {
    /// The script of `w`'s queries, recorded as operation kind `op`.
    fn new(w: &SearchQueryWorkload, op: usize) -> QueryScript {
        let name = match &w.queries.origin {
            QueryOrigin::Kind(kind) => kind.as_str(),
            QueryOrigin::File(_) => "query",
        };
        let queries = w
            .queries
            .queries
            .iter()
            .map(|q| {
                let mut params: Vec<usize> = q.body.params().collect();
                params.sort_unstable();
                params.dedup();
                ScriptQuery {
                    body: q.body.clone(),
                    params,
                }
            })
            .collect();
        QueryScript {
            ops: [OpSpec {
                name,
                category: Category::Read,
            }],
            index: w.opts.index.name.clone(),
            queries,
            cumulative: mix::cumulative(w.queries.queries.iter().map(|q| q.weight)),
            params: w.queries.params.clone(),
            documents: AtomicU64::new(0),
            op,
        }
    }
}

impl<C: SearchConn> Script<C> for QueryScript {
    type Session = QuerySession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, session: SessionInfo) -> Result<QuerySession, DriverError> {
        Ok(QuerySession {
            rng: SmallRng::seed_from_u64(session.seed),
            mix: Mix::new(session.seed, session.index as u64),
            drawers: self
                .params
                .iter()
                .map(|p| match p {
                    QueryParam::Drawn(p) => Some(Drawer::new(p, session.index, session.count)),
                    QueryParam::Field { .. } => None,
                })
                .collect(),
            values: vec![Vec::new(); self.params.len()],
            body: Vec::new(),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        session: &mut QuerySession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let QuerySession {
            rng,
            mix,
            drawers,
            values,
            body,
        } = session;
        let query = match self.queries.as_slice() {
            [one] => one,
            queries => {
                let sums = &self.cumulative;
                let x = rng.random_range(0..sums[sums.len() - 1]);
                &queries[sums.partition_point(|&s| s <= x)]
            }
        };
        let documents = self.documents.load(Ordering::Relaxed);
        for &p in &query.params {
            match (&self.params[p], &mut drawers[p]) {
                (_, Some(drawer)) => drawer.draw(rng, &mut values[p]),
                (QueryParam::Field { values: field, .. }, None) => {
                    field.draw(mix, documents, &mut values[p])
                }
                (QueryParam::Drawn(_), None) => unreachable!("drawn parameters have drawers"),
            }
        }
        query.body.expand(values, body);
        let outcome = ctx.op(self.op, conn.search(&self.index, body)).await?;
        if outcome.hits == 0 {
            ctx.count("no_hits", 1);
        }
        Ok(())
    }
}

impl<C: SearchConn> Lifecycle<C, SearchFamily> for SearchQueryWorkload {
    type Script = QueryScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> QueryScript {
        QueryScript::new(self, 0)
    }

    async fn check(&self, script: &QueryScript, conn: &mut C) -> Result<(), CheckError> {
        let documents = check_index(conn, &self.opts.index.name, true).await?;
        script.documents.store(documents, Ordering::Relaxed);
        Ok(())
    }

    /// Creates the index and loads `--documents` (or the corpus) into it
    /// over the loading connections; an index loadcell created that
    /// already holds documents is left as it is.
    async fn prepare<D>(
        &self,
        driver: Arc<D>,
        _info: &DriverInfo,
        loading: Loading,
        observer: Rc<dyn PrepareObserver>,
    ) -> Result<(), DriverError>
    where
        D: Driver<Conn = C>,
    {
        load(driver, &self.opts, loading, observer).await
    }

    async fn cleanup<D>(
        &self,
        driver: &D,
        how: &Cleanup,
        observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        let index = &self.opts.index;
        cleanup(&index.name, driver, how, observer).await
    }
}

#[cfg(test)]
mod tests;
