//! The `sendfile` api (`tcp`, `mptcp`, client side): each send is a sendfile(2) from a memory
//! file (memfd) that `prepare()` fills with the bytes a message buffer holds (byte i = i % 251,
//! as `MessageBuffer::new` writes them). The caller's buffer is not read: what is measured is
//! the page-cache → socket path without the user-space copy. A partial send continues from
//! the matching file offset. The server's pingpong echo keeps plain send(2): it must echo the
//! bytes it received.

use crate::basic::{BasicEndpoint, Conn};
use crate::sys;
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_proto::messages::GrantedKnobs;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Duration;

/// An endpoint whose sends come from a memfd through sendfile(2).
#[derive(Debug)]
pub struct SendfileEndpoint {
    inner: BasicEndpoint,
    file: Option<File>,
    file_len: usize,
    /// Length of the message being sent, and bytes of it still to go.
    msg_len: usize,
    remaining: usize,
}

/// Creates a memfd holding `len` pattern bytes.
pub fn pattern_file(len: usize) -> io::Result<File> {
    // SAFETY: a NUL-terminated name and valid flags.
    let fd = sys::cvt(unsafe {
        libc::memfd_create(c"netsweep-sendfile".as_ptr(), libc::MFD_CLOEXEC)
    })
    .map_err(|e| io::Error::new(e.kind(), format!("memfd_create for --api sendfile: {e}")))?;
    // SAFETY: `fd` is a fresh descriptor we own.
    let mut f = unsafe { File::from_raw_fd(fd) };
    let chunk: Vec<u8> = (0..251u32 * 256).map(|i| (i % 251) as u8).collect();
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len());
        f.write_all(&chunk[..n])?;
        left -= n;
    }
    Ok(f)
}

impl SendfileEndpoint {
    /// Wraps a connected socket: sends go through sendfile(2) from a memory file.
    pub fn new(conn: Conn) -> Self {
        let mut inner = BasicEndpoint::new(conn);
        inner.conn.granted.notes.push(
            "sendfile: the client's messages are sent with sendfile(2) from a memfd holding the message pattern"
                .into(),
        );
        Self {
            inner,
            file: None,
            file_len: 0,
            msg_len: 0,
            remaining: 0,
        }
    }

    #[cold]
    fn too_big(&self, len: usize) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "sendfile: a {len}-byte message is larger than the {}-byte file prepare() made (an engine bug: call prepare(max_size, batch) first)",
                self.file_len
            ),
        )
    }
}

impl Endpoint for SendfileEndpoint {
    fn socket_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.inner.fd)
    }

    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let off = if self.remaining == buf.len() {
            self.msg_len - self.remaining
        } else {
            self.msg_len = buf.len();
            0
        };
        let Some(f) = self.file.as_ref() else {
            return Err(self.too_big(buf.len()));
        };
        if off + buf.len() > self.file_len {
            return Err(self.too_big(off + buf.len()));
        }
        let mut o = off as libc::off_t;
        // SAFETY: both descriptors are open; `o` is a live offset the kernel advances.
        let rc = unsafe { libc::sendfile(self.inner.fd, f.as_raw_fd(), &mut o, buf.len()) };
        let n = sys::cvt_size(rc)?;
        self.remaining = buf.len() - n.min(buf.len());
        Ok(n)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.recv(buf)
    }
    fn is_datagram(&self) -> bool {
        false
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_recv_timeout(timeout)
    }
    fn granted(&self) -> GrantedKnobs {
        self.inner.granted()
    }
    fn prepare(&mut self, max_size: usize, batch: usize) -> io::Result<()> {
        self.remaining = 0;
        let need = max_size.max(1) * batch.max(1);
        if self.file.is_none() || self.file_len < need {
            self.file = Some(pattern_file(need)?);
            self.file_len = need;
        }
        Ok(())
    }
    fn stats(&mut self) -> EndpointStats {
        self.inner.stats()
    }
}
