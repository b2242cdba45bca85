//! The statistics the detectors share: the series prepared in log space, its scatter,
//! medians, the normal CDF and the Theil–Sen trend line.

use super::{PathKind, PlacementClass, SeriesPoint};

/// Standard normal CDF (Abramowitz–Stegun 7.1.26, error below 1.5e-7).
pub(super) fn phi(z: f64) -> f64 {
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

pub(super) fn median(v: &mut [f64]) -> f64 {
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
pub(super) struct Prepared {
    pub(super) size: Vec<u64>,
    pub(super) x: Vec<f64>,
    pub(super) y: Vec<f64>,
    /// Standard error of y from the point's own CI.
    pub(super) sigma: Vec<f64>,
    /// The sweep's point-to-point scatter beyond the CIs (log space). Disturbances on a
    /// shared machine last longer than one point, so it is not averaged down over a band.
    pub(super) rough: f64,
    /// Relative CI half-width (∞ for a zero mean).
    pub(super) rel_ci: Vec<f64>,
    pub(super) trials: Vec<u32>,
    pub(super) placement: Vec<PlacementClass>,
    pub(super) path: PathKind,
}

pub(super) fn prepare(points: &[SeriesPoint], path: PathKind) -> Prepared {
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

pub(super) fn floor_log(f: f64) -> f64 {
    -(1.0 - f.clamp(0.0, 0.999)).ln()
}

/// Smallest ln-size difference a slope is taken over (5%).
const MIN_SLOPE_DX: f64 = 0.05;
/// Largest |slope| of log-throughput against log-size the trend may have.
const MAX_SLOPE: f64 = 1.2;

/// Theil–Sen line through a window: (slope, intercept), the medians of the pairwise slopes
/// and of the intercepts. Flat through the median when no two sizes differ.
pub(super) fn theil_sen(x: &[f64], y: &[f64], w: std::ops::Range<usize>) -> (f64, f64) {
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
