//! Targets are URLs; the scheme picks the driver. Display forms never
//! include passwords.

use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("malformed target URL '{shown}': {reason}")]
    Malformed { shown: String, reason: String },
}

/// A parsed target. `Display` shows it with the password redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    url: url::Url,
}

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
        let url = url::Url::parse(raw).map_err(|e| malformed(e.to_string()))?;
        if !url.cannot_be_a_base() && url.has_authority() && url.host_str().unwrap_or("").is_empty()
        {
            return Err(malformed("the host is missing".to_string()));
        }
        Ok(Target { url })
    }

    pub fn scheme(&self) -> &str {
        self.url.scheme()
    }

    /// The full URL, secrets included: only for handing to a driver.
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        let mut shown = self.url.clone();
        if shown.password().is_some() {
            let _ = shown.set_password(Some("***"));
        }
        shown.to_string()
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

/// Redacts `user:password@` in any string that looks like a URL, for
/// echoing input that failed to parse.
pub fn redact_raw(raw: &str) -> String {
    let Some(scheme_end) = raw.find("://") else {
        return raw.to_string();
    };
    let rest = &raw[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match (authority.rfind('@'), authority.find(':')) {
        (Some(at), Some(colon)) if colon < at => format!(
            "{}{}:***{}",
            &raw[..scheme_end + 3],
            &authority[..colon],
            &rest[at..]
        ),
        _ => raw.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn redact_raw_handles_odd_input() {
        assert_eq!(redact_raw("redis://:pw@h:1"), "redis://:***@h:1");
        assert_eq!(redact_raw("redis://h:1"), "redis://h:1");
        assert_eq!(redact_raw("nonsense"), "nonsense");
    }
}
