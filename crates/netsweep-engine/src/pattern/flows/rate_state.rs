//! The open loop's per-thread ledger over `--flows`: one trial's schedules as every thread
//! gets them, each flow's schedule and the request it is sending, the replies' exact
//! accounting by sequence number, and what the thread's trial adds up to. The loop that sends
//! and reads on it is `rate.rs`.

use crate::pattern::dgram::{parse, HEADER};
use crate::pattern::rate::{checkpoint, CHECKPOINTS};
use netsweep_model::load::{Arrivals, Schedule};
use netsweep_model::stats::LatencyHistogram;
use std::time::Duration;

/// One trial's schedules, as every thread gets them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RateJob {
    /// Requests per second of each flow.
    pub(crate) per_flow: f64,
    pub(crate) arrivals: Arrivals,
    /// The trial's seed (each flow's is derived from it and the flow's number).
    pub(crate) seed: u64,
    /// The trial's cookie, stamped in every request.
    pub(crate) cookie: u32,
    /// All the session's flows (for the stagger).
    pub(crate) flows: usize,
    /// A reply later than this after its intended send time is late.
    pub(crate) grace_ns: u64,
}

/// One flow's schedule and the request it is sending.
#[derive(Debug, Clone)]
pub(super) struct FlowSchedule {
    pub(super) sched: Schedule,
    /// The next request's intended send time, ns after the loop's start.
    pub(super) next: u64,
    pub(super) seq: u64,
    /// Schedule over (or its storage full).
    pub(super) done: bool,
    /// A request is partly sent: its sequence number, intended time and bytes out.
    pub(super) sending: bool,
    pub(super) stamp: (u64, u64),
    pub(super) off: usize,
}

/// What one thread's trial adds up to.
#[derive(Debug, Clone, Default)]
pub(crate) struct RateReport {
    pub(crate) sent: u64,
    pub(crate) received: u64,
    pub(crate) late: u64,
    pub(crate) duplicates: u64,
    pub(crate) truncated: bool,
    /// Requests sent that were due before each checkpoint (cumulative).
    pub(crate) due_by: [u64; CHECKPOINTS],
    /// Answers first counted at each checkpoint (see `rate::loops::Received`).
    pub(crate) arrived_at: [u64; CHECKPOINTS],
    /// Allocated by the first trial of a rate client (a histogram is ~270 KiB, written
    /// whole when made: no other thread pays for one).
    pub(crate) lateness: Option<LatencyHistogram>,
}

/// A thread's schedules and the replies' accounting, sized before each trial.
#[derive(Debug, Default)]
pub(crate) struct RateState {
    pub(super) flows: Vec<FlowSchedule>,
    /// A bit per request each flow may send, `words` words per flow.
    pub(super) seen: Vec<u64>,
    pub(super) words: usize,
    pub(super) cps: [u64; CHECKPOINTS],
    pub(super) due_before: [u64; CHECKPOINTS],
    pub(super) min_latency: u64,
    pub(super) cookie: u32,
    pub(super) grace_ns: u64,
    pub(super) duration_ns: u64,
    pub(super) r: RateReport,
}

impl RateState {
    /// Readies a trial of `duration` for this thread's flows, whose numbers in the session
    /// are `numbers` (outside the timed loop: it allocates).
    pub(crate) fn ready(
        &mut self,
        job: &RateJob,
        duration: Duration,
        numbers: impl Iterator<Item = usize>,
    ) {
        let duration_ns = duration.as_nanos() as u64;
        let per_flow = job.per_flow.max(1e-9);
        // Poisson counts beyond 1.5× the mean plus 64 are vanishingly rare; counted if seen.
        let cap = (per_flow * duration_ns as f64 / 1e9 * 1.5 + 64.0).ceil() as u64;
        self.words = cap.div_ceil(64) as usize;
        let gap = 1e9 / (per_flow * job.flows.max(1) as f64);
        self.flows.clear();
        for g in numbers {
            let mut sched = Schedule::new(
                per_flow,
                job.arrivals,
                Schedule::trial_seed(job.seed, g as u64),
            );
            if job.arrivals == Arrivals::Constant {
                sched = sched.starting_at(g as f64 * gap);
            }
            let next = sched.next_due();
            self.flows.push(FlowSchedule {
                sched,
                next,
                seq: 0,
                done: next >= duration_ns,
                sending: false,
                stamp: (0, 0),
                off: 0,
            });
        }
        self.seen.clear();
        self.seen.resize(self.words * self.flows.len(), 0);
        self.cps = std::array::from_fn(|j| checkpoint(duration_ns, j));
        self.due_before = [0; CHECKPOINTS];
        self.min_latency = u64::MAX;
        self.cookie = job.cookie;
        self.grace_ns = job.grace_ns;
        self.duration_ns = duration_ns;
        let mut lateness = self.r.lateness.take().unwrap_or_default();
        lateness.reset();
        self.r = RateReport {
            lateness: Some(lateness),
            ..Default::default()
        };
    }

    /// The trial's figures (after the loop).
    pub(crate) fn report(&self) -> RateReport {
        let mut r = self.r.clone();
        let mut sum = 0;
        for (j, d) in self.due_before.iter().enumerate() {
            sum += d;
            r.due_by[j] = sum;
        }
        r
    }
}

impl RateState {
    /// Accounts a complete reply of `size` bytes on the thread's flow `i` (one it was readied
    /// for), whose first bytes (the peer's) are `hdr`, at `now`: latency from its stamp's
    /// intended send time into `hist`, exact by sequence number.
    pub(crate) fn account(
        &mut self,
        i: usize,
        hdr: &[u8; HEADER],
        size: usize,
        now: u64,
        hist: Option<&mut LatencyHistogram>,
    ) {
        let r = self;
        let Some((cookie, seq, due)) = parse(hdr) else {
            r.r.late += 1;
            return;
        };
        if cookie != r.cookie || seq >= r.words as u64 * 64 || size < HEADER {
            // An echo of an earlier trial, counted lost there.
            r.r.late += 1;
            return;
        }
        let (word, bit) = (i * r.words + (seq / 64) as usize, 1u64 << (seq % 64));
        if r.seen[word] & bit != 0 {
            r.r.duplicates += 1;
            return;
        }
        r.seen[word] |= bit;
        r.r.received += 1;
        let latency = now.saturating_sub(due);
        r.min_latency = r.min_latency.min(latency);
        let min = r.min_latency;
        if let Some(j) = r.cps.iter().position(|&c| now <= c.saturating_add(min)) {
            r.r.arrived_at[j] += 1;
        }
        if latency > r.grace_ns {
            r.r.late += 1;
            return;
        }
        if let Some(h) = hist {
            h.record(latency);
        }
    }
}
