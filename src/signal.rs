//! Ctrl-C and SIGTERM (through signal-hook): the first one asks the run to stop after the
//! current trial and save what it measured; a second one exits at once, as the signal's
//! default action would.

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Installs the handling for SIGINT and SIGTERM and returns the flag the first signal sets.
pub fn install() -> Arc<AtomicBool> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for (sig, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
        // Registered first, so it sees the flag as the previous signal left it: a second
        // signal finds it set and takes the default action (the process ends by the signal).
        let r = flag::register_conditional_default(sig, interrupted.clone())
            .and_then(|_| flag::register(sig, interrupted.clone()));
        if let Err(e) = r {
            eprintln!("netsweep: cannot catch {name} ({e}); it will end the run without saving");
        }
    }
    interrupted
}
