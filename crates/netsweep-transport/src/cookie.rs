//! Binding a data path to its session: the client presents the 8-byte session cookie first.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// Length of the cookie on the wire.
pub const LEN: usize = 8;

/// Writes the cookie on a fresh stream connection.
pub fn present(stream: &mut impl Write, cookie: u64) -> io::Result<()> {
    stream.write_all(&cookie.to_be_bytes())
}

/// How long a fresh data connection may take to present its cookie, all 8 bytes together.
pub const PRESENT_WITHIN: Duration = Duration::from_secs(2);

/// Reads a cookie from a fresh stream connection by `deadline` — the whole cookie, not each
/// read: a connection trickling a byte at a time cannot stretch the wait (nor stall the
/// listener's accept loop behind it).
pub fn read_by(sock: &socket2::Socket, deadline: Instant) -> io::Result<u64> {
    let mut b = [0u8; LEN];
    let mut off = 0;
    while off < LEN {
        sock.set_read_timeout(Some(left(deadline, "the session cookie")?))?;
        match (&*sock).read(&mut b[off..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => off += n,
            Err(e) if is_wait(&e) => {}
            Err(e) => return Err(e),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Socket, Type};

    #[test]
    fn a_cookie_is_read_whole_by_the_deadline_however_it_trickles() {
        let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM, None).unwrap();
        (&a).write_all(&0x0102_0304_0506_0708u64.to_be_bytes())
            .unwrap();
        let soon = Instant::now() + Duration::from_secs(5);
        assert_eq!(read_by(&b, soon).unwrap(), 0x0102_0304_0506_0708);
        // A byte every 100 ms would take 800 ms; the deadline is 350 ms away: a time out,
        // whatever the scheduling (each read waits only for what is left).
        let t = std::thread::spawn(move || {
            for x in 0..8u8 {
                if (&a).write_all(&[x]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let e = read_by(&b, Instant::now() + Duration::from_millis(350)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        drop(b);
        t.join().unwrap();
    }
}
