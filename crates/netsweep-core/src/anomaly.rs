//! Anomaly detection on a throughput-vs-size sweep: dips (chasms), cliffs and unstable bands.
//!
//! NetPIPE made a "chasm" visible: a band of block sizes where throughput fell from normal to a
//! few Mbit/s, missed by studies that measured too few points. This module finds such things
//! itself. Everything works on log-throughput against log-size, compares each point (or band
//! of points) with a robust local trend taken from its neighbours (medians on each side), and
//! reports an anomaly only when it is both large — at least [`DetectConfig::floor`] (30%)
//! below the trend — and beyond the points' own confidence intervals: `confidence` is the
//! probability, from the per-point CIs and the sweep's point-to-point scatter, that the true
//! drop exceeds the floor, and it must reach [`DetectConfig::min_confidence`] (0.95).
//!
//! CPU placement (both ends on one CPU in some points and not in others) moves a small
//! machine's loopback throughput 5–10×: over loopback, a level change where placement changed
//! is not reported when it is within the placement factor measured in the run (with a
//! margin). A drop far beyond it, or any drop on a path that is not loopback (a veth into
//! another namespace, a remote host — where a slow band is what makes the scheduler put both
//! sleeping ends on one CPU), is the path's and is reported ([`placement`]).
//!
//! [`detect_run`] takes a run (its points and its path); [`detect`] bare points, read as
//! loopback; [`annotate`] stores the result in the run;
//! [`refine_sizes`] gives the sizes a `--refine` re-sweep should add.

mod placement;

use crate::results::{PointResult, RunResult};
use crate::stats::student_t_975;
pub use placement::{path_of, PathKind};
use serde::{Deserialize, Serialize};

/// What kind of anomaly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnomalyKind {
    /// A band of sizes whose throughput falls well below the trend of its neighbours on both sides.
    Dip,
    /// A persistent step down in throughput at a size (an MTU or fragmentation boundary…).
    Cliff,
    /// A band whose trial-to-trial variation is far above its neighbours'.
    Unstable,
}

impl AnomalyKind {
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::Dip => "dip",
            AnomalyKind::Cliff => "cliff",
            AnomalyKind::Unstable => "unstable",
        }
    }
}

/// A finer sweep that would resolve an anomaly: `from..to:+step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refine {
    pub from: u64,
    pub to: u64,
    pub step: u64,
}

impl Refine {
    /// The sizes of this sweep (both ends included).
    pub fn sizes(&self) -> Vec<u64> {
        let step = self.step.max(1);
        let mut v: Vec<u64> = (self.from..=self.to).step_by(step as usize).collect();
        if v.last() != Some(&self.to) {
            v.push(self.to);
        }
        v
    }

    /// The `--sizes` text of this sweep, e.g. `59k..72k:+256`.
    pub fn spec(&self) -> String {
        fn n(v: u64) -> String {
            if v >= 1024 && v.is_multiple_of(1024) {
                format!("{}k", v / 1024)
            } else {
                v.to_string()
            }
        }
        format!("{}..{}:+{}", n(self.from), n(self.to), self.step)
    }
}

/// One detected anomaly, as stored in the results file (`anomalies`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    /// First measured size inside the anomaly, bytes.
    pub from_size: u64,
    /// Last measured size inside the anomaly, bytes (for a cliff: the first size after the step).
    pub to_size: u64,
    /// Dip and cliff: the fraction by which throughput falls below the trend (0.4 = 40% lower).
    /// Unstable: the band's relative 95% CI half-width (0.3 = ±30%).
    pub magnitude: f64,
    /// 0..1: dip and cliff, the probability that the true drop exceeds the detection floor;
    /// unstable, that the band's variance exceeds its neighbours'.
    pub confidence: f64,
    /// Measured points inside the anomaly.
    pub points: u32,
    /// The quantity examined: `throughput` (pingpong bytes ÷ RTT/2, stream receiver rate).
    pub metric: String,
    /// One line of plain-language explanation, with the reference it was compared against.
    #[serde(default)]
    pub detail: String,
    /// What to do when the sweep is too coarse to resolve it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The finer sweep around it (`netsweep run --refine` measures these sizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refine: Option<Refine>,
}

