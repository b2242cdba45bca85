//! IP transports over IPv4 or IPv6: the stream kind (`tcp`, `mptcp`) and the datagram kind
//! (`udp`, `udplite`). They differ only in the protocol number passed to socket(2); what is
//! particular to MPTCP and UDP-Lite lives in `mptcp.rs` and `udplite.rs`.
//!
//! Stream clients write the 8-byte session cookie first; datagram clients resend it until the
//! server echoes it back.

use crate::api::{self, Side};
use crate::basic::{Conn, ConnListener};
use crate::descriptor::{
    no_footprint, probe_socket, Descriptor, MessageLimit, Peer, CONNECTED_BIDIR, MESSAGES_BIDIR,
};
use crate::{cookie, crr, knobs};
use netsweep_endpoint::{CrrConnector, DataListener, Endpoint};
use netsweep_model::spec::{Api, Transport};
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs, SessionSetup};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// `tcp`: the kernel's TCP over IPv4 or IPv6.
pub static TCP: Descriptor = Descriptor {
    transport: Transport::Tcp,
    family: None,
    default_ceiling: 8 << 20,
    max_message: None,
    apis: &[
        Api::Basic,
        Api::Zerocopy,
        Api::Sendfile,
        Api::Splice,
        Api::Uring,
    ],
    patterns: CONNECTED_BIDIR,
    knobs: knobs::TCP,
    polls: false,
    probe: || probe_socket(Transport::Tcp, || open(Transport::Tcp, PROBE_ADDR)),
    listen: |s, bind, peer, api| listen(Transport::Tcp, s, bind, peer, api),
    footprint: no_footprint,
    connect: |p, cookie, api| connect(Transport::Tcp, p, cookie, api),
    crr: Some(|p| crr_connector(Transport::Tcp, p)),
    unbuilt: &[],
    api_limits: &[],
};

/// `udp`: the kernel's UDP over IPv4 or IPv6.
pub static UDP: Descriptor = Descriptor {
    transport: Transport::Udp,
    family: None,
    default_ceiling: UDP_LIMIT.v4,
    max_message: Some(UDP_LIMIT),
    apis: &[Api::Basic, Api::Mmsg, Api::Zerocopy, Api::Uring, Api::Gso],
    patterns: MESSAGES_BIDIR,
    knobs: knobs::UDP,
    polls: false,
    probe: || probe_socket(Transport::Udp, || open(Transport::Udp, PROBE_ADDR)),
    listen: |s, bind, peer, api| listen(Transport::Udp, s, bind, peer, api),
    footprint: crate::gso::footprint,
    connect: |p, cookie, api| connect(Transport::Udp, p, cookie, api),
    crr: None,
    unbuilt: &[],
    api_limits: &[],
};

/// The largest UDP (and UDP-Lite) payload: 65535 − 20 (IPv4 header) − 8, or 65535 − 8 over
/// IPv6, whose payload length leaves out its own header.
pub const UDP_LIMIT: MessageLimit = MessageLimit {
    v4: 65_507,
    v6: 65_527,
};

/// Where the probes open their socket: binding is never needed, only the family.
const PROBE_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The probe of `mptcp` and `udplite`, whose refusals [`open`] already explains.
pub fn probe_explained(t: Transport) -> Result<Option<Socket>, String> {
    open(t, PROBE_ADDR).map(Some).map_err(|e| e.to_string())
}

/// The server side of an IP transport: a stream listener (`tcp`, `mptcp`) or a datagram
/// socket waiting for the cookie (`udp`, `udplite`).
pub fn listen(
    t: Transport,
    setup: &SessionSetup,
    bind: IpAddr,
    peer: IpAddr,
    api: Api,
) -> io::Result<Box<dyn DataListener>> {
    let k = &setup.server_knobs;
    let inner: Box<dyn ConnListener> = if t.is_datagram() {
        Box::new(DgramListener::open(t, bind, peer, k)?)
    } else {
        Box::new(StreamListener::open(t, bind, k)?)
    };
    Ok(api::listener(inner, api))
}

/// The client side of an IP transport, wrapped in `api`.
pub fn connect(t: Transport, p: &Peer<'_>, cookie: u64, api: Api) -> io::Result<Box<dyn Endpoint>> {
    let conn = if t.is_datagram() {
        dgram_connect(t, p.addr(), p.knobs, cookie, p.timeout)?
    } else {
        stream_connect(t, p.addr(), p.knobs, cookie, p.timeout)?
    };
    api::wrap(conn, api, Side::Client)
}

/// The crr connector of `tcp` and `mptcp`.
pub fn crr_connector(t: Transport, p: &Peer<'_>) -> io::Result<Box<dyn CrrConnector>> {
    let addr = SockAddr::from(p.addr());
    Ok(Box::new(crr::Connector::new(t, addr, p.knobs, p.timeout)?))
}

fn domain(ip: IpAddr) -> Domain {
    if ip.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    }
}

