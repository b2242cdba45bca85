//! Rate (the open loop) over `--flows`: every flow sends on a schedule of its own at the
//! offered load ÷ the flows — constant arrivals staggered so the flows together are evenly
//! spaced, Poisson arrivals each from its own seed — and a data thread serves its flows in
//! epoll: it waits for the earliest request due (in epoll_pwait2 until 50 µs before it,
//! looking without waiting nearer), sends every request due without blocking (a
//! request cut short resumes when its socket has room), and reads replies as they come,
//! charging each its latency from its request's intended send time. The server echoes each
//! request's stamp (`loops::rr_server` with `echo`).

use super::epoll::{IN, OUT};
use super::loops::pull;
use super::pool::{Job, LoopEnd, Shared, Worker};
use crate::pattern::dgram::{parse, stamp};
use crate::pattern::rate::{checkpoint, CHECKPOINTS};
use crate::pattern::yield_cpu;
use netsweep_model::load::{Arrivals, Schedule};
use netsweep_model::stats::LatencyHistogram;
use std::io;
use std::time::{Duration, Instant};

/// Bytes of a request's stamp (cookie, sequence number, intended send time).
pub(crate) const STAMP: usize = 20;

/// Nearer than this to the next request the thread looks for replies without waiting (a
/// wait wakes a few microseconds late even with the timer slack at 1 ns).
const SPIN_NS: u64 = 50_000;

/// Longest wait while every flow is mid-send (then replies or room end it sooner).
const IDLE_NS: u64 = 10_000_000;

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
    /// A request is partly sent: its sequence number, intended time and bytes out.
    sending: bool,
    stamp: (u64, u64),
    off: usize,
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
    flows: Vec<FlowSchedule>,
    /// A bit per request each flow may send, `words` words per flow.
    seen: Vec<u64>,
    words: usize,
    cps: [u64; CHECKPOINTS],
    due_before: [u64; CHECKPOINTS],
    min_latency: u64,
    cookie: u32,
    grace_ns: u64,
    duration_ns: u64,
    r: RateReport,
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

