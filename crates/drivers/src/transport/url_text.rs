//! The parts of a target URL that `url::Url` leaves %-escaped (user,
//! password, host name, path), decoded for the drivers that take them, and
//! a host and port written back as one endpoint.

/// `host:port`, with an IPv6 address in brackets (`[::1]:5432`).
pub(crate) fn endpoint(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Every host of a target (several for a comma-separated list), decoded,
/// each with its port or `default_port`.
pub(crate) fn hosts(
    target: &loadcell_core::Target,
    default_port: u16,
) -> Result<Vec<(String, u16)>, String> {
    target
        .hosts()
        .into_iter()
        .map(|(h, p)| Ok((percent_decode(&h, "host")?, p.unwrap_or(default_port))))
        .collect()
}

/// The hosts' endpoints, comma-separated, for messages.
pub(crate) fn endpoints(hosts: &[(String, u16)]) -> String {
    let each: Vec<String> = hosts.iter().map(|(h, p)| endpoint(h, *p)).collect();
    each.join(",")
}

/// Decodes `%XX` escapes in the URL's `what` (e.g. "password"); a bad
/// escape or bytes that are not UTF-8 once decoded are errors that name it.
pub(crate) fn percent_decode(s: &str, what: &str) -> Result<String, String> {
    if !s.contains('%') {
        return Ok(s.to_string());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else {
                return Err(format!(
                    "bad %-escape in the {what}: a '%' itself is written %25"
                ));
            };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("the {what} is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%2Fb%20c", "x").unwrap(), "a/b c");
        assert_eq!(percent_decode("%C3%A9", "x").unwrap(), "é");
        assert_eq!(percent_decode("plain", "x").unwrap(), "plain");
        assert_eq!(
            percent_decode("%zz", "user"),
            Err("bad %-escape in the user: a '%' itself is written %25".to_string())
        );
        assert!(percent_decode("%4", "x").is_err());
        assert!(percent_decode("a%2", "x").is_err());
        assert_eq!(
            percent_decode("%ff", "password"),
            Err("the password is not UTF-8 once decoded".to_string())
        );
    }
}
