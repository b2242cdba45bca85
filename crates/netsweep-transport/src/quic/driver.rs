//! The QUIC connection driver: one quinn-proto endpoint and its connection on this side's
//! UDP socket, turned by the calling thread (no runtime): datagrams out as the connection
//! makes them, datagrams in as they arrive, timers when they fire, and every wait bounded
//! by a deadline. A second connection arriving on the socket is refused.

use crate::ip;
use crate::knobs;
use bytes::BytesMut;
use netsweep_model::spec::Transport;
use netsweep_proto::messages::Knobs;
use quinn_proto::{
    Connection, ConnectionError, ConnectionHandle, DatagramEvent, Endpoint, Event, Transmit,
};
use socket2::{SockAddr, Socket};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// The largest UDP datagram one receive takes.
const RX_DATAGRAM: usize = 65_536;
/// Datagrams one turn reads before it lets the connection answer.
const BATCH: usize = 64;
/// Datagrams one sendmsg carries at most (UDP_SEGMENT), as quinn's own UDP layer batches.
pub const GSO_SEGMENTS: usize = 10;

/// A connection and the endpoint that routes its datagrams, on one socket.
#[derive(Debug)]
pub struct Driver {
    /// The UDP socket, connected to the peer.
    pub sock: Socket,
    endpoint: Endpoint,
    /// The connection.
    pub conn: Connection,
    handle: ConnectionHandle,
    tx: Vec<u8>,
    rx: BytesMut,
    resp: Vec<u8>,
    /// Why the connection ended, once it has.
    pub lost: Option<ConnectionError>,
    /// True once the handshake finished.
    pub connected: bool,
    /// Datagrams one send may carry: [`GSO_SEGMENTS`], or 1 once the kernel refused GSO.
    pub gso: usize,
    /// Why GSO is off, when the kernel refused it.
    pub gso_refused: Option<String>,
    ctrl: crate::gso::Cmsg,
    rx_ctrl: crate::gso::Cmsg,
    /// True when the kernel coalesces arriving datagrams (UDP_GRO).
    pub gro: bool,
    peer: SocketAddr,
}

impl Driver {
    /// Drives `conn` (made by `endpoint` as `handle`) over `sock`.
    pub fn new(
        sock: Socket,
        endpoint: Endpoint,
        handle: ConnectionHandle,
        conn: Connection,
    ) -> Self {
        // Coalesced receives only once the socket hears one peer: before that, datagrams of
        // different clients' handshakes must stay apart.
        let gro = crate::gso::enable_gro(sock.as_raw_fd()).is_ok();
        let peer = conn.remote_address();
        Self {
            sock,
            endpoint,
            conn,
            handle,
            tx: Vec::with_capacity(RX_DATAGRAM),
            rx: BytesMut::with_capacity(RX_DATAGRAM),
            resp: Vec::new(),
            lost: None,
            connected: false,
            gso: GSO_SEGMENTS,
            gso_refused: None,
            ctrl: crate::gso::Cmsg::default(),
            rx_ctrl: crate::gso::Cmsg::default(),
            gro,
            peer,
        }
    }

    /// Sends every datagram the connection has ready now.
    pub fn flush(&mut self) -> io::Result<()> {
        loop {
            self.tx.clear();
            let Some(t) = self
                .conn
                .poll_transmit(Instant::now(), self.gso, &mut self.tx)
            else {
                break;
            };
            match t.segment_size.filter(|s| *s < t.size) {
                Some(seg) => self.send_segments(&t, seg)?,
                None => send_to(&self.sock, t.destination, &self.tx[..t.size])?,
            }
        }
        self.events();
        Ok(())
    }

