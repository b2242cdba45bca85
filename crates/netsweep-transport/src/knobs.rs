//! Socket knobs: applied with setsockopt, read back with getsockopt, reported as granted.
//!
//! Each knob is applied only where it means something (see [`applies`]); elsewhere a note
//! "X does not apply to T" is recorded instead, so a results file never claims a setting the
//! kernel did not see. Errors name the knob and say the fix.

use crate::sys;
use netsweep_model::spec::Transport;
use netsweep_proto::messages::{GrantedKnobs, Knobs};
use socket2::Socket;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// A knob by its command-line name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    /// `--sndbuf`: SO_SNDBUF.
    Sndbuf,
    /// `--rcvbuf`: SO_RCVBUF.
    Rcvbuf,
    /// `--nodelay`: TCP_NODELAY.
    Nodelay,
    /// `--cc`: TCP_CONGESTION.
    CongestionControl,
    /// `--notsent-lowat`: TCP_NOTSENT_LOWAT.
    NotsentLowat,
    /// `--pacing-rate`: SO_MAX_PACING_RATE, which TCP paces itself to.
    PacingRate,
    /// `--tos`/`--dscp`: IP_TOS or IPV6_TCLASS.
    Tos,
    /// `--priority`: SO_PRIORITY.
    Priority,
    /// `--no-check`: SO_NO_CHECK (udp over IPv4).
    NoCheck,
    /// `--busy-poll`: SO_BUSY_POLL.
    BusyPoll,
    /// `--pmtu`: IP_MTU_DISCOVER or IPV6_MTU_DISCOVER.
    Pmtu,
    /// `--interface`: the packet transport's interface.
    Interface,
}

impl Knob {
    /// The knob's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Knob::Sndbuf => "sndbuf",
            Knob::Rcvbuf => "rcvbuf",
            Knob::Nodelay => "nodelay",
            Knob::CongestionControl => "cc",
            Knob::NotsentLowat => "notsent-lowat",
            Knob::PacingRate => "pacing-rate",
            Knob::Tos => "tos",
            Knob::Priority => "priority",
            Knob::NoCheck => "no-check",
            Knob::BusyPoll => "busy-poll",
            Knob::Pmtu => "pmtu",
            Knob::Interface => "interface",
        }
    }
}

/// The knobs of a socket of any kind: its buffers.
pub const BUFFERS: &[Knob] = &[Knob::Sndbuf, Knob::Rcvbuf];
/// The knobs of an IP socket. skb->priority selects a qdisc band or class: it means
/// something wherever a frame meets a qdisc.
pub const IP: &[Knob] = &[
    Knob::Sndbuf,
    Knob::Rcvbuf,
    Knob::Tos,
    Knob::Pmtu,
    Knob::BusyPoll,
    Knob::Priority,
];
/// The knobs of a TCP (or MPTCP) socket: IP's, Nagle, congestion control, the unsent
/// data's low-water mark and the pacing rate.
pub const TCP: &[Knob] = &[
    Knob::Sndbuf,
    Knob::Rcvbuf,
    Knob::Tos,
    Knob::Pmtu,
    Knob::BusyPoll,
    Knob::Priority,
    Knob::Nodelay,
    Knob::CongestionControl,
    Knob::NotsentLowat,
    Knob::PacingRate,
];
/// The knobs of a UDP socket: IP's and SO_NO_CHECK.
pub const UDP: &[Knob] = &[
    Knob::Sndbuf,
    Knob::Rcvbuf,
    Knob::Tos,
    Knob::Pmtu,
    Knob::BusyPoll,
    Knob::Priority,
    Knob::NoCheck,
];

/// True when a knob means something on a transport (its descriptor's `knobs`).
pub fn applies(k: Knob, t: Transport) -> bool {
    crate::registry::descriptor(t).knobs.contains(&k)
}

