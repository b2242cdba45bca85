//! A stream point's figures from iperf3 tests: the stream pattern's own accounting of one
//! direction ([`Direction`]: sender and receiver rates per trial, the datagrams' loss), fed
//! with the counters each test became (`peer.rs`), and the notes that say what an iperf3 trial
//! is.

use crate::error::NetError;
use crate::pattern::stream::Direction;
use crate::pattern::{PointFigures, Sizing, TrialOutcome};
use crate::point::Tally;
use netsweep_model::results::{PointResult, StopReason};
use netsweep_model::spec::{RunSpec, Transport};
use netsweep_proto::messages::TrialSpec;

/// One direction's stream figures against an iperf3 server.
pub(super) struct StreamFigures {
    dir: Direction,
    udp: bool,
    reverse: bool,
    warmup: bool,
}

impl StreamFigures {
    /// The figures of `spec`'s points.
    pub(super) fn new(spec: &RunSpec) -> Self {
        Self {
            dir: Direction::default(),
            udp: spec.transport == Transport::Udp,
            reverse: spec.reverse,
            warmup: spec.warmup,
        }
    }
}

impl PointFigures for StreamFigures {
    fn sizing(&self) -> Sizing {
        Sizing::Duration
    }

    fn begin_point(&mut self, _spec: &RunSpec, _size: u64) -> Result<(), NetError> {
        self.dir = Direction::default();
        Ok(())
    }

    fn fold(&mut self, out: &TrialOutcome) -> Result<(), NetError> {
        let (sender, receiver) = if self.reverse {
            (&out.server, &out.client)
        } else {
            (&out.client, &out.server)
        };
        self.dir.fold(sender, receiver);
        Ok(())
    }

    fn samples(&self) -> &[f64] {
        &self.dir.receiver
    }

    fn server_timeout_note(&self) -> &'static str {
        "the iperf3 server timed out in a test"
    }

    fn finish(
        &mut self,
        spec: &RunSpec,
        timed: &TrialSpec,
        tally: Tally,
        stop_reason: StopReason,
    ) -> PointResult {
        let trial_secs = timed.duration_ns as f64 / 1e9;
        let mut notes = vec![format!(
            "iperf3 peer: each trial is one iperf3 test of {trial_secs:.1} s{}; the server's \
             CPU is its whole process over the whole test, setup included",
            if self.warmup {
                format!(
                    ", after a warm-up test of {:.1} s",
                    spec.trial_time_ns as f64 / 2e9
                )
            } else {
                String::new()
            }
        )];
        let mut p = self
            .dir
            .point(spec, timed, tally, stop_reason, self.reverse, self.udp);
        if let Some(loss) = &p.loss {
            let tail = loss.sent.saturating_sub(loss.received + loss.lost);
            if tail > 0 {
                notes.push(format!(
                    "{tail} datagrams were still in flight when the test ended (sent after \
                     the receiver's last count): neither received nor lost"
                ));
            }
        }
        notes.append(&mut p.notes);
        p.notes = notes;
        p
    }
}
