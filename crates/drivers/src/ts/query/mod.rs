//! The query side of a connection: the model's questions asked in the
//! language of the database found behind the target, one module per
//! language behind [`Language`] ([`influxql`], [`promql`], [`questdb`]),
//! under the names the write protocol gave the series:
//!
//! | protocol → database          | series of (`m`, `f`)                  |
//! |------------------------------|---------------------------------------|
//! | line → InfluxDB              | measurement `m`, field `f`            |
//! | line → QuestDB               | table `m`, column `f`, tags `SYMBOL`s |
//! | line → VictoriaMetrics       | metric `m_f`, plus label `db`         |
//! | OpenTSDB → InfluxDB listener | measurement `m.f`, field `value`      |
//! | OpenTSDB → VictoriaMetrics   | metric `m.f`                          |
//! | remote write → Prometheus/VM | metric `m_f`                          |
//!
//! A query's text and path are written into reused buffers and its answer
//! counted where it lies, without building values; verification and store
//! administration parse their (small) answers with serde_json.

mod influxql;
mod promql;
mod questdb;

use std::marker::PhantomData;
use std::sync::Arc;

use loadcell_core::http::{HttpConn, Request};
use loadcell_core::ts::{DatabaseLeft, Holdings, Series, Shape, StoredPoints, TimeRange, TsQuery};
use loadcell_core::DriverError;
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::product::{self, Found, Product};
use super::{failure, Kind, QueryTarget};
use crate::http::Http1Connection;
use influxql::InfluxQl;
use promql::PromQl;
use questdb::QuestDb;

/// The measurement whose points record stores' markers (InfluxDB), or
/// the table whose rows do (QuestDB).
const MARKER_TABLE: &str = "loadcell_marker";

/// How the database found names the model's series.
#[derive(Debug, Clone, Copy)]
struct Layout {
    product: Product,
    /// The separator of `measurement` and `field` in one series per field's
    /// name; `None` where a point's fields share a series.
    per_field: Option<&'static str>,
    /// Whether series carry the target's database as a `db` label.
    db_label: bool,
}

fn layout(kind: Kind, product: Product) -> Result<Layout, String> {
    let (per_field, db_label) = match (kind, product) {
        (Kind::Line, Product::InfluxDb | Product::QuestDb) => (None, false),
        (Kind::Line, Product::VictoriaMetrics) => (Some("_"), true),
        (Kind::OpenTsdb, Product::InfluxDb | Product::VictoriaMetrics) => (Some("."), false),
        (Kind::RemoteWrite, Product::Prometheus | Product::VictoriaMetrics) => (Some("_"), false),
        _ => {
            let protocol = match kind {
                Kind::Line => "Influx line protocol",
                Kind::OpenTsdb => "OpenTSDB's /api/put",
                Kind::RemoteWrite => "Prometheus remote write",
            };
            return Err(format!("{} does not take {protocol}", product.name()));
        }
    };
    Ok(Layout {
        product,
        per_field,
        db_label,
    })
}

/// One database's query language: where its questions go, how each is
/// written and how its answers are read. The steps every language takes
/// alike are [`Asker`]'s; a store's administration is the language's own.
trait Language: Copy {
    /// The method administration statements go by.
    const ADMIN_METHOD: &'static str = "GET";

    /// Writes the path a query's text goes on, up to the text; `range`
    /// for a mean over a range by steps.
    fn path_start(&self, target: &QueryTarget, range: bool, path: &mut Vec<u8>);

