//! Search engines, OpenSearch (1.x–3.x) and Elasticsearch (7.x–8.x), over
//! the HTTP family's HTTP/1.1 client: keep-alive, TLS, round-robin hosts
//! and basic authentication come from there.
//!
//! Target: `opensearch://[user:password@]host[:port][,host[:port]…][/base][?param…]`,
//! the same with `elasticsearch://`, or `http(s)://…` with a search
//! workload. `opensearch://` and `elasticsearch://` mean plain HTTP on
//! port 9200 by default; `tls=true` makes them HTTPS (still 9200), as an
//! `https://` target is. Parameters: `tls=true`, `sslrootcert=PATH`,
//! `insecure=true` (as the HTTP driver's).
//!
//! Answers are read where they lie in the connection's buffer: a bulk
//! answered `"errors":false` is not parsed beyond its first bytes and a
//! count of its items (see [`answer`]); only failed bulks, errors and the
//! administration calls go through a full JSON parse.

mod answer;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use loadcell_core::http::{HttpConn, Request};
use loadcell_core::kv::KvCapabilities;
use loadcell_core::search::{BulkOutcome, SearchConn, SearchOutcome};
use loadcell_core::{Driver, DriverError, ServerInfo, Target};

use crate::http::{self, Http1Connection, Shared, TargetForm};
use crate::transport::url_text;
use crate::{DriverInfo, Family};

pub const INFO: DriverInfo = DriverInfo {
    name: "search",
    schemes: &["opensearch", "elasticsearch", "http", "https"],
    family: Family::SEARCH,
    url_form: "opensearch|elasticsearch://[user:pass@]host[:9200][,host2…][/base][?tls=true][&sslrootcert=PATH|insecure=true], or http(s)://… with a search workload",
    about: "OpenSearch and Elasticsearch over HTTP: bulk indexing and queries (keep-alive, TLS, round-robin hosts)",
    kv: KvCapabilities::NONE,
    blocking: false,
};

const NDJSON: &[u8] = b"Content-Type: application/x-ndjson\r\n";
const JSON: &[u8] = b"Content-Type: application/json\r\n";

/// The port of an `opensearch://` or `elasticsearch://` host naming none.
const DEFAULT_PORT: u16 = 9200;

/// The node statistics sampled every interval, cut down to the fields
/// [`answer::node_counters`] reads.
const NODE_STATS: &[u8] = b"/_nodes/stats/os,process,jvm,indices?filter_path=\
nodes.*.os.cpu.percent,nodes.*.os.cpu.load_average,nodes.*.process.cpu.percent,\
nodes.*.jvm.mem.heap_used_in_bytes,nodes.*.jvm.mem.heap_max_in_bytes,\
nodes.*.jvm.gc.collectors.*.collection_time_in_millis,\
nodes.*.indices.indexing.index_total,nodes.*.indices.indexing.index_time_in_millis,\
nodes.*.indices.search.query_total,nodes.*.indices.search.query_time_in_millis,\
nodes.*.indices.segments.count,nodes.*.indices.docs.count";

/// A search cluster: its hosts and what every connection needs;
/// connections take the hosts in turn.
pub struct SearchDriver {
    shared: Arc<Shared>,
    next_host: AtomicUsize,
    endpoint: String,
}

impl std::fmt::Debug for SearchDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchDriver")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl SearchDriver {
    /// Parses the target and reads any TLS files; makes no connection.
    pub fn from_target(target: &Target) -> Result<SearchDriver, String> {
        let own_scheme = matches!(target.scheme(), "opensearch" | "elasticsearch");
        let form = TargetForm {
            params: &["tls"],
            own: &[],
            default_port: own_scheme.then_some(DEFAULT_PORT),
            hint: "",
        };
        let settings = http::parse_target(target, &form)?;
        Ok(SearchDriver {
            shared: Arc::new(http::shared(&settings)?),
            next_host: AtomicUsize::new(0),
            endpoint: url_text::endpoints(&settings.hosts),
        })
    }
}

