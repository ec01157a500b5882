//! Series that keep a bounded number of points however long a run lasts:
//! full resolution up to the bound, then adjacent pairs merged, so memory
//! and result size depend on the configuration, not on the duration. The
//! full resolution goes to the HdrHistogram interval log on disk.

use std::collections::BTreeMap;

use crate::hist::{self, LatencySummary};
use crate::resources::ResourceSample;
use crate::result::{counted_rate, Interval, IntervalLatency, Merged};

/// Most points a series keeps: an hour of 1 s intervals at full
/// resolution, and at least 1,800 points over any longer run (as many as
/// a chart can show). Even, so that a full series merges in exact pairs.
pub const MAX_POINTS: usize = 3_600;

/// A point that can take in the next one in time.
pub trait Coarsen {
    /// Folds `later` into `self`; `weights` are how many fine points each
    /// of them stands for.
    fn absorb(&mut self, later: Self, weights: (u64, u64));
}

/// Points in time order, at most `bound` of them: when the series is
/// full its points are merged in pairs and each new point from then on
/// stands for twice as many fine ones.
#[derive(Debug)]
pub struct Coarsened<T> {
    bound: usize,
    kept: Vec<T>,
    /// Fine points per kept one.
    width: u64,
    /// The point being filled, and how many fine points it holds.
    open: Option<(T, u64)>,
}

impl<T: Coarsen> Coarsened<T> {
    pub fn new(bound: usize) -> Coarsened<T> {
        assert!(
            bound >= 2 && bound.is_multiple_of(2),
            "a bound merges in pairs"
        );
        Coarsened {
            bound,
            kept: Vec::new(),
            width: 1,
            open: None,
        }
    }

    pub fn push(&mut self, point: T) {
        let (open, n) = match self.open.take() {
            None => (point, 1),
            Some((mut open, n)) => {
                open.absorb(point, (n, 1));
                (open, n + 1)
            }
        };
        if n < self.width {
            self.open = Some((open, n));
            return;
        }
        self.kept.push(open);
        if self.kept.len() == self.bound {
            let mut pairs = std::mem::take(&mut self.kept).into_iter();
            while let (Some(mut first), Some(second)) = (pairs.next(), pairs.next()) {
                first.absorb(second, (self.width, self.width));
                self.kept.push(first);
            }
            self.width *= 2;
        }
    }

    /// Every point, the last one possibly standing for fewer fine ones.
    pub fn into_vec(self) -> Vec<T> {
        let mut all = self.kept;
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
    fn absorb(&mut self, later: Interval, _weights: (u64, u64)) {
        let decode = |text: &str| hist::decode(text).expect("interval histograms are our own");
        let mut h = decode(&self.histogram);
        h.add(decode(&later.histogram))
            .expect("interval histograms share their bounds");
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
        let l = LatencySummary::of(&h);
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
            histogram: hist::encode(&h),
            merged: Some(merged),
        };
    }
}

/// Weighted means of every figure; the time is the later one's.
impl Coarsen for ResourceSample {
    fn absorb(&mut self, later: ResourceSample, (mine, theirs): (u64, u64)) {
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
            assert!(series.kept.len() < 8);
        }
        let all = series.into_vec();
        assert!(all.len() <= 8, "{}", all.len());
        // 100 fine intervals: 6 of 16 each and a last one of 4.
        let widths: Vec<u64> = all
            .iter()
            .map(|i| i.merged.as_ref().unwrap().intervals)
            .collect();
        assert_eq!(widths, [16, 16, 16, 16, 16, 16, 4]);
        assert_eq!(all.iter().map(|i| i.events).sum::<u64>(), 1000);
        assert_eq!(all.last().unwrap().t_s, 100.0);
        assert_eq!(all[0].duration_s, 16.0);
        assert_eq!(all[0].events_per_sec, 10.0);
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
        three.absorb(all[1].clone(), (2, 1));
        assert_eq!(three.client_cpu_pct, 30.0);
        assert_eq!(three.server_cpu_pct, Some(30.0));
        assert_eq!(three.server["ops_per_s"], 30.0);
    }
}
