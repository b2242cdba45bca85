//! Knobs take effect (getsockopt read-back, a zero UDP checksum seen on the wire), zerocopy
//! completions are counted consistently, and the packet transport works across a veth pair
//! between two namespaces, its loss equal to a known number of induced drops.

use crate::common::*;
use netsweep_model::spec::{Api, Pattern, Transport};
use netsweep_proto::messages::Knobs;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

#[test]
#[ignore = "needs root (CAP_NET_ADMIN: SO_BUSY_POLL, congestion controls outside \
            tcp_allowed_congestion_control): ./run-tests runs it as root"]
fn tcp_knobs_read_back() {
    require_root("tcp_knobs_read_back");
    let avail = netsweep_transport::knobs::available_congestion_control();
    for cc in ["cubic", "reno"] {
        // reno is built in; cubic is Linux's default (built in on Debian kernels).
        assert!(
            avail.contains(cc),
            "congestion control {cc} is unavailable (available: {avail}): modprobe tcp_{cc}"
        );
        let k = Knobs {
            tos: Some(0x28),
            priority: Some(5),
            busy_poll: Some(50),
            congestion_control: Some(cc.into()),
            pmtu: Some("do".into()),
            nodelay: Some(false),
            notsent_lowat: Some(16384),
            pacing_rate: Some(200_000_000),
            ..Default::default()
        };
        let s = setup(Transport::Tcp, Api::Basic, Pattern::Pingpong, 64, &k);
        let (c, srv) = pair(&s, &k).expect("tcp pair");
        for (side, g) in [("client", c.granted()), ("server", srv.granted())] {
            assert_eq!(g.tos, Some(0x28), "{side}: {g:?}");
            assert_eq!(g.priority, Some(5), "{side}");
            assert_eq!(g.busy_poll, Some(50), "{side}");
            assert_eq!(g.congestion_control.as_deref(), Some(cc), "{side}");
            assert_eq!(g.pmtu.as_deref(), Some("do"), "{side}");
            assert_eq!(g.nodelay, Some(false), "{side}");
            assert_eq!(g.notsent_lowat, Some(16384), "{side}");
            assert_eq!(g.pacing_rate, Some(200_000_000), "{side}");
            assert!(g.path_mtu.unwrap_or(0) >= 1500, "{side}: {g:?}");
        }
    }
}

#[test]
fn udp_knobs_read_back_and_inapplicable_ones_are_noted() {
    let k = Knobs {
        tos: Some(0xb8),
        priority: Some(3),
        no_check: Some(true),
        pmtu: Some("dont".into()),
        congestion_control: Some("cubic".into()),
        notsent_lowat: Some(16384),
        pacing_rate: Some(100_000_000),
        ..Default::default()
    };
    let s = setup(Transport::Udp, Api::Basic, Pattern::Pingpong, 64, &k);
    let (c, srv) = pair(&s, &k).expect("udp pair");
    for g in [c.granted(), srv.granted()] {
        assert_eq!(g.tos, Some(0xb8));
        assert_eq!(g.priority, Some(3));
        assert_eq!(g.no_check, Some(true));
        assert_eq!(g.pmtu.as_deref(), Some("dont"));
        assert!(
            g.notes
                .iter()
                .any(|n| n.starts_with("cc does not apply to udp")),
            "{:?}",
            g.notes
        );
        assert_eq!(g.notsent_lowat, None);
        assert_eq!(g.pacing_rate, None);
        assert!(
            g.notes
                .iter()
                .any(|n| n.starts_with("pacing-rate does not apply to udp")),
            "{:?}",
            g.notes
        );
        assert!(
            g.notes
                .iter()
                .any(|n| n.starts_with("notsent-lowat does not apply to udp")),
            "{:?}",
            g.notes
        );
    }
    // The kernel refuses priorities above 6 only without CAP_NET_ADMIN.
    let k = Knobs {
        priority: Some(7),
        ..Default::default()
    };
    let s = setup(Transport::Udp, Api::Basic, Pattern::Pingpong, 64, &k);
    match pair(&s, &k) {
        Ok((c, _)) => assert_eq!(c.granted().priority, Some(7)),
        Err(e) => assert!(e.to_string().contains("CAP_NET_ADMIN"), "{e}"),
    }
}