    /// What ends the path, after the text and its parameters.
    fn path_end(&self) -> &'static [u8] {
        b""
    }

    /// The error an answer of status 2xx reports, if any.
    fn answer_error(&self, _body: &[u8]) -> Option<String> {
        None
    }

    /// Writes `query` into `ask.text` (its times into `ask.params`).
    fn write_query(&self, ask: &mut Asker, query: &TsQuery<'_>);

    /// The rows of a query's answer, counted without building them.
    fn rows(&self, body: &[u8]) -> serde_json::Result<u64>;

    /// Waits, where the database needs it, until what was written is
    /// visible to queries.
    async fn settle(
        &self,
        _ask: &mut Asker,
        _write: &mut Http1Connection,
        _measurement: &str,
    ) -> Result<(), DriverError> {
        Ok(())
    }

    /// Writes the question of what the database holds of a series' field.
    fn write_stored_points(
        &self,
        ask: &mut Asker,
        series: Series<'_>,
        field: &str,
        range: TimeRange,
    );

    /// Reads the answer to [`Language::write_stored_points`].
    fn stored_points(&self, answer: &Value) -> Result<Option<StoredPoints>, String>;

    /// Writes the question of how many series the measurement has (with a
    /// point in `range`), asking first what it needs to know.
    async fn write_series_count(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        measurement: &str,
        field: &str,
        range: Option<TimeRange>,
    ) -> Result<(), DriverError>;

    /// The count in the answer to [`Language::write_series_count`].
    fn series_counted<'v>(&self, answer: &'v Value, in_range: bool) -> Option<&'v Value>;

    /// See [`loadcell_core::ts::TsConn::create_store`].
    async fn create_store(
        &self,
        _ask: &mut Asker,
        _write: &mut Http1Connection,
        _measurement: &str,
        _marker: &str,
    ) -> Result<bool, DriverError> {
        Ok(false)
    }

    /// See [`loadcell_core::ts::TsConn::store_marker`].
    async fn store_marker(
        &self,
        _ask: &mut Asker,
        _write: &mut Http1Connection,
        _measurement: &str,
    ) -> Result<Option<String>, DriverError> {
        Ok(None)
    }

    /// See [`loadcell_core::ts::TsConn::holdings`].
    async fn holdings(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        shape: Shape<'_>,
    ) -> Result<Holdings, DriverError>;

    /// See [`loadcell_core::ts::TsConn::drop_store`].
    async fn drop_store(
        &self,
        ask: &mut Asker,
        write: &mut Http1Connection,
        shape: Shape<'_>,
        names: &[String],
    ) -> Result<(), DriverError>;

    /// See [`loadcell_core::ts::TsConn::drop_database_if_empty`].
    async fn drop_database_if_empty(
        &self,
        _ask: &mut Asker,
        _write: &mut Http1Connection,
    ) -> Result<DatabaseLeft, DriverError> {
        Ok(DatabaseLeft::NotOwn)
    }
}

/// The language of the database found.
#[derive(Debug, Clone, Copy)]
enum Lang {
    InfluxQl(InfluxQl),
    PromQl(PromQl),
    QuestDb(QuestDb),
}

impl Lang {
    fn new(layout: Layout) -> Lang {
        match layout.product {
            Product::InfluxDb => Lang::InfluxQl(InfluxQl(layout)),
            Product::Prometheus | Product::VictoriaMetrics => Lang::PromQl(PromQl(layout)),
            Product::QuestDb => Lang::QuestDb(QuestDb),
        }
    }
}

/// `$body` with `$l` the [`Language`] `$lang` holds: the one place the
/// languages are told apart, without boxing a future per query.
macro_rules! in_language {
    ($lang:expr, $l:ident => $body:expr) => {
        match $lang {
            Lang::InfluxQl($l) => $body,
            Lang::PromQl($l) => $body,
            Lang::QuestDb($l) => $body,
        }
    };
}

/// A connection's query side.
#[derive(Debug)]
pub(super) struct Reader {
    kind: Kind,
    found: Option<(Found, Lang)>,
    ask: Asker,
}

/// What every language's questions go through: the connection and the
/// buffers their text and path are written into.
#[derive(Debug)]
struct Asker {
    target: Arc<QueryTarget>,
    /// The `query=` endpoint's connection, opened at its first use.
    own: Option<Http1Connection>,
    /// Where queries go, for messages.
    endpoint: String,
    text: String,
    /// PromQL's time parameters, appended to the path.
    params: String,
    path: Vec<u8>,
}

/// Sends `method path` with `body` on `http`: a 2xx answer's body, or the
/// server's error.
async fn answered<'a>(
    http: &'a mut Http1Connection,
    endpoint: &str,
    method: &'static str,
    path: &[u8],
    body: &[u8],
) -> Result<&'a [u8], DriverError> {
    let request = Request {
        method,
        path,
        headers: b"",
        body,
    };
    let response = http.request(&request).await?;
    if !(200..300).contains(&response.status) {
        return Err(failure(response.status, response.body, endpoint));
    }
    Ok(response.body)
}

