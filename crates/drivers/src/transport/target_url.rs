//! One path from a target URL to a driver's settings, so that a driver's
//! parsing is a short list of its own parameters:
//!
//! - [`Query`]: the URL's parameters. Unknown names are refused first, all
//!   of them in one message with the accepted ones; then the driver takes
//!   each of its own ([`Query::take`], [`Query::take_parsed`],
//!   [`Query::take_flag`], ...), every value given for a name checked.
//! - [`UrlParts`]: what comes before the `?` (hosts with their ports or the
//!   driver's default, user, password, path), decoded once.
//!
//! Neither shows a password or a parameter's value in `Debug`: a value may
//! hold a URL with a password (`query=http://u:pw@h/db`).

use std::fmt;

use loadcell_core::Target;

use super::url_text::{self, percent_decode};

// ---------------------------------------------------------------------------
// Query

/// A target URL's parameters, in the order given, less those taken.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl fmt::Debug for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.pairs.iter().map(|(k, _)| k))
            .finish()
    }
}

impl Query {
    /// The URL's parameters, each named in `accepted`; any other name is an
    /// error that names every unknown one (once) and the accepted ones:
    /// "unknown parameters 'a', 'b'; accepted: x, y".
    pub(crate) fn parse(url: &url::Url, accepted: &[&str]) -> Result<Query, String> {
        let query = Query::any(url);
        let mut unknown: Vec<String> = Vec::new();
        for (key, _) in &query.pairs {
            let quoted = format!("'{key}'");
            if !accepted.contains(&key.as_str()) && !unknown.contains(&quoted) {
                unknown.push(quoted);
            }
        }
        if unknown.is_empty() {
            return Ok(query);
        }
        let s = if unknown.len() > 1 { "s" } else { "" };
        let names = unknown.join(", ");
        Err(if accepted.is_empty() {
            format!("unknown parameter{s} {names}: this target takes no parameters")
        } else {
            format!(
                "unknown parameter{s} {names}; accepted: {}",
                accepted.join(", ")
            )
        })
    }

    /// Every parameter, whatever its name: for a driver that hands those
    /// it does not take to a library that checks them.
    pub(crate) fn any(url: &url::Url) -> Query {
        Query {
            pairs: url
                .query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        }
    }

    /// Refuses a name given more than once.
    pub(crate) fn refuse_repeats(&self) -> Result<(), String> {
        for (i, (key, _)) in self.pairs.iter().enumerate() {
            if self.pairs[..i].iter().any(|(k, _)| k == key) {
                return Err(format!("parameter '{key}' is given twice"));
            }
        }
        Ok(())
    }

    /// Every value given for `name`, in order, taken out.
    pub(crate) fn take_all(&mut self, name: &str) -> Vec<String> {
        let mut values = Vec::new();
        self.pairs.retain_mut(|(k, v)| {
            let taken = k == name;
            if taken {
                values.push(std::mem::take(v));
            }
            !taken
        });
        values
    }

    /// The value of `name`, the last if it is given more than once.
    pub(crate) fn take(&mut self, name: &str) -> Option<String> {
        self.take_all(name).pop()
    }

    /// The value of `name` read by `parse`, whose error is the message;
    /// every value given is read, the last one kept.
    pub(crate) fn take_parsed<T>(
        &mut self,
        name: &str,
        mut parse: impl FnMut(&str) -> Result<T, String>,
    ) -> Result<Option<T>, String> {
        let mut last = None;
        for value in self.take_all(name) {
            last = Some(parse(&value)?);
        }
        Ok(last)
    }

    /// A value that may not be empty: "`name` needs `needs`" if it is
    /// (e.g. `needs`: "a path to a PEM file").
    pub(crate) fn take_nonempty(
        &mut self,
        name: &str,
        needs: &str,
    ) -> Result<Option<String>, String> {
        self.take_parsed(name, |v| {
            if v.is_empty() {
                Err(format!("{name} needs {needs}"))
            } else {
                Ok(v.to_string())
            }
        })
    }

    /// A flag: `true`, `1` or no value; `false` or `0`.
    pub(crate) fn take_flag(&mut self, name: &str) -> Result<Option<bool>, String> {
        self.take_parsed(name, |v| match v {
            "true" | "1" | "" => Ok(true),
            "false" | "0" => Ok(false),
            other => Err(format!("{name} takes true or false, got '{other}'")),
        })
    }

