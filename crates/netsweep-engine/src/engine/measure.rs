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
use netsweep_model::window::MeasuredWindow;
use netsweep_proto::messages::TrialSpec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

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
    /// `--start-at`, until the first point has waited for it.
    start_at: Option<u64>,
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
            start_at: spec.start_at_unix_ns,
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
        let timed = plan.timed(point_start.elapsed());
        let mut budget = plan.budget(spec, point_start.elapsed());
        // `--start-at`: the first point's timed trials begin at that time, after its
        // warm-ups, and run for the point's budget whatever the precision, so clients started
        // together measure over one window.
        let (mut clock, mut rule) = (point_start, std::borrow::Cow::Borrowed(spec));
        if let Some(at) = self.start_at.take() {
            tally.notes.extend(wait_until(at, self.interrupt)?);
            clock = Instant::now();
            budget = Duration::from_nanos(spec.max_point_time_ns);
            rule.to_mut().precision = -1.0;
        }
        self.pattern.start_timed(&mut tally);
        let note = self.pattern.server_timeout_note();
        // The wall clock around the timed trials: what a sum over separate clients (a
        // scenario's `clients = N`) is checked against.
        let timed_from = SystemTime::now();
        let stop_reason = loop {
            let out = self.trial(&timed)?;
            self.pattern.fold(&out)?;
            tally.add(&out.client, &out.server, out.wall_ns, note);
            let samples = self.pattern.samples();
            if let Some(reason) = should_stop(&rule, max_trials, samples, clock.elapsed(), budget) {
                break reason;
            }
        };
        let window = MeasuredWindow::between(timed_from, SystemTime::now(), tally.wall_ns());
        let mut p = self.pattern.finish(spec, &timed, tally, stop_reason);
        p.window = Some(window);
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

/// `--start-at`: sleeps until the wall clock reads `at_ns` (at most 301 s; the flag allows
/// 300), waking every 50 ms for an interrupt; a client that got there after it is told how
/// late it began, in the point's notes.
fn wait_until(at_ns: u64, interrupt: &AtomicBool) -> Result<Option<String>, NetError> {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(301);
    loop {
        let t = now();
        if t >= at_ns {
            let late = t - at_ns;
            return Ok((late > 10_000_000).then(|| {
                format!(
                    "--start-at: this client's first point was ready {:.0} ms after --start-at and \
                     began late: a sum over clients started together holds only where their \
                     windows overlap",
                    late as f64 / 1e6
                )
            }));
        }
        if interrupt.load(Ordering::Relaxed) {
            return Err(NetError::Interrupted);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(Some("--start-at: stopped waiting after 301 s".into()));
        }
        std::thread::sleep(std::time::Duration::from_nanos((at_ns - t).min(50_000_000)));
    }
}
