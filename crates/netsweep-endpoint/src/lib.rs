//! The endpoint trait patterns run over, the factory that makes endpoints for a session,
//! and the page-aligned message buffers a point allocates once.

#![warn(missing_docs)]

use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs, SessionSetup};
use std::io;
use std::net::IpAddr;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

/// One side of an established data path. Every call is one system call (or one batch).
pub trait Endpoint: Send {
    /// Sends from `buf` in one call; on stream transports it may accept fewer bytes.
    fn send(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Receives into `buf` in one call. Returns 0 when a stream peer closed.
    /// A datagram larger than `buf` is truncated (the caller sizes `buf` to the run's maximum).
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// True for datagram transports (message boundaries kept, loss possible).
    fn is_datagram(&self) -> bool;
    /// Sets how long one `recv` may block; `None` blocks forever (never used on a peer).
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()>;
    /// The knobs as the kernel granted them on this endpoint.
    fn granted(&self) -> GrantedKnobs;

    /// Sends from `buf` in one call without waiting for room in the socket
    /// (`MSG_DONTWAIT`): `WouldBlock` when it has none. The default waits, like
    /// [`send`](Endpoint::send).
    fn send_nowait(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send(buf)
    }

    /// Called once per point, outside timed loops, with the largest message and batch the
    /// point will use: an endpoint allocates whatever its api needs here.
    fn prepare(&mut self, _max_size: usize, _batch: usize) -> io::Result<()> {
        Ok(())
    }

    /// Sends `count` messages of `size` bytes laid out back to back in `data`.
    /// Returns (messages sent, calls made). The default sends one message per call.
    fn send_batch(&mut self, data: &[u8], size: usize, count: usize) -> io::Result<(usize, u64)> {
        let mut calls = 0;
        for i in 0..count {
            match send_message(self, &data[i * size..(i + 1) * size]) {
                Ok(n) => calls += n,
                // Like sendmmsg: report what went before the failure; the caller's next
                // call starts at the failed message and gets its error.
                Err(_) if i > 0 => return Ok((i, calls)),
                Err(e) => return Err(e),
            }
        }
        Ok((count, calls))
    }

    /// After [`send_batch`](Endpoint::send_batch) sent fewer messages than asked: why the
    /// first unsent one failed, when the endpoint knows (taken once). `None` when it cannot
    /// tell: sendmmsg(2) returns the count sent and drops the error of the next datagram.
    fn take_send_error(&mut self) -> Option<io::Error> {
        None
    }

    /// Receives up to `lens.len()` messages into slots of `slot` bytes in `data`, writing each
    /// length to `lens`. Returns (messages received, calls made). Blocks until at least one
    /// message arrives or the receive timeout expires. The default receives one per call.
    fn recv_batch(
        &mut self,
        data: &mut [u8],
        slot: usize,
        lens: &mut [usize],
    ) -> io::Result<(usize, u64)> {
        let n = self.recv(&mut data[..slot])?;
        lens[0] = n;
        Ok((1, 1))
    }

    /// Counters the endpoint keeps itself (cumulative since it was opened); read outside timed loops.
    fn stats(&mut self) -> EndpointStats {
        EndpointStats::default()
    }

    /// A second endpoint on the same connection (a duplicated descriptor: socket options,
    /// the receive timeout included, are shared), so that one thread can send while another
    /// receives (the bidir pattern). Apis with state of their own cannot.
    fn try_clone(&self) -> io::Result<Box<dyn Endpoint>> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this api cannot send and receive on two threads at once: use --api basic",
        ))
    }

    /// The socket under an endpoint whose every [`send`](Endpoint::send) and
    /// [`recv`](Endpoint::recv) is one plain system call on it, so that a thread serving many
    /// flows can wait for them with epoll and make them non-blocking (`--flows`). `None` for
    /// apis with state of their own (rings, completions, shared memory).
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }

    /// The socket under the endpoint, whatever its api, so that a server ending a session
    /// can shut it down from its control thread (waking a call blocked on a client that
    /// stopped reading or trickles bytes); never used for I/O. `None` where there is no
    /// socket (shared memory, MPI): such an endpoint's waits are bounded by its timeouts.
    fn socket_fd(&self) -> Option<RawFd> {
        self.raw_fd()
    }
}

