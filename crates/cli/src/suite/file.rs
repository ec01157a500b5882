//! A suite file read, its variables substituted, its targets' secrets
//! read and its steps expanded (`for` matrices, `repeat`) into the command
//! lines they stand for. Every mistake is one line naming the file's line.

use std::collections::BTreeMap;
use std::ops::Range;

use anyhow::{anyhow, bail};
use serde::Deserialize;
use toml::{Spanned, Value};

/// What a step may be.
pub const COMMANDS: &[&str] = &[
    "run", "sweep", "findmax", "prepare", "cleanup", "advise", "plan",
];

/// Options a suite sets itself, and what to write instead.
const SUITE_OWNED: &[(&str, &str)] = &[
    (
        "out",
        "the suite writes each step's file into its directory",
    ),
    (
        "json",
        "the suite writes each step's file into its directory",
    ),
    (
        "target",
        "name a target of [targets] with `target = \"NAME\"`",
    ),
    (
        "label",
        "give labels in the target's or the step's `labels`",
    ),
    ("threshold", "give gates in the step's `gates`"),
    ("shard", "give --shard to `suite run`"),
    ("shard-count", "give --shard to `suite run`"),
    ("start-at", "give --start-at to `suite run`"),
    ("repeat", "give the step's `repeat`"),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    /// Prose for the reader; the suite does not use it.
    #[serde(default, rename = "description")]
    _description: Option<String>,
    /// Read in the first pass (`read`).
    #[serde(default, rename = "vars")]
    _vars: toml::Table,
    #[serde(default)]
    targets: BTreeMap<String, Spanned<RawTarget>>,
    #[serde(default, rename = "step")]
    steps: Vec<Spanned<RawStep>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    url: Spanned<String>,
    #[serde(default)]
    labels: BTreeMap<String, Value>,
    password_env: Option<Spanned<String>>,
    password_file: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    name: Spanned<String>,
    command: Spanned<String>,
    workload: Option<Spanned<String>>,
    target: Option<Spanned<String>>,
    #[serde(default)]
    options: BTreeMap<Spanned<String>, Spanned<Value>>,
    #[serde(default, rename = "for")]
    matrix: BTreeMap<Spanned<String>, Spanned<Vec<Value>>>,
    repeat: Option<Spanned<i64>>,
    #[serde(default)]
    gates: Vec<Spanned<String>>,
    #[serde(default)]
    labels: BTreeMap<String, Value>,
    /// The matrix option whose values make the table's rows.
    rows: Option<Spanned<String>>,
    /// Earlier steps (by name) whose results a plan or advise reads.
    #[serde(default)]
    inputs: Vec<Spanned<String>>,
}

/// A target with its secret in place.
#[derive(Debug, Clone)]
pub struct SuiteTarget {
    /// The URL with any password from password_env or password_file.
    pub url: String,
    pub labels: BTreeMap<String, String>,
}

/// One expanded step: what it runs, and where in the file it came from.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub command: String,
    pub workload: Option<String>,
    pub target: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub matrix: Vec<(String, String)>,
    pub row: Option<String>,
    pub repeat_index: Option<usize>,
    /// A sweep's repeats, which it runs itself (`--repeat`).
    pub sweep_repeat: Option<usize>,
    /// The CLI options, each `--name value` (or a bare switch), with the
    /// line of the file that gave it.
    pub options: Vec<(Vec<String>, usize)>,
    /// Gates as written, each with its line.
    pub gates: Vec<(String, usize)>,
    pub inputs: Vec<(String, usize)>,
    /// The `[[step]]`'s line.
    pub line: usize,
}

/// A suite file as expanded.
#[derive(Debug)]
pub struct Suite {
    pub vars: BTreeMap<String, String>,
    pub targets: BTreeMap<String, SuiteTarget>,
    pub steps: Vec<Step>,
}

/// Where the file is, for messages: `name:LINE`.
pub struct Source<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

impl Source<'_> {
    pub fn line(&self, span: Range<usize>) -> usize {
        self.text[..span.start.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    pub fn at(&self, line: usize) -> String {
        format!("{}:{line}", self.name)
    }

    fn parse<T: serde::de::DeserializeOwned>(&self, text: &str) -> anyhow::Result<T> {
        toml::from_str(text).map_err(|e| {
            let at = match e.span() {
                Some(s) => self.at(text[..s.start].matches('\n').count() + 1),
                None => self.name.to_string(),
            };
            anyhow!("{at}: {}", e.message().trim().replace('\n', " "))
        })
    }
}

/// A TOML value as a command-line word: strings as written, numbers as
/// TOML prints them.
fn word(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        Value::Datetime(d) => Some(d.to_string()),
        Value::Array(_) | Value::Table(_) => None,
    }
}

