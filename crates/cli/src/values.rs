//! Every option value the CLI reads from text: durations, counts, rates,
//! percentages, latency bounds, switches and labels. One rule per kind of
//! value, whichever command takes it. Errors are the rest of a sentence
//! that starts with the option and its value (clap's `invalid value 'x'
//! for '--flag': …`, or [`crate::multi`]'s own options).

use std::time::Duration;

/// A whole number greater than 0.
pub fn positive_usize(s: &str) -> Result<usize, String> {
    positive_u64(s).and_then(|n| usize::try_from(n).map_err(|_| "is too large".into()))
}

pub fn positive_u32(s: &str) -> Result<u32, String> {
    positive_u64(s).and_then(|n| u32::try_from(n).map_err(|_| "is too large".into()))
}

pub fn positive_u64(s: &str) -> Result<u64, String> {
    match s.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n as u64),
        _ => Err("must be a whole number greater than 0".into()),
    }
}

/// A finite number greater than 0, e.g. a rate.
pub fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err("must be a number greater than 0".into()),
    }
}

/// `1000000`, `150k`, `1.5M`, `2G`: a throughput greater than 0.
pub fn throughput(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'M')) => (&t[..i], 1e6),
        Some((i, 'G')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * mult),
        Ok(_) => Err("must be greater than 0".into()),
        Err(_) => Err("must be a throughput such as 1000000, 150k or 1M".into()),
    }
}

/// The longest duration any option takes: far beyond any run, and far
/// from where adding it to the clock would overflow.
const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// `30s`, `5m`, `1h30m`, `250ms`, or plain seconds as sysbench takes them;
/// a year at most.
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.starts_with('-') {
        return Err("must not be negative".into());
    }
    let d = match s.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => {
            Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
        }
        Ok(_) => return Err("must be a duration such as 30s or 5m".into()),
        Err(_) => humantime::parse_duration(s)
            .map_err(|_| "must be a duration such as 30s, 5m or 250ms".to_string())?,
    };
    if d > MAX_DURATION {
        return Err("must be a year at most".into());
    }
    Ok(d)
}

/// `--start-at`: an RFC 3339 instant (`2026-11-24T22:00:00Z`) or `+30s`,
/// that long from now; never in the past.
pub fn start_at(s: &str) -> Result<std::time::SystemTime, String> {
    let now = std::time::SystemTime::now();
    let at = match s.trim().strip_prefix('+') {
        Some(ahead) => now + duration(ahead)?,
        None => humantime::parse_rfc3339_weak(s.trim()).map_err(|_| {
            "must be a wall-clock time such as 2026-11-24T22:00:00Z (RFC 3339, UTC), or +30s \
             from now"
                .to_string()
        })?,
    };
    match now.duration_since(at) {
        Ok(ago) if !ago.is_zero() => Err(format!(
            "is {:.1}s in the past: give a time every shard reaches after connecting, such as +30s",
            ago.as_secs_f64()
        )),
        _ => Ok(at),
    }
}

pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be greater than 0".into()),
        d => Ok(d),
    }
}

/// The one way a share is written: `5%`, or the fraction `0.05`.
/// Returns the fraction; `None` when `s` is neither.
fn percentage(s: &str) -> Option<f64> {
    let t = s.trim();
    match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .ok()
    .filter(|v| !v.is_nan())
}

/// A share of a whole, above 0% and at most 100% (`--min-achieved`,
/// `--precision`).
pub fn share(s: &str) -> Result<f64, String> {
    match percentage(s) {
        None => Err("must be a percentage such as 5%".into()),
        Some(v) if v > 0.0 && v <= 1.0 => Ok(v),
        Some(_) => Err("must be above 0% and at most 100%".into()),
    }
}

/// The share of capacity kept free, at least 0% and below 100%.
pub fn headroom(s: &str) -> Result<f64, String> {
    match percentage(s) {
        None => Err("must be a percentage such as 30%".into()),
        Some(v) if (0.0..1.0).contains(&v) => Ok(v),
        Some(_) => Err("must be at least 0% and below 100%".into()),
    }
}

/// A relative change, above 0% and below 1000%. A bare number of 1 or
/// more is refused rather than guessed at: `5` could mean 5% or 500%.
pub fn threshold(s: &str) -> Result<f64, String> {
    let bare = !s.trim().ends_with('%');
    match percentage(s) {
        None => Err(format!(
            "'{s}' is not a threshold: use a percentage such as 5%"
        )),
        Some(v) if bare && v >= 1.0 => Err(format!(
            "'{s}' is ambiguous: write it as a percentage such as {s}%"
        )),
        Some(v) if v > 0.0 && v < 10.0 => Ok(v),
        Some(_) => Err(format!(
            "'{s}': the threshold must be above 0% and below 1000%"
        )),
    }
}

