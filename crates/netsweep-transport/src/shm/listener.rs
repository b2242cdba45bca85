//! The `shm` handshake: the server makes and maps the file and waits for the client's
//! cookie; the client maps it, presents the cookie and waits for the verdict.

use super::endpoint::ShmEndpoint;
use super::layout::*;
use super::{capacity, notes};
use netsweep_endpoint::{DataListener, Endpoint};
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs, SessionSetup};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The server's shared-memory file, waiting for the client's cookie.
#[derive(Debug)]
pub struct ShmListener {
    pub(super) path: PathBuf,
    pub(super) map: Option<Mapping>,
    pub(super) capacity: u64,
    pub(super) timeout: Duration,
    pub(super) notes: Vec<String>,
}

impl ShmListener {
    /// Creates and maps the file, sized for two rings of the server's capacity.
    pub fn open(setup: &SessionSetup) -> io::Result<Self> {
        let knobs = &setup.server_knobs;
        let capacity = capacity(knobs);
        let r = netsweep_endpoint::random_u64()?;
        let path = shm_dir().join(format!("netsweep-shm-{}-{r:016x}", std::process::id()));
        let fd = open_file(&path, true)?;
        let len = HEADER + 2 * capacity as usize;
        // Reserved, not only sized: on a full tmpfs ftruncate(2) succeeds and the first store to
        // a missing page raises SIGBUS, killing the whole server; posix_fallocate(3) refuses
        // with ENOSPC instead, here, where it can be told to the client.
        // SAFETY: allocating the file we just created; it returns an errno, sets none.
        let rc = unsafe { libc::posix_fallocate(fd, 0, len as libc::off_t) };
        let mapped = if rc != 0 {
            Err(io::Error::from_raw_os_error(rc))
        } else {
            Mapping::map(fd, len)
        };
        close(fd);
        let map = match mapped {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(io::Error::new(
                    e.kind(),
                    format!("making {} ({len} bytes): {e}", path.display()),
                ));
            }
        };
        let h = map.header();
        h.capacity.store(capacity, Ordering::Relaxed);
        h.server_pid.store(std::process::id(), Ordering::Relaxed);
        h.state.store(ST_WAITING, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::SeqCst);
        // The client's timeout, within the bounds the server puts on every session's.
        let timeout = Duration::from_nanos(setup.timeout_ns.clamp(1_000_000, 300_000_000_000));
        Ok(Self {
            path,
            map: Some(map),
            capacity,
            timeout,
            notes: notes(knobs, true),
        })
    }
}

impl Drop for ShmListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl DataListener for ShmListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint {
            port: 0,
            path: Some(self.path.to_string_lossy().into_owned()),
            mac: None,
            tls_fingerprint: None,
        }
    }

    fn accept(&mut self, want: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let map = self
            .map
            .take()
            .ok_or_else(|| io::Error::other("the shm data file was already handed out"))?;
        let deadline = Instant::now() + timeout;
        let h = map.header();
        loop {
            let ev = h.hs_ev.load(Ordering::SeqCst);
            if h.state.load(Ordering::SeqCst) == ST_CLAIMED {
                if h.cookie.load(Ordering::SeqCst) == want {
                    h.state.store(ST_ACCEPTED, Ordering::SeqCst);
                    signal(&h.hs_ev);
                    // Both sides hold the mapping now: the name is no longer needed.
                    let _ = std::fs::remove_file(&self.path);
                    let granted = GrantedKnobs {
                        sndbuf: Some(self.capacity),
                        rcvbuf: Some(self.capacity),
                        notes: self.notes.clone(),
                        ..Default::default()
                    };
                    let peer = h.client_pid.load(Ordering::SeqCst);
                    return Ok(Box::new(ShmEndpoint::new(
                        map,
                        self.capacity,
                        SERVER,
                        peer,
                        self.timeout,
                        granted,
                    )?));
                }
                // A stranger: turn it away, then let it leave before waiting again.
                h.state.store(ST_REJECTED, Ordering::SeqCst);
                signal(&h.hs_ev);
                let until = Instant::now() + Duration::from_millis(200);
                while h.state.load(Ordering::SeqCst) != ST_LEFT && Instant::now() < until {
                    let ev = h.hs_ev.load(Ordering::SeqCst);
                    if h.state.load(Ordering::SeqCst) == ST_LEFT {
                        break;
                    }
                    futex_wait(&h.hs_ev, ev, Duration::from_millis(20));
                }
                h.cookie.store(0, Ordering::SeqCst);
                h.state.store(ST_WAITING, Ordering::SeqCst);
                signal(&h.hs_ev);
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.map = Some(map);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not bind to the shm data file in time",
                ));
            }
            futex_wait(&h.hs_ev, ev, left.min(SLICE));
        }
    }
}

