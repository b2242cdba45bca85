//! The one timed loop of every `--flows` data thread, whatever the pattern: it waits for the
//! thread's flows in epoll (level-triggered; a stream thread with one flow blocks in its
//! calls instead), hands each ready flow to the pattern's [`Machine`], lets the machine send
//! what is due, publishes a server's count and stops once the client ended the trial and
//! every thread together counted its total, and watches the idle limit. Nothing here
//! allocates, logs or locks; the other threads are read only through atomics.

use super::machine::{Machine, Next, Share};
use super::worker::{Flows, Job, LoopEnd, Shared, TAIL_NS};
use crate::pattern::yield_cpu;
use std::io;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A data thread's flows and the pattern's machine that moves data on them.
pub(crate) struct Worker<M> {
    pub(crate) flows: Flows,
    pub(crate) machine: M,
}

impl<M: Machine> Worker<M> {
    /// Readies one trial outside the timed loop, for thread `index` of `threads`.
    pub(crate) fn ready(
        &mut self,
        job: &Job<M::Params>,
        index: usize,
        threads: usize,
    ) -> io::Result<()> {
        self.flows
            .ready(job.size, M::SENDS, M::WAITS_TO_SEND, M::BLOCKS_MS)?;
        let share = Share {
            index,
            threads,
            flows: self.flows.eps.len(),
        };
        self.machine.ready(job, share);
        Ok(())
    }

    /// Runs one trial: until the machine is done (a client), until every thread together
    /// counted the client's total (a server), on abort, or — once the thread waits on its
    /// peer — after the idle limit without progress (a server reports it timed out, a
    /// client fails with what it missed).
    pub(crate) fn run(
        &mut self,
        index: usize,
        job: &Job<M::Params>,
        sh: &Shared,
    ) -> io::Result<LoopEnd> {
        let (t, m) = (&mut self.flows, &mut self.machine);
        let server = M::TARGET.is_some();
        let start = Instant::now();
        m.start(t, job, start)?;
        let mut next = m.next(t, job, start)?;
        let mut counted = m.progress();
        let mut progress_at = start;
        let mut last: Option<Instant> = None;
        let mut timed_out = false;
        while let Next::Wait(ns) = next {
            if sh.aborted() {
                break;
            }
            let tail = server && sh.ended.load(Ordering::Relaxed);
            let wait = if tail { ns.min(TAIL_NS) } else { ns };
            let n = t.wait(wait)?;
            if n == 0 && wait == 0 {
                yield_cpu();
            }
            for k in 0..n {
                let i = t.flow(k);
                m.on_ready(t, i, job)?;
            }
            let now = Instant::now();
            next = m.next(t, job, now)?;
            let p = m.progress();
            let moved = p != counted;
            if moved {
                (counted, progress_at, last) = (p, now, Some(now));
                if server {
                    sh.publish(index, p);
                }
            }
            if server && sh.complete() {
                break;
            }
            if !moved && m.waits_on_peer() && now.duration_since(progress_at) > job.idle {
                if !server {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, m.stalled()));
                }
                timed_out = true;
                break;
            }
        }
        Ok(LoopEnd {
            end: Instant::now(),
            last_recv: last.filter(|_| server),
            timed_out,
        })
    }
}
