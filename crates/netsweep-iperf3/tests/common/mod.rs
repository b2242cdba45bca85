//! Shared helpers of the iperf3 tests: a real `iperf3 -s -1` on a free port, killed when dropped.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Panics with the fix unless `iperf3` is installed.
pub fn require_iperf3() {
    let ok = Command::new("iperf3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "iperf3 is missing: apt-get install iperf3 (./run-tests installs it as root)"
    );
}

/// Whether something listens on TCP `port` in this thread's network namespace (from
/// /proc/thread-self/net/tcp*: a lab thread's namespace is its own, not its process's).
pub fn listening(port: u16) -> bool {
    sockets(port, "0A") > 0
}

/// How many TCP sockets of this network namespace have local port `port` in state `st` (the
/// kernel's hex code: `0A` listening, `01` established).
pub fn sockets(port: u16, st: &str) -> usize {
    let want = format!(":{port:04X}");
    ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .map(|t| {
            t.lines()
                .filter(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    w.len() > 3 && w[1].ends_with(&want) && w[3] == st
                })
                .count()
        })
        .sum()
}

/// A running `iperf3 -s -1` (one test, then it exits).
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// Starts `iperf3 -s -1 -B 127.0.0.1` on a free port (retrying when another process took
    /// it first), returning once it listens.
    pub fn start() -> Server {
        require_iperf3();
        for _ in 0..10 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = Command::new("iperf3")
                .args(["-s", "-1", "-B", "127.0.0.1", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawning iperf3");
            let mut s = Server {
                child,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
            };
            if s.wait_listening(|| listening(port)) {
                return s;
            }
        }
        panic!("iperf3 -s did not come up on a free port in 10 tries");
    }

    /// Waits (at most 5 s) until `listening` says the server listens; false when it exited or
    /// did not come up.
    pub fn wait_listening(&mut self, listening: impl Fn() -> bool) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if listening() {
                return true;
            }
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Waits (bounded) for the one-off server to exit after its test; true when it did.
    pub fn exited(&mut self) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if self.child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
