//! Topology + run id → [`Layout`]: every name, address, route, shaper and rule decided before
//! anything is built, so it can be checked without root and recorded exactly.

use crate::addressing::{self, PairAddrs, Request};
use crate::error::{LabError, Result};
use crate::layout::{
    Endpoint, HostLayout, Layout, LinkLayout, LossLayout, RouteLayout, ShaperLayout, TunnelLayout,
    LAYOUT_SCHEMA, LAYOUT_SCHEMA_VERSION,
};
use crate::names;
use crate::nftables;
use crate::routing::{Graph, Hop};
use crate::shaping;
use crate::topology::{Topology, VXLAN_OVERHEAD};
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

fn host_index(topo: &Topology, name: &str, field: &str) -> Result<usize> {
    topo.host_index(name).ok_or_else(|| {
        LabError::Usage(format!(
            "{field}: unknown host \"{name}\": add it to the topology's hosts"
        ))
    })
}

/// The host graph of a topology.
pub fn graph(topo: &Topology) -> Result<Graph> {
    let mut links = Vec::new();
    for (i, l) in topo.links.iter().enumerate() {
        links.push((
            host_index(topo, &l.a, &format!("links[{i}].a"))?,
            host_index(topo, &l.b, &format!("links[{i}].b"))?,
        ));
    }
    Ok(Graph {
        routers: topo.hosts.iter().map(|h| h.router).collect(),
        links,
    })
}

fn endpoint(host: &str, iface: String, addrs: &PairAddrs, is_a: bool) -> Endpoint {
    Endpoint {
        host: host.to_string(),
        iface,
        addr: if is_a { addrs.a } else { addrs.b },
        prefix: addrs.subnet.prefix,
        addr6: addrs.v6.map(|(_, a, b)| if is_a { a } else { b }),
    }
}

