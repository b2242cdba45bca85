//! A server's data sockets as iperf3 sets them up: the options a client asks for (`-w`, `-N`,
//! `-M`, `-S`, `-C`, `--dont-fragment`, `--fq-rate`) on each data socket, and a UDP stream's
//! "accept" — a socket on the server's port connected to the address a connect datagram came
//! from, which answers it.

use super::streams::TICK;
use super::{codes, SocketOptions};
use crate::wire;
use socket2::{Domain, SockRef, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;

/// An option that could not be set: iperf3's error code for it and the errno.
#[derive(Debug)]
pub(crate) struct OptionError {
    pub(crate) code: i32,
    pub(crate) what: &'static str,
    pub(crate) source: io::Error,
}

/// setsockopt of one int.
pub(crate) fn set_int(fd: i32, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: setsockopt with a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether a socket at `local` carries IPv6 packets: an IPv6 address that is not v4-mapped.
/// A dual-stack server's (`[::]`) sockets for IPv4 clients are AF_INET6 with v4-mapped
/// addresses, and their packets are IPv4: the TOS and don't-fragment they need are IPv4's
/// (IPV6_TCLASS left IPv4 clients' packets unmarked, issue 41).
pub(crate) fn carries_v6(local: SocketAddr) -> bool {
    match local {
        SocketAddr::V4(_) => false,
        SocketAddr::V6(a) => a.ip().to_ipv4_mapped().is_none(),
    }
}

/// Sets the options every data socket gets; `tcp` adds the TCP-only ones.
fn apply(s: SockRef<'_>, o: &SocketOptions, tcp: bool, v6: bool) -> Result<(), OptionError> {
    let err = |code, what| move |source| OptionError { code, what, source };
    let fd = s.as_raw_fd();
    if let Some(w) = o.window {
        s.set_send_buffer_size(w as usize)
            .and_then(|()| s.set_recv_buffer_size(w as usize))
            .map_err(err(codes::IESETWINDOWSIZE, "the window (-w)"))?;
    }
    if let Some(tos) = o.tos {
        let r = if v6 {
            s.set_tclass_v6(u32::from(tos))
        } else {
            s.set_tos_v4(u32::from(tos))
        };
        r.map_err(err(codes::IESETTOS, "the TOS byte (-S)"))?;
    }
    if o.dont_fragment && !v6 {
        set_int(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )
        .map_err(err(codes::IESETDONTFRAGMENT, "don't-fragment"))?;
    }
    if let Some(rate) = o.fqrate {
        let bytes = (rate / 8).min(u64::from(u32::MAX)) as i32;
        set_int(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, bytes)
            .map_err(err(codes::IESETPACING, "the pacing rate (--fq-rate)"))?;
    }
    if !tcp {
        return Ok(());
    }
    if o.nodelay {
        s.set_tcp_nodelay(true)
            .map_err(err(codes::IESETNODELAY, "TCP_NODELAY (-N)"))?;
    }
    if let Some(mss) = o.mss {
        set_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, mss as i32)
            .map_err(err(codes::IESETMSS, "the MSS (-M)"))?;
    }
    if let Some(cc) = &o.congestion {
        // SAFETY: setsockopt with a pointer to the name's bytes and their length.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                cc.as_ptr().cast(),
                cc.len() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(OptionError {
                code: codes::IESETCONGESTION,
                what: "the congestion control (-C)",
                source: io::Error::last_os_error(),
            });
        }
    }
    Ok(())
}

/// Prepares an accepted TCP data connection: the client's options and the ticking timeouts.
pub(crate) fn tcp_stream(s: &TcpStream, o: &SocketOptions) -> Result<(), OptionError> {
    let v6 = s.local_addr().is_ok_and(carries_v6);
    apply(SockRef::from(s), o, true, v6)?;
    s.set_read_timeout(Some(TICK))
        .and_then(|()| s.set_write_timeout(Some(TICK)))
        .map_err(|source| OptionError {
            code: codes::IEINITSTREAM,
            what: "a timeout",
            source,
        })
}

/// A UDP stream: a socket bound to `local` (the server's address and iperf3 port, shared
/// with the listener through SO_REUSEADDR) and connected to `peer`, so the kernel hands it
/// the peer's datagrams; it answers the connect datagram.
pub(crate) fn udp_stream(
    local: SocketAddr,
    peer: SocketAddr,
    o: &SocketOptions,
) -> Result<UdpSocket, OptionError> {
    let init = |source| OptionError {
        code: codes::IESTREAMACCEPT,
        what: "a UDP data socket",
        source,
    };
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, None).map_err(init)?;
    s.set_reuse_address(true).map_err(init)?;
    s.bind(&local.into()).map_err(init)?;
    s.connect(&peer.into()).map_err(init)?;
    apply(SockRef::from(&s), o, false, carries_v6(local))?;
    if o.window.is_none() {
        // Room for a burst at high rates; the kernel clamps it to net.core.rmem_max. The send
        // buffer stays the kernel's default, as iperf3 -s leaves it: a datagram queued in a
        // shaper counts against it, so a sender above the link rate (`-u -R -b 60M` across
        // 50 Mbit/s) is held back at the link's rate instead of overflowing the shaper's
        // queue (4 MiB lost 17% there, iperf3 -s nothing).
        let _ = s.set_recv_buffer_size(4 << 20);
    }
    s.set_read_timeout(Some(TICK)).map_err(init)?;
    s.set_write_timeout(Some(TICK)).map_err(init)?;
    let s: UdpSocket = s.into();
    // iperf3 writes the reply as an int in its own byte order; so does a client read it.
    s.send(&wire::UDP_CONNECT_REPLY.to_ne_bytes())
        .map_err(|source| OptionError {
            code: codes::IESTREAMWRITE,
            what: "the reply to the UDP connect datagram",
            source,
        })?;
    Ok(s)
}

