//! The data connection and its four lean loops (TCP/UDP × send/receive): opening it as iperf3
//! expects (TCP: the cookie first; UDP: the connect datagram and the server's reply), then
//! moving the bytes with one preallocated buffer and no allocation or logging per message.

use crate::error::Iperf3Error;
use crate::outcome::{ClientMeasure, Role};
use crate::server::sockets::set_int;
use crate::wire::{self, Bound, ClientStreamResult, COOKIE_SIZE};
use crate::TestParams;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The open data connection.
pub(crate) enum DataConn {
    /// TCP, cookie sent.
    Tcp(TcpStream),
    /// UDP, connected, the server's reply received.
    Udp(UdpSocket),
}

impl DataConn {
    /// Opens the data connection after CREATE_STREAMS.
    pub(crate) fn open(
        addr: SocketAddr,
        cookie: &[u8; COOKIE_SIZE],
        p: &TestParams,
    ) -> Result<DataConn, Iperf3Error> {
        let t = p.timeout;
        let e = |doing: &'static str| move |err: std::io::Error| Iperf3Error::io(err, doing, t);
        if !p.udp {
            let mut s = TcpStream::connect_timeout(&addr, t)
                .map_err(e("opening the TCP data connection"))?;
            s.set_read_timeout(Some(t))
                .map_err(e("setting a timeout"))?;
            s.set_write_timeout(Some(t))
                .map_err(e("setting a timeout"))?;
            s.write_all(cookie)
                .map_err(e("sending the cookie on the data connection"))?;
            return Ok(DataConn::Tcp(s));
        }
        let bind: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        }
        .parse()
        .expect("an address");
        let s = UdpSocket::bind(bind).map_err(e("opening the UDP data socket"))?;
        let fd = s.as_raw_fd();
        // Failure is harmless: the kernel default stays. The send buffer keeps the default,
        // as iperf3 leaves it: a datagram waiting in a shaper's queue counts against it, so
        // a rate above the link's is held back rather than dropped by the shaper.
        let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20);
        s.connect(addr)
            .map_err(e("connecting the UDP data socket"))?;
        s.set_read_timeout(Some(t))
            .map_err(e("setting a timeout"))?;
        s.send(&wire::udp_connect_msg())
            .map_err(e("sending the UDP connect datagram"))?;
        // In reverse a few data datagrams may overtake the reply; iperf3 allows that too.
        let mut buf = vec![0u8; p.len.max(64)];
        for _ in 0..4 {
            let n = s.recv(&mut buf).map_err(e(
                "waiting for the server's reply to the UDP connect datagram",
            ))?;
            if wire::is_udp_connect_reply(&buf[..n]) {
                return Ok(DataConn::Udp(s));
            }
        }
        Err(Iperf3Error::BadResults(
            "the server's UDP data socket did not answer the connect datagram".into(),
        ))
    }
}

/// Total bytes and deadline of the bound, from `start`.
fn limits(bound: Bound, start: Instant) -> (u64, Option<Instant>) {
    match bound {
        Bound::Bytes(n) => (n, None),
        Bound::Duration(d) => (u64::MAX, Some(start + d)),
    }
}

fn measure(role: Role, start: Instant) -> ClientMeasure {
    ClientMeasure {
        role,
        bytes: 0,
        messages: 0,
        calls: 0,
        lost: None,
        out_of_order: None,
        jitter_s: None,
        highest_seq: None,
        retransmits: None,
        send_retries: 0,
        start,
        end: start,
        drained: start,
        cpu_util: [0.0; 3],
    }
}

/// Runs the data phase (from TEST_RUNNING) to its bound. The caller keeps `conn` open until the
/// results are exchanged: closed early, it would make the server's sends fail (ICMP port
/// unreachable, or a reset) and the server abort the test.
pub(crate) fn run(conn: &DataConn, p: &TestParams) -> Result<ClientMeasure, Iperf3Error> {
    match (conn, p.reverse) {
        (DataConn::Tcp(s), false) => tcp_send(s, p),
        (DataConn::Tcp(s), true) => tcp_recv(s, p),
        (DataConn::Udp(s), false) => udp_send(s, p),
        (DataConn::Udp(s), true) => udp_recv(s, p),
    }
}

/// Bytes the kernel still holds for the peer (unsent or unacknowledged).
fn outq(s: &TcpStream) -> i32 {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one c_int into n.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if r == 0 {
        n
    } else {
        0
    }
}

/// The kernel's total retransmissions on a TCP socket.
pub(crate) fn total_retrans(s: &TcpStream) -> Option<u64> {
    // SAFETY: tcp_info is plain data; getsockopt fills up to len bytes of it.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: valid pointers to a live tcp_info and its length.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut ti as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(u64::from(ti.tcpi_total_retrans))
}

