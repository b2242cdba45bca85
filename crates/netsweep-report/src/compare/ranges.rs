//! Contiguous ranges of points with the same verdict, the sentence that summarises each
//! ("B is 7.1% faster than A from 1 KiB to 1472 B, significant"), and each metric's headline.

use super::{Metric, Row};
use crate::units;
use netsweep_model::load;
use serde::Serialize;

/// How B compares with A at a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Significantly better (higher throughput, lower latency).
    Better,
    /// Significantly worse.
    Worse,
    /// No difference: the 95% interval of B ÷ A holds 1, or the change is within the
    /// comparison's noise threshold.
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

/// A run of consecutive common points with one verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Range {
    /// First size of the range, bytes.
    pub from_size: u64,
    /// Last size of the range, bytes.
    pub to_size: u64,
    /// Rate sweeps: the first offered load of the range, requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_rate: Option<f64>,
    /// Rate sweeps: the last offered load of the range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_rate: Option<f64>,
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
                from_rate: r.offered_rate,
                to_rate: r.offered_rate,
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
        g.to_rate = r.offered_rate;
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
    let rates = r.from_rate.zip(r.to_rate);
    if let Some((lo, hi)) = rates.filter(|_| r.from_size == r.to_size) {
        let size = units::size(r.from_size);
        return if lo == hi {
            format!("at {size}, {}/s offered", load::si(lo))
        } else {
            format!(
                "at {size} from {}/s to {}/s offered",
                load::si(lo),
                load::si(hi)
            )
        };
    }
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

fn signed_pct(ratio: f64) -> String {
    format!("{:+.1}%", (ratio - 1.0) * 100.0)
}

/// The line that leads a metric's comparison: how many pairs differ, and the median change
/// with its distribution-free interval ("throughput: B differs from A at 3 of 123 points
/// (2 faster, 1 slower); median change +0.4% [−0.3%, +1.1%]").
pub fn headline(
    m: Metric,
    rows: &[Row],
    median: f64,
    ci: Option<(f64, f64)>,
    noise: f64,
) -> String {
    let (up, down) = match m {
        Metric::Throughput => ("faster", "slower"),
        Metric::Latency => ("lower", "higher"),
    };
    let better = rows.iter().filter(|r| r.verdict == Verdict::Better).count();
    let worse = rows.iter().filter(|r| r.verdict == Verdict::Worse).count();
    let unknown = rows
        .iter()
        .filter(|r| r.verdict == Verdict::Unknown)
        .count();
    let n = rows.len();
    let differing = better + worse;
    let what = if differing == 0 {
        format!(
            "no difference beyond {:.0}% at any of {n} points",
            noise * 100.0
        )
    } else {
        format!("B differs from A at {differing} of {n} points ({better} {up}, {worse} {down})")
    };
    let judged = if unknown > 0 {
        format!("; {unknown} could not be judged (fewer than 2 trials)")
    } else {
        String::new()
    };
    let med = match ci {
        _ if !median.is_finite() => String::new(),
        Some((lo, hi)) => format!(
            "; median change {} [{}, {}]",
            signed_pct(median),
            signed_pct(lo),
            signed_pct(hi)
        ),
        None => format!(
            "; median change {} (too few points for its interval)",
            signed_pct(median)
        ),
    };
    format!("{}: {what}{judged}{med}", m.name())
}

/// The summary sentence of a range; `noise` is the comparison's noise threshold.
pub fn sentence(r: &Range, m: Metric, noise: f64) -> String {
    let pct = |x: f64| format!("{:.1}%", (x * 100.0).abs());
    let points = if r.points == 1 {
        "1 point".to_string()
    } else {
        format!("{} points", r.points)
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
            "no difference beyond {:.0}% {} ({points}; B/A {}–{})",
            noise * 100.0,
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
            offered_rate: None,
            ratio,
            ratio_low: ratio - 0.01,
            ratio_high: ratio + 0.01,
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
            sentence(&g[0], Metric::Throughput, 0.02),
            "B is 7.1% faster than A from 1 KiB to 1472 B (2 points), significant"
        );
        assert_eq!(
            sentence(&g[1], Metric::Throughput, 0.02),
            "no difference beyond 2% from 4 KiB to 8 KiB (2 points; B/A 0.99–1.01)"
        );
        assert_eq!(
            headline(Metric::Throughput, &rows, 1.04, None, 0.02),
            "throughput: B differs from A at 2 of 4 points (2 faster, 0 slower); median change +4.0% (too few points for its interval)"
        );
        let same: Vec<Row> = rows
            .iter()
            .map(|x| Row {
                verdict: Verdict::Same,
                ..x.clone()
            })
            .collect();
        assert_eq!(
            headline(Metric::Latency, &same, 0.995, Some((0.99, 1.003)), 0.02),
            "latency: no difference beyond 2% at any of 4 points; median change -0.5% [-1.0%, +0.3%]"
        );
        assert!(group(&[]).is_empty());
    }
}
