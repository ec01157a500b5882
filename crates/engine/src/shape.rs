//! Load that changes over time: `--stages 'DUR:RATE,…'` (the open-loop
//! rate) and `--session-stages 'DUR:SESSIONS,…'` (the active sessions),
//! each with k6's meaning: a stage moves linearly from the previous
//! stage's target (0 before the first) to its own over its duration, and a
//! `0s` stage is a jump.
//!
//! A [`Shape`] is that piecewise-linear target over time. For a rate it is
//! also the schedule: the events due by time `t` are the integral of the
//! rate, `count_at(t)`, and the `n`-th event is due when that integral
//! reaches `n` ([`Shape::time_of`], one square root per event). Uniform
//! arrivals put event `n` at `time_of(n)`; Poisson arrivals put it at
//! `time_of(u)` where `u` is a unit-rate Poisson process (sums of
//! exponential gaps of mean 1): the time-rescaling theorem makes that
//! exactly the non-homogeneous Poisson process of the shaped rate.

use std::time::Duration;

pub use loadcell_record::result::StageTarget;

/// One stage: over `duration`, the target moves linearly from the previous
/// stage's to `target`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    pub duration: Duration,
    pub target: f64,
}

/// A stretch of constant or linearly changing target.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Piece {
    start_s: f64,
    duration_s: f64,
    from: f64,
    to: f64,
    /// The integral of the target before this piece.
    before: f64,
}

impl Piece {
    fn integral(&self, tau: f64) -> f64 {
        let slope = (self.to - self.from) / self.duration_s;
        self.from * tau + 0.5 * slope * tau * tau
    }

    /// The `tau` in `[0, duration_s]` at which the integral reaches `area`
    /// (at most the piece's own).
    fn solve(&self, area: f64) -> f64 {
        let slope = (self.to - self.from) / self.duration_s;
        // (slope/2)τ² + from·τ − area = 0, in the form that stays exact
        // when the slope is small or the rate starts at 0.
        let root = (self.from * self.from + 2.0 * slope * area).max(0.0).sqrt();
        let denominator = self.from + root;
        if denominator <= 0.0 {
            return 0.0;
        }
        (2.0 * area / denominator).min(self.duration_s)
    }
}

/// A piecewise-linear target over time.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    stages: Vec<Stage>,
    /// The stages of non-zero length (a jump has none).
    pieces: Vec<Piece>,
    total_s: f64,
}

impl Shape {
    /// The shape of `stages`. Refuses no stages, negative or non-finite
    /// targets and a shape of no length.
    pub fn new(stages: Vec<Stage>) -> Result<Shape, String> {
        if stages.is_empty() {
            return Err("no stages: give DURATION:TARGET, … (e.g. 30s:1000,1m:1000)".into());
        }
        let mut pieces = Vec::new();
        let (mut t, mut level, mut area) = (0.0, 0.0, 0.0);
        for s in &stages {
            if !s.target.is_finite() || s.target < 0.0 {
                return Err(format!(
                    "a stage's target must be 0 or more, not {}",
                    s.target
                ));
            }
            let d = s.duration.as_secs_f64();
            if d > 0.0 {
                let piece = Piece {
                    start_s: t,
                    duration_s: d,
                    from: level,
                    to: s.target,
                    before: area,
                };
                area += piece.integral(d);
                pieces.push(piece);
            }
            t += d;
            level = s.target;
        }
        if t <= 0.0 {
            return Err("the stages last no time: give at least one a duration above 0s".into());
        }
        Ok(Shape {
            stages,
            pieces,
            total_s: t,
        })
    }

    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// How long the stages last in all.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.total_s)
    }

    /// The highest target.
    pub fn peak(&self) -> f64 {
        self.stages.iter().map(|s| s.target).fold(0.0, f64::max)
    }

    /// The first stage's target: what a warm-up before the stages holds.
    pub fn first_target(&self) -> f64 {
        self.stages[0].target
    }

    /// The integral of the target over the whole shape (for a rate, its
    /// events).
    pub fn total(&self) -> f64 {
        self.pieces
            .last()
            .map_or(0.0, |p| p.before + p.integral(p.duration_s))
    }

    /// The piece holding `t_s` (the last one that starts at or before it).
    fn piece_at(&self, t_s: f64) -> Option<&Piece> {
        let i = self.pieces.partition_point(|p| p.start_s <= t_s);
        i.checked_sub(1).map(|i| &self.pieces[i])
    }

    /// The target at `t_s` seconds into the shape (after a jump, the new
    /// target; past the end, the last target).
    pub fn target_at(&self, t_s: f64) -> f64 {
        match self.piece_at(t_s) {
            Some(p) if t_s < p.start_s + p.duration_s => {
                p.from + (p.to - p.from) * (t_s - p.start_s) / p.duration_s
            }
            _ => self.target_after(t_s),
        }
    }

    /// The target of the last stage ending at or before `t_s`.
    fn target_after(&self, t_s: f64) -> f64 {
        let mut end = 0.0;
        let mut level = 0.0;
        for s in &self.stages {
            end += s.duration.as_secs_f64();
            if end > t_s {
                break;
            }
            level = s.target;
        }
        level
    }

    /// The integral of the target over the first `t_s` seconds.
    pub fn count_at(&self, t_s: f64) -> f64 {
        match self.piece_at(t_s) {
            None => 0.0,
            Some(p) => p.before + p.integral((t_s - p.start_s).min(p.duration_s)),
        }
    }

    /// The mean target from `from_s` to `to_s` (a warm-up before 0 holds
    /// the first stage's target): for a rate, the events due then over the
    /// time.
    pub fn mean_over(&self, from_s: f64, to_s: f64) -> f64 {
        if to_s <= from_s {
            return self.target_at(to_s.max(0.0));
        }
        let warm = (to_s.min(0.0) - from_s).max(0.0) * self.first_target();
        let staged = self.count_at(to_s.max(0.0)) - self.count_at(from_s.max(0.0));
        (warm + staged) / (to_s - from_s)
    }

    /// When the integral reaches `n`; `None` when the whole shape holds
    /// less.
    pub fn time_of(&self, n: f64) -> Option<f64> {
        if n > self.total() {
            return None;
        }
        // The last piece whose integral starts at or below n: after a
        // stretch at 0, the piece where events start again.
        let i = self.pieces.partition_point(|p| p.before <= n);
        let p = &self.pieces[i.checked_sub(1)?];
        Some(p.start_s + p.solve(n - p.before))
    }

    /// Each stage's start and end in seconds, its targets at both ends.
    pub fn spans(&self) -> Vec<StageSpan> {
        let mut t = 0.0;
        let mut level = 0.0;
        self.stages
            .iter()
            .map(|s| {
                let d = s.duration.as_secs_f64();
                let span = StageSpan {
                    start_s: t,
                    end_s: t + d,
                    target_start: level,
                    target_end: s.target,
                };
                t += d;
                level = s.target;
                span
            })
            .collect()
    }

    /// The same shape with every target multiplied by `factor` (a shard's
    /// share).
    pub fn scaled(&self, factor: f64) -> Shape {
        let stages = self
            .stages
            .iter()
            .map(|s| Stage {
                duration: s.duration,
                target: s.target * factor,
            })
            .collect();
        Shape::new(stages).expect("scaling keeps a valid shape valid")
    }
}

