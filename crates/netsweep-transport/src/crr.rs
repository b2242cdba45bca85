//! The crr pattern's connections (tcp, mptcp, unix-stream), prepared once so that each
//! transaction costs what a real client and server pay and nothing of netsweep's own.
//!
//! Client: [`Connector`] resolves the address and turns the knobs into plain setsockopt
//! calls once; each connection is socket(2), those setsockopt(2)s, connect(2). No readback,
//! no dup, no cookie write: the cookie rides in the request (see `netsweep_engine::pattern::crr`).
//! Server: [`Accepting`] sets the timeouts on the listener once; Linux TCP sockets inherit
//! them (and every knob but SO_PRIORITY) from the listener on accept, unix sockets inherit
//! nothing, so what does not inherit is set on each accepted socket; MPTCP's accept ignores
//! SO_RCVTIMEO, so an MPTCP listener is polled first. Connections from any address but the
//! session client's are closed unread.

use crate::knobs::{self, Setting};
use netsweep_endpoint::CrrConnector;
use netsweep_model::spec::Transport;
use netsweep_proto::messages::{GrantedKnobs, Knobs};
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

/// Opens the client's crr connections.
#[derive(Debug)]
pub struct Connector {
    t: Transport,
    domain: Domain,
    protocol: Option<Protocol>,
    addr: SockAddr,
    /// The unix socket's path, to explain a missing one.
    path: Option<PathBuf>,
    /// The knobs, then SO_SNDTIMEO (bounds connect and send) and SO_RCVTIMEO.
    settings: Vec<Setting>,
    knobs: Knobs,
    v6: bool,
    notes: Vec<String>,
    timeout: Duration,
}

impl Connector {
    /// Prepares connections of `t` to `addr`, bounded by `timeout`. Opens one socket and sets
    /// every option on it, so a refused knob is reported (with its fix) before any point.
    pub fn new(t: Transport, addr: SockAddr, knobs: &Knobs, timeout: Duration) -> io::Result<Self> {
        let v6 = addr.is_ipv6();
        let path = addr.as_pathname().map(|p| p.to_path_buf());
        let (domain, protocol) = if path.is_some() {
            (Domain::UNIX, None)
        } else {
            (
                Domain::from(i32::from(addr.family())),
                Some(crate::ip::protocol(t)),
            )
        };
        let (mut settings, notes) = knobs::plan(knobs, t, v6)?;
        settings.push(Setting::timeout(libc::SO_SNDTIMEO, timeout));
        settings.push(Setting::timeout(libc::SO_RCVTIMEO, timeout));
        let c = Self {
            t,
            domain,
            protocol,
            addr,
            path,
            settings,
            knobs: knobs.clone(),
            v6,
            notes,
            timeout,
        };
        let probe = c.socket()?;
        for s in &c.settings {
            s.set(probe.as_raw_fd())?;
        }
        Ok(c)
    }

    #[inline]
    fn socket(&self) -> io::Result<Socket> {
        Socket::new(self.domain, Type::STREAM, self.protocol).map_err(|e| self.open_error(e))
    }

    #[cold]
    fn open_error(&self, e: io::Error) -> io::Error {
        match self.t {
            Transport::Mptcp => crate::mptcp::explain(e),
            _ => e,
        }
    }

    #[cold]
    fn connect_error(&self, e: io::Error) -> io::Error {
        match (e.raw_os_error(), &self.path) {
            // A blocking connect whose SO_SNDTIMEO expired.
            (Some(libc::EINPROGRESS), _) => io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the server did not accept a {} connection within {:.1} s: raise --timeout, or \
                     check that nothing drops the SYNs",
                    self.t,
                    self.timeout.as_secs_f64()
                ),
            ),
            (Some(libc::ENOENT), Some(p)) => io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} does not exist: unix transports need client and server on one host",
                    p.display()
                ),
            ),
            _ => e,
        }
    }
}

impl CrrConnector for Connector {
    #[inline]
    fn connect(&mut self) -> io::Result<OwnedFd> {
        let sock = self.socket()?;
        let fd = sock.as_raw_fd();
        for s in &self.settings {
            s.set(fd)?;
        }
        sock.connect(&self.addr)
            .map_err(|e| self.connect_error(e))?;
        Ok(sock.into())
    }

    fn granted(&self, conn: BorrowedFd<'_>) -> GrantedKnobs {
        let sock = SockRef::from(&conn);
        knobs::granted(&sock, &self.knobs, self.t, self.v6, self.notes.clone())
    }
}

