//! The `uring` api: `tcp` and `udp` through io_uring (IORING_OP_SEND / IORING_OP_RECV).
//!
//! A single send or receive submits one SQE and waits for its CQE in the same
//! io_uring_enter(2). A batch (stream pattern, `--batch N`) submits N SQEs in one enter and
//! reaps N CQEs: that one call per batch is the point of the api, and the `calls` figures
//! count io_uring_enter calls.
//!
//! Batches are linked chains (IOSQE_IO_LINK) so the kernel runs them in order: sends of one
//! stream never interleave (TCP sends carry MSG_WAITALL so a chain never leaves a gap), and
//! a receive batch is one blocking receive followed by MSG_DONTWAIT receives that take what
//! is already queued, which is recvmmsg's MSG_WAITFORONE. Receive timeouts are the wait's
//! timeout (IORING_ENTER_EXT_ARG); on expiry the pending request is cancelled
//! (IORING_OP_ASYNC_CANCEL) and every CQE reaped before the call returns, so no request
//! ever outlives the buffers it points at.
//!
//! The ring (sized for the batch), the socket's fixed-file registration and the result
//! array are made in `prepare()`, on the thread that drives the endpoint (the ring is
//! single-issuer with deferred task work where the kernel has it, Linux 6.1+); the hot path
//! allocates nothing.

use crate::basic::{BasicEndpoint, Conn};
use io_uring::{opcode, squeue, types, IoUring};
use netsweep_core::endpoint::{Endpoint, EndpointStats};
use netsweep_proto::messages::GrantedKnobs;
use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Most SQEs one submission carries (the engine clamps `--batch` to this too).
pub const MAX_BATCH: usize = 1024;
/// user_data of cancellation requests (operations use their index in the batch).
const CANCEL: u64 = u64::MAX;
/// Marks an operation whose CQE has not arrived yet.
const PENDING: i32 = i32::MIN;

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    static TAG: Cell<usize> = const { Cell::new(0) };
}

/// A number unique to the calling thread for the life of the process (a single-issuer ring
/// is bound to one thread; addresses and OS thread ids can be reused, these are not).
#[inline]
fn thread_tag() -> usize {
    TAG.with(|t| {
        let v = t.get();
        if v != 0 {
            return v;
        }
        let v = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
        t.set(v);
        v
    })
}

/// Why io_uring cannot be used here, with the fix.
#[cold]
pub fn explain(e: io::Error) -> io::Error {
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .map(|s| s.trim().to_string());
    let msg = match (e.raw_os_error(), sysctl.as_deref()) {
        (Some(libc::EPERM | libc::EACCES), Some("2")) => {
            "io_uring is disabled for every process by sysctl kernel.io_uring_disabled=2: \
             `sysctl -w kernel.io_uring_disabled=0` (as root), or use --api basic"
                .to_string()
        }
        (Some(libc::EPERM | libc::EACCES), Some("1")) => {
            "io_uring is disabled by sysctl kernel.io_uring_disabled=1 except for root and the \
             group in kernel.io_uring_group: run as root, join that group, or set \
             kernel.io_uring_disabled=0; or use --api basic"
                .to_string()
        }
        (Some(libc::EPERM | libc::EACCES), _) => format!(
            "io_uring_setup was refused ({e}): a seccomp filter (containers often have one) \
             or an LSM blocks io_uring here: allow io_uring_setup/io_uring_enter, or use --api basic"
        ),
        (Some(libc::ENOSYS), _) => "this kernel has no io_uring (built without CONFIG_IO_URING, \
             or a seccomp filter answers ENOSYS): use --api basic"
            .to_string(),
        (Some(libc::ENOMEM), _) => format!(
            "io_uring_setup: {e}: the locked-memory limit is too small for the ring (raise \
             `ulimit -l`), or use --api basic"
        ),
        _ => format!("io_uring_setup: {e}: use --api basic"),
    };
    io::Error::new(io::ErrorKind::Unsupported, msg)
}

/// Builds a ring of `entries` SQEs: single-issuer with deferred task work (6.1+), else
/// cooperative task work (5.19+), else plain. Requires IORING_FEAT_EXT_ARG (5.11) for
/// timed waits.
pub fn build_ring(entries: u32) -> io::Result<IoUring> {
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
        .or_else(|_| IoUring::builder().setup_coop_taskrun().build(entries))
        .or_else(|_| IoUring::new(entries))
        .map_err(explain)?;
    if !ring.params().is_feature_ext_arg() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel's io_uring has no timed waits (IORING_FEAT_EXT_ARG, Linux 5.11+): \
             use --api basic",
        ));
    }
    Ok(ring)
}