/// `${name}` replaced by the variable's value, innermost first (so that
/// `${size_${scale}}` picks a variable by another's value).
fn substitute(text: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = text.to_string();
    for _ in 0..32 {
        let Some(open) = out.rfind("${") else {
            return Ok(out);
        };
        let close = out[open..]
            .find('}')
            .map(|c| open + c)
            .ok_or_else(|| format!("`{}` has no closing }}", &out[open..]))?;
        let name = &out[open + 2..close];
        let value = vars.get(name).ok_or_else(|| {
            let known: Vec<&str> = vars.keys().map(String::as_str).collect();
            format!(
                "unknown variable ${{{name}}} (defined: {}; add it to [vars] or give --var {name}=VALUE)",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )
        })?;
        out.replace_range(open..=close, value);
    }
    Err("variables nest more than 32 deep (does one refer to itself?)".into())
}

/// Reads `--var NAME=VALUE`.
pub fn parse_override(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("'{s}' must look like NAME=VALUE")),
    }
}

/// The variables: the file's, then the overrides, each resolved against
/// the others.
fn variables(
    src: &Source,
    raw: &BTreeMap<String, Spanned<Value>>,
    overrides: &[(String, String)],
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut vars = BTreeMap::new();
    for (k, v) in raw {
        let w = word(v.get_ref()).ok_or_else(|| {
            anyhow!(
                "{}: var {k} must be a string or a number",
                src.at(src.line(v.span()))
            )
        })?;
        // The first pass read `${` as `$_{` (see `read`).
        vars.insert(k.clone(), w.replace("$_{", "${"));
    }
    for (k, v) in overrides {
        if !vars.contains_key(k) {
            let known: Vec<&str> = vars.keys().map(String::as_str).collect();
            bail!(
                "--var {k}: the suite has no variable {k} (its [vars]: {})",
                known.join(", ")
            );
        }
        vars.insert(k.clone(), v.clone());
    }
    let resolved = vars
        .iter()
        .map(|(k, v)| {
            substitute(v, &vars)
                .map(|v| (k.clone(), v))
                .map_err(|e| anyhow!("{}: var {k}: {e}", src.name))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(resolved)
}

/// Substitutes the variables in the file's text, line by line so that an
/// error names its line, with each value escaped for where it goes: inside
/// a TOML string.
fn substituted(src: &Source, vars: &BTreeMap<String, String>) -> anyhow::Result<String> {
    let escaped: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.clone(), v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    let mut out = String::with_capacity(src.text.len());
    for (i, line) in src.text.split_inclusive('\n').enumerate() {
        // The [vars] values themselves were resolved already; comments
        // may say `${x}` freely.
        let code = line.split(" #").next().unwrap_or(line);
        if code.contains("${") && !line.trim_start().starts_with('#') {
            out.push_str(
                &substitute(line, &escaped).map_err(|e| anyhow!("{}: {e}", src.at(i + 1)))?,
            );
        } else {
            out.push_str(line);
        }
    }
    Ok(out)
}

/// A password for a URL: percent-encoded, as userinfo must be.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `url` with `password` put in its userinfo.
fn with_password(url: &str, password: &str) -> Result<String, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("a password needs a URL of the form scheme://[USER@]HOST")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, host) = match authority.rsplit_once('@') {
        Some((user, _)) if user.contains(':') => {
            return Err("has a password in its URL: keep it out of the suite file, in password_env or password_file".into())
        }
        Some((user, host)) => (user, host),
        None => ("", authority),
    };
    Ok(format!(
        "{scheme}://{user}:{}@{host}{tail}",
        encode(password)
    ))
}

