//! The `basic` api: one send(2)/recv(2) per call on any connected socket, plus [`Conn`], the
//! connected socket every transport hands to its api, and [`ConnListener`], the server side
//! that produces one.

use crate::unix::SocketDir;
use crate::{knobs, sys, tcpinfo};
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_model::spec::Transport;
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs};
use socket2::Socket;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

/// A connected data socket, bound to its session, before an api wraps it.
#[derive(Debug)]
pub struct Conn {
    /// The connected socket.
    pub sock: Socket,
    /// The transport it belongs to.
    pub transport: Transport,
    /// True over IPv6.
    pub v6: bool,
    /// The knobs as applied and read back, with notes.
    pub granted: GrantedKnobs,
    /// Keeps a unix transport's socket directory alive as long as the endpoint.
    pub guard: Option<Arc<SocketDir>>,
}

/// The server side of a socket transport: waits for the client presenting the session cookie.
pub trait ConnListener: Send + std::fmt::Debug {
    /// Where the client should connect.
    fn endpoint(&self) -> DataEndpoint;
    /// Waits up to `timeout` for the client presenting `cookie`.
    fn accept(&mut self, cookie: u64, timeout: Duration) -> io::Result<Conn>;
    /// See [`netsweep_endpoint::DataListener::prepare_crr`].
    fn prepare_crr(&mut self, client: IpAddr, slice: Duration) -> io::Result<GrantedKnobs> {
        let _ = (client, slice);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "--pattern crr needs a connection-oriented transport (tcp, mptcp, unix-stream)",
        ))
    }
    /// See [`netsweep_endpoint::DataListener::accept_crr`].
    fn accept_crr(&mut self) -> io::Result<Option<OwnedFd>> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "--pattern crr needs a connection-oriented transport (tcp, mptcp, unix-stream)",
        ))
    }
}

/// An endpoint doing one send/recv system call per call.
#[derive(Debug)]
pub struct BasicEndpoint {
    pub(crate) conn: Conn,
    pub(crate) fd: RawFd,
    datagram: bool,
}

impl BasicEndpoint {
    /// Wraps a connected socket: one send(2)/recv(2) per call.
    pub fn new(conn: Conn) -> Self {
        let fd = conn.sock.as_raw_fd();
        let datagram = conn.transport.is_datagram();
        Self { conn, fd, datagram }
    }

    /// One send(2) with `flags` (MSG_NOSIGNAL added); EMSGSIZE becomes an error naming the
    /// size and the path MTU.
    #[inline]
    pub fn send_flags(&self, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes for the duration of the call.
        let rc = unsafe {
            libc::send(
                self.fd,
                buf.as_ptr().cast(),
                buf.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        };
        if rc < 0 {
            return Err(self.send_error(io::Error::last_os_error(), buf.len()));
        }
        Ok(rc as usize)
    }

    /// Explains EMSGSIZE (and passes every other error through).
    #[cold]
    pub fn send_error(&self, e: io::Error, len: usize) -> io::Error {
        message_size_error(e, len, &self.conn)
    }

    /// TCP_INFO counters for tcp and mptcp; the socket's own drops for datagram transports.
    pub fn tcp_stats(&self) -> EndpointStats {
        let mut s = EndpointStats::default();
        if matches!(self.conn.transport, Transport::Tcp | Transport::Mptcp) {
            tcpinfo::read(self.fd, &mut s);
        } else if self.conn.transport.is_datagram() {
            s.socket_drops = sys::socket_drops(self.fd);
        }
        s
    }
}

/// Turns EMSGSIZE into an error that names the message size, the limit and the fix.
#[cold]
pub fn message_size_error(e: io::Error, len: usize, conn: &Conn) -> io::Error {
    if e.raw_os_error() != Some(libc::EMSGSIZE) {
        return e;
    }
    let t = conn.transport;
    let msg = if crate::registry::descriptor(t).is_ip() {
        let mode = conn.granted.pmtu.as_deref().unwrap_or("want");
        let mtu = knobs::path_mtu(conn.sock.as_raw_fd(), conn.v6);
        let hdr = if conn.v6 { 48 } else { 28 };
        match (mode, mtu) {
            ("do" | "probe", Some(mtu)) => format!(
                "{len}-byte datagram (+{hdr} bytes of IP/UDP headers) exceeds the path MTU {mtu} \
                 with --pmtu {mode}: use --pmtu dont or want to let IP fragment it, or sizes up \
                 to {}",
                (mtu as usize).saturating_sub(hdr)
            ),
            _ => format!(
                "{len}-byte datagram is larger than one {t} datagram can carry ({} bytes): lower --sizes",
                crate::registry::descriptor(t).max_message(conn.v6).unwrap_or(0)
            ),
        }
    } else {
        format!(
            "{len}-byte message does not fit the {t} socket's send buffer ({} bytes): raise --sndbuf or lower --sizes",
            conn.granted.sndbuf.unwrap_or(0)
        )
    };
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl Endpoint for BasicEndpoint {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_flags(buf, 0)
    }
    #[inline]
    fn send_nowait(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_flags(buf, libc::MSG_DONTWAIT)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        sys::cvt_size(unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) })
    }
    fn is_datagram(&self) -> bool {
        self.datagram
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.conn.sock.set_read_timeout(timeout)
    }
    fn granted(&self) -> GrantedKnobs {
        self.conn.granted.clone()
    }
    fn stats(&mut self) -> EndpointStats {
        self.tcp_stats()
    }
    fn try_clone(&self) -> io::Result<Box<dyn Endpoint>> {
        let c = &self.conn;
        Ok(Box::new(BasicEndpoint::new(Conn {
            sock: c.sock.try_clone()?,
            transport: c.transport,
            v6: c.v6,
            granted: c.granted.clone(),
            guard: c.guard.clone(),
        })))
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }
}
