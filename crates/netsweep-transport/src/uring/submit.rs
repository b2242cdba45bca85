//! One io_uring submission of the `uring` endpoint: the send and receive SQEs, the timed wait
//! for their CQEs, and, after a timeout or a failed enter, the cancellation and reaping that
//! leave no request pointing at a buffer.

use super::{UringEndpoint, CANCEL, PENDING};
use io_uring::{opcode, squeue, types, IoUring};
use std::io;
use std::time::{Duration, Instant};

impl UringEndpoint {
    #[inline]
    pub(super) fn send_sqe(fd: i32, fixed: bool, buf: &[u8], flags: i32) -> squeue::Entry {
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
    pub(super) fn recv_sqe(fd: i32, fixed: bool, buf: &mut [u8], flags: i32) -> squeue::Entry {
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
    pub(super) fn run(
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
    pub(super) fn op_error(rc: i32, timed_out: bool) -> io::Error {
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
