//! The series key: what must be equal for two runs to be comparable. See
//! the crate documentation for its definition.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use loadcell_core::target::Target;
use loadcell_record::result::{RunConfig, RunResult};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The label that names the commit measured: kept on the entry, never in
/// the key (a series follows one setup across commits).
pub const COMMIT_LABEL: &str = "commit";

/// How many hexadecimal digits of the SHA-256 of the key's text form make
/// its id.
pub const ID_DIGITS: usize = 12;

/// Parts of option and query-parameter names that mark a secret, and
/// whole names that do: such a value is kept in the key as `***`.
const SECRET_NAME_PARTS: [&str; 7] = [
    "password",
    "passwd",
    "secret",
    "token",
    "credential",
    "api_key",
    "apikey",
];
const SECRET_NAMES: [&str; 4] = ["pass", "pwd", "auth", "authorization"];

/// What sets a series apart: runs with equal keys measured the same thing
/// the same way, so their numbers can be compared over time (across
/// commits, hosts and days).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SeriesKey {
    /// `config.workload`.
    pub workload: String,
    /// The target without user or password: `scheme://host:port,...
    /// /database?params`, parameters sorted, secret ones as `***`.
    pub target: String,
    /// The run options that change the numbers, under their key names
    /// (`threads`, `clients`, `workers`, `time_s`, `events`, `warmup_s`,
    /// `rate`, `arrival`, `rate_tick_s`, `connection_policy`, `shard`).
    pub options: BTreeMap<String, String>,
    /// Every workload option the run resolved (defaults included), but
    /// those whose value is `null`, as canonical text.
    pub workload_options: BTreeMap<String, String>,
    /// The run's labels but `commit`.
    pub labels: BTreeMap<String, String>,
    /// For a run of a sweep or findmax file: `sweep.PARAMETER` or
    /// `findmax.rate`, and the point's value.
    pub point: Option<(String, String)>,
}

impl SeriesKey {
    /// The key of a single run.
    pub fn of_run(r: &RunResult) -> SeriesKey {
        let c = &r.config;
        SeriesKey {
            workload: c.workload.clone(),
            target: canonical_target(&c.target),
            options: run_options(c),
            workload_options: c
                .workload_options
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(name, v)| {
                    let value = if is_secret_name(name) {
                        "***".to_string()
                    } else {
                        canonical_value(v)
                    };
                    (name.clone(), value)
                })
                .collect(),
            labels: r
                .labels
                .iter()
                .filter(|(k, _)| k.as_str() != COMMIT_LABEL)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            point: None,
        }
    }

    /// The key of a run of a sweep (`kind` `sweep`) or findmax (`findmax`)
    /// file at the point where `parameter` was `value`.
    pub fn of_point(r: &RunResult, kind: &str, parameter: &str, value: f64) -> SeriesKey {
        SeriesKey {
            point: Some((format!("{kind}.{parameter}"), number(value))),
            ..SeriesKey::of_run(r)
        }
    }

    /// The stable, readable text form: `name=value` fields separated by
    /// single spaces, in the order of the crate documentation. A value
    /// that is empty or holds whitespace, `"` or a control character is
    /// written as a JSON string.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let mut field = |name: &str, value: &str| {
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "{name}={}", quoted(value));
        };
        field("workload", &self.workload);
        field("target", &self.target);
        for name in RUN_OPTION_ORDER {
            if let Some(v) = self.options.get(*name) {
                field(name, v);
            }
        }
        // Names a future version might add, after the known ones.
        for (name, v) in &self.options {
            if !RUN_OPTION_ORDER.contains(&name.as_str()) {
                field(name, v);
            }
        }
        for (name, v) in &self.workload_options {
            field(&format!("option.{name}"), v);
        }
        for (name, v) in &self.labels {
            field(&format!("label.{name}"), v);
        }
        if let Some((name, v)) = &self.point {
            field(name, v);
        }
        out
    }

    /// The short id: the first [`ID_DIGITS`] hexadecimal digits of the
    /// SHA-256 of [`SeriesKey::text`].
    pub fn id(&self) -> String {
        let digest = Sha256::digest(self.text().as_bytes());
        let mut hex = String::with_capacity(ID_DIGITS);
        for b in digest.iter() {
            let _ = write!(hex, "{b:02x}");
        }
        hex.truncate(ID_DIGITS);
        hex
    }
}