impl Reader {
    pub(super) fn new(kind: Kind, target: Arc<QueryTarget>, write_endpoint: &str) -> Reader {
        let endpoint = match &target.shared {
            Some(shared) => shared.origins[0].endpoint.clone(),
            None => write_endpoint.to_string(),
        };
        Reader {
            kind,
            found: None,
            ask: Asker {
                target,
                own: None,
                endpoint,
                text: String::with_capacity(256),
                params: String::with_capacity(64),
                path: Vec::with_capacity(512),
            },
        }
    }

    /// The database behind the query endpoint, found at the first call.
    pub(super) async fn product(
        &mut self,
        write: &mut Http1Connection,
    ) -> Result<&Found, DriverError> {
        if self.found.is_none() {
            let ask = &mut self.ask;
            let http = Asker::http(&mut ask.own, &ask.target, write).await?;
            let found = product::detect(http, &ask.endpoint).await?;
            let layout = layout(self.kind, found.product)
                .map_err(|e| DriverError::fatal(format!("{} is {e}", ask.endpoint)))?;
            self.found = Some((found, Lang::new(layout)));
        }
        Ok(&self.found.as_ref().expect("found above").0)
    }

    async fn language(&mut self, write: &mut Http1Connection) -> Result<Lang, DriverError> {
        self.product(write).await?;
        Ok(self.found.as_ref().expect("found above").1)
    }

    pub(super) async fn counters(
        &mut self,
        write: &mut Http1Connection,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        let product = self.product(write).await?.product;
        let Some(path) = product::counters_path(product) else {
            return Ok(Vec::new());
        };
        let ask = &mut self.ask;
        let http = Asker::http(&mut ask.own, &ask.target, write).await?;
        let body = answered(http, &ask.endpoint, "GET", path, b"").await?;
        product::counters(product, body)
            .map_err(|e| DriverError::fatal(format!("{}: {e}", ask.endpoint)))
    }

    pub(super) async fn query(
        &mut self,
        write: &mut Http1Connection,
        query: &TsQuery<'_>,
    ) -> Result<u64, DriverError> {
        let lang = self.language(write).await?;
        in_language!(lang, l => self.ask.query(l, write, query).await)
    }

    pub(super) async fn stored_points(
        &mut self,
        write: &mut Http1Connection,
        series: Series<'_>,
        field: &str,
        range: TimeRange,
    ) -> Result<Option<StoredPoints>, DriverError> {
        let lang = self.language(write).await?;
        in_language!(lang, l => self.ask.stored_points(l, write, series, field, range).await)
    }

    pub(super) async fn series_count(
        &mut self,
        write: &mut Http1Connection,
        measurement: &str,
        field: &str,
        range: Option<TimeRange>,
    ) -> Result<u64, DriverError> {
        let lang = self.language(write).await?;
        in_language!(lang, l => self.ask.series_count(l, write, measurement, field, range).await)
    }

    pub(super) async fn create_store(
        &mut self,
        write: &mut Http1Connection,
        measurement: &str,
        marker: &str,
    ) -> Result<bool, DriverError> {
        let lang = self.language(write).await?;
        in_language!(lang, l => l.create_store(&mut self.ask, write, measurement, marker).await)
    }

    pub(super) async fn store_marker(
        &mut self,
        write: &mut Http1Connection,
        measurement: &str,
    ) -> Result<Option<String>, DriverError> {
        let lang = self.language(write).await?;
        in_language!(lang, l => l.store_marker(&mut self.ask, write, measurement).await)
    }

    pub(super) async fn holdings(
        &mut self,
        write: &mut Http1Connection,
        shape: Shape<'_>,
    ) -> Result<Holdings, DriverError> {
        let lang = self.language(write).await?;
        in_language!(lang, l => l.holdings(&mut self.ask, write, shape).await)
    }

    pub(super) async fn drop_store(
        &mut self,
        write: &mut Http1Connection,
        shape: Shape<'_>,
        names: &[String],
    ) -> Result<(), DriverError> {
        let lang = self.language(write).await?;
        in_language!(lang, l => l.drop_store(&mut self.ask, write, shape, names).await)
    }