fn not_applicable(k: Knob, t: Transport) -> String {
    let why = match k {
        Knob::Nodelay | Knob::CongestionControl | Knob::NotsentLowat => "it is a TCP setting",
        Knob::PacingRate => {
            "only TCP paces itself to SO_MAX_PACING_RATE (other sockets are paced by the fq \
             qdisc alone)"
        }
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

/// One socket option to set: a knob resolved to its level, name and value bytes, so a socket
/// opened per transaction (crr) pays one plain setsockopt(2) per knob and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The knob it came from (names the error); `None` for settings netsweep adds itself.
    pub knob: Option<Knob>,
    /// setsockopt(2)'s level (SOL_SOCKET, IPPROTO_TCP, …).
    pub level: libc::c_int,
    /// setsockopt(2)'s option name.
    pub name: libc::c_int,
    /// The option's value, as the kernel reads it.
    pub value: Vec<u8>,
}

impl Setting {
    fn int(knob: Knob, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> Self {
        Self {
            knob: Some(knob),
            level,
            name,
            value: v.to_ne_bytes().to_vec(),
        }
    }

    /// SO_RCVTIMEO or SO_SNDTIMEO (`name`) of `d`; zero would mean "forever", so at least 1 µs.
    pub fn timeout(name: libc::c_int, d: std::time::Duration) -> Self {
        let tv = libc::timeval {
            tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_usec: (d.subsec_micros() as libc::suseconds_t).max(if d.as_secs() == 0 {
                1
            } else {
                0
            }),
        };
        // SAFETY: timeval is plain old data; we copy its exact bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&tv as *const libc::timeval).cast::<u8>(),
                std::mem::size_of::<libc::timeval>(),
            )
        };
        Self {
            knob: None,
            level: libc::SOL_SOCKET,
            name,
            value: bytes.to_vec(),
        }
    }

    /// One setsockopt(2); an error names the knob and says the fix.
    #[inline]
    pub fn set(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: passes the value's bytes and their exact length.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                self.level,
                self.name,
                self.value.as_ptr().cast(),
                self.value.len() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(self.error(io::Error::last_os_error()))
        }
    }

    #[cold]
    fn error(&self, e: io::Error) -> io::Error {
        let int =
            || <[u8; 4]>::try_from(self.value.as_slice()).map_or(0, libc::c_int::from_ne_bytes);
        let eperm = e.raw_os_error() == Some(libc::EPERM);
        match self.knob {
            None => e,
            Some(Knob::CongestionControl) => {
                let cc = String::from_utf8_lossy(&self.value).into_owned();
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
                knob_err(Knob::CongestionControl, cc, e, &fix)
            }
            Some(k @ Knob::Nodelay) => knob_err(k, if int() != 0 { "on" } else { "off" }, e, ""),
            Some(k @ Knob::NoCheck) => knob_err(k, int() != 0, e, ""),
            Some(k @ Knob::Priority) if eperm => knob_err(
                k,
                int(),
                e,
                ": priorities above 6 need CAP_NET_ADMIN (run as root, or use 0..6)",
            ),
            Some(k @ Knob::BusyPoll) if eperm => knob_err(
                k,
                int(),
                e,
                ": raising SO_BUSY_POLL above net.core.busy_read needs CAP_NET_ADMIN",
            ),
            Some(k @ Knob::Pmtu) => {
                let v = pmtu_name(int()).unwrap_or("?");
                knob_err(k, v, e, "")
            }
            Some(k) => knob_err(k, int(), e, ""),
        }
    }
}

