//! An AF_XDP socket with its own UMEM: whole frames between user memory and one queue of an
//! interface, through four rings (fill, completion, receive, transmit) that xdpilone maps.
//! Half the UMEM's chunks wait in the fill ring for the driver; the other half carry frames
//! out. Nothing here allocates after [`Xsk::open`].

use crate::sys;
use std::io;
use std::num::NonZeroU32;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::time::{Duration, Instant};
use xdpilone::xdp::XdpDesc;
use xdpilone::{
    DeviceQueue, Errno, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User,
};

/// Bytes per UMEM chunk: one frame each.
const CHUNK: u32 = 4096;
/// Chunks in the UMEM: half for receiving, half for sending.
const CHUNKS: u32 = 4096;
/// Entries in each ring.
const RING: u32 = CHUNKS / 2;
// The footprint the descriptor declares for a session's admission is this UMEM.
const _: () = assert!((CHUNKS * CHUNK) as u64 == super::UMEM_BYTES);
/// Bytes the kernel keeps in front of a received frame in its chunk (XDP_PACKET_HEADROOM).
const XDP_HEADROOM: usize = 256;
/// The largest frame one chunk holds.
pub(super) const MAX_FRAME: usize = CHUNK as usize - XDP_HEADROOM;
/// How long a send waits for the kernel to hand back a transmit chunk.
const SEND_STALL: Duration = Duration::from_secs(1);

/// `SOL_XDP` and its `XDP_OPTIONS` getsockopt (linux/if_xdp.h).
const SOL_XDP: libc::c_int = 283;
const XDP_OPTIONS: libc::c_int = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;

fn err(what: &str, e: Errno) -> io::Error {
    let os = io::Error::from_raw_os_error(e.get_raw());
    let fix = match e.get_raw() {
        libc::EPERM | libc::EACCES => ": AF_XDP needs CAP_NET_ADMIN (run as root)",
        libc::EBUSY => ": another AF_XDP socket holds this queue (another xdp session?)",
        _ => "",
    };
    io::Error::new(os.kind(), format!("{what}: {os}{fix}"))
}

/// Anonymous memory for the UMEM, unmapped on drop (after the socket that registered it).
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> io::Result<Self> {
        // SAFETY: a fresh private anonymous mapping; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(Self { ptr, len })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Counters the kernel keeps for an AF_XDP socket (XDP_STATISTICS).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct XskCounters {
    /// Frames redirected to the socket but dropped: no free chunk in the fill ring, or the
    /// receive ring full.
    pub(super) rx_dropped: u64,
}

/// One AF_XDP socket bound to `queue` of an interface.
pub(super) struct Xsk {
    // Dropped in this order: the rings and sockets close before the memory is unmapped.
    rx: RingRx,
    tx: RingTx,
    fq: DeviceQueue,
    user: User,
    _sock: Socket,
    _umem: Umem,
    area: Area,
    /// Transmit chunks not in flight.
    free: Vec<u64>,
    /// Chunks just received, to give back to the fill ring.
    done: Vec<u64>,
    fd: RawFd,
    timeout: Option<Duration>,
    /// How long a receive polls the empty ring before it sleeps (`--busy-poll`).
    busy: Option<Duration>,
    /// Whether the driver moves frames without a copy.
    pub(super) zero_copy: bool,
}

// SAFETY: the UMEM area and the rings are owned by this value alone and used by whichever one
// thread holds it; xdpilone's handles are plain pointers into those mappings.
unsafe impl Send for Xsk {}

impl std::fmt::Debug for Xsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Xsk")
            .field("fd", &self.fd)
            .field("zero_copy", &self.zero_copy)
            .finish()
    }
}

