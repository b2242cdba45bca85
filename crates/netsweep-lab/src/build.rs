//! [`Layout`] → the ordered steps that build it (`ip`, `tc`, `nft`, `ethtool`, sysctls), and
//! running one step.

use crate::cmd;
use crate::emulation::Engine;
use crate::error::Result;
use crate::layout::{Endpoint, Layout};
use crate::netns;

/// One thing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Run a tool with arguments and optional stdin.
    Tool {
        /// `ip`, `tc`, …
        tool: String,
        /// Arguments.
        args: Vec<String>,
        /// Text fed to stdin.
        stdin: Option<String>,
    },
    /// Write a sysctl inside a namespace.
    Sysctl {
        /// Namespace.
        netns: String,
        /// Key below /proc/sys, e.g. `net/ipv4/ip_forward`.
        key: String,
        /// Value.
        value: String,
    },
    /// Start a link's path emulator (and wait until it reports).
    StartEmulator(Box<crate::emulation::EmulatorLayout>),
}

/// One step, with what it is for (used in error messages).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What the step does, e.g. "creating link client-router".
    pub what: String,
    /// How.
    pub action: Action,
}

pub(crate) fn v(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

pub(crate) fn tool(what: String, tool: &str, args: Vec<String>) -> Step {
    Step {
        what,
        action: Action::Tool {
            tool: tool.to_string(),
            args,
            stdin: None,
        },
    }
}

pub(crate) fn sysctl(what: &str, ns: &str, key: &str, value: &str) -> Step {
    Step {
        what: what.to_string(),
        action: Action::Sysctl {
            netns: ns.to_string(),
            key: key.to_string(),
            value: value.to_string(),
        },
    }
}

/// The full path of `name` for `ip netns exec` (which searches PATH only).
pub(crate) fn exe(name: &str) -> String {
    cmd::find_tool(name)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| name.to_string())
}

fn address_steps(ns: &str, e: &Endpoint, what: &str, out: &mut Vec<Step>) {
    // Up first: an IPv6 address added while the link is down answers the first neighbour
    // solicitation only after a 1 s retry.
    out.push(tool(
        format!("bringing up {what} in {}", e.host),
        "ip",
        v(&["-n", ns, "link", "set", &e.iface, "up"]),
    ));
    out.push(tool(
        format!("addressing {what} in {}", e.host),
        "ip",
        v(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/{}", e.addr, e.prefix),
            "dev",
            &e.iface,
        ]),
    ));
    if let Some(a6) = e.addr6 {
        out.push(tool(
            format!("addressing {what} in {} (IPv6)", e.host),
            "ip",
            v(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{a6}/64"),
                "dev",
                &e.iface,
                "nodad",
            ]),
        ));
    }
}

