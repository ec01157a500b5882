//! Series that keep a bounded number of points however long a run lasts:
//! full resolution up to the bound, then adjacent pairs merged, so memory
//! and result size depend on the configuration, not on the duration. The
//! full resolution goes to the HdrHistogram interval log on disk.

use std::collections::{BTreeMap, VecDeque};

use crate::hist::{self, LatencySummary};
use crate::resources::ResourceSample;
use crate::result::{counted_rate, Interval, IntervalLatency, Merged};

/// Most points a series keeps: an hour of 1 s intervals at full
/// resolution with the last one the run's end cuts short (3,601), and at
/// least 1,800 points over any longer run (as many as a chart can show).
/// Even, so that a full series merges in exact pairs.
pub const MAX_POINTS: usize = 3_602;

/// A point that can take in the next one in time.
pub trait Coarsen {
    /// What merging keeps from one merge to the next (buffers).
    type Scratch: Default;

    /// Folds `later` into `self`; `weights` are how many fine points each
    /// of them stands for.
    fn absorb(&mut self, later: Self, weights: (u64, u64), scratch: &mut Self::Scratch);
}

/// Points in time order, at most `bound` of them: when the series is
/// full its points are merged in pairs and each new point from then on
/// stands for twice as many fine ones. The pairs are merged one per push,
/// not all at once: a merge of thousands would stall the collector, and
/// the intervals piling up meanwhile would each take stats of their own.
pub struct Coarsened<T: Coarsen> {
    bound: usize,
    /// In time order: `done`, then `pairing`, then `tail`.
    done: Vec<T>,
    /// Points of half the current width, still to be merged in pairs.
    pairing: VecDeque<T>,
    /// Points of the current width that came while `pairing` was merged.
    tail: Vec<T>,
    /// Fine points per new point.
    width: u64,
    /// The point being filled, and how many fine points it holds.
    open: Option<(T, u64)>,
    scratch: T::Scratch,
}

impl<T: Coarsen> Coarsened<T> {
    pub fn new(bound: usize) -> Coarsened<T> {
        assert!(
            bound >= 2 && bound.is_multiple_of(2),
            "a bound merges in pairs"
        );
        Coarsened {
            bound,
            done: Vec::new(),
            pairing: VecDeque::new(),
            tail: Vec::new(),
            width: 1,
            open: None,
            scratch: T::Scratch::default(),
        }
    }

    /// Points kept, the one being filled aside.
    fn len(&self) -> usize {
        self.done.len() + self.pairing.len() + self.tail.len()
    }

    /// Merges the next pair of `pairing`, if any.
    fn merge_a_pair(&mut self) {
        if let (Some(mut first), Some(second)) =
            (self.pairing.pop_front(), self.pairing.pop_front())
        {
            let half = self.width / 2;
            first.absorb(second, (half, half), &mut self.scratch);
            self.done.push(first);
            if self.pairing.is_empty() {
                self.done.append(&mut self.tail);
            }
        }
    }

    pub fn push(&mut self, point: T) {
        self.merge_a_pair();
        let (open, n) = match self.open.take() {
            None => (point, 1),
            Some((mut open, n)) => {
                open.absorb(point, (n, 1), &mut self.scratch);
                (open, n + 1)
            }
        };
        if n < self.width {
            self.open = Some((open, n));
            return;
        }
        if self.pairing.is_empty() {
            self.done.push(open);
        } else {
            self.tail.push(open);
        }
        if self.pairing.is_empty() && self.len() == self.bound {
            self.pairing = std::mem::take(&mut self.done).into();
            self.width *= 2;
        }
    }

    /// Every point, the last one possibly standing for fewer fine ones.
    pub fn into_vec(mut self) -> Vec<T> {
        while !self.pairing.is_empty() {
            self.merge_a_pair();
        }
        let mut all = self.done;
        all.extend(self.open.map(|(open, _)| open));
        all
    }
}

impl Merged {
    /// What one fine interval contributes.
    fn of(i: &Interval) -> Merged {
        i.merged.clone().unwrap_or(Merged {
            intervals: 1,
            ops_per_sec_min: i.ops_per_sec,
            ops_per_sec_max: i.ops_per_sec,
            events_per_sec_min: i.events_per_sec,
            events_per_sec_max: i.events_per_sec,
            p99_max: i.latency_ms.p99,
        })
    }

    fn with(self, other: Merged) -> Merged {
        Merged {
            intervals: self.intervals + other.intervals,
            ops_per_sec_min: self.ops_per_sec_min.min(other.ops_per_sec_min),
            ops_per_sec_max: self.ops_per_sec_max.max(other.ops_per_sec_max),
            events_per_sec_min: self.events_per_sec_min.min(other.events_per_sec_min),
            events_per_sec_max: self.events_per_sec_max.max(other.events_per_sec_max),
            p99_max: self.p99_max.max(other.p99_max),
        }
    }
}

