//! nftables rules of a lab: random loss (`numgen random mod N < k … drop`, counted by a named
//! counter) on arrival, and skb-priority marks (`meta priority set 1:x`) on departure that put
//! packets into htb classes.
//!
//! Loss is applied where packets arrive (prerouting, priority raw) rather than where they
//! leave: a drop on the output path would make the sender's `sendto()` fail with EPERM,
//! which is not what a lossy wire does.

use crate::layout::{ClassRole, LossLayout, ShaperLayout};
use crate::names::NFT_TABLE;
use crate::shaping::{class_priority, priority_text};
use crate::topology::Protocol;
use std::fmt::Write;

/// `numgen random mod` this: loss is set in steps of one in a million.
pub const LOSS_MODULUS: u32 = 1_000_000;
/// IPv6 header bytes (IPv6 `length` is the payload length; IPv4's is the total length).
const IPV6_HEADER: u16 = 40;

/// The loss rule for packets from `from` arriving at `to` on `iface`.
pub fn loss_rule(
    link_index: usize,
    from_a: bool,
    from: &str,
    to: &str,
    iface: &str,
    probability: f64,
    protocol: Protocol,
) -> LossLayout {
    let threshold = ((probability * f64::from(LOSS_MODULUS)).round() as u32).clamp(1, LOSS_MODULUS);
    LossLayout {
        from: from.to_string(),
        to: to.to_string(),
        iface: iface.to_string(),
        probability: f64::from(threshold) / f64::from(LOSS_MODULUS),
        modulus: LOSS_MODULUS,
        threshold,
        protocol,
        table: NFT_TABLE.to_string(),
        counter: format!("loss_{link_index}_{}", if from_a { "ab" } else { "ba" }),
    }
}

fn protocol_match(p: Protocol) -> &'static str {
    match p {
        Protocol::Any => "",
        Protocol::Udp => "meta l4proto udp ",
        Protocol::Tcp => "meta l4proto tcp ",
        Protocol::Icmp => "meta l4proto { icmp, ipv6-icmp } ",
    }
}

/// The ruleset for one namespace: its loss rules (packets arriving there) and its class marks
/// (packets leaving through its shaped interfaces). `None` when it needs no rules.
pub fn script(loss: &[&LossLayout], shapers: &[&ShaperLayout], ipv6: bool) -> Option<String> {
    let marks: Vec<String> = shapers
        .iter()
        .flat_map(|sh| {
            sh.classes.iter().filter_map(move |c| {
                let minor = u32::from_str_radix(c.classid.split(':').nth(1)?, 16).ok()?;
                let set = priority_text(class_priority(minor));
                match c.role {
                    ClassRole::Priority => Some(vec![format!(
                        "oifname \"{}\" meta priority {} meta priority set {set}",
                        sh.iface,
                        priority_text(c.skb_priority?)
                    )]),
                    ClassRole::Band => {
                        let (lo, hi) = c.ip_len?;
                        let mut v = vec![format!(
                            "oifname \"{}\" ip length {lo}-{hi} meta priority set {set}",
                            sh.iface
                        )];
                        if ipv6 && hi >= IPV6_HEADER {
                            v.push(format!(
                                "oifname \"{}\" ip6 length {}-{} meta priority set {set}",
                                sh.iface,
                                lo.saturating_sub(IPV6_HEADER),
                                hi - IPV6_HEADER
                            ));
                        }
                        Some(v)
                    }
                    _ => None,
                }
            })
        })
        .flatten()
        .collect();
    if loss.is_empty() && marks.is_empty() {
        return None;
    }
    let mut s = String::new();
    let _ = writeln!(s, "table inet {NFT_TABLE} {{");
    for l in loss {
        let _ = writeln!(s, "\tcounter {} {{ }}", l.counter);
    }
    if !loss.is_empty() {
        let _ = writeln!(s, "\tchain loss {{");
        let _ = writeln!(
            s,
            "\t\ttype filter hook prerouting priority raw; policy accept;"
        );
        for l in loss {
            let _ = writeln!(
                s,
                "\t\tiifname \"{}\" {}numgen random mod {} < {} counter name \"{}\" drop",
                l.iface,
                protocol_match(l.protocol),
                l.modulus,
                l.threshold,
                l.counter
            );
        }
        let _ = writeln!(s, "\t}}");
    }
    if !marks.is_empty() {
        let _ = writeln!(s, "\tchain classify {{");
        let _ = writeln!(
            s,
            "\t\ttype filter hook postrouting priority filter; policy accept;"
        );
        for m in &marks {
            let _ = writeln!(s, "\t\t{m}");
        }
        let _ = writeln!(s, "\t}}");
    }
    let _ = writeln!(s, "}}");
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::Rate;
    use crate::shaping;
    use crate::topology::{Direction, Link, PriorityClass, ShapeBand, ShaperKind};

    #[test]
    fn loss_threshold_is_exact_for_round_probabilities() {
        let l = loss_rule(0, true, "a", "b", "nsw-0-a", 0.5, Protocol::Udp);
        assert_eq!((l.modulus, l.threshold), (1_000_000, 500_000));
        assert_eq!(l.counter, "loss_0_ab");
        let l = loss_rule(3, false, "b", "a", "nsw-3-b", 0.01, Protocol::Any);
        assert_eq!(l.threshold, 10_000);
        assert_eq!(l.probability, 0.01);
        assert_eq!(l.counter, "loss_3_ba");
    }

    #[test]
    fn script_has_counter_loss_and_marks() {
        let loss = loss_rule(0, true, "a", "b", "nsw-0-a", 0.5, Protocol::Udp);
        let link = Link {
            name: "a-b".into(),
            a: "a".into(),
            b: "b".into(),
            mtu: 1500,
            subnet: None,
            a_addr: None,
            b_addr: None,
            rate: Some(Rate::parse("10mbit").unwrap()),
            shaper: ShaperKind::Htb,
            direction: Direction::Both,
            offloads: Default::default(),
            classes: vec![PriorityClass {
                priority: 5,
                rate: Rate::parse("1mbit").unwrap(),
                ceil: Rate::parse("10mbit").unwrap(),
                prio: 0,
            }],
            loss: None,
            shape_band: Some(ShapeBand {
                lo: 1000,
                hi: 1100,
                rate: Rate::parse("1mbit").unwrap(),
            }),
            emulate: None,
        };
        let sh = shaping::plan(&link, "b", "nsw-0-a", "a").unwrap();
        let s = script(&[&loss], &[&sh], true).unwrap();
        assert_eq!(
            s,
            "table inet nsw-lab {\n\
             \tcounter loss_0_ab { }\n\
             \tchain loss {\n\
             \t\ttype filter hook prerouting priority raw; policy accept;\n\
             \t\tiifname \"nsw-0-a\" meta l4proto udp numgen random mod 1000000 < 500000 counter name \"loss_0_ab\" drop\n\
             \t}\n\
             \tchain classify {\n\
             \t\ttype filter hook postrouting priority filter; policy accept;\n\
             \t\toifname \"nsw-0-a\" ip length 1000-1100 meta priority set 1:3\n\
             \t\toifname \"nsw-0-a\" ip6 length 960-1060 meta priority set 1:3\n\
             \t\toifname \"nsw-0-a\" meta priority 0:5 meta priority set 1:10\n\
             \t}\n\
             }\n"
        );
        assert!(script(&[], &[], false).is_none());
    }
}
