//! The connections in their handshake, oldest first, so that at the cap one can be cut short
//! for a newer one: a flood of silent or slow connections then delays a legitimate client by
//! nothing (its handshake takes a round trip or two), where waiting in the listen backlog for
//! a silent one's handshake timeout would delay it by that timeout — as long as a client's
//! own timeout, so under load the client gave up first. The one cut short is the oldest
//! handshake of the address (an IPv6 client's /64) holding the most, so a flood from one
//! address cuts short only its own connections, never another client's.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most connections in their handshake at once. A newer connection beyond it cuts the oldest
/// handshake short (its socket is shut down, its thread ends at once), so a flood of silent
/// connections can hold neither threads nor the listen backlog.
pub const MAX_HANDSHAKES: usize = 64;

/// Most handshakes one address holds before a newer one of its own cuts its oldest short,
/// whatever the others hold.
pub const MAX_HANDSHAKES_PER_IP: usize = 8;

/// One connection in its handshake.
struct Entry {
    n: u64,
    key: IpAddr,
    stream: TcpStream,
    evicted: Arc<AtomicBool>,
}

/// The registry of connections in their handshake; shared by the accept loop, which adds and
/// evicts, and the handshake threads, which leave it when their handshake ends.
pub(super) struct Handshakes {
    queue: Mutex<VecDeque<Entry>>,
    /// Most handshakes of one address ([`MAX_HANDSHAKES_PER_IP`] unless set).
    per_ip: usize,
    /// Threads still in their handshake, evicted or not (an evicted one leaves within
    /// microseconds, once its blocked read sees the shutdown).
    threads: AtomicUsize,
}

/// A handshake thread's place in the registry; leaving it (drop) removes its entry and counts
/// its thread out, however the thread ends.
pub(super) struct Slot {
    n: u64,
    registry: Arc<Handshakes>,
    evicted: Arc<AtomicBool>,
}