fn sum_options(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// Counts summed, rates recomputed over the summed duration, latency from
/// the summed histogram, and the fine intervals' spread kept in `merged`.
impl Coarsen for Interval {
    type Scratch = hist::Codec;

    fn absorb(&mut self, later: Interval, _weights: (u64, u64), codec: &mut hist::Codec) {
        codec.sum.reset();
        codec
            .add(&self.histogram)
            .and_then(|()| codec.add(&later.histogram))
            .expect("interval histograms are our own");
        let merged = Merged::of(self).with(Merged::of(&later));
        let duration_s = self.duration_s + later.duration_s;
        let per_sec = |n: u64| {
            if duration_s > 0.0 {
                n as f64 / duration_s
            } else {
                0.0
            }
        };
        let (items, items_per_sec) = counted_rate(
            sum_options(self.items, later.items).unwrap_or(0),
            duration_s,
        );
        let counters = match (self.counters.take(), later.counters) {
            (Some(mut mine), Some(theirs)) => {
                for (name, n) in theirs {
                    *mine.entry(name).or_default() += n;
                }
                Some(mine)
            }
            (mine, theirs) => mine.or(theirs),
        };
        let l = LatencySummary::of(&codec.sum);
        *self = Interval {
            t_s: later.t_s,
            duration_s,
            ops: self.ops + later.ops,
            ops_per_sec: per_sec(self.ops + later.ops),
            events: self.events + later.events,
            events_per_sec: per_sec(self.events + later.events),
            errors: self.errors + later.errors,
            retries: self.retries + later.retries,
            reconnects: self.reconnects + later.reconnects,
            items,
            items_per_sec,
            counters,
            latency_ms: IntervalLatency {
                p50: l.p50,
                p95: l.p95,
                p99: l.p99,
                max: l.max,
            },
            // A gauge: its value at the end.
            connections_held: later.connections_held,
            gauges: crate::result::highest_gauges(self.gauges.take(), later.gauges.as_ref()),
            histogram: codec.encode_sum(),
            merged: Some(merged),
        };
    }
}

/// Weighted means of every figure; the time is the later one's.
impl Coarsen for ResourceSample {
    type Scratch = ();

    fn absorb(&mut self, later: ResourceSample, (mine, theirs): (u64, u64), (): &mut ()) {
        let total = (mine + theirs) as f64;
        let mean = |a: f64, b: f64| (a * mine as f64 + b * theirs as f64) / total;
        let mean_u64 = |a: u64, b: u64| mean(a as f64, b as f64).round() as u64;
        let either = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(mean(a, b)),
            (a, b) => a.or(b),
        };
        let ResourceSample {
            t_s,
            client_cpu_pct,
            client_rss_bytes,
            host_cpu_pct,
            host_cpus,
            load_1m,
            net_rx_bytes_per_s,
            net_tx_bytes_per_s,
            disk_read_bytes_per_s,
            disk_write_bytes_per_s,
            disk_busy_pct,
            server_cpu_pct,
            server_rss_bytes,
            server_disk_bytes_per_s,
            server,
            remote,
        } = later;
        self.t_s = t_s;
        self.client_cpu_pct = mean(self.client_cpu_pct, client_cpu_pct);
        self.client_rss_bytes = mean_u64(self.client_rss_bytes, client_rss_bytes);
        self.host_cpu_pct = mean(self.host_cpu_pct, host_cpu_pct);
        self.host_cpus = host_cpus;
        self.load_1m = mean(self.load_1m, load_1m);
        self.net_rx_bytes_per_s = mean(self.net_rx_bytes_per_s, net_rx_bytes_per_s);
        self.net_tx_bytes_per_s = mean(self.net_tx_bytes_per_s, net_tx_bytes_per_s);
        self.disk_read_bytes_per_s = mean(self.disk_read_bytes_per_s, disk_read_bytes_per_s);
        self.disk_write_bytes_per_s = mean(self.disk_write_bytes_per_s, disk_write_bytes_per_s);
        self.disk_busy_pct = mean(self.disk_busy_pct, disk_busy_pct);
        self.server_cpu_pct = either(self.server_cpu_pct, server_cpu_pct);
        self.server_rss_bytes = match (self.server_rss_bytes, server_rss_bytes) {
            (Some(a), Some(b)) => Some(mean_u64(a, b)),
            (a, b) => a.or(b),
        };
        self.server_disk_bytes_per_s =
            either(self.server_disk_bytes_per_s, server_disk_bytes_per_s);
        let mut counters: BTreeMap<String, f64> = std::mem::take(&mut self.server);
        for (name, value) in server {
            let mean_value = either(counters.get(&name).copied(), Some(value));
            counters.insert(name, mean_value.expect("one side has it"));
        }
        self.server = counters;
        for r in remote {
            match self.remote.iter_mut().find(|mine| mine.host == r.host) {
                Some(mine) => mine.absorb(r, &either),
                None => self.remote.push(r),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Stats;

    /// A 1 s interval ending at `t` with `events` events of `ms` each.
    fn interval(t: u64, events: u64, ms: u64) -> Interval {
        let mut s = Stats::new(1);
        for _ in 0..events {
            s.record_op(0, Duration::from_millis(ms), true);
            s.record_event(Duration::from_millis(ms), Duration::from_millis(ms), None);
        }
        Interval::from_stats(t as f64, 1.0, &s)
    }

    #[test]
    fn a_series_never_holds_more_than_its_bound_and_merges_evenly() {
        let mut series = Coarsened::new(8);
        for t in 1..=100 {
            series.push(interval(t, 10, 1));
            assert!(series.len() <= 8);
            // Never more than one pair merged per push.
            assert!(series.pairing.len() <= 8);
        }
        let all = series.into_vec();
        assert!(all.len() <= 8, "{}", all.len());
        let widths: Vec<u64> = all
            .iter()
            .map(|i| i.merged.as_ref().unwrap().intervals)
            .collect();
        assert_eq!(widths.iter().sum::<u64>(), 100, "{widths:?}");
        // Coarser first, as the series grew.
        assert!(widths.windows(2).all(|w| w[0] >= w[1]), "{widths:?}");
        // The last one may be partly filled.
        assert!(
            widths[..widths.len() - 1]
                .iter()
                .all(|w| w.is_power_of_two()),
            "{widths:?}"
        );
        assert!(all.windows(2).all(|w| w[0].t_s < w[1].t_s));
        assert_eq!(all.iter().map(|i| i.events).sum::<u64>(), 1000);
        assert_eq!(all.last().unwrap().t_s, 100.0);
        assert_eq!(all[0].duration_s, widths[0] as f64);
        assert_eq!(all[0].events_per_sec, 10.0);
    }

    #[test]
    fn an_hour_of_seconds_and_its_cut_short_last_interval_stay_whole() {
        let mut series = Coarsened::new(MAX_POINTS);
        for t in 1..=3_601 {
            series.push(interval(t, 1, 1));
        }
        let all = series.into_vec();
        assert_eq!(all.len(), 3_601);
        assert!(all.iter().all(|i| i.merged.is_none()));
    }

    #[test]
    fn merged_intervals_keep_the_highest_gauge_of_each_name() {
        let mut series = Coarsened::new(2);
        for (t, lag) in [(1, Some(7)), (2, None), (3, Some(40)), (4, None)] {
            let mut i = interval(t, 10, 1);
            i.gauges = lag.map(|n| [("lag_rows".to_string(), n)].into());
            series.push(i);
        }
        let all = series.into_vec();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].gauges, Some([("lag_rows".to_string(), 40)].into()));
    }

    #[test]
    fn a_one_interval_stall_stays_visible_in_its_merged_interval() {
        let mut series = Coarsened::new(2);
        for t in 1..=4 {
            // Interval 3 stalls: one event, of 900 ms.
            series.push(if t == 3 {
                interval(t, 1, 900)
            } else {
                interval(t, 100, 2)
            });
        }
        let all = series.into_vec();
        assert_eq!(all.len(), 1);
        let m = all[0].merged.as_ref().unwrap();
        assert_eq!(
            (m.intervals, m.events_per_sec_min, m.events_per_sec_max),
            (4, 1.0, 100.0)
        );
        assert!(m.p99_max > 890.0, "{m:?}");
        // The merged p99 hides the stall; its histogram does not.
        assert!(all[0].latency_ms.p99 < 3.0, "{:?}", all[0].latency_ms);
        assert!(all[0].latency_ms.max > 890.0);
        let h = hist::decode(&all[0].histogram).unwrap();
        assert_eq!(h.len(), 301);
    }

    #[test]
    fn resource_samples_are_averaged_by_how_many_they_stand_for() {
        let sample = |t: f64, cpu: f64| ResourceSample {
            t_s: t,
            client_cpu_pct: cpu,
            server_cpu_pct: Some(cpu),
            server: [("ops_per_s".to_string(), cpu)].into(),
            ..ResourceSample::default()
        };
        let mut series = Coarsened::new(2);
        for (t, cpu) in [(1.0, 10.0), (2.0, 20.0), (3.0, 60.0)] {
            series.push(sample(t, cpu));
        }
        // (10 + 20) / 2 kept at width 2, then 60 open.
        let all = series.into_vec();
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].t_s, all[0].client_cpu_pct), (2.0, 15.0));
        let mut three = all[0].clone();
        three.absorb(all[1].clone(), (2, 1), &mut ());
        assert_eq!(three.client_cpu_pct, 30.0);
        assert_eq!(three.server_cpu_pct, Some(30.0));
        assert_eq!(three.server["ops_per_s"], 30.0);
    }
}
