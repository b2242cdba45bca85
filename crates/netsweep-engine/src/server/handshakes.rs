//! The connections in their handshake, oldest first, so that at the cap the oldest can be cut
//! short for a newer one: a flood of silent or slow connections then delays a legitimate
//! client by nothing (its handshake takes a round trip or two), where waiting in the listen
//! backlog for a silent one's handshake timeout would delay it by that timeout — as long as
//! a client's own timeout, so under load the client gave up first.

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most connections in their handshake at once. A newer connection beyond it cuts the oldest
/// handshake short (its socket is shut down, its thread ends at once), so a flood of silent
/// connections can hold neither threads nor the listen backlog.
pub const MAX_HANDSHAKES: usize = 64;

/// One connection in its handshake.
struct Entry {
    n: u64,
    stream: TcpStream,
    evicted: Arc<AtomicBool>,
}

/// The registry of connections in their handshake; shared by the accept loop, which adds and
/// evicts, and the handshake threads, which leave it when their handshake ends.
#[derive(Default)]
pub(super) struct Handshakes {
    queue: Mutex<VecDeque<Entry>>,
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

impl Handshakes {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes room for connection `n` (evicting the oldest handshakes while at the cap and
    /// waiting, at most `wait`, for their threads to end) and registers it. `None` if its
    /// socket cannot be cloned for the registry (the caller closes it).
    pub(super) fn enter(
        self: &Arc<Self>,
        n: u64,
        stream: &TcpStream,
        wait: Duration,
    ) -> Option<Slot> {
        let clone = stream.try_clone().ok()?;
        {
            let mut q = self.lock();
            while q.len() >= MAX_HANDSHAKES {
                let Some(old) = q.pop_front() else { break };
                old.evicted.store(true, Ordering::SeqCst);
                let _ = old.stream.shutdown(Shutdown::Both);
            }
        }
        let deadline = Instant::now() + wait;
        while self.threads.load(Ordering::SeqCst) >= MAX_HANDSHAKES && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let evicted = Arc::new(AtomicBool::new(false));
        self.lock().push_back(Entry {
            n,
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

    /// Threads in their handshake now.
    #[cfg(test)]
    fn threads(&self) -> usize {
        self.threads.load(Ordering::SeqCst)
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
            let slot = reg.enter(n, &s, Duration::from_secs(5)).unwrap();
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
}
