//! A stream point's timeline (`--interval`): per-interval samples of the sender's and the
//! receiver's rate and, for datagrams, the interval's exact loss, built from what both sides
//! counted per interval in each timed trial and laid end to end across the point's trials.

use crate::spec::MAX_INTERVAL_BUCKETS;
use netsweep_proto::messages::{IntervalCounts, SideCounters};
use serde::{Deserialize, Serialize};

/// One interval of a stream point's timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct StreamSample {
    /// Start of the interval, ns after the point's first timed trial started (trials are laid
    /// end to end; the control exchange between them is not counted). The sender's clock
    /// starts at its first send, the receiver's when it was armed, a control message earlier.
    pub t_ns: u64,
    /// Payload bytes the sender's stack accepted in the interval.
    pub sent_bytes: u64,
    /// Payload bytes that arrived at the receiver in the interval.
    pub received_bytes: u64,
    /// The sender's rate over the interval, Mbit/s (its last interval: up to its last send).
    pub sender_mbps: f64,
    /// The receiver's rate over the interval, Mbit/s (its last interval: up to its last
    /// receive, which may come after the sender stopped — a queue draining).
    pub receiver_mbps: f64,
    /// Datagram transports: the datagrams sent in the interval and what became of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<IntervalDatagrams>,
}

/// The datagrams sent in one interval (by their send time) and what became of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct IntervalDatagrams {
    /// Datagrams the sender's stack accepted in the interval.
    pub sent: u64,
    /// Of those, the ones received (each once).
    pub received: u64,
    /// Of those, the ones never received: `sent − received`.
    pub lost: u64,
}

/// A point's timeline under construction: each timed trial's intervals appended after the
/// previous trial's.
#[derive(Debug, Clone, Default)]
pub struct StreamTimeline {
    samples: Vec<StreamSample>,
    /// Where the next trial's first interval starts, ns.
    next_ns: u64,
    /// A trial had sender intervals but no receiver intervals (an older peer).
    pub receiver_missing: bool,
    /// The most intervals one side reported for a trial beyond [`MAX_INTERVAL_BUCKETS`]
    /// (a broken or hostile peer): they were ignored. 0 when none was.
    pub excess_ignored: usize,
}

impl StreamTimeline {
    /// Appends one timed trial in which `sender` sent and `receiver` received, both counted
    /// in intervals of `interval_ns`. A trial whose receiver kept no intervals adds nothing
    /// and sets [`receiver_missing`](Self::receiver_missing). Either side's intervals past
    /// [`MAX_INTERVAL_BUCKETS`] — more than any netsweep side keeps; one side is the peer,
    /// whose report could otherwise hold ~350k of them per trial — are ignored and counted
    /// in [`excess_ignored`](Self::excess_ignored).
    pub fn add_trial(
        &mut self,
        sender: &SideCounters,
        receiver: &SideCounters,
        interval_ns: u64,
        datagram: bool,
    ) {
        let cap = MAX_INTERVAL_BUCKETS as usize;
        let most = sender.intervals.len().max(receiver.intervals.len());
        self.excess_ignored = self.excess_ignored.max(most.saturating_sub(cap));
        let tx = &sender.intervals[..sender.intervals.len().min(cap)];
        let rx = &receiver.intervals[..receiver.intervals.len().min(cap)];
        if interval_ns == 0 || tx.is_empty() {
            return;
        }
        if rx.is_empty() {
            self.receiver_missing = true;
            return;
        }
        let n = tx.len().max(rx.len());
        let zero = IntervalCounts::default();
        // The length of interval k of a side that counted `len` intervals and was active for
        // `active_ns`: whole, but its last runs to the side's last data call — shorter, or
        // longer when it also holds what came after the side's last bucket.
        let span = |k: usize, len: usize, active_ns: u64| -> u64 {
            let start = k as u64 * interval_ns;
            if k + 1 == len {
                active_ns.saturating_sub(start).max(1)
            } else {
                interval_ns
            }
        };
        for k in 0..n {
            let s = tx.get(k).unwrap_or(&zero);
            let r = rx.get(k).unwrap_or(&zero);
            let mbps = |bytes: u64, ns: u64| bytes as f64 * 8.0 / ns as f64 * 1e3;
            self.samples.push(StreamSample {
                t_ns: self.next_ns + k as u64 * interval_ns,
                sent_bytes: s.bytes,
                received_bytes: r.bytes,
                sender_mbps: mbps(s.bytes, span(k, tx.len(), sender.active_ns)),
                receiver_mbps: mbps(r.bytes, span(k, rx.len(), receiver.recv_span_ns)),
                datagrams: datagram.then(|| IntervalDatagrams {
                    sent: s.messages,
                    received: r.messages,
                    lost: s.messages.saturating_sub(r.messages),
                }),
            });
        }
        self.next_ns += n as u64 * interval_ns;
    }

