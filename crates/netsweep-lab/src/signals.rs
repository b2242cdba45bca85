//! SIGINT/SIGTERM → a flag that lab building and the scenario runner check, so that Ctrl-C
//! (or `kill`) ends the children and tears the lab down instead of leaving it behind.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The previous handlers, restored when the last guard drops.
static SAVED: Mutex<Option<(libc::sigaction, libc::sigaction)>> = Mutex::new(None);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether SIGINT or SIGTERM arrived since the handler was installed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Sets the flag by hand (tests; callers that want to stop a running scenario).
pub fn request_stop() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// While alive, SIGINT and SIGTERM set the flag instead of killing the process. Dropping it
/// restores the previous handlers and clears the flag.
#[derive(Debug)]
pub struct SignalGuard {
    installed: bool,
}

/// Installs the handlers (a second guard while one is alive does nothing).
pub fn install() -> SignalGuard {
    let mut saved = SAVED.lock().unwrap_or_else(|e| e.into_inner());
    if saved.is_some() {
        return SignalGuard { installed: false };
    }
    INTERRUPTED.store(false, Ordering::SeqCst);
    // SAFETY: sigaction with a zeroed struct, an empty mask and a handler that only stores
    // to an atomic; the old actions are written into valid out-parameters.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut act.sa_mask);
        act.sa_flags = libc::SA_RESTART;
        let mut old_int: libc::sigaction = std::mem::zeroed();
        let mut old_term: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGINT, &act, &mut old_int);
        libc::sigaction(libc::SIGTERM, &act, &mut old_term);
        *saved = Some((old_int, old_term));
    }
    SignalGuard { installed: true }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        if !self.installed {
            return;
        }
        let mut saved = SAVED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((old_int, old_term)) = saved.take() {
            // SAFETY: restores actions previously returned by sigaction.
            unsafe {
                libc::sigaction(libc::SIGINT, &old_int, std::ptr::null_mut());
                libc::sigaction(libc::SIGTERM, &old_term, std::ptr::null_mut());
            }
        }
        INTERRUPTED.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigterm_sets_the_flag_while_guarded() {
        let g = install();
        assert!(!interrupted());
        // SAFETY: raising a signal whose handler is installed above.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(interrupted());
        drop(g);
        assert!(!interrupted());
    }
}
