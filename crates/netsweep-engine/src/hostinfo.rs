//! Facts about the local host recorded in every results file: kernel, CPU, interfaces, sysctls.

use netsweep_proto::messages::{HostInfo, InterfaceInfo};
use netsweep_tool as tool;
use std::collections::BTreeMap;
use std::fs;

/// Sysctls that change what a run measures.
const SYSCTLS: &[&str] = &[
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_available_congestion_control",
    "net/core/rmem_default",
    "net/core/rmem_max",
    "net/core/wmem_default",
    "net/core/wmem_max",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/udp_mem",
    "net/ipv4/tcp_timestamps",
    "net/ipv4/tcp_sack",
    "net/ipv4/tcp_autocorking",
    "net/core/busy_poll",
    "net/core/busy_read",
    "net/core/netdev_max_backlog",
    "net/ipv4/ip_local_port_range",
];

/// Collects this host's metadata. `tool_version` is the calling binary's version.
pub fn collect(tool_version: &str) -> HostInfo {
    HostInfo {
        tool: "netsweep".into(),
        tool_version: tool_version.into(),
        hostname: read_trim("/proc/sys/kernel/hostname"),
        boot_id: read_trim("/proc/sys/kernel/random/boot_id"),
        kernel: kernel(),
        cpu_model: cpu_model(),
        cpu_count: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        interfaces: interfaces(),
        sysctls: sysctls(),
    }
}

/// What a server tells a client that did not authenticate, when its operator keeps the
/// host's facts to itself (`serve` without `--allow host-facts`): the tool and how many CPUs
/// it may use, nothing that names or maps the host.
pub fn withheld(tool_version: &str) -> HostInfo {
    HostInfo {
        tool: "netsweep".into(),
        tool_version: tool_version.into(),
        cpu_count: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        ..HostInfo::default()
    }
}

fn read_trim(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn kernel() -> String {
    let release = read_trim("/proc/sys/kernel/osrelease");
    let version = read_trim("/proc/sys/kernel/version");
    format!("Linux {release} {version}").trim().to_string()
}

fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default()
}

fn sysctls() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for name in SYSCTLS {
        let v = read_trim(&format!("/proc/sys/{name}"));
        if !v.is_empty() {
            m.insert(
                name.replace('/', "."),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            );
        }
    }
    let cs = read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    if !cs.is_empty() {
        m.insert("clocksource".into(), cs);
    }
    m
}

/// Interfaces from /sys/class/net, with addresses from `ip -j addr` and qdiscs from `tc`
/// when those tools exist (the fields stay empty otherwise).
fn interfaces() -> Vec<InterfaceInfo> {
    let Ok(dir) = fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let addrs = ip_addresses();
    let qdiscs = qdiscs();
    // Once ethtool hangs it is not asked again for the other interfaces.
    let mut ethtool_hung = false;
    names
        .into_iter()
        .map(|name| InterfaceInfo {
            mtu: read_trim(&format!("/sys/class/net/{name}/mtu"))
                .parse()
                .unwrap_or(0),
            addresses: addrs.get(&name).cloned().unwrap_or_default(),
            qdisc: qdiscs.get(&name).cloned(),
            offloads: offloads(&name, &mut ethtool_hung),
            name,
        })
        .collect()
}

fn run_json(cmd: &str, args: &[&str]) -> Option<serde_json::Value> {
    serde_json::from_str(&tool::query(cmd, args)?).ok()
}

fn ip_addresses() -> BTreeMap<String, Vec<String>> {
    let mut m = BTreeMap::new();
    let Some(serde_json::Value::Array(ifs)) = run_json("ip", &["-j", "addr", "show"]) else {
        return m;
    };
    for i in ifs {
        let name = i["ifname"].as_str().unwrap_or_default().to_string();
        let list = i["addr_info"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| {
                        Some(format!(
                            "{}/{}",
                            x["local"].as_str()?,
                            x["prefixlen"].as_u64()?
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        m.insert(name, list);
    }
    m
}

fn qdiscs() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let Some(serde_json::Value::Array(qs)) = run_json("tc", &["-j", "qdisc", "show"]) else {
        return m;
    };
    for q in qs {
        if q["root"].as_bool() == Some(true) || q["parent"].is_null() {
            if let (Some(dev), Some(kind)) = (q["dev"].as_str(), q["kind"].as_str()) {
                m.entry(dev.to_string()).or_insert_with(|| kind.to_string());
            }
        }
    }
    m
}

/// The offloads that change what a measurement means, from `ethtool -k`.
fn offloads(dev: &str, hung: &mut bool) -> BTreeMap<String, bool> {
    const KEEP: &[&str] = &[
        "rx-checksumming",
        "tx-checksumming",
        "scatter-gather",
        "tcp-segmentation-offload",
        "generic-segmentation-offload",
        "generic-receive-offload",
        "large-receive-offload",
    ];
    let mut m = BTreeMap::new();
    if *hung {
        return m;
    }
    let out = match tool::output("ethtool", &["-k", dev], None, tool::QUERY_TIMEOUT) {
        Ok(out) => out,
        Err(e) => {
            *hung = matches!(e, tool::ToolError::Timeout { .. });
            return m;
        }
    };
    for line in out.stdout.lines() {
        if let Some((k, v)) = line.trim().split_once(':') {
            if KEEP.contains(&k) {
                m.insert(k.to_string(), v.trim().starts_with("on"));
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    #[test]
    fn collects_basic_facts() {
        let h = super::collect("9.9.9");
        assert_eq!(h.tool_version, "9.9.9");
        assert!(h.cpu_count >= 1);
        assert!(h.kernel.starts_with("Linux "));
        let lo = h
            .interfaces
            .iter()
            .find(|i| i.name == "lo")
            .expect("loopback listed");
        assert_eq!(lo.mtu, 65536);
    }
}
