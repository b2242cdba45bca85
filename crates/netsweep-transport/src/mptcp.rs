//! `mptcp`: Multipath TCP (IPPROTO_MPTCP = 262) stream sockets. The data path is the IP
//! stream code in `ip.rs`; this module explains why MPTCP may be unavailable.

use crate::descriptor::{Descriptor, CONNECTED_BIDIR};
use crate::{ip, knobs};
use netsweep_model::spec::{Api, Transport};
use std::io;

/// `mptcp`: Multipath TCP, the IP stream data path with IPPROTO_MPTCP.
pub static MPTCP: Descriptor = Descriptor {
    transport: Transport::Mptcp,
    family: None,
    default_ceiling: 8 << 20,
    max_message: None,
    apis: &[Api::Basic, Api::Sendfile],
    patterns: CONNECTED_BIDIR,
    knobs: knobs::TCP,
    polls: false,
    probe: || ip::probe_explained(Transport::Mptcp),
    listen: |s, bind, peer, api| ip::listen(Transport::Mptcp, s, bind, peer, api),
    footprint: crate::descriptor::no_footprint,
    connect: |p, cookie, api| ip::connect(Transport::Mptcp, p, cookie, api),
    crr: Some(|p| ip::crr_connector(Transport::Mptcp, p)),
    unbuilt: &[],
    api_limits: &[],
};

/// The value of net.mptcp.enabled in this network namespace, when readable.
pub fn enabled_sysctl() -> Option<String> {
    std::fs::read_to_string("/proc/sys/net/mptcp/enabled")
        .ok()
        .map(|s| s.trim().to_string())
}

/// Rewrites a socket(2) failure into the reason and the fix.
pub fn explain(e: io::Error) -> io::Error {
    let why = match (e.raw_os_error(), enabled_sysctl()) {
        (_, Some(v)) if v == "0" => {
            "net.mptcp.enabled is 0 in this network namespace: enable it with `sysctl -w net.mptcp.enabled=1`"
                .to_string()
        }
        (Some(libc::EPROTONOSUPPORT | libc::EINVAL | libc::ENOPROTOOPT), None) => {
            "this kernel has no MPTCP (CONFIG_MPTCP): use tcp, or a kernel built with MPTCP".to_string()
        }
        _ => format!("cannot open an MPTCP socket: {e}"),
    };
    io::Error::new(e.kind(), why)
}
