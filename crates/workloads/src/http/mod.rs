//! The `http` workload (wrk's and wrk2's model): one request per event,
//! the one `--method`, `--path` and `--body` give, or one picked by weight
//! from a request file (`--request-file`, see `requests`) with its
//! parameters filled in; closed
//! loop, or an open loop at `--rate` with latency from each request's
//! intended start. Responses are counted by status class (`2xx`). A
//! response whose status `--expect-status` does not list (by default any
//! 2xx) is also counted by its code and as a failed request of class
//! `http status`, and the run goes on.

mod requests;

use std::collections::BTreeMap;
use std::path::PathBuf;

use loadcell_core::family::HttpFamily;
use loadcell_core::http::{HttpConn, Request};
use loadcell_core::{DriverError, DriverInfo, Family};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

pub use requests::{check_path, ListValues, Param, ParamKind, RequestFile, RequestSpec, Template};
pub(crate) use requests::{param, params, request, toml_file, Drawer, RawParam, RawRequest};

use crate::workload::{Lifecycle, Workload};

/// The error class of a response with a status the run did not expect.
pub const STATUS_CLASS: &str = "http status";

/// Statuses a run accepts: exact codes and whole classes (`2xx`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectStatus {
    codes: Vec<u16>,
    /// Hundreds digits of whole classes: `2` for `2xx`.
    classes: Vec<u16>,
}

impl Default for ExpectStatus {
    fn default() -> Self {
        ExpectStatus {
            codes: Vec::new(),
            classes: vec![2],
        }
    }
}

impl ExpectStatus {
    /// `200,204,3xx`.
    pub fn parse(s: &str) -> Result<ExpectStatus, String> {
        let mut expect = ExpectStatus {
            codes: Vec::new(),
            classes: Vec::new(),
        };
        for item in s.split(',').map(str::trim) {
            let bad = || {
                format!("--expect-status '{item}' is not a status: use codes and classes, e.g. 200,204,3xx")
            };
            match item.as_bytes() {
                [d @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => {
                    expect.classes.push(u16::from(d - b'0'))
                }
                _ => {
                    let code: u16 = item.parse().map_err(|_| bad())?;
                    if !(100..=599).contains(&code) {
                        return Err(bad());
                    }
                    expect.codes.push(code);
                }
            }
        }
        Ok(expect)
    }

    #[inline]
    pub fn accepts(&self, status: u16) -> bool {
        self.classes.contains(&(status / 100)) || self.codes.contains(&status)
    }

    fn label(&self) -> String {
        let codes = self.codes.iter().map(u16::to_string);
        let classes = self.classes.iter().map(|c| format!("{c}xx"));
        codes.chain(classes).collect::<Vec<_>>().join(",")
    }
}

/// The requests a run sends: one chosen by weight for each event.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpOptions {
    pub requests: Vec<RequestSpec>,
    /// The parameters the requests' templates use.
    pub params: Vec<Param>,
    /// The `--request-file` file they were read from; `None` for the one
    /// request `--method`, `--path` and `--body` describe.
    pub request_file: Option<PathBuf>,
    pub expect: ExpectStatus,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            requests: vec![RequestSpec {
                weight: 1,
                method: "GET",
                path: Template::default(),
                headers: Vec::new(),
                body: Template::default(),
            }],
            params: Vec::new(),
            request_file: None,
            expect: ExpectStatus::default(),
        }
    }
}

/// What the HTTP driver sends before the run, once, unmeasured: a `HEAD`
/// on the target's base path, whose `Server` header names the server in
/// the result (`environment.server`).
pub const SERVER_PROBE: &str = "HEAD on the base path before the run";

/// Headers whose values are secrets: recorded as `***`.
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

