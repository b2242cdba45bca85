//! A rate point's timeline: per-interval samples (delivered rate, latency percentiles, loss)
//! and the small fixed-size histogram each interval keeps, so the engine records them into
//! buckets allocated before a trial and indexed by time, without allocating in its loop.

use serde::{Deserialize, Serialize};

/// Buckets of a [`CoarseHistogram`]: 16 exact values, then 8 per power of two up to 2^64.
const BUCKETS: usize = 16 + 60 * 8;

/// A histogram of nanosecond values with 8 buckets per power of two (values within 12.5%),
/// fixed in size: recording never allocates.
#[derive(Debug, Clone, PartialEq)]
pub struct CoarseHistogram {
    counts: [u32; BUCKETS],
    total: u64,
}

impl Default for CoarseHistogram {
    fn default() -> Self {
        Self {
            counts: [0; BUCKETS],
            total: 0,
        }
    }
}

impl CoarseHistogram {
    #[inline]
    fn index(v: u64) -> usize {
        if v < 16 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as usize; // >= 4
        let sub = ((v >> (e - 3)) & 7) as usize;
        16 + (e - 4) * 8 + sub
    }

    /// The middle of bucket `i`.
    fn value(i: usize) -> f64 {
        if i < 16 {
            return i as f64;
        }
        let e = (i - 16) / 8 + 4;
        let sub = ((i - 16) % 8) as u64;
        let low = (8 + sub) << (e - 3);
        low as f64 + (1u64 << (e - 3)) as f64 / 2.0
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let c = &mut self.counts[Self::index(ns)];
        *c = c.saturating_add(1);
        self.total += 1;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Forgets every value.
    pub fn reset(&mut self) {
        self.counts = [0; BUCKETS];
        self.total = 0;
    }

    /// The value at quantile `q` (0..1), within 12.5%; 0 when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return Self::value(i);
            }
        }
        Self::value(BUCKETS - 1)
    }
}

/// One interval of a rate point's timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct TimelineSample {
    /// Start of the interval, ns after the point's first timed trial started (trials are laid
    /// end to end; the control exchange between them is not counted).
    pub t_ns: u64,
    /// Requests due in the interval that were sent.
    pub sent: u64,
    /// Of those, requests answered.
    pub received: u64,
    /// Of those, requests never answered.
    pub lost: u64,
    /// Replies that arrived in the interval, per second.
    pub delivered_rate: f64,
    /// Median latency of the requests due in the interval (reply − intended send), ns.
    pub p50_ns: f64,
    /// 99th percentile of the same, ns.
    pub p99_ns: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_quantiles_are_within_an_eighth() {
        let mut h = CoarseHistogram::default();
        assert_eq!(h.quantile(0.5), 0.0);
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 1000);
        let p50 = h.quantile(0.5);
        let p99 = h.quantile(0.99);
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.125, "{p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.125, "{p99}");
        h.record(u64::MAX);
        assert!(h.quantile(1.0) > 1e18);
        h.reset();
        assert_eq!((h.count(), h.quantile(0.99)), (0, 0.0));
        for v in 0..16 {
            assert_eq!(CoarseHistogram::value(CoarseHistogram::index(v)), v as f64);
        }
    }
}
