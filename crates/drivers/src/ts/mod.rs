//! Time-series databases (InfluxDB 1.x, Prometheus, VictoriaMetrics,
//! QuestDB) over the HTTP family's HTTP/1.1 client: keep-alive, TLS,
//! round-robin hosts and basic authentication come from there.
//!
//! One driver per write protocol ([`influx`], [`opentsdb`],
//! [`remote_write`]), each a [`Protocol`] that encodes points into the
//! request being built and reads its write answers; what they share is
//! here: the target, the connection and its query side ([`query`]), which
//! asks the database found behind the target ([`product`]) in its own
//! language. Target parameters beyond the HTTP driver's `sslrootcert`,
//! `insecure` and `tls=true`: `query=http(s)://host:port[/db]`, where
//! queries, verification and stores go when the write port does not
//! answer them (an OpenTSDB listener); by default the write host.

mod held;
pub mod influx;
pub mod influx_tcp;
pub mod opentsdb;
pub mod opentsdb_tcp;
mod product;
mod query;
pub mod remote_write;
pub mod tcp;

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use loadcell_core::http::{HttpConn, Request};
use loadcell_core::ts::{
    DatabaseLeft, Holdings, Series, Shape, StoredPoints, TimeRange, TsConn, TsQuery, WriteOutcome,
};
use loadcell_core::{Driver, DriverError, ServerInfo, Target};

use crate::http::{self, Http1Connection, Shared, TargetForm};
use crate::transport::url_text;

use query::Reader;

/// How a protocol names the model's series, which the query side needs
/// to find them again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Influx line protocol: a point's fields in one series.
    Line,
    /// OpenTSDB `/api/put`: one metric per field.
    OpenTsdb,
    /// Prometheus remote write: one metric per field.
    RemoteWrite,
}

/// A write protocol's wire format: how points are encoded into the
/// request being built, in a buffer reused from request to request.
pub trait Encoder: Default + std::fmt::Debug + 'static {
    const KIND: Kind;

    fn point(&mut self, measurement: &str);
    fn tag(&mut self, key: &str, value: &str);
    fn field(&mut self, key: &str, value: f64);
    fn end_point(&mut self, timestamp_ns: i64);
    /// Points ended since the last [`Encoder::clear`].
    fn points(&self) -> u64;
    /// The request's body for the points ended (compressed where the
    /// protocol is).
    fn body(&mut self) -> Result<&[u8], DriverError>;
    fn clear(&mut self);
}

/// A write protocol over HTTP: where its requests go, and what its
/// answers say about their points.
pub trait Protocol: Encoder {
    /// The port of a host that names none.
    const DEFAULT_PORT: u16;
    /// The request headers a write carries besides `Host` and `Content-Length`.
    const HEADERS: &'static [u8];

    /// The path writes go to and the database the target names, from the
    /// target's path.
    fn write_path(target_path: &str) -> Result<(String, Option<String>), String>;

    /// How many of the request's `points` the answer says failed (each
    /// reason given to `on_failure`), or `None` when the answer is no
    /// account of the points (a refusal: an error).
    fn failed(
        status: u16,
        body: &[u8],
        points: u64,
        on_failure: &mut dyn FnMut(&str),
    ) -> Option<u64>;
}

/// Where queries go when not to the write hosts, and the database the
/// target names.
struct QueryTarget {
    /// The `query=` endpoint; `None` for the write hosts.
    shared: Option<Arc<Shared>>,
    db: Option<String>,
}

/// The endpoint, never its credentials.
impl std::fmt::Debug for QueryTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let endpoint = self.shared.as_ref().map(|q| &q.origins[0].endpoint);
        f.debug_struct("QueryTarget")
            .field("endpoint", &endpoint)
            .field("db", &self.db)
            .finish()
    }
}

/// A time-series target written with protocol `P`: its hosts and what
/// every connection needs; connections take the hosts in turn.
pub struct TsDriver<P> {
    shared: Arc<Shared>,
    next_host: AtomicUsize,
    endpoint: String,
    write_path: Arc<[u8]>,
    query: Arc<QueryTarget>,
    protocol: PhantomData<fn() -> P>,
}

impl<P> std::fmt::Debug for TsDriver<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TsDriver")
            .field("endpoint", &self.endpoint)
            .field("query", &self.query)
            .finish_non_exhaustive()
    }
}

impl<P: Protocol> TsDriver<P> {
    /// Parses the target and reads any TLS files; makes no connection.
    pub fn from_target(target: &Target) -> Result<TsDriver<P>, String> {
        let form = TargetForm {
            params: &["tls"],
            own: &["query"],
            default_port: Some(P::DEFAULT_PORT),
            hint: "",
        };
        let mut settings = http::parse_target(target, &form)?;
        let (write_path, mut db) = P::write_path(&settings.base)?;
        let mut query = None;
        for url in settings.own.take_all("query") {
            let (shared, query_db) = query_endpoint(&url)?;
            query = Some(Arc::new(shared));
            db = query_db.or(db);
        }
        Ok(TsDriver {
            shared: Arc::new(without_base(http::shared(&settings)?)),
            next_host: AtomicUsize::new(0),
            endpoint: url_text::endpoints(&settings.hosts),
            write_path: write_path.into_bytes().into(),
            query: Arc::new(QueryTarget { shared: query, db }),
            protocol: PhantomData,
        })
    }
}

