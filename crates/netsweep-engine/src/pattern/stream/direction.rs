//! A one-way stream's accounting over a point, once for every peer: each timed trial's sender
//! and receiver rates, the datagrams' loss and jitter, and the point they make.

use crate::point::{bits_per_ns_to_mbps, estimate, Tally};
use netsweep_model::results::{DirectionFigures, Loss, PointResult, StopReason};
use netsweep_model::spec::RunSpec;
use netsweep_proto::messages::{SideCounters, TrialSpec};

/// One direction's figures over a point's timed trials: the sender's and the receiver's
/// rate per trial, and the datagrams' loss — a stream's accounting, whoever ran the trials
/// (a netsweep session, bidir's two directions, an iperf3 server).
#[derive(Debug, Default)]
pub(crate) struct Direction {
    /// Each timed trial's rate as the sender saw it, Mbit/s.
    sender: Vec<f64>,
    /// Each timed trial's rate as the receiver saw it, Mbit/s: the figure.
    pub(crate) receiver: Vec<f64>,
    loss: Loss,
    jitters: Vec<f64>,
}

impl Direction {
    /// Folds one trial in which `c` sent and `s` received; returns the receiver's rate.
    pub(crate) fn fold(&mut self, c: &SideCounters, s: &SideCounters) -> f64 {
        self.sender
            .push(bits_per_ns_to_mbps(c.bytes_sent, c.active_ns));
        let rx = if s.recv_span_ns > 0 {
            bits_per_ns_to_mbps(s.bytes_received, s.recv_span_ns)
        } else {
            0.0
        };
        self.receiver.push(rx);
        if let Some(d) = &s.datagrams {
            let loss = &mut self.loss;
            loss.sent += c.messages_sent;
            loss.send_errors += c.send_errors.total();
            loss.received += d.received;
            loss.lost += d.lost;
            loss.reordered += d.reordered;
            loss.duplicates += d.duplicates;
            loss.foreign += d.foreign;
            self.jitters.push(d.jitter_ns as f64);
        }
        rx
    }

    /// A one-way stream's point from its tally and these figures: the receiver's rate is the
    /// figure, the sender's beside it, the loss for datagrams; `reverse`: the server sent.
    /// Each side's service demand is counted over the bytes it moved.
    pub(crate) fn point(
        &mut self,
        spec: &RunSpec,
        timed: &TrialSpec,
        tally: Tally,
        stop_reason: StopReason,
        reverse: bool,
        datagram: bool,
    ) -> PointResult {
        let figures = self.figures(datagram);
        let rx = figures.receiver_mbps;
        let (c, s) = (&tally.client, &tally.server);
        let (messages, moved) = if reverse {
            (
                s.messages_sent.max(c.messages_received),
                (c.bytes_received, s.bytes_sent),
            )
        } else {
            (
                c.messages_sent.max(s.messages_received),
                (c.bytes_sent, s.bytes_received),
            )
        };
        let mut p = tally.point(spec, timed.size, messages, rx, stop_reason, moved);
        p.sender_mbps = Some(figures.sender_mbps);
        p.receiver_mbps = Some(rx);
        p.loss = figures.loss;
        p
    }

    /// The direction's figures over the point (its loss only for datagrams).
    pub(crate) fn figures(&mut self, datagram: bool) -> DirectionFigures {
        let mut loss = std::mem::take(&mut self.loss);
        if datagram {
            loss.ratio = if loss.sent > 0 {
                loss.lost as f64 / loss.sent as f64
            } else {
                0.0
            };
            loss.jitter_ns = self.jitters.iter().sum::<f64>() / self.jitters.len().max(1) as f64;
        }
        DirectionFigures {
            sender_mbps: estimate(&self.sender),
            receiver_mbps: estimate(&self.receiver),
            loss: datagram.then_some(loss),
        }
    }
}
