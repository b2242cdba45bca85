//! One side of an `shm` data path: sends copy into one ring, receives copy out of the other,
//! waiting by spin, yield, then futex, and checking every position the peer writes.

use super::corrupt;
use super::layout::*;
use netsweep_endpoint::Endpoint;
use netsweep_proto::messages::GrantedKnobs;
use std::io;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// What a wait ended with.
#[derive(Debug, PartialEq, Eq)]
enum Wait {
    Ready,
    /// The peer dropped its endpoint.
    Closed,
    /// The peer's process no longer exists.
    Gone,
    TimedOut,
}

/// One side of a shared-memory data path.
#[derive(Debug)]
pub struct ShmEndpoint {
    map: Mapping,
    /// SERVER or CLIENT.
    me: usize,
    peer_pid: u32,
    cap: u64,
    mask: u64,
    /// The ring this side sends on, and its data.
    tx: *const RingCtl,
    tx_data: *mut u8,
    /// The ring this side receives from, and its data.
    rx: *const RingCtl,
    rx_data: *mut u8,
    /// Own positions (authoritative) and cached copies of the peer's.
    tx_tail: u64,
    tx_head: u64,
    rx_head: u64,
    rx_tail: u64,
    recv_timeout: Option<Duration>,
    send_timeout: Duration,
    granted: GrantedKnobs,
}

// SAFETY: the raw pointers point into `map`, owned by the endpoint; the peer only touches
// the other end of each ring, as the SPSC protocol says.
unsafe impl Send for ShmEndpoint {}

impl ShmEndpoint {
    /// `cap` is the capacity this side checked against the mapping's length (the header's
    /// copy is the peer's to write, so it is not read again).
    pub(super) fn new(
        map: Mapping,
        cap: u64,
        me: usize,
        peer_pid: u32,
        send_timeout: Duration,
        granted: GrantedKnobs,
    ) -> io::Result<Self> {
        if !cap.is_power_of_two() || map.len != HEADER + 2 * cap as usize {
            return Err(corrupt(format!(
                "capacity {cap} does not fit a {}-byte file",
                map.len
            )));
        }
        let h: *const Header = map.base.cast();
        // Ring 0 is client → server: the client sends on it.
        let (txi, rxi) = if me == CLIENT { (0, 1) } else { (1, 0) };
        // SAFETY: both rings lie inside the header, and the data areas inside the mapping
        // (connect and open checked its length: HEADER + 2 * cap).
        let (tx, rx, tx_data, rx_data) = unsafe {
            (
                std::ptr::addr_of!((*h).rings[txi]),
                std::ptr::addr_of!((*h).rings[rxi]),
                map.base.add(HEADER + txi * cap as usize),
                map.base.add(HEADER + rxi * cap as usize),
            )
        };
        // SAFETY: as above.
        let (txr, rxr) = unsafe { (&*tx, &*rx) };
        let tx_tail = txr.tail.pos.load(Ordering::SeqCst);
        let tx_head = txr.head.pos.load(Ordering::SeqCst);
        let rx_head = rxr.head.pos.load(Ordering::SeqCst);
        let rx_tail = rxr.tail.pos.load(Ordering::SeqCst);
        for (what, head, tail) in [("send", tx_head, tx_tail), ("receive", rx_head, rx_tail)] {
            if head > tail || tail - head > cap {
                return Err(corrupt(format!(
                    "{what} ring starts at head {head}, tail {tail} (capacity {cap})"
                )));
            }
        }
        Ok(Self {
            map,
            me,
            peer_pid,
            cap,
            mask: cap - 1,
            tx,
            tx_data,
            rx,
            rx_data,
            tx_tail,
            tx_head,
            rx_head,
            rx_tail,
            recv_timeout: None,
            send_timeout,
            granted,
        })
    }

    /// The peer's consumer position of the send ring, checked: not behind the last one seen
    /// (positions only grow) and not past what this side produced.
    #[inline]
    fn checked_head(&self, head: u64) -> io::Result<u64> {
        if head < self.tx_head || head > self.tx_tail {
            return Err(corrupt(format!(
                "consumer position {head} outside [{}, {}] of the send ring",
                self.tx_head, self.tx_tail
            )));
        }
        Ok(head)
    }

