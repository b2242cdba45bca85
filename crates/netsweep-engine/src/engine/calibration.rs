//! How many repetitions a trial makes and when a point has had enough trials: the
//! warm-up/calibration [`Plan`] every pattern's point follows, and the stop rule.

use crate::pattern::Sizing;
use netsweep_model::results::StopReason;
use netsweep_model::spec::RunSpec;
use netsweep_model::stats::ci95;
use netsweep_proto::messages::TrialSpec;
use std::time::Duration;

/// A point's trial plan: the warm-up trials (calibrating repetitions, or one short trial
/// for a duration-sized pattern), then the timed trials' [`TrialSpec`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    size: u64,
    warmup: bool,
    trial_ns: u64,
    /// `Some` for repetition-sized patterns.
    cal: Option<Calibration>,
    reps: u64,
    rep_ns: f64,
    /// `--interval`, carried by the timed trials of a duration-sized pattern.
    interval_ns: u64,
}

impl Plan {
    /// The plan of a point of `size` bytes; `prev_rep_ns` is the pattern's typical time per
    /// repetition on the previous point.
    pub(crate) fn new(sizing: Sizing, spec: &RunSpec, size: u64, prev_rep_ns: Option<f64>) -> Self {
        let trial_ns = spec.trial_time_ns;
        let cal = match sizing {
            Sizing::Repetitions { max_reps } => Some(Calibration {
                trial_ns: trial_ns as f64,
                max_reps,
            }),
            Sizing::Duration => None,
        };
        Self {
            size,
            warmup: spec.warmup,
            trial_ns,
            reps: cal.map_or(0, |c| c.first(prev_rep_ns)),
            cal,
            rep_ns: 0.0,
            interval_ns: spec.interval_ns,
        }
    }

    /// The first warm-up trial. A repetition-sized pattern always makes one (it measures the
    /// time per repetition even without `--warmup`); a duration-sized one only with it, for
    /// half the trial time.
    pub(crate) fn first_warmup(&self) -> Option<TrialSpec> {
        match self.cal {
            Some(_) => Some(self.reps_trial(true)),
            None => self.warmup.then_some(TrialSpec {
                size: self.size,
                repetitions: 0,
                duration_ns: self.trial_ns / 2,
                warmup: true,
                interval_ns: 0,
            }),
        }
    }

    /// The next warm-up trial once the last one took `rep_ns` per repetition, or `None`
    /// when the calibration is done.
    pub(crate) fn next_warmup(&mut self, rep_ns: f64) -> Option<TrialSpec> {
        let cal = self.cal?;
        self.rep_ns = rep_ns;
        self.reps = cal.next(self.reps, rep_ns, self.warmup)?;
        Some(self.reps_trial(true))
    }

    /// Every timed trial of the point.
    pub(crate) fn timed(&mut self) -> TrialSpec {
        match self.cal {
            Some(cal) => {
                self.reps = cal.timed(self.rep_ns);
                self.reps_trial(false)
            }
            None => TrialSpec {
                size: self.size,
                repetitions: 0,
                duration_ns: self.trial_ns,
                warmup: false,
                interval_ns: self.interval_ns,
            },
        }
    }

    fn reps_trial(&self, warmup: bool) -> TrialSpec {
        TrialSpec {
            size: self.size,
            repetitions: self.reps,
            duration_ns: 0,
            warmup,
            interval_ns: 0,
        }
    }
}

/// NetPIPE-style calibration of repetitions per trial: start from the previous point's time
/// per repetition (or 2), grow until one untimed trial lasts an eighth of the target, then
/// size the timed trials to the target duration.
#[derive(Debug, Clone, Copy)]
struct Calibration {
    trial_ns: f64,
    max_reps: f64,
}

impl Calibration {
    /// Repetitions of the first warm-up trial.
    fn first(&self, prev_rep_ns: Option<f64>) -> u64 {
        prev_rep_ns.map_or(2, |t| {
            ((self.trial_ns / 4.0) / t.max(1.0)).clamp(1.0, self.max_reps) as u64
        })
    }

    /// Repetitions of the next warm-up trial, or `None` once `reps` repetitions of `rep_ns`
    /// each fill an eighth of the target. `rep_ns` is the typical time per repetition (the
    /// median round trip where there is one), so one stalled repetition — a first contact, a
    /// preempted thread — cannot end the calibration with trials far too short.
    fn next(&self, reps: u64, rep_ns: f64, warmup: bool) -> Option<u64> {
        let rep_ns = rep_ns.max(1.0);
        if !warmup || reps as f64 * rep_ns >= self.trial_ns / 8.0 || reps as f64 >= self.max_reps {
            return None;
        }
        Some(
            ((self.trial_ns / 4.0) / rep_ns)
                .clamp(reps as f64 * 2.0, reps as f64 * 64.0)
                .min(self.max_reps) as u64,
        )
    }

