//! The `gso` api (udp): UDP segmentation offload. The sender hands the kernel one
//! super-datagram per sendmsg(2) — up to [`MAX_SEGMENTS`] messages laid back to back, with a
//! `UDP_SEGMENT` control message giving the segment (message) size — and the stack cuts it
//! into ordinary datagrams, each carrying its own netsweep sequence header. The receiver sets
//! `UDP_GRO`: one recvmsg(2) returns several datagrams coalesced, with their segment size in
//! a `UDP_GRO` control message, and [`segment_count`]/[`segment_len`] split them again so
//! loss, reordering and duplicates stay counted per datagram. The coalescing buffer is sized
//! in `prepare()`; the control-message space is inline; the timed loop allocates nothing.
//!
//! A kernel that refuses it says so: no `UDP_SEGMENT`/`UDP_GRO` (ENOPROTOOPT) fails at open,
//! EINVAL/EIO from a send become an error naming the cause (path MTU, `--no-check`, a device
//! without checksum offload). UDP-Lite is left out: the kernel refuses GSO on it (EIO).

use crate::basic::{BasicEndpoint, Conn};
use crate::sys;
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_proto::messages::GrantedKnobs;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

const SOL_UDP: libc::c_int = 17;
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Segments one send may carry (the kernel's UDP_MAX_SEGMENTS on every kernel with GSO).
pub const MAX_SEGMENTS: usize = 64;
/// The coalescing buffer: the largest GRO packet (64 KiB of IP) fits.
const RX_BUF: usize = 1 << 16;

/// What a udp data path holds beyond the pattern's buffers: with `--api gso`, the receive
/// buffer of coalesced datagrams.
pub fn footprint(setup: &netsweep_proto::messages::SessionSetup) -> netsweep_endpoint::Footprint {
    netsweep_endpoint::Footprint {
        memory: if setup.api == "gso" { RX_BUF as u64 } else { 0 },
        tmpfs: 0,
    }
}

/// Messages of `size` bytes one send carries: at most [`MAX_SEGMENTS`], and at most `limit`
/// bytes of payload (one IP datagram's worth), never less than one.
pub fn segments_per_call(size: usize, limit: usize) -> usize {
    (limit / size.max(1)).clamp(1, MAX_SEGMENTS)
}

/// How many datagrams a coalesced receive of `len` bytes with segment size `gso` holds: the
/// last may be shorter. `gso` = 0 (no `UDP_GRO` control message) is one datagram.
#[inline]
pub fn segment_count(len: usize, gso: usize) -> usize {
    if gso == 0 || len <= gso {
        1
    } else {
        len.div_ceil(gso)
    }
}

/// The length of datagram `i` of a coalesced receive of `len` bytes with segment size `gso`.
#[inline]
pub fn segment_len(len: usize, gso: usize, i: usize) -> usize {
    if gso == 0 {
        return len;
    }
    len.saturating_sub(i * gso).min(gso)
}

/// Inline, aligned room for one control message with an int (CMSG_SPACE(4) = 24 bytes).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(8))]
pub struct Cmsg([u8; 64]);

impl Default for Cmsg {
    fn default() -> Self {
        Self([0; 64])
    }
}

/// One sendmsg of `buf` on the connected socket `fd`, cut by the kernel into `size`-byte
/// datagrams (the last may be shorter) when it is longer than one; `ctrl` holds the
/// control message.
#[inline]
pub fn send_segmented(fd: RawFd, ctrl: &mut Cmsg, buf: &[u8], size: usize) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain old data; all-zero is an empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if buf.len() > size {
        msg.msg_control = ctrl.0.as_mut_ptr().cast();
        // SAFETY: CMSG_* only compute sizes and offsets inside `ctrl` (64 bytes, aligned),
        // which holds CMSG_SPACE(2); the u16 is written unaligned.
        unsafe {
            msg.msg_controllen = libc::CMSG_SPACE(2) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(2) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size as u16);
        }
    }
    // SAFETY: `msg` points at `iov` (into `buf`) and `ctrl`, live for the call.
    let rc = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One recvmsg(2) on `fd` into the `len` bytes at `buf`, with `flags`: (bytes, the segment
/// size of the datagrams the kernel coalesced, 0 for one datagram). A receive larger than
/// the buffer is an error (it was truncated).
///
/// # Safety
///
/// `buf` must be valid for writes of `len` bytes for the call.
#[inline]
pub unsafe fn recv_coalesced(
    fd: RawFd,
    buf: *mut u8,
    len: usize,
    ctrl: &mut Cmsg,
    flags: libc::c_int,
) -> io::Result<(usize, usize)> {
    let mut iov = libc::iovec {
        iov_base: buf.cast(),
        iov_len: len,
    };
    // SAFETY: msghdr is plain old data; all-zero is an empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.0.as_mut_ptr().cast();
    msg.msg_controllen = ctrl.0.len() as _;
    // SAFETY: `msg` points at `len` writable bytes (the caller's promise) and at `ctrl`.
    let n = sys::cvt_size(unsafe { libc::recvmsg(fd, &mut msg, flags) })?;
    if msg.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(io::Error::other(format!(
            "a coalesced receive was larger than {len} bytes and was truncated"
        )));
    }
    let mut gso = 0;
    // SAFETY: the kernel filled msg_controllen bytes of `ctrl`; CMSG_FIRSTHDR/NXTHDR stay
    // inside it and the int is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == SOL_UDP && (*c).cmsg_type == UDP_GRO {
                gso = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n, gso.max(0) as usize))
}