/// Cumulative counters an endpoint keeps: zero-copy completions, TCP_INFO figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// MSG_ZEROCOPY sends the kernel reported complete.
    pub zerocopy_completions: u64,
    /// Of those, the ones the kernel copied after all.
    pub zerocopy_copied: u64,
    /// TCP segments retransmitted (TCP_INFO), where the transport has them.
    pub tcp_retransmits: Option<u64>,
    /// D-SACKs received (TCP_INFO), where the transport has them.
    pub tcp_dsacks: Option<u64>,
    /// Time the socket had data to send, µs (TCP_INFO `tcpi_busy_time`).
    pub tcp_busy_us: Option<u64>,
    /// Of that, the time the peer's receive window held the sender back, µs.
    pub tcp_rwnd_limited_us: Option<u64>,
    /// Of that, the time the send buffer held the sender back, µs.
    pub tcp_sndbuf_limited_us: Option<u64>,
    /// Datagrams the kernel dropped at this endpoint's receive socket (a full buffer above
    /// all): its sk_drops, cumulative, where the transport can read it.
    pub socket_drops: Option<u64>,
}

/// A server-side data endpoint waiting for the client bound to a session cookie.
pub trait DataListener: Send {
    /// Where the client should connect.
    fn endpoint(&self) -> DataEndpoint;
    /// Waits up to `timeout` for the client presenting `cookie`; others are turned away.
    fn accept(&mut self, cookie: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>>;

    /// Readies the listener for crr, once per session: accepts then wait at most `slice`,
    /// and every accepted connection's sends and receives wait at most `slice` each (set on
    /// the listener once where accepted sockets inherit it). Only `client`'s connections
    /// are served. Returns the knobs the kernel granted to the connections it will accept.
    fn prepare_crr(&mut self, _client: IpAddr, _slice: Duration) -> io::Result<GrantedKnobs> {
        Err(no_crr())
    }

    /// Accepts one crr connection: `Ok(None)` when none came within the slice or one from
    /// elsewhere was turned away. No other call on the connection (the session cookie
    /// rides in its request; see the engine's crr pattern).
    fn accept_crr(&mut self) -> io::Result<Option<OwnedFd>> {
        Err(no_crr())
    }
}

/// Opens the connections of a crr point: the address, the socket options (values parsed
/// once) and the timeouts are prepared when it is made, so each connection costs socket(2),
/// one setsockopt(2) per option and connect(2) — what any client of a real service pays.
pub trait CrrConnector: Send {
    /// Opens and connects one connection; its sends and receives are bounded by the session
    /// timeout.
    fn connect(&mut self) -> io::Result<OwnedFd>;
    /// The knobs the kernel granted on `conn`, read back with getsockopt (outside timed loops).
    fn granted(&self, conn: BorrowedFd<'_>) -> GrantedKnobs;
}

fn no_crr() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "--pattern crr needs a connection-oriented transport (tcp, mptcp, unix-stream)",
    )
}

/// What a session's data path holds on the server beyond the pattern's message buffers: the
/// transport's own memory (rings, frame areas) and the tmpfs files it creates. A worst case,
/// computed from the setup before the session is admitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Bytes of memory the transport allocates for the session (tmpfs files not included).
    pub memory: u64,
    /// Bytes of tmpfs (shared-memory files) the session's data path creates.
    pub tmpfs: u64,
}

/// Makes endpoints for a transport named in a [`SessionSetup`].
pub trait TransportFactory: Send + Sync {
    /// Opens the server's data endpoint on `bind` for this session. `peer` is the address
    /// of the session's control connection: a datagram data path binds only to a client
    /// presenting the cookie from there, so a session cannot aim the server at a third host.
    fn listen(
        &self,
        setup: &SessionSetup,
        bind: IpAddr,
        peer: IpAddr,
    ) -> io::Result<Box<dyn DataListener>>;

    /// What the session's data path will hold on the server (see [`Footprint`]); none by
    /// default.
    fn footprint(&self, _setup: &SessionSetup) -> Footprint {
        Footprint::default()
    }
    /// Connects the client's data endpoint to the server at `server` and binds it with `cookie`.
    fn connect(
        &self,
        setup: &SessionSetup,
        knobs: &Knobs,
        server: IpAddr,
        data: &DataEndpoint,
        cookie: u64,
        timeout: Duration,
    ) -> io::Result<Box<dyn Endpoint>>;