/// Decides the whole lab for `topo` under `run_id`.
pub fn plan(topo: &Topology, run_id: &str) -> Result<Layout> {
    names::check_run_id(run_id).map_err(LabError::Usage)?;
    if topo.hosts.is_empty() {
        return Err(LabError::Usage(
            "the topology has no hosts: add at least one".into(),
        ));
    }
    let g = graph(topo)?;
    let reqs = |subnet, a, b| Request { subnet, a, b };
    let link_reqs: Vec<Request> = topo
        .links
        .iter()
        .map(|l| reqs(l.subnet, l.a_addr, l.b_addr))
        .collect();
    let tunnel_reqs: Vec<Request> = topo
        .tunnels
        .iter()
        .map(|t| reqs(t.subnet, None, None))
        .collect();
    let (link_addrs, tunnel_addrs) =
        addressing::assign(&link_reqs, &tunnel_reqs, topo.ipv6).map_err(LabError::Usage)?;

    let mut links = Vec::new();
    for (i, (l, addrs)) in topo.links.iter().zip(&link_addrs).enumerate() {
        let a = endpoint(&l.a, names::link_iface(i, &l.b), addrs, true);
        let b = endpoint(&l.b, names::link_iface(i, &l.a), addrs, false);
        let mut shapers = Vec::new();
        let mut loss = Vec::new();
        for from_a in [true, false] {
            let (src, dst) = if from_a { (&a, &b) } else { (&b, &a) };
            // An emulated link's rate is the emulator's bottleneck.
            if l.direction.covers_from_a(from_a) && l.emulate.is_none() {
                shapers.extend(shaping::plan(l, &src.host, &src.iface, &dst.host));
            }
            if let Some(ls) = &l.loss {
                if ls.direction.covers_from_a(from_a) {
                    loss.push(nftables::loss_rule(
                        i,
                        from_a,
                        &src.host,
                        &dst.host,
                        &dst.iface,
                        ls.probability,
                        ls.protocol,
                    ));
                }
            }
        }
        links.push(LinkLayout {
            name: l.name.clone(),
            a,
            b,
            mtu: l.mtu,
            subnet: addrs.subnet,
            subnet6: addrs.v6.map(|(n, _, _)| format!("{n}/64")),
            offloads: l.offloads.clone(),
            shapers,
            loss,
            emulator: l
                .emulate
                .as_ref()
                .map(|e| crate::emulation::plan(e, run_id, i, &l.name, l.mtu)),
        });
    }

    let mut hosts: Vec<HostLayout> = topo
        .hosts
        .iter()
        .map(|h| HostLayout {
            name: h.name.clone(),
            netns: names::netns(run_id, &h.name),
            router: h.router,
            routes: Vec::new(),
            nft: None,
        })
        .collect();

    // Routes to the subnets of links a host is not on.
    for r in g.routes() {
        let dest = &links[r.dest_link];
        let via = &links[r.via_link];
        let (Some(me), Some(nh)) = (
            via.end(&topo.hosts[r.host].name),
            via.end(&topo.hosts[r.next_hop].name),
        ) else {
            continue;
        };
        hosts[r.host].routes.push(RouteLayout {
            dest: dest.subnet.to_string(),
            via: IpAddr::V4(nh.addr),
            dev: me.iface.clone(),
            mtu_lock: None,
        });
        if let (Some(d6), Some(nh6)) = (&dest.subnet6, nh.addr6) {
            hosts[r.host].routes.push(RouteLayout {
                dest: d6.clone(),
                via: IpAddr::V6(nh6),
                dev: me.iface.clone(),
                mtu_lock: None,
            });
        }
    }

    let mut tunnels = Vec::new();
    for (j, (t, addrs)) in topo.tunnels.iter().zip(&tunnel_addrs).enumerate() {
        let field = format!("tunnels[{j}]");
        let ia = host_index(topo, &t.a, &format!("{field}.a"))?;
        let ib = host_index(topo, &t.b, &format!("{field}.b"))?;
        let via: Vec<usize> = t
            .via
            .iter()
            .map(|v| host_index(topo, v, &format!("{field}.via")))
            .collect::<Result<_>>()?;
        let hops = g.path_through(ia, &via, ib).ok_or_else(|| {
            LabError::Usage(format!(
                "{field}: no path from \"{}\" to \"{}\": join them with links through hosts with `router = true`",
                t.a, t.b
            ))
        })?;
        let mut pins = Vec::new();
        let tunnel =
            tunnel_layout(topo, &links, j, t, addrs, ia, &hops, &mut pins).ok_or_else(|| {
                LabError::Usage(format!(
                    "{field}: a tunnel joins two different hosts, but both ends are \"{}\"",
                    t.a
                ))
            })?;
        for (h, route) in pins {
            let routes = &mut hosts[h].routes;
            match routes.iter().find(|r| r.dest == route.dest) {
                Some(r) if r.via == route.via => {} // another tunnel pinned the same path
                Some(r) => {
                    return Err(LabError::Usage(format!(
                        "{field}: its underlay needs {} via {} in {}, but another tunnel sends it via {}: give the tunnels different end links or the same `via`",
                        route.dest, route.via, topo.hosts[h].name, r.via
                    )))
                }
                None => routes.push(route),
            }
        }
        tunnel_routes(&mut hosts, &links, topo, &tunnel);
        tunnels.push(tunnel);
    }

    // nft rules per namespace.
    for h in hosts.iter_mut() {
        let loss: Vec<&LossLayout> = links
            .iter()
            .flat_map(|l| l.loss.iter())
            .filter(|r| r.to == h.name)
            .collect();
        let shapers: Vec<&ShaperLayout> = links
            .iter()
            .flat_map(|l| l.shapers.iter())
            .filter(|s| s.host == h.name)
            .collect();
        h.nft = nftables::script(&loss, &shapers, topo.ipv6);
    }

    Ok(Layout {
        schema: LAYOUT_SCHEMA.to_string(),
        schema_version: LAYOUT_SCHEMA_VERSION,
        run_id: run_id.to_string(),
        ipv6: topo.ipv6,
        created_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        pid: std::process::id(),
        hosts,
        links,
        tunnels,
    })
}

