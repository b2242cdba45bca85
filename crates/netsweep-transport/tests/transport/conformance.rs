//! The conformance body, run against every transport × api this build supports, over
//! loopback, through the TransportFactory and the real pattern loops: sizes 0 (datagrams) /
//! 1 / 1499 / 1500 / 1501 / the largest datagram / 1 MiB (streams), payload integrity, and
//! peer close → error (streams) or counted loss (datagrams), never a hang. `shm` and
//! `--api uring` (batch 8 in the stream test) run here too; their own cases are in
//! uring_shm.rs. Every combination must probe available (a probe that regresses fails the
//! tests instead of shrinking them); `packet` needs CAP_NET_RAW, so its run is a root test
//! (ignored without root, run by ./run-tests as root).

use crate::common::*;
use netsweep_model::spec::{Api, Pattern, Transport, DGRAM_HEADER};
use netsweep_proto::messages::Knobs;
use netsweep_transport::{probe_api, supported_apis};
use std::time::{Duration, Instant};

/// Messages are datagrams: the model's rule.
fn dgram(t: Transport, api: Api) -> bool {
    netsweep_model::spec::datagrams(t, api)
}

fn largest(t: Transport, api: Api) -> usize {
    if api == Api::Datagram {
        return netsweep_transport::quic::DATAGRAM_MAX as usize;
    }
    match t {
        Transport::Udp | Transport::Udplite => 65_507,
        Transport::UnixDgram | Transport::UnixSeqpacket => 65_000,
        Transport::Packet => netsweep_transport::packet::max_payload(
            netsweep_transport::sys::if_mtu("lo").unwrap_or(65_536),
        ),
        _ => 1 << 20,
    }
}

/// Every transport × api that must work here without privileges (`netsweep list` as any
/// user on this kind of machine: Linux ≥ 5.19 with io_uring and MPTCP enabled).
const UNPRIVILEGED: &[(Transport, &[Api])] = &[
    (
        Transport::Tcp,
        &[
            Api::Basic,
            Api::Zerocopy,
            Api::Sendfile,
            Api::Splice,
            Api::Uring,
        ],
    ),
    (Transport::Tls, &[Api::Basic]),
    (Transport::Quic, &[Api::Basic, Api::Datagram]),
    (
        Transport::Udp,
        &[Api::Basic, Api::Mmsg, Api::Zerocopy, Api::Uring, Api::Gso],
    ),
    (Transport::UnixStream, &[Api::Basic, Api::Splice]),
    (Transport::UnixDgram, &[Api::Basic, Api::Mmsg]),
    (Transport::UnixSeqpacket, &[Api::Basic]),
    (Transport::Mptcp, &[Api::Basic, Api::Sendfile]),
    (Transport::Udplite, &[Api::Basic, Api::Mmsg]),
    (Transport::Shm, &[Api::Basic]),
];

/// Those that need root (CAP_NET_RAW).
const AS_ROOT: &[(Transport, &[Api])] = &[(Transport::Packet, &[Api::Basic, Api::Mmsg])];

/// Those that exist only in a `--features mpi` build under `mpirun` (tests/mpi.rs runs them
/// there): listed, never probed here.
const UNDER_MPIRUN: &[(Transport, &[Api])] = &[(Transport::Mpi, &[Api::Basic])];

/// Those that exist only in a `--features xdp` build, as root, across a link between two
/// namespaces (tests/xdp.rs runs them on a lab veth pair): listed, never probed here.
const ACROSS_A_LINK: &[(Transport, &[Api])] = &[(Transport::Xdp, &[Api::Basic])];

fn flatten(list: &[(Transport, &[Api])]) -> Vec<(Transport, Api)> {
    list.iter()
        .flat_map(|&(t, apis)| apis.iter().map(move |&a| (t, a)))
        .collect()
}

