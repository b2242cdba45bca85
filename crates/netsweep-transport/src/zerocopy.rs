//! The `zerocopy` api: SO_ZEROCOPY + MSG_ZEROCOPY sends on `tcp` and `udp`.
//!
//! Every TCP send of at least one byte, and every UDP send, takes one notification id; the kernel reports finished ids
//! as ranges [ee_info, ee_data] on the socket's error queue (origin SO_EE_ORIGIN_ZEROCOPY),
//! flagged SO_EE_CODE_ZEROCOPY_COPIED when it copied the data after all. Completions are
//! reaped without blocking inside `send`, and drained (briefly waiting) by `stats()` at the
//! end of each trial. ENOBUFS (too many notifications outstanding, net.core.optmem_max) is
//! handled by reaping and retrying. Over loopback the kernel always copies: every completion
//! is then counted as copied, which is the honest result.

use crate::basic::{BasicEndpoint, Conn};
use crate::sys;
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_proto::messages::GrantedKnobs;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Zero-copy notification counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ZcCounts {
    /// Sends that took a notification id.
    pub sends: u64,
    /// Ids reported complete.
    pub completions: u64,
    /// Of those, ids the kernel copied anyway.
    pub copied: u64,
}

/// Turns SO_ZEROCOPY on, explaining a refusal.
pub fn enable(fd: RawFd) -> io::Result<()> {
    sys::set_int(fd, libc::SOL_SOCKET, sys::SO_ZEROCOPY, 1).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "setting SO_ZEROCOPY: {e}: this kernel or socket type has no MSG_ZEROCOPY \
                 (Linux 4.14+ for TCP, 5.0+ for UDP): use --api basic"
            ),
        )
    })
}

/// Reads every zero-copy notification queued on `fd` without blocking. Returns how many
/// error-queue messages were read.
pub fn reap(fd: RawFd, c: &mut ZcCounts) -> io::Result<u32> {
    let mut msgs = 0;
    loop {
        // Room for one cmsghdr + sock_extended_err + sockaddr_in6, 8-byte aligned.
        let mut control = [0u64; 16];
        // SAFETY: msghdr is plain old data; all-zero is an empty message.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: `msg` points at `control`, live for the call; no data iovecs.
        let rc = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) => Ok(msgs),
                _ => Err(e),
            };
        }
        msgs += 1;
        // SAFETY: walking the control messages the kernel wrote into `msg`.
        let mut cm = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        while !cm.is_null() {
            // SAFETY: `cm` is a valid cmsghdr inside `control`.
            let h = unsafe { &*cm };
            let is_recverr = (h.cmsg_level == libc::SOL_IP && h.cmsg_type == libc::IP_RECVERR)
                || (h.cmsg_level == libc::SOL_IPV6 && h.cmsg_type == libc::IPV6_RECVERR);
            if is_recverr {
                // SAFETY: IP_RECVERR data is a sock_extended_err (possibly unaligned).
                let ee: libc::sock_extended_err =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cm).cast()) };
                if ee.ee_origin == sys::SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                    let n = u64::from(ee.ee_data.wrapping_sub(ee.ee_info)) + 1;
                    c.completions += n;
                    if ee.ee_code & sys::SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                        c.copied += n;
                    }
                }
            }
            // SAFETY: advancing within the same control buffer.
            cm = unsafe { libc::CMSG_NXTHDR(&msg, cm) };
        }
    }
}

/// Waits up to `limit` for every outstanding notification.
pub fn drain(fd: RawFd, c: &mut ZcCounts, limit: Duration) {
    let deadline = Instant::now() + limit;
    while c.completions < c.sends {
        if reap(fd, c).is_err() {
            return;
        }
        if c.completions >= c.sends {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let mut p = libc::pollfd {
            fd,
            events: 0, // POLLERR is always reported
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, 1000) as libc::c_int;
        // SAFETY: one live pollfd.
        unsafe { libc::poll(&mut p, 1, ms) };
    }
}

/// An endpoint whose sends use MSG_ZEROCOPY.
#[derive(Debug)]
pub struct ZerocopyEndpoint {
    inner: BasicEndpoint,
    counts: ZcCounts,
    datagram: bool,
}

impl ZerocopyEndpoint {
    /// Wraps a connected socket and sets SO_ZEROCOPY on it.
    pub fn new(conn: Conn) -> io::Result<Self> {
        let mut inner = BasicEndpoint::new(conn);
        enable(inner.fd)?;
        inner.conn.granted.notes.push(
            "zerocopy: MSG_ZEROCOPY sends; completions and kernel copies are counted (loopback always copies)"
                .into(),
        );
        let datagram = inner.is_datagram();
        Ok(Self {
            inner,
            counts: ZcCounts::default(),
            datagram,
        })
    }

    /// Counters so far (sends, completions, copied).
    pub fn counts(&self) -> ZcCounts {
        self.counts
    }

    /// ENOBUFS: too many notifications outstanding. Waits a little for completions; gives up
    /// after 100 tries with an error that says the fix.
    #[cold]
    fn no_buffers(&mut self, attempts: &mut u32) -> io::Result<()> {
        *attempts += 1;
        if *attempts > 100 {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "MSG_ZEROCOPY send kept failing with ENOBUFS although completions were reaped: \
                 raise net.core.optmem_max or use --api basic",
            ));
        }
        if self.counts.completions >= self.counts.sends {
            std::thread::sleep(Duration::from_millis(1));
        }
        drain(self.inner.fd, &mut self.counts, Duration::from_millis(10));
        Ok(())
    }
}

impl Endpoint for ZerocopyEndpoint {
    fn socket_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.inner.fd)
    }

    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut attempts = 0u32;
        loop {
            match self.inner.send_flags(buf, libc::MSG_ZEROCOPY) {
                Ok(n) => {
                    // A UDP send takes an id even for an empty payload (the UDP header is
                    // part of the length the kernel checks); TCP only for a non-empty one.
                    if !buf.is_empty() || self.datagram {
                        self.counts.sends += 1;
                    }
                    // Keep the error queue short; never blocks.
                    if self.counts.sends.saturating_sub(self.counts.completions) >= 64 {
                        let _ = reap(self.inner.fd, &mut self.counts);
                    }
                    return Ok(n);
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.no_buffers(&mut attempts)?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.recv(buf)
    }
    fn is_datagram(&self) -> bool {
        self.inner.is_datagram()
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_recv_timeout(timeout)
    }
    fn granted(&self) -> GrantedKnobs {
        self.inner.granted()
    }
    fn stats(&mut self) -> EndpointStats {
        drain(self.inner.fd, &mut self.counts, Duration::from_millis(200));
        let mut s = self.inner.stats();
        s.zerocopy_completions = self.counts.completions;
        s.zerocopy_copied = self.counts.copied;
        s
    }
}
