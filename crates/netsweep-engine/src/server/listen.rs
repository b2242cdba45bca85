//! Where a server listens by default: `[::]` with IPV6_V6ONLY off, so IPv4 and IPv6 clients
//! both reach it, as `iperf3 -s` listens (issue 41); `0.0.0.0` where the host has no IPv6,
//! with the reason, so the startup line can say so.

use socket2::{Domain, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};

/// The dual-stack address, `[::]`.
pub const DUAL_STACK: IpAddr = IpAddr::V6(Ipv6Addr::UNSPECIFIED);

/// Whether an error binding `[::]` means the host has no IPv6 (rather than a busy port).
pub fn no_ipv6(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL | libc::EPROTONOSUPPORT)
    )
}

/// A TCP listener on `addr`; on `[::]`, dual-stack whatever `net.ipv6.bindv6only` says.
pub fn tcp(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        s.set_only_v6(false)?;
    }
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

/// The address to listen on with no `--bind`: `[::]` when this host can open a dual-stack
/// socket, else `0.0.0.0` and why IPv6 is not there.
pub fn default_ip() -> (IpAddr, Option<String>) {
    match Socket::new(Domain::IPV6, Type::STREAM, None).and_then(|s| {
        s.set_only_v6(false)?;
        s.bind(&SocketAddr::new(DUAL_STACK, 0).into())
    }) {
        Ok(()) => (DUAL_STACK, None),
        Err(e) => (IpAddr::V4(Ipv4Addr::UNSPECIFIED), Some(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    #[test]
    fn the_default_listener_takes_ipv4_and_ipv6_clients() {
        let (ip, why) = default_ip();
        if let Some(why) = why {
            assert_eq!(ip, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            eprintln!("no IPv6 here ({why}): the fallback is 0.0.0.0");
            return;
        }
        let l = tcp(SocketAddr::new(ip, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        for client in ["127.0.0.1", "::1"] {
            let c = TcpStream::connect((client, port));
            assert!(c.is_ok(), "{client}: {c:?}");
            let (_, peer) = l.accept().unwrap();
            assert_eq!(peer.ip().to_canonical().to_string(), client);
        }
        assert!(no_ipv6(&io::Error::from_raw_os_error(libc::EAFNOSUPPORT)));
        assert!(!no_ipv6(&io::Error::from_raw_os_error(libc::EADDRINUSE)));
    }
}
