//! The rate pattern's timed loop, one thread per trial: the sender (requests on the
//! schedule, each stamped with its sequence number and intended send time, its lateness
//! recorded) reads the replies while it waits and while its socket has no room, and
//! [`Replies`] accounts them (latency from the intended send time, exact by sequence number,
//! the timeline's buckets, with `--one-way` each direction's delay from the stamps after the
//! header); the server echoes with pingpong's loop. Everything they write was sized before
//! the trial: nothing here allocates, logs or locks.

use super::ledger::{checkpoint, Answers, Ledger, CHECKPOINTS};
use crate::pattern::dgram::stamp;
use crate::pattern::oneway::{self, OneWayTally, WallClock};
use crate::pattern::{count_send_error, yield_cpu};
use netsweep_endpoint::{is_timeout, Endpoint};
use netsweep_model::load::{CoarseHistogram, Schedule};
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::SideCounters;
use netsweep_proto::stamps::RATE_OFFSET;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Below this much time to the next send the sender looks for replies without waiting,
/// yielding the CPU between looks, instead of sleeping in ppoll (a sleep wakes tens of
/// microseconds late on a VM even with the timer slack at 1 ns).
const SPIN_NS: u64 = 100_000;

/// How long a sender whose socket has no room waits for it (or a reply) before trying again.
const FULL_WAIT_NS: u64 = 100_000;

