//! A `--flows` data thread's flows and what every pattern's machine does with them: the
//! flows' endpoints, per-flow progress and counts, the thread's epoll instance and buffers,
//! and the send and receive steps that count what they move (`Flows`); the job a thread is
//! given per trial, what its loop ends with and reports, and what the threads share (the end
//! of a server's trial, its target, the start barrier). The pool (`pool.rs`) spawns the
//! threads; the driver (`driver.rs`) runs a pattern's machine on this state.

use super::epoll::{self, Epoll, IN, OUT};
use crate::pattern::dgram::HEADER;
use netsweep_endpoint::Endpoint;
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::{FlowCounters, ThreadCounters};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How long a wait blocks while the trial runs (the loop checks the clock after each); a
/// blocking sender's send timeout, ms.
pub(crate) const WAIT_MS: i32 = 10;

/// The same, once the client has ended the trial and a receiver waits for the last bytes;
/// a blocking receiver's receive timeout (it cannot shorten its wait once the trial ends).
pub(crate) const TAIL_MS: i32 = 1;

/// [`WAIT_MS`] in ns.
pub(crate) const WAIT_NS: u64 = WAIT_MS as u64 * 1_000_000;

/// [`TAIL_MS`] in ns.
pub(crate) const TAIL_NS: u64 = TAIL_MS as u64 * 1_000_000;

/// One trial as every thread runs it: the common part, and the pattern's `params`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job<P> {
    pub(crate) size: usize,
    pub(crate) duration: Duration,
    /// How long a thread waits without progress before it gives up.
    pub(crate) idle: Duration,
    /// The moment the side was armed (the receiver's rates count from it).
    pub(crate) epoch: Instant,
    pub(crate) params: P,
}

/// What the threads share with their coordinator: the end of a server's trial and its
/// target, the abort flag, each thread's progress (its own cache line), the start barrier.
pub(crate) struct Shared {
    /// The client ended the trial; `target` is valid (Release/Acquire).
    pub(crate) ended: AtomicBool,
    /// What the server must count in all before it stops: bytes (stream) or requests (rr).
    pub(crate) target: AtomicU64,
    /// Stop at once: the session is over or another thread failed.
    pub(crate) abort: AtomicBool,
    pub(crate) progress: Vec<Progress>,
    pub(crate) barrier: Barrier,
    /// The zero of the threads' start instants.
    pub(crate) clock: Instant,
}

/// One thread's count of what it received, on a cache line of its own: written by its
/// thread in the loop, read by others only once the client ended the trial.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Progress(AtomicU64);

impl Shared {
    /// Publishes thread `w`'s count.
    #[inline]
    pub(crate) fn publish(&self, w: usize, count: u64) {
        self.progress[w].0.store(count, Ordering::Relaxed);
    }

    /// True once the client ended the trial and every thread together counted its target.
    #[inline]
    pub(crate) fn complete(&self) -> bool {
        self.ended.load(Ordering::Acquire)
            && self
                .progress
                .iter()
                .map(|p| p.0.load(Ordering::Relaxed))
                .sum::<u64>()
                >= self.target.load(Ordering::Relaxed)
    }

    /// True once the trial must stop at once.
    #[inline]
    pub(crate) fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// Readies the flags for a new trial (before it is handed to the threads).
    pub(crate) fn reset(&self) {
        self.ended.store(false, Ordering::SeqCst);
        self.target.store(0, Ordering::SeqCst);
        for p in &self.progress {
            p.0.store(0, Ordering::SeqCst);
        }
    }

    /// The client ended the trial having sent `target` (bytes or requests).
    pub(crate) fn end(&self, target: u64) {
        self.target.store(target, Ordering::Relaxed);
        self.ended.store(true, Ordering::Release);
    }
}

/// One flow's place in its messages: how much of the message being sent and of the one
/// being received moved (a rate client does both at once), whether it waits for room.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FlowState {
    pub(crate) fd: RawFd,
    pub(crate) tx_off: usize,
    pub(crate) rx_off: usize,
    /// Waiting for EPOLLOUT (a send stopped short) rather than EPOLLIN only.
    pub(crate) want_out: bool,
    /// The first bytes of the message being received (a rate request's or reply's stamp:
    /// the receive buffer is shared by the thread's flows).
    pub(crate) hdr: [u8; HEADER],
}

