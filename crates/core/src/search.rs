//! The search family (OpenSearch, Elasticsearch): bulk indexing and
//! queries over HTTP, and the index administration that `prepare`,
//! `check` and `cleanup` need. Bodies are JSON (NDJSON for `_bulk`) that
//! the workload builds into buffers it reuses; the driver frames the
//! request, reads the answer and turns what the server says went wrong —
//! including failed items inside a bulk answered `200` — into counts and
//! reasons, so the workload never parses a response.

use crate::DriverError;

/// What a `_bulk` request's answer said about its items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkOutcome {
    /// Items the server answered for (indexed, created or updated, or
    /// failed): the number of actions the body held, if all were read.
    pub items: u64,
    /// Items among them that failed (`"errors": true` and a `status` ≥ 300
    /// on the item), each also given to the `on_failure` callback.
    pub failed: u64,
    /// `index` or `create` items among them answered `"result": "noop"`:
    /// documents the server accepted and did not store (an ingest
    /// pipeline's `drop` processor). Not failures, and not in the index.
    pub dropped: u64,
}

/// What a `_search` answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchOutcome {
    /// `hits.total.value` (7.x and later; `hits.total` before): how many
    /// documents matched, as far as the server counted them.
    pub hits: u64,
}

pub trait SearchConn {
    /// Sends `body` (NDJSON action and source lines, each ending in `\n`)
    /// to `POST /{index}/_bulk`. Each failed item's reason (`type: reason`
    /// of its `error`) is passed to `on_failure`, called only for failures
    /// so that a clean bulk allocates nothing. A non-2xx answer for the
    /// whole request is an error.
    async fn bulk(
        &mut self,
        index: &str,
        body: &[u8],
        on_failure: &mut dyn FnMut(&str),
    ) -> Result<BulkOutcome, DriverError>;

    /// Sends `body` (a JSON search request) to `POST /{index}/_search`.
    async fn search(&mut self, index: &str, body: &[u8]) -> Result<SearchOutcome, DriverError>;

    /// Creates `index` with `body` (its settings, mappings and `_meta`).
    /// An index that already exists is an error naming it.
    async fn create_index(&mut self, index: &str, body: &[u8]) -> Result<(), DriverError>;

    /// The index's mapping `_meta` as JSON text, `Some("{}")` when it has
    /// none, or `None` when there is no such index: what `cleanup` reads
    /// to delete only the index loadcell created.
    async fn index_meta(&mut self, index: &str) -> Result<Option<String>, DriverError>;

    /// Deletes `index`.
    async fn delete_index(&mut self, index: &str) -> Result<(), DriverError>;

    /// Makes what was indexed searchable (`POST /{index}/_refresh`).
    async fn refresh(&mut self, index: &str) -> Result<(), DriverError>;

    /// `GET /{index}/_count`: the documents the index holds.
    async fn count(&mut self, index: &str) -> Result<u64, DriverError>;

    /// `POST /{index}/_count` with `query` (`{"query": …}`): the documents
    /// of the index that match it.
    async fn count_matching(&mut self, index: &str, query: &[u8]) -> Result<u64, DriverError>;
}