/// A listener's crr state: whom it serves and what to set on each accepted socket.
#[derive(Debug, Default)]
pub struct Accepting {
    /// Only connections from this address are served (IP transports).
    client: Option<IpAddr>,
    /// Settings accepted sockets do not inherit from the listener.
    after: Vec<Setting>,
    /// MPTCP's accept ignores SO_RCVTIMEO: wait for a connection with poll(2) for this long.
    poll: Option<Duration>,
}

impl Accepting {
    /// Sets the slice timeouts on `listener` (bounding accept, and on TCP the accepted
    /// sockets' sends and receives) and works out what each accepted socket still needs.
    /// Returns the state and the knobs accepted sockets will have.
    pub fn prepare(
        listener: &Socket,
        t: Transport,
        knobs: &Knobs,
        notes: Vec<String>,
        client: Option<IpAddr>,
        slice: Duration,
    ) -> io::Result<(Self, GrantedKnobs)> {
        let v6 = listener.local_addr().map(|a| a.is_ipv6()).unwrap_or(false);
        let timeouts = [
            Setting::timeout(libc::SO_RCVTIMEO, slice),
            Setting::timeout(libc::SO_SNDTIMEO, slice),
        ];
        for s in &timeouts {
            s.set(listener.as_raw_fd())?;
        }
        let (settings, _) = knobs::plan(knobs, t, v6)?;
        let after = if matches!(t, Transport::UnixStream | Transport::UnixSeqpacket) {
            // unix_stream_connect makes a fresh socket: nothing is inherited.
            settings.into_iter().chain(timeouts).collect()
        } else {
            // TCP and MPTCP clone the listener's socket, but reset its priority.
            settings
                .into_iter()
                .filter(|s| s.knob == Some(knobs::Knob::Priority))
                .collect()
        };
        let mut granted = knobs::granted(listener, knobs, t, v6, notes);
        // A listener has no path; its connections' is what the route gives.
        granted.path_mtu = None;
        let poll = (t == Transport::Mptcp).then_some(slice);
        Ok((
            Self {
                client,
                after,
                poll,
            },
            granted,
        ))
    }

