//! Test support for the flows driver's machines (tests only): socketpairs as flows, and a
//! trial run on both sides' pools the way the client and the server run one.

use super::machine::Machine;
use super::pool::Pool;
use super::worker::{Job, Report};
use crate::testing::Sock;
use netsweep_endpoint::Endpoint;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A side's flows as endpoints.
pub(crate) type Ends = Vec<Box<dyn Endpoint>>;

/// `n` socketpairs: the client's ends, the server's ends, and the descriptors of both
/// (client, server, client, …).
pub(crate) fn pairs(n: usize) -> (Ends, Ends, Vec<RawFd>) {
    let (mut tx, mut rx, mut fds) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let (a, b) = UnixStream::pair().unwrap();
        fds.extend([a.as_raw_fd(), b.as_raw_fd()]);
        tx.push(Box::new(Sock::Stream(a)) as Box<dyn Endpoint>);
        rx.push(Box::new(Sock::Stream(b)) as Box<dyn Endpoint>);
    }
    (tx, rx, fds)
}

/// A job of `size`-byte messages for 150 ms, with the pattern's `params`.
pub(crate) fn job<P>(size: usize, params: P) -> Job<P> {
    Job {
        size,
        duration: Duration::from_millis(150),
        idle: Duration::from_secs(5),
        epoch: Instant::now(),
        params,
    }
}

/// Both sides' reports of a trial.
pub(crate) type Reports<C, S> = (Vec<Report<C>>, Vec<Report<S>>);

/// One trial of `C` (the client's machine) against `S` (the server's) on two pools of
/// `threads` threads, run as the sides run it: the server's threads end once the client's
/// announced total (`total` of the client's reports) has arrived. The pools stay up for the
/// caller to look at.
pub(crate) fn trial<C: Machine, S: Machine<Params = ()>>(
    client: &Pool<C>,
    server: &Pool<S>,
    job: Job<C::Params>,
    total: impl Fn(&[Report<C::Out>]) -> u64,
) -> Reports<C::Out, S::Out> {
    let Job {
        size,
        duration,
        idle,
        epoch,
        ..
    } = job;
    server.shared.reset();
    client.shared.reset();
    server
        .dispatch(Job {
            size,
            duration,
            idle,
            epoch,
            params: (),
        })
        .unwrap();
    client.dispatch(job).unwrap();
    let tick = |_: &_| Duration::from_millis(5);
    let sent = client.collect(Duration::from_secs(10), tick).unwrap();
    server.shared.end(total(&sent));
    let got = server.collect(Duration::from_secs(10), tick).unwrap();
    (sent, got)
}
