//! A server's data streams: one thread per stream, each with one buffer allocated before the
//! test starts, moving bytes in a lean loop (no allocation, logging or locking per message) and
//! publishing its counters through atomics that the control thread samples. Senders pace to
//! the client's `-b` (and stop after `-n`/`-k` on TCP); receivers count iperf3's UDP header:
//! lost, out of order and jitter, as iperf3 does. Every loop looks at its stop flag at least
//! every [`TICK`] and gives up on a client that moves nothing for the idle timeout.

use crate::control::thread_cpu;
use crate::wire;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often a blocked stream looks at its stop flag.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// A stream's socket.
#[derive(Debug)]
pub(crate) enum Sock {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

impl Sock {
    pub(crate) fn shutdown(&self) {
        match self {
            Sock::Tcp(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            // A connected UDP socket's blocked recv wakes on shutdown too.
            Sock::Udp(s) => {
                // SAFETY: shutdown on a descriptor this socket owns.
                unsafe { libc::shutdown(s.as_raw_fd(), libc::SHUT_RDWR) };
            }
        }
    }

    pub(crate) fn try_clone(&self) -> io::Result<Sock> {
        Ok(match self {
            Sock::Tcp(s) => Sock::Tcp(s.try_clone()?),
            Sock::Udp(s) => Sock::Udp(s.try_clone()?),
        })
    }
}

/// What every stream of a test shares with the control thread.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// The instant TEST_RUNNING went out; streams wait for it.
    start: Mutex<Option<Instant>>,
    started: Condvar,
    /// Senders stop (TEST_END, or the test failed).
    pub(crate) stop_send: AtomicBool,
    /// Receivers stop (drained after TEST_END, or the test failed).
    pub(crate) stop_recv: AtomicBool,
    /// Bumped at the end of the omitted seconds: receivers restart their jitter.
    pub(crate) omit_epoch: AtomicU32,
    /// TCP senders: blocks left to send across all streams (`-n`, `-k`); None: until stopped.
    pub(crate) blocks_left: Option<AtomicU64>,
    /// The first stream failure, if any.
    pub(crate) failed: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn new(blocks: Option<u64>) -> Shared {
        Shared {
            blocks_left: blocks.map(AtomicU64::new),
            ..Shared::default()
        }
    }

    /// Releases the streams (or, with None, tells them the test never started).
    pub(crate) fn go(&self, at: Option<Instant>) {
        let mut s = self.start.lock().unwrap_or_else(|p| p.into_inner());
        *s = at;
        if at.is_none() {
            self.stop_send.store(true, Relaxed);
            self.stop_recv.store(true, Relaxed);
        }
        self.started.notify_all();
    }

