//! Helpers for tests that build labs: a hard check that the test can build them (root and the
//! tools), and a machine-wide lock so lab tests (in any test binary of the workspace) never run
//! at once — `clean()` removes every `nsw-` object, so it must not race another test's lab.
//!
//! Lab tests are marked `#[ignore = "needs root (lab namespaces): ./run-tests runs it as
//! root"]`: without root the test harness reports them as *ignored*, honestly, and
//! `./run-tests` as root runs them with `--include-ignored`. Once a lab test runs, a missing
//! prerequisite is a failure that names the fix, never a silent pass.

use crate::preflight::{is_root, missing_tools};
use std::fs::File;
use std::os::fd::AsRawFd;

/// The lock file shared by every lab test on the machine.
pub const LOCK_FILE: &str = "/tmp/netsweep-lab-tests.lock";

/// What keeps this process from building labs, or None when it can.
pub fn lab_blocker() -> Option<String> {
    if !is_root() {
        return Some(
            "needs root to create network namespaces: run it as root \
             (`sudo ./run-tests`, or `sudo cargo test … -- --include-ignored`)"
                .into(),
        );
    }
    let missing = missing_tools();
    if !missing.is_empty() {
        return Some(format!(
            "missing {}: apt-get install iproute2 nftables ethtool (./run-tests does it)",
            missing.join(", ")
        ));
    }
    None
}

/// Panics, naming `test` and the fix, unless this process can build labs.
pub fn require_labs(test: &str) {
    if let Some(why) = lab_blocker() {
        panic!("lab test {test} cannot run: {why}");
    }
}

/// [`require_labs`], then the machine-wide lab test lock: the preamble of every lab test.
pub fn lab_test(test: &str) -> LabTestLock {
    require_labs(test);
    lock().unwrap_or_else(|e| panic!("lab test {test}: cannot take the lock {LOCK_FILE}: {e}"))
}

/// Kept for lab tests written as `if !can_build_labs(name) { return; }`: it no longer skips —
/// it panics with the fix when labs cannot be built — so it only ever returns true. Mark such
/// tests `#[ignore = "needs root …"]` and call [`lab_test`] instead.
pub fn can_build_labs(test: &str) -> bool {
    require_labs(test);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blocker_matches_the_machine() {
        match lab_blocker() {
            None => assert!(is_root() && missing_tools().is_empty()),
            Some(why) => {
                assert!(!is_root() || !missing_tools().is_empty());
                assert!(
                    why.contains("root") || why.contains("apt-get install"),
                    "{why}"
                );
            }
        }
    }
}
