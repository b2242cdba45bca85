//! The echo over `--flows`, the server's side of pingpong and rate: each flow's state
//! machine answers every complete request with a message of the same size — for rate
//! (`STAMP`) one that starts with the request's stamp — until the client has ended the trial
//! and every thread together received every request it sent.

use crate::pattern::dgram::HEADER;
use crate::pattern::flows::machine::{Machine, Next, Share, Target};
use crate::pattern::flows::worker::{Flows, Job, WAIT_NS};
use std::io;
use std::time::Instant;

/// The echo of one data thread's flows; `STAMP`: each answer carries its request's stamp.
#[derive(Debug, Default)]
pub(crate) struct Echo<const STAMP: bool> {
    /// Per flow: an answer is partly sent.
    sending: Vec<bool>,
    requests: u64,
}

impl<const STAMP: bool> Echo<STAMP> {
    /// Sends what is left of flow `i`'s answer.
    #[inline]
    fn answer(&mut self, t: &mut Flows, i: usize, size: usize) -> io::Result<()> {
        if STAMP {
            // The send buffer is shared by the thread's flows: stamp it with this request's.
            let n = size.min(HEADER);
            t.tx[..n].copy_from_slice(&t.state[i].hdr[..n]);
        }
        if t.push(i, size, false)? {
            self.sending[i] = false;
        }
        Ok(())
    }
}

impl<const STAMP: bool> Machine for Echo<STAMP> {
    type Params = ();
    type Out = ();
    const SENDS: bool = true;
    const TARGET: Option<Target> = Some(Target::Requests);

    fn ready(&mut self, _job: &Job<()>, share: Share) {
        self.sending.clear();
        self.sending.resize(share.flows, false);
        self.requests = 0;
    }

    #[inline]
    fn on_ready(&mut self, t: &mut Flows, i: usize, job: &Job<()>) -> io::Result<()> {
        if self.sending[i] {
            self.answer(t, i, job.size)?;
        } else if t.pull(i, job.size)? {
            self.requests += 1;
            self.sending[i] = true;
            self.answer(t, i, job.size)?;
        }
        Ok(())
    }

    #[inline]
    fn next(&mut self, _t: &mut Flows, _job: &Job<()>, _now: Instant) -> io::Result<Next> {
        Ok(Next::Wait(WAIT_NS))
    }

    fn progress(&self) -> u64 {
        self.requests
    }

    fn waits_on_peer(&self) -> bool {
        true
    }

    fn out(&self) {}
}
