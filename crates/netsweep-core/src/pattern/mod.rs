//! Traffic patterns over an [`Endpoint`](crate::endpoint::Endpoint): the timed loops of each
//! side. Nothing here allocates, logs, locks or touches the control connection.

pub mod crr;
pub mod dgram;
pub mod pingpong;
pub mod stream;

use netsweep_proto::messages::SendErrors;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Signals from a server's control thread to its data thread during one trial.
/// Checked only when a receive times out or after each receive. `end` publishes the counts
/// with a Release store of `ended`; `is_ended` is an Acquire load, so a data thread that
/// sees the end also sees the counts stored before it, never a stale zero.
#[derive(Debug, Default)]
pub struct TrialSignals {
    /// The client has ended its part of the trial.
    pub ended: AtomicBool,
    /// Bytes the client sent in the trial (valid once `ended`).
    pub sent_bytes: AtomicU64,
    /// Messages the client sent in the trial (valid once `ended`).
    pub sent_messages: AtomicU64,
    /// The session is over: stop at once.
    pub abort: AtomicBool,
}

impl TrialSignals {
    /// Clears the signals for a new trial.
    pub fn reset(&self) {
        self.ended.store(false, Ordering::SeqCst);
        self.sent_bytes.store(0, Ordering::SeqCst);
        self.sent_messages.store(0, Ordering::SeqCst);
    }

    /// Marks the client's end of the trial with its counts (the counts first, then the
    /// Release store of `ended` that publishes them).
    pub fn end(&self, bytes: u64, messages: u64) {
        self.sent_bytes.store(bytes, Ordering::Relaxed);
        self.sent_messages.store(messages, Ordering::Relaxed);
        self.ended.store(true, Ordering::Release);
    }

    /// True once the client ended the trial. Acquire: pairs with the Release in [`end`],
    /// so the counts read after a `true` are the client's.
    ///
    /// [`end`]: TrialSignals::end
    #[inline]
    pub fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// The client's announced (bytes, messages); meaningful only after [`is_ended`] returned
    /// true on this thread.
    ///
    /// [`is_ended`]: TrialSignals::is_ended
    #[inline]
    pub fn sent(&self) -> (u64, u64) {
        (
            self.sent_bytes.load(Ordering::Relaxed),
            self.sent_messages.load(Ordering::Relaxed),
        )
    }

    pub fn is_aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }
}

/// How long a server's receive blocks before it re-checks its [`TrialSignals`].
pub const SLICE: std::time::Duration = std::time::Duration::from_millis(20);

/// Counts `e` in `errs` when it is a datagram send the local stack refused (the datagram was
/// not sent, and the run goes on); returns false for any other error, which stays fatal.
/// EPERM: a netfilter rule on this host dropped it. ENOBUFS: a full qdisc or device queue.
/// ECONNREFUSED, EHOSTUNREACH, ENETUNREACH: an ICMP error for an earlier datagram, reported
/// on this send. Off the fast path: only called once a send has failed.
#[cold]
pub fn count_send_error(errs: &mut SendErrors, e: &io::Error) -> bool {
    let slot = match e.raw_os_error() {
        Some(libc::EPERM) => &mut errs.eperm,
        Some(libc::ENOBUFS) => &mut errs.enobufs,
        Some(libc::ECONNREFUSED) => &mut errs.econnrefused,
        Some(libc::EHOSTUNREACH) => &mut errs.ehostunreach,
        Some(libc::ENETUNREACH) => &mut errs.enetunreach,
        _ => return false,
    };
    *slot += 1;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_sends_are_counted_per_errno_and_others_are_not() {
        let mut e = SendErrors::default();
        for errno in [libc::EPERM, libc::EPERM, libc::ENOBUFS, libc::ECONNREFUSED] {
            assert!(count_send_error(
                &mut e,
                &io::Error::from_raw_os_error(errno)
            ));
        }
        assert!(!count_send_error(
            &mut e,
            &io::Error::from_raw_os_error(libc::EMSGSIZE)
        ));
        assert!(!count_send_error(&mut e, &io::Error::other("x")));
        assert_eq!(
            (e.eperm, e.enobufs, e.econnrefused, e.total()),
            (2, 1, 1, 4)
        );
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, r#"{"EPERM":2,"ENOBUFS":1,"ECONNREFUSED":1}"#);
    }

    #[test]
    fn ended_publishes_the_counts() {
        let s = TrialSignals::default();
        assert!(!s.is_ended());
        s.end(10, 2);
        assert!(s.is_ended());
        assert_eq!(s.sent(), (10, 2));
        s.reset();
        assert!(!s.is_ended());
        assert_eq!(s.sent(), (0, 0));
    }
}
