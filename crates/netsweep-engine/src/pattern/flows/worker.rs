//! A `--flows` data thread's state: its flows (endpoints, per-flow progress, counts), its epoll
//! instance and buffers, the job it is given per trial, what its loop ends with and reports,
//! and what the threads share (the end of the trial, the target, the start barrier). The
//! pool (`pool.rs`) spawns and feeds the threads; the loops (`loops.rs`, `rate.rs`) run on this
//! state.

use super::epoll::{self, Epoll, IN, OUT};
use super::rate_state::{RateJob, RateReport, RateState};
use crate::pattern::dgram::HEADER;
use netsweep_endpoint::Endpoint;
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::{FlowCounters, ThreadCounters};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How long a wait blocks while the trial runs, ms (the loops check the clock after each);
/// a blocking sender's send timeout.
pub(super) const WAIT_MS: i32 = 10;

/// The same, once the client has ended the trial and a receiver waits for the last bytes;
/// a blocking receiver's receive timeout (it cannot shorten its wait once the trial ends).
pub(super) const TAIL_MS: i32 = 1;

/// What a thread's loop does with its flows in a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Stream, client: send on every flow for the trial's duration.
    StreamSend,
    /// Stream, server: receive on every flow until the client's bytes all arrived.
    StreamRecv,
    /// Pingpong, client: one request outstanding per flow for the trial's duration.
    RrClient,
    /// Pingpong, server: answer every request until the client's requests are all answered.
    RrServer,
    /// Rate, client: every flow sends on its own schedule, replies read as they come.
    RateClient,
    /// Rate, server: echo every request (its stamp back) until all are answered.
    RateServer,
}

impl Role {
    /// True when a thread in this role sends messages (a stream's receiver only receives).
    pub(super) fn sends(self) -> bool {
        self != Role::StreamRecv
    }
}

/// One trial as every thread runs it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Job {
    pub(super) role: Role,
    pub(super) size: usize,
    pub(super) duration: Duration,
    /// How long a thread waits without progress before it gives up.
    pub(super) idle: Duration,
    /// The moment the side was armed (the receiver's rates count from it).
    pub(super) epoch: Instant,
    /// Rate, client: the schedules.
    pub(super) rate: RateJob,
}

/// What the threads share with their coordinator: the end of a server's trial and its
/// target, the abort flag, each thread's progress (its own cache line), the start barrier.
pub(super) struct Shared {
    /// The client ended the trial; `target` is valid (Release/Acquire).
    pub(super) ended: AtomicBool,
    /// What the server must count in all before it stops: bytes (stream) or requests (rr).
    pub(super) target: AtomicU64,
    /// Stop at once: the session is over or another thread failed.
    pub(super) abort: AtomicBool,
    pub(super) progress: Vec<Progress>,
    pub(super) barrier: Barrier,
    /// The zero of the threads' start instants.
    pub(super) clock: Instant,
}

/// One thread's count of what it received, on a cache line of its own: written by its
/// thread in the loop, read by others only once the client ended the trial.
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Progress(AtomicU64);

impl Shared {
    /// Publishes thread `w`'s count.
    #[inline]
    pub(super) fn publish(&self, w: usize, count: u64) {
        self.progress[w].0.store(count, Ordering::Relaxed);
    }

