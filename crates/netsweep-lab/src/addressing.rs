//! Address assignment from the benchmarking ranges: 198.18.0.0/15 (RFC 2544) for IPv4 and
//! 2001:2::/48 (RFC 5180) for IPv6.
//!
//! Link `i` gets the first free /24 of 198.18.1.0 … 198.18.255.0, tunnel `j` the first free /24 of
//! 198.19.1.0 … 198.19.255.0 (free = not overlapping a subnet given in the file); host `a` takes
//! the subnet's first address and host `b` the second. With `ipv6 = true`, link `i` also gets
//! 2001:2:0:<i+1>::/64 and tunnel `j` 2001:2:0:<1000+j+1>::/64 (hex), with `::1` and `::2`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IPv4 subnet: network address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ipv4Net {
    /// The network address (host bits zero).
    pub network: Ipv4Addr,
    /// Prefix length, 0–32.
    pub prefix: u8,
}

/// 198.18.0.0/15, the only IPv4 range a lab may use.
pub const BENCH_V4: Ipv4Net = Ipv4Net {
    network: Ipv4Addr::new(198, 18, 0, 0),
    prefix: 15,
};

/// The RFC 5180 benchmarking prefix 2001:2::/48, the only IPv6 range a lab uses.
pub const BENCH_V6: &str = "2001:2::/48";

impl Ipv4Net {
    /// The subnet mask as a number.
    pub fn mask(self) -> u32 {
        if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix))
        }
    }

    /// Whether `addr` lies in this subnet.
    pub fn contains(self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & self.mask() == u32::from(self.network)
    }

    /// Whether the two subnets share any address.
    pub fn overlaps(self, other: Ipv4Net) -> bool {
        self.contains(other.network) || other.contains(self.network)
    }

    /// Whether every address of `self` lies in `outer`.
    pub fn within(self, outer: Ipv4Net) -> bool {
        self.prefix >= outer.prefix && outer.contains(self.network)
    }

    /// The `n`-th address after the network address (1 = first host).
    pub fn host(self, n: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network).wrapping_add(n))
    }

    /// The broadcast address.
    pub fn broadcast(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) | !self.mask())
    }

    /// Whether `addr` can be given to a host: inside, and neither network nor broadcast
    /// address (except in /31 and /32).
    pub fn is_host_addr(self, addr: Ipv4Addr) -> bool {
        self.contains(addr)
            && (self.prefix >= 31 || (addr != self.network && addr != self.broadcast()))
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl FromStr for Ipv4Net {
    type Err = String;

    /// Parses "198.18.4.0/24"; host bits must be zero.
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = s.split_once('/').ok_or_else(|| {
            format!("\"{s}\" is not a subnet: write it as ADDRESS/PREFIX, e.g. \"198.18.4.0/24\"")
        })?;
        let addr: Ipv4Addr = addr
            .trim()
            .parse()
            .map_err(|_| format!("\"{addr}\" is not an IPv4 address"))?;
        let prefix: u8 = prefix
            .trim()
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| format!("\"{prefix}\" is not a prefix length (0–32)"))?;
        let net = Ipv4Net {
            network: addr,
            prefix,
        };
        let masked = Ipv4Addr::from(u32::from(addr) & net.mask());
        if masked != addr {
            return Err(format!(
                "\"{s}\" has host bits set: the subnet is \"{masked}/{prefix}\""
            ));
        }
        Ok(net)
    }
}

