//! Reading what OpenSearch and Elasticsearch answer. A clean bulk answer
//! (`{"took":…,"errors":false,"items":[…]}`) is read as esrally does: the
//! top-level `errors` flag, which comes before `items`, then the items
//! counted by a scan of the bytes, with no JSON values built. Everything
//! else is parsed with serde_json, borrowing from the answer.

use std::borrow::Cow;
use std::fmt::Write as _;

use loadcell_core::driver::SERVER_HOST_CPU_PCT;
use loadcell_core::search::{BulkOutcome, SearchOutcome};
use loadcell_core::{DriverError, ServerInfo};
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// How far into a bulk answer its `errors` flag may be: after `took` (and
/// OpenSearch's `ingest_took`), before `items`.
const HEAD: usize = 256;

/// The items of a `_bulk` answer: counted when it says `"errors":false`,
/// and each failed one's `type: reason` given to `on_failure` (written
/// into `reason`, reused) when it says `"errors":true`. Either way, an
/// `index` or `create` item answered `"result":"noop"` is counted as
/// dropped (an `update` one is a document left as it was).
pub(super) fn bulk(
    body: &[u8],
    on_failure: &mut dyn FnMut(&str),
    reason: &mut String,
) -> Result<BulkOutcome, String> {
    if !errors_flag(&body[..body.len().min(HEAD)])? {
        let (items, dropped) = scan_items(body)?;
        return Ok(BulkOutcome {
            items,
            failed: 0,
            dropped,
        });
    }
    let answer: BulkAnswer = serde_json::from_slice(body).map_err(|e| bad("bulk", &e))?;
    let (mut failed, mut dropped) = (0, 0);
    for action in &answer.items {
        let item = action.item();
        if item.status < 300 && item.error.is_none() {
            dropped += u64::from(action.is_dropped());
            continue;
        }
        failed += 1;
        reason.clear();
        match &item.error {
            Some(ItemError { kind, reason: why }) => {
                let _ = write!(reason, "{kind}: {}", why.as_deref().unwrap_or(""));
            }
            None => {
                let _ = write!(reason, "status {}", item.status);
            }
        }
        on_failure(reason);
    }
    Ok(BulkOutcome {
        items: answer.items.len() as u64,
        failed,
        dropped,
    })
}

/// The top-level `"errors": true|false` in the head of a bulk answer.
fn errors_flag(head: &[u8]) -> Result<bool, String> {
    let missing = || "a bulk answer without \"errors\" at its start".to_string();
    let at = find(head, b"\"errors\"").ok_or_else(missing)?;
    let rest = head[at + 8..].trim_ascii_start();
    let rest = rest
        .strip_prefix(b":")
        .ok_or_else(missing)?
        .trim_ascii_start();
    if rest.starts_with(b"false") {
        Ok(false)
    } else if rest.starts_with(b"true") {
        Ok(true)
    } else {
        Err(missing())
    }
}

