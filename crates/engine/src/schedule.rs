//! When the next event is due, and whether the run is over.
//!
//! Open loop is one shared schedule for all sessions (like sysbench's event
//! queue, without the queue): each session claims the next due time with
//! one atomic add, waits for it, and the event's latency counts from that
//! time. A session that falls behind claims times already past, so
//! queueing delay shows in the latency instead of being omitted. A run of
//! several session groups has one such rate per group.
//!
//! The schedule begins ([`Schedule::begin`]) once the sessions are
//! connected, so connection set-up is neither measured time nor a backlog
//! of events due before anything could be sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::Rng;

use crate::shape::Shape;
use crate::spec::{Arrival, RateSpec, RunSpec};

pub use loadcell_core::clock::{wait_for_tick, wait_until};

/// Decision for one session asking for its next event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Closed loop: go now.
    Now,
    /// Open loop: the event is due at this instant.
    Due(Instant),
    /// The run is over for this session.
    Stop,
}

/// One group's arrivals.
#[derive(Debug)]
enum Rate {
    Closed,
    Uniform {
        gap_ns: f64,
        /// Where this shard's events fall between the whole run's, in
        /// gaps (`Shard::phase`; 0 unsharded).
        phase: f64,
        next_index: AtomicU64,
    },
    Poisson {
        mean_gap_ns: f64,
        next_offset_ns: AtomicU64,
    },
    /// `--stages`: event `n` is due when the shaped rate's integral
    /// reaches `n + phase` (uniform), or a unit-rate Poisson process's
    /// `n`-th arrival (Poisson, in billionths of an event).
    Shaped {
        profile: Profile,
        poisson: bool,
        phase: f64,
        next: AtomicU64,
    },
}

/// A shaped rate over the run's clock: the warm-up at a constant rate,
/// then the stages.
#[derive(Debug)]
struct Profile {
    warmup_s: f64,
    warm_rate: f64,
    shape: Shape,
}

/// Billionths of an event: a Poisson arrival's position in event units,
/// kept in an integer so sessions claim it with one atomic add.
const EVENT_UNITS: f64 = 1e9;

impl Profile {
    fn warm_events(&self) -> f64 {
        self.warm_rate * self.warmup_s
    }

    /// Seconds from the start at which the integral reaches `n`; `None`
    /// past the last stage.
    fn time_of(&self, n: f64) -> Option<f64> {
        let warm = self.warm_events();
        if n < warm {
            return Some(n / self.warm_rate);
        }
        self.shape.time_of(n - warm).map(|t| self.warmup_s + t)
    }

    /// The events due in the first `t_s` seconds.
    fn count_at(&self, t_s: f64) -> f64 {
        if t_s < self.warmup_s {
            t_s * self.warm_rate
        } else {
            self.warm_events() + self.shape.count_at(t_s - self.warmup_s)
        }
    }
}

#[derive(Debug)]
pub struct Schedule {
    /// Set once, by [`Schedule::begin`]; with it the other instants.
    begun: OnceLock<Begun>,
    warmup: Duration,
    time: Option<Duration>,
    events_limit: Option<u64>,
    measured_claims: AtomicU64,
    /// Each session group's arrivals, with its `RateSpec::tick` in
    /// nanoseconds.
    rates: Vec<(Rate, Option<u64>)>,
}

#[derive(Debug, Clone, Copy)]
struct Begun {
    start: Instant,
    measure_start: Instant,
    deadline: Option<Instant>,
}

