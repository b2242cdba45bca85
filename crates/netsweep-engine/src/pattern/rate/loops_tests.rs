//! Tests of the rate loop over real socketpairs (datagram and stream): one thread sends on
//! the schedule and reads every reply, and a peer that stops reading ends the trial with an
//! error instead of a hang.

use super::*;
use crate::testing::Sock;
use netsweep_model::load::Arrivals;
use std::io::{Read, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::time::Duration;

/// Runs one trial on this thread at `rate` for `duration_ns` with `size`-byte requests; the
/// sender gives up on a socket that takes nothing for `timeout_ns`.
fn one_thread_trial(
    ep: &mut Sock,
    size: usize,
    rate: f64,
    duration_ns: u64,
    timeout_ns: u64,
) -> (io::Result<Sent>, Received, LatencyHistogram) {
    trial_with_storage(ep, size, rate, duration_ns, timeout_ns, 64 * 64)
}

/// [`one_thread_trial`] with room for `cap` requests (a multiple of 64).
fn trial_with_storage(
    ep: &mut Sock,
    size: usize,
    rate: f64,
    duration_ns: u64,
    timeout_ns: u64,
    cap: u64,
) -> (io::Result<Sent>, Received, LatencyHistogram) {
    trial_on(ep, size, (rate, duration_ns, timeout_ns, cap), None)
}

/// A trial of `size`-byte requests at (rate, duration, timeout, storage), `--one-way`
/// stamped on `wall` when given.
fn trial_on(
    ep: &mut Sock,
    size: usize,
    (rate, duration_ns, timeout_ns, cap): (f64, u64, u64, u64),
    wall: Option<WallClock>,
) -> (io::Result<Sent>, Received, LatencyHistogram) {
    let epoch = Instant::now();
    let send = SendPlan {
        size,
        duration_ns,
        cap,
        cookie: 7,
        epoch,
        wall,
    };
    let recv = RecvPlan {
        size,
        cookie: 7,
        epoch,
        // A reply is late after 10 s: never, unless the host stalls that long. The wait for
        // replies ends as soon as every one is in.
        grace_ns: 10_000_000_000,
        timeout_ns,
        interval_ns: u64::MAX,
        window_ns: duration_ns,
        wall,
    };
    let (mut hist, mut lateness) = (LatencyHistogram::new(), LatencyHistogram::new());
    let mut seen = vec![0u64; (cap / 64) as usize];
    let mut buckets = vec![Bucket::default()];
    let mut sent_buckets = [0u64; 1];
    let mut tl = Timeline {
        interval_ns: u64::MAX,
        sent: &mut sent_buckets,
    };
    let mut sched = Schedule::new(rate, Arrivals::Constant, 1);
    let (mut tx, mut rx) = (vec![0u8; size], vec![0u8; size + 1]);
    ep.set_recv_timeout(Some(Duration::from_millis(5))).unwrap();
    let datagram = ep.is_datagram();
    let fd = ep.fd();
    let mut replies = Replies::new(&recv, datagram, &mut hist, &mut seen, &mut buckets);
    let reading = Reading {
        replies: &mut replies,
        rx: &mut rx,
        fd,
    };
    let sent = sender(
        ep,
        &mut tx,
        &send,
        &mut sched,
        &mut lateness,
        &mut tl,
        reading,
    );
    if let Ok(s) = &sent {
        replies
            .drain(ep, &mut rx, s.counters.messages_sent)
            .unwrap();
    }
    (sent, replies.finish(), lateness)
}

/// Echoes every message (datagram) or every byte (stream) until the client says it is done
/// (an empty datagram, or the stream's end); 10 s of silence is a failure.
fn echo(peer: Sock) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        let mut moved = 0u64;
        let silence = Some(Duration::from_secs(10));
        match peer {
            Sock::Dgram(s) => {
                s.set_read_timeout(silence).unwrap();
                loop {
                    let n = s.recv(&mut buf).expect("the client says when it is done");
                    if n == 0 {
                        break;
                    }
                    s.send(&buf[..n]).unwrap();
                    moved += 1;
                }
            }
            Sock::Stream(mut s) => {
                s.set_read_timeout(silence).unwrap();
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    s.write_all(&buf[..n]).unwrap();
                    moved += n as u64;
                }
            }
        }
        moved
    })
}