    pub(super) async fn drop_database_if_empty(
        &mut self,
        write: &mut Http1Connection,
    ) -> Result<DatabaseLeft, DriverError> {
        let lang = self.language(write).await?;
        in_language!(lang, l => l.drop_database_if_empty(&mut self.ask, write).await)
    }
}

impl Asker {
    /// The connection queries go on: the write connection, or the
    /// `query=` endpoint's.
    async fn http<'a>(
        own: &'a mut Option<Http1Connection>,
        target: &QueryTarget,
        write: &'a mut Http1Connection,
    ) -> Result<&'a mut Http1Connection, DriverError> {
        let Some(shared) = &target.shared else {
            return Ok(write);
        };
        if own.is_none() {
            *own = Some(Http1Connection::open(Arc::clone(shared), 0).await?);
        }
        Ok(own.as_mut().expect("opened above"))
    }

    /// Sends `method` to `self.path` on the query connection: a 2xx
    /// answer's body, or the server's error.
    async fn send<'a>(
        &'a mut self,
        write: &'a mut Http1Connection,
        method: &'static str,
        body: &[u8],
    ) -> Result<&'a [u8], DriverError> {
        let http = Self::http(&mut self.own, &self.target, write).await?;
        answered(http, &self.endpoint, method, &self.path, body).await
    }

    /// The error for an answer that is not what was asked for.
    fn unexpected(&self, e: impl std::fmt::Display) -> DriverError {
        DriverError::fatal(format!("unexpected answer from {} ({e})", self.endpoint))
    }

    /// Writes the request path for `self.text` in `lang`, `self.params`
    /// (PromQL's times) appended and consumed.
    fn set_path(&mut self, lang: impl Language, range: bool) {
        self.path.clear();
        lang.path_start(&self.target, range, &mut self.path);
        encode_component(self.text.as_bytes(), &mut self.path);
        self.path.extend_from_slice(self.params.as_bytes());
        self.params.clear();
        self.path.extend_from_slice(lang.path_end());
    }

    /// Runs the query in `self.text` (path set): the answer's body, checked
    /// for an error the language reports in a 2xx answer.
    async fn run<'a>(
        &'a mut self,
        lang: impl Language,
        write: &'a mut Http1Connection,
        method: &'static str,
    ) -> Result<&'a [u8], DriverError> {
        let http = Self::http(&mut self.own, &self.target, write).await?;
        let body = answered(http, &self.endpoint, method, &self.path, b"").await?;
        if let Some(error) = lang.answer_error(body) {
            return Err(DriverError::fatal(format!(
                "{} answered {:?}: {error}",
                self.endpoint, self.text
            )));
        }
        Ok(body)
    }

    /// Runs `self.text` and parses the answer.
    async fn run_parsed(
        &mut self,
        lang: impl Language,
        write: &mut Http1Connection,
        method: &'static str,
    ) -> Result<Value, DriverError> {
        let body = self.run(lang, write, method).await?;
        let value = serde_json::from_slice(body);
        value.map_err(|e| self.unexpected(e))
    }

    /// Sets `self.text` to `text`, its path for `lang`, and runs it
    /// parsed.
    async fn ask(
        &mut self,
        lang: impl Language,
        write: &mut Http1Connection,
        text: &str,
    ) -> Result<Value, DriverError> {
        self.text.clear();
        self.text.push_str(text);
        self.set_path(lang, false);
        self.run_parsed(lang, write, "GET").await
    }

    /// Sends an administration statement, its answer unread.
    async fn statement<L: Language>(
        &mut self,
        lang: L,
        write: &mut Http1Connection,
        statement: &str,
    ) -> Result<(), DriverError> {
        self.text.clear();
        self.text.push_str(statement);
        self.set_path(lang, false);
        self.run(lang, write, L::ADMIN_METHOD).await.map(drop)
    }

    async fn query(
        &mut self,
        lang: impl Language,
        write: &mut Http1Connection,
        query: &TsQuery<'_>,
    ) -> Result<u64, DriverError> {
        self.text.clear();
        lang.write_query(self, query);
        self.set_path(lang, matches!(query, TsQuery::RangeMean { .. }));
        let body = self.run(lang, write, "GET").await?;
        let rows = lang.rows(body);
        rows.map_err(|e| self.unexpected(e))
    }

    async fn stored_points(
        &mut self,
        lang: impl Language,
        write: &mut Http1Connection,
        series: Series<'_>,
        field: &str,
        range: TimeRange,
    ) -> Result<Option<StoredPoints>, DriverError> {
        lang.settle(self, write, series.measurement).await?;
        self.text.clear();
        lang.write_stored_points(self, series, field, range);
        self.set_path(lang, false);
        let answer = self.run_parsed(lang, write, "GET").await?;
        lang.stored_points(&answer).map_err(|e| {
            DriverError::fatal(format!("unexpected answer from {}: {e}", self.endpoint))
        })
    }

    async fn series_count(
        &mut self,
        lang: impl Language,
        write: &mut Http1Connection,
        measurement: &str,
        field: &str,
        range: Option<TimeRange>,
    ) -> Result<u64, DriverError> {
        lang.settle(self, write, measurement).await?;
        self.text.clear();
        lang.write_series_count(self, write, measurement, field, range)
            .await?;
        self.set_path(lang, false);
        let answer = self.run_parsed(lang, write, "GET").await?;
        let count = lang.series_counted(&answer, range.is_some());
        Ok(count.map(number).unwrap_or(0.0) as u64)
    }
}