/// Routes the tunnel's inner subnet from every host that is not one of its ends through an
/// end that is a router (a redirector that encapsulates what it forwards, as HYDRANET's did):
/// by the next hop of the host's route toward the link that carries that end's underlay
/// address. Without path MTU discovery the route keeps its interface's MTU, locked.
fn tunnel_routes(
    hosts: &mut [HostLayout],
    links: &[LinkLayout],
    topo: &Topology,
    t: &TunnelLayout,
) {
    let inner = t.subnet.to_string();
    for (end, underlay) in [(&t.a, t.underlay_a), (&t.b, t.underlay_b)] {
        if !topo.host(&end.host).is_some_and(|h| h.router) {
            continue;
        }
        let Some(carrier) = links.iter().find(|l| {
            [&l.a, &l.b]
                .iter()
                .any(|e| e.host == end.host && e.addr == underlay)
        }) else {
            continue;
        };
        let toward = carrier.subnet.to_string();
        for h in hosts.iter_mut() {
            if t.end(&h.name).is_some() || h.routes.iter().any(|r| r.dest == inner) {
                continue;
            }
            let Some(r) = h.routes.iter().find(|r| r.dest == toward).cloned() else {
                continue;
            };
            let mtu_lock = if t.pmtu_discovery {
                None
            } else {
                links
                    .iter()
                    .find(|l| l.end(&h.name).is_some_and(|e| e.iface == r.dev))
                    .map(|l| l.mtu)
            };
            h.routes.push(RouteLayout {
                dest: inner.clone(),
                mtu_lock,
                ..r
            });
        }
    }
}