/// 2000 requests/s for 100 ms: 200 requests, each answered, none late or lost. Counts only:
/// how late a reply may come depends on how the host schedules the two threads, so every
/// bound on time here is far beyond any stall (where a reply lands by time is tested with
/// given times in `replies_land_by_their_arrival_and_intended_send_times`).
fn every_reply_is_accounted(client: Sock, peer: Sock, size: usize, echoed_per_request: u64) {
    let server = echo(peer);
    let mut ep = client;
    let (sent, got, lateness) =
        one_thread_trial(&mut ep, size, 2000.0, 100_000_000, 10_000_000_000);
    let sent = sent.unwrap();
    if let Sock::Dgram(s) = &ep {
        s.send(&[]).unwrap();
    }
    drop(ep);
    let echoed = server.join().unwrap();
    assert_eq!(sent.counters.messages_sent, 200);
    assert_eq!(sent.counters.bytes_sent, 200 * size as u64);
    assert_eq!(echoed, 200 * echoed_per_request);
    assert_eq!(got.answers.received, 200, "{got:?}");
    assert_eq!((got.answers.late, got.answers.duplicates), (0, 0));
    assert_eq!(got.counters.messages_received, 200);
    assert_eq!(got.counters.bytes_received, 200 * size as u64);
    assert_eq!(lateness.count(), 200);
    // Replies that came after the schedule's last checkpoint (a stalled echo) are not in it.
    assert!(got.answers.arrived_at.iter().sum::<u64>() <= 200, "{got:?}");
}

#[test]
fn one_thread_sends_on_the_schedule_and_accounts_every_datagram_reply() {
    let (client, peer) = UnixDatagram::pair().unwrap();
    every_reply_is_accounted(Sock::Dgram(client), Sock::Dgram(peer), 64, 1);
}

#[test]
fn one_thread_sends_on_the_schedule_and_accounts_every_stream_reply() {
    // 100 KiB requests overflow the socket buffers: sends go out in parts while the
    // replies are read between them.
    let (client, peer) = UnixStream::pair().unwrap();
    let size = 100 * 1024;
    every_reply_is_accounted(Sock::Stream(client), Sock::Stream(peer), size, size as u64);
}

/// The peer never reads: its queue fills, the socket stops taking requests, and the sender
/// gives up after the plan's timeout instead of blocking.
fn a_silent_peer_ends_the_trial(client: Sock, size: usize) {
    let mut ep = client;
    let (sent, got, _) = one_thread_trial(&mut ep, size, 100_000.0, 2_000_000_000, 100_000_000);
    let err = sent.expect_err("a full queue must end the trial");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    assert!(err.to_string().contains("socket stayed full"), "{err}");
    assert_eq!(got.answers.received, 0);
}

#[test]
fn a_datagram_peer_that_stops_reading_ends_the_trial_with_an_error_not_a_hang() {
    let (client, _peer) = UnixDatagram::pair().unwrap();
    a_silent_peer_ends_the_trial(Sock::Dgram(client), 64);
}

#[test]
fn a_stream_peer_that_stops_reading_ends_the_trial_with_an_error_not_a_hang() {
    let (client, _peer) = UnixStream::pair().unwrap();
    a_silent_peer_ends_the_trial(Sock::Stream(client), 4096);
}

/// Where replies land, at given arrival times (no clock, no threads): by checkpoint of their
/// arrival (shifted by the smallest latency seen), a duplicate and a reply past the grace
/// period counted apart, one past the last checkpoint in no checkpoint.
#[test]
fn replies_land_by_their_arrival_and_intended_send_times() {
    let plan = RecvPlan {
        size: 64,
        cookie: 7,
        epoch: Instant::now(),
        grace_ns: 5_000,
        timeout_ns: 0,
        interval_ns: u64::MAX,
        // Checkpoints at 9000, 10000, … 16000 ns.
        window_ns: 16_000,
        wall: None,
    };
    let (mut hist, mut seen, mut buckets) = (
        LatencyHistogram::new(),
        vec![0u64; 1],
        vec![Bucket::default()],
    );
    let mut replies = Replies::new(&plan, true, &mut hist, &mut seen, &mut buckets);
    let msg = |seq: u64, due: u64| {
        let mut m = vec![0u8; 64];
        crate::pattern::dgram::stamp(&mut m, 7, seq, due);
        m
    };
    // (seq, intended send time, arrival): the first sets the smallest latency, 100 ns.
    for (seq, due, now) in [
        (0, 0, 100),
        (1, 9_000, 9_150),
        (2, 15_000, 16_100),
        (3, 15_500, 16_101),
        (1, 9_000, 9_300),
        (4, 1_000, 7_000),
    ] {
        replies.reply_at(&msg(seq, due), now);
    }
    let got = replies.finish();
    assert_eq!(got.answers.arrived_at, [2, 1, 0, 0, 0, 0, 0, 1]);
    assert_eq!(
        (
            got.answers.received,
            got.answers.duplicates,
            got.answers.late
        ),
        (5, 1, 1)
    );
    assert_eq!(got.counters.messages_received, 6);
    // The histogram holds the answers within the grace period: every one but seq 4's.
    assert_eq!(hist.count(), 4);
}

