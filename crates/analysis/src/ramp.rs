//! The knee of a ramp: one run whose target rate rises linearly (a
//! `--stages` ramp), read interval by interval as a sweep over rates is
//! read run by run. Two answers, each `None` when not reached within the
//! ramp:
//!
//! - where p99 left its low-load level: [`latency_knee`] on `(target,
//!   p99)` in order of load, with the options a sweep uses (p99 past 1.5×
//!   the median of the lowest third, for good);
//! - where throughput stopped following the target: the first interval
//!   from which every interval to the ramp's end achieved less than
//!   [`MIN_ACHIEVED`] (95%) of its target.
//!
//! Why not [`crate::knee::marginal_gain_knee`] for the second: a ramp's
//! steps are small (near the knee of a 60 s ramp read every second, one
//! interval adds 2–3% to the rate), and a gain normalised per doubling
//! over a 2.5% step raises the ratio to the 28th power, so a ±2% wobble
//! between intervals reads as a knee or hides one. "Achieved under 95% of what was offered" is the rule a DBA
//! already reads in the run's "target rate not reached" warning and
//! findmax's SLA; its answer lies up to 5% past the capacity (the target
//! must outrun the capacity by 5% before the shortfall counts), which is
//! stated, not hidden.
//!
//! Both answers hold "for good", over at least two intervals to the
//! ramp's end: one interval stalled (a GC pause, a busy host) is followed
//! by intervals that catch up, and a single one at the very end cannot be
//! told from such a stall.

use serde::{Deserialize, Serialize};

use crate::error::{check_finite, invalid, AnalysisError};
use crate::findmax::MIN_ACHIEVED;
use crate::knee::latency_knee;
use crate::sweep::latency_options;

/// Fewer intervals than this make no ramp to read: the latency baseline,
/// the lowest third, would be one interval.
pub const MIN_POINTS: usize = 5;

/// How many intervals to the ramp's end a knee must hold for (see the
/// module comment).
const HELD: usize = 2;

/// One interval of a ramp.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RampPoint {
    /// The interval's end, in seconds from the start of measurement.
    pub t_s: f64,
    /// The target rate over the interval: the mean of the linear target
    /// over its span (events/s).
    pub target: f64,
    /// The rate it achieved (events/s).
    pub achieved: f64,
    pub p99_ms: f64,
}

/// What a ramp says of its knee.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RampKnee {
    /// The first interval from which p99 stayed above its low-load level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_left_at: Option<LatencyLeft>,
    /// The first interval from which the achieved rate stayed under
    /// [`MIN_ACHIEVED`] of the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_stopped_at: Option<ThroughputStopped>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyLeft {
    /// The interval's target rate (events/s).
    pub target: f64,
    /// The interval's end, in seconds from the start of measurement.
    pub t_s: f64,
    pub p99_ms: f64,
    /// The low-load level: the median p99 of the ramp's lowest third.
    pub baseline_p99_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputStopped {
    /// The interval's target rate and what it achieved (events/s).
    pub target: f64,
    pub achieved: f64,
    /// The interval's end, in seconds from the start of measurement.
    pub t_s: f64,
}