/// The paths a time-series driver sends are whole: the target's path
/// names a database or the write path, not a prefix.
fn without_base(mut shared: Shared) -> Shared {
    shared.base.clear();
    shared
}

/// `query=http(s)://[user:pass@]host:port[/db]`: its hosts (the first is
/// used) and the database its path names.
fn query_endpoint(url: &str) -> Result<(Shared, Option<String>), String> {
    let bad = |why: String| format!("query={url}: {why}, e.g. query=http://127.0.0.1:8086/db");
    let target = Target::parse(url).map_err(|e| bad(e.to_string()))?;
    if !matches!(target.scheme(), "http" | "https") {
        return Err(bad("queries go over http:// or https://".to_string()));
    }
    let form = TargetForm {
        params: &[],
        own: &[],
        default_port: None,
        hint: "",
    };
    let settings = http::parse_target(&target, &form).map_err(bad)?;
    let db = settings.base.trim_start_matches('/');
    let db = (!db.is_empty()).then(|| db.to_string());
    Ok((without_base(http::shared(&settings)?), db))
}

/// One session's connection: writes to one host of the target, queries to
/// the same connection or to the `query=` endpoint's, opened at its first
/// use.
#[derive(Debug)]
pub struct TsConnection<P> {
    http: Http1Connection,
    /// `host:port`, for messages.
    endpoint: String,
    write_path: Arc<[u8]>,
    protocol: P,
    reader: Reader,
}

impl<P: Protocol> Driver for TsDriver<P> {
    type Conn = TsConnection<P>;

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    async fn connect(&self) -> Result<TsConnection<P>, DriverError> {
        let n = self.next_host.fetch_add(1, Ordering::Relaxed) % self.shared.origins.len();
        Ok(TsConnection {
            http: Http1Connection::open(Arc::clone(&self.shared), n).await?,
            endpoint: self.shared.origins[n].endpoint.clone(),
            write_path: Arc::clone(&self.write_path),
            protocol: P::default(),
            reader: Reader::new(
                P::KIND,
                Arc::clone(&self.query),
                &self.shared.origins[n].endpoint,
            ),
        })
    }

    /// The database behind the query endpoint (see [`product::detect`]).
    async fn server_info(&self, conn: &mut TsConnection<P>) -> Result<ServerInfo, DriverError> {
        let found = conn.reader.product(&mut conn.http).await?;
        Ok(ServerInfo::new(found.product.name(), found.version.clone()))
    }

    /// The database's own metrics (see [`product::counters`]).
    async fn server_counters(
        &self,
        conn: &mut TsConnection<P>,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        conn.reader.counters(&mut conn.http).await
    }
}

/// The parts of [`TsConn`] every connection has alike: points go to its
/// `protocol` ([`Encoder`]), questions to its `reader` on its `http`
/// connection.
macro_rules! encoder_and_reader {
    () => {
        #[inline]
        fn point(&mut self, measurement: &str) {
            self.protocol.point(measurement);
        }

        #[inline]
        fn tag(&mut self, key: &str, value: &str) {
            self.protocol.tag(key, value);
        }

        #[inline]
        fn field(&mut self, key: &str, value: f64) {
            self.protocol.field(key, value);
        }

        #[inline]
        fn end_point(&mut self, timestamp_ns: i64) {
            self.protocol.end_point(timestamp_ns);
        }

        async fn query(&mut self, query: &TsQuery<'_>) -> Result<u64, DriverError> {
            self.reader.query(&mut self.http, query).await
        }

        async fn stored_points(
            &mut self,
            series: Series<'_>,
            field: &str,
            range: TimeRange,
        ) -> Result<Option<StoredPoints>, DriverError> {
            self.reader
                .stored_points(&mut self.http, series, field, range)
                .await
        }

        async fn series_count(
            &mut self,
            measurement: &str,
            field: &str,
            range: Option<TimeRange>,
        ) -> Result<u64, DriverError> {
            self.reader
                .series_count(&mut self.http, measurement, field, range)
                .await
        }

        async fn create_store(
            &mut self,
            measurement: &str,
            marker: &str,
        ) -> Result<bool, DriverError> {
            self.reader
                .create_store(&mut self.http, measurement, marker)
                .await
        }

        async fn store_marker(&mut self, measurement: &str) -> Result<Option<String>, DriverError> {
            self.reader.store_marker(&mut self.http, measurement).await
        }

        async fn holdings(&mut self, shape: Shape<'_>) -> Result<Holdings, DriverError> {
            self.reader.holdings(&mut self.http, shape).await
        }

        async fn drop_store(
            &mut self,
            shape: Shape<'_>,
            names: &[String],
        ) -> Result<(), DriverError> {
            self.reader.drop_store(&mut self.http, shape, names).await
        }

        async fn drop_database_if_empty(&mut self) -> Result<DatabaseLeft, DriverError> {
            self.reader.drop_database_if_empty(&mut self.http).await
        }
    };
}
pub(crate) use encoder_and_reader;

