//! The packet frame (Ethernet header, netsweep header, payload) and the AF_PACKET socket
//! plumbing: open, filter, bind, send and receive one frame, find the interface.

use super::{probe, ETHERTYPE, HEADER};
use crate::{knobs, sys};
use netsweep_model::spec::Transport;
use netsweep_proto::messages::Knobs;
use netsweep_tool as tool;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Ethernet header bytes.
pub(crate) const ETH: usize = 14;
/// Ethernet plus netsweep header bytes in front of every payload.
pub const FRAME_HEADER: usize = ETH + HEADER as usize;

pub(crate) const KIND_C2S: u8 = 1;
pub(crate) const KIND_S2C: u8 = 2;
pub(crate) const KIND_HELLO: u8 = 3;
pub(crate) const KIND_ACK: u8 = 4;
pub(super) const VERSION: u8 = 1;

pub(super) fn open_socket() -> io::Result<OwnedFd> {
    // Protocol 0: nothing is received until bind() names the EtherType, after the filter.
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(probe().err().map_or_else(io::Error::last_os_error, |why| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("packet transport: {why}"),
            )
        }));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Keeps only frames with session `tag` and kind `a` or `b` (offsets include the Ethernet header).
pub(super) fn attach_filter(fd: RawFd, tag: u32, a: u8, b: u8) -> io::Result<()> {
    let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let mut prog = [
        ins(0x20, 0, 0, ETH as u32),     // ld  [14]       tag
        ins(0x15, 0, 4, tag),            // jeq #tag, else drop
        ins(0x30, 0, 0, ETH as u32 + 4), // ldb [18]       kind
        ins(0x15, 1, 0, u32::from(a)),   // jeq #a → accept
        ins(0x15, 0, 1, u32::from(b)),   // jeq #b → accept, else drop
        ins(0x06, 0, 0, u32::MAX),       // accept whole frame
        ins(0x06, 0, 0, 0),              // drop
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `prog`, live for the call; the kernel copies it.
    sys::cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            sys::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    })
    .map(drop)
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("attaching the packet session filter: {e}"),
        )
    })
}

pub(super) fn bind(fd: RawFd, ifindex: u32, iface: &str) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETHERTYPE.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: a valid sockaddr_ll and its size.
    sys::cvt(unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("binding the packet socket to {iface}: {e}"),
        )
    })
}

/// The interface, its index, MAC and MTU.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) name: String,
    pub(crate) index: u32,
    pub(crate) mac: [u8; 6],
    pub(crate) mtu: u32,
}

impl Link {
    pub(crate) fn new(name: &str) -> io::Result<Self> {
        Ok(Self {
            name: name.to_string(),
            index: sys::if_index(name)?,
            mac: sys::if_mac(name)?,
            mtu: sys::if_mtu(name)?,
        })
    }
}

/// The interface the route to `ip` leaves through: `ip -o route get`, else the interface that
/// holds the source address the kernel picks for it.
pub fn route_interface(ip: IpAddr) -> io::Result<String> {
    let fix = "name it with --interface";
    if let Some(text) = tool::query("ip", &["-o", "route", "get", &ip.to_string()]) {
        let mut words = text.split_whitespace();
        while let Some(w) = words.next() {
            if w == "dev" {
                if let Some(d) = words.next() {
                    return Ok(d.to_string());
                }
            }
        }
    }
    let any: IpAddr = if ip.is_ipv4() {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u16; 8])
    };
    let s = std::net::UdpSocket::bind((any, 0))?;
    s.connect((ip, 9)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("no route to {ip} for the packet transport ({e}): {fix}"),
        )
    })?;
    let local = s.local_addr()?.ip();
    sys::if_with_address(local)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("cannot tell which interface reaches {ip}: {fix}"),
        )
    })
}