    /// Sends the datagrams of one transmit in one sendmsg (the socket is connected to its
    /// destination); a kernel or device that refuses GSO gets them one by one from then on.
    fn send_segments(&mut self, t: &Transmit, seg: usize) -> io::Result<()> {
        let fd = self.sock.as_raw_fd();
        match crate::gso::send_segmented(fd, &mut self.ctrl, &self.tx[..t.size], seg) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => self.send_segments(t, seg),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) => {
                self.gso = 1;
                self.gso_refused = Some(format!("off: the kernel refused UDP_SEGMENT ({e})"));
                for d in self.tx[..t.size].chunks(seg) {
                    send_to(&self.sock, t.destination, d)?;
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Reads the datagrams that have arrived (up to a batch; several per receive where the
    /// kernel coalesced them) without waiting, and fires the timers that are due. Returns how many datagrams it read.
    pub fn poll_input(&mut self) -> io::Result<usize> {
        let mut read = 0;
        while read < BATCH {
            self.rx.reserve(RX_DATAGRAM);
            let room = self.rx.spare_capacity_mut();
            // SAFETY: the spare room is valid for writes of its length for the call.
            let got = unsafe {
                crate::gso::recv_coalesced(
                    self.sock.as_raw_fd(),
                    room.as_mut_ptr().cast(),
                    room.len(),
                    &mut self.rx_ctrl,
                    libc::MSG_DONTWAIT,
                )
            };
            match got {
                Ok((0, _)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the quic data socket was shut down (the session ended)",
                    ))
                }
                Ok((n, seg)) => {
                    // SAFETY: recvmsg(2) initialised the first `n` bytes of the spare room.
                    unsafe { self.rx.set_len(n) };
                    let mut data = self.rx.split_to(n);
                    let seg = if seg == 0 { n } else { seg };
                    while !data.is_empty() {
                        let one = data.split_to(seg.min(data.len()));
                        read += 1;
                        self.input(self.peer, one)?;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // An ICMP error for an earlier datagram (the peer's port closed): QUIC's
                // own timers decide whether the connection is gone.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e),
            }
        }
        self.timers();
        self.events();
        Ok(read)
    }

    fn input(&mut self, from: SocketAddr, data: BytesMut) -> io::Result<()> {
        let now = Instant::now();
        self.resp.clear();
        match self
            .endpoint
            .handle(now, from, None, None, data, &mut self.resp)
        {
            Some(DatagramEvent::ConnectionEvent(h, ev)) if h == self.handle => {
                self.conn.handle_event(ev)
            }
            Some(DatagramEvent::ConnectionEvent(..)) | None => {}
            Some(DatagramEvent::NewConnection(incoming)) => {
                let t = self.endpoint.refuse(incoming, &mut self.resp);
                self.respond(&t)?;
            }
            Some(DatagramEvent::Response(t)) => self.respond(&t)?,
        }
        Ok(())
    }

    fn respond(&self, t: &Transmit) -> io::Result<()> {
        send_to(&self.sock, t.destination, &self.resp[..t.size])
    }

    fn timers(&mut self) {
        let now = Instant::now();
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
    }

    /// Hands the connection's requests to the endpoint and notes what happened to it.
    fn events(&mut self) {
        while let Some(ev) = self.conn.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(self.handle, ev) {
                self.conn.handle_event(back);
            }
        }
        while let Some(ev) = self.conn.poll() {
            match ev {
                Event::Connected => self.connected = true,
                Event::ConnectionLost { reason } => self.lost = Some(reason),
                _ => {}
            }
        }
    }

    /// One turn: sends what is ready, waits until a datagram arrives, a timer is due or
    /// `until` passes, and handles what came. False when `until` passed.
    pub fn turn(&mut self, until: Instant) -> io::Result<bool> {
        self.flush()?;
        let wake = self.conn.poll_timeout().map_or(until, |t| t.min(until));
        wait_readable(&self.sock, wake.saturating_duration_since(Instant::now()))?;
        self.poll_input()?;
        self.flush()?;
        Ok(Instant::now() < until)
    }

    /// Turns until `done` holds, the connection ends or `deadline` passes (`what` names the
    /// wait in the error).
    pub fn until(
        &mut self,
        deadline: Instant,
        what: &str,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> io::Result<()> {
        loop {
            if done(self) {
                return Ok(());
            }
            if let Some(why) = &self.lost {
                return Err(lost(why, what));
            }
            if !self.turn(deadline)? {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{what} did not finish in time"),
                ));
            }
        }
    }

    /// Closes the connection (`code` 0: done) and sends the close, without waiting.
    pub fn close(&mut self, code: u32, reason: &'static [u8]) {
        if self.lost.is_none() && !self.conn.is_closed() {
            self.conn.close(
                Instant::now(),
                quinn_proto::VarInt::from_u32(code),
                bytes::Bytes::from_static(reason),
            );
            let _ = self.flush();
        }
    }
}

/// A server's first connection on `sock`: waits until `deadline` for a client's Initial
/// from `peer` (any address when `None`; others are ignored and counted), accepts it and
/// connects the socket to that client. Returns the endpoint, the connection, the client's
/// address and how many datagrams came from elsewhere.
pub fn first_connection(
    sock: &Socket,
    server: std::sync::Arc<quinn_proto::ServerConfig>,
    peer: Option<std::net::IpAddr>,
    deadline: Instant,
) -> io::Result<(Endpoint, ConnectionHandle, Connection, SocketAddr, u64)> {
    let mut ep = Endpoint::new(super::config::endpoint(), Some(server), true, None);
    let mut strangers = 0u64;
    let mut resp = Vec::new();
    let mut rx = BytesMut::new();
    loop {
        let left = crate::cookie::left(deadline, "the client's QUIC handshake")?;
        if !wait_readable(sock, left)? {
            continue;
        }
        let (data, from) = match recv_datagram(sock, &mut rx) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) if crate::cookie::is_wait(&e) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e),
        };
        if peer.is_some_and(|p| !ip::same_ip(from.ip(), p)) {
            strangers += 1;
            continue;
        }
        resp.clear();
        let now = Instant::now();
        let t = match ep.handle(now, from, None, None, data, &mut resp) {
            Some(DatagramEvent::NewConnection(incoming)) => {
                match ep.accept(incoming, now, &mut resp, None) {
                    Ok((h, c)) => {
                        // From here on the socket hears only this client (the kernel drops
                        // the rest).
                        sock.connect(&SockAddr::from(from))?;
                        return Ok((ep, h, c, from, strangers));
                    }
                    Err(e) => e.response,
                }
            }
            Some(DatagramEvent::Response(t)) => Some(t),
            _ => None,
        };
        if let Some(t) = t {
            send_to(sock, from, &resp[..t.size])?;
        }
    }
}

