//! The timed loops of a flows data thread, one per [`Role`](super::worker::Role): each waits
//! for its flows in epoll (level-triggered) and moves data on the ready ones without
//! blocking — or, on a stream thread with one flow, calls it directly and lets the call
//! block (with a timeout, so the loop still sees the clock and the flags). Nothing here
//! allocates, logs or locks; the other threads are read only through atomics, and only once
//! the client ended the trial.

use super::epoll::{IN, OUT};
use super::worker::{Job, LoopEnd, Shared, Worker, TAIL_MS, WAIT_MS};
use crate::pattern::dgram::HEADER;
use std::io;
use std::time::Instant;

/// Most calls on one ready flow before the thread turns to the next (fairness within a
/// thread; level-triggered epoll brings the flow back if it still has room or data).
const BURST: usize = 16;

fn eof() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the peer closed a flow's data connection",
    )
}

fn stalled(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no {what} within the timeout"),
    )
}

/// Stream, client: sends `size`-byte messages on every ready flow for the trial's duration.
/// Counts every byte the stack accepted (a message cut short by the end counts its part).
pub(super) fn stream_send(w: &mut Worker, job: &Job, sh: &Shared) -> io::Result<LoopEnd> {
    let size = job.size;
    let start = Instant::now();
    let end = loop {
        let n = w.wait(WAIT_MS)?;
        for k in 0..n {
            let i = w.flow(k);
            let st = &mut w.state[i];
            let f = &mut w.counts[i];
            for _ in 0..BURST {
                match w.eps[i].send(&w.tx[st.off..size]) {
                    Ok(m) => {
                        w.send_calls += 1;
                        f.bytes_sent += m as u64;
                        st.off += m;
                        if st.off < size {
                            break;
                        }
                        st.off = 0;
                        f.messages_sent += 1;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let now = Instant::now();
        if now.duration_since(start) >= job.duration || sh.aborted() {
            break now;
        }
    };
    Ok(LoopEnd {
        end,
        last_recv: None,
        timed_out: false,
    })
}

/// Stream, server: receives on every ready flow until the client has ended the trial and
/// all threads together received the bytes it announced, or nothing arrives for the idle
/// limit.
pub(super) fn stream_recv(
    w: &mut Worker,
    index: usize,
    job: &Job,
    sh: &Shared,
) -> io::Result<LoopEnd> {
    server_loop(w, index, job, sh, |w, i| {
        let mut got = 0u64;
        for _ in 0..BURST {
            match w.eps[i].recv(&mut w.rx) {
                Ok(0) => return Err(eof()),
                Ok(m) => {
                    w.recv_calls += 1;
                    w.counts[i].bytes_received += m as u64;
                    got += m as u64;
                    if m < w.rx.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    })
}

/// The loop both servers run: waits for ready flows, lets `serve` move data on each (it
/// returns what it counted: bytes or requests), publishes the thread's count, and stops
/// once the client ended the trial and every thread together counted its target, on abort,
/// or (`timed_out`) after the idle limit without progress.
#[inline]
fn server_loop(
    w: &mut Worker,
    index: usize,
    job: &Job,
    sh: &Shared,
    mut serve: impl FnMut(&mut Worker, usize) -> io::Result<u64>,
) -> io::Result<LoopEnd> {
    let mut count = 0u64;
    let mut last: Option<Instant> = None;
    let mut progress_at = Instant::now();
    let mut timed_out = false;
    loop {
        let tail = sh.ended.load(std::sync::atomic::Ordering::Relaxed);
        let n = w.wait(if tail { TAIL_MS } else { WAIT_MS })?;
        let before = count;
        for k in 0..n {
            let i = w.flow(k);
            count += serve(w, i)?;
        }
        if count > before {
            let now = Instant::now();
            (last, progress_at) = (Some(now), now);
            sh.publish(index, count);
        }
        if sh.aborted() || sh.complete() {
            break;
        }
        if count == before && progress_at.elapsed() > job.idle {
            timed_out = true;
            break;
        }
    }
    Ok(LoopEnd {
        end: Instant::now(),
        last_recv: last,
        timed_out,
    })
}

/// Sends what is left of flow `i`'s current message; once it is all out, the flow waits to
/// receive again. A send cut short waits for EPOLLOUT. Returns true once the message is out.
#[inline]
fn push(w: &mut Worker, i: usize, size: usize) -> io::Result<bool> {
    let st = &mut w.state[i];
    let f = &mut w.counts[i];
    while st.off < size {
        match w.eps[i].send(&w.tx[st.off..size]) {
            Ok(m) => {
                w.send_calls += 1;
                f.bytes_sent += m as u64;
                st.off += m;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if !st.want_out {
                    w.epoll.modify(st.fd, i, OUT)?;
                    st.want_out = true;
                }
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    f.messages_sent += 1;
    (st.off, st.sending) = (0, false);
    if st.want_out {
        w.epoll.modify(st.fd, i, IN)?;
        st.want_out = false;
    }
    Ok(true)
}

/// Receives into flow `i`'s current message; returns true once it is complete. Its first
/// bytes (a rate request's stamp) are kept with the flow: the receive buffer is shared.
#[inline]
pub(super) fn pull(w: &mut Worker, i: usize, size: usize) -> io::Result<bool> {
    let st = &mut w.state[i];
    match w.eps[i].recv(&mut w.rx[st.off..size]) {
        Ok(0) => Err(eof()),
        Ok(m) => {
            if st.off < HEADER {
                let end = (st.off + m).min(HEADER);
                st.hdr[st.off..end].copy_from_slice(&w.rx[st.off..end]);
            }
            w.recv_calls += 1;
            let f = &mut w.counts[i];
            f.bytes_received += m as u64;
            st.off += m;
            if st.off < size {
                return Ok(false);
            }
            f.messages_received += 1;
            st.off = 0;
            Ok(true)
        }
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Starts flow `i`'s next request at `now`.
#[inline]
fn request(w: &mut Worker, i: usize, size: usize, now: Instant) -> io::Result<()> {
    let st = &mut w.state[i];
    (st.t0, st.off, st.sending) = (now, 0, true);
    push(w, i, size).map(|_| ())
}

/// Pingpong, client (neper's tcp_rr): every flow keeps one request outstanding for the
/// trial's duration; each response's round trip goes into the thread's histogram. Once the
/// time is up no new request starts, and the loop ends when every flow has its last
/// response — so every request sent was answered.
pub(super) fn rr_client(w: &mut Worker, job: &Job, sh: &Shared) -> io::Result<LoopEnd> {
    let size = job.size;
    let start = Instant::now();
    for i in 0..w.eps.len() {
        request(w, i, size, start)?;
    }
    let mut outstanding = w.eps.len();
    let mut stopping = false;
    let mut progress_at = start;
    let mut now = start;
    while outstanding > 0 {
        let n = w.wait(WAIT_MS)?;
        for k in 0..n {
            let i = w.flow(k);
            if w.state[i].sending {
                push(w, i, size)?;
            } else if pull(w, i, size)? {
                let t = Instant::now();
                if let Some(h) = w.hist.as_mut() {
                    h.record(t.duration_since(w.state[i].t0).as_nanos() as u64);
                }
                progress_at = t;
                if stopping {
                    outstanding -= 1;
                } else {
                    request(w, i, size, t)?;
                }
            }
        }
        now = Instant::now();
        if !stopping && now.duration_since(start) >= job.duration {
            stopping = true;
        }
        if sh.aborted() {
            break;
        }
        if now.duration_since(progress_at) > job.idle {
            return Err(stalled("response on a flow"));
        }
    }
    Ok(LoopEnd {
        end: now,
        last_recv: None,
        timed_out: false,
    })
}

/// Pingpong, server: answers every complete request with a message of the same size (with
/// `echo`, one that starts with the request's stamp: rate), until the client has ended the
/// trial and all threads together received every request it sent.
pub(super) fn rr_server(
    w: &mut Worker,
    index: usize,
    job: &Job,
    sh: &Shared,
    echo: bool,
) -> io::Result<LoopEnd> {
    let size = job.size;
    let stamp = size.min(HEADER);
    server_loop(w, index, job, sh, |w, i| {
        let answer = |w: &mut Worker| {
            if echo {
                w.tx[..stamp].copy_from_slice(&w.state[i].hdr[..stamp]);
            }
            push(w, i, size)
        };
        if w.state[i].sending {
            answer(w)?;
        } else if pull(w, i, size)? {
            w.state[i].sending = true;
            answer(w)?;
            return Ok(1);
        }
        Ok(0)
    })
}
