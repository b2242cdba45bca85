//! The transport registry: a table of [`Descriptor`]s, one per transport, and the lookups
//! built on it — the [`TransportFactory`] that opens a session's data path, the api × pattern
//! check, and whether each transport and api works on this host (and if not, why: missing
//! privilege, kernel feature, sysctl).
//!
//! **Adding a transport** is one new file and one line here, once it is named in the model
//! (`Transport` in netsweep-model's spec.rs: the variant, its name and aliases, whether it is
//! a datagram transport, its place in `ALL` — the results schema's vocabulary). Write
//! `src/<name>.rs` with its data path and a `pub static <NAME>: Descriptor` (address family,
//! size limits, apis, patterns, knobs, probe, listen, connect, crr connector), then add
//! `&<name>::<NAME>` to [`TRANSPORTS`] in `Transport::ALL`'s order. `netsweep list`, the CLI
//! checks and defaults, the server and the conformance tests read it from the table.

use crate::descriptor::{unsupported, Descriptor, Peer};
use crate::{ip, mpi, mptcp, packet, quic, shm, tls, udplite, unix, xdp};
use netsweep_endpoint::{CrrConnector, DataListener, Endpoint, Footprint, TransportFactory};
use netsweep_model::spec::{Api, Pattern, Transport};
use netsweep_proto::messages::{DataEndpoint, Knobs, SessionSetup};
use std::io;
use std::net::IpAddr;
use std::time::Duration;

/// Every transport this build implements, in `Transport::ALL`'s (listing) order: a new
/// `Transport` without its line here does not compile.
pub static TRANSPORTS: [&Descriptor; Transport::ALL.len()] = [
    &ip::TCP,
    &tls::TLS,
    &quic::QUIC,
    &ip::UDP,
    &unix::UNIX_STREAM,
    &unix::UNIX_DGRAM,
    &unix::UNIX_SEQPACKET,
    &packet::PACKET,
    &mptcp::MPTCP,
    &udplite::UDPLITE,
    &shm::SHM,
    &mpi::MPI,
    &xdp::XDP,
];

// Entry `i` describes `Transport::ALL[i]`, whose discriminant is `i`: checked when compiling,
// so the lookup below is an index that cannot miss.
const _: () = {
    let mut i = 0;
    while i < TRANSPORTS.len() {
        assert!(TRANSPORTS[i].transport as usize == i);
        assert!(Transport::ALL[i] as usize == i);
        i += 1;
    }
};

/// The descriptor of `t`.
pub fn descriptor(t: Transport) -> &'static Descriptor {
    TRANSPORTS[t as usize]
}

/// Every transport this build implements, behind one [`TransportFactory`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Registry;

/// The apis `t` supports, `basic` first.
pub fn supported_apis(t: Transport) -> &'static [Api] {
    descriptor(t).apis
}

/// Checks a transport × api × pattern combination; the error lists what `t` supports.
pub fn check(t: Transport, api: Api, pattern: Pattern) -> Result<(), String> {
    descriptor(t).check(api, pattern)
}

/// Parses and checks the session's transport, api and pattern.
fn parse(setup: &SessionSetup) -> io::Result<(&'static Descriptor, Api)> {
    let t = Transport::parse(&setup.transport).ok_or_else(|| {
        unsupported(format!(
            "unknown transport {:?}: `netsweep list` shows the ones this build has",
            netsweep_proto::text::printable(&setup.transport)
        ))
    })?;
    let api = if setup.api.is_empty() {
        Api::Basic
    } else {
        Api::parse(&setup.api).ok_or_else(|| {
            unsupported(format!(
                "unknown api {:?}: `netsweep list` shows the ones this build has",
                setup.api
            ))
        })?
    };
    let pattern = Pattern::parse(&setup.pattern).ok_or_else(|| {
        unsupported(format!(
            "unknown pattern {:?}: `netsweep list` shows the ones this build has",
            netsweep_proto::text::printable(&setup.pattern)
        ))
    })?;
    let d = descriptor(t);
    d.check(api, pattern).map_err(unsupported)?;
    Ok((d, api))
}