pub(crate) fn header(dst: &[u8; 6], src: &[u8; 6], tag: u32, kind: u8) -> [u8; FRAME_HEADER] {
    let mut h = [0u8; FRAME_HEADER];
    h[0..6].copy_from_slice(dst);
    h[6..12].copy_from_slice(src);
    h[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    h[14..18].copy_from_slice(&tag.to_be_bytes());
    h[18] = kind;
    h[19] = VERSION;
    h
}

#[inline]
pub(crate) fn set_len(h: &mut [u8; FRAME_HEADER], len: usize) {
    h[20..22].copy_from_slice(&(len as u16).to_be_bytes());
}

/// Payload length of a received frame of `n` bytes (header included) whose header is `h`,
/// or `None` when the frame is not one this endpoint expects.
#[inline]
pub(crate) fn check(h: &[u8], n: usize, tag: u32, kind: u8) -> Option<usize> {
    if n < FRAME_HEADER || h[14..18] != tag.to_be_bytes() || h[18] != kind {
        return None;
    }
    let len = u16::from_be_bytes([h[20], h[21]]) as usize;
    Some(len.min(n - FRAME_HEADER))
}

/// One frame out: header iovec + payload iovec.
#[inline]
pub(super) fn send_frame(fd: RawFd, h: &[u8; FRAME_HEADER], payload: &[u8]) -> io::Result<usize> {
    let mut iov = [
        libc::iovec {
            iov_base: h.as_ptr() as *mut libc::c_void,
            iov_len: FRAME_HEADER,
        },
        libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        },
    ];
    // SAFETY: msghdr is plain old data; all-zero is an empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = 2;
    // SAFETY: the iovecs point at `h` and `payload`, live for the call.
    let n = sys::cvt_size(unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) })?;
    Ok(n.saturating_sub(FRAME_HEADER))
}

/// One frame in: header into `h`, payload into `payload`. Returns the frame's length.
#[inline]
pub(super) fn recv_frame(
    fd: RawFd,
    h: &mut [u8; FRAME_HEADER],
    payload: &mut [u8],
) -> io::Result<usize> {
    let mut iov = [
        libc::iovec {
            iov_base: h.as_mut_ptr().cast(),
            iov_len: FRAME_HEADER,
        },
        libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        },
    ];
    // SAFETY: msghdr is plain old data; all-zero is an empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = 2;
    // SAFETY: the iovecs point at `h` and `payload`, live for the call.
    sys::cvt_size(unsafe { libc::recvmsg(fd, &mut msg, 0) })
}

pub(super) fn set_timeout(fd: RawFd, t: Option<Duration>) -> io::Result<()> {
    let tv = match t {
        Some(d) if !d.is_zero() => libc::timeval {
            tv_sec: d.as_secs() as libc::time_t,
            tv_usec: d.subsec_micros() as libc::suseconds_t,
        },
        Some(_) => libc::timeval {
            tv_sec: 0,
            tv_usec: 1,
        },
        None => libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
    };
    // SAFETY: a valid timeval and its size.
    sys::cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })
    .map(drop)
}

pub(super) fn is_wait(e: &io::Error) -> bool {
    crate::cookie::is_wait(e)
}

/// Opens the socket, applies the knobs, and returns it with the notes.
pub(super) fn socket_with_knobs(knobs: &Knobs) -> io::Result<(socket2::Socket, Vec<String>)> {
    let sock = socket2::Socket::from(open_socket()?);
    // Frames this socket sends are not delivered back to it through the outgoing tap.
    let mut notes = knobs::apply(&sock, knobs, Transport::Packet, false)?;
    if sys::set_int(
        sock.as_raw_fd(),
        sys::SOL_PACKET,
        sys::PACKET_IGNORE_OUTGOING,
        1,
    )
    .is_err()
    {
        notes.push("packet: PACKET_IGNORE_OUTGOING unavailable (kernel < 4.20); the session filter drops own frames".into());
    }
    Ok((sock, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_and_check() {
        let mut h = header(&[1; 6], &[2; 6], 0xdead_beef, KIND_C2S);
        set_len(&mut h, 5);
        assert_eq!(&h[12..14], &[0x88, 0xb5]);
        // Padded to the Ethernet minimum: the length field wins.
        assert_eq!(check(&h, 60, 0xdead_beef, KIND_C2S), Some(5));
        assert_eq!(check(&h, 60, 0xdead_beef, KIND_S2C), None);
        assert_eq!(check(&h, 60, 1, KIND_C2S), None);
        assert_eq!(check(&h, 10, 0xdead_beef, KIND_C2S), None);
        // Truncated frame: the bytes actually there.
        assert_eq!(check(&h, FRAME_HEADER + 3, 0xdead_beef, KIND_C2S), Some(3));
    }
}
