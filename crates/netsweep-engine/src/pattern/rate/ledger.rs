//! The open loop's one ledger of replies, kept alike by the single-flow loop
//! (`loops::Replies`) and by every `--flows` data thread (`flow.rs`): a reply is checked
//! against the trial's cookie and storage, counted once by its sequence number (a bit per
//! request), charged its latency from its request's intended send time, counted by the
//! checkpoint it arrived by (the delivered rate), and late beyond the grace period.

use crate::pattern::dgram::parse;

/// Checkpoints of the delivered count: the ends of windows from 9/16 to 16/16 of a trial's
/// schedule.
pub(crate) const CHECKPOINTS: usize = 8;

/// Checkpoint `j` of a schedule of `duration_ns`.
#[inline]
pub(crate) fn checkpoint(duration_ns: u64, j: usize) -> u64 {
    (duration_ns as u128 * (9 + j) as u128 / 16) as u64
}

/// What a trial's replies add up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Answers {
    /// Distinct requests of this trial answered.
    pub received: u64,
    /// Answers after the grace period (not in the histogram) and echoes of earlier trials.
    pub late: u64,
    /// Answers of a request already answered.
    pub duplicates: u64,
    /// Answers first counted at each checkpoint, which is the arrival time less the
    /// smallest latency seen (the count by checkpoint j is the prefix sum): the delivered
    /// rate's counts (what the path carried by then, shifted by the unloaded latency; a
    /// backlog drained after the schedule is not counted).
    pub arrived_at: [u64; CHECKPOINTS],
}

/// A reply on time: the histogram's sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OnTime {
    /// Arrival − intended send time, ns.
    pub latency: u64,
    /// The request's intended send time, ns after the trial's epoch.
    pub due: u64,
}

/// One trial's accounting of replies (the bitmaps of who was answered are the caller's: one
/// per flow, sized before the trial).
#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    cookie: u32,
    grace_ns: u64,
    cps: [u64; CHECKPOINTS],
    min_latency: u64,
    pub(crate) answers: Answers,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new(0, 0, 0)
    }
}

impl Ledger {
    /// A ledger for a trial stamped `cookie` whose schedule spans `window_ns`; replies later
    /// than `grace_ns` after their intended send time are late.
    pub(crate) fn new(cookie: u32, grace_ns: u64, window_ns: u64) -> Self {
        Self {
            cookie,
            grace_ns,
            cps: std::array::from_fn(|j| checkpoint(window_ns, j)),
            min_latency: u64::MAX,
            answers: Answers::default(),
        }
    }

    /// The trial's cookie: every request is stamped with it.
    #[inline]
    pub(crate) fn cookie(&self) -> u32 {
        self.cookie
    }

    /// Accounts one reply that arrived `now` ns after the epoch, whose first bytes are `head`
    /// (`whole`: it has the trial's size), on a flow whose requests `seen` has a bit for.
    /// Returns the sample of a reply on time; a reply of another trial, of a sequence number
    /// beyond the storage, cut short or late counts as late, a repeat as a duplicate.
    #[inline]
    pub(crate) fn account(
        &mut self,
        head: &[u8],
        whole: bool,
        seen: &mut [u64],
        now: u64,
    ) -> Option<OnTime> {
        let a = &mut self.answers;
        let Some((cookie, seq, due)) = parse(head) else {
            a.late += 1;
            return None;
        };
        if cookie != self.cookie || seq >= seen.len() as u64 * 64 || !whole {
            // An echo of an earlier trial, counted lost there.
            a.late += 1;
            return None;
        }
        let (word, bit) = ((seq / 64) as usize, 1u64 << (seq % 64));
        if seen[word] & bit != 0 {
            a.duplicates += 1;
            return None;
        }
        seen[word] |= bit;
        a.received += 1;
        let latency = now.saturating_sub(due);
        self.min_latency = self.min_latency.min(latency);
        let min = self.min_latency;
        if let Some(j) = self.cps.iter().position(|&c| now <= c.saturating_add(min)) {
            a.arrived_at[j] += 1;
        }
        if latency > self.grace_ns {
            a.late += 1;
            return None;
        }
        Some(OnTime { latency, due })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::dgram::{stamp, HEADER};

    fn reply(cookie: u32, seq: u64, due: u64) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        stamp(&mut b, cookie, seq, due);
        b
    }

    #[test]
    fn each_reply_is_counted_once_by_sequence_number_and_late_past_the_grace() {
        // 1 s schedule, 100 ms grace, 128 requests of storage.
        let mut l = Ledger::new(7, 100_000_000, 1_000_000_000);
        let mut seen = [0u64; 2];
        let on = l.account(&reply(7, 3, 1_000), true, &mut seen, 51_000);
        assert_eq!(
            on,
            Some(OnTime {
                latency: 50_000,
                due: 1_000
            })
        );
        // The same request again, another trial's, beyond the storage, cut short, garbage.
        assert_eq!(
            l.account(&reply(7, 3, 1_000), true, &mut seen, 60_000),
            None
        );
        assert_eq!(
            l.account(&reply(8, 4, 1_000), true, &mut seen, 60_000),
            None
        );
        assert_eq!(l.account(&reply(7, 128, 0), true, &mut seen, 60_000), None);
        assert_eq!(l.account(&reply(7, 5, 0), false, &mut seen, 60_000), None);
        assert_eq!(l.account(&[1, 2, 3], true, &mut seen, 60_000), None);
        // Answered, but 200 ms after it was due: late, still counted as received.
        assert_eq!(
            l.account(&reply(7, 6, 0), true, &mut seen, 200_000_000),
            None
        );
        let a = l.answers;
        assert_eq!((a.received, a.duplicates, a.late), (2, 1, 5));
        // Both answers arrived before the first checkpoint (9/16 s) plus the least latency.
        assert_eq!(a.arrived_at, [2, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(seen[0], (1 << 3) | (1 << 6));
    }

    #[test]
    fn an_answer_counts_at_the_first_checkpoint_it_arrived_by() {
        let mut l = Ledger::new(1, u64::MAX, 16_000);
        let mut seen = [0u64; 1];
        // Checkpoints at 9k, 10k … 16k ns; the least latency (100 ns) shifts them.
        for (seq, now) in [(0, 9_050), (1, 9_150), (2, 15_999), (3, 40_000)] {
            l.account(&reply(1, seq, now - 100), true, &mut seen, now);
        }
        assert_eq!(l.answers.arrived_at, [1, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(l.answers.received, 4);
    }
}
