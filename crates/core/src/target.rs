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
        check_reserved(raw).map_err(&malformed)?;
        if let Some((first, hosts)) = split_host_list(raw).map_err(&malformed)? {
            let url = url::Url::parse(&first).map_err(|e| malformed(e.to_string()))?;
            return Ok(Target {
                url,
                multi: Some((raw.to_string(), hosts)),
            });
        }
        let url = url::Url::parse(raw).map_err(|e| malformed(e.to_string()))?;
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

/// Refuses, before the URL is parsed, what the parser would misread:
///
/// - a `/`, `?` or `#` in the user or password. Each ends the authority,
///   so that the parser takes what precedes it for the host and port
///   (`mysql://u:a#b@h:3306/db` fails as "invalid port number";
///   `mysql://u:12/34@h/db` "parses" with host `u` and port 12). The
///   message says which part holds the character and how to encode it,
///   without showing it: the URL's userinfo ends at its last `@`, which
///   here lies past the authority's end. An `@` in a password is no such
///   case: the parser takes the last `@` of the authority as the end of the
///   userinfo, so `u:a@b@h` is user `u`, password `a@b`, host `h`.
/// - a fragment (`#...`): no target has a use for one, so a `#` there is a
///   character of a password, database name or path that needed `%23`,
///   and whatever followed it would be silently dropped.
///
/// An `@` in a query parameter's value after a proper `user:password@host`
/// (`?x=a@b`), or in a URL with no authority at all (`sim://?stall=1s@5s`),
/// is left alone.
fn check_reserved(raw: &str) -> Result<(), String> {
    let Some(scheme_end) = raw.find(':') else {
        return Ok(());
    };
    let after_scheme = &raw[scheme_end + 1..];
    if let Some(rest) = after_scheme.strip_prefix("//") {
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        // Userinfo that ends past the authority was cut short by one of them.
        if let Some(at) = userinfo_end(rest).filter(|&at| at > authority_end) {
            // The first ':' of the userinfo ends the user name.
            let part = match rest[..at].find(':') {
                Some(colon) if colon < authority_end => "password",
                _ => "user name",
            };
            return Err(format!(
                "the {part} has a character that ends the host part of a URL ('/', '?' \
                 or '#'): percent-encode it ('/' as %2F, '?' as %3F, '#' as %23, and '%' \
                 itself as %25)"
            ));
        }
    }
    if after_scheme.contains('#') {
        return Err(
            "'#' starts a URL fragment, which a target has no use for: write a '#' that is \
             part of a password, database name or path as %23"
                .to_string(),
        );
    }
    Ok(())
}

