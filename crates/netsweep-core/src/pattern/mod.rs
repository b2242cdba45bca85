//! Traffic patterns over an [`Endpoint`](crate::endpoint::Endpoint): the timed loops of each
//! side. Nothing here allocates, logs, locks or touches the control connection.

pub mod crr;
pub mod dgram;
pub mod pingpong;
pub mod stream;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Signals from a server's control thread to its data thread during one trial.
/// Plain atomics: checked only when a receive times out or after each receive.
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

    /// Marks the client's end of the trial with its counts.
    pub fn end(&self, bytes: u64, messages: u64) {
        self.sent_bytes.store(bytes, Ordering::SeqCst);
        self.sent_messages.store(messages, Ordering::SeqCst);
        self.ended.store(true, Ordering::SeqCst);
    }

    pub fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    pub fn is_aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }
}

/// How long a server's receive blocks before it re-checks its [`TrialSignals`].
pub const SLICE: std::time::Duration = std::time::Duration::from_millis(20);
