//! A stream trial's per-interval counts (`--interval`): buckets sized before the trial and
//! indexed by time in the timed loop without allocating, reported in the trial's counters.

use netsweep_model::spec::MAX_INTERVAL_BUCKETS;
use netsweep_proto::messages::IntervalCounts;
use std::time::Instant;

/// The most buckets one side keeps (the model's bound, which the client also applies to a
/// peer's report).
const MAX_BUCKETS: u64 = MAX_INTERVAL_BUCKETS;

/// One side's counts per interval for one trial; inactive (interval 0) without a timeline.
#[derive(Debug, Default)]
pub struct Intervals {
    /// Length of one interval, ns; 0: none kept.
    interval_ns: u64,
    counts: Vec<IntervalCounts>,
}

impl Intervals {
    /// Readies the buckets for a trial lasting up to `span_ns` in intervals of `interval_ns`
    /// (0: none kept). Allocates only when a trial needs more buckets than an earlier one.
    pub fn arm(&mut self, interval_ns: u64, span_ns: u64) {
        self.interval_ns = interval_ns;
        self.counts.clear();
        if interval_ns != 0 {
            let n = span_ns.div_ceil(interval_ns).clamp(1, MAX_BUCKETS) as usize;
            self.counts.resize(n, IntervalCounts::default());
        }
    }

    /// Buckets for a receiver whose sender sends for `duration_ns`: the trial, as long again
    /// for a socket buffer draining behind a slow path, and `drain_ns` for what is still on
    /// its way.
    pub fn arm_receiver(&mut self, interval_ns: u64, duration_ns: u64, drain_ns: u64) {
        self.arm(interval_ns, 2 * duration_ns + drain_ns);
    }

    /// Counts `bytes` and `messages` in the interval holding `t_ns` (ns on this side's
    /// clock); nothing when inactive.
    #[inline]
    pub fn add(&mut self, t_ns: u64, bytes: u64, messages: u64) {
        if self.interval_ns == 0 {
            return;
        }
        let last = self.counts.len() - 1;
        let c = &mut self.counts[((t_ns / self.interval_ns) as usize).min(last)];
        c.bytes += bytes;
        c.messages += messages;
    }

    /// Counts `bytes` that arrived at `now` in the interval of their time since `epoch`;
    /// when inactive, nothing — not even the subtraction.
    #[inline]
    pub fn add_arrival(&mut self, now: Instant, epoch: Instant, bytes: u64) {
        if self.interval_ns != 0 {
            self.add(now.duration_since(epoch).as_nanos() as u64, bytes, 0);
        }
    }

    /// The counts, trailing empty intervals left out (none when inactive).
    pub fn report(&self) -> Vec<IntervalCounts> {
        let end = self
            .counts
            .iter()
            .rposition(|c| c.bytes != 0 || c.messages != 0)
            .map_or(0, |i| i + 1);
        self.counts[..end].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_in_their_interval_and_trailing_empties_are_dropped() {
        let mut iv = Intervals::default();
        iv.add(5, 1, 1);
        assert!(iv.report().is_empty());
        iv.arm(100, 250);
        assert_eq!(iv.counts.len(), 3);
        iv.add(0, 10, 1);
        iv.add(99, 10, 1);
        iv.add(100, 7, 0);
        // Beyond the buckets: the last one.
        iv.add(10_000, 0, 2);
        let r = iv.report();
        assert_eq!(
            r.iter().map(|c| (c.bytes, c.messages)).collect::<Vec<_>>(),
            [(20, 2), (7, 0), (0, 2)]
        );
        iv.arm(100, 1000);
        iv.add(150, 3, 0);
        assert_eq!(iv.report().len(), 2);
        iv.arm(0, 1000);
        iv.add(150, 3, 0);
        assert!(iv.report().is_empty());
        iv.arm_receiver(1_000_000, 100_000_000, 60_000_000);
        assert_eq!(iv.counts.len(), 260);
        // Arrivals count by their time since the epoch.
        let epoch = Instant::now();
        iv.add_arrival(epoch + std::time::Duration::from_micros(2500), epoch, 9);
        assert_eq!(
            iv.report().last().map(|c| (c.bytes, c.messages)),
            Some((9, 0))
        );
        assert_eq!(iv.report().len(), 3);
        iv.arm(0, 1000);
        iv.add_arrival(epoch, epoch, 9);
        assert!(iv.report().is_empty());
    }

    #[test]
    fn the_most_buckets_fit_in_one_trial_report() {
        // Every bucket full at 1 ms intervals of a 1 Tbit/s path, datagrams of one byte.
        let mut iv = Intervals::default();
        iv.arm(1_000_000, u64::MAX / 2);
        assert_eq!(iv.counts.len() as u64, MAX_BUCKETS);
        for k in 0..MAX_BUCKETS {
            iv.add(k * 1_000_000, 125_000_000, 125_000_000);
        }
        let counters = netsweep_proto::SideCounters {
            intervals: iv.report(),
            ..Default::default()
        };
        let msg = netsweep_proto::ServerMsg::TrialReport { trial: 1, counters };
        let len = netsweep_proto::encode_message(&msg).unwrap().len();
        assert!(len < netsweep_proto::MAX_FRAME, "{len} bytes");
    }
}
