//! Small multiples: several charts side by side in rows of one SVG document, under one title,
//! for figures with more series than a reader can tell apart in one panel.

use super::svg::{body, esc};
use super::Chart;
use std::fmt::Write;

/// Width of the whole document.
const WIDTH: f64 = 1200.0;
const FONT: &str = "DejaVu Sans, Verdana, Arial, sans-serif";

/// One document of `charts` in rows of `columns`, under `title`. Each chart keeps its own
/// title (the panel's level), axes and legend; their ids must differ.
pub fn render(title: &str, subtitle: &str, charts: &[Chart], columns: usize) -> String {
    let columns = columns.clamp(1, 4).min(charts.len().max(1));
    let w = WIDTH / columns as f64;
    let head = if subtitle.is_empty() { 40.0 } else { 58.0 };
    let mut rows: Vec<(Vec<String>, f64)> = Vec::new();
    for row in charts.chunks(columns) {
        let bodies: Vec<(String, f64)> = row.iter().map(|c| body(c, w, false)).collect();
        let h = bodies.iter().map(|b| b.1).fold(0.0, f64::max);
        rows.push((bodies.into_iter().map(|b| b.0).collect(), h));
    }
    let total: f64 = head + rows.iter().map(|r| r.1).sum::<f64>();
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{total}" viewBox="0 0 {WIDTH} {total}" font-family="{FONT}" role="img" aria-label="{}">"#,
        esc(title)
    );
    let _ = writeln!(o, "<title>{}</title>", esc(title));
    let _ = writeln!(
        o,
        r##"<rect width="{WIDTH}" height="{total}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        o,
        r##"<text x="16" y="26" font-size="18" font-weight="bold" fill="#222">{}</text>"##,
        esc(title)
    );
    if !subtitle.is_empty() {
        let _ = writeln!(
            o,
            r##"<text x="16" y="46" font-size="11.5" fill="#555">{}</text>"##,
            esc(subtitle)
        );
    }
    let mut y = head;
    for (bodies, h) in rows {
        for (i, b) in bodies.iter().enumerate() {
            let _ = writeln!(
                o,
                r#"<g class="panel" transform="translate({:.1} {y:.1})">"#,
                i as f64 * w
            );
            o.push_str(b);
            o.push_str("</g>\n");
        }
        y += h;
    }
    o.push_str("</svg>\n");
    o
}