/// The objects in the `items` array, and those of them dropped: counted
/// by one scan that skips strings and tracks nesting, looking at a string
/// only when it is an item's action (its first key) or reads `noop`.
fn scan_items(body: &[u8]) -> Result<(u64, u64), String> {
    let missing = || "a bulk answer without an \"items\" array".to_string();
    let at = find(body, b"\"items\"").ok_or_else(missing)?;
    let open = body[at..]
        .iter()
        .position(|&b| b == b'[')
        .ok_or_else(missing)?;
    let start = at + open + 1;
    let mut depth = 0u32;
    // Where the string being scanned began (after its quote), if in one.
    let mut string_at = None;
    let mut escaped = false;
    let (mut items, mut dropped) = (0, 0);
    // Whether the item's action is still to be read, and whether it is
    // an update.
    let mut action_pending = false;
    let mut update = false;
    for (i, &b) in body.iter().enumerate().skip(start) {
        if let Some(from) = string_at {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => {
                    string_at = None;
                    let text = &body[from..i];
                    if depth == 1 && action_pending {
                        action_pending = false;
                        update = text == b"update";
                    } else if text == b"noop" && !update && follows_result_key(&body[..from - 1]) {
                        dropped += 1;
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => string_at = Some(i + 1),
            b'{' | b'[' => {
                if depth == 0 {
                    items += 1;
                    action_pending = true;
                }
                depth += 1;
            }
            b'}' | b']' if depth == 0 => return Ok((items, dropped)),
            b'}' | b']' => depth -= 1,
            _ => {}
        }
    }
    Err("a bulk answer cut short in its items".to_string())
}

/// Whether `before` (the answer up to a string value's opening quote)
/// ends in the key `"result":`.
fn follows_result_key(before: &[u8]) -> bool {
    before
        .trim_ascii_end()
        .strip_suffix(b":")
        .is_some_and(|key| key.trim_ascii_end().ends_with(b"\"result\""))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[derive(Deserialize)]
struct BulkAnswer<'a> {
    #[serde(borrow)]
    items: Vec<Action<'a>>,
}

/// One item: `{"index": {…}}`, or `create`, `update`, `delete`.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Action<'a> {
    #[serde(borrow)]
    Index(Item<'a>),
    #[serde(borrow)]
    Create(Item<'a>),
    #[serde(borrow)]
    Update(Item<'a>),
    #[serde(borrow)]
    Delete(Item<'a>),
}

impl<'a> Action<'a> {
    fn item(&self) -> &Item<'a> {
        match self {
            Action::Index(item)
            | Action::Create(item)
            | Action::Update(item)
            | Action::Delete(item) => item,
        }
    }

    /// A document the server accepted and did not store: an ingest
    /// pipeline's `drop` answers `noop` (an update's `noop` is a document
    /// left as it was).
    fn is_dropped(&self) -> bool {
        match self {
            Action::Index(item) | Action::Create(item) => item.result.as_deref() == Some("noop"),
            Action::Update(_) | Action::Delete(_) => false,
        }
    }
}

#[derive(Deserialize)]
struct Item<'a> {
    status: u16,
    #[serde(default, borrow)]
    result: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    error: Option<ItemError<'a>>,
}

#[derive(Deserialize)]
struct ItemError<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    reason: Option<Cow<'a, str>>,
}

/// `hits.total`: `{"value": N, …}` since 7.x, a number before.
pub(super) fn search(body: &[u8]) -> Result<SearchOutcome, String> {
    #[derive(Deserialize)]
    struct Answer {
        hits: Hits,
    }
    #[derive(Deserialize)]
    struct Hits {
        #[serde(default)]
        total: Total,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|e| bad("search", &e))?;
    Ok(SearchOutcome {
        hits: answer.hits.total.0,
    })
}

#[derive(Default)]
struct Total(u64);

impl<'de> Deserialize<'de> for Total {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Total, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = Total;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number or {\"value\": number}")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Total, E> {
                Ok(Total(n))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Total, A::Error> {
                let mut value = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "value" {
                        value = Some(map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                value
                    .map(Total)
                    .ok_or_else(|| de::Error::missing_field("value"))
            }
        }
        d.deserialize_any(Either)
    }
}

/// `_count`'s `count`.
pub(super) fn count(body: &[u8]) -> Result<u64, String> {
    #[derive(Deserialize)]
    struct Answer {
        count: u64,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|e| bad("_count", &e))?;
    Ok(answer.count)
}

/// The `_meta` of the (only) index in a `_mapping` answer, as JSON text;
/// `{}` when it has none.
pub(super) fn mapping_meta(body: &[u8]) -> Result<String, String> {
    let answer: Value = serde_json::from_slice(body).map_err(|e| bad("_mapping", &e))?;
    let mappings = answer
        .as_object()
        .and_then(|indices| indices.values().next())
        .and_then(|index| index.get("mappings"))
        .ok_or("a _mapping answer without an index's mappings")?;
    Ok(match mappings.get("_meta") {
        Some(meta) => meta.to_string(),
        None => "{}".to_string(),
    })
}

/// Product, version and cluster name from `GET /`.
pub(super) fn server_info(body: &[u8]) -> Result<ServerInfo, String> {
    let answer: Value = serde_json::from_slice(body).map_err(|e| bad("GET /", &e))?;
    let version = answer
        .get("version")
        .ok_or("no \"version\" in the answer to GET /")?;
    let product = match version.get("distribution").and_then(Value::as_str) {
        Some("opensearch") => "OpenSearch",
        _ => "Elasticsearch",
    };
    let number = version.get("number").and_then(Value::as_str);
    let info = ServerInfo::new(product, number.unwrap_or_default());
    Ok(match answer.get("cluster_name").and_then(Value::as_str) {
        Some(cluster) => info.with_extra("cluster", cluster),
        None => info,
    })
}

/// The cluster's counters from `_nodes/stats`: amounts summed over the
/// nodes, percentages and load of the busiest node, heap percent of the
/// summed heaps. Monotonic ones end in `_total` (reported per second).
/// CPU is the node's own figure, in percent of its whole host.
pub(super) fn node_counters(body: &[u8]) -> Result<Vec<(String, f64)>, String> {
    let answer: Value = serde_json::from_slice(body).map_err(|e| bad("_nodes/stats", &e))?;
    let nodes = answer
        .get("nodes")
        .and_then(Value::as_object)
        .ok_or("a _nodes/stats answer without nodes")?;
    let num = |node: &Value, path: &str| node.pointer(path).and_then(Value::as_f64).unwrap_or(0.0);
    let max = |name: &str, path: &str| -> (String, f64) {
        let v = nodes.values().map(|n| num(n, path)).fold(0.0, f64::max);
        (name.to_string(), v)
    };
    let mut counters = vec![
        max(SERVER_HOST_CPU_PCT, "/os/cpu/percent"),
        max("search_process_cpu_pct", "/process/cpu/percent"),
        max("search_load_1m", "/os/cpu/load_average/1m"),
    ];
    let sum = |path: &str| nodes.values().map(|n| num(n, path)).sum::<f64>();
    let heap_used = sum("/jvm/mem/heap_used_in_bytes");
    let heap_max = sum("/jvm/mem/heap_max_in_bytes");
    let gc_ms: f64 = nodes
        .values()
        .filter_map(|n| n.pointer("/jvm/gc/collectors")?.as_object())
        .flat_map(|collectors| collectors.values())
        .map(|c| num(c, "/collection_time_in_millis"))
        .sum();
    counters.extend([
        ("search_heap_used_bytes".to_string(), heap_used),
        (
            "search_heap_used_pct".to_string(),
            if heap_max > 0.0 {
                100.0 * heap_used / heap_max
            } else {
                0.0
            },
        ),
        ("search_gc_time_ms_total".to_string(), gc_ms),
        (
            "search_indexed_docs_total".to_string(),
            sum("/indices/indexing/index_total"),
        ),
        (
            "search_index_time_ms_total".to_string(),
            sum("/indices/indexing/index_time_in_millis"),
        ),
        (
            "search_queries_total".to_string(),
            sum("/indices/search/query_total"),
        ),
        (
            "search_query_time_ms_total".to_string(),
            sum("/indices/search/query_time_in_millis"),
        ),
        (
            "search_segments".to_string(),
            sum("/indices/segments/count"),
        ),
        ("search_docs".to_string(), sum("/indices/docs/count")),
    ]);
    Ok(counters)
}

fn bad(what: &str, e: &serde_json::Error) -> String {
    format!("unexpected {what} answer ({e})")
}

/// The error for a non-2xx answer, from its `error.type` and `reason`:
/// rejected (429, a full queue) is retryable, an unavailable node a
/// connection error, refused credentials and anything else fatal. One
/// line, the server's type as the code.
pub(super) fn failure(status: u16, body: &[u8], endpoint: &str) -> DriverError {
    let answer: Option<Value> = serde_json::from_slice(body).ok();
    let error = answer.as_ref().and_then(|a| a.get("error"));
    let kind = error
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let said = match (&kind, error) {
        (Some(kind), Some(e)) => {
            let reason = e.get("reason").and_then(Value::as_str).unwrap_or("");
            format!("{kind}: {reason}")
        }
        // Before 5.x, or a proxy: the error is a string, or no JSON at all.
        (None, Some(Value::String(text))) => text.clone(),
        _ => String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    };
    let said = said.replace(['\r', '\n'], " ");
    let rejected = matches!(
        kind.as_deref(),
        Some("es_rejected_execution_exception" | "rejected_execution_exception")
    );
    let error = match status {
        401 => DriverError::fatal(format!(
            "{endpoint} refused the credentials (HTTP 401): wrong user or password? {said}"
        )),
        403 => DriverError::fatal(format!(
            "{endpoint} refused the request (HTTP 403): the user lacks a privilege: {said}"
        )),
        429 => DriverError::retryable(format!("{endpoint} is overloaded (HTTP 429): {said}")),
        _ if rejected => {
            DriverError::retryable(format!("{endpoint} answered HTTP {status}: {said}"))
        }
        502..=504 => DriverError::connection(format!("{endpoint} answered HTTP {status}: {said}")),
        _ => DriverError::fatal(format!("{endpoint} answered HTTP {status}: {said}")),
    };
    match kind {
        Some(kind) => error.with_code(kind),
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadcell_core::ErrorClass;

    fn read_bulk(body: &str) -> (Result<BulkOutcome, String>, Vec<String>) {
        let mut reasons = Vec::new();
        let mut buf = String::new();
        let outcome = bulk(
            body.as_bytes(),
            &mut |r| reasons.push(r.to_string()),
            &mut buf,
        );
        (outcome, reasons)
    }

    #[test]
    fn a_clean_bulk_is_counted_without_parsing() {
        let body = r#"{"took":3,"errors":false,"items":[{"index":{"_index":"i","_id":"a}]\"{","status":201,"_shards":{"total":1}}},{"create":{"_id":"2","status":201}},{"delete":{"status":404,"result":"not_found"}}]}"#;
        assert_eq!(
            read_bulk(body).0,
            Ok(BulkOutcome {
                items: 3,
                failed: 0,
                dropped: 0
            })
        );
        let pretty = "{\n  \"took\" : 3,\n  \"errors\" : false,\n  \"items\" : [ ]\n}";
        assert_eq!(read_bulk(pretty).0.unwrap().items, 0);
        // Not parsed: an invalid item does not matter once errors is false.
        let invalid = r#"{"took":1,"errors":false,"items":[{x}]}"#;
        assert_eq!(read_bulk(invalid).0.unwrap().items, 1);
    }

    #[test]
    fn failed_items_are_counted_with_their_reasons() {
        let body = r#"{"took":3,"errors":true,"items":[
            {"index":{"_id":"1","status":201}},
            {"index":{"_id":"2","status":400,"error":{"type":"mapper_parsing_exception","reason":"failed to parse field [n] of type [long]: 'x\"y'","caused_by":{"type":"x"}}}},
            {"update":{"_id":"3","status":429,"error":{"type":"es_rejected_execution_exception","reason":"queue full"}}}]}"#;
        let (outcome, reasons) = read_bulk(body);
        assert_eq!(
            outcome,
            Ok(BulkOutcome {
                items: 3,
                failed: 2,
                dropped: 0
            })
        );
        assert_eq!(
            reasons,
            [
                "mapper_parsing_exception: failed to parse field [n] of type [long]: 'x\"y'",
                "es_rejected_execution_exception: queue full"
            ]
        );
    }

    #[test]
    fn documents_a_pipeline_dropped_are_counted_apart() {
        // OpenSearch's answer to a drop processor, in both forms; an
        // update's noop, an id or an index named noop are not drops.
        let clean = r#"{"took":3,"ingest_took":1,"errors":false,"items":[
            {"index":{"_index":"noop","_id":"noop","_version":-3,"result" : "noop","_shards":{"total":0},"status":200}},
            {"index":{"_index":"noop","_id":"noop","_version":1,"result":"created","status":201}},
            {"update":{"_index":"i","_id":"7","result":"noop","status":200}},
            {"create":{"_index":"i","_id":"8","result":"noop","status":200}}]}"#;
        assert_eq!(
            read_bulk(clean).0,
            Ok(BulkOutcome {
                items: 4,
                failed: 0,
                dropped: 2
            })
        );
        let failing = clean
            .replace("\"errors\":false", "\"errors\":true")
            .replace(
                r#""result":"created","status":201"#,
                r#""status":400,"error":{"type":"x_exception","reason":"r"}"#,
            );
        assert_eq!(
            read_bulk(&failing).0,
            Ok(BulkOutcome {
                items: 4,
                failed: 1,
                dropped: 2
            })
        );
    }

    #[test]
    fn a_bulk_answer_of_something_else_is_an_error() {
        assert!(read_bulk(r#"{"items":[]}"#)
            .0
            .unwrap_err()
            .contains("errors"));
        assert!(read_bulk(r#"{"errors":false,"items":[{"#)
            .0
            .unwrap_err()
            .contains("cut short"));
        assert!(read_bulk("<html>").0.is_err());
    }

    #[test]
    fn search_hits_come_in_both_forms() {
        let seven = r#"{"took":1,"hits":{"total":{"value":42,"relation":"eq"},"hits":[{"_source":{"a":"b\n"}}]}}"#;
        assert_eq!(search(seven.as_bytes()).unwrap().hits, 42);
        let six = r#"{"hits":{"total":7,"max_score":1.0,"hits":[]}}"#;
        assert_eq!(search(six.as_bytes()).unwrap().hits, 7);
        assert!(search(b"{}").is_err());
    }

    #[test]
    fn server_info_tells_opensearch_from_elasticsearch() {
        let os =
            r#"{"cluster_name":"c","version":{"distribution":"opensearch","number":"2.19.6"}}"#;
        let info = server_info(os.as_bytes()).unwrap();
        assert_eq!(
            (info.product.as_str(), info.version.as_str()),
            ("OpenSearch", "2.19.6")
        );
        assert_eq!(info.extras["cluster"], "c");
        let es = r#"{"version":{"number":"7.10.2","build_flavor":"oss"}}"#;
        let info = server_info(es.as_bytes()).unwrap();
        assert_eq!(
            (info.product.as_str(), info.extras.get("cluster")),
            ("Elasticsearch", None)
        );
    }

    #[test]
    fn mapping_meta_is_json_text_or_empty() {
        let with = r#"{"i":{"mappings":{"_meta":{"created_by":"loadcell"},"properties":{}}}}"#;
        assert_eq!(
            mapping_meta(with.as_bytes()).unwrap(),
            r#"{"created_by":"loadcell"}"#
        );
        assert_eq!(mapping_meta(br#"{"i":{"mappings":{}}}"#).unwrap(), "{}");
    }

    #[test]
    fn node_counters_sum_amounts_and_take_the_busiest_node() {
        let body = r#"{"nodes":{
            "a":{"os":{"cpu":{"percent":30,"load_average":{"1m":1.5}}},"process":{"cpu":{"percent":20}},
                 "jvm":{"mem":{"heap_used_in_bytes":100,"heap_max_in_bytes":400},
                        "gc":{"collectors":{"young":{"collection_time_in_millis":7},"old":{"collection_time_in_millis":3}}}},
                 "indices":{"indexing":{"index_total":10,"index_time_in_millis":5},"search":{"query_total":4,"query_time_in_millis":2},
                            "segments":{"count":6},"docs":{"count":10}}},
            "b":{"os":{"cpu":{"percent":70,"load_average":{"1m":0.5}}},"process":{"cpu":{"percent":60}},
                 "jvm":{"mem":{"heap_used_in_bytes":300,"heap_max_in_bytes":400},"gc":{"collectors":{"young":{"collection_time_in_millis":1}}}},
                 "indices":{"indexing":{"index_total":5},"segments":{"count":1},"docs":{"count":5}}}}}"#;
        let c: std::collections::HashMap<String, f64> = node_counters(body.as_bytes())
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(c["server_host_cpu_pct"], 70.0);
        assert_eq!(c["search_process_cpu_pct"], 60.0);
        assert_eq!(c["search_load_1m"], 1.5);
        assert_eq!(c["search_heap_used_bytes"], 400.0);
        assert_eq!(c["search_heap_used_pct"], 50.0);
        assert_eq!(c["search_gc_time_ms_total"], 11.0);
        assert_eq!(c["search_indexed_docs_total"], 15.0);
        assert_eq!(c["search_queries_total"], 4.0);
        assert_eq!(c["search_segments"], 7.0);
        assert_eq!(c["search_docs"], 15.0);
    }

    #[test]
    fn failures_are_classified_in_one_line() {
        let rejected = br#"{"error":{"type":"es_rejected_execution_exception","reason":"rejected\nexecution"},"status":429}"#;
        let e = failure(429, rejected, "h:9200");
        assert_eq!(e.class, ErrorClass::Retryable);
        assert_eq!(e.code.as_deref(), Some("es_rejected_execution_exception"));
        assert!(!e.message.contains('\n'), "{}", e.message);
        let e = failure(500, rejected, "h:9200");
        assert_eq!(
            e.class,
            ErrorClass::Retryable,
            "rejected whatever the status"
        );
        let auth = br#"{"error":{"type":"security_exception","reason":"unable to authenticate user [u]"},"status":401}"#;
        let e = failure(401, auth, "h:9200");
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(
            e.message.contains("wrong user or password"),
            "{}",
            e.message
        );
        let e = failure(503, b"<html>Service Unavailable</html>", "h:9200");
        assert_eq!(e.class, ErrorClass::Connection);
        assert!(e.message.contains("Service Unavailable"));
        let e = failure(400, br#"{"error":"old style","status":400}"#, "h:9200");
        assert_eq!(e.message, "h:9200 answered HTTP 400: old style");
    }
}
