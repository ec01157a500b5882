//! Defensive redaction for anything a report prints from a result file.
//! Files are written redacted already; this is the second lock, so a
//! hand-edited or foreign file still never puts a password on a page.

use loadcell_core::target::redact_authority;

/// Characters that end a token: a password is looked for within one token.
fn is_delimiter(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\'' | '`' | '<' | '>' | '(' | ')' | '{' | '}' | ',' | ';' | '|'
        )
}

const SECRET_KEYS: [&str; 6] = ["password", "passwd", "pwd", "pass", "secret", "auth"];

/// Header names whose values are secrets, as written before the value.
const SECRET_HEADERS: [&str; 4] = [
    "authorization:",
    "proxy-authorization:",
    "cookie:",
    "x-api-key:",
];

/// Replaces the password of every `user:password@host` (with or without a
/// `scheme://`), the value of every `password=`-style parameter and the
/// value after a secret header name (`Authorization: Bearer ***`) by `***`.
pub fn redact(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut token = String::new();
    let mut header = HeaderValue::None;
    for c in s.chars() {
        if is_delimiter(c) {
            out.push_str(&header.redact(&token));
            token.clear();
            out.push(c);
        } else {
            token.push(c);
        }
    }
    out.push_str(&header.redact(&token));
    out
}

/// Where a run of tokens stands in a secret header's value.
#[derive(Clone, Copy)]
enum HeaderValue {
    None,
    /// After the header's name: an authentication scheme may come first.
    AfterName,
    /// After `Bearer` or `Basic`: the credentials come next.
    AfterScheme,
}

impl HeaderValue {
    fn redact(&mut self, token: &str) -> String {
        if token.is_empty() {
            return String::new();
        }
        let lower = token.to_ascii_lowercase();
        let (next, out) = match *self {
            HeaderValue::AfterName if matches!(lower.as_str(), "bearer" | "basic") => {
                (HeaderValue::AfterScheme, token.to_string())
            }
            HeaderValue::AfterName | HeaderValue::AfterScheme => {
                (HeaderValue::None, "***".to_string())
            }
            HeaderValue::None if SECRET_HEADERS.contains(&lower.as_str()) => {
                (HeaderValue::AfterName, token.to_string())
            }
            HeaderValue::None => (HeaderValue::None, redact_token(token)),
        };
        *self = next;
        out
    }
}

fn redact_token(t: &str) -> String {
    if t.is_empty() {
        return String::new();
    }
    let t = redact_userinfo(t);
    redact_params(&t)
}

/// `user:pw@host` → `user:***@host`, for each URL or bare authority.
fn redact_userinfo(t: &str) -> String {
    if !t.contains('@') {
        return t.to_string();
    }
    let mut out = String::new();
    let mut rest = t;
    loop {
        // The authority starts after `://`, or after `=` (`--target=u:p@h`),
        // or at the start of the token.
        let start = match rest.find("://") {
            Some(i) => i + 3,
            None => rest.rfind('=').map(|i| i + 1).unwrap_or(0),
        };
        let (head, tail) = rest.split_at(start);
        out.push_str(head);
        // This URL's text runs to the next one's scheme, if any.
        let end = tail.find("://").unwrap_or(tail.len());
        out.push_str(&redact_authority(&tail[..end]));
        rest = &tail[end..];
        if !rest.contains("://") {
            out.push_str(rest);
            return out;
        }
    }
}

