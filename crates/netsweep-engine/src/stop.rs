//! The process's stop request (the first Ctrl-C or SIGTERM), for waits inside a trial that
//! cannot be handed the run's flag: a rate sender seconds into a long trial ends it at once
//! instead of at its deadline. Setting it is one atomic store, safe in a signal handler.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks every trial loop that looks to end now (async-signal-safe).
pub fn request() {
    REQUESTED.store(true, Ordering::Relaxed);
}

/// Whether a stop was asked for.
#[inline]
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}
