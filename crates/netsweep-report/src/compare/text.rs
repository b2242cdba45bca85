//! The text form of comparisons: differences first, then per metric a table of sizes with
//! the ratio, its CI, Welch's t and the verdict, then the summary sentences.

use super::{Comparison, Metric, MetricComparison, Verdict};
use crate::units;
use std::fmt::Write;

fn value(m: Metric, v: f64) -> String {
    match m {
        Metric::Throughput => units::mbps(v),
        Metric::Latency => units::us(v),
    }
}

fn verdict(m: Metric, v: Verdict) -> &'static str {
    match (m, v) {
        (Metric::Throughput, Verdict::Better) => "B faster",
        (Metric::Throughput, Verdict::Worse) => "B slower",
        (Metric::Latency, Verdict::Better) => "B lower",
        (Metric::Latency, Verdict::Worse) => "B higher",
        (_, Verdict::Same) => "same",
        (_, Verdict::Unknown) => "?",
    }
}

fn table(out: &mut String, mc: &MetricComparison) {
    let (title, unit) = match mc.metric {
        Metric::Throughput => ("throughput", "Mbit/s"),
        Metric::Latency => ("latency (mean RTT/2)", "µs"),
    };
    let _ = writeln!(
        out,
        "\n{title}, {unit}: B ÷ A with its 95% CI; significance by Welch's t-test at 95%"
    );
    let _ = writeln!(
        out,
        "{:>9} {:>12} {:>12} {:>8} {:>8} {:>8}  verdict",
        "bytes", "A", "B", "B/A", "± CI", "t"
    );
    for r in &mc.rows {
        let _ = writeln!(
            out,
            "{:>9} {:>12} {:>12} {:>8} {:>8} {:>8}  {}",
            r.size,
            value(mc.metric, r.a),
            value(mc.metric, r.b),
            units::fixed3(r.ratio),
            units::fixed3(r.ratio_ci95),
            r.t.map(|t| units::huge(t).unwrap_or_else(|| format!("{t:.1}")))
                .unwrap_or_else(|| "-".into()),
            verdict(mc.metric, r.verdict)
        );
    }
    for s in &mc.summary {
        let _ = writeln!(out, "  → {s}");
    }
}

fn sizes(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// One comparison as text.
pub fn render(c: &Comparison) -> String {
    let mut out = format!("A: {} ({})\nB: {} ({})\n", c.a, c.a_file, c.b, c.b_file);
    for d in &c.differences {
        let _ = writeln!(out, "! {d}");
    }
    if c.metrics.is_empty() {
        out.push_str("\nno size was measured by both runs: nothing to compare\n");
    }
    for mc in &c.metrics {
        table(&mut out, mc);
    }
    if !c.only_in_a.is_empty() {
        let _ = writeln!(out, "\nsizes only in A: {}", sizes(&c.only_in_a));
    }
    if !c.only_in_b.is_empty() {
        let _ = writeln!(out, "\nsizes only in B: {}", sizes(&c.only_in_b));
    }
    out
}

/// Several comparisons (each against the same baseline A), separated by a rule.
pub fn render_all(cs: &[Comparison]) -> String {
    cs.iter()
        .map(render)
        .collect::<Vec<_>>()
        .join("\n────────────────────────────────────────────────────────────\n\n")
}
