//! A small SVG chart writer for reports: line and point series, error
//! bars, linear or log axes with round-number ticks, vertical and
//! horizontal markers, and a legend. No scripts, fonts or external
//! references: the output is meant to be inlined into an HTML page (it
//! carries no `xmlns`, which inline SVG does not need).
//!
//! Series are told apart by colour (the Okabe–Ito palette, safe for the
//! common kinds of colour blindness), by marker shape and, past the
//! palette's length, by dash pattern, so charts also read in greyscale
//! print.

use std::fmt::Write as _;

/// Okabe–Ito colours, in the order series take them.
pub const PALETTE: [&str; 7] = [
    "#0072B2", // blue
    "#D55E00", // vermillion
    "#009E73", // bluish green
    "#CC79A7", // reddish purple
    "#E69F00", // orange
    "#56B4E9", // sky blue
    "#000000", // black
];

/// Dash patterns used once the palette has been gone through.
const DASHES: [&str; 3] = ["", "6 3", "2 3"];

/// The font stack charts use: the reader's system font, nothing fetched.
pub const FONT_STACK: &str =
    "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif";

/// Escapes text for SVG or HTML content and attribute values. Control
/// characters that XML forbids are dropped, and `://` is written with an
/// entity so that no URL-shaped string appears literally in a page.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            ':' if chars.peek() == Some(&'/') => out.push_str("&#58;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{7f}' || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Ticks and number formatting
// ---------------------------------------------------------------------------

/// A round step (1, 2 or 5 times a power of ten) giving about `target`
/// intervals over `span`.
pub fn nice_step(span: f64, target: usize) -> f64 {
    let span = span.abs();
    if !span.is_finite() || span == 0.0 {
        return 1.0;
    }
    let rough = span / target.max(1) as f64;
    let mag = 10f64.powf(rough.log10().floor());
    let residual = rough / mag;
    // Rounded rather than ceiled, so the count stays near the target.
    let nice = if residual <= 1.2 {
        1.0
    } else if residual <= 2.5 {
        2.0
    } else if residual <= 6.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Round-number ticks covering `[lo, hi]`: the first tick is at or below
/// `lo` and the last at or above `hi`, so they double as the axis bounds.
/// About `target` intervals; never more than 50 ticks.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let (lo, hi) = widen(lo, hi);
    let step = nice_step(hi - lo, target);
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    if last - first > 50 {
        return vec![lo, hi];
    }
    (first..=last)
        .map(|k| {
            let v = k as f64 * step;
            // Avoid "-0" and float noise such as 0.30000000000000004.
            let r = round_to_step(v, step);
            if r == 0.0 {
                0.0
            } else {
                r
            }
        })
        .collect()
}

fn round_to_step(v: f64, step: f64) -> f64 {
    let decimals = decimals_for(step);
    let f = 10f64.powi(decimals as i32);
    (v * f).round() / f
}

/// A non-empty, finite range around the data.
fn widen(lo: f64, hi: f64) -> (f64, f64) {
    let (lo, hi) = match (lo.is_finite(), hi.is_finite()) {
        (true, true) => (lo.min(hi), lo.max(hi)),
        (true, false) => (lo, lo),
        (false, true) => (hi, hi),
        (false, false) => (0.0, 1.0),
    };
    if hi > lo {
        (lo, hi)
    } else if lo == 0.0 {
        (0.0, 1.0)
    } else {
        let d = lo.abs() * 0.1;
        (lo - d, hi + d)
    }
}

/// Decades (and, over a short range, 2× and 5× steps) covering
/// `[lo, hi]`, both positive. The first and last are the axis bounds.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let lo = if lo > 0.0 && lo.is_finite() { lo } else { 1.0 };
    let mut hi = if hi > 0.0 && hi.is_finite() {
        hi.max(lo)
    } else {
        lo * 10.0
    };
    let mut lo = lo;
    if hi / lo < 1.0001 {
        lo /= 2.0;
        hi *= 2.0;
    }
    let a = (lo.log10() + 1e-9).floor() as i32;
    let mut b = (hi.log10() - 1e-9).ceil() as i32;
    if b <= a {
        b = a + 1;
    }
    let mults: &[f64] = if b - a <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let mut ticks = Vec::new();
    for e in a..=b {
        for &m in mults {
            let v = m * 10f64.powi(e);
            if e == b && m > 1.0 {
                break;
            }
            ticks.push(v);
        }
    }
    // Keep only what covers the data: one tick at or below lo, one at or
    // above hi.
    let first = ticks
        .iter()
        .rposition(|&t| t <= lo * (1.0 + 1e-9))
        .unwrap_or(0);
    let last = ticks
        .iter()
        .position(|&t| t >= hi * (1.0 - 1e-9))
        .unwrap_or(ticks.len() - 1);
    ticks[first..=last].to_vec()
}

