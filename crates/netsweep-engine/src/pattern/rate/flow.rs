//! Rate (the open loop) over `--flows`: each flow's state machine for the flows driver.
//! Every flow sends on a schedule of its own at the offered load ÷ the flows — constant
//! arrivals staggered so the flows together are evenly spaced, Poisson arrivals each from its
//! own seed. A thread waits for the earliest request due (in epoll_pwait2 until 50 µs before
//! it, looking without waiting nearer), sends every request due without blocking (a request
//! cut short resumes when its socket has room), and reads replies as they come, each
//! accounted by the one ledger (`ledger.rs`) with its latency from its request's intended
//! send time. Then it waits for every reply (a stream loses none). The server's side is the
//! echo with stamps (`echo/flow.rs`).

use super::ledger::{checkpoint, Ledger, CHECKPOINTS};
use crate::pattern::dgram::{stamp, HEADER};
use crate::pattern::flows::machine::{Machine, Next, Share, Target};
use crate::pattern::flows::worker::{Flows, Job};
use netsweep_model::load::{Arrivals, Schedule};
use netsweep_model::stats::LatencyHistogram;
use std::io;
use std::time::{Duration, Instant};

/// Nearer than this to the next request the thread looks for replies without waiting (a
/// wait wakes a few microseconds late even with the timer slack at 1 ns).
const SPIN_NS: u64 = 50_000;

/// Longest wait while every flow is mid-send (then replies or room end it sooner).
const IDLE_NS: u64 = 10_000_000;

/// How long a wait for the last replies blocks.
const DRAIN_NS: u64 = 1_000_000;

/// Most replies read from one ready flow before the thread turns to the next.
const BURST: usize = 16;

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
struct FlowSchedule {
    sched: Schedule,
    /// The next request's intended send time, ns after the loop's start.
    next: u64,
    seq: u64,
    /// Schedule over (or its storage full).
    done: bool,
    /// A request is partly sent: its sequence number and intended time.
    sending: bool,
    stamp: (u64, u64),
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
    /// Answers first counted at each checkpoint (`ledger::Answers`).
    pub(crate) arrived_at: [u64; CHECKPOINTS],
    pub(crate) lateness: Option<LatencyHistogram>,
}

/// A thread's schedules and the replies' ledger, sized before each trial.
#[derive(Debug, Default)]
pub(crate) struct Schedules {
    flows: Vec<FlowSchedule>,
    /// A bit per request each flow may send, `words` words per flow.
    seen: Vec<u64>,
    words: usize,
    cps: [u64; CHECKPOINTS],
    due_before: [u64; CHECKPOINTS],
    duration_ns: u64,
    ledger: Ledger,
    sent: u64,
    truncated: bool,
    /// Allocated by the first trial of a rate client (a histogram is ~270 KiB, written
    /// whole when made: no other thread pays for one).
    lateness: Option<LatencyHistogram>,
}

impl Schedules {
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
        let most = (super::MAX_TRIAL_REQUESTS / job.flows.max(1) as u64).max(64);
        let cap = (per_flow * duration_ns as f64 / 1e9 * 1.5 + 64.0)
            .min(most as f64)
            .ceil() as u64;
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
            });
        }
        self.seen.clear();
        self.seen.resize(self.words * self.flows.len(), 0);
        self.cps = std::array::from_fn(|j| checkpoint(duration_ns, j));
        self.due_before = [0; CHECKPOINTS];
        self.duration_ns = duration_ns;
        self.ledger = Ledger::new(job.cookie, job.grace_ns, duration_ns);
        (self.sent, self.truncated) = (0, false);
        self.lateness
            .get_or_insert_with(LatencyHistogram::new)
            .reset();
    }

    /// Accounts a complete reply of `size` bytes on the thread's flow `i` (one it was
    /// readied for), whose first bytes (the peer's) are `hdr`, at `now`: its latency into
    /// `hist` when it is on time.
    #[inline]
    pub(crate) fn account(
        &mut self,
        i: usize,
        hdr: &[u8; HEADER],
        size: usize,
        now: u64,
        hist: Option<&mut LatencyHistogram>,
    ) {
        let seen = &mut self.seen[i * self.words..(i + 1) * self.words];
        if let (Some(on), Some(h)) = (self.ledger.account(hdr, size >= HEADER, seen, now), hist) {
            h.record(on.latency);
        }
    }

    /// The trial's deadline, whatever the schedules still owe: a flow behind its schedule
    /// sends no more, and what it owed counts as due (by checkpoint) all the same, so the
    /// delivered rate stays a fraction of what was offered.
    fn cut_at_deadline(&mut self) {
        for f in self.flows.iter_mut().filter(|f| !f.done && !f.sending) {
            let gap = f.sched.mean_gap_ns().max(1e-9);
            let mut before = 0u64;
            for (j, &c) in self.cps.iter().enumerate() {
                let owed = (c.saturating_sub(f.next) as f64 / gap).ceil() as u64;
                self.due_before[j] += owed - before;
                before = owed;
            }
            f.done = true;
        }
    }

    /// The trial's figures (after the loop).
    pub(crate) fn report(&self) -> RateReport {
        let a = self.ledger.answers;
        let mut due_by = [0; CHECKPOINTS];
        let mut sum = 0;
        for (j, d) in self.due_before.iter().enumerate() {
            sum += d;
            due_by[j] = sum;
        }
        RateReport {
            sent: self.sent,
            received: a.received,
            late: a.late,
            duplicates: a.duplicates,
            truncated: self.truncated,
            due_by,
            arrived_at: a.arrived_at,
            lateness: self.lateness.clone(),
        }
    }
}

