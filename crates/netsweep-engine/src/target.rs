//! The peer a run measures, chosen once from what the user named — an iperf3 server
//! (`iperf3://HOST[:PORT]`), a netsweep server at HOST[:PORT], the MPI world's rank 1, or a
//! server started in this process on loopback — with each kind's refusals applied here, so a
//! caller acts on a value instead of re-deriving the peer (and its pre-flight steps) itself.

use crate::iperf3;
use netsweep_model::spec::{RunSpec, Transport};
use std::net::{Ipv6Addr, SocketAddr, ToSocketAddrs};

/// What the run's spec and HOST call for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An iperf3 server: its own protocol, stream points only (the spec already made honest).
    Iperf3(SocketAddr),
    /// A `netsweep serve` at this control address.
    Netsweep(SocketAddr),
    /// Rank 1 of the MPI world serves; it is found over MPI (no host).
    Mpi,
    /// No host: a server in this process, on loopback.
    InProcess,
}

/// What the user named, besides the spec.
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    /// HOST[:PORT] or `iperf3://HOST[:PORT]`, if given.
    pub host: Option<&'a str>,
    /// The control port when HOST has none.
    pub port: u16,
    /// `--ipv6`: prefer an IPv6 address of HOST.
    pub ipv6: bool,
    /// `--sizes` was given (an iperf3 peer otherwise gets iperf3's own default sizes).
    pub sizes_given: bool,
    /// `--tls-pin` was given.
    pub tls_pin: bool,
}

impl Target {
    /// Chooses the peer, adjusting `spec` where the peer requires it (an iperf3 server:
    /// [`iperf3::honest_spec`] and its default sizes). The error is a usage error's text,
    /// naming the fix.
    pub fn choose(named: Named<'_>, spec: &mut RunSpec) -> Result<Target, String> {
        if let Some(url) = named.host.filter(|h| h.starts_with(iperf3::SCHEME)) {
            *spec = iperf3::honest_spec(spec.clone());
            iperf3::check(spec)?;
            if !named.sizes_given {
                spec.sizes = iperf3::default_sizes(spec.transport);
                spec.sizes_spec = "iperf3 default".into();
            }
            return iperf3::resolve(url).map(Target::Iperf3);
        }
        if named.tls_pin && !matches!(spec.transport, Transport::Tls | Transport::Quic) {
            return Err(format!(
                "--tls-pin checks the certificate of a -t tls or -t quic data path, and this run \
                 is -t {}: drop --tls-pin, or add -t tls or -t quic",
                spec.transport
            ));
        }
        match (spec.transport, named.host) {
            // -t xdp: a link between two hosts (never loopback).
            (Transport::Xdp, None) => Err(
                "-t xdp needs a link between two hosts or namespaces: run `netsweep serve` on \
                 the far end and name it (`netsweep run HOST -t xdp`; `netsweep lab` builds \
                 such a pair); on loopback use -t packet"
                    .into(),
            ),
            (Transport::Mpi, Some(_)) => {
                Err("-t mpi finds its peer in the MPI world: drop HOST and run \
                 `mpirun -np 2 netsweep run -t mpi …`"
                    .into())
            }
            (Transport::Mpi, None) => Ok(Target::Mpi),
            (_, Some(h)) => resolve(h, named.port, named.ipv6).map(Target::Netsweep),
            (_, None) => Ok(Target::InProcess),
        }
    }
}

/// Resolves HOST[:PORT] to a control address, preferring the family `--ipv6` asks for.
pub fn resolve(host: &str, default_port: u16, ipv6: bool) -> Result<SocketAddr, String> {
    let with_port = if host.parse::<Ipv6Addr>().is_ok() {
        format!("[{host}]:{default_port}")
    } else if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{default_port}")
    };
    let addrs: Vec<SocketAddr> = with_port
        .to_socket_addrs()
        .map_err(|e| {
            format!("cannot resolve '{host}': {e}; give HOST or HOST:PORT (IPv6 as [ADDR]:PORT)")
        })?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv6() == ipv6)
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("'{host}' resolved to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_model::spec::{Family, Pattern};

    fn named(host: Option<&str>) -> Named<'_> {
        Named {
            host,
            port: 5299,
            ipv6: false,
            sizes_given: false,
            tls_pin: false,
        }
    }

    #[test]
    fn each_kind_of_peer_is_chosen_once_with_its_refusals() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Stream, Family::Ipv4);
        assert_eq!(
            Target::choose(named(None), &mut spec),
            Ok(Target::InProcess)
        );
        assert_eq!(
            Target::choose(named(Some("127.0.0.1")), &mut spec),
            Ok(Target::Netsweep("127.0.0.1:5299".parse().unwrap()))
        );
        assert_eq!(
            Target::choose(named(Some("[::1]:7")), &mut spec),
            Ok(Target::Netsweep("[::1]:7".parse().unwrap()))
        );
        // An iperf3 server: its port, and iperf3's default sizes unless --sizes was given.
        let before = spec.sizes.clone();
        let t = Target::choose(named(Some("iperf3://127.0.0.1")), &mut spec).unwrap();
        assert_eq!(t, Target::Iperf3("127.0.0.1:5201".parse().unwrap()));
        assert_eq!(spec.sizes_spec, "iperf3 default");
        assert_ne!(spec.sizes, before);
        // Refusals, by name.
        let mut pin = named(Some("127.0.0.1"));
        pin.tls_pin = true;
        let e = Target::choose(pin, &mut spec).unwrap_err();
        assert!(e.contains("--tls-pin") && e.contains("-t tcp"), "{e}");
        let mut xdp = RunSpec::new(Transport::Xdp, Pattern::Pingpong, Family::Ipv4);
        let e = Target::choose(named(None), &mut xdp).unwrap_err();
        assert!(e.contains("-t xdp needs a link"), "{e}");
        let mut mpi = RunSpec::new(Transport::Mpi, Pattern::Pingpong, Family::Mpi);
        assert_eq!(Target::choose(named(None), &mut mpi), Ok(Target::Mpi));
        let e = Target::choose(named(Some("h")), &mut mpi).unwrap_err();
        assert!(e.contains("drop HOST"), "{e}");
    }
}
