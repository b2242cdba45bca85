//! Comparing runs: per size, the ratio B ÷ A of throughput (and of latency for pingpong) with
//! its confidence interval, whether the difference is significant (Welch's t-test from each
//! point's mean, CI half-width and trial count), contiguous ranges summarised in words, the
//! sizes only one run measured, and every configuration or placement difference stated.

pub mod plot;
pub mod ranges;
pub mod text;

use crate::legend::{self, Named};
use netsweep_model::results::{Estimate, PointResult, RunResult};
use netsweep_model::spec::Pattern;
use netsweep_model::stats::{student_t_975, welch_t_test, SampleStats};
use serde::Serialize;

pub use ranges::{Range, Verdict};

/// What is compared; decides whether higher is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Headline throughput, Mbit/s (higher is better).
    Throughput,
    /// Mean RTT/2, ns (lower is better).
    Latency,
}

impl Metric {
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::Latency => "latency",
        }
    }
}

/// One size measured by both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Message size, bytes.
    pub size: u64,
    /// A's mean at this size (Mbit/s or ns, as the metric).
    pub a: f64,
    /// Half-width of A's 95% CI, same unit; NaN (null) when A has no interval.
    pub a_ci95: f64,
    /// Trials A's mean is from.
    pub a_trials: u32,
    /// B's mean at this size.
    pub b: f64,
    /// Half-width of B's 95% CI; NaN (null) when B has no interval.
    pub b_ci95: f64,
    /// Trials B's mean is from.
    pub b_trials: u32,
    /// b ÷ a.
    pub ratio: f64,
    /// Half-width of the ratio's 95% CI (first order: relative half-widths in quadrature).
    pub ratio_ci95: f64,
    /// Welch's t of B against A; `None` when it cannot be tested (a side with fewer than 2
    /// trials or no interval) or is infinite.
    pub t: Option<f64>,
    /// Welch–Satterthwaite degrees of freedom of that test; `None` when it cannot be tested.
    pub df: Option<f64>,
    /// How B compares with A here.
    pub verdict: Verdict,
}

/// A comparison of one metric between a baseline A and another run B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    /// What is compared.
    pub metric: Metric,
    /// One row per size both runs measured, by size.
    pub rows: Vec<Row>,
    /// Consecutive rows with one verdict, grouped.
    pub ranges: Vec<Range>,
    /// Plain-language summary, one sentence per range.
    pub summary: Vec<String>,
}

/// A comparison of run B against baseline A.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Label of run A, as the caller gave it (the CLI passes the legend's label).
    pub a: String,
    /// Label of run B.
    pub b: String,
    /// A's file name, without directory and extension.
    pub a_file: String,
    /// B's file name, likewise.
    pub b_file: String,
    /// Throughput always; latency too when both runs are pingpong. Empty when no size is common.
    pub metrics: Vec<MetricComparison>,
    /// Sizes only A measured, ascending.
    pub only_in_a: Vec<u64>,
    /// Sizes only B measured, ascending.
    pub only_in_b: Vec<u64>,
    /// Configuration, host and placement differences that qualify the result.
    pub differences: Vec<String>,
}

/// Sample statistics of an estimate from its mean, 95% CI half-width and trial count:
/// the standard error is ci95 ÷ t(0.975, n−1), so the variance is (ci95 ÷ t)² · n.
pub fn sample_stats(mean: f64, ci95: f64, trials: u32) -> SampleStats {
    let n = trials as u64;
    let t = student_t_975(n.saturating_sub(1));
    let se = if t.is_finite() && t > 0.0 {
        ci95 / t
    } else {
        0.0
    };
    SampleStats {
        mean,
        variance: se * se * n as f64,
        n,
    }
}

