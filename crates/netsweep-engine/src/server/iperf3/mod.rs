//! `serve --iperf3`: the server's second port, where unmodified `iperf3 -c` clients run their
//! tests. iperf3 opens every connection, control or data, with the test's 37-byte cookie on
//! the same TCP port, and a UDP stream with a 4-byte datagram on the same UDP port; this
//! module tells them apart. A connection whose cookie belongs to a test waiting for its streams
//! (from the test's own client address) is handed to it; any other is a new test, whose
//! parameters are read in a bounded handshake, planned and costed ([`plan`]), and admitted by
//! the same admission and budget as netsweep's sessions ([`test`]). A UDP connect datagram goes
//! to the one test of its sender's address waiting for UDP streams; from any other address it
//! is dropped and counted, never answered.

pub mod plan;
mod test;

use super::admission::Admission;
use super::handshakes::Handshakes;
use super::log::{log, Event};
use super::{client_key, Controls, ServeOptions};
use netsweep_iperf3::server::is_udp_connect;
use netsweep_iperf3::wire::COOKIE_SIZE;
use socket2::{Domain, Socket, Type};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The iperf3 port: a TCP listener and a UDP socket on the same port number.
#[derive(Debug)]
pub struct Listeners {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Listeners {
    /// Binds TCP and UDP on `addr`; with port 0, the TCP port the kernel picks and UDP on the
    /// same number (a few tries, should another UDP socket hold it).
    pub fn bind(addr: SocketAddr) -> io::Result<Listeners> {
        let mut last = None;
        for _ in 0..if addr.port() == 0 { 10 } else { 1 } {
            let tcp = super::listen::tcp(addr)?;
            let at = tcp.local_addr()?;
            let udp = Socket::new(Domain::for_address(at), Type::DGRAM, None)?;
            if at.is_ipv6() && at.ip().is_unspecified() {
                // Dual stack, as the TCP listener: IPv4 clients' connect datagrams too.
                udp.set_only_v6(false)?;
            }
            // The tests' UDP streams bind the same port, each connected to its client.
            udp.set_reuse_address(true)?;
            match udp.bind(&at.into()) {
                Ok(()) => {
                    let udp: UdpSocket = udp.into();
                    udp.set_read_timeout(Some(Duration::from_millis(100)))?;
                    return Ok(Listeners { tcp, udp });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::ErrorKind::AddrInUse.into()))
    }

    /// Where it listens.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// A test waiting for its TCP data connections: its client's address and where they go.
type TcpWaiter = (IpAddr, mpsc::Sender<TcpStream>);

/// Tests waiting for their data connections: TCP ones by cookie, UDP ones by client address
/// (one test per address at a time: a connect datagram names no test).
#[derive(Default)]
struct Waiting {
    tcp: Mutex<HashMap<[u8; COOKIE_SIZE], TcpWaiter>>,
    udp: Mutex<HashMap<IpAddr, mpsc::Sender<SocketAddr>>>,
    udp_free: Condvar,
    /// Connect datagrams from an address no test waits for: dropped.
    stray: AtomicU64,
}

impl Waiting {
    /// Hands a TCP connection with `cookie` from `ip` to its test; gives it back if none.
    fn hand_tcp(&self, cookie: &[u8; COOKIE_SIZE], ip: IpAddr, s: TcpStream) -> Option<TcpStream> {
        let map = self.tcp.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(cookie) {
            Some((owner, tx)) if *owner == ip.to_canonical() => {
                let _ = tx.send(s);
                None
            }
            _ => Some(s),
        }
    }

    fn is_data(&self, cookie: &[u8; COOKIE_SIZE]) -> bool {
        self.tcp
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(cookie)
    }
}

/// Most iperf3 handshakes (cookie and parameters) one address holds before its newest cuts its
/// oldest short: half of all, so a monitoring host may start a few dozen clients at once and
/// a flood from one address still leaves the other half to everyone else.
const MAX_HANDSHAKES_PER_IP: usize = super::MAX_HANDSHAKES / 2;

/// What the iperf3 port's threads share with the server.
pub(super) struct Shared {
    pub(super) admission: Arc<Admission>,
    pub(super) opts: Arc<ServeOptions>,
    pub(super) controls: Arc<Controls>,
    pub(super) numbers: Arc<AtomicU64>,
}

/// Serves the iperf3 port until `stop`: the accept loop here, the UDP connect datagrams on a
/// thread of their own, every new connection's handshake on a thread held in a bounded
/// registry of its own (a flood of silent iperf3 connections cuts short only its own kind).
pub(super) fn serve(l: Listeners, shared: Shared, stop: Arc<AtomicBool>) -> io::Result<()> {
    l.tcp.set_nonblocking(true)?;
    let waiting = Arc::new(Waiting::default());
    let udp = {
        let (w, stop, sock) = (waiting.clone(), stop.clone(), l.udp);
        thread::Builder::new()
            .name("netsweep-i3-udp".into())
            .spawn(move || udp_connects(&sock, &w, &stop))?
    };
    let handshakes = Arc::new(Handshakes::with_per_ip(MAX_HANDSHAKES_PER_IP));
    let shared = Arc::new(shared);
    let mut threads: Vec<thread::JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        threads.retain(|h| !h.is_finished());
        let (mut s, peer) = match l.tcp.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log(
                    shared.opts.log_format,
                    Event::Error,
                    None,
                    None,
                    Some(&format!("iperf3 port: accept failed: {e}")),
                );
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
        if !shared
            .opts
            .admits_address(peer, crate::server::metrics::Protocol::Iperf3)
        {
            continue;
        }
        // A test's data connection sends its cookie at once: handed over here, it never holds
        // a handshake thread (a test of 128 streams would otherwise crowd its own address's
        // handshakes).
        let mut c = [0u8; COOKIE_SIZE];
        let peeked = s.set_nonblocking(true).is_ok() && s.peek(&mut c).ok() == Some(COOKIE_SIZE);
        if peeked && waiting.is_data(&c) {
            use std::io::Read;
            if s.set_nonblocking(false).is_ok() && s.read_exact(&mut c).is_ok() {
                if let Some(s) = waiting.hand_tcp(&c, peer.ip(), s) {
                    drop(s);
                }
            }
            continue;
        }
        if s.set_nonblocking(false).is_err() {
            continue;
        }
        let n = shared.numbers.fetch_add(1, Ordering::SeqCst) + 1;
        let key = client_key(peer.ip());
        let Some(slot) = handshakes.enter(n, &s, key, Duration::from_millis(200)) else {
            continue;
        };
        let (sh, w) = (shared.clone(), waiting.clone());
        let spawned = thread::Builder::new()
            .name(format!("netsweep-i3-s{n}"))
            .spawn(move || test::connection(n, peer, s, slot, &sh, &w));
        match spawned {
            Ok(h) => threads.push(h),
            Err(e) => log(
                shared.opts.log_format,
                Event::Error,
                Some(n),
                Some(peer),
                Some(&format!("iperf3 port: cannot start its thread: {e}")),
            ),
        }
    }
    handshakes.cut_all();
    let until = Instant::now() + Duration::from_millis(1500);
    while (threads.iter().any(|h| !h.is_finished()) || !udp.is_finished()) && Instant::now() < until
    {
        thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// The UDP port: every connect datagram goes to the test its sender's address waits with.
fn udp_connects(sock: &UdpSocket, waiting: &Waiting, stop: &AtomicBool) {
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(r) => r,
            Err(_) => continue,
        };
        if !is_udp_connect(&buf[..n]) {
            continue;
        }
        let map = waiting.udp.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&from.ip().to_canonical()) {
            Some(tx) => {
                let _ = tx.send(from);
            }
            None => {
                waiting.stray.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// One test's data connections, from the iperf3 port's registries; leaves them when dropped.
struct Streams<'a> {
    waiting: &'a Waiting,
    cookie: [u8; COOKIE_SIZE],
    client: IpAddr,
    udp: bool,
    /// Longest wait for the client's address to be free of another test's UDP setup.
    wait: Duration,
    tcp_rx: Option<mpsc::Receiver<TcpStream>>,
    udp_rx: Option<mpsc::Receiver<SocketAddr>>,
}

impl netsweep_iperf3::server::StreamSource for Streams<'_> {
    fn open(&mut self) -> io::Result<()> {
        if !self.udp {
            let (tx, rx) = mpsc::channel();
            self.waiting
                .tcp
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(self.cookie, (self.client, tx));
            self.tcp_rx = Some(rx);
            return Ok(());
        }
        let until = Instant::now() + self.wait;
        let mut map = self.waiting.udp.lock().unwrap_or_else(|p| p.into_inner());
        while map.contains_key(&self.client) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "another test from this address was setting up its UDP streams",
                ));
            }
            map = self
                .waiting
                .udp_free
                .wait_timeout(map, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let (tx, rx) = mpsc::channel();
        map.insert(self.client, tx);
        self.udp_rx = Some(rx);
        Ok(())
    }

    fn next(&mut self, until: Instant) -> io::Result<netsweep_iperf3::server::DataSocket> {
        use netsweep_iperf3::server::DataSocket;
        let wait = until.saturating_duration_since(Instant::now());
        let timeout = || io::Error::new(io::ErrorKind::TimedOut, "the client did not connect");
        match (&self.tcp_rx, &self.udp_rx) {
            (Some(rx), _) => rx
                .recv_timeout(wait)
                .map(DataSocket::Tcp)
                .map_err(|_| timeout()),
            (_, Some(rx)) => rx
                .recv_timeout(wait)
                .map(DataSocket::Udp)
                .map_err(|_| timeout()),
            _ => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    fn done(&mut self) {
        self.leave();
    }
}

impl Streams<'_> {
    fn leave(&mut self) {
        if self.tcp_rx.take().is_some() {
            self.waiting
                .tcp
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&self.cookie);
        }
        if self.udp_rx.take().is_some() {
            let mut map = self.waiting.udp.lock().unwrap_or_else(|p| p.into_inner());
            map.remove(&self.client);
            self.waiting.udp_free.notify_all();
        }
    }
}

impl Drop for Streams<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}