fn target(src: &Source, name: &str, raw: &Spanned<RawTarget>) -> anyhow::Result<SuiteTarget> {
    let t = raw.get_ref();
    let at = |span: Range<usize>| format!("{}: target {name}", src.at(src.line(span)));
    let secret = match (&t.password_env, &t.password_file) {
        (Some(_), Some(f)) => bail!(
            "{}: give password_env or password_file, not both",
            at(f.span())
        ),
        (Some(env), None) => Some(std::env::var(env.get_ref()).map_err(|_| {
            anyhow!(
                "{}: password_env {} is not set: export it before running the suite",
                at(env.span()),
                env.get_ref()
            )
        })?),
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file.get_ref()).map_err(|e| {
                anyhow!(
                    "{}: password_file {} cannot be read: {e}",
                    at(file.span()),
                    file.get_ref()
                )
            })?;
            Some(text.trim_end_matches(['\n', '\r']).to_string())
        }
        (None, None) => None,
    };
    let url = t.url.get_ref().clone();
    let url = match secret {
        Some(p) => with_password(&url, &p).map_err(|e| anyhow!("{}: url {e}", at(t.url.span())))?,
        None => url,
    };
    let labels = labels(&t.labels, || at(raw.span()))?;
    Ok(SuiteTarget { url, labels })
}

/// A target's or a step's labels as text; `at` names where they were
/// given, for the error.
fn labels(
    raw: &BTreeMap<String, Value>,
    at: impl Fn() -> String,
) -> anyhow::Result<BTreeMap<String, String>> {
    raw.iter()
        .map(|(k, v)| {
            word(v)
                .map(|w| (k.clone(), w))
                .ok_or_else(|| anyhow!("{}: label {k} must be a string or a number", at()))
        })
        .collect()
}

/// An option's name as the CLI spells it.
pub fn flag(name: &str) -> String {
    format!("--{}", name.trim_start_matches('-').replace('_', "-"))
}

/// The command-line words for option `name` with value `v`: a switch for
/// `true`, nothing for `false`, the option once per element of a list.
fn option_words(name: &str, v: &Value) -> Result<Vec<String>, String> {
    let flag = flag(name);
    match v {
        Value::Boolean(true) => Ok(vec![flag]),
        Value::Boolean(false) => Ok(vec![]),
        Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                let w = word(item)
                    .filter(|_| !item.is_array())
                    .ok_or_else(|| format!("option {name}: a list holds strings or numbers"))?;
                out.extend([flag.clone(), w]);
            }
            Ok(out)
        }
        Value::Table(_) => Err(format!(
            "option {name}: a value is a string, a number, true or a list"
        )),
        other => Ok(vec![flag, word(other).expect("a scalar")]),
    }
}

/// Checks an option's name against the ones the suite sets itself.
fn own_option(name: &str) -> Option<&'static str> {
    let n = name.trim_start_matches('-').replace('_', "-");
    SUITE_OWNED
        .iter()
        .find(|(o, _)| *o == n)
        .map(|(_, why)| *why)
}

/// Reads, substitutes and expands a suite file.
pub fn read(name: &str, text: &str, overrides: &[(String, String)]) -> anyhow::Result<Suite> {
    let src = Source { name, text };
    #[derive(Deserialize)]
    struct VarsOnly {
        #[serde(default)]
        vars: BTreeMap<String, Spanned<Value>>,
    }
    // The variables first, from the file as written (a value may hold
    // `${other}`, resolved among them).
    let first: VarsOnly = src.parse(&text.replace("${", "$_{"))?;
    let vars = variables(&src, &first.vars, overrides)?;
    let text = substituted(&src, &vars)?;
    let raw: RawSuite = src.parse(&text)?;
    let src = Source { name, text: &text };
    let mut targets = BTreeMap::new();
    for (n, t) in &raw.targets {
        targets.insert(n.clone(), target(&src, n, t)?);
    }
    if raw.steps.is_empty() {
        bail!("{name}: the suite has no [[step]]");
    }
    let mut steps = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for raw_step in &raw.steps {
        let expanded = expand(&src, raw_step, &targets, &names)?;
        names.push(raw_step.get_ref().name.get_ref().clone());
        steps.extend(expanded);
    }
    Ok(Suite {
        vars,
        targets,
        steps,
    })
}

