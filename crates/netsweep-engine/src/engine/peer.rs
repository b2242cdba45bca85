//! The far end of the measurement loop. The point loop (`measure`) is written once; what one
//! trial is with a given kind of peer is a [`Peer`]: a netsweep server's session
//! (`session.rs`: the control connection arms and ends each trial, the pattern's loop runs
//! over the data path, background flows run beside it) or an iperf3 server
//! (`crate::iperf3`: each trial one whole iperf3 test).

use crate::error::NetError;
use crate::pattern::{PointFigures, TrialOutcome};
use netsweep_model::background::BackgroundFigures;
use netsweep_model::results::DatagramTotals;
use netsweep_proto::messages::TrialSpec;

/// How trials are run with one kind of peer.
pub trait Peer {
    /// What accounts for the points' figures with this peer.
    type Pattern: PointFigures + ?Sized;

    /// Runs trial number `n` (numbered from 1 across the run) with the peer: readies it,
    /// runs the client's side, and returns both sides' counters.
    fn trial(
        &mut self,
        pattern: &mut Self::Pattern,
        n: u64,
        spec: &TrialSpec,
    ) -> Result<TrialOutcome, NetError>;

    /// A point is about to be measured.
    fn begin_point(&mut self) {}

    /// What load ran beside the point's timed trials (`--background`), if any.
    fn background(&self) -> Vec<BackgroundFigures> {
        Vec::new()
    }

    /// Every datagram of the run per direction, for a datagram data path.
    fn datagram_totals(&mut self, _pattern: &mut Self::Pattern) -> Option<DatagramTotals> {
        None
    }
}
