//! The data threads of a `--flows` session, spawned once per session: each owns a share of
//! the flows (flow `i` on thread `i % T`), waits for them in its own epoll instance, takes
//! trials from a channel and reports each trial's counts on another. Threads meet at a start
//! barrier before every timed loop, so all flows start together; each records when it left
//! the barrier, and the spread of those instants is the trial's start skew.

use super::epoll::{self, Epoll, IN, OUT};
use super::loops;
use crate::cpu::ThreadCpu;
use crate::meter::pin_current_thread;
use netsweep_endpoint::Endpoint;
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::{FlowCounters, ThreadCounters};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

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
    pub(super) rate: super::rate::RateJob,
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
    progress: Vec<Progress>,
    barrier: Barrier,
    /// The zero of the threads' start instants.
    clock: Instant,
}

/// One thread's count of what it received, on a cache line of its own: written by its
/// thread in the loop, read by others only once the client ended the trial.
#[repr(align(128))]
#[derive(Default)]
struct Progress(AtomicU64);

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
    pub(super) hdr: [u8; super::rate::STAMP],
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
    pub(super) rate: super::rate::RateState,
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
    pub(super) rate: Option<super::rate::RateReport>,
}

struct Handle {
    jobs: Option<mpsc::Sender<Job>>,
    join: Option<JoinHandle<()>>,
}

/// A session's data threads and their flows.
pub(super) struct Pool {
    handles: Vec<Handle>,
    reports: mpsc::Receiver<(usize, io::Result<Report>)>,
    pub(super) shared: Arc<Shared>,
}