/// Connects the client's `shm` data path: maps the server's file, presents the cookie,
/// waits for the server's verdict.
pub fn connect(
    path: &Path,
    knobs: &Knobs,
    cookie: u64,
    timeout: Duration,
) -> io::Result<Box<dyn Endpoint>> {
    let fd = open_file(path, false)?;
    // SAFETY: fstat fills a stat buffer for an open descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `st` is live for the call.
    let rc = unsafe { libc::fstat(fd, &mut st) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        close(fd);
        return Err(e);
    }
    let len = st.st_size.max(0) as usize;
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is not a netsweep shm data file: check that client and server are one \
                 netsweep version",
                path.display()
            ),
        )
    };
    if len < HEADER {
        close(fd);
        return Err(bad());
    }
    let mapped = Mapping::map(fd, len);
    close(fd);
    let map = mapped?;
    let h = map.header();
    let cap = h.capacity.load(Ordering::SeqCst);
    if h.magic.load(Ordering::SeqCst) != MAGIC
        || !cap.is_power_of_two()
        || HEADER as u64 + 2 * cap != len as u64
    {
        return Err(bad());
    }
    let deadline = Instant::now() + timeout;
    // Claim the file; a rejected stranger may still be leaving it.
    loop {
        let ev = h.hs_ev.load(Ordering::SeqCst);
        match h
            .state
            .compare_exchange(ST_WAITING, ST_CLAIMING, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => break,
            Err(ST_REJECTED | ST_LEFT) if Instant::now() < deadline => {
                futex_wait(&h.hs_ev, ev, Duration::from_millis(20));
            }
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("another client is already bound to {}", path.display()),
                ))
            }
        }
    }
    h.cookie.store(cookie, Ordering::SeqCst);
    h.client_pid.store(std::process::id(), Ordering::SeqCst);
    h.state.store(ST_CLAIMED, Ordering::SeqCst);
    signal(&h.hs_ev);
    loop {
        let ev = h.hs_ev.load(Ordering::SeqCst);
        match h.state.load(Ordering::SeqCst) {
            ST_ACCEPTED => break,
            ST_REJECTED => {
                h.state.store(ST_LEFT, Ordering::SeqCst);
                signal(&h.hs_ev);
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the server turned this client's cookie away (another session owns the shm file)",
                ));
            }
            _ => {}
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // Should the server accept after all, its endpoint sees this client closed.
            h.closed[CLIENT].store(1, Ordering::SeqCst);
            signal(&h.hs_ev);
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the server did not accept the shm data path in time",
            ));
        }
        if pid_gone(h.server_pid.load(Ordering::SeqCst)) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "the shm server's process is gone",
            ));
        }
        futex_wait(&h.hs_ev, ev, left.min(SLICE));
    }
    let granted = GrantedKnobs {
        sndbuf: Some(cap),
        rcvbuf: Some(cap),
        notes: notes(knobs, false),
        ..Default::default()
    };
    let peer = h.server_pid.load(Ordering::SeqCst);
    Ok(Box::new(ShmEndpoint::new(
        map, cap, CLIENT, peer, timeout, granted,
    )?))
}
