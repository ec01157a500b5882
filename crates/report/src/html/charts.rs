//! Chart builders shared by the run, sweep and comparison sections.

use loadcell_record::coarse::Coarsened;
use loadcell_record::hist::Micros;
use loadcell_record::resources::ResourceSample;
use loadcell_record::result::{Interval, Merged, StageSummary, StageTarget};

use super::*;
use crate::svg::{Axis, Chart, Series};

/// The classic HdrHistogram percentile axis: `1/(1−p)` on a log scale,
/// labelled from 0% to 99.999%.
pub fn percentile_axis() -> Axis {
    Axis::log("percentile")
        .with_ticks(vec![
            (1.0, "0%".into()),
            (10.0, "90%".into()),
            (100.0, "99%".into()),
            (1e3, "99.9%".into()),
            (1e4, "99.99%".into()),
            (1e5, "99.999%".into()),
        ])
        .with_bounds(1.0, 1e5)
}

/// Latency (ms) against `1/(1−p)` for p from 0 up to 99.999% (or as far
/// as the sample count resolves), ending at the maximum.
pub fn spectrum(h: &Micros) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let xmax = (h.len() as f64).clamp(1.0, 1e5);
    let steps = 125;
    let mut pts = Vec::new();
    for i in 0..=steps {
        let x = 10f64.powf(5.0 * i as f64 / steps as f64);
        if x > xmax {
            break;
        }
        let q = 1.0 - 1.0 / x;
        pts.push((x, h.value_at_quantile(q) as f64 / 1000.0));
    }
    pts.push((xmax, h.max() as f64 / 1000.0));
    pts
}

/// A linear latency axis, or a log one when the tail is two orders of
/// magnitude above the median.
pub(super) fn latency_axis_for(series: &[Series]) -> Axis {
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let max = ys.iter().copied().fold(0.0f64, f64::max);
    let mut sorted: Vec<f64> = ys.iter().copied().filter(|v| *v > 0.0).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    if median > 0.0 && max / median > 100.0 {
        Axis::log("latency (ms, log scale)")
    } else {
        Axis::from_zero("latency (ms)")
    }
}

pub(super) fn spectrum_chart(title: &str, series: Vec<Series>) -> Chart {
    let y = latency_axis_for(&series);
    let mut c = Chart::new(title, percentile_axis(), y).describe(
        "Latency against percentile on the HdrHistogram axis: 1/(1−p), log scale, from 0% to 99.999%.",
    );
    c.series = series;
    c
}

/// Whether `values` step geometrically (1, 2, 4, …) over a wide range.
pub(super) fn geometric(values: &[f64]) -> bool {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.dedup();
    if v.len() < 3 || v[0] <= 0.0 || v[v.len() - 1] / v[0] < 8.0 {
        return false;
    }
    let mut ratios: Vec<f64> = v.windows(2).map(|w| w[1] / w[0]).collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ratios.len() / 2] >= 1.5
}

/// An axis for a swept or labelled numeric parameter: log for geometric
/// steps, with a tick at each value when there are few.
pub(super) fn parameter_axis(label: &str, values: &[f64]) -> Axis {
    let mut axis = if geometric(values) {
        Axis::log(format!("{label} (log scale)"))
    } else {
        Axis::linear(label)
    };
    let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    if !v.is_empty() && v.len() <= 12 {
        axis = axis.with_ticks(v.iter().map(|&x| (x, compact(x))).collect());
    }
    axis
}

/// A categorical axis: positions 0, 1, … labelled with `names`.
pub(super) fn category_axis(label: &str, names: &[String]) -> Axis {
    let n = names.len() as f64;
    Axis::linear(label)
        .with_ticks(
            names
                .iter()
                .enumerate()
                .map(|(i, s)| (i as f64, truncate(s, 14)))
                .collect(),
        )
        .with_bounds(-0.5, n - 0.5)
}

pub(super) fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

/// Seconds since the start of measurement, from zero.
pub(super) fn time_axis() -> Axis {
    let mut a = Axis::linear("time (s)");
    a.min = Some(0.0);
    a
}

/// The target rate of `--stages` as a line over measured time, the same
/// clock as the intervals': each stage from its starting target to its
/// ending one, so a jump (a `0s` stage) is two points at one time. None
/// for `--session-stages`: sessions would need a second y axis, which
/// [`Chart`] lacks, and the stages table lists them.
pub(super) fn stage_targets(stages: &[StageSummary]) -> Option<Series> {
    if stages.is_empty() || stages.iter().any(|s| s.target_of != StageTarget::Rate) {
        return None;
    }
    let mut points: Vec<(f64, f64)> = Vec::new();
    for st in stages {
        for p in [
            (st.start_s, st.target_start),
            (st.start_s + st.duration_s, st.target_end),
        ] {
            // A stage starting where the last one ended adds no point.
            if points.last() != Some(&p) {
                points.push(p);
            }
        }
    }
    Some(Series::new("target", points))
}

/// Measured samples, less a last one taken a sliver after the one before
/// (at the run's end): rates over a few milliseconds are noise, and would
/// draw a spike at the end of every chart.
pub(super) fn measured(samples: &[ResourceSample]) -> Vec<&ResourceSample> {
    let mut m: Vec<&ResourceSample> = samples.iter().filter(|s| s.t_s >= 0.0).collect();
    if let [.., a, b, c] = m[..] {
        if c.t_s - b.t_s < 0.5 * (b.t_s - a.t_s) {
            m.pop();
        }
    }
    m
}

/// Most intervals a chart over time draws: about one per pixel of its
/// width, so a page of day-long runs opens fast.
pub(super) const MAX_DRAWN: usize = 1_000;

/// The intervals to draw over time: all but a last one cut at the run's
/// deadline to less than half the one before, for the same reason (tables
/// and totals still count it); more than [`MAX_DRAWN`] merged in pairs,
/// each keeping its finer intervals' extremes (`merged`) for the bands.
pub(super) fn charted(intervals: &[Interval]) -> Vec<Interval> {
    let whole = match intervals {
        [.., prev, last] if last.duration_s < 0.5 * prev.duration_s => {
            &intervals[..intervals.len() - 1]
        }
        _ => intervals,
    };
    if whole.len() <= MAX_DRAWN {
        return whole.to_vec();
    }
    let mut drawn = Coarsened::new(MAX_DRAWN);
    for interval in whole {
        drawn.push(interval.clone());
    }
    drawn.into_vec()
}

/// A dashed line at an extreme (`of`) of the finer intervals each drawn
/// one merges, an edge of the band around the line drawn, so a stall as
/// short as one of them shows; none when no interval was merged.
pub(super) fn extreme(
    intervals: &[Interval],
    name: String,
    of: fn(&Merged) -> f64,
) -> Option<Series> {
    let points: Vec<(f64, f64)> = intervals
        .iter()
        .filter_map(|i| Some((i.t_s, of(i.merged.as_ref()?))))
        .collect();
    (!points.is_empty()).then(|| Series::new(name, points).dashed())
}

/// Both edges of a throughput band: its lowest and highest finer interval.
pub(super) fn throughput_band(
    intervals: &[Interval],
    name: &str,
    low: fn(&Merged) -> f64,
    high: fn(&Merged) -> f64,
) -> Vec<Series> {
    [
        extreme(intervals, format!("{name}, lowest interval"), low),
        extreme(intervals, format!("{name}, highest interval"), high),
    ]
    .into_iter()
    .flatten()
    .collect()
}
