//! The `uring` endpoint: a connected socket whose sends and receives are io_uring requests,
//! one per call or a linked batch per `send_batch`/`recv_batch`.

use super::{build_ring, thread_tag, Ring, MAX_BATCH, PENDING};
use crate::basic::{BasicEndpoint, Conn};
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_proto::messages::GrantedKnobs;
use std::io;
use std::time::Duration;

/// An endpoint whose sends and receives are io_uring requests.
pub struct UringEndpoint {
    pub(super) inner: BasicEndpoint,
    pub(super) datagram: bool,
    pub(super) ring: Option<Ring>,
    /// Result of each operation of the current submission (PENDING until its CQE).
    pub(super) res: Vec<i32>,
    pub(super) recv_timeout: Option<Duration>,
    pub(super) send_timeout: Option<Duration>,
    /// io_uring_enter calls made so far.
    pub(super) enters: u64,
    /// Why the first unsent datagram of the last short batch failed.
    pub(super) send_error: Option<io::Error>,
    /// Tests: make the next io_uring_enter look like a hard failure (after it submitted).
    #[cfg(test)]
    pub(super) fail_next_enter: bool,
}

impl std::fmt::Debug for UringEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringEndpoint")
            .field("inner", &self.inner)
            .field("cap", &self.ring.as_ref().map(|r| r.cap))
            .field("fixed", &self.ring.as_ref().map(|r| r.fixed))
            .field("enters", &self.enters)
            .finish()
    }
}

impl UringEndpoint {
    /// Wraps a connected tcp or udp socket; makes a one-operation ring at once, so io_uring
    /// being unavailable is an error when the data path opens, not in the first trial.
    pub fn new(conn: Conn) -> io::Result<Self> {
        let send_timeout = conn.sock.write_timeout().ok().flatten();
        let datagram = conn.transport.is_datagram();
        let mut ep = Self {
            inner: BasicEndpoint::new(conn),
            datagram,
            ring: None,
            res: Vec::new(),
            recv_timeout: None,
            send_timeout,
            enters: 0,
            send_error: None,
            #[cfg(test)]
            fail_next_enter: false,
        };
        ep.ensure(1)?;
        Ok(ep)
    }

    /// io_uring_enter calls made so far.
    pub fn enters(&self) -> u64 {
        self.enters
    }

    /// The socket's local address (tests).
    #[cfg(test)]
    pub(super) fn inner_addr(&self) -> std::net::SocketAddr {
        use std::os::fd::BorrowedFd;
        // SAFETY: the descriptor is open for as long as `self`; the socket is only borrowed.
        let fd = unsafe { BorrowedFd::borrow_raw(self.inner.fd) };
        let s = socket2::SockRef::from(&fd);
        s.local_addr().unwrap().as_socket().unwrap()
    }

    /// Makes (or remakes) the ring when it is too small or belongs to another thread.
    pub(super) fn ensure(&mut self, cap: usize) -> io::Result<()> {
        let cap = cap.clamp(1, MAX_BATCH);
        let tag = thread_tag();
        if let Some(r) = &self.ring {
            if r.cap >= cap && r.owner == tag {
                return Ok(());
            }
        }
        let cap = cap.max(self.ring.as_ref().map_or(1, |r| r.cap));
        // Room for the batch plus one cancellation.
        let entries = (cap as u32 + 1).next_power_of_two();
        self.ring = None;
        let ring = build_ring(entries)?;
        let fixed = ring.submitter().register_files(&[self.inner.fd]).is_ok();
        self.ring = Some(Ring {
            ring,
            owner: tag,
            fixed,
            cap,
        });
        if self.res.len() < cap {
            self.res.resize(cap, PENDING);
        }
        Ok(())
    }
}