/// The combinations of `list`, each asserted available here (the failure names the probe's
/// reason and the fix) — never silently dropped.
fn available(list: &[(Transport, &[Api])]) -> Vec<(Transport, Api)> {
    let v = flatten(list);
    let missing: Vec<String> = v
        .iter()
        .filter_map(|&(t, api)| {
            let p = probe_api(t, api);
            (!p.available)
                .then(|| format!("{t} × {}: {}", api.name(), p.reason.unwrap_or_default()))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "combinations that must work on this machine do not (a probe regressed, or the kernel \
         lacks a feature: sysctl kernel.io_uring_disabled=0, net.mptcp.enabled=1):\n  {}",
        missing.join("\n  ")
    );
    v
}

/// Every unprivileged combination, each asserted available.
fn combos() -> Vec<(Transport, Api)> {
    available(UNPRIVILEGED)
}

#[test]
fn the_required_combinations_are_every_supported_one() {
    let mut want = flatten(UNPRIVILEGED);
    want.extend(flatten(AS_ROOT));
    want.extend(flatten(UNDER_MPIRUN));
    want.extend(flatten(ACROSS_A_LINK));
    let have: Vec<(Transport, Api)> = Transport::ALL
        .into_iter()
        .flat_map(|t| supported_apis(t).iter().map(move |&a| (t, a)))
        .collect();
    let key = |v: &[(Transport, Api)]| {
        let mut k: Vec<String> = v
            .iter()
            .map(|(t, a)| format!("{t} × {}", a.name()))
            .collect();
        k.sort();
        k
    };
    assert_eq!(
        key(&want),
        key(&have),
        "the lists above must name every supported combination (update them with the registry)"
    );
}

#[test]
fn every_transport_and_api_pingpong_integrity() {
    pingpong_integrity(&combos());
}

fn pingpong_integrity(combos: &[(Transport, Api)]) {
    for &(t, api) in combos {
        if matches!(api, Api::Splice | Api::Gso) {
            continue; // stream-only by design (check_api refuses pingpong)
        }
        let max = largest(t, api);
        let mut sizes: Vec<usize> = [1usize, 1499, 1500, 1501, max]
            .into_iter()
            .filter(|s| *s <= max)
            .collect();
        if dgram(t, api) {
            sizes.insert(0, 0);
        }
        let s = setup(t, api, Pattern::Pingpong, max as u64, &Knobs::default());
        let (mut c, mut srv) =
            pair(&s, &Knobs::default()).unwrap_or_else(|e| panic!("{t} × {api}: {e}"));
        let mut seq = 0;
        for size in sizes {
            let reps = if size > 100_000 { 5 } else { 20 };
            let (ct, sc, back) = pingpong(&mut c, srv, size, reps, seq)
                .unwrap_or_else(|e| panic!("{t} × {api} size {size}: {e}"));
            srv = back;
            seq += reps;
            assert_eq!(ct.completed, reps, "{t} × {api} size {size}: {ct:?}");
            assert_eq!(
                ct.corrupt, 0,
                "{t} × {api} size {size}: echo differs from request"
            );
            assert_eq!(sc.messages_sent, reps, "{t} × {api} size {size}");
            assert_eq!(
                sc.bytes_received,
                (size as u64) * reps,
                "{t} × {api} size {size}"
            );
        }
    }
}

#[test]
fn every_transport_and_api_stream_accounting() {
    stream_accounting(&combos());
}

fn stream_accounting(combos: &[(Transport, Api)]) {
    for &(t, api) in combos {
        let batch = if matches!(api, Api::Mmsg | Api::Uring | Api::Gso) {
            8
        } else {
            1
        };
        let sizes: Vec<usize> = if dgram(t, api) {
            let max = largest(t, api).min(60_000);
            let mut s = vec![DGRAM_HEADER as usize, 1472.min(max), max];
            s.dedup();
            s
        } else {
            vec![1, 1500, 1 << 20]
        };
        let max = *sizes.iter().max().unwrap_or(&1);
        let s = setup(t, api, Pattern::Stream, max as u64, &Knobs::default());
        let k = Knobs {
            batch: Some(batch as u32),
            ..Default::default()
        };
        let (mut c, mut srv) = pair(&s, &k).unwrap_or_else(|e| panic!("{t} × {api}: {e}"));
        for size in sizes {
            let (tx, rx, back) = stream(&mut c, srv, size, batch, Duration::from_millis(80))
                .unwrap_or_else(|e| panic!("{t} × {api} size {size}: {e}"));
            srv = back;
            assert!(tx.messages_sent > 0);
            assert!(!rx.timed_out, "{t} × {api} size {size}: receiver timed out");
            if let Some(d) = rx.datagrams {
                assert_eq!(
                    d.received + d.lost,
                    tx.messages_sent,
                    "{t} × {api} size {size}: {d:?}"
                );
                assert_eq!(d.foreign, 0, "{t} × {api} size {size}: {d:?}");
                assert!(d.received > 0, "{t} × {api} size {size}: nothing arrived");
                if t == Transport::UnixSeqpacket {
                    assert_eq!(d.lost, 0, "seqpacket never loses");
                }
            } else {
                assert_eq!(rx.bytes_received, tx.bytes_sent, "{t} × {api} size {size}");
            }
            if batch > 1 && api == Api::Gso {
                // A batch is cut into sends of at most 64 segments and one IP datagram.
                let per = (65_507 / size).clamp(1, batch) as u64;
                assert_eq!(
                    tx.send_calls,
                    tx.messages_sent / batch as u64 * (batch as u64).div_ceil(per),
                    "{t} × {api} size {size}: one sendmsg per super-datagram"
                );
            } else if batch > 1 {
                assert_eq!(
                    tx.send_calls,
                    tx.messages_sent.div_ceil(batch as u64),
                    "{t} × {api}: one sendmmsg (io_uring_enter) per batch"
                );
            }
        }
    }
}

#[test]
fn peer_close_is_an_error_or_counted_loss_never_a_hang() {
    peer_close(&combos());
}

fn peer_close(combos: &[(Transport, Api)]) {
    for &(t, api) in combos {
        if matches!(api, Api::Splice | Api::Gso) {
            continue;
        }
        let s = setup(t, api, Pattern::Pingpong, 64, &Knobs::default());
        let (mut c, srv) =
            pair(&s, &Knobs::default()).unwrap_or_else(|e| panic!("{t} × {api}: {e}"));
        drop(srv);
        let start = Instant::now();
        let mut tx = netsweep_endpoint::MessageBuffer::new(64, 0);
        let mut rx = netsweep_endpoint::MessageBuffer::new(65, 0);
        c.prepare(64, 1).expect("prepare");
        c.set_recv_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let mut hist = netsweep_model::stats::LatencyHistogram::new();
        let mut txs = netsweep_endpoint::Slots::new(tx.as_mut(), 64, 64);
        let mut rxs = netsweep_endpoint::Slots::new(rx.as_mut(), 65, 65);
        let r = netsweep_engine::pattern::pingpong::client_trial(
            c.as_mut(),
            &mut txs,
            &mut rxs,
            0,
            3,
            &mut hist,
            netsweep_engine::pattern::pingpong::Checks {
                verify: true,
                one_way: false,
            },
        );
        match r {
            Ok(ct) => {
                assert!(
                    dgram(t, api),
                    "{t} × {api}: a stream must fail when its peer closed"
                );
                assert_eq!(ct.completed, 0, "{t} × {api}");
            }
            Err(e) => eprintln!("{t} × {api}: peer close → {e}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{t} × {api} took too long"
        );
    }
}

#[test]
#[ignore = "needs root (CAP_NET_RAW for packet): ./run-tests runs it as root"]
fn packet_conformance_as_root() {
    assert!(
        is_root(),
        "packet_conformance_as_root needs root (CAP_NET_RAW): run it as root, e.g. `sudo ./run-tests`"
    );
    let packet = available(AS_ROOT);
    pingpong_integrity(&packet);
    stream_accounting(&packet);
    peer_close(&packet);
}

#[test]
fn unsupported_api_is_refused_with_the_list() {
    let s = setup(
        Transport::Tcp,
        Api::Mmsg,
        Pattern::Stream,
        64,
        &Knobs::default(),
    );
    let e = pair(&s, &Knobs::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("tcp does not support --api mmsg")
            && e.contains("basic, zerocopy, sendfile, splice"),
        "{e}"
    );
    assert!(
        netsweep_transport::check(Transport::Packet, Api::Zerocopy, Pattern::Stream)
            .unwrap_err()
            .contains("basic, mmsg")
    );
}

#[test]
#[ignore = "needs root (CAP_NET_RAW for packet): ./run-tests runs it as root"]
fn packet_size_above_the_mtu_names_it() {
    let p = netsweep_transport::probe(Transport::Packet);
    assert!(
        p.available,
        "packet needs root (CAP_NET_RAW): {:?}",
        p.reason
    );
    let mtu = netsweep_transport::sys::if_mtu("lo").unwrap_or(65_536);
    let s = setup(
        Transport::Packet,
        Api::Basic,
        Pattern::Pingpong,
        65_535,
        &Knobs::default(),
    );
    let e = pair(&s, &Knobs::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains(&format!("MTU is {mtu}")), "{e}");
    // prepare() on the client refuses too.
    let s = setup(
        Transport::Packet,
        Api::Basic,
        Pattern::Pingpong,
        100,
        &Knobs::default(),
    );
    let (mut c, _srv) = pair(&s, &Knobs::default()).expect("packet pair on lo");
    let e = c.prepare(mtu as usize, 1).unwrap_err().to_string();
    assert!(e.contains(&format!("MTU is {mtu}")), "{e}");
    let e = c.send(&vec![0u8; mtu as usize]).unwrap_err().to_string();
    assert!(e.contains("MTU"), "{e}");
}

/// udp basic vs mmsg at 64 B over loopback: prints messages/s (run with --nocapture).
#[test]
fn udp_basic_vs_mmsg_rate_64b() {
    for (api, batch) in [(Api::Basic, 1usize), (Api::Mmsg, 32)] {
        let s = setup(Transport::Udp, api, Pattern::Stream, 64, &Knobs::default());
        let k = Knobs {
            batch: Some(batch as u32),
            ..Default::default()
        };
        let (mut c, srv) = pair(&s, &k).expect("udp pair");
        let (tx, rx, _) =
            stream(&mut c, srv, 64, batch, Duration::from_millis(300)).expect("stream");
        let d = rx.datagrams.unwrap_or_default();
        eprintln!(
            "udp {:>5} 64 B: sender {:.0} msg/s in {} calls, receiver got {} ({} lost), {} recv calls",
            api.name(),
            tx.messages_sent as f64 / (tx.active_ns as f64 / 1e9),
            tx.send_calls,
            d.received,
            d.lost,
            rx.recv_calls
        );
        assert_eq!(d.received + d.lost, tx.messages_sent);
    }
}