/// Reads one datagram that has arrived, without waiting: `None` when none has. The data
/// is split off `rx`, whose allocation the next datagrams reuse once it is handled.
pub fn recv_datagram(
    sock: &Socket,
    rx: &mut BytesMut,
) -> io::Result<Option<(BytesMut, SocketAddr)>> {
    rx.reserve(RX_DATAGRAM);
    match sock.recv_from_with_flags(rx.spare_capacity_mut(), libc::MSG_DONTWAIT) {
        Ok((0, _)) => Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the quic data socket was shut down (the session ended)",
        )),
        Ok((n, from)) => {
            // SAFETY: recvfrom(2) initialised the first `n` bytes of the spare room.
            unsafe { rx.set_len(n) };
            let data = rx.split_to(n);
            let from = from.as_socket().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a datagram from a non-IP address",
                )
            })?;
            Ok(Some((data, from)))
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens a UDP socket for `quic` on `bind` (port 0: the kernel's choice), its knobs applied,
/// packets sent whole (don't fragment: path-MTU discovery probes with them).
pub fn socket(bind: SocketAddr, k: &Knobs) -> io::Result<(Socket, Vec<String>)> {
    let sock = ip::open(Transport::Udp, bind.ip())?;
    // The congestion controller is quinn-proto's (config.rs), not a socket option.
    let socket_knobs = Knobs {
        congestion_control: None,
        ..k.clone()
    };
    let notes = knobs::apply(&sock, &socket_knobs, Transport::Quic, bind.is_ipv6())?;
    dont_fragment(&sock, bind.is_ipv6())?;
    sock.bind(&SockAddr::from(bind))?;
    Ok((sock, notes))
}

/// IP_PMTUDISC_PROBE: the DF bit set, the kernel's path-MTU cache ignored (QUIC finds the
/// path's size itself), as quinn's own UDP layer does.
fn dont_fragment(sock: &Socket, v6: bool) -> io::Result<()> {
    let (level, name, value) = if v6 {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_PROBE,
        )
    } else {
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        )
    };
    // SAFETY: a c_int option value of its size on a valid socket.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The error of a connection that ended while `what` waited on it.
pub fn lost(why: &ConnectionError, what: &str) -> io::Error {
    let kind = match why {
        ConnectionError::TimedOut => io::ErrorKind::TimedOut,
        ConnectionError::ApplicationClosed(_) | ConnectionError::ConnectionClosed(_) => {
            io::ErrorKind::ConnectionAborted
        }
        ConnectionError::Reset => io::ErrorKind::ConnectionReset,
        _ => io::ErrorKind::InvalidData,
    };
    io::Error::new(
        kind,
        format!("the QUIC connection ended during {what}: {why}"),
    )
}

/// Sends one datagram; a full socket buffer waits (up to the socket's send timeout).
fn send_to(sock: &Socket, to: SocketAddr, data: &[u8]) -> io::Result<()> {
    let to = SockAddr::from(to);
    loop {
        match sock.send_to(data, &to) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // The ICMP error of an earlier datagram, reported on this one's call: it was not
            // sent; QUIC's loss recovery resends what it carried.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Waits up to `left` for a datagram to arrive on `sock` (ppoll: nanosecond timeouts).
pub fn wait_readable(sock: &Socket, left: Duration) -> io::Result<bool> {
    Ok(wait(sock.as_raw_fd(), None, left)?.0)
}

/// Waits up to `left` for `fd`, or `also` when given, to become readable: which of the two
/// are (ppoll: nanosecond timeouts; an interrupted wait is one with nothing ready).
pub fn wait(fd: RawFd, also: Option<RawFd>, left: Duration) -> io::Result<(bool, bool)> {
    let mut fds = [fd, also.unwrap_or(-1)].map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = libc::timespec {
        tv_sec: left.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(left.subsec_nanos() as i32),
    };
    let n = if also.is_some() { 2 } else { 1 };
    // SAFETY: `n` valid pollfds, a valid timespec, no signal mask.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), n, &ts, std::ptr::null()) };
    if r == -1 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok((false, false))
        } else {
            Err(e)
        };
    }
    Ok((fds[0].revents != 0, n == 2 && fds[1].revents != 0))
}