/// Checks that io_uring works here and has the opcodes this api submits.
pub fn probe() -> Result<(), String> {
    let ring = build_ring(4).map_err(|e| e.to_string())?;
    let mut p = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut p)
        .map_err(|e| format!("io_uring probe: {e}: use --api basic"))?;
    for (code, name) in [
        (opcode::Send::CODE, "IORING_OP_SEND"),
        (opcode::Recv::CODE, "IORING_OP_RECV"),
        (opcode::AsyncCancel::CODE, "IORING_OP_ASYNC_CANCEL"),
    ] {
        if !p.is_supported(code) {
            return Err(format!(
                "this kernel's io_uring lacks {name} (Linux 5.6+): use --api basic"
            ));
        }
    }
    Ok(())
}

/// The ring and what lives beside it; made in `prepare()`.
struct Ring {
    ring: IoUring,
    /// Thread the ring was made on (a single-issuer ring accepts no other).
    owner: usize,
    /// The socket is registered as fixed file 0.
    fixed: bool,
    /// Operations one submission may carry.
    cap: usize,
}

/// An endpoint whose sends and receives are io_uring requests.
pub struct UringEndpoint {
    inner: BasicEndpoint,
    datagram: bool,
    ring: Option<Ring>,
    /// Result of each operation of the current submission (PENDING until its CQE).
    res: Vec<i32>,
    recv_timeout: Option<Duration>,
    send_timeout: Option<Duration>,
    /// io_uring_enter calls made so far.
    enters: u64,
    /// Why the first unsent datagram of the last short batch failed.
    send_error: Option<io::Error>,
    /// Tests: make the next io_uring_enter look like a hard failure (after it submitted).
    #[cfg(test)]
    fail_next_enter: bool,
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
    fn inner_addr(&self) -> std::net::SocketAddr {
        use std::os::fd::BorrowedFd;
        // SAFETY: the descriptor is open for as long as `self`; the socket is only borrowed.
        let fd = unsafe { BorrowedFd::borrow_raw(self.inner.fd) };
        let s = socket2::SockRef::from(&fd);
        s.local_addr().unwrap().as_socket().unwrap()
    }