/// Every step that builds `layout`, in order: namespaces, links (veth, offloads, addresses),
/// shapers, nft rules, routes, tunnels.
pub fn steps(layout: &Layout) -> Vec<Step> {
    let ns_of = |host: &str| {
        layout
            .host(host)
            .map(|h| h.netns.clone())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for h in &layout.hosts {
        let ns = h.netns.as_str();
        out.push(tool(
            format!("creating namespace for host {}", h.name),
            "ip",
            v(&["netns", "add", ns]),
        ));
        out.push(tool(
            format!("bringing up loopback in {}", h.name),
            "ip",
            v(&["-n", ns, "link", "set", "lo", "up"]),
        ));
        for key in [
            "net/ipv4/conf/all/rp_filter",
            "net/ipv4/conf/default/rp_filter",
        ] {
            out.push(sysctl(
                &format!("turning off reverse-path filtering in {}", h.name),
                ns,
                key,
                "0",
            ));
        }
        if layout.ipv6 {
            // No duplicate address detection: addresses (link-local too) are usable at once,
            // so neighbour discovery works from the first packet.
            for key in [
                "net/ipv6/conf/all/accept_dad",
                "net/ipv6/conf/default/accept_dad",
            ] {
                out.push(sysctl(
                    &format!("turning off IPv6 duplicate address detection in {}", h.name),
                    ns,
                    key,
                    "0",
                ));
            }
        }
        if h.router {
            out.push(sysctl(
                &format!("turning on forwarding in {}", h.name),
                ns,
                "net/ipv4/ip_forward",
                "1",
            ));
            if layout.ipv6 {
                for key in [
                    "net/ipv6/conf/all/forwarding",
                    "net/ipv6/conf/default/forwarding",
                ] {
                    out.push(sysctl(
                        &format!("turning on IPv6 forwarding in {}", h.name),
                        ns,
                        key,
                        "1",
                    ));
                }
            }
        }
    }
    for l in &layout.links {
        let (na, nb) = (ns_of(&l.a.host), ns_of(&l.b.host));
        let mtu = l.mtu.to_string();
        match l.emulator.as_ref().filter(|e| e.engine == Engine::Netsweep) {
            // a — [emulator] — b: two veth pairs through the emulator's namespace.
            Some(em) => out.extend(crate::emulation::link_steps(l, em, &na, &nb)),
            None => out.push(tool(
                format!("creating link {}", l.name),
                "ip",
                v(&[
                    "link", "add", "name", &l.a.iface, "netns", &na, "mtu", &mtu, "type", "veth",
                    "peer", "name", &l.b.iface, "netns", &nb, "mtu", &mtu,
                ]),
            )),
        }
        if !l.offloads.is_empty() {
            for (e, ns) in [(&l.a, &na), (&l.b, &nb)] {
                let mut args = v(&["netns", "exec", ns, &exe("ethtool"), "-K", &e.iface]);
                for (k, on) in &l.offloads {
                    args.push(k.clone());
                    args.push(if *on { "on" } else { "off" }.to_string());
                }
                out.push(tool(
                    format!("setting offloads of link {} in {}", l.name, e.host),
                    "ip",
                    args,
                ));
            }
        }
        address_steps(&na, &l.a, &format!("link {}", l.name), &mut out);
        address_steps(&nb, &l.b, &format!("link {}", l.name), &mut out);
    }
    for l in &layout.links {
        if let Some(em) = l.emulator.as_ref().filter(|e| e.engine == Engine::Netem) {
            out.extend(crate::emulation::netem_steps(
                l,
                em,
                &ns_of(&l.a.host),
                &ns_of(&l.b.host),
            ));
        }
        for s in &l.shapers {
            let ns = ns_of(&s.host);
            for args in crate::shaping::tc_commands(s) {
                let mut full = v(&["-n", &ns]);
                full.extend(args);
                out.push(tool(
                    format!("shaping link {} in {}", l.name, s.host),
                    "tc",
                    full,
                ));
            }
        }
    }
    for h in &layout.hosts {
        if let Some(script) = &h.nft {
            out.push(Step {
                what: format!("loading nft rules in {}", h.name),
                action: Action::Tool {
                    tool: "ip".into(),
                    args: v(&["netns", "exec", &h.netns, &exe("nft"), "-f", "-"]),
                    stdin: Some(script.clone()),
                },
            });
        }
    }
    for h in &layout.hosts {
        for r in &h.routes {
            let via = r.via.to_string();
            let mut args = v(&[
                "-n", &h.netns, "route", "add", &r.dest, "via", &via, "dev", &r.dev,
            ]);
            if let Some(m) = r.mtu_lock {
                args.extend(v(&["mtu", "lock", &m.to_string()]));
            }
            out.push(tool(
                format!("adding route to {} in {}", r.dest, h.name),
                "ip",
                args,
            ));
        }
    }
    for t in &layout.tunnels {
        for (e, local, remote) in [
            (&t.a, t.underlay_a, t.underlay_b),
            (&t.b, t.underlay_b, t.underlay_a),
        ] {
            let ns = ns_of(&e.host);
            out.push(tool(
                format!("creating tunnel {} in {}", t.name, e.host),
                "ip",
                v(&[
                    "-n",
                    &ns,
                    "link",
                    "add",
                    &e.iface,
                    "mtu",
                    &t.mtu.to_string(),
                    "type",
                    "vxlan",
                    "id",
                    &t.vni.to_string(),
                    "local",
                    &local.to_string(),
                    "remote",
                    &remote.to_string(),
                    "dstport",
                    &t.port.to_string(),
                ]),
            ));
            address_steps(&ns, e, &format!("tunnel {}", t.name), &mut out);
        }
    }
    // Last, once every namespace and interface exists: the path emulators.
    for l in &layout.links {
        if let Some(em) = l.emulator.as_ref().filter(|e| e.engine == Engine::Netsweep) {
            out.push(Step {
                what: format!("starting the path emulator of link {}", l.name),
                action: Action::StartEmulator(Box::new(em.clone())),
            });
        }
    }
    out
}

/// Runs one step.
pub fn execute(step: &Step) -> Result<()> {
    match &step.action {
        Action::Tool { tool, args, stdin } => {
            cmd::run(&step.what, tool, args, stdin.as_deref()).map(|_| ())
        }
        Action::Sysctl { netns, key, value } => netns::write_sysctl(netns, key, value),
        Action::StartEmulator(em) => crate::emulation::start(em),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan;
    use crate::topology::Topology;

    fn lines(text: &str) -> Vec<String> {
        let t = Topology::parse(text).unwrap();
        steps(&plan(&t, "b1").unwrap())
            .into_iter()
            .map(|s| match s.action {
                Action::Tool { tool, args, stdin } => {
                    let args: Vec<String> = args
                        .into_iter()
                        .map(|a| {
                            if a.starts_with('/') {
                                a.rsplit('/').next().unwrap_or_default().to_string()
                            } else {
                                a
                            }
                        })
                        .collect();
                    format!(
                        "{tool} {}{}",
                        args.join(" "),
                        if stdin.is_some() { " <script" } else { "" }
                    )
                }
                Action::Sysctl { netns, key, value } => format!("sysctl {netns} {key}={value}"),
                Action::StartEmulator(em) => format!("start emulator {}", em.config.link),
            })
            .collect()
    }

    #[test]
    fn two_hosts_steps_in_order() {
        let l = lines(
            r#"
[[hosts]]
name = "a"
[[hosts]]
name = "r"
router = true
[[links]]
a = "a"
b = "r"
mtu = 9000
rate = "10mbit"
direction = "a-to-b"
offloads = { tso = false }
loss = { probability = 0.25, direction = "a-to-b" }
"#,
        );
        let expected = [
            "ip netns add nsw-b1-a",
            "ip -n nsw-b1-a link set lo up",
            "sysctl nsw-b1-a net/ipv4/conf/all/rp_filter=0",
            "sysctl nsw-b1-a net/ipv4/conf/default/rp_filter=0",
            "ip netns add nsw-b1-r",
            "ip -n nsw-b1-r link set lo up",
            "sysctl nsw-b1-r net/ipv4/conf/all/rp_filter=0",
            "sysctl nsw-b1-r net/ipv4/conf/default/rp_filter=0",
            "sysctl nsw-b1-r net/ipv4/ip_forward=1",
            "ip link add name nsw-0-r netns nsw-b1-a mtu 9000 type veth peer name nsw-0-a netns nsw-b1-r mtu 9000",
            "ip netns exec nsw-b1-a ethtool -K nsw-0-r tso off",
            "ip netns exec nsw-b1-r ethtool -K nsw-0-a tso off",
            "ip -n nsw-b1-a link set nsw-0-r up",
            "ip -n nsw-b1-a addr add 198.18.1.1/24 dev nsw-0-r",
            "ip -n nsw-b1-r link set nsw-0-a up",
            "ip -n nsw-b1-r addr add 198.18.1.2/24 dev nsw-0-a",
            "tc -n nsw-b1-a qdisc replace dev nsw-0-r root tbf rate 10000000bit burst 36056b limit 72112b",
            "ip netns exec nsw-b1-r nft -f - <script",
        ];
        assert_eq!(l, expected);
    }

    #[test]
    fn tunnel_and_route_steps() {
        let l = lines(
            r#"
ipv6 = true
[[hosts]]
name = "c"
[[hosts]]
name = "r"
router = true
[[hosts]]
name = "s"
[[links]]
a = "c"
b = "r"
[[links]]
a = "r"
b = "s"
[[tunnels]]
a = "c"
b = "s"
mtu = 1500
"#,
        );
        let has = |s: &str| assert!(l.iter().any(|x| x == s), "missing {s:?} in {l:#?}");
        has("sysctl nsw-b1-r net/ipv6/conf/all/forwarding=1");
        has("ip -n nsw-b1-c addr add 2001:2:0:1::1/64 dev nsw-0-r nodad");
        has("ip -n nsw-b1-c route add 198.18.2.0/24 via 198.18.1.2 dev nsw-0-r");
        has("ip -n nsw-b1-c route add 2001:2:0:2::/64 via 2001:2:0:1::2 dev nsw-0-r");
        has("ip -n nsw-b1-c link add nsw-t0-s mtu 1500 type vxlan id 100 local 198.18.1.1 remote 198.18.2.2 dstport 4789");
        has("ip -n nsw-b1-s link add nsw-t0-c mtu 1500 type vxlan id 100 local 198.18.2.2 remote 198.18.1.1 dstport 4789");
        has("ip -n nsw-b1-s addr add 198.19.1.2/24 dev nsw-t0-c");
        let route = l
            .iter()
            .position(|x| x.contains("route add 198.18.2.0/24"))
            .unwrap();
        let tunnel = l.iter().position(|x| x.contains("type vxlan")).unwrap();
        assert!(route < tunnel);
    }
}
