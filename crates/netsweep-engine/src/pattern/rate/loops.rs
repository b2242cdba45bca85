//! The rate pattern's timed loops: the client's sender (requests on the schedule, each
//! stamped with its sequence number and intended send time, its lateness recorded), the
//! client's receiver (latency from the intended send time, exact accounting by sequence
//! number, the timeline's buckets); the server echoes with pingpong's loop. Everything they write was sized
//! before the trial: nothing here allocates, logs or locks.

use crate::pattern::count_send_error;
use crate::pattern::dgram::{parse, stamp};
use netsweep_endpoint::{is_timeout, send_message, Endpoint};
use netsweep_model::load::{CoarseHistogram, Schedule};
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::SideCounters;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Below this much time to the next send the sender spins instead of sleeping (a sleep
/// wakes tens of microseconds late).
const SPIN_NS: u64 = 100_000;

/// What the sender tells the receiver: it is done, after `sent` requests.
#[derive(Debug, Default)]
pub(super) struct Handoff {
    done: AtomicBool,
    sent: AtomicU64,
    /// The sender failed: the receiver stops at once.
    failed: AtomicBool,
}

impl Handoff {
    fn finish(&self, sent: u64) {
        self.sent.store(sent, Ordering::Relaxed);
        self.done.store(true, Ordering::Release);
    }

    /// Marks the sender's failure (the receiver stops).
    pub(super) fn fail(&self) {
        self.failed.store(true, Ordering::Release);
    }

    /// `Some(sent)` once the sender is done.
    #[inline]
    fn sent(&self) -> Option<u64> {
        self.done
            .load(Ordering::Acquire)
            .then(|| self.sent.load(Ordering::Relaxed))
    }
}

/// One interval's receiver figures, by the intended send time of its requests (answered,
/// latency) and by arrival (arrived).
#[derive(Debug, Clone, Default)]
pub(super) struct Bucket {
    pub answered: u64,
    pub arrived: u64,
    pub hist: CoarseHistogram,
}

/// Where a trial's samples go (sized before the trial).
pub(super) struct Timeline<'a> {
    /// Length of one interval, ns (`u64::MAX`: one bucket, no timeline).
    pub interval_ns: u64,
    /// Requests sent per interval (the sender's).
    pub sent: &'a mut [u64],
}

#[inline]
fn bucket(t_ns: u64, interval_ns: u64, n: usize) -> usize {
    ((t_ns / interval_ns) as usize).min(n - 1)
}

