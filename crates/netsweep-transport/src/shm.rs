//! The `shm` transport: two endpoints on one host exchanging bytes through a shared-memory
//! file, one single-producer/single-consumer byte ring per direction. No kernel is on the
//! data path: each message is copied into the ring by the sender and out of it by the
//! receiver (two memcpys), so this is the in-host copy ceiling that network stacks are
//! compared against (NetPIPE's memcpy module).
//!
//! The server creates `/dev/shm/netsweep-shm-<pid>-<random>` (mode 0600; the temporary
//! directory where there is no /dev/shm) and names it in `DataEndpoint.path`; the client
//! maps it, writes the session cookie and its pid into the header and waits for the
//! server's verdict; the server unlinks the file once the client is bound. Ring capacity is
//! the server's `--sndbuf` rounded up to a power of two (256 KiB by default) for both
//! directions.
//!
//! Semantics are a byte stream (`is_datagram` false, message boundaries not kept): a send
//! copies what fits and may return less, so messages larger than the ring are streamed
//! through it in pieces; a send publishes every 64 KiB so the receiver copies out while the
//! sender copies in. Head and tail counters sit on their own cache lines. A waiting side
//! spins for 2 µs, then spins with sched_yield (so a peer sharing its CPU can run) up to
//! 50 µs, then sleeps on a futex in slices of at most 100 ms,
//! so receive timeouts hold, and a peer is noticed gone either by the flag its endpoint
//! sets when dropped (its futex wake ends any wait at once) or, if its process died
//! without dropping, by its pid no longer existing (checked after each slice).
//!
//! The other process is not trusted: every position it writes is checked before use (a
//! consumer position between the last one seen and the producer's; a producer position at
//! most a ring ahead of the consumer's), and one out of range is an error, never a copy
//! outside the ring. A side going to sleep sets its `waiting` flag, then a SeqCst fence,
//! then re-checks the position; the peer stores the position (SeqCst) and then loads the
//! flag (SeqCst), so one of them always sees the other and no wake-up is lost.

use netsweep_core::endpoint::{DataListener, Endpoint};
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs, Knobs, SessionSetup};
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Ring capacity when the server's `--sndbuf` does not say: small enough to stay in the
/// caches (4 MiB rings streamed 30-40% slower here), large enough for four 64 KiB chunks.
pub const DEFAULT_CAPACITY: u64 = 256 << 10;
/// Smallest and largest ring capacity.
pub const MIN_CAPACITY: u64 = 4096;
pub const MAX_CAPACITY: u64 = 1 << 30;
/// "NSWSHM01".
const MAGIC: u64 = 0x4e53_5753_484d_3031;
/// Bytes before the first ring's data.
const HEADER: usize = 4096;
/// How long a waiting side spins (busy) before it starts yielding the CPU between checks.
const SPIN_PURE: Duration = Duration::from_micros(2);
/// How long a waiting side spins and yields before it sleeps on the futex.
const SPIN: Duration = Duration::from_micros(50);
/// Bytes a send copies before it publishes them to the receiver.
const CHUNK: usize = 64 << 10;
/// Longest single futex sleep: bounds how late a dead peer process is noticed.
const SLICE: Duration = Duration::from_millis(100);

/// Handshake states in the header.
const ST_WAITING: u32 = 0;
const ST_CLAIMED: u32 = 1;
const ST_ACCEPTED: u32 = 2;
const ST_REJECTED: u32 = 3;
/// A rejected client has let go.
const ST_LEFT: u32 = 4;
/// A client is writing its cookie.
const ST_CLAIMING: u32 = 5;

/// Index of each side in `Header::closed` and of the ring it sends on.
const SERVER: usize = 0;
const CLIENT: usize = 1;

/// The producer's cache line of one ring.
#[repr(C, align(128))]
struct TailLine {
    /// Bytes ever written (the producer's position).
    pos: AtomicU64,
    /// Bumped when data is published to a sleeping consumer (its futex word).
    ev: AtomicU32,
    /// Set by the consumer before it sleeps.
    waiting: AtomicU32,
}

/// The consumer's cache line of one ring.
#[repr(C, align(128))]
struct HeadLine {
    /// Bytes ever read (the consumer's position).
    pos: AtomicU64,
    /// Bumped when space is freed for a sleeping producer (its futex word).
    ev: AtomicU32,
    /// Set by the producer before it sleeps.
    waiting: AtomicU32,
}

#[repr(C, align(128))]
struct CpuLine([AtomicU32; 2]);

#[repr(C)]
struct RingCtl {
    tail: TailLine,
    head: HeadLine,
}

/// The shared header at the start of the file. Ring 0 carries client → server, ring 1
/// server → client.
#[repr(C)]
struct Header {
    magic: AtomicU64,
    capacity: AtomicU64,
    server_pid: AtomicU32,
    client_pid: AtomicU32,
    cookie: AtomicU64,
    state: AtomicU32,
    /// Futex word bumped on every handshake change.
    hs_ev: AtomicU32,
    /// Set by each side (SERVER, CLIENT) when its endpoint is dropped.
    closed: [AtomicU32; 2],
    _pad: [u8; 80],
    /// The CPU each side last waited on (+1; 0 unknown), on a line of its own: a waiter
    /// whose peer shares its CPU yields at once instead of spinning.
    cpu: CpuLine,
    rings: [RingCtl; 2],
}

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER);

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a live, aligned 32-bit word in a shared mapping (hence no
    // FUTEX_PRIVATE_FLAG); the kernel only reads it and `ts`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned 32-bit word; FUTEX_WAKE only uses its address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Bumps a futex word and wakes its sleepers.
fn signal(word: &AtomicU32) {
    word.fetch_add(1, Ordering::SeqCst);
    futex_wake(word);
}

/// True when process `pid` is known to be gone.
fn pid_gone(pid: u32) -> bool {
    if pid == 0 || pid == std::process::id() {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// The whole file mapped into this process.
struct Mapping {
    base: *mut u8,
    len: usize,
}

impl Mapping {
    fn map(fd: libc::c_int, len: usize) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping of `len` bytes of an open file; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "mapping {len} bytes of shared memory: {e}: lower --sndbuf (the ring size) \
                     or free memory in /dev/shm"
                ),
            ));
        }
        Ok(Self {
            base: p.cast(),
            len,
        })
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is page-aligned, at least HEADER bytes, and Header is made of
        // atomics and padding (any bit pattern is valid; all access is atomic).
        unsafe { &*self.base.cast::<Header>() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped, once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} contains a NUL byte", p.display()),
        )
    })
}

