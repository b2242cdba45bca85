//! The epoll instance of one flows data thread: its flows' sockets registered level-triggered
//! under their index in the thread, and a buffer of ready events allocated once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Readable: the flow has data (or its peer closed).
pub(super) const IN: u32 = libc::EPOLLIN as u32;
/// Writable: the flow's send buffer has room again.
pub(super) const OUT: u32 = libc::EPOLLOUT as u32;

/// One thread's epoll instance and its event buffer.
pub(super) struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    /// An epoll instance whose waits return up to `capacity` events.
    pub(super) fn new(capacity: usize) -> io::Result<Self> {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is a new descriptor
        // that we own from here on.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by epoll_create1 and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.clamp(1, 1024)],
        })
    }

    fn ctl(&self, op: libc::c_int, sock: RawFd, index: usize, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events,
            u64: index as u64,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, sock, &mut ev) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Registers `sock` as flow `index`, waiting for `events` (level-triggered).
    pub(super) fn add(&self, sock: RawFd, index: usize, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, sock, index, events)
    }

    /// Takes `sock` out of the set.
    pub(super) fn remove(&self, sock: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, sock, 0, 0)
    }

    /// Changes what flow `index` (on `sock`) waits for.
    #[inline]
    pub(super) fn modify(&self, sock: RawFd, index: usize, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, sock, index, events)
    }

    /// Waits up to `timeout_ms` for ready flows; returns how many (0 on timeout or a
    /// signal). Read them with [`ready`](Self::ready).
    #[inline]
    pub(super) fn wait(&mut self, timeout_ms: i32) -> io::Result<usize> {
        // SAFETY: `events` holds `len` initialised epoll_event slots the kernel may fill.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }

    /// Waits up to `timeout_ns` (0: a look) for ready flows, to the nanosecond where the
    /// kernel has epoll_pwait2 (5.11), else rounded up to the millisecond.
    #[inline]
    pub(super) fn wait_ns(&mut self, timeout_ns: u64) -> io::Result<usize> {
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: `events` holds `len` initialised epoll_event slots the kernel may fill;
        // `ts` lives for the call; no signal mask.
        let n = unsafe {
            libc::epoll_pwait2(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                &ts,
                std::ptr::null(),
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => Ok(0),
            Some(libc::ENOSYS) => {
                self.wait(timeout_ns.div_ceil(1_000_000).min(i32::MAX as u64) as i32)
            }
            _ => Err(e),
        }
    }

    /// The flow index of ready event `k` of the last wait.
    #[inline]
    pub(super) fn ready(&self, k: usize) -> usize {
        self.events[k].u64 as usize
    }
}

/// Makes `sock` blocking (`on`), with send and receive timeouts of `timeout_ms` (0: none),
/// or non-blocking again (`on` false; give 0 to clear the timeouts).
pub(super) fn set_blocking(sock: RawFd, on: bool, timeout_ms: i32) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: (timeout_ms / 1000) as libc::time_t,
        tv_usec: ((timeout_ms % 1000) * 1000) as libc::suseconds_t,
    };
    // SAFETY: fcntl and setsockopt on a descriptor the caller's endpoint owns; `tv` lives
    // for the calls and its size is passed.
    unsafe {
        let flags = libc::fcntl(sock, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let flags = if on {
            flags & !libc::O_NONBLOCK
        } else {
            flags | libc::O_NONBLOCK
        };
        if libc::fcntl(sock, libc::F_SETFL, flags) < 0 {
            return Err(io::Error::last_os_error());
        }
        for opt in [libc::SO_SNDTIMEO, libc::SO_RCVTIMEO] {
            let rc = libc::setsockopt(
                sock,
                libc::SOL_SOCKET,
                opt,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Makes `sock` non-blocking (outside timed loops: the flows' threads wait in epoll).
pub(super) fn set_nonblocking(sock: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller's endpoint owns; no pointers.
    unsafe {
        let flags = libc::fcntl(sock, libc::F_GETFL);
        if flags < 0 || libc::fcntl(sock, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
