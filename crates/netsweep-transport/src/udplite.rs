//! `udplite`: UDP-Lite (IPPROTO_UDPLITE = 136, RFC 3828) datagram sockets. The data path is
//! the IP datagram code in `ip.rs`. The checksum covers the whole datagram (the kernel's
//! default coverage); UDPLITE_SEND_CSCOV/RECV_CSCOV are not set.

use std::io;

/// Rewrites a socket(2) failure into the reason and the fix.
pub fn explain(e: io::Error) -> io::Error {
    let why = match e.raw_os_error() {
        Some(libc::EPROTONOSUPPORT | libc::ESOCKTNOSUPPORT) => {
            "this kernel has no UDP-Lite (removed from recent kernels, or built without it): use udp"
                .to_string()
        }
        _ => format!("cannot open a UDP-Lite socket: {e}"),
    };
    io::Error::new(e.kind(), why)
}
