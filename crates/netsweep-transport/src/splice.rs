//! The `splice` api (`tcp`, `unix-stream`, stream receiver): each receive moves bytes
//! socket → pipe with splice(2), then pipe → /dev/null, so they never reach user space. What
//! is measured is the receive path without the copy to the application (the receiver cannot
//! check the bytes). One `recv` is two or more system calls; the calls counted are the
//! receives. Pingpong is refused (`Descriptor::check`): an echo needs the bytes.

use crate::basic::{BasicEndpoint, Conn};
use crate::sys;
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_proto::messages::GrantedKnobs;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// The pipe and the sink a splice receiver drains into.
#[derive(Debug)]
struct Sink {
    r: OwnedFd,
    w: OwnedFd,
    null: File,
    cap: usize,
}

/// Pipe size asked for (F_SETPIPE_SZ; capped by fs.pipe-max-size, 1 MiB by default).
const PIPE_SIZE: usize = 1 << 20;

/// Checks that a pipe (resized as a receiver's) and /dev/null are available for splice.
pub fn probe() -> io::Result<()> {
    sink().map(drop)
}

fn sink() -> io::Result<Sink> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    sys::cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })
        .map_err(|e| io::Error::new(e.kind(), format!("pipe2 for --api splice: {e}")))?;
    // SAFETY: fresh descriptors we own.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on our own pipe.
    let cap = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE as libc::c_int) };
    let cap = if cap > 0 {
        cap
    } else {
        // SAFETY: fcntl on our own pipe.
        unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETPIPE_SZ) }
    };
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(|e| {
            io::Error::new(e.kind(), format!("opening /dev/null for --api splice: {e}"))
        })?;
    Ok(Sink {
        r,
        w,
        null,
        cap: cap.max(4096) as usize,
    })
}

/// A stream endpoint whose receives are spliced to /dev/null.
#[derive(Debug)]
pub struct SpliceEndpoint {
    inner: BasicEndpoint,
    sink: Option<Sink>,
}

impl SpliceEndpoint {
    /// Wraps a connected stream socket: receives are spliced to /dev/null.
    pub fn new(conn: Conn) -> Self {
        let mut inner = BasicEndpoint::new(conn);
        inner.conn.granted.notes.push(
            "splice: the receiver moves data socket → pipe → /dev/null; it never reaches user space".into(),
        );
        Self { inner, sink: None }
    }

    #[cold]
    fn unprepared() -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "splice: prepare() was not called before recv (an engine bug)",
        )
    }
}

impl Endpoint for SpliceEndpoint {
    fn socket_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.inner.fd)
    }

    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.send(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(s) = self.sink.as_ref() else {
            return Err(Self::unprepared());
        };
        let want = buf.len().min(s.cap);
        // SAFETY: splice between descriptors we hold; null offsets (sockets and pipes).
        let n = sys::cvt_size(unsafe {
            libc::splice(
                self.inner.fd,
                std::ptr::null_mut(),
                s.w.as_raw_fd(),
                std::ptr::null_mut(),
                want,
                libc::SPLICE_F_MOVE,
            )
        })?;
        let mut left = n;
        while left > 0 {
            // SAFETY: as above.
            let m = sys::cvt_size(unsafe {
                libc::splice(
                    s.r.as_raw_fd(),
                    std::ptr::null_mut(),
                    s.null.as_raw_fd(),
                    std::ptr::null_mut(),
                    left,
                    libc::SPLICE_F_MOVE,
                )
            })?;
            if m == 0 {
                break;
            }
            left -= m;
        }
        Ok(n)
    }
    fn is_datagram(&self) -> bool {
        self.inner.is_datagram()
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_recv_timeout(timeout)
    }
    fn granted(&self) -> GrantedKnobs {
        self.inner.granted()
    }
    fn prepare(&mut self, _max_size: usize, _batch: usize) -> io::Result<()> {
        if self.sink.is_none() {
            self.sink = Some(sink()?);
        }
        Ok(())
    }
    fn stats(&mut self) -> EndpointStats {
        self.inner.stats()
    }
}
