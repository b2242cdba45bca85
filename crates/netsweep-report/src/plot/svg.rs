//! Draws a [`Chart`] as a standalone SVG document: hand-written markup, no scripts, fonts
//! named generically (DejaVu Sans first, which the PNG renderer finds on this system).

use super::scale::titled;
use super::{color, Chart, Series, Stroke};
use std::fmt::Write;

/// Width of a chart drawn alone.
pub const W: f64 = 860.0;
const PLOT_H: f64 = 340.0;
const LEFT: f64 = 92.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 58.0;
const AXIS_BELOW: f64 = 52.0;
const LEGEND_ROW: f64 = 18.0;
const MARKER_ROW: f64 = 13.0;
const MARKER_ROWS: usize = 4;
const FONT: &str = "DejaVu Sans, Verdana, Arial, sans-serif";

pub use super::esc;

/// An identifier safe inside an XML id.
pub(crate) fn ident(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Rough width of a text in pixels at `size` (DejaVu Sans averages ~0.6 em).
pub(crate) fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.6
}

/// Lays legend entries in rows after a title of `start` pixels: (row, x offset) for each,
/// and the row count.
fn legend_layout(series: &[&Series], width: f64, start: f64) -> (Vec<(usize, f64)>, usize) {
    let mut pos = Vec::new();
    let (mut row, mut x) = (0usize, start);
    for s in series {
        let w = 34.0 + text_width(&s.label, 12.0) + 18.0;
        if x > 0.0 && x + w > width {
            row += 1;
            x = 0.0;
        }
        pos.push((row, x));
        x += w;
    }
    let rows = if series.is_empty() { 0 } else { row + 1 };
    (pos, rows)
}

/// The SVG document of a chart. The same input always gives the same bytes.
pub fn render(chart: &Chart) -> String {
    let (body, h) = body(chart, W, true);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="{FONT}" role="img" aria-label="{}">"#,
        esc(&chart.title)
    );
    let _ = writeln!(o, "<title>{}</title>", esc(&chart.title));
    o.push_str(&body);
    o.push_str("</svg>\n");
    o
}