    /// The samples so far, leaving the timeline empty for the next point.
    pub fn take(&mut self) -> Vec<StreamSample> {
        self.next_ns = 0;
        std::mem::take(&mut self.samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(intervals: &[(u64, u64)], active_ns: u64) -> SideCounters {
        SideCounters {
            intervals: intervals
                .iter()
                .map(|&(bytes, messages)| IntervalCounts { bytes, messages })
                .collect(),
            active_ns,
            recv_span_ns: active_ns,
            ..Default::default()
        }
    }

    #[test]
    fn trials_are_laid_end_to_end_with_exact_loss_and_partial_last_intervals() {
        let mut tl = StreamTimeline::default();
        // 100 ms intervals; the sender stopped at 250 ms, the receiver's last byte at 310 ms.
        let tx = side(
            &[(1_250_000, 1000), (1_250_000, 1000), (625_000, 500)],
            250_000_000,
        );
        let rx = side(
            &[
                (1_250_000, 990),
                (1_000_000, 1000),
                (600_000, 480),
                (250_000, 0),
            ],
            310_000_000,
        );
        tl.add_trial(&tx, &rx, 100_000_000, true);
        tl.add_trial(&tx, &rx, 100_000_000, true);
        let s = tl.take();
        assert_eq!(s.len(), 8);
        assert_eq!(s[4].t_ns, 400_000_000);
        assert!((s[0].sender_mbps - 100.0).abs() < 1e-9);
        // The sender's last interval is 50 ms long: the same rate.
        assert!((s[2].sender_mbps - 100.0).abs() < 1e-9);
        assert!((s[1].receiver_mbps - 80.0).abs() < 1e-9);
        // The receiver's last interval: 250 kB in 10 ms.
        assert!((s[3].receiver_mbps - 200.0).abs() < 1e-9);
        assert_eq!(s[3].sent_bytes, 0);
        let d: Vec<_> = s.iter().map(|x| x.datagrams.unwrap().lost).collect();
        assert_eq!(d, [10, 0, 20, 0, 10, 0, 20, 0]);
        assert!(tl.take().is_empty());
    }

    #[test]
    fn a_last_interval_that_holds_a_longer_tail_is_rated_over_all_of_it() {
        // The receiver's buckets ended at 300 ms and it received until 450 ms: its last
        // bucket holds 150 ms more than an interval, 3.75 MB in 250 ms.
        let tx = side(&[(1_250_000, 0), (1_250_000, 0)], 200_000_000);
        let rx = side(
            &[(1_250_000, 0), (1_250_000, 0), (3_750_000, 0)],
            450_000_000,
        );
        let mut tl = StreamTimeline::default();
        tl.add_trial(&tx, &rx, 100_000_000, false);
        let s = tl.take();
        assert!(
            (s[2].receiver_mbps - 120.0).abs() < 1e-9,
            "{}",
            s[2].receiver_mbps
        );
    }

    #[test]
    fn a_hostile_peers_interval_count_is_clamped_and_noted() {
        // A trial report of ~1 MiB can carry ~350k empty intervals (`[{},{},…]`).
        let hostile = 350_000;
        let tx = side(&[(1_250_000, 10); 4], 400_000_000);
        let mut rx = side(&[(1_250_000, 10); 4], 400_000_000);
        rx.intervals.resize(hostile, IntervalCounts::default());
        let mut tl = StreamTimeline::default();
        for _ in 0..3 {
            tl.add_trial(&tx, &rx, 100_000_000, true);
        }
        let cap = MAX_INTERVAL_BUCKETS as usize;
        assert_eq!(tl.excess_ignored, hostile - cap);
        let s = tl.take();
        assert_eq!(s.len(), 3 * cap);
        assert_eq!(s[cap].t_ns, cap as u64 * 100_000_000);
        assert_eq!(s[cap].received_bytes, 1_250_000);
        // Up to the bound nothing is ignored; one past it on the sender's side is.
        let mut tl = StreamTimeline::default();
        let mut full = side(&[], 1);
        full.intervals.resize(cap, IntervalCounts::default());
        tl.add_trial(&full, &full, 100, false);
        assert_eq!((tl.excess_ignored, tl.take().len()), (0, cap));
        full.intervals.push(IntervalCounts::default());
        tl.add_trial(&full, &side(&[(1, 1)], 1), 100, false);
        assert_eq!((tl.excess_ignored, tl.take().len()), (1, cap));
    }

    #[test]
    fn a_receiver_without_intervals_adds_nothing_and_says_so() {
        let mut tl = StreamTimeline::default();
        let tx = side(&[(10, 1)], 1);
        tl.add_trial(&tx, &SideCounters::default(), 100, false);
        assert!(tl.receiver_missing);
        assert!(tl.take().is_empty());
        tl.add_trial(&tx, &tx, 0, false);
        assert!(tl.take().is_empty());
        tl.add_trial(&tx, &tx, 100, false);
        assert_eq!(tl.take()[0].datagrams, None);
    }
}