    /// The peer's producer position of the receive ring, checked: not behind the last one
    /// seen and at most a ring's capacity ahead of what this side consumed.
    #[inline]
    fn checked_tail(&self, tail: u64) -> io::Result<u64> {
        if tail < self.rx_tail || tail - self.rx_head > self.cap {
            return Err(corrupt(format!(
                "producer position {tail} outside [{}, {}] of the receive ring",
                self.rx_tail,
                self.rx_head + self.cap
            )));
        }
        Ok(tail)
    }

    #[inline]
    fn txr(&self) -> &RingCtl {
        // SAFETY: points into `self.map`, alive as long as `self`.
        unsafe { &*self.tx }
    }

    #[inline]
    fn rxr(&self) -> &RingCtl {
        // SAFETY: as `txr`.
        unsafe { &*self.rx }
    }

    #[inline]
    fn peer_closed(&self) -> bool {
        self.map.header().closed[1 - self.me].load(Ordering::Acquire) != 0
    }

    /// Ring capacity in bytes (each direction).
    pub fn capacity(&self) -> u64 {
        self.cap
    }

    /// Waits until `ready()`; spins for [`SPIN`], then sleeps on `ev` with `waiting` set,
    /// in slices, until `deadline` (None: forever).
    fn wait(
        &self,
        ev: &AtomicU32,
        waiting: &AtomicU32,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> bool,
    ) -> Wait {
        let start = Instant::now();
        let mut i = 0u32;
        let cpus = &self.map.header().cpu.0;
        // SAFETY: sched_getcpu has no preconditions (-1 when unknown).
        let here = unsafe { libc::sched_getcpu() }.wrapping_add(1) as u32;
        if cpus[self.me].load(Ordering::Relaxed) != here {
            cpus[self.me].store(here, Ordering::Relaxed);
        }
        // Spinning only delays a peer that needs this CPU to make progress.
        let mut yielding = here != 0 && cpus[1 - self.me].load(Ordering::Relaxed) == here;
        loop {
            if ready() {
                return Wait::Ready;
            }
            if self.peer_closed() {
                return Wait::Closed;
            }
            if yielding {
                // Lets a peer that shares this CPU run (returns at once when none waits).
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            i += 1;
            if i.is_multiple_of(64) || yielding {
                let spent = start.elapsed();
                if spent >= SPIN {
                    break;
                }
                yielding = spent >= SPIN_PURE;
            }
        }
        loop {
            let e = ev.load(Ordering::SeqCst);
            waiting.store(1, Ordering::SeqCst);
            // Orders the flag before the position load in `ready`: the peer stores the
            // position, then loads the flag (both SeqCst), so either it sees the flag and
            // wakes us, or `ready` sees its position. Without the fence the load could be
            // satisfied before the flag is visible, and both sides miss each other.
            fence(Ordering::SeqCst);
            if ready() {
                waiting.store(0, Ordering::Relaxed);
                return Wait::Ready;
            }
            if self.peer_closed() {
                waiting.store(0, Ordering::Relaxed);
                return Wait::Closed;
            }
            let slice = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        waiting.store(0, Ordering::Relaxed);
                        return Wait::TimedOut;
                    }
                    left.min(SLICE)
                }
                None => SLICE,
            };
            futex_wait(ev, e, slice);
            if pid_gone(self.peer_pid) {
                waiting.store(0, Ordering::Relaxed);
                return Wait::Gone;
            }
        }
    }

    #[cold]
    fn gone_error(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::ConnectionReset,
            format!(
                "the shm peer's process ({}) died without closing its end",
                self.peer_pid
            ),
        )
    }

    #[cold]
    fn closed_error() -> io::Error {
        io::Error::new(
            io::ErrorKind::BrokenPipe,
            "the shm peer closed its end of the data path",
        )
    }
}