/// The chart's elements for a drawing `w` pixels wide with its top left at (0, 0) (on a white
/// background when `background`), and the height they take.
pub fn body(chart: &Chart, w: f64, background: bool) -> (String, f64) {
    let legend: Vec<&Series> = chart
        .series
        .iter()
        .filter(|s| !s.label.is_empty())
        .collect();
    let plot_w = w - LEFT - RIGHT;
    let title_w = if chart.legend_title.is_empty() || legend.is_empty() {
        0.0
    } else {
        text_width(&chart.legend_title, 12.0) + 12.0
    };
    let (legend_pos, legend_rows) = legend_layout(&legend, plot_w, title_w);
    // Anomaly labels go in rows of their own between the subtitle and the plot, never over
    // the data (up to four rows, staggered).
    let label_band = chart.markers.len().min(MARKER_ROWS) as f64 * MARKER_ROW;
    let top = TOP + label_band;
    let h = top + PLOT_H + AXIS_BELOW + legend_rows as f64 * LEGEND_ROW + 12.0;
    let (x0, y0, y1) = (LEFT, top, top + PLOT_H);
    let px = |v: f64| x0 + chart.x.scale.frac(v) * plot_w;
    let py = |v: f64| y1 - chart.y.scale.frac(v) * PLOT_H;
    let clip = format!("clip-{}", ident(&chart.id));
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<defs><clipPath id="{clip}"><rect x="{x0}" y="{y0}" width="{plot_w}" height="{PLOT_H}"/></clipPath></defs>"#
    );
    if background {
        let _ = writeln!(o, r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##);
    }
    let _ = writeln!(
        o,
        r##"<text x="{x0}" y="22" font-size="16" font-weight="bold" fill="#222">{}</text>"##,
        esc(&chart.title)
    );
    if !chart.subtitle.is_empty() {
        let _ = writeln!(
            o,
            r##"<text x="{x0}" y="40" font-size="11.5" fill="#555">{}</text>"##,
            esc(&chart.subtitle)
        );
    }
    // Grid and ticks.
    let _ = writeln!(o, r##"<g font-size="11" fill="#333">"##);
    let x_ticks = chart.x.scale.ticks(&chart.x.unit);
    let (x_labels, x_unit) = chart.x.unit.axis_labels(&chart.x.scale, &x_ticks);
    let y_ticks = chart.y.scale.ticks(&chart.y.unit);
    let (y_labels, y_unit) = chart.y.unit.axis_labels(&chart.y.scale, &y_ticks);
    for (&t, label) in x_ticks.iter().zip(&x_labels) {
        let x = px(t);
        if !x.is_finite() {
            continue;
        }
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#e3e3e3"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            y1 + 16.0,
            esc(label)
        );
    }
    for (&t, label) in y_ticks.iter().zip(&y_labels) {
        let y = py(t);
        if !y.is_finite() {
            continue;
        }
        let _ = writeln!(
            o,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 + plot_w,
            x0 - 6.0,
            y + 4.0,
            esc(label)
        );
    }
    let _ = writeln!(o, "</g>");
    let _ = writeln!(
        o,
        r##"<rect x="{x0}" y="{y0}" width="{plot_w}" height="{PLOT_H}" fill="none" stroke="#888"/>"##
    );
    let _ = writeln!(
        o,
        r##"<text x="{:.1}" y="{:.1}" font-size="12.5" text-anchor="middle" fill="#222">{}</text>"##,
        x0 + plot_w / 2.0,
        y1 + 38.0,
        esc(&titled(&chart.x.title, x_unit.as_deref()))
    );
    let _ = writeln!(
        o,
        r##"<text transform="translate(16 {:.1}) rotate(-90)" font-size="12.5" text-anchor="middle" fill="#222">{}</text>"##,
        y0 + PLOT_H / 2.0,
        esc(&titled(&chart.y.title, y_unit.as_deref()))
    );
    let _ = writeln!(o, r#"<g clip-path="url(#{clip})">"#);
    // Markers (anomalies): shaded x-ranges.
    for m in &chart.markers {
        let (a, b) = (px(m.from), px(m.to));
        if !a.is_finite() || !b.is_finite() {
            continue;
        }
        let (mut a, mut b) = (a.min(b), a.max(b));
        if b - a < 6.0 {
            let c = (a + b) / 2.0;
            a = c - 3.0;
            b = c + 3.0;
        }
        let _ = writeln!(
            o,
            r##"<rect class="anomaly" x="{a:.1}" y="{y0}" width="{:.1}" height="{PLOT_H}" fill="{}" fill-opacity="0.13" stroke="{}" stroke-opacity="0.5" stroke-dasharray="3 2"/>"##,
            b - a,
            color(m.color),
            color(m.color)
        );
    }
    for hl in &chart.hlines {
        let y = py(*hl);
        if y.is_finite() {
            let _ = writeln!(
                o,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#444" stroke-dasharray="6 4"/>"##,
                x0 + plot_w
            );
        }
    }
    if chart.bars {
        super::marks::bars(&mut o, chart, &px, &py);
    } else {
        for s in &chart.series {
            draw_band(&mut o, s, &px, &py);
        }
        for s in &chart.series {
            draw_line(&mut o, s, &px, &py);
            super::marks::errors(&mut o, s, 0.0, &px, &py);
        }
    }
    let _ = writeln!(o, "</g>");
    // Marker labels, above the plot; staggered.
    for (i, m) in chart.markers.iter().enumerate() {
        let (a, b) = (px(m.from), px(m.to));
        if !a.is_finite() || !b.is_finite() {
            continue;
        }
        let c = (a + b) / 2.0;
        let tw = text_width(&m.label, 10.5);
        let x = (c - tw / 2.0).clamp(x0 + 2.0, x0 + plot_w - tw - 2.0);
        let _ = writeln!(
            o,
            r##"<text class="anomaly-label" x="{x:.1}" y="{:.1}" font-size="10.5" fill="{}" font-weight="bold">{}</text>"##,
            TOP + 9.0 + (i % MARKER_ROWS) as f64 * MARKER_ROW,
            color(m.color),
            esc(&m.label)
        );
    }
    // Legend.
    let ly = y1 + AXIS_BELOW + 6.0;
    if title_w > 0.0 {
        let _ = writeln!(
            o,
            r##"<text class="legend-title" x="{x0}" y="{:.1}" font-size="12" font-weight="bold" fill="#222">{}</text>"##,
            ly + 4.0,
            esc(&chart.legend_title)
        );
    }
    for (s, (row, dx)) in legend.iter().zip(legend_pos) {
        let (x, y) = (x0 + dx, ly + row as f64 * LEGEND_ROW);
        let dash = if s.stroke == Stroke::Dashed {
            r#" stroke-dasharray="6 3""#
        } else {
            ""
        };
        if chart.bars {
            let _ = writeln!(
                o,
                r##"<rect x="{x:.1}" y="{:.1}" width="26" height="10" fill="{}" fill-opacity="0.85"/><text x="{:.1}" y="{:.1}" font-size="12" fill="#222">{}</text>"##,
                y - 5.0,
                color(s.color),
                x + 32.0,
                y + 4.0,
                esc(&s.label)
            );
            continue;
        }
        if !s.band.is_empty() {
            let _ = writeln!(
                o,
                r##"<rect x="{x:.1}" y="{:.1}" width="26" height="10" fill="{}" fill-opacity="0.2"/>"##,
                y - 5.0,
                color(s.color)
            );
        }
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="2.2"{dash}/><text x="{:.1}" y="{:.1}" font-size="12" fill="#222">{}</text>"##,
            x + 26.0,
            color(s.color),
            x + 32.0,
            y + 4.0,
            esc(&s.label)
        );
    }
    (o, h)
}