    /// Prepares the client's crr connections to the server at `server` (one per transaction).
    fn crr_connector(
        &self,
        _setup: &SessionSetup,
        _knobs: &Knobs,
        _server: IpAddr,
        _data: &DataEndpoint,
        _timeout: Duration,
    ) -> io::Result<Box<dyn CrrConnector>> {
        Err(no_crr())
    }
}

/// Sends a whole message of `buf.len()` bytes, looping over partial sends.
/// Returns the number of send calls it took.
#[inline]
pub fn send_message<E: Endpoint + ?Sized>(ep: &mut E, buf: &[u8]) -> io::Result<u64> {
    let mut off = 0;
    let mut calls = 0;
    loop {
        let n = match ep.send(&buf[off..]) {
            Ok(n) => n,
            // A signal (not a timeout) interrupted the call: it moved nothing, try again.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        calls += 1;
        off += n;
        if off >= buf.len() {
            return Ok(calls);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "peer accepted no data",
            ));
        }
    }
}

/// Receives exactly `buf.len()` bytes from a stream endpoint. Returns the number of calls.
/// A zero-length message takes no call.
#[inline]
pub fn recv_message<E: Endpoint + ?Sized>(ep: &mut E, buf: &mut [u8]) -> io::Result<u64> {
    let mut off = 0;
    let mut calls = 0;
    while off < buf.len() {
        let n = match ep.recv(&mut buf[off..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        calls += 1;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the data connection",
            ));
        }
        off += n;
    }
    Ok(calls)
}

/// [`recv_message`], timing a message that took more than one receive: its bytes after the
/// first receive, and the instants the first and the last receive returned. A message in one
/// receive costs no clock read.
pub fn recv_message_timed<E: Endpoint + ?Sized>(
    ep: &mut E,
    buf: &mut [u8],
) -> io::Result<(u64, Option<Spread>)> {
    let first = loop {
        match ep.recv(buf) {
            Ok(0) if !buf.is_empty() => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed the data connection",
                ))
            }
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    if first == buf.len() {
        return Ok((1, None));
    }
    let t_first = std::time::Instant::now();
    let calls = 1 + recv_message(ep, &mut buf[first..])?;
    let spread = Spread {
        bytes: (buf.len() - first) as u64,
        first: t_first,
        last: std::time::Instant::now(),
    };
    Ok((calls, Some(spread)))
}

/// How a message that took more than one receive arrived.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    /// Its bytes after the first receive.
    pub bytes: u64,
    /// When the first receive returned.
    pub first: std::time::Instant,
    /// When the last one did.
    pub last: std::time::Instant,
}

impl Spread {
    /// From the first receive's return to the last's, nanoseconds.
    pub fn span_ns(&self) -> u64 {
        self.last.duration_since(self.first).as_nanos() as u64
    }
}

/// True when an I/O error is a receive timeout (SO_RCVTIMEO expiry).
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A message buffer starting `offset` bytes past a page boundary, allocated once per point.
#[derive(Debug)]
pub struct MessageBuffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

/// Page size assumed for alignment (4 KiB on every platform netsweep runs on).
pub const PAGE: usize = 4096;

impl MessageBuffer {
    /// A buffer of `len` bytes whose first byte lies `offset % PAGE` bytes past a page
    /// boundary, filled with a recognisable pattern. Aborts if memory runs out: a size from a
    /// peer goes through [`try_new`](Self::try_new).
    pub fn new(len: usize, offset: usize) -> Self {
        Self::try_new(len, offset).unwrap_or_else(|_| {
            let layout = std::alloc::Layout::from_size_align(len.max(1), 1)
                .unwrap_or(std::alloc::Layout::new::<u8>());
            std::alloc::handle_alloc_error(layout)
        })
    }

