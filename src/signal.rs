//! Ctrl-C and SIGTERM (through signal-hook): the first one asks the run to stop after the
//! current trial and save what it measured; a second one exits at once, as the signal's
//! default action would.

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::low_level;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Installs the handling for SIGINT and SIGTERM and returns the flag the first signal sets.
pub fn install() -> Arc<AtomicBool> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for (sig, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
        let flag = interrupted.clone();
        // One atomic swap decides which signal is first, even when two arrive at once on two
        // threads (checking, then setting, let both pass as "first"): the first only sets the
        // flag, any later one takes the signal's default action (the process ends by it).
        // SAFETY: the handler does only async-signal-safe work: an atomic swap and, for a
        // second signal, signal-hook's emulation of the default action.
        let r = unsafe {
            low_level::register(sig, move || {
                if flag.swap(true, Ordering::SeqCst) {
                    let _ = low_level::emulate_default_handler(sig);
                }
                // A trial's own waits look at this one (a rate sender ends its trial now).
                netsweep_engine::stop::request();
            })
        };
        if let Err(e) = r {
            eprintln!("netsweep: cannot catch {name} ({e}); it will end the run without saving");
        }
    }
    interrupted
}

/// Lets a closed stdout end the process quietly, as it ends `cat` or `ls`: `netsweep list |
/// head` exits by SIGPIPE instead of panicking in `println!`. For the commands that just
/// print, and for `scenario` once its runs are saved; `run` and `serve` keep SIGPIPE ignored,
/// so a reader going away never costs a measurement (the sink drops stdout and keeps saving
/// the results file).
pub fn quiet_broken_pipe() {
    // SAFETY: setting a signal's disposition is process-wide and thread-safe; SIG_DFL is a
    // valid disposition for SIGPIPE and no handler of ours is replaced.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