    /// One of `choices`, as written there.
    pub(crate) fn take_choice(
        &mut self,
        name: &str,
        choices: &[&'static str],
    ) -> Result<Option<&'static str>, String> {
        self.take_parsed(name, |v| one_of(name, v, choices))
    }

    /// What is left, in the order given.
    pub(crate) fn into_pairs(self) -> Vec<(String, String)> {
        self.pairs
    }
}

/// `value` if it is one of `choices`; else an error that lists them.
pub(crate) fn one_of(
    name: &str,
    value: &str,
    choices: &[&'static str],
) -> Result<&'static str, String> {
    choices
        .iter()
        .find(|c| **c == value)
        .copied()
        .ok_or_else(|| format!("{name} takes one of {}, got '{value}'", choices.join(", ")))
}

// ---------------------------------------------------------------------------
// UrlParts

/// What a target URL names before its `?`, decoded. `Debug` never shows
/// the password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct UrlParts {
    scheme: String,
    default_port: u16,
    /// Every host (several for a comma-separated list) with its port or
    /// the default one; empty when the URL names none (`mysql://`).
    pub hosts: Vec<(String, u16)>,
    /// `None` when the URL has none (or an empty one).
    pub user: Option<String>,
    pub password: Option<String>,
    /// The path as written (still %-escaped): empty or from its `/`.
    pub path: String,
}

impl fmt::Debug for UrlParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UrlParts")
            .field("hosts", &self.hosts)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("path", &self.path)
            .finish()
    }
}

impl UrlParts {
    /// The parts of `target`, a host without a port given `default_port`.
    /// Refuses port 0 and a URL without `//` (`mysql:db`).
    pub(crate) fn parse(target: &Target, default_port: u16) -> Result<UrlParts, String> {
        let url = target.url();
        let scheme = target.scheme();
        if url.cannot_be_a_base() {
            return Err(format!(
                "expected {scheme}://host[:port]…, not {scheme}:{}",
                url.path()
            ));
        }
        let hosts = url_text::hosts(target, default_port)?;
        if hosts.iter().any(|&(_, port)| port == 0) {
            return Err("port 0 is not a port to connect to".to_string());
        }
        let user = Some(percent_decode(url.username(), "user")?).filter(|u| !u.is_empty());
        let password = url
            .password()
            .map(|p| percent_decode(p, "password"))
            .transpose()?;
        Ok(UrlParts {
            scheme: scheme.to_string(),
            default_port,
            hosts,
            user,
            password,
            path: url.path().to_string(),
        })
    }

    /// The hosts, or `default_host` on the default port if the URL names
    /// none.
    pub(crate) fn hosts_or(&self, default_host: &str) -> Vec<(String, u16)> {
        if self.hosts.is_empty() {
            vec![(default_host.to_string(), self.default_port)]
        } else {
            self.hosts.clone()
        }
    }

    /// The one host, `default_host` if the URL names none; a list is an
    /// error.
    pub(crate) fn one_host(&self, default_host: &str) -> Result<(String, u16), String> {
        match &*self.hosts_or(default_host) {
            [one] => Ok(one.clone()),
            _ => Err(format!("{}:// takes one host", self.scheme)),
        }
    }

    /// The path as one decoded segment, named `what` in messages (a
    /// database, a keyspace); `None` for no path or `/`.
    pub(crate) fn segment(&self, what: &str) -> Result<Option<String>, String> {
        segment(&self.path, what)
    }

    /// Refuses a path: "`why`: remove the path '/x'".
    pub(crate) fn no_path(&self, why: &str) -> Result<(), String> {
        match self.path.as_str() {
            "" | "/" => Ok(()),
            path => Err(format!("{why}: remove the path '{path}'")),
        }
    }

    /// Refuses a user or password: "`why`: remove the user and password"
    /// (neither shown).
    pub(crate) fn no_credentials(&self, why: &str) -> Result<(), String> {
        if self.user.is_some() || self.password.is_some() {
            return Err(format!("{why}: remove the user and password"));
        }
        Ok(())
    }
}