    /// Makes (or remakes) the ring when it is too small or belongs to another thread.
    fn ensure(&mut self, cap: usize) -> io::Result<()> {
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

    #[inline]
    fn send_sqe(fd: i32, fixed: bool, buf: &[u8], flags: i32) -> squeue::Entry {
        let len = buf.len().min(u32::MAX as usize) as u32;
        if fixed {
            opcode::Send::new(types::Fixed(0), buf.as_ptr(), len)
                .flags(flags)
                .build()
        } else {
            opcode::Send::new(types::Fd(fd), buf.as_ptr(), len)
                .flags(flags)
                .build()
        }
    }

    #[inline]
    fn recv_sqe(fd: i32, fixed: bool, buf: &mut [u8], flags: i32) -> squeue::Entry {
        let len = buf.len().min(u32::MAX as usize) as u32;
        if fixed {
            opcode::Recv::new(types::Fixed(0), buf.as_mut_ptr(), len)
                .flags(flags)
                .build()
        } else {
            opcode::Recv::new(types::Fd(fd), buf.as_mut_ptr(), len)
                .flags(flags)
                .build()
        }
    }

    /// Pushes `n` operations made by `sqe(i)`, linked in order, submits them and waits for
    /// all their CQEs (results in `self.res[..n]`). With a timeout, an operation still
    /// pending when it expires is cancelled and the call returns a WouldBlock error once
    /// every CQE is in, unless the operations completed after all. Returns the number of
    /// io_uring_enter calls.
    ///
    /// The buffers the SQEs point at must stay valid until this returns; it returns only
    /// once no operation is in flight.
    fn run(
        &mut self,
        n: usize,
        timeout: Option<Duration>,
        mut sqe: impl FnMut(usize, i32, bool) -> squeue::Entry,
    ) -> io::Result<(u64, bool)> {
        let fd = self.inner.fd;
        let Some(r) = self.ring.as_mut() else {
            return Err(io::Error::other(
                "uring: no ring (prepare() failed earlier): an engine bug",
            ));
        };
        let fixed = r.fixed;
        let res = &mut self.res[..n];
        res.fill(PENDING);
        let mut full = false;
        {
            let mut sq = r.ring.submission();
            for i in 0..n {
                let mut e = sqe(i, fd, fixed).user_data(i as u64);
                if i + 1 < n {
                    e = e.flags(squeue::Flags::IO_LINK);
                }
                // SAFETY: the buffers `e` points at are borrowed by the caller for the whole
                // of `run`, which returns only when every CQE (or the ring's error) is in.
                if unsafe { sq.push(&e) }.is_err() {
                    full = true;
                    break;
                }
            }
        }
        if full {
            // The SQEs already queued point at this call's buffers: a later enter must never
            // submit them. None was submitted yet (no SQPOLL), so dropping the ring is enough.
            self.ring = None;
            return Err(io::Error::other(
                "uring: submission queue full (an engine bug: batch above prepare())",
            ));
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut pending = n;
        let mut cancels = 0usize;
        let mut cancelled = false;
        let mut enters = 0u64;
        loop {
            for cqe in r.ring.completion() {
                let ud = cqe.user_data();
                if ud == CANCEL {
                    cancels = cancels.saturating_sub(1);
                } else if let Some(slot) = res.get_mut(ud as usize) {
                    if *slot == PENDING {
                        *slot = cqe.result();
                        pending -= 1;
                    }
                }
            }
            if pending == 0 && cancels == 0 {
                break;
            }
            let want = pending + cancels;
            let wait = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() && !cancelled {
                        // Cancel the first pending operation; those linked after it fail
                        // with ECANCELED.
                        if let Some(i) = res.iter().position(|&x| x == PENDING) {
                            let e = opcode::AsyncCancel::new(i as u64).build().user_data(CANCEL);
                            // SAFETY: a cancellation points at no buffer.
                            if unsafe { r.ring.submission().push(&e) }.is_ok() {
                                cancels += 1;
                            }
                        }
                        cancelled = true;
                    }
                    if cancelled {
                        // Cancellation of a socket request completes at once; the slice only
                        // bounds a wait that should not happen.
                        Some(Duration::from_secs(1))
                    } else {
                        Some(left)
                    }
                }
                None => None,
            };
            let rc = match wait {
                Some(w) => {
                    let ts = types::Timespec::from(w);
                    let args = types::SubmitArgs::new().timespec(&ts);
                    r.ring
                        .submitter()
                        .submit_with_args(want.min(pending + cancels), &args)
                }
                None => r.ring.submitter().submit_and_wait(want),
            };
            enters += 1;
            #[cfg(test)]
            let rc = if std::mem::take(&mut self.fail_next_enter) {
                rc.and(Err(io::Error::from_raw_os_error(libc::ENOMEM)))
            } else {
                rc
            };
            match rc {
                Ok(_) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN) => {
                        if cancelled && e.raw_os_error() == Some(libc::ETIME) {
                            // Still not in after a second: ask again.
                            cancelled = false;
                        }
                    }
                    _ => {
                        // The ring itself failed with requests in flight. They point at the
                        // caller's buffers, which may be freed once this returns, and closing
                        // a ring does not wait for them: cancel and reap every one first.
                        let (more, all_in) = drain(&mut r.ring, res, pending, cancels, fd);
                        enters += more;
                        self.enters += enters;
                        if !all_in {
                            // Nothing can make the kernel let go of the buffers: stopping is
                            // the only sound choice left.
                            use std::io::Write;
                            let _ = writeln!(
                                io::stderr(),
                                "netsweep: io_uring failed ({e}) and its requests could not be                                  cancelled; aborting rather than free buffers the kernel may                                  still write: use --api basic"
                            );
                            std::process::abort();
                        }
                        self.ring = None;
                        return Err(e);
                    }
                },
            }
        }
        self.enters += enters;
        Ok((enters, cancelled))
    }

    /// The error of a failed operation.
    #[cold]
    fn op_error(rc: i32, timed_out: bool) -> io::Error {
        if rc == -libc::ECANCELED && timed_out {
            io::Error::from_raw_os_error(libc::EAGAIN)
        } else {
            io::Error::from_raw_os_error(-rc)
        }
    }
}

/// Rounds [`drain`] waits (100 ms each) before it gives up.
const DRAIN_ROUNDS: u32 = 100;
/// The round after which [`drain`] shuts the socket down, so every request on it completes.
const DRAIN_SHUTDOWN: u32 = 20;