fn row(size: u64, a: (f64, f64, u32), b: (f64, f64, u32), higher_is_better: bool) -> Row {
    let ratio = if a.0 != 0.0 { b.0 / a.0 } else { f64::NAN };
    let rel = |m: f64, ci: f64| {
        if m != 0.0 {
            ci / m.abs()
        } else {
            f64::INFINITY
        }
    };
    let ratio_ci95 = ratio.abs() * (rel(a.0, a.1).powi(2) + rel(b.0, b.1).powi(2)).sqrt();
    let w = welch_t_test(&sample_stats(b.0, b.1, b.2), &sample_stats(a.0, a.1, a.2));
    let verdict = match w {
        None => Verdict::Unknown,
        Some(w) if !w.significant_at_95 => Verdict::Same,
        Some(w) if (w.t > 0.0) == higher_is_better => Verdict::Better,
        Some(_) => Verdict::Worse,
    };
    Row {
        size,
        a: a.0,
        a_ci95: a.1,
        a_trials: a.2,
        b: b.0,
        b_ci95: b.1,
        b_trials: b.2,
        ratio,
        ratio_ci95: if ratio_ci95.is_finite() {
            ratio_ci95
        } else {
            f64::NAN
        },
        t: w.map(|w| w.t).filter(|t| t.is_finite()),
        df: w.map(|w| w.df),
        verdict,
    }
}

fn estimate(e: &Estimate, p: &PointResult) -> (f64, f64, u32) {
    // No interval (fewer than two trials) gives NaN: the test then says nothing.
    (e.mean, e.ci95.unwrap_or(f64::NAN), e.trials.max(p.trials))
}

fn metric(a: &RunResult, b: &RunResult, m: Metric) -> Option<MetricComparison> {
    let mut rows = Vec::new();
    for pa in &a.points {
        let Some(pb) = b.points.iter().find(|p| p.size == pa.size) else {
            continue;
        };
        let r = match m {
            Metric::Throughput => row(
                pa.size,
                estimate(&pa.throughput_mbps, pa),
                estimate(&pb.throughput_mbps, pb),
                true,
            ),
            Metric::Latency => {
                let (Some(la), Some(lb)) = (pa.latency, pb.latency) else {
                    continue;
                };
                let (da, db) = (la.half_rtt_ns, lb.half_rtt_ns);
                row(
                    pa.size,
                    (da.mean, da.ci95.unwrap_or(f64::NAN), pa.trials),
                    (db.mean, db.ci95.unwrap_or(f64::NAN), pb.trials),
                    false,
                )
            }
        };
        rows.push(r);
    }
    if rows.is_empty() {
        return None;
    }
    rows.sort_by_key(|r| r.size);
    let ranges = ranges::group(&rows);
    let summary = ranges.iter().map(|r| ranges::sentence(r, m)).collect();
    Some(MetricComparison {
        metric: m,
        rows,
        ranges,
        summary,
    })
}

/// Share of observed trials that had both ends on one CPU, over all points.
fn same_cpu_share(run: &RunResult) -> Option<f64> {
    let (same, obs) = run.points.iter().fold((0u64, 0u64), |(s, o), p| {
        (
            s + p.placement.same_cpu_trials as u64,
            o + p.placement.observed_trials as u64,
        )
    });
    (obs > 0).then(|| same as f64 / obs as f64)
}

