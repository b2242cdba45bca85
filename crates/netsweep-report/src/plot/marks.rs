//! Marks beyond lines: error bars (a whisker with caps from a low to a high value) and grouped
//! bars over a categorical axis, each bar with its error bar.

use super::{color, Chart, Series};
use std::fmt::Write;

/// Width of the group of bars at one category, as a share of the space between categories.
const GROUP: f64 = 0.8;

/// Draws `s`'s error bars, each shifted by `dx` pixels.
pub(crate) fn errors(
    o: &mut String,
    s: &Series,
    dx: f64,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let c = color(s.color);
    for &(x, lo, hi) in &s.errors {
        let (x, a, b) = (px(x) + dx, py(lo), py(hi));
        if !(x.is_finite() && a.is_finite() && b.is_finite()) {
            continue;
        }
        let _ = writeln!(
            o,
            r#"<path class="error-bar" d="M{x:.1},{a:.1}V{b:.1}M{:.1},{a:.1}H{:.1}M{:.1},{b:.1}H{:.1}" stroke="{c}" stroke-width="1.4" fill="none"/>"#,
            x - 4.0,
            x + 4.0,
            x - 4.0,
            x + 4.0
        );
    }
}

/// Draws every series as bars side by side at each category, from the axis's floor.
pub(crate) fn bars(
    o: &mut String,
    chart: &Chart,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let n = chart.series.len().max(1) as f64;
    // Pixels between two categories.
    let step = (px(1.0) - px(0.0)).abs();
    let bar = step * GROUP / n;
    let floor = match chart.y.scale {
        super::Scale::Linear { min, .. } => py(min.max(0.0).min(match chart.y.scale {
            super::Scale::Linear { max, .. } => max,
            _ => 0.0,
        })),
        super::Scale::Log { min, .. } => py(min),
    };
    for (i, s) in chart.series.iter().enumerate() {
        let dx = (i as f64 - (n - 1.0) / 2.0) * bar;
        let _ = writeln!(
            o,
            r#"<g class="series" data-label="{}">"#,
            super::esc(&s.label)
        );
        for &(x, y) in &s.points {
            let (cx, top) = (px(x) + dx, py(y));
            if !(cx.is_finite() && top.is_finite()) {
                continue;
            }
            let (y0, h) = (top.min(floor), (floor - top).abs());
            let _ = writeln!(
                o,
                r#"<rect class="bar" x="{:.1}" y="{y0:.1}" width="{:.1}" height="{h:.1}" fill="{}" fill-opacity="0.85"/>"#,
                cx - bar / 2.0 + 1.0,
                (bar - 2.0).max(1.0),
                color(s.color)
            );
        }
        errors(
            o,
            &Series {
                color: 6,
                ..s.clone()
            },
            dx,
            px,
            py,
        );
        let _ = writeln!(o, "</g>");
    }
}