/// The congestion control a TCP socket uses.
pub(crate) fn congestion_used(s: &TcpStream) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most len bytes into the live buffer.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return None;
    }
    let b = &buf[..(len as usize).min(buf.len())];
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).ok().map(str::to_string)
}

/// Whether `b` is a UDP stream's connect datagram (iperf3's int in either byte order, or the
/// legacy value).
pub fn is_udp_connect(b: &[u8]) -> bool {
    let Ok(a) = <[u8; 4]>::try_from(b) else {
        return false;
    };
    [u32::from_le_bytes(a), u32::from_be_bytes(a)]
        .iter()
        .any(|v| *v == wire::UDP_CONNECT_MSG || *v == 123_456_789)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_datagrams_in_either_order() {
        assert!(is_udp_connect(&wire::udp_connect_msg()));
        assert!(is_udp_connect(&wire::UDP_CONNECT_MSG.to_be_bytes()));
        assert!(is_udp_connect(&123_456_789u32.to_le_bytes()));
        assert!(!is_udp_connect(&[0; 4]));
        assert!(!is_udp_connect(&[0x39, 0x38, 0x37, 0x36, 0]));
    }

    #[test]
    fn a_udp_stream_answers_its_peer_from_the_servers_port() {
        let listener = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
        listener.set_reuse_address(true).unwrap();
        listener
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        let local = listener.local_addr().unwrap().as_socket().unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(local).unwrap();
        let peer = client.local_addr().unwrap();
        let s = udp_stream(local, peer, &SocketOptions::default()).unwrap();
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut b = [0u8; 8];
        let n = client.recv(&mut b).unwrap();
        assert!(wire::is_udp_connect_reply(&b[..n]));
        // The peer's next datagram goes to the connected socket, not the listener.
        client.send(b"data").unwrap();
        let n = s.recv(&mut b).unwrap();
        assert_eq!(&b[..n], b"data");
    }

    fn get_int(fd: i32, level: i32, name: i32) -> i32 {
        let mut v = 0i32;
        let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
        // SAFETY: getsockopt into a live c_int and its size.
        let r = unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut i32).cast(), &mut len) };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        v
    }

    fn marked() -> SocketOptions {
        SocketOptions {
            tos: Some(0x28),
            dont_fragment: true,
            ..SocketOptions::default()
        }
    }

    /// A dual-stack listener (`[::]`), or None where this host has no IPv6.
    fn dual_stack(ty: Type) -> Option<Socket> {
        let s = Socket::new(Domain::IPV6, ty, None).ok()?;
        s.set_only_v6(false).ok()?;
        s.set_reuse_address(true).ok()?;
        s.bind(&"[::]:0".parse::<SocketAddr>().unwrap().into())
            .ok()?;
        Some(s)
    }

    #[test]
    fn v4_mapped_tcp_streams_get_the_ipv4_tos_and_dont_fragment() {
        assert!(!carries_v6("[::ffff:127.0.0.1]:5201".parse().unwrap()));
        assert!(carries_v6("[::1]:5201".parse().unwrap()));
        assert!(!carries_v6("127.0.0.1:5201".parse().unwrap()));
        let Some(l) = dual_stack(Type::STREAM) else {
            eprintln!("no IPv6 on this host: the dual-stack half is not run");
            return;
        };
        l.listen(4).unwrap();
        let port = l.local_addr().unwrap().as_socket().unwrap().port();
        let _c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (a, _) = l.accept().unwrap();
        let a: TcpStream = a.into();
        assert!(a.local_addr().unwrap().is_ipv6(), "a v4-mapped socket");
        tcp_stream(&a, &marked()).unwrap();
        let fd = a.as_raw_fd();
        assert_eq!(get_int(fd, libc::IPPROTO_IP, libc::IP_TOS), 0x28);
        assert_eq!(
            get_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER),
            libc::IP_PMTUDISC_DO
        );
    }

    #[test]
    fn a_v4_mapped_udp_stream_marks_what_an_ipv4_client_receives() {
        let Some(l) = dual_stack(Type::DGRAM) else {
            eprintln!("no IPv6 on this host: not run");
            return;
        };
        let port = l.local_addr().unwrap().as_socket().unwrap().port();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let on = 1i32;
        // SAFETY: setsockopt with a live c_int.
        let r = unsafe {
            libc::setsockopt(
                client.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_RECVTOS,
                (&on as *const i32).cast(),
                4,
            )
        };
        assert_eq!(r, 0);
        let peer: SocketAddr =
            format!("[::ffff:127.0.0.1]:{}", client.local_addr().unwrap().port())
                .parse()
                .unwrap();
        let local: SocketAddr = format!("[::ffff:127.0.0.1]:{port}").parse().unwrap();
        let _s = udp_stream(local, peer, &marked()).unwrap();
        // The connect reply went out marked: read its TOS from IP_RECVTOS's control message.
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 16];
        let mut cmsg = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: a zeroed msghdr pointing at live buffers.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = cmsg.as_mut_ptr().cast();
        m.msg_controllen = std::mem::size_of_val(&cmsg);
        // SAFETY: recvmsg into the buffers above.
        let n = unsafe { libc::recvmsg(client.as_raw_fd(), &mut m, 0) };
        assert!(n > 0, "{}", io::Error::last_os_error());
        // SAFETY: walking the control messages recvmsg wrote.
        let tos = unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&m);
            let mut tos = None;
            while !c.is_null() {
                if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                    tos = Some(*libc::CMSG_DATA(c));
                }
                c = libc::CMSG_NXTHDR(&m, c);
            }
            tos
        };
        assert_eq!(tos, Some(0x28), "the IPv4 client's datagram is marked");
    }
}