/// Captures UDP datagrams to `port` on `lo` of the current namespace; returns their checksums.
fn capture_udp_checksums(
    port: u16,
    send: impl FnOnce() -> std::io::Result<()>,
) -> std::io::Result<Vec<u16>> {
    let proto = (libc::ETH_P_IP as u16).to_be() as libc::c_int;
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let sock = socket2::Socket::from(fd);
    sock.set_read_timeout(Some(Duration::from_millis(300)))?;
    send()?;
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline && out.len() < 2 {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            break;
        }
        let f = &buf[..n as usize];
        // Ethernet (14) + IPv4 (IHL) + UDP.
        if f.len() < 14 + 20 + 8 || f[14 + 9] != 17 {
            continue;
        }
        let ihl = usize::from(f[14] & 0x0f) * 4;
        let udp = &f[14 + ihl..];
        if u16::from_be_bytes([udp[2], udp[3]]) == port {
            out.push(u16::from_be_bytes([udp[6], udp[7]]));
        }
    }
    Ok(out)
}

#[test]
#[ignore = "needs root (namespaces and AF_PACKET): ./run-tests runs it as root"]
fn no_check_datagrams_carry_a_zero_udp_checksum() {
    let _l = root_test("no_check_datagrams_carry_a_zero_udp_checksum");
    let ns = Netns::new().expect("netns");
    let sums = in_ns(Some(&ns.0), || {
        let mut sums = Vec::new();
        for no_check in [true, false] {
            let rx = UdpSocket::bind("127.0.0.1:0")?;
            let port = rx.local_addr()?.port();
            let k = Knobs {
                no_check: Some(no_check),
                ..Default::default()
            };
            let s = setup(Transport::Udp, Api::Basic, Pattern::Pingpong, 64, &k);
            // The pair's own cookie exchange happens first; then one datagram to `port`.
            let (c, _srv) = pair(&s, &k)?;
            let g = c.granted();
            assert_eq!(g.no_check, Some(no_check));
            let tx = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
            netsweep_transport::knobs::apply(&tx, &k, Transport::Udp, false)?;
            let dst: SocketAddr = (IpAddr::from([127, 0, 0, 1]), port).into();
            let got = capture_udp_checksums(port, || {
                tx.send_to(b"netsweep no-check probe", &dst.into())
                    .map(drop)
            })?;
            sums.push((no_check, got));
        }
        Ok(sums)
    })
    .expect("capture in namespace");
    for (no_check, got) in sums {
        assert!(!got.is_empty(), "captured nothing (no_check {no_check})");
        if no_check {
            assert!(got.iter().all(|&c| c == 0), "no_check: checksums {got:?}");
        } else {
            assert!(got.iter().all(|&c| c != 0), "checksummed: {got:?}");
        }
    }
}

#[test]
fn zerocopy_completions_are_counted_consistently() {
    for t in [Transport::Tcp, Transport::Udp] {
        let p = netsweep_transport::probe_api(t, Api::Zerocopy);
        assert!(p.available, "{t} zerocopy must work here: {:?}", p.reason);
        let s = setup(t, Api::Zerocopy, Pattern::Pingpong, 8192, &Knobs::default());
        let (mut c, srv) = pair(&s, &Knobs::default()).expect("pair");
        let (ct, sc, mut srv) = pingpong(&mut c, srv, 8192, 200, 0).expect("pingpong");
        assert_eq!(ct.completed, 200);
        for (side, st, sends) in [
            ("client", c.stats(), ct.counters.send_calls),
            ("server", srv.stats(), sc.send_calls),
        ] {
            eprintln!(
                "{t} zerocopy {side}: {sends} sends, {} completions, {} copied",
                st.zerocopy_completions, st.zerocopy_copied
            );
            assert_eq!(
                st.zerocopy_completions, sends,
                "{t} {side}: completions == zerocopy sends"
            );
            assert!(st.zerocopy_copied <= st.zerocopy_completions);
            assert!(st.zerocopy_completions > 0);
        }
        if t == Transport::Tcp {
            assert!(c.stats().tcp_retransmits.is_some(), "TCP_INFO read");
        }
    }
}