/// Lays out tunnel `j` over `hops`, and lists the /32 routes (host index, route) that pin its
/// underlay path in every host along it, so encapsulated packets take that path even when a
/// shorter one exists.
#[allow(clippy::too_many_arguments)]
fn tunnel_layout(
    topo: &Topology,
    links: &[LinkLayout],
    j: usize,
    t: &crate::topology::Tunnel,
    addrs: &PairAddrs,
    ia: usize,
    hops: &[Hop],
    pins: &mut Vec<(usize, RouteLayout)>,
) -> Option<TunnelLayout> {
    // hosts along the path: ia, hops[0].to, …
    let mut path = vec![ia];
    path.extend(hops.iter().map(|h| h.to));
    let name_of = |h: usize| topo.hosts[h].name.as_str();
    let end_on = |link: usize, host: usize| links[link].end(name_of(host)).cloned();
    let first = hops.first()?.link;
    let last = hops.last()?.link;
    let local = end_on(first, path[0])?;
    let remote = end_on(last, path[path.len() - 1])?;
    // Pin: forward toward remote, backward toward local.
    let n = hops.len();
    for k in 0..n {
        let here = path[k];
        let next = path[k + 1];
        let link = hops[k].link;
        if k + 1 < n {
            if let (Some(me), Some(nh)) = (end_on(link, here), end_on(link, next)) {
                pins.push((
                    here,
                    RouteLayout {
                        dest: format!("{}/32", remote.addr),
                        via: IpAddr::V4(nh.addr),
                        dev: me.iface,
                        mtu_lock: None,
                    },
                ));
            }
        }
        if k > 0 {
            if let (Some(me), Some(nh)) = (end_on(link, next), end_on(link, here)) {
                pins.push((
                    next,
                    RouteLayout {
                        dest: format!("{}/32", local.addr),
                        via: IpAddr::V4(nh.addr),
                        dev: me.iface,
                        mtu_lock: None,
                    },
                ));
            }
        }
    }
    let underlay_mtu = hops.iter().map(|h| links[h.link].mtu).min().unwrap_or(1500);
    Some(TunnelLayout {
        name: t.name.clone(),
        a: endpoint(&t.a, names::tunnel_iface(j, &t.b), addrs, true),
        b: endpoint(&t.b, names::tunnel_iface(j, &t.a), addrs, false),
        vni: t.vni,
        port: t.port,
        mtu: t
            .mtu
            .unwrap_or(underlay_mtu.saturating_sub(VXLAN_OVERHEAD).max(68)),
        underlay_mtu,
        subnet: addrs.subnet,
        subnet6: addrs.v6.map(|(n, _, _)| format!("{n}/64")),
        underlay_a: local.addr,
        underlay_b: remote.addr,
        path: path.iter().map(|&h| name_of(h).to_string()).collect(),
        pmtu_discovery: t.pmtu_discovery,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(text: &str) -> Topology {
        Topology::parse(text).unwrap()
    }

    const VXLAN: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "router"
router = true
[[hosts]]
name = "server"
[[links]]
name = "direct"
a = "client"
b = "server"
[[links]]
a = "client"
b = "router"
[[links]]
a = "router"
b = "server"
mtu = 9000
[[tunnels]]
name = "vx"
a = "client"
b = "server"
via = ["router"]
"#;

    #[test]
    fn names_and_addresses() {
        let l = plan(&topo(VXLAN), "t1").unwrap();
        assert_eq!(l.hosts[0].netns, "nsw-t1-client");
        let d = l.link("direct").unwrap();
        assert_eq!(d.a.iface, "nsw-0-server");
        assert_eq!(d.b.iface, "nsw-0-client");
        assert_eq!(d.a.addr.to_string(), "198.18.1.1");
        assert_eq!(d.b.addr.to_string(), "198.18.1.2");
        assert_eq!(
            l.link("router-server").unwrap().subnet.to_string(),
            "198.18.3.0/24"
        );
        assert!(l.hosts.iter().all(|h| h.nft.is_none()));
    }

    #[test]
    fn routes_cross_the_router() {
        let l = plan(&topo(VXLAN), "t1").unwrap();
        let client = l.host("client").unwrap();
        let r = client
            .routes
            .iter()
            .find(|r| r.dest == "198.18.3.0/24")
            .unwrap();
        assert_eq!(r.via.to_string(), "198.18.2.2");
        assert_eq!(r.dev, "nsw-1-router");
    }

    /// A redirector that encapsulates: tunnels from a router to the server, one without path
    /// MTU discovery.
    const REDIRECTOR: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "redirector"
router = true
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "redirector"
[[links]]
a = "redirector"
b = "server"
[[tunnels]]
name = "locked"
a = "redirector"
b = "server"
pmtu_discovery = false
[[tunnels]]
name = "learns"
a = "redirector"
b = "server"
"#;

    #[test]
    fn hosts_reach_a_tunnel_from_a_router_through_it_locked_without_pmtu_discovery() {
        let l = plan(&topo(REDIRECTOR), "t1").unwrap();
        let client = l.host("client").unwrap();
        let into = |t: &str| {
            let subnet = l.tunnel(t).unwrap().subnet.to_string();
            client
                .routes
                .iter()
                .find(|r| r.dest == subnet)
                .unwrap_or_else(|| panic!("no route into {t}: {:?}", client.routes))
                .clone()
        };
        // By the redirector, as the route to its underlay link goes.
        for t in ["locked", "learns"] {
            assert_eq!(into(t).via.to_string(), "198.18.1.2", "{t}");
            assert_eq!(into(t).dev, "nsw-0-redirecto", "{t}"); // IFNAMSIZ: 15 bytes
        }
        assert_eq!(into("locked").mtu_lock, Some(1500));
        assert_eq!(into("learns").mtu_lock, None);
        assert!(!l.tunnel("locked").unwrap().pmtu_discovery);
        // The tunnel's ends route it on-link: no route added in them.
        let server = l.host("server").unwrap();
        let locked = l.tunnel("locked").unwrap().subnet.to_string();
        assert!(server.routes.iter().all(|r| r.dest != locked));
        // Built with `ip route add … mtu lock 1500`.
        let lock: Vec<String> = crate::build::steps(&l)
            .iter()
            .map(|s| format!("{s:?}"))
            .filter(|s| s.contains("\"mtu\", \"lock\", \"1500\""))
            .collect();
        assert_eq!(lock.len(), 1, "{lock:?}");
    }

    #[test]
    fn tunnel_is_pinned_through_the_router() {
        let l = plan(&topo(VXLAN), "t1").unwrap();
        let t = l.tunnel("vx").unwrap();
        assert_eq!(t.path, ["client", "router", "server"]);
        assert_eq!(t.underlay_a.to_string(), "198.18.2.1");
        assert_eq!(t.underlay_b.to_string(), "198.18.3.2");
        assert_eq!(t.underlay_mtu, 1500);
        assert_eq!(t.mtu, 1450, "smallest underlay MTU − 50");
        assert_eq!(t.a.addr.to_string(), "198.19.1.1");
        assert_eq!(t.a.iface, "nsw-t0-server");
        let pin = |h: &str, d: &str| {
            l.host(h)
                .unwrap()
                .routes
                .iter()
                .find(|r| r.dest == d)
                .map(|r| r.via.to_string())
        };
        assert_eq!(
            pin("client", "198.18.3.2/32").as_deref(),
            Some("198.18.2.2")
        );
        assert_eq!(
            pin("server", "198.18.2.1/32").as_deref(),
            Some("198.18.3.1")
        );
        assert_eq!(pin("router", "198.18.3.2/32"), None, "connected");
    }

    #[test]
    fn tunnels_sharing_a_path_share_its_pins() {
        let two = format!("{VXLAN}[[tunnels]]\nname = \"vx2\"\na = \"client\"\nb = \"server\"\nvia = [\"router\"]\n");
        let l = plan(&topo(&two), "t1").unwrap();
        let pins = l
            .host("client")
            .unwrap()
            .routes
            .iter()
            .filter(|r| r.dest.ends_with("/32"))
            .count();
        assert_eq!(pins, 1);
        assert_eq!(l.tunnels[1].subnet.to_string(), "198.19.2.0/24");
    }

    #[test]
    fn shapers_and_loss_follow_direction() {
        let l = plan(
            &topo(
                r#"
[[hosts]]
name = "a"
[[hosts]]
name = "b"
[[links]]
a = "a"
b = "b"
rate = "10mbit"
direction = "a-to-b"
loss = { probability = 0.5, direction = "b-to-a" }
"#,
            ),
            "t2",
        )
        .unwrap();
        let link = &l.links[0];
        assert_eq!(link.shapers.len(), 1);
        assert_eq!(link.shapers[0].host, "a");
        assert_eq!(link.shapers[0].iface, "nsw-0-b");
        assert_eq!(link.loss.len(), 1);
        assert_eq!(link.loss[0].from, "b");
        assert_eq!(link.loss[0].to, "a");
        assert_eq!(
            link.loss[0].iface, "nsw-0-b",
            "a's interface receives b's packets"
        );
        assert!(l
            .host("a")
            .unwrap()
            .nft
            .as_deref()
            .unwrap()
            .contains("loss_0_ba"));
        assert!(l.host("b").unwrap().nft.is_none());
    }

    #[test]
    fn ipv6_routes_and_addresses() {
        let mut t = topo(VXLAN);
        t.ipv6 = true;
        let l = plan(&t, "t3").unwrap();
        assert_eq!(l.links[0].a.addr6.unwrap().to_string(), "2001:2:0:1::1");
        assert!(l
            .host("client")
            .unwrap()
            .routes
            .iter()
            .any(|r| r.dest == "2001:2:0:3::/64" && r.via.to_string() == "2001:2:0:2::2"));
    }

    #[test]
    fn bad_run_id_and_unknown_host_are_usage_errors() {
        assert_eq!(plan(&topo(VXLAN), "a b").unwrap_err().exit_code(), 2);
        let mut t = topo(VXLAN);
        t.links[0].b = "nope".into();
        let e = plan(&t, "x").unwrap_err();
        assert!(
            e.to_string().contains("links[0].b: unknown host \"nope\""),
            "{e}"
        );
    }
}