impl Schedule {
    pub fn new(spec: &RunSpec) -> Schedule {
        let phase = spec.shard.as_ref().map_or(0.0, |s| s.shard.phase());
        let shaped = |r: RateSpec, shape: &Shape| Rate::Shaped {
            profile: Profile {
                warmup_s: spec.warmup.as_secs_f64(),
                warm_rate: shape.first_target(),
                shape: shape.clone(),
            },
            poisson: r.arrival == Arrival::Poisson,
            phase,
            next: AtomicU64::new(0),
        };
        let rate = |rate: Option<RateSpec>| match rate {
            None => (Rate::Closed, None),
            Some(r) => {
                let gap_ns = 1e9 / r.per_sec;
                let arrivals = match r.arrival {
                    Arrival::Uniform => Rate::Uniform {
                        gap_ns,
                        phase,
                        next_index: AtomicU64::new(0),
                    },
                    Arrival::Poisson => Rate::Poisson {
                        mean_gap_ns: gap_ns,
                        next_offset_ns: AtomicU64::new(0),
                    },
                };
                (arrivals, r.tick_ns())
            }
        };
        Schedule {
            begun: OnceLock::new(),
            warmup: spec.warmup,
            time: spec.time,
            events_limit: spec.events,
            measured_claims: AtomicU64::new(0),
            rates: spec
                .rates()
                .into_iter()
                .enumerate()
                .map(|(group, r)| match (group, r, spec.rate_shape()) {
                    (0, Some(r), Some(shape)) => (shaped(r, shape), r.tick_ns()),
                    (_, r, _) => rate(r),
                })
                .collect(),
        }
    }

    /// Starts the clock of the run at `start` (the first call wins).
    pub fn begin(&self, start: Instant) {
        let measure_start = start + self.warmup;
        let _ = self.begun.set(Begun {
            start,
            measure_start,
            deadline: self.time.map(|t| measure_start + t),
        });
    }

    #[inline]
    fn begun(&self) -> &Begun {
        self.begun
            .get()
            .expect("the schedule is read only after it has begun")
    }

    pub fn start(&self) -> Instant {
        self.begun().start
    }

    pub fn measure_start(&self) -> Instant {
        self.begun().measure_start
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.begun().deadline
    }

    /// Whether the first group (the whole run, with one group) runs at a
    /// rate.
    pub fn is_open_loop(&self) -> bool {
        !matches!(self.rates[0].0, Rate::Closed)
    }

    /// Whether group `group` sends its events in bursts at ticks.
    pub fn is_ticked(&self, group: usize) -> bool {
        self.rates[group].1.is_some()
    }

    /// Claims the next event of a session of group `group`. `now` is the
    /// caller's clock reading.
    #[inline]
    pub fn claim(&self, group: usize, now: Instant, rng: &mut SmallRng) -> Claim {
        let begun = self.begun();
        let (rate, tick_ns) = &self.rates[group];
        let offset_ns = match rate {
            Rate::Closed => None,
            Rate::Shaped {
                profile,
                poisson,
                phase,
                next,
            } => {
                let n = if *poisson {
                    let gap = exponential(rng, EVENT_UNITS);
                    next.fetch_add(gap, Ordering::Relaxed) as f64 / EVENT_UNITS
                } else {
                    next.fetch_add(1, Ordering::Relaxed) as f64 + phase
                };
                match profile.time_of(n) {
                    Some(t) => Some((t * 1e9) as u64),
                    // Past the last stage: nothing more is due.
                    None => return Claim::Stop,
                }
            }
            Rate::Uniform {
                gap_ns,
                phase,
                next_index,
            } => {
                let n = next_index.fetch_add(1, Ordering::Relaxed);
                Some(((n as f64 + phase) * gap_ns) as u64)
            }
            Rate::Poisson {
                mean_gap_ns,
                next_offset_ns,
            } => {
                let gap = exponential(rng, *mean_gap_ns);
                Some(next_offset_ns.fetch_add(gap, Ordering::Relaxed))
            }
        };
        let due = offset_ns.map(|ns| {
            let ns = match *tick_ns {
                Some(tick) => ns.div_ceil(tick) * tick,
                None => ns,
            };
            begun.start + Duration::from_nanos(ns)
        });
        let at = self.counts_at(now, due);
        if let Some(limit) = self.events_limit {
            if at >= begun.measure_start
                && self.measured_claims.fetch_add(1, Ordering::Relaxed) >= limit
            {
                return Claim::Stop;
            }
        }
        match (begun.deadline, due) {
            (Some(d), _) if at >= d || now >= d => Claim::Stop,
            (_, Some(due)) => Claim::Due(due),
            (_, None) => Claim::Now,
        }
    }

