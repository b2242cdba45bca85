//! Stream over `--flows`: each flow's state machine for the flows driver, and how its trials
//! fold into the point. The sender sends whole messages on every flow with room for the
//! trial's duration (a thread with one flow blocks in its sends instead, iperf2's way); the
//! receiver takes whatever each flow has until every thread together received the bytes the
//! client announced. A point's figure is the receivers' aggregate Mbit/s over their receive
//! span, beside the senders'.

use crate::error::NetError;
use crate::pattern::flows::client::{FlowsFold, PointEnd, Sums};
use crate::pattern::flows::machine::{Machine, Next, Share, Target};
use crate::pattern::flows::worker::{Flows, Job, Sent, TAIL_MS, WAIT_MS, WAIT_NS};
use crate::pattern::flows::{client, server, threads_memory};
use crate::pattern::{any_trial, Registration, TrialOutcome};
use crate::point::{bits_per_ns_to_mbps, estimate};
use netsweep_model::results::PointResult;
use netsweep_model::spec::Pattern;
use netsweep_model::stats::LatencyHistogram;
use std::io;
use std::time::Instant;

/// Stream over `--flows`: each flow sends for the trial time.
pub(crate) const FLOWS: Registration = Registration {
    pattern: Pattern::Stream,
    client: client::open::<Sending, Folding>,
    server: server::open::<Receiving>,
    check_trial: any_trial,
    server_memory: |s| threads_memory(s, false),
    flows: None,
};

/// Most calls on one ready flow before the thread turns to the next (fairness within a
/// thread; level-triggered epoll brings the flow back if it still has room or data).
const BURST: usize = 16;

/// The client's side: sends `size`-byte messages on every flow with room until the trial's
/// duration is up; counts every byte the stack accepted.
#[derive(Debug, Default)]
pub(crate) struct Sending {
    start: Option<Instant>,
    bytes: u64,
}

impl Machine for Sending {
    type Params = ();
    type Out = ();
    const SENDS: bool = true;
    const TARGET: Option<Target> = None;
    const WAITS_TO_SEND: bool = true;
    const BLOCKS_MS: Option<i32> = Some(WAIT_MS);

    fn ready(&mut self, _job: &Job<()>, _share: Share) {
        (self.start, self.bytes) = (None, 0);
    }

    fn start(&mut self, _t: &mut Flows, _job: &Job<()>, now: Instant) -> io::Result<()> {
        self.start = Some(now);
        Ok(())
    }

    #[inline]
    fn on_ready(&mut self, t: &mut Flows, i: usize, job: &Job<()>) -> io::Result<()> {
        let before = t.counts[i].bytes_sent;
        for _ in 0..BURST {
            if t.send_once(i, job.size)? != Sent::Whole {
                break;
            }
        }
        self.bytes += t.counts[i].bytes_sent - before;
        Ok(())
    }

    #[inline]
    fn next(&mut self, _t: &mut Flows, job: &Job<()>, now: Instant) -> io::Result<Next> {
        let start = self.start.unwrap_or(now);
        Ok(if now.duration_since(start) >= job.duration {
            Next::Done
        } else {
            Next::Wait(WAIT_NS)
        })
    }

    fn progress(&self) -> u64 {
        self.bytes
    }

    /// A sender never waits on its peer: a full socket only slows it (the receiver's idle
    /// limit catches a peer that stopped).
    fn waits_on_peer(&self) -> bool {
        false
    }

    fn out(&self) {}
}

/// The server's side: receives on every ready flow until the client has ended the trial and
/// all threads together received the bytes it announced, or nothing arrives for the idle
/// limit.
#[derive(Debug, Default)]
pub(crate) struct Receiving {
    bytes: u64,
}

impl Machine for Receiving {
    type Params = ();
    type Out = ();
    const SENDS: bool = false;
    const TARGET: Option<Target> = Some(Target::Bytes);
    const BLOCKS_MS: Option<i32> = Some(TAIL_MS);

    fn ready(&mut self, _job: &Job<()>, _share: Share) {
        self.bytes = 0;
    }

    #[inline]
    fn on_ready(&mut self, t: &mut Flows, i: usize, _job: &Job<()>) -> io::Result<()> {
        for _ in 0..BURST {
            let m = t.recv_some(i)?;
            self.bytes += m as u64;
            if m < t.rx.len() {
                break;
            }
        }
        Ok(())
    }

    #[inline]
    fn next(&mut self, _t: &mut Flows, _job: &Job<()>, _now: Instant) -> io::Result<Next> {
        Ok(Next::Wait(WAIT_NS))
    }

    fn progress(&self) -> u64 {
        self.bytes
    }

    fn waits_on_peer(&self) -> bool {
        true
    }

    fn out(&self) {}
}

/// How a stream's flows fold into the point: each trial's receivers' aggregate (the stop
/// rule's sample) over their receive span, and the senders' over their data time.
#[derive(Debug, Default)]
pub(crate) struct Folding {
    /// Per timed trial, the senders' aggregate Mbit/s.
    sender: Vec<f64>,
    /// The receivers' receive spans, ns.
    recv_ns: u64,
}

impl FlowsFold for Folding {
    const SERVER_TIMEOUT: &'static str = "the server timed out waiting for data on a flow";

    fn begin(&mut self, _size: usize) {
        (self.sender, self.recv_ns) = (Vec::new(), 0);
    }

    fn fold(
        &mut self,
        out: &TrialOutcome,
        _trial_hist: &LatencyHistogram,
        _sums: &mut Sums,
    ) -> Result<f64, NetError> {
        let (c, s) = (&out.client, &out.server);
        self.sender
            .push(bits_per_ns_to_mbps(c.bytes_sent, c.active_ns));
        self.recv_ns += s.recv_span_ns;
        Ok(bits_per_ns_to_mbps(s.bytes_received, s.recv_span_ns))
    }