/// Resolves every knob that applies to `t` into the settings to make, in order (buffers
/// first: they must precede listen/connect so TCP picks its window scale for them). Checks
/// values once; returns the settings and notes for knobs that do not apply.
pub fn plan(knobs: &Knobs, t: Transport, v6: bool) -> io::Result<(Vec<Setting>, Vec<String>)> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let mut skip = |k: Knob, set: bool| -> bool {
        if set && !applies(k, t) {
            notes.push(not_applicable(k, t));
            return true;
        }
        !set
    };
    let clamp = |n: u64| libc::c_int::try_from(n).unwrap_or(libc::c_int::MAX);
    if let Some(n) = knobs.sndbuf {
        out.push(Setting::int(
            Knob::Sndbuf,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            clamp(n),
        ));
    }
    if let Some(n) = knobs.rcvbuf {
        out.push(Setting::int(
            Knob::Rcvbuf,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            clamp(n),
        ));
    }
    // Nagle is off by default on TCP transports: a pingpong must not wait for delayed ACKs.
    if applies(Knob::Nodelay, t) || !skip(Knob::Nodelay, knobs.nodelay.is_some()) {
        let on = knobs.nodelay.unwrap_or(true);
        out.push(Setting::int(
            Knob::Nodelay,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            on.into(),
        ));
    }
    if let Some(cc) = knobs.congestion_control.as_deref() {
        if !skip(Knob::CongestionControl, true) {
            out.push(Setting {
                knob: Some(Knob::CongestionControl),
                level: libc::IPPROTO_TCP,
                name: libc::TCP_CONGESTION,
                value: cc.as_bytes().to_vec(),
            });
        }
    }
    if let Some(n) = knobs.notsent_lowat {
        if !skip(Knob::NotsentLowat, true) {
            out.push(Setting::int(
                Knob::NotsentLowat,
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                clamp(n.into()),
            ));
        }
    }
    if let Some(bps) = knobs.pacing_rate {
        if !skip(Knob::PacingRate, true) {
            // The kernel takes bytes per second, an unsigned long where 8 bytes are given.
            out.push(Setting {
                knob: Some(Knob::PacingRate),
                level: libc::SOL_SOCKET,
                name: libc::SO_MAX_PACING_RATE,
                value: (bps / 8).to_ne_bytes().to_vec(),
            });
        }
    }
    if let Some(tos) = knobs.tos {
        if !skip(Knob::Tos, true) {
            let (level, name) = if v6 {
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
            } else {
                (libc::IPPROTO_IP, libc::IP_TOS)
            };
            out.push(Setting::int(Knob::Tos, level, name, tos.into()));
        }
    }
    if let Some(p) = knobs.priority {
        if !skip(Knob::Priority, true) {
            let v = libc::c_int::try_from(p).unwrap_or(libc::c_int::MAX);
            out.push(Setting::int(
                Knob::Priority,
                libc::SOL_SOCKET,
                libc::SO_PRIORITY,
                v,
            ));
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
                out.push(Setting::int(
                    Knob::NoCheck,
                    libc::SOL_SOCKET,
                    sys::SO_NO_CHECK,
                    on.into(),
                ));
            }
        }
    }
    if let Some(us) = knobs.busy_poll {
        if !skip(Knob::BusyPoll, true) {
            let v = libc::c_int::try_from(us).unwrap_or(libc::c_int::MAX);
            out.push(Setting::int(
                Knob::BusyPoll,
                libc::SOL_SOCKET,
                sys::SO_BUSY_POLL,
                v,
            ));
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
            out.push(Setting::int(Knob::Pmtu, level, name, v));
        }
    }
    if knobs.interface.is_some() {
        skip(Knob::Interface, true);
    }
    Ok((out, notes))
}

/// Applies every knob that applies to `t`, before bind/listen/connect (buffers must precede
/// listen so TCP picks its window scale for them). Returns notes for knobs that do not apply.
pub fn apply(sock: &Socket, knobs: &Knobs, t: Transport, v6: bool) -> io::Result<Vec<String>> {
    let (settings, notes) = plan(knobs, t, v6)?;
    let fd = sock.as_raw_fd();
    for s in &settings {
        s.set(fd)?;
    }
    Ok(notes)
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
/// SO_SNDBUF/SO_RCVBUF for bookkeeping overhead and clamps them to `net.core.[rw]mem_max`, and
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
    if applies(Knob::Nodelay, t) {
        g.nodelay = sys::get_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY)
            .ok()
            .map(|v| v != 0);
        g.congestion_control = congestion_control(sock);
        if asked.notsent_lowat.is_some() {
            g.notsent_lowat = sys::get_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT)
                .ok()
                .map(|v| v.max(0) as u32);
        }
        if asked.pacing_rate.is_some() {
            let mut v = [0u8; 8];
            g.pacing_rate = sys::get_bytes(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &mut v)
                .ok()
                .filter(|&n| n == 8)
                .map(|_| u64::from_ne_bytes(v).saturating_mul(8));
        }
    }
    if crate::registry::descriptor(t).is_ip() {
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
    if applies(Knob::NoCheck, t) && !v6 {
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
