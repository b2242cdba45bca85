//! Plots: a small chart model ([`Chart`]) that the figures fill from results, drawn as SVG by
//! hand ([`svg`]) and rasterised to PNG by resvg ([`png`]).

mod marks;
pub mod panels;
pub mod png;
pub mod scale;
pub mod svg;

pub use scale::{Scale, Unit};

/// Escapes text for XML content and attributes.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// One axis: its title, unit (which formats the tick labels) and scale.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Title, with the unit in words, e.g. "message size" or "throughput".
    pub title: String,
    /// What the values are; formats the tick labels.
    pub unit: Unit,
    /// Linear or logarithmic, with its domain.
    pub scale: Scale,
}

/// How a series is stroked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stroke {
    /// A continuous line.
    #[default]
    Solid,
    /// A dashed line.
    Dashed,
}

/// One line of a chart: points in data units, an optional shaded band (x, low, high) and a
/// colour index into the palette.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Colour index into [`PALETTE`] (wrapping).
    pub color: usize,
    /// Solid or dashed.
    pub stroke: Stroke,
    /// (x, y) in data units, in drawing order.
    pub points: Vec<(f64, f64)>,
    /// Shaded band (x, low y, high y), e.g. a 95% confidence interval; empty for none.
    pub band: Vec<(f64, f64, f64)>,
    /// Error bars (x, low y, high y): a whisker with caps at each x; empty for none.
    pub errors: Vec<(f64, f64, f64)>,
}

/// A shaded x-range with a label: an anomaly, or any band worth pointing at.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Start of the x-range, data units.
    pub from: f64,
    /// End of the x-range, data units.
    pub to: f64,
    /// Text drawn with it.
    pub label: String,
    /// Colour index of the run it belongs to.
    pub color: usize,
}

/// A chart: axes, series, x-range markers and horizontal reference lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// File stem when written alone (`throughput` → throughput.svg).
    pub id: String,
    /// Title drawn above the chart.
    pub title: String,
    /// A line under the title (what the band means, what latency is…).
    pub subtitle: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// The lines, drawn in order.
    pub series: Vec<Series>,
    /// Shaded x-ranges (anomalies).
    pub markers: Vec<Marker>,
    /// Horizontal lines at these y values (e.g. ratio 1).
    pub hlines: Vec<f64>,
    /// Draw the series as grouped bars at each x (a categorical axis) instead of lines.
    pub bars: bool,
    /// What the series are, drawn before the legend's entries ("background load:").
    pub legend_title: String,
}

impl Chart {
    /// True when no series has a point to draw.
    pub fn is_empty(&self) -> bool {
        self.series.iter().all(|s| s.points.is_empty())
    }

    /// Every y value drawn — points, error bars, bands — for fitting the y scale.
    pub fn ys(&self) -> Vec<f64> {
        self.series
            .iter()
            .flat_map(|s| {
                s.points
                    .iter()
                    .map(|p| p.1)
                    .chain(s.errors.iter().flat_map(|e| [e.1, e.2]))
                    .chain(s.band.iter().flat_map(|b| [b.1, b.2]))
            })
            .collect()
    }
}

/// Okabe–Ito colours (distinguishable with colour-blindness), then a few more.
pub const PALETTE: [&str; 10] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
    "#7F3C8D", "#11A579",
];

/// The colour of index `i` (wrapping).
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}
