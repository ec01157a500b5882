//! Number formatting for the plain-words sentences.

/// A count or concurrency level: `64`, `2.5`.
pub(crate) fn count(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        trim(format!("{x:.2}"))
    }
}

/// A rate with an SI suffix: `950`, `2.5k`, `30k`, `1.2M`.
pub(crate) fn si(x: f64) -> String {
    let a = x.abs();
    let (v, suffix) = if a >= 1e9 {
        (x / 1e9, "G")
    } else if a >= 1e6 {
        (x / 1e6, "M")
    } else if a >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        trim(format!("{v:.1}"))
    } else {
        trim(format!("{v:.2}"))
    };
    format!("{s}{suffix}")
}

/// A signed relative change as a percentage: `+3%`, `-12%`, `+0.4%`.
pub(crate) fn pct(rel: f64) -> String {
    let p = rel * 100.0;
    let body = if p.abs() >= 9.95 || p.round() == p {
        format!("{p:+.0}")
    } else {
        trim(format!("{p:+.1}"))
    };
    format!("{body}%")
}

/// An unsigned fraction as a percentage: `30%`, `2.5%`.
pub(crate) fn pct_unsigned(frac: f64) -> String {
    let p = frac * 100.0;
    if p.round() == p || p.abs() >= 10.0 {
        format!("{p:.0}%")
    } else {
        format!("{}%", trim(format!("{p:.1}")))
    }
}

/// Counts in plain words: `8`, `8 and 16`, `8, 16 and 32`; more than
/// four as a range, `8 to 128`.
pub(crate) fn list(xs: &[f64]) -> String {
    let words: Vec<String> = xs.iter().map(|&x| count(x)).collect();
    match words.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [first, .., last] if words.len() > 4 => format!("{first} to {last}"),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A latency in milliseconds, to two or three significant figures:
/// `0.25 ms`, `1.0 ms`, `12 ms`.
pub(crate) fn ms(v: f64) -> String {
    if v < 1.0 {
        format!("{v:.2} ms")
    } else if v < 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.0} ms")
    }
}

/// Dollars with thousands separators: `$8,552`.
pub(crate) fn dollars(x: f64) -> String {
    if x.abs() < 100.0 {
        return format!("{}${:.2}", if x < 0.0 { "-" } else { "" }, x.abs());
    }
    let r = x.round() as i64;
    let digits = r.abs().to_string();
    // Groups of three from the right (ASCII digits, so bytes are chars).
    let head = match digits.len() % 3 {
        0 => 3,
        h => h,
    };
    let mut out = digits[..head.min(digits.len())].to_string();
    for group in digits.as_bytes()[head.min(digits.len())..].chunks(3) {
        out.push(',');
        out.push_str(std::str::from_utf8(group).expect("ASCII digits"));
    }
    format!("{}${out}", if r < 0 { "-" } else { "" })
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(64.0), "64");
        assert_eq!(count(2.5), "2.5");
        assert_eq!(si(30_000.0), "30k");
        assert_eq!(si(2_500.0), "2.5k");
        assert_eq!(si(1_000_000.0), "1M");
        assert_eq!(si(1_234_567.0), "1.23M");
        assert_eq!(si(950.0), "950");
        assert_eq!(si(140_000.0), "140k");
        assert_eq!(pct(0.03), "+3%");
        assert_eq!(pct(-0.12), "-12%");
        assert_eq!(pct(0.004), "+0.4%");
        assert_eq!(pct_unsigned(0.3), "30%");
        assert_eq!(dollars(8552.4), "$8,552");
        assert_eq!(dollars(252.0), "$252");
        assert_eq!(dollars(9.192), "$9.19");
        assert_eq!(dollars(1_234_567.0), "$1,234,567");
        assert_eq!(list(&[8.0]), "8");
        assert_eq!(list(&[8.0, 16.0]), "8 and 16");
        assert_eq!(list(&[8.0, 16.0, 32.0]), "8, 16 and 32");
        assert_eq!(list(&[8.0, 16.0, 32.0, 64.0, 128.0]), "8 to 128");
        assert_eq!(ms(0.254), "0.25 ms");
        assert_eq!(ms(1.04), "1.0 ms");
        assert_eq!(ms(12.4), "12 ms");
    }
}
