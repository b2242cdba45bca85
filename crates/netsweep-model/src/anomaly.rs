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
//! sleeping ends on one CPU), is the path's and is reported (see [`PathKind`]).
//!
//! [`detect_run`] takes a run (its points and its path: there is no entry point for bare
//! points, whose path would have to be guessed); [`annotate`] stores the result in the run;
//! [`refine_sizes`] gives the sizes a `--refine` re-sweep should add.

mod cliff;
mod dip;
#[cfg(test)]
mod measured;
mod placement;
mod refine;
mod segment;
mod series;
mod unstable;

use crate::results::{PointResult, RunResult};
pub use placement::{path_of, PathKind};
pub use refine::{refine_sizes, Refine};
use serde::{Deserialize, Serialize};
#[cfg(test)] // the tests check the normal CDF against a table value
use series::phi;

/// What kind of anomaly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// One detected anomaly, as stored in the results file (`anomalies`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Anomaly {
    /// Dip, cliff or unstable band.
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
    /// Measured points inside the anomaly (for a cliff: every point from the step on).
    pub points: u32,
    /// The quantity examined: `throughput` (pingpong bytes ÷ RTT/2, stream receiver rate).
    pub metric: String,
    /// One line of plain-language explanation, with the reference it was compared against.
    #[serde(default)]
    pub detail: String,
    /// What to do when the sweep is too coarse to resolve it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The finer sweep around it (`netsweep run --refine` measures its sizes where the
    /// anomaly's edges lie: all of a cliff's, a dip's outside its measured inside).
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
    /// Message size, bytes.
    pub size: u64,
    /// Mean over trials (any positive rate unit).
    pub mean: f64,
    /// Half-width of the 95% CI of the mean.
    pub ci95: f64,
    /// Trials the mean is taken from; with fewer than 2 its CI is not used.
    pub trials: u32,
    /// Where both ends ran during the point's trials.
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

/// Detects anomalies in a run's headline throughput with the default thresholds, knowing
/// its path ([`path_of`]): placement excuses nothing on a path that is not loopback.
pub fn detect_run(run: &RunResult) -> Vec<Anomaly> {
    let series: Vec<SeriesPoint> = run.points.iter().map(SeriesPoint::from_point).collect();
    let mut out = detect_series_on(&series, &DetectConfig::default(), path_of(run));
    segment::explain(run, &mut out);
    out
}

/// Runs detection on a finished run and stores the anomalies in it (`run.anomalies`).
pub fn annotate(run: &mut RunResult) {
    run.anomalies = detect_run(run);
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
    let p = series::prepare(points, path);
    let mut out = dip::dips(&p, cfg);
    out.extend(cliff::cliffs(&p, cfg, &out));
    // Inside a dip the relative CI widens with the fall of the mean: the dip is the story.
    let un: Vec<Anomaly> = unstable::unstable(&p, cfg)
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

#[cfg(test)]
mod tests;
