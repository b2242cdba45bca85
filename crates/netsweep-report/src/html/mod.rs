//! The HTML report: one self-contained file — inline CSS and SVG, no script, nothing fetched —
//! holding every figure, the anomalies, the comparison against the first run, the metadata of
//! each run side by side and every run's per-point table.

pub mod meta;
pub mod points;

use crate::compare::{self, Comparison, Metric};
use crate::figures::{self, anomalies_of};
use crate::legend::{self, Named};
use crate::plot::color;
use crate::plot::svg::{self, esc};
use crate::units;
use std::fmt::Write;

const CSS: &str = "body{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}
h1{font-size:24px}h2{font-size:19px;margin-top:36px;border-bottom:1px solid #ccc;padding-bottom:4px}h3{font-size:15px}
figure{margin:18px 0}figure svg{width:100%;height:auto;max-width:860px;display:block}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0}th,td{border:1px solid #ccc;padding:3px 7px;vertical-align:top;text-align:right}
table.meta td,table.meta th{text-align:left}table.meta tr.differs th{background:#fff3cd}
th{background:#f3f3f3}td.warn{color:#a15c00}.swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}
ul.diff li{color:#8a4b00}.none{color:#666}code{background:#f3f3f3;padding:0 3px}";

fn anomalies(runs: &[Named<'_>], labels: &[String]) -> String {
    let mut o = String::new();
    let mut any = false;
    let mut rows = String::new();
    for (i, r) in runs.iter().enumerate() {
        for a in anomalies_of(r.run) {
            any = true;
            let _ = writeln!(
                rows,
                "<tr><td style=\"text-align:left\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}%</td><td>{:.2}</td><td style=\"text-align:left\">{}{}</td></tr>",
                color(i),
                esc(&labels[i]),
                a.kind.name(),
                a.from_size,
                a.to_size,
                a.points,
                a.magnitude * 100.0,
                a.confidence,
                esc(&a.detail),
                a.hint
                    .as_deref()
                    .map(|h| format!("<br><b>hint:</b> {}", esc(h)))
                    .unwrap_or_default()
            );
        }
    }
    if any {
        o.push_str("<table class=\"anomalies\"><tr><th>run</th><th>kind</th><th>from bytes</th><th>to bytes</th><th>points</th><th>magnitude</th><th>confidence</th><th>detail</th></tr>\n");
        o.push_str(&rows);
        o.push_str("</table>\n<p class=\"none\">magnitude: drop below the trend (dip, cliff) or the 95% CI half-width (unstable); see docs/anomalies.md.</p>\n");
    } else {
        o.push_str("<p class=\"none\">No anomaly detected: no dip, cliff or unstable band beyond the points' confidence intervals and the 30% floor.</p>\n");
    }
    o
}

fn comparison(c: &Comparison) -> String {
    let mut o = format!("<h3>{} (B) against {} (A)</h3>\n", esc(&c.b), esc(&c.a));
    if !c.differences.is_empty() {
        o.push_str("<ul class=\"diff\">");
        for d in &c.differences {
            let _ = write!(o, "<li>{}</li>", esc(d));
        }
        o.push_str("</ul>\n");
    }
    for mc in &c.metrics {
        let (what, fmt): (&str, fn(f64) -> String) = match mc.metric {
            Metric::Throughput => ("throughput, Mbit/s", units::mbps),
            Metric::Latency => ("latency (mean RTT/2), µs", units::us),
        };
        let _ = writeln!(o, "<p><b>{what}</b>: {}</p><ul>", esc(&mc.headline));
        for s in &mc.summary {
            let _ = write!(o, "<li>{}</li>", esc(s));
        }
        o.push_str("</ul>\n<table class=\"compare\"><tr><th>bytes</th><th>A</th><th>B</th><th>B/A</th><th>95% interval</th><th>t</th><th>verdict</th></tr>\n");
        for r in &mc.rows {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}–{:.3}</td><td>{}</td><td>{}</td></tr>",
                r.size,
                fmt(r.a),
                fmt(r.b),
                r.ratio,
                r.ratio_low,
                r.ratio_high,
                r.t.map(|t| format!("{t:.1}")).unwrap_or_else(|| "-".into()),
                r.verdict.name()
            );
        }
        o.push_str("</table>\n");
    }
    for (which, v) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        if !v.is_empty() {
            let list: Vec<String> = v.iter().map(u64::to_string).collect();
            let _ = writeln!(o, "<p>sizes only in {which}: {}</p>", list.join(", "));
        }
    }
    o
}

/// The comparisons of every run against the first.
pub fn comparisons(runs: &[Named<'_>], labels: &[String]) -> Vec<Comparison> {
    (1..runs.len())
        .map(|i| {
            compare::compare(
                runs[0],
                runs[i],
                (&labels[0], &labels[i]),
                compare::DEFAULT_NOISE,
            )
        })
        .collect()
}

/// The whole page. The same files always give the same bytes (nothing about "now" is written).
pub fn page(runs: &[Named<'_>]) -> String {
    let labels = legend::labels(runs);
    let title = if runs.len() == 1 {
        format!("netsweep report: {}", labels[0])
    } else {
        format!("netsweep report: {}", labels.join(" vs "))
    };
    let mut o = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n<h1>{}</h1>\n<ul>\n",
        esc(&title),
        esc(&title)
    );
    for (i, r) in runs.iter().enumerate() {
        let _ = writeln!(
            o,
            "<li><span class=\"swatch\" style=\"background:{}\"></span><b>{}</b> — {} · {} points · started {}</li>",
            color(i),
            esc(&labels[i]),
            esc(r.name),
            r.run.points.len(),
            esc(&r.run.started_at)
        );
    }
    o.push_str("</ul>\n<h2>Anomalies</h2>\n");
    o.push_str(&anomalies(runs, &labels));
    for (i, r) in runs.iter().enumerate() {
        if let Some(k) = &r.run.knee {
            let _ = writeln!(
                o,
                "<p class=\"knee\"><span class=\"swatch\" style=\"background:{}\"></span><b>{}</b> knee: {}</p>",
                color(i),
                esc(&labels[i]),
                esc(&k.detail)
            );
        }
    }
    o.push_str("<h2>Figures</h2>\n");
    for c in figures::all(runs, &labels) {
        let _ = writeln!(
            o,
            "<figure id=\"fig-{}\">\n{}</figure>",
            c.id,
            svg::render(&c)
        );
    }
    if runs.len() > 1 {
        let cs = comparisons(runs, &labels);
        o.push_str("<h2>Comparison</h2>\n<p>Per size, B ÷ A with its 95% confidence interval; a difference is significant when Welch's t-test on the two points' trial statistics rejects equal means at 95% (see docs/report.md).</p>\n");
        // A ratio needs a point both runs measured: without one, say why instead of
        // drawing an empty chart.
        if cs.iter().any(|c| !c.metrics.is_empty()) {
            let _ = writeln!(
                o,
                "<figure id=\"fig-ratio\">\n{}</figure>",
                svg::render(&compare::plot::ratio_chart(&cs, Metric::Throughput))
            );
        }
        for (i, _) in cs.iter().enumerate().filter(|(_, c)| c.metrics.is_empty()) {
            let _ = writeln!(
                o,
                "<p class=\"none\">{} and {} share no measured point, so there is no ratio to draw: {}.</p>",
                esc(&labels[0]),
                esc(&labels[i + 1]),
                esc(&compare::swept(runs[0].run, runs[i + 1].run))
            );
        }
        for c in &cs {
            o.push_str(&comparison(c));
        }
    }
    o.push_str("<h2>Runs side by side</h2>\n<p class=\"none\">Rows that differ between runs are highlighted.</p>\n");
    o.push_str(&meta::table(runs, &labels));
    o.push_str("<h2>Points</h2>\n");
    for (i, r) in runs.iter().enumerate() {
        let _ = writeln!(
            o,
            "<details open><summary><b>{}</b> ({})</summary>\n{}</details>",
            esc(&labels[i]),
            esc(r.name),
            points::table(r.run)
        );
    }
    o.push_str("</body>\n</html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_sweeps_page_names_its_knee() {
        let run = crate::load_figures::tests::sweep();
        let page = page(&[Named::new("r.json", &run)]);
        assert!(page.contains("knee: latency climbs"), "html");
    }
}