impl std::fmt::Display for SeriesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// The run options of the key, in the order of the text form.
const RUN_OPTION_ORDER: &[&str] = &[
    "threads",
    "clients",
    "workers",
    "time_s",
    "events",
    "warmup_s",
    "rate",
    "arrival",
    "rate_tick_s",
    "connection_policy",
    "shard",
];

fn run_options(c: &RunConfig) -> BTreeMap<String, String> {
    let mut o = BTreeMap::new();
    let mut put = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            o.insert(name.to_string(), v);
        }
    };
    put("threads", Some(c.threads.to_string()));
    put("clients", Some(c.clients_per_thread.to_string()));
    put("workers", c.worker_threads.map(|w| w.to_string()));
    put("time_s", c.time_s.map(number));
    put("events", c.events.map(|e| e.to_string()));
    put("warmup_s", Some(number(c.warmup_s)));
    put("rate", c.rate.map(number));
    // Only open loop has an arrival process.
    put("arrival", c.rate.and(c.arrival.clone()));
    put("rate_tick_s", c.rate_tick_s.map(number));
    // Files from before the policy could be chosen kept connections.
    put(
        "connection_policy",
        Some(
            c.connection_policy
                .clone()
                .unwrap_or_else(|| "persistent".to_string()),
        ),
    );
    put("shard", c.shard.map(|s| format!("{}/{}", s.index, s.count)));
    o
}

/// A number as Rust prints an `f64`: the shortest text that reads back as
/// it, without a needless `.0` (`10`, `0.5`, `2500.75`).
fn number(v: f64) -> String {
    format!("{v}")
}

/// A workload option's value: a string as itself, anything else as
/// compact JSON with object keys sorted.
fn canonical_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => {
            let mut out = String::new();
            write_json(other, &mut out);
            out
        }
    }
}

fn write_json(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut names: Vec<&String> = map.keys().collect();
            names.sort();
            out.push('{');
            for (i, name) in names.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(name.clone()).to_string());
                out.push(':');
                write_json(&map[name], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn quoted(value: &str) -> String {
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c.is_control());
    if plain {
        value.to_string()
    } else {
        serde_json::Value::String(value.to_string()).to_string()
    }
}

fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_NAME_PARTS.iter().any(|p| lower.contains(p)) || SECRET_NAMES.contains(&lower.as_str())
}

/// The target as the key holds it: scheme, hosts with their ports,
/// database or path, and the query's parameters sorted (a secret one's
/// value as `***`); never a user or password.
pub fn canonical_target(recorded: &str) -> String {
    let Ok(t) = Target::parse(recorded) else {
        return fallback_target(recorded);
    };
    let url = t.url();
    let mut out = String::new();
    if url.cannot_be_a_base() {
        // `sqlite:PATH`
        let _ = write!(out, "{}:{}", t.scheme(), url.path());
    } else {
        let hosts: Vec<String> = t
            .hosts()
            .into_iter()
            .map(|(host, port)| {
                // Host names are case-insensitive; the URL parser lowers
                // them only for the schemes it knows (http, not mysql).
                let host = host.to_ascii_lowercase();
                let host = if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host
                };
                match port {
                    Some(p) => format!("{host}:{p}"),
                    None => host,
                }
            })
            .collect();
        let path = match url.path() {
            "/" => "",
            p => p,
        };
        let _ = write!(out, "{}://{}{path}", t.scheme(), hosts.join(","));
    }
    // The simulated server's parameters are its behaviour (the server
    // under test, as a real server's version or settings), not the way
    // to reach it: runs against it before and after a change of them are
    // one series, as a server's are before and after an upgrade.
    let simulated = t.scheme() == "sim";
    if let Some(query) = url.query().filter(|q| !q.is_empty() && !simulated) {
        out.push('?');
        out.push_str(&canonical_query(query));
    }
    out
}

fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((name, _)) if is_secret_name(name) => format!("{name}=***"),
            _ => p.to_string(),
        })
        .collect();
    // By name; a repeated parameter keeps its order.
    pairs.sort_by(|a, b| {
        let name = |p: &str| p.split('=').next().unwrap_or_default().to_string();
        name(a).cmp(&name(b))
    });
    pairs.join("&")
}