/// A latency percentile and the bound it must stay under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyBound {
    /// e.g. 99.0 or 99.9.
    pub percentile: f64,
    pub bound_ms: f64,
}

/// `p99<=10ms`, `p99.9<=250us`, `p50 <= 1s`.
pub fn latency_bound(s: &str) -> Result<LatencyBound, String> {
    let bad = || "must look like p99<=10ms (a percentile, <=, and a duration)".to_string();
    let (p, bound) = s.split_once("<=").ok_or_else(bad)?;
    let percentile: f64 = p
        .trim()
        .strip_prefix('p')
        .ok_or_else(bad)?
        .parse()
        .map_err(|_| bad())?;
    if !(percentile > 0.0 && percentile < 100.0) {
        return Err("must have a percentile between 0 and 100, e.g. p99".into());
    }
    let bound = humantime::parse_duration(bound.trim()).map_err(|_| bad())?;
    if bound.is_zero() {
        return Err("must have a bound greater than 0".into());
    }
    Ok(LatencyBound {
        percentile,
        bound_ms: bound.as_secs_f64() * 1000.0,
    })
}

/// `p99<=2ms`, the only percentile `plan` works with: the bound in ms.
pub fn p99_bound(s: &str) -> Result<f64, String> {
    let b = latency_bound(s)?;
    if b.percentile != 99.0 {
        return Err("only p99 is planned on: use p99<=DURATION, e.g. p99<=2ms".into());
    }
    Ok(b.bound_ms)
}

pub fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err("must be on or off".into()),
    }
}

pub fn label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err("must be KEY=VALUE, e.g. instance=4c16g".into()),
    }
}

/// `--warmup`: a duration, or `auto` (until the run settles).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Warmup {
    For(Duration),
    Auto,
}

impl Warmup {
    /// The fixed warm-up: none under `auto`, whose warm-up is a run of its
    /// own.
    pub fn fixed(self) -> Duration {
        match self {
            Warmup::For(d) => d,
            Warmup::Auto => Duration::ZERO,
        }
    }
}

pub fn warmup(text: &str) -> Result<Warmup, String> {
    if text.trim() == "auto" {
        return Ok(Warmup::Auto);
    }
    duration(text)
        .map(Warmup::For)
        .map_err(|e| format!("{e}, or auto (until the run settles)"))
}

/// `--stages`: `DUR:RATE,…` with k6's meaning, holding some events.
pub fn stages(text: &str) -> Result<loadcell_engine::shape::Shape, String> {
    let shape = loadcell_engine::shape::Shape::new(loadcell_engine::shape::parse(text)?)?;
    if shape.total() < 1.0 {
        return Err("the stages hold no events: give a stage a rate above 0".into());
    }
    Ok(shape)
}