impl<P: Protocol> TsConn for TsConnection<P> {
    const ACKNOWLEDGED: bool = true;

    async fn write(
        &mut self,
        on_failure: &mut dyn FnMut(&str),
    ) -> Result<WriteOutcome, DriverError> {
        let points = self.protocol.points();
        let body = match self.protocol.body() {
            Ok(body) => body,
            Err(e) => {
                self.protocol.clear();
                return Err(e);
            }
        };
        let request = Request {
            method: "POST",
            path: &self.write_path,
            headers: P::HEADERS,
            body,
        };
        let response = self.http.request(&request).await;
        self.protocol.clear();
        let response = response?;
        match P::failed(response.status, response.body, points, on_failure) {
            Some(failed) => Ok(WriteOutcome { points, failed }),
            None => Err(failure(response.status, response.body, &self.endpoint)),
        }
    }

    encoder_and_reader!();
}

/// The error for an answer that is no account of the request: overload
/// (429, 503) is retryable, a gateway's 502 or 504 a connection error,
/// refused credentials and anything else fatal. One line, with the start
/// of what the server said.
pub(crate) fn failure(status: u16, body: &[u8], endpoint: &str) -> DriverError {
    let said = one_line(body);
    match status {
        401 => DriverError::fatal(format!(
            "{endpoint} refused the credentials (HTTP 401): wrong user or password? {said}"
        )),
        403 => DriverError::fatal(format!(
            "{endpoint} refused the request (HTTP 403): the user lacks a privilege: {said}"
        )),
        429 | 503 => {
            DriverError::retryable(format!("{endpoint} is overloaded (HTTP {status}): {said}"))
        }
        502 | 504 => DriverError::connection(format!("{endpoint} answered HTTP {status}: {said}")),
        _ => DriverError::fatal(format!("{endpoint} answered HTTP {status}: {said}")),
    }
}

/// The start of a server's text, on one line.
pub(crate) fn one_line(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    text.trim().replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadcell_core::ErrorClass;

    fn driver(url: &str) -> Result<influx::InfluxDriver, String> {
        influx::InfluxDriver::from_target(&Target::parse(url).unwrap())
    }

    #[test]
    fn targets_give_the_write_path_database_and_query_endpoint() {
        let d = driver("influx://h/metrics").unwrap();
        assert_eq!(d.endpoint, "h:8086");
        assert_eq!(&*d.write_path, b"/write?db=metrics&precision=ns");
        assert_eq!(d.query.db.as_deref(), Some("metrics"));
        assert!(d.query.shared.is_none());
        assert!(d.shared.base.is_empty());
        let d = opentsdb::OpenTsdbDriver::from_target(
            &Target::parse("opentsdb://u:secret@h:4242?query=http://u:secret@h:8086/opentsdb")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(&*d.write_path, b"/api/put?details");
        assert_eq!(d.query.db.as_deref(), Some("opentsdb"));
        let q = d.query.shared.as_ref().unwrap();
        assert_eq!(q.origins[0].endpoint, "h:8086");
        assert!(q.base.is_empty());
        let shown = format!("{d:?}");
        assert!(shown.contains("h:8086"), "{shown}");
        assert!(
            !shown.contains("secret") && !shown.contains("Basic"),
            "{shown}"
        );
        let d = remote_write::RemoteWriteDriver::from_target(
            &Target::parse("prom-rw://h?tls=true&insecure=true").unwrap(),
        )
        .unwrap();
        assert_eq!(&*d.write_path, b"/api/v1/write");
        assert_eq!(d.endpoint, "h:9090");
        assert!(d.shared.tls.is_some());
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        let err = |u: &str| driver(u).unwrap_err();
        assert!(
            err("influx://h").contains("names its database"),
            "{}",
            err("influx://h")
        );
        assert!(err("influx://h/db?query=ftp://x").contains("http://"));
        assert!(
            err("influx://h/db?http2=true").contains("accepted: sslrootcert, insecure, tls, query")
        );
    }

    #[test]
    fn failures_are_classified_in_one_line() {
        let e = failure(503, b"busy\nnow", "h:8086");
        assert_eq!(e.class, ErrorClass::Retryable);
        assert_eq!(e.message, "h:8086 is overloaded (HTTP 503): busy now");
        assert_eq!(failure(429, b"", "h").class, ErrorClass::Retryable);
        assert_eq!(failure(502, b"", "h").class, ErrorClass::Connection);
        let e = failure(401, br#"{"error":"authorization failed"}"#, "h:8086");
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e.message.contains("wrong user or password"));
        assert_eq!(failure(404, b"", "h").class, ErrorClass::Fatal);
    }
}
