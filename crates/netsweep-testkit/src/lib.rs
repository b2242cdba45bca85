//! netsweep-testkit: what every test suite of the workspace shares, kept out of the product
//! crates — root and tool checks that fail with the fix, a bounded wait, a free port — the
//! `netsweep` executable as integration tests drive it ([`exe`]), and the lab test support
//! ([`lab`]: the machine-wide lab lock, kernel counters as ground truth, the idle and stall
//! probes). A dev-dependency only: nothing shipped links it.

#![warn(missing_docs)]

pub mod exe;
pub mod lab;

use std::time::{Duration, Instant};

/// True when this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Panics with the fix unless running as root. Tests that call it are `#[ignore = "needs
/// root …"]`: without root the harness reports them ignored, and `./run-tests` as root runs
/// them (`--include-ignored`), so reaching this check without root is a mistake to report.
pub fn require_root(test: &str) {
    assert!(
        is_root(),
        "{test} needs root (network namespaces, CAP_NET_RAW): run it as root, e.g. `sudo ./run-tests`"
    );
}

/// True when `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Panics naming the Debian package to install unless `tool` is on the PATH.
pub fn require_tool(test: &str, tool: &str, package: &str) {
    assert!(
        have(tool),
        "{test} needs {tool}: apt-get install -y {package} (./run-tests installs it as root)"
    );
}

/// Polls `f` every 50 ms until it holds or `timeout` passes; its last answer.
pub fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

/// A TCP port of 127.0.0.1 free a moment ago (the kernel's pick).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}
