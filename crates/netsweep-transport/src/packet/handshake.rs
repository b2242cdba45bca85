//! The hello/acknowledgement handshake of a raw-frame session, over any [`FramePath`]: an
//! AF_PACKET socket (`packet`) or an AF_XDP socket (`xdp`). The client sends hello frames
//! carrying the full 8-byte session cookie to the server's MAC every 200 ms until acknowledged;
//! the server learns the client's MAC from the first hello's source address.

use super::frame::{check, header, set_len, Link, FRAME_HEADER, KIND_ACK, KIND_HELLO};
use crate::cookie;
use std::io;
use std::time::{Duration, Instant};

/// How often the client repeats its hello until the server acknowledges it.
const HELLO_EVERY: Duration = Duration::from_millis(200);

/// A path that carries whole frames: netsweep header (with the Ethernet header) plus payload.
pub(crate) trait FramePath {
    /// Sends one frame.
    fn send_frame(&mut self, h: &[u8; FRAME_HEADER], payload: &[u8]) -> io::Result<()>;
    /// Receives one frame within `wait`: its length (header included), or `None` when the
    /// wait ended without one.
    fn recv_frame(
        &mut self,
        h: &mut [u8; FRAME_HEADER],
        payload: &mut [u8],
        wait: Duration,
    ) -> io::Result<Option<usize>>;
}

/// Whether the frame in `h`/`b` of length `n` is `kind` carrying the cookie `want`.
fn carries(h: &[u8; FRAME_HEADER], b: &[u8], n: Option<usize>, want: u64, kind: u8) -> bool {
    n.and_then(|n| check(h, n, crate::packet::tag_of(want), kind)) == Some(cookie::LEN)
        && b[..cookie::LEN] == want.to_be_bytes()
}

/// Server: waits until `deadline` for the client's hello carrying `want`; returns the
/// client's MAC. The caller then narrows its filter and calls [`acknowledge`].
pub(crate) fn await_hello(
    p: &mut impl FramePath,
    want: u64,
    deadline: Instant,
) -> io::Result<[u8; 6]> {
    let mut h = [0u8; FRAME_HEADER];
    let mut b = [0u8; 64];
    loop {
        let wait = cookie::left(deadline, "the client's hello frame")?;
        let n = p.recv_frame(&mut h, &mut b, wait)?;
        if carries(&h, &b, n, want, KIND_HELLO) {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&h[6..12]);
            return Ok(mac);
        }
    }
}

/// Server: acknowledges the hello of `peer`.
pub(crate) fn acknowledge(
    p: &mut impl FramePath,
    link: &Link,
    peer: &[u8; 6],
    want: u64,
) -> io::Result<()> {
    let mut ack = header(peer, &link.mac, crate::packet::tag_of(want), KIND_ACK);
    set_len(&mut ack, cookie::LEN);
    p.send_frame(&ack, &want.to_be_bytes())
}

/// Client: sends hellos carrying `want` to `peer` until one is acknowledged or `deadline`
/// passes. Returns the hellos sent.
pub(crate) fn hello(
    p: &mut impl FramePath,
    link: &Link,
    peer: &[u8; 6],
    want: u64,
    deadline: Instant,
) -> io::Result<u64> {
    let mut hello = header(peer, &link.mac, crate::packet::tag_of(want), KIND_HELLO);
    set_len(&mut hello, cookie::LEN);
    let mut h = [0u8; FRAME_HEADER];
    let mut b = [0u8; 64];
    let mut sent = 0;
    loop {
        p.send_frame(&hello, &want.to_be_bytes()).map_err(|e| {
            io::Error::new(e.kind(), format!("sending the hello on {}: {e}", link.name))
        })?;
        sent += 1;
        let until = Instant::now()
            + cookie::left(deadline, "the server's acknowledgement frame")?.min(HELLO_EVERY);
        while let Ok(wait) = cookie::left(until, "") {
            let n = p.recv_frame(&mut h, &mut b, wait)?;
            if carries(&h, &b, n, want, KIND_ACK) {
                return Ok(sent);
            }
        }
    }
}
