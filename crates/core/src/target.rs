//! Targets are URLs; the scheme picks the driver. Display forms never
//! include passwords.

use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("malformed target URL '{shown}': {reason}")]
    Malformed { shown: String, reason: String },
}

/// A parsed target. `Display` shows it with the password redacted.
///
/// A comma-separated host list (`redis+cluster://h1:7000,h2:7001/`), which
/// the `url` crate cannot parse, is accepted too: [`Target::hosts`] gives
/// every entry and [`Target::url`] is the URL with the first host only.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    url: url::Url,
    /// For a host list: the input as given (for display, redacted) and
    /// each `(host, port)` entry.
    multi: Option<(String, Vec<HostPort>)>,
}

/// A host and its port, if the URL gives one.
pub type HostPort = (String, Option<u16>);

impl Target {
    /// Parses `scheme://...` or `scheme:path` (as in `sqlite:bench.db`).
    pub fn parse(raw: &str) -> Result<Target, TargetError> {
        let malformed = |reason: String| TargetError::Malformed {
            shown: redact_raw(raw),
            reason,
        };
        if !raw.contains(':') {
            return Err(malformed(
                "expected scheme://host:port/... or sqlite:PATH".to_string(),
            ));
        }
        if let Some((first, hosts)) = split_host_list(raw).map_err(&malformed)? {
            let url = url::Url::parse(&first).map_err(|e| malformed(e.to_string()))?;
            return Ok(Target {
                url,
                multi: Some((raw.to_string(), hosts)),
            });
        }
        let url = url::Url::parse(raw).map_err(|e| malformed(e.to_string()))?;
        // An `@` past the authority of a URL without credentials is a
        // password whose `/`, `?` or `#` cut the authority short: the URL
        // "parses" with the wrong host, and would be shown unredacted.
        let after_scheme = raw.split_once("://").map_or("", |(_, rest)| rest);
        if url.username().is_empty() && url.password().is_none() && after_scheme.contains('@') {
            return Err(malformed(
                "an '@' after the host: percent-encode '/', '?', '#' and '@' in the user \
                 and password (%2F, %3F, %23, %40)"
                    .to_string(),
            ));
        }
        // `scheme://` alone (options aside) means the driver's default host,
        // or none at all for `sim://`; a port, credentials or a database
        // without a host is a typo.
        let names_authority = url.port().is_some()
            || !url.username().is_empty()
            || url.password().is_some()
            || !matches!(url.path(), "" | "/");
        if !url.cannot_be_a_base()
            && url.has_authority()
            && url.host_str().unwrap_or("").is_empty()
            && names_authority
        {
            return Err(malformed("the host is missing".to_string()));
        }
        Ok(Target { url, multi: None })
    }

    pub fn scheme(&self) -> &str {
        self.url.scheme()
    }

    /// The full URL, secrets included: only for handing to a driver. For a
    /// host list, the URL with its first host (see [`Target::hosts`]).
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    /// Every `(host, port)` of the authority: several for a comma-separated
    /// host list, else the URL's one host (none for `scheme:path` forms).
    /// IPv6 hosts are given without brackets.
    pub fn hosts(&self) -> Vec<HostPort> {
        match &self.multi {
            Some((_, hosts)) => hosts.clone(),
            None => host_of(&self.url).into_iter().collect(),
        }
    }

    /// Whether the URL names more than one host.
    pub fn is_host_list(&self) -> bool {
        self.multi.is_some()
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        if let Some((raw, _)) = &self.multi {
            return redact_raw(raw);
        }
        let mut shown = self.url.clone();
        if shown.password().is_some() {
            let _ = shown.set_password(Some("***"));
        }
        shown.to_string()
    }
}

fn host_of(url: &url::Url) -> Option<HostPort> {
    let host = match url.host()? {
        url::Host::Domain(d) => d.to_string(),
        url::Host::Ipv4(a) => a.to_string(),
        url::Host::Ipv6(a) => a.to_string(),
    };
    (!host.is_empty()).then_some((host, url.port()))
}

