//! Refinement: the finer sweep that would resolve an anomaly, and the sizes a `--refine`
//! re-sweep adds.

use super::{Anomaly, AnomalyKind};
use serde::{Deserialize, Serialize};

/// A finer sweep that would resolve an anomaly: `from..to:+step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Refine {
    /// First size, bytes: the measured size just before the anomaly's first edge.
    pub from: u64,
    /// Last size, bytes: the measured size just after its last edge.
    pub to: u64,
    /// Step between sizes, bytes (a power of two giving 32 to 64 sizes over the range).
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

/// The sizes a `--refine` re-sweep should measure: every anomaly's finer sweep where its edges
/// lie, merged, sorted, without the sizes already measured. A dip's finer sweep is measured
/// only outside its measured inside (`from_size..=to_size`, which the sweep already showed
/// to be in it): between the last good size and the first inside, and between the last inside
/// and the next good one. The inside of a band is where a slow path's points are slowest (a
/// 5 Mbit/s band's trials are lengthened to its queue, ~3 s a point), and re-measuring it
/// finely places no edge. A cliff's finer sweep is its one gap, measured whole.
pub fn refine_sizes(anomalies: &[Anomaly], measured: &[u64]) -> Vec<u64> {
    let mut v: Vec<u64> = anomalies
        .iter()
        .filter_map(|a| a.refine.map(|r| (a, r)))
        .flat_map(|(a, r)| {
            let inside = (a.kind == AnomalyKind::Dip).then_some(a.from_size..=a.to_size);
            r.sizes()
                .into_iter()
                .filter(move |s| !inside.as_ref().is_some_and(|i| i.contains(s)))
        })
        .filter(|s| !measured.contains(s))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Step of a finer sweep over `from..to`: a power of two giving 32 to 64 points.
fn refine_step(from: u64, to: u64) -> u64 {
    let raw = (to.saturating_sub(from) / 32).max(1);
    1u64 << (63 - raw.leading_zeros())
}

pub(super) fn refine(from: u64, to: u64) -> Option<Refine> {
    (to > from + 1).then(|| Refine {
        from,
        to,
        step: refine_step(from, to),
    })
}