/// Writes a name or a value quoted as a query language wants it.
type Quote = fn(&str, &mut String);

/// `s` quoted by `quote`, as a string of its own.
fn sql_quoted(s: &str, quote: Quote) -> String {
    let mut out = String::new();
    quote(s, &mut out);
    out
}

/// ` WHERE key = 'value' AND …` for `tags`, quoted by the language's
/// `ident` and `string`; returns what joins a further condition.
fn where_tags(
    tags: &[(&str, &str)],
    (ident, string): (Quote, Quote),
    t: &mut String,
) -> &'static str {
    let mut and = " WHERE ";
    for (key, value) in tags {
        t.push_str(and);
        ident(key, t);
        t.push_str(" = ");
        string(value, t);
        and = " AND ";
    }
    and
}

/// `parts` written as one quoted string, `escaped` characters after a
/// backslash.
fn quoted(parts: &[&str], quote: char, escaped: &[char], t: &mut String) {
    t.push(quote);
    for c in parts.iter().flat_map(|p| p.chars()) {
        if escaped.contains(&c) {
            t.push('\\');
        }
        t.push(c);
    }
    t.push(quote);
}

/// Appends `bytes` %-encoded for a URL's query string: all but the
/// unreserved characters (RFC 3986), spaces as `%20`.
pub(super) fn encode_component(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A JSON number, or a number in a string (PromQL's sample values).
fn number(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// What an answer part adds to the rows counted.
trait Rows {
    fn rows(&self) -> u64;
}

impl Rows for IgnoredAny {
    fn rows(&self) -> u64 {
        1
    }
}

/// A JSON array's rows, summed over its elements as they are read.
struct Sum<T>(u64, PhantomData<T>);

impl<T> Default for Sum<T> {
    fn default() -> Self {
        Sum(0, PhantomData)
    }
}

impl<'de, T: Deserialize<'de> + Rows> Deserialize<'de> for Sum<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Each<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Rows> Visitor<'de> for Each<T> {
            type Value = Sum<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Sum<T>, A::Error> {
                let mut n = 0;
                while let Some(e) = seq.next_element::<T>()? {
                    n += e.rows();
                }
                Ok(Sum(n, PhantomData))
            }
        }
        d.deserialize_seq(Each(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_and_databases_pair_as_each_takes_them() {
        assert!(layout(Kind::Line, Product::Prometheus).is_err());
        assert_eq!(
            layout(Kind::RemoteWrite, Product::QuestDb).unwrap_err(),
            "QuestDB does not take Prometheus remote write"
        );
        assert_eq!(
            layout(Kind::OpenTsdb, Product::InfluxDb).unwrap().per_field,
            Some(".")
        );
        assert!(
            layout(Kind::Line, Product::VictoriaMetrics)
                .unwrap()
                .db_label
        );
    }

    #[test]
    fn query_components_are_percent_encoded() {
        let mut out = Vec::new();
        encode_component("SELECT \"a\" = 'b'&c/d~".as_bytes(), &mut out);
        assert_eq!(out, b"SELECT%20%22a%22%20%3D%20%27b%27%26c%2Fd~");
    }
}
