//! Comparing runs: per point both swept (size, and offered load for rate sweeps), the ratio
//! B ÷ A of throughput (and of latency for pingpong) with its 95% interval, a verdict read
//! from that same interval and a noise threshold, one headline per metric (how many pairs
//! differ, the median change with its interval), contiguous ranges summarised in words, the
//! sizes only one run measured, and every configuration or placement difference stated.

pub mod interval;
pub mod plot;
pub mod ranges;
pub mod text;

use crate::legend::{self, Named};
use netsweep_model::experiment::spread::{spread, CONFIDENCE};
use netsweep_model::results::{Estimate, PointResult, RunResult};
use netsweep_model::spec::Pattern;
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

/// One point measured by both runs: the same size and, for `--rates` sweeps, the same
/// offered load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Message size, bytes.
    pub size: u64,
    /// The offered load both points were measured at (rate sweeps), per second in the
    /// run's unit; absent for sweeps of size alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_rate: Option<f64>,
    /// A's mean at this point (Mbit/s or ns, as the metric).
    pub a: f64,
    /// Half-width of A's 95% CI, same unit; NaN (null) when A has no interval.
    pub a_ci95: f64,
    /// Trials A's mean is from.
    pub a_trials: u32,
    /// B's mean at this point.
    pub b: f64,
    /// Half-width of B's 95% CI; NaN (null) when B has no interval.
    pub b_ci95: f64,
    /// Trials B's mean is from.
    pub b_trials: u32,
    /// b ÷ a.
    pub ratio: f64,
    /// Lower end of the 95% interval of b ÷ a (Welch on the log scale); NaN (null) when it
    /// cannot be computed.
    pub ratio_low: f64,
    /// Upper end of that interval.
    pub ratio_high: f64,
    /// ln(b ÷ a) over its standard error; `None` when it cannot be tested (a side with fewer
    /// than 2 trials or no interval) or is infinite.
    pub t: Option<f64>,
    /// Welch–Satterthwaite degrees of freedom of that test; `None` when it cannot be tested.
    pub df: Option<f64>,
    /// How B compares with A here: different only when the interval above excludes 1 and
    /// the change exceeds the comparison's noise threshold.
    pub verdict: Verdict,
}

/// A comparison of one metric between a baseline A and another run B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    /// What is compared.
    pub metric: Metric,
    /// One row per point both runs measured, by size then offered load.
    pub rows: Vec<Row>,
    /// Rows judged different (better or worse).
    pub differing: u32,
    /// Median of B ÷ A over the rows.
    pub median_ratio: f64,
    /// Distribution-free 95% interval of that median; `None` with fewer than six rows.
    pub median_ratio_ci95: Option<(f64, f64)>,
    /// The one line that leads the comparison of this metric.
    pub headline: String,
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
    /// The smallest change called a difference (0.02 = 2%): a pair whose interval excludes 1
    /// but whose change is smaller is reported the same, as criterion's noise threshold does.
    pub noise: f64,
    /// Throughput always; latency too when both runs are pingpong. Empty when no point pairs.
    pub metrics: Vec<MetricComparison>,
    /// Sizes only A measured, ascending.
    pub only_in_a: Vec<u64>,
    /// Sizes only B measured, ascending.
    pub only_in_b: Vec<u64>,
    /// Configuration, host and placement differences that qualify the result.
    pub differences: Vec<String>,
}

/// The default noise threshold: changes below 2% are not called differences. Re-runs of one
/// command on one host drift by about this much (docs/methodology.md, "Calibration").
pub const DEFAULT_NOISE: f64 = 0.02;

fn row(key: Key, a: interval::Side, b: interval::Side, higher_is_better: bool, noise: f64) -> Row {
    let ratio = if a.0 != 0.0 { b.0 / a.0 } else { f64::NAN };
    let ri = interval::ratio(a, b);
    let verdict = match ri {
        None => Verdict::Unknown,
        Some(i) if i.low <= 1.0 && i.high >= 1.0 => Verdict::Same,
        Some(_) if (ratio - 1.0).abs() <= noise => Verdict::Same,
        Some(_) if (ratio > 1.0) == higher_is_better => Verdict::Better,
        Some(_) => Verdict::Worse,
    };
    Row {
        size: key.size,
        offered_rate: key.offered_rate,
        a: a.0,
        a_ci95: a.1,
        a_trials: a.2,
        b: b.0,
        b_ci95: b.1,
        b_trials: b.2,
        ratio,
        ratio_low: ri.map_or(f64::NAN, |i| i.low),
        ratio_high: ri.map_or(f64::NAN, |i| i.high),
        t: ri.map(|i| i.t).filter(|t| t.is_finite()),
        df: ri.map(|i| i.df),
        verdict,
    }
}