fn tcp_send(mut s: &TcpStream, p: &TestParams) -> Result<ClientMeasure, Iperf3Error> {
    let buf: Vec<u8> = (0..p.len).map(|i| (i % 251) as u8).collect();
    let mut m = measure(Role::Sender, Instant::now());
    let (total, deadline) = limits(p.bound, m.start);
    while m.bytes < total {
        let want = (total - m.bytes).min(p.len as u64) as usize;
        match s.write(&buf[..want]) {
            Ok(n) => m.bytes += n as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Iperf3Error::io(e, "sending data to the server", p.timeout)),
        }
        m.calls += 1;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    m.end = Instant::now();
    m.messages = m.bytes.div_ceil(p.len as u64);
    // Wait until the server's kernel has acknowledged every byte, then give its iperf3 the
    // settle time to read them: iperf3 closes its data sockets on TEST_END, unread bytes lost.
    while outq(s) > 0 {
        if m.end.elapsed() > p.timeout {
            return Err(Iperf3Error::Timeout {
                waiting_for: format!(
                    "waiting for the server to acknowledge the last {} bytes",
                    outq(s)
                ),
                timeout: p.timeout,
            });
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    m.drained = Instant::now();
    std::thread::sleep(p.settle);
    m.retransmits = total_retrans(s);
    Ok(m)
}

fn tcp_recv(mut s: &TcpStream, p: &TestParams) -> Result<ClientMeasure, Iperf3Error> {
    let mut buf = vec![0u8; p.len];
    let mut m = measure(Role::Receiver, Instant::now());
    let (total, deadline) = limits(p.bound, m.start);
    let doing = "waiting for data from the server";
    let mut settling = false;
    let mut settle_end = m.start;
    loop {
        match s.read(&mut buf) {
            Ok(0) if settling => break,
            Ok(0) => {
                return Err(Iperf3Error::Closed {
                    doing: format!("receiving data ({} of the test's bytes so far)", m.bytes),
                })
            }
            Ok(n) => {
                m.bytes += n as u64;
                m.calls += 1;
                if settling {
                    m.end = Instant::now();
                    // A paced server ignores `num`: the settle time is a deadline, not a gap.
                    if m.end >= settle_end {
                        break;
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e)
                if settling && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
            {
                break
            }
            Err(e) => return Err(Iperf3Error::io(e, doing, p.timeout)),
        }
        if !settling && (m.bytes >= total || deadline.is_some_and(|d| Instant::now() >= d)) {
            // The server sends whole messages: take what is still on its way.
            m.end = Instant::now();
            settling = true;
            settle_end = m.end + p.settle;
            let _ = s.set_read_timeout(Some(p.settle.max(Duration::from_millis(1))));
            if deadline.is_some() {
                break;
            }
        }
    }
    if !settling {
        m.end = Instant::now();
    }
    m.messages = m.bytes.div_ceil(p.len as u64);
    m.drained = Instant::now();
    Ok(m)
}

fn wall_clock() -> (u32, u32) {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_secs() as u32, t.subsec_micros())
}

fn udp_send(s: &UdpSocket, p: &TestParams) -> Result<ClientMeasure, Iperf3Error> {
    let mut buf: Vec<u8> = (0..p.len).map(|i| (i % 251) as u8).collect();
    let mut m = measure(Role::Sender, Instant::now());
    let (total, deadline) = limits(p.bound, m.start);
    let interval = p
        .udp_rate_bps
        .filter(|r| *r > 0)
        .map(|r| p.len as f64 * 8.0 / r as f64);
    let mut seq = 0u64;
    while m.bytes < total {
        if let Some(iv) = interval {
            let due = m.start + Duration::from_secs_f64(iv * seq as f64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        seq += 1;
        let (sec, usec) = wall_clock();
        wire::put_udp_header(&mut buf, sec, usec, seq);
        loop {
            m.calls += 1;
            match s.send(&buf) {
                Ok(n) => {
                    m.bytes += n as u64;
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    m.send_retries += 1;
                    std::thread::yield_now();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Iperf3Error::io(
                        e,
                        "sending datagrams to the server",
                        p.timeout,
                    ))
                }
            }
        }
        m.messages += 1;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    m.end = Instant::now();
    m.drained = m.end;
    // The server stops reading on TEST_END: let it drain its socket first.
    std::thread::sleep(p.settle);
    Ok(m)
}

/// The shortest quiet gap that ends a UDP receive bounded by bytes.
const QUIET_MIN: Duration = Duration::from_millis(200);

fn udp_recv(s: &UdpSocket, p: &TestParams) -> Result<ClientMeasure, Iperf3Error> {
    let mut buf = vec![0u8; p.len.max(wire::UDP_HEADER_64)];
    let mut m = measure(Role::Receiver, Instant::now());
    let (total, deadline) = limits(p.bound, m.start);
    let mut acc = UdpAccount::default();
    // Bounded by bytes, a quiet gap this long after the first datagram ends the test short of
    // its bytes (loss); long enough that a server descheduled on a busy host is not taken for
    // one that finished.
    let quiet = match p.udp_rate_bps.filter(|r| *r > 0) {
        Some(r) => Duration::from_secs_f64(10.0 * p.len as f64 * 8.0 / r as f64),
        None => Duration::ZERO,
    }
    .max(p.settle)
    .max(QUIET_MIN);
    while m.bytes < total {
        let n = match s.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e)
                if m.messages > 0
                    && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
            {
                // Bounded by time, only the deadline ends the test, or silence for `timeout`.
                match deadline {
                    None => break,
                    Some(d) if Instant::now() >= d => break,
                    Some(_) if m.end.elapsed() < p.timeout => continue,
                    Some(_) => {
                        let doing = "waiting for datagrams from the server";
                        return Err(Iperf3Error::io(e, doing, p.timeout));
                    }
                }
            }
            Err(e) => {
                return Err(Iperf3Error::io(
                    e,
                    "waiting for datagrams from the server",
                    p.timeout,
                ))
            }
        };
        m.calls += 1;
        if m.messages == 0 {
            let _ = s.set_read_timeout(Some(quiet.max(Duration::from_millis(1))));
        }
        m.messages += 1;
        m.bytes += n as u64;
        m.end = Instant::now();
        acc.on_datagram(&buf[..n], wall_clock());
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    m.lost = Some(acc.lost);
    m.out_of_order = Some(acc.out_of_order);
    m.jitter_s = Some(acc.jitter_s);
    m.highest_seq = Some(acc.highest);
    m.drained = Instant::now();
    Ok(m)
}

/// The UDP receiver's accounting of the server's datagrams, by their iperf3 header (the
/// peer's bytes): gaps in the sequence are lost until a late one fills them, and RFC 1889
/// jitter over the transit times, as iperf3 computes its own.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct UdpAccount {
    /// The highest sequence number seen.
    pub(crate) highest: u64,
    /// Datagrams missing from the sequence (gaps minus late arrivals).
    pub(crate) lost: u64,
    /// Datagrams that arrived after a later one.
    pub(crate) out_of_order: u64,
    /// Interarrival jitter, seconds.
    pub(crate) jitter_s: f64,
    prev_transit: Option<f64>,
}

impl UdpAccount {
    /// Accounts datagram `d` arrived at the wall-clock time `arrival` (seconds,
    /// microseconds); one shorter than the header counts for nothing here.
    pub(crate) fn on_datagram(&mut self, d: &[u8], arrival: (u32, u32)) {
        let Some((sec, usec, seq)) = wire::udp_header(d) else {
            return;
        };
        if seq > self.highest {
            self.lost += seq - self.highest - 1;
            self.highest = seq;
        } else {
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
        }
        let (asec, ausec) = arrival;
        let transit =
            (f64::from(asec) - f64::from(sec)) + (f64::from(ausec) - f64::from(usec)) * 1e-6;
        let d = (transit - self.prev_transit.unwrap_or(transit)).abs();
        self.prev_transit = Some(transit);
        self.jitter_s += (d - self.jitter_s) / 16.0;
    }
}

impl ClientMeasure {
    /// The stream result this client reports to the server.
    pub(crate) fn result(&self) -> ClientStreamResult {
        let receiver = self.role == Role::Receiver;
        ClientStreamResult {
            bytes: self.bytes,
            retransmits: self.retransmits,
            jitter_s: self.jitter_s.unwrap_or(0.0),
            errors: self.lost.unwrap_or(0),
            packets: if receiver {
                self.highest_seq.unwrap_or(0)
            } else {
                self.messages
            },
            seconds: self.wall().as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(seq: u64, usec: u32) -> [u8; 16] {
        let mut b = [0u8; 16];
        wire::put_udp_header(&mut b, 1, usec, seq);
        b
    }

    #[test]
    fn udp_gaps_are_lost_until_a_late_datagram_fills_them() {
        let mut a = UdpAccount::default();
        // iperf3 numbers datagrams from 1: 3 and 4 missing, 3 arrives late.
        for seq in [1, 2, 5, 3] {
            a.on_datagram(&datagram(seq, 0), (1, 100));
        }
        a.on_datagram(&[0; 15], (1, 100));
        assert_eq!((a.highest, a.lost, a.out_of_order), (5, 1, 1));
        // As iperf3 counts it, a duplicate is out of order too, and cancels a loss.
        a.on_datagram(&datagram(5, 0), (1, 100));
        assert_eq!((a.highest, a.lost, a.out_of_order), (5, 0, 2));
        // Constant transit: no jitter; a transit 160 µs longer: 10 µs (1/16 of it).
        assert_eq!(a.jitter_s, 0.0);
        a.on_datagram(&datagram(6, 0), (1, 260));
        assert!((a.jitter_s - 10e-6).abs() < 1e-12, "{}", a.jitter_s);
    }
}
