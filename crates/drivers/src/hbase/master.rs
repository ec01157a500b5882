//! What the HBase master's web UI (`?master_info=HOST:PORT`, the
//! master's `hbase.master.info.port`, 16010 by default) says that the
//! Thrift2 gateway does not: HBase's version (its status page's "HBase
//! Version" row) and the servers' own counters (`/jmx`, the JSON of the
//! master's JVM). A standalone HBase's region server lives in the
//! master's JVM, so its request, WAL and block-cache counters are there
//! too; a distributed cluster's master has only the cluster's request
//! count.

use std::sync::Arc;

use loadcell_core::http::{HttpConn, Request, Response};
use loadcell_core::DriverError;

use crate::http::{Http1Connection, Origin, Shared};

/// The master's web UI.
#[derive(Debug)]
pub(crate) struct MasterInfo(Arc<Shared>);

const STATUS_PAGE: &[u8] = b"/master-status";
const SERVER_BEANS: &[u8] = b"/jmx?qry=Hadoop:service=HBase,name=*,sub=Server";

/// The counters read from the `RegionServer,sub=Server` bean: HBase's
/// name and loadcell's (a `_total` is a count since the start).
const REGION_SERVER: &[(&str, &str)] = &[
    ("totalRequestCount", "hbase_requests_total"),
    ("readRequestCount", "hbase_read_requests_total"),
    ("writeRequestCount", "hbase_write_requests_total"),
    (
        "mutationsWithoutWALCount",
        "hbase_mutations_without_wal_total",
    ),
    ("blockCacheHitCount", "hbase_block_cache_hits_total"),
    ("blockCacheMissCount", "hbase_block_cache_misses_total"),
    ("memStoreSize", "hbase_memstore_bytes"),
    ("storeFileCount", "hbase_store_files"),
    ("regionCount", "hbase_regions"),
];
/// The same from the `Master,sub=Server` bean.
const MASTER: &[(&str, &str)] = &[("clusterRequests", "hbase_cluster_requests_total")];

impl MasterInfo {
    /// `HOST:PORT` of the master's web UI.
    pub(crate) fn parse(value: &str) -> Result<MasterInfo, String> {
        let bad =
            |why: &str| format!("master_info={value}: {why}, e.g. master_info=127.0.0.1:16010");
        let url = url::Url::parse(&format!("http://{value}/")).map_err(|e| bad(&e.to_string()))?;
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("no host"))?;
        let port = url.port().ok_or_else(|| bad("no port"))?;
        if url.path() != "/" || url.query().is_some() || !url.username().is_empty() {
            return Err(bad("only a host and a port"));
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Ok(MasterInfo(Arc::new(Shared::plain(Origin::new(
            host, port, false, None,
        )))))
    }

    /// The body of a 200 answer to `GET path`, on a connection of its own.
    async fn get(&self, path: &[u8]) -> Result<String, DriverError> {
        let mut conn = Http1Connection::open(Arc::clone(&self.0), 0).await?;
        let request = Request {
            method: "GET",
            path,
            headers: b"Connection: close\r\n",
            body: b"",
        };
        let Response { status, body } = conn.request(&request).await?;
        if status != 200 {
            return Err(DriverError::connection(format!(
                "the HBase master's web UI at {} answered HTTP {status}",
                self.0.origins[0].endpoint
            )));
        }
        Ok(String::from_utf8_lossy(body).into_owned())
    }

    /// HBase's version, e.g. `2.5.8`.
    pub(crate) async fn version(&self) -> Result<String, DriverError> {
        let page = self.get(STATUS_PAGE).await?;
        version_in(&page).ok_or_else(|| {
            DriverError::fatal(format!(
                "{} has no \"HBase Version\" on its status page: is it an HBase master's web UI?",
                self.0.origins[0].endpoint
            ))
        })
    }

    pub(crate) async fn counters(&self) -> Result<Vec<(String, f64)>, DriverError> {
        let json = self.get(SERVER_BEANS).await?;
        counters_in(&json).map_err(|e| {
            DriverError::fatal(format!(
                "the HBase master's /jmx at {}: {e}",
                self.0.origins[0].endpoint
            ))
        })
    }
}

/// The version in the status page's row `<td>HBase Version</td>
/// <td>2.5.8, revision=…</td>`.
fn version_in(page: &str) -> Option<String> {
    let (_, after) = page.split_once("<td>HBase Version</td>")?;
    let (_, cell) = after.split_once("<td>")?;
    let (text, _) = cell.split_once("</td>")?;
    let version = text.split(',').next()?.trim();
    (!version.is_empty()).then(|| version.to_string())
}

fn counters_in(json: &str) -> Result<Vec<(String, f64)>, String> {
    #[derive(serde::Deserialize)]
    struct Beans {
        beans: Vec<serde_json::Map<String, serde_json::Value>>,
    }
    let beans: Beans = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for bean in &beans.beans {
        let name = bean.get("name").and_then(|n| n.as_str()).unwrap_or("");
        let wanted = if name.ends_with("name=RegionServer,sub=Server") {
            REGION_SERVER
        } else if name.ends_with("name=Master,sub=Server") {
            MASTER
        } else {
            continue;
        };
        for (hbase, ours) in wanted {
            if let Some(v) = bean.get(*hbase).and_then(|v| v.as_f64()) {
                out.push((ours.to_string(), v));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_status_pages_row() {
        let page = "<tr>\n<td>HBase Version</td>\n    <td>2.5.8, revision=37444de</td><td>HBase version and revision</td>";
        assert_eq!(version_in(page).as_deref(), Some("2.5.8"));
        assert_eq!(version_in("<html>nginx</html>"), None);
    }

    #[test]
    fn the_counters_come_from_the_server_beans_under_loadcells_names() {
        let json = r#"{"beans":[
            {"name":"Hadoop:service=HBase,name=Master,sub=Server","tag.isActiveMaster":"true","clusterRequests":16},
            {"name":"Hadoop:service=HBase,name=RegionServer,sub=Server","tag.serverName":"x",
             "totalRequestCount":16,"mutationsWithoutWALCount":500,"memStoreSize":1336,"regionCount":2}]}"#;
        let counters = counters_in(json).unwrap();
        let get = |n: &str| counters.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
        assert_eq!(get("hbase_cluster_requests_total"), Some(16.0));
        assert_eq!(get("hbase_mutations_without_wal_total"), Some(500.0));
        assert_eq!(get("hbase_memstore_bytes"), Some(1336.0));
        assert_eq!(
            get("hbase_block_cache_hits_total"),
            None,
            "absent, not zero"
        );
        assert!(counters_in("<html>").is_err());
    }

    #[test]
    fn the_master_info_is_a_host_and_a_port() {
        assert!(MasterInfo::parse("127.0.0.1:16010").is_ok());
        for bad in ["127.0.0.1", "h:1/jmx", "http://h:1"] {
            let e = MasterInfo::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("master_info={bad}:")), "{e}");
        }
    }
}