/// `Name: value` as recorded: the value of a secret header is `***`.
pub fn recorded_header(name: &str, value: &str) -> String {
    if SECRET_HEADERS.contains(&name.trim().to_ascii_lowercase().as_str()) {
        format!("{}: ***", name.trim())
    } else {
        format!("{}: {}", name.trim(), value.trim())
    }
}

fn recorded_headers(headers: &[(String, String)]) -> Vec<String> {
    headers
        .iter()
        .map(|(name, value)| recorded_header(name, value))
        .collect()
}

impl HttpOptions {
    fn to_map(&self) -> BTreeMap<String, Value> {
        let mut map = BTreeMap::from([
            ("expect_status".to_string(), json!(self.expect.label())),
            // The HTTP driver's check before the run, recorded because it
            // reaches the server as a request (docs/families/http.md).
            ("server_probe".to_string(), json!(SERVER_PROBE)),
        ]);
        match (&self.request_file, self.requests.as_slice()) {
            (None, [r]) => {
                map.insert("method".to_string(), json!(r.method));
                map.insert("path".to_string(), json!(r.path.source()));
                map.insert("headers".to_string(), json!(recorded_headers(&r.headers)));
                map.insert("body_bytes".to_string(), json!(r.body.source_len()));
            }
            (file, requests) => {
                let requests: Vec<Value> = requests
                    .iter()
                    .map(|r| {
                        json!({
                            "weight": r.weight,
                            "method": r.method,
                            "path": r.path.source(),
                            "headers": recorded_headers(&r.headers),
                            "body_bytes": r.body.source_len(),
                        })
                    })
                    .collect();
                if let Some(file) = file {
                    map.insert(
                        "request_file".to_string(),
                        json!(file.display().to_string()),
                    );
                }
                map.insert("requests".to_string(), json!(requests));
            }
        }
        map
    }
}

/// The header lines as sent: `Name: value\r\n` each.
fn encoded_headers(headers: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out
}

/// A `--header 'Name: value'`, checked so that nothing sent can break the
/// request's framing.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let Some((name, value)) = s.split_once(':') else {
        return Err(format!("--header '{s}' needs the form 'Name: value'"));
    };
    let name = name.trim();
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !valid_name {
        return Err(format!("--header '{s}': '{name}' is not a header name"));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n') {
        return Err(format!(
            "--header '{name}': a value cannot hold a line break"
        ));
    }
    let framing = ["host", "content-length", "transfer-encoding"];
    if framing.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "--header '{name}' is set by loadcell from the target and the body; remove it"
        ));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

#[derive(Debug, Clone)]
pub struct HttpWorkload {
    pub opts: HttpOptions,
}

impl Workload for HttpWorkload {
    fn name(&self) -> &'static str {
        "http"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::HTTP]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        self.opts.to_map()
    }
}

/// One request ready to send: its headers encoded once, its path and
/// body templates, and the parameters they use.
pub(crate) struct ScriptRequest {
    method: &'static str,
    path: Template,
    headers: Vec<u8>,
    body: Template,
    /// Indexes into the parameters, each once.
    pub(crate) params: Vec<usize>,
}

impl ScriptRequest {
    pub(crate) fn new(r: &RequestSpec) -> ScriptRequest {
        let mut params: Vec<usize> = r.path.params().chain(r.body.params()).collect();
        params.sort_unstable();
        params.dedup();
        ScriptRequest {
            method: r.method,
            path: r.path.clone(),
            headers: encoded_headers(&r.headers),
            body: r.body.clone(),
            params,
        }
    }

