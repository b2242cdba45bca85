//! Socket knobs: applied with setsockopt, read back with getsockopt, reported as granted.
//!
//! Each knob is applied only where it means something (see [`applies`]); elsewhere a note
//! "X does not apply to T" is recorded instead, so a results file never claims a setting the
//! kernel did not see. Errors name the knob and say the fix.

use crate::sys;
use netsweep_core::spec::Transport;
use netsweep_proto::messages::{GrantedKnobs, Knobs};
use socket2::Socket;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// A knob by its command-line name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    Sndbuf,
    Rcvbuf,
    Nodelay,
    CongestionControl,
    Tos,
    Priority,
    NoCheck,
    BusyPoll,
    Pmtu,
    Interface,
}

impl Knob {
    pub fn name(self) -> &'static str {
        match self {
            Knob::Sndbuf => "sndbuf",
            Knob::Rcvbuf => "rcvbuf",
            Knob::Nodelay => "nodelay",
            Knob::CongestionControl => "cc",
            Knob::Tos => "tos",
            Knob::Priority => "priority",
            Knob::NoCheck => "no-check",
            Knob::BusyPoll => "busy-poll",
            Knob::Pmtu => "pmtu",
            Knob::Interface => "interface",
        }
    }
}

/// True when a knob means something on a transport.
pub fn applies(k: Knob, t: Transport) -> bool {
    use Transport::*;
    let tcp = matches!(t, Tcp | Mptcp);
    let ip = t.is_ip();
    match k {
        Knob::Sndbuf | Knob::Rcvbuf => true,
        Knob::Nodelay | Knob::CongestionControl => tcp,
        Knob::Tos | Knob::Pmtu | Knob::BusyPoll => ip,
        // skb->priority selects a qdisc band or class: meaningful wherever a frame meets a qdisc.
        Knob::Priority => ip || t == Packet,
        Knob::NoCheck => t == Udp,
        Knob::Interface => t == Packet,
    }
}

fn not_applicable(k: Knob, t: Transport) -> String {
    let why = match k {
        Knob::Nodelay | Knob::CongestionControl => "it is a TCP setting",
        Knob::Tos | Knob::Pmtu => "it is an IP header setting",
        Knob::BusyPoll => "only IP sockets busy-poll a device queue here",
        Knob::Priority => "no qdisc sees its messages",
        Knob::NoCheck => "only plain UDP over IPv4 may omit its checksum",
        Knob::Interface => "the route to the peer decides",
        Knob::Sndbuf | Knob::Rcvbuf => "",
    };
    format!("{} does not apply to {t}: {why}", k.name())
}

fn knob_err(k: Knob, value: impl std::fmt::Display, e: io::Error, fix: &str) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("setting --{} {value}: {e}{fix}", k.name()),
    )
}

/// Parses a `--pmtu` mode into its IP_MTU_DISCOVER value.
pub fn pmtu_mode(s: &str) -> Option<libc::c_int> {
    match s {
        "dont" => Some(libc::IP_PMTUDISC_DONT),
        "want" => Some(libc::IP_PMTUDISC_WANT),
        "do" => Some(libc::IP_PMTUDISC_DO),
        "probe" => Some(libc::IP_PMTUDISC_PROBE),
        _ => None,
    }
}

fn pmtu_name(v: libc::c_int) -> Option<&'static str> {
    match v {
        libc::IP_PMTUDISC_DONT => Some("dont"),
        libc::IP_PMTUDISC_WANT => Some("want"),
        libc::IP_PMTUDISC_DO => Some("do"),
        libc::IP_PMTUDISC_PROBE => Some("probe"),
        _ => None,
    }
}

/// The congestion control algorithms this kernel offers (for error messages).
pub fn available_congestion_control() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|_| "unknown (/proc/sys/net/ipv4 unreadable)".into())
}