/// The client's side: the thread's flows on their schedules, their replies in the ledger.
#[derive(Debug, Default)]
pub(crate) struct Scheduling {
    s: Schedules,
    /// Latencies from the intended send time (made by the first trial).
    hist: Option<LatencyHistogram>,
    epoch: Option<Instant>,
    /// Every schedule is over: only replies are awaited.
    draining: bool,
    /// Every flow is mid-send or the schedules are over: the peer must read or answer.
    waiting: bool,
}

impl Scheduling {
    #[inline]
    fn since(&self) -> u64 {
        self.epoch.map_or(0, |e| e.elapsed().as_nanos() as u64)
    }

    /// Sends what is left of flow `i`'s request without blocking; once it is all out,
    /// counts it.
    #[inline]
    fn push(&mut self, t: &mut Flows, i: usize, size: usize) -> io::Result<()> {
        let f = &mut self.s.flows[i];
        // The send buffer is shared by the thread's flows: stamp it with this flow's request.
        stamp(
            &mut t.tx[..size],
            self.s.ledger.cookie(),
            f.stamp.0,
            f.stamp.1,
        );
        if !t.push(i, size, true)? {
            return Ok(());
        }
        f.sending = false;
        let due = f.stamp.1;
        self.s.sent += 1;
        if let Some(j) = self.s.cps.iter().position(|&c| due < c) {
            self.s.due_before[j] += 1;
        }
        Ok(())
    }

    /// Starts flow `i`'s next request (due at its `next`) at `now`.
    #[inline]
    fn request(&mut self, t: &mut Flows, i: usize, size: usize, now: u64) -> io::Result<()> {
        let cap = self.s.words as u64 * 64;
        let f = &mut self.s.flows[i];
        if f.seq >= cap {
            (f.done, self.s.truncated) = (true, true);
            return Ok(());
        }
        if let Some(h) = self.s.lateness.as_mut() {
            h.record(now.saturating_sub(f.next));
        }
        (f.stamp, f.sending) = ((f.seq, f.next), true);
        f.seq += 1;
        f.next = f.sched.next_due();
        f.done = f.next >= self.s.duration_ns;
        self.push(t, i, size)
    }
}

impl Machine for Scheduling {
    type Params = RateJob;
    type Out = RateReport;
    const SENDS: bool = true;
    const TARGET: Option<Target> = None;

    fn ready(&mut self, job: &Job<RateJob>, share: Share) {
        self.s.ready(&job.params, job.duration, share.numbers());
        self.hist.get_or_insert_with(LatencyHistogram::new).reset();
        (self.epoch, self.draining, self.waiting) = (None, false, false);
    }

    fn start(&mut self, _t: &mut Flows, _job: &Job<RateJob>, now: Instant) -> io::Result<()> {
        // Waits end on time: the default timer slack is 50 µs.
        // SAFETY: prctl with an integer argument changes only this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        self.epoch = Some(now);
        Ok(())
    }

