//! The `http` workload (wrk's and wrk2's model): one request per event,
//! the same method, path, headers and body each time; closed loop, or an
//! open loop at `--rate` with latency from each request's intended start.
//! A response whose status `--expect-status` does not list (by default any
//! 2xx) is counted as a failed request of class `http status`, and the run
//! goes on.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::family::HttpFamily;
use loadcell_core::http::{HttpConn, Request};
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use serde_json::{json, Value};

use crate::prepare::{CheckError, PrepareObserver};
use crate::workload::{CleanupError, Lifecycle, Loading, Workload};

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

/// The request every event sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    pub method: &'static str,
    /// Path and query, appended to the target's path.
    pub path: String,
    /// `(name, value)` pairs, sent in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub expect: ExpectStatus,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            method: "GET",
            path: String::new(),
            headers: Vec::new(),
            body: Vec::new(),
            expect: ExpectStatus::default(),
        }
    }
}

/// Headers whose values are secrets: recorded as `***`.
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

impl HttpOptions {
    fn to_map(&self) -> BTreeMap<String, Value> {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| {
                if SECRET_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                    format!("{name}: ***")
                } else {
                    format!("{name}: {value}")
                }
            })
            .collect();
        BTreeMap::from([
            ("method".to_string(), json!(self.method)),
            ("path".to_string(), json!(self.path)),
            ("headers".to_string(), json!(headers)),
            ("body_bytes".to_string(), json!(self.body.len())),
            ("expect_status".to_string(), json!(self.expect.label())),
        ])
    }

    /// The header lines as sent: `Name: value\r\n` each.
    fn encoded_headers(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out
    }
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
        &[Family::Http]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        self.opts.to_map()
    }
}

/// The run's script: the request, encoded once.
pub struct HttpScript {
    ops: [OpSpec; 1],
    method: &'static str,
    path: Vec<u8>,
    headers: Vec<u8>,
    body: Vec<u8>,
    expect: ExpectStatus,
}

impl HttpScript {
    pub fn new(opts: &HttpOptions) -> HttpScript {
        let category = match opts.method {
            "GET" | "HEAD" | "OPTIONS" => Category::Read,
            _ => Category::Write,
        };
        HttpScript {
            ops: [OpSpec {
                name: "request",
                category,
            }],
            method: opts.method,
            path: opts.path.as_bytes().to_vec(),
            headers: opts.encoded_headers(),
            body: opts.body.clone(),
            expect: opts.expect.clone(),
        }
    }
}

impl HttpScript {
    /// The operation kind its requests are recorded as.
    pub fn request_op(&self) -> OpSpec {
        self.ops[0]
    }
}

/// `HTTP status 503`, without allocating: statuses are three digits.
fn status_message(status: u16) -> [u8; 15] {
    let mut text = *b"HTTP status 000";
    let digits = [status / 100 % 10, status / 10 % 10, status % 10];
    for (slot, d) in text[12..].iter_mut().zip(digits) {
        *slot = b'0' + d as u8;
    }
    text
}

impl<C: HttpConn> Script<C> for HttpScript {
    type Session = ();

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, _session: SessionInfo) -> Result<(), DriverError> {
        Ok(())
    }

    async fn event(
        &self,
        conn: &mut C,
        _session: &mut (),
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let request = Request {
            method: self.method,
            path: &self.path,
            headers: &self.headers,
            body: &self.body,
        };
        let status = ctx
            .op(0, async { Ok(conn.request(&request).await?.status) })
            .await?;
        if !self.expect.accepts(status) {
            let message = status_message(status);
            let message = std::str::from_utf8(&message).expect("ASCII digits");
            ctx.failed(0, STATUS_CLASS, message);
        }
        Ok(())
    }
}

impl<C: HttpConn> Lifecycle<C, HttpFamily> for HttpWorkload {
    type Script = HttpScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> HttpScript {
        HttpScript::new(&self.opts)
    }

    async fn check(&self, _script: &HttpScript, _conn: &mut C) -> Result<(), CheckError> {
        Ok(())
    }

    /// An HTTP service's content is its own: there is nothing to load.
    async fn prepare<D>(
        &self,
        _driver: Arc<D>,
        _info: &DriverInfo,
        _loading: Loading,
        _observer: Rc<dyn PrepareObserver>,
    ) -> Result<(), DriverError>
    where
        D: Driver<Conn = C>,
    {
        Err(DriverError::fatal(
            "the http workload loads nothing: run it against the service as it is",
        ))
    }

    async fn cleanup<D>(
        &self,
        _driver: &D,
        _connect_timeout: Duration,
        _observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        Err(CleanupError::Refused(
            "the http workload creates nothing, so there is nothing to clean up".to_string(),
        ))
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
        let opts = HttpOptions {
            headers: vec![
                ("Authorization".to_string(), "Bearer s3cret".to_string()),
                ("Accept".to_string(), "*/*".to_string()),
            ],
            ..HttpOptions::default()
        };
        let recorded = serde_json::to_string(&opts.to_map()).unwrap();
        assert!(!recorded.contains("s3cret"), "{recorded}");
        assert!(recorded.contains("Authorization: ***") && recorded.contains("Accept: */*"));
        assert_eq!(
            opts.encoded_headers(),
            b"Authorization: Bearer s3cret\r\nAccept: */*\r\n"
        );
    }

    #[test]
    fn status_messages_spell_the_code() {
        assert_eq!(&status_message(503), b"HTTP status 503");
        assert_eq!(&status_message(200), b"HTTP status 200");
    }
}
