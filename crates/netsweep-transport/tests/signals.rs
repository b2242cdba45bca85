//! A signal arriving while the server waits for its client's data path is not a failure: the
//! wait goes on until the deadline. (`netsweep serve` gets SIGCHLD from the host-fact tools
//! of other sessions; a socket with SO_RCVTIMEO returns EINTR even for a signal nobody
//! handles, and a session refused its client for it.) Each listener is woken by a stream of
//! SIGUSR1 — caught by a handler installed without SA_RESTART — before the client arrives.

use netsweep_model::spec::Transport;
use netsweep_proto::messages::{DataEndpoint, Knobs};
use netsweep_transport::basic::ConnListener;
use netsweep_transport::{ip, unix};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const COOKIE: u64 = 0x5eed_0f51_97a1_5eed;
const WAIT: Duration = Duration::from_secs(10);
const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

static CAUGHT: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_usr1(_: libc::c_int) {
    CAUGHT.fetch_add(1, Ordering::SeqCst);
}

/// Installs a SIGUSR1 handler whose interrupted system calls are not restarted.
fn catch_usr1() {
    // SAFETY: a zeroed sigaction is valid; the handler only bumps an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = 0;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
}

/// Runs `listener.accept` on a thread, signals that thread 20 times, then lets `connect`
/// reach it: the accept must succeed, and the signals must have been caught.
fn survives_signals(
    mut listener: Box<dyn ConnListener>,
    connect: impl FnOnce(DataEndpoint) + Send + 'static,
) {
    catch_usr1();
    let before = CAUGHT.load(Ordering::SeqCst);
    let endpoint = listener.endpoint();
    let (tid_tx, tid_rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        // SAFETY: pthread_self has no preconditions.
        tid_tx.send(unsafe { libc::pthread_self() }).unwrap();
        listener.accept(COOKIE, WAIT).map(drop)
    });
    let tid = tid_rx.recv().unwrap();
    for i in 1..=20 {
        thread::sleep(Duration::from_millis(10));
        // SAFETY: the waiter thread is alive until accept returns, which needs the client.
        assert_eq!(unsafe { libc::pthread_kill(tid, libc::SIGUSR1) }, 0);
        // One at a time: a signal sent while the last is still pending would merge with it.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while CAUGHT.load(Ordering::SeqCst) - before < i {
            assert!(
                std::time::Instant::now() < deadline,
                "signal {i} not caught"
            );
            thread::sleep(Duration::from_millis(1));
        }
    }
    let client = thread::spawn(move || connect(endpoint));
    let got = waiter.join().unwrap();
    client.join().unwrap();
    assert!(got.is_ok(), "a signal ended the wait: {got:?}");
    assert_eq!(CAUGHT.load(Ordering::SeqCst) - before, 20, "signals caught");
}

#[test]
fn signals_do_not_end_the_wait_for_a_data_path() {
    // One test: the handler and its counter are process-wide.
    let k = Knobs::default();
    let tcp = ip::StreamListener::open(Transport::Tcp, LOCALHOST, &k).unwrap();
    survives_signals(Box::new(tcp), |d| {
        let to = SocketAddr::new(LOCALHOST, d.port);
        ip::stream_connect(Transport::Tcp, to, &Knobs::default(), COOKIE, WAIT).unwrap();
    });
    let udp = ip::DgramListener::open(Transport::Udp, LOCALHOST, LOCALHOST, &k).unwrap();
    survives_signals(Box::new(udp), |d| {
        let to = SocketAddr::new(LOCALHOST, d.port);
        ip::dgram_connect(Transport::Udp, to, &Knobs::default(), COOKIE, WAIT).unwrap();
    });
    let us = unix::UnixStreamListener::open(Transport::UnixStream, &k).unwrap();
    survives_signals(Box::new(us), |d| {
        let p = d.path.unwrap();
        unix::stream_connect(
            Transport::UnixStream,
            Path::new(&p),
            &Knobs::default(),
            COOKIE,
            WAIT,
        )
        .unwrap();
    });
    let ud = unix::UnixDgramListener::open(&k).unwrap();
    survives_signals(Box::new(ud), |d| {
        let p = d.path.unwrap();
        unix::dgram_connect(Path::new(&p), &Knobs::default(), COOKIE, WAIT).unwrap();
    });
}
