//! `--flows N`: N concurrent data connections of the session's transport, served on each
//! side by `--threads T` data threads. This folder is the driver every pattern's flows share:
//! the connections (`client`, `server`: each flow presents its number), the threads (`pool`)
//! with their flows and counts (`worker`) and epoll instance (`epoll`), and the one timed loop
//! (`driver`) that runs a pattern's per-flow state machine (`machine`). The machines live with
//! their patterns — stream (`stream/flow.rs`: each flow sends for the trial time), pingpong
//! (`pingpong/flow.rs`: neper's tcp_rr, one request outstanding per flow), rate
//! (`rate/flow.rs`: each flow on its own schedule) and the echo that serves the last two
//! (`echo/flow.rs`) — and each pattern registers its flows variant there
//! (`Registration::flows`). The engine's shared point loop drives a flows session like any
//! pattern.
//!
//! Both sides number the flows alike: after presenting the session cookie, the client
//! writes each connection's flow number (4 bytes, little-endian) and the server files the
//! connection under it, whatever order the accepts came in.

pub(crate) mod client;
pub(crate) mod driver;
mod epoll;
pub(crate) mod machine;
pub(crate) mod pool;
pub(crate) mod server;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod worker;

use netsweep_endpoint::{recv_message, send_message, Endpoint};
use netsweep_model::spec::Pattern;
use std::io;
use std::time::Duration;

/// What each data thread of a flows session holds at most: a receive buffer of the largest
/// message (at least 64 KiB), a send buffer of it when the server's threads send (replies),
/// and its flows' state; the session's own buffers are not allocated.
pub(crate) fn threads_memory(s: &super::BufferSizes, sends: bool) -> u64 {
    let rx = s.max_size.max(64 * 1024) as u64;
    let tx = if sends { s.max_size as u64 } else { 0 };
    rx.saturating_add(tx)
        .saturating_add(PER_THREAD)
        .saturating_mul(s.threads as u64)
}

/// A data thread's fixed state: its epoll events and counters.
const PER_THREAD: u64 = 64 * 1024;

/// Most data threads one side of a session runs, whatever the client asks.
pub const MAX_THREADS: usize = 256;

/// Most data threads a stream session runs by default: one per flow up to here, then flows
/// share them (at least one per CPU on a larger host).
pub const STREAM_THREADS: usize = 64;

/// Data threads per side: `asked`, or by default (`asked` 0) one per flow for a stream (at
/// most [`STREAM_THREADS`] or the CPUs, whichever is more) — a thread with one stream flow
/// lets its calls block, iperf2's way, which moved more bytes than flows sharing a thread in
/// epoll (docs/performance-flows.md) — and one per CPU this process may use for the other
/// patterns (neper's way: a request/response flow waits on the network, not the CPU). Never
/// more than the flows or [`MAX_THREADS`].
pub fn thread_count(asked: u32, flows: u32, pattern: Pattern) -> usize {
    let cpus = crate::meter::allowed_cpus().len().max(1);
    let t = match (asked, pattern) {
        (0, Pattern::Stream) => STREAM_THREADS.max(cpus),
        (0, _) => cpus,
        _ => asked as usize,
    };
    t.clamp(1, (flows.max(1) as usize).min(MAX_THREADS))
}

/// Writes flow number `index` on a fresh connection (after the cookie).
fn present_index(ep: &mut dyn Endpoint, index: u32) -> io::Result<()> {
    send_message(ep, &index.to_le_bytes()).map(|_| ())
}

/// Reads the flow number a fresh connection presents, waiting at most `timeout`.
pub(crate) fn read_index(ep: &mut dyn Endpoint, timeout: Duration) -> io::Result<u32> {
    ep.set_recv_timeout(Some(timeout))?;
    let mut b = [0u8; 4];
    recv_message(ep, &mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// Makes sure this process may open `flows` more descriptors: raises the soft
/// RLIMIT_NOFILE to the hard limit, and if that is still short says which limit and how to
/// raise it.
pub fn ensure_descriptors(flows: u32, side: &str) -> Result<(), String> {
    // Each flow is one socket; leave room for the control connection, logs and the rest.
    let need = flows as u64 + 64;
    let Some(limit) = crate::server::budget::raise_open_files() else {
        return Ok(());
    };
    let open = open_descriptors();
    if limit >= need + open {
        return Ok(());
    }
    Err(format!(
        "--flows {flows} needs about {} open files on the {side}, but its limit \
         (RLIMIT_NOFILE) is {limit} with {open} in use: raise it with `ulimit -n {}` (or \
         LimitNOFILE= for a service) before starting netsweep, or use fewer flows",
        need,
        need + open
    ))
}

/// Descriptors this process has open now.
fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// This process's resident memory (VmRSS), KiB.
fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vmrss(&s)
}

/// VmRSS from the text of /proc/PID/status, KiB.
pub fn parse_vmrss(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmrss_is_read_in_kib() {
        let s = "Name:\tnetsweep\nVmPeak:\t  9000 kB\nVmRSS:\t    4242 kB\nThreads:\t3\n";
        assert_eq!(parse_vmrss(s), Some(4242));
        assert_eq!(parse_vmrss("Name: x\n"), None);
        assert!(rss_kib().is_some_and(|k| k > 0));
    }

    #[test]
    fn threads_default_to_a_flow_each_for_streams_and_the_cpus_otherwise() {
        let cpus = crate::meter::allowed_cpus().len().max(1);
        for p in [Pattern::Stream, Pattern::Pingpong, Pattern::Rate] {
            assert_eq!(thread_count(8, 4, p), 4);
            assert_eq!(thread_count(2, 1000, p), 2);
            assert_eq!(thread_count(0, 1, p), 1);
            assert_eq!(thread_count(4096, 4096, p), MAX_THREADS);
        }
        assert_eq!(
            thread_count(0, 4096, Pattern::Pingpong),
            cpus.min(MAX_THREADS)
        );
        assert_eq!(thread_count(0, 4096, Pattern::Rate), cpus.min(MAX_THREADS));
        assert_eq!(thread_count(0, 8, Pattern::Stream), 8);
        assert_eq!(
            thread_count(0, 4096, Pattern::Stream),
            STREAM_THREADS.max(cpus).min(MAX_THREADS)
        );
    }

    #[test]
    fn a_short_descriptor_limit_is_raised_or_named_with_the_fix() {
        assert_eq!(ensure_descriptors(4, "client"), Ok(()));
        let e = ensure_descriptors(u32::MAX, "client").unwrap_err();
        assert!(
            e.contains("RLIMIT_NOFILE") && e.contains("ulimit -n"),
            "{e}"
        );
    }
}