/// Whether the `@` at `at` in `rest` (the text after `scheme://`) lies in
/// the value of a query parameter (`?a=1&b=x@y`): after a `?`, before any
/// `#`, with a `=` between the parameter's start and it.
fn in_query_value(rest: &str, at: usize) -> bool {
    let before = &rest[..at];
    match (before.find('?'), before.find('#')) {
        (Some(_), None) => {
            let param_start = before.rfind(['?', '&']).map_or(0, |i| i + 1);
            before[param_start..].contains('=')
        }
        _ => false,
    }
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
/// authority early (`mysql://u:12/34@h/db`), or when that `@` is past the
/// authority's own and not in a query value (`mysql://u:a@b/c@h/db`). An
/// empty authority has no userinfo: an `@` past it is in the query
/// (`sim://?stall=1s@5s`).
fn userinfo_end(after_scheme: &str) -> Option<usize> {
    let authority_end = after_scheme
        .find(['/', '?', '#'])
        .unwrap_or(after_scheme.len());
    if authority_end == 0 {
        return None;
    }
    let last = after_scheme.rfind('@');
    match after_scheme[..authority_end].rfind('@') {
        None => last,
        Some(at) => match last {
            Some(late) if late > authority_end && !in_query_value(after_scheme, late) => Some(late),
            _ => Some(at),
        },
    }
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
    fn reserved_characters_in_the_password_are_named_not_shown() {
        // '#' and '/' end the authority: the parser would see port "a"
        // ("invalid port number") or host "u".
        for (raw, part) in [
            ("mysql://u:a#b@127.0.0.1:3306/db", "the password"),
            ("mysql://u:a/b@127.0.0.1:3306/db", "the password"),
            ("postgres://u:x?y@127.0.0.1:5432/db", "the password"),
            ("redis://:p#ss@127.0.0.1:6379", "the password"),
            // (A user name is no secret: it is shown.)
            ("mysql://us#er:pw@127.0.0.1/db", "the user name"),
            // After a first '@': a password "a@b/c".
            ("mysql://u:a@b/c@127.0.0.1/db", "the password"),
            ("mysql://u:a@b?c@127.0.0.1/db", "the password"),
            ("redis+cluster://:p#w@h1:7000,h2:7001", "the password"),
        ] {
            let e = Target::parse(raw).unwrap_err().to_string();
            assert!(e.contains(part), "{raw}: {e}");
            assert!(!e.contains("invalid port"), "{raw}: {e}");
            for hint in ["percent-encode", "%2F", "%23", "%3F"] {
                assert!(e.contains(hint), "{raw}: {e}");
            }
            for secret in ["a#b", "a/b", "x?y", "p#ss", "b/c", "b?c", "p#w"] {
                assert!(!e.contains(secret), "{raw}: {e}");
            }
        }
    }

    #[test]
    fn an_unencoded_at_in_the_password_is_the_last_at_of_the_authority() {
        let t = Target::parse("mysql://u:a@b@127.0.0.1:3306/db").unwrap();
        assert_eq!(t.url().host_str(), Some("127.0.0.1"));
        assert_eq!(t.url().port(), Some(3306));
        assert_eq!(t.url().username(), "u");
        assert_eq!(t.url().password(), Some("a%40b"));
        assert_eq!(t.redacted(), "mysql://u:***@127.0.0.1:3306/db");
        assert_eq!(
            redact_raw("mysql://u:a@b@127.0.0.1:3306/db"),
            "mysql://u:***@127.0.0.1:3306/db"
        );
        // The same as %40.
        let encoded = Target::parse("mysql://u:a%40b@127.0.0.1:3306/db").unwrap();
        assert_eq!(encoded.url(), t.url());
    }

    #[test]
    fn fragments_are_refused() {
        for raw in [
            "mysql://u:pw@127.0.0.1:3306/db#1",
            "redis://127.0.0.1:6379#x",
            "sqlite:bench#1.db",
        ] {
            let e = Target::parse(raw).unwrap_err().to_string();
            assert!(e.contains("fragment") && e.contains("%23"), "{raw}: {e}");
            assert!(!e.contains("pw@"), "{raw}: {e}");
        }
    }

    #[test]
    fn an_at_in_a_query_value_is_not_a_password() {
        // The README's sim URL: no authority, an '@' in a parameter.
        let raw = "sim://?latency=lognormal:2ms:0.5&concurrency=64&stall=1s@5s&connect=5ms";
        let t = Target::parse(raw).unwrap();
        assert_eq!(t.redacted(), raw);
        assert_eq!(redact_raw(raw), raw);
        assert!(Target::parse("sim:?stall=1s@5s").is_ok());
        let t = Target::parse("mysql://u:p@h/db?sslrootcert=/etc/a@b.pem").unwrap();
        assert_eq!(t.url().host_str(), Some("h"));
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
        assert!(t.multi.is_some());
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
        assert!(t.multi.is_none());
        assert_eq!(t.hosts(), vec![("h".to_string(), Some(6380))]);
        assert!(Target::parse("sqlite:x.db").unwrap().hosts().is_empty());
        // A comma in the password is not a host list.
        let t = Target::parse("redis://u:a,b@h:1").unwrap();
        assert!(t.multi.is_none());
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