#[inline]
fn since(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

/// Waits until `due` ns after `epoch`: sleeps while far from it, spins the last stretch.
#[inline]
fn wait_until(epoch: Instant, due: u64) {
    loop {
        let now = since(epoch);
        if now >= due {
            return;
        }
        let left = due - now;
        if left > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(left - SPIN_NS));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Checkpoints of the delivered count: the ends of windows from 9/16 to 16/16 of a trial's
/// schedule.
pub(super) const CHECKPOINTS: usize = 8;

/// Checkpoint `j` of a schedule of `duration_ns`.
#[inline]
fn checkpoint(duration_ns: u64, j: usize) -> u64 {
    (duration_ns as u128 * (9 + j) as u128 / 16) as u64
}

/// The sender's results besides its counters.
#[derive(Debug, Default, Clone)]
pub(super) struct Sent {
    pub counters: SideCounters,
    /// Requests the local stack refused (datagrams): not sent.
    pub refused: u64,
    /// The schedule had more requests than the trial's storage (`cap`): the rest were not sent.
    pub truncated: bool,
    /// Requests sent that were due before each checkpoint.
    pub due_by: [u64; CHECKPOINTS],
}

/// What a sender trial runs with.
pub(super) struct SendPlan {
    pub size: usize,
    pub duration_ns: u64,
    /// Most requests one trial may carry (the receiver's storage).
    pub cap: u64,
    pub cookie: u32,
    pub epoch: Instant,
}

/// Sends requests on `sched` from `epoch` until `duration_ns`: each is stamped with its
/// sequence number and intended send time, sent when due (or at once when the sender is
/// behind: the schedule is never stretched), and its lateness recorded.
pub(super) fn sender(
    ep: &mut dyn Endpoint,
    tx: &mut [u8],
    plan: &SendPlan,
    sched: &mut Schedule,
    lateness: &mut LatencyHistogram,
    tl: &mut Timeline<'_>,
    handoff: &Handoff,
) -> io::Result<Sent> {
    let datagram = ep.is_datagram();
    let mut s = Sent::default();
    let mut seq = 0u64;
    let nb = tl.sent.len();
    let mut next_checkpoint = 0usize;
    let cps: [u64; CHECKPOINTS] = std::array::from_fn(|j| checkpoint(plan.duration_ns, j));
    let start = Instant::now();
    loop {
        let due = sched.next_due();
        while next_checkpoint < CHECKPOINTS && due >= cps[next_checkpoint] {
            s.due_by[next_checkpoint] = s.counters.messages_sent;
            next_checkpoint += 1;
        }
        if due >= plan.duration_ns {
            break;
        }
        if seq >= plan.cap {
            s.truncated = true;
            break;
        }
        wait_until(plan.epoch, due);
        lateness.record(since(plan.epoch) - due);
        stamp(&mut tx[..plan.size], plan.cookie, seq, due);
        seq += 1;
        match send_message(ep, &tx[..plan.size]) {
            Ok(calls) => s.counters.send_calls += calls,
            Err(e) if datagram && count_send_error(&mut s.counters.send_errors, &e) => {
                s.counters.send_calls += 1;
                s.refused += 1;
                continue;
            }
            Err(e) => {
                handoff.fail();
                return Err(e);
            }
        }
        s.counters.bytes_sent += plan.size as u64;
        s.counters.messages_sent += 1;
        tl.sent[bucket(due, tl.interval_ns, nb)] += 1;
    }
    s.counters.active_ns = start.elapsed().as_nanos() as u64;
    for d in &mut s.due_by[next_checkpoint..] {
        *d = s.counters.messages_sent;
    }
    handoff.finish(s.counters.messages_sent);
    Ok(s)
}

/// The receiver's results besides its counters.
#[derive(Debug, Default, Clone)]
pub(super) struct Received {
    pub counters: SideCounters,
    /// Distinct requests of this trial answered.
    pub received: u64,
    /// Answers after the grace period (not in the histogram) and echoes of earlier trials.
    pub late: u64,
    /// Answers of a request already answered.
    pub duplicates: u64,
    /// Answers that arrived by each checkpoint plus the smallest latency seen (answers first
    /// counted at checkpoint j are in `arrived_at[j]`; the count by j is the prefix sum): the
    /// delivered rate's counts (what the path carried by then, shifted by the unloaded
    /// latency; a backlog drained after the schedule is not counted).
    pub arrived_at: [u64; CHECKPOINTS],
}

/// What a receiver trial runs with.
pub(super) struct RecvPlan {
    pub size: usize,
    pub cookie: u32,
    pub epoch: Instant,
    /// A reply later than this after its intended send time is late; a datagram receiver
    /// stops this long after the sender finished.
    pub grace_ns: u64,
    /// A stream receiver gives up on missing replies this long after the grace period.
    pub timeout_ns: u64,
    pub interval_ns: u64,
    /// The schedule's span (the trial's duration), ns.
    pub window_ns: u64,
}

/// Receives the echoes of one trial until every sent request is answered or (datagrams)
/// the grace period after the last send ran out; a stream receiver waits for every reply
/// (those after the grace period count as late) up to the timeout. `seen` has a bit per
/// request the trial may carry; `buckets` one entry per interval. The endpoint's receive
/// timeout must be short (it is when the sender's progress is checked).
pub(super) fn receiver(
    ep: &mut dyn Endpoint,
    rx: &mut [u8],
    plan: &RecvPlan,
    hist: &mut LatencyHistogram,
    seen: &mut [u64],
    buckets: &mut [Bucket],
    handoff: &Handoff,
) -> io::Result<Received> {
    let datagram = ep.is_datagram();
    let size = plan.size;
    let cap = seen.len() as u64 * 64;
    let nb = buckets.len();
    let mut r = Received::default();
    let mut off = 0usize;
    let mut deadline: Option<u64> = None;
    let mut min_latency = u64::MAX;
    let cps: [u64; CHECKPOINTS] = std::array::from_fn(|j| checkpoint(plan.window_ns, j));
    let start = Instant::now();
    loop {
        if handoff.failed.load(Ordering::Acquire) {
            break;
        }
        if let Some(sent) = handoff.sent() {
            if r.received >= sent {
                break;
            }
            let now = since(plan.epoch);
            let d = *deadline.get_or_insert(now + plan.grace_ns);
            if now >= d && (datagram || now >= d + plan.timeout_ns) {
                if !datagram {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "replies missing on the data connection",
                    ));
                }
                break;
            }
        }
        let got = if datagram {
            ep.recv(rx)
        } else {
            ep.recv(&mut rx[off..size])
        };
        let n = match got {
            Ok(0) if !datagram => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the data connection",
                ))
            }
            Ok(n) => n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        r.counters.recv_calls += 1;
        r.counters.bytes_received += n as u64;
        let len = if datagram {
            n
        } else {
            off += n;
            if off < size {
                continue;
            }
            off = 0;
            size
        };
        r.counters.messages_received += 1;
        let now = since(plan.epoch);
        let Some((cookie, seq, due)) = parse(&rx[..len]) else {
            r.late += 1;
            continue;
        };
        if cookie != plan.cookie || seq >= cap || len != size {
            // An echo of an earlier trial, counted lost there.
            r.late += 1;
            continue;
        }
        let (w, bit) = ((seq / 64) as usize, 1u64 << (seq % 64));
        if seen[w] & bit != 0 {
            r.duplicates += 1;
            continue;
        }
        seen[w] |= bit;
        r.received += 1;
        let latency = now.saturating_sub(due);
        min_latency = min_latency.min(latency);
        if let Some(j) = cps
            .iter()
            .position(|&c| now <= c.saturating_add(min_latency))
        {
            r.arrived_at[j] += 1;
        }
        if latency > plan.grace_ns {
            r.late += 1;
            continue;
        }
        hist.record(latency);
        let b = &mut buckets[bucket(due, plan.interval_ns, nb)];
        b.answered += 1;
        b.hist.record(latency);
        buckets[bucket(now, plan.interval_ns, nb)].arrived += 1;
    }
    r.counters.active_ns = start.elapsed().as_nanos() as u64;
    Ok(r)
}
