//! What the timed loops of every pattern share: the server's [`TrialSignals`] from its
//! control thread, the receive [`SLICE`] and the [`IdleSlices`] count of waits without
//! progress, and the accounting of datagram sends the local stack refused.

use netsweep_proto::messages::SendErrors;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Counts the receive waits (each at most a [`SLICE`]) that passed without progress, and
/// says when they add up to the idle limit.
#[derive(Debug, Clone, Copy)]
pub struct IdleSlices {
    count: u32,
    max: u32,
}

impl IdleSlices {
    /// A counter giving up after `idle` (at least one slice).
    #[inline]
    pub fn new(idle: Duration) -> Self {
        Self {
            count: 0,
            max: slices(idle),
        }
    }

    /// Progress was made.
    #[inline]
    pub fn reset(&mut self) {
        self.count = 0;
    }

    /// One more slice without progress; true once they exceed the idle limit.
    #[inline]
    pub fn tick(&mut self) -> bool {
        self.count += 1;
        self.count > self.max
    }

    /// Slices without progress so far.
    #[inline]
    pub fn count(&self) -> u32 {
        self.count
    }
}

/// How many [`SLICE`]s make `d` (at least one).
#[inline]
pub fn slices(d: Duration) -> u32 {
    (d.as_nanos() / SLICE.as_nanos()).max(1) as u32
}

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

    /// True once the session is over and the data thread must stop at once.
    pub fn is_aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }
}

/// Lets another runnable thread of this CPU run, in place of a busy-wait's pause: a rate
/// sender that looks for replies without waiting just before its next send would otherwise
/// hold the CPU against a peer thread the scheduler put beside it (an in-process server's
/// echo, a flow's other end) until its time slice ran out — milliseconds of latency the
/// path never had. Returns at once when nothing else is runnable here.
#[inline]
pub fn yield_cpu() {
    // SAFETY: no arguments, no memory; it only asks the scheduler to run another thread.
    unsafe { libc::sched_yield() };
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
    fn idle_slices_give_up_past_the_limit() {
        // 100 ms of 20 ms slices: the sixth slice without progress gives up.
        let mut idle = IdleSlices::new(Duration::from_millis(100));
        assert!((0..5).all(|_| !idle.tick()));
        assert_eq!(idle.count(), 5);
        assert!(idle.tick());
        idle.reset();
        assert!(!idle.tick());
        // Less than a slice still allows one.
        let mut short = IdleSlices::new(Duration::from_millis(1));
        assert!(!short.tick());
        assert!(short.tick());
        assert_eq!(slices(Duration::from_millis(60)), 3);
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