/// Thresholds of the detector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DetectConfig {
    /// Smallest drop below the trend worth reporting, as a fraction (0.3 = 30%).
    pub floor: f64,
    /// A lone point must fall at least this far below the trend (0.5 = 50%).
    pub single_point_floor: f64,
    /// Smallest confidence to report.
    pub min_confidence: f64,
    /// Neighbours taken on each side for the trend.
    pub window: usize,
    /// Widest dip searched, in points.
    pub max_band: usize,
    /// Widest dip searched, as last size ÷ first size: a chasm is a band of sizes, not a
    /// regime covering decades (which on a shared machine is a slow period, not a size effect).
    pub max_band_ratio: f64,
    /// Unstable: a point's relative CI must exceed its neighbours' median by this factor…
    pub unstable_ratio: f64,
    /// …and be at least this wide (0.15 = ±15%).
    pub unstable_floor: f64,
    /// Unstable: fewest consecutive points.
    pub unstable_min_points: usize,
    /// Placement: the throughput factor placement is assumed to explain over loopback when
    /// the run measured none away from the band under test (same-CPU vs split on small
    /// machines: 5–10×).
    pub placement_factor: f64,
    /// Placement: the measured factor is widened by this factor before it excuses a drop.
    pub placement_margin: f64,
    /// Placement: never excuses more than this factor (30 = a 97% drop), however measured.
    pub placement_cap: f64,
}

impl Default for DetectConfig {
    fn default() -> Self {
        Self {
            floor: 0.30,
            single_point_floor: 0.50,
            min_confidence: 0.95,
            window: 4,
            max_band: 64,
            max_band_ratio: 4.0,
            unstable_ratio: 4.0,
            unstable_floor: 0.15,
            unstable_min_points: 4,
            placement_factor: 10.0,
            placement_margin: 2.0,
            placement_cap: 30.0,
        }
    }
}

/// Where both ends ran during a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementClass {
    /// Every observed trial had both ends on one CPU.
    Same,
    /// No observed trial had both ends on one CPU.
    Different,
    /// Some did, some did not.
    Mixed,
    /// Not observed.
    Unknown,
}

/// One point of a series to examine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesPoint {
    pub size: u64,
    /// Mean over trials (any positive rate unit).
    pub mean: f64,
    /// Half-width of the 95% CI of the mean.
    pub ci95: f64,
    pub trials: u32,
    pub placement: PlacementClass,
}

impl SeriesPoint {
    /// The headline throughput of a measured point.
    pub fn from_point(p: &PointResult) -> Self {
        let pl = &p.placement;
        let placement = if pl.observed_trials == 0 {
            PlacementClass::Unknown
        } else if pl.same_cpu_trials == pl.observed_trials {
            PlacementClass::Same
        } else if pl.same_cpu_trials == 0 {
            PlacementClass::Different
        } else {
            PlacementClass::Mixed
        };
        Self {
            size: p.size,
            mean: p.throughput_mbps.mean,
            ci95: p.throughput_mbps.ci95.unwrap_or(f64::NAN),
            trials: p.throughput_mbps.trials.max(p.trials),
            placement,
        }
    }
}

/// Detects anomalies in bare points with the default thresholds. The path is not known, so
/// placement may excuse a drop as on loopback: prefer [`detect_run`].
pub fn detect(points: &[PointResult]) -> Vec<Anomaly> {
    let series: Vec<SeriesPoint> = points.iter().map(SeriesPoint::from_point).collect();
    detect_series(&series, &DetectConfig::default())
}

/// Detects anomalies in a run's headline throughput with the default thresholds, knowing
/// its path ([`path_of`]): placement excuses nothing on a path that is not loopback.
pub fn detect_run(run: &RunResult) -> Vec<Anomaly> {
    let series: Vec<SeriesPoint> = run.points.iter().map(SeriesPoint::from_point).collect();
    detect_series_on(&series, &DetectConfig::default(), path_of(run))
}