#[test]
#[ignore = "needs root (namespaces and CAP_NET_RAW): ./run-tests runs it as root"]
fn packet_pingpong_and_stream_across_veth() {
    let _l = root_test("packet_pingpong_and_stream_across_veth");
    let v = Veth::new(1500).expect("veth lab");
    // 5 Mbit/s keeps the frame rate within what the receiving socket mostly drains (what it
    // cannot, the kernel counts in the socket's sk_drops); the queue is deeper than a socket's
    // send buffer, so the sender blocks rather than seeing ENOBUFS. While it streams, every
    // 10th data frame arriving at the server is dropped and counted.
    ns_exec(
        &v.a.0,
        &[
            "tc", "qdisc", "add", "dev", &v.if_a, "root", "tbf", "rate", "5mbit", "burst", "16kb",
            "limit", "4mb",
        ],
        None,
    )
    .expect("tbf on the client's veth");
    for api in [Api::Basic, Api::Mmsg] {
        let s = setup(
            Transport::Packet,
            api,
            Pattern::Pingpong,
            1492,
            &Knobs::default(),
        );
        let (mut c, srv) = pair_in(
            &s,
            &Knobs::default(),
            v.ip_b,
            v.ip_a,
            Some(&v.b.0),
            Some(&v.a.0),
        )
        .expect("packet pair across veth");
        let g = c.granted();
        assert_eq!(g.interface.as_deref(), Some(v.if_a.as_str()));
        assert_eq!(g.path_mtu, Some(1500));
        let mut srv = srv;
        let mut seq = 0;
        for size in [0usize, 1, 45, 46, 1491, 1492] {
            let (ct, sc, back) =
                pingpong(&mut c, srv, size, 20, seq).unwrap_or_else(|e| panic!("size {size}: {e}"));
            srv = back;
            seq += 20;
            assert_eq!((ct.completed, ct.corrupt), (20, 0), "size {size}");
            assert_eq!(
                sc.bytes_received,
                20 * size as u64,
                "size {size}: padding must not count"
            );
        }
        let batch = if api == Api::Mmsg { 16 } else { 1 };
        let s = setup(
            Transport::Packet,
            api,
            Pattern::Stream,
            1492,
            &Knobs::default(),
        );
        let k = Knobs {
            batch: Some(batch as u32),
            ..Default::default()
        };
        let (mut c, mut srv) = pair_in(&s, &k, v.ip_b, v.ip_a, Some(&v.b.0), Some(&v.a.0))
            .expect("packet stream pair");
        let drops = InducedDrops::install(&v.b.0, &v.if_b, PACKET_DATA, 10).expect("nft rule");
        for size in [20usize, 64, 1492] {
            let before = drops.dropped().expect("drop counter");
            let full_before = packet_socket_drops(&v.b.0).expect("ss");
            let (tx, rx, back) =
                stream(&mut c, srv, size, batch, Duration::from_millis(150)).expect("stream");
            srv = back;
            let dropped = drops.dropped().expect("drop counter") - before;
            // Frames that passed the rule but found the server's socket buffer full.
            let full = packet_socket_drops(&v.b.0).expect("ss") - full_before;
            let d = rx.datagrams.unwrap_or_default();
            eprintln!(
                "packet {} {size} B across veth: sent {}, received {}, lost {}, nft dropped {dropped}, socket full {full}",
                api.name(),
                tx.messages_sent,
                d.received,
                d.lost
            );
            assert!(dropped > 0, "size {size}: the rule dropped nothing");
            assert_eq!(
                d.lost,
                dropped + full,
                "size {size}: loss is the induced drops plus the socket's own"
            );
            assert_eq!(d.received + d.lost, tx.messages_sent);
            assert_eq!(d.foreign, 0);
            assert_eq!(rx.bytes_received, d.received * size as u64);
        }
        drop(drops);
        // Above the MTU: a clear error naming it.
        let s = setup(
            Transport::Packet,
            api,
            Pattern::Stream,
            1493,
            &Knobs::default(),
        );
        let e = pair_in(&s, &k, v.ip_b, v.ip_a, Some(&v.b.0), Some(&v.a.0))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("MTU is 1500") && e.contains("at most 1492"),
            "{e}"
        );
    }
}

#[test]
#[ignore = "needs root (namespaces): ./run-tests runs it as root"]
fn emsgsize_with_pmtu_do_names_the_path_mtu() {
    let _l = root_test("emsgsize_with_pmtu_do_names_the_path_mtu");
    let v = Veth::new(1500).expect("veth lab");
    let k = Knobs {
        pmtu: Some("do".into()),
        ..Default::default()
    };
    let s = setup(Transport::Udp, Api::Basic, Pattern::Stream, 2000, &k);
    let (mut c, _srv) =
        pair_in(&s, &k, v.ip_b, v.ip_a, Some(&v.b.0), Some(&v.a.0)).expect("udp pair across veth");
    assert_eq!(c.granted().path_mtu, Some(1500));
    assert!(c.send(&[0u8; 1472]).is_ok());
    let e = c.send(&[0u8; 1473]).unwrap_err().to_string();
    assert!(
        e.contains("1473-byte datagram")
            && e.contains("path MTU 1500")
            && e.contains("--pmtu dont"),
        "{e}"
    );
    // With --pmtu want the same datagram is fragmented and goes out.
    let k = Knobs {
        pmtu: Some("want".into()),
        ..Default::default()
    };
    let s = setup(Transport::Udp, Api::Basic, Pattern::Stream, 2000, &k);
    let (mut c, _srv) =
        pair_in(&s, &k, v.ip_b, v.ip_a, Some(&v.b.0), Some(&v.a.0)).expect("udp pair across veth");
    assert_eq!(c.send(&[0u8; 1473]).ok(), Some(1473));
}
