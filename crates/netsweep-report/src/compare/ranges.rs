//! Contiguous ranges of sizes with the same verdict, and the sentence that summarises each
//! ("B is 7.1% faster than A from 1 KiB to 1472 B, significant").

use super::{Metric, Row};
use crate::units;
use serde::Serialize;

/// How B compares with A at a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Significantly better (higher throughput, lower latency).
    Better,
    /// Significantly worse.
    Worse,
    /// No significant difference at 95%.
    Same,
    /// Too few trials on a side to test.
    Unknown,
}

impl Verdict {
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Same => "same",
            Verdict::Unknown => "unknown",
        }
    }
}

/// A run of consecutive common sizes with one verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Range {
    /// First size of the range, bytes.
    pub from_size: u64,
    /// Last size of the range, bytes.
    pub to_size: u64,
    /// Sizes (rows) in the range.
    pub points: u32,
    /// The verdict every row of the range shares.
    pub verdict: Verdict,
    /// Geometric mean of B ÷ A over the range.
    pub ratio: f64,
    /// Smallest B ÷ A in the range (NaN when no row had a finite positive ratio).
    pub ratio_min: f64,
    /// Largest B ÷ A in the range (NaN likewise).
    pub ratio_max: f64,
}

/// Groups rows (sorted by size) into ranges of equal verdict.
pub fn group(rows: &[Row]) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    let mut logs: Vec<(f64, u32)> = Vec::new();
    for r in rows {
        let same = out.last().is_some_and(|g| g.verdict == r.verdict);
        if !same {
            out.push(Range {
                from_size: r.size,
                to_size: r.size,
                points: 0,
                verdict: r.verdict,
                ratio: f64::NAN,
                ratio_min: f64::INFINITY,
                ratio_max: f64::NEG_INFINITY,
            });
            logs.push((0.0, 0));
        }
        let (Some(g), Some(l)) = (out.last_mut(), logs.last_mut()) else {
            continue;
        };
        g.to_size = r.size;
        g.points += 1;
        if r.ratio.is_finite() && r.ratio > 0.0 {
            l.0 += r.ratio.ln();
            l.1 += 1;
            g.ratio_min = g.ratio_min.min(r.ratio);
            g.ratio_max = g.ratio_max.max(r.ratio);
        }
    }
    for (g, (sum, n)) in out.iter_mut().zip(logs) {
        if n > 0 {
            g.ratio = (sum / n as f64).exp();
        } else {
            g.ratio_min = f64::NAN;
            g.ratio_max = f64::NAN;
        }
    }
    out
}

fn span(r: &Range) -> String {
    if r.from_size == r.to_size {
        format!("at {}", units::size(r.from_size))
    } else {
        format!(
            "from {} to {}",
            units::size(r.from_size),
            units::size(r.to_size)
        )
    }
}

/// The summary sentence of a range.
pub fn sentence(r: &Range, m: Metric) -> String {
    let pct = |x: f64| format!("{:.1}%", (x * 100.0).abs());
    let points = if r.points == 1 {
        "1 size".to_string()
    } else {
        format!("{} sizes", r.points)
    };
    match (r.verdict, m) {
        (Verdict::Better, Metric::Throughput) => format!(
            "B is {} faster than A {} ({points}), significant",
            pct(r.ratio - 1.0),
            span(r)
        ),
        (Verdict::Worse, Metric::Throughput) => format!(
            "B is {} slower than A {} ({points}), significant",
            pct(1.0 - r.ratio),
            span(r)
        ),
        (Verdict::Better, Metric::Latency) => format!(
            "B's latency is {} lower than A's {} ({points}), significant",
            pct(1.0 - r.ratio),
            span(r)
        ),
        (Verdict::Worse, Metric::Latency) => format!(
            "B's latency is {} higher than A's {} ({points}), significant",
            pct(r.ratio - 1.0),
            span(r)
        ),
        (Verdict::Same, _) => format!(
            "no significant difference {} ({points}; B/A {}–{})",
            span(r),
            units::short(r.ratio_min),
            units::short(r.ratio_max)
        ),
        (Verdict::Unknown, _) => format!(
            "cannot judge {} ({points}): a side has fewer than 2 trials",
            span(r)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(size: u64, ratio: f64, verdict: Verdict) -> Row {
        Row {
            size,
            a: 100.0,
            a_ci95: 1.0,
            a_trials: 3,
            b: 100.0 * ratio,
            b_ci95: 1.0,
            b_trials: 3,
            ratio,
            ratio_ci95: 0.01,
            t: None,
            df: None,
            verdict,
        }
    }

    #[test]
    fn groups_and_words() {
        let rows = vec![
            r(1024, 1.07, Verdict::Better),
            r(1472, 1.072, Verdict::Better),
            r(4096, 1.01, Verdict::Same),
            r(8192, 0.99, Verdict::Same),
        ];
        let g = group(&rows);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].from_size, g[0].to_size, g[0].points), (1024, 1472, 2));
        assert_eq!(
            sentence(&g[0], Metric::Throughput),
            "B is 7.1% faster than A from 1 KiB to 1472 B (2 sizes), significant"
        );
        assert_eq!(
            sentence(&g[1], Metric::Throughput),
            "no significant difference from 4 KiB to 8 KiB (2 sizes; B/A 0.99–1.01)"
        );
        assert!(group(&[]).is_empty());
    }
}
