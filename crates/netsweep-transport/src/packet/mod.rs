//! `packet`: raw Ethernet frames over AF_PACKET (SOCK_RAW) with the experimental EtherType
//! 0x88B5 — no IP, no UDP: today's equivalent of DLPI.
//!
//! **Frame:** Ethernet header (destination MAC, source MAC, 0x88B5), then an 8-byte netsweep
//! header — session tag (low 32 bits of the session cookie, big-endian), kind (1 client→server
//! data, 2 server→client data, 3 client hello, 4 server acknowledgement), version (1), payload
//! length (u16, big-endian) — then the payload. The length field keeps received lengths honest
//! when the driver pads a short frame to the 60-byte Ethernet minimum. The payload is limited to
//! the interface MTU minus the 8-byte header (1492 bytes on a 1500-byte link); a larger size is an
//! error naming the MTU, raised when the data path opens (`listen`/`connect`, from the session's
//! largest size) and again in the client's `prepare()`.
//!
//! **Binding:** the server uses the interface that owns its control address (or `--interface`)
//! and sends its MAC in `DataEndpoint.mac`; the client finds its interface from the route to the
//! server (`ip -o route get`, or the interface holding the source address; `--interface`
//! overrides), then sends hello frames carrying the full 8-byte cookie to the server's MAC until
//! acknowledged. The server learns the client's MAC from the first hello's source address.
//!
//! **Filtering:** a classic BPF filter on each socket keeps only frames of its own session
//! flowing towards it (tag and kind), so concurrent sessions on one link do not mix and, on
//! loopback (`lo`, MAC 00:00:00:00:00:00, where every frame comes back as incoming), an endpoint
//! never receives its own frames. PACKET_IGNORE_OUTGOING also drops the outgoing copies.
//! Frames are datagrams: loss is counted exactly like UDP. Needs CAP_NET_RAW.
//!
//! Files: this one (the descriptor, limits, the privilege probe), `frame.rs` (the frame format
//! and the socket plumbing), `endpoint.rs` (a bound session's data endpoint), `handshake.rs`
//! (the hello/acknowledgement exchange, shared with the `xdp` transport), `session.rs` (binding
//! each side's socket and running that exchange on it).

mod endpoint;
pub(crate) mod frame;
pub(crate) mod handshake;
pub(crate) mod session;

pub use endpoint::PacketEndpoint;
pub use frame::{route_interface, FRAME_HEADER};
pub use session::{connect, PacketListener};

use crate::descriptor::{probe_socket, Descriptor, MessageLimit, MESSAGES};
use crate::knobs::Knob;
use netsweep_model::spec::{Api, Family, Transport};
use socket2::{Domain, Socket, Type};
use std::io;

/// `packet`: raw Ethernet frames over AF_PACKET.
pub static PACKET: Descriptor = Descriptor {
    transport: Transport::Packet,
    family: Some(Family::Link),
    // A 1500-byte Ethernet MTU minus the netsweep frame header; the real limit is the
    // interface MTU, checked when the data path opens.
    default_ceiling: 1500 - HEADER,
    // The bound of the frame header's length field; the interface MTU (minus [`HEADER`]) is
    // the real limit, checked when the data path opens.
    max_message: Some(MessageLimit::same(65_535 - HEADER)),
    apis: &[Api::Basic, Api::Mmsg],
    patterns: MESSAGES,
    knobs: &[Knob::Sndbuf, Knob::Rcvbuf, Knob::Priority, Knob::Interface],
    polls: false,
    probe: || {
        probe()?;
        // Opened only to check; never bound, so it receives nothing.
        probe_socket(Transport::Packet, || {
            Socket::new(Domain::PACKET, Type::RAW, None)
        })
    },
    listen: |s, bind, _, api| Ok(Box::new(PacketListener::open(s, bind, api == Api::Mmsg)?)),
    footprint: crate::descriptor::no_footprint,
    connect: |p, cookie, api| {
        connect(
            p.setup,
            p.knobs,
            p.server,
            p.data,
            cookie,
            p.timeout,
            api == Api::Mmsg,
        )
    },
    crr: None,
    unbuilt: &[],
    api_limits: &[],
};

/// The experimental EtherType netsweep frames carry (IEEE 802 local experimental 1).
pub const ETHERTYPE: u16 = 0x88B5;
/// Bytes of the netsweep header inside every frame (session tag, direction, version, payload
/// length): the largest payload is the interface MTU minus this.
pub const HEADER: u64 = 8;

/// Which end of the session an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Client,
    Server,
}

/// The largest payload an interface of `mtu` bytes carries.
pub fn max_payload(mtu: u32) -> usize {
    (mtu as usize)
        .saturating_sub(HEADER as usize)
        .min(u16::MAX as usize)
}

pub(super) fn too_big(size: u64, iface: &str, mtu: u32) -> io::Error {
    let max = max_payload(mtu);
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{size}-byte message does not fit one packet frame on {iface}: the MTU is {mtu}, \
             and {HEADER} bytes go to the netsweep frame header, so the largest payload is \
             {max} bytes: lower --sizes to at most {max} (or raise the MTU)"
        ),
    )
}

/// Whether this process may open packet sockets.
pub fn probe() -> Result<(), String> {
    // SAFETY: plain socket(2); closed right away.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => {
                "needs CAP_NET_RAW: run as root or `setcap cap_net_raw+ep` on the binary"
                    .to_string()
            }
            Some(libc::EAFNOSUPPORT) => "this kernel has no AF_PACKET (CONFIG_PACKET)".to_string(),
            _ => format!("cannot open an AF_PACKET socket: {e}"),
        });
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    Ok(())
}

pub(crate) fn tag_of(cookie: u64) -> u32 {
    cookie as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_error_names_the_mtu() {
        assert_eq!(max_payload(1500), 1492);
        let e = too_big(1500, "veth0", 1500).to_string();
        assert!(
            e.contains("MTU is 1500") && e.contains("at most 1492"),
            "{e}"
        );
    }
}