impl Serialize for Ipv4Net {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ipv4Net {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The addresses of the two ends of one link or tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairAddrs {
    /// The IPv4 subnet.
    pub subnet: Ipv4Net,
    /// End `a`'s IPv4 address.
    pub a: Ipv4Addr,
    /// End `b`'s IPv4 address.
    pub b: Ipv4Addr,
    /// The IPv6 /64 and the two ends' addresses, when IPv6 is on.
    pub v6: Option<(Ipv6Addr, Ipv6Addr, Ipv6Addr)>,
}

/// What a link or tunnel asks for: an explicit subnet and addresses, or nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request {
    /// Given subnet.
    pub subnet: Option<Ipv4Net>,
    /// Given address of end `a`.
    pub a: Option<Ipv4Addr>,
    /// Given address of end `b`.
    pub b: Option<Ipv4Addr>,
}

/// The IPv6 /64 number `n` of 2001:2::/48, with its `::1` and `::2`.
fn v6_pair(n: u16) -> (Ipv6Addr, Ipv6Addr, Ipv6Addr) {
    let net = Ipv6Addr::new(0x2001, 2, 0, n, 0, 0, 0, 0);
    let a = Ipv6Addr::new(0x2001, 2, 0, n, 0, 0, 0, 1);
    let b = Ipv6Addr::new(0x2001, 2, 0, n, 0, 0, 0, 2);
    (net, a, b)
}

/// Assigns addresses to links and tunnels. Explicit requests are kept (they were validated
/// already); the rest get free /24s. Errors say which pool ran out.
pub fn assign(
    links: &[Request],
    tunnels: &[Request],
    ipv6: bool,
) -> Result<(Vec<PairAddrs>, Vec<PairAddrs>), String> {
    let explicit: Vec<Ipv4Net> = links
        .iter()
        .chain(tunnels)
        .filter_map(|r| r.subnet)
        .collect();
    // The free /24s of 198.<third>.1.0 … 198.<third>.255.0.
    let pool = |third: u8| {
        let explicit = explicit.clone();
        (1..=255u8)
            .map(move |n| Ipv4Net {
                network: Ipv4Addr::new(198, third, n, 0),
                prefix: 24,
            })
            .filter(move |net| !explicit.iter().any(|u| u.overlaps(*net)))
    };
    let mut link_pool = pool(18);
    let mut tunnel_pool = pool(19);

    let resolve = |req: &Request,
                   pool: &mut dyn Iterator<Item = Ipv4Net>,
                   what: &str,
                   v6: Option<u16>|
     -> Result<PairAddrs, String> {
        let subnet = match req.subnet {
            Some(s) => s,
            None => pool.next().ok_or_else(|| {
                format!(
                    "no free /24 left for {what}: give some of them a `subnet` inside 198.18.0.0/15"
                )
            })?,
        };
        let a = req.a.unwrap_or_else(|| {
            if req.b == Some(subnet.host(1)) {
                subnet.host(2)
            } else {
                subnet.host(1)
            }
        });
        let b = req.b.unwrap_or_else(|| {
            let mut n = 1;
            while subnet.host(n) == a {
                n += 1;
            }
            subnet.host(n)
        });
        Ok(PairAddrs {
            subnet,
            a,
            b,
            v6: v6.map(v6_pair),
        })
    };

    let mut out_links = Vec::new();
    for (i, r) in links.iter().enumerate() {
        let v6 = ipv6.then_some((i + 1) as u16);
        out_links.push(resolve(r, &mut link_pool, "links", v6)?);
    }
    let mut out_tunnels = Vec::new();
    for (j, r) in tunnels.iter().enumerate() {
        let v6 = ipv6.then_some(0x1000 + (j + 1) as u16);
        out_tunnels.push(resolve(r, &mut tunnel_pool, "tunnels", v6)?);
    }
    Ok((out_links, out_tunnels))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    #[test]
    fn parses_and_checks_subnets() {
        assert_eq!(net("198.18.4.0/24").to_string(), "198.18.4.0/24");
        assert!("198.18.4.1/24"
            .parse::<Ipv4Net>()
            .unwrap_err()
            .contains("host bits"));
        assert!("198.18.4.0"
            .parse::<Ipv4Net>()
            .unwrap_err()
            .contains("ADDRESS/PREFIX"));
        assert!("198.18.4.0/33"
            .parse::<Ipv4Net>()
            .unwrap_err()
            .contains("prefix"));
        assert!(net("198.18.4.0/24").within(BENCH_V4));
        assert!(net("198.19.255.252/30").within(BENCH_V4));
        assert!(!net("198.20.0.0/24").within(BENCH_V4));
        assert!(!net("198.16.0.0/14").within(BENCH_V4));
        assert!(net("198.18.0.0/16").overlaps(net("198.18.7.0/24")));
        assert!(!net("198.18.0.0/24").overlaps(net("198.18.1.0/24")));
        let n = net("198.18.4.0/30");
        assert!(n.is_host_addr("198.18.4.1".parse().unwrap()));
        assert!(!n.is_host_addr("198.18.4.3".parse().unwrap()));
        assert!(!n.is_host_addr("198.18.4.0".parse().unwrap()));
    }

    #[test]
    fn assigns_24s_in_order_and_skips_explicit_subnets() {
        let links = [
            Request::default(),
            Request {
                subnet: Some(net("198.18.2.0/24")),
                ..Request::default()
            },
            Request::default(),
        ];
        let tunnels = [Request::default()];
        let (l, t) = assign(&links, &tunnels, false).unwrap();
        assert_eq!(l[0].subnet, net("198.18.1.0/24"));
        assert_eq!(l[0].a.to_string(), "198.18.1.1");
        assert_eq!(l[0].b.to_string(), "198.18.1.2");
        assert_eq!(l[1].subnet, net("198.18.2.0/24"));
        assert_eq!(
            l[2].subnet,
            net("198.18.3.0/24"),
            "skips the explicit 198.18.2.0/24"
        );
        assert_eq!(t[0].subnet, net("198.19.1.0/24"));
        assert_eq!(t[0].a.to_string(), "198.19.1.1");
        assert!(l[0].v6.is_none());
    }

    #[test]
    fn keeps_explicit_addresses_and_fills_the_other_end() {
        let links = [Request {
            subnet: Some(net("198.18.40.0/29")),
            a: None,
            b: Some("198.18.40.1".parse().unwrap()),
        }];
        let (l, _) = assign(&links, &[], false).unwrap();
        assert_eq!(l[0].b.to_string(), "198.18.40.1");
        assert_eq!(l[0].a.to_string(), "198.18.40.2");
    }

    #[test]
    fn assigns_ipv6_from_the_benchmarking_prefix() {
        let (l, t) = assign(&[Request::default(); 2], &[Request::default()], true).unwrap();
        let (n, a, b) = l[1].v6.unwrap();
        assert_eq!(n.to_string(), "2001:2:0:2::");
        assert_eq!(a.to_string(), "2001:2:0:2::1");
        assert_eq!(b.to_string(), "2001:2:0:2::2");
        assert_eq!(t[0].v6.unwrap().1.to_string(), "2001:2:0:1001::1");
    }

    #[test]
    fn runs_out_of_subnets_with_a_fix() {
        let links = vec![Request::default(); 256];
        let err = assign(&links, &[], false).unwrap_err();
        assert!(err.contains("give some of them a `subnet`"), "{err}");
    }
}