/// Applies every knob that applies to `t`, before bind/listen/connect (buffers must precede
/// listen so TCP picks its window scale for them). Returns notes for knobs that do not apply.
pub fn apply(sock: &Socket, knobs: &Knobs, t: Transport, v6: bool) -> io::Result<Vec<String>> {
    let fd = sock.as_raw_fd();
    let mut notes = Vec::new();
    let mut skip = |k: Knob, set: bool| -> bool {
        if set && !applies(k, t) {
            notes.push(not_applicable(k, t));
            return true;
        }
        !set
    };
    if let Some(n) = knobs.sndbuf {
        sock.set_send_buffer_size(n as usize)
            .map_err(|e| knob_err(Knob::Sndbuf, n, e, ""))?;
    }
    if let Some(n) = knobs.rcvbuf {
        sock.set_recv_buffer_size(n as usize)
            .map_err(|e| knob_err(Knob::Rcvbuf, n, e, ""))?;
    }
    // Nagle is off by default on TCP transports: a pingpong must not wait for delayed ACKs.
    if applies(Knob::Nodelay, t) || !skip(Knob::Nodelay, knobs.nodelay.is_some()) {
        let on = knobs.nodelay.unwrap_or(true);
        sys::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, on.into())
            .map_err(|e| knob_err(Knob::Nodelay, if on { "on" } else { "off" }, e, ""))?;
    }
    if let Some(cc) = knobs.congestion_control.as_deref() {
        if !skip(Knob::CongestionControl, true) {
            set_congestion_control(fd, cc)?;
        }
    }
    if let Some(tos) = knobs.tos {
        if !skip(Knob::Tos, true) {
            let (level, name) = if v6 {
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
            } else {
                (libc::IPPROTO_IP, libc::IP_TOS)
            };
            sys::set_int(fd, level, name, tos.into())
                .map_err(|e| knob_err(Knob::Tos, tos, e, ""))?;
        }
    }
    if let Some(p) = knobs.priority {
        if !skip(Knob::Priority, true) {
            let v = libc::c_int::try_from(p).unwrap_or(libc::c_int::MAX);
            sys::set_int(fd, libc::SOL_SOCKET, libc::SO_PRIORITY, v).map_err(|e| {
                let fix = if e.raw_os_error() == Some(libc::EPERM) {
                    ": priorities above 6 need CAP_NET_ADMIN (run as root, or use 0..6)"
                } else {
                    ""
                };
                knob_err(Knob::Priority, p, e, fix)
            })?;
        }
    }
    if let Some(on) = knobs.no_check {
        if !skip(Knob::NoCheck, true) {
            if v6 && on {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "--no-check applies to UDP over IPv4 only: IPv6 requires the UDP checksum \
                     (RFC 8200); drop --no-check or use IPv4",
                ));
            }
            if !v6 {
                sys::set_int(fd, libc::SOL_SOCKET, sys::SO_NO_CHECK, on.into())
                    .map_err(|e| knob_err(Knob::NoCheck, on, e, ""))?;
            }
        }
    }
    if let Some(us) = knobs.busy_poll {
        if !skip(Knob::BusyPoll, true) {
            let v = libc::c_int::try_from(us).unwrap_or(libc::c_int::MAX);
            sys::set_int(fd, libc::SOL_SOCKET, sys::SO_BUSY_POLL, v).map_err(|e| {
                let fix = if e.raw_os_error() == Some(libc::EPERM) {
                    ": raising SO_BUSY_POLL above net.core.busy_read needs CAP_NET_ADMIN"
                } else {
                    ""
                };
                knob_err(Knob::BusyPoll, us, e, fix)
            })?;
        }
    }
    if let Some(mode) = knobs.pmtu.as_deref() {
        if !skip(Knob::Pmtu, true) {
            let v = pmtu_mode(mode).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("--pmtu {mode:?} is not a mode: use do, dont, want or probe"),
                )
            })?;
            let (level, name) = if v6 {
                (libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER)
            } else {
                (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER)
            };
            sys::set_int(fd, level, name, v).map_err(|e| knob_err(Knob::Pmtu, mode, e, ""))?;
        }
    }
    if knobs.interface.is_some() {
        skip(Knob::Interface, true);
    }
    Ok(notes)
}

fn set_congestion_control(fd: RawFd, cc: &str) -> io::Result<()> {
    // SAFETY: passes the name's bytes and exact length.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    let fix = match e.raw_os_error() {
        Some(libc::ENOENT) => format!(
            ": this kernel has no {cc:?}; available: {} (load another with modprobe tcp_{cc})",
            available_congestion_control()
        ),
        Some(libc::EPERM) => format!(
            ": {cc:?} is not in net.ipv4.tcp_allowed_congestion_control and this process lacks \
             CAP_NET_ADMIN; available: {}",
            available_congestion_control()
        ),
        _ => String::new(),
    };
    Err(knob_err(Knob::CongestionControl, cc, e, &fix))
}

