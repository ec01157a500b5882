//! The server side of a run seen over plain HTTP: a page of the server's
//! own numbers named by a target's parameter ([`StatusPage`]: `status=` on
//! HTTP targets, `metrics=` on MQTT ones), fetched once per interval on a
//! connection of its own, its numbers turned into server counters
//! (monotonic ones named `_total`, reported as rates).
//!
//! - nginx's `stub_status`: active, reading, writing and waiting
//!   connections; accepted and handled connections and requests, totals.
//! - haproxy's stats CSV (`/stats;csv`): per frontend, backend and server,
//!   sessions current/max/limit, session and connection rates, the queue,
//!   and totals of sessions, requests, denials, errors and 5xx responses.
//! - Prometheus text ([`prometheus_text`]): chosen samples, summed over
//!   their labels.

use std::sync::Arc;

use loadcell_core::http::{HttpConn, Request, Response};
use loadcell_core::DriverError;

use super::{Http1Connection, Origin, Shared};

/// A page of the server's numbers at `http://HOST:PORT/PATH`.
pub(crate) struct StatusPage {
    page: Arc<Shared>,
    path: Vec<u8>,
}

/// `param=value` of a target, a page's URL: its host, port and path with
/// query. `example` completes the error's hint.
pub(crate) fn page_url(
    param: &str,
    value: &str,
    example: &str,
) -> Result<(String, u16, String), String> {
    let bad = |why: &str| format!("{param}={value}: {why}, e.g. {param}={example}");
    let url = url::Url::parse(value).map_err(|e| bad(&e.to_string()))?;
    if url.scheme() != "http" {
        return Err(bad("the page is fetched over plain http://"));
    }
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("no host"))?;
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((host.to_string(), url.port().unwrap_or(80), path))
}

impl StatusPage {
    pub(crate) fn new((host, port, path): (String, u16, String)) -> StatusPage {
        StatusPage {
            page: Arc::new(Shared::plain(Origin::new(&host, port, false, None))),
            path: path.into_bytes(),
        }
    }

    /// The page, on a connection of its own (so that the server counts it
    /// once and the run's connections are left alone).
    pub(crate) async fn fetch(&self) -> Result<String, DriverError> {
        let mut conn = Http1Connection::open(Arc::clone(&self.page), 0).await?;
        let request = Request {
            method: "GET",
            path: &self.path,
            headers: b"Connection: close\r\n",
            body: b"",
        };
        let Response { status, body } = conn.request(&request).await?;
        if status != 200 {
            return Err(DriverError::connection(format!(
                "the status page answered HTTP {status}"
            )));
        }
        Ok(String::from_utf8_lossy(body).into_owned())
    }
}

/// The Prometheus text format's samples of each `(metric, name)` in
/// `wanted`, summed over their labels, as `name`.
pub(crate) fn prometheus_text(text: &str, wanted: &[(&str, &str)]) -> Vec<(String, f64)> {
    let mut sums = vec![0.0; wanted.len()];
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let metric = line.split(['{', ' ']).next().unwrap_or_default();
        let Some(i) = wanted.iter().position(|(m, _)| *m == metric) else {
            continue;
        };
        let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        sums[i] += value.unwrap_or(0.0);
    }
    wanted
        .iter()
        .zip(sums)
        .map(|((_, name), v)| (name.to_string(), v))
        .collect()
}

/// haproxy columns kept as they are (gauges).
const HAPROXY_GAUGES: &[&str] = &[
    "qcur",
    "qmax",
    "scur",
    "smax",
    "slim",
    "rate",
    "rate_max",
    "req_rate",
    "conn_rate",
    "conn_rate_max",
];

/// haproxy columns that only grow: reported as `<name>_total`.
const HAPROXY_TOTALS: &[&str] = &[
    "stot", "conn_tot", "req_tot", "dreq", "dresp", "dcon", "dses", "ereq", "econ", "eresp",
    "wretr", "wredis", "hrsp_4xx", "hrsp_5xx", "cli_abrt", "srv_abrt",
];

/// The counters of a status page, whichever of the two it is.
pub(crate) fn counters(body: &str) -> Result<Vec<(String, f64)>, String> {
    if body.starts_with("Active connections:") {
        nginx(body)
    } else if body.starts_with("# pxname,") {
        Ok(haproxy(body))
    } else {
        let start: String = body.chars().take(40).collect();
        Err(format!(
            "the status page is neither nginx's stub_status nor haproxy's stats CSV \
             (it begins {start:?}); for haproxy, end the URL in ';csv'"
        ))
    }
}

