//! Rate shaping with tbf and htb: bursts, queue limits and quanta derived from the MTU, and the
//! `tc` commands that install them.
//!
//! A tbf bucket smaller than one frame drops every full-size frame (MTU 9000 with a 4 KB burst
//! carried nothing), so every size here starts from the frame: MTU + 14 bytes of Ethernet
//! header, which is what the qdisc counts on a veth (no preamble, FCS or gap).
//!
//! - burst (tbf, and htb burst/cburst) = max(4 frames, 1 ms of the rate)
//! - tbf limit = max(burst + 4 frames, 50 ms of the rate), at most 64 MiB
//! - htb quantum = 1 frame (DRR rounds of one full frame; htb's rate/r2q default would be
//!   125 000 bytes at 10 Mbit/s and warns above 200 000)

use crate::layout::{ClassRole, HtbClassLayout, ShaperLayout};
use crate::rate::Rate;
use crate::topology::{Link, ShaperKind};

/// Ethernet header bytes a veth's qdisc counts in each packet.
pub const ETHERNET_HEADER: u32 = 14;
/// Frames in the smallest bucket.
const MIN_FRAMES: u32 = 4;
/// tbf queue limit cap.
const MAX_LIMIT: u64 = 64 << 20;
/// The htb handle major of a lab's root qdisc.
pub const HTB_MAJOR: u32 = 1;
/// Minor of the root class.
const ROOT_MINOR: u32 = 1;
/// Minor of the default class.
const DEFAULT_MINOR: u32 = 2;
/// Minor of the `shape_band` class.
const BAND_MINOR: u32 = 3;
/// Minor of the first priority class (hex 10).
const FIRST_PRIORITY_MINOR: u32 = 0x10;

/// The largest frame of an interface: MTU + Ethernet header.
pub fn frame_len(mtu: u32) -> u32 {
    mtu + ETHERNET_HEADER
}

/// Bytes the rate carries in `ms` milliseconds, rounded up.
fn bytes_in_ms(rate: Rate, ms: u64) -> u64 {
    (rate.bits_per_sec * ms).div_ceil(8 * 1000)
}

/// Bucket size: at least 4 full frames, and at least 1 ms of the rate (so fast links are not
/// throttled by timer wake-ups).
pub fn burst_bytes(mtu: u32, rate: Rate) -> u32 {
    let frames = u64::from(MIN_FRAMES * frame_len(mtu));
    frames.max(bytes_in_ms(rate, 1)).min(u64::from(u32::MAX)) as u32
}

/// tbf queue limit: room for the burst plus 4 frames, and at least 50 ms of the rate.
pub fn tbf_limit_bytes(mtu: u32, rate: Rate) -> u32 {
    let floor = u64::from(burst_bytes(mtu, rate)) + u64::from(MIN_FRAMES * frame_len(mtu));
    floor.max(bytes_in_ms(rate, 50).min(MAX_LIMIT)) as u32
}

/// htb quantum: one full frame.
pub fn htb_quantum(mtu: u32) -> u32 {
    frame_len(mtu)
}

/// A class id "major:minor" in tc's hex notation.
pub fn classid(minor: u32) -> String {
    format!("{HTB_MAJOR:x}:{minor:x}")
}

/// The skb priority value that selects class `1:<minor>` (major in the upper 16 bits).
pub fn class_priority(minor: u32) -> u32 {
    (HTB_MAJOR << 16) | minor
}

/// An skb priority as nft and tc write it: "major:minor" in hex.
pub fn priority_text(p: u32) -> String {
    format!("{:x}:{:x}", p >> 16, p & 0xffff)
}