/// Decimal places needed to show multiples of `step` exactly.
fn decimals_for(step: f64) -> usize {
    if !(step.is_finite() && step > 0.0) {
        return 0;
    }
    let mut d = 0;
    while d < 9 {
        let scaled = step * 10f64.powi(d as i32);
        if (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0) {
            break;
        }
        d += 1;
    }
    d
}

/// Formats a tick value given the tick step: whole thousands and millions
/// get `k`/`M`/`G` suffixes, others just enough decimals.
pub fn format_tick(v: f64, step: f64) -> String {
    format_tick_in(v, step, unit_for(v.abs(), step))
}

/// Labels for evenly spaced ticks, all in the same unit (so an axis never
/// mixes `9500` and `10.0k`).
pub fn tick_labels(ticks: &[f64]) -> Vec<String> {
    let step = if ticks.len() > 1 {
        (ticks[1] - ticks[0]).abs()
    } else {
        1.0
    };
    let mag = ticks.iter().fold(0.0f64, |m, t| m.max(t.abs()));
    let unit = unit_for(mag, step);
    ticks
        .iter()
        .map(|&t| format_tick_in(t, step, unit))
        .collect()
}

fn unit_for(mag: f64, step: f64) -> (f64, &'static str) {
    let mag = mag.max(step.abs());
    for (div, suffix) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if mag >= 10.0 * div || (mag >= div && (step / div).fract() == 0.0) {
            return (div, suffix);
        }
    }
    (1.0, "")
}

fn format_tick_in(v: f64, step: f64, (div, suffix): (f64, &str)) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    format!("{}{suffix}", trim_num(v / div, decimals_for(step / div)))
}

fn trim_num(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s == "-0" {
        "0".to_string()
    } else {
        s
    }
}

/// A compact label for a value on a log axis (1, 20, 500, 1k, 0.05).
pub fn format_log_tick(v: f64) -> String {
    if v >= 1000.0 {
        return format_tick(v, v);
    }
    let s = format!("{v}");
    if s.len() > 8 {
        format!("{v:.3}")
    } else {
        s
    }
}

/// Formats a number for humans with a magnitude-appropriate precision:
/// 12.3k, 1.25M, 3.14, 0.052.
pub fn si(v: f64) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let ax = x.abs();
    let d = if ax >= 100.0 || (suffix.is_empty() && ax >= 1000.0) {
        0
    } else if ax >= 10.0 {
        1
    } else if ax >= 1.0 {
        2
    } else if ax == 0.0 {
        0
    } else {
        3
    };
    format!("{}{suffix}", trim_num(x, d))
}

// ---------------------------------------------------------------------------
// Chart model
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    #[default]
    Linear,
    /// Base-10 logarithmic; non-positive values are left out.
    Log,
}

#[derive(Debug, Clone, Default)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    /// Fixed ticks with their labels, instead of generated ones.
    pub ticks: Option<Vec<(f64, String)>>,
    /// Fixed bounds; otherwise from the data (and the ticks).
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Whether a linear axis must include zero.
    pub zero: bool,
}

impl Axis {
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            ..Axis::default()
        }
    }

    /// A linear axis starting at zero (throughput, latency, CPU).
    pub fn from_zero(label: impl Into<String>) -> Axis {
        Axis {
            zero: true,
            ..Axis::linear(label)
        }
    }

    pub fn log(label: impl Into<String>) -> Axis {
        Axis {
            scale: Scale::Log,
            ..Axis::linear(label)
        }
    }

    pub fn with_ticks(mut self, ticks: Vec<(f64, String)>) -> Axis {
        self.ticks = Some(ticks);
        self
    }

    pub fn with_bounds(mut self, min: f64, max: f64) -> Axis {
        self.min = Some(min);
        self.max = Some(max);
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    #[default]
    Line,
    Points,
    LinePoints,
}

#[derive(Debug, Clone, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Half-heights of error bars, one per point (empty: none).
    pub errors: Vec<f64>,
    pub style: Style,
    /// Drawn dashed (for fitted or derived curves).
    pub dashed: bool,
    /// Points drawn hollow instead of filled, by index (e.g. failed probes).
    pub hollow: Vec<bool>,
    /// More for each point's hover text, by index (a run's time, commit).
    pub notes: Vec<String>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            ..Series::default()
        }
    }

    pub fn style(mut self, style: Style) -> Series {
        self.style = style;
        self
    }

    pub fn errors(mut self, errors: Vec<f64>) -> Series {
        self.errors = errors;
        self
    }

    pub fn dashed(mut self) -> Series {
        self.dashed = true;
        self
    }

    pub fn hollow(mut self, hollow: Vec<bool>) -> Series {
        self.hollow = hollow;
        self
    }

    pub fn notes(mut self, notes: Vec<String>) -> Series {
        self.notes = notes;
        self
    }
}