/// Takes every CQE already posted: operation results into `res`, cancellations off `cancels`.
fn reap(ring: &mut IoUring, res: &mut [i32], pending: &mut usize, cancels: &mut usize) {
    for cqe in ring.completion() {
        let ud = cqe.user_data();
        if ud == CANCEL {
            *cancels = cancels.saturating_sub(1);
        } else if let Some(slot) = res.get_mut(ud as usize) {
            if *slot == PENDING {
                *slot = cqe.result();
                *pending -= 1;
            }
        }
    }
}

/// After a hard io_uring_enter failure: cancels the operations still pending (the batch is
/// one linked chain, so cancelling its first pending operation fails the rest) and waits
/// until every CQE, cancellations included, is in. If they do not come, shuts the socket
/// down, which completes any request on it. Returns (enters made, every CQE in).
#[cold]
fn drain(
    ring: &mut IoUring,
    res: &mut [i32],
    mut pending: usize,
    mut cancels: usize,
    fd: i32,
) -> (u64, bool) {
    let mut enters = 0;
    for round in 0..DRAIN_ROUNDS {
        reap(ring, res, &mut pending, &mut cancels);
        if pending == 0 && cancels == 0 {
            return (enters, true);
        }
        if cancels == 0 {
            if let Some(i) = res.iter().position(|&x| x == PENDING) {
                let e = opcode::AsyncCancel::new(i as u64).build().user_data(CANCEL);
                // SAFETY: a cancellation points at no buffer.
                if unsafe { ring.submission().push(&e) }.is_ok() {
                    cancels += 1;
                }
            }
        }
        if round == DRAIN_SHUTDOWN {
            // SAFETY: shutdown on our own socket descriptor; it stays open.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
        let ts = types::Timespec::from(Duration::from_millis(100));
        let args = types::SubmitArgs::new().timespec(&ts);
        // Errors here are retried: only the CQEs matter.
        let _ = ring.submitter().submit_with_args(pending + cancels, &args);
        enters += 1;
    }
    reap(ring, res, &mut pending, &mut cancels);
    (enters, pending == 0 && cancels == 0)
}

impl Endpoint for UringEndpoint {
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

    fn as_dyn(&mut self) -> &mut dyn Endpoint {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_core::spec::Transport;
    use socket2::{Domain, Socket, Type};
    use std::net::SocketAddr;
    use std::net::UdpSocket;

    /// A uring endpoint on a udp socket connected to `peer`, or None (loudly) when io_uring
    /// is not available here.
    fn udp_endpoint(peer: SocketAddr) -> Option<UringEndpoint> {
        let sock = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
        sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        sock.connect(&peer.into()).unwrap();
        let conn = Conn {
            sock,
            transport: Transport::Udp,
            v6: false,
            granted: GrantedKnobs::default(),
            guard: None,
        };
        match UringEndpoint::new(conn) {
            Ok(ep) => Some(ep),
            Err(e) => {
                eprintln!("\n*** SKIPPED: io_uring unavailable here: {e} ***\n");
                None
            }
        }
    }

    #[test]
    fn a_hard_enter_failure_reaps_every_request_before_returning() {
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let Some(mut ep) = udp_endpoint(peer.local_addr().unwrap()) else {
            return;
        };
        ep.set_recv_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut buf = vec![0u8; 64];
        // The receive is in flight (nothing was sent) when the enter "fails".
        ep.fail_next_enter = true;
        let e = ep.recv(&mut buf).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOMEM), "{e}");
        // Its CQE is in: the request was cancelled, not left to a closing ring.
        assert_eq!(ep.res[0], -libc::ECANCELED);
        assert!(ep.ring.is_none(), "the failed ring is dropped");
        // The cancelled receive took nothing: the next datagram goes to the next receive.
        peer.send_to(b"after", ep.inner_addr()).unwrap();
        ep.set_recv_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = ep.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"after");
    }

    #[test]
    fn a_short_datagram_batch_says_why_the_next_message_failed() {
        // A port nobody listens on: the first datagram draws an ICMP port unreachable,
        // which the next send reports as ECONNREFUSED.
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let Some(mut ep) = udp_endpoint(addr) else {
            return;
        };
        ep.prepare(64, 4).unwrap();
        let data = vec![7u8; 4 * 32];
        let (n, _) = ep.send_batch(&data, 32, 4).unwrap();
        assert_eq!(n, 1, "the chain stops at the refused datagram");
        let e = ep.take_send_error().expect("the reason is kept");
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{e}");
        assert!(ep.take_send_error().is_none(), "taken once");
    }
}
