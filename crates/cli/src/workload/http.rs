//! The HTTP workloads' options (wrk's and k6's model): parsed, validated
//! into [`HttpOptions`], listed.

use std::path::PathBuf;

use clap::Args;
use loadcell_core::Family;
use loadcell_workloads::http::{parse_header, ExpectStatus, HttpOptions, HttpWorkload};

use super::WorkloadSpec;

pub(super) const WHAT: &str = "an HTTP workload option";

/// The request an HTTP run sends.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "HTTP workload options")]
pub struct HttpArgs {
    /// Request method: GET, HEAD, POST, PUT, DELETE, PATCH or OPTIONS (default GET).
    #[arg(long, value_name = "METHOD")]
    pub method: Option<String>,
    /// Path and query, appended to the target's path (default: the target's path, or /).
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// A request header, 'Name: value' (repeatable).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// The request body.
    #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// The request body, read from a file.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// Statuses that count as success: codes and classes, e.g. 200,204,3xx (default 2xx).
    #[arg(long, value_name = "LIST")]
    pub expect_status: Option<String>,
}

pub(super) fn catalog() -> Vec<(&'static str, &'static [Family], &'static str)> {
    vec![(
        "http",
        &[Family::Http],
        "wrk/wrk2-style requests: one method, path, headers and body; closed loop or --rate with latency from the intended start",
    )]
}

pub(super) fn resolve(a: &HttpArgs) -> Result<WorkloadSpec, String> {
    Ok(WorkloadSpec::Http(HttpWorkload { opts: options(a)? }))
}

pub(super) fn options(a: &HttpArgs) -> Result<HttpOptions, String> {
    let method = match &a.method {
        Some(m) => loadcell_core::http::method(m).map_err(|e| format!("--method: {e}"))?,
        None => "GET",
    };
    let path = a.path.clone().unwrap_or_default();
    if !path.is_empty() && !path.starts_with('/') {
        return Err(format!("--path '{path}' must start with '/'"));
    }
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "--path '{path}' holds a space or control character: percent-encode it (%20)"
        ));
    }
    let headers = a
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<_, _>>()?;
    let body = match (&a.body, &a.body_file) {
        (Some(text), _) => text.as_bytes().to_vec(),
        (None, Some(file)) => {
            std::fs::read(file).map_err(|e| format!("--body-file {}: {e}", file.display()))?
        }
        (None, None) => Vec::new(),
    };
    if !body.is_empty() && matches!(method, "GET" | "HEAD") {
        return Err(format!(
            "a {method} request with a body is ignored by most servers: use --method POST or PUT"
        ));
    }
    let expect = match &a.expect_status {
        Some(list) => ExpectStatus::parse(list)?,
        None => ExpectStatus::default(),
    };
    Ok(HttpOptions {
        method,
        path,
        headers,
        body,
        expect,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(method: Option<&str>, path: Option<&str>, body: Option<&str>) -> HttpArgs {
        HttpArgs {
            method: method.map(str::to_string),
            path: path.map(str::to_string),
            body: body.map(str::to_string),
            ..HttpArgs::default()
        }
    }

    #[test]
    fn bad_requests_are_refused_in_one_line() {
        let err = |a: HttpArgs| options(&a).unwrap_err();
        assert!(
            err(args(Some("GTE"), None, None)).starts_with("--method: unknown HTTP method 'GTE'")
        );
        assert!(err(args(None, Some("index.html"), None)).contains("must start with '/'"));
        assert!(err(args(None, Some("/a b"), None)).contains("percent-encode"));
        assert!(err(args(None, None, Some("x"))).contains("use --method POST"));
        let missing = HttpArgs {
            body_file: Some("/nonexistent/body.json".into()),
            method: Some("POST".into()),
            ..HttpArgs::default()
        };
        assert!(err(missing).starts_with("--body-file /nonexistent/body.json:"));
    }

    #[test]
    fn a_post_carries_its_body_and_method() {
        let o = options(&args(Some("post"), Some("/api?x=1"), Some("{}"))).unwrap();
        assert_eq!(
            (o.method, o.path.as_str(), o.body.as_slice()),
            ("POST", "/api?x=1", &b"{}"[..])
        );
    }
}