/// A run's load over its measured time: a shape of rates (`--stages`) or
/// of sessions (`--session-stages`), as the result's stages record it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stages {
    pub of: StageTarget,
    pub shape: Shape,
}

impl Stages {
    /// How many sessions run events at `t_s` seconds into the measurement
    /// (negative in warm-up, which holds the first stage's target): the
    /// target rounded down, as a session runs whole or not at all.
    pub fn active_sessions(&self, t_s: f64) -> usize {
        let level = if t_s < 0.0 {
            self.shape.first_target()
        } else {
            self.shape.target_at(t_s)
        };
        // A ramp that reaches 3 at its end has 3, not 2.999….
        (level + 1e-9).floor() as usize
    }

    /// When, at `t_s` or later, at least `sessions` run events; `None`
    /// when never again within the shape.
    pub fn first_time_with(&self, sessions: usize, t_s: f64) -> Option<f64> {
        if self.active_sessions(t_s) >= sessions {
            return Some(t_s);
        }
        let level = sessions as f64 - 1e-9;
        self.shape
            .spans()
            .into_iter()
            .filter(|s| s.end_s >= t_s.max(0.0))
            .find_map(|s| {
                if s.end_s == s.start_s {
                    // A jump.
                    return (s.target_end >= level).then_some(s.start_s);
                }
                if s.target_end < level {
                    return None;
                }
                // The ramp crosses `level` (it ends at or above it).
                let at = if s.target_start >= level {
                    s.start_s
                } else {
                    s.start_s
                        + (sessions as f64 - s.target_start) / (s.target_end - s.target_start)
                            * (s.end_s - s.start_s)
                };
                Some(at.max(t_s))
            })
    }
}

/// Where a stage lies in the shape, and its targets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageSpan {
    pub start_s: f64,
    pub end_s: f64,
    pub target_start: f64,
    pub target_end: f64,
}