/// Something marked on the plot besides the series.
#[derive(Debug, Clone, PartialEq)]
pub enum Annotation {
    /// A vertical dashed line across the plot at `x`.
    VLine { x: f64, label: String },
    /// A horizontal dashed line at `y` (a threshold, an SLA).
    HLine { y: f64, label: String },
}

#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    /// A longer description for screen readers.
    pub description: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub annotations: Vec<Annotation>,
    pub width: f64,
    pub height: f64,
}

/// Where data values land in pixels along one axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mapping {
    pub lo: f64,
    pub hi: f64,
    pub log: bool,
    /// Pixel positions of `lo` and `hi`.
    pub from: f64,
    pub to: f64,
}

impl Mapping {
    fn t(&self, v: f64) -> f64 {
        if self.log {
            v.max(f64::MIN_POSITIVE).log10()
        } else {
            v
        }
    }

    /// The pixel position of `v`, clamped to the axis.
    pub fn at(&self, v: f64) -> f64 {
        let (a, b) = (self.t(self.lo), self.t(self.hi));
        let f = if b > a {
            (self.t(v) - a) / (b - a)
        } else {
            0.5
        };
        self.from + f.clamp(0.0, 1.0) * (self.to - self.from)
    }

    /// Whether `v` can be placed on this axis at all.
    pub fn accepts(&self, v: f64) -> bool {
        v.is_finite() && (!self.log || v > 0.0)
    }
}