impl Pool {
    /// Spreads `eps` (flow order) over `threads` threads, made non-blocking and registered
    /// for EPOLLIN, each thread pinned to `cpu` when given.
    pub(super) fn spawn(
        eps: Vec<Box<dyn Endpoint>>,
        threads: usize,
        cpu: Option<u32>,
    ) -> Result<Self, String> {
        let threads = threads.clamp(1, eps.len().max(1));
        let mut shares: Vec<Vec<Box<dyn Endpoint>>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, ep) in eps.into_iter().enumerate() {
            shares[i % threads].push(ep);
        }
        let shared = Arc::new(Shared {
            ended: AtomicBool::new(false),
            target: AtomicU64::new(0),
            abort: AtomicBool::new(false),
            progress: (0..threads).map(|_| Progress::default()).collect(),
            barrier: Barrier::new(threads),
            clock: Instant::now(),
        });
        let (report_tx, reports) = mpsc::channel();
        let mut pool = Self {
            handles: Vec::with_capacity(threads),
            reports,
            shared,
        };
        let (pinned_tx, pinned_rx) = mpsc::channel::<Result<(), String>>();
        for (w, eps) in shares.into_iter().enumerate() {
            let worker = Worker::new(eps).map_err(|e| format!("readying the flows: {e}"))?;
            let (jobs, job_rx) = mpsc::channel::<Job>();
            let shared = pool.shared.clone();
            let reports = report_tx.clone();
            let pinned = pinned_tx.clone();
            let join = thread::Builder::new()
                .name(format!("netsweep-flows-{w}"))
                .spawn(move || {
                    let ok = cpu.map_or(Ok(()), pin_current_thread);
                    let go = ok.is_ok();
                    let _ = pinned.send(ok);
                    if go {
                        serve(worker, w, &shared, job_rx, reports);
                    }
                })
                .map_err(|e| format!("starting a flows data thread: {e}"))?;
            pool.handles.push(Handle {
                jobs: Some(jobs),
                join: Some(join),
            });
            match pinned_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(m)) => return Err(format!("--cpu: {m}")),
                Err(_) => return Err("a flows data thread did not start".into()),
            }
        }
        Ok(pool)
    }

    /// Hands `job` to every thread.
    pub(super) fn dispatch(&self, job: Job) -> io::Result<()> {
        for h in &self.handles {
            let sent = h.jobs.as_ref().map(|j| j.send(job));
            if !matches!(sent, Some(Ok(()))) {
                return Err(io::Error::other("a flows data thread ended"));
            }
        }
        Ok(())
    }

    /// Waits (at most `wait` in all) for every thread's report of the trial, calling `tick`
    /// first and again after each report or once the time it returned has passed; the first
    /// failure aborts the others and is returned once all reported.
    pub(super) fn collect(
        &self,
        wait: Duration,
        mut tick: impl FnMut(&Shared) -> Duration,
    ) -> io::Result<Vec<Report>> {
        let deadline = Instant::now() + wait;
        let mut got: Vec<Option<Report>> = vec![None; self.handles.len()];
        let mut left = got.len();
        let mut failed: Option<io::Error> = None;
        while left > 0 {
            let every = tick(&self.shared);
            let until = deadline.saturating_duration_since(Instant::now());
            match self.reports.recv_timeout(every.min(until)) {
                Ok((w, r)) => {
                    left -= 1;
                    match r {
                        Ok(r) => got[w] = Some(r),
                        Err(e) => {
                            self.shared.abort.store(true, Ordering::SeqCst);
                            failed.get_or_insert(e);
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(_) => {
                    self.shared.abort.store(true, Ordering::SeqCst);
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the flows data threads did not finish the trial in time",
                    ));
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(got.into_iter().flatten().collect())
    }
}

impl Drop for Pool {
    /// Stops the threads (their loops poll the abort flag, their waits end when the job
    /// channel closes) and reaps them; their sockets close with them.
    fn drop(&mut self) {
        self.shared.abort.store(true, Ordering::SeqCst);
        for h in &mut self.handles {
            h.jobs = None;
        }
        for h in &mut self.handles {
            if let Some(j) = h.join.take() {
                let _ = j.join();
            }
        }
    }
}

impl Worker {
    fn new(eps: Vec<Box<dyn Endpoint>>) -> io::Result<Self> {
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
                hdr: [0; super::rate::STAMP],
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
            rate: super::rate::RateState::default(),
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
    fn ready(&mut self, job: &Job, index: usize, threads: usize) -> io::Result<()> {
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
                Role::StreamSend => loops::WAIT_MS,
                _ => loops::TAIL_MS,
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

/// A data thread: runs each trial it is handed and reports it, until the channel closes.
fn serve(
    mut w: Worker,
    index: usize,
    shared: &Shared,
    jobs: mpsc::Receiver<Job>,
    reports: mpsc::Sender<(usize, io::Result<Report>)>,
) {
    while let Ok(job) = jobs.recv() {
        let r = trial(&mut w, index, shared, &job);
        if r.is_err() {
            shared.abort.store(true, Ordering::SeqCst);
        }
        if reports.send((index, r)).is_err() {
            break;
        }
    }
}

fn trial(w: &mut Worker, index: usize, shared: &Shared, job: &Job) -> io::Result<Report> {
    let ready = w.ready(job, index, shared.progress.len());
    let cpu0 = ThreadCpu::now();
    // Every thread meets here, ready or not, so that none waits for one that failed.
    shared.barrier.wait();
    ready?;
    let start = Instant::now();
    let end = match job.role {
        Role::StreamSend => loops::stream_send(w, job, shared),
        Role::StreamRecv => loops::stream_recv(w, index, job, shared),
        Role::RrClient => loops::rr_client(w, job, shared),
        Role::RrServer => loops::rr_server(w, index, job, shared, false),
        Role::RateServer => loops::rr_server(w, index, job, shared, true),
        Role::RateClient => super::rate::client_loop(w, job, shared),
    }?;
    let cpu = ThreadCpu::now().since(cpu0);
    let since = |t: Instant| t.saturating_duration_since(shared.clock).as_nanos() as u64;
    Ok(Report {
        flows: w.counts.clone(),
        cpu: ThreadCounters {
            flows: w.eps.len() as u32,
            cpu_user_ns: cpu.user_ns,
            cpu_sys_ns: cpu.sys_ns,
        },
        send_calls: w.send_calls,
        recv_calls: w.recv_calls,
        start_ns: since(start),
        end_ns: since(end.end),
        last_recv_ns: end.last_recv.map_or(0, |t| {
            t.saturating_duration_since(job.epoch).as_nanos() as u64
        }),
        timed_out: end.timed_out,
        hist: w.hist.clone(),
        rate: (job.role == Role::RateClient).then(|| w.rate.report()),
    })
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
