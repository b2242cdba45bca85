//! `xdp`: raw Ethernet frames through an AF_XDP socket — the frames `packet` carries (same
//! EtherType 0x88B5, same 8-byte netsweep header, same hello/acknowledgement handshake), but
//! handed from the driver straight into user memory by an XDP program instead of climbing
//! the stack to an AF_PACKET socket: today's DLPI with the last layer stripped.
//!
//! Only a build with `--features xdp` has it (its XDP program is compiled with clang and
//! libbpf's headers). Each end loads the program (`program.rs`, aya) on its interface —
//! natively in the driver where it can, else generically — binds one AF_XDP socket with its
//! own UMEM to receive queue 0 (`ring.rs`, xdpilone; zero-copy where the driver can, else
//! copy) and registers it in the program's XSKMAP; the attachment dies with the process.
//! `endpoint.rs` runs the session on it. Which attach and bind mode each side got is in the
//! results (`granted.xdp`). Frames the socket had no room for are counted by the kernel
//! (XDP_STATISTICS) and reported as the side's socket drops. One xdp session per interface at
//! a time (one program per interface); not on loopback. Needs root (CAP_NET_ADMIN, CAP_BPF).

#[cfg(feature = "xdp")]
mod endpoint;
#[cfg(feature = "xdp")]
mod program;
#[cfg(feature = "xdp")]
mod ring;

#[cfg(not(feature = "xdp"))]
use crate::descriptor::unsupported;
use crate::descriptor::{Descriptor, MessageLimit, MESSAGES};
use crate::knobs::Knob;
use crate::packet::HEADER;
use netsweep_model::spec::{Api, Family, Transport};

/// Bytes of the UMEM each endpoint maps (its chunks of one frame each, `ring.rs`).
pub const UMEM_BYTES: u64 = 4096 * 4096;

/// `xdp`: raw Ethernet frames through an AF_XDP socket.
pub static XDP: Descriptor = Descriptor {
    transport: Transport::Xdp,
    family: Some(Family::Link),
    default_ceiling: 1500 - HEADER,
    // A UMEM chunk holds one frame (4096 bytes less the kernel's 256-byte headroom); the
    // interface MTU is the real limit, checked when the data path opens.
    max_message: Some(MessageLimit::same(4096 - 256 - 22)),
    apis: &[Api::Basic],
    patterns: MESSAGES,
    // --busy-poll: how long a receive polls the ring before it sleeps.
    knobs: &[Knob::Interface, Knob::BusyPoll],
    polls: false,
    probe,
    listen: |s, bind, _, _| listen(s, bind),
    footprint: |_| netsweep_endpoint::Footprint {
        memory: UMEM_BYTES,
        tmpfs: 0,
    },
    connect: |p, cookie, _| connect(p, cookie),
    crr: None,
    unbuilt: &[],
    api_limits: &[],
};

/// The receive queue the socket serves.
pub const QUEUE: u32 = 0;

/// What to do to get the transport, when this build lacks it.
pub const BUILD_HINT: &str = "this build has no AF_XDP: build it with `cargo build --release \
     --features xdp` (needs clang and libbpf-dev to compile its XDP program)";

/// The largest payload an interface of `mtu` bytes carries in one xdp frame.
pub fn max_payload(mtu: u32) -> usize {
    crate::packet::max_payload(mtu).min(4096 - 256 - 22)
}

#[cfg(not(feature = "xdp"))]
fn probe() -> Result<Option<socket2::Socket>, String> {
    Err(BUILD_HINT.into())
}

#[cfg(not(feature = "xdp"))]
fn listen(
    _: &netsweep_proto::messages::SessionSetup,
    _: std::net::IpAddr,
) -> std::io::Result<Box<dyn netsweep_endpoint::DataListener>> {
    Err(unsupported(BUILD_HINT.into()))
}

#[cfg(not(feature = "xdp"))]
fn connect(
    _: &crate::descriptor::Peer<'_>,
    _: u64,
) -> std::io::Result<Box<dyn netsweep_endpoint::Endpoint>> {
    Err(unsupported(BUILD_HINT.into()))
}

/// Whether this process may open AF_XDP sockets and load the XDP program.
#[cfg(feature = "xdp")]
fn probe() -> Result<Option<socket2::Socket>, String> {
    // SAFETY: plain socket(2); closed right away.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => {
                "needs CAP_NET_ADMIN and CAP_BPF: run as root".to_string()
            }
            Some(libc::EAFNOSUPPORT) => {
                "this kernel has no AF_XDP (CONFIG_XDP_SOCKETS)".to_string()
            }
            _ => format!("cannot open an AF_XDP socket: {e}"),
        });
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    program::probe()?;
    Ok(None)
}

#[cfg(feature = "xdp")]
fn listen(
    s: &netsweep_proto::messages::SessionSetup,
    bind: std::net::IpAddr,
) -> std::io::Result<Box<dyn netsweep_endpoint::DataListener>> {
    Ok(Box::new(endpoint::XdpListener::open(s, bind)?))
}

#[cfg(feature = "xdp")]
fn connect(
    p: &crate::descriptor::Peer<'_>,
    cookie: u64,
) -> std::io::Result<Box<dyn netsweep_endpoint::Endpoint>> {
    endpoint::connect(p.setup, p.knobs, p.server, p.data, cookie, p.timeout)
}
