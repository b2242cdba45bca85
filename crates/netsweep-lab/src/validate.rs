//! Semantic checks of a parsed topology file: every error names the field path and line, and
//! says the fix.

use crate::addressing::{Ipv4Net, BENCH_V4};
use crate::error::SpecError;
use crate::names::{is_simple_name, HOST_NAME_MAX};
use crate::rate::Rate;
use crate::raw::{RawLink, RawTopology, RawTunnel};
use crate::routing::Graph;
use crate::tomlparse::start;
use crate::topology::{
    Direction, Host, Link, Loss, PriorityClass, Protocol, ShapeBand, ShaperKind, Topology, Tunnel,
    DEFAULT_MTU, DEFAULT_VXLAN_PORT,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use toml::Spanned;

/// Smallest MTU Linux accepts for IPv4.
pub const MIN_MTU: u32 = 68;
/// Largest MTU of a veth.
pub const MAX_MTU: u32 = 65535;
/// Most priority classes on one link.
pub const MAX_CLASSES: usize = 64;
/// Smallest loss probability: one in a million (nft `numgen random mod 1000000`).
pub const MIN_LOSS: f64 = 1e-6;

/// Resolves a host name field (path, value) to a known host, or a located error.
type HostOf<'a> = dyn Fn(String, &Spanned<String>) -> Result<String, SpecError> + 'a;

/// Builds errors located in one source text.
struct Ctx<'a> {
    src: &'a str,
}

impl Ctx<'_> {
    fn err(&self, field: impl Into<String>, offset: usize, msg: impl Into<String>) -> SpecError {
        SpecError::new(field, msg).at(self.src, offset)
    }

    fn rate(&self, field: &str, s: &Spanned<String>) -> Result<Rate, SpecError> {
        Rate::parse(s.get_ref()).map_err(|m| self.err(field, start(s), m))
    }

    fn subnet(&self, field: &str, s: &Spanned<String>) -> Result<Ipv4Net, SpecError> {
        let net: Ipv4Net = s
            .get_ref()
            .parse()
            .map_err(|m: String| self.err(field, start(s), m))?;
        if !net.within(BENCH_V4) {
            return Err(self.err(
                field,
                start(s),
                format!(
                    "{net} is outside 198.18.0.0/15, the only range a lab may use: pick a subnet such as 198.18.40.0/24"
                ),
            ));
        }
        if net.prefix > 30 {
            return Err(self.err(
                field,
                start(s),
                format!("{net} has no room for two hosts: use a prefix of /30 or shorter"),
            ));
        }
        Ok(net)
    }

    fn mtu(&self, field: &str, m: &Spanned<u32>) -> Result<u32, SpecError> {
        let v = *m.get_ref();
        if !(MIN_MTU..=MAX_MTU).contains(&v) {
            return Err(self.err(
                field,
                start(m),
                format!("MTU {v} is out of range: use {MIN_MTU}–{MAX_MTU} (1500 is Ethernet, 9000 jumbo)"),
            ));
        }
        Ok(v)
    }
}

