//! The loop every pattern's point follows, written once: warm-up and calibration, timed
//! trials until the stop rule, the tally of both sides' counters; and the trial itself —
//! start, the pattern's client loop under the trial meter, end, both sides' counters.

use super::background::Background;
use super::calibration::{should_stop, Plan};
use crate::control::ClientControl;
use crate::error::NetError;
use crate::meter::TrialMeter;
use crate::pattern::{ClientPattern, TrialOutcome};
use crate::point::Tally;
use netsweep_model::results::{DatagramTotals, PointResult};
use netsweep_model::spec::RunSpec;
use netsweep_proto::messages::{ClientMsg, ServerMsg, TrialSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Measures points of one session with its pattern.
pub(super) struct Measurer<'a> {
    ctl: &'a mut ClientControl,
    /// The session's pattern, data path included.
    pub(super) pattern: &'a mut dyn ClientPattern,
    spec: &'a RunSpec,
    /// The last trial's number (trials are numbered from 1 across the session).
    trial: u64,
    interrupt: &'a AtomicBool,
    /// Every datagram of the run, warm-ups included, per direction.
    pub(super) totals: DatagramTotals,
    /// The run's background flows, loading the path during every trial.
    bg: &'a mut Background,
}

impl<'a> Measurer<'a> {
    /// A measurer for the session on `ctl`.
    pub(super) fn new(
        ctl: &'a mut ClientControl,
        pattern: &'a mut dyn ClientPattern,
        spec: &'a RunSpec,
        interrupt: &'a AtomicBool,
        bg: &'a mut Background,
    ) -> Self {
        Self {
            ctl,
            pattern,
            spec,
            trial: 0,
            interrupt,
            totals: DatagramTotals::default(),
            bg,
        }
    }

    /// The run's spec.
    pub(super) fn spec(&self) -> &'a RunSpec {
        self.spec
    }

    /// Measures one point: the pattern readies it, warm-up trials calibrate it, timed
    /// trials run until the stop rule, and the pattern folds them into the point.
    pub(super) fn point(&mut self, size: u64) -> Result<PointResult, NetError> {
        let point_start = Instant::now();
        let spec = self.spec;
        self.pattern.begin_point(spec, size)?;
        self.bg.begin_point();
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
        let timed = plan.timed();
        let note = self.pattern.server_timeout_note();
        let budget = plan.budget(spec, point_start.elapsed());
        let stop_reason = loop {
            let out = self.trial(&timed)?;
            self.pattern.fold(&out)?;
            tally.add(&out.client, &out.server, out.wall_ns, note);
            let samples = self.pattern.samples();
            if let Some(reason) = should_stop(spec, samples, point_start.elapsed(), budget) {
                break reason;
            }
        };
        let mut p = self.pattern.finish(spec, &timed, tally, stop_reason);
        p.notes.extend(plan.note());
        p.background = self.bg.figures();
        Ok(p)
    }

    /// Runs one trial with the server: start, the client's loop, end, both sides' counters.
    fn trial(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, NetError> {
        if self.interrupt.load(Ordering::Relaxed) {
            return Err(NetError::Interrupted);
        }
        self.trial += 1;
        let trial = self.trial;
        // Background load starts before the trial is armed and stops after its report.
        self.bg.start_trial()?;
        self.pattern.arm(trial);
        let asked = Instant::now();
        match self.ctl.request(
            ClientMsg::TrialStart {
                trial,
                spec: spec.clone(),
            },
            "waiting for the server to arm the trial",
            None,
        )? {
            ServerMsg::Ready { .. } => {}
            other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
        }
        let control_rtt_ns = asked.elapsed().as_nanos() as u64;
        let meter = TrialMeter::start(self.pattern.stats());
        let t0 = Instant::now();
        let body_result = self.pattern.run_trial(trial, spec);
        let wall_ns = t0.elapsed().as_nanos() as u64;
        let mut client = body_result.map_err(|e| self.data_error(e))?;
        meter.finish(|| self.pattern.stats(), &mut client);
        // The server may still be draining a stream: allow it the full timeout and more.
        let wait = Duration::from_nanos(self.spec.timeout_ns) + Duration::from_secs(2);
        let server = match self.ctl.request(
            ClientMsg::TrialEnd {
                trial,
                counters: client.clone(),
            },
            "waiting for the server's trial report",
            Some(wait),
        )? {
            ServerMsg::TrialReport { counters, .. } => counters,
            other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
        };
        self.pattern
            .complete(&server, &mut client)
            .map_err(|e| self.data_error(e))?;
        self.bg.stop_trial(!spec.warmup)?;
        if self.pattern.is_datagram() {
            let t = &mut self.totals;
            t.trials += 1;
            t.to_server_sent += client.messages_sent;
            t.to_client_sent += server.messages_sent;
            t.to_client_received += client.messages_received;
            t.to_server_send_errors += client.send_errors.total();
            t.to_client_send_errors += server.send_errors.total();
            t.to_server_socket_drops += server.socket_drops.unwrap_or(0);
            t.to_client_socket_drops += client.socket_drops.unwrap_or(0);
            // Distinct datagrams when the server de-duplicated them (stream), else all it got.
            t.to_server_received += server
                .datagrams
                .as_ref()
                .map_or(server.messages_received, |d| d.received);
        }
        Ok(TrialOutcome {
            client,
            server,
            wall_ns,
            control_rtt_ns,
        })
    }

    /// What a data-path error of the client's loop means for the run.
    fn data_error(&self, e: std::io::Error) -> NetError {
        if e.kind() == std::io::ErrorKind::Interrupted && self.interrupt.load(Ordering::Relaxed) {
            // Ctrl-C interrupted a blocking call: the user asked to stop.
            NetError::Interrupted
        } else if netsweep_endpoint::is_timeout(&e) {
            // A bare timeout was a receive; a loop's own timeout says what it saw.
            let during = e
                .get_ref()
                .map_or("waiting for data from the server".into(), |m| {
                    format!("running the trial's data path ({m})")
                });
            NetError::Timeout {
                secs: self.spec.timeout_ns as f64 / 1e9,
                during,
            }
        } else {
            NetError::io("data path", e)
        }
    }
}
