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
use super::worker::{Job, LoopEnd, Shared, Worker};
use crate::pattern::dgram::stamp;
use crate::pattern::yield_cpu;
use std::io;
use std::time::Instant;

/// Nearer than this to the next request the thread looks for replies without waiting (a
/// wait wakes a few microseconds late even with the timer slack at 1 ns).
const SPIN_NS: u64 = 50_000;

/// Longest wait while every flow is mid-send (then replies or room end it sooner).
const IDLE_NS: u64 = 10_000_000;

/// Most replies read from one ready flow before the thread turns to the next.
const BURST: usize = 16;

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