/// The IP protocol number of an IP transport.
pub fn protocol(t: Transport) -> Protocol {
    match t {
        Transport::Mptcp => Protocol::from(libc::IPPROTO_MPTCP),
        Transport::Udplite => Protocol::from(libc::IPPROTO_UDPLITE),
        Transport::Udp => Protocol::UDP,
        _ => Protocol::TCP,
    }
}

/// Opens a socket of transport `t`, explaining a refusal.
pub fn open(t: Transport, ip: IpAddr) -> io::Result<Socket> {
    let ty = if t.is_datagram() {
        Type::DGRAM
    } else {
        Type::STREAM
    };
    Socket::new(domain(ip), ty, Some(protocol(t))).map_err(|e| match t {
        Transport::Mptcp => crate::mptcp::explain(e),
        Transport::Udplite => crate::udplite::explain(e),
        _ => e,
    })
}

/// Knobs to re-apply on an accepted connection (buffers were set on the listener).
fn conn_knobs(k: &Knobs) -> Knobs {
    Knobs {
        sndbuf: None,
        rcvbuf: None,
        ..k.clone()
    }
}

/// The server's listener for `tcp` and `mptcp`.
#[derive(Debug)]
pub struct StreamListener {
    sock: Socket,
    knobs: Knobs,
    port: u16,
    t: Transport,
    v6: bool,
    notes: Vec<String>,
    crr: crr::Accepting,
}

impl StreamListener {
    /// Binds a listening socket on `bind`, port chosen by the kernel, knobs applied first.
    pub fn open(t: Transport, bind: IpAddr, knobs: &Knobs) -> io::Result<Self> {
        let sock = open(t, bind)?;
        sock.set_reuse_address(true)?;
        let v6 = bind.is_ipv6();
        // Buffer sizes must be set before listen() so the window scale is chosen for them.
        let notes = knobs::apply(&sock, knobs, t, v6)?;
        sock.bind(&SockAddr::from(SocketAddr::new(bind, 0)))?;
        // Room for `--flows`' connections arriving faster than the session accepts them
        // (a full queue drops the SYN and costs the client a second's retransmission).
        sock.listen(crate::descriptor::BACKLOG)?;
        let port = sock.local_addr()?.as_socket().map_or(0, |a| a.port());
        Ok(Self {
            sock,
            knobs: knobs.clone(),
            port,
            t,
            v6,
            notes,
            crr: crr::Accepting::default(),
        })
    }
}

impl ConnListener for StreamListener {
    fn prepare_crr(&mut self, client: IpAddr, slice: Duration) -> io::Result<GrantedKnobs> {
        let (a, granted) = crr::Accepting::prepare(
            &self.sock,
            self.t,
            &self.knobs,
            self.notes.clone(),
            Some(client),
            slice,
        )?;
        self.crr = a;
        Ok(granted)
    }

    #[inline]
    fn accept_crr(&mut self) -> io::Result<Option<OwnedFd>> {
        self.crr.accept(&self.sock)
    }

    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: self.port,
            ..Default::default()
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Conn> {
        let deadline = Instant::now() + timeout;
        loop {
            // SO_RCVTIMEO bounds accept() on Linux, except MPTCP's: it polls first.
            let left = cookie::left(deadline, "the client's data connection")?;
            self.sock.set_read_timeout(Some(left))?;
            if self.t == Transport::Mptcp && !crr::readable(self.sock.as_raw_fd(), left)? {
                continue;
            }
            let (conn, _) = match self.sock.accept() {
                Ok(c) => c,
                // A signal: the deadline decides.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the client's {} data connection did not arrive", self.t),
                    ));
                }
                Err(e) => return Err(e),
            };
            let by = (Instant::now() + cookie::PRESENT_WITHIN).min(deadline);
            if cookie::read_by(&conn, by).ok() == Some(want) {
                conn.set_read_timeout(None)?;
                knobs::apply(&conn, &conn_knobs(&self.knobs), self.t, self.v6)?;
                let granted =
                    knobs::granted(&conn, &self.knobs, self.t, self.v6, self.notes.clone());
                return Ok(Conn {
                    sock: conn,
                    transport: self.t,
                    v6: self.v6,
                    granted,
                    guard: None,
                });
            }
        }
    }
}

/// Connects the client's `tcp` or `mptcp` data path and presents the cookie.
pub fn stream_connect(
    t: Transport,
    server: SocketAddr,
    knobs: &Knobs,
    want: u64,
    timeout: Duration,
) -> io::Result<Conn> {
    let sock = open(t, server.ip())?;
    let v6 = server.is_ipv6();
    let notes = knobs::apply(&sock, knobs, t, v6)?;
    sock.connect_timeout(&SockAddr::from(server), timeout)?;
    sock.set_write_timeout(Some(timeout))?;
    let mut s: TcpStream = sock.try_clone()?.into();
    cookie::present(&mut s, want)?;
    let granted = knobs::granted(&sock, knobs, t, v6, notes);
    Ok(Conn {
        sock,
        transport: t,
        v6,
        granted,
        guard: None,
    })
}

