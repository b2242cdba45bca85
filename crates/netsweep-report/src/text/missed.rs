//! Why a run's points missed their precision: one cause per point, from what it recorded.

use netsweep_model::anomaly::{PlacementClass, SeriesPoint};
use netsweep_model::results::PointResult;

/// Why points missed their precision, from what each one recorded (issue 27: a run that
/// cannot meet its precision says why in one line): too few trials for an interval, a
/// placement that changed during the point, or trials that spread although both ends stayed
/// on their CPUs — drift between trials (on one host, its own timing: docs/methodology.md
/// measures it), which no stop rule waits out. Empty when no point recorded enough to tell.
pub(super) fn why_missed(missed: &[&PointResult]) -> String {
    let (mut few, mut moved, mut drift, mut spread) = (0, 0, 0, 0);
    for p in missed {
        // The placement class the anomaly detector gives the point.
        let class = SeriesPoint::from_point(p).placement;
        if p.trials < 3 {
            few += 1;
        } else if p.placement.migrations > 0 || class == PlacementClass::Mixed {
            moved += 1;
        } else if class == PlacementClass::Unknown {
            spread += 1;
        } else {
            drift += 1;
        }
    }
    let parts: Vec<String> = [
        (
            drift,
            "whose trials spread with both ends staying on their CPUs (drift between trials, \
             not placement)",
        ),
        (moved, "whose ends moved between CPUs (pin them with --cpu)"),
        (few, "with under 3 trials in their budget"),
        (spread, "whose trials spread"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(", {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_model::results::RunResult;

    /// Each missed point is counted under one cause, from what it recorded.
    #[test]
    fn a_missed_precision_says_why_from_each_points_record() {
        let run: RunResult =
            serde_json::from_str(include_str!("../../../../tests/golden/tcp-pingpong.json"))
                .unwrap();
        let mut p = run.points[0].clone();
        p.precision_met = false;
        p.trials = 5;
        p.placement.observed_trials = 5;
        p.placement.same_cpu_trials = 5;
        p.placement.migrations = 0;
        let drift = p.clone();
        let mut moved = p.clone();
        moved.placement.migrations = 3;
        let mut mixed = p.clone();
        mixed.placement.same_cpu_trials = 2;
        let mut few = p.clone();
        few.trials = 2;
        let mut unseen = p.clone();
        unseen.placement.observed_trials = 0;
        unseen.placement.same_cpu_trials = 0;
        let all = [&drift, &drift, &moved, &mixed, &few, &unseen];
        assert_eq!(
            why_missed(&all),
            ", 2 whose trials spread with both ends staying on their CPUs (drift between \
             trials, not placement), 2 whose ends moved between CPUs (pin them with --cpu), \
             1 with under 3 trials in their budget, 1 whose trials spread"
        );
        assert_eq!(why_missed(&[]), "");
    }
}