/// Checks `raw` and turns it into a [`Topology`].
pub(crate) fn validate(raw: RawTopology, src: &str) -> Result<Topology, SpecError> {
    let cx = Ctx { src };
    if raw.hosts.is_empty() {
        return Err(SpecError::new(
            "hosts",
            "the topology has no hosts: add at least one [[hosts]] table with a name",
        ));
    }
    let mut hosts = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, h) in raw.hosts.iter().enumerate() {
        let h = h.get_ref();
        let name = h.name.get_ref();
        let field = format!("hosts[{i}].name");
        if !is_simple_name(name, HOST_NAME_MAX) {
            return Err(cx.err(
                field,
                start(&h.name),
                format!("\"{name}\" is not a usable host name: use 1–{HOST_NAME_MAX} letters, digits, '-' or '_', starting with a letter or digit"),
            ));
        }
        if !seen.insert(name.clone()) {
            return Err(cx.err(
                field,
                start(&h.name),
                format!("host \"{name}\" is defined twice: give each host its own name"),
            ));
        }
        hosts.push(Host {
            name: name.clone(),
            router: h.router,
        });
    }
    let host_of = |field: String, s: &Spanned<String>| -> Result<String, SpecError> {
        let n = s.get_ref();
        if seen.contains(n) {
            Ok(n.clone())
        } else {
            let known: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
            Err(cx.err(
                field,
                start(s),
                format!(
                    "unknown host \"{n}\": the hosts are {}",
                    known
                        .iter()
                        .map(|k| format!("\"{k}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ))
        }
    };

    let mut names = BTreeSet::new();
    let mut links = Vec::new();
    for (i, l) in raw.links.iter().enumerate() {
        links.push(link(&cx, i, l, &host_of, &mut names)?);
    }
    check_subnet_overlaps(&cx, &raw, &links)?;

    let graph = Graph {
        routers: hosts.iter().map(|h| h.router).collect(),
        links: links
            .iter()
            .map(|l| (index_of(&hosts, &l.a), index_of(&hosts, &l.b)))
            .collect(),
    };
    let mut tunnels = Vec::new();
    let mut vnis = BTreeSet::new();
    for (j, t) in raw.tunnels.iter().enumerate() {
        let tunnel = tunnel(&cx, j, t, &host_of, &hosts, &graph, &mut names)?;
        if !vnis.insert(tunnel.vni) {
            return Err(cx.err(
                format!("tunnels[{j}].vni"),
                start(t),
                format!(
                    "VNI {} is used by another tunnel: give each tunnel its own vni",
                    tunnel.vni
                ),
            ));
        }
        tunnels.push(tunnel);
    }
    if links.len() > 255 || tunnels.len() > 255 {
        return Err(SpecError::new(
            "links",
            "a lab holds at most 255 links and 255 tunnels",
        ));
    }
    Ok(Topology {
        ipv6: raw.ipv6,
        hosts,
        links,
        tunnels,
    })
}

fn index_of(hosts: &[Host], name: &str) -> usize {
    hosts
        .iter()
        .position(|h| h.name == name)
        .unwrap_or(usize::MAX)
}

fn unique_name(
    cx: &Ctx<'_>,
    field: String,
    given: Option<&Spanned<String>>,
    default: String,
    offset: usize,
    names: &mut BTreeSet<String>,
) -> Result<String, SpecError> {
    let (name, offset) = match given {
        Some(s) => (s.get_ref().clone(), start(s)),
        None => (default, offset),
    };
    if !is_simple_name(&name, 64) {
        return Err(cx.err(
            field,
            offset,
            format!("\"{name}\" is not a usable name: use letters, digits, '-' or '_'"),
        ));
    }
    if !names.insert(name.clone()) {
        let fix = if given.is_some() {
            "give each link and tunnel its own name".to_string()
        } else {
            format!("two links or tunnels would both be called \"{name}\": add `name = \"…\"` to this one")
        };
        return Err(cx.err(field, offset, format!("name \"{name}\" is taken: {fix}")));
    }
    Ok(name)
}

fn link(
    cx: &Ctx<'_>,
    i: usize,
    spanned: &Spanned<RawLink>,
    host_of: &HostOf<'_>,
    names: &mut BTreeSet<String>,
) -> Result<Link, SpecError> {
    let l = spanned.get_ref();
    let p = format!("links[{i}]");
    let a = host_of(format!("{p}.a"), &l.a)?;
    let b = host_of(format!("{p}.b"), &l.b)?;
    if a == b {
        return Err(cx.err(
            format!("{p}.b"),
            start(&l.b),
            format!("a link joins two different hosts, but both ends are \"{a}\""),
        ));
    }
    let name = unique_name(
        cx,
        format!("{p}.name"),
        l.name.as_ref(),
        format!("{a}-{b}"),
        start(spanned),
        names,
    )?;
    let mtu = match &l.mtu {
        Some(m) => cx.mtu(&format!("{p}.mtu"), m)?,
        None => DEFAULT_MTU,
    };
    let subnet = match &l.subnet {
        Some(s) => Some(cx.subnet(&format!("{p}.subnet"), s)?),
        None => None,
    };
    let addr = |which: &str, s: &Option<Spanned<String>>| -> Result<Option<Ipv4Addr>, SpecError> {
        let Some(s) = s else { return Ok(None) };
        let field = format!("{p}.{which}");
        let Some(net) = subnet else {
            return Err(cx.err(
                field,
                start(s),
                format!("an address needs its subnet: add `subnet = \"…/24\"` to {p}"),
            ));
        };
        let ip: Ipv4Addr = s.get_ref().parse().map_err(|_| {
            cx.err(
                &field,
                start(s),
                format!("\"{}\" is not an IPv4 address", s.get_ref()),
            )
        })?;
        if !net.is_host_addr(ip) {
            return Err(cx.err(
                field,
                start(s),
                format!("{ip} is not a host address of {net}"),
            ));
        }
        Ok(Some(ip))
    };
    let a_addr = addr("a_addr", &l.a_addr)?;
    let b_addr = addr("b_addr", &l.b_addr)?;
    if a_addr.is_some() && a_addr == b_addr {
        return Err(cx.err(
            format!("{p}.b_addr"),
            l.b_addr.as_ref().map_or(0, start),
            "both ends have the same address: give them different ones",
        ));
    }
    let rate = match &l.rate {
        Some(r) => Some(cx.rate(&format!("{p}.rate"), r)?),
        None => None,
    };
    let needs_htb = !l.classes.is_empty() || l.shape_band.is_some();
    let shaper = match (&l.shaper, rate) {
        (Some(s), None) => {
            return Err(cx.err(
                format!("{p}.shaper"),
                start(s),
                "a shaper needs a rate: add `rate = \"100mbit\"` (or remove `shaper`)",
            ))
        }
        (Some(s), Some(_)) if *s.get_ref() == ShaperKind::Tbf && needs_htb => return Err(cx.err(
            format!("{p}.shaper"),
            start(s),
            "tbf has no classes: use shaper = \"htb\" with classes or shape_band, or remove them",
        )),
        (Some(s), Some(_)) => *s.get_ref(),
        (None, _) if needs_htb => ShaperKind::Htb,
        (None, _) => ShaperKind::Tbf,
    };
    if needs_htb && rate.is_none() {
        return Err(cx.err(
            format!("{p}.rate"),
            start(spanned),
            "classes and shape_band share the link's rate in htb: add `rate = \"1gbit\"` (or the link's speed) to this link",
        ));
    }
    let link_rate = rate.unwrap_or(Rate::from_bits(0));
    let mut offloads = BTreeMap::new();
    if let Some(o) = &l.offloads {
        for (k, v) in o.get_ref() {
            if k.is_empty()
                || !k
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            {
                return Err(cx.err(
                    format!("{p}.offloads.{k}"),
                    start(o),
                    format!("\"{k}\" is not an ethtool feature name: use names from `ethtool -k`, e.g. tso, gso, gro, tx, rx, sg"),
                ));
            }
            offloads.insert(k.clone(), v.0);
        }
    }
    let mut classes = Vec::new();
    if l.classes.len() > MAX_CLASSES {
        return Err(cx.err(
            format!("{p}.classes"),
            start(&l.classes[MAX_CLASSES]),
            format!("a link holds at most {MAX_CLASSES} classes"),
        ));
    }
    let mut prios = BTreeSet::new();
    for (c, cl) in l.classes.iter().enumerate() {
        let cp = format!("{p}.classes[{c}]");
        let raw = cl.get_ref();
        if !prios.insert(raw.priority) {
            return Err(cx.err(
                format!("{cp}.priority"),
                start(cl),
                format!(
                    "priority {} has two classes: give each class its own priority",
                    raw.priority
                ),
            ));
        }
        let crate_ = cx.rate(&format!("{cp}.rate"), &raw.rate)?;
        let ceil = match &raw.ceil {
            Some(c) => cx.rate(&format!("{cp}.ceil"), c)?,
            None => link_rate.max(crate_),
        };
        if ceil < crate_ {
            return Err(cx.err(
                format!("{cp}.ceil"),
                raw.ceil.as_ref().map_or(start(cl), start),
                format!(
                    "ceil {ceil} is below the class rate {crate_}: make ceil at least the rate"
                ),
            ));
        }
        let prio = match &raw.prio {
            Some(pr) if *pr.get_ref() > 7 => {
                return Err(cx.err(
                    format!("{cp}.prio"),
                    start(pr),
                    format!(
                        "htb prio {} is out of range: use 0 (first) to 7 (last)",
                        pr.get_ref()
                    ),
                ))
            }
            Some(pr) => *pr.get_ref(),
            None => 0,
        };
        classes.push(PriorityClass {
            priority: raw.priority,
            rate: crate_,
            ceil,
            prio,
        });
    }
    let loss = match &l.loss {
        None => None,
        Some(ls) => {
            let r = ls.get_ref();
            let pr = r.probability;
            if !(MIN_LOSS..=1.0).contains(&pr) {
                return Err(cx.err(
                    format!("{p}.loss"),
                    start(ls),
                    format!("loss probability {pr} is out of range: use a fraction between 0.000001 and 1 (0.01 = 1%)"),
                ));
            }
            Some(Loss {
                probability: pr,
                protocol: r.protocol.unwrap_or(Protocol::Any),
                direction: r.direction.unwrap_or(Direction::Both),
            })
        }
    };
    let shape_band = match &l.shape_band {
        None => None,
        Some(sb) => {
            let r = sb.get_ref();
            if r.lo > r.hi || r.lo < 20 {
                return Err(cx.err(
                    format!("{p}.shape_band"),
                    start(sb),
                    format!(
                        "band {}..{} is not a range of IP total lengths: use 20 ≤ lo ≤ hi ≤ 65535",
                        r.lo, r.hi
                    ),
                ));
            }
            Some(ShapeBand {
                lo: r.lo,
                hi: r.hi,
                rate: cx.rate(&format!("{p}.shape_band.rate"), &r.rate)?,
            })
        }
    };
    let emulate = match &l.emulate {
        None => None,
        Some(e) => {
            if !classes.is_empty() || shape_band.is_some() {
                return Err(cx.err(
                    format!("{p}.emulate"),
                    start(e),
                    "an emulated link's bottleneck is the emulator's: use emulate.qdisc = \"prio\" \
                     (by DSCP) instead of htb classes or a shape_band",
                ));
            }
            Some(
                e.get_ref()
                    .check(&p, rate)
                    .map_err(|x| crate::emulation::located(x, cx.src, start(e)))?,
            )
        }
    };
    Ok(Link {
        name,
        a,
        b,
        mtu,
        subnet,
        a_addr,
        b_addr,
        rate,
        shaper,
        direction: l.direction.unwrap_or(Direction::Both),
        offloads,
        classes,
        loss,
        shape_band,
        emulate,
    })
}

fn check_subnet_overlaps(cx: &Ctx<'_>, raw: &RawTopology, links: &[Link]) -> Result<(), SpecError> {
    let mut given: Vec<(String, Ipv4Net)> = Vec::new();
    for (i, l) in links.iter().enumerate() {
        if let Some(net) = l.subnet {
            if let Some((other, _)) = given.iter().find(|(_, n)| n.overlaps(net)) {
                let offset = raw.links[i].get_ref().subnet.as_ref().map_or(0, start);
                return Err(cx.err(
                    format!("links[{i}].subnet"),
                    offset,
                    format!("{net} overlaps the subnet of {other}: give each link its own subnet"),
                ));
            }
            given.push((format!("links[{i}]"), net));
        }
    }
    for (j, t) in raw.tunnels.iter().enumerate() {
        if let Some(s) = &t.get_ref().subnet {
            let net = cx.subnet(&format!("tunnels[{j}].subnet"), s)?;
            if let Some((other, _)) = given.iter().find(|(_, n)| n.overlaps(net)) {
                return Err(cx.err(
                    format!("tunnels[{j}].subnet"),
                    start(s),
                    format!(
                        "{net} overlaps the subnet of {other}: give each tunnel its own subnet"
                    ),
                ));
            }
            given.push((format!("tunnels[{j}]"), net));
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn tunnel(
    cx: &Ctx<'_>,
    j: usize,
    spanned: &Spanned<RawTunnel>,
    host_of: &HostOf<'_>,
    hosts: &[Host],
    graph: &Graph,
    names: &mut BTreeSet<String>,
) -> Result<Tunnel, SpecError> {
    let t = spanned.get_ref();
    let p = format!("tunnels[{j}]");
    if t.kind.get_ref() != "vxlan" {
        return Err(cx.err(
            format!("{p}.kind"),
            start(&t.kind),
            format!(
                "tunnel kind \"{}\" is not supported: use \"vxlan\"",
                t.kind.get_ref()
            ),
        ));
    }
    let a = host_of(format!("{p}.a"), &t.a)?;
    let b = host_of(format!("{p}.b"), &t.b)?;
    if a == b {
        return Err(cx.err(
            format!("{p}.b"),
            start(&t.b),
            format!("a tunnel joins two different hosts, but both ends are \"{a}\""),
        ));
    }
    let mut via = Vec::new();
    for (k, v) in t.via.iter().enumerate() {
        let name = host_of(format!("{p}.via[{k}]"), v)?;
        if !hosts.iter().any(|h| h.name == name && h.router) {
            return Err(cx.err(
                format!("{p}.via[{k}]"),
                start(v),
                format!("\"{name}\" does not forward: set `router = true` on host \"{name}\""),
            ));
        }
        via.push(name);
    }
    let via_idx: Vec<usize> = via.iter().map(|v| index_of(hosts, v)).collect();
    if graph
        .path_through(index_of(hosts, &a), &via_idx, index_of(hosts, &b))
        .is_none()
    {
        return Err(cx.err(
            p.clone(),
            start(spanned),
            format!("no path from \"{a}\" to \"{b}\"{}: join them with links, with `router = true` on every host in between",
                if via.is_empty() { String::new() } else { format!(" through {}", via.join(", ")) }),
        ));
    }
    let name = unique_name(
        cx,
        format!("{p}.name"),
        t.name.as_ref(),
        format!("vx{j}"),
        start(spanned),
        names,
    )?;
    let vni = match &t.vni {
        Some(v) if !(1..=0xFF_FFFF).contains(v.get_ref()) => {
            return Err(cx.err(
                format!("{p}.vni"),
                start(v),
                format!("VNI {} is out of range: use 1–16777215", v.get_ref()),
            ))
        }
        Some(v) => *v.get_ref(),
        None => 100 + j as u32,
    };
    let mtu = match &t.mtu {
        Some(m) => Some(cx.mtu(&format!("{p}.mtu"), m)?),
        None => None,
    };
    let subnet = match &t.subnet {
        Some(s) => Some(cx.subnet(&format!("{p}.subnet"), s)?),
        None => None,
    };
    Ok(Tunnel {
        name,
        a,
        b,
        via,
        vni,
        port: t.port.unwrap_or(DEFAULT_VXLAN_PORT),
        mtu,
        subnet,
        pmtu_discovery: t.pmtu_discovery.unwrap_or(true),
    })
}