/// For a target the parser refuses (a hand-edited file): the text with
/// everything up to the authority's last `@` and any query dropped.
fn fallback_target(raw: &str) -> String {
    let raw = raw.split(['?', '#']).next().unwrap_or_default();
    match raw.find("://") {
        Some(end) => {
            let (scheme, rest) = raw.split_at(end + 3);
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let host_start = rest[..authority_end].rfind('@').map_or(0, |at| at + 1);
            format!("{scheme}{}", &rest[host_start..])
        }
        None => raw.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_lose_users_passwords_and_secret_parameters() {
        for (recorded, key) in [
            (
                "mysql://root:***@127.0.0.1:3306/sbtest",
                "mysql://127.0.0.1:3306/sbtest",
            ),
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://:***@H:6379/2", "redis://h:6379/2"),
            (
                "redis+cluster://:***@10.0.0.1:7000,H2:7001,[::1]:7002/?x=1",
                "redis+cluster://10.0.0.1:7000,h2:7001,[::1]:7002?x=1",
            ),
            (
                "postgres://u:***@db:5432/app?sslmode=require&password=s3cret&application_name=lc",
                "postgres://db:5432/app?application_name=lc&password=***&sslmode=require",
            ),
            ("sqlite:results/loadcell.db", "sqlite:results/loadcell.db"),
            // The simulated server's behaviour is not its address.
            ("sim://?latency=fixed:1ms&concurrency=4", "sim://"),
            (
                "http://user:***@Example.COM:80/api",
                "http://example.com/api",
            ),
            // Refused by the parser (a fragment): the fallback still
            // drops the user and password.
            ("mysql://u:p@h:1/db#frag", "mysql://h:1/db"),
        ] {
            assert_eq!(canonical_target(recorded), key, "{recorded}");
        }
    }

    /// The example of the crate documentation.
    #[test]
    fn the_documented_example_holds() {
        let options = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let key = SeriesKey {
            workload: "kv".into(),
            target: canonical_target("redis://127.0.0.1:6379"),
            options: options(&[
                ("threads", "2"),
                ("clients", "25"),
                ("workers", "2"),
                ("time_s", "10"),
                ("warmup_s", "0"),
                ("connection_policy", "persistent"),
            ]),
            workload_options: options(&[
                ("commands", "[]"),
                ("data_size", "32"),
                ("distinct_client_seed", "false"),
                ("key_maximum", "100000"),
                ("key_minimum", "0"),
                ("key_pattern", "R:R"),
                ("key_prefix", "memtier-"),
                ("key_zipf_exp", "1.0"),
                ("pipeline", "16"),
                ("random_data", "false"),
                ("ratio", "1:1"),
                ("verify", "false"),
            ]),
            labels: options(&[("env", "ci")]),
            point: None,
        };
        assert_eq!(
            key.text(),
            "workload=kv target=redis://127.0.0.1:6379 threads=2 clients=25 workers=2 \
             time_s=10 warmup_s=0 connection_policy=persistent option.commands=[] \
             option.data_size=32 option.distinct_client_seed=false option.key_maximum=100000 \
             option.key_minimum=0 option.key_pattern=R:R option.key_prefix=memtier- \
             option.key_zipf_exp=1.0 option.pipeline=16 option.random_data=false \
             option.ratio=1:1 option.verify=false label.env=ci"
        );
        assert_eq!(key.id(), "0ec87888e3f3");
    }

    #[test]
    fn values_are_quoted_only_when_they_must_be() {
        assert_eq!(quoted("abc"), "abc");
        assert_eq!(quoted(""), "\"\"");
        assert_eq!(quoted("a b"), "\"a b\"");
        assert_eq!(quoted("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(number(10.0), "10");
        assert_eq!(number(0.5), "0.5");
        let v = serde_json::json!({"b": [1, {"d": 2, "c": null}], "a": "x"});
        assert_eq!(canonical_value(&v), r#"{"a":"x","b":[1,{"c":null,"d":2}]}"#);
        assert!(is_secret_name("password") && is_secret_name("AuthToken"));
        assert!(is_secret_name("auth") && !is_secret_name("author"));
        assert!(!is_secret_name("key_prefix") && !is_secret_name("pipeline"));
    }
}
