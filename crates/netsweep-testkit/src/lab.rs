//! Helpers for tests that build labs: a hard check that the test can build them (root and the
//! tools), and a machine-wide lock so lab tests (in any test binary of the workspace) never run
//! at once — `clean()` removes every `nsw-` object, so it must not race another test's lab.
//!
//! Lab tests are marked `#[ignore = "needs root (lab namespaces): ./run-tests runs it as
//! root"]`: without root the test harness reports them as *ignored*, honestly, and
//! `./run-tests` as root runs them with `--include-ignored`. Once a lab test runs, a missing
//! prerequisite is a failure that names the fix, never a silent pass.
//!
//! A lab test holds the lock exclusively, and a test that shares a test binary with lab tests
//! holds it shared ([`beside_lab_tests`]): under `--test-threads 2` nothing else of the suite
//! runs beside a lab test, whose rates must not depend on what else the machine is doing.
//! Ground-truth tests compare with the kernel's own counters over the same window
//! ([`link`]) and keep an arithmetic check only where the machine was idle enough ([`idle`]).

pub mod idle;
pub mod link;
pub mod stall;

use netsweep_lab::cmd;
use netsweep_lab::counters::parse_nft_counter;
use netsweep_lab::error::{LabError, Result};
use netsweep_lab::preflight::{is_root, missing_tools};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;

/// The lock file shared by every lab test on the machine.
pub const LOCK_FILE: &str = "/tmp/netsweep-lab-tests.lock";

/// What keeps this process from building labs, or None when it can.
pub fn lab_blocker() -> Option<String> {
    if !is_root() {
        return Some(
            "needs root to create network namespaces: run it as root \
             (`sudo ./run-tests`, or `sudo cargo test … -- --include-ignored`)"
                .into(),
        );
    }
    let missing = missing_tools();
    if !missing.is_empty() {
        return Some(format!(
            "missing {}: apt-get install iproute2 nftables ethtool (./run-tests does it)",
            missing.join(", ")
        ));
    }
    None
}

/// Panics, naming `test` and the fix, unless this process can build labs.
pub fn require_labs(test: &str) {
    if let Some(why) = lab_blocker() {
        panic!("lab test {test} cannot run: {why}");
    }
}

/// [`require_labs`], then the machine-wide lab test lock: the preamble of every lab test.
pub fn lab_test(test: &str) -> LabTestLock {
    require_labs(test);
    lock().unwrap_or_else(|e| panic!("lab test {test}: cannot take the lock {LOCK_FILE}: {e}"))
}

/// Holds the machine-wide lab test lock until dropped.
#[derive(Debug)]
pub struct LabTestLock {
    _file: File,
}

/// Takes the machine-wide lab test lock, waiting for other lab tests to finish.
pub fn lock() -> std::io::Result<LabTestLock> {
    flock(libc::LOCK_EX)
}

/// The lab test lock shared, held until dropped: the preamble of a test that shares a test
/// binary with lab tests, so that it never runs beside one (tests that hold it shared run
/// beside each other; a lab test waits for them, and they for it).
pub fn beside_lab_tests() -> LabTestLock {
    flock(libc::LOCK_SH).unwrap_or_else(|e| panic!("cannot take the lock {LOCK_FILE} shared: {e}"))
}

fn flock(how: libc::c_int) -> std::io::Result<LabTestLock> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_FILE)
        .or_else(|_| File::open(LOCK_FILE))?;
    // SAFETY: flock on an open descriptor; blocks until the lock is ours.
    while unsafe { libc::flock(file.as_raw_fd(), how) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(LabTestLock { _file: file })
}

/// The lab of most lab tests: hosts `client` and `server` and one link between them, its
/// settings the TOML `link` lines (`mtu = 1500`, `rate = "50mbit"`, …).
pub fn client_server(link: &str) -> netsweep_lab::Topology {
    let toml = format!(
        "[[hosts]]\nname = \"client\"\n[[hosts]]\nname = \"server\"\n[[links]]\na = \"client\"\nb = \"server\"\n{link}"
    );
    netsweep_lab::Topology::parse(&toml).unwrap_or_else(|e| panic!("{e}:\n{toml}"))
}

/// A run id unique to this test process and `tag` (≤ 24 characters).
pub fn run_id(tag: &str) -> String {
    let mut tag: String = tag
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(10)
        .collect();
    if tag.is_empty() {
        tag.push('t');
    }
    format!("{tag}{}", std::process::id() % 1_000_000)
}

/// nft match for netsweep's IPv4 UDP data datagrams: at least the 20-byte sequence header,
/// so never the 8-byte handshake cookie (whose resends would blur the count).
pub const UDP_DATA: &str = "ip protocol udp udp length >= 28";
/// nft match for the `packet` transport's client→server data frames (EtherType 0x88B5,
/// kind 1 in the byte after the session tag), never its hello frames.
pub const PACKET_DATA: &str = "ether type 0x88b5 @nh,32,8 1";

/// A known number of induced drops, an independent count to check reported loss against: an
/// nft `netdev` table in namespace `ns` that drops every `every`-th frame arriving on `iface`
/// that matches an nft expression, counting each drop. Deterministic (`numgen inc`), at
/// ingress (so the sender's `sendto()` never sees it), removed on drop.
#[derive(Debug)]
pub struct InducedDrops {
    ns: String,
    table: String,
}

