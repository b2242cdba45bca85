//! Binding a data path to its session: the client presents the 8-byte session cookie first.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// Length of the cookie on the wire.
pub const LEN: usize = 8;

/// Writes the cookie on a fresh stream connection.
pub fn present(stream: &mut impl Write, cookie: u64) -> io::Result<()> {
    stream.write_all(&cookie.to_be_bytes())
}

/// Reads a cookie from a fresh stream connection; the stream's read timeout bounds the wait.
pub fn read(stream: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; LEN];
    stream.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

/// Time left until `deadline`, or a TimedOut error naming what was awaited.
pub fn left(deadline: Instant, what: &str) -> io::Result<Duration> {
    let d = deadline.saturating_duration_since(Instant::now());
    if d.is_zero() {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("timed out waiting for {what}"),
        ))
    } else {
        Ok(d)
    }
}

/// A wait that ended without news — its timeout, or a signal — to retry until the deadline.
///
/// EINTR counts: a socket with SO_RCVTIMEO is not restarted after a signal, and a signal that
/// is ignored still wakes the thread when another thread blocks it. `netsweep serve` gets
/// SIGCHLD from the tools it runs for host facts while another session waits for its client's
/// data connection; taking that for a failure refused the client.
pub fn is_wait(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
