//! Ground-truth counters: the nft loss counters (packets and bytes dropped) and htb class
//! statistics (`tc -s class show`: bytes, packets, drops per class id).

use crate::cmd;
use crate::error::{LabError, Result};
use crate::lab::Lab;
use crate::names::NFT_TABLE;
use serde::{Deserialize, Serialize};

/// What one loss rule dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossCount {
    /// Sending host.
    pub from: String,
    /// Receiving host (where packets were dropped).
    pub to: String,
    /// Configured drop probability.
    pub probability: f64,
    /// Packets dropped.
    pub packets: u64,
    /// Bytes dropped (IP packets, without link-layer header).
    pub bytes: u64,
}

/// Statistics of one tc class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassStats {
    /// Class id, e.g. "1:10".
    pub classid: String,
    /// Bytes sent through it.
    pub bytes: u64,
    /// Packets sent through it.
    pub packets: u64,
    /// Packets it dropped.
    pub drops: u64,
    /// Times it was over its limit.
    pub overlimits: u64,
}

/// Reads the named nft counter `counter` of table `inet nsw-lab` in namespace `ns`:
/// (packets, bytes).
pub fn nft_counter(ns: &str, counter: &str) -> Result<(u64, u64)> {
    let nft = cmd::find_tool("nft")
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "nft".into());
    let out = cmd::run(
        &format!("reading nft counter {counter} in {ns}"),
        "ip",
        &[
            "netns".into(),
            "exec".into(),
            ns.into(),
            nft,
            "-j".into(),
            "list".into(),
            "counter".into(),
            "inet".into(),
            NFT_TABLE.into(),
            counter.into(),
        ],
        None,
    )?;
    parse_nft_counter(&out).ok_or_else(|| {
        LabError::Usage(format!(
            "nft printed no counter {counter} in {ns}: is the lab still up?"
        ))
    })
}

/// (packets, bytes) from `nft -j list counter …` output.
pub fn parse_nft_counter(json: &str) -> Option<(u64, u64)> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get("nftables")?.as_array()?.iter().find_map(|e| {
        let c = e.get("counter")?;
        Some((c.get("packets")?.as_u64()?, c.get("bytes")?.as_u64()?))
    })
}

/// Class statistics of interface `iface` in namespace `ns`.
pub fn class_stats(ns: &str, iface: &str) -> Result<Vec<ClassStats>> {
    let out = cmd::run(
        &format!("reading class statistics of {iface} in {ns}"),
        "tc",
        &[
            "-n".into(),
            ns.into(),
            "-s".into(),
            "-j".into(),
            "class".into(),
            "show".into(),
            "dev".into(),
            iface.into(),
        ],
        None,
    )?;
    Ok(parse_class_stats(&out))
}

/// Parses `tc -s -j class show`: JSON where this tc prints JSON for the qdisc's classes,
/// else its text form (iproute2 6.1 prints htb classes as text even with `-j`).
pub fn parse_class_stats(out: &str) -> Vec<ClassStats> {
    if let Ok(serde_json::Value::Array(a)) = serde_json::from_str::<serde_json::Value>(out) {
        return a
            .iter()
            .filter_map(|c| {
                let num = |k: &str| c.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
                Some(ClassStats {
                    classid: c.get("handle")?.as_str()?.to_string(),
                    bytes: num("bytes"),
                    packets: num("packets"),
                    drops: num("drops"),
                    overlimits: num("overlimits"),
                })
            })
            .collect();
    }
    let mut classes: Vec<ClassStats> = Vec::new();
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"class") && words.len() >= 3 {
            classes.push(ClassStats {
                classid: words[2].to_string(),
                ..ClassStats::default()
            });
        } else if words.first() == Some(&"Sent") {
            let Some(c) = classes.last_mut() else {
                continue;
            };
            // Sent 1234 bytes 5 pkt (dropped 0, overlimits 0 requeues 0)
            let after = |key: &str| -> u64 {
                words
                    .iter()
                    .position(|w| *w == key)
                    .and_then(|i| words.get(i + 1))
                    .map(|w| w.trim_end_matches([',', ')']))
                    .and_then(|w| w.parse().ok())
                    .unwrap_or(0)
            };
            c.bytes = after("Sent");
            c.packets = words
                .iter()
                .position(|w| *w == "bytes")
                .and_then(|i| words.get(i + 1))
                .and_then(|w| w.parse().ok())
                .unwrap_or(0);
            c.drops = after("(dropped");
            c.overlimits = after("overlimits");
        }
    }
    classes
}

impl Lab {
    /// What the loss rules of link `link` dropped so far, one entry per lossy direction.
    pub fn loss_counters(&self, link: &str) -> Result<Vec<LossCount>> {
        let l = self
            .layout()
            .link(link)
            .ok_or_else(|| LabError::Usage(format!("no link called \"{link}\" in this lab")))?;
        let mut out = Vec::new();
        for rule in &l.loss {
            let (packets, bytes) = nft_counter(self.netns(&rule.to)?, &rule.counter)?;
            out.push(LossCount {
                from: rule.from.clone(),
                to: rule.to.clone(),
                probability: rule.probability,
                packets,
                bytes,
            });
        }
        Ok(out)
    }

    /// Packets and bytes that link `link`'s loss rule dropped on the way from `from` (zero
    /// when that direction has no loss rule).
    pub fn loss_dropped(&self, link: &str, from: &str) -> Result<(u64, u64)> {
        let counts = self.loss_counters(link)?;
        Ok(counts
            .iter()
            .filter(|c| c.from == from)
            .fold((0, 0), |(p, b), c| (p + c.packets, b + c.bytes)))
    }

    /// htb/tbf class statistics of `host`'s interface on link `link`.
    pub fn class_stats(&self, link: &str, host: &str) -> Result<Vec<ClassStats>> {
        let iface = self.interface(host, link)?.to_string();
        class_stats(self.netns(host)?, &iface)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nft_counter_json() {
        let j = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}}, {"counter": {"family": "inet", "name": "loss_0_ab", "table": "nsw-lab", "handle": 3, "packets": 12, "bytes": 3456}}]}"#;
        assert_eq!(parse_nft_counter(j), Some((12, 3456)));
        assert_eq!(parse_nft_counter("nonsense"), None);
    }

    #[test]
    fn parses_htb_text() {
        let t = "class htb 1:1 root rate 100Mbit ceil 100Mbit burst 12500b cburst 12500b \n Sent 15140 bytes 10 pkt (dropped 2, overlimits 7 requeues 0) \n backlog 0b 0p requeues 0\n lended: 0 borrowed: 0 giants: 0\n\nclass htb 1:10 parent 1:1 prio 0 rate 1Mbit ceil 1Mbit burst 6056b cburst 6056b \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n";
        let c = parse_class_stats(t);
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0],
            ClassStats {
                classid: "1:1".into(),
                bytes: 15140,
                packets: 10,
                drops: 2,
                overlimits: 7
            }
        );
        assert_eq!(c[1].classid, "1:10");
        assert_eq!(c[1].packets, 0);
    }

    #[test]
    fn parses_class_json() {
        let j = r#"[{"class":"htb","handle":"1:10","parent":"1:1","bytes":100,"packets":2,"drops":1,"overlimits":0}]"#;
        let c = parse_class_stats(j);
        assert_eq!(c[0].classid, "1:10");
        assert_eq!((c[0].bytes, c[0].packets, c[0].drops), (100, 2, 1));
    }
}
