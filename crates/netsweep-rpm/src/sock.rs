//! The sockets under the HTTP connections: TCP_NOTSENT_LOWAT, which the draft asks of both
//! ends so that data waits in the application rather than in the socket's send buffer (and a
//! probe queued behind it is not), the TLS layer's matching limit, and a connect that times
//! its handshake.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// The unsent bytes a socket may hold before it stops reporting writable: 16 KiB.
pub const NOTSENT_LOWAT: u32 = 16 << 10;

/// The TLS records a connection may hold encrypted and unsent above its socket: 16 KiB, as
/// much as the socket's low-water mark (rustls's own default is 64 KiB). Data beyond it waits
/// in the HTTP/2 layer, whose frames of different streams interleave, so a probe's answer
/// waits behind this much of a load's, not behind everything the load has buffered.
pub const TLS_BUFFER: usize = 16 << 10;

/// Sets TCP_NOTSENT_LOWAT and TCP_NODELAY on `s`.
pub fn tune(s: &TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    let v: libc::c_int = NOTSENT_LOWAT as libc::c_int;
    // SAFETY: a valid socket descriptor, and a c_int the size the option expects.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Connects to the first of `addrs` that answers within `timeout` each, tuned; with the
/// time the TCP handshake took.
pub async fn connect(addrs: &[SocketAddr], timeout: Duration) -> io::Result<(TcpStream, Duration)> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
    for a in addrs {
        let t0 = Instant::now();
        match tokio::time::timeout(timeout, TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                let took = t0.elapsed();
                tune(&s)?;
                return Ok((s, took));
            }
            Ok(Err(e)) => last = io::Error::new(e.kind(), format!("{a}: {e}")),
            Err(_) => {
                last = io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{a}: no answer within {:.1} s", timeout.as_secs_f64()),
                )
            }
        }
    }
    Err(last)
}
