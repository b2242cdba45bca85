//! What a pattern gives the flows driver: its per-flow state machine ([`Machine`]), one per
//! side (a stream's sender and receiver, pingpong's requester, rate's scheduler, the echo).
//! The driver (`driver.rs`) waits for a thread's flows and hands each ready one to the
//! machine; the machine says what its flows do next, what it counted, and when it is done.
//! A machine lives in its pattern's folder (`stream/flow.rs`, `pingpong/flow.rs`,
//! `rate/flow.rs`, `echo/flow.rs`); the driver names none of them.

use super::worker::{Flows, Job};
use netsweep_model::stats::LatencyHistogram;
use std::io;
use std::time::Instant;

/// What a server's threads count toward the client's announced total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Bytes received (a stream).
    Bytes,
    /// Requests received (pingpong, rate).
    Requests,
}

/// What the loop does after a round of ready flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Wait for ready flows at most this long, ns (0: look without waiting).
    Wait(u64),
    /// The thread's trial is over.
    Done,
}

/// Which of the session's flows a thread holds: flow `index + threads·j` is its `j`-th.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Share {
    pub(crate) index: usize,
    pub(crate) threads: usize,
    pub(crate) flows: usize,
}

impl Share {
    /// The session's numbers of the thread's flows, in its own order.
    pub(crate) fn numbers(self) -> impl Iterator<Item = usize> {
        (0..self.flows).map(move |j| self.index + self.threads * j)
    }
}

/// One side of a pattern over `--flows`, as one data thread runs it for its flows. Nothing
/// called from the timed loop (`start`, `on_ready`, `next`, `progress`, `waits_on_peer`)
/// may allocate, log or lock.
pub(crate) trait Machine: Default + Send + 'static {
    /// The trial's parameters beyond the common [`Job`]'s (rate: the schedules).
    type Params: Copy + Default + Send + 'static;
    /// What a thread's trial adds up to beyond its flows' counts and histogram.
    type Out: Clone + Send + 'static;
    /// The side's threads send messages (they hold a send buffer of the message's size).
    const SENDS: bool;
    /// A server's threads end once every thread together counted the client's total of this;
    /// a client's (`None`) on their own clock.
    const TARGET: Option<Target>;
    /// Every flow waits for room to send at the start (a stream's sender), not for data.
    const WAITS_TO_SEND: bool = false;
    /// A thread with a single flow lets its calls block, for at most this long (ms),
    /// instead of waiting in epoll (a stream's: iperf2's thread per flow).
    const BLOCKS_MS: Option<i32> = None;

    /// Readies a trial outside the timed loop (it may allocate) for the thread's `share`.
    fn ready(&mut self, job: &Job<Self::Params>, share: Share);

    /// The timed loop starts at `now`: a client's first requests go out.
    fn start(&mut self, _t: &mut Flows, _job: &Job<Self::Params>, _now: Instant) -> io::Result<()> {
        Ok(())
    }

    /// Flow `i` is ready (data, room, or its peer closed): moves what it can.
    fn on_ready(&mut self, t: &mut Flows, i: usize, job: &Job<Self::Params>) -> io::Result<()>;

    /// After a round of ready flows, at `now`: sends what is due and says what comes next.
    fn next(&mut self, t: &mut Flows, job: &Job<Self::Params>, now: Instant) -> io::Result<Next>;

    /// What the thread counted so far: it only grows, and its growth is the thread's
    /// progress (a server's is its count toward the client's total).
    fn progress(&self) -> u64;

    /// The thread now waits on its peer: no progress for the idle limit is a stall.
    fn waits_on_peer(&self) -> bool;

    /// What a client thread says when its peer let it wait for the idle limit.
    fn stalled(&self) -> &'static str {
        "no progress on a flow within the timeout"
    }

    /// The trial's round trips or latencies, on a side that times them.
    fn hist(&self) -> Option<&LatencyHistogram> {
        None
    }

    /// The trial's figures beyond the flows' counts (after the loop).
    fn out(&self) -> Self::Out;
}