impl TransportFactory for Registry {
    fn listen(
        &self,
        setup: &SessionSetup,
        bind: IpAddr,
        peer: IpAddr,
    ) -> io::Result<Box<dyn DataListener>> {
        let (d, api) = parse(setup)?;
        (d.listen)(setup, bind, peer, api)
    }

    fn footprint(&self, setup: &SessionSetup) -> Footprint {
        Transport::parse(&setup.transport)
            .map_or_else(Footprint::default, |t| (descriptor(t).footprint)(setup))
    }

    fn connect(
        &self,
        setup: &SessionSetup,
        knobs: &Knobs,
        server: IpAddr,
        data: &DataEndpoint,
        cookie: u64,
        timeout: Duration,
    ) -> io::Result<Box<dyn Endpoint>> {
        let (d, api) = parse(setup)?;
        let peer = Peer {
            setup,
            knobs,
            server,
            data,
            timeout,
        };
        (d.connect)(&peer, cookie, api)
    }

    fn crr_connector(
        &self,
        setup: &SessionSetup,
        knobs: &Knobs,
        server: IpAddr,
        data: &DataEndpoint,
        timeout: Duration,
    ) -> io::Result<Box<dyn CrrConnector>> {
        let (d, _) = parse(setup)?;
        let crr = d.crr.ok_or_else(|| {
            unsupported(
                d.check(Api::Basic, Pattern::Crr)
                    .err()
                    .unwrap_or_else(|| format!("{} has no crr connector", d.name())),
            )
        })?;
        crr(&Peer {
            setup,
            knobs,
            server,
            data,
            timeout,
        })
    }
}

/// Whether a transport (or a transport × api) works here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The transport probed.
    pub transport: Transport,
    /// The api probed; `basic` for [`probe`].
    pub api: Api,
    /// True when it works here.
    pub available: bool,
    /// Why not, when unavailable.
    pub reason: Option<String>,
}

fn result(t: Transport, api: Api, r: Result<(), String>) -> Probe {
    Probe {
        transport: t,
        api,
        available: r.is_ok(),
        reason: r.err(),
    }
}

/// Opens what the transport's data path needs: a socket of its kind (AF_PACKET checks
/// CAP_NET_RAW; MPTCP reports net.mptcp.enabled), or for shm a mapped shared-memory file.
pub fn probe(t: Transport) -> Probe {
    result(t, Api::Basic, (descriptor(t).probe)().map(drop))
}