    /// Accepts one connection from the session's client; `Ok(None)` on a timeout or when a
    /// connection from elsewhere was closed unread.
    #[inline]
    pub fn accept(&self, listener: &Socket) -> io::Result<Option<OwnedFd>> {
        if let Some(wait) = self.poll {
            if !readable(listener.as_raw_fd(), wait)? {
                return Ok(None);
            }
        }
        let (conn, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if is_idle(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        if let Some(want) = self.client {
            if peer.as_socket().map(|a| a.ip()) != Some(want) {
                return Ok(None);
            }
        }
        let fd = conn.as_raw_fd();
        for s in &self.after {
            s.set(fd)?;
        }
        Ok(Some(conn.into()))
    }
}

/// Waits up to `timeout` for `fd` to be readable (a pending connection on a listener).
pub fn readable(fd: std::os::fd::RawFd, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
    // SAFETY: one pollfd, alive for the call.
    match unsafe { libc::poll(&mut p, 1, ms) } {
        n if n > 0 => Ok(true),
        0 => Ok(false),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

/// A timeout, a signal or a connection reset before it was accepted: nothing to serve.
fn is_idle(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
            | io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionAborted
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::basic::ConnListener;
    use std::io::{Read, Write};
    use std::net::SocketAddr;

    fn knobs() -> Knobs {
        Knobs {
            sndbuf: Some(100_000),
            rcvbuf: Some(90_000),
            nodelay: Some(false),
            congestion_control: Some("reno".into()),
            tos: Some(0x10),
            priority: Some(4),
            busy_poll: Some(20),
            pmtu: Some("do".into()),
            ..Default::default()
        }
    }

    /// The kernel keeps timeouts in jiffies: 30 ms reads back as 32 ms at HZ=250.
    fn assert_slice(got: Option<Duration>, slice: Duration) {
        let got = got.expect("a timeout is set");
        assert!(
            got >= slice && got <= slice + Duration::from_millis(10),
            "{got:?}"
        );
    }

    /// What the server reports as granted must be what its accepted sockets have: TCP and
    /// MPTCP clone the listener (all but SO_PRIORITY, which `after` re-sets), and the slice
    /// timeouts come with it.
    #[test]
    fn accepted_tcp_connections_have_the_listeners_knobs_and_timeouts() {
        inherits(Transport::Tcp, knobs());
    }

    /// The same for MPTCP, where the kernel has it; where it does not, the test says it did
    /// not run rather than passing in silence.
    #[test]
    fn accepted_mptcp_connections_have_the_listeners_knobs_and_timeouts() {
        if let Err(e) = crate::ip::open(Transport::Mptcp, [127, 0, 0, 1].into()) {
            eprintln!("SKIPPED: MPTCP is not available here ({e}); nothing was checked");
            return;
        }
        // MPTCP refuses IP_MTU_DISCOVER.
        let k = Knobs {
            pmtu: None,
            ..knobs()
        };
        inherits(Transport::Mptcp, k);
    }

    fn inherits(t: Transport, knobs: Knobs) {
        let lo: IpAddr = [127, 0, 0, 1].into();
        let slice = Duration::from_millis(30);
        let mut l = crate::ip::StreamListener::open(t, lo, &knobs).unwrap();
        let granted = l.prepare_crr(lo, slice).unwrap();
        assert_eq!(
            l.accept_crr().unwrap().map(drop),
            None,
            "nothing to accept yet"
        );
        let addr = SockAddr::from(SocketAddr::new(lo, l.endpoint().port));
        let mut c = Connector::new(t, addr, &knobs, Duration::from_secs(2)).unwrap();
        let client = c.connect().unwrap();
        let conn = l.accept_crr().unwrap().expect("the client's connection");
        let sock = SockRef::from(&conn);
        let mut got = knobs::granted(&sock, &knobs, t, false, Vec::new());
        got.path_mtu = None;
        assert_eq!(
            got,
            GrantedKnobs {
                notes: Vec::new(),
                ..granted.clone()
            },
            "{t}"
        );
        assert_eq!(got.priority, Some(4));
        assert_eq!(got.congestion_control.as_deref(), Some("reno"));
        assert_slice(sock.read_timeout().unwrap(), slice);
        assert_slice(sock.write_timeout().unwrap(), slice);
        // The client's connection has what it asked for, and the session timeout.
        let cg = c.granted(std::os::fd::AsFd::as_fd(&client));
        assert_eq!(
            (cg.nodelay, cg.tos, cg.priority),
            (Some(false), Some(0x10), Some(4))
        );
        let cs = SockRef::from(&client);
        assert_slice(cs.read_timeout().unwrap(), Duration::from_secs(2));
    }

    #[test]
    fn connections_from_elsewhere_are_closed_unread() {
        let lo: IpAddr = [127, 0, 0, 1].into();
        let mut l = crate::ip::StreamListener::open(Transport::Tcp, lo, &Knobs::default()).unwrap();
        l.prepare_crr(lo, Duration::from_millis(30)).unwrap();
        let port = l.endpoint().port;
        // Loopback answers all of 127/8: a client bound to 127.0.0.2 is someone else.
        let stray = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        stray
            .bind(&SockAddr::from(SocketAddr::from(([127, 0, 0, 2], 0))))
            .unwrap();
        stray
            .connect(&SockAddr::from(SocketAddr::new(lo, port)))
            .unwrap();
        assert!(
            l.accept_crr().unwrap().is_none(),
            "the stray is turned away"
        );
        let mut s: std::net::TcpStream = stray.into();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = s.write_all(b"x");
        let mut b = [0u8; 1];
        assert!(
            matches!(s.read(&mut b), Ok(0) | Err(_)),
            "closed by the server"
        );
    }

    #[test]
    fn accepted_unix_connections_get_their_timeouts_and_buffers() {
        let slice = Duration::from_millis(30);
        let k = Knobs {
            sndbuf: Some(100_000),
            ..Default::default()
        };
        let mut l = crate::unix::UnixStreamListener::open(Transport::UnixStream, &k).unwrap();
        let granted = l.prepare_crr([127, 0, 0, 1].into(), slice).unwrap();
        let path = l.endpoint().path.unwrap();
        let mut c = Connector::new(
            Transport::UnixStream,
            SockAddr::unix(&path).unwrap(),
            &k,
            Duration::from_secs(2),
        )
        .unwrap();
        let _client = c.connect().unwrap();
        let conn = l.accept_crr().unwrap().expect("the client's connection");
        let sock = SockRef::from(&conn);
        assert_slice(sock.read_timeout().unwrap(), slice);
        assert_slice(sock.write_timeout().unwrap(), slice);
        assert_eq!(
            sock.send_buffer_size().unwrap() as u64,
            granted.sndbuf.unwrap()
        );
    }
}
