//! An iperf3 server as the measurement loop's peer: each trial is one whole iperf3 test of
//! the trial's length, and its outcome — this client's measure and the server's report —
//! becomes both sides' counters in netsweep's terms, so the engine's tally and the stream
//! figures account for it as for any trial.

use crate::engine::peer::Peer;
use crate::error::NetError;
use crate::pattern::TrialOutcome;
use netsweep_iperf3::{run_test, Bound, Iperf3Error, TestOutcome, TestParams};
use netsweep_model::spec::{RunSpec, Transport};
use netsweep_proto::messages::{DatagramCounters, SideCounters, TrialSpec};
use std::net::SocketAddr;
use std::time::Duration;

use super::figures::StreamFigures;

/// How often a test is tried again while the server is still closing the last one.
const BUSY_RETRIES: u32 = 20;
/// How often a refused first connection is tried again (the server may be between another
/// client's tests; a port where nothing listens then fails within half a second).
const FIRST_CONTACT_RETRIES: u32 = 5;
/// The pause between those tries.
const BUSY_PAUSE: Duration = Duration::from_millis(100);

/// The iperf3 server trials run with.
pub(super) struct Iperf3Peer {
    addr: SocketAddr,
    udp: bool,
    reverse: bool,
    timeout: Duration,
    /// The server has answered once (a refused connection is then the gap between tests).
    served: bool,
}

impl Iperf3Peer {
    /// The peer at `addr` for `spec`'s run.
    pub(super) fn new(addr: SocketAddr, spec: &RunSpec) -> Self {
        Self {
            addr,
            udp: spec.transport == Transport::Udp,
            reverse: spec.reverse,
            timeout: Duration::from_nanos(spec.timeout_ns).max(Duration::from_secs(2)),
            served: false,
        }
    }

    /// Runs one test; iperf3 serves one test at a time, so while it is still closing the last
    /// one (it refuses, or closes a connection that arrives while it resets, or — between
    /// tests — its listening socket is briefly gone) the test is tried again a few times.
    fn test(&mut self, params: &TestParams, size: u64) -> Result<TestOutcome, NetError> {
        let mut retries = 0;
        loop {
            let e = match run_test(self.addr, params) {
                Ok(o) => {
                    self.served = true;
                    return Ok(o);
                }
                Err(e) => e,
            };
            if !try_again(&e, self.served, retries) {
                let tries = if retries > 0 {
                    format!(
                        " (after {} tries {} ms apart)",
                        retries + 1,
                        BUSY_PAUSE.as_millis()
                    )
                } else {
                    String::new()
                };
                return Err(NetError::PeerTool(format!(
                    "iperf3 server {}, size {size}: {e}{tries}",
                    self.addr
                )));
            }
            retries += 1;
            std::thread::sleep(BUSY_PAUSE);
        }
    }
}

/// Whether a test that failed with `e` is tried again, after `retries` tries: a server busy
/// with another test, or closing a connection that arrived while it reset, is tried up to
/// [`BUSY_RETRIES`] times. A refused (or reset) connection is the gap between two tests of a
/// server that has answered this run; before it has, it is tried only
/// [`FIRST_CONTACT_RETRIES`] times — the gap after another client's test (or this host's
/// last run) looks the same, but so does a port where nothing listens, which must fail fast.
fn try_again(e: &Iperf3Error, served: bool, retries: u32) -> bool {
    let limit = match e {
        Iperf3Error::Busy(_) => BUSY_RETRIES,
        Iperf3Error::Closed { doing } if doing.contains("PARAM_EXCHANGE") => BUSY_RETRIES,
        Iperf3Error::Connect { source, .. }
            if matches!(
                source.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset
            ) =>
        {
            if served {
                BUSY_RETRIES
            } else {
                FIRST_CONTACT_RETRIES
            }
        }
        _ => 0,
    };
    retries < limit
}

impl Peer for Iperf3Peer {
    type Pattern = StreamFigures;

    fn trial(
        &mut self,
        _figures: &mut StreamFigures,
        _n: u64,
        spec: &TrialSpec,
    ) -> Result<TrialOutcome, NetError> {
        let mut params = TestParams::new(
            self.udp,
            spec.size as usize,
            Bound::Duration(Duration::from_nanos(spec.duration_ns)),
            self.reverse,
        );
        params.timeout = self.timeout;
        let o = self.test(&params, spec.size)?;
        Ok(outcome(&o, self.reverse, self.udp))
    }
}

/// Seconds as nanoseconds (a negative or absent span is 0).
fn ns(secs: f64) -> u64 {
    (secs.max(0.0) * 1e9) as u64
}