/// One session's connection to one host of the cluster.
#[derive(Debug)]
pub struct SearchConnection {
    http: Http1Connection,
    /// `host:port`, for messages.
    endpoint: String,
    /// The request's path (`/{index}/_bulk`), rewritten for each request.
    path: Vec<u8>,
    /// A failed bulk item's `type: reason`, rewritten for each.
    reason: String,
}

impl Driver for SearchDriver {
    type Conn = SearchConnection;

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    async fn connect(&self) -> Result<SearchConnection, DriverError> {
        let n = self.next_host.fetch_add(1, Ordering::Relaxed) % self.shared.origins.len();
        Ok(SearchConnection {
            http: Http1Connection::open(Arc::clone(&self.shared), n).await?,
            endpoint: self.shared.origins[n].endpoint.clone(),
            path: Vec::with_capacity(64),
            reason: String::new(),
        })
    }

    /// `GET /`: OpenSearch when `version.distribution` says so, else
    /// Elasticsearch, with `version.number` and `cluster_name`.
    async fn server_info(&self, conn: &mut SearchConnection) -> Result<ServerInfo, DriverError> {
        let info = answer::server_info(conn.get(b"/").await?);
        info.map_err(|e| garbled(&conn.endpoint, &e))
    }

    /// `GET /_nodes/stats` summed over the nodes (see
    /// [`answer::node_counters`] for the names).
    async fn server_counters(
        &self,
        conn: &mut SearchConnection,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        let counters = answer::node_counters(conn.get(NODE_STATS).await?);
        counters.map_err(|e| garbled(&conn.endpoint, &e))
    }
}

impl SearchConn for SearchConnection {
    async fn bulk(
        &mut self,
        index: &str,
        body: &[u8],
        on_failure: &mut dyn FnMut(&str),
    ) -> Result<BulkOutcome, DriverError> {
        set_path(&mut self.path, index, "/_bulk");
        let request = Request {
            method: "POST",
            path: &self.path,
            headers: NDJSON,
            body,
        };
        let answer = answered(&mut self.http, &self.endpoint, &request).await?;
        answer::bulk(answer, on_failure, &mut self.reason).map_err(|e| garbled(&self.endpoint, &e))
    }

    async fn search(&mut self, index: &str, body: &[u8]) -> Result<SearchOutcome, DriverError> {
        set_path(&mut self.path, index, "/_search");
        let request = Request {
            method: "POST",
            path: &self.path,
            headers: JSON,
            body,
        };
        let answer = answered(&mut self.http, &self.endpoint, &request).await?;
        answer::search(answer).map_err(|e| garbled(&self.endpoint, &e))
    }

    async fn create_index(&mut self, index: &str, body: &[u8]) -> Result<(), DriverError> {
        set_path(&mut self.path, index, "");
        let request = Request {
            method: "PUT",
            path: &self.path,
            headers: JSON,
            body,
        };
        let response = self.http.request(&request).await?;
        if is_success(response.status) {
            return Ok(());
        }
        let error = answer::failure(response.status, response.body, &self.endpoint);
        Err(match error.code.as_deref() {
            Some("resource_already_exists_exception") => DriverError::fatal(format!(
                "index '{index}' already exists on {}",
                self.endpoint
            ))
            .with_code("resource_already_exists_exception"),
            _ => error,
        })
    }

    async fn index_meta(&mut self, index: &str) -> Result<Option<String>, DriverError> {
        set_path(&mut self.path, index, "/_mapping");
        let response = self.http.request(&get(&self.path)).await?;
        if is_success(response.status) {
            return answer::mapping_meta(response.body)
                .map(Some)
                .map_err(|e| garbled(&self.endpoint, &e));
        }
        let error = answer::failure(response.status, response.body, &self.endpoint);
        match (response.status, error.code.as_deref()) {
            (404, Some("index_not_found_exception")) => Ok(None),
            _ => Err(error),
        }
    }

    async fn delete_index(&mut self, index: &str) -> Result<(), DriverError> {
        set_path(&mut self.path, index, "");
        self.admin("DELETE").await
    }

    async fn refresh(&mut self, index: &str) -> Result<(), DriverError> {
        set_path(&mut self.path, index, "/_refresh");
        self.admin("POST").await
    }

