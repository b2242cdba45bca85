//! TCP and UDP over IPv4 or IPv6 with the `basic` api: one send/recv call per transfer.

use crate::{cookie, knobs};
use netsweep_core::endpoint::{DataListener, Endpoint};
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn domain(ip: IpAddr) -> Domain {
    if ip.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    }
}

/// A connected TCP data endpoint.
#[derive(Debug)]
pub struct TcpEndpoint {
    stream: TcpStream,
    granted: GrantedKnobs,
}

impl TcpEndpoint {
    fn new(sock: Socket, knobs: &Knobs) -> io::Result<Self> {
        sock.set_tcp_nodelay(knobs.nodelay.unwrap_or(true))?;
        let granted = knobs::granted(&sock, knobs, true);
        Ok(Self {
            stream: sock.into(),
            granted,
        })
    }
}

impl Endpoint for TcpEndpoint {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }
    fn is_datagram(&self) -> bool {
        false
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(timeout)
    }
    fn granted(&self) -> GrantedKnobs {
        self.granted.clone()
    }
    fn as_dyn(&mut self) -> &mut dyn Endpoint {
        self
    }
}

/// The server's TCP data listener.
#[derive(Debug)]
pub struct TcpDataListener {
    sock: Socket,
    knobs: Knobs,
    port: u16,
}

impl TcpDataListener {
    pub fn open(bind: IpAddr, knobs: &Knobs) -> io::Result<Self> {
        let sock = Socket::new(domain(bind), Type::STREAM, Some(Protocol::TCP))?;
        sock.set_reuse_address(true)?;
        // Buffer sizes must be set before listen() so the window scale is chosen for them.
        knobs::apply_buffers(&sock, knobs)?;
        sock.bind(&SockAddr::from(SocketAddr::new(bind, 0)))?;
        sock.listen(16)?;
        let port = sock.local_addr()?.as_socket().map_or(0, |a| a.port());
        Ok(Self {
            sock,
            knobs: knobs.clone(),
            port,
        })
    }
}

impl DataListener for TcpDataListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: self.port,
            ..Default::default()
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let deadline = Instant::now() + timeout;
        loop {
            // SO_RCVTIMEO bounds accept() on Linux.
            self.sock.set_read_timeout(Some(cookie::left(
                deadline,
                "the client's TCP data connection",
            )?))?;
            let (conn, _) = match self.sock.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client's TCP data connection did not arrive",
                    ));
                }
                Err(e) => return Err(e),
            };
            conn.set_read_timeout(Some(Duration::from_secs(2)))?;
            let mut s: TcpStream = conn.try_clone()?.into();
            if cookie::read(&mut s).ok() == Some(want) {
                drop(s);
                conn.set_read_timeout(None)?;
                return Ok(Box::new(TcpEndpoint::new(conn, &self.knobs)?));
            }
        }
    }
}

/// Connects the client's TCP data path.
pub fn tcp_connect(
    server: SocketAddr,
    knobs: &Knobs,
    want: u64,
    timeout: Duration,
) -> io::Result<Box<dyn Endpoint>> {
    let sock = Socket::new(domain(server.ip()), Type::STREAM, Some(Protocol::TCP))?;
    knobs::apply_buffers(&sock, knobs)?;
    sock.connect_timeout(&SockAddr::from(server), timeout)?;
    sock.set_write_timeout(Some(timeout))?;
    let mut s: TcpStream = sock.try_clone()?.into();
    cookie::present(&mut s, want)?;
    Ok(Box::new(TcpEndpoint::new(sock, knobs)?))
}

/// A connected UDP data endpoint.
#[derive(Debug)]
pub struct UdpEndpoint {
    sock: UdpSocket,
    granted: GrantedKnobs,
}

impl Endpoint for UdpEndpoint {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.send(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.recv(buf)
    }
    fn is_datagram(&self) -> bool {
        true
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(timeout)
    }
    fn granted(&self) -> GrantedKnobs {
        self.granted.clone()
    }
    fn as_dyn(&mut self) -> &mut dyn Endpoint {
        self
    }
}

fn udp_socket(bind: SocketAddr, knobs: &Knobs) -> io::Result<(UdpSocket, GrantedKnobs)> {
    let sock = Socket::new(domain(bind.ip()), Type::DGRAM, Some(Protocol::UDP))?;
    knobs::apply_buffers(&sock, knobs)?;
    sock.bind(&SockAddr::from(bind))?;
    let mut granted = knobs::granted(&sock, knobs, false);
    if knobs.nodelay.is_some() {
        granted.notes.push("nodelay does not apply to udp".into());
    }
    Ok((sock.into(), granted))
}

/// The server's UDP data socket, waiting for the client's cookie datagram.
#[derive(Debug)]
pub struct UdpDataListener {
    sock: Option<(UdpSocket, GrantedKnobs)>,
    port: u16,
}

impl UdpDataListener {
    pub fn open(bind: IpAddr, knobs: &Knobs) -> io::Result<Self> {
        let (sock, granted) = udp_socket(SocketAddr::new(bind, 0), knobs)?;
        let port = sock.local_addr()?.port();
        Ok(Self {
            sock: Some((sock, granted)),
            port,
        })
    }
}

impl DataListener for UdpDataListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: self.port,
            ..Default::default()
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let (sock, granted) = self
            .sock
            .take()
            .ok_or_else(|| io::Error::other("the UDP data socket was already handed out"))?;
        let deadline = Instant::now() + timeout;
        let mut b = [0u8; 64];
        loop {
            sock.set_read_timeout(Some(cookie::left(
                deadline,
                "the client's UDP cookie datagram",
            )?))?;
            match sock.recv_from(&mut b) {
                Ok((n, from)) if n == cookie::LEN && b[..n] == want.to_be_bytes() => {
                    sock.connect(from)?;
                    sock.send(&want.to_be_bytes())?;
                    sock.set_read_timeout(None)?;
                    return Ok(Box::new(UdpEndpoint { sock, granted }));
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Connects the client's UDP data path: sends the cookie until the server acknowledges it.
pub fn udp_connect(
    server: SocketAddr,
    knobs: &Knobs,
    want: u64,
    timeout: Duration,
) -> io::Result<Box<dyn Endpoint>> {
    let any: IpAddr = if server.is_ipv4() {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u16; 8])
    };
    let (sock, granted) = udp_socket(SocketAddr::new(any, 0), knobs)?;
    sock.connect(server)?;
    let deadline = Instant::now() + timeout;
    let mut b = [0u8; 64];
    loop {
        sock.send(&want.to_be_bytes())?;
        let wait = cookie::left(deadline, "the server's UDP acknowledgement")?
            .min(Duration::from_millis(200));
        sock.set_read_timeout(Some(wait))?;
        match sock.recv(&mut b) {
            Ok(n) if n == cookie::LEN && b[..n] == want.to_be_bytes() => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            // ICMP port unreachable from an earlier attempt: the server may not be bound yet.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::thread::sleep(wait),
            Err(e) => return Err(e),
        }
    }
    Ok(Box::new(UdpEndpoint { sock, granted }))
}