/// Reads a ramp's intervals, in time order (see the module comment).
///
/// Assumptions: the target does not fall (a ramp), and the ramp starts
/// below the knee, so its lowest third shows the unloaded latency.
/// Intervals without events have no p99 and count only for throughput.
pub fn ramp_knee(points: &[RampPoint]) -> Result<RampKnee, AnalysisError> {
    if points.len() < MIN_POINTS {
        return Err(AnalysisError::NotEnoughPoints {
            what: "intervals",
            needed: MIN_POINTS,
            got: points.len(),
        });
    }
    let curve: Vec<(f64, f64)> = points.iter().map(|p| (p.target, p.achieved)).collect();
    check_finite(&curve, "ramp_knee")?;
    if points
        .iter()
        .any(|p| !p.t_s.is_finite() || !p.p99_ms.is_finite())
    {
        return Err(invalid("ramp_knee: a time or p99 is not finite"));
    }
    if points
        .windows(2)
        .any(|w| w[1].t_s <= w[0].t_s || w[1].target < w[0].target)
    {
        return Err(invalid(
            "ramp_knee: intervals must be in time order with a target that does not fall",
        ));
    }

    let measured: Vec<&RampPoint> = points.iter().filter(|p| p.achieved > 0.0).collect();
    let latency: Vec<(f64, f64)> = measured.iter().map(|p| (p.target, p.p99_ms)).collect();
    let latency_left_at = match latency_knee(&latency, &latency_options(true)) {
        Ok(Some(k)) => {
            // The knee is the interval right after the last within bound.
            let last_ok = measured
                .iter()
                .rposition(|p| p.target == k.last_ok_throughput && p.p99_ms == k.last_ok_p99)
                .expect("the knee's last good point is one of the intervals");
            (measured.len() - (last_ok + 1) >= HELD).then(|| {
                let p = measured[last_ok + 1];
                LatencyLeft {
                    target: p.target,
                    t_s: p.t_s,
                    p99_ms: p.p99_ms,
                    baseline_p99_ms: k.baseline_p99,
                }
            })
        }
        // Too few intervals with events to have a latency level at all.
        Ok(None) | Err(AnalysisError::NotEnoughPoints { .. }) => None,
        Err(e) => return Err(e),
    };

    let short = |p: &RampPoint| p.achieved < MIN_ACHIEVED * p.target;
    let from = points.iter().rposition(|p| !short(p)).map_or(0, |i| i + 1);
    let throughput_stopped_at = (points.len() - from >= HELD).then(|| ThroughputStopped {
        target: points[from].target,
        achieved: points[from].achieved,
        t_s: points[from].t_s,
    });
    Ok(RampKnee {
        latency_left_at,
        throughput_stopped_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic wobble in [-1, 1], different from one interval to
    /// the next.
    fn wobble(i: usize) -> f64 {
        ((i * 7919 + 13) % 17) as f64 / 8.0 - 1.0
    }

    /// A ramp 0 → 8,000/s over 20 s read at 500 ms against a server of
    /// 4,000/s: the achieved rate within ±2% of min(target, capacity), p99
    /// at 1 ms ±10% below capacity, then the backlog's wait growing with
    /// each interval past it.
    fn ramp_past(capacity: f64) -> Vec<RampPoint> {
        let mut backlog = 0.0;
        (0..40)
            .map(|i| {
                let t_s = 0.5 * (i + 1) as f64;
                let target = 400.0 * (t_s - 0.25);
                let served = target.min(capacity) * (1.0 + 0.02 * wobble(i));
                backlog += 0.5 * (target - capacity).max(0.0);
                RampPoint {
                    t_s,
                    target,
                    achieved: served,
                    p99_ms: 1.0 + 0.1 * wobble(i + 5) + 1000.0 * backlog / capacity,
                }
            })
            .collect()
    }

    #[test]
    fn a_ramp_past_capacity_finds_both_knees() {
        let k = ramp_knee(&ramp_past(4000.0)).unwrap();
        // 4,100/s is the first interval over capacity: its backlog of 50
        // events waits 12.5 ms.
        let l = k.latency_left_at.unwrap();
        assert_eq!((l.target, l.t_s), (4100.0, 10.5));
        assert!((l.baseline_p99_ms - 1.0).abs() < 0.1, "{l:?}");
        // Throughput stops counting as following once 4,000/s (±2%) is
        // under 95% of the target: past 4,000 / 0.95 ≈ 4,210/s.
        let t = k.throughput_stopped_at.unwrap();
        assert_eq!((t.target, t.t_s), (4300.0, 11.0));
        assert!((t.achieved - 4000.0).abs() <= 80.0, "{t:?}");
    }

    /// A knee's place: (target, t_s).
    type Place = Option<(f64, f64)>;

    /// Where each knee is.
    fn places(k: &RampKnee) -> (Place, Place) {
        (
            k.latency_left_at.as_ref().map(|l| (l.target, l.t_s)),
            k.throughput_stopped_at.as_ref().map(|t| (t.target, t.t_s)),
        )
    }

    #[test]
    fn one_stalled_interval_below_capacity_is_not_the_knee() {
        let clean = places(&ramp_knee(&ramp_past(4000.0)).unwrap());
        for at in [4, 16] {
            let mut points = ramp_past(4000.0);
            // A 400 ms stall (at 900/s, in the latency baseline's third,
            // and at 3,300/s): the interval sends a fifth of its events,
            // with the stall as p99; the next catches up, its first events
            // still late.
            points[at].achieved *= 0.2;
            points[at].p99_ms = 400.0;
            points[at + 1].achieved *= 1.8;
            points[at + 1].p99_ms = 150.0;
            assert_eq!(places(&ramp_knee(&points).unwrap()), clean, "{at}");
            // An interval with no events at all has no p99 to read.
            points[at].achieved = 0.0;
            points[at].p99_ms = 0.0;
            assert_eq!(places(&ramp_knee(&points).unwrap()), clean, "{at}");
        }
    }

    #[test]
    fn a_ramp_below_capacity_has_no_knee_even_if_its_last_interval_stalls() {
        let mut points = ramp_past(10_000.0);
        assert_eq!(ramp_knee(&points).unwrap(), RampKnee::default());
        // A stall in the last interval looks like a knee but for one
        // interval: not enough to tell.
        let last = points.last_mut().unwrap();
        last.achieved *= 0.5;
        last.p99_ms = 300.0;
        assert_eq!(ramp_knee(&points).unwrap(), RampKnee::default());
    }

    #[test]
    fn a_ramp_that_starts_past_capacity_stopped_following_at_once() {
        // 5,000 → 6,000/s on a 4,000/s server: throughput never followed.
        // p99 climbs from the start, so the latency answer is only
        // relative to the ramp's own lowest third (the assumption).
        let points: Vec<RampPoint> = (0..10)
            .map(|i| RampPoint {
                t_s: (i + 1) as f64,
                target: 5000.0 + 100.0 * i as f64,
                achieved: 4000.0,
                p99_ms: 10.0 * (i + 1) as f64,
            })
            .collect();
        let k = ramp_knee(&points).unwrap();
        assert_eq!(
            k.throughput_stopped_at,
            Some(ThroughputStopped {
                target: 5000.0,
                achieved: 4000.0,
                t_s: 1.0
            })
        );
        // The lowest 4 intervals' median is 25 ms: the 4th, at 40 ms, is
        // the first past 1.5× of it.
        assert_eq!(k.latency_left_at.map(|l| l.t_s), Some(4.0));
    }

    #[test]
    fn refuses_what_is_not_a_ramp() {
        let points = ramp_past(4000.0);
        assert!(matches!(
            ramp_knee(&points[..4]),
            Err(AnalysisError::NotEnoughPoints { needed: 5, .. })
        ));
        let mut falling = points.clone();
        falling.reverse();
        assert!(ramp_knee(&falling).is_err());
        let mut nan = points;
        nan[3].p99_ms = f64::NAN;
        assert!(ramp_knee(&nan).is_err());
    }

    #[test]
    fn writes_only_the_knees_reached() {
        let k = RampKnee {
            latency_left_at: None,
            throughput_stopped_at: Some(ThroughputStopped {
                target: 4300.0,
                achieved: 4000.0,
                t_s: 11.0,
            }),
        };
        assert_eq!(
            serde_json::to_value(&k).unwrap(),
            serde_json::json!({"throughput_stopped_at": {"target": 4300.0, "achieved": 4000.0, "t_s": 11.0}})
        );
        assert_eq!(
            serde_json::to_value(RampKnee::default()).unwrap(),
            serde_json::json!({})
        );
    }
}
