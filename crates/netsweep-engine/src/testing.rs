//! Test support (unit tests only): one end of a real socketpair, stream or datagram, as an
//! endpoint — the one in-memory-free peer every pattern's unit tests drive, each call one
//! system call on it as a socket transport's basic api makes.

use netsweep_endpoint::Endpoint;
use netsweep_proto::messages::GrantedKnobs;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::time::Duration;

/// One end of a socketpair.
#[derive(Debug)]
pub(crate) enum Sock {
    /// A stream socketpair's end.
    Stream(UnixStream),
    /// A datagram socketpair's end.
    Dgram(UnixDatagram),
}

impl Sock {
    /// The socket's descriptor.
    pub(crate) fn fd(&self) -> RawFd {
        match self {
            Sock::Dgram(s) => s.as_raw_fd(),
            Sock::Stream(s) => s.as_raw_fd(),
        }
    }
}

impl Endpoint for Sock {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Dgram(s) => s.send(buf),
            Sock::Stream(s) => s.write(buf),
        }
    }
    fn send_nowait(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
        let n = unsafe {
            libc::send(
                self.fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Dgram(s) => s.recv(buf),
            Sock::Stream(s) => s.read(buf),
        }
    }
    fn is_datagram(&self) -> bool {
        matches!(self, Sock::Dgram(_))
    }
    fn set_recv_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Dgram(s) => s.set_read_timeout(t),
            Sock::Stream(s) => s.set_read_timeout(t),
        }
    }
    fn granted(&self) -> GrantedKnobs {
        GrantedKnobs::default()
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.fd())
    }
}