    /// When a claimed event counts, for its phase and the limits: when it
    /// is due in open loop (sessions claim ahead of time, so an event
    /// claimed during warm-up may be due after it), else when claimed.
    #[inline]
    pub fn counts_at(&self, now: Instant, due: Option<Instant>) -> Instant {
        due.unwrap_or(now)
    }

    /// Whether an event counting at `at` (see [`Schedule::counts_at`]) is
    /// measured rather than warm-up.
    #[inline]
    pub fn is_measured(&self, at: Instant) -> bool {
        at >= self.begun().measure_start
    }

    /// Once every session has stopped: how many events of each group were
    /// due before `end` but never claimed (sent). Zero for closed loop.
    pub fn unclaimed_before(&self, end: Instant) -> Vec<u64> {
        let elapsed_ns = end.saturating_duration_since(self.start()).as_nanos() as f64;
        self.rates
            .iter()
            .map(|(rate, _)| unclaimed(rate, elapsed_ns))
            .collect()
    }
}

/// How many of `rate`'s events were due in the first `elapsed_ns` but
/// never claimed.
fn unclaimed(rate: &Rate, elapsed_ns: f64) -> u64 {
    match rate {
        Rate::Closed => 0,
        Rate::Shaped {
            profile,
            poisson,
            phase,
            next,
        } => {
            let due = profile.count_at(elapsed_ns / 1e9);
            let claimed = next.load(Ordering::Relaxed) as f64;
            if *poisson {
                (due - claimed / EVENT_UNITS).max(0.0).round() as u64
            } else {
                ((due - phase).ceil().max(0.0) as u64).saturating_sub(claimed as u64)
            }
        }
        Rate::Uniform {
            gap_ns,
            phase,
            next_index,
        } => {
            let due = (elapsed_ns / gap_ns - phase).ceil().max(0.0) as u64;
            due.saturating_sub(next_index.load(Ordering::Relaxed))
        }
        // The arrivals expected in what is left of the window: drawing
        // them one by one would take as long as the run at high rates.
        Rate::Poisson {
            mean_gap_ns,
            next_offset_ns,
        } => {
            let left = elapsed_ns - next_offset_ns.load(Ordering::Relaxed) as f64;
            (left.max(0.0) / mean_gap_ns).round() as u64
        }
    }
}

