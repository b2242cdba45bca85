//! Thin, checked wrappers over the Linux system calls the transports need that `libc`/`socket2`
//! do not wrap, and the few constants `libc` does not export.

use std::io;
use std::os::fd::RawFd;

/// The socket options the transports set, as `libc` exports them (re-exported so callers
/// keep naming them `sys::…`).
pub use libc::{
    PACKET_IGNORE_OUTGOING, SOL_PACKET, SO_ATTACH_FILTER, SO_BUSY_POLL, SO_NO_CHECK, SO_ZEROCOPY,
};

// Declared here because libc 0.2 lacks them:
/// SO_EE_ORIGIN_ZEROCOPY (linux/errqueue.h).
pub const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// SO_EE_CODE_ZEROCOPY_COPIED (linux/errqueue.h).
pub const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// UDPLITE_SEND_CSCOV (linux/udp.h): the sender's checksum coverage.
pub const UDPLITE_SEND_CSCOV: libc::c_int = 10;
/// UDPLITE_RECV_CSCOV (linux/udp.h): the least coverage the receiver accepts.
pub const UDPLITE_RECV_CSCOV: libc::c_int = 11;

/// Turns a -1 return into the thread's errno.
#[inline]
pub fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Turns a -1 `ssize_t` return into the thread's errno.
#[inline]
pub fn cvt_size(rc: libc::ssize_t) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// setsockopt with an `int` value.
pub fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its exact size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// getsockopt of an `int` value.
pub fn get_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

/// getsockopt into a byte buffer; returns the length the kernel wrote.
pub fn get_bytes(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf`.
    cvt(unsafe { libc::getsockopt(fd, level, name, buf.as_mut_ptr().cast(), &mut len) })?;
    Ok(len as usize)
}

/// `SK_MEMINFO_DROPS`: the index of sk_drops in SO_MEMINFO's array (linux/sock_diag.h).
const SK_MEMINFO_DROPS: usize = 8;

/// Packets the kernel dropped at this socket after routing them to it — a full receive buffer
/// above all, a bad checksum, a socket filter's verdict (sk_drops, what `ss -m` shows as `d`;
/// cumulative since the socket opened, 32 bits wide). `None` where SO_MEMINFO does not report it
/// (kernels before 4.6). Read outside timed loops: one getsockopt.
pub fn socket_drops(fd: RawFd) -> Option<u64> {
    let mut m = [0u8; 4 * (SK_MEMINFO_DROPS + 1)];
    let len = get_bytes(fd, libc::SOL_SOCKET, libc::SO_MEMINFO, &mut m).ok()?;
    let at = 4 * SK_MEMINFO_DROPS;
    let b = m.get(at..at + 4).filter(|_| len >= at + 4)?;
    Some(u64::from(u32::from_ne_bytes(b.try_into().ok()?)))
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a valid interface name"),
        ));
    }
    // SAFETY: ifreq is plain data (a name and a union of integers, addresses and a pointer
    // never dereferenced here) for which all-zero bytes are valid.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    Ok(r)
}

fn ioctl_ifreq(name: &str, req: libc::c_ulong) -> io::Result<libc::ifreq> {
    let mut r = ifreq(name)?;
    // A throwaway socket in the calling thread's network namespace.
    // SAFETY: plain socket(2) call.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `r` is a properly sized ifreq the kernel fills in.
    let rc = unsafe { libc::ioctl(fd, req as _, &mut r as *mut libc::ifreq) };
    let err = io::Error::last_os_error();
    // SAFETY: closing the fd we opened above.
    unsafe { libc::close(fd) };
    if rc < 0 {
        if err.raw_os_error() == Some(libc::ENODEV) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface named {name} in this network namespace (see `ip link`)"),
            ));
        }
        return Err(err);
    }
    Ok(r)
}

/// The MTU of an interface (SIOCGIFMTU).
pub fn if_mtu(name: &str) -> io::Result<u32> {
    let r = ioctl_ifreq(name, libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU filled in the union's ifru_mtu.
    let mtu = unsafe { r.ifr_ifru.ifru_mtu };
    Ok(mtu.max(0) as u32)
}

/// The hardware (MAC) address of an Ethernet-like interface (SIOCGIFHWADDR).
pub fn if_mac(name: &str) -> io::Result<[u8; 6]> {
    let r = ioctl_ifreq(name, libc::SIOCGIFHWADDR)?;
    // SAFETY: SIOCGIFHWADDR filled in the union's ifru_hwaddr.
    let hw = unsafe { r.ifr_ifru.ifru_hwaddr };
    let family = hw.sa_family;
    if family != libc::ARPHRD_ETHER && family != libc::ARPHRD_LOOPBACK {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("interface {name} is not Ethernet (ARPHRD {family}): the packet transport sends Ethernet frames"),
        ));
    }
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(hw.sa_data) {
        *m = b as u8;
    }
    Ok(mac)
}

/// The index of an interface.
pub fn if_index(name: &str) -> io::Result<u32> {
    let r = ifreq(name)?;
    // SAFETY: `r.name` is NUL-terminated.
    let i = unsafe { libc::if_nametoindex(r.ifr_name.as_ptr()) };
    if i == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface named {name} in this network namespace (see `ip link`)"),
        ));
    }
    Ok(i)
}

/// The interface that holds `ip` as one of its addresses (getifaddrs).
pub fn if_with_address(ip: std::net::IpAddr) -> io::Result<Option<String>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below.
    cvt(unsafe { libc::getifaddrs(&mut head) })?;
    let mut found = None;
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` walks the list getifaddrs returned.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr of the family it declares.
        let fam = unsafe { (*ifa.ifa_addr).sa_family } as libc::c_int;
        let addr: Option<std::net::IpAddr> = match fam {
            libc::AF_INET => {
                // SAFETY: family says sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                Some(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into())
            }
            libc::AF_INET6 => {
                // SAFETY: family says sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                Some(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into())
            }
            _ => None,
        };
        if addr == Some(ip) {
            // SAFETY: ifa_name is a NUL-terminated C string.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            found = Some(name.to_string_lossy().into_owned());
            break;
        }
    }
    // SAFETY: frees the list from getifaddrs exactly once.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}

