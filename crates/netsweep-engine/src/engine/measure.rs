//! The loop every point follows, written once for every kind of peer: warm-up and
//! calibration, timed trials until the stop rule, the tally of both sides' counters, the
//! pattern's figures. What one trial is belongs to the [`Peer`].

use super::calibration::Plan;
use super::peer::Peer;
use super::stop::should_stop;
use crate::error::NetError;
use crate::pattern::{PointFigures, TrialOutcome};
use crate::point::Tally;
use netsweep_model::results::PointResult;
use netsweep_model::spec::RunSpec;
use netsweep_proto::messages::TrialSpec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Measures the points of one run with its peer and pattern.
pub(super) struct Measurer<'a, P: Peer + ?Sized> {
    /// The peer trials are run with.
    pub(super) peer: &'a mut P,
    /// The run's pattern (its figures; with a session, its data path too).
    pub(super) pattern: &'a mut P::Pattern,
    spec: &'a RunSpec,
    /// The last trial's number (trials are numbered from 1 across the run).
    trial: u64,
    interrupt: &'a AtomicBool,
}

impl<'a, P: Peer + ?Sized> Measurer<'a, P> {
    /// A measurer of `spec`'s points with `peer`.
    pub(super) fn new(
        peer: &'a mut P,
        pattern: &'a mut P::Pattern,
        spec: &'a RunSpec,
        interrupt: &'a AtomicBool,
    ) -> Self {
        Self {
            peer,
            pattern,
            spec,
            trial: 0,
            interrupt,
        }
    }

    /// The run's spec.
    pub(super) fn spec(&self) -> &'a RunSpec {
        self.spec
    }

    /// Measures one point: the pattern readies it, warm-up trials calibrate it, timed
    /// trials run until the stop rule, and the pattern folds them into the point.
    pub(super) fn point(&mut self, size: u64) -> Result<PointResult, NetError> {
        self.point_with(size, self.spec.max_trials)
    }

    /// A later pass's visit of a point (`--passes`): the same loop, stopped after
    /// `--min-trials` trials.
    pub(super) fn revisit(&mut self, size: u64) -> Result<PointResult, NetError> {
        self.point_with(size, self.spec.min_trials)
    }

    fn point_with(&mut self, size: u64, max_trials: u32) -> Result<PointResult, NetError> {
        let point_start = Instant::now();
        let spec = self.spec;
        self.pattern.begin_point(spec, size)?;
        self.peer.begin_point();
        let mut tally = Tally::new(point_start);
        let mut plan = Plan::new(
            self.pattern.sizing(),
            spec,
            size,
            self.pattern.typical_rep_ns(),
        );
        let mut warmup = plan.first_warmup();
        while let Some(t) = warmup {
            let out = self.trial(&t)?;
            let rep_ns = self.pattern.warmed(&t, &out);
            warmup = plan.next_warmup(rep_ns, &out);
        }
        self.pattern.start_timed(&mut tally);
        let timed = plan.timed(point_start.elapsed());
        let note = self.pattern.server_timeout_note();
        let budget = plan.budget(spec, point_start.elapsed());
        let stop_reason = loop {
            let out = self.trial(&timed)?;
            self.pattern.fold(&out)?;
            tally.add(&out.client, &out.server, out.wall_ns, note);
            let samples = self.pattern.samples();
            if let Some(reason) =
                should_stop(spec, max_trials, samples, point_start.elapsed(), budget)
            {
                break reason;
            }
        };
        let mut p = self.pattern.finish(spec, &timed, tally, stop_reason);
        p.notes.extend(plan.note());
        p.background = self.peer.background();
        Ok(p)
    }

    /// Runs the next trial with the peer, unless the run was interrupted.
    fn trial(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, NetError> {
        if self.interrupt.load(Ordering::Relaxed) {
            return Err(NetError::Interrupted);
        }
        self.trial += 1;
        self.peer.trial(self.pattern, self.trial, spec)
    }
}
