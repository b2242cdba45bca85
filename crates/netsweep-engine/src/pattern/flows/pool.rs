//! The data threads of a `--flows` session, spawned once per session: each owns a share of
//! the flows (flow `i` on thread `i % T`), waits for them in its own epoll instance, takes
//! trials from a channel and reports each trial's counts on another. Threads meet at a start
//! barrier before every timed loop, so all flows start together; each records when it left
//! the barrier, and the spread of those instants is the trial's start skew.

use super::driver::Worker;
use super::machine::Machine;
use super::worker::{Flows, Job, Progress, Report, Shared};
use crate::cpu::ThreadCpu;
use crate::meter::pin_current_thread;
use netsweep_endpoint::Endpoint;
use netsweep_proto::messages::ThreadCounters;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

struct Handle<P> {
    jobs: Option<mpsc::Sender<Job<P>>>,
    join: Option<JoinHandle<()>>,
}

/// A session's data threads and their flows, each running the pattern's machine `M`.
pub(crate) struct Pool<M: Machine> {
    handles: Vec<Handle<M::Params>>,
    reports: mpsc::Receiver<(usize, io::Result<Report<M::Out>>)>,
    pub(crate) shared: Arc<Shared>,
}

impl<M: Machine> Pool<M> {
    /// Spreads `eps` (flow order) over `threads` threads, made non-blocking and registered
    /// for EPOLLIN, each thread pinned to `cpu` when given.
    pub(crate) fn spawn(
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
            let flows = Flows::new(eps).map_err(|e| format!("readying the flows: {e}"))?;
            let worker = Worker {
                flows,
                machine: M::default(),
            };
            let (jobs, job_rx) = mpsc::channel::<Job<M::Params>>();
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
    pub(crate) fn dispatch(&self, job: Job<M::Params>) -> io::Result<()> {
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
    pub(crate) fn collect(
        &self,
        wait: Duration,
        mut tick: impl FnMut(&Shared) -> Duration,
    ) -> io::Result<Vec<Report<M::Out>>> {
        let deadline = Instant::now() + wait;
        let mut got: Vec<Option<Report<M::Out>>> = (0..self.handles.len()).map(|_| None).collect();
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

impl<M: Machine> Drop for Pool<M> {
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

/// A data thread: runs each trial it is handed and reports it, until the channel closes.
fn serve<M: Machine>(
    mut w: Worker<M>,
    index: usize,
    shared: &Shared,
    jobs: mpsc::Receiver<Job<M::Params>>,
    reports: mpsc::Sender<(usize, io::Result<Report<M::Out>>)>,
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

fn trial<M: Machine>(
    w: &mut Worker<M>,
    index: usize,
    shared: &Shared,
    job: &Job<M::Params>,
) -> io::Result<Report<M::Out>> {
    let ready = w.ready(job, index, shared.progress.len());
    let cpu0 = ThreadCpu::now();
    // Every thread meets here, ready or not, so that none waits for one that failed.
    shared.barrier.wait();
    ready?;
    let start = Instant::now();
    let end = w.run(index, job, shared)?;
    let cpu = ThreadCpu::now().since(cpu0);
    let since = |t: Instant| t.saturating_duration_since(shared.clock).as_nanos() as u64;
    let f = &w.flows;
    Ok(Report {
        flows: f.counts.clone(),
        cpu: ThreadCounters {
            flows: f.eps.len() as u32,
            cpu_user_ns: cpu.user_ns,
            cpu_sys_ns: cpu.sys_ns,
        },
        send_calls: f.send_calls,
        recv_calls: f.recv_calls,
        start_ns: since(start),
        end_ns: since(end.end),
        last_recv_ns: end.last_recv.map_or(0, |t| {
            t.saturating_duration_since(job.epoch).as_nanos() as u64
        }),
        timed_out: end.timed_out,
        hist: w.machine.hist().cloned(),
        out: w.machine.out(),
    })
}