/// A rate far above what the path carries (1e9 requests/s, storage for 64 Mi of them): the
/// trial ends at its 200 ms deadline whatever the schedule still owes, not when the sender
/// has caught up with it (minutes), and the delivered rate is a fraction of what was due,
/// not of what was sent.
#[test]
fn a_rate_beyond_the_path_ends_the_trial_at_its_deadline() {
    let (client, peer) = UnixStream::pair().unwrap();
    let server = echo(Sock::Stream(peer));
    let mut ep = Sock::Stream(client);
    let t0 = Instant::now();
    let (sent, got, _) = trial_with_storage(&mut ep, 64, 1e9, 200_000_000, 10_000_000_000, 1 << 26);
    let took = t0.elapsed();
    drop(ep);
    server.join().unwrap();
    let sent = sent.unwrap();
    assert!(
        took < Duration::from_secs(3),
        "a 200 ms trial took {took:?}"
    );
    assert!(sent.cut && !sent.truncated, "{sent:?}");
    assert_eq!(got.answers.received, sent.counters.messages_sent);
    // 2e8 requests were due by the end; far fewer went out.
    let due = sent.due_by[CHECKPOINTS - 1];
    assert!(due > 100_000_000, "{due}");
    assert!(sent.counters.messages_sent < due / 10, "{sent:?}");
}

/// `--one-way` over a datagram pair whose echoing peer stamps on a clock 5 ms ahead (the
/// server's slots after the 20-byte header): every reply on time is timed, both directions
/// read the offset (+5 ms up, −5 ms down, to within the threads' scheduling), and the round
/// trips' offset estimate brackets it. Replies of a peer that does not stamp are counted
/// unstamped, with no delays.
#[test]
fn one_way_stamps_follow_the_header_and_read_the_peers_clock_offset() {
    use netsweep_proto::stamps::{fits, RATE_OFFSET};
    const AHEAD: i64 = 5_000_000;
    let run = |stamping: bool| {
        let (client, peer) = UnixDatagram::pair().unwrap();
        let server = std::thread::spawn(move || {
            let wall = WallClock::now();
            let mut buf = [0u8; 256];
            peer.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            loop {
                let n = peer
                    .recv(&mut buf)
                    .expect("the client says when it is done");
                if n == 0 {
                    break;
                }
                if stamping && fits(n, RATE_OFFSET) {
                    let now = wall.at(Instant::now()) + AHEAD;
                    oneway::stamp_echo(&mut buf[..n], RATE_OFFSET, now, now);
                }
                peer.send(&buf[..n]).unwrap();
            }
        });
        let mut ep = Sock::Dgram(client);
        let plan = (2000.0, 100_000_000, 10_000_000_000, 64 * 64);
        let (sent, got, _) = trial_on(&mut ep, 64, plan, Some(WallClock::now()));
        assert_eq!(sent.unwrap().counters.messages_sent, 200);
        if let Sock::Dgram(s) = &ep {
            s.send(&[]).unwrap();
        }
        server.join().unwrap();
        got
    };
    let got = run(true);
    assert_eq!(got.answers.received, 200, "{got:?}");
    let o = got.one_way.figures().expect("stamped replies");
    assert_eq!((o.messages, got.one_way.unstamped), (200, 0));
    // Each direction: the offset plus a delay of the two threads (≥ 0, and far below 5 ms
    // unless the host stalls a thread that long: the least of 200 does not).
    let ms = 1e6;
    assert!((o.to_server_ns.min - 5.0 * ms).abs() < 2.0 * ms, "{o:?}");
    assert!((o.to_client_ns.min + 5.0 * ms).abs() < 2.0 * ms, "{o:?}");
    assert!(o.to_server_ns.mean >= o.to_server_ns.min, "{o:?}");
    assert!(
        (o.clock_offset_ns - 5.0 * ms).abs() <= o.clock_offset_bound_ns + 1e3,
        "{o:?}"
    );
    let plain = run(false);
    assert!(plain.one_way.figures().is_none());
    assert_eq!(plain.one_way.unstamped, 200);
    assert!(plain
        .one_way
        .note(64, RATE_OFFSET)
        .unwrap()
        .contains("unstamped"));
    assert!(got
        .one_way
        .note(43, RATE_OFFSET)
        .unwrap()
        .contains("at least 44 B"));
}
