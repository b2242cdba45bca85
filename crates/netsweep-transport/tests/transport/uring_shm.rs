//! `--api uring` and the `shm` transport beyond the conformance body: batched submission
//! makes fewer io_uring_enter calls than messages, receive timeouts cancel cleanly and the
//! ring keeps working, shm carries 1 MiB and 8 MiB pingpongs intact (also through a ring
//! smaller than the message), and a dropped or dead shm peer is an error within the
//! timeout, never a hang.

use crate::common::*;
use netsweep_endpoint::{is_timeout, recv_message, send_message, DataListener, Endpoint};
use netsweep_model::spec::{Api, Pattern, Transport};
use netsweep_proto::messages::{Knobs, SessionSetup};
use netsweep_transport::{probe_api, shm};
use std::io;
use std::time::{Duration, Instant};

/// Panics with the probe's reason unless io_uring works here (it must on this kind of
/// machine: `sysctl kernel.io_uring_disabled=0`, and no seccomp filter blocking it).
fn require_uring() {
    let p = probe_api(Transport::Udp, Api::Uring);
    assert!(
        p.available,
        "io_uring must work here: {} (sysctl kernel.io_uring_disabled=0)",
        p.reason.unwrap_or_default()
    );
}

#[test]
fn uring_batches_take_fewer_enters_than_messages() {
    require_uring();
    for (t, size, batch) in [
        (Transport::Udp, 64usize, 32usize),
        (Transport::Tcp, 4096, 8),
    ] {
        let s = setup(
            t,
            Api::Uring,
            Pattern::Stream,
            size as u64,
            &Knobs::default(),
        );
        let k = Knobs {
            batch: Some(batch as u32),
            ..Default::default()
        };
        let (mut c, srv) = pair(&s, &k).expect("uring pair");
        let (tx, rx, _) =
            stream(&mut c, srv, size, batch, Duration::from_millis(150)).expect("stream");
        eprintln!(
            "{t} uring batch {batch} × {size} B: {} messages in {} enters; receiver {} calls",
            tx.messages_sent, tx.send_calls, rx.recv_calls
        );
        assert!(tx.messages_sent > batch as u64, "{t}: {tx:?}");
        assert!(
            tx.send_calls * 2 <= tx.messages_sent,
            "{t}: a batch of {batch} should take one io_uring_enter: {tx:?}"
        );
        if let Some(d) = rx.datagrams {
            assert_eq!(d.received + d.lost, tx.messages_sent, "{d:?}");
        } else {
            assert_eq!(rx.bytes_received, tx.bytes_sent);
        }
    }
}

#[test]
fn uring_recv_timeout_cancels_and_the_ring_still_works() {
    require_uring();
    for t in [Transport::Tcp, Transport::Udp] {
        let s = setup(t, Api::Uring, Pattern::Pingpong, 64, &Knobs::default());
        let (mut c, mut srv) = pair(&s, &Knobs::default()).expect("uring pair");
        c.prepare(64, 4).expect("prepare");
        srv.prepare(64, 4).expect("prepare");
        srv.set_recv_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let mut b = [0u8; 65];
        for _ in 0..3 {
            let start = Instant::now();
            let e = srv.recv(&mut b).expect_err("nothing was sent");
            let took = start.elapsed();
            assert!(is_timeout(&e), "{t}: {e}");
            assert!(
                took >= Duration::from_millis(45) && took < Duration::from_millis(1000),
                "{t}: timed out after {took:?}"
            );
        }
        // A batch receive times out the same way.
        let mut lens = [0usize; 4];
        let mut slots = vec![0u8; 65 * 4];
        let e = srv
            .recv_batch(&mut slots, 65, &mut lens)
            .expect_err("nothing was sent");
        assert!(is_timeout(&e), "{t}: {e}");
        // The cancelled requests left nothing behind: data flows both ways.
        for round in 0..3u8 {
            let msg = [round; 64];
            send_message(c.as_mut(), &msg).expect("send");
            recv_message(srv.as_mut(), &mut b[..64]).expect("recv");
            assert_eq!(b[..64], msg);
            send_message(srv.as_mut(), &b[..64]).expect("echo");
            c.set_recv_timeout(Some(TIMEOUT)).expect("timeout");
            let mut back = [0u8; 64];
            recv_message(c.as_mut(), &mut back).expect("recv echo");
            assert_eq!(back, msg);
        }
    }
}

#[test]
fn uring_explains_a_refusal() {
    let e = netsweep_transport::uring::explain(io::Error::from_raw_os_error(libc::EPERM));
    assert!(e.to_string().contains("--api basic"), "{e}");
    let e = netsweep_transport::uring::explain(io::Error::from_raw_os_error(libc::ENOSYS));
    assert!(e.to_string().contains("--api basic"), "{e}");
}

fn shm_pair(server_knobs: &Knobs) -> (Box<dyn Endpoint>, Box<dyn Endpoint>) {
    let s = setup(
        Transport::Shm,
        Api::Basic,
        Pattern::Pingpong,
        8 << 20,
        server_knobs,
    );
    pair(&s, &Knobs::default()).expect("shm pair")
}