impl Endpoint for UringEndpoint {
    fn socket_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.inner.fd)
    }

    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.ensure(1)?;
        let timeout = self.send_timeout;
        let (_, timed_out) = self.run(1, timeout, |_, fd, fixed| {
            Self::send_sqe(fd, fixed, buf, libc::MSG_NOSIGNAL)
        })?;
        let rc = self.res[0];
        if rc < 0 {
            let e = if timed_out && rc == -libc::ECANCELED {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the peer accepted no data within the session timeout",
                )
            } else {
                Self::op_error(rc, false)
            };
            return Err(self.inner.send_error(e, buf.len()));
        }
        Ok(rc as usize)
    }

    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.ensure(1)?;
        let timeout = self.recv_timeout;
        let (_, timed_out) =
            self.run(1, timeout, |_, fd, fixed| Self::recv_sqe(fd, fixed, buf, 0))?;
        let rc = self.res[0];
        if rc < 0 {
            return Err(Self::op_error(rc, timed_out));
        }
        Ok(rc as usize)
    }

    fn is_datagram(&self) -> bool {
        self.datagram
    }

    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.recv_timeout = timeout.filter(|t| !t.is_zero());
        Ok(())
    }

    fn granted(&self) -> GrantedKnobs {
        self.inner.granted()
    }

    fn prepare(&mut self, _max_size: usize, batch: usize) -> io::Result<()> {
        self.ensure(batch)
    }

    fn send_batch(&mut self, data: &[u8], size: usize, count: usize) -> io::Result<(usize, u64)> {
        self.send_error = None;
        self.ensure(1)?;
        let cap = self.ring.as_ref().map_or(1, |r| r.cap);
        let n = count
            .min(cap)
            .min(data.len().checked_div(size).unwrap_or(count));
        if n == 0 {
            return Ok((0, 0));
        }
        // MSG_WAITALL makes a stream send complete whole (the kernel retries short sends),
        // so a linked chain never leaves a gap in the byte stream.
        let flags = libc::MSG_NOSIGNAL | if self.datagram { 0 } else { libc::MSG_WAITALL };
        let timeout = self.send_timeout;
        let (enters, timed_out) = self.run(n, timeout, |i, fd, fixed| {
            Self::send_sqe(fd, fixed, &data[i * size..(i + 1) * size], flags)
        })?;
        let done = self.res[..n]
            .iter()
            .take_while(|&&r| r >= 0 && r as usize == size)
            .count();
        if done == n {
            return Ok((n, enters));
        }
        let rc = self.res[done];
        if rc >= 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!(
                    "io_uring sent {rc} of a {size}-byte message in a linked batch: this kernel \
                     does not retry short stream sends (MSG_WAITALL, Linux 5.19+): use --batch 1 \
                     or --api basic"
                ),
            ));
        }
        if done > 0 {
            // Datagrams: `take_send_error` says why message `done` failed. Streams: the
            // error comes back on the next call.
            if self.datagram {
                self.send_error = Some(self.inner.send_error(Self::op_error(rc, false), size));
            }
            return Ok((done, enters));
        }
        let e = if timed_out && rc == -libc::ECANCELED {
            io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer accepted no data within the session timeout",
            )
        } else {
            Self::op_error(rc, false)
        };
        Err(self.inner.send_error(e, size))
    }

    fn take_send_error(&mut self) -> Option<io::Error> {
        self.send_error.take()
    }

    fn recv_batch(
        &mut self,
        data: &mut [u8],
        slot: usize,
        lens: &mut [usize],
    ) -> io::Result<(usize, u64)> {
        self.ensure(1)?;
        let cap = self.ring.as_ref().map_or(1, |r| r.cap);
        let n = lens.len().min(cap).min(data.len() / slot.max(1));
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "uring: recv_batch with no room for a message (an engine bug)",
            ));
        }
        let timeout = self.recv_timeout;
        let base = data.as_mut_ptr();
        let (enters, timed_out) = self.run(n, timeout, |i, fd, fixed| {
            // SAFETY: slot i lies inside `data` (n * slot <= data.len()) and slots do not
            // overlap; `data` is borrowed for the whole call.
            let buf = unsafe { std::slice::from_raw_parts_mut(base.add(i * slot), slot) };
            let flags = if i == 0 { 0 } else { libc::MSG_DONTWAIT };
            Self::recv_sqe(fd, fixed, buf, flags)
        })?;
        let first = self.res[0];
        if first < 0 {
            return Err(Self::op_error(first, timed_out));
        }
        lens[0] = first as usize;
        if first == 0 && !self.datagram {
            // End of stream.
            return Ok((1, enters));
        }
        let mut k = 1;
        while k < n {
            let r = self.res[k];
            if r < 0 || (r == 0 && !self.datagram) {
                break;
            }
            lens[k] = r as usize;
            k += 1;
        }
        Ok((k, enters))
    }

    fn stats(&mut self) -> EndpointStats {
        self.inner.tcp_stats()
    }
}