/// Turns UDP_GRO on for `fd`: the kernel may coalesce datagrams of one flow into one receive.
pub fn enable_gro(fd: RawFd) -> io::Result<()> {
    sys::set_int(fd, SOL_UDP, UDP_GRO, 1)
}

/// Enables UDP_GRO on `fd` and checks the kernel knows UDP_SEGMENT; the error names the fix.
pub fn enable(fd: RawFd) -> io::Result<()> {
    let explain = |opt: &str, since: &str, e: io::Error| {
        io::Error::new(
            e.kind(),
            format!(
                "--api gso: the kernel refused {opt} ({e}): it needs Linux ≥ {since} with UDP \
                 segmentation offload; use --api mmsg"
            ),
        )
    };
    // 0 is "no default segment size": the sends below give it per call.
    sys::set_int(fd, SOL_UDP, UDP_SEGMENT, 0).map_err(|e| explain("UDP_SEGMENT", "4.18", e))?;
    sys::set_int(fd, SOL_UDP, UDP_GRO, 1).map_err(|e| explain("UDP_GRO", "5.0", e))
}

/// A udp endpoint whose batches are GSO super-datagrams and whose receives split GRO packets.
#[derive(Debug)]
pub struct GsoEndpoint {
    inner: BasicEndpoint,
    /// Payload bytes one send may carry (one IP datagram: 65507 over IPv4).
    limit: usize,
    tx_ctrl: Cmsg,
    rx_ctrl: Cmsg,
    /// The last coalesced receive, handed out one datagram at a time.
    rx: Vec<u8>,
    rx_len: usize,
    rx_gso: usize,
    /// Next datagram of `rx` to hand out, and how many it holds.
    rx_next: usize,
    rx_count: usize,
    /// Why the first unsent datagram of a short batch failed.
    send_error: Option<io::Error>,
}

impl GsoEndpoint {
    /// Wraps a connected udp socket: enables UDP_GRO and checks UDP_SEGMENT.
    pub fn new(mut conn: Conn) -> io::Result<Self> {
        use std::os::fd::AsRawFd;
        enable(conn.sock.as_raw_fd())?;
        let limit = crate::registry::descriptor(conn.transport)
            .max_message(conn.v6)
            .unwrap_or(65_507) as usize;
        conn.granted.notes.push(format!(
            "gso: --batch datagrams per super-datagram, split into sendmsg calls of at most \
             {MAX_SEGMENTS} segments and {limit} bytes; UDP_GRO on the receiver"
        ));
        Ok(Self {
            inner: BasicEndpoint::new(conn),
            limit,
            tx_ctrl: Cmsg::default(),
            rx_ctrl: Cmsg::default(),
            rx: Vec::new(),
            rx_len: 0,
            rx_gso: 0,
            rx_next: 0,
            rx_count: 0,
            send_error: None,
        })
    }

    /// One sendmsg of `buf` cut into `size`-byte datagrams by the kernel.
    #[inline]
    fn send_segments(&mut self, buf: &[u8], size: usize) -> io::Result<()> {
        send_segmented(self.inner.fd, &mut self.tx_ctrl, buf, size)
            .map_err(|e| self.refused(e, size, buf.len() / size))
    }

    /// Explains what the kernel refused about a GSO send; other errors pass through as they
    /// are (the stream pattern counts ENOBUFS, EPERM… as refused datagrams).
    #[cold]
    fn refused(&self, e: io::Error, size: usize, n: usize) -> io::Error {
        let hdr = if self.inner.conn.v6 { 48 } else { 28 };
        let why = match e.raw_os_error() {
            Some(libc::EINVAL) => format!(
                "--api gso: the kernel refused UDP_SEGMENT for {n} datagrams of {size} bytes \
                 (EINVAL): each datagram plus {hdr} bytes of headers must fit the path MTU, and \
                 --no-check cannot be combined with gso; lower --sizes or use --api mmsg"
            ),
            Some(libc::EIO) => "--api gso: the kernel refused segmentation offload on this \
                 route (EIO: the output device has no checksum offload, or an IPsec policy \
                 applies); use --api mmsg"
                .to_string(),
            _ => return self.inner.send_error(e, size),
        };
        io::Error::new(io::ErrorKind::InvalidInput, why)
    }