#[test]
fn shm_pingpong_integrity_1m_and_8m() {
    // The default ring (256 KiB) and a 64 KiB one: 1 MiB and 8 MiB stream through in pieces.
    for sndbuf in [None, Some(64 << 10)] {
        let k = Knobs {
            sndbuf,
            ..Default::default()
        };
        let (mut c, mut srv) = shm_pair(&k);
        let g = c.granted();
        assert_eq!(g.sndbuf, Some(sndbuf.unwrap_or(shm::DEFAULT_CAPACITY)));
        let mut seq = 0;
        for size in [1usize, 1 << 20, 8 << 20] {
            let reps = 4;
            let (ct, sc, back) = pingpong(&mut c, srv, size, reps, seq)
                .unwrap_or_else(|e| panic!("shm size {size}: {e}"));
            srv = back;
            seq += reps;
            assert_eq!(ct.completed, reps, "size {size}");
            assert_eq!(ct.corrupt, 0, "size {size}: echo differs from request");
            assert_eq!(sc.bytes_received, size as u64 * reps);
        }
    }
}

#[test]
fn shm_stream_counts_every_byte() {
    let (mut c, srv) = shm_pair(&Knobs {
        sndbuf: Some(4096),
        ..Default::default()
    });
    let (tx, rx, _) = stream(&mut c, srv, 100_000, 1, Duration::from_millis(80)).expect("stream");
    assert!(tx.messages_sent > 0);
    assert_eq!(rx.bytes_received, tx.bytes_sent);
}

#[test]
fn shm_recv_timeout_and_dropped_peer() {
    let (mut c, srv) = shm_pair(&Knobs::default());
    c.set_recv_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let mut b = [0u8; 16];
    let start = Instant::now();
    let e = c.recv(&mut b).expect_err("nothing was sent");
    assert!(is_timeout(&e), "{e}");
    assert!(start.elapsed() < Duration::from_secs(1));
    // The server goes away while the client waits with a long timeout: the wait ends at once.
    c.set_recv_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        drop(srv);
    });
    let start = Instant::now();
    let mut buf = [0u8; 16];
    let e = recv_message(c.as_mut(), &mut buf).expect_err("peer dropped");
    let took = start.elapsed();
    h.join().expect("dropper");
    eprintln!("dropped peer → {e} after {took:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let e = c.send(b"x").expect_err("peer dropped");
    assert!(e.to_string().contains("closed"), "{e}");
}

/// The child half of `shm_dead_process_is_noticed`: binds to the server's file, then exits
/// without dropping its endpoint (as a killed process would). Ignored: run on its own (as
/// `--include-ignored` does) it has nothing to connect to and returns at once.
#[test]
#[ignore = "not a test by itself: the child process of shm_dead_process_is_noticed"]
fn shm_child_that_dies() {
    let (Ok(path), Ok(cookie)) = (
        std::env::var("NETSWEEP_SHM_CHILD_PATH"),
        std::env::var("NETSWEEP_SHM_CHILD_COOKIE"),
    ) else {
        return; // only meaningful when spawned by the test below
    };
    let cookie: u64 = cookie.parse().unwrap_or(0);
    let ep = shm::connect(
        std::path::Path::new(&path),
        &Knobs::default(),
        cookie,
        TIMEOUT,
    );
    let code = i32::from(ep.is_err());
    std::mem::forget(ep);
    // SAFETY: ends this child process at once, without unwinding or running destructors.
    unsafe { libc::_exit(code) };
}

#[test]
fn shm_dead_process_is_noticed() {
    let s = SessionSetup {
        transport: "shm".into(),
        timeout_ns: TIMEOUT.as_nanos() as u64,
        ..Default::default()
    };
    let mut l = shm::ShmListener::open(&s).expect("listen");
    let path = l.endpoint().path.unwrap_or_default();
    let cookie = cookie();
    let exe = std::env::current_exe().expect("test binary");
    // The child test's name within this test binary: its module path less the crate's name.
    let child_test = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::shm_child_that_dies"),
        None => "shm_child_that_dies".to_string(),
    };
    let mut child = std::process::Command::new(exe)
        .args(["--exact", &child_test, "--ignored", "--nocapture"])
        .env("NETSWEEP_SHM_CHILD_PATH", &path)
        .env("NETSWEEP_SHM_CHILD_COOKIE", cookie.to_string())
        .spawn()
        .expect("spawn child");
    let mut srv = l.accept(cookie, TIMEOUT).expect("accept the child");
    let status = child.wait().expect("child");
    assert!(status.success(), "child could not connect: {status}");
    srv.set_recv_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let start = Instant::now();
    let mut b = [0u8; 16];
    let e = srv.recv(&mut b).expect_err("the peer is dead");
    let took = start.elapsed();
    eprintln!("dead peer → {e} after {took:?}");
    assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert!(
        !std::path::Path::new(&path).exists(),
        "the shm file is unlinked once bound"
    );
}

#[test]
fn shm_wrong_cookie_is_turned_away() {
    let s = SessionSetup {
        transport: "shm".into(),
        timeout_ns: TIMEOUT.as_nanos() as u64,
        ..Default::default()
    };
    let mut l = shm::ShmListener::open(&s).expect("listen");
    let path = std::path::PathBuf::from(l.endpoint().path.unwrap_or_default());
    let h = std::thread::spawn(move || l.accept(42, Duration::from_secs(3)).map(drop));
    let e = shm::connect(&path, &Knobs::default(), 7, Duration::from_secs(2))
        .map(drop)
        .expect_err("wrong cookie");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    // The right client still gets in afterwards.
    let ok = shm::connect(&path, &Knobs::default(), 42, Duration::from_secs(2));
    assert!(ok.is_ok(), "{:?}", ok.err());
    assert!(h.join().expect("accept thread").is_ok());
}

#[test]
fn shm_client_without_server_says_one_host() {
    let e = shm::connect(
        std::path::Path::new("/dev/shm/netsweep-shm-no-such"),
        &Knobs::default(),
        1,
        Duration::from_millis(100),
    )
    .map(drop)
    .expect_err("no such file");
    assert!(e.to_string().contains("one host"), "{e}");
}