/// For `scheme://[userinfo@]h1[:p1],h2[:p2]...[/path][?query]`: the same URL
/// with only the first host, and every host. `None` without a comma in the
/// host part.
fn split_host_list(raw: &str) -> Result<Option<(String, Vec<HostPort>)>, String> {
    let Some(scheme_end) = raw.find("://") else {
        return Ok(None);
    };
    let rest = &raw[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let host_start = authority.rfind('@').map_or(0, |at| at + 1);
    let host_list = &authority[host_start..];
    if !host_list.contains(',') {
        return Ok(None);
    }
    let scheme = &raw[..scheme_end];
    let mut hosts = Vec::new();
    for entry in host_list.split(',') {
        if entry.is_empty() {
            return Err("empty entry in the host list".to_string());
        }
        let one = url::Url::parse(&format!("{scheme}://{entry}"))
            .map_err(|e| format!("bad host '{entry}' in the host list: {e}"))?;
        let host = host_of(&one).ok_or_else(|| format!("bad host '{entry}' in the host list"))?;
        hosts.push(host);
    }
    let first = host_list.split(',').next().unwrap_or_default();
    let first_url = format!(
        "{}{}{}",
        &raw[..scheme_end + 3 + host_start],
        first,
        &rest[authority_end..]
    );
    Ok(Some((first_url, hosts)))
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({})", self.redacted())
    }
}

/// Where the `user:password` part of the text after `scheme://` ends: at
/// the authority's last `@`, or, when the authority has none, at the last
/// `@` anywhere, for a password whose unencoded `/`, `?` or `#` ended the
/// authority early (`mysql://u:12/34@h/db`).
fn userinfo_end(after_scheme: &str) -> Option<usize> {
    let authority_end = after_scheme
        .find(['/', '?', '#'])
        .unwrap_or(after_scheme.len());
    after_scheme[..authority_end]
        .rfind('@')
        .or_else(|| after_scheme.rfind('@'))
}

/// `after_scheme` (what follows `scheme://`, or a bare `user:pw@host`) with
/// the password of its `user:password@` replaced by `***`. Shared by the
/// redactors.
pub fn redact_authority(after_scheme: &str) -> String {
    let userinfo =
        userinfo_end(after_scheme).and_then(|at| Some((after_scheme[..at].find(':')?, at)));
    match userinfo {
        Some((colon, at)) => format!("{}:***{}", &after_scheme[..colon], &after_scheme[at..]),
        None => after_scheme.to_string(),
    }
}

