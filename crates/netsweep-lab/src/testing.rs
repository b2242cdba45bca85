//! Helpers for tests that build labs: a loud skip when not root, and a machine-wide lock so
//! lab tests (in any test binary of the workspace) never run at once — `clean()` removes every
//! `nsw-` object, so it must not race another test's lab.

use crate::preflight::{is_root, missing_tools};
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;

/// The lock file shared by every lab test on the machine.
pub const LOCK_FILE: &str = "/tmp/netsweep-lab-tests.lock";

/// Writes straight to the stderr stream, past the test harness's output capture.
fn loud(line: &str) {
    let _ = std::io::stderr().write_all(format!("\n!!!!! {line} !!!!!\n").as_bytes());
}

/// Returns true when the test can build labs; otherwise prints a loud `SKIPPED` line to
/// stderr (not captured by the test harness) naming the test and why, and returns false.
pub fn can_build_labs(test: &str) -> bool {
    if !is_root() {
        loud(&format!(
            "SKIPPED (needs root): {test} — run `sudo cargo test -p netsweep-lab` to include it"
        ));
        return false;
    }
    let missing = missing_tools();
    if !missing.is_empty() {
        loud(&format!(
            "SKIPPED (missing {}): {test} — apt-get install iproute2 nftables ethtool",
            missing.join(", ")
        ));
        return false;
    }
    true
}

/// Holds the machine-wide lab test lock until dropped.
#[derive(Debug)]
pub struct LabTestLock {
    _file: File,
}

/// Takes the machine-wide lab test lock, waiting for other lab tests to finish.
pub fn lock() -> std::io::Result<LabTestLock> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_FILE)
        .or_else(|_| File::open(LOCK_FILE))?;
    // SAFETY: flock on an open descriptor; blocks until the lock is ours.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(LabTestLock { _file: file })
}

/// A run id unique to this test process and `tag` (≤ 24 characters).
pub fn run_id(tag: &str) -> String {
    let mut tag: String = tag
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(10)
        .collect();
    if tag.is_empty() {
        tag.push('t');
    }
    format!("{tag}{}", std::process::id() % 1_000_000)
}