/// One interval's receiver figures, by the intended send time of its requests (answered,
/// latency) and by arrival (arrived).
#[derive(Debug, Clone, Default)]
pub(crate) struct Bucket {
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

/// The replies' side of the sender's thread: it reads them from `fd` while it waits.
pub(super) struct Reading<'r, 'a> {
    pub replies: &'r mut Replies<'a>,
    pub rx: &'r mut [u8],
    pub fd: RawFd,
}

/// The events of `fd` among `want`, waiting at most `timeout_ns` (0: a look, no wait).
fn poll_fd(fd: RawFd, want: libc::c_short, timeout_ns: u64) -> io::Result<libc::c_short> {
    let mut p = libc::pollfd {
        fd,
        events: want,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd and a valid timespec for the call's duration; no signal mask.
    let n = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    if n >= 0 {
        return Ok(p.revents);
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::Interrupted {
        Ok(0)
    } else {
        Err(e)
    }
}

/// What a readable socket reports (an error or hang-up is read to be reported).
const READABLE: libc::c_short = libc::POLLIN | libc::POLLERR | libc::POLLHUP;

/// Waits until `due` ns after `epoch` reading replies meanwhile: in ppoll while far from
/// it, looking without waiting the last stretch, and once more when due, so a sender
/// behind its schedule still reads a reply per request and keeps up with them.
fn wait_reading(
    ep: &mut dyn Endpoint,
    r: &mut Reading<'_, '_>,
    epoch: Instant,
    due: u64,
) -> io::Result<()> {
    loop {
        let left = due.saturating_sub(since(epoch));
        let wait = left.saturating_sub(SPIN_NS);
        let ev = poll_fd(r.fd, libc::POLLIN, wait)?;
        if ev & READABLE != 0 {
            r.replies.read(ep, r.rx)?;
        } else if wait == 0 {
            yield_cpu();
        }
        if left == 0 {
            return Ok(());
        }
    }
}

/// Sends one request without waiting for room in the socket (`MSG_DONTWAIT`): while it has
/// none — a datagram socket's queue, or a stream's window with part of the request out —
/// reads replies and tries again, up to the timeout without progress (a peer that stops
/// reading ends the trial instead of blocking it). Returns the calls made.
fn send_request(
    ep: &mut dyn Endpoint,
    r: &mut Reading<'_, '_>,
    msg: &[u8],
    epoch: Instant,
) -> io::Result<u64> {
    let mut calls = 0;
    let mut off = 0;
    let mut stuck_since = None::<u64>;
    loop {
        match ep.send_nowait(&msg[off..]) {
            Ok(n) => {
                calls += 1;
                off += n;
                if off >= msg.len() {
                    return Ok(calls);
                }
                stuck_since = None;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => calls += 1,
            Err(e) => return Err(e),
        }
        let now = since(epoch);
        if now - *stuck_since.get_or_insert(now) > r.replies.plan.timeout_ns {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the data socket stayed full: the server stopped reading",
            ));
        }
        if poll_fd(r.fd, libc::POLLIN | libc::POLLOUT, FULL_WAIT_NS)? & READABLE != 0 {
            r.replies.read(ep, r.rx)?;
        }
    }
}

/// The sender's results besides its counters.
#[derive(Debug, Default, Clone)]
pub(super) struct Sent {
    pub counters: SideCounters,
    /// Requests the local stack refused (datagrams): not sent.
    pub refused: u64,
    /// The schedule had more requests than the trial's storage (`cap`): the rest were not sent.
    pub truncated: bool,
    /// The trial's deadline came with requests still owed by the schedule: they were not sent.
    pub cut: bool,
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
    /// `--one-way` (requests with room for the stamps): each carries its send time on this
    /// wall clock.
    pub wall: Option<WallClock>,
}

/// Sends requests on `sched` from `epoch` until `duration_ns`: each is stamped with its
/// sequence number and intended send time, sent when due (or at once when the sender is
/// behind: the schedule is never stretched), and its lateness recorded; it reads the
/// replies meanwhile (`reading`).
pub(super) fn sender(
    ep: &mut dyn Endpoint,
    tx: &mut [u8],
    plan: &SendPlan,
    sched: &mut Schedule,
    lateness: &mut LatencyHistogram,
    tl: &mut Timeline<'_>,
    mut reading: Reading<'_, '_>,
) -> io::Result<Sent> {
    let datagram = ep.is_datagram();
    let mut s = Sent::default();
    let mut seq = 0u64;
    let nb = tl.sent.len();
    let mut next_checkpoint = 0usize;
    let cps: [u64; CHECKPOINTS] = std::array::from_fn(|j| checkpoint(plan.duration_ns, j));
    let start = Instant::now();
    let mut owed_from = None::<u64>;
    // When the last request went out (ns from the epoch): the deadline is judged on it, so
    // the loop reads the clock once per request, as it did before the deadline existed.
    let mut sent_at = 0u64;
    loop {
        let due = sched.next_due();
        while next_checkpoint < CHECKPOINTS && due >= cps[next_checkpoint] {
            s.due_by[next_checkpoint] = s.counters.messages_sent;
            next_checkpoint += 1;
        }
        if due >= plan.duration_ns {
            break;
        }
        if sent_at >= super::deadline_ns(plan.duration_ns) || crate::stop::requested() {
            // The trial's deadline, whatever the schedule still owes (a rate the path cannot
            // carry must not stretch the trial): the rest is due but not sent.
            owed_from = Some(due);
            break;
        }
        if seq >= plan.cap {
            s.truncated = true;
            break;
        }
        wait_reading(ep, &mut reading, plan.epoch, due)?;
        sent_at = since(plan.epoch);
        lateness.record(sent_at - due);
        stamp(&mut tx[..plan.size], plan.cookie, seq, due);
        if let Some(w) = &plan.wall {
            // The send's time, from the clock read that judged its lateness.
            let at = w.at(plan.epoch + Duration::from_nanos(sent_at));
            oneway::stamp_request(&mut tx[..plan.size], RATE_OFFSET, at);
        }
        seq += 1;
        match send_request(ep, &mut reading, &tx[..plan.size], plan.epoch) {
            Ok(calls) => s.counters.send_calls += calls,
            Err(e) if datagram && count_send_error(&mut s.counters.send_errors, &e) => {
                s.counters.send_calls += 1;
                s.refused += 1;
                continue;
            }
            Err(e) => return Err(e),
        }
        s.counters.bytes_sent += plan.size as u64;
        s.counters.messages_sent += 1;
        tl.sent[bucket(due, tl.interval_ns, nb)] += 1;
    }
    s.counters.active_ns = start.elapsed().as_nanos() as u64;
    let gap = sched.mean_gap_ns().max(1e-9);
    for (d, &cp) in s.due_by[next_checkpoint..]
        .iter_mut()
        .zip(&cps[next_checkpoint..])
    {
        // Requests the deadline cut off were due all the same: the delivered rate is a
        // fraction of what the schedule offered, not of what the sender managed to send.
        let owed = owed_from.map_or(0, |from| {
            ((cp.saturating_sub(from)) as f64 / gap).ceil() as u64
        });
        *d = s.counters.messages_sent + owed;
    }
    s.cut = owed_from.is_some();
    Ok(s)
}

/// The receiver's results besides its counters.
#[derive(Debug, Default, Clone)]
pub(crate) struct Received {
    pub counters: SideCounters,
    /// The replies' accounting (`ledger.rs`).
    pub answers: Answers,
    /// `--one-way`: the delays of the replies on time.
    pub one_way: OneWayTally,
}

/// What a receiver trial runs with.
pub(crate) struct RecvPlan {
    pub size: usize,
    pub cookie: u32,
    pub epoch: Instant,
    /// A reply later than this after its intended send time is late; a datagram receiver
    /// stops this long after the sender finished.
    pub grace_ns: u64,
    /// A stream receiver gives up on missing replies this long after the grace period, and
    /// the sender on a socket that takes no request for this long.
    pub timeout_ns: u64,
    pub interval_ns: u64,
    /// The schedule's span (the trial's duration), ns.
    pub window_ns: u64,
    /// `--one-way`: the wall clock a reply's arrival is read on (the sender's).
    pub wall: Option<WallClock>,
}

/// The receiving half of a trial, one reply at a time: latency from the intended send
/// time, exact accounting by sequence number, the timeline's buckets. `seen` has a bit per
/// request the trial may carry; `buckets` one entry per interval.
pub(crate) struct Replies<'a> {
    plan: &'a RecvPlan,
    hist: &'a mut LatencyHistogram,
    seen: &'a mut [u64],
    buckets: &'a mut [Bucket],
    r: Received,
    ledger: Ledger,
    datagram: bool,
    /// Bytes of the current reply read so far (streams).
    off: usize,
    /// When the wait for missing replies ends (set once the sender is done).
    deadline: Option<u64>,
    start: Instant,
}

impl<'a> Replies<'a> {
    pub(crate) fn new(
        plan: &'a RecvPlan,
        datagram: bool,
        hist: &'a mut LatencyHistogram,
        seen: &'a mut [u64],
        buckets: &'a mut [Bucket],
    ) -> Self {
        Self {
            plan,
            hist,
            seen,
            buckets,
            r: Received::default(),
            ledger: Ledger::new(plan.cookie, plan.grace_ns, plan.window_ns),
            datagram,
            off: 0,
            deadline: None,
            start: Instant::now(),
        }
    }