    /// Repetitions of each timed trial.
    fn timed(&self, rep_ns: f64) -> u64 {
        (self.trial_ns / rep_ns.max(1.0)).clamp(1.0, self.max_reps) as u64
    }
}

/// The repetition rule: stop once at least `min_trials` trials put the 95% CI of the mean
/// within the precision target, or at `max_trials`, or when the point's budget is spent
/// (after two trials at least; four budgets at most, whatever the count).
pub(crate) fn should_stop(
    spec: &RunSpec,
    samples: &[f64],
    elapsed: Duration,
) -> Option<StopReason> {
    let n = samples.len() as u32;
    let budget = Duration::from_nanos(spec.max_point_time_ns);
    if n >= spec.min_trials {
        if ci95(samples).is_some_and(|c| c.relative <= spec.precision) {
            return Some(StopReason::Precision);
        }
        if n >= spec.max_trials {
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
    fn calibration_grows_then_sizes_trials() {
        let cal = Calibration {
            trial_ns: 20e6,
            max_reps: 1e9,
        };
        assert_eq!(cal.first(None), 2);
        // Previous point took 10 µs per repetition: a quarter trial is 500 repetitions.
        assert_eq!(cal.first(Some(10_000.0)), 500);
        // 2 repetitions of 10 µs are far too short: grow, at most 64× at once.
        assert_eq!(cal.next(2, 10_000.0, true), Some(128));
        // 500 repetitions of 10 µs (a quarter of the target) are enough.
        assert_eq!(cal.next(500, 10_000.0, true), None);
        assert_eq!(cal.next(2, 10_000.0, false), None, "no warm-up: no growth");
        assert_eq!(cal.timed(10_000.0), 2000);
        assert_eq!(cal.timed(1e12), 1, "at least one repetition");
    }

    #[test]
    fn stop_rule() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Pingpong, Family::Ipv4);
        spec.precision = 0.02;
        spec.max_point_time_ns = 1_000_000_000;
        let quick = Duration::from_millis(10);
        assert_eq!(
            should_stop(&spec, &[100.0, 100.5], quick),
            None,
            "fewer than min_trials"
        );
        assert_eq!(
            should_stop(&spec, &[100.0, 100.5, 99.5], quick),
            Some(StopReason::Precision)
        );
        assert_eq!(should_stop(&spec, &[100.0, 150.0, 60.0], quick), None);
        let late = Duration::from_millis(1_500);
        assert_eq!(
            should_stop(&spec, &[100.0, 150.0], late),
            Some(StopReason::TimeBudget)
        );
        assert_eq!(
            should_stop(&spec, &[100.0], late),
            None,
            "budget spent, but one trial only"
        );
        assert_eq!(
            should_stop(&spec, &[100.0], Duration::from_secs(5)),
            Some(StopReason::TimeBudget)
        );
        let noisy: Vec<f64> = (0..30)
            .map(|i| if i % 2 == 0 { 50.0 } else { 150.0 })
            .collect();
        assert_eq!(
            should_stop(&spec, &noisy, quick),
            Some(StopReason::MaxTrials)
        );
    }

    #[test]
    fn plans_warm_up_then_time() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Pingpong, Family::Ipv4);
        spec.trial_time_ns = 20_000_000;
        spec.warmup = true;
        let mut p = Plan::new(Sizing::Repetitions { max_reps: 1e9 }, &spec, 64, None);
        assert_eq!(
            p.first_warmup().map(|t| (t.repetitions, t.warmup)),
            Some((2, true))
        );
        assert_eq!(p.next_warmup(10_000.0).map(|t| t.repetitions), Some(128));
        assert_eq!(p.next_warmup(10_000.0).map(|t| t.repetitions), Some(500));
        assert_eq!(p.next_warmup(10_000.0), None);
        let t = p.timed();
        assert_eq!((t.repetitions, t.duration_ns, t.warmup), (2000, 0, false));
        let mut d = Plan::new(Sizing::Duration, &spec, 64, None);
        let w = d.first_warmup().expect("a warm-up with --warmup");
        assert_eq!((w.duration_ns, w.repetitions), (10_000_000, 0));
        assert_eq!(d.next_warmup(1.0), None);
        assert_eq!(d.timed().duration_ns, 20_000_000);
        spec.warmup = false;
        assert_eq!(
            Plan::new(Sizing::Duration, &spec, 64, None).first_warmup(),
            None
        );
        let mut r = Plan::new(Sizing::Repetitions { max_reps: 1e9 }, &spec, 64, None);
        assert!(
            r.first_warmup().is_some(),
            "calibration runs even without --warmup"
        );
        assert_eq!(r.next_warmup(10_000.0), None);
        assert_eq!(r.timed().repetitions, 2000);
    }
}