/// Axis bounds and ticks (value, label) for values spanning `[lo, hi]`.
pub fn layout_axis(axis: &Axis, lo: f64, hi: f64) -> (f64, f64, Vec<(f64, String)>) {
    let usable = |v: &f64| v.is_finite() && (axis.scale == Scale::Linear || *v > 0.0);
    let (mut lo, mut hi) = (lo, hi);
    if axis.zero && axis.scale == Scale::Linear {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if let Some(ticks) = &axis.ticks {
        let vals: Vec<f64> = ticks.iter().map(|t| t.0).filter(usable).collect();
        if !vals.is_empty() {
            let tmin = vals.iter().copied().fold(f64::INFINITY, f64::min);
            let tmax = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            lo = if lo.is_finite() { lo.min(tmin) } else { tmin };
            hi = if hi.is_finite() { hi.max(tmax) } else { tmax };
        }
        let (mut min, mut max) = match axis.scale {
            Scale::Linear => {
                let (l, h) = widen(lo, hi);
                let pad = (h - l) * 0.05;
                let l = if axis.zero && l >= 0.0 { 0.0 } else { l - pad };
                (l, h + pad)
            }
            Scale::Log => {
                let l = if lo > 0.0 && lo.is_finite() { lo } else { 1.0 };
                let h = if hi > 0.0 && hi.is_finite() {
                    hi.max(l)
                } else {
                    l * 10.0
                };
                let ratio = (h / l).max(10f64.powf(0.2));
                let pad = ratio.powf(0.05);
                (l / pad, h * pad)
            }
        };
        if let Some(m) = axis.min {
            min = m;
        }
        if let Some(m) = axis.max {
            max = m;
        }
        let shown = ticks
            .iter()
            .filter(|t| {
                usable(&t.0) && t.0 >= min - 1e-9 * min.abs() && t.0 <= max + 1e-9 * max.abs()
            })
            .cloned()
            .collect();
        return (min, max, shown);
    }
    let (lo, hi) = (axis.min.unwrap_or(lo), axis.max.unwrap_or(hi));
    match axis.scale {
        Scale::Linear => {
            // A little headroom, so a line at the maximum does not run
            // along the frame.
            let hi =
                if axis.zero && axis.max.is_none() && hi.is_finite() && lo.is_finite() && hi > lo {
                    hi + (hi - lo) * 0.03
                } else {
                    hi
                };
            let ticks = nice_ticks(lo, hi, 5);
            let step = if ticks.len() > 1 {
                ticks[1] - ticks[0]
            } else {
                1.0
            };
            let min = axis.min.unwrap_or(ticks[0]);
            let max = axis
                .max
                .unwrap_or(*ticks.last().expect("nice_ticks is never empty"));
            let labels = ticks
                .iter()
                .copied()
                .zip(tick_labels(&ticks))
                .filter(|&(t, _)| t >= min - step * 1e-6 && t <= max + step * 1e-6)
                .collect();
            (min, max, labels)
        }
        Scale::Log => {
            let ticks = log_ticks(lo, hi);
            let min = axis.min.unwrap_or(ticks[0]);
            let max = axis
                .max
                .unwrap_or(*ticks.last().expect("log_ticks is never empty"));
            let labels = ticks.iter().map(|&t| (t, format_log_tick(t))).collect();
            (min, max, labels)
        }
    }
}

const MARGIN_RIGHT: f64 = 18.0;
const TITLE_H: f64 = 30.0;
const CHAR_W: f64 = 6.4;
const LEGEND_ROW: f64 = 18.0;

fn fmt(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

fn marker(o: &mut String, shape: usize, x: f64, y: f64, color: &str, hollow: bool, tip: &str) {
    let fill = if hollow { "#ffffff" } else { color };
    let r = 3.6;
    let (x, y) = (fmt(x), fmt(y));
    let common = format!("fill=\"{fill}\" stroke=\"{color}\" stroke-width=\"1.5\"");
    let tip = if tip.is_empty() {
        String::new()
    } else {
        format!("<title>{}</title>", escape(tip))
    };
    let _ = match shape % 4 {
        0 => write!(o, "<circle cx=\"{x}\" cy=\"{y}\" r=\"{r}\" {common}>{tip}</circle>"),
        1 => write!(
            o,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" {common} transform=\"translate({x} {y})\">{tip}</rect>",
            fmt(-r),
            fmt(-r),
            fmt(2.0 * r),
            fmt(2.0 * r)
        ),
        2 => write!(
            o,
            "<path d=\"M0 -4.5L4.2 3L-4.2 3Z\" transform=\"translate({x} {y})\" {common}>{tip}</path>"
        ),
        _ => write!(
            o,
            "<path d=\"M0 -4.6L4.6 0L0 4.6L-4.6 0Z\" transform=\"translate({x} {y})\" {common}>{tip}</path>"
        ),
    };
}

/// The colour, dash pattern and marker shape of the `i`th series.
pub fn series_look(i: usize) -> (&'static str, &'static str, usize) {
    (
        PALETTE[i % PALETTE.len()],
        DASHES[(i / PALETTE.len()) % DASHES.len()],
        i,
    )
}

impl Chart {
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Chart {
        Chart {
            title: title.into(),
            description: String::new(),
            x,
            y,
            series: Vec::new(),
            annotations: Vec::new(),
            width: 640.0,
            height: 300.0,
        }
    }

    pub fn series(mut self, s: Series) -> Chart {
        self.series.push(s);
        self
    }

    pub fn annotate(mut self, a: Annotation) -> Chart {
        self.annotations.push(a);
        self
    }

    pub fn describe(mut self, d: impl Into<String>) -> Chart {
        self.description = d.into();
        self
    }

    /// Whether any series has a point to draw.
    pub fn has_data(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }

    /// Legend rows: entries packed left to right within `width`.
    fn legend_rows(&self, width: f64) -> Vec<Vec<usize>> {
        let mut rows: Vec<Vec<usize>> = Vec::new();
        let mut used = f64::INFINITY;
        for (i, s) in self.series.iter().enumerate() {
            if s.name.is_empty() {
                continue;
            }
            let w = legend_entry_width(&s.name);
            if used + w > width {
                rows.push(Vec::new());
                used = 0.0;
            }
            rows.last_mut().expect("a row was pushed").push(i);
            used += w;
        }
        rows
    }

    fn extent(&self, horizontal: bool) -> (f64, f64) {
        let axis = if horizontal { &self.x } else { &self.y };
        let ok = |v: f64| v.is_finite() && (axis.scale == Scale::Linear || v > 0.0);
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        let mut take = |v: f64| {
            if ok(v) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        };
        for s in &self.series {
            for (i, &(x, y)) in s.points.iter().enumerate() {
                if horizontal {
                    take(x);
                } else {
                    let e = s.errors.get(i).copied().unwrap_or(0.0);
                    take(y + e.abs());
                    take(if e != 0.0 { y - e.abs() } else { y });
                }
            }
        }
        for a in &self.annotations {
            match (a, horizontal) {
                (Annotation::VLine { x, .. }, true) => take(*x),
                (Annotation::HLine { y, .. }, false) => take(*y),
                _ => {}
            }
        }
        (lo, hi)
    }

    /// The chart as an `<svg>` element.
    pub fn render(&self) -> String {
        let (xlo, xhi) = self.extent(true);
        let (ylo, yhi) = self.extent(false);
        let (xmin, xmax, xticks) = layout_axis(&self.x, xlo, xhi);
        let (ymin, ymax, yticks) = layout_axis(&self.y, ylo, yhi);

        let ylabel_w = yticks
            .iter()
            .map(|t| t.1.chars().count())
            .max()
            .unwrap_or(1) as f64
            * CHAR_W;
        let left = 22.0 + ylabel_w + 8.0;
        // Room for half of the last x tick label past the plot's edge.
        let right = xticks
            .last()
            .filter(|t| t.0 >= xmax - (xmax - xmin).abs() * 1e-9)
            .map(|t| t.1.chars().count() as f64 * CHAR_W / 2.0 + 4.0)
            .unwrap_or(0.0)
            .max(MARGIN_RIGHT);
        let plot_w = (self.width - left - right).max(50.0);
        let legend = self.legend_rows(plot_w);
        let bottom = 22.0
            + if self.x.label.is_empty() { 0.0 } else { 18.0 }
            + legend.len() as f64 * LEGEND_ROW
            + 6.0;
        let plot_h = (self.height - TITLE_H - bottom).max(60.0);
        let height = TITLE_H + plot_h + bottom;
        let (px0, px1) = (left, left + plot_w);
        let (py0, py1) = (TITLE_H + plot_h, TITLE_H);
        let xm = Mapping {
            lo: xmin,
            hi: xmax,
            log: self.x.scale == Scale::Log,
            from: px0,
            to: px1,
        };
        let ym = Mapping {
            lo: ymin,
            hi: ymax,
            log: self.y.scale == Scale::Log,
            from: py0,
            to: py1,
        };

        let mut o = String::new();
        let _ = write!(
            o,
            "<svg class=\"chart\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{t}\" font-family=\"{f}\" font-size=\"11\">",
            w = fmt(self.width),
            h = fmt(height),
            t = escape(&self.title),
            f = escape(FONT_STACK)
        );
        let _ = write!(o, "<title>{}</title>", escape(&self.title));
        if !self.description.is_empty() {
            let _ = write!(o, "<desc>{}</desc>", escape(&self.description));
        }
        let _ = write!(
            o,
            "<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>",
            fmt(self.width),
            fmt(height)
        );
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"19\" font-size=\"13\" font-weight=\"600\" fill=\"#1a1a1a\">{}</text>",
            fmt(left),
            escape(&self.title)
        );

        // Grid and tick labels.
        o.push_str("<g stroke=\"#e3e3e3\" stroke-width=\"1\">");
        for (v, _) in &yticks {
            let y = fmt(ym.at(*v));
            let _ = write!(
                o,
                "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/>",
                fmt(px0),
                fmt(px1)
            );
        }
        for (v, _) in &xticks {
            let x = fmt(xm.at(*v));
            let _ = write!(
                o,
                "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
                fmt(py1),
                fmt(py0)
            );
        }
        o.push_str("</g>");
        let _ = write!(
            o,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#8a8a8a\" stroke-width=\"1\"/>",
            fmt(px0),
            fmt(py1),
            fmt(plot_w),
            fmt(plot_h)
        );
        o.push_str("<g fill=\"#333333\">");
        for (v, label) in &yticks {
            let _ = write!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                fmt(px0 - 6.0),
                fmt(ym.at(*v) + 4.0),
                escape(label)
            );
        }
        let mut last_end = f64::NEG_INFINITY;
        for (v, label) in &xticks {
            let x = xm.at(*v);
            let half = label.chars().count() as f64 * CHAR_W / 2.0;
            // Skip labels that would overlap the previous one.
            if x - half < last_end + 4.0 {
                continue;
            }
            last_end = x + half;
            let _ = write!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                fmt(x),
                fmt(py0 + 16.0),
                escape(label)
            );
        }
        o.push_str("</g>");
        if !self.x.label.is_empty() {
            let _ = write!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#1a1a1a\">{}</text>",
                fmt((px0 + px1) / 2.0),
                fmt(py0 + 34.0),
                escape(&self.x.label)
            );
        }
        if !self.y.label.is_empty() {
            let cy = (py0 + py1) / 2.0;
            let _ = write!(
                o,
                "<text transform=\"translate(13 {}) rotate(-90)\" text-anchor=\"middle\" fill=\"#1a1a1a\">{}</text>",
                fmt(cy),
                escape(&self.y.label)
            );
        }

        if !self.has_data() {
            let _ = write!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#666666\">no data</text>",
                fmt((px0 + px1) / 2.0),
                fmt((py0 + py1) / 2.0)
            );
        }

        // Series.
        for (i, s) in self.series.iter().enumerate() {
            let (color, dash, shape) = series_look(i);
            let dash = if s.dashed && dash.is_empty() {
                "6 3"
            } else {
                dash
            };
            let pts: Vec<(usize, f64, f64)> = s
                .points
                .iter()
                .enumerate()
                .filter(|(_, &(x, y))| xm.accepts(x) && ym.accepts(y))
                .map(|(k, &(x, y))| (k, xm.at(x), ym.at(y)))
                .collect();
            let _ = write!(
                o,
                "<g class=\"series\" data-series=\"{}\">",
                escape(&s.name)
            );
            if matches!(s.style, Style::Line | Style::LinePoints) && pts.len() > 1 {
                let d: Vec<String> = pts
                    .iter()
                    .map(|p| format!("{},{}", fmt(p.1), fmt(p.2)))
                    .collect();
                let dash_attr = if dash.is_empty() {
                    String::new()
                } else {
                    format!(" stroke-dasharray=\"{dash}\"")
                };
                let _ = write!(
                    o,
                    "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" stroke-linejoin=\"round\" stroke-linecap=\"round\"{dash_attr}/>",
                    d.join(" ")
                );
            }
            for &(k, x, _) in &pts {
                let e = s.errors.get(k).copied().unwrap_or(0.0).abs();
                if e > 0.0 {
                    let y = s.points[k].1;
                    let top = ym.at(y + e);
                    let bot = if ym.accepts(y - e) { ym.at(y - e) } else { py0 };
                    let _ = write!(
                        o,
                        "<path d=\"M{x} {t}V{b}M{l} {t}H{r}M{l} {b}H{r}\" stroke=\"{color}\" stroke-width=\"1.3\" fill=\"none\"/>",
                        x = fmt(x),
                        t = fmt(top),
                        b = fmt(bot),
                        l = fmt(x - 4.0),
                        r = fmt(x + 4.0)
                    );
                }
            }
            let show_markers = match s.style {
                Style::Points => true,
                Style::LinePoints => pts.len() <= 80,
                Style::Line => pts.len() == 1,
            };
            if show_markers {
                for &(k, x, y) in &pts {
                    let (vx, vy) = s.points[k];
                    let mut tip = format!("{}: {}, {}", s.name, si(vx), si(vy));
                    if let Some(e) = s.errors.get(k).filter(|e| **e != 0.0) {
                        let _ = write!(tip, " ± {}", si(*e));
                    }
                    if let Some(note) = s.notes.get(k) {
                        let _ = write!(tip, " ({note})");
                    }
                    let hollow = s.hollow.get(k).copied().unwrap_or(false);
                    marker(&mut o, shape, x, y, color, hollow, &tip);
                }
            }
            o.push_str("</g>");
        }

        // Annotations.
        for a in &self.annotations {
            match a {
                Annotation::VLine { x, label } if xm.accepts(*x) => {
                    let px = xm.at(*x);
                    let _ = write!(
                        o,
                        "<line x1=\"{p}\" y1=\"{}\" x2=\"{p}\" y2=\"{}\" stroke=\"#444444\" stroke-width=\"1.3\" stroke-dasharray=\"5 4\"/>",
                        fmt(py1),
                        fmt(py0),
                        p = fmt(px)
                    );
                    let right_side = px < (px0 + px1) / 2.0;
                    let (tx, anchor) = if right_side {
                        (px + 4.0, "start")
                    } else {
                        (px - 4.0, "end")
                    };
                    let _ = write!(
                        o,
                        "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\" fill=\"#1a1a1a\" font-weight=\"600\">{}</text>",
                        fmt(tx),
                        fmt(py1 + 13.0),
                        escape(label)
                    );
                }
                Annotation::HLine { y, label } if ym.accepts(*y) => {
                    let py = ym.at(*y);
                    let _ = write!(
                        o,
                        "<line x1=\"{}\" y1=\"{p}\" x2=\"{}\" y2=\"{p}\" stroke=\"#444444\" stroke-width=\"1.3\" stroke-dasharray=\"5 4\"/>",
                        fmt(px0),
                        fmt(px1),
                        p = fmt(py)
                    );
                    let _ = write!(
                        o,
                        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#1a1a1a\" font-weight=\"600\">{}</text>",
                        fmt(px1 - 4.0),
                        fmt(py - 4.0),
                        escape(label)
                    );
                }
                _ => {}
            }
        }

        // Legend.
        let mut ly = py0 + if self.x.label.is_empty() { 22.0 } else { 40.0 } + 8.0;
        for row in &legend {
            let mut lx = px0;
            for &i in row {
                let s = &self.series[i];
                let (color, dash, shape) = series_look(i);
                let dash = if s.dashed && dash.is_empty() {
                    "6 3"
                } else {
                    dash
                };
                let dash_attr = if dash.is_empty() {
                    String::new()
                } else {
                    format!(" stroke-dasharray=\"{dash}\"")
                };
                if s.style != Style::Points {
                    let _ = write!(
                        o,
                        "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{color}\" stroke-width=\"2\"{dash_attr}/>",
                        fmt(lx),
                        fmt(lx + 22.0),
                        y = fmt(ly)
                    );
                }
                if s.style != Style::Line {
                    marker(&mut o, shape, lx + 11.0, ly, color, false, "");
                }
                let _ = write!(
                    o,
                    "<text x=\"{}\" y=\"{}\" fill=\"#1a1a1a\">{}</text>",
                    fmt(lx + 27.0),
                    fmt(ly + 4.0),
                    escape(&s.name)
                );
                lx += legend_entry_width(&s.name);
            }
            ly += LEGEND_ROW;
        }
        o.push_str("</svg>");
        o
    }
}