    /// Like [`new`](Self::new), but a size the allocator cannot give (or whose arithmetic
    /// overflows) is an error instead of an abort of the whole process.
    pub fn try_new(len: usize, offset: usize) -> io::Result<Self> {
        let offset = offset % PAGE;
        let total = len
            .checked_add(offset + PAGE)
            .ok_or_else(|| too_large(len))?;
        let mut storage = Vec::new();
        storage
            .try_reserve_exact(total)
            .map_err(|_| too_large(len))?;
        storage.resize(total, 0u8);
        let addr = storage.as_ptr() as usize;
        let start = (PAGE - addr % PAGE) % PAGE + offset;
        let mut b = Self {
            storage,
            start,
            len,
        };
        // A recognisable pattern (byte i = i mod 251), so integrity checks can tell a real
        // payload from zeros. Written once, then doubled with memcpy: a per-byte loop was most
        // of netsweep's own user-space instructions on large sweeps (callgrind, bench/peers).
        let buf = b.as_mut();
        let first = buf.len().min(251);
        for (i, x) in buf[..first].iter_mut().enumerate() {
            *x = i as u8;
        }
        let mut filled = first;
        while filled < buf.len() {
            // Copy whole periods so the pattern stays aligned to 251.
            let n = (filled / 251 * 251).min(buf.len() - filled);
            buf.copy_within(..n, filled);
            filled += n;
        }
        Ok(b)
    }

    /// Offset of the first byte from a page boundary.
    pub fn page_offset(&self) -> usize {
        self.as_ref().as_ptr() as usize % PAGE
    }
}

impl AsRef<[u8]> for MessageBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}

impl AsMut<[u8]> for MessageBuffer {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

fn too_large(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        format!("cannot allocate a message buffer of {len} bytes"),
    )
}

/// Message slots in one buffer: `count` slots of `size` bytes, `stride` apart. One slot is
/// the plain case; many slots spread over a pool larger than the caches make every
/// repetition touch cold memory (NetPIPE -I).
#[derive(Debug)]
pub struct Slots<'a> {
    buf: &'a mut [u8],
    /// Bytes of one message slot.
    pub size: usize,
    /// Distance between the starts of two slots.
    pub stride: usize,
    /// How many slots there are.
    pub count: usize,
}

impl<'a> Slots<'a> {
    /// Slots of `size` bytes laid over `buf` at `stride`, as many as fit (at least one).
    pub fn new(buf: &'a mut [u8], size: usize, stride: usize) -> Self {
        let stride = stride.max(size).max(1);
        let count = if buf.len() >= size {
            ((buf.len() - size) / stride + 1).max(1)
        } else {
            1
        };
        Self {
            buf,
            size,
            stride,
            count,
        }
    }

    /// Slot `i` (< count), as a slice running to the end of the slot's stride.
    #[inline]
    pub fn get(&mut self, i: usize) -> &mut [u8] {
        let start = i * self.stride;
        let end = (start + self.stride).min(self.buf.len());
        &mut self.buf[start..end]
    }
}

/// Stride between pooled message slots: the message rounded up to whole pages, plus the
/// offset, so each slot keeps the requested page offset.
pub fn pool_stride(size: usize, offset: usize) -> usize {
    size.div_ceil(PAGE).max(1) * PAGE + offset % PAGE
}

/// A random 64-bit value from the kernel (session cookies, private file names). A session
/// cookie is the data path's only secret, so there is no fallback on guessable values: when
/// the kernel gives none, the caller fails.
pub fn random_u64() -> io::Result<u64> {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into our buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
    if n != 8 {
        return Err(io::Error::other(format!(
            "the kernel gave no random bytes (getrandom: {})",
            io::Error::last_os_error()
        )));
    }
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn slots_cover_the_pool() {
        let mut b = vec![0u8; 10_000];
        let s = super::Slots::new(&mut b, 100, 4096);
        assert_eq!(s.count, 3);
        let mut b = vec![0u8; 50];
        let mut s = super::Slots::new(&mut b, 50, 50);
        assert_eq!((s.count, s.get(0).len()), (1, 50));
        assert_eq!(super::pool_stride(5000, 3), 8192 + 3);
    }

    use super::*;

    #[test]
    fn buffer_alignment_and_offset() {
        for off in [0usize, 1, 7, 100, 4095, 4096 + 3] {
            let b = MessageBuffer::new(10_000, off);
            assert_eq!(b.page_offset(), off % PAGE);
            assert_eq!(b.as_ref().len(), 10_000);
            assert_eq!(b.as_ref()[252], 1);
            assert!(b
                .as_ref()
                .iter()
                .enumerate()
                .all(|(i, &x)| x == (i % 251) as u8));
        }
    }
}