    /// Receives one (possibly coalesced) packet into `rx`; blocks up to SO_RCVTIMEO.
    fn fill(&mut self) -> io::Result<()> {
        if self.rx.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "gso: prepare() was not called before a receive (an engine bug)",
            ));
        }
        // SAFETY: `rx` is owned, initialised and `rx.len()` bytes long.
        let (n, gso) = unsafe {
            recv_coalesced(
                self.inner.fd,
                self.rx.as_mut_ptr(),
                self.rx.len(),
                &mut self.rx_ctrl,
                0,
            )?
        };
        self.rx_len = n;
        self.rx_gso = gso;
        self.rx_next = 0;
        self.rx_count = segment_count(n, self.rx_gso);
        Ok(())
    }

    /// Copies the next pending datagram into `out` (truncated to it); returns its length.
    #[inline]
    fn take(&mut self, out: &mut [u8]) -> usize {
        let (len, gso, i) = (self.rx_len, self.rx_gso, self.rx_next);
        let start = if gso == 0 { 0 } else { i * gso };
        let n = segment_len(len, gso, i).min(out.len());
        out[..n].copy_from_slice(&self.rx[start..start + n]);
        self.rx_next += 1;
        n
    }
}

impl Endpoint for GsoEndpoint {
    fn socket_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.inner.fd)
    }

    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.send(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.rx_next >= self.rx_count {
            self.fill()?;
        }
        Ok(self.take(buf))
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
    fn prepare(&mut self, _max_size: usize, _batch: usize) -> io::Result<()> {
        if self.rx.len() < RX_BUF {
            self.rx.resize(RX_BUF, 0);
        }
        Ok(())
    }
    #[inline]
    fn send_batch(&mut self, data: &[u8], size: usize, count: usize) -> io::Result<(usize, u64)> {
        let size = size.max(1);
        let count = count.min(data.len() / size);
        let per = segments_per_call(size, self.limit);
        let (mut sent, mut calls) = (0, 0);
        while sent < count {
            let n = (count - sent).min(per);
            let r = self.send_segments(&data[sent * size..(sent + n) * size], size);
            calls += 1;
            match r {
                Ok(()) => sent += n,
                // Like sendmmsg: report what went before the failure, keep its error.
                Err(e) if sent > 0 => {
                    self.send_error = Some(e);
                    return Ok((sent, calls));
                }
                Err(e) => return Err(e),
            }
        }
        Ok((sent, calls))
    }
    fn take_send_error(&mut self) -> Option<io::Error> {
        self.send_error.take()
    }
    #[inline]
    fn recv_batch(
        &mut self,
        data: &mut [u8],
        slot: usize,
        lens: &mut [usize],
    ) -> io::Result<(usize, u64)> {
        let mut calls = 0;
        if self.rx_next >= self.rx_count {
            self.fill()?;
            calls = 1;
        }
        let k = (self.rx_count - self.rx_next)
            .min(lens.len())
            .min(data.len() / slot.max(1));
        for (i, l) in lens[..k].iter_mut().enumerate() {
            *l = self.take(&mut data[i * slot..(i + 1) * slot]);
        }
        Ok((k, calls))
    }
    fn stats(&mut self) -> EndpointStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lens(len: usize, gso: usize) -> Vec<usize> {
        (0..segment_count(len, gso))
            .map(|i| segment_len(len, gso, i))
            .collect()
    }

    #[test]
    fn a_coalesced_receive_splits_at_the_segment_size() {
        assert_eq!(lens(64 * 5, 64), [64; 5]);
        assert_eq!(lens(1472 * 2 + 100, 1472), [1472, 1472, 100]);
        assert_eq!(lens(64, 64), [64]);
        // No UDP_GRO control message: one plain datagram, whatever its size.
        assert_eq!(lens(1000, 0), [1000]);
        assert_eq!(lens(0, 0), [0]);
        // A lone datagram shorter than the segment size GRO reported.
        assert_eq!(lens(30, 64), [30]);
        let l = lens(65_507, 1023);
        assert_eq!((l.len(), l.iter().sum::<usize>()), (65, 65_507));
        assert_eq!(*l.last().unwrap(), 65_507 - 64 * 1023);
    }

    #[test]
    fn one_send_carries_at_most_64_segments_and_one_ip_datagram() {
        assert_eq!(segments_per_call(64, 65_507), 64);
        assert_eq!(segments_per_call(1472, 65_507), 44);
        assert_eq!(segments_per_call(40_000, 65_507), 1);
        assert_eq!(segments_per_call(0, 65_507), 64);
    }
}