fn draw_band(o: &mut String, s: &Series, px: &dyn Fn(f64) -> f64, py: &dyn Fn(f64) -> f64) {
    let pts: Vec<(f64, f64, f64)> = s
        .band
        .iter()
        .map(|&(x, lo, hi)| (px(x), py(lo), py(hi)))
        .filter(|(x, lo, hi)| x.is_finite() && lo.is_finite() && hi.is_finite())
        .collect();
    if pts.len() < 2 {
        return;
    }
    let mut d = String::new();
    for (x, _, hi) in &pts {
        let _ = write!(d, "{x:.1},{hi:.1} ");
    }
    for (x, lo, _) in pts.iter().rev() {
        let _ = write!(d, "{x:.1},{lo:.1} ");
    }
    let _ = writeln!(
        o,
        r#"<polygon class="band" points="{}" fill="{}" fill-opacity="0.18" stroke="none"/>"#,
        d.trim_end(),
        color(s.color)
    );
}

fn draw_line(o: &mut String, s: &Series, px: &dyn Fn(f64) -> f64, py: &dyn Fn(f64) -> f64) {
    let c = color(s.color);
    let dash = if s.stroke == Stroke::Dashed {
        r#" stroke-dasharray="6 3""#
    } else {
        ""
    };
    // Break the line where a value cannot be drawn (zero on a log axis).
    let mut runs: Vec<Vec<(f64, f64)>> = vec![vec![]];
    for &(x, y) in &s.points {
        let (a, b) = (px(x), py(y));
        if a.is_finite() && b.is_finite() {
            if let Some(r) = runs.last_mut() {
                r.push((a, b));
            }
        } else if runs.last().is_some_and(|r| !r.is_empty()) {
            runs.push(vec![]);
        }
    }
    let _ = writeln!(o, r#"<g class="series" data-label="{}">"#, esc(&s.label));
    for r in runs.iter().filter(|r| r.len() > 1) {
        let pts: Vec<String> = r.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            o,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="1.8" stroke-linejoin="round"{dash}/>"#,
            pts.join(" ")
        );
    }
    let n: usize = runs.iter().map(Vec::len).sum();
    if n <= 400 {
        for (x, y) in runs.iter().flatten() {
            let _ = writeln!(o, r#"<circle cx="{x:.1}" cy="{y:.1}" r="2.3" fill="{c}"/>"#);
        }
    }
    let _ = writeln!(o, "</g>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::{Axis, Marker, Scale, Unit};

    fn chart() -> Chart {
        Chart {
            id: "t".into(),
            title: "a <test> & more".into(),
            subtitle: String::new(),
            x: Axis {
                title: "message size".into(),
                unit: Unit::Bytes,
                scale: Scale::Log {
                    min: 1.0,
                    max: 65536.0,
                },
            },
            y: Axis {
                title: "throughput".into(),
                unit: Unit::Mbps,
                scale: Scale::Linear {
                    min: 0.0,
                    max: 100.0,
                },
            },
            series: vec![Series {
                label: "tcp".into(),
                points: vec![(1.0, 1.0), (0.0, 5.0), (1024.0, 50.0), (65536.0, 90.0)],
                band: vec![(1.0, 0.5, 2.0), (1024.0, 40.0, 60.0)],
                ..Default::default()
            }],
            markers: vec![Marker {
                from: 100.0,
                to: 200.0,
                label: "dip".into(),
                color: 1,
            }],
            hlines: vec![50.0],
            bars: false,
            legend_title: String::new(),
        }
    }

    #[test]
    fn renders_escaped_deterministic_svg() {
        let a = render(&chart());
        assert_eq!(a, render(&chart()));
        assert!(a.starts_with("<svg") && a.ends_with("</svg>\n"));
        assert!(a.contains("a &lt;test&gt; &amp; more"));
        assert!(a.contains("1 KiB") && a.contains("Mbit/s"));
        assert!(a.contains(r#"class="anomaly""#));
        // The zero size cannot be drawn on a log axis: the line breaks instead.
        assert_eq!(a.matches("<polyline").count(), 1);
    }

    /// The number of an attribute `name="…"` in the first element of `class`.
    fn attr(svg: &str, class: &str, name: &str) -> f64 {
        let at = svg.find(&format!(r#"class="{class}""#)).expect(class);
        let rest = &svg[at..];
        let v = rest.split(&format!(r#" {name}=""#)).nth(1).expect(name);
        v.split('"').next().unwrap().parse().unwrap()
    }

    #[test]
    fn anomaly_labels_sit_above_the_plot_not_over_its_data() {
        let a = render(&chart());
        // The shaded range starts at the plot's top; its label's baseline is above it.
        let (label, top) = (attr(&a, "anomaly-label", "y"), attr(&a, "anomaly", "y"));
        assert!(label < top, "label at y={label}, plot from y={top}");
        // Without markers the plot keeps its place: no empty band.
        let mut c = chart();
        c.markers.clear();
        let plain = render(&c);
        assert!(!plain.contains("anomaly"));
        let height = |svg: &str| -> f64 {
            let v = svg.split(r#" height=""#).nth(1).unwrap();
            v.split('"').next().unwrap().parse().unwrap()
        };
        assert!(height(&plain) < height(&a));
    }

    #[test]
    fn a_linear_axis_names_one_unit_in_its_title_and_bare_ticks() {
        let mut c = chart();
        c.y.scale = Scale::Linear {
            min: 0.0,
            max: 25_000.0,
        };
        let a = render(&c);
        assert!(a.contains(">throughput (Gbit/s)<"), "{a}");
        // "0 Mbit/s" under "20 Gbit/s" was the finding: every tick in one unit, unlabelled.
        assert!(!a.contains(" Mbit/s<") && !a.contains(" Gbit/s<"));
        assert!(a.contains(r#"text-anchor="end">0<"#) && a.contains(r#"text-anchor="end">20<"#));
        // A log axis keeps a unit on each tick (decades apart) and none in its title.
        assert!(a.contains(">1 KiB<") && a.contains(">message size<"));
    }
}