/// What one send call did with a flow's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// The message is all out.
    Whole,
    /// Part of it went out.
    Part,
    /// The socket had no room.
    Full,
}

/// A data thread's flows and everything its loop uses, allocated outside the timed loop.
pub(crate) struct Flows {
    pub(crate) eps: Vec<Box<dyn Endpoint>>,
    pub(crate) state: Vec<FlowState>,
    pub(crate) counts: Vec<FlowCounters>,
    pub(super) epoll: Epoll,
    pub(crate) tx: Vec<u8>,
    pub(crate) rx: Vec<u8>,
    pub(crate) send_calls: u64,
    pub(crate) recv_calls: u64,
    /// The thread's one flow blocks in its calls (a stream thread with a single flow):
    /// the loop calls it directly instead of waiting in epoll.
    pub(crate) blocking: bool,
}

fn eof() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the peer closed a flow's data connection",
    )
}

/// How a thread's loop ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoopEnd {
    pub(crate) end: Instant,
    /// The last receive that moved data.
    pub(crate) last_recv: Option<Instant>,
    pub(crate) timed_out: bool,
}

/// One thread's trial.
#[derive(Debug, Clone)]
pub(crate) struct Report<O> {
    /// Its flows' counts, in its own order (flow `w + T·j` at `j`).
    pub(crate) flows: Vec<FlowCounters>,
    pub(crate) cpu: ThreadCounters,
    pub(crate) send_calls: u64,
    pub(crate) recv_calls: u64,
    /// When it left the start barrier, ns since the pool's clock.
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    /// Its last receive, ns since the job's epoch (0 without one).
    pub(crate) last_recv_ns: u64,
    pub(crate) timed_out: bool,
    /// Round trips (pingpong clients) or latencies from the intended send time (rate).
    pub(crate) hist: Option<LatencyHistogram>,
    /// The pattern's own figures (its machine's `Out`).
    pub(crate) out: O,
}

