//! The stack's own thread for the time the application is away. A user-space QUIC
//! connection moves only when someone turns it: data a send handed over, acknowledgements,
//! retransmissions and the peer's flow-control credit would wait for the endpoint's next
//! call (the last echo of a trial until the next trial). The kernel does this for TCP; here
//! a thread does once the application has left the connection alone for [`IDLE`], and
//! hands it back the moment a call starts (an eventfd wakes its wait). While the
//! application calls in a tight loop the thread only wakes every [`IDLE`] to look.

use super::driver::{wait, Driver};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the application must have made no call before the thread turns the connection.
pub const IDLE: Duration = Duration::from_millis(5);
/// The longest one wait of the thread (it rechecks whether it should stop).
const SLICE: Duration = Duration::from_millis(100);

/// The connection, shared by the application's calls and the thread.
#[derive(Debug)]
struct Shared {
    d: Mutex<Driver>,
    /// A call is under way or about to take the lock.
    wanted: AtomicBool,
    /// The thread holds (or is about to take) the lock.
    engaged: AtomicBool,
    /// When the last call ended, ns after `base`.
    left_at: AtomicU64,
    base: Instant,
    stop: AtomicBool,
    /// Written by a call to end the thread's wait.
    wake: OwnedFd,
    /// Why the thread stopped turning the connection, for the next call.
    failed: Mutex<Option<io::Error>>,
}

/// A connection turned by the application's calls, and by its own thread in between.
#[derive(Debug)]
pub struct Linger {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// The connection held by one call; dropping it hands the connection back.
#[derive(Debug)]
pub struct Held<'a> {
    guard: Option<MutexGuard<'a, Driver>>,
    shared: &'a Shared,
}

impl std::ops::Deref for Held<'_> {
    type Target = Driver;
    fn deref(&self) -> &Driver {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Driver {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.guard = None;
        let s = self.shared;
        s.left_at.store(s.base.elapsed().as_nanos() as u64, SeqCst);
        s.wanted.store(false, SeqCst);
    }
}

impl Linger {
    /// Starts the thread beside `d`.
    pub fn new(d: Driver) -> io::Result<Self> {
        // SAFETY: eventfd(2) with valid flags; a non-negative result is a new descriptor.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let shared = Arc::new(Shared {
            d: Mutex::new(d),
            wanted: AtomicBool::new(false),
            engaged: AtomicBool::new(false),
            left_at: AtomicU64::new(0),
            base: Instant::now(),
            stop: AtomicBool::new(false),
            // SAFETY: `fd` is a new descriptor no one else owns.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            failed: Mutex::new(None),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("quic-linger".into())
            .spawn(move || run(&s))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Takes the connection for one call (from the thread, at once, if it has it), with
    /// the error that stopped the thread, if one did.
    pub fn hold(&self) -> io::Result<Held<'_>> {
        let s = &*self.shared;
        s.wanted.store(true, SeqCst);
        if s.engaged.load(SeqCst) {
            poke(s.wake.as_raw_fd());
        }
        let guard = s.d.lock().unwrap_or_else(|p| p.into_inner());
        let held = Held {
            guard: Some(guard),
            shared: s,
        };
        if let Some(e) = s.failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        Ok(held)
    }
}

impl Drop for Linger {
    fn drop(&mut self) {
        self.shared.stop.store(true, SeqCst);
        poke(self.shared.wake.as_raw_fd());
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn poke(fd: RawFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: an 8-byte write from a valid buffer to an eventfd.
    let _ = unsafe { libc::write(fd, one.as_ptr().cast(), one.len()) };
}

fn drain(fd: RawFd) {
    let mut b = [0u8; 8];
    // SAFETY: an 8-byte read into a valid buffer from a non-blocking eventfd.
    let _ = unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) };
}

/// The thread: every [`IDLE`], when no call is under way and none ended within it, turns
/// the connection until a call wants it back.
fn run(s: &Shared) {
    let idle = IDLE.as_nanos() as u64;
    while !s.stop.load(SeqCst) {
        std::thread::park_timeout(IDLE);
        if s.stop.load(SeqCst) || s.wanted.load(SeqCst) {
            continue;
        }
        if s.base.elapsed().as_nanos() as u64 - s.left_at.load(SeqCst) < idle {
            continue;
        }
        s.engaged.store(true, SeqCst);
        // A call that started before `engaged` was set is seen here; one after it pokes.
        if s.wanted.load(SeqCst) {
            s.engaged.store(false, SeqCst);
            continue;
        }
        if let Ok(mut d) = s.d.try_lock() {
            if let Err(e) = turn_while_away(s, &mut d) {
                *s.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                s.engaged.store(false, SeqCst);
                return;
            }
        }
        s.engaged.store(false, SeqCst);
    }
}

fn turn_while_away(s: &Shared, d: &mut Driver) -> io::Result<()> {
    let wake = s.wake.as_raw_fd();
    loop {
        if s.stop.load(SeqCst) || s.wanted.load(SeqCst) {
            return Ok(());
        }
        d.flush()?;
        let until = Instant::now() + SLICE;
        let at = d.conn.poll_timeout().map_or(until, |t| t.min(until));
        let (_, poked) = wait(
            d.sock.as_raw_fd(),
            Some(wake),
            at.saturating_duration_since(Instant::now()),
        )?;
        if poked {
            drain(wake);
            return Ok(());
        }
        d.poll_input()?;
    }
}
