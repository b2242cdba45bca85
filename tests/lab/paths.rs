//! Issue 4 in namespaces: SO_PRIORITY picks the htb class under competing load, the `packet`
//! transport runs beside udp across a 1500-byte link (seed 000), and a udp sweep across the
//! fragmentation boundary reports the extra loss of multi-fragment datagrams honestly.
//! Needs root: ignored without it, run by ./run-tests as root.

use crate::common::*;
use netsweep_lab::{Lab, Topology};
use netsweep_testkit::lab::{
    backlog_drops, lab_test, link_drops, run_id, udp_snmp, InducedDrops, PACKET_DATA, UDP_DATA,
};
use serde_json::Value;
use std::process::{Output, Stdio};

fn load(o: &Output, p: &std::path::Path) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

const CLASSES: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
rate = "50mbit"
[[links.classes]]
priority = 1
rate = "40mbit"
[[links.classes]]
priority = 2
rate = "5mbit"
ceil = "10mbit"
"#;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn priority_values_map_to_their_htb_classes_under_competing_load() {
    let _l = lab_test("priority_values_map_to_their_htb_classes");
    let lab = Lab::up(&Topology::parse(CLASSES).unwrap(), &run_id("prio")).unwrap();
    let addr = lab.address_for("client", "server").unwrap();
    let dir = scratch("prio");
    let common = [
        "-t",
        "udp",
        "-p",
        "stream",
        "--sizes",
        "1400",
        "--trial-time",
        "200ms",
        "--max-point-time",
        "1s",
        "--no-warmup",
    ];
    // Two streams at once, one per priority, competing for the 50 Mbit/s link.
    let (mut s1, mut s2) = (
        serve_in(&lab, "server", "0.0.0.0", 7201),
        serve_in(&lab, "server", "0.0.0.0", 7202),
    );
    let before = lab
        .class_stats(&lab.layout().links[0].name, "client")
        .unwrap();
    let ca = run_in(&lab, &format!("{addr}:7201"), &dir.join("p1.json"), &common)
        .args(["--priority", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cb = run_in(&lab, &format!("{addr}:7202"), &dir.join("p2.json"), &common)
        .args(["--priority", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (oa, ob) = (
        ca.wait_with_output().unwrap(),
        cb.wait_with_output().unwrap(),
    );
    let _ = (s1.kill(), s2.kill(), s1.wait(), s2.wait());
    let after = lab
        .class_stats(&lab.layout().links[0].name, "client")
        .unwrap();
    let va = load(&oa, &dir.join("p1.json"));
    let vb = load(&ob, &dir.join("p2.json"));
    assert_eq!(va["granted"]["client"]["priority"], 1);
    assert_eq!(vb["granted"]["client"]["priority"], 2);
    let grew = |id: &str| {
        let f = |v: &Vec<netsweep_lab::ClassStats>| {
            v.iter().find(|c| c.classid == id).map_or(0, |c| c.bytes)
        };
        f(&after) - f(&before)
    };
    // Classes are 1:10 (priority 1) and 1:11 (priority 2): each carried its run's bytes.
    let (sent1, sent2) = (
        va["points"][0]["client"]["bytes_sent"].as_u64().unwrap(),
        vb["points"][0]["client"]["bytes_sent"].as_u64().unwrap(),
    );
    assert!(
        grew("1:10") >= sent1,
        "class 1:10 carried {} bytes, run 1 sent {sent1}",
        grew("1:10")
    );
    assert!(
        grew("1:11") >= sent2,
        "class 1:11 carried {} bytes, run 2 sent {sent2}",
        grew("1:11")
    );
    // And the rates show the classes: priority 2 may borrow up to its 10 Mbit/s ceiling,
    // priority 1 gets its 40 Mbit/s and whatever else is free.
    let (r1, r2) = (
        va["points"][0]["receiver_mbps"]["mean"].as_f64().unwrap(),
        vb["points"][0]["receiver_mbps"]["mean"].as_f64().unwrap(),
    );
    assert!(
        r2 < 10.5 && r1 > 2.0 * r2,
        "priority 1 got {r1:.1} Mbit/s, priority 2 {r2:.1}"
    );
    lab.down().unwrap();
}

const LOSSY_1500: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
mtu = 1500
rate = "100mbit"
loss = { probability = 0.02, protocol = "udp", direction = "a-to-b" }
"#;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn udp_across_the_fragmentation_boundary_loses_per_fragment() {
    let _l = lab_test("udp_across_the_fragmentation_boundary");
    let lab = Lab::up(&Topology::parse(LOSSY_1500).unwrap(), &run_id("frag")).unwrap();
    let addr = lab.address_for("client", "server").unwrap();
    let mut s = serve_in(&lab, "server", "0.0.0.0", 7200);
    let out = scratch("frag").join("u.json");
    // 1472 B is one frame; 2952 B (+8 UDP = 2 × 1480) is exactly two fragments.
    let o = run_in(
        &lab,
        &format!("{addr}:7200"),
        &out,
        &[
            "-t",
            "udp",
            "-p",
            "stream",
            "--sizes",
            "1472,2952",
            "--trial-time",
            "300ms",
            "--max-point-time",
            "1s",
        ],
    )
    .output()
    .unwrap();
    let _ = (s.kill(), s.wait());
    let v = load(&o, &out);
    let ratio = |i: usize| v["points"][i]["loss"]["ratio"].as_f64().unwrap();
    let (one, two) = (ratio(0), ratio(1));
    // A datagram of two fragments is lost when either is: about 1 − 0.98² ≈ 4% vs 2%.
    assert!(one > 0.005 && one < 0.04, "1472 B: loss {one}");
    assert!(
        two > 1.4 * one,
        "2952 B loses about twice as often: {two} vs {one}"
    );
    // Where each lost datagram went, from the kernel's own counts: nft's loss rule dropped
    // fragments (one or two of a lost datagram), the client's qdisc may have dropped a
    // fragment when its queue was full, and the server's socket (netsweep reads its drop
    // count) a whole datagram when the server fell behind — rare on an idle machine, not on
    // a busy one. Every lost datagram is one of these, and no fragment is dropped twice.
    let link = lab.layout().links[0].name.clone();
    let (nft, _) = lab.loss_dropped(&link, "client").unwrap();
    let iface = lab.interface("client", &link).unwrap().to_string();
    let qdisc = qdisc_stat(&lab, "client", &iface, None, "drops");
    let t = &v["datagram_totals"];
    let lost = t["to_server_sent"].as_u64().unwrap() - t["to_server_received"].as_u64().unwrap();
    let socket = t["to_server_socket_drops"].as_u64().unwrap_or(0);
    let handshake = v["granted"]["client"]["handshake_datagrams"]
        .as_u64()
        .unwrap_or(1)
        - 1;
    // A datagram still in the shaper's queue (up to 50 ms) when a stalled receiver stops
    // waiting for its trial's stragglers (60 ms) counts lost there, and arrives in a later
    // trial as one not of its own: at most that many of the lost reached the server.
    let stragglers: u64 = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["loss"]["foreign"].as_u64().unwrap_or(0))
        .sum();
    let frames = nft + qdisc;
    let in_path = lost.saturating_sub(socket);
    let why = format!(
        "lost {lost} datagrams: nft dropped {nft} fragments, the qdisc {qdisc}, the server's \
         socket {socket} datagrams; {handshake} cookie resends, {stragglers} stragglers"
    );
    eprintln!("{why}");
    assert!(socket <= lost, "{why}");
    assert!(
        frames + stragglers >= in_path + handshake && frames <= 2 * in_path + handshake,
        "{why}"
    );
    lab.down().unwrap();
}

const PLAIN_1500: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
mtu = 1500
rate = "200mbit"
"#;

// Every lost frame is accounted for by a kernel counter: the induced nft drops, the receiving
// socket's own overflow (sk_drops, which netsweep reads per trial with SO_MEMINFO and reports as
// `to_server_socket_drops`; for UDP it must equal the namespace's RcvbufErrors, an independent
// count), and frames a veth dropped (its peer's backlog full). Packet frames start at 512
// bytes, a frame rate one receiving socket mostly drains at 200 Mbit/s (64-byte frames overflow
// it). Slower links are no option: their shallow tbf queue fails AF_PACKET sends with ENOBUFS.
#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn packet_and_udp_side_by_side_up_to_the_mtu() {
    let _l = lab_test("packet_and_udp_side_by_side_up_to_the_mtu");
    let lab = Lab::up(&Topology::parse(PLAIN_1500).unwrap(), &run_id("dlpi")).unwrap();
    let addr = lab.address_for("client", "server").unwrap();
    let dir = scratch("dlpi");
    let server_ns = lab.netns("server").unwrap().to_string();
    let client_ns = lab.netns("client").unwrap().to_string();
    let server_if = lab
        .interface("server", &lab.layout().links[0].name)
        .unwrap()
        .to_string();
    let mut rows = Vec::new();
    for (t, sizes, data) in [
        ("packet", "512,1492", PACKET_DATA),
        ("udp", "64,512,1472", UDP_DATA),
    ] {
        // Every 10th data frame is dropped on arrival and counted: the loss to expect.
        let drops = InducedDrops::install(&server_ns, &server_if, data, 10).unwrap();
        let snmp_before = udp_snmp(&server_ns).unwrap();
        let links_before = link_drops(&server_ns).unwrap() + link_drops(&client_ns).unwrap();
        let backlog_before = backlog_drops().unwrap();
        let mut s = serve_in(&lab, "server", "0.0.0.0", 7200);
        let out = dir.join(format!("{t}.json"));
        let o = run_in(
            &lab,
            &format!("{addr}:7200"),
            &out,
            &["-t", t, "-p", "stream", "--sizes", sizes],
        )
        .args(QUICK)
        .output()
        .unwrap();
        let _ = (s.kill(), s.wait());
        let v = load(&o, &out);
        let dropped = drops.dropped().unwrap();
        let snmp_after = udp_snmp(&server_ns).unwrap();
        let links =
            link_drops(&server_ns).unwrap() + link_drops(&client_ns).unwrap() - links_before;
        let backlog = backlog_drops().unwrap() - backlog_before;
        let totals = &v["datagram_totals"];
        // Datagrams (frames) the server's own socket dropped at a full buffer: also lost.
        let overflow = totals["to_server_socket_drops"].as_u64().unwrap_or(0);
        let rcvbuf = snmp_after["RcvbufErrors"] - snmp_before["RcvbufErrors"];
        if t == "udp" {
            assert_eq!(overflow, rcvbuf, "udp: socket drops vs RcvbufErrors");
        }
        let lost = totals["to_server_sent"].as_u64().unwrap()
            - totals["to_server_received"].as_u64().unwrap();
        assert!(dropped > 0, "{t}: the rule dropped nothing");
        assert_eq!(
            lost,
            dropped + overflow + links,
            "{t}: netsweep lost {lost}; nft dropped {dropped}, the receiving socket {overflow}, \
             the veths {links} (host backlog drops {backlog}, UDP RcvbufErrors {rcvbuf})"
        );
        let point_lost: u64 = v["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["loss"]["lost"].as_u64().unwrap())
            .sum();
        assert!(
            point_lost > 0 && point_lost <= lost,
            "{t}: timed trials lost {point_lost} of {lost}"
        );
        rows.push(v);
    }
    for v in &rows {
        for p in v["points"].as_array().unwrap() {
            assert!(p["sender_mbps"]["mean"].as_f64().unwrap() > 0.0);
            assert!(p["receiver_mbps"]["mean"].as_f64().unwrap() > 0.0);
        }
    }
    assert_eq!(rows[0]["spec"]["family"], "link");
    // One byte past the packet payload limit is refused, naming the MTU.
    let mut s = serve_in(&lab, "server", "0.0.0.0", 7200);
    let o = run_in(
        &lab,
        &format!("{addr}:7200"),
        &dir.join("x.json"),
        &["-t", "packet", "--sizes", "1493"],
    )
    .output()
    .unwrap();
    let _ = (s.kill(), s.wait());
    assert_ne!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("1500"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    lab.down().unwrap();
}

/// A namespace of its own, removed on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn crr_reports_ephemeral_port_exhaustion_instead_of_hanging() {
    let _l = lab_test("crr_reports_ephemeral_port_exhaustion");
    let ns = Netns(format!("nsw-{}", run_id("ports")));
    let sh = |args: &[&str]| {
        let o = std::process::Command::new("ip")
            .args(["netns", "exec", &ns.0])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    assert!(std::process::Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .unwrap()
        .success());
    sh(&["ip", "link", "set", "lo", "up"]);
    // 16 ephemeral ports and no TIME_WAIT reuse: the 17th connection has nowhere to come from.
    sh(&["sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40015"]);
    sh(&["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=0"]);
    let out = scratch("ports").join("crr.json");
    let t0 = std::time::Instant::now();
    let o = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0,
            bin(),
            "run",
            "-p",
            "crr",
            "--sizes",
            "1",
            "--no-save",
            "-q",
        ])
        .args(["-o", out.to_str().unwrap(), "--timeout", "5s"])
        .output()
        .unwrap();
    assert!(t0.elapsed() < std::time::Duration::from_secs(30), "no hang");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ephemeral ports") && err.contains("ip_local_port_range"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["status"], "failed");
    assert!(v["message"].as_str().unwrap().contains("ephemeral ports"));
}
