//! Socket knobs: applied with setsockopt, read back with getsockopt, reported as granted.

use netsweep_proto::messages::{GrantedKnobs, Knobs};
use socket2::Socket;
use std::io;

/// Applies the buffer knobs common to every socket type. Errors name the knob.
pub fn apply_buffers(sock: &Socket, knobs: &Knobs) -> io::Result<()> {
    if let Some(n) = knobs.sndbuf {
        sock.set_send_buffer_size(n as usize)
            .map_err(|e| io::Error::new(e.kind(), format!("setting SO_SNDBUF to {n}: {e}")))?;
    }
    if let Some(n) = knobs.rcvbuf {
        sock.set_recv_buffer_size(n as usize)
            .map_err(|e| io::Error::new(e.kind(), format!("setting SO_RCVBUF to {n}: {e}")))?;
    }
    Ok(())
}

/// Reads the knobs back from the kernel. Linux doubles SO_SNDBUF/SO_RCVBUF for bookkeeping
/// overhead and clamps them to net.core.[rw]mem_max: a note says when the grant differs.
pub fn granted(sock: &Socket, asked: &Knobs, tcp: bool) -> GrantedKnobs {
    let mut g = GrantedKnobs {
        sndbuf: sock.send_buffer_size().ok().map(|n| n as u64),
        rcvbuf: sock.recv_buffer_size().ok().map(|n| n as u64),
        buffer_offset: asked.buffer_offset,
        ..Default::default()
    };
    if tcp {
        g.nodelay = sock.tcp_nodelay().ok();
        g.congestion_control = congestion_control(sock);
    }
    for (name, want, got) in [
        ("sndbuf", asked.sndbuf, g.sndbuf),
        ("rcvbuf", asked.rcvbuf, g.rcvbuf),
    ] {
        if let (Some(w), Some(got)) = (want, got) {
            if got != w * 2 {
                g.notes.push(format!(
                    "{name}: asked {w}, kernel granted {got} (Linux grants twice the request up to net.core.{}mem_max)",
                    if name == "sndbuf" { "w" } else { "r" }
                ));
            }
        }
    }
    g
}

/// The TCP congestion control algorithm of a socket (TCP_CONGESTION).
pub fn congestion_control(sock: &Socket) -> Option<String> {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let s = &buf[..len as usize];
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    Some(String::from_utf8_lossy(&s[..end]).into_owned())
}