/// The shaper `link` puts on the egress of `host`'s interface `iface` toward `toward`, or
/// `None` when the link has no rate.
pub fn plan(link: &Link, host: &str, iface: &str, toward: &str) -> Option<ShaperLayout> {
    let rate = link.rate?;
    let mtu = link.mtu;
    let burst = burst_bytes(mtu, rate);
    let quantum = htb_quantum(mtu);
    let mut shaper = ShaperLayout {
        host: host.to_string(),
        iface: iface.to_string(),
        toward: toward.to_string(),
        kind: link.shaper,
        rate,
        burst,
        limit: None,
        classes: Vec::new(),
        default_class: None,
    };
    match link.shaper {
        ShaperKind::Tbf => shaper.limit = Some(tbf_limit_bytes(mtu, rate)),
        ShaperKind::Htb => {
            let class =
                |minor: u32, parent: String, role, rate: Rate, ceil: Rate, prio| HtbClassLayout {
                    classid: classid(minor),
                    parent,
                    role,
                    rate,
                    ceil,
                    prio,
                    burst: burst_bytes(mtu, ceil),
                    quantum,
                    skb_priority: None,
                    ip_len: None,
                };
            let root = classid(ROOT_MINOR);
            shaper.classes.push(class(
                ROOT_MINOR,
                format!("{HTB_MAJOR:x}:"),
                ClassRole::Root,
                rate,
                rate,
                None,
            ));
            // The default class keeps what the other classes do not reserve (at least 1%).
            let reserved: u64 = link
                .classes
                .iter()
                .map(|c| c.rate.bits_per_sec)
                .sum::<u64>()
                + link.shape_band.as_ref().map_or(0, |b| b.rate.bits_per_sec);
            let floor = (rate.bits_per_sec / 100).max(8);
            let default_rate =
                Rate::from_bits(rate.bits_per_sec.saturating_sub(reserved).max(floor));
            shaper.classes.push(class(
                DEFAULT_MINOR,
                root.clone(),
                ClassRole::Default,
                default_rate,
                rate,
                Some(7),
            ));
            shaper.default_class = Some(classid(DEFAULT_MINOR));
            if let Some(band) = &link.shape_band {
                let mut c = class(
                    BAND_MINOR,
                    root.clone(),
                    ClassRole::Band,
                    band.rate,
                    band.rate,
                    Some(7),
                );
                c.ip_len = Some((band.lo, band.hi));
                shaper.classes.push(c);
            }
            for (i, pc) in link.classes.iter().enumerate() {
                let mut c = class(
                    FIRST_PRIORITY_MINOR + i as u32,
                    root.clone(),
                    ClassRole::Priority,
                    pc.rate,
                    pc.ceil,
                    Some(pc.prio),
                );
                c.skb_priority = Some(pc.priority);
                shaper.classes.push(c);
            }
        }
    }
    Some(shaper)
}

