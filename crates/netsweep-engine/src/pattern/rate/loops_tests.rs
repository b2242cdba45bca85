//! Tests of the rate loops over a real socketpair: one thread sends on the schedule and
//! reads every reply, and a peer that stops reading ends the trial with an error instead of
//! a hang.

use super::*;
use netsweep_model::load::Arrivals;
use netsweep_proto::messages::GrantedKnobs;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;

/// A datagram socket of a socketpair as an endpoint.
struct Dgram(UnixDatagram);

impl Endpoint for Dgram {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send(buf)
    }
    fn send_nowait(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
        let n = unsafe {
            libc::send(
                self.0.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.recv(buf)
    }
    fn is_datagram(&self) -> bool {
        true
    }
    fn set_recv_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        self.0.set_read_timeout(t)
    }
    fn granted(&self) -> GrantedKnobs {
        GrantedKnobs::default()
    }
}

const SIZE: usize = 64;

fn plans(duration_ns: u64, cap: u64) -> (SendPlan, RecvPlan) {
    let epoch = Instant::now();
    let send = SendPlan {
        size: SIZE,
        duration_ns,
        cap,
        cookie: 7,
        epoch,
    };
    let recv = RecvPlan {
        size: SIZE,
        cookie: 7,
        epoch,
        grace_ns: 200_000_000,
        timeout_ns: 100_000_000,
        interval_ns: u64::MAX,
        window_ns: duration_ns,
    };
    (send, recv)
}

/// Runs one datagram trial on this thread at `rate` for `duration_ns`.
fn one_thread_trial(
    ep: &mut Dgram,
    rate: f64,
    duration_ns: u64,
) -> (io::Result<Sent>, Received, LatencyHistogram) {
    let cap = 64 * 64;
    let (send, recv) = plans(duration_ns, cap);
    let (mut hist, mut lateness) = (LatencyHistogram::new(), LatencyHistogram::new());
    let mut seen = vec![0u64; 64];
    let mut buckets = vec![Bucket::default()];
    let mut sent_buckets = [0u64; 1];
    let mut tl = Timeline {
        interval_ns: u64::MAX,
        sent: &mut sent_buckets,
    };
    let mut sched = Schedule::new(rate, Arrivals::Constant, 1);
    let (mut tx, mut rx) = (vec![0u8; SIZE], vec![0u8; SIZE + 1]);
    ep.set_recv_timeout(Some(Duration::from_millis(5))).unwrap();
    let fd = ep.0.as_raw_fd();
    let mut replies = Replies::new(&recv, true, &mut hist, &mut seen, &mut buckets);
    let waiting = Waiting::Read {
        replies: &mut replies,
        rx: &mut rx,
        fd,
        timeout_ns: recv.timeout_ns,
    };
    let sent = sender(
        ep,
        &mut tx,
        &send,
        &mut sched,
        &mut lateness,
        &mut tl,
        waiting,
    );
    if let Ok(s) = &sent {
        let n = s.counters.messages_sent;
        replies.drain(ep, &mut rx, || Some(n)).unwrap();
    }
    let got = replies.finish();
    (sent, got, lateness)
}

#[test]
fn one_thread_sends_on_the_schedule_and_accounts_every_reply() {
    let (client, server) = UnixDatagram::pair().unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut n = 0u64;
        while let Ok(len) = server.recv(&mut buf) {
            server.send(&buf[..len]).unwrap();
            n += 1;
        }
        n
    });
    let mut ep = Dgram(client);
    // 2000 requests/s for 100 ms: 200 requests.
    let (sent, got, lateness) = one_thread_trial(&mut ep, 2000.0, 100_000_000);
    let sent = sent.unwrap();
    drop(ep);
    let echoed = echo.join().unwrap();
    assert_eq!(sent.counters.messages_sent, 200);
    assert_eq!(echoed, 200);
    assert_eq!(got.received, 200, "{got:?}");
    assert_eq!((got.late, got.duplicates), (0, 0));
    assert_eq!(got.counters.messages_received, 200);
    assert_eq!(lateness.count(), 200);
    // Every reply arrived within the schedule's window: counted by a checkpoint.
    assert_eq!(got.arrived_at.iter().sum::<u64>(), 200);
}

#[test]
fn a_peer_that_stops_reading_ends_the_trial_with_an_error_not_a_hang() {
    // The peer never reads: its receive queue fills (net.unix.max_dgram_qlen), the socket
    // stops taking requests, and the sender gives up after the plan's timeout.
    let (client, _peer) = UnixDatagram::pair().unwrap();
    let mut ep = Dgram(client);
    let (sent, got, _) = one_thread_trial(&mut ep, 100_000.0, 2_000_000_000);
    let err = sent.expect_err("a full queue must end the trial");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    assert!(err.to_string().contains("took no request"), "{err}");
    assert_eq!(got.received, 0);
}