    /// True once the client ended the trial and every thread together counted its target.
    #[inline]
    pub(super) fn complete(&self) -> bool {
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
    pub(super) fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// Readies the flags for a new trial (before it is handed to the threads).
    pub(super) fn reset(&self) {
        self.ended.store(false, Ordering::SeqCst);
        self.target.store(0, Ordering::SeqCst);
        for p in &self.progress {
            p.0.store(0, Ordering::SeqCst);
        }
    }

    /// The client ended the trial having sent `target` (bytes or requests).
    pub(super) fn end(&self, target: u64) {
        self.target.store(target, Ordering::Relaxed);
        self.ended.store(true, Ordering::Release);
    }
}

/// One flow's place in an exchange: how much of the current message moved, and when its
/// request went out.
#[derive(Debug, Clone, Copy)]
pub(super) struct FlowState {
    pub(super) fd: RawFd,
    pub(super) off: usize,
    pub(super) sending: bool,
    /// Waiting for EPOLLOUT (a send stopped short) rather than EPOLLIN.
    pub(super) want_out: bool,
    pub(super) t0: Instant,
    /// The stamp of the request being answered (rate server: echoed back).
    pub(super) hdr: [u8; HEADER],
}

/// A data thread's flows and everything its loops use, allocated outside the timed loops.
pub(super) struct Worker {
    pub(super) eps: Vec<Box<dyn Endpoint>>,
    pub(super) state: Vec<FlowState>,
    pub(super) counts: Vec<FlowCounters>,
    pub(super) epoll: Epoll,
    pub(super) tx: Vec<u8>,
    pub(super) rx: Vec<u8>,
    /// Round trips (rr clients) or latencies (rate clients): made by the first trial that
    /// needs one (a histogram is ~270 KiB, written whole when made; a stream thread per
    /// flow would otherwise pay it per flow).
    pub(super) hist: Option<LatencyHistogram>,
    pub(super) send_calls: u64,
    pub(super) recv_calls: u64,
    /// Rate, client: the schedules and the replies' accounting.
    pub(super) rate: RateState,
    /// The thread's one flow blocks in its calls (a stream thread with a single flow):
    /// the loops call it directly instead of waiting in epoll.
    pub(super) blocking: bool,
}

/// How a thread's loop ended.
#[derive(Debug, Clone, Copy)]
pub(super) struct LoopEnd {
    pub(super) end: Instant,
    /// The last receive that moved data.
    pub(super) last_recv: Option<Instant>,
    pub(super) timed_out: bool,
}

/// One thread's trial.
#[derive(Debug, Clone)]
pub(super) struct Report {
    /// Its flows' counts, in its own order (flow `w + T·j` at `j`).
    pub(super) flows: Vec<FlowCounters>,
    pub(super) cpu: ThreadCounters,
    pub(super) send_calls: u64,
    pub(super) recv_calls: u64,
    /// When it left the start barrier, ns since the pool's clock.
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    /// Its last receive, ns since the job's epoch (0 without one).
    pub(super) last_recv_ns: u64,
    pub(super) timed_out: bool,
    /// Round trips (rr clients) or latencies from the intended send time (rate clients).
    pub(super) hist: Option<LatencyHistogram>,
    /// Rate clients: the schedule's figures.
    pub(super) rate: Option<RateReport>,
}

impl Worker {
    pub(super) fn new(eps: Vec<Box<dyn Endpoint>>) -> io::Result<Self> {
        let epoll = Epoll::new(eps.len())?;
        let now = Instant::now();
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
                off: 0,
                sending: false,
                want_out: false,
                t0: now,
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
            hist: None,
            send_calls: 0,
            recv_calls: 0,
            rate: RateState::default(),
            blocking: false,
        })
    }

    /// Waits up to `ms` for ready flows and says how many. A blocking thread does not wait
    /// here: its one flow is always "ready", and its call waits (with a timeout).
    #[inline]
    pub(super) fn wait(&mut self, ms: i32) -> io::Result<usize> {
        if self.blocking {
            Ok(1)
        } else {
            self.epoll.wait(ms)
        }
    }

    /// The flow of ready event `k` of the last [`wait`](Self::wait).
    #[inline]
    pub(super) fn flow(&self, k: usize) -> usize {
        if self.blocking {
            0
        } else {
            self.epoll.ready(k)
        }
    }

    /// Readies one trial outside the timed loop: counts to zero, buffers large enough,
    /// every flow waiting to receive.
    pub(super) fn ready(&mut self, job: &Job, index: usize, threads: usize) -> io::Result<()> {
        self.counts.fill(FlowCounters::default());
        (self.send_calls, self.recv_calls) = (0, 0);
        let rx = job.size.max(64 * 1024);
        // Only a thread that sends holds a send buffer (a stream's receiving threads none).
        if job.role.sends() && self.tx.len() < job.size {
            self.tx = vec![0x5a; job.size];
        }
        if self.rx.len() < rx {
            self.rx = vec![0; rx];
        }
        if matches!(job.role, Role::RrClient | Role::RateClient) {
            self.hist.get_or_insert_with(LatencyHistogram::new).reset();
        }
        if job.role == Role::RateClient {
            let flows = self.eps.len();
            // This thread's j-th flow is flow `index + threads·j` of the session.
            self.rate.ready(
                &job.rate,
                job.duration,
                (0..flows).map(|j| index + threads * j),
            );
        }
        // A stream thread with one flow lets its calls block (iperf2's thread per flow): on
        // two CPUs, 8 flows each on a thread of its own moved 1.3× the bytes they moved in
        // epoll, whose waits left the CPUs idle 12% of the time (docs/performance-flows.md).
        // Its socket leaves the epoll set meanwhile, so no wake-up also runs epoll's callback.
        let blocking =
            self.eps.len() == 1 && matches!(job.role, Role::StreamSend | Role::StreamRecv);
        if blocking != self.blocking {
            let st = &mut self.state[0];
            let ms = match job.role {
                _ if !blocking => 0,
                Role::StreamSend => WAIT_MS,
                _ => TAIL_MS,
            };
            if blocking {
                self.epoll.remove(st.fd)?;
            } else {
                self.epoll.add(st.fd, 0, IN)?;
                st.want_out = false;
            }
            epoll::set_blocking(st.fd, blocking, ms)?;
            self.blocking = blocking;
        }
        // A stream sender waits for room to send; every other loop for data to receive.
        let out = job.role == Role::StreamSend;
        for (i, st) in self.state.iter_mut().enumerate() {
            if !self.blocking && st.want_out != out {
                self.epoll.modify(st.fd, i, if out { OUT } else { IN })?;
            }
            (st.off, st.sending, st.want_out) = (0, false, out);
        }
        Ok(())
    }
}