    fn wait_go(&self) -> Option<Instant> {
        let mut s = self.start.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(t) = *s {
                return Some(t);
            }
            if self.stop_recv.load(Relaxed) {
                return None;
            }
            s = self
                .started
                .wait_timeout(s, TICK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    pub(crate) fn fail(&self, why: String) {
        let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(why);
        self.stop_send.store(true, Relaxed);
        self.stop_recv.store(true, Relaxed);
    }

    pub(crate) fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// One stream's counters, written by its thread, read by the control thread.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) bytes: AtomicU64,
    /// Datagrams sent, or the highest sequence number received.
    pub(crate) packets: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) out_of_order: AtomicU64,
    pub(crate) datagrams: AtomicU64,
    jitter_bits: AtomicU64,
    /// Nanoseconds from the test's start to the last byte received.
    pub(crate) last_byte_ns: AtomicU64,
    /// The thread's CPU time in the test, nanoseconds.
    pub(crate) user_ns: AtomicU64,
    pub(crate) system_ns: AtomicU64,
    pub(crate) ended: AtomicBool,
}

impl Counters {
    pub(crate) fn jitter(&self) -> f64 {
        f64::from_bits(self.jitter_bits.load(Relaxed))
    }
}

/// How one stream runs.
#[derive(Debug, Clone)]
pub(crate) struct StreamPlan {
    pub(crate) send: bool,
    pub(crate) len: usize,
    pub(crate) rate_bps: u64,
    pub(crate) burst: u32,
    pub(crate) counters_64bit: bool,
    pub(crate) idle: Duration,
    /// TCP sender: send with sendfile from this memory file (`-Z`).
    pub(crate) zerocopy: bool,
}

/// Buffer for a stream, allocated fallibly: an allocation the kernel refuses is an error for
/// this test, never an abort. Filled with random bytes, or iperf3's repeating digits.
pub(crate) fn buffer(len: usize, repeating: bool) -> io::Result<Vec<u8>> {
    let mut b: Vec<u8> = Vec::new();
    b.try_reserve_exact(len)
        .map_err(|_| io::Error::new(ErrorKind::OutOfMemory, format!("{len}-byte buffer")))?;
    b.resize(len, 0);
    if repeating {
        for (i, x) in b.iter_mut().enumerate() {
            *x = b'0' + (i % 10) as u8;
        }
    } else {
        crate::control::fill_random(&mut b);
    }
    Ok(b)
}

/// A memory file holding `buf`, for sendfile (`-Z`).
pub(crate) fn memory_file(buf: &[u8]) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create with a NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"netsweep-iperf3-zerocopy".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut f = std::fs::File::from(owned.try_clone()?);
    f.write_all(buf)?;
    Ok(owned)
}

/// A stream thread's body: waits for the start, runs its loop, records its CPU time; a
/// failure fails the whole test (the control thread ends it).
pub(crate) fn run(
    sock: Sock,
    plan: StreamPlan,
    mut buf: Vec<u8>,
    file: Option<OwnedFd>,
    c: &Counters,
    sh: &Shared,
) {
    let Some(start) = sh.wait_go() else {
        c.ended.store(true, Relaxed);
        return;
    };
    let cpu0 = thread_cpu();
    let r = match (&sock, plan.send) {
        (Sock::Tcp(s), true) => tcp_send(s, &plan, &buf, file.as_ref(), start, c, sh),
        (Sock::Tcp(s), false) => tcp_recv(s, &plan, &mut buf, start, c, sh),
        (Sock::Udp(s), true) => udp_send(s, &plan, &mut buf, start, c, sh),
        (Sock::Udp(s), false) => udp_recv(s, &plan, &mut buf, start, c, sh),
    };
    let (u, s) = thread_cpu();
    c.user_ns
        .store(u.saturating_sub(cpu0.0).as_nanos() as u64, Relaxed);
    c.system_ns
        .store(s.saturating_sub(cpu0.1).as_nanos() as u64, Relaxed);
    if let Err(e) = r {
        sh.fail(e);
    }
    c.ended.store(true, Relaxed);
}

fn blocked(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// The most a paced sender falls behind its schedule before the rest is forgiven: after a
/// pause (descheduled on a busy host) it catches up by at most this much data at once, so a
/// receiver's buffer is not flooded by a burst the client never asked for.
const MAX_DEBT: Duration = Duration::from_millis(10);

/// Sleeps until `bytes` sent since `start` keeps the stream at its rate (at most one tick);
/// `start` moves on by any debt beyond [`MAX_DEBT`]. True when it slept (the caller looks at
/// its stop flag again).
fn pace(rate_bps: u64, start: &mut Instant, bytes: u64) -> bool {
    if rate_bps == 0 {
        return false;
    }
    let due = *start + Duration::from_secs_f64(bytes as f64 * 8.0 / rate_bps as f64);
    let now = Instant::now();
    if due + MAX_DEBT < now {
        *start += now - MAX_DEBT - due;
        return false;
    }
    if due <= now {
        return false;
    }
    std::thread::sleep((due - now).min(TICK));
    true
}

/// Takes one block from the test's `-n`/`-k` allowance; false when none is left.
fn take_block(sh: &Shared) -> bool {
    sh.blocks_left.as_ref().is_none_or(|left| {
        left.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
            .is_ok()
    })
}

fn tcp_send(
    mut s: &TcpStream,
    p: &StreamPlan,
    buf: &[u8],
    file: Option<&OwnedFd>,
    start: Instant,
    c: &Counters,
    sh: &Shared,
) -> Result<(), String> {
    let mut sent = 0u64;
    let mut paced = start;
    let mut progress = Instant::now();
    'blocks: while !sh.stop_send.load(Relaxed) {
        // A burst goes back to back; pacing waits only between bursts.
        if sent.is_multiple_of(p.len as u64 * u64::from(p.burst.max(1)))
            && pace(p.rate_bps, &mut paced, sent)
        {
            continue;
        }
        if !take_block(sh) {
            break;
        }
        let mut off = 0usize;
        while off < p.len {
            if sh.stop_send.load(Relaxed) {
                break 'blocks;
            }
            let r = match file {
                Some(f) => sendfile(s.as_raw_fd(), f.as_raw_fd(), off, p.len - off),
                None => s.write(&buf[off..]),
            };
            match r {
                Ok(n) => {
                    off += n;
                    sent += n as u64;
                    c.bytes.fetch_add(n as u64, Relaxed);
                    progress = Instant::now();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if blocked(&e) => {
                    if progress.elapsed() > p.idle {
                        return Err(format!(
                            "the client read nothing for {:.0} s",
                            p.idle.as_secs_f64()
                        ));
                    }
                }
                // TEST_END shut the stream for writing under this write.
                Err(_) if sh.stop_send.load(Relaxed) => break,
                Err(e) => return Err(format!("sending: {e}")),
            }
        }
    }
    Ok(())
}

fn sendfile(sock: i32, file: i32, off: usize, len: usize) -> io::Result<usize> {
    let mut o = off as libc::off_t;
    // SAFETY: sendfile between two live descriptors, with a pointer to a live offset.
    let n = unsafe { libc::sendfile(sock, file, &mut o, len) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn tcp_recv(
    mut s: &TcpStream,
    p: &StreamPlan,
    buf: &mut [u8],
    start: Instant,
    c: &Counters,
    sh: &Shared,
) -> Result<(), String> {
    let mut progress = Instant::now();
    while !sh.stop_recv.load(Relaxed) {
        match s.read(buf) {
            Ok(0) => break,
            Ok(n) => {
                c.bytes.fetch_add(n as u64, Relaxed);
                progress = Instant::now();
                c.last_byte_ns
                    .store(progress.duration_since(start).as_nanos() as u64, Relaxed);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if blocked(&e) => {
                if progress.elapsed() > p.idle && !sh.stop_send.load(Relaxed) {
                    return Err(format!(
                        "the client sent nothing for {:.0} s",
                        p.idle.as_secs_f64()
                    ));
                }
            }
            // A reset after TEST_END is the client closing its end.
            Err(_) if sh.stop_send.load(Relaxed) => break,
            Err(e) => return Err(format!("receiving: {e}")),
        }
    }
    Ok(())
}

fn wall_clock() -> (u32, u32) {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_secs() as u32, t.subsec_micros())
}

fn udp_send(
    s: &UdpSocket,
    p: &StreamPlan,
    buf: &mut [u8],
    start: Instant,
    c: &Counters,
    sh: &Shared,
) -> Result<(), String> {
    let mut seq = 0u64;
    let mut sent = 0u64;
    let mut paced = start;
    while !sh.stop_send.load(Relaxed) {
        if seq.is_multiple_of(u64::from(p.burst.max(1))) && pace(p.rate_bps, &mut paced, sent) {
            continue;
        }
        seq += 1;
        let (sec, usec) = wall_clock();
        wire::put_udp_header_sized(buf, sec, usec, seq, p.counters_64bit);
        match s.send(buf) {
            Ok(n) => {
                sent += n as u64;
                c.bytes.fetch_add(n as u64, Relaxed);
                c.packets.store(seq, Relaxed);
            }
            // The sender's own queue is full: the datagram is not sent, its number reused.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                seq -= 1;
                std::thread::yield_now();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => seq -= 1,
            Err(_) if sh.stop_send.load(Relaxed) => break,
            Err(e) => return Err(format!("sending datagrams: {e}")),
        }
    }
    Ok(())
}

fn udp_recv(
    s: &UdpSocket,
    p: &StreamPlan,
    buf: &mut [u8],
    start: Instant,
    c: &Counters,
    sh: &Shared,
) -> Result<(), String> {
    let mut rx = wire::UdpReceiver::default();
    let mut epoch = sh.omit_epoch.load(Relaxed);
    let mut progress = Instant::now();
    while !sh.stop_recv.load(Relaxed) {
        let n = match s.recv(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if blocked(&e) => {
                if progress.elapsed() > p.idle && !sh.stop_send.load(Relaxed) {
                    return Err(format!(
                        "the client sent no datagram for {:.0} s",
                        p.idle.as_secs_f64()
                    ));
                }
                continue;
            }
            Err(_) if sh.stop_send.load(Relaxed) => break,
            Err(e) => return Err(format!("receiving datagrams: {e}")),
        };
        progress = Instant::now();
        let e = sh.omit_epoch.load(Relaxed);
        if e != epoch {
            epoch = e;
            rx.jitter = 0.0;
        }
        let (sec, usec) = wall_clock();
        rx.take(&buf[..n], p.counters_64bit, sec, usec);
        c.bytes.fetch_add(n as u64, Relaxed);
        c.datagrams.fetch_add(1, Relaxed);
        c.packets.store(rx.highest, Relaxed);
        c.lost.store(rx.lost, Relaxed);
        c.out_of_order.store(rx.out_of_order, Relaxed);
        c.jitter_bits.store(rx.jitter.to_bits(), Relaxed);
        c.last_byte_ns
            .store(progress.duration_since(start).as_nanos() as u64, Relaxed);
    }
    Ok(())
}
