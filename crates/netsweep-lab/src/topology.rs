//! The validated topology model: hosts, links, tunnels and their shaping, as a lab builds them.
//!
//! Values of these types come from [`Topology::parse`] / [`Topology::load`], which check every
//! field; `docs/lab.md` describes the TOML format.

use crate::addressing::Ipv4Net;
use crate::rate::Rate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// Default link MTU.
pub const DEFAULT_MTU: u32 = 1500;
/// Default VXLAN UDP port (IANA).
pub const DEFAULT_VXLAN_PORT: u16 = 4789;
/// VXLAN over IPv4 adds 50 bytes: outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8.
pub const VXLAN_OVERHEAD: u32 = 50;

/// A whole lab: hosts joined by links, plus tunnels over routed paths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Topology {
    /// Also give every link and tunnel an IPv6 address from 2001:2::/48 (RFC 5180).
    pub ipv6: bool,
    /// The hosts; each becomes a network namespace.
    pub hosts: Vec<Host>,
    /// veth links between two hosts.
    pub links: Vec<Link>,
    /// VXLAN tunnels between two hosts.
    pub tunnels: Vec<Tunnel>,
}

/// One host: a network namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Host {
    /// Name (letters, digits, `-`, `_`), unique in the topology.
    pub name: String,
    /// Forwards packets between its links (ip_forward = 1).
    pub router: bool,
}

/// Which egress directions of a link a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Both directions.
    Both,
    /// Traffic from host `a` to host `b` only.
    AToB,
    /// Traffic from host `b` to host `a` only.
    BToA,
}

/// ethtool features as a page and `lab up` say them: "gro on, tso off".
pub fn offloads_text(offloads: &BTreeMap<String, bool>) -> String {
    offloads
        .iter()
        .map(|(k, on)| format!("{k} {}", if *on { "on" } else { "off" }))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Direction {
    /// Whether traffic sent by end `a` (true) or end `b` (false) is covered.
    pub fn covers_from_a(self, from_a: bool) -> bool {
        match self {
            Direction::Both => true,
            Direction::AToB => from_a,
            Direction::BToA => !from_a,
        }
    }
}

/// Which qdisc shapes a link's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShaperKind {
    /// Token bucket filter: one rate, no classes.
    Tbf,
    /// Hierarchical token bucket: a rate shared by classes.
    Htb,
}

/// Which packets random loss applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Every IP packet.
    Any,
    /// UDP only (keeps a TCP control connection whole).
    Udp,
    /// TCP only.
    Tcp,
    /// ICMP and ICMPv6 only.
    Icmp,
}

/// A veth link between hosts `a` and `b`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// Name used by scenarios and counters; default `"<a>-<b>"`.
    pub name: String,
    /// One end's host.
    pub a: String,
    /// The other end's host.
    pub b: String,
    /// MTU of both ends.
    pub mtu: u32,
    /// The IPv4 subnet, when given (else one /24 is assigned).
    pub subnet: Option<Ipv4Net>,
    /// Host `a`'s address, when given (needs `subnet`).
    pub a_addr: Option<Ipv4Addr>,
    /// Host `b`'s address, when given (needs `subnet`).
    pub b_addr: Option<Ipv4Addr>,
    /// Rate limit of each shaped egress.
    pub rate: Option<Rate>,
    /// The qdisc that applies `rate` (htb when classes or a band are configured).
    pub shaper: ShaperKind,
    /// Which egress directions are shaped.
    pub direction: Direction,
    /// ethtool -K features to set on both ends (true = on).
    pub offloads: BTreeMap<String, bool>,
    /// htb classes chosen by skb priority (SO_PRIORITY).
    pub classes: Vec<PriorityClass>,
    /// Random loss.
    pub loss: Option<Loss>,
    /// A slow class for packets whose IP total length is in a range.
    pub shape_band: Option<ShapeBand>,
    /// Path emulation (delay, jitter, loss, queue…); with it, `rate` is the emulator's
    /// bottleneck, not a tbf.
    pub emulate: Option<crate::emulation::Emulation>,
}

/// An htb class selected by skb priority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PriorityClass {
    /// The SO_PRIORITY value (skb->priority) whose packets go to this class.
    pub priority: u32,
    /// Guaranteed rate.
    pub rate: Rate,
    /// Most it may borrow up to (default: the link rate).
    pub ceil: Rate,
    /// htb prio, 0 (served first when borrowing) to 7.
    pub prio: u8,
}

/// Random loss of a probability, counted by an nft counter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Loss {
    /// Probability that a packet is dropped, 0 < p ≤ 1.
    pub probability: f64,
    /// Which packets may be dropped.
    pub protocol: Protocol,
    /// Which directions lose packets.
    pub direction: Direction,
}

/// Packets whose IP total length is in `lo..=hi` go through a slow htb class of `rate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShapeBand {
    /// Smallest IP total length in the band (bytes).
    pub lo: u16,
    /// Largest IP total length in the band (bytes).
    pub hi: u16,
    /// Rate (and ceiling) of the band's class.
    pub rate: Rate,
}

/// A VXLAN tunnel between hosts `a` and `b` over a routed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tunnel {
    /// Name used by scenarios (`via`); unique among links and tunnels.
    pub name: String,
    /// One end's host.
    pub a: String,
    /// The other end's host.
    pub b: String,
    /// Routers the encapsulated packets must cross, in order (empty: shortest path).
    pub via: Vec<String>,
    /// VXLAN network identifier.
    pub vni: u32,
    /// UDP destination port.
    pub port: u16,
    /// Tunnel MTU (default: the path's smallest MTU − 50).
    pub mtu: Option<u32>,
    /// The tunnel's inner IPv4 subnet, when given.
    pub subnet: Option<Ipv4Net>,
    /// Whether hosts that reach the tunnel through a router end may learn its path MTU
    /// (default). False: their route into it keeps their link's MTU, locked, so they send
    /// without DF and the router fragments what does not fit beside the encapsulation, as
    /// before path MTU discovery (HYDRANET's redirectors).
    pub pmtu_discovery: bool,
}

impl Topology {
    /// The host called `name`.
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The index of the host called `name`.
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }
}