    /// Sends the request with its holes filled from `values` (written into
    /// the reused `path` and `body` buffers), timed as operation `kind`;
    /// counts the response's status class, and a status `expect` does not
    /// accept as a failure of class [`STATUS_CLASS`].
    #[inline]
    pub(crate) async fn send<C: HttpConn>(
        &self,
        conn: &mut C,
        values: &[Vec<u8>],
        (path, body): (&mut Vec<u8>, &mut Vec<u8>),
        expect: &ExpectStatus,
        kind: usize,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let request = Request {
            method: self.method,
            path: expanded(&self.path, values, path),
            headers: &self.headers,
            body: expanded(&self.body, values, body),
        };
        let status = ctx
            .op(kind, async { Ok(conn.request(&request).await?.status) })
            .await?;
        let class = usize::from(status / 100);
        ctx.count(STATUS_CLASSES.get(class).copied().unwrap_or("other"), 1);
        if !expect.accepts(status) {
            let message = status_message(status);
            let message = std::str::from_utf8(&message).expect("ASCII digits");
            ctx.count(&message[12..], 1);
            ctx.failed(kind, STATUS_CLASS, message);
        }
        Ok(())
    }
}

/// The run's script: the requests, encoded once.
pub struct HttpScript {
    ops: [OpSpec; 1],
    requests: Vec<ScriptRequest>,
    /// Running sums of the requests' weights, for the weighted pick.
    cumulative: Vec<u32>,
    params: Vec<Param>,
    expect: ExpectStatus,
}

/// A session's generator and the buffers its requests are written into,
/// reused from one request to the next.
pub struct HttpSession {
    rng: SmallRng,
    drawers: Vec<Drawer>,
    /// The current value of each parameter.
    values: Vec<Vec<u8>>,
    path: Vec<u8>,
    body: Vec<u8>,
}

impl HttpScript {
    pub fn new(opts: &HttpOptions) -> HttpScript {
        let writes = opts
            .requests
            .iter()
            .any(|r| !matches!(r.method, "GET" | "HEAD" | "OPTIONS"));
        let category = if writes {
            Category::Write
        } else {
            Category::Read
        };
        let requests = opts.requests.iter().map(ScriptRequest::new).collect();
        let cumulative = opts
            .requests
            .iter()
            .scan(0, |sum, r| {
                *sum += r.weight;
                Some(*sum)
            })
            .collect();
        HttpScript {
            ops: [OpSpec {
                name: "request",
                category,
            }],
            requests,
            cumulative,
            params: opts.params.clone(),
            expect: opts.expect.clone(),
        }
    }

    /// The request of this event: one at random by weight, when there
    /// are several.
    #[inline]
    fn pick(&self, rng: &mut SmallRng) -> &ScriptRequest {
        match self.cumulative.as_slice() {
            [_] => &self.requests[0],
            sums => {
                let x = rng.random_range(0..sums[sums.len() - 1]);
                &self.requests[sums.partition_point(|&s| s <= x)]
            }
        }
    }
}

impl HttpScript {
    /// The operation kind its requests are recorded as.
    pub fn request_op(&self) -> OpSpec {
        self.ops[0]
    }
}

/// Counter names of the status classes, indexed by the hundreds digit.
const STATUS_CLASSES: [&str; 6] = ["other", "1xx", "2xx", "3xx", "4xx", "5xx"];

/// `HTTP status 503`, without allocating: statuses are three digits.
fn status_message(status: u16) -> [u8; 15] {
    let mut text = *b"HTTP status 000";
    let digits = [status / 100 % 10, status / 10 % 10, status % 10];
    for (slot, d) in text[12..].iter_mut().zip(digits) {
        *slot = b'0' + d as u8;
    }
    text
}

/// `template` with its holes filled, written into `buf` unless it has none.
#[inline]
fn expanded<'a>(template: &'a Template, values: &[Vec<u8>], buf: &'a mut Vec<u8>) -> &'a [u8] {
    match template.as_literal() {
        Some(bytes) => bytes,
        None => {
            template.expand(values, buf);
            buf
        }
    }
}