impl Xsk {
    /// Opens a socket on queue `queue` of interface `ifindex` with a fresh UMEM, binds it
    /// (zero-copy when the driver can, else copy) and fills the fill ring.
    pub(super) fn open(ifindex: u32, queue: u32) -> io::Result<Self> {
        let area = Area::new((CHUNKS * CHUNK) as usize)?;
        let config = UmemConfig {
            fill_size: RING,
            complete_size: RING,
            frame_size: CHUNK,
            headroom: 0,
            flags: 0,
        };
        let mem = NonNull::slice_from_raw_parts(area.ptr, area.len);
        // SAFETY: `area` is page-aligned, outlives the UMEM (field order) and is used only
        // through it.
        let umem = unsafe { Umem::new(config, mem) }
            .map_err(|e| err("registering the AF_XDP memory", e))?;
        let mut info = IfInfo::invalid();
        info.from_ifindex(ifindex)
            .map_err(|e| err("finding the interface for AF_XDP", e))?;
        info.set_queue(queue);
        let sock =
            Socket::with_shared(&info, &umem).map_err(|e| err("opening an AF_XDP socket", e))?;
        let mut fq = umem
            .fq_cq(&sock)
            .map_err(|e| err("mapping the AF_XDP fill and completion rings", e))?;
        let user = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(RING),
                    tx_size: NonZeroU32::new(RING),
                    bind_flags: SocketConfig::XDP_BIND_NEED_WAKEUP,
                },
            )
            .map_err(|e| err("sizing the AF_XDP rings", e))?;
        let rx = user
            .map_rx()
            .map_err(|e| err("mapping the AF_XDP receive ring", e))?;
        let tx = user
            .map_tx()
            .map_err(|e| err("mapping the AF_XDP transmit ring", e))?;
        umem.bind(&user)
            .map_err(|e| err(&format!("binding AF_XDP to queue {queue}"), e))?;
        let fd = user.as_raw_fd();
        {
            let mut w = fq.fill(RING);
            w.insert((0..RING).map(|i| u64::from(i * CHUNK)));
            w.commit();
        }
        let mut opts = [0u8; 4];
        let zero_copy = sys::get_bytes(fd, SOL_XDP, XDP_OPTIONS, &mut opts)
            .map(|_| u32::from_ne_bytes(opts) & XDP_OPTIONS_ZEROCOPY != 0)
            .unwrap_or(false);
        Ok(Self {
            rx,
            tx,
            fq,
            user,
            _sock: sock,
            _umem: umem,
            area,
            free: (RING..CHUNKS).map(|i| u64::from(i * CHUNK)).collect(),
            done: Vec::with_capacity(RING as usize),
            fd,
            timeout: None,
            busy: None,
            zero_copy,
        })
    }

    /// The socket's descriptor, for the XSKMAP.
    pub(super) fn fd(&self) -> RawFd {
        self.fd
    }

    /// How long a receive waits for a frame (`None`: forever).
    pub(super) fn set_timeout(&mut self, t: Option<Duration>) {
        self.timeout = t;
    }

    /// How long a receive polls an empty ring before it sleeps in ppoll (`None`: it sleeps at
    /// once). Polling spares the sender the wake-ups — on a veth its CPU runs the receiver's
    /// XDP too — at the cost of the receiving CPU.
    pub(super) fn set_busy_poll(&mut self, busy: Option<Duration>) {
        self.busy = busy.filter(|d| !d.is_zero());
    }

    /// Polls the receive ring until a frame is there or `busy` has passed; true if one is.
    fn poll_ring(&self, busy: Duration) -> bool {
        let start = Instant::now();
        loop {
            for _ in 0..64 {
                if self.rx.available() > 0 {
                    return true;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= busy {
                return false;
            }
        }
    }

    /// The kernel's counters for this socket.
    pub(super) fn counters(&self) -> Option<XskCounters> {
        let s = self.user.statistics_v2().ok()?;
        Some(XskCounters {
            rx_dropped: s.rx_dropped + s.rx_ring_full,
        })
    }

    /// Waits for `events` on the socket up to `wait`; false when the wait ended without them.
    fn wait(&self, events: libc::c_short, wait: Option<Duration>) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.fd,
            events,
            revents: 0,
        };
        let ts = wait.map(|d| libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: one valid pollfd; `tsp` is null or points at `ts`, live for the call.
        let n = sys::cvt(unsafe { libc::ppoll(&mut p, 1, tsp, std::ptr::null()) })?;
        Ok(n > 0)
    }

    /// Receives up to `max` frames, calling `each(i, frame)` for every one (Ethernet header
    /// first), then gives their chunks back to the driver. Waits up to the receive timeout for
    /// the first (then WouldBlock). Returns (frames, system calls).
    #[inline]
    pub(super) fn recv(
        &mut self,
        max: usize,
        mut each: impl FnMut(usize, &[u8]),
    ) -> io::Result<(usize, u64)> {
        let mut calls = 0;
        loop {
            let base = self.area.ptr.as_ptr();
            let mut r = self.rx.receive(max as u32);
            while let Some(d) = r.read() {
                // SAFETY: the kernel wrote `d.len` bytes at offset `d.addr` of the UMEM,
                // inside one chunk it owned until this read.
                let frame = unsafe {
                    std::slice::from_raw_parts(base.add(d.addr as usize), d.len as usize)
                };
                each(self.done.len(), frame);
                self.done.push(d.addr & !u64::from(CHUNK - 1));
            }
            r.release();
            drop(r);
            let got = self.done.len();
            if got > 0 {
                let mut w = self.fq.fill(got as u32);
                w.insert(self.done.iter().copied());
                w.commit();
                drop(w);
                self.done.clear();
                if self.fq.needs_wakeup() {
                    self.fq.wake();
                    calls += 1;
                }
                return Ok((got, calls));
            }
            if self.busy.is_some_and(|b| self.poll_ring(b)) {
                continue;
            }
            calls += 1;
            if !self.wait(libc::POLLIN, self.timeout)? {
                return Err(io::Error::from(io::ErrorKind::WouldBlock));
            }
        }
    }

    /// Sends up to `count` frames, each written by `build(i, chunk)` (which returns the
    /// frame's length), and kicks the kernel once. Waits (bounded) for a free chunk when all
    /// are in flight. Returns (frames queued, system calls).
    #[inline]
    pub(super) fn send(
        &mut self,
        count: usize,
        mut build: impl FnMut(usize, &mut [u8]) -> usize,
    ) -> io::Result<(usize, u64)> {
        let mut calls = self.reclaim()?;
        let base = self.area.ptr.as_ptr();
        let n = count.min(self.free.len()) as u32;
        let mut w = self.tx.transmit(n);
        let room = w.capacity() as usize;
        let free = &mut self.free;
        let sent = w.insert((0..room).filter_map(|i| {
            let addr = free.pop()?;
            // SAFETY: a transmit chunk not in flight, MAX_FRAME bytes long, owned by us.
            let chunk =
                unsafe { std::slice::from_raw_parts_mut(base.add(addr as usize), MAX_FRAME) };
            let len = build(i, chunk);
            Some(XdpDesc {
                addr,
                len: len as u32,
                options: 0,
            })
        })) as usize;
        w.commit();
        drop(w);
        calls += self.flush()?;
        Ok((sent, calls))
    }

    /// Has the kernel take every queued frame: a frame counts as sent once the driver has it.
    /// In copy mode each kick transmits at most 32 frames (the kernel's TX_BATCH_SIZE), so it
    /// kicks until the ring is empty or a kick makes no progress (the driver is busy: the rest
    /// goes with the next kick); in zero-copy mode the driver drains the ring after one kick.
    #[inline]
    fn flush(&mut self) -> io::Result<u64> {
        let mut calls = 0;
        let mut left = self.tx.pending();
        while left > 0 && self.tx.needs_wakeup() {
            calls += 1;
            self.kick()?;
            let now = self.tx.pending();
            if self.zero_copy || now >= left {
                break;
            }
            left = now;
        }
        Ok(calls)
    }

    /// Asks the kernel to transmit what the ring holds.
    fn kick(&self) -> io::Result<()> {
        // SAFETY: a zero-length send on our own socket: the AF_XDP transmit kick.
        let rc = unsafe {
            libc::sendto(
                self.fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // Busy or out of budget: the frames stay queued for the next kick.
            return match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR) => Ok(()),
                _ => Err(e),
            };
        }
        Ok(())
    }

    /// Takes completed transmit chunks back; when none is free, kicks and waits for one (at
    /// most [`SEND_STALL`]). Returns the system calls made.
    #[inline]
    fn reclaim(&mut self) -> io::Result<u64> {
        let mut calls = 0;
        let mut since: Option<Instant> = None;
        loop {
            let mut c = self.fq.complete(RING);
            while let Some(addr) = c.read() {
                self.free.push(addr);
            }
            c.release();
            drop(c);
            if !self.free.is_empty() {
                return Ok(calls);
            }
            let start = *since.get_or_insert_with(Instant::now);
            if start.elapsed() > SEND_STALL {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the AF_XDP transmit ring made no progress for 1 s (is the interface up?)",
                ));
            }
            calls += 2;
            self.kick()?;
            self.wait(libc::POLLOUT, Some(Duration::from_millis(1)))?;
        }
    }
}
