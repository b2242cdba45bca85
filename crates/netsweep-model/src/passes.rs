//! Passes over a sweep (`--passes`): a point's interval widened to the spread of the means its
//! passes measured, so that what drifts between visits of one size — a host episode landing on
//! it in one pass and not in another — is in the interval a re-run is judged against.

use crate::results::PointResult;
use crate::stats::ci95;

/// The order of the sizes' indices in pass `pass` (0 is the sweep's own, ascending): odd
/// passes go down the sizes, even ones up again, so each size is visited at a different time
/// of the run and a slow episode of the host falls on different sizes in different passes.
/// Neighbours stay neighbours: a point's first trial is sized from the point before it, and a
/// shuffled order sized an 8 MiB trial from a 1-byte one (a default run of three shuffled
/// passes took 125 s).
pub fn order(n: usize, pass: u32) -> Vec<usize> {
    if pass % 2 == 1 {
        (0..n).rev().collect()
    } else {
        (0..n).collect()
    }
}

/// The half-width of the 95% interval of the mean of `means` (one per pass) when it is wider
/// than `within`, the first pass's own half-width (none counts as 0); `None` when it is not.
fn wider(within: Option<f64>, means: &[f64]) -> Option<f64> {
    let between = ci95(means)?.half_width;
    (between > within.unwrap_or(0.0)).then_some(between)
}

/// Folds the later passes' means into `p`: `throughput` holds every pass's mean throughput
/// (Mbit/s, `p`'s own first), `half_rtt` likewise for pingpong's mean RTT/2 (empty without
/// it). The throughput's and latency's intervals become the wider of the first pass's and the
/// passes' (Student's t over the pass means), the precision reached is re-read from the
/// throughput's, and a note lists the passes' figures. The means stay the first pass's.
pub fn fold(p: &mut PointResult, throughput: &[f64], half_rtt: &[f64]) {
    if throughput.len() < 2 {
        return;
    }
    let widened = wider(p.throughput_mbps.ci95, throughput);
    if let Some(h) = widened {
        p.throughput_mbps.ci95 = Some(h);
    }
    if let Some(l) = p
        .latency
        .as_mut()
        .filter(|_| half_rtt.len() == throughput.len())
    {
        if let Some(h) = wider(l.half_rtt_ns.ci95, half_rtt) {
            l.half_rtt_ns.ci95 = Some(h);
            l.rtt_ns.ci95 = Some(2.0 * h);
        }
    }
    p.precision_achieved = p.throughput_mbps.relative_ci();
    p.precision_met = p
        .precision_achieved
        .is_some_and(|r| r <= p.precision_target);
    let list: Vec<String> = throughput.iter().map(|m| format!("{m:.4}")).collect();
    p.notes.push(format!(
        "{} passes: {} Mbit/s{}",
        throughput.len(),
        list.join(", "),
        if widened.is_some() {
            "; the interval is their spread, wider than the first pass's trials"
        } else {
            ""
        }
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_passes_alternate_the_direction() {
        assert_eq!(order(5, 0), [0, 1, 2, 3, 4]);
        assert_eq!(order(5, 1), [4, 3, 2, 1, 0]);
        assert_eq!(order(5, 2), [0, 1, 2, 3, 4]);
        assert!(order(0, 3).is_empty());
    }

    fn point(mean: f64, ci: f64) -> PointResult {
        let mut p: PointResult =
            serde_json::from_str(include_str!("../../../tests/data/tcp-pingpong.json"))
                .map(|r: crate::results::RunResult| r.points[3].clone())
                .unwrap();
        p.throughput_mbps.mean = mean;
        p.throughput_mbps.ci95 = Some(ci);
        p.precision_target = 0.02;
        p
    }

    #[test]
    fn passes_that_disagree_widen_the_interval_and_miss_the_target() {
        // Trials of one pass agree within ±0.5%; the three passes' means 100, 90, 110 do not.
        let mut p = point(100.0, 0.5);
        let rtt = p.latency.unwrap().half_rtt_ns.mean;
        fold(&mut p, &[100.0, 90.0, 110.0], &[rtt, rtt * 1.1, rtt * 0.9]);
        let want = ci95(&[100.0, 90.0, 110.0]).unwrap().half_width;
        assert_eq!(p.throughput_mbps.ci95, Some(want));
        assert_eq!(p.throughput_mbps.mean, 100.0);
        assert!(!p.precision_met && p.precision_achieved == Some(want / 100.0));
        let l = p.latency.unwrap();
        let lw = ci95(&[rtt, rtt * 1.1, rtt * 0.9]).unwrap().half_width;
        assert_eq!(l.half_rtt_ns.ci95, Some(lw));
        assert!(p
            .notes
            .last()
            .unwrap()
            .starts_with("3 passes: 100.0000, 90.0000, 110.0000"));
    }

    #[test]
    fn passes_that_agree_keep_the_trials_interval() {
        let mut p = point(100.0, 1.5);
        let before = p.latency.unwrap().half_rtt_ns.ci95;
        fold(&mut p, &[100.0, 100.1, 99.9], &[]);
        assert_eq!(p.throughput_mbps.ci95, Some(1.5));
        assert!(p.precision_met);
        assert_eq!(p.latency.unwrap().half_rtt_ns.ci95, before);
        // One pass is no passes.
        let mut q = point(100.0, 1.5);
        fold(&mut q, &[100.0], &[]);
        assert!(q.notes.len() == point(100.0, 1.5).notes.len());
    }
}
