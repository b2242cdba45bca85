//! `--allow-from`: the client addresses a server serves (issue 41 item 8). A connection from
//! any other address — to the control port or the iperf3 port — is closed as it is accepted,
//! before it holds a handshake thread, and logged as refused. An IPv4 client of a dual-stack
//! listener is matched as IPv4 (its `::ffff:` form unwrapped).

use std::net::IpAddr;

/// Most prefixes one list may hold.
pub const MAX_PREFIXES: usize = 256;

/// One prefix: an address and how many leading bits of it must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Prefix {
    addr: IpAddr,
    bits: u8,
}

impl Prefix {
    fn contains(&self, ip: IpAddr) -> bool {
        let mask = |width: u32| -> u128 {
            let bits = u32::from(self.bits).min(width);
            if bits == 0 {
                0
            } else {
                !0u128 << (width - bits)
            }
        };
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let m = mask(32);
                (u128::from(u32::from(a)) & m) == (u128::from(u32::from(b)) & m)
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let m = mask(128);
                (u128::from(a) & m) == (u128::from(b) & m)
            }
            _ => false,
        }
    }
}

/// The prefixes a server serves; a client in any of them is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowFrom(Vec<Prefix>);

impl AllowFrom {
    /// Parses `198.18.0.0/15,2001:db8::/32,127.0.0.1`: prefixes (a bare address is one host),
    /// comma-separated, at most [`MAX_PREFIXES`].
    pub fn parse(list: &str) -> Result<AllowFrom, String> {
        let mut out = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if out.len() == MAX_PREFIXES {
                return Err(format!(
                    "--allow-from: more than {MAX_PREFIXES} prefixes; use wider ones"
                ));
            }
            let (addr, bits) = item.split_once('/').unwrap_or((item, ""));
            let addr: IpAddr = addr.parse().map_err(|_| {
                format!(
                    "--allow-from {item:?}: not an address or prefix (write 198.18.0.0/15, \
                     2001:db8::/32 or one address)"
                )
            })?;
            let addr = addr.to_canonical();
            let width = if addr.is_ipv4() { 32 } else { 128 };
            let bits = if bits.is_empty() {
                width
            } else {
                bits.parse::<u8>()
                    .ok()
                    .filter(|b| *b <= width)
                    .ok_or(format!(
                        "--allow-from {item:?}: the prefix length must be 0..={width}"
                    ))?
            };
            out.push(Prefix { addr, bits });
        }
        if out.is_empty() {
            return Err("--allow-from needs at least one address or prefix".into());
        }
        Ok(AllowFrom(out))
    }

    /// Whether a client at `ip` is served.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|p| p.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_match_their_addresses_only() {
        let a = AllowFrom::parse("198.18.0.0/15, 2001:db8::/32,127.0.0.1").unwrap();
        assert!(a.allows(ip("198.18.0.1")));
        assert!(a.allows(ip("198.19.255.255")));
        assert!(!a.allows(ip("198.20.0.0")));
        assert!(!a.allows(ip("198.17.255.255")));
        assert!(a.allows(ip("127.0.0.1")));
        assert!(!a.allows(ip("127.0.0.2")));
        assert!(a.allows(ip("2001:db8:ffff::1")));
        assert!(!a.allows(ip("2001:db9::1")));
        // An IPv4 client of a dual-stack listener, as the socket shows it.
        assert!(a.allows(ip("::ffff:198.18.3.4")));
        assert!(!a.allows(ip("::ffff:10.0.0.1")));
        // A v4-mapped prefix is an IPv4 prefix.
        let m = AllowFrom::parse("::ffff:10.0.0.1").unwrap();
        assert!(m.allows(ip("10.0.0.1")));
        // /0 is everyone of that family.
        let all4 = AllowFrom::parse("0.0.0.0/0").unwrap();
        assert!(all4.allows(ip("203.0.113.9")) && !all4.allows(ip("::1")));
    }

    #[test]
    fn a_list_that_does_not_parse_says_how_to_write_it() {
        for (bad, word) in [
            ("", "at least one"),
            ("10.0.0.0/33", "0..=32"),
            ("::/129", "0..=128"),
            ("10.0.0.0/x", "0..=32"),
            ("example.org", "not an address"),
            ("10.0.0.0/-1", "0..=32"),
        ] {
            let e = AllowFrom::parse(bad).unwrap_err();
            assert!(e.contains(word), "{bad}: {e}");
        }
        let many = vec!["10.0.0.1"; MAX_PREFIXES + 1].join(",");
        assert!(AllowFrom::parse(&many).unwrap_err().contains("more than"));
    }
}