/// Runs detection on a finished run and stores the anomalies in it (`run.anomalies`).
pub fn annotate(run: &mut RunResult) {
    run.anomalies = detect_run(run);
}

/// The sizes a `--refine` re-sweep should measure: every anomaly's finer sweep, merged,
/// sorted, without the sizes already measured.
pub fn refine_sizes(anomalies: &[Anomaly], measured: &[u64]) -> Vec<u64> {
    let mut v: Vec<u64> = anomalies
        .iter()
        .filter_map(|a| a.refine)
        .flat_map(|r| r.sizes())
        .filter(|s| !measured.contains(s))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Standard normal CDF (Abramowitz–Stegun 7.1.26, error below 1.5e-7).
fn phi(z: f64) -> f64 {
    if z.is_nan() {
        return 0.0;
    }
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The series prepared for detection: log size, log throughput and per-point log-space σ.
struct Prepared {
    size: Vec<u64>,
    x: Vec<f64>,
    y: Vec<f64>,
    /// Standard error of y from the point's own CI.
    sigma: Vec<f64>,
    /// The sweep's point-to-point scatter beyond the CIs (log space). Disturbances on a
    /// shared machine last longer than one point, so it is not averaged down over a band.
    rough: f64,
    /// Relative CI half-width (∞ for a zero mean).
    rel_ci: Vec<f64>,
    trials: Vec<u32>,
    placement: Vec<PlacementClass>,
    path: PathKind,
}

fn prepare(points: &[SeriesPoint], path: PathKind) -> Prepared {
    let mut pts: Vec<SeriesPoint> = points
        .iter()
        .copied()
        .filter(|p| p.size > 0 && p.mean.is_finite())
        .collect();
    pts.sort_by_key(|p| p.size);
    let mut positive: Vec<f64> = pts.iter().map(|p| p.mean).filter(|&m| m > 0.0).collect();
    let typical = median(&mut positive);
    let tiny = if typical.is_finite() {
        typical * 1e-4
    } else {
        1e-9
    };
    let y: Vec<f64> = pts.iter().map(|p| p.mean.max(tiny).ln()).collect();
    let x: Vec<f64> = pts.iter().map(|p| (p.size as f64).ln()).collect();
    let se: Vec<f64> = pts
        .iter()
        .map(|p| {
            if p.mean <= 0.0 {
                0.0
            } else if p.trials < 2 || !p.ci95.is_finite() {
                0.05
            } else {
                // Conservative: z instead of t turns a 95% half-width into a larger σ.
                (p.ci95 / p.mean / 1.96).min(2.0)
            }
        })
        .collect();
    let rough = roughness(&x, &y);
    Prepared {
        size: pts.iter().map(|p| p.size).collect(),
        sigma: se,
        rough,
        rel_ci: pts
            .iter()
            .map(|p| {
                if p.mean > 0.0 {
                    p.ci95 / p.mean
                } else {
                    f64::INFINITY
                }
            })
            .collect(),
        trials: pts.iter().map(|p| p.trials).collect(),
        placement: pts.iter().map(|p| p.placement).collect(),
        path,
        x,
        y,
    }
}

/// Point-to-point scatter of the sweep beyond the per-point CIs: a robust (MAD) σ of each
/// point's distance from the line through its two neighbours.
fn roughness(x: &[f64], y: &[f64]) -> f64 {
    let mut res = Vec::new();
    for i in 1..x.len().saturating_sub(1) {
        let (x0, x2) = (x[i - 1], x[i + 1]);
        if x2 - x0 <= 0.0 {
            continue;
        }
        let w = (x[i] - x0) / (x2 - x0);
        let r = y[i] - (y[i - 1] + w * (y[i + 1] - y[i - 1]));
        res.push(r.abs() / (1.0 + w * w + (1.0 - w) * (1.0 - w)).sqrt());
    }
    if res.len() < 3 {
        return 0.0;
    }
    1.4826 * median(&mut res)
}

/// Detects anomalies in one series whose path is not known (read as loopback).
pub fn detect_series(points: &[SeriesPoint], cfg: &DetectConfig) -> Vec<Anomaly> {
    detect_series_on(points, cfg, PathKind::Unknown)
}

/// Detects anomalies in one series measured over `path`.
pub fn detect_series_on(
    points: &[SeriesPoint],
    cfg: &DetectConfig,
    path: PathKind,
) -> Vec<Anomaly> {
    let p = prepare(points, path);
    let mut out = dips(&p, cfg);
    out.extend(cliffs(&p, cfg, &out));
    // Inside a dip the relative CI widens with the fall of the mean: the dip is the story.
    let un: Vec<Anomaly> = unstable(&p, cfg)
        .into_iter()
        .filter(|u| {
            !out.iter().any(|d| {
                d.kind == AnomalyKind::Dip && u.from_size <= d.to_size && u.to_size >= d.from_size
            })
        })
        .collect();
    out.extend(un);
    out.sort_by(|a, b| {
        a.from_size
            .cmp(&b.from_size)
            .then(a.to_size.cmp(&b.to_size))
    });
    out
}

/// Step of a finer sweep over `from..to`: a power of two giving 32 to 64 points.
fn refine_step(from: u64, to: u64) -> u64 {
    let raw = (to.saturating_sub(from) / 32).max(1);
    1u64 << (63 - raw.leading_zeros())
}

fn refine(from: u64, to: u64) -> Option<Refine> {
    (to > from + 1).then(|| Refine {
        from,
        to,
        step: refine_step(from, to),
    })
}

fn floor_log(f: f64) -> f64 {
    -(1.0 - f.clamp(0.0, 0.999)).ln()
}

struct Candidate {
    a: usize,
    b: usize,
    score: f64,
    drop: f64,
    confidence: f64,
    reference: f64,
}

fn dips(p: &Prepared, cfg: &DetectConfig) -> Vec<Anomaly> {
    let n = p.y.len();
    let k = cfg.window.max(2);
    let fl = floor_log(cfg.floor);
    let mut cands = Vec::new();
    for a in 2..n {
        for b in a..n.min(a + cfg.max_band) {
            if b + 2 >= n || p.size[b] as f64 > p.size[a] as f64 * cfg.max_band_ratio {
                break;
            }
            if let Some(c) = dip_band(p, cfg, a, b, k, fl) {
                cands.push(c);
            }
        }
    }
    cands.sort_by(|x, y| y.score.total_cmp(&x.score));
    let mut taken: Vec<Candidate> = Vec::new();
    for c in cands {
        if taken.iter().all(|t| c.b + 1 < t.a || c.a > t.b + 1) {
            taken.push(c);
        }
    }
    taken
        .into_iter()
        .map(|c| {
            let (lo, hi) = (p.size[c.a - 1], p.size[c.b + 1]);
            let pts = c.b - c.a + 1;
            let coarse = pts < 4;
            let r = refine(lo, hi);
            Anomaly {
                kind: AnomalyKind::Dip,
                from_size: p.size[c.a],
                to_size: p.size[c.b],
                magnitude: c.drop,
                confidence: c.confidence,
                points: pts as u32,
                metric: "throughput".into(),
                detail: format!(
                    "throughput {:.0}% below the trend of the neighbouring sizes ({:.3} vs {:.3} in the run's unit, geometric means)",
                    c.drop * 100.0,
                    c.reference * (1.0 - c.drop),
                    c.reference
                ),
                hint: match r {
                    Some(r) if coarse => Some(format!(
                        "only {pts} point(s) inside: its edges lie between {lo} and {hi} bytes; sweep {} to resolve it",
                        r.spec()
                    )),
                    _ => None,
                },
                refine: r,
            }
        })
        .collect()
}

fn dip_band(
    p: &Prepared,
    cfg: &DetectConfig,
    a: usize,
    b: usize,
    k: usize,
    fl: f64,
) -> Option<Candidate> {
    let n = p.y.len();
    let l = a.saturating_sub(k)..a;
    let r = (b + 1)..n.min(b + 1 + k);
    if l.len() < 2 || r.len() < 2 {
        return None;
    }
    let med = |range: std::ops::Range<usize>, v: &[f64]| median(&mut v[range].to_vec());
    let (xl, yl) = (med(l.clone(), &p.x), med(l.clone(), &p.y));
    let (xr, yr) = (med(r.clone(), &p.x), med(r.clone(), &p.y));
    // The trend across the band: the chord between the two sides' medians.
    let trend = |x: f64| {
        if xr - xl <= 1e-12 {
            (yl + yr) / 2.0
        } else {
            yl + (x - xl) / (xr - xl) * (yr - yl)
        }
    };
    // A dip comes back: the band lies below the right side's line carried back as well as
    // below the left side's carried forward. (After a step down, the band sits on the right
    // side's line: that is a cliff, not a dip.)
    let (sl, il) = theil_sen(&p.x, &p.y, l.clone());
    let (sr, ir) = theil_sen(&p.x, &p.y, r.clone());
    let below = |s: f64, i: f64| {
        median(
            &mut (a..=b)
                .map(|j| p.y[j] - (i + s * p.x[j]))
                .collect::<Vec<_>>(),
        )
    };
    if below(sl, il) > -fl || below(sr, ir) > -fl {
        return None;
    }
    let resid: Vec<f64> = (a..=b).map(|j| p.y[j] - trend(p.x[j])).collect();
    let m = resid.len();
    if resid[0] > -fl || resid[m - 1] > -fl {
        return None;
    }
    let below = resid.iter().filter(|&&r| r <= -fl).count();
    if below * 3 < m * 2 {
        return None;
    }
    // A chasm's edges are part of it: at least a quarter as deep (in ln) as its median. A
    // 40% wobble beside a 97% chasm (a disturbance on a shared machine) is not its edge.
    let depth = -median(&mut resid.clone());
    if -resid[0] < depth * EDGE_DEPTH || -resid[m - 1] < depth * EDGE_DEPTH {
        return None;
    }
    let mean_r = resid.iter().sum::<f64>() / m as f64;
    let var_band = p.sigma[a..=b].iter().map(|s| s * s).sum::<f64>() / (m * m) as f64;
    let mean_var = |range: std::ops::Range<usize>| {
        let len = range.len() as f64;
        p.sigma[range].iter().map(|s| s * s).sum::<f64>() / len
    };
    let var_ref = std::f64::consts::FRAC_PI_2
        * (mean_var(l.clone()) / l.len() as f64 + mean_var(r.clone()) / r.len() as f64)
        / 2.0;
    let sd = (var_band + var_ref + p.rough * p.rough).sqrt().max(1e-9);
    let drop = 1.0 - mean_r.exp();
    let need = if m == 1 {
        floor_log(cfg.single_point_floor.max(cfg.floor))
    } else {
        fl
    };
    let confidence = phi((-mean_r - need) / sd);
    if -mean_r < need || confidence < cfg.min_confidence {
        return None;
    }
    // Over loopback, a drop within what placement is measured to do, where placement
    // changed, may be placement: not reported. Anything deeper, or on a real path, is.
    if placement::excuses(p, cfg, a..b + 1, l.start..r.end, -mean_r) {
        return None;
    }
    let center = (p.x[a] + p.x[b]) / 2.0;
    Some(Candidate {
        a,
        b,
        score: -resid.iter().sum::<f64>(),
        drop,
        confidence,
        reference: trend(center).exp(),
    })
}

/// A dip's first and last points must be at least this fraction of its median ln-depth.
const EDGE_DEPTH: f64 = 0.25;

/// Smallest ln-size difference a slope is taken over (5%).
const MIN_SLOPE_DX: f64 = 0.05;
/// Largest |slope| of log-throughput against log-size the trend may have.
const MAX_SLOPE: f64 = 1.2;

/// Theil–Sen line through a window: (slope, intercept), the medians of the pairwise slopes
/// and of the intercepts. Flat through the median when no two sizes differ.
fn theil_sen(x: &[f64], y: &[f64], w: std::ops::Range<usize>) -> (f64, f64) {
    let mut slopes = Vec::new();
    for i in w.clone() {
        for j in (i + 1)..w.end {
            let dx = x[j] - x[i];
            // Sizes a few bytes apart (perturbed schedules) say nothing about the slope.
            if dx > MIN_SLOPE_DX {
                slopes.push((y[j] - y[i]) / dx);
            }
        }
    }
    // Throughput grows at most in proportion to size (constant time per transfer): slopes
    // beyond ±1.2 in log-log are noise, and would throw extrapolations far off.
    let s = if slopes.is_empty() {
        0.0
    } else {
        median(&mut slopes).clamp(-MAX_SLOPE, MAX_SLOPE)
    };
    let b = median(&mut w.map(|i| y[i] - s * x[i]).collect::<Vec<_>>());
    (s, b)
}

fn cliffs(p: &Prepared, cfg: &DetectConfig, dips: &[Anomaly]) -> Vec<Anomaly> {
    let n = p.y.len();
    let k = cfg.window.max(3);
    let fl = floor_log(cfg.floor);
    let in_dip = |i: usize| {
        dips.iter()
            .any(|d| p.size[i] >= d.from_size && p.size[i] <= d.to_size)
    };
    // (boundary index, step, confidence, rank)
    let mut cands: Vec<(usize, f64, f64, f64)> = Vec::new();
    for c in 3..n.saturating_sub(2) {
        let l = c.saturating_sub(k)..c;
        let r = c..n.min(c + k);
        if l.len() < 3 || r.len() < 3 || (l.start..r.end).any(in_dip) {
            continue;
        }
        // A cliff is a level shift: the right side lies below the left side's line carried
        // forward, and the left side above the right side's line carried back. (A bend in the
        // trend fails one of the two.)
        let (sl, il) = theil_sen(&p.x, &p.y, l.clone());
        let (sr, ir) = theil_sen(&p.x, &p.y, r.clone());
        let mut fwd: Vec<f64> = r.clone().map(|j| p.y[j] - (il + sl * p.x[j])).collect();
        let mut back: Vec<f64> = l.clone().map(|i| (ir + sr * p.x[i]) - p.y[i]).collect();
        // Where the step is: the medians tolerate one point on the wrong side of a deep
        // step, the means do not, so the means rank neighbouring boundaries.
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let rank = mean(&fwd).max(mean(&back));
        let step = median(&mut fwd).max(median(&mut back));
        if step > -fl || placement::excuses(p, cfg, l.start..r.end, l.start..r.end, -step) {
            continue;
        }
        let mean_var = |range: std::ops::Range<usize>| {
            let len = range.len() as f64;
            p.sigma[range].iter().map(|s| s * s).sum::<f64>() / len / len
        };
        let sd = (std::f64::consts::FRAC_PI_2 * (mean_var(l) + mean_var(r)) + p.rough * p.rough)
            .sqrt()
            .max(1e-9);
        let confidence = phi((-step - fl) / sd);
        if confidence >= cfg.min_confidence {
            cands.push((c, step, confidence, rank));
        }
    }
    // Keep the strongest step among neighbouring boundaries.
    cands.sort_by(|a, b| a.3.total_cmp(&b.3));
    let mut taken: Vec<(usize, f64, f64, f64)> = Vec::new();
    for c in cands {
        if taken.iter().all(|t| t.0.abs_diff(c.0) >= k) {
            taken.push(c);
        }
    }
    taken
        .into_iter()
        .map(|(c, step, confidence, _)| {
            let (lo, hi) = (p.size[c - 1], p.size[c]);
            let r = refine(lo, hi);
            let drop = 1.0 - step.exp();
            Anomaly {
                kind: AnomalyKind::Cliff,
                from_size: lo,
                to_size: hi,
                magnitude: drop,
                confidence,
                points: (n - c) as u32,
                metric: "throughput".into(),
                detail: format!(
                    "throughput steps down {:.0}% between {lo} and {hi} bytes and stays down",
                    drop * 100.0
                ),
                hint: r.filter(|r| r.to - r.from > 64).map(|r| {
                    format!(
                        "the step lies between {lo} and {hi} bytes; sweep {} to locate it",
                        r.spec()
                    )
                }),
                refine: r,
            }
        })
        .collect()
}

/// Wilson–Hilferty: P(χ²(k) < q), the confidence that a variance ratio exceeds 1.
fn chi2_cdf(q: f64, k: f64) -> f64 {
    if k <= 0.0 || q <= 0.0 {
        return 0.0;
    }
    let h = 2.0 / (9.0 * k);
    phi(((q / k).powf(1.0 / 3.0) - (1.0 - h)) / h.sqrt())
}

fn unstable(p: &Prepared, cfg: &DetectConfig) -> Vec<Anomaly> {
    let n = p.y.len();
    let k = cfg.window.max(2);
    let noisy: Vec<bool> = (0..n)
        .map(|i| {
            if p.placement[i] == PlacementClass::Mixed || !p.rel_ci[i].is_finite() {
                return false;
            }
            // Baseline: the lower quartile of a wide window, so a band up to 3/4 of the
            // window wide does not hide itself.
            let mut nb: Vec<f64> = (i.saturating_sub(2 * k)..n.min(i + 2 * k + 1))
                .filter(|&j| j != i && p.rel_ci[j].is_finite())
                .map(|j| p.rel_ci[j])
                .collect();
            if nb.len() < 3 {
                return false;
            }
            nb.sort_by(|a, b| a.total_cmp(b));
            let m = nb[nb.len() / 4];
            p.rel_ci[i] >= cfg.unstable_floor && p.rel_ci[i] >= cfg.unstable_ratio * m
        })
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        if !noisy[i] {
            i += 1;
            continue;
        }
        let a = i;
        while i < n && noisy[i] {
            i += 1;
        }
        let b = i - 1;
        if b + 1 - a < cfg.unstable_min_points.max(1) {
            continue;
        }
        // Reference: neighbours outside the band.
        let refs: Vec<usize> = (a.saturating_sub(k)..a)
            .chain((b + 1)..n.min(b + 1 + k))
            .filter(|&j| p.rel_ci[j].is_finite())
            .collect();
        if refs.len() < 2 {
            continue;
        }
        // Relative sample variance from a CI half-width: s/mean = ci·√n / t(n−1).
        let rel_var = |j: usize| {
            let t = p.trials[j].max(2) as u64;
            let s = p.rel_ci[j] * (t as f64).sqrt() / student_t_975(t - 1);
            s * s
        };
        let ref_var = {
            let mut v: Vec<f64> = refs.iter().map(|&j| rel_var(j)).collect();
            median(&mut v).max(1e-12)
        };
        let (q, dof) = (a..=b).fold((0.0, 0.0), |(q, d), j| {
            let dof = (p.trials[j].max(2) - 1) as f64;
            (q + dof * rel_var(j) / ref_var, d + dof)
        });
        let confidence = chi2_cdf(q, dof);
        let mut band: Vec<f64> = p.rel_ci[a..=b].to_vec();
        let mag = median(&mut band);
        let mut nb: Vec<f64> = refs.iter().map(|&j| p.rel_ci[j]).collect();
        let nb_ci = median(&mut nb);
        // Far above both its own neighbours and the sweep as a whole: on a machine where
        // every point wobbles, one more wobbly band is not an anomaly of the path.
        let mut rest: Vec<f64> = (0..n)
            .filter(|&j| (j < a || j > b) && p.rel_ci[j].is_finite())
            .map(|j| p.rel_ci[j])
            .collect();
        let sweep_ci = median(&mut rest);
        if confidence < cfg.min_confidence
            || mag < cfg.unstable_ratio * nb_ci
            || mag < cfg.unstable_ratio * sweep_ci
        {
            continue;
        }
        out.push(Anomaly {
            kind: AnomalyKind::Unstable,
            from_size: p.size[a],
            to_size: p.size[b],
            magnitude: mag,
            confidence,
            points: (b + 1 - a) as u32,
            metric: "throughput".into(),
            detail: format!(
                "95% CI ±{:.0}% against ±{:.1}% at the neighbouring sizes",
                mag * 100.0,
                nb_ci * 100.0
            ),
            hint: Some(
                "re-run these sizes with a longer --max-point-time, and pin both ends (taskset) to rule out placement".into(),
            ),
            refine: None,
        });
    }
    out
}

#[cfg(test)]
mod tests;