#[inline]
fn since(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

/// Sends what is left of flow `i`'s request without blocking; once it is all out, counts
/// it. A send cut short waits for EPOLLOUT as well as replies.
fn push(w: &mut Worker, i: usize, size: usize) -> io::Result<()> {
    let cookie = w.rate.cookie;
    let f = &mut w.rate.flows[i];
    // The send buffer is shared by the thread's flows: stamp it with this flow's request.
    stamp(&mut w.tx[..size], cookie, f.stamp.0, f.stamp.1);
    let st = &mut w.state[i];
    while f.off < size {
        match w.eps[i].send(&w.tx[f.off..size]) {
            Ok(m) => {
                w.send_calls += 1;
                w.counts[i].bytes_sent += m as u64;
                f.off += m;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if !st.want_out {
                    w.epoll.modify(st.fd, i, IN | OUT)?;
                    st.want_out = true;
                }
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    f.sending = false;
    let due = f.stamp.1;
    w.counts[i].messages_sent += 1;
    let r = &mut w.rate;
    r.r.sent += 1;
    if let Some(j) = r.cps.iter().position(|&c| due < c) {
        r.due_before[j] += 1;
    }
    if st.want_out {
        w.epoll.modify(st.fd, i, IN)?;
        st.want_out = false;
    }
    Ok(())
}

/// Starts flow `i`'s next request (due at `f.next`) at `now`.
fn request(w: &mut Worker, i: usize, size: usize, now: u64) -> io::Result<()> {
    let cap = w.rate.words as u64 * 64;
    let f = &mut w.rate.flows[i];
    if f.seq >= cap {
        (f.done, w.rate.r.truncated) = (true, true);
        return Ok(());
    }
    if let Some(h) = w.rate.r.lateness.as_mut() {
        h.record(now.saturating_sub(f.next));
    }
    (f.stamp, f.off, f.sending) = ((f.seq, f.next), 0, true);
    f.seq += 1;
    f.next = f.sched.next_due();
    f.done = f.next >= w.rate.duration_ns;
    push(w, i, size)
}

/// Accounts flow `i`'s complete reply (its stamp kept by `pull`) at `now`.
fn reply(w: &mut Worker, i: usize, size: usize, now: u64) {
    w.rate
        .account(i, &w.state[i].hdr, size, now, w.hist.as_mut());
}

impl RateState {
    /// Accounts a complete reply of `size` bytes on the thread's flow `i` (one it was readied
    /// for), whose first bytes (the peer's) are `hdr`, at `now`: latency from its stamp's
    /// intended send time into `hist`, exact by sequence number.
    pub(crate) fn account(
        &mut self,
        i: usize,
        hdr: &[u8; STAMP],
        size: usize,
        now: u64,
        hist: Option<&mut LatencyHistogram>,
    ) {
        let r = self;
        let Some((cookie, seq, due)) = parse(hdr) else {
            r.r.late += 1;
            return;
        };
        if cookie != r.cookie || seq >= r.words as u64 * 64 || size < STAMP {
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

/// A ready flow: resumes its request if one is cut short, then reads its replies.
fn ready(w: &mut Worker, i: usize, size: usize, epoch: Instant) -> io::Result<()> {
    if w.rate.flows[i].sending {
        push(w, i, size)?;
    }
    for _ in 0..BURST {
        if !pull(w, i, size)? {
            break;
        }
        reply(w, i, size, since(epoch));
    }
    Ok(())
}

/// Rate, client: every flow sends on its schedule for the trial's duration while the replies
/// are read; then the thread waits for every reply (a stream loses none) up to the idle
/// limit without progress.
pub(super) fn client_loop(w: &mut Worker, job: &Job, sh: &Shared) -> io::Result<LoopEnd> {
    let size = job.size;
    // Waits end on time: the default timer slack is 50 µs.
    // SAFETY: prctl with an integer argument changes only this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let epoch = Instant::now();
    let n = w.eps.len();
    // When only requests cut short are left: the last progress (sent + answered), and when.
    let mut stuck = (0u64, Instant::now());
    loop {
        let mut next = u64::MAX;
        let mut busy = false;
        for f in &w.rate.flows {
            busy |= !f.done || f.sending;
            if !f.done && !f.sending {
                next = next.min(f.next);
            }
        }
        if !busy || sh.aborted() {
            break;
        }
        if next == u64::MAX {
            let moved = w.rate.r.sent + w.rate.r.received;
            if moved != stuck.0 {
                stuck = (moved, Instant::now());
            } else if stuck.1.elapsed() > job.idle {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "a flow's socket stayed full: the server stopped reading",
                ));
            }
        }
        let left = next.saturating_sub(since(epoch));
        let wait = left.saturating_sub(SPIN_NS).min(IDLE_NS);
        let k = w.epoll.wait_ns(wait)?;
        if k == 0 && wait == 0 {
            yield_cpu();
        }
        for e in 0..k {
            let i = w.epoll.ready(e);
            ready(w, i, size, epoch)?;
        }
        let now = since(epoch);
        for i in 0..n {
            let f = &w.rate.flows[i];
            if !f.done && !f.sending && f.next <= now {
                request(w, i, size, now)?;
            }
        }
    }
    let mut progress = (w.rate.r.received, Instant::now());
    while w.rate.r.received < w.rate.r.sent && !sh.aborted() {
        let k = w.epoll.wait(1)?;
        for e in 0..k {
            let i = w.epoll.ready(e);
            ready(w, i, size, epoch)?;
        }
        if w.rate.r.received > progress.0 {
            progress = (w.rate.r.received, Instant::now());
        } else if progress.1.elapsed() > job.idle {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "replies missing on a flow",
            ));
        }
    }
    Ok(LoopEnd {
        end: Instant::now(),
        last_recv: None,
        timed_out: false,
    })
}