fn legend_entry_width(name: &str) -> f64 {
    27.0 + name.chars().count() as f64 * CHAR_W + 16.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_are_one_two_five() {
        assert_eq!(nice_step(10.0, 5), 2.0);
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(1.0, 5), 0.2);
        assert_eq!(nice_step(7.3, 5), 2.0);
        assert_eq!(nice_step(23_000.0, 5), 5000.0);
        assert_eq!(nice_step(0.0, 5), 1.0);
        assert_eq!(nice_step(f64::NAN, 5), 1.0);
    }

    #[test]
    fn nice_ticks_cover_the_data_with_round_numbers() {
        assert_eq!(nice_ticks(0.0, 9.3, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(nice_ticks(0.0, 1.0, 5), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        let t = nice_ticks(0.1, 0.3, 4);
        assert_eq!(t, vec![0.1, 0.15, 0.2, 0.25, 0.3]);
        assert_eq!(
            nice_ticks(-3.0, 7.0, 5),
            vec![-4.0, -2.0, 0.0, 2.0, 4.0, 6.0, 8.0]
        );
        assert_eq!(
            nice_ticks(1708.0, 24033.0, 5),
            vec![0.0, 5000.0, 10000.0, 15000.0, 20000.0, 25000.0]
        );
        // Degenerate ranges still give an axis.
        assert_eq!(nice_ticks(0.0, 0.0, 5), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        let t = nice_ticks(5.0, 5.0, 5);
        assert!(
            t[0] <= 5.0 && *t.last().unwrap() >= 5.0 && t.len() > 2,
            "{t:?}"
        );
        assert_eq!(
            nice_ticks(f64::INFINITY, f64::NAN, 5),
            vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        );
        for t in nice_ticks(0.0, 0.7, 7) {
            assert!(format!("{t}").len() <= 3, "{t}");
        }
    }

    #[test]
    fn log_ticks_are_decades() {
        assert_eq!(
            log_ticks(3.0, 4500.0),
            vec![1.0, 10.0, 100.0, 1000.0, 10000.0]
        );
        assert_eq!(
            log_ticks(1.0, 100_000.0),
            vec![1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]
        );
        assert_eq!(log_ticks(2.0, 30.0), vec![2.0, 5.0, 10.0, 20.0, 50.0]);
        assert_eq!(log_ticks(0.0, -1.0), vec![1.0, 2.0, 5.0, 10.0]);
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(format_tick(0.0, 5000.0), "0");
        assert_eq!(format_tick(20000.0, 5000.0), "20k");
        assert_eq!(format_tick(12500.0, 500.0), "12.5k");
        assert_eq!(format_tick(1500.0, 500.0), "1500");
        assert_eq!(format_tick(2000.0, 1000.0), "2k");
        assert_eq!(format_tick(3_000_000.0, 1_000_000.0), "3M");
        assert_eq!(format_tick(0.4, 0.2), "0.4");
        assert_eq!(format_tick(0.15, 0.05), "0.15");
        assert_eq!(format_tick(40.0, 20.0), "40");
        assert_eq!(
            tick_labels(&[9000.0, 9500.0, 10000.0]),
            vec!["9.0k", "9.5k", "10.0k"]
        );
        assert_eq!(tick_labels(&[0.0, 500.0, 1000.0]), vec!["0", "500", "1000"]);
        assert_eq!(format_log_tick(1000.0), "1k");
        assert_eq!(format_log_tick(0.01), "0.01");
        assert_eq!(format_log_tick(50.0), "50");
        assert_eq!(si(24033.4), "24.0k");
        assert_eq!(si(1708.2), "1708");
        assert_eq!(si(3.25), "3.25");
        assert_eq!(si(0.0521), "0.052");
        assert_eq!(si(1_250_000.0), "1.25M");
        assert_eq!(si(f64::NAN), "–");
    }

    #[test]
    fn escaping_covers_markup_quotes_and_urls() {
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
        assert_eq!(escape("bell\u{7}"), "bell");
        let e = escape("see http://example.com/x");
        assert!(!e.contains("://"), "{e}");
        assert_eq!(e, "see http&#58;//example.com/x");
        assert_eq!(escape("a:b"), "a:b");
        assert_eq!(escape("µs ≥ 5"), "µs ≥ 5");
    }

    #[test]
    fn mapping_scales_linear_and_log() {
        let m = Mapping {
            lo: 0.0,
            hi: 100.0,
            log: false,
            from: 10.0,
            to: 110.0,
        };
        assert_eq!(m.at(0.0), 10.0);
        assert_eq!(m.at(50.0), 60.0);
        assert_eq!(m.at(200.0), 110.0, "clamped");
        let m = Mapping {
            lo: 1.0,
            hi: 1000.0,
            log: true,
            from: 300.0,
            to: 0.0,
        };
        assert!((m.at(10.0) - 200.0).abs() < 1e-9);
        assert!((m.at(1000.0)).abs() < 1e-9);
        assert!(!m.accepts(0.0));
        assert!(m.accepts(0.5));
    }

    #[test]
    fn axis_layout_uses_given_ticks_and_bounds() {
        let pct = Axis::log("percentile")
            .with_ticks(vec![(1.0, "0%".into()), (100.0, "99%".into())])
            .with_bounds(1.0, 100.0);
        let (lo, hi, ticks) = layout_axis(&pct, 1.0, 50.0);
        assert_eq!((lo, hi), (1.0, 100.0));
        assert_eq!(ticks.len(), 2);
        let (lo, hi, ticks) = layout_axis(&Axis::from_zero("ops/s"), 120.0, 930.0);
        assert_eq!((lo, hi), (0.0, 1000.0));
        assert_eq!(ticks.first().unwrap().1, "0");
        assert_eq!(ticks.last().unwrap().1, "1000");
        let cats = Axis::linear("").with_ticks(vec![(0.0, "a".into()), (1.0, "b".into())]);
        let (lo, hi, _) = layout_axis(&cats, 0.0, 1.0);
        assert!(lo < 0.0 && hi > 1.0);
    }

    #[test]
    fn chart_renders_series_legend_markers_and_annotations() {
        let c = Chart::new(
            "Throughput <by> threads",
            Axis::log("threads"),
            Axis::from_zero("TPS"),
        )
        .series(
            Series::new(
                "mean & spread",
                vec![(1.0, 100.0), (2.0, 190.0), (4.0, 350.0), (8.0, 360.0)],
            )
            .style(Style::LinePoints)
            .errors(vec![5.0, 8.0, 0.0, 12.0])
            .hollow(vec![false, false, false, true]),
        )
        .series(Series::new("model", vec![(1.0, 100.0), (8.0, 380.0)]).dashed())
        .annotate(Annotation::VLine {
            x: 4.0,
            label: "knee: 4".into(),
        })
        .annotate(Annotation::HLine {
            y: 300.0,
            label: "SLA".into(),
        });
        let svg = c.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("<title>Throughput &lt;by&gt; threads</title>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("stroke-dasharray=\"6 3\""));
        assert!(svg.contains("knee: 4"));
        assert!(svg.contains("mean &amp; spread"));
        assert_eq!(
            svg.matches("<circle").count(),
            4 + 1,
            "4 markers and one legend swatch"
        );
        assert!(
            svg.contains("fill=\"#ffffff\" stroke=\"#0072B2\""),
            "a hollow marker"
        );
        assert_eq!(
            svg.matches("stroke-width=\"1.3\" fill=\"none\"/>").count(),
            3,
            "three error bars"
        );
        assert!(!svg.contains("NaN") && !svg.contains("inf\""));
        assert!(!svg.contains("xmlns"), "inline SVG needs no namespace URL");
    }

    #[test]
    fn empty_and_degenerate_charts_still_render() {
        let svg = Chart::new("nothing", Axis::linear("x"), Axis::from_zero("y")).render();
        assert!(svg.contains("no data"));
        let svg = Chart::new("one", Axis::log("x"), Axis::log("y"))
            .series(Series::new(
                "s",
                vec![(0.0, 0.0), (5.0, 5.0), (f64::NAN, 1.0)],
            ))
            .render();
        assert!(!svg.contains("NaN"), "{svg}");
        assert_eq!(
            svg.matches("<circle").count(),
            1,
            "a lone point is drawn as a marker"
        );
    }

    #[test]
    fn many_series_cycle_dashes_after_the_palette() {
        assert_eq!(series_look(0).1, "");
        assert_eq!(series_look(7).0, PALETTE[0]);
        assert_eq!(series_look(7).1, "6 3");
    }
}
