//! Tests of the flows data threads over real socketpairs: a stream thread with one flow
//! blocks in its calls (with the loops' timeouts) while threads sharing flows stay in epoll,
//! and either way the receiving side counts every byte the sending side's stack accepted.

use super::super::worker::{TAIL_MS, WAIT_MS};
use super::*;
use netsweep_proto::messages::{FlowCounters, GrantedKnobs};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::fd::RawFd;
use std::os::unix::net::UnixStream;

/// One end of a stream socketpair as an endpoint.
struct Sock(UnixStream);

impl Endpoint for Sock {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
    fn is_datagram(&self) -> bool {
        false
    }
    fn set_recv_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        self.0.set_read_timeout(t)
    }
    fn granted(&self) -> GrantedKnobs {
        GrantedKnobs::default()
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.0.as_raw_fd())
    }
}

type Ends = Vec<Box<dyn Endpoint>>;

/// `n` socketpairs: the sending ends, the receiving ends, and the descriptors of both.
fn pairs(n: usize) -> (Ends, Ends, Vec<RawFd>) {
    let (mut tx, mut rx, mut fds) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let (a, b) = UnixStream::pair().unwrap();
        fds.extend([a.as_raw_fd(), b.as_raw_fd()]);
        tx.push(Box::new(Sock(a)) as Box<dyn Endpoint>);
        rx.push(Box::new(Sock(b)) as Box<dyn Endpoint>);
    }
    (tx, rx, fds)
}

fn job(role: Role, size: usize) -> Job {
    Job {
        role,
        size,
        duration: Duration::from_millis(150),
        idle: Duration::from_secs(5),
        epoch: Instant::now(),
        rate: Default::default(),
    }
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
    let senders = Pool::spawn(tx, threads, None).unwrap();
    let receivers = Pool::spawn(rx, threads, None).unwrap();
    receivers
        .dispatch(job(Role::StreamRecv, 64 * 1024))
        .unwrap();
    senders.dispatch(job(Role::StreamSend, 64 * 1024)).unwrap();
    let sent = senders
        .collect(Duration::from_secs(10), |_| Duration::from_millis(5))
        .unwrap();
    let total: u64 = sent
        .iter()
        .flat_map(|r| r.flows.iter())
        .map(|f| f.bytes_sent)
        .sum();
    receivers.shared.end(total);
    let got = receivers
        .collect(Duration::from_secs(10), |_| Duration::from_millis(5))
        .unwrap();
    let per_flow = |reports: &[Report], f: fn(&FlowCounters) -> u64| {
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
fn stream_threads_sharing_flows_wait_in_epoll_and_count_every_byte() {
    let (sent, got, modes) = stream_trial(4, 2);
    assert!(sent.iter().all(|&b| b > 0), "{sent:?}");
    assert_eq!(sent, got);
    assert!(modes.iter().all(|&m| m == (false, 0, 0)), "{modes:?}");
}

#[test]
fn only_threads_that_time_requests_carry_a_histogram() {
    // A histogram is ~270 KiB written whole: a stream thread per flow must not pay it.
    let (tx, _rx, _) = pairs(1);
    let mut w = Worker::new(tx).unwrap();
    assert!(w.hist.is_none());
    for role in [
        Role::StreamSend,
        Role::StreamRecv,
        Role::RrServer,
        Role::RateServer,
    ] {
        w.ready(&job(role, 64), 0, 1).unwrap();
        assert!(w.hist.is_none(), "{role:?}");
    }
    w.ready(&job(Role::RrClient, 64), 0, 1).unwrap();
    assert_eq!(w.hist.as_ref().map(|h| h.count()), Some(0));
}