/// Opens `path` (creating it exclusively with mode 0600 when `create`).
fn open_file(path: &Path, create: bool) -> io::Result<libc::c_int> {
    let c = cstr(path)?;
    let flags = libc::O_RDWR
        | libc::O_CLOEXEC
        | if create {
            libc::O_CREAT | libc::O_EXCL
        } else {
            0
        };
    // SAFETY: `c` is a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        let fix = match e.kind() {
            io::ErrorKind::NotFound => {
                ": the shm transport needs client and server on one host (and the server's \
                 session still open)"
            }
            io::ErrorKind::PermissionDenied => {
                ": the file is private to the server's user: run client and server as one user"
            }
            _ => "",
        };
        return Err(io::Error::new(
            e.kind(),
            format!("opening {}: {e}{fix}", path.display()),
        ));
    }
    Ok(fd)
}

fn close(fd: libc::c_int) {
    // SAFETY: closing a descriptor this module opened, once.
    unsafe { libc::close(fd) };
}

/// Where the server makes its file: /dev/shm when it is there, else the temporary directory.
fn shm_dir() -> PathBuf {
    let d = Path::new("/dev/shm");
    if d.is_dir() {
        d.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The ring capacity for the server's knobs.
pub fn capacity(knobs: &Knobs) -> u64 {
    knobs
        .sndbuf
        .unwrap_or(DEFAULT_CAPACITY)
        .clamp(MIN_CAPACITY, MAX_CAPACITY)
        .next_power_of_two()
}

/// Notes for knobs that mean nothing on shared memory.
fn notes(knobs: &Knobs, server: bool) -> Vec<String> {
    let mut v = Vec::new();
    let mut na = |set: bool, name: &str| {
        if set {
            v.push(format!(
                "{name} does not apply to shm: no socket is on the data path"
            ));
        }
    };
    na(knobs.nodelay.is_some(), "nodelay");
    na(knobs.congestion_control.is_some(), "cc");
    na(knobs.tos.is_some(), "tos");
    na(knobs.priority.is_some(), "priority");
    na(knobs.no_check.is_some(), "no-check");
    na(knobs.busy_poll.is_some(), "busy-poll");
    na(knobs.pmtu.is_some(), "pmtu");
    na(knobs.interface.is_some(), "interface");
    if knobs.rcvbuf.is_some() {
        v.push(
            "rcvbuf does not apply to shm: both rings are sized by the server's --sndbuf".into(),
        );
    }
    if !server && knobs.sndbuf.is_some() {
        v.push(
            "the client's sndbuf does not apply to shm: both rings are sized by the server's \
             --sndbuf (use --sndbuf C,S)"
                .into(),
        );
    }
    v
}

/// The server's shared-memory file, waiting for the client's cookie.
#[derive(Debug)]
pub struct ShmListener {
    path: PathBuf,
    map: Option<Mapping>,
    capacity: u64,
    timeout: Duration,
    notes: Vec<String>,
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mapping({:p}, {} bytes)", self.base, self.len)
    }
}

// SAFETY: the mapping is plain shared memory accessed through atomics and raw copies
// guarded by the ring protocol; nothing in it is tied to the thread that mapped it.
unsafe impl Send for Mapping {}

impl ShmListener {
    /// Creates and maps the file, sized for two rings of the server's capacity.
    pub fn open(setup: &SessionSetup) -> io::Result<Self> {
        let knobs = &setup.server_knobs;
        let capacity = capacity(knobs);
        let r = netsweep_core::server::random_u64();
        let path = shm_dir().join(format!("netsweep-shm-{}-{r:016x}", std::process::id()));
        let fd = open_file(&path, true)?;
        let len = HEADER + 2 * capacity as usize;
        // SAFETY: sizing the file we just created.
        let rc = unsafe { libc::ftruncate(fd, len as libc::off_t) };
        let mapped = if rc != 0 {
            Err(io::Error::last_os_error())
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
        let timeout = Duration::from_nanos(setup.timeout_ns.max(1_000_000));
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

/// Checks that a shared-memory file can be made and mapped here.
pub fn probe() -> Result<(), String> {
    let setup = SessionSetup {
        transport: "shm".into(),
        server_knobs: Knobs {
            sndbuf: Some(MIN_CAPACITY),
            ..Default::default()
        },
        timeout_ns: 1_000_000_000,
        ..Default::default()
    };
    ShmListener::open(&setup)
        .map(drop)
        .map_err(|e| format!("cannot make a shared-memory ring: {e}"))
}

/// The peer wrote something impossible into the shared header.
#[cold]
fn corrupt(what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "the shm peer left the shared ring inconsistent ({what}): its process is not \
             netsweep or its memory is corrupt; restart both sides"
        ),
    )
}

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
    fn new(
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

    fn as_dyn(&mut self) -> &mut dyn Endpoint {
        self
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

#[cfg(test)]
#[path = "shm_tests.rs"]
mod tests;