/// `--session-stages`: `DUR:SESSIONS,…` with k6's meaning, whole
/// sessions, at least one at the peak.
pub fn session_stages(text: &str) -> Result<loadcell_engine::shape::Shape, String> {
    let stages = loadcell_engine::shape::parse(text)?;
    if let Some(s) = stages.iter().find(|s| s.target.fract() != 0.0) {
        return Err(format!(
            "a stage's target is a number of sessions, so a whole number, not {}",
            s.target
        ));
    }
    let shape = loadcell_engine::shape::Shape::new(stages)?;
    if shape.peak() < 1.0 {
        return Err("the stages run no session: give a stage 1 session or more".into());
    }
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_sysbench_and_human_forms() {
        assert_eq!(duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(duration("-5s"), Err("must not be negative".into()));
        assert_eq!(
            duration("soon"),
            Err("must be a duration such as 30s, 5m or 250ms".into())
        );
        assert_eq!(positive_duration("0"), Err("must be greater than 0".into()));
        // Far-off values are refused, not a panic or an overflow later.
        for huge in ["1e20", "1e19", "400d", "100000000h"] {
            assert_eq!(
                duration(huge),
                Err("must be a year at most".into()),
                "{huge}"
            );
        }
        assert_eq!(duration("365d"), Ok(Duration::from_secs(365 * 86400)));
    }

    #[test]
    fn numbers_must_be_positive() {
        let whole = Err("must be a whole number greater than 0".to_string());
        assert_eq!(positive_usize("0"), whole);
        assert_eq!(positive_usize("-3"), whole);
        assert_eq!(positive_usize("8"), Ok(8));
        assert_eq!(positive_u32("5000000000"), Err("is too large".into()));
        let number = Err("must be a number greater than 0".to_string());
        assert_eq!(positive_f64("0"), number);
        assert_eq!(positive_f64("-1.5"), number);
        assert_eq!(positive_f64("nan"), number);
        assert_eq!(positive_f64("2500.5"), Ok(2500.5));
    }

    #[test]
    fn throughputs_take_si_suffixes() {
        assert_eq!(throughput("1000000"), Ok(1e6));
        assert_eq!(throughput("150k"), Ok(150e3));
        assert_eq!(throughput("1.5M"), Ok(1.5e6));
        assert_eq!(throughput("2G"), Ok(2e9));
        assert_eq!(throughput("0"), Err("must be greater than 0".into()));
        assert_eq!(throughput("-5"), Err("must be greater than 0".into()));
        assert_eq!(
            throughput("lots"),
            Err("must be a throughput such as 1000000, 150k or 1M".into())
        );
    }

    #[test]
    fn percentages_are_written_one_way_and_checked_per_use() {
        // A share of the target: (0%, 100%].
        assert_eq!(share("5%"), Ok(0.05));
        assert_eq!(share(" 2.5 % "), Ok(0.025));
        assert_eq!(share("0.95"), Ok(0.95));
        assert_eq!(share("1"), Ok(1.0));
        assert_eq!(share("x"), Err("must be a percentage such as 5%".into()));
        assert_eq!(share("0%"), Err("must be above 0% and at most 100%".into()));
        assert_eq!(
            share("150%"),
            Err("must be above 0% and at most 100%".into())
        );
        // Headroom: [0%, 100%).
        assert_eq!(headroom("30%"), Ok(0.3));
        assert_eq!(headroom("0.25"), Ok(0.25));
        assert_eq!(headroom("0%"), Ok(0.0));
        let range = Err("must be at least 0% and below 100%".to_string());
        assert_eq!(headroom("100%"), range);
        assert_eq!(headroom("-5%"), range);
        assert_eq!(headroom("30"), range);
        assert_eq!(
            headroom("lots"),
            Err("must be a percentage such as 30%".into())
        );
        // A threshold: (0%, 1000%), and never a guess.
        assert_eq!(threshold("5%"), Ok(0.05));
        assert_eq!(threshold(" 2.5 % "), Ok(0.025));
        assert_eq!(threshold("0.05"), Ok(0.05));
        assert_eq!(threshold("250%"), Ok(2.5));
        assert_eq!(
            threshold("5"),
            Err("'5' is ambiguous: write it as a percentage such as 5%".into())
        );
        assert_eq!(
            threshold("x"),
            Err("'x' is not a threshold: use a percentage such as 5%".into())
        );
        for bad in ["0%", "-1%", "1000%"] {
            assert_eq!(
                threshold(bad),
                Err(format!(
                    "'{bad}': the threshold must be above 0% and below 1000%"
                ))
            );
        }
    }

    #[test]
    fn latency_bounds_name_a_percentile_and_a_duration() {
        assert_eq!(
            latency_bound("p99<=10ms"),
            Ok(LatencyBound {
                percentile: 99.0,
                bound_ms: 10.0
            })
        );
        assert_eq!(latency_bound("p99.9<=250us").unwrap().bound_ms, 0.25);
        assert_eq!(latency_bound("p50 <= 1s").unwrap().bound_ms, 1000.0);
        let shape = Err("must look like p99<=10ms (a percentile, <=, and a duration)".to_string());
        assert_eq!(latency_bound("99<=10ms"), shape);
        assert_eq!(latency_bound("p99<10ms"), shape);
        assert_eq!(latency_bound("p99<=soon"), shape);
        assert_eq!(
            latency_bound("p100<=1s"),
            Err("must have a percentile between 0 and 100, e.g. p99".into())
        );
        assert_eq!(
            latency_bound("p99<=0s"),
            Err("must have a bound greater than 0".into())
        );
        assert_eq!(p99_bound("p99<=2ms"), Ok(2.0));
        assert_eq!(p99_bound("p99 <= 500us"), Ok(0.5));
        assert_eq!(
            p99_bound("p95<=2ms"),
            Err("only p99 is planned on: use p99<=DURATION, e.g. p99<=2ms".into())
        );
    }

    #[test]
    fn labels_and_switches() {
        assert_eq!(label("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert_eq!(
            label("novalue"),
            Err("must be KEY=VALUE, e.g. instance=4c16g".into())
        );
        assert!(on_off("on").unwrap());
        assert!(!on_off("off").unwrap());
        assert_eq!(on_off("maybe"), Err("must be on or off".into()));
    }

    #[test]
    fn start_at_is_a_wall_clock_time_to_come() {
        let now = std::time::SystemTime::now();
        let ahead = start_at("+30s").unwrap().duration_since(now).unwrap();
        assert!(ahead >= Duration::from_secs(29) && ahead <= Duration::from_secs(31));
        let future = start_at("2999-01-01T00:00:00Z").unwrap();
        assert_eq!(
            humantime::format_rfc3339_seconds(future).to_string(),
            "2999-01-01T00:00:00Z"
        );
        let past = start_at("2001-01-01T00:00:00Z").unwrap_err();
        assert!(
            past.contains("in the past") && !past.contains('\n'),
            "{past}"
        );
        assert!(start_at("tomorrow").unwrap_err().contains("RFC 3339"));
    }
}