/// The `tc` argument lists (after `tc -n <netns>`) that install `shaper`.
pub fn tc_commands(shaper: &ShaperLayout) -> Vec<Vec<String>> {
    let dev = shaper.iface.as_str();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    match shaper.kind {
        ShaperKind::Tbf => vec![s(&[
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            &shaper.rate.tc_arg(),
            "burst",
            &format!("{}b", shaper.burst),
            "limit",
            &format!("{}b", shaper.limit.unwrap_or(shaper.burst)),
        ])],
        ShaperKind::Htb => {
            let default_minor = shaper
                .default_class
                .as_deref()
                .and_then(|c| c.split(':').nth(1))
                .unwrap_or("2");
            let mut out = vec![s(&[
                "qdisc",
                "replace",
                "dev",
                dev,
                "root",
                "handle",
                &format!("{HTB_MAJOR:x}:"),
                "htb",
                "default",
                default_minor,
            ])];
            for c in &shaper.classes {
                let mut argv = s(&[
                    "class",
                    "add",
                    "dev",
                    dev,
                    "parent",
                    &c.parent,
                    "classid",
                    &c.classid,
                    "htb",
                    "rate",
                    &c.rate.tc_arg(),
                    "ceil",
                    &c.ceil.tc_arg(),
                    "burst",
                    &format!("{}b", c.burst),
                    "cburst",
                    &format!("{}b", c.burst),
                    "quantum",
                    &c.quantum.to_string(),
                ]);
                if let Some(p) = c.prio {
                    argv.push("prio".into());
                    argv.push(p.to_string());
                }
                out.push(argv);
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{Direction, PriorityClass, ShapeBand};

    fn link(mtu: u32, rate: &str, kind: ShaperKind) -> Link {
        Link {
            name: "a-b".into(),
            a: "a".into(),
            b: "b".into(),
            mtu,
            subnet: None,
            a_addr: None,
            b_addr: None,
            rate: Some(Rate::parse(rate).unwrap()),
            shaper: kind,
            direction: Direction::Both,
            offloads: Default::default(),
            classes: Vec::new(),
            loss: None,
            shape_band: None,
            emulate: None,
        }
    }

    #[test]
    fn burst_holds_at_least_four_full_frames() {
        // The failure seen here: MTU 9000 with a 4 KB burst carried nothing.
        let slow = Rate::parse("1mbit").unwrap();
        assert_eq!(burst_bytes(9000, slow), 4 * 9014);
        assert_eq!(burst_bytes(1500, slow), 4 * 1514);
        for mtu in [68, 1500, 9000, 65535] {
            for r in ["8bit", "64kbit", "100mbit", "10gbit"] {
                let b = burst_bytes(mtu, Rate::parse(r).unwrap());
                assert!(b >= frame_len(mtu), "mtu {mtu} rate {r}: burst {b}");
            }
        }
    }

    #[test]
    fn fast_links_get_a_millisecond_of_burst() {
        assert_eq!(burst_bytes(1500, Rate::parse("100mbit").unwrap()), 12_500);
        assert_eq!(burst_bytes(1500, Rate::parse("10gbit").unwrap()), 1_250_000);
    }

    #[test]
    fn tbf_limit_and_htb_quantum() {
        let r = Rate::parse("100mbit").unwrap();
        assert_eq!(tbf_limit_bytes(1500, r), 625_000);
        let slow = Rate::parse("64kbit").unwrap();
        assert_eq!(tbf_limit_bytes(9000, slow), 8 * 9014);
        assert_eq!(htb_quantum(1500), 1514);
        assert_eq!(htb_quantum(9000), 9014);
        assert!(tbf_limit_bytes(1500, Rate::parse("1000tbit").unwrap()) <= 64 << 20);
    }

    #[test]
    fn tbf_command() {
        let l = link(9000, "100mbit", ShaperKind::Tbf);
        let sh = plan(&l, "a", "nsw-0-b", "b").unwrap();
        assert_eq!(
            tc_commands(&sh),
            vec![[
                "qdisc",
                "replace",
                "dev",
                "nsw-0-b",
                "root",
                "tbf",
                "rate",
                "100000000bit",
                "burst",
                "36056b",
                "limit",
                "625000b"
            ]
            .map(String::from)
            .to_vec()]
        );
    }

    #[test]
    fn htb_classes_and_ids() {
        let mut l = link(1500, "100mbit", ShaperKind::Htb);
        l.classes = vec![PriorityClass {
            priority: 5,
            rate: Rate::parse("60mbit").unwrap(),
            ceil: Rate::parse("100mbit").unwrap(),
            prio: 1,
        }];
        l.shape_band = Some(ShapeBand {
            lo: 1000,
            hi: 1100,
            rate: Rate::parse("1mbit").unwrap(),
        });
        let sh = plan(&l, "a", "nsw-0-b", "b").unwrap();
        let ids: Vec<&str> = sh.classes.iter().map(|c| c.classid.as_str()).collect();
        assert_eq!(ids, ["1:1", "1:2", "1:3", "1:10"]);
        assert_eq!(
            sh.classes[1].rate.bits_per_sec, 39_000_000,
            "default keeps the rest"
        );
        assert_eq!(sh.classes[3].skb_priority, Some(5));
        assert_eq!(sh.classes[2].ip_len, Some((1000, 1100)));
        assert!(sh.classes.iter().all(|c| c.quantum == 1514));
        let cmds = tc_commands(&sh);
        assert_eq!(
            cmds[0].join(" "),
            "qdisc replace dev nsw-0-b root handle 1: htb default 2"
        );
        assert_eq!(
            cmds[4].join(" "),
            "class add dev nsw-0-b parent 1:1 classid 1:10 htb rate 60000000bit ceil 100000000bit burst 12500b cburst 12500b quantum 1514 prio 1"
        );
        assert_eq!(class_priority(0x10), 0x10010);
        assert_eq!(priority_text(0x10010), "1:10");
        assert_eq!(priority_text(5), "0:5");
    }

    #[test]
    fn no_rate_no_shaper() {
        let mut l = link(1500, "1mbit", ShaperKind::Tbf);
        l.rate = None;
        assert!(plan(&l, "a", "x", "b").is_none());
    }
}
