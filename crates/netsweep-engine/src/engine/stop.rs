//! The stop rule: when a point has had enough timed trials — its interval within the
//! precision target, its trial count, or its time budget spent.

use netsweep_model::results::StopReason;
use netsweep_model::spec::RunSpec;
use netsweep_model::stats::ci95;
use std::time::Duration;

/// The repetition rule: stop once at least `min_trials` trials put the 95% CI of the mean
/// within the precision target, or at `max_trials` (the spec's, or fewer for a later pass's
/// visit), or when the point's `budget` is spent (after two trials at least; four budgets at
/// most, whatever the count).
pub(crate) fn should_stop(
    spec: &RunSpec,
    max_trials: u32,
    samples: &[f64],
    elapsed: Duration,
    budget: Duration,
) -> Option<StopReason> {
    let n = samples.len() as u32;
    if n >= spec.min_trials {
        if ci95(samples).is_some_and(|c| c.relative <= spec.precision) {
            return Some(StopReason::Precision);
        }
        if n >= max_trials.max(spec.min_trials) {
            return Some(StopReason::MaxTrials);
        }
    }
    (elapsed >= budget && n >= 2 || elapsed >= budget * 4).then_some(StopReason::TimeBudget)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_model::spec::{Family, Pattern, Transport};

    #[test]
    fn stop_rule() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Pingpong, Family::Ipv4);
        spec.precision = 0.02;
        spec.max_point_time_ns = 1_000_000_000;
        let budget = Duration::from_secs(1);
        let quick = Duration::from_millis(10);
        assert_eq!(
            should_stop(&spec, spec.max_trials, &[100.0, 100.5], quick, budget),
            None,
            "fewer than min_trials"
        );
        assert_eq!(
            should_stop(&spec, spec.max_trials, &[100.0, 100.5, 99.5], quick, budget),
            Some(StopReason::Precision)
        );
        assert_eq!(
            should_stop(&spec, spec.max_trials, &[100.0, 150.0, 60.0], quick, budget),
            None
        );
        let late = Duration::from_millis(1_500);
        assert_eq!(
            should_stop(&spec, spec.max_trials, &[100.0, 150.0], late, budget),
            Some(StopReason::TimeBudget)
        );
        assert_eq!(
            should_stop(&spec, spec.max_trials, &[100.0], late, budget),
            None,
            "budget spent, but one trial only"
        );
        assert_eq!(
            should_stop(
                &spec,
                spec.max_trials,
                &[100.0],
                Duration::from_secs(5),
                budget
            ),
            Some(StopReason::TimeBudget)
        );
        let noisy: Vec<f64> = (0..30)
            .map(|i| if i % 2 == 0 { 50.0 } else { 150.0 })
            .collect();
        assert_eq!(
            should_stop(&spec, spec.max_trials, &noisy, quick, budget),
            Some(StopReason::MaxTrials)
        );
        // A later pass's visit stops at --min-trials, however noisy; never below it.
        assert_eq!(
            should_stop(&spec, spec.min_trials, &noisy[..3], quick, budget),
            Some(StopReason::MaxTrials)
        );
        assert_eq!(should_stop(&spec, 1, &noisy[..2], quick, budget), None);
    }
}