impl Slot {
    /// Whether this connection's handshake was cut short for a newer connection.
    pub(super) fn evicted(&self) -> bool {
        self.evicted.load(Ordering::SeqCst)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut q = self.registry.lock();
        if let Some(i) = q.iter().position(|e| e.n == self.n) {
            q.remove(i);
        }
        drop(q);
        self.registry.threads.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Default for Handshakes {
    fn default() -> Self {
        Self::with_per_ip(MAX_HANDSHAKES_PER_IP)
    }
}

impl Handshakes {
    /// A registry letting one address hold `per_ip` handshakes (the iperf3 port's: a
    /// monitoring host starts many iperf3 clients at once, each a handshake until its
    /// parameters are read).
    pub(super) fn with_per_ip(per_ip: usize) -> Self {
        Handshakes {
            queue: Mutex::default(),
            per_ip: per_ip.clamp(1, MAX_HANDSHAKES),
            threads: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes room for connection `n` from client `key` (cutting short the oldest handshake
    /// of `key` when it holds its per-address limit, and at the cap the oldest of the
    /// address holding the most; waiting, at most `wait`, for their threads to end) and
    /// registers it. `None` if its socket cannot be cloned for the registry (the caller
    /// closes it).
    pub(super) fn enter(
        self: &Arc<Self>,
        n: u64,
        stream: &TcpStream,
        key: IpAddr,
        wait: Duration,
    ) -> Option<Slot> {
        let clone = stream.try_clone().ok()?;
        {
            let mut q = self.lock();
            while q.iter().filter(|e| e.key == key).count() >= self.per_ip {
                evict(&mut q, key);
            }
            while q.len() >= MAX_HANDSHAKES {
                let Some(busiest) = busiest(&q) else { break };
                evict(&mut q, busiest);
            }
        }
        let deadline = Instant::now() + wait;
        while self.threads.load(Ordering::SeqCst) >= MAX_HANDSHAKES && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let evicted = Arc::new(AtomicBool::new(false));
        self.lock().push_back(Entry {
            n,
            key,
            stream: clone,
            evicted: evicted.clone(),
        });
        self.threads.fetch_add(1, Ordering::SeqCst);
        Some(Slot {
            n,
            registry: self.clone(),
            evicted,
        })
    }

    /// Cuts every handshake short (the server is stopping).
    pub(super) fn cut_all(&self) {
        let mut q = self.lock();
        while let Some(e) = q.pop_front() {
            e.evicted.store(true, Ordering::SeqCst);
            let _ = e.stream.shutdown(Shutdown::Both);
        }
    }

    /// Threads in their handshake now.
    #[cfg(test)]
    fn threads(&self) -> usize {
        self.threads.load(Ordering::SeqCst)
    }
}

/// The address holding the most handshakes (the one whose oldest is oldest, on a tie).
fn busiest(q: &VecDeque<Entry>) -> Option<IpAddr> {
    let mut held: HashMap<IpAddr, usize> = HashMap::new();
    for e in q {
        *held.entry(e.key).or_insert(0) += 1;
    }
    let most = held.values().copied().max()?;
    q.iter().find(|e| held[&e.key] == most).map(|e| e.key)
}

/// Cuts short the oldest handshake of `key`: its socket is shut down, so its thread's read
/// returns at once and the thread ends.
fn evict(q: &mut VecDeque<Entry>, key: IpAddr) {
    if let Some(i) = q.iter().position(|e| e.key == key) {
        if let Some(old) = q.remove(i) {
            old.evicted.store(true, Ordering::SeqCst);
            let _ = old.stream.shutdown(Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn the_oldest_handshake_is_cut_short_at_the_cap() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let reg = Arc::new(Handshakes::default());
        let mut clients = Vec::new();
        let mut slots = Vec::new();
        let mut threads = Vec::new();
        for n in 0..=MAX_HANDSHAKES as u64 {
            clients.push(TcpStream::connect(addr).unwrap());
            let (s, _) = l.accept().unwrap();
            // Every connection from an address of its own: the oldest overall goes.
            let key = IpAddr::from([10, 0, (n >> 8) as u8, n as u8]);
            let slot = reg.enter(n, &s, key, Duration::from_secs(5)).unwrap();
            if n == 0 {
                // The first handshake's thread: blocked reading until it is cut short.
                threads.push(std::thread::spawn(move || {
                    let mut s = s;
                    let mut b = [0u8; 1];
                    let got = s.read(&mut b).unwrap_or(0);
                    (got, slot.evicted())
                }));
            } else {
                slots.push((slot, s));
            }
        }
        let (got, evicted) = threads.pop().unwrap().join().unwrap();
        assert_eq!((got, evicted), (0, true), "the oldest was shut down");
        assert!(slots.iter().all(|(s, _)| !s.evicted()), "only the oldest");
        assert_eq!(reg.threads(), MAX_HANDSHAKES);
        drop(slots);
        assert_eq!(reg.threads(), 0);
        assert!(reg.lock().is_empty());
    }

    #[test]
    fn a_flood_from_one_address_cuts_short_only_its_own_handshakes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let reg = Arc::new(Handshakes::default());
        let (flood, other) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let mut held = Vec::new();
        let mut enter = |n: u64, key: IpAddr| {
            let c = TcpStream::connect(addr).unwrap();
            let (s, _) = l.accept().unwrap();
            let slot = reg.enter(n, &s, key, Duration::from_millis(1)).unwrap();
            held.push((slot, s, c));
        };
        // A legitimate client's handshake, then far more from one flooding address than
        // the cap: the flood keeps at most MAX_HANDSHAKES_PER_IP, the legitimate one stays.
        enter(0, other);
        for n in 1..=(2 * MAX_HANDSHAKES) as u64 {
            enter(n, flood);
        }
        let live: Vec<_> = held.iter().filter(|(s, _, _)| !s.evicted()).collect();
        assert_eq!(live.len(), 1 + MAX_HANDSHAKES_PER_IP);
        assert!(
            !held[0].0.evicted(),
            "the other address's handshake was never cut"
        );
        // At the cap the address holding the most gives way, not the oldest overall.
        let q = reg.lock();
        assert_eq!(
            q.iter().filter(|e| e.key == flood).count(),
            MAX_HANDSHAKES_PER_IP
        );
        assert_eq!(q.front().map(|e| e.key), Some(other));
        drop(q);
        let mut many: VecDeque<Entry> = VecDeque::new();
        for (i, key) in [other, flood, flood, other, flood].into_iter().enumerate() {
            many.push_back(Entry {
                n: i as u64,
                key,
                stream: TcpStream::connect(addr).unwrap(),
                evicted: Arc::new(AtomicBool::new(false)),
            });
        }
        assert_eq!(busiest(&many), Some(flood));
        evict(&mut many, flood);
        assert_eq!(many.iter().map(|e| e.n).collect::<Vec<_>>(), [0, 2, 3, 4]);
    }
}