impl Flows {
    /// A thread's flows, made non-blocking and registered for EPOLLIN under their index.
    pub(crate) fn new(eps: Vec<Box<dyn Endpoint>>) -> io::Result<Self> {
        let epoll = Epoll::new(eps.len())?;
        let mut state = Vec::with_capacity(eps.len());
        for (i, ep) in eps.iter().enumerate() {
            let fd = ep.raw_fd().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "--flows needs --api basic (one plain system call per send and receive)",
                )
            })?;
            epoll::set_nonblocking(fd)?;
            epoll.add(fd, i, IN)?;
            state.push(FlowState {
                fd,
                tx_off: 0,
                rx_off: 0,
                want_out: false,
                hdr: [0; HEADER],
            });
        }
        Ok(Self {
            counts: vec![FlowCounters::default(); eps.len()],
            eps,
            state,
            epoll,
            tx: Vec::new(),
            rx: Vec::new(),
            send_calls: 0,
            recv_calls: 0,
            blocking: false,
        })
    }

    /// Readies one trial outside the timed loop: counts to zero, buffers large enough (a
    /// send buffer only when `sends`), every flow at the start of its messages and waiting
    /// for room (`to_send`) or data; with `block` and a single flow, the flow leaves epoll
    /// and its calls block for at most that many ms.
    pub(crate) fn ready(
        &mut self,
        size: usize,
        sends: bool,
        to_send: bool,
        block: Option<i32>,
    ) -> io::Result<()> {
        self.counts.fill(FlowCounters::default());
        (self.send_calls, self.recv_calls) = (0, 0);
        let rx = size.max(64 * 1024);
        if sends && self.tx.len() < size {
            self.tx = vec![0x5a; size];
        }
        if self.rx.len() < rx {
            self.rx = vec![0; rx];
        }
        // A stream thread with one flow lets its calls block (iperf2's thread per flow): on
        // two CPUs, 8 flows each on a thread of its own moved 1.3× the bytes they moved in
        // epoll, whose waits left the CPUs idle 12% of the time (docs/performance-flows.md).
        // Its socket leaves the epoll set meanwhile, so no wake-up also runs epoll's callback.
        let ms = block.filter(|_| self.eps.len() == 1);
        if ms.is_some() != self.blocking {
            let st = &mut self.state[0];
            if ms.is_some() {
                self.epoll.remove(st.fd)?;
            } else {
                self.epoll.add(st.fd, 0, IN)?;
                st.want_out = false;
            }
            epoll::set_blocking(st.fd, ms.is_some(), ms.unwrap_or(0))?;
            self.blocking = ms.is_some();
        }
        for (i, st) in self.state.iter_mut().enumerate() {
            if !self.blocking && st.want_out != to_send {
                self.epoll
                    .modify(st.fd, i, if to_send { OUT } else { IN })?;
            }
            (st.tx_off, st.rx_off, st.want_out) = (0, 0, to_send);
        }
        Ok(())
    }

    /// Waits up to `ns` for ready flows and says how many. A blocking thread does not wait
    /// here: its one flow is always "ready", and its call waits (with a timeout).
    #[inline]
    pub(crate) fn wait(&mut self, ns: u64) -> io::Result<usize> {
        if self.blocking {
            Ok(1)
        } else {
            self.epoll.wait_ns(ns)
        }
    }

    /// The flow of ready event `k` of the last [`wait`](Self::wait).
    #[inline]
    pub(crate) fn flow(&self, k: usize) -> usize {
        if self.blocking {
            0
        } else {
            self.epoll.ready(k)
        }
    }

    /// One send of what is left of flow `i`'s `size`-byte message from the send buffer,
    /// counted (a message cut short by the end counts its part).
    #[inline]
    pub(crate) fn send_once(&mut self, i: usize, size: usize) -> io::Result<Sent> {
        let st = &mut self.state[i];
        loop {
            match self.eps[i].send(&self.tx[st.tx_off..size]) {
                Ok(m) => {
                    self.send_calls += 1;
                    let f = &mut self.counts[i];
                    f.bytes_sent += m as u64;
                    st.tx_off += m;
                    if st.tx_off < size {
                        return Ok(Sent::Part);
                    }
                    st.tx_off = 0;
                    f.messages_sent += 1;
                    return Ok(Sent::Whole);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Sent::Full),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends what is left of flow `i`'s message; true once it is all out (the flow then
    /// waits for data only). A send cut short makes the flow wait for room too (`reading`:
    /// for data as well meanwhile).
    #[inline]
    pub(crate) fn push(&mut self, i: usize, size: usize, reading: bool) -> io::Result<bool> {
        loop {
            match self.send_once(i, size)? {
                Sent::Whole => break,
                Sent::Part => {}
                Sent::Full => {
                    let st = &mut self.state[i];
                    if !st.want_out {
                        let ev = if reading { IN | OUT } else { OUT };
                        self.epoll.modify(st.fd, i, ev)?;
                        st.want_out = true;
                    }
                    return Ok(false);
                }
            }
        }
        let st = &mut self.state[i];
        if st.want_out {
            self.epoll.modify(st.fd, i, IN)?;
            st.want_out = false;
        }
        Ok(true)
    }

    /// Receives into flow `i`'s current `size`-byte message; true once it is complete. Its
    /// first bytes are kept with the flow ([`FlowState::hdr`]).
    #[inline]
    pub(crate) fn pull(&mut self, i: usize, size: usize) -> io::Result<bool> {
        let st = &mut self.state[i];
        match self.eps[i].recv(&mut self.rx[st.rx_off..size]) {
            Ok(0) => Err(eof()),
            Ok(m) => {
                if st.rx_off < HEADER {
                    let end = (st.rx_off + m).min(HEADER);
                    st.hdr[st.rx_off..end].copy_from_slice(&self.rx[st.rx_off..end]);
                }
                self.recv_calls += 1;
                let f = &mut self.counts[i];
                f.bytes_received += m as u64;
                st.rx_off += m;
                if st.rx_off < size {
                    return Ok(false);
                }
                f.messages_received += 1;
                st.rx_off = 0;
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

    /// One receive of whatever flow `i` has, into the whole receive buffer (a stream's
    /// receiver: no message boundaries), counted: the bytes (0 when none were waiting).
    #[inline]
    pub(crate) fn recv_some(&mut self, i: usize) -> io::Result<usize> {
        match self.eps[i].recv(&mut self.rx) {
            Ok(0) => Err(eof()),
            Ok(m) => {
                self.recv_calls += 1;
                self.counts[i].bytes_received += m as u64;
                Ok(m)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }
}