/// `password=x` (in query strings, DSNs and `--password=x`) → `password=***`.
fn redact_params(t: &str) -> String {
    let lower = t.to_ascii_lowercase();
    let mut out = String::new();
    let mut i = 0;
    while i < t.len() {
        let found = SECRET_KEYS.iter().find_map(|k| {
            let end = i + k.len();
            let boundary = i == 0
                || matches!(
                    lower.as_bytes()[i - 1],
                    b'?' | b'&' | b'-' | b'_' | b';' | b'.'
                );
            (boundary && lower[i..].starts_with(k) && lower.as_bytes().get(end) == Some(&b'='))
                .then_some(end + 1)
        });
        match found {
            Some(value_start) => {
                out.push_str(&t[i..value_start]);
                let value_end = t[value_start..]
                    .find(['&', ';'])
                    .map(|j| value_start + j)
                    .unwrap_or(t.len());
                if value_end > value_start {
                    out.push_str("***");
                }
                i = value_end;
            }
            None => {
                let c = t[i..].chars().next().expect("i is on a char boundary");
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// Redacts a command line: each argument as [`redact`] does, and the
/// argument after a bare `--password`-style flag.
pub fn redact_command(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        if hide_next {
            out.push("***".to_string());
            hide_next = false;
            continue;
        }
        let flag = a.trim_start_matches('-').to_ascii_lowercase();
        hide_next = a.starts_with('-') && SECRET_KEYS.contains(&flag.as_str());
        out.push(redact(a));
    }
    out
}

/// Joins a command line for display, quoting arguments that need it.
pub fn shell_join(args: &[String]) -> String {
    redact_command(args)
        .iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=./:,@%+*".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_with_reserved_characters_are_redacted() {
        assert_eq!(redact("mysql://root:12/34@h/db"), "mysql://root:***@h/db");
        assert_eq!(redact("redis://:p#ss@h:6379"), "redis://:***@h:6379");
        assert_eq!(
            redact("error: mysql://u:12?x@h/db refused"),
            "error: mysql://u:***@h/db refused"
        );
        assert_eq!(redact("mysql://u:p@h/db?x=a@b"), "mysql://u:***@h/db?x=a@b");
    }

    #[test]
    fn secret_header_values_are_redacted() {
        assert_eq!(
            redact("-H 'Authorization: Bearer abc.def'"),
            "-H 'Authorization: Bearer ***'"
        );
        assert_eq!(redact("Cookie: id=1 Accept: x"), "Cookie: *** Accept: x");
        assert_eq!(redact("Accept: Bearer x"), "Accept: Bearer x");
    }

    #[test]
    fn urls_lose_their_passwords() {
        assert_eq!(
            redact("mysql://root:secret@127.0.0.1:3306/db"),
            "mysql://root:***@127.0.0.1:3306/db"
        );
        assert_eq!(redact("mysql://root:***@h/db"), "mysql://root:***@h/db");
        assert_eq!(redact("redis://:pw@h:1"), "redis://:***@h:1");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(
            redact("postgres://u:p@ss@h:5432/x"),
            "postgres://u:***@h:5432/x"
        );
        assert_eq!(
            redact("from mysql://a:b@h1/x to postgres://c:d@h2/y"),
            "from mysql://a:***@h1/x to postgres://c:***@h2/y"
        );
        assert_eq!(
            redact("--target=mysql://a:b@h/db"),
            "--target=mysql://a:***@h/db"
        );
        assert_eq!(redact("\"x://a:b@h\""), "\"x://a:***@h\"");
    }

    #[test]
    fn bare_userinfo_and_params_are_redacted() {
        assert_eq!(
            redact("connect root:hunter2@db1 failed"),
            "connect root:***@db1 failed"
        );
        assert_eq!(redact("--target=root:pw@h"), "--target=root:***@h");
        assert_eq!(
            redact("postgres://h/db?sslmode=require&password=abc"),
            "postgres://h/db?sslmode=require&password=***"
        );
        assert_eq!(redact("--password=abc"), "--password=***");
        assert_eq!(redact("user=a password=b"), "user=a password=***");
        assert_eq!(redact("passed=3 bypass=1"), "passed=3 bypass=1");
        assert_eq!(redact("time 12:30 at noon"), "time 12:30 at noon");
        assert_eq!(redact("käse:wurst@host"), "käse:***@host");
        assert_eq!(redact(""), "");
    }

    #[test]
    fn command_lines_hide_separate_password_arguments() {
        let args: Vec<String> = [
            "loadcell",
            "run",
            "--password",
            "abc",
            "--target",
            "mysql://u:p@h/d",
            "--label",
            "a b",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let shown = shell_join(&args);
        assert_eq!(
            shown,
            "loadcell run --password *** --target mysql://u:***@h/d --label 'a b'"
        );
    }
}