/// What two points are paired on: what the runs swept.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key {
    size: u64,
    offered_rate: Option<f64>,
}

fn key(p: &PointResult) -> Key {
    Key {
        size: p.size,
        offered_rate: p.rate.as_ref().map(|r| r.offered_rate),
    }
}

fn same_key(x: Key, y: Key) -> bool {
    x.size == y.size
        && match (x.offered_rate, y.offered_rate) {
            (None, None) => true,
            // Offered loads are parsed from the same text; allow for printing round-off.
            (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()),
            _ => false,
        }
}

fn estimate(e: &Estimate, p: &PointResult) -> interval::Side {
    // No interval (fewer than two trials) gives NaN: the test then says nothing.
    (e.mean, e.ci95.unwrap_or(f64::NAN), e.trials.max(p.trials))
}

fn metric(a: &RunResult, b: &RunResult, m: Metric, noise: f64) -> Option<MetricComparison> {
    let mut rows = Vec::new();
    for pa in &a.points {
        let ka = key(pa);
        let Some(pb) = b.points.iter().find(|p| same_key(key(p), ka)) else {
            continue;
        };
        let r = match m {
            Metric::Throughput => row(
                ka,
                estimate(&pa.throughput_mbps, pa),
                estimate(&pb.throughput_mbps, pb),
                true,
                noise,
            ),
            Metric::Latency => {
                let (Some(la), Some(lb)) = (pa.latency, pb.latency) else {
                    continue;
                };
                let (da, db) = (la.half_rtt_ns, lb.half_rtt_ns);
                row(
                    ka,
                    (da.mean, da.ci95.unwrap_or(f64::NAN), pa.trials),
                    (db.mean, db.ci95.unwrap_or(f64::NAN), pb.trials),
                    false,
                    noise,
                )
            }
        };
        rows.push(r);
    }
    if rows.is_empty() {
        return None;
    }
    rows.sort_by(|x, y| {
        x.size.cmp(&y.size).then(
            x.offered_rate
                .unwrap_or(0.0)
                .total_cmp(&y.offered_rate.unwrap_or(0.0)),
        )
    });
    let differing = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Better | Verdict::Worse))
        .count() as u32;
    let ratios: Vec<f64> = rows.iter().map(|r| r.ratio).collect();
    // The distribution-free interval of the median, where there are pairs enough for 95%.
    let (median_ratio, median_ratio_ci95) = spread(&ratios).map_or((f64::NAN, None), |s| {
        (
            s.median,
            (s.confidence >= CONFIDENCE).then_some((s.lo, s.hi)),
        )
    });
    let headline = ranges::headline(m, &rows, median_ratio, median_ratio_ci95, noise);
    let ranges = ranges::group(&rows);
    let summary = ranges
        .iter()
        .map(|r| ranges::sentence(r, m, noise))
        .collect();
    Some(MetricComparison {
        metric: m,
        rows,
        differing,
        median_ratio,
        median_ratio_ci95,
        headline,
        ranges,
        summary,
    })
}