/// An exponentially distributed gap in whole nanoseconds.
#[inline]
fn exponential(rng: &mut SmallRng, mean_ns: f64) -> u64 {
    // 1 - U is in (0, 1], so the log is finite.
    let u: f64 = 1.0 - rng.random::<f64>();
    (-u.ln() * mean_ns) as u64
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::RateSpec;
    use rand::SeedableRng;

    fn begun(spec: &RunSpec, start: Instant) -> Schedule {
        let s = Schedule::new(spec);
        s.begin(start);
        s
    }

    pub(crate) fn spec(
        rate: Option<RateSpec>,
        time: Option<Duration>,
        events: Option<u64>,
    ) -> RunSpec {
        RunSpec {
            workers: 1,
            threads: 1,
            clients: 1,
            time,
            events,
            warmup: Duration::ZERO,
            rate,
            interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(5),
            connection_policy: Default::default(),
            hold: None,
            groups: None,
            reconnect_timeout: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(5),
            seed: 1,
            server_pid: None,
            server_metrics: None,
            measures_client_cpu: false,
            shard: None,
            start_at: None,
            settle: None,
            stages: None,
        }
    }

    #[test]
    fn uniform_arrivals_are_evenly_spaced() {
        let start = Instant::now();
        let rate = RateSpec {
            per_sec: 1000.0,
            arrival: Arrival::Uniform,
            tick: None,
        };
        let s = begun(&spec(Some(rate), Some(Duration::from_secs(1)), None), start);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut dues = Vec::new();
        while let Claim::Due(d) = s.claim(0, start, &mut rng) {
            dues.push(d - start);
        }
        assert_eq!(dues.len(), 1000);
        assert_eq!(dues[1] - dues[0], Duration::from_millis(1));
        assert_eq!(dues[999], Duration::from_millis(999));
        assert_eq!(s.unclaimed_before(start + Duration::from_secs(1)), [0]);
    }

    fn staged(text: &str, arrival: Arrival) -> RunSpec {
        let shape = Shape::new(crate::shape::parse(text).unwrap()).unwrap();
        let rate = RateSpec {
            per_sec: shape.total() / shape.duration().as_secs_f64(),
            arrival,
            tick: None,
        };
        let mut s = spec(Some(rate), Some(shape.duration()), None);
        s.stages = Some(crate::shape::Stages {
            of: crate::shape::StageTarget::Rate,
            shape,
        });
        s
    }

    /// Every due instant of a schedule claimed at its start, in µs.
    fn dues_us(s: &Schedule, start: Instant) -> Vec<u128> {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut dues = Vec::new();
        while let Claim::Due(d) = s.claim(0, start, &mut rng) {
            dues.push((d - start).as_micros());
        }
        dues
    }

    #[test]
    fn staged_uniform_arrivals_follow_the_stages_exactly() {
        let start = Instant::now();
        let mut whole = staged("0s:1000,1s:1000,0s:4000,500ms:4000,1s:0", Arrival::Uniform);
        whole.warmup = Duration::from_millis(500);
        let s = begun(&whole, start);
        let dues = dues_us(&s, start);
        // 500 warm-up events at the first stage's 1000/s, 1000 + 2000 in
        // the holds, 2000 over the ramp down from 4000/s to 0.
        assert_eq!(dues.len(), 500 + 1000 + 2000 + 2000);
        assert_eq!(dues[1] - dues[0], 1000);
        assert_eq!(dues[1501] - dues[1500], 250, "the spike: 4000/s");
        let in_first_half_of_ramp = dues
            .iter()
            .filter(|&&t| (2_000_000..2_500_000).contains(&t))
            .count();
        assert!((1499..=1501).contains(&in_first_half_of_ramp));
        assert!(*dues.last().unwrap() < 3_000_000);
        assert_eq!(s.unclaimed_before(start + Duration::from_secs(3)), [0]);
    }

    #[test]
    fn staged_shards_together_send_the_whole_shaped_schedule() {
        let start = Instant::now();
        let mut whole = staged("1s:900,0s:1800,1s:1800", Arrival::Uniform);
        whole.threads = 3;
        let everything = dues_us(&begun(&whole, start), start);
        let mut dues = Vec::new();
        for i in 0..3 {
            let part = crate::Shard::new(i, 3).unwrap().of(&whole).unwrap();
            dues.extend(dues_us(&begun(&part, start), start));
        }
        dues.sort_unstable();
        assert_eq!(dues.len(), everything.len());
        for (a, b) in dues.iter().zip(&everything) {
            assert!(a.abs_diff(*b) <= 1, "{a} vs {b}");
        }
    }

    #[test]
    fn staged_poisson_arrivals_average_the_shaped_rate() {
        let start = Instant::now();
        let s = begun(
            &staged("0s:2000,2s:2000,0s:8000,1s:8000", Arrival::Poisson),
            start,
        );
        let dues = dues_us(&s, start);
        let hold = dues.iter().filter(|&&t| t < 2_000_000).count() as f64;
        let spike = dues.len() as f64 - hold;
        assert!((hold - 4000.0).abs() < 4.0 * 4000f64.sqrt(), "{hold}");
        assert!((spike - 8000.0).abs() < 4.0 * 8000f64.sqrt(), "{spike}");
        // Claimed up to 1.5 s only: the rest of the hold and the spike.
        let s = begun(
            &staged("0s:2000,2s:2000,0s:8000,1s:8000", Arrival::Poisson),
            start,
        );
        let mut rng = SmallRng::seed_from_u64(2);
        while let Claim::Due(d) = s.claim(0, start, &mut rng) {
            if d - start > Duration::from_millis(1500) {
                break;
            }
        }
        let left = s.unclaimed_before(start + Duration::from_secs(3))[0] as f64;
        assert!((left - 9000.0).abs() < 4.0 * 9000f64.sqrt(), "{left}");
    }

    #[test]
    fn uniform_shards_together_send_the_whole_schedule() {
        let start = Instant::now();
        let rate = RateSpec {
            per_sec: 900.0,
            arrival: Arrival::Uniform,
            tick: None,
        };
        let mut whole = spec(Some(rate), Some(Duration::from_secs(1)), None);
        whole.threads = 3;
        let mut dues = Vec::new();
        for i in 0..3 {
            let part = crate::Shard::new(i, 3).unwrap().of(&whole).unwrap();
            let s = begun(&part, start);
            let mut rng = SmallRng::seed_from_u64(1);
            while let Claim::Due(d) = s.claim(0, start, &mut rng) {
                dues.push((d - start).as_micros());
            }
            assert_eq!(s.unclaimed_before(start + Duration::from_secs(1)), [0]);
        }
        dues.sort_unstable();
        let expected: Vec<u128> = (0..900).map(|n| n * 1_000_000 / 900).collect();
        assert_eq!(dues.len(), 900);
        for (got, want) in dues.iter().zip(&expected) {
            assert!(got.abs_diff(*want) <= 1, "{got} vs {want}");
        }
    }

    #[test]
    fn ticks_send_each_ticks_events_together_at_its_end() {
        let start = Instant::now();
        let rate = RateSpec {
            per_sec: 10_000.0,
            arrival: Arrival::Uniform,
            tick: Some(Duration::from_millis(1)),
        };
        let s = begun(&spec(Some(rate), Some(Duration::from_secs(1)), None), start);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut dues = Vec::new();
        while let Claim::Due(d) = s.claim(0, start, &mut rng) {
            dues.push(d - start);
        }
        // The same 10k events in the second, ten at each millisecond: the
        // first at the start, then those due in (0, 1 ms] at 1 ms, ...
        assert_eq!(dues.len(), 9991);
        assert_eq!(dues[0], Duration::ZERO);
        assert!(dues[1..=10].iter().all(|&d| d == Duration::from_millis(1)));
        assert_eq!(dues[11], Duration::from_millis(2));
        assert!(dues
            .iter()
            .all(|d| d.as_nanos() % 1_000_000 == 0 && *d < Duration::from_secs(1)));
    }

    #[test]
    fn poisson_arrivals_have_exponential_gaps() {
        let start = Instant::now();
        let rate = RateSpec {
            per_sec: 10_000.0,
            arrival: Arrival::Poisson,
            tick: None,
        };
        let s = begun(
            &spec(Some(rate), Some(Duration::from_secs(10)), None),
            start,
        );
        let mut rng = SmallRng::seed_from_u64(7);
        let mut dues = Vec::new();
        while let Claim::Due(d) = s.claim(0, start, &mut rng) {
            dues.push((d - start).as_nanos() as f64);
        }
        // 10 s at 10k/s: about 100k arrivals (sd ~316).
        assert!(
            (dues.len() as f64 - 100_000.0).abs() < 2_000.0,
            "{}",
            dues.len()
        );
        let gaps: Vec<f64> = dues.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        // Exponential: mean 100 µs and coefficient of variation 1.
        assert!((mean - 100_000.0).abs() < 2_000.0, "mean gap {mean}");
        let cv = var.sqrt() / mean;
        assert!((cv - 1.0).abs() < 0.03, "cv {cv}");
    }

    #[test]
    fn unclaimed_counts_backlog_at_the_end() {
        let start = Instant::now();
        let rate = RateSpec {
            per_sec: 100.0,
            arrival: Arrival::Uniform,
            tick: None,
        };
        let s = begun(&spec(Some(rate), Some(Duration::from_secs(1)), None), start);
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..40 {
            assert!(matches!(s.claim(0, start, &mut rng), Claim::Due(_)));
        }
        // 100 were due in the first second, 40 were claimed.
        assert_eq!(s.unclaimed_before(start + Duration::from_secs(1)), [60]);
        // Once past the deadline nothing more is handed out.
        let late = start + Duration::from_secs(2);
        assert_eq!(s.claim(0, late, &mut rng), Claim::Stop);
    }

    #[test]
    fn events_limit_counts_only_measured_claims() {
        let start = Instant::now();
        let mut p = spec(None, None, Some(3));
        p.warmup = Duration::from_secs(1);
        let s = begun(&p, start);
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..10 {
            assert_eq!(
                s.claim(0, start, &mut rng),
                Claim::Now,
                "warm-up is unlimited"
            );
        }
        let measured = start + Duration::from_secs(1);
        for _ in 0..3 {
            assert_eq!(s.claim(0, measured, &mut rng), Claim::Now);
        }
        assert_eq!(s.claim(0, measured, &mut rng), Claim::Stop);
    }

    #[test]
    fn open_loop_events_count_in_the_phase_they_are_due_in() {
        let start = Instant::now();
        let rate = RateSpec {
            per_sec: 10.0,
            arrival: Arrival::Uniform,
            tick: None,
        };
        let mut p = spec(Some(rate), None, Some(3));
        p.warmup = Duration::from_secs(1);
        let s = begun(&p, start);
        let mut rng = SmallRng::seed_from_u64(1);
        // All claimed at the start: 10 due in warm-up, then 3 measured.
        let mut measured = 0;
        while let Claim::Due(due) = s.claim(0, start, &mut rng) {
            measured += u32::from(s.is_measured(s.counts_at(start, Some(due))));
        }
        assert_eq!(measured, 3);
    }

    #[test]
    fn poisson_backlog_is_counted_at_once_whatever_the_rate() {
        let start = Instant::now();
        let rate = RateSpec {
            per_sec: 1e12,
            arrival: Arrival::Poisson,
            tick: None,
        };
        let s = begun(&spec(Some(rate), None, None), start);
        // An hour at 10^12/s: 3.6e15 arrivals, counted without drawing them.
        let [n] = s.unclaimed_before(start + Duration::from_secs(3600))[..] else {
            panic!("one group")
        };
        assert!((n as f64 / 3.6e15 - 1.0).abs() < 1e-9, "{n}");
    }

    #[test]
    fn each_session_group_keeps_its_own_rate() {
        let start = Instant::now();
        let mut spec = spec(
            Some(RateSpec {
                per_sec: 1000.0,
                arrival: Arrival::Uniform,
                tick: None,
            }),
            Some(Duration::from_secs(1)),
            None,
        );
        spec.groups = Some(crate::spec::SessionGroups {
            first: "bulk",
            others: vec![
                crate::spec::SessionGroup {
                    name: "query",
                    sessions: 1,
                    rate: Some(RateSpec {
                        per_sec: 10.0,
                        arrival: Arrival::Uniform,
                        tick: None,
                    }),
                },
                crate::spec::SessionGroup {
                    name: "scan",
                    sessions: 1,
                    rate: None,
                },
            ],
        });
        let s = begun(&spec, start);
        let mut rng = SmallRng::seed_from_u64(1);
        let due = |s: &Schedule, group, rng: &mut SmallRng| match s.claim(group, start, rng) {
            Claim::Due(d) => d - start,
            other => panic!("{other:?}"),
        };
        // Interleaved claims do not disturb each other's spacing.
        for n in 0..3u32 {
            assert_eq!(due(&s, 0, &mut rng), Duration::from_millis(1) * n);
            assert_eq!(due(&s, 1, &mut rng), Duration::from_millis(100) * n);
            assert_eq!(s.claim(2, start, &mut rng), Claim::Now);
        }
        // Half a second in: 500 of the first group's due and 3 claimed,
        // 5 of the second's and 3 claimed; closed loop drops nothing.
        let half = start + Duration::from_millis(500);
        assert_eq!(s.unclaimed_before(half), [497, 2, 0]);
    }

    #[test]
    fn closed_loop_stops_at_the_deadline() {
        let start = Instant::now();
        let s = begun(&spec(None, Some(Duration::from_secs(1)), None), start);
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(s.claim(0, start, &mut rng), Claim::Now);
        assert_eq!(
            s.claim(0, start + Duration::from_secs(1), &mut rng),
            Claim::Stop
        );
    }
}