impl Endpoint for ShmEndpoint {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.peer_closed() {
            return Err(Self::closed_error());
        }
        let mut free = self.cap - (self.tx_tail - self.tx_head);
        if free == 0 {
            self.tx_head = self.checked_head(self.txr().head.pos.load(Ordering::Acquire))?;
            free = self.cap - (self.tx_tail - self.tx_head);
            if free == 0 {
                let seen = self.tx_head;
                let cap = self.cap;
                let deadline = Instant::now() + self.send_timeout;
                let r = self.txr();
                let mut head = seen;
                // Ready on any change: checked below before it is used.
                let w = self.wait(&r.head.ev, &r.head.waiting, Some(deadline), || {
                    head = r.head.pos.load(Ordering::Acquire);
                    head != seen
                });
                match w {
                    Wait::Ready => {}
                    Wait::Closed => return Err(Self::closed_error()),
                    Wait::Gone => return Err(self.gone_error()),
                    Wait::TimedOut => {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "the shm peer took nothing from a full {cap}-byte ring for {:?}",
                                self.send_timeout
                            ),
                        ))
                    }
                }
                self.tx_head = self.checked_head(head)?;
                free = self.cap - (self.tx_tail - self.tx_head);
            }
        }
        let n = (buf.len() as u64).min(free) as usize;
        // Publish in chunks so the receiver copies out while this side still copies in: a
        // large message then costs about one copy, not two in series.
        let mut done = 0;
        while done < n {
            let k = (n - done).min(CHUNK);
            let at = (self.tx_tail & self.mask) as usize;
            let first = k.min(self.cap as usize - at);
            // SAFETY: [at, at + first) and [0, k - first) lie inside this ring's data area
            // and are free (the consumer is past them: tail - head + k <= cap); `buf` holds
            // done + k bytes.
            unsafe {
                let src = buf.as_ptr().add(done);
                std::ptr::copy_nonoverlapping(src, self.tx_data.add(at), first);
                std::ptr::copy_nonoverlapping(src.add(first), self.tx_data, k - first);
            }
            self.tx_tail += k as u64;
            done += k;
            let r = self.txr();
            r.tail.pos.store(self.tx_tail, Ordering::SeqCst);
            if r.tail.waiting.load(Ordering::SeqCst) != 0 {
                r.tail.waiting.store(0, Ordering::Relaxed);
                signal(&r.tail.ev);
            }
        }
        Ok(n)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut avail = self.rx_tail - self.rx_head;
        if avail == 0 {
            self.rx_tail = self.checked_tail(self.rxr().tail.pos.load(Ordering::Acquire))?;
            avail = self.rx_tail - self.rx_head;
            if avail == 0 {
                let head = self.rx_head;
                let deadline = self.recv_timeout.map(|t| Instant::now() + t);
                let r = self.rxr();
                let mut tail = head;
                let w = self.wait(&r.tail.ev, &r.tail.waiting, deadline, || {
                    tail = r.tail.pos.load(Ordering::Acquire);
                    tail != head
                });
                match w {
                    Wait::Ready => {}
                    Wait::Closed => {
                        // Take what the peer wrote before it closed; then end of stream.
                        tail = r.tail.pos.load(Ordering::Acquire);
                        if tail == head {
                            return Ok(0);
                        }
                    }
                    Wait::Gone => return Err(self.gone_error()),
                    Wait::TimedOut => {
                        return Err(io::Error::from_raw_os_error(libc::EAGAIN));
                    }
                }
                self.rx_tail = self.checked_tail(tail)?;
                avail = self.rx_tail - self.rx_head;
            }
        }
        let n = (buf.len() as u64).min(avail) as usize;
        let at = (self.rx_head & self.mask) as usize;
        let first = n.min(self.cap as usize - at);
        // SAFETY: [at, at + first) and [0, n - first) lie inside this ring's data area and
        // hold published bytes (head + n <= tail); `buf` has room for n bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.rx_data.add(at), buf.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(self.rx_data, buf.as_mut_ptr().add(first), n - first);
        }
        self.rx_head += n as u64;
        let r = self.rxr();
        r.head.pos.store(self.rx_head, Ordering::SeqCst);
        if r.head.waiting.load(Ordering::SeqCst) != 0 {
            r.head.waiting.store(0, Ordering::Relaxed);
            signal(&r.head.ev);
        }
        Ok(n)
    }

    fn is_datagram(&self) -> bool {
        false
    }

    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.recv_timeout = timeout;
        Ok(())
    }

    fn granted(&self) -> GrantedKnobs {
        self.granted.clone()
    }
}

impl Drop for ShmEndpoint {
    fn drop(&mut self) {
        let h = self.map.header();
        h.closed[self.me].store(1, Ordering::SeqCst);
        // Wake whatever the peer may be sleeping on.
        for r in &h.rings {
            signal(&r.tail.ev);
            signal(&r.head.ev);
        }
    }
}