/// What each run swept, in words, for the error when two runs share no point: "A measured
/// 123 points, 1 B–8 MiB; B measured 3 points, 64 B at 1k/s–10k/s offered".
pub fn swept(a: &RunResult, b: &RunResult) -> String {
    let one = |r: &RunResult| -> String {
        let sizes: Vec<u64> = r.points.iter().map(|p| p.size).collect();
        let rates: Vec<f64> = r
            .points
            .iter()
            .filter_map(|p| p.rate.as_ref().map(|x| x.offered_rate))
            .collect();
        let (Some(lo), Some(hi)) = (sizes.iter().min(), sizes.iter().max()) else {
            return "no points".into();
        };
        let span = |lo: String, hi: String| if lo == hi { lo } else { format!("{lo}–{hi}") };
        let mut s = format!(
            "{} point{}, {}",
            sizes.len(),
            if sizes.len() == 1 { "" } else { "s" },
            span(crate::units::size(*lo), crate::units::size(*hi))
        );
        let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() {
            let si = |x: f64| format!("{}/s", netsweep_model::load::si(x));
            s.push_str(&format!(" at {} offered", span(si(lo), si(hi))));
        }
        s
    };
    format!("A measured {}; B measured {}", one(a), one(b))
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
        || sa.passes != sb.passes
    {
        out.push(format!(
            "repetition policy differs: precision ±{:.1}%, trials of {} ms, {} ms per point, {} pass(es) (A) vs ±{:.1}%, {} ms, {} ms, {} (B)",
            sa.precision * 100.0,
            sa.trial_time_ns / 1_000_000,
            sa.max_point_time_ns / 1_000_000,
            sa.passes,
            sb.precision * 100.0,
            sb.trial_time_ns / 1_000_000,
            sb.max_point_time_ns / 1_000_000,
            sb.passes
        ));
    }
    let single: Vec<&str> = [("A", sa), ("B", sb)]
        .into_iter()
        .filter(|(_, s)| s.passes < 2)
        .map(|(n, _)| n)
        .collect();
    if !single.is_empty() {
        out.push(format!(
            "{} measured each size in one pass: their intervals are within-run and miss the host's drift between runs (on a 2-vCPU VM identical one-pass runs flagged two thirds of their points, three-pass runs about one in twenty: docs/methodology.md, \"Calibration\"): re-run with --passes 3 before trusting per-point verdicts",
            single.join(" and ")
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

/// Compares run B with baseline A; changes within `noise` (0.02 = 2%) are not differences.
pub fn compare(a: Named<'_>, b: Named<'_>, labels: (&str, &str), noise: f64) -> Comparison {
    let mut metrics: Vec<MetricComparison> = metric(a.run, b.run, Metric::Throughput, noise)
        .into_iter()
        .collect();
    if a.run.spec.pattern == Pattern::Pingpong && b.run.spec.pattern == Pattern::Pingpong {
        metrics.extend(metric(a.run, b.run, Metric::Latency, noise));
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
        noise,
        metrics,
        only_in_a,
        only_in_b,
        differences: differences(a.run, b.run),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(size: u64) -> Key {
        Key {
            size,
            offered_rate: None,
        }
    }

    #[test]
    fn rows_judge_direction_and_significance() {
        let r = row(k(1), (100.0, 1.0, 5), (110.0, 1.0, 5), true, 0.0);
        assert_eq!(r.verdict, Verdict::Better);
        assert!((r.ratio - 1.1).abs() < 1e-12);
        let r = row(k(1), (100.0, 1.0, 5), (110.0, 1.0, 5), false, 0.0);
        assert_eq!(r.verdict, Verdict::Worse);
        let r = row(k(1), (100.0, 20.0, 3), (105.0, 20.0, 3), true, 0.0);
        assert_eq!(r.verdict, Verdict::Same);
        let r = row(k(1), (100.0, 1.0, 1), (105.0, 1.0, 3), true, 0.0);
        assert_eq!(r.verdict, Verdict::Unknown);
        let r = row(k(1), (0.0, 0.0, 3), (0.0, 0.0, 3), true, 0.0);
        assert!(r.ratio.is_nan());
        // Significant but inside the noise threshold: the same.
        let r = row(k(1), (100.0, 0.1, 5), (101.0, 0.1, 5), true, 0.02);
        assert!(r.ratio_low > 1.0, "{r:?}");
        assert_eq!(r.verdict, Verdict::Same);
    }

    #[test]
    fn no_pair_is_called_different_while_its_interval_holds_one() {
        // Sweep the change and both sides' spreads and trial counts: wherever the printed
        // interval contains 1 the verdict is the same, wherever it excludes 1 (and the change
        // is above the noise threshold) it is not.
        let mut judged = 0;
        for n in [2u32, 3, 5, 30] {
            for ci in [0.5, 2.0, 5.0, 20.0] {
                for pct in [-30.0, -5.0, -1.0, 0.0, 1.0, 3.0, 7.0, 30.0] {
                    let b = 100.0 * (1.0 + pct / 100.0);
                    let r = row(k(1), (100.0, ci, n), (b, ci * 0.7, n + 1), true, 0.0);
                    let holds_one = r.ratio_low <= 1.0 && r.ratio_high >= 1.0;
                    assert_eq!(holds_one, r.verdict == Verdict::Same, "{r:?}");
                    assert!(r.ratio_low <= r.ratio && r.ratio <= r.ratio_high, "{r:?}");
                    judged += 1;
                }
            }
        }
        assert_eq!(judged, 128);
    }

    #[test]
    fn rate_sweeps_pair_on_the_offered_load() {
        let a = Key {
            size: 64,
            offered_rate: Some(1000.0),
        };
        let b = Key {
            size: 64,
            offered_rate: Some(2000.0),
        };
        assert!(!same_key(a, b));
        assert!(same_key(a, a));
        assert!(!same_key(a, k(64)));
        assert!(same_key(k(64), k(64)));
    }
}
