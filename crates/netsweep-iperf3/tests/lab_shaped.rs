//! netsweep-iperf3 against Debian's `iperf3 -s` in a namespace pair across a tbf-shaped veth:
//! the receiver rate the server reports agrees with the shaper's arithmetic (docs/lab.md:
//! rate × 1448/1514 for TCP/IPv4 at MTU 1500) when the machine is idle, and always with the
//! client's own figures and with what the receiving interface's counters say the path carried
//! over the same window.
//! Needs root and iperf3: ignored without them, run by ./run-tests as root.

mod common;

use common::{listening, require_iperf3, Server};
use netsweep_iperf3::{run_test, Bound, TestParams};
use netsweep_lab::Lab;
use netsweep_testkit::lab::idle::CpuWindow;
use netsweep_testkit::lab::link::{Dir, LinkSampler};
use netsweep_testkit::lab::{client_server, lab_test, run_id};
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

/// `iperf3 -s -1` inside `host`, listening on `addr`.
fn server_in(lab: &Lab, host: &str, addr: SocketAddr) -> Server {
    let mut c = lab
        .command(
            host,
            &[
                "iperf3",
                "-s",
                "-1",
                "-B",
                &addr.ip().to_string(),
                "-p",
                &addr.port().to_string(),
            ],
        )
        .unwrap();
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let mut s = Server {
        child: c.spawn().expect("spawning iperf3 in the lab"),
        addr,
    };
    let port = addr.port();
    let ns_listening = || lab.in_host(host, move || listening(port)).unwrap();
    assert!(
        s.wait_listening(ns_listening),
        "iperf3 -s did not come up in {host}"
    );
    s
}

/// Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12: the bytes of a frame that are not payload.
const TCP_FRAME_HEADERS: u64 = 66;

#[test]
#[ignore = "needs root (lab namespaces) and iperf3: ./run-tests runs it as root"]
fn server_reported_tcp_rate_matches_the_shaper_arithmetic() {
    require_iperf3();
    let _l = lab_test("iperf3_server_reported_tcp_rate");
    let lab = Lab::up(
        &client_server(
            r#"
mtu = 1500
rate = "100mbit"
"#,
        ),
        &run_id("iperf3"),
    )
    .unwrap();
    let ip = lab.address_for("client", "server").unwrap();
    let addr = SocketAddr::from((ip, netsweep_iperf3::DEFAULT_PORT));
    let link = lab.layout().links[0].name.clone();
    let expected = 100e6 * 1448.0 / 1514.0;
    for reverse in [false, true] {
        let mut srv = server_in(&lab, "server", addr);
        // About 4 s at the goodput, so the start (slow start, TEST_START before the first
        // byte) and the settle time weigh little.
        let bytes = (expected / 8.0 * 4.0) as u64 / 1448 * 1448;
        let mut p = TestParams::new(false, 128 * 1024, Bound::Bytes(bytes), reverse);
        p.timeout = Duration::from_secs(10);
        // The receiving end's interface counts what the path delivered, over the same window.
        let receiver = if reverse { "client" } else { "server" };
        let sampler = LinkSampler::start(
            lab.netns(receiver).unwrap(),
            Some(lab.interface(receiver, &link).unwrap()),
        )
        .unwrap();
        let cpu = CpuWindow::start();
        let o = lab
            .in_host("client", move || run_test(addr, &p))
            .unwrap()
            .unwrap();
        let busy = cpu.finish();
        let series = sampler.stop().unwrap();
        let s = o.server.stream();
        let server_rate =
            s.bytes.unwrap() as f64 * 8.0 / (s.end_time.unwrap() - s.start_time.unwrap());
        let c = &o.client;
        // The client's window: until the last byte was acknowledged (sender) or read.
        let (t0, t1) = (c.start, if reverse { c.end } else { c.drained });
        let client_rate = c.bytes as f64 * 8.0 / (t1 - t0).as_secs_f64();
        assert!(
            series.covers(t0, t1),
            "the counters cover the client's window"
        );
        let link_rate = series.payload_rate(Dir::Rx, t0, t1, TCP_FRAME_HEADERS);
        eprintln!(
            "reverse={reverse}: {} bytes; server {:.2} Mbit/s over {:.3} s, client {:.2} Mbit/s \
             over {:.3} s; the receiver's interface {:.2} Mbit/s of payload over the client's \
             window; shaper {:.2} Mbit/s; server cpu {:?} %, cc {:?}, retransmits {:?}; {busy}",
            c.bytes,
            server_rate / 1e6,
            s.end_time.unwrap(),
            client_rate / 1e6,
            (t1 - t0).as_secs_f64(),
            link_rate / 1e6,
            expected / 1e6,
            o.server.cpu_util_total,
            o.server.congestion_used,
            s.retransmits,
        );
        assert_eq!(
            s.bytes,
            Some(c.bytes),
            "reverse={reverse}: server and client bytes"
        );
        assert!(c.bytes >= bytes);
        // Both tools' rates against the kernel's count of what the path carried: the client's
        // over exactly its window (retransmitted segments cross the link twice: 2%), the
        // server's over its own, a few milliseconds apart from it.
        for (who, r, tolerance) in [("client", client_rate, 0.02), ("server", server_rate, 0.03)] {
            assert!(
                (r / link_rate - 1.0).abs() < tolerance,
                "reverse={reverse}: {who} rate {:.2} Mbit/s vs {:.2} delivered by the link \
                 (its interface counters)",
                r / 1e6,
                link_rate / 1e6
            );
        }
        // The shaper's arithmetic holds only on an idle machine: a busy one delays the
        // shaper's dequeue and the path delivers less (the counters above still agree).
        if busy.idle_enough() {
            for (who, r) in [("server", server_rate), ("client", client_rate)] {
                assert!(
                    (r / expected - 1.0).abs() < 0.03,
                    "reverse={reverse}: {who} rate {:.2} Mbit/s vs the shaper's {:.2} on an \
                     idle machine ({busy})",
                    r / 1e6,
                    expected / 1e6
                );
            }
        } else {
            eprintln!(
                "reverse={reverse}: SKIPPED the check against the shaper's arithmetic ({:.2} \
                 Mbit/s): the machine was not idle: {busy}",
                expected / 1e6
            );
        }
        assert!(srv.exited(), "iperf3 -s -1 exits after its test");
    }
    lab.down().unwrap();
}