/// `path` (`/name`, still %-escaped) as one decoded segment named `what`;
/// `None` for `""` or `/`.
pub(crate) fn segment(path: &str, what: &str) -> Result<Option<String>, String> {
    let name = path.strip_prefix('/').unwrap_or(path);
    if name.contains('/') {
        return Err(format!("the path must be a single {what}, got '{path}'"));
    }
    Ok(Some(percent_decode(name, what)?).filter(|n| !n.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(raw: &str) -> url::Url {
        url::Url::parse(raw).unwrap()
    }

    fn parts(raw: &str) -> Result<UrlParts, String> {
        UrlParts::parse(&Target::parse(raw).unwrap(), 7)
    }

    #[test]
    fn unknown_parameters_are_all_named_before_any_is_read() {
        let accepted = &["a", "b"];
        assert_eq!(
            Query::parse(&url("x://h?z=1&a=bad&y=2&z=3"), accepted).unwrap_err(),
            "unknown parameters 'z', 'y'; accepted: a, b"
        );
        assert_eq!(
            Query::parse(&url("x://h?y=secret"), accepted).unwrap_err(),
            "unknown parameter 'y'; accepted: a, b"
        );
        assert_eq!(
            Query::parse(&url("x://h?y=1"), &[]).unwrap_err(),
            "unknown parameter 'y': this target takes no parameters"
        );
        let q = Query::parse(&url("x://h?b=pw&a=1"), accepted).unwrap();
        assert_eq!(format!("{q:?}"), r#"["b", "a"]"#, "names, no values");
    }

    #[test]
    fn values_are_taken_checked_and_the_last_kept() {
        let mut q = Query::any(&url("x://h?n=1&f&n=2&e=&c=wal&k.x=3&n=3"));
        assert_eq!(
            q.take_parsed("n", |v| v.parse::<u8>().map_err(|e| e.to_string())),
            Ok(Some(3))
        );
        assert_eq!(q.take_flag("f"), Ok(Some(true)));
        assert_eq!(q.take_flag("f"), Ok(None), "taken");
        assert_eq!(
            q.take_nonempty("e", "a file"),
            Err("e needs a file".to_string())
        );
        assert_eq!(q.take_choice("c", &["wal", "delete"]), Ok(Some("wal")));
        assert_eq!(q.into_pairs(), [("k.x".to_string(), "3".to_string())]);
        let mut q = Query::any(&url("x://h?n=x&n=1"));
        assert!(q
            .take_parsed("n", |v| v.parse::<u8>().map_err(|_| v.to_string()))
            .is_err());
        assert_eq!(
            Query::any(&url("x://h?f=yes")).take_flag("f"),
            Err("f takes true or false, got 'yes'".to_string())
        );
        assert_eq!(
            one_of("c", "off", &["on"]),
            Err("c takes one of on, got 'off'".to_string())
        );
        assert_eq!(
            Query::any(&url("x://h?a=1&b&a=2")).refuse_repeats(),
            Err("parameter 'a' is given twice".to_string())
        );
    }

    #[test]
    fn parts_are_decoded_with_the_defaults() {
        let p = parts("x://u%40x:p%2Fw@a:5,[::1]/d%20b").unwrap();
        assert_eq!(p.hosts, [("a".to_string(), 5), ("::1".to_string(), 7)]);
        assert_eq!(p.user.as_deref(), Some("u@x"));
        assert_eq!(p.password.as_deref(), Some("p/w"));
        assert_eq!(p.segment("database"), Ok(Some("d b".to_string())));
        assert!(!format!("{p:?}").contains("p/w"));
        assert_eq!(
            p.one_host("127.0.0.1"),
            Err("x:// takes one host".to_string())
        );
        let p = parts("x://").unwrap();
        assert_eq!(p.one_host("127.0.0.1"), Ok(("127.0.0.1".to_string(), 7)));
        assert_eq!(p.segment("db"), Ok(None));
        assert_eq!((p.user, p.password), (None, None));
        assert_eq!(
            parts("x://h/a/b").unwrap().segment("database"),
            Err("the path must be a single database, got '/a/b'".to_string())
        );
        assert_eq!(
            parts("x://h/a").unwrap().no_path("no databases"),
            Err("no databases: remove the path '/a'".to_string())
        );
        assert_eq!(
            parts("x://u:pw@h").unwrap().no_credentials("no login"),
            Err("no login: remove the user and password".to_string())
        );
        assert_eq!(
            parts("x://h:0").unwrap_err(),
            "port 0 is not a port to connect to"
        );
        assert!(parts("x:db").unwrap_err().starts_with("expected x://host"));
    }
}