/// The TCP congestion control algorithm of a socket (TCP_CONGESTION).
pub fn congestion_control(sock: &Socket) -> Option<String> {
    let mut buf = [0u8; 32];
    let n = sys::get_bytes(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        &mut buf,
    )
    .ok()?;
    let s = &buf[..n];
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    Some(String::from_utf8_lossy(&s[..end]).into_owned())
}

/// The path MTU of a connected IP socket (IP_MTU / IPV6_MTU), when the kernel knows one.
pub fn path_mtu(fd: RawFd, v6: bool) -> Option<u32> {
    let (level, name) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    sys::get_int(fd, level, name).ok().map(|v| v.max(0) as u32)
}

/// Reads the knobs back from the kernel after the socket is connected. Linux doubles
/// SO_SNDBUF/SO_RCVBUF for bookkeeping overhead and clamps them to net.core.[rw]mem_max, and
/// masks the ECN bits of a TCP socket's TOS: a note says when the grant differs.
pub fn granted(
    sock: &Socket,
    asked: &Knobs,
    t: Transport,
    v6: bool,
    notes: Vec<String>,
) -> GrantedKnobs {
    let fd = sock.as_raw_fd();
    let mut g = GrantedKnobs {
        sndbuf: sock.send_buffer_size().ok().map(|n| n as u64),
        rcvbuf: sock.recv_buffer_size().ok().map(|n| n as u64),
        buffer_offset: asked.buffer_offset,
        batch: asked.batch,
        notes,
        ..Default::default()
    };
    let tcp = matches!(t, Transport::Tcp | Transport::Mptcp);
    if tcp {
        g.nodelay = sys::get_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY)
            .ok()
            .map(|v| v != 0);
        g.congestion_control = congestion_control(sock);
    }
    if t.is_ip() {
        let tos = if v6 {
            sys::get_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
        } else {
            sys::get_int(fd, libc::IPPROTO_IP, libc::IP_TOS)
        };
        g.tos = tos.ok().map(|v| v as u8);
        let mode = if v6 {
            sys::get_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER)
        } else {
            sys::get_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER)
        };
        g.pmtu = mode.ok().and_then(pmtu_name).map(str::to_string);
        g.path_mtu = path_mtu(fd, v6);
        g.busy_poll = sys::get_int(fd, libc::SOL_SOCKET, sys::SO_BUSY_POLL)
            .ok()
            .map(|v| v.max(0) as u32);
    }
    if applies(Knob::Priority, t) {
        g.priority = sys::get_int(fd, libc::SOL_SOCKET, libc::SO_PRIORITY)
            .ok()
            .map(|v| v.max(0) as u32);
    }
    if t == Transport::Udp && !v6 {
        g.no_check = sys::get_int(fd, libc::SOL_SOCKET, sys::SO_NO_CHECK)
            .ok()
            .map(|v| v != 0);
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
    if let (Some(w), Some(got)) = (asked.tos, g.tos) {
        if w != got {
            g.notes.push(format!(
                "tos: asked {w:#04x}, kernel granted {got:#04x} (TCP keeps the ECN bits for itself)"
            ));
        }
    }
    if let (Some(w), Some(got)) = (
        asked.congestion_control.as_deref(),
        g.congestion_control.as_deref(),
    ) {
        if w != got {
            g.notes.push(format!("cc: asked {w}, kernel uses {got}"));
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Type};

    #[test]
    fn not_applicable_knobs_are_noted() {
        let s = Socket::new(Domain::UNIX, Type::STREAM, None).expect("unix socket");
        let k = Knobs {
            tos: Some(0x10),
            nodelay: Some(true),
            ..Default::default()
        };
        let notes = apply(&s, &k, Transport::UnixStream, false).expect("apply");
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("tos does not apply to unix-stream")),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("nodelay does not apply")),
            "{notes:?}"
        );
    }

    #[test]
    fn bad_cc_lists_available() {
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("tcp socket");
        let k = Knobs {
            congestion_control: Some("nsw-nonexistent".into()),
            ..Default::default()
        };
        let e = apply(&s, &k, Transport::Tcp, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("available:"), "{e}");
    }

    #[test]
    fn no_check_on_ipv6_is_refused() {
        let s = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP)).expect("udp6 socket");
        let k = Knobs {
            no_check: Some(true),
            ..Default::default()
        };
        let e = apply(&s, &k, Transport::Udp, true).unwrap_err().to_string();
        assert!(e.contains("IPv4 only"), "{e}");
    }
}