/// Every difference between the runs' configurations, hosts and placement, in words.
pub fn differences(a: &RunResult, b: &RunResult) -> Vec<String> {
    let mut out = Vec::new();
    let (fa, fb) = (legend::fields(a), legend::fields(b));
    let mut keys: Vec<&String> = fa.iter().chain(fb.iter()).map(|f| &f.0).collect();
    keys.dedup();
    let mut seen: Vec<&String> = Vec::new();
    for k in keys {
        if seen.contains(&k) {
            continue;
        }
        seen.push(k);
        let get = |f: &[(String, String, bool)]| {
            f.iter()
                .find(|x| &x.0 == k)
                .map(|x| x.1.clone())
                .unwrap_or_else(|| "default".into())
        };
        let (va, vb) = (get(&fa), get(&fb));
        if va != vb {
            out.push(format!("configuration differs: {k} {va} (A) vs {vb} (B)"));
        }
    }
    let host = |r: &RunResult| {
        (
            r.client.kernel.clone(),
            r.client.cpu_model.clone(),
            r.client.cpu_count,
        )
    };
    if host(a) != host(b) {
        out.push(format!(
            "hosts differ: A ran on {} ({} × {}), B on {} ({} × {})",
            a.client.kernel,
            a.client.cpu_count,
            a.client.cpu_model,
            b.client.kernel,
            b.client.cpu_count,
            b.client.cpu_model
        ));
    }
    if a.tool.version != b.tool.version {
        out.push(format!(
            "tool versions differ: {} (A) vs {} (B)",
            a.tool.version, b.tool.version
        ));
    }
    let (sa, sb) = (&a.spec, &b.spec);
    if sa.precision != sb.precision
        || sa.trial_time_ns != sb.trial_time_ns
        || sa.max_point_time_ns != sb.max_point_time_ns
    {
        out.push(format!(
            "repetition policy differs: precision ±{:.1}%, trials of {} ms, {} ms per point (A) vs ±{:.1}%, {} ms, {} ms (B)",
            sa.precision * 100.0,
            sa.trial_time_ns / 1_000_000,
            sa.max_point_time_ns / 1_000_000,
            sb.precision * 100.0,
            sb.trial_time_ns / 1_000_000,
            sb.max_point_time_ns / 1_000_000
        ));
    }
    let (ga, gb) = (&a.granted.client, &b.granted.client);
    if ga.congestion_control != gb.congestion_control {
        out.push(format!(
            "congestion control differs: {} (A) vs {} (B)",
            ga.congestion_control.as_deref().unwrap_or("none"),
            gb.congestion_control.as_deref().unwrap_or("none")
        ));
    }
    match (same_cpu_share(a), same_cpu_share(b)) {
        (Some(x), Some(y)) if (x - y).abs() > 0.1 => out.push(format!(
            "placement differs: both ends shared a CPU in {:.0}% of A's trials and {:.0}% of B's; on small machines that alone changes loopback latency 5–10×: pin both runs (taskset -c 0) to compare the paths",
            x * 100.0,
            y * 100.0
        )),
        (Some(_), None) | (None, Some(_)) => {
            out.push("placement was recorded for only one run: it may explain differences".into())
        }
        _ => {}
    }
    out
}

/// Compares run B with baseline A.
pub fn compare(a: Named<'_>, b: Named<'_>, labels: (&str, &str)) -> Comparison {
    let mut metrics: Vec<MetricComparison> = metric(a.run, b.run, Metric::Throughput)
        .into_iter()
        .collect();
    if a.run.spec.pattern == Pattern::Pingpong && b.run.spec.pattern == Pattern::Pingpong {
        metrics.extend(metric(a.run, b.run, Metric::Latency));
    }
    let sizes = |r: &RunResult| r.points.iter().map(|p| p.size).collect::<Vec<_>>();
    let (sa, sb) = (sizes(a.run), sizes(b.run));
    let mut only_in_a: Vec<u64> = sa.iter().copied().filter(|s| !sb.contains(s)).collect();
    let mut only_in_b: Vec<u64> = sb.iter().copied().filter(|s| !sa.contains(s)).collect();
    only_in_a.sort_unstable();
    only_in_b.sort_unstable();
    Comparison {
        a: labels.0.to_string(),
        b: labels.1.to_string(),
        a_file: a.name.to_string(),
        b_file: b.name.to_string(),
        metrics,
        only_in_a,
        only_in_b,
        differences: differences(a.run, b.run),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variance_from_ci_round_trips() {
        // Samples 10, 12, 14: mean 12, s² = 4, CI half-width 4.303·2/√3.
        let ci = netsweep_model::stats::ci95(&[10.0, 12.0, 14.0]).unwrap();
        let s = sample_stats(12.0, ci.half_width, 3);
        assert!((s.variance - 4.0).abs() < 1e-9, "{}", s.variance);
    }

    #[test]
    fn rows_judge_direction_and_significance() {
        let r = row(1, (100.0, 1.0, 5), (110.0, 1.0, 5), true);
        assert_eq!(r.verdict, Verdict::Better);
        assert!((r.ratio - 1.1).abs() < 1e-12);
        let r = row(1, (100.0, 1.0, 5), (110.0, 1.0, 5), false);
        assert_eq!(r.verdict, Verdict::Worse);
        let r = row(1, (100.0, 20.0, 3), (105.0, 20.0, 3), true);
        assert_eq!(r.verdict, Verdict::Same);
        let r = row(1, (100.0, 1.0, 1), (105.0, 1.0, 3), true);
        assert_eq!(r.verdict, Verdict::Unknown);
        let r = row(1, (0.0, 0.0, 3), (0.0, 0.0, 3), true);
        assert!(r.ratio.is_nan());
    }
}