    async fn count(&mut self, index: &str) -> Result<u64, DriverError> {
        set_path(&mut self.path, index, "/_count");
        let answer = answered(&mut self.http, &self.endpoint, &get(&self.path)).await?;
        answer::count(answer).map_err(|e| garbled(&self.endpoint, &e))
    }

    async fn count_matching(&mut self, index: &str, query: &[u8]) -> Result<u64, DriverError> {
        set_path(&mut self.path, index, "/_count");
        let request = Request {
            method: "POST",
            path: &self.path,
            headers: JSON,
            body: query,
        };
        let answer = answered(&mut self.http, &self.endpoint, &request).await?;
        answer::count(answer).map_err(|e| garbled(&self.endpoint, &e))
    }
}

impl SearchConnection {
    /// `GET path`'s body, a 2xx answer's.
    async fn get(&mut self, path: &[u8]) -> Result<&[u8], DriverError> {
        answered(&mut self.http, &self.endpoint, &get(path)).await
    }

    /// `method` on the path set, with no body, answered 2xx.
    async fn admin(&mut self, method: &'static str) -> Result<(), DriverError> {
        let request = Request {
            method,
            path: &self.path,
            headers: b"",
            body: b"",
        };
        answered(&mut self.http, &self.endpoint, &request)
            .await
            .map(drop)
    }
}

/// Sends `request`: a 2xx answer's body, or the server's error.
async fn answered<'a>(
    http: &'a mut Http1Connection,
    endpoint: &str,
    request: &Request<'_>,
) -> Result<&'a [u8], DriverError> {
    let response = http.request(request).await?;
    if !is_success(response.status) {
        return Err(answer::failure(response.status, response.body, endpoint));
    }
    Ok(response.body)
}

fn get(path: &[u8]) -> Request<'_> {
    Request {
        method: "GET",
        path,
        headers: b"",
        body: b"",
    }
}

/// Writes `/{index}{action}` into the connection's path buffer.
#[inline]
fn set_path(path: &mut Vec<u8>, index: &str, action: &str) {
    path.clear();
    path.push(b'/');
    path.extend_from_slice(index.as_bytes());
    path.extend_from_slice(action.as_bytes());
}

fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

/// A 2xx answer that is not what the API returns: the target is probably
/// not a search engine.
fn garbled(endpoint: &str, what: &str) -> DriverError {
    DriverError::fatal(format!(
        "{endpoint} does not answer as OpenSearch or Elasticsearch: {what}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(url: &str) -> Result<SearchDriver, String> {
        SearchDriver::from_target(&Target::parse(url).unwrap())
    }

    #[test]
    fn own_schemes_default_to_plain_http_on_9200() {
        let d = driver("opensearch://a,b:9201").unwrap();
        assert_eq!(d.endpoint, "a:9200,b:9201");
        assert!(d.shared.tls.is_none());
        let d = driver("elasticsearch://u:secret@h/?tls=true&insecure=true").unwrap();
        assert!(d.shared.tls.is_some());
        assert_eq!(d.endpoint, "h:9200");
        assert!(!format!("{d:?}").contains("secret"));
        // http(s):// keeps the scheme's port.
        assert_eq!(driver("http://h").unwrap().endpoint, "h:80");
        assert_eq!(driver("https://h").unwrap().endpoint, "h:443");
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        let err = |u: &str| driver(u).unwrap_err();
        assert_eq!(
            err("opensearch://h/?http2=true"),
            "unknown parameter 'http2'; accepted: sslrootcert, insecure, tls"
        );
        assert_eq!(
            err("opensearch://h/?insecure=true"),
            "sslrootcert and insecure are for https:// targets or tls=true"
        );
        assert!(err("https://h/?tls=false").contains("contradicts"));
        assert!(err("opensearch://h/?tls=yes").contains("tls takes true or false"));
    }

    #[test]
    fn paths_are_written_into_the_reused_buffer() {
        let mut path = Vec::with_capacity(64);
        set_path(&mut path, "logs-1", "/_bulk");
        assert_eq!(path, b"/logs-1/_bulk");
        let at = path.as_ptr();
        set_path(&mut path, "geonames", "");
        assert_eq!(path, b"/geonames");
        assert_eq!(path.as_ptr(), at, "no new allocation");
    }
}