fn expand(
    src: &Source,
    raw: &Spanned<RawStep>,
    targets: &BTreeMap<String, SuiteTarget>,
    earlier: &[String],
) -> anyhow::Result<Vec<Step>> {
    let s = raw.get_ref();
    let name = s.name.get_ref().clone();
    let line = src.line(raw.span());
    let at = |span: Range<usize>| format!("{}: step {name}", src.at(src.line(span)));
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        bail!(
            "{}: name '{name}' must be letters, digits, '-', '_' or '.'",
            at(s.name.span())
        );
    }
    if earlier.contains(&name) {
        bail!(
            "{}: another step is named {name} already",
            at(s.name.span())
        );
    }
    let command = s.command.get_ref().clone();
    if !COMMANDS.contains(&command.as_str()) {
        bail!(
            "{}: command '{command}' is not one of {}",
            at(s.command.span()),
            COMMANDS.join(", ")
        );
    }
    let takes_workload = !matches!(command.as_str(), "advise" | "plan");
    match (&s.workload, takes_workload) {
        (None, true) if !s.matrix.keys().any(|k| k.get_ref() == "workload") => bail!(
            "{}: a {command} step needs a workload (`workload = \"NAME\"`, or `for = {{ workload = [...] }}`)",
            at(raw.span())
        ),
        (Some(w), false) => bail!("{}: {command} takes no workload", at(w.span())),
        _ => {}
    }
    for (k, v) in &s.options {
        if let Some(why) = own_option(k.get_ref()) {
            bail!("{}: option {}: {why}", at(k.span()), k.get_ref());
        }
        option_words(k.get_ref(), v.get_ref()).map_err(|e| anyhow!("{}: {e}", at(v.span())))?;
    }
    let check_target = |t: &Spanned<String>| -> anyhow::Result<()> {
        if targets.contains_key(t.get_ref()) {
            return Ok(());
        }
        let known: Vec<&str> = targets.keys().map(String::as_str).collect();
        bail!(
            "{}: no target named {} (the suite's [targets]: {})",
            at(t.span()),
            t.get_ref(),
            if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            }
        )
    };
    if let Some(t) = &s.target {
        check_target(t)?;
    }
    let repeat = match &s.repeat {
        Some(r) if *r.get_ref() < 1 || *r.get_ref() > 1000 => {
            bail!("{}: repeat must be 1 to 1000", at(r.span()))
        }
        Some(r) => *r.get_ref() as usize,
        None => 1,
    };
    for i in &s.inputs {
        if !earlier.contains(i.get_ref()) {
            bail!(
                "{}: inputs names {}, which is not an earlier step",
                at(i.span()),
                i.get_ref()
            );
        }
    }
    if !s.inputs.is_empty() && !matches!(command.as_str(), "plan" | "advise") {
        bail!("{}: inputs are for plan and advise steps", at(raw.span()));
    }
    // The matrix in the file's order (the map sorts its keys).
    let mut matrix: Vec<(&Spanned<String>, &Spanned<Vec<Value>>)> = s.matrix.iter().collect();
    matrix.sort_by_key(|(k, _)| k.span().start);
    let mut axes: Vec<(String, Vec<Value>)> = Vec::new();
    for (k, values) in &matrix {
        let key = k.get_ref().replace('_', "-");
        if values.get_ref().is_empty() {
            bail!("{}: for {key} lists no values", at(values.span()));
        }
        if key == "target" {
            for v in values.get_ref() {
                let t = word(v).unwrap_or_default();
                check_target(&Spanned::new(values.span(), t))?;
            }
            if s.target.is_some() {
                bail!("{}: give target or for.target, not both", at(k.span()));
            }
        } else if key == "workload" {
            if s.workload.is_some() {
                bail!("{}: give workload or for.workload, not both", at(k.span()));
            }
        } else if let Some(why) = own_option(&key) {
            bail!("{}: for {key}: {why}", at(k.span()));
        } else if s
            .options
            .keys()
            .any(|o| o.get_ref().replace('_', "-") == key)
        {
            bail!(
                "{}: {key} is in both for and options: give it once",
                at(k.span())
            );
        }
        for v in values.get_ref() {
            if word(v).is_none() {
                bail!(
                    "{}: for {key}: each value is a string or a number",
                    at(values.span())
                );
            }
        }
        axes.push((key, values.get_ref().clone()));
    }
    let row = match &s.rows {
        Some(r) => {
            let r_ = r.get_ref().replace('_', "-");
            if !axes.iter().any(|(k, _)| *k == r_) {
                bail!("{}: rows names {r_}, which is not in for", at(r.span()));
            }
            Some(r_)
        }
        None if command == "sweep" => None,
        None => axes
            .iter()
            .rev()
            .map(|(k, _)| k.clone())
            .find(|k| k != "target" && k != "workload"),
    };
    let step_labels = labels(&s.labels, || at(raw.span()))?;
    let option_line = |k: &Spanned<String>| src.line(k.span());
    let mut out = Vec::new();
    for combo in combinations(&axes) {
        let mut target = s.target.as_ref().map(|t| t.get_ref().clone());
        let mut workload = s.workload.as_ref().map(|w| w.get_ref().clone());
        let mut options: Vec<(Vec<String>, usize)> = s
            .options
            .iter()
            .map(|(k, v)| {
                (
                    option_words(k.get_ref(), v.get_ref()).expect("checked above"),
                    option_line(k),
                )
            })
            .collect();
        options.sort_by_key(|(_, line)| *line);
        let mut values = Vec::new();
        for (i, (key, value)) in combo.iter().enumerate() {
            let w = word(value).expect("checked above");
            let line = option_line(matrix[i].0);
            match key.as_str() {
                "target" => target = Some(w.clone()),
                "workload" => workload = Some(w.clone()),
                _ => options.push((
                    option_words(key, value)
                        .map_err(|e| anyhow!("{}: {e}", at(matrix[i].0.span())))?,
                    line,
                )),
            }
            values.push((key.clone(), w));
        }
        let mut labels = target
            .as_ref()
            .map(|t| targets[t].labels.clone())
            .unwrap_or_default();
        labels.extend(step_labels.clone());
        let repeats: Vec<Option<usize>> = if repeat > 1 && command != "sweep" {
            (1..=repeat).map(Some).collect()
        } else {
            vec![None]
        };
        for repeat_index in repeats {
            out.push(Step {
                name: name.clone(),
                command: command.clone(),
                workload: workload.clone(),
                target: target.clone(),
                labels: labels.clone(),
                matrix: values.clone(),
                row: row.clone(),
                repeat_index,
                sweep_repeat: (command == "sweep" && repeat > 1).then_some(repeat),
                options: options.clone(),
                gates: s
                    .gates
                    .iter()
                    .map(|g| (g.get_ref().clone(), src.line(g.span())))
                    .collect(),
                inputs: s
                    .inputs
                    .iter()
                    .map(|i| (i.get_ref().clone(), src.line(i.span())))
                    .collect(),
                line,
            });
        }
    }
    Ok(out)
}