    /// Once the sender is done after `sent` requests: `true` when every one is answered or
    /// (datagrams) the grace period after the last send ran out; a stream waits for every
    /// reply up to the timeout beyond the grace period, then fails.
    fn settled(&mut self, sent: u64) -> io::Result<bool> {
        if self.ledger.answers.received >= sent {
            return Ok(true);
        }
        let now = since(self.plan.epoch);
        let d = *self.deadline.get_or_insert(now + self.plan.grace_ns);
        if now < d {
            return Ok(false);
        }
        if self.datagram {
            return Ok(true);
        }
        if now >= d + self.plan.timeout_ns {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "replies missing on the data connection",
            ));
        }
        Ok(false)
    }

    /// One receive call and what it completed: `false` when it timed out or was interrupted.
    fn read(&mut self, ep: &mut dyn Endpoint, rx: &mut [u8]) -> io::Result<bool> {
        let size = self.plan.size;
        let got = if self.datagram {
            ep.recv(rx)
        } else {
            ep.recv(&mut rx[self.off..size])
        };
        let n = match got {
            Ok(0) if !self.datagram => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the data connection",
                ))
            }
            Ok(n) => n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => return Ok(false),
            Err(e) => return Err(e),
        };
        self.r.counters.recv_calls += 1;
        self.r.counters.bytes_received += n as u64;
        let len = if self.datagram {
            n
        } else {
            self.off += n;
            if self.off < size {
                return Ok(true);
            }
            self.off = 0;
            size
        };
        self.reply(&rx[..len]);
        Ok(true)
    }

    /// Accounts one whole reply, arrived now.
    #[inline]
    pub(crate) fn reply(&mut self, msg: &[u8]) {
        self.reply_at(msg, since(self.plan.epoch));
    }

    /// Accounts one whole reply that arrived `now` ns after the epoch (the tests give the
    /// time: what lands where must not depend on how the test host schedules threads).
    #[inline]
    fn reply_at(&mut self, msg: &[u8], now: u64) {
        self.r.counters.messages_received += 1;
        let whole = msg.len() == self.plan.size;
        let Some(on) = self.ledger.account(msg, whole, self.seen, now) else {
            return;
        };
        self.hist.record(on.latency);
        if let Some(w) = &self.plan.wall {
            // A stream's reply is timed when its last bytes are read (a small reply comes
            // in one receive; pingpong times the first).
            let at = w.at(self.plan.epoch + Duration::from_nanos(now));
            self.r.one_way.record(msg, RATE_OFFSET, at);
        }
        let (interval, nb) = (self.plan.interval_ns, self.buckets.len());
        let b = &mut self.buckets[bucket(on.due, interval, nb)];
        b.answered += 1;
        b.hist.record(on.latency);
        self.buckets[bucket(now, interval, nb)].arrived += 1;
    }

    /// After the sender's `sent` requests: receives until [`Replies::settled`] (the
    /// endpoint's receive timeout must be short: it is when the deadline is checked).
    pub(super) fn drain(
        &mut self,
        ep: &mut dyn Endpoint,
        rx: &mut [u8],
        sent: u64,
    ) -> io::Result<()> {
        while !self.settled(sent)? {
            self.read(ep, rx)?;
        }
        Ok(())
    }

    /// The trial's receiving figures.
    pub(crate) fn finish(mut self) -> Received {
        self.r.counters.active_ns = self.start.elapsed().as_nanos() as u64;
        self.r.answers = self.ledger.answers;
        self.r
    }
}

#[cfg(test)]
#[path = "loops_tests.rs"]
mod tests;