impl InducedDrops {
    /// Installs the drop rule; `every` ≥ 2.
    pub fn install(ns: &str, iface: &str, matcher: &str, every: u32) -> Result<Self> {
        if every < 2 {
            return Err(LabError::Usage(format!(
                "induced drops: every = {every} would drop everything; use 2 or more"
            )));
        }
        let table = format!("nsw-drops-{iface}");
        let script = format!(
            "table netdev {table} {{\n\tcounter drops {{ }}\n\tchain ingress {{\n\t\t\
             type filter hook ingress device \"{iface}\" priority -500; policy accept;\n\t\t\
             {matcher} numgen inc mod {every} == {} counter name \"drops\" drop\n\t}}\n}}\n",
            every - 1
        );
        let args = ["netns", "exec", ns, &nft(), "-f", "-"].map(String::from);
        cmd::run(
            &format!("installing induced drops on {iface} in {ns}"),
            "ip",
            &args,
            Some(&script),
        )?;
        Ok(Self {
            ns: ns.to_string(),
            table,
        })
    }

    /// Frames dropped so far.
    pub fn dropped(&self) -> Result<u64> {
        self.dropped_with_bytes().map(|(p, _)| p)
    }

    /// Frames dropped so far and their bytes (from the network header on): with UDP GSO a
    /// dropped frame is a super-datagram of several datagrams, which its bytes count.
    pub fn dropped_with_bytes(&self) -> Result<(u64, u64)> {
        let args = [
            "netns",
            "exec",
            &self.ns,
            &nft(),
            "-j",
            "list",
            "counter",
            "netdev",
            &self.table,
            "drops",
        ]
        .map(String::from);
        let out = cmd::run("reading the induced-drop counter", "ip", &args, None)?;
        parse_nft_counter(&out).ok_or_else(|| {
            LabError::Usage(format!(
                "nft printed no counter drops in table netdev {} of {}",
                self.table, self.ns
            ))
        })
    }
}

impl Drop for InducedDrops {
    fn drop(&mut self) {
        let args = [
            "netns",
            "exec",
            &self.ns,
            &nft(),
            "delete",
            "table",
            "netdev",
            &self.table,
        ]
        .map(String::from);
        let _ = cmd::run("removing induced drops", "ip", &args, None);
    }
}

fn nft() -> String {
    cmd::find_tool("nft")
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "nft".into())
}

/// The kernel's UDP counters of namespace `ns` (`Udp:` of its /proc/net/snmp: InDatagrams,
/// RcvbufErrors, InErrors…): what the receiving stack itself dropped, independently of
/// netsweep.
pub fn udp_snmp(ns: &str) -> Result<BTreeMap<String, u64>> {
    let args = ["netns", "exec", ns, "cat", "/proc/net/snmp"].map(String::from);
    let text = cmd::run(
        &format!("reading /proc/net/snmp in {ns}"),
        "ip",
        &args,
        None,
    )?;
    parse_snmp(&text, "Udp:")
        .ok_or_else(|| LabError::Usage(format!("no Udp: lines in /proc/net/snmp of {ns}")))
}

/// Packets the interfaces of namespace `ns` dropped (rx_dropped + tx_dropped of `ip -s link`,
/// summed): a veth drops a frame it cannot hand to its peer (the receiving CPU's backlog full)
/// and counts it here, where no socket or protocol counter sees it.
pub fn link_drops(ns: &str) -> Result<u64> {
    let args = ["netns", "exec", ns, "ip", "-s", "-j", "link", "show"].map(String::from);
    let text = cmd::run(&format!("reading link stats in {ns}"), "ip", &args, None)?;
    let links: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| LabError::Usage(format!("ip -s -j link in {ns}: {e}")))?;
    Ok(links
        .as_array()
        .map(|a| {
            a.iter()
                .map(|l| {
                    let n = |k: &str, f: &str| l["stats64"][k][f].as_u64().unwrap_or(0);
                    n("rx", "dropped") + n("tx", "dropped")
                })
                .sum()
        })
        .unwrap_or(0))
}

/// Packets the host's CPUs dropped at a full input backlog (net.core.netdev_max_backlog):
/// the second column of /proc/net/softnet_stat, summed over CPUs. Host-wide, not per namespace.
pub fn backlog_drops() -> Result<u64> {
    let text = std::fs::read_to_string("/proc/net/softnet_stat")
        .map_err(|e| LabError::Usage(format!("/proc/net/softnet_stat: {e}")))?;
    Ok(text
        .lines()
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
        .sum())
}

/// The `proto` section (e.g. "Udp:") of /proc/net/snmp: a header line of names, then values.
pub fn parse_snmp(text: &str, proto: &str) -> Option<BTreeMap<String, u64>> {
    let mut lines = text.lines().filter(|l| l.starts_with(proto));
    let names = lines.next()?.split_whitespace().skip(1);
    let values = lines.next()?.split_whitespace().skip(1);
    Some(
        names
            .zip(values)
            .filter_map(|(n, v)| Some((n.to_string(), v.parse().ok()?)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_udp_section_of_snmp() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\nUdp: InDatagrams NoPorts InErrors \
                    OutDatagrams RcvbufErrors\nUdp: 10 2 3 7 3\nUdpLite: InDatagrams\nUdpLite: 0\n";
        let u = parse_snmp(text, "Udp:").unwrap();
        assert_eq!(u["InDatagrams"], 10);
        assert_eq!(u["RcvbufErrors"], 3);
        assert_eq!(u.len(), 5);
        assert!(parse_snmp(text, "Tcp:").is_none());
    }

    #[test]
    fn the_blocker_matches_the_machine() {
        match lab_blocker() {
            None => assert!(is_root() && missing_tools().is_empty()),
            Some(why) => {
                assert!(!is_root() || !missing_tools().is_empty());
                assert!(
                    why.contains("root") || why.contains("apt-get install"),
                    "{why}"
                );
            }
        }
    }
}