/// Every combination of the axes' values, the last axis varying fastest.
fn combinations(axes: &[(String, Vec<Value>)]) -> Vec<Vec<(String, Value)>> {
    let mut out: Vec<Vec<(String, Value)>> = vec![Vec::new()];
    for (key, values) in axes {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push((key.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    out
}

impl Step {
    /// The step's id: its place, name, matrix values and repeat, safe as
    /// a file name.
    pub fn id(&self, index: usize) -> String {
        let mut id = format!("{:02}-{}", index + 1, self.name);
        for (_, v) in &self.matrix {
            id.push('-');
            id.push_str(v);
        }
        if let Some(r) = self.repeat_index {
            id.push_str(&format!("-r{r}"));
        }
        id.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// The line of the option a CLI error names (`'--thread'`), else the
    /// step's own.
    pub fn line_of(&self, error: &str) -> usize {
        self.options
            .iter()
            .find(|(words, _)| {
                words.first().is_some_and(|f| {
                    error.contains(&format!("'{f}'")) || error.contains(&format!("{f} "))
                })
            })
            .map_or(self.line, |(_, line)| *line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[vars]
redis = "redis://127.0.0.1:6379"

[targets.cache]
url = "${redis}"
labels = { instance = "local" }

[[step]]
name = "kv-threads"
command = "sweep"            # run | sweep | findmax | prepare | cleanup | advise | plan
workload = "kv"
target = "cache"
options = { threads = "1,2", clients = 4, time = "1s", ratio = "1:1" }
repeat = 2
gates = ["p99 <= 50ms"]
"#;

    #[test]
    fn the_minimal_file_expands_to_one_sweep_with_its_repeats() {
        let s = read("s.toml", MINIMAL, &[]).unwrap();
        assert_eq!(s.steps.len(), 1);
        let step = &s.steps[0];
        assert_eq!(step.sweep_repeat, Some(2));
        assert_eq!(s.targets["cache"].url, "redis://127.0.0.1:6379");
        assert_eq!(step.labels["instance"], "local");
        let words: Vec<String> = step.options.iter().flat_map(|(w, _)| w.clone()).collect();
        assert_eq!(
            words,
            [
                "--clients",
                "4",
                "--ratio",
                "1:1",
                "--threads",
                "1,2",
                "--time",
                "1s"
            ]
        );
        assert_eq!(step.gates, [("p99 <= 50ms".to_string(), 16)]);
        let s = read(
            "s.toml",
            MINIMAL,
            &[("redis".into(), "redis://10.0.0.1".into())],
        )
        .unwrap();
        assert_eq!(s.targets["cache"].url, "redis://10.0.0.1");
    }

    #[test]
    fn matrices_expand_in_file_order_with_repeats_and_rows() {
        let text = r#"
[targets.a]
url = "redis://a"
[targets.b]
url = "redis://b"
[[step]]
name = "s"
command = "run"
workload = "kv"
for = { target = ["a", "b"], threads = [1, 2] }
repeat = 2
"#;
        let s = read("s.toml", text, &[]).unwrap();
        let ids: Vec<String> = s.steps.iter().enumerate().map(|(i, st)| st.id(i)).collect();
        assert_eq!(ids[0], "01-s-a-1-r1");
        assert_eq!(ids[1], "02-s-a-1-r2");
        assert_eq!(ids[2], "03-s-a-2-r1");
        assert_eq!(ids[7], "08-s-b-2-r2");
        assert_eq!(s.steps[7].row.as_deref(), Some("threads"));
        assert_eq!(s.steps[7].target.as_deref(), Some("b"));
    }

    #[test]
    fn variables_nest_and_a_missing_one_names_its_line() {
        let text = "[vars]\nscale = \"small\"\nsize_small = \"10\"\nsize_large = \"1000\"\nsize = \"${size_${scale}}\"\n[[step]]\nname = \"x\"\ncommand = \"run\"\nworkload = \"kv\"\noptions = { record-count = \"${size}\", time = \"${nope}\" }\n";
        let e = read("s.toml", text, &[]).unwrap_err().to_string();
        assert!(e.starts_with("s.toml:10: unknown variable ${nope}"), "{e}");
        let text = text.replace(", time = \"${nope}\"", "");
        let s = read("s.toml", &text, &[("scale".into(), "large".into())]).unwrap();
        assert_eq!(s.steps[0].options[0].0, ["--record-count", "1000"]);
    }

    #[test]
    fn secrets_come_from_the_environment_and_never_from_the_file() {
        let text = "[targets.db]\nurl = \"mysql://root@127.0.0.1/x\"\npassword_env = \"LOADCELL_SUITE_TEST_PW_UNSET\"\n[[step]]\nname = \"x\"\ncommand = \"run\"\nworkload = \"oltp_read_write\"\ntarget = \"db\"\n";
        let e = read("s.toml", text, &[]).unwrap_err().to_string();
        assert_eq!(
            e,
            "s.toml:3: target db: password_env LOADCELL_SUITE_TEST_PW_UNSET is not set: export it before running the suite"
        );
        assert_eq!(
            with_password("mysql://root@h:3306/db?x=1", "p@ss word").unwrap(),
            "mysql://root:p%40ss%20word@h:3306/db?x=1"
        );
        assert_eq!(with_password("redis://h", "s").unwrap(), "redis://:s@h");
        assert!(with_password("mysql://root:x@h", "s").is_err());
    }

    #[test]
    fn mistakes_name_their_line() {
        let bad = MINIMAL.replace("command = \"sweep\"", "command = \"swep\"");
        let e = read("s.toml", &bad, &[]).unwrap_err().to_string();
        assert!(
            e.starts_with("s.toml:11: step kv-threads: command 'swep'"),
            "{e}"
        );
        let bad = MINIMAL.replace("target = \"cache\"", "target = \"cach\"");
        let e = read("s.toml", &bad, &[]).unwrap_err().to_string();
        assert!(
            e.starts_with("s.toml:13: step kv-threads: no target named cach"),
            "{e}"
        );
        let bad = MINIMAL.replace("clients = 4", "out = \"x\"");
        let e = read("s.toml", &bad, &[]).unwrap_err().to_string();
        assert!(
            e.starts_with("s.toml:14: step kv-threads: option out"),
            "{e}"
        );
        let bad = MINIMAL.replace("repeat = 2", "repeet = 2");
        let e = read("s.toml", &bad, &[]).unwrap_err().to_string();
        assert!(e.starts_with("s.toml:15: unknown field `repeet`"), "{e}");
    }
}