/// Redacts `user:password@` in any string that looks like a URL, for
/// echoing input that failed to parse.
pub fn redact_raw(raw: &str) -> String {
    match raw.find("://") {
        Some(scheme_end) => {
            let (scheme, rest) = raw.split_at(scheme_end + 3);
            format!("{scheme}{}", redact_authority(rest))
        }
        None => raw.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_authority_means_defaults_but_a_lone_port_is_a_typo() {
        for ok in ["sim://", "sim://?latency=fixed:1ms", "redis://"] {
            assert!(Target::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["mysql://:3306/db", "redis://user:pw@:6379", "mysql:///db"] {
            let e = Target::parse(bad).unwrap_err().to_string();
            assert!(e.contains("host") && !e.contains("pw@"), "{bad}: {e}");
        }
    }

    #[test]
    fn passwords_with_reserved_characters_are_refused_and_never_shown() {
        for (raw, secret) in [
            ("mysql://root:12/34@h/db", "12/34"),
            ("redis://:p#ss@h:6379", "p#ss"),
            ("mysql://u:12?x@h/db", "12?x"),
            ("postgres://u:a/b@h:5432/db?sslmode=disable", "a/b"),
        ] {
            let e = Target::parse(raw).unwrap_err().to_string();
            assert!(!e.contains(secret), "{raw}: {e}");
            assert!(e.contains(":***@h"), "{raw}: {e}");
        }
        let e = Target::parse("mysql://root:12/34@h/db")
            .unwrap_err()
            .to_string();
        assert!(e.contains("percent-encode"), "{e}");
        // Encoded, the same password is fine; an '@' past a proper
        // user:password@host is not mistaken for one.
        let t = Target::parse("mysql://root:12%2F34@h/db").unwrap();
        assert_eq!(t.redacted(), "mysql://root:***@h/db");
        assert!(Target::parse("mysql://u:p@h/db?x=a@b").is_ok());
        assert_eq!(
            redact_raw("mysql://u:p@h/db?x=a@b"),
            "mysql://u:***@h/db?x=a@b"
        );
    }

    #[test]
    fn redacts_password() {
        let t = Target::parse("mysql://root:s3cret@127.0.0.1:3306/db").unwrap();
        assert_eq!(t.redacted(), "mysql://root:***@127.0.0.1:3306/db");
        assert!(!format!("{t} {t:?}").contains("s3cret"));
        assert_eq!(t.scheme(), "mysql");
    }

    #[test]
    fn sqlite_path_form() {
        let t = Target::parse("sqlite:results/x.db").unwrap();
        assert_eq!(t.scheme(), "sqlite");
        assert_eq!(t.url().path(), "results/x.db");
    }

    #[test]
    fn malformed_urls_are_rejected_without_leaking() {
        let err = Target::parse("mysql://u:pw@[bad/db").unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains("malformed target URL"), "{shown}");
        assert!(!shown.contains("pw@"), "{shown}");
        assert!(Target::parse("localhost").is_err());
        assert!(Target::parse("mysql:///db").is_err());
    }

    #[test]
    fn host_lists() {
        let t = Target::parse("redis+cluster://:pw@10.0.0.1:7000,h2:7001,[::1]:7002/?x=1").unwrap();
        assert_eq!(t.scheme(), "redis+cluster");
        assert!(t.is_host_list());
        assert_eq!(
            t.hosts(),
            vec![
                ("10.0.0.1".to_string(), Some(7000)),
                ("h2".to_string(), Some(7001)),
                ("::1".to_string(), Some(7002)),
            ]
        );
        assert_eq!(t.url().host_str(), Some("10.0.0.1"));
        assert_eq!(t.url().port(), Some(7000));
        assert_eq!(t.url().password(), Some("pw"));
        assert_eq!(t.url().query(), Some("x=1"));
        assert_eq!(
            t.redacted(),
            "redis+cluster://:***@10.0.0.1:7000,h2:7001,[::1]:7002/?x=1"
        );
        assert!(!format!("{t} {t:?}").contains("pw"));

        let t = Target::parse("redis+cluster://a:1,b").unwrap();
        assert_eq!(
            t.hosts(),
            vec![("a".to_string(), Some(1)), ("b".to_string(), None)]
        );
        assert_eq!(t.redacted(), "redis+cluster://a:1,b");

        // One host: hosts() is that host; no list.
        let t = Target::parse("redis://u:p@h:6380/2").unwrap();
        assert!(!t.is_host_list());
        assert_eq!(t.hosts(), vec![("h".to_string(), Some(6380))]);
        assert!(Target::parse("sqlite:x.db").unwrap().hosts().is_empty());
        // A comma in the password is not a host list.
        let t = Target::parse("redis://u:a,b@h:1").unwrap();
        assert!(!t.is_host_list());
    }

    #[test]
    fn bad_host_lists_are_rejected_without_leaking() {
        for bad in [
            "redis+cluster://:pw@a:1,,b:2",
            "redis+cluster://:pw@a:1,b:99999",
            "redis+cluster://:pw@a:1,b:x",
            "redis+cluster://:pw@a:1,",
        ] {
            let err = Target::parse(bad).unwrap_err().to_string();
            assert!(err.contains("malformed target URL"), "{err}");
            assert!(!err.contains("pw@"), "{err}");
        }
    }

    #[test]
    fn redact_raw_handles_odd_input() {
        assert_eq!(redact_raw("redis://:pw@h:1"), "redis://:***@h:1");
        assert_eq!(redact_raw("redis://h:1"), "redis://h:1");
        assert_eq!(redact_raw("nonsense"), "nonsense");
    }
}