fn dgram_socket(
    t: Transport,
    bind: SocketAddr,
    knobs: &Knobs,
) -> io::Result<(Socket, Vec<String>)> {
    let sock = open(t, bind.ip())?;
    let notes = knobs::apply(&sock, knobs, t, bind.is_ipv6())?;
    sock.bind(&SockAddr::from(bind))?;
    Ok((sock, notes))
}

/// The server's `udp`/`udplite` data socket, waiting for the client's cookie datagram — from
/// the session's control peer only: a cookie from any other address (a client's second
/// address, or a source spoofed to aim the server's datagrams at a third host) is ignored
/// and counted, so the server never sends to an address that did not open the session.
#[derive(Debug)]
pub struct DgramListener {
    sock: Option<(Socket, Vec<String>)>,
    knobs: Knobs,
    port: u16,
    t: Transport,
    peer: IpAddr,
}

impl DgramListener {
    /// Binds the data socket on `bind`, port chosen by the kernel, for a session whose
    /// control connection comes from `peer`.
    pub fn open(t: Transport, bind: IpAddr, peer: IpAddr, knobs: &Knobs) -> io::Result<Self> {
        let (sock, notes) = dgram_socket(t, SocketAddr::new(bind, 0), knobs)?;
        let port = sock.local_addr()?.as_socket().map_or(0, |a| a.port());
        Ok(Self {
            sock: Some((sock, notes)),
            knobs: knobs.clone(),
            port,
            t,
            peer,
        })
    }
}

/// The same host address, whether or not one side wrote an IPv4 address IPv4-mapped.
pub fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

impl ConnListener for DgramListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: self.port,
            ..Default::default()
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Conn> {
        let (sock, notes) = self
            .sock
            .take()
            .ok_or_else(|| io::Error::other("the datagram data socket was already handed out"))?;
        let deadline = Instant::now() + timeout;
        let mut b = [std::mem::MaybeUninit::<u8>::uninit(); 64];
        let mut strangers = 0u64;
        loop {
            sock.set_read_timeout(Some(cookie::left(
                deadline,
                "the client's cookie datagram",
            )?))?;
            match sock.recv_from(&mut b) {
                Ok((_, from)) if !from.as_socket().is_some_and(|a| same_ip(a.ip(), self.peer)) => {
                    strangers += 1;
                }
                Ok((n, from)) if n == cookie::LEN => {
                    // SAFETY: recv_from initialised the first `n` bytes.
                    let got: [u8; 8] = std::array::from_fn(|i| unsafe { b[i].assume_init() });
                    if got != want.to_be_bytes() {
                        continue;
                    }
                    sock.connect(&from)?;
                    sock.send(&want.to_be_bytes())?;
                    sock.set_read_timeout(None)?;
                    let v6 = from.is_ipv6();
                    let mut granted = knobs::granted(&sock, &self.knobs, self.t, v6, notes);
                    if strangers > 0 {
                        granted.notes.push(format!(
                            "{strangers} datagram(s) to the data port from addresses other \
                             than the client's ({}) were ignored",
                            self.peer
                        ));
                    }
                    return Ok(Conn {
                        sock,
                        transport: self.t,
                        v6,
                        granted,
                        guard: None,
                    });
                }
                Ok(_) => {}
                Err(e) if cookie::is_wait(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Connects the client's `udp`/`udplite` data path: sends the cookie until the server
/// acknowledges it.
pub fn dgram_connect(
    t: Transport,
    server: SocketAddr,
    knobs: &Knobs,
    want: u64,
    timeout: Duration,
) -> io::Result<Conn> {
    let any: IpAddr = if server.is_ipv4() {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u16; 8])
    };
    let (sock, notes) = dgram_socket(t, SocketAddr::new(any, 0), knobs)?;
    sock.connect(&SockAddr::from(server))?;
    let deadline = Instant::now() + timeout;
    let mut b = [0u8; 64];
    let mut r: &Socket = &sock;
    let mut handshake = 0u64;
    loop {
        sock.send(&want.to_be_bytes())?;
        handshake += 1;
        let wait = cookie::left(deadline, "the server's datagram acknowledgement")?
            .min(Duration::from_millis(200));
        sock.set_read_timeout(Some(wait))?;
        match r.read(&mut b) {
            Ok(n) if n == cookie::LEN && b[..n] == want.to_be_bytes() => break,
            Ok(_) => {}
            Err(e) if cookie::is_wait(&e) => {}
            // ICMP port unreachable from an earlier attempt: the server may not be bound yet.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::thread::sleep(wait),
            Err(e) => return Err(e),
        }
    }
    let v6 = server.is_ipv6();
    let mut granted = knobs::granted(&sock, knobs, t, v6, notes);
    // Recorded so drops of resent cookies on a lossy link are not taken for run losses.
    granted.handshake_datagrams = Some(handshake);
    Ok(Conn {
        sock,
        transport: t,
        v6,
        granted,
        guard: None,
    })
}
