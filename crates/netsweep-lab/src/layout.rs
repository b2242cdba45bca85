//! The lab as built: every namespace, interface, address, route, shaper and loss rule, with
//! names. It is the state file (`lab show`/`lab down` in another process read it), the
//! `lab.json` a scenario writes beside its results, and what `describe()` prints.

use crate::addressing::Ipv4Net;
use crate::rate::Rate;
use crate::topology::{Protocol, ShaperKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `schema` of a layout document.
pub const LAYOUT_SCHEMA: &str = "netsweep-lab";
/// `schema_version` of a layout document.
pub const LAYOUT_SCHEMA_VERSION: u32 = 1;

/// A whole lab as built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// Always [`LAYOUT_SCHEMA`].
    pub schema: String,
    /// [`LAYOUT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run id in every name.
    pub run_id: String,
    /// IPv6 addresses were assigned too.
    pub ipv6: bool,
    /// When the lab was built (seconds since the Unix epoch).
    pub created_unix: u64,
    /// The process that built it.
    pub pid: u32,
    /// Hosts (namespaces).
    pub hosts: Vec<HostLayout>,
    /// veth links.
    pub links: Vec<LinkLayout>,
    /// VXLAN tunnels.
    pub tunnels: Vec<TunnelLayout>,
}

/// One host as built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostLayout {
    /// Host name from the topology.
    pub name: String,
    /// Its network namespace, `nsw-<run id>-<host>`.
    pub netns: String,
    /// Forwards packets.
    pub router: bool,
    /// Routes added to its table (beyond the connected subnets).
    pub routes: Vec<RouteLayout>,
    /// The nft ruleset loaded into it (table `nsw-lab`), if any.
    pub nft: Option<String>,
}

/// One route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteLayout {
    /// Destination prefix, e.g. "198.18.2.0/24" or "198.18.2.2/32".
    pub dest: String,
    /// Next hop address.
    pub via: IpAddr,
    /// Outgoing interface.
    pub dev: String,
    /// `mtu lock N`: the route's MTU, which path MTU discovery may not lower: the host sends
    /// without DF and routers fragment (a route into a tunnel with `pmtu_discovery = false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu_lock: Option<u32>,
}

/// One end of a link or tunnel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Host name.
    pub host: String,
    /// Interface name inside the host's namespace.
    pub iface: String,
    /// IPv4 address.
    pub addr: Ipv4Addr,
    /// IPv4 prefix length.
    pub prefix: u8,
    /// IPv6 address (prefix 64), when IPv6 is on.
    pub addr6: Option<Ipv6Addr>,
}

/// One veth link as built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkLayout {
    /// Link name.
    pub name: String,
    /// End `a`.
    pub a: Endpoint,
    /// End `b`.
    pub b: Endpoint,
    /// MTU of both ends.
    pub mtu: u32,
    /// IPv4 subnet.
    pub subnet: Ipv4Net,
    /// IPv6 subnet, when IPv6 is on.
    pub subnet6: Option<String>,
    /// ethtool -K settings applied to both ends.
    pub offloads: BTreeMap<String, bool>,
    /// Egress shapers (one per shaped direction).
    pub shapers: Vec<ShaperLayout>,
    /// Loss rules (one per lossy direction).
    pub loss: Vec<LossLayout>,
    /// Its path emulator, when it is emulated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<crate::emulation::EmulatorLayout>,
}

/// A root qdisc on one interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShaperLayout {
    /// Host whose egress is shaped.
    pub host: String,
    /// The shaped interface.
    pub iface: String,
    /// The host at the other end.
    pub toward: String,
    /// tbf or htb.
    pub kind: ShaperKind,
    /// The rate.
    pub rate: Rate,
    /// Bucket size in bytes (tbf burst; htb burst and cburst of the root class).
    pub burst: u32,
    /// tbf queue limit in bytes.
    pub limit: Option<u32>,
    /// htb classes (root first).
    pub classes: Vec<HtbClassLayout>,
    /// htb default class id, e.g. "1:2".
    pub default_class: Option<String>,
}

/// Why an htb class exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassRole {
    /// The root class holding the link rate.
    Root,
    /// Where unclassified traffic goes.
    Default,
    /// Selected by skb priority (SO_PRIORITY).
    Priority,
    /// Selected by IP length (`shape_band`).
    Band,
}