/// `Active connections: 2 \n server accepts handled requests\n 5 5 9 \n
/// Reading: 0 Writing: 1 Waiting: 1 \n`.
fn nginx(body: &str) -> Result<Vec<(String, f64)>, String> {
    let numbers: Vec<f64> = body
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [active, accepts, handled, requests, reading, writing, waiting] = numbers[..] else {
        return Err(format!("nginx stub_status not understood: {body:?}"));
    };
    Ok(vec![
        ("nginx_active_connections".into(), active),
        ("nginx_accepts_total".into(), accepts),
        ("nginx_handled_total".into(), handled),
        ("nginx_requests_total".into(), requests),
        ("nginx_reading".into(), reading),
        ("nginx_writing".into(), writing),
        ("nginx_waiting".into(), waiting),
    ])
}

/// One counter per kept column and row: `haproxy_<proxy>_<server>_<column>`,
/// with `frontend` and `backend` for the proxies' own rows. The stats
/// listener's own rows are left out.
fn haproxy(body: &str) -> Vec<(String, f64)> {
    let mut lines = body.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let mut out = Vec::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        let (Some(&proxy), Some(&server)) = (fields.first(), fields.get(1)) else {
            continue;
        };
        if proxy == "stats" || proxy.is_empty() {
            continue;
        }
        let server = server.to_ascii_lowercase();
        for (column, value) in header.iter().zip(&fields) {
            let Ok(v) = value.parse::<f64>() else {
                continue;
            };
            let name = format!("haproxy_{proxy}_{server}_{column}");
            if HAPROXY_GAUGES.contains(column) {
                out.push((name, v));
            } else if HAPROXY_TOTALS.contains(column) {
                out.push((format!("{name}_total"), v));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(c: &[(String, f64)], name: &str) -> Option<f64> {
        c.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    #[test]
    fn nginx_stub_status_gives_gauges_and_totals() {
        let body = "Active connections: 291 \nserver accepts handled requests\n 16630948 16630947 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n";
        let c = counters(body).unwrap();
        assert_eq!(get(&c, "nginx_active_connections"), Some(291.0));
        assert_eq!(get(&c, "nginx_handled_total"), Some(16630947.0));
        assert_eq!(get(&c, "nginx_requests_total"), Some(31070465.0));
        assert_eq!(get(&c, "nginx_waiting"), Some(106.0));
        assert!(counters("Active connections: x").is_err());
    }

    #[test]
    fn haproxy_csv_gives_sessions_rates_queue_and_errors_per_row() {
        let body = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,rate,conn_rate,conn_tot,hrsp_5xx,\n\
fe,FRONTEND,,,200,200,200,5123,1,2,0,0,3,,,,,OPEN,150,151,5130,0,\n\
be,n1,0,4,100,101,,2561,1,2,,0,,2,0,0,0,UP,75,,,1,\n\
stats,FRONTEND,,,1,1,4000,9,0,0,0,0,0,,,,,OPEN,0,1,9,0,\n";
        let c = counters(body).unwrap();
        assert_eq!(get(&c, "haproxy_fe_frontend_scur"), Some(200.0));
        assert_eq!(get(&c, "haproxy_fe_frontend_slim"), Some(200.0));
        assert_eq!(get(&c, "haproxy_fe_frontend_stot_total"), Some(5123.0));
        assert_eq!(get(&c, "haproxy_fe_frontend_conn_rate"), Some(151.0));
        assert_eq!(get(&c, "haproxy_fe_frontend_ereq_total"), Some(3.0));
        assert_eq!(get(&c, "haproxy_be_n1_qmax"), Some(4.0));
        assert_eq!(get(&c, "haproxy_be_n1_econ_total"), Some(2.0));
        assert_eq!(get(&c, "haproxy_be_n1_hrsp_5xx_total"), Some(1.0));
        assert_eq!(
            get(&c, "haproxy_fe_frontend_bin"),
            None,
            "bytes are not kept"
        );
        assert!(c.iter().all(|(n, _)| !n.starts_with("haproxy_stats_")));
    }

    #[test]
    fn another_page_is_named_with_the_csv_hint() {
        let err = counters("<html>Statistics Report</html>").unwrap_err();
        assert!(err.contains("';csv'"), "{err}");
    }
}
