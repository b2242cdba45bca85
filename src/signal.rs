//! Ctrl-C and SIGTERM: the first one asks the run to stop after the current trial and save
//! what it measured; a second one exits at once.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set when the user asked to stop.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // Second signal: the user insists. Restore the default action and re-raise.
        // SAFETY: signal() and raise() are async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Installs the handler for SIGINT and SIGTERM.
pub fn install() {
    // SAFETY: the handler only touches an atomic and calls async-signal-safe functions.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}
