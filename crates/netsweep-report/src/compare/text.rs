//! The text form of comparisons: each metric's headline first, then the differences, then per
//! metric a table of points with the ratio, its interval, t and the verdict, then the summary
//! sentences.

use super::{Comparison, Metric, MetricComparison, Verdict};
use crate::units;
use netsweep_model::load;
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
    let rates = mc.rows.iter().any(|r| r.offered_rate.is_some());
    let _ = writeln!(
        out,
        "\n{title}, {unit}: B ÷ A with its 95% interval (Welch, log scale); a difference when the interval excludes 1 and the change exceeds the noise threshold"
    );
    let _ = writeln!(
        out,
        "{:>9}{} {:>12} {:>12} {:>8} {:>17} {:>8}  verdict",
        "bytes",
        if rates {
            format!(" {:>9}", "offered")
        } else {
            String::new()
        },
        "A",
        "B",
        "B/A",
        "95% interval",
        "t"
    );
    for r in &mc.rows {
        let interval = if r.ratio_low.is_finite() && r.ratio_high.is_finite() {
            format!(
                "[{}, {}]",
                units::fixed3(r.ratio_low),
                units::fixed3(r.ratio_high)
            )
        } else {
            "-".into()
        };
        let rate = match r.offered_rate {
            Some(x) if rates => format!(" {:>9}", format!("{}/s", load::si(x))),
            _ if rates => format!(" {:>9}", "-"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{:>9}{rate} {:>12} {:>12} {:>8} {:>17} {:>8}  {}",
            r.size,
            value(mc.metric, r.a),
            value(mc.metric, r.b),
            units::fixed3(r.ratio),
            interval,
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
    let mut out = String::new();
    for mc in &c.metrics {
        let _ = writeln!(out, "{}", mc.headline);
    }
    let _ = write!(
        out,
        "A: {} ({})\nB: {} ({})\n",
        c.a, c.a_file, c.b, c.b_file
    );
    for d in &c.differences {
        let _ = writeln!(out, "! {d}");
    }
    if c.metrics.is_empty() {
        out.push_str("\nno point was measured by both runs: nothing to compare\n");
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