/// Formats a MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn mac_string(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in m.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(m)
}

/// True when the process has an effective capability (CapEff in /proc/self/status).
pub fn has_capability(bit: u32) -> bool {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    s.lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1u64 << bit) != 0)
}

/// CAP_NET_ADMIN's bit number (linux/capability.h).
pub const CAP_NET_ADMIN: u32 = 12;
/// CAP_NET_RAW's bit number (linux/capability.h).
pub const CAP_NET_RAW: u32 = 13;

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP socket that is never read overflows: every datagram sent is either queued (and
    /// read back afterwards) or counted in its socket drops — the two add up exactly.
    #[test]
    fn socket_drops_count_what_a_full_buffer_refused() {
        use std::net::UdpSocket;
        use std::os::fd::AsRawFd;
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_int(rx.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 4096).unwrap();
        let before = socket_drops(rx.as_raw_fd()).expect("SO_MEMINFO reports drops");
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sent = 500u64;
        for _ in 0..sent {
            tx.send_to(&[7u8; 200], rx.local_addr().unwrap()).unwrap();
        }
        rx.set_nonblocking(true).unwrap();
        let mut queued = 0u64;
        let mut b = [0u8; 256];
        while rx.recv(&mut b).is_ok() {
            queued += 1;
        }
        let drops = socket_drops(rx.as_raw_fd()).unwrap() - before;
        assert!(drops > 0, "a 4 KiB buffer took all {sent} datagrams");
        assert_eq!(queued + drops, sent, "{queued} queued + {drops} dropped");
    }

    #[test]
    fn mac_round_trip() {
        let m = [0x02, 0, 0xab, 0xcd, 0xef, 0x10];
        assert_eq!(parse_mac(&mac_string(&m)), Some(m));
        assert_eq!(parse_mac("1:2:3"), None);
        assert_eq!(parse_mac("1:2:3:4:5:6:7"), None);
    }

    /// MTU, MAC and index of every interface here agree with sysfs (an independent source).
    #[test]
    fn interface_facts_match_sysfs() {
        let read = |n: &str, f: &str| {
            std::fs::read_to_string(format!("/sys/class/net/{n}/{f}"))
                .unwrap()
                .trim()
                .to_string()
        };
        for e in std::fs::read_dir("/sys/class/net").unwrap() {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            assert_eq!(if_mtu(&n).unwrap().to_string(), read(&n, "mtu"), "{n}");
            assert_eq!(
                if_index(&n).unwrap().to_string(),
                read(&n, "ifindex"),
                "{n}"
            );
            let ty: u16 = read(&n, "type").parse().unwrap();
            if ty == libc::ARPHRD_ETHER || ty == libc::ARPHRD_LOOPBACK {
                assert_eq!(mac_string(&if_mac(&n).unwrap()), read(&n, "address"), "{n}");
            } else {
                assert!(if_mac(&n).is_err(), "{n}");
            }
        }
    }

    #[test]
    fn loopback_facts() {
        assert_eq!(if_mac("lo").ok(), Some([0; 6]));
        assert!(if_mtu("lo").unwrap_or(0) >= 1500);
        assert!(if_index("lo").is_ok());
        assert!(if_index("nsw-no-such")
            .unwrap_err()
            .to_string()
            .contains("ip link"));
        assert_eq!(
            if_with_address(
                "127.0.0.1"
                    .parse()
                    .unwrap_or(std::net::IpAddr::from([0u8; 4]))
            )
            .ok()
            .flatten()
            .as_deref(),
            Some("lo")
        );
    }
}
