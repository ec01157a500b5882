//! The HTTP workloads' options (wrk's and k6's model): parsed, validated
//! into [`HttpOptions`], listed.

use std::path::PathBuf;

use clap::Args;
use loadcell_core::Family;
use loadcell_workloads::http::{
    check_path, parse_header, ExpectStatus, HttpOptions, HttpWorkload, RequestFile, RequestSpec,
    Template,
};

use loadcell_workloads::workload::Workload;

use super::{CliFamily, Entry, FamilySpec, WorkloadArgs};

/// The request an HTTP run sends.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "HTTP workload options")]
pub struct HttpArgs {
    /// Request method: GET, HEAD, POST, PUT, DELETE, PATCH or OPTIONS (default GET).
    #[arg(long, value_name = "METHOD", conflicts_with = "request_file")]
    pub method: Option<String>,
    /// Path and query, appended to the target's path (default: the target's path, or /).
    #[arg(long, value_name = "PATH", conflicts_with = "request_file")]
    pub path: Option<String>,
    /// A request header, 'Name: value' (repeatable), sent with every request.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// The request body.
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["body_file", "request_file"])]
    pub body: Option<String>,
    /// The request body, read from a file.
    #[arg(long, value_name = "FILE", conflicts_with = "request_file")]
    pub body_file: Option<PathBuf>,
    /// Several weighted requests with parameters, from a TOML file (see docs/families/http.md).
    #[arg(long, value_name = "FILE")]
    pub request_file: Option<PathBuf>,
    /// Send 'Authorization: Bearer TOKEN' with every request, the token read from FILE.
    #[arg(long, value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,
    /// Statuses that count as success: codes and classes, e.g. 200,204,3xx (default 2xx).
    #[arg(long, value_name = "LIST")]
    pub expect_status: Option<String>,
}

impl CliFamily for HttpArgs {
    const WHAT: &'static str = "an HTTP workload option";
    type Spec = HttpWorkload;

    fn catalog() -> Vec<Entry> {
        vec![(
            "http",
            &[Family::HTTP],
            "wrk/wrk2-style requests: one method, path, headers and body, or a weighted mix with parameters (--request-file); closed loop or --rate with latency from the intended start; statuses counted by class",
        )]
    }

    fn resolve(_name: &str, all: &WorkloadArgs, _given: &[String]) -> Result<HttpWorkload, String> {
        Ok(HttpWorkload {
            opts: options(&all.http)?,
        })
    }
}

impl FamilySpec for HttpWorkload {
    fn workload(&self) -> &dyn Workload {
        self
    }
}

crate::launch::runs_on!(HttpWorkload: http);

pub(super) fn options(a: &HttpArgs) -> Result<HttpOptions, String> {
    let mut common: Vec<(String, String)> = a
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<_, _>>()?;
    if let Some(file) = &a.bearer_token_file {
        common.push(("Authorization".to_string(), bearer(file)?));
    }
    let (mut requests, params) = match &a.request_file {
        Some(file) => {
            let read = RequestFile::read(file)?;
            (read.requests, read.params)
        }
        None => (vec![one_request(a)?], Vec::new()),
    };
    for r in &mut requests {
        if r.body.source_len() == 0 || !matches!(r.method, "GET" | "HEAD") {
            r.headers.extend(common.iter().cloned());
            continue;
        }
        return Err(format!(
            "a {} request with a body is ignored by most servers: use method POST or PUT",
            r.method
        ));
    }
    let authorizations = requests[0]
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        .count();
    if authorizations > 1 {
        return Err(
            "--bearer-token-file and an Authorization header both authenticate: give one"
                .to_string(),
        );
    }
    let expect = match &a.expect_status {
        Some(list) => ExpectStatus::parse(list)?,
        None => ExpectStatus::default(),
    };
    Ok(HttpOptions {
        requests,
        params,
        request_file: a.request_file.clone(),
        expect,
    })
}

/// The request `--method`, `--path` and `--body` describe.
fn one_request(a: &HttpArgs) -> Result<RequestSpec, String> {
    let method = match &a.method {
        Some(m) => loadcell_core::http::method(m).map_err(|e| format!("--method: {e}"))?,
        None => "GET",
    };
    let path = a.path.clone().unwrap_or_default();
    check_path(&path).map_err(|e| format!("--{e}"))?;
    let body = match (&a.body, &a.body_file) {
        (Some(text), _) => text.as_bytes().to_vec(),
        (None, Some(file)) => {
            std::fs::read(file).map_err(|e| format!("--body-file {}: {e}", file.display()))?
        }
        (None, None) => Vec::new(),
    };
    Ok(RequestSpec {
        weight: 1,
        method,
        path: Template::literal(path.as_bytes()),
        headers: Vec::new(),
        body: Template::literal(&body),
    })
}

/// `Bearer TOKEN`, the token read from `file` (kept off the command line,
/// where `ps` and the result file's `command` would show it).
fn bearer(file: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("--bearer-token-file {}: {e}", file.display()))?;
    let token = text.trim();
    if token.is_empty() || token.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(format!(
            "--bearer-token-file {}: the file must hold one token, without spaces",
            file.display()
        ));
    }
    Ok(format!("Bearer {token}"))
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
        assert!(err(args(None, None, Some("x"))).contains("use method POST"));
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
        let r = &o.requests[0];
        assert_eq!(r.method, "POST");
        assert_eq!(
            (r.path.source(), r.body.source()),
            ("/api?x=1".into(), "{}".into())
        );
    }

    #[test]
    fn a_bearer_token_comes_from_its_file_and_joins_every_request() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let a = HttpArgs {
            bearer_token_file: Some(token.clone()),
            headers: vec!["Accept: */*".into()],
            ..HttpArgs::default()
        };
        let o = options(&a).unwrap();
        assert_eq!(
            o.requests[0].headers,
            vec![
                ("Accept".to_string(), "*/*".to_string()),
                ("Authorization".to_string(), "Bearer s3cret".to_string())
            ]
        );
        let both = HttpArgs {
            headers: vec!["authorization: Basic x".into()],
            ..a
        };
        assert!(options(&both).unwrap_err().contains("both authenticate"));
        std::fs::write(&token, "two words").unwrap();
        let err = options(&HttpArgs {
            bearer_token_file: Some(token),
            ..HttpArgs::default()
        })
        .unwrap_err();
        assert!(err.contains("one token") && !err.contains("words"), "{err}");
    }
}
