//! A network namespace's own counters, as text /proc gives them and as deltas: a chosen set of `/proc/net/snmp` and
//! `/proc/net/netstat` fields (IP fragments and reassembly, UDP buffer errors, TCP's receive
//! queue pruning and zero windows…), read before and after each timed trial on each side, so
//! a point can say where its datagrams were lost and whether they were fragmented — from the
//! kernel, independently of netsweep's own counting. The counters are the namespace's: they
//! include the control connection's few packets and any other traffic there.

use std::collections::BTreeMap;

/// The fields kept, as `Section.Name` (the section as /proc writes it, without the colon).
pub const FIELDS: &[&str] = &[
    "Ip.InReceives",
    "Ip.InDiscards",
    "Ip.OutRequests",
    "Ip.OutDiscards",
    "Ip.ForwDatagrams",
    "Ip.ReasmReqds",
    "Ip.ReasmOKs",
    "Ip.ReasmFails",
    "Ip.FragOKs",
    "Ip.FragFails",
    "Ip.FragCreates",
    "Udp.InDatagrams",
    "Udp.NoPorts",
    "Udp.InErrors",
    "Udp.OutDatagrams",
    "Udp.RcvbufErrors",
    "Udp.SndbufErrors",
    "Udp.InCsumErrors",
    "Tcp.InSegs",
    "Tcp.OutSegs",
    "Tcp.RetransSegs",
    "TcpExt.PruneCalled",
    "TcpExt.RcvPruned",
    "TcpExt.OfoPruned",
    "TcpExt.DelayedACKs",
    "TcpExt.TCPRcvCollapsed",
    "TcpExt.TCPBacklogDrop",
    "TcpExt.TCPRcvQDrop",
    "TcpExt.TCPZeroWindowDrop",
    "TcpExt.TCPToZeroWindowAdv",
    "TcpExt.TCPFromZeroWindowAdv",
    "TcpExt.TCPWantZeroWindowAdv",
    "TcpExt.TCPMemoryPressures",
    "TcpExt.TCPRcvCoalesce",
    "TcpExt.TCPOFOQueue",
    "TcpExt.TCPAutoCorking",
    "TcpExt.TCPOrigDataSent",
    "TcpExt.TCPPureAcks",
    "TcpExt.TCPHPHits",
    "IpExt.InOctets",
    "IpExt.OutOctets",
];

/// One reading of [`FIELDS`] (a field the kernel does not have reads as absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot(Vec<Option<u64>>);

/// The paths to read for the calling thread's namespace (`thread-self`: a thread that entered
/// another namespace reads that one's).
pub const PATHS: [&str; 2] = [
    "/proc/thread-self/net/snmp",
    "/proc/thread-self/net/netstat",
];

/// The fields of /proc's "Section: names" / "Section: values" line pairs.
pub fn parse(texts: &[&str]) -> Snapshot {
    let mut all: BTreeMap<String, u64> = BTreeMap::new();
    for text in texts {
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.chunks(2) {
            let [names, values] = pair else { continue };
            let (Some((sec, names)), Some((sec2, values))) =
                (names.split_once(':'), values.split_once(':'))
            else {
                continue;
            };
            if sec != sec2 {
                continue;
            }
            for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
                if let Ok(v) = v.parse::<u64>() {
                    all.insert(format!("{sec}.{n}"), v);
                }
            }
        }
    }
    Snapshot(FIELDS.iter().map(|f| all.get(*f).copied()).collect())
}

impl Snapshot {
    /// True when no field was read.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }

    /// The fields that grew since `before`, by how much (the ones that did not are left out).
    pub fn since(&self, before: &Snapshot) -> BTreeMap<String, u64> {
        FIELDS
            .iter()
            .zip(self.0.iter().zip(&before.0))
            .filter_map(|(name, (now, was))| {
                let d = (*now)?.checked_sub((*was)?)?;
                (d > 0).then(|| (name.to_string(), d))
            })
            .collect()
    }
}

/// Adds `b`'s counts into `a`, keeping only [`FIELDS`] (a peer's map is bounded by them).
pub fn add(a: &mut BTreeMap<String, u64>, b: &BTreeMap<String, u64>) {
    for (k, v) in b {
        if FIELDS.contains(&k.as_str()) {
            *a.entry(k.clone()).or_insert(0) += v;
        }
    }
}

/// A point's kernel counters on one side, one count per [`FIELDS`] entry: a fixed array, so
/// the totals that hold it stay `Copy`; written as a map of the counts that are not zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelCounts([u64; FIELDS.len()]);

impl Default for KernelCounts {
    fn default() -> Self {
        KernelCounts([0; FIELDS.len()])
    }
}

impl KernelCounts {
    /// The count of `field` (`Ip.FragCreates`), 0 when absent or unknown.
    pub fn get(&self, field: &str) -> u64 {
        FIELDS
            .iter()
            .position(|f| *f == field)
            .map_or(0, |i| self.0[i])
    }

    /// True when every count is zero.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|v| *v == 0)
    }

    /// The counts of a map of deltas (names outside [`FIELDS`] are ignored).
    pub fn from_map(m: &BTreeMap<String, u64>) -> Self {
        let mut k = KernelCounts::default();
        for (i, f) in FIELDS.iter().enumerate() {
            k.0[i] = m.get(*f).copied().unwrap_or(0);
        }
        k
    }

    /// The counts that are not zero, by name.
    pub fn to_map(&self) -> BTreeMap<String, u64> {
        FIELDS
            .iter()
            .zip(self.0)
            .filter(|(_, v)| *v > 0)
            .map(|(f, v)| (f.to_string(), v))
            .collect()
    }
}

impl serde::Serialize for KernelCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for KernelCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<String, u64>::deserialize(d)?;
        Ok(KernelCounts::from_map(&m))
    }
}

impl schemars::JsonSchema for KernelCounts {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "KernelCounts".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <BTreeMap<String, u64>>::json_schema(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL InReceives ReasmReqds FragCreates\n\
                        Ip: 1 64 100 0 7\n\
                        Udp: InDatagrams RcvbufErrors\n\
                        Udp: 50 3\n";

    #[test]
    fn deltas_keep_the_fields_that_grew() {
        let a = parse(&[SNMP]);
        let b = parse(&[&SNMP.replace("1 64 100 0 7", "1 64 130 0 9")]);
        let d = b.since(&a);
        assert_eq!(d.get("Ip.InReceives"), Some(&30));
        assert_eq!(d.get("Ip.FragCreates"), Some(&2));
        assert!(!d.contains_key("Udp.InDatagrams"));
        assert!(!d.contains_key("Ip.Forwarding"), "not a kept field");
        let mut sum = d.clone();
        let mut foreign = BTreeMap::new();
        foreign.insert("Evil.Field".to_string(), 1u64);
        foreign.insert("Ip.FragCreates".to_string(), 1u64);
        add(&mut sum, &foreign);
        assert_eq!(sum.get("Ip.FragCreates"), Some(&3));
        assert!(!sum.contains_key("Evil.Field"));
        let k = KernelCounts::from_map(&sum);
        assert_eq!(k.get("Ip.FragCreates"), 3);
        let text = serde_json::to_string(&k).unwrap();
        assert_eq!(serde_json::from_str::<KernelCounts>(&text).unwrap(), k);
    }
}
