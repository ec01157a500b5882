//! Words for messages.

/// `n` and `noun`, plural unless `n` is 1: "1 session", "8 sessions",
/// "0 misses". For nouns with a regular English plural.
pub fn counted(n: u64, noun: &str) -> String {
    format!("{n} {}", plural(n, noun))
}

/// `noun` as `n` of it are called: "session" for 1, "sessions" otherwise.
pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        noun.to_string()
    } else if ["s", "sh", "ch", "x"].iter().any(|end| noun.ends_with(end)) {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular() {
        assert_eq!(counted(1, "session"), "1 session");
        assert_eq!(counted(0, "session"), "0 sessions");
        assert_eq!(counted(64, "connection"), "64 connections");
        assert_eq!(counted(1, "miss"), "1 miss");
        assert_eq!(counted(2, "miss"), "2 misses");
        assert_eq!(plural(3, "record"), "records");
    }
}