/// Parses `DUR:TARGET,…` (`30s:1000,0s:8000,2m:8000`); durations as
/// humantime reads them (`0s`, `500ms`, `1m30s`).
pub fn parse(text: &str) -> Result<Vec<Stage>, String> {
    text.split(',')
        .map(str::trim)
        .map(|s| {
            let (d, t) = s.split_once(':').ok_or_else(|| {
                format!("stage '{s}' is not DURATION:TARGET (e.g. 30s:1000, or 0s:8000 for a jump)")
            })?;
            let d = d.trim();
            if d.starts_with('-') {
                return Err(format!("stage '{s}': a duration cannot be negative"));
            }
            let duration = if d == "0" {
                Duration::ZERO
            } else {
                humantime::parse_duration(d)
                    .map_err(|e| format!("stage '{s}': duration '{d}': {e}"))?
            };
            let target: f64 = t
                .trim()
                .parse()
                .map_err(|_| format!("stage '{s}': target '{}' is not a number", t.trim()))?;
            if !target.is_finite() || target < 0.0 {
                return Err(format!("stage '{s}': a target must be 0 or more"));
            }
            Ok(Stage { duration, target })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Shape {
        Shape::new(parse(text).unwrap()).unwrap()
    }

    #[test]
    fn a_hold_is_a_constant_rate() {
        let s = shape("0s:2000,3s:2000");
        assert_eq!(s.total(), 6000.0);
        assert_eq!(s.time_of(1000.0), Some(0.5));
        assert_eq!(s.target_at(1.0), 2000.0);
        assert_eq!(s.count_at(1.5), 3000.0);
        assert_eq!(s.time_of(6001.0), None);
    }

    #[test]
    fn the_mean_over_an_interval_is_its_due_events_over_its_time() {
        let s = shape("0s:1000,2s:1000,2s:3000");
        assert_eq!(s.mean_over(-1.0, 0.0), 1000.0);
        assert_eq!(s.mean_over(-1.0, 1.0), 1000.0);
        assert_eq!(s.mean_over(2.0, 4.0), 2000.0);
        assert_eq!(s.mean_over(3.0, 3.0), 2000.0);
    }

    #[test]
    fn a_ramp_from_zero_integrates_to_a_triangle() {
        let s = shape("10s:1000");
        assert!((s.total() - 5000.0).abs() < 1e-9);
        // Half the events by t = 10/√2.
        let t = s.time_of(2500.0).unwrap();
        assert!((t - 10.0 / 2f64.sqrt()).abs() < 1e-9, "{t}");
        assert!((s.count_at(t) - 2500.0).abs() < 1e-6);
        assert_eq!(s.target_at(5.0), 500.0);
        assert_eq!(s.time_of(0.0), Some(0.0));
    }

    #[test]
    fn a_ramp_down_and_jumps_invert_exactly() {
        let s = shape("0s:2000,3s:2000,0s:8000,2s:8000,0s:2000,8s:2000,4s:0");
        assert_eq!(s.total(), 6000.0 + 16000.0 + 16000.0 + 4000.0);
        for n in [0.0, 5999.0, 6000.5, 21999.0, 30000.0, 39000.0, 41999.0] {
            let t = s.time_of(n).unwrap();
            assert!((s.count_at(t) - n).abs() < 1e-6, "{n} at {t}");
        }
        // The spike starts at 3 s, jumps back at 5 s.
        assert_eq!(s.target_at(3.0), 8000.0);
        assert_eq!(s.target_at(4.999), 8000.0);
        assert_eq!(s.target_at(5.0), 2000.0);
        assert_eq!(s.target_at(15.0), 1000.0);
        assert_eq!(s.duration(), Duration::from_secs(17));
    }

    #[test]
    fn a_stretch_at_zero_holds_no_events() {
        let s = shape("2s:0,0s:100,1s:100");
        assert_eq!(s.total(), 100.0);
        assert_eq!(s.time_of(0.0), Some(2.0));
        assert_eq!(s.time_of(50.0), Some(2.5));
    }

    #[test]
    fn bad_stages_are_refused_with_what_is_wrong() {
        for (text, says) in [
            ("30s", "not DURATION:TARGET"),
            ("-1s:100", "cannot be negative"),
            ("1s:-5", "0 or more"),
            ("1s:lots", "not a number"),
            ("soon:100", "duration 'soon'"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        assert!(Shape::new(parse("0s:100").unwrap())
            .unwrap_err()
            .contains("no time"));
    }

    #[test]
    fn a_shards_share_is_the_shape_scaled() {
        let s = shape("1s:100,1s:300").scaled(0.25);
        assert_eq!(s.stages()[1].target, 75.0);
        assert_eq!(s.total(), (50.0 + 200.0) * 0.25);
    }

    #[test]
    fn sessions_wake_when_the_shape_reaches_them() {
        let stages = Stages {
            of: StageTarget::Sessions,
            shape: shape("0s:2,4s:2,4s:6,0s:1,2s:1,0s:4,1s:4"),
        };
        // Warm-up holds the first target.
        assert_eq!(stages.active_sessions(-1.0), 2);
        assert_eq!(stages.active_sessions(5.0), 3);
        assert_eq!(stages.active_sessions(8.0), 1);
        // Session 3 (the fourth) runs from t = 6 s on the ramp 2 → 6 over
        // 4..8 s, stops at the drop to 1 at 8 s, and is back at 10 s.
        assert_eq!(stages.first_time_with(4, 0.0), Some(6.0));
        assert_eq!(stages.first_time_with(4, 8.5), Some(10.0));
        assert_eq!(stages.first_time_with(2, 3.0), Some(3.0));
        assert_eq!(stages.first_time_with(7, 0.0), None);
        assert_eq!(stages.first_time_with(5, 10.0), None);
    }
}
