//! The knee of a load sweep: the lowest offered load where latency climbs away from its
//! low-load level or the delivered rate stops following the offered one (below
//! [`KneeConfig::delivery_floor`] × offered), for good — every higher load past it too, so a
//! single slow point is not a knee. Latency has climbed when the median is more than
//! [`KneeConfig::latency_factor`] × the lowest load's *and* its rise means a queue: by
//! Little's law the requests waiting = offered rate × extra wait, so the median request must
//! wait behind at least one other ((p50 − base p50) × offered ≥ 1). Without that second
//! test a few microseconds of noise on a fast path (a 40 µs round trip becoming 90 µs at a
//! load far below the link's) would read as a knee. How sure: the bracket, the highest load
//! below it that was still fine and the knee's own load; the true knee lies between them.

use crate::load::si;
use crate::results::{PointResult, RunResult};
use crate::spec::Pattern;
use serde::{Deserialize, Serialize};

/// Thresholds of the knee rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KneeConfig {
    /// Latency has climbed when the median exceeds this factor × the lowest load's median.
    pub latency_factor: f64,
    /// Delivery has fallen behind when delivered < this fraction × offered.
    pub delivery_floor: f64,
    /// Latency has climbed only when the median's rise × the offered rate (Little's law:
    /// requests queued ahead of it) is at least this.
    pub min_queued: f64,
}

impl Default for KneeConfig {
    fn default() -> Self {
        Self {
            latency_factor: 2.0,
            delivery_floor: 0.95,
            min_queued: 1.0,
        }
    }
}

/// Where a load sweep saturates (`RunResult.knee`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Knee {
    /// The lowest offered load past the knee, requests/s.
    pub offered_rate: f64,
    /// The highest offered load below it that was still fine, requests/s; `None` when the
    /// lowest load of the sweep is already past it (the knee is at or below the sweep).
    pub below_rate: Option<f64>,
    /// The median latency there ÷ the lowest load's median.
    pub p50_ratio: f64,
    /// Delivered ÷ offered there.
    pub delivered_ratio: f64,
    /// Latency climbed there.
    pub latency: bool,
    /// Delivery fell behind there.
    pub delivery: bool,
    /// One line in words, with the bracket.
    pub detail: String,
}

/// One point as the rule reads it.
#[derive(Debug, Clone, Copy)]
struct LoadPoint {
    offered: f64,
    delivered: f64,
    p50: f64,
}

fn load_point(p: &PointResult) -> Option<LoadPoint> {
    let r = p.rate.as_ref()?;
    let l = p.latency.as_ref()?;
    Some(LoadPoint {
        offered: r.offered_rate,
        delivered: r.delivered_rate.mean,
        p50: l.rtt_ns.p50,
    })
}

/// The knee of a sweep's points (in any order), by `cfg`; `None` when no load is past it, or
/// fewer than two loads were measured.
pub fn find_knee(points: &[PointResult], cfg: &KneeConfig) -> Option<Knee> {
    let mut pts: Vec<LoadPoint> = points.iter().filter_map(load_point).collect();
    pts.sort_by(|a, b| a.offered.total_cmp(&b.offered));
    pts.dedup_by(|a, b| a.offered == b.offered);
    if pts.len() < 2 {
        return None;
    }
    let base = pts[0].p50.max(1.0);
    let past = |p: &LoadPoint| {
        let queued = (p.p50 - base) / 1e9 * p.offered;
        let lat = p.p50 > cfg.latency_factor * base && queued >= cfg.min_queued;
        let del = p.delivered < cfg.delivery_floor * p.offered;
        (lat, del)
    };
    let is_past = |p: &LoadPoint| {
        let (a, b) = past(p);
        a || b
    };
    // The first load from which every higher load is past the knee.
    let mut first = None;
    for i in (0..pts.len()).rev() {
        if is_past(&pts[i]) {
            first = Some(i);
        } else {
            break;
        }
    }
    let i = first?;
    let k = pts[i];
    let (latency, delivery) = past(&k);
    let below = (i > 0).then(|| pts[i - 1].offered);
    let p50_ratio = k.p50 / base;
    let delivered_ratio = if k.offered > 0.0 {
        k.delivered / k.offered
    } else {
        0.0
    };
    let what = match (latency, delivery) {
        (true, true) => "latency climbs and delivery falls behind",
        (true, false) => "latency climbs",
        _ => "delivery falls behind",
    };
    let where_ = match below {
        Some(b) => format!("between {} and {} msg/s offered", si(b), si(k.offered)),
        None => format!(
            "at or below {} msg/s offered, the lowest load measured: sweep lower loads",
            si(k.offered)
        ),
    };
    let detail = format!(
        "{what} {where_} (p50 {p50_ratio:.1}× the lowest load's, delivered {:.0}% of offered); \
         every higher load stays past it",
        delivered_ratio * 100.0
    );
    Some(Knee {
        offered_rate: k.offered,
        below_rate: below,
        p50_ratio,
        delivered_ratio,
        latency,
        delivery,
        detail,
    })
}

/// Annotates a finished run: a `--rates` sweep gets its knee, and no size anomalies (its
/// points share one size, so the size detector has nothing to compare).
pub fn annotate(run: &mut RunResult) {
    let sweep = run.spec.pattern == Pattern::Rate
        && run.spec.load.as_ref().is_some_and(|l| !l.rates.is_empty());
    if sweep {
        run.anomalies.clear();
        run.knee = find_knee(&run.points, &KneeConfig::default());
    }
}
