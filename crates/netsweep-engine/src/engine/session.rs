//! A session with a netsweep server as the measurement loop's peer: per trial, the exchange
//! that arms and ends it around the pattern's client loop, with the run's background flows
//! loading the path during every trial (the session itself is opened in `open.rs`).

use super::background::Background;
use super::peer::Peer;
use crate::control::ClientControl;
use crate::error::NetError;
use crate::meter::TrialMeter;
use crate::pattern::{ClientPattern, TrialOutcome};
use netsweep_model::background::BackgroundFigures;
use netsweep_model::results::DatagramTotals;
use netsweep_proto::messages::{ClientMsg, ServerMsg, TrialSpec};
use netsweep_proto::text::printable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The measured session's side of every trial: its control connection, the background
/// flows, and the datagram totals it keeps.
pub(super) struct SessionPeer<'a> {
    pub(super) ctl: &'a mut ClientControl,
    pub(super) bg: &'a mut Background,
    pub(super) interrupt: &'a AtomicBool,
    /// The session's inactivity timeout.
    pub(super) timeout: Duration,
    /// Every datagram of the run, warm-ups included, per direction.
    pub(super) totals: DatagramTotals,
}

impl Peer for SessionPeer<'_> {
    type Pattern = dyn ClientPattern;

    /// Runs one trial with the server: start, the client's loop, end, both sides' counters.
    fn trial(
        &mut self,
        pattern: &mut Self::Pattern,
        trial: u64,
        spec: &TrialSpec,
    ) -> Result<TrialOutcome, NetError> {
        // Background load starts before the trial is armed and stops after its report.
        self.bg.start_trial()?;
        pattern.arm(trial);
        // Before the server arms: the read is slow (see TrialMeter::start_with).
        let kernel = crate::kernel::read();
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
        let meter = TrialMeter::start_with(pattern.stats(), kernel);
        let t0 = Instant::now();
        let body_result = pattern.run_trial(trial, spec);
        let wall_ns = t0.elapsed().as_nanos() as u64;
        let mut client = body_result.map_err(|e| self.server_reason(self.data_error(e)))?;
        meter.finish(|| pattern.stats(), &mut client);
        // The server may still be draining a stream: allow it the full timeout and more.
        let wait = self.timeout + Duration::from_secs(2);
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
        pattern
            .complete(&server, &mut client)
            .map_err(|e| self.data_error(e))?;
        self.bg.stop_trial(!spec.warmup)?;
        if pattern.is_datagram() {
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

    fn begin_point(&mut self) {
        self.bg.begin_point();
    }

    fn background(&self) -> Vec<BackgroundFigures> {
        self.bg.figures()
    }

    fn datagram_totals(&mut self, pattern: &mut Self::Pattern) -> Option<DatagramTotals> {
        pattern.is_datagram().then_some(self.totals)
    }
}

/// How long a client whose data path failed looks on the control connection for the server's
/// reason: a server that ends a session mid-trial (`--max-duration`, `--max-rate`, its own
/// data path failing) sends why on the control connection as it closes the data path, so the
/// reason is there by the time the client sees the reset.
const REASON_WAIT: Duration = Duration::from_secs(2);

impl SessionPeer<'_> {
    /// The server's own reason for a failed trial when it sent one, else `e`: a reset data path
    /// is the symptom, the server's `--max-duration` the cause the user can act on.
    fn server_reason(&mut self, e: NetError) -> NetError {
        if matches!(e, NetError::Interrupted) {
            return e;
        }
        match self.ctl.recv(
            "looking for the server's reason",
            Some(REASON_WAIT.min(self.timeout)),
        ) {
            Ok(ServerMsg::Error { message }) => NetError::Refused(printable(&message)),
            Ok(ServerMsg::Busy { message }) => NetError::Busy(printable(&message)),
            _ => e,
        }
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
                secs: self.timeout.as_secs_f64(),
                during,
            }
        } else {
            NetError::io("data path", e)
        }
    }
}
