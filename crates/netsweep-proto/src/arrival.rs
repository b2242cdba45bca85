//! A receiver's timing of its messages' arrival, reported in [`crate::messages::SideCounters`]:
//! what one direction of a pingpong's round trip is known by without shared clocks.

use serde::{Deserialize, Serialize};

/// A receiver's view of its messages' serialisation: over the messages that took more than
/// one receive, the bytes after each one's first receive and the time from that receive's
/// return to the last one's. Their ratio is the direction's delivery rate.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct Arrival {
    /// Messages that took more than one receive.
    pub messages: u64,
    /// Their bytes after each one's first receive.
    pub bytes: u64,
    /// Their time from the first receive's return to the last's, nanoseconds.
    pub span_ns: u64,
    /// The median over those messages of each one's time per byte after its first receive,
    /// femtoseconds (one trial's; 0 when none): robust to a message stalled by the host,
    /// which the ratio of the sums is not.
    pub median_fs_per_byte: u64,
}

impl Arrival {
    /// Nothing recorded.
    pub fn is_empty(&self) -> bool {
        self.messages == 0
    }

    /// Adds one message that took more than one receive.
    #[inline]
    pub fn record(&mut self, bytes: u64, span_ns: u64) {
        self.messages += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        self.span_ns = self.span_ns.saturating_add(span_ns);
    }

    /// Adds another trial's sums (saturating: the figures may come from a peer); a median
    /// does not add, and the sum keeps none.
    pub fn add(&mut self, o: &Arrival) {
        self.messages = self.messages.saturating_add(o.messages);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.span_ns = self.span_ns.saturating_add(o.span_ns);
        self.median_fs_per_byte = 0;
    }

    /// One message's time per byte after its first receive, femtoseconds (at least 1).
    #[inline]
    pub fn fs_per_byte(bytes: u64, span_ns: u64) -> u64 {
        (u128::from(span_ns) * 1_000_000 / u128::from(bytes.max(1))).clamp(1, u64::MAX as u128)
            as u64
    }
}