/// One htb class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbClassLayout {
    /// Class id, e.g. "1:10" (hex minor, as tc writes it).
    pub classid: String,
    /// Parent id, e.g. "1:" or "1:1".
    pub parent: String,
    /// Why it exists.
    pub role: ClassRole,
    /// Guaranteed rate.
    pub rate: Rate,
    /// Ceiling.
    pub ceil: Rate,
    /// htb prio (leaves only).
    pub prio: Option<u8>,
    /// burst and cburst in bytes.
    pub burst: u32,
    /// DRR quantum in bytes.
    pub quantum: u32,
    /// The SO_PRIORITY value that selects it (role priority).
    pub skb_priority: Option<u32>,
    /// The IP total length range that selects it (role band).
    pub ip_len: Option<(u16, u16)>,
}

/// One random-loss rule: packets from `from` to `to` dropped on arrival at `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossLayout {
    /// Sending host.
    pub from: String,
    /// Receiving host, where the rule lives (prerouting, before any other processing).
    pub to: String,
    /// The receiving interface the rule matches.
    pub iface: String,
    /// Drop probability actually configured (threshold / modulus).
    pub probability: f64,
    /// `numgen random mod <modulus>`.
    pub modulus: u32,
    /// `… < <threshold> drop`.
    pub threshold: u32,
    /// Which packets.
    pub protocol: Protocol,
    /// nft table (in `to`'s namespace).
    pub table: String,
    /// Named nft counter of the drops.
    pub counter: String,
}

/// One VXLAN tunnel as built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunnelLayout {
    /// Tunnel name.
    pub name: String,
    /// End `a` (inner address).
    pub a: Endpoint,
    /// End `b` (inner address).
    pub b: Endpoint,
    /// VXLAN network identifier.
    pub vni: u32,
    /// UDP port.
    pub port: u16,
    /// Tunnel MTU.
    pub mtu: u32,
    /// Smallest MTU along the underlay path.
    pub underlay_mtu: u32,
    /// Inner IPv4 subnet.
    pub subnet: Ipv4Net,
    /// Inner IPv6 subnet, when IPv6 is on.
    pub subnet6: Option<String>,
    /// Outer source address at `a`.
    pub underlay_a: Ipv4Addr,
    /// Outer source address at `b`.
    pub underlay_b: Ipv4Addr,
    /// Hosts the encapsulated packets cross, `a` first, `b` last.
    pub path: Vec<String>,
    /// Whether hosts routing into it through a router end may learn its path MTU (absent in
    /// older files: yes).
    #[serde(default = "yes")]
    pub pmtu_discovery: bool,
}

fn yes() -> bool {
    true
}

impl Layout {
    /// The host called `name`.
    pub fn host(&self, name: &str) -> Option<&HostLayout> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The link called `name`.
    pub fn link(&self, name: &str) -> Option<&LinkLayout> {
        self.links.iter().find(|l| l.name == name)
    }

    /// The tunnel called `name`.
    pub fn tunnel(&self, name: &str) -> Option<&TunnelLayout> {
        self.tunnels.iter().find(|t| t.name == name)
    }

    /// Every namespace of the lab.
    pub fn namespaces(&self) -> Vec<&str> {
        let emulators = self
            .links
            .iter()
            .filter_map(|l| l.emulator.as_ref())
            .filter(|e| e.engine == crate::emulation::Engine::Netsweep)
            .map(|e| e.netns.as_str());
        self.hosts
            .iter()
            .map(|h| h.netns.as_str())
            .chain(emulators)
            .collect()
    }
}

impl LinkLayout {
    /// The end on `host`, if the link touches it.
    pub fn end(&self, host: &str) -> Option<&Endpoint> {
        [&self.a, &self.b].into_iter().find(|e| e.host == host)
    }
}

impl TunnelLayout {
    /// The end on `host`, if the tunnel touches it.
    pub fn end(&self, host: &str) -> Option<&Endpoint> {
        [&self.a, &self.b].into_iter().find(|e| e.host == host)
    }
}

impl Layout {
    /// The hosts that are not routers, in topology order: the hosts a `netsweep mesh` rank
    /// can stand in for (rank i is the i-th).
    pub fn end_hosts(&self) -> Vec<&HostLayout> {
        self.hosts.iter().filter(|h| !h.router).collect()
    }

    /// The IPv4 address `from` should use to reach `to`: `to`'s end of a link between them
    /// when there is one, else `to`'s first address (reached through routers).
    pub fn address_toward(&self, from: &str, to: &str) -> Option<std::net::Ipv4Addr> {
        let direct = self.links.iter().find_map(|l| {
            if l.a.host == from && l.b.host == to {
                Some(l.b.addr)
            } else if l.b.host == from && l.a.host == to {
                Some(l.a.addr)
            } else {
                None
            }
        });
        direct.or_else(|| {
            self.links.iter().find_map(|l| {
                [&l.a, &l.b]
                    .into_iter()
                    .find(|e| e.host == to)
                    .map(|e| e.addr)
            })
        })
    }
}
