//! The `mmsg` api: sendmmsg(2)/recvmmsg(2) move a batch of datagrams per system call
//! (`--batch N`) for `udp`, `udplite`, `unix-dgram` and `packet`. Single messages (pingpong)
//! still take one send/recv each. The mmsghdr and iovec arrays are allocated in `prepare()`;
//! each call only points them at the caller's buffers.

use crate::basic::{BasicEndpoint, Conn};
use crate::sys;
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_proto::messages::GrantedKnobs;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Reusable sendmmsg/recvmmsg arrays. Each message may carry a fixed-size prefix in its own
/// iovec (the `packet` transport's frame header) before the payload.
#[derive(Debug, Default)]
pub struct Mmsg {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    prefix: Vec<u8>,
    prefix_len: usize,
}

// SAFETY: the raw pointers inside `hdrs`/`iovs` are rewritten before every system call and
// only point at memory borrowed for that call (or at `prefix`, owned by the same struct);
// nothing is shared between threads.
unsafe impl Send for Mmsg {}

fn empty_iovec() -> libc::iovec {
    libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }
}

fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain old data; all-zero is a valid (empty) value.
    unsafe { std::mem::zeroed() }
}

impl Mmsg {
    /// Room for `batch` messages, each with a `prefix_len`-byte prefix. Grows, never shrinks.
    pub fn prepare(&mut self, batch: usize, prefix_len: usize) {
        let batch = batch.max(1);
        if self.hdrs.len() < batch {
            self.hdrs.resize_with(batch, empty_mmsghdr);
            self.iovs.resize_with(batch * 2, empty_iovec);
        }
        self.prefix_len = prefix_len;
        if self.prefix.len() < batch * prefix_len {
            self.prefix.resize(batch * prefix_len, 0);
        }
    }

    /// Messages one call can carry.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// The prefix of received message `i`.
    #[inline]
    pub fn prefix(&self, i: usize) -> &[u8] {
        &self.prefix[i * self.prefix_len..(i + 1) * self.prefix_len]
    }

    #[cold]
    fn unprepared() -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "mmsg: prepare() was not called before a batch call (an engine bug)",
        )
    }

    /// Sends up to `count` messages of `size` bytes laid out back to back in `data`, each
    /// preceded by `template` (the prefix, `prefix_len` bytes, or empty). One sendmmsg call.
    #[inline]
    pub fn send(
        &mut self,
        fd: RawFd,
        data: &[u8],
        size: usize,
        count: usize,
        template: &[u8],
    ) -> io::Result<(usize, u64)> {
        let n = count.min(self.hdrs.len()).min(data.len() / size.max(1));
        if n == 0 {
            return Err(Self::unprepared());
        }
        let pl = template.len();
        for i in 0..n {
            let iov = &mut self.iovs[2 * i..2 * i + 2];
            iov[0].iov_base = template.as_ptr() as *mut libc::c_void;
            iov[0].iov_len = pl;
            iov[1].iov_base = data[i * size..].as_ptr() as *mut libc::c_void;
            iov[1].iov_len = size;
            let (first, len) = if pl == 0 { (1, 1) } else { (0, 2) };
            let h = &mut self.hdrs[i];
            h.msg_hdr.msg_name = std::ptr::null_mut();
            h.msg_hdr.msg_namelen = 0;
            h.msg_hdr.msg_iov = self.iovs[2 * i + first..].as_mut_ptr();
            h.msg_hdr.msg_iovlen = len;
            h.msg_hdr.msg_control = std::ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: `n` headers point at live iovecs, which point into `data`/`template`.
        let rc = unsafe {
            libc::sendmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_NOSIGNAL,
            )
        };
        sys::cvt(rc).map(|k| (k as usize, 1))
    }

    /// Receives up to `lens.len()` messages into `slot`-byte slots of `data`; blocks for the
    /// first (bounded by SO_RCVTIMEO), then takes what is queued. `lens[i]` is the payload
    /// length (the message length minus the prefix). One recvmmsg call.
    #[inline]
    pub fn recv(
        &mut self,
        fd: RawFd,
        data: &mut [u8],
        slot: usize,
        lens: &mut [usize],
    ) -> io::Result<(usize, u64)> {
        let n = lens
            .len()
            .min(self.hdrs.len())
            .min(data.len() / slot.max(1));
        if n == 0 {
            return Err(Self::unprepared());
        }
        let pl = self.prefix_len;
        let prefix = self.prefix.as_mut_ptr();
        for i in 0..n {
            let iov = &mut self.iovs[2 * i..2 * i + 2];
            // SAFETY: `prefix` holds `capacity() * prefix_len` bytes and i < capacity().
            iov[0].iov_base = unsafe { prefix.add(i * pl) }.cast();
            iov[0].iov_len = pl;
            iov[1].iov_base = data[i * slot..].as_mut_ptr().cast();
            iov[1].iov_len = slot;
            let (first, len) = if pl == 0 { (1, 1) } else { (0, 2) };
            let h = &mut self.hdrs[i];
            h.msg_hdr.msg_name = std::ptr::null_mut();
            h.msg_hdr.msg_namelen = 0;
            h.msg_hdr.msg_iov = self.iovs[2 * i + first..].as_mut_ptr();
            h.msg_hdr.msg_iovlen = len;
            h.msg_hdr.msg_control = std::ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: `n` headers point at live iovecs into `data` and `self.prefix`.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        let k = sys::cvt(rc)? as usize;
        for (i, l) in lens[..k].iter_mut().enumerate() {
            *l = (self.hdrs[i].msg_len as usize).saturating_sub(pl);
        }
        Ok((k, 1))
    }
}

/// A socket endpoint whose batches go through sendmmsg/recvmmsg.
#[derive(Debug)]
pub struct MmsgEndpoint {
    inner: BasicEndpoint,
    mmsg: Mmsg,
}

impl MmsgEndpoint {
    /// Wraps a connected datagram socket: batches go through sendmmsg/recvmmsg.
    pub fn new(conn: Conn) -> Self {
        Self {
            inner: BasicEndpoint::new(conn),
            mmsg: Mmsg::default(),
        }
    }
}

impl Endpoint for MmsgEndpoint {
    fn socket_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.inner.fd)
    }

    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.send(buf)
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
    fn prepare(&mut self, _max_size: usize, batch: usize) -> io::Result<()> {
        self.mmsg.prepare(batch, 0);
        Ok(())
    }
    #[inline]
    fn send_batch(&mut self, data: &[u8], size: usize, count: usize) -> io::Result<(usize, u64)> {
        self.mmsg
            .send(self.inner.fd, data, size, count, &[])
            .map_err(|e| self.inner.send_error(e, size))
    }
    #[inline]
    fn recv_batch(
        &mut self,
        data: &mut [u8],
        slot: usize,
        lens: &mut [usize],
    ) -> io::Result<(usize, u64)> {
        self.mmsg.recv(self.inner.fd, data, slot, lens)
    }
    fn stats(&mut self) -> EndpointStats {
        self.inner.stats()
    }
}
