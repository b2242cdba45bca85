//! A receiver's timing of its messages' arrival (first receive to last), the figure each
//! direction of a pingpong's round trip is known by without shared clocks: sums, and the
//! median time per byte over a trial's messages.

use netsweep_endpoint::Spread;
use netsweep_model::stats::LatencyHistogram;
use netsweep_model::symmetry::DirectionRate;
use netsweep_proto::messages::{Arrival, SideCounters};

/// One trial's arrivals, as one side's receiver saw them.
#[derive(Debug, Default)]
pub(crate) struct Arrivals {
    sums: Arrival,
    /// Each message's femtoseconds per byte; allocated at the first message that took more
    /// than one receive (none do on datagram transports, or below a segment).
    per_byte: Option<LatencyHistogram>,
}

impl Arrivals {
    /// Records one `size`-byte message that took more than one receive.
    #[inline]
    pub(crate) fn record(&mut self, s: &Spread, size: usize) {
        self.record_span(s.bytes, s.span_ns(), size);
    }

    /// Records `bytes` after the first receive of a `size`-byte message, arriving over
    /// `span_ns` — when they are at least half of it. A receiver that found most of its
    /// message already queued (on loopback the peer's send buffer and this side's receive
    /// buffer hold megabytes) timed only a tail: its wake-up, not the direction.
    #[inline]
    pub(crate) fn record_span(&mut self, bytes: u64, span_ns: u64, size: usize) {
        if bytes.saturating_mul(2) < size as u64 {
            return;
        }
        self.sums.record(bytes, span_ns);
        self.per_byte
            .get_or_insert_with(LatencyHistogram::new)
            .record(Arrival::fs_per_byte(bytes, span_ns));
    }

    /// The trial's figures: the sums and the median time per byte.
    pub(crate) fn finish(&self) -> Arrival {
        let mut a = self.sums;
        a.median_fs_per_byte = self
            .per_byte
            .as_ref()
            .map_or(0, |h| h.value_at_quantile(0.5));
        a
    }
}

/// One direction over a point's timed trials: each trial's median time per byte, where the
/// trial timed at least half of its messages.
#[derive(Debug, Default)]
pub(crate) struct DirectionTrials {
    medians: Vec<u64>,
    messages: u64,
}

impl DirectionTrials {
    /// Forgets the last point.
    pub(crate) fn clear(&mut self) {
        self.medians.clear();
        self.messages = 0;
    }

    /// Adds one trial's arrivals as `c`'s side counted them, over `messages` messages. A
    /// peer's figures beyond what it received are not believed.
    pub(crate) fn fold(&mut self, c: &SideCounters, messages: u64) {
        let a = &c.arrival;
        let plausible = a.bytes <= c.bytes_received && a.messages <= c.messages_received;
        if plausible && a.median_fs_per_byte > 0 && a.messages.saturating_mul(2) >= messages {
            self.medians.push(a.median_fs_per_byte);
            self.messages += a.messages;
        }
    }

    /// The direction's rate: the median over trials of their medians; `None` when no trial
    /// timed it.
    pub(crate) fn rate(&self) -> Option<DirectionRate> {
        let mut m = self.medians.clone();
        m.sort_unstable();
        let mid = m.len() / 2;
        let fs = match m.len() {
            0 => return None,
            n if n % 2 == 1 => m[mid] as f64,
            _ => (m[mid - 1] as f64 + m[mid] as f64) / 2.0,
        };
        Some(DirectionRate::from_fs_per_byte(fs, self.messages))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stalled_message_moves_the_sums_not_the_median() {
        let mut a = Arrivals::default();
        // 99 messages of 1 MB in 1 ms each (8 Gbit/s: 10⁶ fs per byte), one stalled 1 s.
        for _ in 0..99 {
            a.record_span(1_000_000, 1_000_000, 1_000_100);
        }
        a.record_span(1_000_000, 1_000_000_000, 1_000_100);
        // A message found mostly queued: a tail, not counted.
        a.record_span(400_000, 1, 1_000_000);
        let f = a.finish();
        assert_eq!((f.messages, f.bytes), (100, 100_000_000));
        assert_eq!(f.span_ns, 99_000_000 + 1_000_000_000);
        assert!(
            (f.median_fs_per_byte as f64 / 1e6 - 1.0).abs() <= 1e-3,
            "{f:?}"
        );
        assert_eq!(Arrivals::default().finish(), Arrival::default());
    }

    #[test]
    fn a_direction_is_the_median_trial_of_those_that_timed_most_messages() {
        let side = |messages, median, received| SideCounters {
            bytes_received: received * 1000,
            messages_received: received,
            arrival: Arrival {
                messages,
                bytes: messages * 900,
                span_ns: 1,
                median_fs_per_byte: median,
            },
            ..Default::default()
        };
        let mut d = DirectionTrials::default();
        assert_eq!(d.rate(), None);
        d.fold(&side(10, 1_000_000, 10), 10);
        d.fold(&side(10, 3_000_000, 10), 10);
        d.fold(&side(10, 2_000_000, 10), 10);
        // Too few of the trial's messages timed; more than the peer received: not counted.
        d.fold(&side(4, 9, 10), 10);
        d.fold(&side(20, 9, 10), 10);
        let r = d.rate().unwrap();
        assert_eq!(r.messages, 30);
        // 2·10⁶ fs per byte: 0.5 GB/s, 4000 Mbit/s.
        assert!((r.mbps - 4000.0).abs() < 1e-9, "{r:?}");
        d.clear();
        assert_eq!(d.rate(), None);
    }
}