    /// A ready flow: resumes its request if one is cut short, then reads its replies.
    #[inline]
    fn on_ready(&mut self, t: &mut Flows, i: usize, job: &Job<RateJob>) -> io::Result<()> {
        if self.s.flows[i].sending {
            self.push(t, i, job.size)?;
        }
        for _ in 0..BURST {
            if !t.pull(i, job.size)? {
                break;
            }
            let now = self.since();
            self.s
                .account(i, &t.state[i].hdr, job.size, now, self.hist.as_mut());
        }
        Ok(())
    }

    /// Sends every request due; then waits for the earliest one still to come, or — every
    /// schedule over — for the last replies.
    #[inline]
    fn next(&mut self, t: &mut Flows, job: &Job<RateJob>, now: Instant) -> io::Result<Next> {
        if !self.draining {
            // The driver's clock of this round: due requests go out stamped with it.
            let now = self
                .epoch
                .map_or(0, |e| now.saturating_duration_since(e).as_nanos() as u64);
            if now >= super::deadline_ns(self.s.duration_ns) || crate::stop::requested() {
                self.s.cut_at_deadline();
            }
            for i in 0..self.s.flows.len() {
                let f = &self.s.flows[i];
                if !f.done && !f.sending && f.next <= now {
                    self.request(t, i, job.size, now)?;
                }
            }
            let (mut next, mut busy) = (u64::MAX, false);
            for f in &self.s.flows {
                busy |= !f.done || f.sending;
                if !f.done && !f.sending {
                    next = next.min(f.next);
                }
            }
            if busy {
                self.waiting = next == u64::MAX;
                let left = next.saturating_sub(self.since());
                return Ok(Next::Wait(left.saturating_sub(SPIN_NS).min(IDLE_NS)));
            }
            self.draining = true;
        }
        self.waiting = true;
        Ok(if self.s.ledger.answers.received >= self.s.sent {
            Next::Done
        } else {
            Next::Wait(DRAIN_NS)
        })
    }

    fn progress(&self) -> u64 {
        self.s.sent + self.s.ledger.answers.received
    }

    fn waits_on_peer(&self) -> bool {
        self.waiting
    }

    fn stalled(&self) -> &'static str {
        if self.draining {
            "replies missing on a flow"
        } else {
            "a flow's socket stayed full: the server stopped reading"
        }
    }

    fn hist(&self) -> Option<&LatencyHistogram> {
        self.hist.as_ref()
    }

    fn out(&self) -> RateReport {
        self.s.report()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::echo::flow::Echo;
    use crate::pattern::flows::pool::Pool;
    use crate::pattern::flows::testing::{self, pairs};

    #[test]
    fn every_flow_sends_its_schedule_and_every_reply_is_in_the_ledger() {
        // Four flows on two threads a side, 2000 requests/s each for 150 ms, evenly
        // staggered (125 µs apart over all flows): 300 requests due on every flow.
        let (c, s, _) = pairs(4);
        let client = Pool::<Scheduling>::spawn(c, 2, None).unwrap();
        let server = Pool::<Echo<true>>::spawn(s, 2, None).unwrap();
        let params = RateJob {
            per_flow: 2000.0,
            arrivals: Arrivals::Constant,
            seed: 1,
            cookie: 9,
            flows: 4,
            grace_ns: 500_000_000,
        };
        let job = testing::job(64, params);
        let sent_by = |r: &[crate::pattern::flows::worker::Report<RateReport>]| {
            r.iter().map(|r| r.out.sent).sum::<u64>()
        };
        let (sent, got) = testing::trial(&client, &server, job, sent_by);
        assert_eq!(sent_by(&sent), 1200);
        for r in &sent {
            let o = &r.out;
            assert_eq!((o.received, o.late, o.duplicates), (o.sent, 0, 0), "{o:?}");
            assert!(!o.truncated);
            assert_eq!(o.due_by[CHECKPOINTS - 1], o.sent);
            // An answer counts by the checkpoint it arrived by; one later than the last
            // (a busy host's) counts in none.
            assert!(o.arrived_at.iter().sum::<u64>() <= o.sent, "{o:?}");
            assert_eq!(r.hist.as_ref().map(|h| h.count()), Some(o.sent));
            assert_eq!(o.lateness.as_ref().map(|h| h.count()), Some(o.sent));
            assert!(r.flows.iter().all(|f| f.messages_sent == 300));
        }
        let echoed: u64 = got
            .iter()
            .flat_map(|r| r.flows.iter())
            .map(|f| f.messages_sent)
            .sum();
        assert_eq!(echoed, 1200);
    }
}
