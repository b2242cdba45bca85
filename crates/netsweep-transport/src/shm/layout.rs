//! The shared file of `shm`: its header (magic, handshake state, one control block per ring
//! with head and tail on their own cache lines), the futex helpers, and the mapping.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// "NSWSHM01".
pub(super) const MAGIC: u64 = 0x4e53_5753_484d_3031;
/// Bytes before the first ring's data.
pub(super) const HEADER: usize = 4096;
/// How long a waiting side spins (busy) before it starts yielding the CPU between checks.
pub(super) const SPIN_PURE: Duration = Duration::from_micros(2);
/// How long a waiting side spins and yields before it sleeps on the futex.
pub(super) const SPIN: Duration = Duration::from_micros(50);
/// Bytes a send copies before it publishes them to the receiver.
pub(super) const CHUNK: usize = 64 << 10;
/// Longest single futex sleep: bounds how late a dead peer process is noticed.
pub(super) const SLICE: Duration = Duration::from_millis(100);

/// Handshake states in the header.
pub(super) const ST_WAITING: u32 = 0;
pub(super) const ST_CLAIMED: u32 = 1;
pub(super) const ST_ACCEPTED: u32 = 2;
pub(super) const ST_REJECTED: u32 = 3;
/// A rejected client has let go.
pub(super) const ST_LEFT: u32 = 4;
/// A client is writing its cookie.
pub(super) const ST_CLAIMING: u32 = 5;

/// Index of each side in `Header::closed` and of the ring it sends on.
pub(super) const SERVER: usize = 0;
pub(super) const CLIENT: usize = 1;

/// The producer's cache line of one ring.
#[repr(C, align(128))]
pub(super) struct TailLine {
    /// Bytes ever written (the producer's position).
    pub(super) pos: AtomicU64,
    /// Bumped when data is published to a sleeping consumer (its futex word).
    pub(super) ev: AtomicU32,
    /// Set by the consumer before it sleeps.
    pub(super) waiting: AtomicU32,
}

/// The consumer's cache line of one ring.
#[repr(C, align(128))]
pub(super) struct HeadLine {
    /// Bytes ever read (the consumer's position).
    pub(super) pos: AtomicU64,
    /// Bumped when space is freed for a sleeping producer (its futex word).
    pub(super) ev: AtomicU32,
    /// Set by the producer before it sleeps.
    pub(super) waiting: AtomicU32,
}

#[repr(C, align(128))]
pub(super) struct CpuLine(pub(super) [AtomicU32; 2]);

#[repr(C)]
pub(super) struct RingCtl {
    pub(super) tail: TailLine,
    pub(super) head: HeadLine,
}

/// The shared header at the start of the file. Ring 0 carries client → server, ring 1
/// server → client.
#[repr(C)]
pub(super) struct Header {
    pub(super) magic: AtomicU64,
    pub(super) capacity: AtomicU64,
    pub(super) server_pid: AtomicU32,
    pub(super) client_pid: AtomicU32,
    pub(super) cookie: AtomicU64,
    pub(super) state: AtomicU32,
    /// Futex word bumped on every handshake change.
    pub(super) hs_ev: AtomicU32,
    /// Set by each side (SERVER, CLIENT) when its endpoint is dropped.
    pub(super) closed: [AtomicU32; 2],
    pub(super) _pad: [u8; 80],
    /// The CPU each side last waited on (+1; 0 unknown), on a line of its own: a waiter
    /// whose peer shares its CPU yields at once instead of spinning.
    pub(super) cpu: CpuLine,
    pub(super) rings: [RingCtl; 2],
}

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER);

pub(super) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
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

pub(super) fn futex_wake(word: &AtomicU32) {
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
pub(super) fn signal(word: &AtomicU32) {
    word.fetch_add(1, Ordering::SeqCst);
    futex_wake(word);
}

/// True when process `pid` is known to be gone.
pub(super) fn pid_gone(pid: u32) -> bool {
    if pid == 0 || pid == std::process::id() {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// The whole file mapped into this process.
pub(super) struct Mapping {
    pub(super) base: *mut u8,
    pub(super) len: usize,
}

impl Mapping {
    pub(super) fn map(fd: libc::c_int, len: usize) -> io::Result<Self> {
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

    pub(super) fn header(&self) -> &Header {
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

pub(super) fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} contains a NUL byte", p.display()),
        )
    })
}

/// Opens `path` (creating it exclusively with mode 0600 when `create`).
pub(super) fn open_file(path: &Path, create: bool) -> io::Result<libc::c_int> {
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

pub(super) fn close(fd: libc::c_int) {
    // SAFETY: closing a descriptor this module opened, once.
    unsafe { libc::close(fd) };
}

/// Where the server makes its file: /dev/shm when it is there, else the temporary directory.
pub(super) fn shm_dir() -> PathBuf {
    let d = Path::new("/dev/shm");
    if d.is_dir() {
        d.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mapping({:p}, {} bytes)", self.base, self.len)
    }
}

// SAFETY: the mapping is plain shared memory accessed through atomics and raw copies
// guarded by the ring protocol; nothing in it is tied to the thread that mapped it.
unsafe impl Send for Mapping {}
