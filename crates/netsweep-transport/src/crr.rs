//! The crr pattern's connections (tcp, mptcp, unix-stream), prepared once so that each
//! transaction costs what a real client and server pay and nothing of netsweep's own.
//!
//! Client: [`Connector`] resolves the address and turns the knobs into plain setsockopt
//! calls once; each connection is socket(2), those setsockopt(2)s, connect(2). No readback,
//! no dup, no cookie write: the cookie rides in the request (see `netsweep_core::pattern::crr`).
//! Server: [`Accepting`] sets the timeouts on the listener once; Linux TCP sockets inherit
//! them (and every knob but SO_PRIORITY) from the listener on accept, unix sockets inherit
//! nothing, so what does not inherit is set on each accepted socket. Connections from any
//! address but the session client's are closed unread.

use crate::knobs::{self, Setting};
use netsweep_core::endpoint::CrrConnector;
use netsweep_core::spec::Transport;
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
        let after = if t == Transport::UnixStream {
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
        Ok((Self { client, after }, granted))
    }

    /// Accepts one connection from the session's client; `Ok(None)` on a timeout or when a
    /// connection from elsewhere was closed unread.
    #[inline]
    pub fn accept(&self, listener: &Socket) -> io::Result<Option<OwnedFd>> {
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