    fn finish(&mut self, end: PointEnd<'_>) -> PointResult {
        let tally = end.tally;
        let throughput = estimate(end.samples);
        let (messages, moved) = (
            tally.client.messages_sent,
            (tally.client.bytes_sent, tally.server.bytes_received),
        );
        let mut p = tally.point(
            end.spec,
            end.timed.size,
            messages,
            throughput,
            end.stop_reason,
            moved,
        );
        let recv_ns = self.recv_ns;
        let mut figures = end.sums.figures(end.flows, "mbps", |_, server| {
            bits_per_ns_to_mbps(server.bytes_received, recv_ns)
        });
        figures.aggregate = throughput.mean;
        p.sender_mbps = Some(estimate(&self.sender));
        p.receiver_mbps = Some(throughput);
        p.flows = Some(figures);
        p
    }
}

#[cfg(test)]
mod tests {
    //! Stream threads over real socketpairs: a thread with one flow blocks in its calls (with
    //! the loop's timeouts) while threads sharing flows stay in epoll, and either way the
    //! receiving side counts every byte the sending side's stack accepted.

    use super::*;
    use crate::pattern::flows::pool::Pool;
    use crate::pattern::flows::testing::{self, pairs};
    use crate::pattern::flows::worker::Report;
    use netsweep_proto::messages::FlowCounters;
    use std::os::fd::RawFd;

    fn job(size: usize) -> Job<()> {
        testing::job(size, ())
    }

    /// Whether a descriptor blocks, and its send and receive timeouts in ms.
    type Mode = (bool, u64, u64);

    /// `fd`'s [`Mode`].
    fn mode(fd: RawFd) -> Mode {
        // SAFETY: fcntl and getsockopt on a descriptor the test's pools own; `tv` and `len`
        // live for the calls.
        unsafe {
            let blocking = libc::fcntl(fd, libc::F_GETFL) & libc::O_NONBLOCK == 0;
            let ms = |opt| {
                let mut tv: libc::timeval = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
                let rc = libc::getsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    (&mut tv as *mut libc::timeval).cast(),
                    &mut len,
                );
                assert_eq!(rc, 0);
                tv.tv_sec as u64 * 1000 + tv.tv_usec as u64 / 1000
            };
            (blocking, ms(libc::SO_SNDTIMEO), ms(libc::SO_RCVTIMEO))
        }
    }

    /// One stream trial of `flows` flows on `threads` threads per side: returns the bytes the
    /// senders counted per flow, those the receivers counted, and every descriptor's mode as
    /// the trial left it (sending ends first).
    fn stream_trial(flows: usize, threads: usize) -> (Vec<u64>, Vec<u64>, Vec<Mode>) {
        let (tx, rx, fds) = pairs(flows);
        let senders = Pool::<Sending>::spawn(tx, threads, None).unwrap();
        let receivers = Pool::<Receiving>::spawn(rx, threads, None).unwrap();
        let (sent, got) = testing::trial(&senders, &receivers, job(64 * 1024), |sent| {
            sent.iter()
                .flat_map(|r| r.flows.iter())
                .map(|f| f.bytes_sent)
                .sum()
        });
        let per_flow = |reports: &[Report<()>], f: fn(&FlowCounters) -> u64| {
            // Thread w's j-th flow is flow w + threads·j.
            let mut v = vec![0; flows];
            for (w, r) in reports.iter().enumerate() {
                for (j, c) in r.flows.iter().enumerate() {
                    v[w + threads * j] = f(c);
                }
            }
            v
        };
        let modes = (0..flows)
            .map(|i| mode(fds[2 * i]))
            .chain((0..flows).map(|i| mode(fds[2 * i + 1])))
            .collect();
        (
            per_flow(&sent, |c| c.bytes_sent),
            per_flow(&got, |c| c.bytes_received),
            modes,
        )
    }

    #[test]
    fn a_stream_thread_with_one_flow_blocks_and_counts_every_byte() {
        let (sent, got, modes) = stream_trial(3, 3);
        assert!(sent.iter().all(|&b| b > 0), "{sent:?}");
        assert_eq!(sent, got);
        // Senders wait at most WAIT_MS in a send, receivers TAIL_MS in a receive — as the
        // kernel keeps them: rounded up to its clock tick (4 ms at HZ=250).
        let near = |ms: u64, asked: i32| (asked as u64..asked as u64 + 10).contains(&ms);
        for (i, &(blocking, snd, rcv)) in modes.iter().enumerate() {
            let asked = if i < 3 { WAIT_MS } else { TAIL_MS };
            assert!(
                blocking && near(snd, asked) && near(rcv, asked),
                "{modes:?}"
            );
        }
    }

    #[test]
    fn a_stream_thread_carries_no_histogram() {
        // A histogram is ~270 KiB written whole: a stream thread per flow must not pay it.
        let job = job(64);
        let share = Share {
            index: 0,
            threads: 1,
            flows: 1,
        };
        let (mut s, mut r) = (Sending::default(), Receiving::default());
        s.ready(&job, share);
        r.ready(&job, share);
        assert!(s.hist().is_none() && r.hist().is_none());
    }

    #[test]
    fn stream_threads_sharing_flows_wait_in_epoll_and_count_every_byte() {
        let (sent, got, modes) = stream_trial(4, 2);
        assert!(sent.iter().all(|&b| b > 0), "{sent:?}");
        assert_eq!(sent, got);
        assert!(modes.iter().all(|&m| m == (false, 0, 0)), "{modes:?}");
    }
}
