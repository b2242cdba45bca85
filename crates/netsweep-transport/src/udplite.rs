//! `udplite`: UDP-Lite (IPPROTO_UDPLITE = 136, RFC 3828) datagram sockets. The data path is
//! the IP datagram code in `ip.rs`. The checksum covers the whole datagram (the kernel's
//! default coverage); UDPLITE_SEND_CSCOV/RECV_CSCOV are not set.

use crate::descriptor::{Descriptor, MESSAGES};
use crate::{ip, knobs};
use netsweep_model::spec::{Api, Transport};
use std::io;

/// `udplite`: UDP-Lite, the IP datagram data path with IPPROTO_UDPLITE.
pub static UDPLITE: Descriptor = Descriptor {
    transport: Transport::Udplite,
    family: None,
    default_ceiling: ip::UDP_LIMIT.v4,
    max_message: Some(ip::UDP_LIMIT),
    apis: &[Api::Basic, Api::Mmsg],
    patterns: MESSAGES,
    knobs: knobs::IP,
    polls: false,
    probe: || ip::probe_explained(Transport::Udplite),
    listen: |s, bind, peer, api| ip::listen(Transport::Udplite, s, bind, peer, api),
    footprint: crate::descriptor::no_footprint,
    connect: |p, cookie, api| ip::connect(Transport::Udplite, p, cookie, api),
    crr: None,
    unbuilt: &[],
    api_limits: &[],
};

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
