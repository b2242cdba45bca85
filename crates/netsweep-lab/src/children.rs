//! The runner's child processes: waiting until `netsweep serve` listens (read from
//! /proc/<pid>/net/tcp{,6}, so no stray connection reaches the server) and stopping a child
//! with SIGTERM, then SIGKILL after a grace period.

use crate::signals;
use std::process::Child;
use std::time::{Duration, Instant};

/// How long a child gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Poll interval while waiting for children.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// Whether the server came up.
pub(crate) enum Ready {
    Yes,
    No(String),
    Interrupted,
}

/// Waits until something in the server's namespace listens on TCP `port` (read from
/// /proc/<pid>/net/tcp{,6}, which show the namespace of that process), the server exits, or
/// time runs out. No connection is made, so the server sees no stray client.
pub(crate) fn wait_listening(server: &mut Child, port: u16, timeout: Duration) -> Ready {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(st)) = server.try_wait() {
            return Ready::No(format!("netsweep serve exited early ({st})"));
        }
        if listening(server.id(), port) {
            return Ready::Yes;
        }
        if signals::interrupted() {
            return Ready::Interrupted;
        }
        if Instant::now() >= deadline {
            return Ready::No(format!(
                "netsweep serve did not listen on port {port} within {} s",
                timeout.as_secs()
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// Whether a TCP socket in `pid`'s namespace listens on `port`.
pub fn listening(pid: u32, port: u16) -> bool {
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{f}"))
            .map(|t| proc_net_listens(&t, port))
            .unwrap_or(false)
    })
}

/// Whether /proc/net/tcp text has a LISTEN (state 0A) socket on `port`.
pub fn proc_net_listens(text: &str, port: u16) -> bool {
    text.lines().skip(1).any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let local_port = w
            .get(1)
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| u16::from_str_radix(p, 16).ok());
        local_port == Some(port) && w.get(3) == Some(&"0A")
    })
}

/// SIGTERM, then SIGKILL after a grace period; reaps the child.
pub(crate) fn stop(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(POLL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_listening_sockets() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0112A8C6:1C20 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n   1: 0112A8C6:1C21 0212A8C6:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n";
        assert!(proc_net_listens(t, 7200));
        assert!(!proc_net_listens(t, 7201), "established, not listening");
        assert!(!proc_net_listens(t, 80));
        assert!(!proc_net_listens("", 7200));
    }
}