/// CPU time from a share of a span, split into user and system as iperf3 reports them.
fn cpu_ns(side: &mut SideCounters, user_pct: f64, sys_pct: f64, span_ns: u64) {
    side.cpu_user_ns = (user_pct.max(0.0) / 100.0 * span_ns as f64) as u64;
    side.cpu_sys_ns = (sys_pct.max(0.0) / 100.0 * span_ns as f64) as u64;
}

/// One test's outcome as both sides' counters. The sender's rate is its bytes over its active
/// time; the receiver's its bytes over its receive span. Forward: the client sent for its
/// wall time; the server received what it reports over its own `end_time` less the settle
/// netsweep waited between its kernel's last acknowledgement and TEST_END (the server had
/// everything then). Reverse: the roles swap, and the server's time is its whole `end_time`
/// (it sends until TEST_END). The server's CPU is its whole process over its whole test,
/// setup included, as iperf3 reports it.
pub(super) fn outcome(o: &TestOutcome, reverse: bool, udp: bool) -> TrialOutcome {
    let c = &o.client;
    let s = o.server.stream();
    let server_bytes = s.bytes.unwrap_or(0);
    let server_ns = ns(s.end_time.unwrap_or(0.0) - s.start_time.unwrap_or(0.0));
    let client_ns = c.wall().as_nanos() as u64;
    // From the kernel's last acknowledgement to TEST_END the server had nothing left to read.
    let tail_ns = o.test_end_sent.duration_since(c.drained).as_nanos() as u64;
    let mut client = SideCounters {
        tcp_retransmits: c.retransmits,
        ..Default::default()
    };
    cpu_ns(&mut client, c.cpu_util[1], c.cpu_util[2], client_ns);
    let mut server = SideCounters::default();
    let r = &o.server;
    // A report with only the total counts it all as user time.
    let (user, sys) = match (r.cpu_util_user, r.cpu_util_system) {
        (None, None) => (r.cpu_util_total.unwrap_or(0.0), 0.0),
        (u, s) => (u.unwrap_or(0.0), s.unwrap_or(0.0)),
    };
    cpu_ns(&mut server, user, sys, server_ns);
    let jitter_ns = |s: Option<f64>| ns(s.unwrap_or(0.0));
    if reverse {
        client.bytes_received = c.bytes;
        client.messages_received = c.messages;
        client.recv_calls = c.calls;
        client.recv_span_ns = client_ns;
        client.active_ns = client_ns;
        client.datagrams = udp.then(|| DatagramCounters {
            received: c.messages,
            lost: c.lost.unwrap_or(0),
            reordered: c.out_of_order.unwrap_or(0),
            jitter_ns: jitter_ns(c.jitter_s),
            highest_seq: c.highest_seq.unwrap_or(0),
            ..Default::default()
        });
        server.bytes_sent = server_bytes;
        server.messages_sent = s.packets.unwrap_or(0);
        server.active_ns = server_ns;
    } else {
        client.bytes_sent = c.bytes;
        client.messages_sent = c.messages;
        client.send_calls = c.calls;
        client.active_ns = client_ns;
        server.bytes_received = server_bytes;
        server.recv_span_ns = server_ns.saturating_sub(tail_ns).max(1_000);
        server.active_ns = server_ns;
        // iperf3's `packets` is the highest sequence number it received; `errors` the gaps.
        let lost = s.errors.map(|e| e.max(0) as u64);
        server.messages_received = s.packets.unwrap_or(0).saturating_sub(lost.unwrap_or(0));
        server.datagrams = udp.then(|| DatagramCounters {
            received: server.messages_received,
            lost: lost.unwrap_or(0),
            jitter_ns: jitter_ns(s.jitter),
            highest_seq: s.packets.unwrap_or(0),
            ..Default::default()
        });
    }
    TrialOutcome {
        client,
        server,
        wall_ns: client_ns,
        // iperf3's control exchange is not timed: no round trip is claimed.
        control_rtt_ns: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_iperf3::{ClientMeasure, Role, ServerReport};
    use std::time::Instant;

    /// A busy server is waited for; a refused connection is waited for briefly before the
    /// server has answered (another client's test may be ending) and longer after; any other
    /// error ends the run at once.
    #[test]
    fn which_failures_are_tried_again_and_how_often() {
        let addr: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        let connect = |kind| Iperf3Error::Connect {
            addr,
            source: std::io::Error::from(kind),
        };
        let tries =
            |e: &Iperf3Error, served| (0..100).take_while(|&r| try_again(e, served, r)).count();
        let refused = connect(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(tries(&refused, false), FIRST_CONTACT_RETRIES as usize);
        assert_eq!(tries(&refused, true), BUSY_RETRIES as usize);
        assert_eq!(
            tries(&connect(std::io::ErrorKind::ConnectionReset), false),
            FIRST_CONTACT_RETRIES as usize
        );
        assert_eq!(
            tries(&Iperf3Error::Busy(addr), false),
            BUSY_RETRIES as usize
        );
        let resetting = Iperf3Error::Closed {
            doing: "waiting for PARAM_EXCHANGE".into(),
        };
        assert_eq!(tries(&resetting, false), BUSY_RETRIES as usize);
        let later = Iperf3Error::Closed {
            doing: "reading the results".into(),
        };
        assert_eq!(tries(&later, true), 0);
        assert_eq!(
            tries(&connect(std::io::ErrorKind::PermissionDenied), true),
            0
        );
    }

    /// A test in which this client moved `bytes` in 1 s, the kernel had them acknowledged at
    /// 1.0 s and TEST_END went out at 1.1 s; the server reports `report`.
    fn test(role: Role, bytes: u64, report: &str) -> TestOutcome {
        let start = Instant::now();
        let end = start + Duration::from_secs(1);
        TestOutcome {
            client: ClientMeasure {
                role,
                bytes,
                messages: bytes / 1000,
                calls: bytes / 1000,
                lost: (role == Role::Receiver).then_some(3),
                out_of_order: None,
                jitter_s: (role == Role::Receiver).then_some(0.000_25),
                highest_seq: None,
                retransmits: Some(7),
                send_retries: 0,
                start,
                end,
                drained: end,
                cpu_util: [30.0, 10.0, 20.0],
            },
            server: ServerReport::parse(report.as_bytes()).unwrap(),
            test_end_sent: end + Duration::from_millis(100),
        }
    }

    #[test]
    fn a_forward_tcp_test_is_the_clients_send_and_the_servers_receive_less_the_settle() {
        let r = r#"{"cpu_util_total":5,"cpu_util_user":1,"cpu_util_system":4,
            "streams":[{"bytes":1000000,"start_time":0,"end_time":1.1,"jitter":0}]}"#;
        let o = outcome(&test(Role::Sender, 1_250_000, r), false, false);
        assert_eq!(o.client.bytes_sent, 1_250_000);
        assert_eq!(o.client.active_ns, 1_000_000_000);
        assert_eq!(o.client.tcp_retransmits, Some(7));
        // 10 % user and 20 % system of the client's 1 s.
        assert_eq!(
            (o.client.cpu_user_ns, o.client.cpu_sys_ns),
            (100_000_000, 200_000_000)
        );
        assert_eq!(o.server.bytes_received, 1_000_000);
        // The server's 1.1 s less the 0.1 s between the last acknowledgement and TEST_END.
        assert!((o.server.recv_span_ns as i64 - 1_000_000_000).abs() < 1_000);
        assert_eq!(
            (o.server.cpu_user_ns, o.server.cpu_sys_ns),
            (11_000_000, 44_000_000)
        );
        // A TCP test keeps no datagram counts, whatever jitter the server's report carries.
        assert!(o.client.datagrams.is_none() && o.server.datagrams.is_none());
        assert_eq!(o.control_rtt_ns, 0);
    }

    #[test]
    fn a_forward_udp_test_counts_the_servers_gaps_as_lost() {
        let r = r#"{"cpu_util_total":2,"streams":[{"bytes":900000,"start_time":0,
            "end_time":1.1,"jitter":0.0005,"errors":4,"packets":1000}]}"#;
        let o = outcome(&test(Role::Sender, 1_000_000, r), false, true);
        let d = o.server.datagrams.expect("udp counts");
        assert_eq!((d.received, d.lost, d.highest_seq), (996, 4, 1000));
        assert_eq!(d.jitter_ns, 500_000);
        assert_eq!(o.server.messages_received, 996);
        // Only a total CPU share: all of it is counted as user time.
        assert_eq!((o.server.cpu_user_ns, o.server.cpu_sys_ns), (22_000_000, 0));
    }

    #[test]
    fn a_reverse_udp_test_is_the_servers_send_and_the_clients_receive() {
        let r = r#"{"streams":[{"bytes":2000000,"start_time":0,"end_time":1.2,
            "packets":2000}]}"#;
        let o = outcome(&test(Role::Receiver, 1_900_000, r), true, true);
        assert_eq!(
            (o.server.bytes_sent, o.server.messages_sent),
            (2_000_000, 2000)
        );
        assert_eq!(o.server.active_ns, 1_200_000_000);
        assert_eq!(o.client.bytes_received, 1_900_000);
        assert_eq!(o.client.recv_span_ns, 1_000_000_000);
        let d = o.client.datagrams.expect("udp counts");
        assert_eq!((d.lost, d.jitter_ns), (3, 250_000));
    }
}
