//! What an emulator reports about itself: per direction, the frames it received, released,
//! dropped (by cause), duplicated and reordered, and the lateness of its releases against
//! their schedule — written as JSON while it runs, so a lab can read it around each run.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// One direction's counts since the emulator started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Frames that arrived.
    pub received: u64,
    /// Their bytes (whole Ethernet frames).
    pub received_bytes: u64,
    /// Frames sent on (duplicates included).
    pub released: u64,
    /// Their bytes.
    pub released_bytes: u64,
    /// Dropped by the loss model.
    pub dropped_loss: u64,
    /// Dropped because the bottleneck's queue was full (drop-tail, or FQ-CoDel's overflow
    /// drop from its fattest flow).
    pub dropped_queue: u64,
    /// Dropped by the bottleneck's AQM (CoDel's control law) as they left the queue.
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_aqm: u64,
    /// Dropped because the emulator had no buffer left for them (its own limit).
    pub dropped_no_buffer: u64,
    /// Dropped because the egress socket refused them (the peer port down, a full device
    /// queue).
    pub dropped_send: u64,
    /// Dropped by the kernel before the emulator could read them (its port's receive
    /// backlog or its socket's buffer full: the emulator fell behind).
    pub dropped_kernel: u64,
    /// Extra copies made by the duplication model.
    pub duplicated: u64,
    /// Frames released after a frame that arrived later than they did.
    pub reordered: u64,
    /// Frames of other protocols, passed at once (not in the counts above).
    pub bypassed: u64,
}

/// The lateness of releases against their schedule, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Lateness {
    /// Releases measured.
    pub count: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// The worst.
    pub max_ns: u64,
}

/// One direction's report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DirectionReport {
    /// `a-to-b` or `b-to-a`.
    pub direction: String,
    /// Its counts since the emulator started.
    pub counters: Counters,
    /// How late its releases were, in the current window.
    pub lateness: Lateness,
}

/// What the emulator process writes (its counters file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Report {
    /// The link it emulates.
    pub link: String,
    /// Seconds since it started.
    pub uptime_s: f64,
    /// Its process id (SIGUSR1 starts a new lateness window, SIGTERM stops it).
    pub pid: u32,
    /// When the current lateness window started, seconds since the emulator started.
    pub window_start_s: f64,
    /// Both directions.
    pub directions: Vec<DirectionReport>,
    /// Still running (false in the report written as it stopped).
    pub running: bool,
    /// Its thread runs under SCHED_FIFO (asked and granted).
    pub realtime: bool,
    /// Why it runs without SCHED_FIFO although asked (the kernel's refusal).
    pub realtime_refused: Option<String>,
    /// Seconds since it started that its thread ran as an ordinary one, its real-time share
    /// of the second spent (a flood keeps it busy): it took its turn with the host's work.
    pub ordinary_s: f64,
    /// Why it stopped, if it failed.
    pub error: Option<String>,
}

/// A histogram of release lateness, 1 ns to 10 s at 3 significant digits.
#[derive(Debug, Clone)]
pub struct LatenessHistogram(Histogram<u64>);

impl Default for LatenessHistogram {
    fn default() -> Self {
        Self(Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("valid histogram bounds"))
    }
}

impl LatenessHistogram {
    /// Records one release `late_ns` after its schedule.
    pub fn record(&mut self, late_ns: u64) {
        self.0.saturating_record(late_ns.max(1));
    }

    /// Its summary.
    pub fn summary(&self) -> Lateness {
        let h = &self.0;
        Lateness {
            count: h.len(),
            p50_ns: if h.is_empty() {
                0
            } else {
                h.value_at_quantile(0.5)
            },
            p99_ns: if h.is_empty() {
                0
            } else {
                h.value_at_quantile(0.99)
            },
            max_ns: if h.is_empty() { 0 } else { h.max() },
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Counters {
    /// Every frame dropped, whatever the cause.
    pub fn dropped(&self) -> u64 {
        self.dropped_loss
            + self.dropped_queue
            + self.dropped_aqm
            + self.dropped_no_buffer
            + self.dropped_send
            + self.dropped_kernel
    }

    /// The counts since `before` (a later report minus an earlier one).
    pub fn since(&self, before: &Counters) -> Counters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Counters {
            received: d(self.received, before.received),
            received_bytes: d(self.received_bytes, before.received_bytes),
            released: d(self.released, before.released),
            released_bytes: d(self.released_bytes, before.released_bytes),
            dropped_loss: d(self.dropped_loss, before.dropped_loss),
            dropped_queue: d(self.dropped_queue, before.dropped_queue),
            dropped_aqm: d(self.dropped_aqm, before.dropped_aqm),
            dropped_no_buffer: d(self.dropped_no_buffer, before.dropped_no_buffer),
            dropped_send: d(self.dropped_send, before.dropped_send),
            dropped_kernel: d(self.dropped_kernel, before.dropped_kernel),
            duplicated: d(self.duplicated, before.duplicated),
            reordered: d(self.reordered, before.reordered),
            bypassed: d(self.bypassed, before.bypassed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_summarises_and_counters_subtract() {
        let mut h = LatenessHistogram::default();
        assert_eq!(h.summary(), Lateness::default());
        for ns in 1..=100 {
            h.record(ns * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 100);
        assert!((49_000..=51_000).contains(&s.p50_ns), "{s:?}");
        assert!(s.p99_ns >= 98_000 && s.max_ns >= 99_900, "{s:?}");
        let a = Counters {
            received: 10,
            dropped_loss: 2,
            dropped_queue: 1,
            ..Default::default()
        };
        let b = Counters {
            received: 4,
            dropped_loss: 1,
            ..Default::default()
        };
        assert_eq!(a.since(&b).received, 6);
        assert_eq!(a.dropped(), 3);
        assert_eq!(b.since(&a).received, 0);
    }
}
