//! Human-readable description of a lab (what `lab up` and `lab show` print): hosts,
//! interfaces, addresses, MTUs, shapers, loss rules, tunnels and routes.

use crate::layout::{ClassRole, Endpoint, Layout, ShaperLayout};
use crate::topology::{Protocol, ShaperKind};
use std::fmt::{self, Display, Formatter};

fn addr(e: &Endpoint) -> String {
    match e.addr6 {
        Some(a6) => format!("{}/{} {a6}/64", e.addr, e.prefix),
        None => format!("{}/{}", e.addr, e.prefix),
    }
}

fn shaper(f: &mut Formatter<'_>, s: &ShaperLayout) -> fmt::Result {
    match s.kind {
        ShaperKind::Tbf => writeln!(
            f,
            "    shaper {} -> {} on {}: tbf rate {} burst {} B limit {} B",
            s.host,
            s.toward,
            s.iface,
            s.rate,
            s.burst,
            s.limit.unwrap_or(0)
        ),
        ShaperKind::Htb => {
            writeln!(
                f,
                "    shaper {} -> {} on {}: htb rate {} (default class {})",
                s.host,
                s.toward,
                s.iface,
                s.rate,
                s.default_class.as_deref().unwrap_or("-")
            )?;
            for c in &s.classes {
                let why = match c.role {
                    ClassRole::Root => "root".to_string(),
                    ClassRole::Default => "default (unclassified)".to_string(),
                    ClassRole::Priority => format!(
                        "SO_PRIORITY {}",
                        c.skb_priority.map_or("-".into(), |p| p.to_string())
                    ),
                    ClassRole::Band => match c.ip_len {
                        Some((lo, hi)) => format!("IP length {lo}-{hi}"),
                        None => "band".into(),
                    },
                };
                write!(
                    f,
                    "      class {:<5} rate {} ceil {} burst {} B quantum {} B",
                    c.classid, c.rate, c.ceil, c.burst, c.quantum
                )?;
                if let Some(p) = c.prio {
                    write!(f, " prio {p}")?;
                }
                writeln!(f, "  [{why}]")?;
            }
            Ok(())
        }
    }
}

impl Display for Layout {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "lab {} ({} hosts, {} links, {} tunnels)",
            self.run_id,
            self.hosts.len(),
            self.links.len(),
            self.tunnels.len()
        )?;
        writeln!(f, "hosts:")?;
        for h in &self.hosts {
            writeln!(
                f,
                "  {}{}  netns {}",
                h.name,
                if h.router { " (router)" } else { "" },
                h.netns
            )?;
            let ends = self
                .links
                .iter()
                .filter_map(|l| l.end(&h.name).map(|e| (e, l.mtu, l.name.as_str())))
                .chain(
                    self.tunnels
                        .iter()
                        .filter_map(|t| t.end(&h.name).map(|e| (e, t.mtu, t.name.as_str()))),
                );
            for (e, mtu, name) in ends {
                writeln!(
                    f,
                    "    {:<15} {:<34} mtu {:<5} ({name})",
                    e.iface,
                    addr(e),
                    mtu
                )?;
            }
        }
        if !self.links.is_empty() {
            writeln!(f, "links:")?;
        }
        for l in &self.links {
            writeln!(
                f,
                "  {}: {} {} <-> {} {}  subnet {}  mtu {}",
                l.name, l.a.host, l.a.addr, l.b.host, l.b.addr, l.subnet, l.mtu
            )?;
            if !l.offloads.is_empty() {
                let o = crate::topology::offloads_text(&l.offloads);
                writeln!(f, "    offloads: {o}")?;
            }
            for s in &l.shapers {
                shaper(f, s)?;
            }
            for r in &l.loss {
                let proto = match r.protocol {
                    Protocol::Any => "all",
                    Protocol::Udp => "udp",
                    Protocol::Tcp => "tcp",
                    Protocol::Icmp => "icmp",
                };
                writeln!(
                    f,
                    "    loss {} -> {}: {}% of {proto} packets dropped on arrival at {} (numgen random mod {} < {}, counter {})",
                    r.from,
                    r.to,
                    r.probability * 100.0,
                    r.iface,
                    r.modulus,
                    r.threshold,
                    r.counter
                )?;
            }
            if let Some(em) = &l.emulator {
                for line in em.describe(&l.a.host, &l.b.host) {
                    writeln!(f, "    {line}")?;
                }
            }
        }
        if !self.tunnels.is_empty() {
            writeln!(f, "tunnels:")?;
        }
        for t in &self.tunnels {
            writeln!(
                f,
                "  {}: vxlan vni {} port {}  {} {} <-> {} {}  mtu {} (underlay mtu {})",
                t.name,
                t.vni,
                t.port,
                t.a.host,
                t.a.addr,
                t.b.host,
                t.b.addr,
                t.mtu,
                t.underlay_mtu
            )?;
            writeln!(
                f,
                "    underlay {} -> {} via {}",
                t.underlay_a,
                t.underlay_b,
                t.path.join(" -> ")
            )?;
        }
        let routed: Vec<_> = self.hosts.iter().filter(|h| !h.routes.is_empty()).collect();
        if !routed.is_empty() {
            writeln!(f, "routes:")?;
        }
        for h in routed {
            for r in &h.routes {
                let lock = r
                    .mtu_lock
                    .map(|m| format!(" mtu lock {m} (no path MTU discovery)"))
                    .unwrap_or_default();
                writeln!(
                    f,
                    "  {}: {} via {} dev {}{lock}",
                    h.name, r.dest, r.via, r.dev
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::plan;
    use crate::topology::Topology;

    #[test]
    fn describes_everything() {
        let t = Topology::parse(
            r#"
[[hosts]]
name = "client"
[[hosts]]
name = "router"
router = true
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "router"
rate = "100mbit"
offloads = { tso = false }
loss = { probability = 0.01, protocol = "udp" }
[[links.classes]]
priority = 5
rate = "50mbit"
[[links]]
a = "router"
b = "server"
mtu = 9000
rate = "1gbit"
[[tunnels]]
a = "client"
b = "server"
"#,
        )
        .unwrap();
        let text = plan(&t, "d1").unwrap().to_string();
        for needle in [
            "lab d1 (3 hosts, 2 links, 1 tunnels)",
            "router (router)  netns nsw-d1-router",
            "nsw-0-router    198.18.1.1/24",
            "mtu 9000",
            "offloads: tso off",
            "htb rate 100mbit (default class 1:2)",
            "class 1:10  rate 50mbit ceil 100mbit burst 12500 B quantum 1514 B prio 0  [SO_PRIORITY 5]",
            "tbf rate 1gbit burst 125000 B limit 6250000 B",
            "loss client -> router: 1% of udp packets dropped on arrival at nsw-0-client",
            "vx0: vxlan vni 100 port 4789  client 198.19.1.1 <-> server 198.19.1.2  mtu 1450",
            "underlay 198.18.1.1 -> 198.18.2.2 via client -> router -> server",
            "client: 198.18.2.0/24 via 198.18.1.2 dev nsw-0-router",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }
}