impl<C: HttpConn> Script<C> for HttpScript {
    type Session = HttpSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, session: SessionInfo) -> Result<HttpSession, DriverError> {
        Ok(HttpSession {
            rng: SmallRng::seed_from_u64(session.seed),
            drawers: self
                .params
                .iter()
                .map(|p| Drawer::new(p, session.index, session.count))
                .collect(),
            values: vec![Vec::new(); self.params.len()],
            path: Vec::new(),
            body: Vec::new(),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        session: &mut HttpSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let HttpSession {
            rng,
            drawers,
            values,
            path,
            body,
        } = session;
        let r = self.pick(rng);
        for &p in &r.params {
            drawers[p].draw(rng, &mut values[p]);
        }
        r.send(conn, values, (path, body), &self.expect, 0, ctx)
            .await
    }
}

impl<C: HttpConn> Lifecycle<C, HttpFamily> for HttpWorkload {
    type Script = HttpScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> HttpScript {
        HttpScript::new(&self.opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_statuses_take_codes_and_classes() {
        let e = ExpectStatus::parse("200, 404,3xx").unwrap();
        assert!(e.accepts(200) && e.accepts(404) && e.accepts(301));
        assert!(!e.accepts(201) && !e.accepts(500));
        assert_eq!(e.label(), "200,404,3xx");
        assert!(ExpectStatus::default().accepts(204));
        assert!(!ExpectStatus::default().accepts(301));
        let err = ExpectStatus::parse("200,ok").unwrap_err();
        assert!(
            err.starts_with("--expect-status 'ok' is not a status"),
            "{err}"
        );
        assert!(ExpectStatus::parse("600").is_err());
        assert!(ExpectStatus::parse("6xx").is_err());
    }

    #[test]
    fn headers_are_checked_and_secrets_not_recorded() {
        assert_eq!(
            parse_header("X-Test:  a b ").unwrap(),
            ("X-Test".to_string(), "a b".to_string())
        );
        assert!(parse_header("nocolon")
            .unwrap_err()
            .contains("'Name: value'"));
        assert!(parse_header("Bad Name: x")
            .unwrap_err()
            .contains("not a header name"));
        assert!(parse_header("Host: x")
            .unwrap_err()
            .contains("set by loadcell"));
        let mut opts = HttpOptions::default();
        opts.requests[0].headers = vec![
            ("Authorization".to_string(), "Bearer s3cret".to_string()),
            ("Accept".to_string(), "*/*".to_string()),
        ];
        let recorded = serde_json::to_string(&opts.to_map()).unwrap();
        assert!(!recorded.contains("s3cret"), "{recorded}");
        assert!(recorded.contains("Authorization: ***") && recorded.contains("Accept: */*"));
        assert_eq!(
            encoded_headers(&opts.requests[0].headers),
            b"Authorization: Bearer s3cret\r\nAccept: */*\r\n"
        );
        opts.request_file = Some("reqs.toml".into());
        let recorded = serde_json::to_string(&opts.to_map()).unwrap();
        assert!(!recorded.contains("s3cret"), "{recorded}");
        assert!(
            recorded.contains(r#""request_file":"reqs.toml""#),
            "{recorded}"
        );
    }

    #[test]
    fn requests_are_picked_by_weight_and_the_seed() {
        let mut opts = HttpOptions::default();
        let mut rare = opts.requests[0].clone();
        rare.path = Template::literal(b"/rare");
        opts.requests[0].weight = 9;
        opts.requests.push(rare);
        let script = HttpScript::new(&opts);
        let picks = |seed| {
            let mut rng = SmallRng::seed_from_u64(seed);
            (0..1000)
                .map(|_| script.pick(&mut rng).path.source_len())
                .collect::<Vec<_>>()
        };
        let rare = picks(7).iter().filter(|&&len| len > 0).count();
        assert!((50..150).contains(&rare), "weight 1 in 10: {rare} of 1000");
        assert_eq!(picks(7), picks(7));
    }

    #[test]
    fn status_messages_spell_the_code() {
        assert_eq!(&status_message(503), b"HTTP status 503");
        assert_eq!(&status_message(200), b"HTTP status 200");
    }
}
