//! The live line printed every `--report-interval`, in sysbench's shape
//! with p99 added:
//! `[ 10s ] thds: 8 tps: 333.10 qps: 6662.00 (r/w/o: ...) lat (ms,95%): 39.65 p99: 52.10 err/s: 0.00 reconn/s: 0.00`

use std::fmt::Write as _;

use loadcell_record::{LatencySummary, Stats};

/// Formats one interval. `categories[i]` is `read`, `write` or `other`
/// for operation kind `i`; `sessions`, those running events; under
/// `--stages`, `target_per_sec` is the interval's target rate.
pub fn line(
    elapsed_s: f64,
    sessions: usize,
    duration_s: f64,
    stats: &Stats,
    categories: &[&str],
    warmup: bool,
    target_per_sec: Option<f64>,
) -> String {
    let per_sec = |n: u64| {
        if duration_s > 0.0 {
            n as f64 / duration_s
        } else {
            0.0
        }
    };
    let mut rwo = [0u64; 3];
    for (op, category) in stats.ops.iter().zip(categories) {
        let slot = match *category {
            "read" => 0,
            "write" => 1,
            _ => 2,
        };
        rwo[slot] += op.count;
    }
    let lat = LatencySummary::of(&stats.response);
    // Whole seconds as sysbench prints them; tenths when the report
    // interval is shorter, so lines 0.5 s apart do not share a label.
    let mut s = if (elapsed_s - elapsed_s.round()).abs() < 0.05 {
        format!("[ {elapsed_s:.0}s ] ")
    } else {
        format!("[ {elapsed_s:.1}s ] ")
    };
    if warmup {
        s.push_str("(warm-up) ");
    }
    let _ = write!(
        s,
        "thds: {sessions} tps: {:.2} qps: {:.2} (r/w/o: {:.2}/{:.2}/{:.2}) lat (ms,95%): {:.2} p99: {:.2} err/s: {:.2} reconn/s: {:.2}",
        per_sec(stats.events),
        per_sec(stats.ops_total()),
        per_sec(rwo[0]),
        per_sec(rwo[1]),
        per_sec(rwo[2]),
        lat.p95,
        lat.p99,
        per_sec(stats.op_errors_total()),
        per_sec(stats.reconnects),
    );
    if let Some(target) = target_per_sec {
        let _ = write!(s, " target/s: {target:.0}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn line_has_rates_per_second() {
        let mut st = Stats::new(3);
        for _ in 0..10 {
            st.record_op(0, Duration::from_millis(1), true);
            st.record_op(1, Duration::from_millis(1), true);
            st.record_op(2, Duration::from_millis(1), true);
            st.record_event(Duration::from_millis(4), Duration::from_millis(3), None);
        }
        assert!(
            line(2.5, 8, 0.5, &st, &["read", "write", "other"], false, None)
                .starts_with("[ 2.5s ] ")
        );
        let l = line(10.0, 8, 2.0, &st, &["read", "write", "other"], false, None);
        assert!(
            l.starts_with("[ 10s ] thds: 8 tps: 5.00 qps: 15.00 (r/w/o: 5.00/5.00/5.00)"),
            "{l}"
        );
        assert!(l.contains("lat (ms,95%): 4.00"), "{l}");
        assert!(line(1.0, 1, 1.0, &st, &[], true, None).contains("(warm-up)"));
        // Under --stages, the interval's target follows the rates.
        let staged = line(3.0, 8, 1.0, &st, &[], false, Some(2500.0));
        assert!(
            staged.ends_with("reconn/s: 0.00 target/s: 2500"),
            "{staged}"
        );
    }
}