/// Tries the api on the transport: opens the transport's socket and sets what the api needs
/// (SO_ZEROCOPY, a memfd, a pipe and /dev/null, an io_uring with its opcodes).
pub fn probe_api(t: Transport, api: Api) -> Probe {
    let d = descriptor(t);
    let r = (|| {
        if !d.apis.contains(&api) {
            return Err(format!(
                "{t} does not support {}: it supports {}",
                api.name(),
                d.api_names()
            ));
        }
        let sock = (d.probe)()?;
        match api {
            Api::Basic | Api::Mmsg | Api::Datagram => Ok(()),
            Api::Uring => crate::uring::probe(),
            Api::Gso => {
                use std::os::fd::AsRawFd;
                let sock = sock.ok_or_else(|| format!("{t} has no socket for gso"))?;
                crate::gso::enable(sock.as_raw_fd()).map_err(|e| e.to_string())
            }
            Api::Zerocopy => {
                use std::os::fd::AsRawFd;
                let sock = sock.ok_or_else(|| format!("{t} has no socket for zerocopy"))?;
                crate::zerocopy::enable(sock.as_raw_fd()).map_err(|e| e.to_string())
            }
            Api::Sendfile => crate::sendfile::pattern_file(1)
                .map(drop)
                .map_err(|e| e.to_string()),
            Api::Splice => crate::splice::probe().map_err(|e| e.to_string()),
        }
    })();
    result(t, api, r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_model::spec::{Family, RunSpec};

    #[test]
    fn the_table_has_every_transport_once_in_listing_order() {
        let names: Vec<Transport> = TRANSPORTS.iter().map(|d| d.transport).collect();
        assert_eq!(names, Transport::ALL);
        for d in TRANSPORTS {
            assert_eq!(d.apis[0], Api::Basic, "{}", d.name());
            assert_eq!(
                d.crr.is_some(),
                d.patterns.contains(&Pattern::Crr),
                "{}: a crr connector exactly when crr is a pattern",
                d.name()
            );
            if let Some(m) = d.max_message {
                assert!(m.v4 <= m.v6 && d.default_ceiling <= m.v4, "{}", d.name());
            }
        }
    }

    #[test]
    fn api_support_is_checked_with_a_fix() {
        assert_eq!(check(Transport::Udp, Api::Mmsg, Pattern::Stream), Ok(()));
        let e = check(Transport::Tcp, Api::Mmsg, Pattern::Stream).unwrap_err();
        assert_eq!(
            e,
            "tcp does not support --api mmsg: it supports basic, zerocopy, sendfile, splice, uring"
        );
        assert!(check(Transport::Tcp, Api::Splice, Pattern::Pingpong)
            .unwrap_err()
            .contains("--pattern stream"));
        for t in [Transport::Tcp, Transport::Udp] {
            assert_eq!(check(t, Api::Uring, Pattern::Stream), Ok(()));
            assert_eq!(check(t, Api::Uring, Pattern::Pingpong), Ok(()));
        }
        assert_eq!(check(Transport::Udp, Api::Gso, Pattern::Stream), Ok(()));
        assert!(check(Transport::Udp, Api::Gso, Pattern::Pingpong)
            .unwrap_err()
            .contains("--pattern stream"));
        assert!(check(Transport::Udp, Api::Gso, Pattern::Bidir)
            .unwrap_err()
            .contains("--api basic"));
        assert!(check(Transport::Udplite, Api::Gso, Pattern::Stream)
            .unwrap_err()
            .contains("EIO"));
        assert!(check(Transport::Shm, Api::Uring, Pattern::Stream)
            .unwrap_err()
            .contains("supports basic"));
        assert_eq!(
            check(Transport::Udp, Api::Basic, Pattern::Crr).unwrap_err(),
            "--pattern crr needs a connection-oriented transport (tcp, mptcp, unix-stream), not udp"
        );
        assert_eq!(
            check(Transport::Tcp, Api::Zerocopy, Pattern::Crr).unwrap_err(),
            "--pattern crr uses --api basic (one connection per transaction)"
        );
        let crr: Vec<&str> = TRANSPORTS
            .iter()
            .filter(|d| d.patterns.contains(&Pattern::Crr))
            .map(|d| d.name())
            .collect();
        assert_eq!(
            crr,
            ["tcp", "unix-stream", "mptcp"],
            "the crr error names these"
        );
    }

    #[test]
    fn limits_match_the_headers_they_come_from() {
        let shm = descriptor(Transport::Shm);
        assert!(!shm.datagram() && !shm.is_ip() && shm.max_message(false).is_none());
        assert_eq!(shm.default_ceiling, 8 << 20);
        let udp = descriptor(Transport::Udp);
        // 65535 − IP header (20, or 0 for IPv6's payload length) − UDP header (8).
        assert_eq!(udp.max_message(false), Some(65_535 - 20 - 8));
        assert_eq!(udp.max_message(true), Some(65_535 - 8));
        let packet = descriptor(Transport::Packet);
        assert_eq!(packet.default_ceiling, 1500 - packet::HEADER);
        assert_eq!(packet.family(Family::Ipv6), Family::Link);
        assert_eq!(
            descriptor(Transport::Tcp).family(Family::Ipv6),
            Family::Ipv6
        );
    }

    #[test]
    fn a_spec_is_validated_against_its_descriptor() {
        let mut s = RunSpec::new(Transport::Udp, Pattern::Stream, Family::Ipv4);
        let udp = descriptor(Transport::Udp);
        s.sizes = vec![70_000];
        assert!(s.validate(udp).unwrap_err().contains("65507"));
        s.sizes = vec![1472];
        assert_eq!(s.validate(udp), Ok(()));
        s.api = Api::Splice;
        assert!(s.validate(udp).unwrap_err().contains("--api splice"));
    }
}
