//! SIGINT/SIGTERM → a flag that lab building and the scenario runner check, so that Ctrl-C
//! (or `kill`) ends the children and tears the lab down instead of leaving it behind. Built
//! on signal-hook like the binary's own handling; the scope restores the signals' previous
//! behaviour when it ends.

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;
use signal_hook::SigId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

const SIGNALS: [libc::c_int; 2] = [SIGINT, SIGTERM];

/// The flag the signals set while a guard is alive.
fn flag_cell() -> &'static Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// True while no guard is alive: then the signals take their default action, as they did
/// before the first guard (signal-hook keeps its handler installed for good).
fn unguarded() -> &'static Arc<AtomicBool> {
    static UNGUARDED: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    UNGUARDED.get_or_init(|| Arc::new(AtomicBool::new(true)))
}

#[derive(Default)]
struct State {
    /// The live guard's actions, unregistered when it drops.
    actions: Option<Vec<SigId>>,
    /// The permanent "default action while unguarded" actions are registered.
    defaults: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    actions: None,
    defaults: false,
});

/// Whether SIGINT or SIGTERM arrived since the handler was installed.
pub fn interrupted() -> bool {
    flag_cell().load(Ordering::SeqCst)
}

/// Sets the flag by hand (tests; callers that want to stop a running scenario).
pub fn request_stop() {
    flag_cell().store(true, Ordering::SeqCst);
}

/// While alive, SIGINT and SIGTERM set the flag instead of killing the process. Dropping it
/// restores the previous behaviour and clears the flag.
#[derive(Debug)]
pub struct SignalGuard {
    installed: bool,
}

/// Whether `sig` is ignored now (started under `nohup` or with SIG_IGN inherited): then it
/// stays ignored outside the guard instead of taking the default action.
fn ignored(sig: libc::c_int) -> bool {
    // SAFETY: sigaction with a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Installs the handling (a second guard while one is alive does nothing).
pub fn install() -> SignalGuard {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if state.actions.is_some() {
        return SignalGuard { installed: false };
    }
    if !state.defaults {
        for sig in SIGNALS {
            if !ignored(sig) {
                // Cannot fail for SIGINT/SIGTERM (only forbidden signals are refused).
                let _ = flag::register_conditional_default(sig, unguarded().clone());
            }
        }
        state.defaults = true;
    }
    flag_cell().store(false, Ordering::SeqCst);
    unguarded().store(false, Ordering::SeqCst);
    let actions = SIGNALS
        .iter()
        .filter_map(|&sig| flag::register(sig, flag_cell().clone()).ok())
        .collect();
    state.actions = Some(actions);
    SignalGuard { installed: true }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        if !self.installed {
            return;
        }
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        for id in state.actions.take().unwrap_or_default() {
            signal_hook::low_level::unregister(id);
        }
        unguarded().store(true, Ordering::SeqCst);
        flag_cell().store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn sigterm_sets_the_flag_while_guarded() {
        let g = install();
        assert!(!interrupted());
        // SAFETY: raising a signal whose handling is installed above.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(interrupted());
        let nested = install();
        drop(nested);
        assert!(
            interrupted(),
            "an inner guard leaves the outer one's flag alone"
        );
        drop(g);
        assert!(!interrupted());
    }

    /// After the guard drops, SIGTERM ends the process again, as before the guard: checked
    /// in a child run of this test binary (it would end the test harness itself).
    #[test]
    fn dropping_the_guard_restores_the_default_action() {
        if std::env::var_os("NSW_SIGNALS_CHILD").is_some() {
            drop(install());
            // SAFETY: raising a signal; its default action ends this child process.
            unsafe { libc::raise(libc::SIGTERM) };
            std::process::exit(0);
        }
        let exe = std::env::current_exe().unwrap();
        let out = Command::new(exe)
            .args([
                "--exact",
                "signals::tests::dropping_the_guard_restores_the_default_action",
                "--test-threads=1",
            ])
            .env("NSW_SIGNALS_CHILD", "1")
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGTERM),
            "the child survived SIGTERM after the guard dropped: {:?}",
            out.status
        );
    }
}
